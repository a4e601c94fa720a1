"""Logic-analyser recordings and every other source of R/B# counts, as one
:class:`~rbscope.analysis.measurement.Measurement`: the importers (VCD, sigrok) behind one table
of formats, the streaming classifier they feed, and the classified-pulse VCD exporter; and the
ONFI SDR bus decoder of recordings (:mod:`.onfi_bus`: commands, Read ID and parameter page
reads, for ``rbscope identify``)."""

from .classified import export_classified_vcd
from .sigrok import import_sr
from .sources import FORMATS, SourceOptionError, detect_format, open_measurement, open_source
from .stream import RecordingError, StreamClassifier, format_time, parse_time
from .vcd import import_vcd, write_vcd

__all__ = [
    "export_classified_vcd", "import_sr", "FORMATS", "SourceOptionError", "detect_format",
    "open_measurement", "open_source", "RecordingError", "StreamClassifier", "format_time",
    "parse_time", "import_vcd", "write_vcd",
]

"""From counts to write amplification: the measurement, SSD geometry, class-window presets, the
logical volume, the WA engine, the sequence classifier, calibration and the trained classifier;
the geometry a drive tells about itself (:mod:`.identify`) and its own NAND-write counters
(:mod:`.drive_counters`).

The entry point that takes a request and a source is :mod:`rbscope.analysis.pipeline`."""

# (The module, not its function of the same name: `from rbscope.analysis import calibrate as
# cal` is how the CLI, the pipeline and the reference SSD reach calibrate.overlap_correction.)
from . import calibrate
from .calibrate import Calibration, CalibrationError
from .geometry import Geometry, GeometryError, load_geometry, parse_geometry
from .labelled import LabelledError, LabelledPulses
from .logical import LogicalSourceError, LogicalVolume, parse_size
from .measurement import Measurement, MeasurementError, Probe, SeriesPoint
from .presets import CLASS_NAMES, DEFAULT_PRESET, PRESETS, Preset, PresetError
from .sequence import SequenceError, classify_measurement
from .trained import TrainedClassifier, TrainedError, train
from .wa import Interval, WAError, WAResult, compute_wa

__all__ = [
    "Calibration", "CalibrationError", "calibrate",
    "Geometry", "GeometryError", "load_geometry", "parse_geometry",
    "LabelledError", "LabelledPulses",
    "LogicalSourceError", "LogicalVolume", "parse_size",
    "Measurement", "MeasurementError", "Probe", "SeriesPoint",
    "CLASS_NAMES", "DEFAULT_PRESET", "PRESETS", "Preset", "PresetError",
    "SequenceError", "classify_measurement",
    "TrainedClassifier", "TrainedError", "train",
    "Interval", "WAError", "WAResult", "compute_wa",
]

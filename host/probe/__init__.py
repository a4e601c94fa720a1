"""Host-side geometry detection (``rbscope probe-geometry``): I/O patterns whose response times
show an SSD's page size, parallel units, write buffer, garbage-collection onset and erase unit,
against an NBD export or a block device.

* :mod:`rbscope.probe.target`: the targets (NBD client, ``O_DIRECT`` block device or file), the
  ``--destructive`` / ``--range`` guard and the mounted-device refusal;
* :mod:`rbscope.probe.detect`: the page-size and parallel-units detectors, :class:`Finding`;
* :mod:`rbscope.probe.write_buffer`: the write buffer's size;
* :mod:`rbscope.probe.gc_onset`: garbage-collection onset and the over-provisioning it implies;
* :mod:`rbscope.probe.erase_unit`: the erase unit, from the period of erase spikes;
* :mod:`rbscope.probe.pulses`: the findings beside the R/B# pulses of the same run;
* :mod:`rbscope.probe.run`: :func:`run_detectors`, the detectors of a :class:`ProbeRequest`;
* :mod:`rbscope.probe.guess`: the geometry guess as a TOML file ``rbscope analyze`` accepts.
"""

from .detect import (
    Finding,
    FindingsError,
    detect_page_size,
    detect_parallel_units,
    load_findings,
)
from .erase_unit import detect_erase_unit
from .gc_onset import detect_gc_onset
from .guess import guess_geometry, guess_toml
from .read_unit import detect_read_unit
from .run import DETECTORS, ProbeRequest, run_detectors
from .target import ProbeError, open_target, parse_range
from .write_buffer import detect_write_buffer

__all__ = ["Finding", "FindingsError", "load_findings", "detect_page_size",
           "detect_parallel_units", "detect_gc_onset", "detect_write_buffer",
           "detect_erase_unit", "detect_read_unit", "guess_geometry", "guess_toml",
           "DETECTORS", "ProbeRequest", "run_detectors", "ProbeError", "open_target", "parse_range"]

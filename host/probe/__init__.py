"""Host-side geometry detection (``rbscope probe-geometry``): I/O patterns whose response times
show an SSD's page size and parallel units, against an NBD export or a block device.

* :mod:`rbscope.probe.target`: the targets (NBD client, ``O_DIRECT`` block device or file), the
  ``--destructive`` / ``--range`` guard and the mounted-device refusal;
* :mod:`rbscope.probe.detect`: the detectors;
* :mod:`rbscope.probe.guess`: the geometry guess as a TOML file ``rbscope analyze`` accepts.
"""

from .detect import Finding, detect_page_size, detect_parallel_units
from .guess import guess_geometry, guess_toml
from .target import ProbeError, open_target, parse_range

__all__ = ["Finding", "detect_page_size", "detect_parallel_units", "guess_geometry",
           "guess_toml", "ProbeError", "open_target", "parse_range"]

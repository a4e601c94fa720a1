"""The virtual SSD: the reference SSD taking host requests online, served as a block device.

* :mod:`rbscope.vssd.engine`: :class:`Engine`, the reference SSD's FTL and timing model run one
  request at a time, each with its completion time; sparse data; the R/B# recording and the
  FTL's true counts.
* :mod:`rbscope.vssd.target`: :class:`EngineTarget`, the engine as a target of the host-side
  detectors (:mod:`rbscope.probe`), timed on the model's clock (tests, benchmarks).

Only the command line (``rbscope vssd``, ``rbscope probe-geometry``), the tests and the
benchmarks import this package.
"""

from .engine import FLUSH, HOST_MB_S, READ, SECTOR, TRIM, WRITE, Completion, Engine
from .target import EngineTarget

__all__ = ["Engine", "EngineTarget", "Completion", "HOST_MB_S", "SECTOR", "READ", "WRITE", "TRIM",
           "FLUSH"]

"""The virtual SSD: the reference SSD taking host requests online, served as a block device.

* :mod:`rbscope.vssd.engine`: :class:`Engine`, the reference SSD's FTL and timing model run one
  request at a time, each with its completion time; sparse data; the R/B# recording and the
  FTL's true counts.

Only the command line (``rbscope vssd``, ``rbscope probe-geometry``) imports this package.
"""

from .engine import FLUSH, HOST_MB_S, READ, SECTOR, TRIM, WRITE, Completion, Engine

__all__ = ["Engine", "Completion", "HOST_MB_S", "SECTOR", "READ", "WRITE", "TRIM", "FLUSH"]

"""Write the generated Verilog of each top-level design to a directory.

Usage: ``python -m rbscope.gateware.export [OUTDIR]`` (default ``build/``).
"""

import sys
from pathlib import Path

from amaranth.back import verilog

from .rb_sniffer import RBSniffer, SnifferParams

__all__ = ["sniffer_verilog", "write_all"]


def sniffer_verilog(params, name="rb_sniffer"):
    """Return the Verilog text of an :class:`RBSniffer` built with ``params``."""
    return verilog.convert(RBSniffer(params), name=name, emit_src=False)


def write_all(outdir, channels=16, classes=5):
    """Write every top-level design to ``outdir``; return the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    params = SnifferParams(channels=channels, classes=classes)
    path = outdir / f"rb_sniffer_{channels}ch.v"
    path.write_text(sniffer_verilog(params))
    return [path]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    outdir = argv[0] if argv else "build"
    for path in write_all(outdir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

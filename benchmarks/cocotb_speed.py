"""Simulation speed of the sniffer's Verilog under cocotb: cocotb's Clock vs the clock wrapper.

For each simulator and channel count, replays the same random NAND workload into the sniffer
(``benchmarks/cocotb_speed_tb.py``, which also checks every counter and bin against the model)
and reports simulated clock cycles per wall-clock second while the pins are being replayed:

* ``cocotb-clock``: cocotb's ``Clock`` drives ``clk`` (the Python side runs every half cycle);
  Verilator as cocotb builds it by default (``--public-flat-rw``, ``-Os``).
* ``wrapper``: the top is ``rbscope verilog --clock-wrapper`` (clock made in Verilog, Python
  wakes only at pin changes); Verilator with ``--timing`` and ``-O2``, every signal public.
* ``wrapper+ports``: the same with only the top's ports reachable from cocotb (Verilator
  ``--no-public-flat-rw --public-depth 1``): what ``rbscope.cocotb.build.simulate`` does.

Usage: ``python benchmarks/cocotb_speed.py [--cycles N] [--channels 4 16] [--simulators ...]``
"""

import argparse
import json
import os
import sys
import tempfile
from datetime import date
from pathlib import Path

from rbscope.cocotb import build
from rbscope.gateware.export import write_top
from rbscope.gateware.rb_sniffer import SnifferParams

HERE = Path(__file__).resolve().parent


def measure(simulator, channels, wrapped, cycles, workdir, restricted=False):
    clock = ("wrapper+ports" if restricted else "wrapper") if wrapped else "cocotb-clock"
    tag = f"{simulator}-{channels}ch-{clock}"
    paths = write_top("sniffer", workdir / "hdl" / f"{channels}ch",
                      sniffer=SnifferParams(channels=channels), wrapper_ns=10)
    sources = paths if wrapped else paths[:1]
    top = "rb_sniffer_clocked" if wrapped else "rb_sniffer"
    report = workdir / f"{tag}.json"
    saved = build.VERILATOR_MAKE.copy()
    if not wrapped:  # the default make settings: -Os, and no C++20 (no --timing needed)
        build.VERILATOR_MAKE.clear()
    try:
        build.simulate(sources, top, "cocotb_speed_tb", simulator=simulator,
                       build_dir=workdir / "build" / tag, wrapper=wrapped,
                       restricted=restricted, python_path=[HERE],
                       extra_env={"RBSCOPE_SPEED": json.dumps({
                           "channels": channels, "cycles": cycles, "wrapped": wrapped,
                           "report": str(report)})})
    finally:
        build.VERILATOR_MAKE.update(saved)
    data = json.loads(report.read_text())
    return {"simulator": simulator, "channels": channels,
            "clock": clock, "cycles": data["cycles"],
            "seconds": data["seconds"], "cycles_per_second": data["cycles"] / data["seconds"],
            "pulses": data["pulses"]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=200_000)
    p.add_argument("--channels", type=int, nargs="+", default=[4, 16])
    p.add_argument("--simulators", nargs="+", default=["verilator", "icarus"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for sim in args.simulators:
            for ch in args.channels:
                variants = [(False, False), (True, False)]
                if sim == "verilator":
                    variants.append((True, True))
                for wrapped, restricted in variants:
                    rows.append(measure(sim, ch, wrapped, args.cycles, Path(tmp), restricted))
                    print(json.dumps(rows[-1]), file=sys.stderr)
    if args.json:
        print(json.dumps({"date": str(date.today()), "rows": rows}, indent=1))
    else:
        print("| simulator | channels | clock | cycles/s | seconds |\n|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['simulator']} | {r['channels']} | {r['clock']} | "
                  f"{r['cycles_per_second']:,.0f} | {r['seconds']:.2f} |")
    return 0


if __name__ == "__main__":
    os.environ.pop("MAKEFLAGS", None)
    sys.exit(main())

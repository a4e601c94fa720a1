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

``--build-cache``: instead, the wall time of the Verilator build (``wrapper+ports``) of a
``--channels`` sniffer without ccache (``RBSCOPE_NO_CCACHE=1``), with an empty ccache, with the
runtime's objects in the cache (a sniffer one channel wider built just before) and with the
same design in the cache (built again in a new directory); each build then runs a short replay,
which checks it.

Usage: ``python benchmarks/cocotb_speed.py [--cycles N] [--channels 4 16] [--simulators ...]
[--build-cache]``
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


def build_cache(channels, cycles, workdir):
    """The Verilator build's wall time of a ``channels`` sniffer with and without ccache: a
    row per condition, in this order, one cache directory throughout, empty at the start."""
    conditions = [("no ccache", channels, True),
                  ("ccache, empty cache (a sniffer one channel wider)", channels + 1, False),
                  ("ccache, the runtime's objects cached", channels, False),
                  ("ccache, the design cached too (built again)", channels, False)]
    rows = []
    saved = {k: os.environ.get(k) for k in ("RBSCOPE_NO_CCACHE", "CCACHE_DIR")}
    try:
        os.environ["CCACHE_DIR"] = str(workdir / "ccache")
        for i, (what, ch, off) in enumerate(conditions):
            os.environ.pop("RBSCOPE_NO_CCACHE", None)
            if off:
                os.environ["RBSCOPE_NO_CCACHE"] = "1"
            run = workdir / f"b{i}"
            measure("verilator", ch, True, cycles, run, restricted=True)
            record = json.loads(next((run / "build").glob("*/rbscope-build.json")).read_text())
            rows.append({"condition": what, "channels": ch,
                         "build_seconds": record["build_seconds"],
                         "ccache": "OBJCACHE=ccache" in record["MAKEFLAGS"]})
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=200_000)
    p.add_argument("--channels", type=int, nargs="+", default=[4, 16])
    p.add_argument("--simulators", nargs="+", default=["verilator", "icarus"])
    p.add_argument("--json", action="store_true")
    p.add_argument("--build-cache", action="store_true",
                   help="time the Verilator build with and without ccache instead")
    args = p.parse_args(argv)
    if args.build_cache:
        with tempfile.TemporaryDirectory() as tmp:
            rows = build_cache(max(args.channels), args.cycles, Path(tmp))
        print(json.dumps({"date": str(date.today()), "rows": rows}, indent=1) if args.json else
              "| build | channels | ccache | seconds |\n|---|---|---|---|\n" + "\n".join(
                  f"| {r['condition']} | {r['channels']} | {r['ccache']} | "
                  f"{r['build_seconds']:.1f} |" for r in rows))
        return 0
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

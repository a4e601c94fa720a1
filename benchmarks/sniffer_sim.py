"""Benchmark the sniffer gateware in simulation: speed on Verilator vs Icarus, exactness at load.

Runs the cocotb bench of ``cocotb_tests/sniffer_bench.py`` (which checks every counter and
histogram bin against the reference model) and reports:

* simulated clock cycles per wall-clock second of the 16-channel sniffer while its pins are being
  driven by a random NAND workload, on each simulator, and their ratio from the same run;
* the worst case of the specification — every channel pulsing 1 µs low / 1 µs high at once, at
  48 MHz with 16 channels and at 100 MHz with 64 channels — with the number of pulses checked and
  the number dropped (must be 0).

Usage: ``python benchmarks/sniffer_sim.py [--cycles N] [--pulses N] [--json]``
"""

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cocotb_tests.runner import run_bench  # noqa: E402
from rbscope.gateware.rb_sniffer import Counter, RBSniffer, SnifferParams  # noqa: E402

WINDOWS = [[3, 12], [12, 120], [120, 2400], [2400, 5000]]


def run(simulator, params, config, scenario, cycles, tag):
    design = SnifferParams(**params)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        result = run_bench(lambda: RBSniffer(design), "rb_sniffer", "sniffer_bench", simulator,
                           ROOT / "build" / "bench" / f"{tag}_{simulator}",
                           params={"params": params, "config": config, "scenario": scenario,
                                   "cycles": cycles, "report": str(report)})
        data = json.loads(report.read_text())
    data["build_seconds"] = result.build_seconds
    data["rebuilt"] = result.rebuilt
    return data


def speed(args):
    out = {}
    for sim in ("verilator", "icarus"):
        data = run(sim, {"channels": 16},
                   {"prescaler": 1, "glitch_ticks": 3, "windows": WINDOWS, "idle_ticks": 50},
                   {"kind": "random", "seed": 3,
                    "spec": {"glitch_rate": 0.15, "gap": [40, 400]}},
                   args.cycles, "speed16")
        out[sim] = {"cycles": data["cycles"], "seconds": data["play_seconds"],
                    "cycles_per_second": data["cycles"] / data["play_seconds"],
                    "pulses": data["pulses"]}
    out["ratio_verilator_over_icarus"] = (out["verilator"]["cycles_per_second"]
                                          / out["icarus"]["cycles_per_second"])
    return out


def worst_case(args, channels, clock_mhz, simulator):
    cycles_per_us = clock_mhz
    data = run(simulator, {"channels": channels},
               {"prescaler": 1, "glitch_ticks": 1,
                "windows": [[cycles_per_us - 10, cycles_per_us + 10]], "idle_ticks": 1000},
               {"kind": "worst_case", "low": cycles_per_us, "high": cycles_per_us,
                "pulses": args.pulses},
               0, f"worst{channels}")
    params = SnifferParams(channels=channels)
    dropped = sum(r[params.counter_index(Counter.DROPPED)] for r in data["rows"])
    counted = sum(r[0] for r in data["rows"])
    return {"channels": channels, "clock_mhz": clock_mhz, "simulator": simulator,
            "pulses_driven": channels * args.pulses, "pulses_counted": counted,
            "dropped": dropped, "equal_to_model": data["rows"] == data["model_rows"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200_000,
                        help="cycles of the speed run (default 200000)")
    parser.add_argument("--pulses", type=int, default=1000,
                        help="pulses per channel in the worst-case runs (default 1000)")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    result = {
        "date": date.today().isoformat(),
        "speed": speed(args),
        "worst_case": [worst_case(args, 16, 48, "verilator"),
                       worst_case(args, 64, 100, "verilator")],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    s = result["speed"]
    print(f"16-channel sniffer, random NAND workload, {s['verilator']['cycles']} cycles:")
    for sim in ("verilator", "icarus"):
        print(f"  {sim:<10} {s[sim]['cycles_per_second']:>12,.0f} cycles/s "
              f"({s[sim]['seconds']:.2f} s)")
    print(f"  ratio verilator/icarus: {s['ratio_verilator_over_icarus']:.1f}")
    for w in result["worst_case"]:
        print(f"worst case {w['channels']} ch @ {w['clock_mhz']} MHz (1 µs low / 1 µs high, all "
              f"in phase, {w['simulator']}): {w['pulses_counted']}/{w['pulses_driven']} pulses "
              f"counted, {w['dropped']} dropped, equal to model: {w['equal_to_model']}")
    ok = all(w["dropped"] == 0 and w["equal_to_model"] and
             w["pulses_counted"] == w["pulses_driven"] for w in result["worst_case"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

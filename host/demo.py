"""``make demo``: the sniffer gateware on a simulated NAND workload, counts beside the truth.

Builds the real sniffer (Amaranth → Verilog → Verilator), drives its R/B# pins with synthetic
pulse trains (reads, MLC lower/upper-page programs, erases, cache-busy pulses, ringing glitches,
dies busy at reset), reads every counter and histogram bin back through the gateware's read
port, and prints them beside the bit-exact reference model's counts.

Until the link issue lands, the bench runs through cocotb from the repository checkout.

Usage: ``python -m rbscope.demo [--channels N] [--cycles N] [--seed N] [--simulator S]``.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from .gateware.rb_sniffer import Counter, SnifferParams

__all__ = ["main"]

#: Class windows in ticks for the scaled mix of rbscope.stimulus (1 cycle ≈ 1 µs of NAND time).
WINDOWS = (("cache", 3, 12), ("read", 12, 120), ("program", 120, 2400), ("erase", 2400, 5000))
GLITCH_TICKS = 3


def _repo_root():
    root = Path(__file__).resolve().parent.parent
    if not (root / "cocotb_tests" / "runner.py").is_file():
        raise SystemExit("rbscope demo: run it from a repository checkout (`make demo`): "
                         f"no cocotb_tests/ next to {root}")
    return root


def _run(args, report):
    root = _repo_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from cocotb_tests.runner import run_bench

    from .gateware.rb_sniffer import RBSniffer

    params = {"channels": args.channels}
    design = SnifferParams(**params)
    build_dir = root / "build" / "demo" / f"sniffer_{args.channels}ch_{args.simulator}"
    return run_bench(
        lambda: RBSniffer(design), "rb_sniffer", "sniffer_bench", args.simulator, build_dir,
        params={
            "params": params,
            "config": {"prescaler": 1, "glitch_ticks": GLITCH_TICKS,
                       "windows": [[lo, hi] for _, lo, hi in WINDOWS], "idle_ticks": 50},
            "scenario": {"kind": "random", "seed": args.seed,
                         "spec": {"low_at_reset": [1, args.channels - 1], "glitch_rate": 0.15,
                                  "gap": [40, 400]}},
            "cycles": args.cycles,
            "report": str(report),
        })


def _histogram_lines(params, hist, width=44):
    """Octave-aggregated histogram with the class windows named."""
    octaves = {}
    for b, n in enumerate(hist):
        if n:
            lo = params.hist_bin_lo(b)
            octave = lo.bit_length() - 1 if lo else -1
            octaves[octave] = octaves.get(octave, 0) + n
    if not octaves:
        return ["    (no pulses)"]
    peak = max(octaves.values())
    lines = []
    for octave in sorted(octaves):
        lo, hi = (0, 1) if octave < 0 else (1 << octave, 1 << (octave + 1))
        names = [name for name, wlo, whi in WINDOWS if wlo < hi and lo < whi]
        bar = "█" * max(1, round(width * octaves[octave] / peak))
        lines.append(f"    {lo:>6}–{hi - 1:<6} {octaves[octave]:>6}  {bar:<{width}} "
                     f"{'/'.join(names)}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="rbscope-demo", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, default=16, help="sniffer channels (default 16)")
    parser.add_argument("--cycles", type=int, default=200_000,
                        help="simulated clock cycles (default 200000)")
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator")
    args = parser.parse_args(argv)
    params = SnifferParams(channels=args.channels)

    print(f"rbscope demo: {args.channels}-channel R/B# sniffer gateware in {args.simulator}, "
          f"synthetic NAND workload (seed {args.seed})")
    print("  timings scaled: 1 clock cycle = 1 tick stands for ~1 µs of NAND time")
    print(f"  building and simulating {args.cycles} cycles …", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        start = time.monotonic()
        result = _run(args, report_path)
        elapsed = time.monotonic() - start
        report = json.loads(report_path.read_text())
    how = "rebuilt" if result.rebuilt else "reused build"
    print(f"  done in {elapsed:.1f} s ({how}: {result.build_seconds:.1f} s, "
          f"simulation + read-back: {result.run_seconds:.1f} s)\n")

    k = params.classes
    idx = {c: params.counter_index(c) for c in Counter}
    names = [name for name, _, _ in WINDOWS]
    header = (f"  {'ch':>3} " + "".join(f"{n:>9}" for n in names)
              + f"{'unclass':>9}{'glitch':>8}{'partial':>8}{'dropped':>8}{'busy %':>8}  model")
    print(header)
    print("  " + "─" * (len(header) - 2))
    cycles = report["cycles"]
    all_equal = True
    for ch, (row, model_row) in enumerate(zip(report["rows"], report["model_rows"], strict=True)):
        equal = row == model_row and report["histograms"][ch] == report["model_histograms"][ch]
        all_equal &= equal
        busy = 100 * row[idx[Counter.BUSY_TICKS]] / cycles
        print(f"  {ch:>3} " + "".join(f"{row[i]:>9}" for i in range(len(names)))
              + f"{row[idx[Counter.UNCLASSIFIED]]:>9}{row[idx[Counter.GLITCH]]:>8}"
              + f"{row[idx[Counter.PARTIAL]]:>8}{row[idx[Counter.DROPPED]]:>8}{busy:>8.1f}"
              + f"  {'=' if equal else '≠'}")
    totals = [sum(r[i] for r in report["rows"]) for i in range(k)]
    print("  " + "─" * (len(header) - 2))
    print("  all " + "".join(f"{t:>9}" for t in totals[:len(names)]))
    print()
    verdict = (f"every counter and all {params.hist_bins} histogram bins of every channel "
               "equal the reference model, bit for bit" if all_equal
               else "MISMATCH between gateware and reference model")
    print(f"  {verdict}.")
    print(f"\n  channel 0 pulse-width histogram (ticks, by octave; windows "
          f"{', '.join(f'{n} [{lo}, {hi})' for n, lo, hi in WINDOWS)}):")
    for line in _histogram_lines(params, report["histograms"][0]):
        print(line)
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())

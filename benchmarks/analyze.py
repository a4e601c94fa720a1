"""Benchmark the WA engine's accuracy and speed on synthetic drives with known truth.

For each case a die's R/B# pulse train is generated with a known number of program pulses
(MLC lower/upper pages), reads, and erases whose duration overlaps the slow programs by a
chosen amount; the bit-exact model counts them with the drive's windows; the WA engine computes
WA for a known logical volume. Reported: |RE_WA| = |WA_measured − WA_true| / WA_true without and
with the mixture-fit overlap correction, the interval, and the engine's run time.

Usage: ``python benchmarks/analyze.py [--programs N] [--json]``
"""

import argparse
import json
import random
import sys
import time

from rbscope.analysis.calibrate import hints_from_geometry, overlap_correction
from rbscope.analysis.geometry import load_geometry
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Measurement
from rbscope.analysis.wa import compute_wa
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import SnifferParams

CASES = [
    # name, erase centre µs, erase per programs, upper-page spread (lo, hi) µs
    ("separated", 3800, 1 / 64, (1300, 2200)),
    ("paper overlap", 2000, 1 / 64, (1300, 2200)),
    ("heavy GC", 2000, 1 / 16, (1300, 2200)),
]


def train(rng, programs, erase_us, erase_rate, upper):
    edges, t = [], 100
    ops = ["p"] * programs + ["e"] * round(programs * erase_rate) + ["r"] * programs
    rng.shuffle(ops)
    for op in ops:
        if op == "p":
            w = rng.uniform(200, 500) if rng.random() < 0.5 else rng.uniform(*upper)
        elif op == "e":
            w = rng.gauss(erase_us, erase_us * 0.03)
        else:
            w = rng.uniform(25, 60)
        edges += [(t, 0), (t + round(w), 1)]
        t += round(w) + rng.randint(5, 50)
    return Train(1, edges), t + 100


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=20000, help="program pulses per die")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    g = load_geometry("ssd-v")  # 4 dies, Mp 1, program window [150, 1950) µs
    params = SnifferParams(channels=4)
    config, names, _ = g.classifier.to_config(params, 1e-6)
    rows = []
    for name, erase_us, rate, upper in CASES:
        rng = random.Random(7)
        trains, end = zip(*(train(rng, args.programs, erase_us, rate, upper) for _ in range(4)),
                          strict=True)
        t = time.perf_counter()
        res = SnifferModel(params, config).run(list(trains), max(end))
        model_s = time.perf_counter() - t
        m = Measurement(params, config, 1e-6, res.channels, names, quiet_ticks=10**7)
        logical = from_bytes(args.programs * 4 * 4096)  # true WA = 1
        t = time.perf_counter()
        raw = compute_wa(m, g, logical)
        engine_s = time.perf_counter() - t
        t = time.perf_counter()
        corr, _ = overlap_correction(m, hints=hints_from_geometry(g))
        fixed = compute_wa(m, g, logical, correction=corr)
        corr_s = time.perf_counter() - t
        rows.append({"case": name, "erase_us": erase_us, "erase_rate": rate,
                     "re_wa_raw": abs(raw.wa.value - 1), "re_wa_corrected": abs(fixed.wa.value - 1),
                     "interval": [fixed.wa.lo, fixed.wa.hi], "model_s": model_s,
                     "engine_ms": engine_s * 1e3, "correction_ms": corr_s * 1e3,
                     "pulses": sum(sum(c.classes) for c in res.channels)})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'case':<15}{'pulses':>9}{'|RE| raw':>10}{'|RE| corr':>11}{'engine ms':>11}"
              f"{'fit ms':>9}")
        for r in rows:
            print(f"{r['case']:<15}{r['pulses']:>9}{r['re_wa_raw']:>10.2%}"
                  f"{r['re_wa_corrected']:>11.2%}{r['engine_ms']:>11.2f}{r['correction_ms']:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

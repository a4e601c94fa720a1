"""Labelled training on the reference SSD: tap one channel, measure every die by R/B# alone.

For each drive (``benchmarks/accuracy.py``'s scaled ones), a training run (a mixed workload,
``--train-workload``, its own seed, steady state) is watched on channel 0's bus through the
bit-exact tap model (:func:`rbscope.analysis.labelled.from_refssd`, what ``rbscope label`` writes
for a
recording); :func:`rbscope.analysis.trained.train` learns each class's widths from those labels
(what
``rbscope calibrate --labelled`` does). Then ``wa_classifier.py``'s workloads run, and every die's
R/B# is classified four ways: untrained / trained × with the pulse order (per-pulse widths) /
histograms only. Reported: ``|RE_WA|`` and whether the 95 % interval holds ``WA_true``.

Usage: ``python benchmarks/labelled_training.py [--jobs 1] [--drive NAME ...] [--json out]``
"""

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor

import accuracy  # benchmarks/accuracy.py: drives and volumes
from wa_classifier import PRECONDITIONS, WORKLOADS

from rbscope import refssd
from rbscope.analysis.labelled import from_refssd
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Measurement
from rbscope.analysis.sequence import classify_measurement
from rbscope.analysis.trained import train
from rbscope.analysis.wa import compute_wa
from rbscope.refssd.measure import to_measurement

TRAIN_SEED = 99
_trained = {}


def trained_for(name, workload):
    """The classifier trained on channel 0 of drive ``name``'s training run (cached)."""
    if (name, workload) not in _trained:
        d = accuracy.drive(name)
        wl = refssd.micro(workload, d.logical_bytes, int(d.logical_bytes * accuracy.VOLUME_SHARE),
                          seed=TRAIN_SEED)
        run = refssd.simulate(d, wl, seed=TRAIN_SEED, precondition="steady")
        _trained[name, workload] = train(from_refssd(run, 0, tick_seconds=1e-8),
                                         source=f"{name} {workload} channel 0")
    return _trained[name, workload]


def run_case(case):
    """One job: ``(drive, workload, precondition, seed, training workload)`` → a row."""
    name, workload, pre, seed, twl = case
    t = trained_for(name, twl)
    d = accuracy.drive(name)
    wl = refssd.micro(workload, d.logical_bytes, int(d.logical_bytes * accuracy.VOLUME_SHARE),
                      seed=seed)
    run = refssd.simulate(d, wl, seed=seed, precondition=pre)
    m = to_measurement(run, max_pulses=10**9)
    hist = Measurement(m.params, m.config, m.tick_seconds, m.counts, m.class_names,
                       probes=m.probes, quiet_ticks=m.quiet_ticks)
    lv = from_bytes(run.logical_bytes)
    true = run.truth.wa_true
    row = {"drive": name, "workload": workload, "precondition": pre, "seed": seed,
           "train_workload": twl, "wa_true": true}
    for mode, meas in (("sequence", m), ("histograms", hist)):
        for label, tr in (("untrained", None), ("trained", t)):
            r = compute_wa(meas, run.geometry, lv,
                           sequence=classify_measurement(meas, run.geometry, trained=tr),
                           write_only="-100%-W-" in workload)
            c = r.wa_confidence
            row[f"{mode}_{label}"] = {"wa": r.wa.value, "re": (r.wa.value - true) / true,
                                      "lo": c.lo, "hi": c.hi,
                                      "covered": bool(c.lo <= true <= c.hi)}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--drive", action="append", help="only these drives")
    ap.add_argument("--train-workload", default="8K-RD-50%-W-4KiB-align")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    cases = [(n, w, p, 1, args.train_workload) for n in accuracy.DRIVES
             if not args.drive or n in args.drive for w in WORKLOADS for p in PRECONDITIONS]
    keys = ("sequence_untrained", "sequence_trained", "histograms_untrained",
            "histograms_trained")
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(run_case, cases):
            rows.append(row)
            print(f"{row['drive']:<11}{row['workload']:<29}{row['precondition']:<8}"
                  + "".join(f"  {k} {row[k]['re']:+7.3%}{'' if row[k]['covered'] else ' MISS'}"
                            for k in keys), flush=True)
    for drive in dict.fromkeys(r["drive"] for r in rows):
        rs = [r for r in rows if r["drive"] == drive]
        print(drive + "".join(f"  {k}: max {max(abs(r[k]['re']) for r in rs):.3%} covers "
                              f"{sum(r[k]['covered'] for r in rs)}/{len(rs)}" for k in keys))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

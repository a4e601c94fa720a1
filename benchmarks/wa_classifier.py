"""R/B#-only WA on the reference SSD: plain windows against the sequence-aware classifier.

Each case runs one RB-Explorer micro-benchmark on a scaled reference-SSD drive
(:mod:`rbscope.refssd`; the drives and volumes of ``benchmarks/accuracy.py``), feeds the dies'
R/B# pulses through the bit-exact sniffer model
(:func:`rbscope.refssd.to_measurement`, keeping every pulse width, as ``rbscope analyze`` does
for a recording) and computes WA three ways:

* ``windows``: the window counts a new user gets (the drive's bundled geometry windows, or for
  drives without a preset the windows ``rbscope calibrate`` proposes from the same recording);
* ``sequence``: :func:`rbscope.analysis.sequence.classify_measurement` (the order of each die's
pulses)
  through :func:`rbscope.analysis.wa.compute_wa`, whose 95 % interval includes the classification;
* ``mixture``: the same classifier on the width histograms only (no per-pulse widths).

It reports ``|RE_WA| = |WA − WA_true| / WA_true`` per case and whether each 95 % interval holds
``WA_true``. Cases are independent jobs (``--jobs N`` runs them in a process pool; the same job
function could be handed to a cluster engine).

Usage: ``python benchmarks/wa_classifier.py [--quick] [--jobs 2] [--json out.json]``
"""

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import accuracy  # benchmarks/accuracy.py, next to this script: its drives and volumes
import numpy as np

from rbscope import refssd
from rbscope.analysis import calibrate as cal
from rbscope.analysis.labelled import from_refssd
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Measurement
from rbscope.analysis.pipeline import wa_of
from rbscope.analysis.presets import DEFAULT_PRESET
from rbscope.analysis.sequence import classify_measurement
from rbscope.analysis.wa import compute_wa, opcode_wa
from rbscope.refssd.measure import to_measurement

#: The drives: ``benchmarks/accuracy.py``'s scaled ones (the same runs as the accuracy table).
DRIVES = tuple(accuracy.DRIVES)
WORKLOADS = ("4K-RD-100%-W-4KiB-align", "4K-RD-50%-W-4KiB-align", "32K-SQ-100%-W-4KiB-align",
             "8K-SQ-50%-W-4KiB-align", "512B-RD-100%-W-4KiB-no-align",
             "16K-RD-50%-W-4KiB-no-align")
PRECONDITIONS = ("initial", "steady")


def _window_wa(m, geometry, logical, drive):
    """WA from the window counts the user would have (bundled, or calibrated)."""
    preset = user_preset_of(drive, geometry, m)
    params = m.params
    counts = []
    for ch in m.enabled:
        w = np.asarray(m.pulses[ch], dtype=np.int64)
        c = m.counts[ch].__class__.zeros(params)
        us = w * m.tick_seconds * 1e6
        taken = np.zeros(len(w), dtype=bool)
        for k, (_name, lo, hi) in enumerate(preset.windows):
            sel = ~taken & (us >= lo) & (us < hi)
            c.classes[k] = int(sel.sum())
            taken |= sel
        c.partial, c.dropped = m.counts[ch].partial, m.counts[ch].dropped
        counts.append(c)
    config, names, _ = preset.to_config(params, m.tick_seconds)
    mw = Measurement(params, config, m.tick_seconds, counts, names, probes=m.probes,
                     quiet_ticks=m.quiet_ticks)
    return compute_wa(mw, geometry, logical)


def user_preset_of(drive, geometry, m):
    """The windows a new user has: ``rbscope calibrate``'s for drives without a preset."""
    if drive.user_windows == "calibrated":
        try:
            return cal.calibrate(m.histogram_total(), m.params, m.tick_seconds,
                                 hints=cal.hints_from_geometry(geometry)).preset
        except cal.CalibrationError:
            pass
    return geometry.classifier or DEFAULT_PRESET


def run_case(case):
    """One independent job: ``(drive, workload, precondition, seed, probe)`` → a result row."""
    name, workload, precondition, seed, probe = case
    t0 = time.perf_counter()
    drive = accuracy.drive(name)
    wl = refssd.micro(workload, drive.logical_bytes,
                      int(drive.logical_bytes * accuracy.VOLUME_SHARE), seed=seed)
    run = refssd.simulate(drive, wl, seed=seed, precondition=precondition)
    dies = None if probe == "all" else list(range(0, drive.dies, 2))
    m = to_measurement(run, dies=dies, max_pulses=10**9)
    t1 = time.perf_counter()
    g = run.geometry
    lv = from_bytes(run.logical_bytes)
    truth = run.truth.wa_true
    row = {"drive": name, "workload": workload, "precondition": precondition, "seed": seed,
           "probe": probe, "wa_true": truth, "pulses": sum(len(v) for v in m.pulses.values())}
    w = _window_wa(m, g, lv, drive)
    row["windows"] = _summary(w, truth)
    t2 = time.perf_counter()
    seq = classify_measurement(m, g)
    s = compute_wa(m, g, lv, sequence=seq, write_only="-100%-W-" in workload)
    row["sequence"] = _summary(s, truth)
    row["sequence"]["checks"] = [c["check"] for c in s.checks]
    t3 = time.perf_counter()
    mm = Measurement(m.params, m.config, m.tick_seconds, m.counts, m.class_names,
                     probes=m.probes, quiet_ticks=m.quiet_ticks)
    mix = classify_measurement(mm, g)
    x = compute_wa(mm, g, lv, sequence=mix)
    row["mixture"] = _summary(x, truth)
    row["seconds"] = {"simulate": t1 - t0, "sequence": t3 - t2}
    return row


def measure(run, *, dies=None, windows=True, opcode=True):
    """The sequence classifier as ``benchmarks/accuracy.py``'s measurement step.

    ``python benchmarks/accuracy.py --measure wa_classifier:measure`` fills the accuracy table
    with R/B#-only WA from the sequence classifier, computed by ``rbscope analyze``'s own path
    (:func:`rbscope.analysis.pipeline.wa_of`; the module is found next to the script). Two
    comparison columns come with it (``columns``):

    * ``windows``: the plain window counts a new user has, on the same measurement;
    * ``opcode``: opcode-aware WA, every channel's bus command stream through the bit-exact
      tap model (:func:`rbscope.analysis.labelled.from_refssd`,
      :func:`rbscope.analysis.wa.opcode_wa`).
    """
    m = to_measurement(run, dies=dies, max_pulses=10**9)
    g = run.geometry
    lv = from_bytes(run.logical_bytes)
    r = wa_of(m, g, lv, classifier="sequence", write_only="-100%-W-" in str(run.workload))
    c = r.wa_confidence
    out = {"wa": r.wa.value, "lo": r.wa.lo, "hi": r.wa.hi,
           "conf_lo": None if c is None else c.lo, "conf_hi": None if c is None else c.hi,
           "windows": "sequence", "warnings": list(r.warnings),
           "checks": [x["check"] for x in r.checks], "columns": {}}
    if windows:
        w = _window_wa(m, g, lv, run.drive)
        out["columns"]["windows"] = {"wa": w.wa.value, "lo": w.wa.lo, "hi": w.wa.hi}
    if opcode and dies is None:
        labels = [from_refssd(run, ch, max_pulses=0) for ch in range(run.drive.channels)]
        o = opcode_wa(labels, g, lv)
        out["columns"]["opcode"] = {"wa": o.wa.value, "lo": o.wa.lo, "hi": o.wa.hi}
    return out


def _summary(r, truth):
    c = r.wa_confidence
    out = {"wa": r.wa.value, "re": (r.wa.value - truth) / truth}
    if c is not None:
        out.update(lo=c.lo, hi=c.hi, covered=bool(c.lo <= truth <= c.hi))
    return out


def cases(quick):
    out = []
    # Every drive with all dies probed; ssd-v also with half of its dies (die sampling).
    seeds = (1, 2)
    for name in DRIVES:
        for workload in (WORKLOADS[:3] if quick else WORKLOADS):
            for pre in PRECONDITIONS:
                for seed in seeds if name == "ssd-v" else seeds[:1]:
                    probe = "all" if seed == 1 else "half"
                    out.append((name, workload, pre, seed, probe))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 of the 6 workloads")
    ap.add_argument("--jobs", type=int, default=1, help="parallel processes (default 1)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--drive", action="append", help="only these drives")
    args = ap.parse_args()
    todo = [c for c in cases(args.quick) if not args.drive or c[0] in args.drive]
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for row in pool.map(run_case, todo):
            rows.append(row)
            w, s, x = row["windows"], row["sequence"], row["mixture"]
            print(f"{row['drive']:<11}{row['workload']:<29}{row['precondition']:<8}"
                  f"{row['probe']:<5} WA {row['wa_true']:8.4f}  windows {w['re']:+8.2%}  "
                  f"sequence {s['re']:+8.3%} [{s['lo']:.4f}, {s['hi']:.4f}] "
                  f"{'ok' if s['covered'] else 'MISS'}  mixture {x['re']:+8.3%} "
                  f"{'ok' if x.get('covered') else 'MISS'}", flush=True)
    n = len(rows)
    for key in ("windows", "sequence", "mixture"):
        errs = [abs(r[key]["re"]) for r in rows]
        cov = [r[key].get("covered") for r in rows if r[key].get("covered") is not None]
        print(f"{key:<9} max |RE| {max(errs):.3%}  mean {sum(errs) / n:.3%}  "
              f"< 1 %: {sum(e < 0.01 for e in errs)}/{n}  "
              f"95 % coverage {sum(cov)}/{len(cov)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

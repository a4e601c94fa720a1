"""Accuracy-table rows reproduced through the RTL: the reference FTL's commands into emulated dies.

For each selected job of the accuracy benchmark (``benchmarks/accuracy.py``: same drive, same
micro-benchmark, state, seed and volume, hence the same FTL run and the same ``WA_true``):

1. ``table``: the row as the accuracy benchmark computes it by default (plain windows; timing
   drawn from the drive's ranges, 100 MHz recording, the bit-exact sniffer model,
   ``measure_wa``);
2. ``model``: the model back end on the same FTL run with the busy times fixed at the middle of
   the ranges (:func:`rbscope.refssd.rtl.rtl_drive`, the timing the emulator can hold), 1 µs
   tick;
3. ``rtl``: the same command stream replayed as ONFI cycles into ``nand_emu`` dies in the
   simulated device (Verilator), counted by the sniffer gateware and read over the simulated
   UART (:func:`rbscope.refssd.rtl.run_rtl`), with the windows of step 2, and a TRACE record
   per pulse;
4. ``sequence``: the WA ``rbscope analyze`` gives by default (the sequence classifier) of the
   rig's capture (its pulse sequence rebuilt from the TRACE records, checked complete) against
   that of the recording of the same run (the model back end's pulses at the same 1 µs tick):
   the rig must read what a logic analyzer would.

It checks that 2 and 3 give identical per-class pulse counts on every die (and histograms, and
the emulated dies' ground truth equal to the FTL's counts) and prints one Markdown row per job.

Usage::

    python benchmarks/rtl_rows.py [--jobs DRIVE:WORKLOAD:STATE,...] [--cycles-per-us N]
        [--json out.json]
"""

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy  # noqa: E402  (the accuracy benchmark's drives, seeds and volumes)

from rbscope import refssd  # noqa: E402
from rbscope.analysis.logical import from_bytes  # noqa: E402
from rbscope.analysis.pipeline import wa_of  # noqa: E402
from rbscope.analysis.presets import Preset  # noqa: E402
from rbscope.refssd import rtl  # noqa: E402
from rbscope.refssd.sim import precondition_ftl  # noqa: E402

#: Default jobs: drives of the accuracy table whose geometry the emulator holds exactly
#: (64-page blocks: the emulator's page-type map), writing workloads of both write shares.
DEFAULT_JOBS = (
    "mlc-2plane:32K-SQ-100%-W-4KiB-align:initial",
    "mlc-2plane:32K-SQ-50%-W-4KiB-align:steady",
    "cache-prog:32K-SQ-100%-W-4KiB-align:initial",
    "cache-prog:32K-SQ-50%-W-4KiB-align:steady",
)


def job_of(spec):
    drive, workload, state = spec.split(":")
    for job in accuracy.jobs(drives=(drive,), workloads=(workload,), states=(state,)):
        return job
    raise SystemExit(f"no accuracy job {spec}")


def run_row(job, cycles_per_us, build_root=None, log=print):
    table = accuracy.run_job(job)
    d = rtl.rtl_drive(accuracy.drive(job["drive"]))
    ftl = refssd.make_ftl(d)
    precondition_ftl(ftl, job["state"], seed=accuracy.PRECONDITION_SEED)
    w = refssd.micro(job["workload"], d.logical_bytes,
                     int(d.logical_bytes * accuracy.VOLUME_SHARE), seed=job["seed"])
    run = refssd.simulate(d, w, seed=job["seed"], precondition=job["state"],
                          ftl=copy.deepcopy(ftl))
    if run.truth.wa_true != table["wa_true"]:
        raise SystemExit(f"{job}: the fixed-timing drive's FTL differs from the table's")
    # The windows: the user's for the drive (bundled, or calibrated on this recording).
    windows = refssd.measure_wa(run, clock_ns=1000)["windows"]
    preset = Preset(tuple((n, lo, hi) for n, lo, hi in windows))
    log(f"  {job['drive']} {job['workload']} {job['state']}: {len(run.commands)} commands, "
        f"{run.end_ns / 1e9:.2f} s of NAND time; windows "
        + ", ".join(f"{n} [{lo:g}, {hi:g})" for n, lo, hi in windows))
    t0 = time.monotonic()
    result = rtl.run_rtl(run, preset=preset, cycles_per_us=cycles_per_us,
                         build_root=build_root, trace=True)
    cmp = rtl.compare(run, result, preset)
    # The default classifier on the rig's capture and on the recording of the same run.
    logical = from_bytes(run.logical_bytes)
    write_only = "-100%-W-" in job["workload"]
    rig = wa_of(result.measurement, run.geometry, logical, write_only=write_only)
    recording = refssd.to_measurement(run, preset=preset, clock_ns=1000, max_pulses=10**7)
    rec = wa_of(recording, run.geometry, logical, write_only=write_only)
    seq = result.measurement.provenance.get("sequence", {})
    names = result.class_names
    totals = {n: sum(cmp["rtl"][d][i] for d in cmp["rtl"]) for i, n in enumerate(names) if n}
    row = {**job, "wa_true": run.truth.wa_true, "wa_table": table["wa_measured"],
           "wa_model": cmp["wa_model"], "wa_rtl": cmp["wa_rtl"],
           "counts_equal": cmp["counts_equal"], "histograms_equal": cmp["histograms_equal"],
           "truth_equal": cmp["truth_equal"], "class_totals": totals,
           "unclassified": sum(c[-1] for c in cmp["rtl"].values()),
           "cache_pulses": {k: run.truth.pulses[k] for k in ("CACHE_PROGRAM", "CACHE_READ")},
           "commands": result.commands, "preamble": result.preamble,
           "late": result.replay["late"], "max_late_us": result.replay["max_late"]
           / cycles_per_us, "nand_s": run.end_ns / 1e9, "wall_s": time.monotonic() - t0,
           "sim_s": result.wall_s, "windows": windows,
           "sequence_complete": bool(seq.get("complete")), "trace_lost": seq.get("lost"),
           "wa_rig": rig.wa.value, "wa_rig_classifier": rig.classifier,
           "wa_recording": rec.wa.value, "wa_recording_classifier": rec.classifier}
    log(f"    counts equal {row['counts_equal']}, histograms equal {row['histograms_equal']}, "
        f"truth equal {row['truth_equal']}; WA true {row['wa_true']:.4f} table "
        f"{row['wa_table']:.4f} model {row['wa_model']:.4f} RTL {row['wa_rtl']:.4f}; "
        f"sequence {'complete' if row['sequence_complete'] else 'INCOMPLETE'}, WA rig "
        f"{row['wa_rig']:.4f} ({row['wa_rig_classifier']}) recording {row['wa_recording']:.4f} "
        f"({row['wa_recording_classifier']}) ({row['wall_s']:.0f} s)")
    return row


def markdown(rows):
    out = ["| drive | workload | state | WA_true | WA table (drawn timing) | WA model back end "
           "| WA RTL | per-class counts (all dies, RTL = model) | unclassified "
           "| cache ops (15h, 31h/3Fh) | RTL = model per die | truth = FTL "
           "| WA rig, default classifier | WA recording, same | rig − recording |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        counts = ", ".join(f"{k} {v}" for k, v in r["class_totals"].items())
        cache = f"{r['cache_pulses']['CACHE_PROGRAM']}, {r['cache_pulses']['CACHE_READ']}"
        out.append(f"| `{r['drive']}` | `{r['workload']}` | {r['state']} | {r['wa_true']:.4f} "
                   f"| {r['wa_table']:.4f} | {r['wa_model']:.4f} | {r['wa_rtl']:.4f} | "
                   f"{counts} | {r['unclassified']} | {cache} | "
                   f"{'yes' if r['counts_equal'] else 'NO'}"
                   f"{'' if r['histograms_equal'] else ' (histograms differ)'} | "
                   f"{'yes' if r['truth_equal'] else 'NO'} | "
                   f"{r['wa_rig']:.4f} ({r['wa_rig_classifier']}"
                   f"{'' if r['sequence_complete'] else ', records lost'}) | "
                   f"{r['wa_recording']:.4f} ({r['wa_recording_classifier']}) | "
                   f"{100 * (r['wa_rig'] - r['wa_recording']) / r['wa_recording']:+.3f} % |")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(DEFAULT_JOBS),
                        help="comma-separated DRIVE:WORKLOAD:STATE (accuracy-table jobs)")
    parser.add_argument("--cycles-per-us", type=int, default=rtl.CYCLES_PER_US)
    parser.add_argument("--build-root", help="Verilator build cache")
    parser.add_argument("--json", help="write the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    t0 = time.monotonic()
    for spec in args.jobs.split(","):
        rows.append(run_row(job_of(spec), args.cycles_per_us, args.build_root))
    print(markdown(rows))
    print(f"\n{len(rows)} rows in {time.monotonic() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["counts_equal"] and r["truth_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

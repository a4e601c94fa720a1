"""What the device's trace summariser costs the WA: each zoo drive's recording analysed whole and
as a summarising build sends it.

``rbscope capture --trace --summarise read`` has the ECP5 boards send each run of pulses of the
``read`` window as its first pulse, a SUMMARY (how many between) and its last pulse, with the
last pulse's end exact (``docs/link.md``, "Trace summary"): the sequence classifier then lacks
the pulses in the middle of runs, their widths and the idle times around them, and ``analyze``
counts them with the program units its model expects at the widths the histogram holds
(``docs/wa.md``). This benchmark measures what that changes, drive by drive: a zoo job
(``benchmarks/zoo.py``: a drive of a family, its workload, one probed line set) is analysed at
knowledge level L0 from its recording, and again from the same recording as the summariser
would have sent it (every run of the default preset's ``read`` window, 12-150 µs, cut to its
first and last pulse and a count; the device also closes runs at each snapshot, which this
leaves out: the runs here are at least as long). Reported per job: the true WA, both values,
their difference, whether each 95 % interval holds the truth, and the share of pulses
summarised.

Command: ``python benchmarks/summary_cost.py --seeds 0:3 --workers 2 --json OUT`` (jobs on a
Dask ``LocalCluster``; ``--families`` to pick some). Tuning seeds (below 1000) only: nothing
here is tuned, and the zoo's publishing seeds stay unseen.
"""

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402  (the drive zoo: families, drawing, the user's geometry)

from rbscope.analysis.logical import from_bytes  # noqa: E402
from rbscope.analysis.pipeline import analyse  # noqa: E402

#: The class window the summariser is asked for: the default preset's ``read``.
READ = "read"


def summarised(m, window):
    """The measurement ``m`` as a summarising build would give it: in each line's sequence,
    every run of pulses inside class window ``window`` loses the pulses between its first and
    its last, which ``pulses_summarised`` counts, and the idle time before each run's last pulse
    spans them (``pulse_gaps_open``)."""
    lo, hi = m.config.windows[window]
    pulses, starts, counts, gaps_open = {}, {}, {}, {}
    for ch, widths in m.pulses.items():
        w = np.asarray(widths, dtype=np.int64)
        st = np.asarray(m.pulse_starts[ch], dtype=np.int64)
        inside = (w >= lo) & (w < hi)
        # A pulse is in the middle of a run when both neighbours are in the window too.
        middle = np.zeros(len(w), dtype=bool)
        if len(w) > 2:
            middle[1:-1] = inside[1:-1] & inside[:-2] & inside[2:]
        pulses[ch], starts[ch] = w[~middle].tolist(), st[~middle].tolist()
        if middle.any():
            counts[ch] = int(middle.sum())
            left = np.cumsum(middle)[~middle]
            gaps_open[ch] = (np.flatnonzero(np.diff(left) > 0) + 1).tolist()
    seq = dict(m.provenance.get("sequence") or {}, summary_windows=[window])
    return dataclasses.replace(m, pulses=pulses, pulse_starts=starts, pulses_summarised=counts,
                               pulse_gaps_open=gaps_open,
                               provenance=dict(m.provenance, sequence=seq))


def run_job(job):
    family, seed = job["family"], job["seed"]
    drive, info, run, m, _ = zoo.prepare(family, seed)
    truth = run.truth.wa_true
    logical = from_bytes(run.logical_bytes)
    geometry, _ = zoo.user_geometry(drive, family, maxima=None)
    window = m.class_names.index(READ)
    rec = {"family": family, "seed": seed, "workload": info["workload"], "wa_true": truth,
           "pulses": sum(len(v) for v in m.pulses.values())}
    with tempfile.TemporaryDirectory(prefix="rbscope-summary-") as tmp:
        for name, measurement in (("whole", m), ("summarised", summarised(m, window))):
            src = Path(tmp) / f"{name}.json"
            measurement.save(src)
            try:
                r = analyse(zoo.build_request("L0", src, geometry, logical)).result
            except Exception as exc:  # a failed analysis is a result of the benchmark
                rec[name] = {"failed": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            conf = r.wa_confidence
            lo, hi = (conf.lo, conf.hi) if conf is not None else (r.wa.lo, r.wa.hi)
            rec[name] = {"wa": r.wa.value, "error": (r.wa.value - truth) / truth,
                         "covered": bool(lo <= truth <= hi), "lo": lo, "hi": hi,
                         "classifier": r.classifier}
            if name == "summarised":
                rec["pulses_summarised"] = sum(measurement.pulses_summarised.values())
    if "wa" in rec.get("whole", {}) and "wa" in rec.get("summarised", {}):
        rec["difference"] = rec["summarised"]["wa"] / rec["whole"]["wa"] - 1
    return rec


def markdown(records):
    lines = ["| family | seed | pulses summarised | WA true | whole | summarised | difference | "
             "covered (whole / summarised) |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["family"], r["seed"])):
        w, s = r.get("whole", {}), r.get("summarised", {})
        if "wa" not in w or "wa" not in s:
            lines.append(f"| {r['family']} | {r['seed']} | – | {r['wa_true']:.4f} | "
                         f"{w.get('failed', '')} | {s.get('failed', '')} | – | – |")
            continue
        share = r.get("pulses_summarised", 0) / max(r["pulses"], 1)
        lines.append(f"| {r['family']} | {r['seed']} | {share:.0%} | {r['wa_true']:.4f} | "
                     f"{w['wa']:.4f} ({w['error']:+.2%}) | {s['wa']:.4f} ({s['error']:+.2%}) | "
                     f"{r['difference']:+.3%} | {'yes' if w['covered'] else 'NO'} / "
                     f"{'yes' if s['covered'] else 'NO'} |")
    diffs = [abs(r["difference"]) for r in records if "difference" in r]
    if diffs:
        lines.append("")
        lines.append(f"{len(diffs)} jobs: |difference| median {np.median(diffs):.3%}, "
                     f"largest {max(diffs):.3%}.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", help="comma-separated zoo families (default: all)")
    ap.add_argument("--seeds", default="0:3", help="A:B, tuning seeds (below 1000)")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--local", action="store_true", help="run the jobs here, one by one")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split(":"))
    if b > zoo.PUBLISH_SEED:
        ap.error(f"--seeds: tuning seeds only (below {zoo.PUBLISH_SEED})")
    families = args.families.split(",") if args.families else list(zoo.FAMILIES)
    for f in families:
        if f not in zoo.FAMILIES:
            ap.error(f"unknown family {f!r}")
    jobs = [{"family": f, "seed": s} for f in families for s in range(a, b)]
    records = []
    if args.local:
        records = [run_job(j) for j in jobs]
    else:
        from dask.distributed import Client, LocalCluster, as_completed
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", scheduler_port=0, dashboard_address="127.0.0.1:0")
        client = Client(cluster)
        try:
            client.upload_file(str(Path(zoo.__file__)))
            client.upload_file(__file__)
            import summary_cost as module  # this file, as the workers know it
            for fut in as_completed(client.map(module.run_job, jobs, pure=False)):
                rec = fut.result()
                records.append(rec)
                print(f"[{len(records)}/{len(jobs)}] {rec['family']}#{rec['seed']} "
                      f"{rec.get('difference', float('nan')):+.3%}", file=sys.stderr)
        finally:
            client.close()
            cluster.close()
    table = markdown(records)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The accuracy table: measured against true WA on the reference SSD, for the paper's workloads.

Every job runs one of the 40 RB-Explorer micro-benchmarks on one reference drive, from the
"initial" (filled, then trimmed) or "steady" (random-filled) state, and compares

* ``WA_true``: the reference SSD's own count of programmed pages × page size / host bytes;
* ``WA_measured``: the dies' R/B# pulse trains through the bit-exact sniffer model and the WA
  engine exactly as ``rbscope analyze`` computes it (R/B# only; every die probed; the windows a
  new user would have: the bundled geometry's, or ``rbscope calibrate``'s on the recording).

Reported per row: both WAs, ``|RE_WA| = |WA_measured - WA_true| / WA_true``, the engine's
interval and whether it (and its 95 % interval) holds the truth.

The measurement step is a function ``measure(run) -> dict`` with at least ``wa``, ``lo`` and
``hi`` (default :func:`rbscope.refssd.measure_wa`); ``--measure module:function`` swaps it (the
sequence-aware classifier of the trust work plugs in here). Jobs are independent and run on a
``concurrent.futures`` process pool (``--workers``); the same ``run_job`` can be mapped by any
other executor (a Dask ``Client.map``, for example).

Scaling (the paper wrote 2 GB on 14–60 GB drives): the drives keep their channel, plane, page
and cell structure but have fewer blocks (see :data:`DRIVES`), and each workload writes an
eighth of the drive's logical space (the paper: 2 GB of 14 GB, about 1/7). Preconditioning
brings the drive to its state first, so the measured volume only needs enough operations, not
the time to reach steady state. The preconditioned state of each drive is computed once (seed
:data:`PRECONDITION_SEED`) and copied into every job of that drive and state.

Usage::

    python benchmarks/accuracy.py [--drives ssd-v,...] [--workloads PATTERN] [--states ...]
        [--workers 2] [--json out.json] [--markdown out.md] [--measure module:function]
"""

import argparse
import copy
import fnmatch
import importlib
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from rbscope import refssd
from rbscope.refssd.sim import precondition_ftl

#: The benchmark's drives: (preset, changes). Block counts are scaled down from the presets.
DRIVES = {
    # SSD-v geometry: 4 channels x 1 chip x 1 die x 2 planes, single-plane, 4 KiB pages, 128
    # pages per block; 32 blocks per plane (128 MiB raw instead of 16 GB).
    "ssd-v": ("ssd-v", {"blocks_per_plane": 32}),
    # SSD-M-like multi-plane MLC, 4 channels x 1 die (instead of 8 x 2), 64-page blocks
    # (instead of 256), 96 blocks per plane: 192 MiB raw.
    "mlc-2plane": ("mlc-2plane", {"channels": 4, "dies_per_chip": 1, "pages_per_block": 64,
                                  "blocks_per_plane": 96}),
    # TLC with heavy GC (7 % OP, no write buffer): 2 channels x 2 dies, 8 KiB pages (instead of
    # 16), 96-page blocks (instead of 192), 48 blocks per plane: 288 MiB raw.
    "tlc-gc": ("tlc-gc", {"channels": 2, "dies_per_chip": 2, "page_size": 8192,
                          "pages_per_block": 96, "blocks_per_plane": 48}),
    # MLC with cache programs and cache reads: 2 channels x 2 dies, 64-page blocks (instead of
    # 256), 64 blocks per plane: 256 MiB raw.
    "cache-prog": ("cache-prog", {"channels": 2, "dies_per_chip": 2, "pages_per_block": 64,
                                  "blocks_per_plane": 64}),
}

#: Share of the logical space each workload writes.
VOLUME_SHARE = 0.125
#: Seed of the preconditioning: every job of a drive starts from the same initial or steady
#: state (computed once per worker process and copied), only its workload and timing differ.
PRECONDITION_SEED = 2026

_preconditioned = {}


def drive(name):
    """The scaled benchmark drive ``name``."""
    base, changes = DRIVES[name]
    return refssd.preset(base, **changes)


def jobs(drives=tuple(DRIVES), workloads=refssd.MICRO_BENCHMARKS, states=("initial", "steady")):
    """The job list: one dict per (drive, workload, state), with its seed."""
    out = []
    for d in drives:
        for w in workloads:
            for s in states:
                seed = 100 * list(DRIVES).index(d) + 2 * refssd.MICRO_BENCHMARKS.index(w) + \
                    (s == "steady")
                out.append({"drive": d, "workload": w, "state": s, "seed": seed})
    return out


def resolve(spec):
    """``module:function`` → the function (the default measurement when ``spec`` is None)."""
    if spec is None:
        return refssd.measure_wa
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def preconditioned(name, state):
    """A copy of drive ``name``'s FTL in ``state`` (computed once per process)."""
    key = (name, state)
    if key not in _preconditioned:
        ftl = refssd.make_ftl(drive(name))
        precondition_ftl(ftl, state, seed=PRECONDITION_SEED)
        _preconditioned[key] = ftl
    return copy.deepcopy(_preconditioned[key])


def run_job(job, measure=None):
    """Run one job; return its table row (a JSON-able dict)."""
    fn = resolve(measure)
    d = drive(job["drive"])
    t0 = time.perf_counter()
    w = refssd.micro(job["workload"], d.logical_bytes, int(d.logical_bytes * VOLUME_SHARE),
                     seed=job["seed"])
    run = refssd.simulate(d, w, seed=job["seed"], precondition=job["state"],
                          ftl=preconditioned(job["drive"], job["state"]))
    t1 = time.perf_counter()
    m = fn(run)
    t2 = time.perf_counter()
    true = run.truth.wa_true
    row = dict(job)
    row.update({
        "wa_true": true, "wa_measured": m["wa"], "re": abs(m["wa"] - true) / true,
        "lo": m["lo"], "hi": m["hi"], "covered": m["lo"] <= true <= m["hi"],
        "conf_lo": m.get("conf_lo"), "conf_hi": m.get("conf_hi"),
        "conf_covered": (None if m.get("conf_lo") is None
                         else m["conf_lo"] <= true <= m["conf_hi"]),
        "logical_bytes": run.logical_bytes, "pulses": run.stats["pulses"],
        "pages_programmed": run.truth.pages_programmed, "erases": run.truth.erases["total"],
        "windows": m.get("windows"), "checks": m.get("checks"),
        "undetermined": bool(m.get("undetermined", False)),
        "simulate_s": t1 - t0, "measure_s": t2 - t1,
    })
    # Comparison columns of the measurement (e.g. plain windows, opcode-aware mode).
    row["columns"] = {name: {"wa": c["wa"], "re": abs(c["wa"] - true) / true,
                             "lo": c.get("lo"), "hi": c.get("hi"),
                             "covered": (None if c.get("lo") is None
                                         else c["lo"] <= true <= c["hi"]),
                      "undetermined": bool(c.get("undetermined", False))}
                      for name, c in (m.get("columns") or {}).items()}
    return row


def summary(rows):
    """Error and coverage statistics: overall, by write share, by drive × write share, by
    state."""
    groups = {"all": rows}
    for share in ("100", "50"):
        groups[f"{share}% writes"] = [r for r in rows if f"-{share}%-" in r["workload"]]
    for d in dict.fromkeys(r["drive"] for r in rows):
        for share in ("100", "50"):
            groups[f"{d}, {share}% writes"] = [r for r in rows if r["drive"] == d
                                               and f"-{share}%-" in r["workload"]]
    for state in ("initial", "steady"):
        groups[f"{state} state"] = [r for r in rows if r["state"] == state]
    out = {}
    for name, rs in groups.items():
        if not rs:
            continue
        res = sorted(r["re"] for r in rs)
        out[name] = {"rows": len(rs), "median_re": res[len(res) // 2], "max_re": res[-1],
                     "below_1pct": sum(r < 0.01 for r in res) / len(rs),
                     "below_10pct": sum(r < 0.10 for r in res) / len(rs),
                     "covered": sum(r["covered"] for r in rs) / len(rs),
                     "conf_covered": sum(bool(r.get("conf_covered")) for r in rs) / len(rs),
                     "undetermined": sum(bool(r.get("undetermined")) for r in rs)}
        for col in columns(rs):
            cs = [r["columns"][col] for r in rs if col in r.get("columns", {})]
            cres = sorted(c["re"] for c in cs)
            out[name][col] = {"rows": len(cres), "median_re": cres[len(cres) // 2],
                              "max_re": cres[-1],
                              "below_1pct": sum(x < 0.01 for x in cres) / len(cres),
                              "below_0.1pct": sum(x <= 0.001 for x in cres) / len(cres),
                              "undetermined": sum(bool(c.get("undetermined")) for c in cs)}
            known = [c["covered"] for c in cs if c.get("covered") is not None]
            if known:
                out[name][col]["covered"] = sum(known) / len(known)
    return out


def columns(rows):
    """Names of the comparison columns the rows carry, in order of appearance."""
    return list(dict.fromkeys(c for r in rows for c in r.get("columns", {})))


def summary_markdown(s):
    """The summary as a Markdown table (one more pair of columns per comparison column)."""
    cols = list(dict.fromkeys(k for v in s.values() for k, x in v.items() if isinstance(x, dict)))
    head = ("| rows | n | median \\|RE_WA\\| | max | < 1 % | < 10 % | interval covers | 95 % "
            "interval covers |")
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|"
    undet = any(v.get("undetermined") for v in s.values())
    if undet:
        head += " undetermined |"
        rule += "---:|"
    for c in cols:
        cov = any("covered" in v.get(c, {}) for v in s.values())
        head += f" {c}: median \\|RE\\| | {c}: max |" + (f" {c}: covers |" if cov else "")
        rule += "---:|---:|" + ("---:|" if cov else "")
    lines = [head, rule]
    for name, v in s.items():
        line = (f"| {name} | {v['rows']} | {100 * v['median_re']:.2f} % | "
                f"{100 * v['max_re']:.2f} % | {100 * v['below_1pct']:.0f} % | "
                f"{100 * v['below_10pct']:.0f} % | {100 * v['covered']:.0f} % | "
                f"{100 * v['conf_covered']:.0f} % |")
        if undet:
            line += f" {v.get('undetermined', 0)} |"
        for c in cols:
            x = v.get(c)
            cov = any("covered" in w.get(c, {}) for w in s.values())
            line += (f" {100 * x['median_re']:.2f} % | {100 * x['max_re']:.2f} % |" if x
                     else " | |")
            if cov:
                line += f" {100 * x['covered']:.0f} % |" if x and "covered" in x else " |"
        lines.append(line)
    return lines


def markdown(rows):
    """The table as Markdown lines, one section per drive."""
    lines = []
    cols = columns(rows)
    conf = any(r.get("conf_lo") is not None for r in rows)
    for d in dict.fromkeys(r["drive"] for r in rows):
        head = "| workload | state | WA_true | WA_measured | \\|RE_WA\\| | "
        head += "95 % interval | covers |" if conf else "interval | covers |"
        rule = "|---|---|---:|---:|---:|---|:-:|"
        for c in cols:
            head += f" {c}: WA | {c}: \\|RE\\| |"
            rule += "---:|---:|"
        lines += [f"### {d}", "", head, rule]
        for r in rows:
            if r["drive"] != d:
                continue
            lo, hi, ok = ((r["conf_lo"], r["conf_hi"], r["conf_covered"])
                          if conf and r.get("conf_lo") is not None
                          else (r["lo"], r["hi"], r["covered"]))
            line = (f"| {r['workload']} | {r['state']} | {r['wa_true']:.3f} | "
                    f"{r['wa_measured']:.3f} | {100 * r['re']:.2f} % | "
                    f"[{lo:.3f}, {hi:.3f}] | {'yes' if ok else 'no'} |")
            for c in cols:
                x = r.get("columns", {}).get(c)
                line += (f" {x['wa']:.3f} | {100 * x['re']:.2f} % |" if x else " | |")
            lines.append(line)
        lines.append("")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drives", default=",".join(DRIVES), help="comma-separated drive names")
    ap.add_argument("--workloads", default="*", help="glob over the micro-benchmark names")
    ap.add_argument("--states", default="initial,steady")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--measure", help="module:function replacing rbscope.refssd.measure_wa")
    ap.add_argument("--json", help="write the rows and the summary here (and each row, as it "
                    "arrives, to the same path + 'l' as JSON lines)")
    ap.add_argument("--markdown", help="write the Markdown table here")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows of --json's progress file (.jsonl) and run only the "
                         "jobs it does not hold (a run cut short)")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="run nothing: join the rows of these --json outputs, or of their "
                         "progress files (.jsonl), e.g. drives run separately, into one table "
                         "(--json, --markdown; a row in several files: the last one's)")
    args = ap.parse_args(argv)
    if args.combine:
        rows = []
        for path in args.combine:
            with open(path, encoding="utf-8") as f:
                if path.endswith(".jsonl"):  # the rows as they arrived (a run cut short)
                    rows += [json.loads(line) for line in f if line.strip()]
                else:
                    rows += json.load(f)["rows"]
        # A row run twice (a run resumed elsewhere): the later file's wins.
        rows = list({(r["drive"], r["workload"], r["state"]): r for r in rows}.values())
        write_outputs(rows, args, None)
        return 0
    names = args.drives.split(",")
    for n in names:
        if n not in DRIVES:
            ap.error(f"unknown drive {n!r} (known: {', '.join(DRIVES)})")
    wls = [w for w in refssd.MICRO_BENCHMARKS if fnmatch.fnmatchcase(w, args.workloads)]
    if not wls:
        ap.error(f"no micro-benchmark matches {args.workloads!r}")
    job_list = jobs(names, wls, args.states.split(","))
    resolve(args.measure)  # fail early on a bad --measure
    t0 = time.perf_counter()
    rows = []
    if args.resume:
        if not args.json:
            ap.error("--resume needs --json (its progress file holds the rows done)")
        try:
            with open(args.json + "l", encoding="utf-8") as f:
                rows = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            rows = []
        done = {(r["drive"], r["workload"], r["state"]) for r in rows}
        job_list = [j for j in job_list if (j["drive"], j["workload"], j["state"]) not in done]
    progress = (open(args.json + "l", "a" if args.resume else "w", encoding="utf-8")  # noqa: SIM115
                if args.json else None)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(run_job, j, args.measure) for j in job_list]
        for i, f in enumerate(futures):
            r = f.result()
            rows.append(r)
            if progress:
                progress.write(json.dumps(r) + "\n")
                progress.flush()
            print(f"[{i + 1}/{len(futures)}] {r['drive']:<11}{r['workload']:<30}"
                  f"{r['state']:<8} true {r['wa_true']:7.3f}  measured {r['wa_measured']:7.3f}"
                  f"  |RE| {100 * r['re']:6.2f} %  {'covered' if r['covered'] else ''}"
                  f"{'  95 % covers' if r.get('conf_covered') else ''}"
                  + "".join(f"  {c} {100 * x['re']:.2f} %" for c, x in r["columns"].items()),
                  flush=True)
    elapsed = time.perf_counter() - t0
    if progress:
        progress.close()
    print(f"{len(rows)} jobs in {elapsed:.0f} s on {args.workers} workers")
    write_outputs(rows, args, elapsed)
    return 0


def write_outputs(rows, args, elapsed):
    """Print the summary; write ``--json`` and ``--markdown``."""
    s = summary(rows)
    for name, v in s.items():
        print(f"{name}: {v['rows']} rows, median |RE| {100 * v['median_re']:.2f} %, max "
              f"{100 * v['max_re']:.2f} %, < 1 %: {100 * v['below_1pct']:.0f} %, < 10 %: "
              f"{100 * v['below_10pct']:.0f} %, interval covers: {100 * v['covered']:.0f} %, "
              f"95 % interval covers: {100 * v['conf_covered']:.1f} %")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "summary": s, "elapsed_s": elapsed,
                       "volume_share": VOLUME_SHARE,
                       "drives": {k: [v[0], v[1]] for k, v in DRIVES.items()}}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write("\n".join(summary_markdown(s) + [""] + markdown(rows)) + "\n")


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark ``rbscope report``: a 24-hour, 16-die capture, and a 10-drive comparison.

1. The 24-hour capture of ``benchmarks/analyze_24h.py`` (16 dies of an SSD-M-like drive, 100 ms
   snapshots, histograms every 10 s: about 1.7 GB), reported with ``rbscope report FILE
   --geometry ssd-m --logical N -o report.html`` in a subprocess: wall time, its own peak RSS and
   the size of the HTML. ``--pdf`` also prints it with Chromium (timed separately).
2. A procurement comparison of 10 drives: 10 saved measurements of 16 dies each (classified by
   the bit-exact model from synthetic MLC traffic, with snapshots), named in a study file, reported
   with ``rbscope report --study``.

Usage: ``python benchmarks/report.py [--hours H] [--drives N] [--dir /tmp] [--pdf] [--json]``
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from analyze_24h import run_command, write_capture  # noqa: E402


def long_capture(tmp, hours, pdf):
    path = Path(tmp) / "long.rbcap"
    gen = write_capture(path, hours)
    out = Path(tmp) / "long.html"
    args = ["report", str(path), "--geometry", "ssd-m", "--logical",
            str(gen["logical_bytes"]), "-o", str(out), "--quiet", "--json"]
    res, _ = run_command(args, limit_gb=12)
    res.update(hours=hours, capture_bytes=gen["bytes"], frames=gen["frames"],
               html_bytes=out.stat().st_size if out.exists() else None)
    if pdf and res["returncode"] == 0:
        _pdf(res, out, Path(tmp) / "long.pdf")
    path.unlink()
    return res


def comparison(tmp, drives, pdf):
    from test_report import make_measurement

    study = ["title = \"Benchmark: 10-drive comparison\"", "[defaults]",
             "geometry = \"ssd-m\"", "workload = \"mixed\""]
    t = time.perf_counter()
    for i in range(drives):
        m = make_measurement(100 + i, channels=16, cycles=400_000, snapshot_cycles=20_000)
        m.save(Path(tmp) / f"d{i}.json")
        programs = sum(m.counts[ch].classes[m.class_index("program")] for ch in m.enabled)
        logical = int(programs * 8192 / (1.2 + 0.15 * i))  # SSD-M: Mp 2 x 4 KiB, 16 dies
        study += ["[[run]]", f"drive = \"Drive {i + 1}\"", f"source = \"d{i}.json\"",
                  f"logical = {logical}"]
    generate = time.perf_counter() - t
    (Path(tmp) / "study.toml").write_text("\n".join(study) + "\n")
    out = Path(tmp) / "compare.html"
    args = ["report", "--study", str(Path(tmp) / "study.toml"), "-o", str(out), "--json"]
    res, stdout = run_command(args, limit_gb=12)
    res.update(drives=drives, generate_s=generate,
               html_bytes=out.stat().st_size if out.exists() else None)
    if res["returncode"] == 0:
        ranked = sorted(json.loads(stdout)["runs"], key=lambda r: r["wa"]["value"])
        res["ranking"] = [r["label"] for r in ranked]
        if pdf:
            _pdf(res, out, Path(tmp) / "compare.pdf")
    return res


def _pdf(res, html, pdf):
    # Printed apart from the report command: Chromium reserves far more address space than the
    # report's own cap allows.
    from rbscope.report.browser import html_to_pdf
    t = time.perf_counter()
    html_to_pdf(html, pdf)
    res["pdf_s"] = time.perf_counter() - t
    res["pdf_bytes"] = pdf.stat().st_size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--drives", type=int, default=10)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--pdf", action="store_true", help="also time printing the PDFs")
    ap.add_argument("--skip-long", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rbscope-report-bench-", dir=args.dir)
    try:
        rows = {"comparison": comparison(tmp, args.drives, args.pdf)}
        if not args.skip_long:
            rows["long_capture"] = long_capture(tmp, args.hours, args.pdf)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for name, r in rows.items():
            if isinstance(r, dict):
                print(f"{name}: {r['wall_s']:.1f} s wall, {r['user_s'] + r['sys_s']:.1f} s CPU, "
                      f"peak RSS {r['peak_rss_mib']:.0f} MiB, "
                      f"HTML {r['html_bytes'] or 0:,} B, exit {r['returncode']}"
                      + (f", PDF {r['pdf_s']:.1f} s" if "pdf_s" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed of the reference SSD's model back end: FTL, timing model and bit-exact measurement.

Runs one workload on a full-size preset (SSD-v: 16 GiB raw) and reports operations and R/B#
pulses per second of each stage.

Usage: ``python benchmarks/refssd_speed.py [--volume MiB] [--workload NAME] [--json]``
"""

import argparse
import json
import sys
import time

from rbscope import refssd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drive", default="ssd-v")
    ap.add_argument("--workload", default="4K-RD-100%-W-4KiB-align")
    ap.add_argument("--volume", type=int, default=1024, help="MiB written (default 1024)")
    ap.add_argument("--measure", action="store_true", help="also time the bit-exact model")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    drive = refssd.preset(args.drive)
    w = refssd.micro(args.workload, drive.logical_bytes, args.volume << 20, seed=1)
    t0 = time.perf_counter()
    run = refssd.simulate(drive, w, seed=1)
    total = time.perf_counter() - t0
    s = run.stats
    out = {"drive": drive.name, "workload": args.workload, "volume_mib": args.volume,
           "requests": len(w), "operations": s["operations"], "pulses": s["pulses"],
           "ftl_s": s["ftl_s"], "timing_s": s["timing_s"], "total_s": total,
           "ftl_ops_per_s": s["operations"] / s["ftl_s"],
           "timing_pulses_per_s": s["pulses"] / s["timing_s"], "wa_true": run.truth.wa_true}
    if args.measure:
        t1 = time.perf_counter()
        refssd.to_measurement(run)
        out["measure_s"] = time.perf_counter() - t1
        out["measure_pulses_per_s"] = s["pulses"] / out["measure_s"]
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            print(f"{k:>22}: {v:,.3f}" if isinstance(v, float) else f"{k:>22}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

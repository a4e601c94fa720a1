"""The WA model at knowledge levels L0 / L1 on the synthetic drives of ``tests/wa_drives.py``.

For tuning only seeds below 1000 are used (``--seeds 1-20``); publishing uses the drive zoo
(``benchmarks/zoo.py``). Prints per family and level: runs, worst and median |error|, coverage of
the 95 % interval, undetermined runs.

    python benchmarks/wa_levels.py --seeds 1-6 [--family tlc-gc-overlap] [--json out.json]
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbscope.analysis.pipeline import wa_of  # noqa: E402
from tests import wa_drives  # noqa: E402


def run(name, seed, level, tell=("cell", "scheme", "ppb")):
    d = wa_drives.generate(wa_drives.family(name), seed)
    g = wa_drives.geometry_for(d, level, tell=tell)
    r = wa_of(d.measurement, g, d.logical)
    ci = r.wa_confidence or r.wa
    return {"family": name, "seed": seed, "level": level, "wa_true": d.wa_true,
            "wa": r.wa.value, "lo": ci.lo, "hi": ci.hi,
            "error": r.wa.value / d.wa_true - 1, "covers": ci.lo <= d.wa_true <= ci.hi,
            "undetermined": bool(getattr(r, "undetermined", False))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-4")
    p.add_argument("--family", action="append")
    p.add_argument("--levels", default="L0,L1")
    p.add_argument("--json")
    p.add_argument("--tell", default="cell,scheme,ppb",
                   help="what the geometry states beyond the array (default cell,scheme,ppb)")
    p.add_argument("-v", action="store_true")
    a = p.parse_args(argv)
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    if max(seeds) >= 1000:
        p.error("seeds >= 1000 are for publishing, not tuning")
    rows = []
    t0 = time.time()
    for name in a.family or list(wa_drives.FAMILIES):
        for level in a.levels.split(","):
            tell = tuple(x for x in a.tell.split(",") if x)
            res = [run(name, s, level, tell) for s in seeds]
            rows += res
            errs = sorted(abs(x["error"]) for x in res)
            cov = sum(x["covers"] for x in res)
            und = sum(x["undetermined"] for x in res)
            print(f"{name:<20} {level} runs {len(res):>3}  max {100 * errs[-1]:7.2f} %  "
                  f"median {100 * errs[len(errs) // 2]:7.2f} %  covers {cov}/{len(res)}  "
                  f"undetermined {und}", flush=True)
            if a.v:
                for x in res:
                    print(f"    seed {x['seed']}: true {x['wa_true']:.4f} wa {x['wa']:.4f} "
                          f"[{x['lo']:.4f}, {x['hi']:.4f}] {'U' if x['undetermined'] else ''}")
    print(f"{time.time() - t0:.1f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""The paper's over-provisioning sweep on the reference SSD: WA over logical volume (WALVD).

RB-Explorer (Table 4) shrank the user space of a 40 GB SSD-I to over-provision it by 7, 8, 10,
12 and 15 %, and ran 15 sub-tests of 5 GiB random 4 KiB writes each, reporting the WA of every
sub-test (the WA-over-logical-volume curves). Here the SSD-I structure is kept (5 channels, 2
planes, MLC, single-plane programs, 128-page blocks) with one die per channel instead of two and
fewer blocks (see :data:`BLOCKS_PER_PLANE`), over-provisioning is
``(physical - logical) / logical`` and each
sub-test writes the same share of the user space as 5 GiB of 37.2 GB. The drive starts fresh
(empty), as the paper's, and keeps its state from one sub-test to the next.

Each sub-test's WA is both the FTL's true WA and the WA rbscope measures from the R/B# pulses of
that sub-test (bit-exact sniffer model, WA engine, bundled SSD-I windows); ``--measure
module:function`` swaps the measurement like ``benchmarks/accuracy.py``. One job per OP value on
a process pool.

Usage: ``python benchmarks/op_sweep.py [--ops 7,8,10,12,15] [--subtests 15] [--json F]``
"""

import argparse
import importlib
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from rbscope import refssd

#: Blocks per plane of the scaled SSD-I (the real drive: about 2 000): 240 MiB raw with one
#: die per channel; the fewest that leave the garbage collector its spare blocks at 7 % OP.
BLOCKS_PER_PLANE = 48
#: Each sub-test writes this share of the user space (5 GiB of 37.2 GB).
SUBTEST_SHARE = 5 * 2**30 / 37.2e9


def sweep_one(op_pct, subtests=15, seed=1, measure=None):
    """Run the sub-tests at ``op_pct`` % over-provisioning; return the rows."""
    fn = refssd.measure_wa
    if measure:
        module, _, name = measure.partition(":")
        fn = getattr(importlib.import_module(module), name)
    drive = refssd.preset("ssd-i", dies_per_chip=1, blocks_per_plane=BLOCKS_PER_PLANE,
                          over_provisioning=op_pct / 100)
    volume = int(drive.logical_bytes * SUBTEST_SHARE) // 4096 * 4096
    rows = []
    ftl = None
    written = 0
    for i in range(subtests):
        w = refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, volume,
                         seed=seed * 1000 + i)
        run = refssd.simulate(drive, w, seed=seed * 1000 + i, ftl=ftl)
        ftl = run.ftl
        written += run.logical_bytes
        m = fn(run)
        rows.append({"op_pct": op_pct, "subtest": i + 1, "logical_gib_scaled": written / 2**30,
                     "paper_gib": 5 * (i + 1), "wa_true": run.truth.wa_true,
                     "wa_measured": m["wa"], "lo": m["lo"], "hi": m["hi"],
                     "re": abs(m["wa"] - run.truth.wa_true) / run.truth.wa_true})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="7,8,10,12,15", help="OP values in %% (comma-separated)")
    ap.add_argument("--subtests", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--measure", help="module:function replacing rbscope.refssd.measure_wa")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    ops = [float(x) for x in args.ops.split(",")]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(sweep_one, ops, [args.subtests] * len(ops),
                                [args.seed] * len(ops), [args.measure] * len(ops)))
    print("WA per sub-test (true / measured), rows = sub-test (paper GiB written), "
          "columns = OP")
    print(f"{'GiB':>5} " + "".join(f"{f'OP {op:g} %':>18}" for op in ops))
    for i in range(args.subtests):
        cells = [f"{r[i]['wa_true']:7.2f} / {r[i]['wa_measured']:6.2f}  " for r in results]
        print(f"{5 * (i + 1):>5} " + "".join(f"{c:>18}" for c in cells))
    print(f"{sum(len(r) for r in results)} sub-tests in {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": [row for r in results for row in r],
                       "blocks_per_plane": BLOCKS_PER_PLANE,
                       "subtest_share": SUBTEST_SHARE}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The host-side detectors of issue 24 against the reference SSD's truth, over several seeds.

Runs the write-buffer detector on the full presets and the gc-onset and erase-unit detectors
(gc first, then erase, as ``probe-geometry --detectors gc,erase`` does) on small drives of each
preset, through :class:`rbscope.vssd.EngineTarget` (the engine in process, on the model's
clock), and prints a Markdown table: the truth, what was found on how many seeds, the
confidence and the CPU time.

With ``--stall P`` the write-buffer table is measured again behind a host that stalls: each
buffered write, with probability P, takes ``--stall-ms`` (default 1 ms, a program's time on
these presets) more, as another process holding the CPU would make it (the test module's
``_StallingHost``); the table then gives the trials the detector ran.

Usage: ``python benchmarks/probe_detectors.py [--seeds N] [--stall P [--stall-ms MS]] [--json]``
"""

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

from rbscope.probe import ProbeRequest, run_detectors
from rbscope.probe.write_buffer import detect_write_buffer
from rbscope.refssd import preset
from rbscope.refssd.ftl import Cause
from rbscope.vssd import Engine, EngineTarget


def _test_module():
    """tests/test_probe_detectors.py, read from its file (no test package on the path needed)."""
    path = Path(__file__).resolve().parent.parent / "tests" / "test_probe_detectors.py"
    spec = importlib.util.spec_from_file_location("_probe_detector_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TESTS = _test_module()
#: The small drives of tests/test_probe_detectors.py (preset → field changes): one list.
SMALL = _TESTS.SMALL
BUFFER_PRESETS = ("ssd-v", "ssd-i", "slc", "mlc-2plane", "cache-prog", "tlc-gc", "tlc-slc",
                  "hubi")


class _Watched(EngineTarget):
    """Notes the host bytes written before the FTL first collected garbage."""

    gc_at = None
    written = 0

    def pwrite_through(self, offset, data):
        super().pwrite_through(offset, data)
        if self.gc_at is None and self.engine.ftl.erases[:, Cause.GC].sum():
            self.gc_at = self.written
        self.written += len(data)


def buffer_rows(seeds, stall=0.0, stall_s=1e-3):
    rows = []
    for name in BUFFER_PRESETS:
        d = preset(name)
        hits, confs, cpu, trials = 0, [], [], []
        for seed in range(seeds):
            t0 = time.process_time()
            engine = Engine(d, seed=seed)
            target = (_TESTS._StallingHost(engine, 0, 16 << 20, p=stall, stall=stall_s, seed=seed)
                      if stall else EngineTarget(engine, 0, 16 << 20))
            f = detect_write_buffer(target, d.page_size * d.mp)
            cpu.append(time.process_time() - t0)
            hits += f.value == d.write_buffer
            confs.append(f.confidence)
            trials.append(len(f.evidence["trial_bytes"]))
        rows.append({"drive": name, "truth": d.write_buffer, "hits": hits, "seeds": seeds,
                     "confidence": min(confs), "cpu_s": statistics.mean(cpu),
                     "trials": trials})
    return rows


def gc_erase_rows(seeds):
    rows = []
    for name, changes in SMALL.items():
        d = preset(name, **changes)
        page = d.page_size * d.mp
        unit = d.pages_per_block * page
        gc_err, ops, erase_hits, confs, cpu, writes = [], [], 0, [], [], []
        for seed in range(seeds):
            t = _Watched(Engine(d, seed=seed))
            t0 = time.process_time()
            gc, erase = run_detectors(t, ProbeRequest(detectors=("gc", "erase"),
                                                      page_size=page, units=d.dies, seed=seed))
            cpu.append(time.process_time() - t0)
            gc_err.append(None if gc.value is None else (gc.value - t.gc_at) // page)
            ops.append(gc.evidence.get("over_provisioning_at_least"))
            erase_hits += erase.value == unit
            confs.append((gc.confidence, erase.confidence))
            writes.append(gc.io["writes"] + erase.io["writes"])
        reserve = d.dies * (d.gc_free_units + d.open_streams) * unit / d.logical_bytes
        rows.append({"drive": f"{name} small", "logical_mib": d.logical_bytes / 2**20,
                     "op": d.over_provisioning, "op_floor": d.over_provisioning - reserve,
                     "gc_error_writes": gc_err, "op_bound": [round(o, 3) for o in ops if o],
                     "erase_truth": unit, "erase_hits": erase_hits, "seeds": seeds,
                     "gc_conf": min(c[0] for c in confs), "erase_conf": min(c[1] for c in confs),
                     "writes": statistics.mean(writes), "cpu_s": statistics.mean(cpu)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stall", type=float, default=0.0, metavar="P",
                    help="the buffer table behind a host stalling each buffered write with "
                         "probability P (the gc/erase table is left out)")
    ap.add_argument("--stall-ms", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not 0 <= args.stall < 1:
        ap.error("--stall is a probability in [0, 1)")
    if args.stall:
        buf = buffer_rows(args.seeds, args.stall, args.stall_ms / 1e3)
        if args.json:
            print(json.dumps({"buffer": buf, "stall": args.stall,
                              "stall_ms": args.stall_ms}, indent=1))
            return 0
        print(f"Behind a host stalling {args.stall:.3g} of the buffered writes by "
              f"{args.stall_ms:g} ms:")
        print()
        print("| drive | write buffer (truth) | found on | min. confidence | trials run "
              "(seed by seed) | CPU per run |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in buf:
            print(f"| {r['drive']} | {r['truth'] // 1024} KiB | {r['hits']} of {r['seeds']} "
                  f"seeds | {r['confidence']:.2f} | {', '.join(map(str, r['trials']))} | "
                  f"{r['cpu_s']:.2f} s |")
        return 0
    buf, gce = buffer_rows(args.seeds), gc_erase_rows(args.seeds)
    if args.json:
        print(json.dumps({"buffer": buf, "gc_erase": gce}, indent=1))
        return 0
    print("| drive | write buffer (truth) | found on | min. confidence | CPU per run |")
    print("| --- | --- | --- | --- | --- |")
    for r in buf:
        print(f"| {r['drive']} | {r['truth'] // 1024} KiB | {r['hits']} of {r['seeds']} seeds "
              f"| {r['confidence']:.2f} | {r['cpu_s']:.2f} s |")
    print()
    print("| drive | logical | OP (true; less the reserve) | gc onset − first collection "
          "(writes) | OP bound found | erase unit (truth) | found on | min. confidence "
          "(gc, erase) | writes | CPU per run |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in gce:
        bounds = ", ".join(f"{b:.3f}" for b in r["op_bound"])
        errs = ", ".join("none" if e is None else str(e) for e in r["gc_error_writes"])
        print(f"| {r['drive']} | {r['logical_mib']:.1f} MiB | {r['op']:.2f}; "
              f"{r['op_floor']:.3f} | {errs} | {bounds} | {r['erase_truth'] // 1024} KiB | "
              f"{r['erase_hits']} of {r['seeds']} | {r['gc_conf']:.2f}, {r['erase_conf']:.2f} | "
              f"{r['writes']:.0f} | {r['cpu_s']:.1f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

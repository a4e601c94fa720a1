"""The host-side detectors of issue 24 against the reference SSD's truth, over several seeds.

Runs the write-buffer detector on the full presets and the gc-onset and erase-unit detectors
(gc first, then erase, as ``probe-geometry --detectors gc,erase`` does) on small drives of each
preset, through :class:`rbscope.vssd.EngineTarget` (the engine in process, on the model's
clock), and prints a Markdown table: the truth, what was found on how many seeds, the
confidence and the CPU time.

Usage: ``python benchmarks/probe_detectors.py [--seeds N] [--json]``
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


def _small_drives():
    """The test module's SMALL, read from its file (no test package on the path needed)."""
    path = Path(__file__).resolve().parent.parent / "tests" / "test_probe_detectors.py"
    spec = importlib.util.spec_from_file_location("_probe_detector_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SMALL


#: The small drives of tests/test_probe_detectors.py (preset → field changes): one list.
SMALL = _small_drives()
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


def buffer_rows(seeds):
    rows = []
    for name in BUFFER_PRESETS:
        d = preset(name)
        hits, confs, cpu = 0, [], []
        for seed in range(seeds):
            t0 = time.process_time()
            f = detect_write_buffer(EngineTarget(Engine(d, seed=seed), 0, 16 << 20),
                                    d.page_size * d.mp)
            cpu.append(time.process_time() - t0)
            hits += f.value == d.write_buffer
            confs.append(f.confidence)
        rows.append({"drive": name, "truth": d.write_buffer, "hits": hits, "seeds": seeds,
                     "confidence": min(confs), "cpu_s": statistics.mean(cpu)})
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
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
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

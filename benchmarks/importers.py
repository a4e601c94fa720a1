"""Benchmark the logic-analyser importers: throughput of VCD and sigrok (.sr) import.

Generates a random NAND workload on N channels (``rbscope.stimulus``, 1 cycle = 1 µs scaled to
the chosen time unit), writes it as a VCD with the project's writer, converts it with the real
``sigrok-cli`` to a session file, then imports both through the bit-exact model and reports
bytes/s, edges/s and samples/s, and whether both imports agree.

Usage: ``python benchmarks/importers.py [--channels N] [--cycles N] [--unit NS] [--json]``
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams
from rbscope.importers.sigrok import import_sr
from rbscope.importers.vcd import import_vcd, write_vcd
from rbscope.model import Train
from rbscope.stimulus import TrainSpec, random_trains

WINDOWS = ((3, 12), (12, 120), (120, 2400), (2400, 5000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=2_000_000, help="µs of NAND time per line")
    ap.add_argument("--unit", type=int, default=100, help="VCD time units (ns) per µs cycle "
                                                          "(the sample period of the .sr)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trains = random_trains(TrainSpec(channels=args.channels, cycles=args.cycles, gap=(1, 100)), 1)
    edges = sum(len(t.edges) for t in trains)
    u = args.unit
    scaled = [Train(t.initial, [(c * u, lvl) for c, lvl in t.edges]) for t in trains]
    params = SnifferParams(channels=args.channels)
    kw = dict(params_for=lambda n: params,
              preset_config=lambda p, tick, ps: (SnifferConfig(
                  prescaler=ps, glitch_ticks=1, windows=WINDOWS, idle_ticks=50),
                  ("cache", "read", "program", "erase")))
    out = {"channels": args.channels, "edges": edges, "cycles": args.cycles, "unit_ns": u}
    with tempfile.TemporaryDirectory() as tmp:
        vcd = Path(tmp) / "b.vcd"
        with open(vcd, "w") as f:
            write_vcd(f, scaled, end=args.cycles * u)
        sr = Path(tmp) / "b.sr"
        t = time.perf_counter()
        subprocess.run(["sigrok-cli", "-I", f"vcd:downsample={u}", "-i", str(vcd), "-o",
                        str(sr)], check=True, capture_output=True)
        out["sigrok_convert_s"] = time.perf_counter() - t
        out["vcd_bytes"] = os.path.getsize(vcd)
        out["sr_bytes"] = os.path.getsize(sr)
        t = time.perf_counter()
        mv = import_vcd(vcd, clock=u * 1e-9, tick=u * 1e-9, **kw)
        out["vcd_s"] = time.perf_counter() - t
        # Per-pulse widths off to measure the importer itself.
        t = time.perf_counter()
        ms = import_sr(sr, max_pulses=0, **kw)
        out["sr_s"] = time.perf_counter() - t
        out["sr_samples"] = ms.provenance["cycles"]
        out["agree"] = [c.classes for c in mv.counts] == [c.classes for c in ms.counts]
    out["vcd_MB_per_s"] = out["vcd_bytes"] / out["vcd_s"] / 1e6
    out["vcd_edges_per_s"] = edges / out["vcd_s"]
    out["sr_Msamples_per_s"] = out["sr_samples"] / out["sr_s"] / 1e6
    out["sr_edges_per_s"] = edges / out["sr_s"]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v:.4g}" if isinstance(v, float) else f"{k:>20}: {v}")
    return 0 if out["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the logic-analyser importers: throughput of VCD and sigrok (.sr) import.

Generates a random NAND workload on N channels (``rbscope.device.stimulus``, 1 cycle = 1 µs scaled
to the chosen time unit), writes it as a VCD with the project's writer, converts it with the real
``sigrok-cli`` to a session file, then imports both through the bit-exact model and reports
bytes/s, edges/s and samples/s, and whether both imports agree.

With ``--gsps SECONDS`` it instead writes a synthetic session file sampled at 1 GHz (the same
kind of workload, 1 µs cycles = 1000 samples, ``SECONDS`` of recording) directly in libsigrok's
format, and imports it: the "1 GHz recording of a few seconds" case.

Both wall time and the process's CPU time are reported (the machine is shared; CPU time is what
the import costs).

With ``--memory`` each import runs in its own subprocess (as ``rbscope analyze`` would, per-pulse
widths kept up to the default ``max_pulses``) and its own peak RSS is reported (``VmHWM``),
beside the peak RSS of a subprocess that only imports the modules (the baseline).

With ``--before DIR`` (``DIR`` another copy of the package's ``host/`` directory, e.g.
``git archive REV host | tar -x -C /tmp/before``, then ``--before /tmp/before/host``) the same
files are also imported by that copy's importers and model, loaded beside this one in the same
process, the runs of both interleaved: a before/after comparison on one machine state. Its
counts must equal this copy's (``agree_before``). With ``--memory`` that copy's imports run in
subprocesses of their own too.

Usage: ``python benchmarks/importers.py [--channels N] [--cycles N] [--unit NS] [--memory]
[--gsps SECONDS] [--repeat N] [--before DIR] [--json]``
"""

import argparse
import dataclasses
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams
from rbscope.recordings.sigrok import import_sr
from rbscope.recordings.vcd import import_vcd, write_vcd

WINDOWS = ((3, 12), (12, 120), (120, 2400), (2400, 5000))

#: Imports a file in a fresh interpreter (argv: kind, path, unit ns[, copy of host/ to use]);
#: prints the counts.
CHILD = """
import importlib, importlib.util, json, sys
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams
from rbscope.recordings.sigrok import import_sr
from rbscope.recordings.vcd import import_vcd
kind, path, u = sys.argv[1], sys.argv[2], int(sys.argv[3])
if len(sys.argv) > 4:
    spec = importlib.util.spec_from_file_location(
        "rbscope_before", sys.argv[4] + "/__init__.py", submodule_search_locations=[sys.argv[4]])
    sys.modules["rbscope_before"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["rbscope_before"])
    import_vcd = importlib.import_module("rbscope_before.importers.vcd").import_vcd
    import_sr = importlib.import_module("rbscope_before.importers.sigrok").import_sr
W = ((3, 12), (12, 120), (120, 2400), (2400, 5000))
kw = dict(params_for=lambda n: SnifferParams(channels=n),
          preset_config=lambda p, tick, ps: (SnifferConfig(
              prescaler=ps, glitch_ticks=1, windows=W, idle_ticks=50),
              ("cache", "read", "program", "erase")))
m = None
if kind == "vcd":
    m = import_vcd(path, clock=u * 1e-9, tick=u * 1e-9, **kw)
elif kind == "sr":
    m = import_sr(path, **kw)
if m is not None:
    print(json.dumps({"classes": [c.classes for c in m.counts],
                      "pulses_kept": sum(len(w) for w in m.pulses.values())}))
"""
# ru_maxrss of a child includes the parent's high-water mark inherited at fork/exec; the
# child's own peak is its VmHWM.
CHILD_TAIL = """
hwm = [x for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
print("PEAK_RSS_KIB", hwm.split()[1], file=sys.stderr)
"""


def same_counts(a, b):
    """Whether two measurements, possibly from different copies of the package, hold the same
    counts (every counter and histogram bin of every channel)."""
    return [dataclasses.astuple(c) for c in a.counts] == [dataclasses.astuple(c) for c in b.counts]


def load_before(path):
    """``(import_vcd, import_sr)`` of the copy of ``host/`` at ``path``, loaded as the package
    ``rbscope_before`` (its own model, measurement and importers; the gateware parameters are
    this copy's)."""
    path = Path(path)
    if not (path / "importers" / "sigrok.py").is_file():
        raise SystemExit(f"--before {path}: not a copy of host/ (no importers/sigrok.py)")
    spec = importlib.util.spec_from_file_location("rbscope_before", path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["rbscope_before"] = package
    spec.loader.exec_module(package)
    return (importlib.import_module("rbscope_before.importers.vcd").import_vcd,
            importlib.import_module("rbscope_before.importers.sigrok").import_sr)


def child_peak(kind, path, unit, before=None):
    """Run one import in a subprocess (with the copy of ``host/`` at ``before``, if given);
    return (peak RSS MiB, wall s, its JSON output)."""
    t = time.perf_counter()
    extra = [str(before)] if before else []
    proc = subprocess.run([sys.executable, "-c", CHILD + CHILD_TAIL, kind, str(path), str(unit),
                           *extra], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    peak = [x for x in proc.stderr.splitlines() if x.startswith("PEAK_RSS_KIB")][-1]
    text = proc.stdout
    return int(peak.split()[1]) / 1024, wall, json.loads(text) if text.strip() else None


def write_sr(path, trains, samples, rate_hz, per_cycle, member=1 << 24):
    """Write ``trains`` (cycle units) as a session file, ``per_cycle`` samples per cycle."""
    changes = sorted({c for t in trains for c, _ in t.edges})
    points = np.array([0] + [c * per_cycle for c in changes] + [samples], dtype=np.int64)
    values = []
    level = [t.initial for t in trains]
    idx = [0] * len(trains)
    for c in [0] + changes:
        for ch, t in enumerate(trains):
            while idx[ch] < len(t.edges) and t.edges[idx[ch]][0] <= c:
                level[ch] = t.edges[idx[ch]][1]
                idx[ch] += 1
        values.append(sum(v << ch for ch, v in enumerate(level)))
    values = np.array(values, dtype=np.uint8)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("version", "2")
        probes = "".join(f"probe{i + 1}=rb{i}\n" for i in range(len(trains)))
        z.writestr("metadata", f"[global]\nsigrok version=0.5.2\n[device 1]\n"
                               f"capturefile=logic-1\ntotal probes={len(trains)}\n"
                               f"samplerate={rate_hz / 1e9:g} GHz\ntotal analog=0\n{probes}"
                               f"unitsize=1\n")
        for k, start in enumerate(range(0, samples, member)):
            stop = min(start + member, samples)
            lo = np.searchsorted(points, start, side="right") - 1
            hi = np.searchsorted(points, stop, side="left")
            edges = np.clip(points[lo:hi + 1], start, stop)
            z.writestr(f"logic-1-{k + 1}", np.repeat(values[lo:hi], np.diff(edges)).tobytes())


def gsps(args):
    """Import a synthetic 1 GHz session of ``args.gsps`` seconds; return the figures."""
    per_cycle = 1000  # 1 µs cycles at 1 GHz
    cycles = int(args.gsps * 1e6)
    trains = random_trains(TrainSpec(channels=args.channels, cycles=cycles, gap=(1, 100)), 1)
    edges = sum(len(t.edges) for t in trains)
    params = SnifferParams(channels=args.channels)
    kw = dict(params_for=lambda n: params,
              preset_config=lambda p, tick, ps: (SnifferConfig(
                  prescaler=ps, glitch_ticks=1, windows=tuple((lo * per_cycle, hi * per_cycle)
                                                              for lo, hi in WINDOWS),
                  idle_ticks=50), ("cache", "read", "program", "erase")))
    out = {"channels": args.channels, "edges": edges, "samples": cycles * per_cycle,
           "rate_hz": 1e9}
    with tempfile.TemporaryDirectory() as tmp:
        sr = Path(tmp) / "g.sr"
        t = time.perf_counter()
        write_sr(sr, trains, cycles * per_cycle, 1e9, per_cycle)
        out["write_s"] = time.perf_counter() - t
        out["sr_bytes"] = os.path.getsize(sr)
        versions = {"": import_sr}
        if args.before:
            versions["before_"] = load_before(args.before)[1]
        result = {}
        for _ in range(args.repeat):  # interleaved, so that both versions see the same load
            for tag, sr_import in versions.items():
                t, c = time.perf_counter(), time.process_time()
                result[tag] = sr_import(sr, max_pulses=0, **kw)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                if cpu < out.get(f"{tag}sr_cpu_s", float("inf")):
                    out[f"{tag}sr_s"], out[f"{tag}sr_cpu_s"] = wall, cpu
        m = result[""]
        if args.memory:
            out["baseline_rss_mib"], _, _ = child_peak("none", sr, 1)
            out["sr_rss_mib"], _, _ = child_peak("sr", sr, 1)
            if args.before:
                out["before_baseline_rss_mib"], _, _ = child_peak("none", sr, 1, args.before)
                out["before_sr_rss_mib"], _, _ = child_peak("sr", sr, 1, args.before)
    ref = SnifferModel(params, kw["preset_config"](params, 1e-9, 1)[0]).run(
        [Train(t.initial, [(c * per_cycle, lv) for c, lv in t.edges]) for t in trains],
        cycles * per_cycle + SYNC_LATENCY)
    out["agree"] = [c.classes for c in m.counts] == [c.classes for c in ref.channels]
    out["repeat"] = args.repeat
    for tag in result:
        out[f"{tag}sr_Msamples_per_cpu_s"] = out["samples"] / out[f"{tag}sr_cpu_s"] / 1e6
        out[f"{tag}sr_edges_per_cpu_s"] = edges / out[f"{tag}sr_cpu_s"]
    if args.before:
        out["agree_before"] = same_counts(result[""], result["before_"])
        out["sr_speedup_cpu"] = out["before_sr_cpu_s"] / out["sr_cpu_s"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=2_000_000, help="µs of NAND time per line")
    ap.add_argument("--unit", type=int, default=100, help="VCD time units (ns) per µs cycle "
                                                          "(the sample period of the .sr)")
    ap.add_argument("--memory", action="store_true",
                    help="peak RSS of each import in a subprocess instead of throughput")
    ap.add_argument("--gsps", type=float, metavar="SECONDS",
                    help="import a synthetic 1 GHz session of this many seconds instead")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="import each file N times and report the run with the least CPU time "
                         "(a shared machine's other jobs only ever add to it)")
    ap.add_argument("--before", metavar="DIR",
                    help="also import with the copy of host/ in DIR (same process, interleaved)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.gsps:
        out = gsps(args)
        print(json.dumps(out, indent=2) if args.json else
              "\n".join(f"{k:>24}: {v:.4g}" if isinstance(v, float) else f"{k:>24}: {v}"
                        for k, v in out.items()))
        return 0 if out["agree"] and out.get("agree_before", True) else 1
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
        if args.memory:
            out["pulses"] = edges // 2
            del trains, scaled
            out["baseline_rss_mib"], _, _ = child_peak("none", vcd, u)
            out["vcd_rss_mib"], out["vcd_s"], rv = child_peak("vcd", vcd, u)
            out["sr_rss_mib"], out["sr_s"], rs = child_peak("sr", sr, u)
            out["pulses_kept"] = rv["pulses_kept"]
            out["agree"] = rv["classes"] == rs["classes"]
            if args.before:
                out["before_baseline_rss_mib"], _, _ = child_peak("none", vcd, u, args.before)
                out["before_vcd_rss_mib"], out["before_vcd_s"], bv = child_peak(
                    "vcd", vcd, u, args.before)
                out["before_sr_rss_mib"], out["before_sr_s"], bs = child_peak(
                    "sr", sr, u, args.before)
                out["agree_before"] = bv == rv and bs == rs
            print(json.dumps(out, indent=2) if args.json else
                  "\n".join(f"{k:>20}: {v:.4g}" if isinstance(v, float) else f"{k:>20}: {v}"
                            for k, v in out.items()))
            return 0 if out["agree"] and out.get("agree_before", True) else 1
        versions = {"": (import_vcd, import_sr)}
        if args.before:
            versions["before_"] = load_before(args.before)
        runs = {}
        result = {}
        for _ in range(args.repeat):  # interleaved, so that both versions see the same load
            for tag, (vcd_import, sr_import) in versions.items():
                t, c = time.perf_counter(), time.process_time()
                result[tag + "vcd"] = vcd_import(vcd, clock=u * 1e-9, tick=u * 1e-9, **kw)
                runs.setdefault(tag + "vcd", []).append(
                    (time.process_time() - c, time.perf_counter() - t))
                # Per-pulse widths off to measure the importer itself.
                t, c = time.perf_counter(), time.process_time()
                result[tag + "sr"] = sr_import(sr, max_pulses=0, **kw)
                runs.setdefault(tag + "sr", []).append(
                    (time.process_time() - c, time.perf_counter() - t))
        for key, times in runs.items():
            out[f"{key}_cpu_s"], out[f"{key}_s"] = min(times)
        mv, ms = result["vcd"], result["sr"]
        out["repeat"] = args.repeat
        out["sr_samples"] = ms.provenance["cycles"]
        out["agree"] = [c.classes for c in mv.counts] == [c.classes for c in ms.counts]
        if args.before:
            out["agree_before"] = all(
                same_counts(result[key], result["before_" + key]) and
                result[key].pulses == result["before_" + key].pulses for key in ("vcd", "sr"))
    # The per-transition work alone: the same edges, already extracted, through the model in
    # 4 M-cycle batches (what the importers do after finding the changes).
    classifiers = {"": importlib.import_module("rbscope.recordings").StreamClassifier}
    if args.before:
        before = importlib.import_module("rbscope_before.importers")
        classifiers["before_"] = before.StreamClassifier
    cfg, _ = kw["preset_config"](params, u * 1e-9, 1)
    arrays = [(np.array([c for c, _ in t.edges], dtype=np.int64),
               np.array([lv for _, lv in t.edges], dtype=np.int8)) for t in trains]
    step = 1 << 22
    for _ in range(args.repeat):
        for tag, classifier in classifiers.items():
            sc = classifier(params, cfg, u * 1e-9, [t.initial for t in trains], max_pulses=0)
            c = time.process_time()
            for lo in range(0, args.cycles, step):
                hi = min(lo + step, args.cycles)
                part = []
                for cyc, lev in arrays:
                    a, b = np.searchsorted(cyc, lo), np.searchsorted(cyc, hi)
                    part.append((cyc[a:b], lev[a:b]))
                sc.feed(hi, part)
            cpu = time.process_time() - c
            out[f"{tag}model_cpu_s"] = min(cpu, out.get(f"{tag}model_cpu_s", float("inf")))
    for tag in classifiers:
        out[f"{tag}model_edges_per_cpu_s"] = edges / out[f"{tag}model_cpu_s"]
    out["vcd_MB_per_s"] = out["vcd_bytes"] / out["vcd_s"] / 1e6
    out["vcd_edges_per_s"] = edges / out["vcd_s"]
    out["vcd_edges_per_cpu_s"] = edges / out["vcd_cpu_s"]
    out["sr_Msamples_per_s"] = out["sr_samples"] / out["sr_s"] / 1e6
    out["sr_edges_per_s"] = edges / out["sr_s"]
    out["sr_edges_per_cpu_s"] = edges / out["sr_cpu_s"]
    if args.before:
        for kind in ("vcd", "sr"):
            out[f"before_{kind}_edges_per_cpu_s"] = edges / out[f"before_{kind}_cpu_s"]
            out[f"{kind}_speedup_cpu"] = out[f"before_{kind}_cpu_s"] / out[f"{kind}_cpu_s"]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v:.4g}" if isinstance(v, float) else f"{k:>20}: {v}")
    return 0 if out["agree"] and out.get("agree_before", True) else 1


if __name__ == "__main__":
    sys.exit(main())

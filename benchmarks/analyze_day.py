"""Benchmark ``rbscope analyze`` streaming a long sequence capture (TRACE_BATCH records).

Writes the capture ``rbscope capture --trace --clear`` would write from a 64-channel device
(``SnifferParams(channels=64)``, 100 MHz, prescaler 100: a 1 µs tick; 100 ms snapshots) on the
64 dies of a drive whose every die runs an MLC mix of reads, two page types of programs and
erases under a daily load curve, then times ``rbscope analyze FILE --geometry G --json`` in a
subprocess (its wall time, CPU time and peak RSS, ``VmHWM``), on 2 cores.

Every record goes through :class:`~rbscope.device.capture.CaptureWriter` (``raw_frame``): the file
is byte for byte what the writer writes; the TRACE_BATCH payloads are packed with numpy to the
protocol's layout (``trace_batch_layout``: ``base`` then 32 record slots; a batch ends at 32
records or where a record leaves ``base``'s window of ``2**time`` ticks, as the gateware's
batcher does) and checked against the protocol's own decoder on the first frames.

Usage: ``python benchmarks/analyze_day.py [--minutes M] [--rate R] [--lines N] [--dir D]
[--keep] [--json]``; ``--generate-only`` writes the captures (with ``day.json``: what each holds
and the truth of its WA) and ``--analyze DIR…`` times their analysis later, on an idle machine.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rbscope.device import protocol as hp
from rbscope.device.capture import CaptureWriter
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.rb_sniffer.params import Counter, SnifferParams

CLOCK_HZ = 100_000_000
PRESCALER = 100  # 1 µs ticks
WINDOWS = (("cache", 1.5, 12.0), ("read", 12.0, 150.0), ("program", 150.0, 2300.0),
           ("erase", 2300.0, 20000.0))


def _encoder(params, ftype):
    layout = PROTOCOL.payload_layout(params, ftype)
    return hp.compile_encoder(layout), wire.layout_bytes(layout)


def pack_batches(params, channel, width, end_tick):
    """TRACE_BATCH payloads of records in classification order: ``[(first tick, payload)]``."""
    rec = wire.trace_record_layout(params)
    layout = PROTOCOL.payload_layout(params, FrameType.TRACE_BATCH)
    slots = layout["records"].shape.length
    rb, nb = rec.size // 8, layout["base"].width // 8
    tb = rec["time"].width
    n = len(end_tick)
    if not n:
        return []
    group = end_tick >> tb
    new = np.r_[True, group[1:] != group[:-1]]
    start_of = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    pos = np.arange(n) - start_of
    new |= pos % slots == 0
    batch = np.cumsum(new) - 1
    slot = pos % slots
    nbatch = int(batch[-1]) + 1
    empty = np.uint64(wire.TRACE_EMPTY_KIND << rec["kind"].offset)
    bits = np.full((nbatch, slots), empty, dtype=np.uint64)
    value = ((np.uint64(0) << np.uint64(rec["kind"].offset))  # END
             | (channel.astype(np.uint64) << np.uint64(rec["channel"].offset))
             | (width.astype(np.uint64) << np.uint64(rec["width"].offset))
             | ((end_tick.astype(np.uint64) & np.uint64((1 << tb) - 1))
                << np.uint64(rec["time"].offset)))
    bits[batch, slot] = value
    base = end_tick[np.flatnonzero(new)].astype(np.uint64)
    out = np.zeros((nbatch, nb + slots * rb), dtype=np.uint8)
    out[:, :nb] = base.view(np.uint8).reshape(nbatch, 8)[:, :nb]
    out[:, nb:] = bits.view(np.uint8).reshape(nbatch, slots, 8)[:, :, :rb].reshape(nbatch, -1)
    return [(int(t), out[i].tobytes()) for i, t in enumerate(base)]


def write_trace_capture(path, pulses, starts, *, params=None, period_ticks=100_000,
                        names=("cache", "read", "program", "erase"), lose=None):
    """Write a complete capture of the pulse trains ``{line: widths}``, ``{line: start ticks}``
    (1 µs ticks) as ``rbscope capture --trace --clear`` would from a device with ``params``:
    :func:`write_trace_spans` with one span."""
    return write_trace_spans(path, [(0, pulses, starts)], params=params,
                             period_ticks=period_ticks, names=names, lose=lose)


def write_trace_spans(path, spans, *, params=None, period_ticks=100_000,
                      names=("cache", "read", "program", "erase"), lose=None):
    """Write a complete capture of pulse trains that come a span of time at a time, in bounded
    memory (a day's capture needs only a span's pulses at once).

    ``spans``: an iterable of ``(first tick, {line: widths}, {line: start ticks})`` in time
    order (1 µs ticks), every start of a span at or after its first tick, which is at or after
    the previous span's. ``params``: the device's (default: 64 channels, or 16 when every line
    is below 16; then the first span must hold every line).

    ``lose``: ``{line: (from tick, to tick)}``: that line's records in the span never arrive
    (the link's FIFO was full); its COUNTERS' ``trace_lost`` counts them. Returns the records
    written (TRACE_BATCH frames, pulses).
    """
    spans = iter(spans)
    nxt = next(spans, None)
    if nxt is None:
        raise ValueError("no span of pulses")
    lines = sorted(nxt[1])
    params = params or SnifferParams(channels=64 if max(lines) >= 16 else 16)
    k = params.classes
    Path(path).unlink(missing_ok=True)  # (CaptureWriter appends to an existing capture)
    enc = {t: _encoder(params, t) for t in (FrameType.INFO, FrameType.STATUS,
                                           FrameType.COUNTERS, FrameType.TRACE_BATCH)}

    def frame(ftype, values, seq):
        e, size = enc[ftype]
        return hp.frame_bytes(ftype, e(values).to_bytes(size, "little"), seq)

    lo_t = [round(lo / 1.0) for _, lo, _ in WINDOWS]
    hi_t = [round(hi / 1.0) for _, _, hi in WINDOWS]
    mask = sum(1 << c for c in lines)
    regs = {"PRESCALER": PRESCALER, "IDLE_TICKS_LO": 1_000_000, "IDLE_TICKS_HI": 0,
            "TRACE_ENABLE": 1}
    for i in range(-(-params.channels // 32)):
        regs[f"CHANNEL_ENABLE_{i}"] = mask >> (32 * i) & 0xFFFFFFFF
    for i, (a, b) in enumerate(zip(lo_t, hi_t, strict=True)):
        regs[f"WINDOW_{i}_LO"], regs[f"WINDOW_{i}_HI"] = a, b
    hi_arr = np.array(hi_t)

    # The pulses not yet written, in order of their end: (widths, lines, ends, sent, classes).
    held = tuple(np.zeros(0, dtype=np.int64) for _ in range(3)) + (
        np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64))
    last_end = None

    def take(span):
        nonlocal held, last_end
        _, pulses, starts = span
        ls = sorted(pulses)
        w_all = np.concatenate([np.asarray(pulses[c], dtype=np.int64) for c in ls])
        s_all = np.concatenate([np.asarray(starts[c], dtype=np.int64) for c in ls])
        c_all = np.concatenate([np.full(len(pulses[c]), c, dtype=np.int64) for c in ls])
        end = s_all + w_all + 1000  # (the device's time starts well after 0)
        sent = np.ones(len(end), dtype=bool)
        for c, (a, b) in (lose or {}).items():
            sent &= ~((c_all == c) & (end > a + 1000) & (end <= b + 1000))
        cls = np.searchsorted(np.array(lo_t), w_all, side="right") - 1
        cls = np.where((cls >= 0) & (w_all < hi_arr[np.maximum(cls, 0)]), cls, k)
        parts = tuple(np.concatenate([h, v]) for h, v in zip(
            held, (w_all, c_all, end, sent, cls), strict=True))
        order = np.argsort(parts[2], kind="stable")
        held = tuple(v[order] for v in parts)
        if len(end):
            last_end = max(int(end.max()), last_end or 0)

    seq = 0
    batches = 0
    written = 0
    with CaptureWriter(path, meta={"port": "synthetic", "argv": ["analyze_day.py"]}) as w:
        w.raw_frame(frame(FrameType.INFO, hp.info_values(params, clock_hz=CLOCK_HZ,
                                                          prescaler=PRESCALER), 0), 1)
        w.config({n: v for n, v in regs.items()}, time_ns=2)
        w.event("config", time_ns=3, preset="analyze_day", class_names=list(names),
                written=len(regs))
        w.event("clear", time_ns=4, epoch=1, previous=0)
        counts = np.zeros((params.channels, k + 1), dtype=np.int64)
        lost = np.zeros(params.channels, dtype=np.int64)
        i = 0
        while True:
            ts = 1000 + i * period_ticks
            # Every span that may hold a pulse ending by this snapshot (its starts are at or
            # after its first tick; the device's time is 1000 ticks ahead).
            while nxt is not None and nxt[0] + 1000 <= ts:
                take(nxt)
                nxt = next(spans, None)
            t_end = None if nxt is not None or last_end is None else (
                last_end + 2 * period_ticks + 1_000_000)  # (quiescent for a second)
            w_all, c_all, end, sent, cls = held
            upto = int(np.searchsorted(end, ts, side="right"))
            if upto:
                sel = slice(0, upto)
                np.add.at(counts, (c_all[sel], cls[sel]), 1)
                np.add.at(lost, c_all[sel][~sent[sel]], 1)
                keep = sent[sel]
                written += int(keep.sum())
                for t0, payload in pack_batches(params, c_all[sel][keep], w_all[sel][keep],
                                                end[sel][keep]):
                    seq += 1
                    batches += 1
                    w.raw_frame(hp.frame_bytes(FrameType.TRACE_BATCH, payload, seq),
                                time_ns=t0 * 1000)
                held = tuple(v[upto:] for v in held)
            last = t_end is not None and ts >= t_end
            seq += 1
            w.raw_frame(frame(FrameType.STATUS, {
                "snapshot": i & 0xFFFF, "timestamp": int(ts), "epoch": 1,
                "quiet_since": int(last_end) if last else 0,
                "flags": int(StatusFlags.QUIESCENT) if last else 0}, seq),
                time_ns=int(ts) * 1000)
            for c in range(params.channels):
                row = [0] * params.counters_per_channel
                row[:k] = counts[c, :k].tolist()
                row[k + Counter.UNCLASSIFIED] = int(counts[c, k])
                seq += 1
                w.raw_frame(frame(FrameType.COUNTERS, {
                    "snapshot": i & 0xFFFF, "channel": c, "timestamp": int(ts), "epoch": 1,
                    "trace_lost": int(lost[c]), "counters": tuple(row)}, seq),
                    time_ns=int(ts) * 1000)
            if last:
                break
            i += 1
        w.event("stop", time_ns=int(ts) * 1000 + 1, reason="quiescent", link={},
                queue_overflow=0)
    return batches, written


def day_trains(lines, seconds, mean_rate, *, seed=1, t0=0.0, programs=None):
    """Per-line pulse trains of an MLC die (µs ticks): reads 45–95 µs, lower pages 250–500 µs
    and upper pages ~1.3 ms (equal numbers), an erase per 128 programs, a tDBSY before each
    program and erase on a two-plane die; the rate follows a daily load curve of mean
    ``mean_rate`` pulses per second from ``t0`` seconds into the day. ``programs``: a dict
    the number of programs of each line is added to (the truth of the WA)."""
    rng = np.random.default_rng(seed)
    out_w, out_s = {}, {}
    for c in lines:
        t = np.arange(0.0, seconds, 1.0)
        load = 0.6 - 0.4 * np.cos(2 * np.pi * (t + t0) / 86400.0)
        per_s = rng.poisson(mean_rate * load / 0.6 * 0.5)  # operations (a tDBSY precedes half)
        n = int(per_s.sum())
        sec = np.repeat(t, per_s)
        u = rng.random(n)
        op = np.where(u < 0.6, 0, np.where(u < 0.6 + 0.4 * 128 / 129, 1, 2))  # read, prog, erase
        upper = rng.random(n) < 0.5
        if programs is not None:
            programs[c] = programs.get(c, 0) + int((op == 1).sum())
        wd = np.where(op == 0, rng.uniform(45, 95, n),
                      np.where(op == 2, rng.normal(3800, 114, n),
                               np.where(upper, np.clip(rng.normal(1300, 200, n), 700, 2200),
                                        rng.uniform(250, 500, n))))
        # Each program or erase is announced by a tDBSY (0.5–1 µs) 5 µs before it.
        pos = np.sort(sec * 1e6 + rng.uniform(0, 1e6 - 5000, n))
        wd = np.maximum(wd, 1).astype(np.int64)
        st = pos.astype(np.int64)
        # No overlaps: a pulse starts after the previous ends (plus a 20 µs transfer).
        st = np.maximum.accumulate(np.maximum(st, np.r_[0, st[:-1] + wd[:-1] + 20]))
        st = _no_overlap(st, wd)
        ann = op > 0
        dw = np.ones(int(ann.sum()), dtype=np.int64)
        ds = st[ann] - 6
        w = np.concatenate([wd, dw])
        s = np.concatenate([st, ds])
        o = np.argsort(s, kind="stable")
        out_w[c], out_s[c] = w[o], s[o]
    return out_w, out_s


def _no_overlap(st, wd):
    """Starts pushed so that each pulse begins 20 µs (plus room for a tDBSY) after the last."""
    st = st.copy()
    gap = 30
    for _ in range(50):
        prev_end = np.r_[-10**9, st[:-1] + wd[:-1]]
        bad = st < prev_end + gap
        if not bad.any():
            break
        st = np.maximum(st, prev_end + gap)
        st = np.maximum.accumulate(st)
    return st


def run_analyze(path, geometry, *, extra=()):
    """``rbscope analyze`` in a subprocess: ``(wall s, cpu s, peak RSS MiB, JSON, peak RSS MiB
    of its own child processes)`` (the CPU time is the subprocess's and its children's: the
    processes that read a large capture ahead)."""
    cmd = [sys.executable, "-c",
           "import sys,resource\nfrom rbscope.cli import main\nrc=main(sys.argv[1:])\n"
           "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0], "
           "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
           "file=sys.stderr)\nsys.exit(rc)",
           "analyze", str(path), "--geometry", str(geometry), "--json", "--stream", "always",
           *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"analyze failed ({p.returncode}): {p.stderr[-2000:]}")
    hwm_kib, child_kib = (int(x) for x in p.stderr.strip().splitlines()[-1].split())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, hwm_kib / 1024, json.loads(p.stdout), child_kib / 1024


#: The WA the synthetic drive's host writes give: their volume is the programs' bytes over it.
WA_TRUE = 2.5
#: Seconds of pulses generated at a time (bounded memory whatever the capture's length).
SPAN_S = 60.0

#: The drive ``day_trains`` models: a two-plane erase per 128 two-plane programs fills a block
#: of 128 pages in each plane (with more pages per block its erases would be twice the blocks
#: its programs fill, and the interval's upper end would take the programs those erases allow).
GEOMETRY = """\
name = "day-64"
description = "64 two-plane MLC dies (analyze_day.py)"

[geometry]
channels = 8
chips_per_channel = 4
dies_per_chip = 2
planes_per_die = 2
page_size = 16384
program_model = "multi-plane"
pages_per_block = 128
cell = "mlc"
"""


def generate(minutes, *, rate, lines, directory):
    """Write a capture of ``minutes`` of ``lines`` dies (and its geometry) into a new directory
    under ``directory``, with ``day.json`` beside it: what the capture holds and the truth of
    its WA, so that the analysis can be run again alone (``--analyze DIR``). Returns the
    directory."""
    d = Path(tempfile.mkdtemp(dir=directory, prefix="rbscope-day-"))
    path, geo = d / "day.rbcap", d / "day.toml"
    geo.write_text(GEOMETRY)
    t = time.perf_counter()
    programs = {}
    n = 0

    def spans():
        # A minute of every line's pulses at a time: a day's capture in bounded memory.
        nonlocal n
        done = 0.0
        while done < minutes * 60:
            span = min(SPAN_S, minutes * 60 - done)
            pw, ps = day_trains(list(range(lines)), span, rate, seed=int(done) + 1,
                                t0=12 * 3600 + done, programs=programs)
            n += sum(len(v) for v in pw.values())
            yield int(done * 1e6), pw, {c: v + int(done * 1e6) for c, v in ps.items()}
            done += span

    batches, _ = write_trace_spans(path, spans())
    # The host's writes: the programs' bytes (two planes of 16 KiB each) over WA_TRUE, the
    # drive's 64 dies each programming what the probed ones did on average.
    physical = sum(programs.values()) * 2 * 16384 * 64 / lines
    truth = {"minutes": minutes, "lines": lines, "rate": rate, "pulses": n,
             "programs": sum(programs.values()), "physical_bytes": physical,
             "logical_bytes": round(physical / WA_TRUE), "batches": batches,
             "file_bytes": path.stat().st_size, "generate_s": time.perf_counter() - t}
    (d / "day.json").write_text(json.dumps(truth, indent=1) + "\n")
    return d


def analyze(d):
    """Time ``rbscope analyze`` on the capture in ``d`` (from :func:`generate`): the row."""
    d = Path(d)
    try:
        truth = json.loads((d / "day.json").read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"{d}: no readable day.json beside the capture ({e})") from None
    n, lines, minutes = truth["pulses"], truth["lines"], truth["minutes"]
    logical = truth["logical_bytes"]
    wa_truth = truth["physical_bytes"] / logical
    wall, cpu, rss, out, child_rss = run_analyze(d / "day.rbcap", d / "day.toml",
                                                 extra=("--logical", str(logical)))
    wa = out["wa"]
    return {"minutes": minutes, "lines": lines, "pulses": n,
            "pulses_per_s_per_die": n / (minutes * 60) / lines,
            "file_bytes": truth["file_bytes"], "batches": truth["batches"],
            "generate_s": truth["generate_s"], "analyze_wall_s": wall,
            "analyze_cpu_s": cpu, "peak_rss_mib": rss, "child_peak_rss_mib": child_rss,
            "pulses_per_wall_s": n / wall, "pulses_per_cpu_s": n / cpu,
            "wa_truth": wa_truth, "wa": wa,
            "wa_error": None if not wa else wa["value"] / wa_truth - 1,
            "wa_confidence_95": out.get("wa_confidence_95"),
            "streamed": out.get("streaming") is not None,
            "drift": (out.get("streaming") or {}).get("drift")}


def _print(row, as_json):
    wa = row["wa"]
    print(json.dumps(row) if as_json else
          f"{row['minutes']:g} min, {row['lines']} lines: {row['pulses']:,} pulses "
          f"({row['pulses_per_s_per_die']:.0f}/s per die), {row['file_bytes'] / 1e9:.2f} GB; "
          f"analyze {row['analyze_wall_s']:.1f} s wall, {row['analyze_cpu_s']:.1f} s CPU, "
          f"{row['peak_rss_mib']:.0f} MiB peak ({row['child_peak_rss_mib']:.0f} MiB in its "
          f"read-ahead processes), {row['pulses_per_wall_s']:,.0f} pulses/s; streamed "
          f"{row['streamed']}; WA {wa['value'] if wa else None} "
          f"(truth {row['wa_truth']:.4f})", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, nargs="+", default=[10.0])
    ap.add_argument("--rate", type=float, default=500.0, help="mean pulses/s per die")
    ap.add_argument("--lines", type=int, default=64)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the capture (and day.json)")
    ap.add_argument("--generate-only", action="store_true",
                    help="write the captures, print their directories and stop (implies --keep)")
    ap.add_argument("--analyze", metavar="DIR", nargs="+",
                    help="time the analysis of captures written before (--generate-only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.analyze:
        for d in args.analyze:
            _print(analyze(d), args.json)
        return 0
    for minutes in args.minutes:
        d = generate(minutes, rate=args.rate, lines=args.lines, directory=args.dir)
        if args.generate_only:
            print(d, flush=True)
            continue
        _print(analyze(d), args.json)
        if not args.keep:
            for f in ("day.rbcap", "day.toml", "day.json"):
                (d / f).unlink()
            d.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The pulse stream at full load: what each board's link carries of TRACE records, measured on
the Verilator device.

For each board at its full channel count, clock and UART divisor (the build's), the simulated
device (the board's gateware minus the pins: ``rbscope.device.simdevice.SimDevice``) gets on
every R/B# pin a pulse train of the reference SSD's widths (its run's pulses in order:
``ssd-v`` steady state, random 4 KiB writes: reads, programs and erases) placed at a fixed rate
per die, and the host captures with TRACE records on (``rbscope capture --trace --clear``'s
sequence: trace enabled, counters cleared, snapshots at the board's default 100 ms):

* ``overload``: 4 × the rate the link is expected to carry (as far as the widths allow). The
  records delivered per second from the first loss on are what the link carries
  (``capacity``) when it saturated, i.e. when records kept being lost; where the widths cannot
  offer that much (a loss in a momentary overflow), they are only the offered rate. The first
  pulse without a record (the model's pulses matched with the records) says when the FIFO
  first overflowed;
* ``sustained``: 90 % of the measured capacity spread over the dies, then half that, and so on
  until nothing is lost and the capture's sequence (``capture_to_measurement``) is complete:
  the highest rate per die the rig streams losslessly. (A snapshot's frames hold the link for
  5 ms at 16 channels and 20 ms at 64: with the iCEBreaker's 16-record FIFO that, not the
  link's average, binds; the ECP5 boards' 4 096-record FIFO rides it out, and a burst above
  the link's rate fills it in about 4 096 records ÷ the excess rate.)

Usage::

    python benchmarks/full_load.py [--boards icebreaker,ulx3s,ecpix5] [--seconds S]
        [--json out.json] [--markdown out.md]
"""

import argparse
import dataclasses
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rbscope import refssd
from rbscope.analysis.geometry import parse_geometry
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.pipeline import AnalysisRequest, analyse
from rbscope.boards.build import board_class
from rbscope.boards.top import uart_divisor
from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.device import Device
from rbscope.device.protocol import trace_records
from rbscope.device.simdevice import SimDevice
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.counters import TRACE_FIFO_DEPTH
from rbscope.gateware.link.summary import COUNT_MAX, SUMMARY_KIND
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import EventKind


def _build(name):
    """``(channels, clock, UART divisor)`` of a board's build, from its class (the clock over
    the class's ``uart_baud``: 25/3 for the ECPIX-5's 12 Mbaud, a fraction)."""
    cls = board_class(name)
    return cls.default_channels, cls.target_hz, uart_divisor(cls(), cls.target_hz)


#: The boards' builds: channels, system clock, UART divisor (``boards/*.py``).
BOARDS = {name: _build(name) for name in ("icebreaker", "ulx3s", "ecpix5")}


def board_params(board, channels=None):
    """The sniffer parameters of the board's build (its channels, its ``width_bits``)."""
    return SnifferParams(channels=channels or BOARDS[board][0],
                         width_bits=board_class(board).width_bits)


def trace_depth(board):
    """The trace FIFO's depth of the board's build (its class's ``trace_depth``, else the
    link's default)."""
    return getattr(board_class(board), "trace_depth", TRACE_FIFO_DEPTH)


def device_options(board):
    """The simulated device's options that make it the board's build: its trace FIFO's depth,
    and whether TRACE_BATCH frames go between a burst's frames (a board class's
    ``trace_batches_in_bursts``)."""
    return {"trace_depth": trace_depth(board),
            "batches_in_bursts": getattr(board_class(board), "trace_batches_in_bursts", True),
            "trace_summary": getattr(board_class(board), "trace_summary", False)}


#: Snapshot period of the board builds (ms).
SNAPSHOT_MS = 100


def batch_wire_bytes(params):
    """Bytes on the wire per pulse record in full TRACE_BATCH frames (header, payload, CRC, one
    delimiter, with the 2/256 of random bytes that byte stuffing escapes)."""
    payload = wire.layout_bytes(wire.trace_batch_layout(params))
    frame = wire.layout_bytes(wire.HEADER) + payload + 4 + 1
    return frame * (1 + 2 / 256) / wire.TRACE_BATCH_RECORDS


#: The pulse trains' widths: a reference SSD preset in steady state under one of the paper's
#: micro-benchmarks (name → preset, workload, preset keywords).
WORKLOADS = {
    # random 4 KiB writes on the paper's SSD-V: reads (GC), programs, erases
    "ssd-v-random": ("ssd-v", "4K-RD-100%-W-4KiB-align",
                     {"blocks_per_plane": 64, "pages_per_block": 64}),
    # a heavy-GC TLC drive: three page types, 0.4-4 ms programs
    "tlc-gc-random": ("tlc-gc", "4K-RD-100%-W-4KiB-align", {}),
    # a cache-program drive, half the requests reads: short pulses (tCBSY, tR) in the majority
    "cache-prog-50r": ("cache-prog", "4K-RD-50%-W-4KiB-align",
                       {"blocks_per_plane": 64, "pages_per_block": 64}),
    # read-heavy on SSD-V: half the requests reads
    "ssd-v-50r": ("ssd-v", "4K-RD-50%-W-4KiB-align",
                  {"blocks_per_plane": 64, "pages_per_block": 64}),
    # a read burst on the cache-program drive: 49 reads to a write (the widths' 10th to 90th
    # percentiles 28-56 µs, tR), which offer 10 500 pulses a second per die back to back: the
    # issue's 4 x 2 000/s
    "cache-prog-98r": ("cache-prog", "4K-RD-2%-W-4KiB-align",
                       {"blocks_per_plane": 64, "pages_per_block": 64}),
}


def widths_us(count, seed=1, workload="ssd-v-random"):
    """``count`` pulse widths (µs, in order) of the reference SSD's dies under ``workload``
    (:data:`WORKLOADS`) in steady state, repeated as needed."""
    preset, micro, kwargs = WORKLOADS[workload]
    drive = refssd.preset(preset, **kwargs)
    work = refssd.micro(micro, drive.logical_bytes, 2 << 20, seed=seed)
    run = refssd.simulate(drive, work, seed=seed, precondition="steady")
    w = np.concatenate([p["width_ns"] / 1000.0 for p in run.pulses])
    return np.resize(w, count)


def spacing_us(rate, widths):
    """The least spacing (µs) from one pulse's start to the next that makes ``rate`` pulses a
    second on average, a pulse longer than it delaying the next by its width and 2 µs (as a busy
    die would); 0 (back to back: the most the widths allow) when no spacing is short enough."""
    busy = np.asarray(widths) + 2.0
    want = 1e6 / rate
    if busy.mean() >= want:
        return 0.0
    lo, hi = 0.0, want
    for _ in range(60):
        mid = (lo + hi) / 2
        if np.maximum(mid, busy).mean() < want:
            lo = mid
        else:
            hi = mid
    return lo


def trains_at(channels, clock_hz, rate, seconds, widths, peak=False):
    """One train per channel: the widths in order, ``rate`` pulses a second on average where the
    widths allow (:func:`spacing_us`; a pulse longer than the spacing delays the next, as a busy
    die would), each channel offset a little. With ``peak`` a die starts a pulse every
    ``1/rate`` seconds wherever its widths allow (the same delays), so that ``rate`` is the
    most it makes in any stretch and its average is lower; without, the short pulses' stretches
    run faster than ``rate`` to make up for the long pulses' (13 700/s a die for an average of
    8 000 on ``cache-prog-98r``)."""
    cyc_us = clock_hz // 1_000_000
    period = (1e6 / rate if peak else spacing_us(rate, widths)) * cyc_us
    end = int(seconds * clock_hz)
    out, k = [], 0
    for ch in range(channels):
        edges, t = [], 1000 + 97 * ch
        while True:
            w = max(2, int(widths[k % len(widths)] * cyc_us))
            if t + w + 2 >= end:
                break
            edges += [(t, 0), (t + w, 1)]
            k += 1
            t = max(t + period, t + w + 2 * cyc_us)
            t = int(t)
        out.append(Train(1, edges))
    return out


#: The class window of the trains' reads (12-150 µs: tR), which ``--summarise`` asks the
#: device's trace summariser for.
READ_WINDOW = 1


def run_one(board, rate, seconds, widths, build_root, log=print, channels=None, peak=False,
            summarise=False):
    """One capture at ``rate`` pulses/s per die on every line (``channels``: the board's build
    with fewer lines, else its own count; ``peak``: :func:`trains_at`; ``summarise``: the
    device sends runs of reads as first, count and last, ``docs/link.md`` "Trace summary")."""
    full, clock_hz, divisor = BOARDS[board]
    channels = channels or full
    params = board_params(board, channels)
    cyc_us = clock_hz // 1_000_000
    # Windows in 1 µs ticks (prescaler: one tick a µs, as the presets configure the boards).
    config = SnifferConfig(prescaler=cyc_us, glitch_ticks=1, idle_ticks=20_000,
                           windows=((2, 12), (12, 150), (150, 1950), (1950, 12_000)))
    trains = trains_at(channels, clock_hz, rate, seconds, widths, peak=peak)
    pulses_in = sum(len(t.edges) // 2 for t in trains)
    ticks = int(seconds * 1e6)
    glitch = params.counter_index(Counter.GLITCH)
    depth = trace_depth(board)
    # The records the pulses make (one per pulse that is not a glitch), and how long the FIFO
    # may take to drain after them (its depth at the link's rate, twice over).
    want = sum(q.index != glitch for q in SnifferModel(params, config.validate(params)).run(
        trains, int(seconds * clock_hz) + 40_000 * cyc_us).pulses)
    drain_ticks = int(2 * depth * batch_wire_bytes(params) * 10 * divisor / clock_hz * 1e6)
    with tempfile.TemporaryDirectory() as tmp, \
            SimDevice(params, config, trains, clock_hz=clock_hz, uart_divisor=divisor,
                      snapshot_ms=SNAPSHOT_MS, build_root=build_root,
                      **device_options(board)) as sim:
        path = Path(tmp) / "load.rbcap"
        began = time.monotonic()
        records = []
        represented = [0]  # the pulses the records stand for (a SUMMARY: its count)
        with CaptureWriter(path) as writer:
            # Generous: a 100 MHz device simulates at a few hundred thousand cycles a second,
            # and a 64-channel snapshot is 2 M cycles of link time.
            dev = Device(str(sim.link), timeout=120, retries=3)
            try:
                dev.attach_capture(writer)
                if summarise:
                    dev.summarise_trace(1 << READ_WINDOW)
                dev.enable_trace(True)
                dev.clear()
                start = dev.snapshot().timestamp
                lost_at, seen = [], None
                for _, f in dev.frames(duration=None):
                    records += _records_of(f, params, represented)
                    snap = dev.latest_snapshot
                    if snap is not None and snap is not seen:
                        # When records were lost: each snapshot whose total moved (ms after
                        # the clear, records lost in all).
                        seen = snap
                        if snap.status.trace_lost != (lost_at[-1][1] if lost_at else 0):
                            lost_at.append([(snap.timestamp - start) / 1e3,
                                            snap.status.trace_lost])
                    if snap is not None and snap.timestamp > ticks + 30_000 and \
                            dev.is_quiescent():
                        break
                final = dev.snapshot()
                # The FIFO's last records: until every pulse has its record or is counted lost
                # (a deep FIFO drains for a while), within the drain time of device time.
                for _, f in dev.frames(duration=None if depth > TRACE_FIFO_DEPTH else 1.0):
                    records += _records_of(f, params, represented)
                    snap = dev.latest_snapshot
                    if represented[0] + final.status.trace_lost >= want or (
                            snap is not None and snap.timestamp > final.timestamp + drain_ticks):
                        break
            finally:
                dev.close()
        wall = time.monotonic() - began
        if os.environ.get("RBSCOPE_KEEP_CAPTURE"):
            shutil.copy(path, os.environ["RBSCOPE_KEEP_CAPTURE"])
        m = capture_to_measurement(path)
        truth = sim.truth(int(seconds * clock_hz) + 40_000 * cyc_us)
        rig_95 = []
        same, wa = rig_against_recording(m, truth, params, cyc_us, Path(tmp),
                                         window=m.config.windows[READ_WINDOW]
                                         if summarise else None, intervals=rig_95)
    lost = final.status.trace_lost
    seq = m.provenance.get("sequence", {})
    # The first pulse (after the clear) with no record: the model's pulses against the records.
    got = {}
    for ch, ts in records:
        got.setdefault(ch, set()).add(ts)
    first_missing = None
    latency = 4 * (channels + 1) + 16  # cycles: a pulse's end to its record's time, at most
    for q in (truth.pulses if lost else ()):  # (a summarised pulse has no record of its own)
        if q.index == glitch or q.kind != EventKind.END:
            continue
        end_tick = q.end_cycle // cyc_us
        if end_tick <= start + 5:
            continue
        mine = got.get(q.channel, ())
        if not any(t in mine for t in range(end_tick, (q.end_cycle + latency) // cyc_us + 2)):
            first_missing = end_tick if first_missing is None else min(first_missing,
                                                                        end_tick)
    # What the link delivered while the FIFO was full: the records classified from the first
    # loss to the end of the pulses, over that time (a record leaves within the FIFO's drain
    # time of its classification: 16 records, about 2 ms at 3 Mbaud).
    delivered = None
    if first_missing is not None and start + ticks - first_missing > 0.02 * 1e6 * seconds:
        n = sum(first_missing <= t <= start + ticks for _, t in records)
        delivered = n / ((start + ticks - first_missing) / 1e6)
    row = {
        "board": board, "channels": channels, "clock_hz": clock_hz, "divisor": str(divisor),
        "baud": float(clock_hz / divisor), "rate_per_die": rate, "seconds": seconds,
        "offered_per_die": pulses_in / seconds / channels, "peak": peak,
        "pulses": pulses_in, "records": len(records), "lost": lost,
        "summarise": summarise, "summarised": sum(m.pulses_summarised.values()),
        "delivered_per_s": delivered,
        "first_loss_ms": None if first_missing is None else (first_missing - start) / 1e3,
        "lost_at": lost_at,
        "complete": bool(seq.get("complete")), "sequence_why": seq.get("why"), "wall_s": wall,
        "lines_equal_to_recording": same, "wa_rig": wa[0], "wa_recording": wa[1],
        "wa_difference": None if None in wa else wa[0] / wa[1] - 1,
        # (The rig's 95 % interval, and whether it holds the recording's WA.)
        "wa_rig_95": list(rig_95[0]) if rig_95 else None,
        "rig_95_holds_recording": (rig_95[0][0] <= wa[1] <= rig_95[0][1])
        if rig_95 and wa[1] is not None else None,
    }
    log(f"  {board} {row['offered_per_die']:,.0f}/s/die: {len(records):,} records"
        + (f" ({row['summarised']:,} pulses summarised)" if summarise else "")
        + f", {lost:,} lost, delivered from the first loss on "
        + ("-" if row["delivered_per_s"] is None else f"{row['delivered_per_s']:,.0f}/s")
        + ", sequence "
        f"{'complete' if row['complete'] else 'incomplete'}, {same} of {channels} lines "
        f"the recording's pulses, WA rig {_fmt(wa[0])} recording {_fmt(wa[1])} "
        f"({wall:.0f} s)")
    return row


def _summarised_form(recording, got, window, slack=2):
    """Whether ``got`` is ``recording`` less some pulses in ``window`` (``(lo, hi)`` ticks),
    each between two pulses of the window (the middle of a run); both are ``(width, start)``
    pairs, the starts ``slack`` ticks apart at most (the pipeline's latency)."""
    lo, hi = window
    inside = [lo <= w < hi for w, _ in recording]
    j = 0
    for k, (w, st) in enumerate(recording):
        if j < len(got) and got[j][0] == w and abs(got[j][1] - st) <= slack:
            j += 1
        elif not (inside[k] and 0 < k < len(recording) - 1 and inside[k - 1] and inside[k + 1]):
            return False
    return j == len(got)


def _records_of(frame, params, represented):
    """A frame's pulse records as ``(channel, timestamp)``; ``represented[0]`` counts the pulses
    they stand for (a SUMMARY record its count, every other record but BUSY one)."""
    out = []
    for t in trace_records(frame, params):
        out.append((t.channel, t.timestamp))
        if t.kind == SUMMARY_KIND:
            represented[0] += t.width & COUNT_MAX
        elif t.kind != EventKind.BUSY:
            represented[0] += 1
    return out


def _fmt(value):
    return "-" if value is None else f"{value:.5f}"


#: The geometry the WA of the rig and of the recording are computed with (the pulses come from
#: the reference SSD's run, spread over the board's lines: one die a line, 8 KiB pages).
GEOMETRY_TOML = """
name = "full-load"
[geometry]
channels = 1
chips_per_channel = 1
dies_per_chip = {dies}
planes_per_die = 1
page_size = 8192
pages_per_block = 64
program_model = "single-plane"
"""


def rig_against_recording(m, truth, params, cycles_per_tick, tmp, window=None, intervals=None):
    """``(lines, (WA of the rig, WA of the recording))``: how many lines' pulse sequences in the
    capture (``m``) are exactly the recording's (the model's pulses of the same pins: the
    whole pulses of the capture's epoch, its last ones, each starting where the pin fell:
    the capture's starts are its records' times less the widths, the pipeline's latency later;
    with ``window``, the class window the device summarised, ``(lo, hi)`` ticks: the
    recording's less the pulses its SUMMARY records count, each of which lies in the window
    between two pulses of it that are in the sequence), and the WA that ``rbscope analyze``'s
    sequence classifier gives each with the same geometry and logical volume (the recording's
    program-window pulses × 4 KiB). ``intervals``: a list the rig's 95 % interval ``(lo, hi)``
    is appended to."""
    glitch = params.counter_index(Counter.GLITCH)
    recording, starts, same = {}, {}, 0
    for ch in range(params.channels):
        model = [q for q in truth.pulses
                 if q.channel == ch and q.index != glitch and q.kind == EventKind.END]
        got = [int(w) for w in m.pulses.get(ch, ())]
        n = len(got) + m.pulses_summarised.get(ch, 0)
        mine = model[len(model) - n:] if got else []
        recording[ch] = [q.width for q in mine]
        starts[ch] = [q.end_cycle // cycles_per_tick - q.width for q in mine]
        if window is None:
            same += bool(got) and recording[ch] == got
        else:
            same += bool(got) and _summarised_form(
                list(zip(recording[ch], starts[ch], strict=True)),
                list(zip(got, m.pulse_starts[ch], strict=True)), window)
    if not m.pulses:
        return same, (None, None)
    rec = dataclasses.replace(m, pulses=recording, pulse_starts=starts, pulses_lost={},
                              pulses_summarised={}, pulse_gaps_open={})
    geometry = parse_geometry(GEOMETRY_TOML.format(dies=params.channels))
    lo, hi = m.config.windows[2]
    programs = sum(lo <= w < hi for w in itertools.chain.from_iterable(recording.values()))
    logical = from_bytes(max(1, programs) * 4096)
    out = []
    for name, measurement in (("rig", m), ("recording", rec)):
        source = tmp / f"{name}.json"
        measurement.save(source, force=True)
        result = analyse(AnalysisRequest(source=str(source), geometry=geometry,
                                         logical=logical, classifier="sequence")).result
        out.append(result.wa.value)
        if name == "rig" and intervals is not None:
            conf = result.wa_confidence or result.wa
            intervals.append((conf.lo, conf.hi))
    return same, tuple(out)


def measure(board, seconds, build_root, log=print, search=True, workload="ssd-v-random"):
    channels, clock_hz, divisor = BOARDS[board]
    widths = widths_us(200_000, workload=workload)
    # The link's own arithmetic: a TRACE_BATCH frame's bytes on the wire (header, CRC, a
    # delimiter, typical byte stuffing: 2/256) over its records, ten bits a byte.
    expect = float(clock_hz / divisor) / 10 / batch_wire_bytes(board_params(board))
    over = run_one(board, 4 * expect / channels, seconds, widths, build_root, log)
    capacity = over["delivered_per_s"] or expect
    # The highest share of it the dies sustain with nothing lost: halving from 90 %.
    runs, sustained = [over], None
    share = 0.9
    while search and share > 0.01:
        run = run_one(board, share * capacity / channels, seconds, widths, build_root, log)
        runs.append(run)
        if not run["lost"] and run["complete"]:
            sustained = run
            break
        share /= 2
    return {"board": board, "channels": channels, "baud": float(clock_hz / divisor),
            "capacity_records_per_s": capacity,
            "sustained_per_die": None if sustained is None else sustained["offered_per_die"],
            "sustained_share": None if sustained is None else share,
            "tried": [(r["offered_per_die"], r["lost"]) for r in runs[1:]],
            "burst_rate_per_die": over["offered_per_die"],
            "burst_first_loss_ms": over["first_loss_ms"],
            "runs": runs}


def markdown(rows):
    out = ["| board | channels | link | records/s from the first loss on (the link's rate if it "
           "saturated) | lossless per die "
           "(share of the link) | lost at the rates tried above it (per die) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        above = "; ".join(f"{rate:,.0f} /s: {lost:,}" for rate, lost in r["tried"] if lost)
        ok = ("not searched" if not r["tried"] else "none found"
              if r["sustained_per_die"] is None else
              f"{r['sustained_per_die']:,.0f} /s ({r['sustained_share']:.0%})")
        out.append(f"| {r['board']} | {r['channels']} | {r['baud'] / 1e6:.2f} Mbaud | "
                   f"{r['capacity_records_per_s']:,.0f} | {ok} | {above or '–'} |")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boards", default="icebreaker,ulx3s,ecpix5")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="device time of the sustained run (the overload run: a third)")
    parser.add_argument("--build-root", default="build/full-load")
    parser.add_argument("--no-search", dest="search", action="store_false",
                        help="the overload run only (what the link carries)")
    parser.add_argument("--rate", type=float, metavar="R",
                        help="one run only, at R pulses per second per die (no overload run, no "
                             "search): whether the board streams that rate losslessly")
    parser.add_argument("--peak", action="store_true",
                        help="with --rate: R is each die's pace wherever its widths allow (a "
                             "pulse every 1/R s; longer pulses delay the next), not its average")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="ssd-v-random",
                        help="the reference SSD run whose pulse widths the trains take")
    parser.add_argument("--channels", type=int, metavar="N",
                        help="with --rate: the board's build with N lines instead of its own "
                             "count (what a board whose link binds sustains at fewer lines)")
    parser.add_argument("--summarise", action="store_true",
                        help="with --rate: the device sends runs of reads (the 12-150 µs "
                             "window) as first, count and last (the ECP5 boards' builds)")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args(argv)
    if args.summarise and args.rate is None:
        parser.error("--summarise needs --rate")
    if args.channels is not None and (args.rate is None or args.channels < 1):
        parser.error("--channels needs --rate and at least one line")
    if args.peak and args.rate is None:
        parser.error("--peak needs --rate")
    rows = []
    for board in args.boards.split(","):
        if board not in BOARDS:
            parser.error(f"unknown board {board!r} (one of {', '.join(BOARDS)})")
        print(f"{board}: {BOARDS[board][0]} channels, {BOARDS[board][1] / 1e6:g} MHz, "
              f"divisor {BOARDS[board][2]}", flush=True)
        if args.rate is not None:
            run = run_one(board, args.rate, args.seconds,
                          widths_us(200_000, workload=args.workload), args.build_root,
                          channels=args.channels, peak=args.peak, summarise=args.summarise)
            run["workload"] = args.workload
            rows.append({"board": board, "channels": args.channels or BOARDS[board][0],
                         "baud": float(BOARDS[board][1] / BOARDS[board][2]),
                         "trace_depth": trace_depth(board), "runs": [run]})
            continue
        rows.append(measure(board, args.seconds, args.build_root, search=args.search,
                            workload=args.workload))
    if args.rate is not None:
        for row in rows:
            run = row["runs"][0]
            print(f"{row['board']} ({row['channels']} lines): {run['offered_per_die']:,.0f} "
                  f"pulses/s per die offered, "
                  f"{run['records']:,} records, {run['lost']:,} lost, sequence "
                  f"{'complete' if run['complete'] else 'incomplete'}")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0
    table = markdown(rows)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

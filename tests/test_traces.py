"""TRACE records → each line's pulse sequence, checked against the counters
(``rbscope.device.traces``), and a capture's sequence through ``capture_to_measurement``."""

import numpy as np

from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.protocol import (
    Counters,
    Snapshot,
    Status,
    Trace,
    encode_payload,
    frame_bytes,
    info_values,
)
from rbscope.device.traces import PulseRecords
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.rb_sniffer import Counter, SnifferParams
from rbscope.gateware.rb_sniffer.params import EventKind

P = SnifferParams(channels=2, classes=4)


def row(end=0, overlong=0, partial=0):
    c = [0] * P.counters_per_channel
    c[0] = end  # all whole pulses in the first class window
    c[P.classes + Counter.OVERLONG] = overlong
    c[P.classes + Counter.PARTIAL] = partial
    return tuple(c)


def snap(ts, epoch, rows, lost=(0, 0), frame=0):
    """A snapshot whose STATUS is latched at ``ts`` and channel ``ch``'s COUNTERS frame starts
    ``frame × (ch + 1)`` ticks later."""
    return Snapshot(Status(0, b"", timestamp=ts, epoch=epoch),
                    [Counters(0, b"", channel=ch, timestamp=ts + frame * (ch + 1),
                              trace_lost=lost[ch], counters=r)
                     for ch, r in enumerate(rows)])


def rec(ch, end_ts, width, kind=EventKind.END):
    return Trace(0, b"", channel=ch, kind=int(kind), index=0, width=width, timestamp=end_ts)


def test_complete_sequences_give_widths_and_starts_in_order():
    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()]))
    for k in range(5):
        pr.trace(rec(0, 100 + 50 * k, 20 + k))
        pr.trace(rec(1, 120 + 50 * k, 30))
    pr.snapshot(snap(1000, 1, [row(5), row(5)]))
    pulses, starts, report = pr.sequences([0, 1])
    assert report["complete"] and report["records"] == 10
    assert list(pulses[0]) == [20, 21, 22, 23, 24]
    assert list(starts[0]) == [100 + 50 * k - (20 + k) for k in range(5)]
    assert list(starts[1]) == [90 + 50 * k for k in range(5)]
    assert report["lines"]["1"] == {"records": 5, "counted": 5, "lost": 0, "edge": 0}


def test_a_lost_record_makes_the_line_incomplete_and_says_so():
    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()], lost=(7, 0)))  # losses before the epoch: not ours
    for k in range(4):
        pr.trace(rec(0, 100 + 50 * k, 20))
        pr.trace(rec(1, 100 + 50 * k, 20))
    pr.snapshot(snap(1000, 1, [row(5), row(4)], lost=(8, 0)))
    pulses, starts, report = pr.sequences([0, 1])
    assert not report["complete"] and pulses == {} and starts == {}
    assert report["lines"]["0"]["lost"] == 1
    assert "line 0: 1 pulse record(s) lost" in report["why"]
    assert "why" not in report["lines"]["1"]


def test_records_missing_without_a_loss_count_are_found_by_the_counts():
    # Records enabled late: the counters hold more pulses than there are records.
    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()]))
    pr.trace(rec(0, 100, 20))
    pr.snapshot(snap(1000, 1, [row(3), row()]))
    _, _, report = pr.sequences([0, 1])
    assert not report["complete"]
    assert "2 of its 3 pulses have no record" in report["lines"]["0"]["why"]


def test_the_previous_epochs_records_are_left_out():
    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()]))
    pr.trace(rec(0, 50, 9))  # counted by epoch 1's snapshot at 60
    pr.snapshot(snap(60, 1, [row(1), row()]))
    pr.trace(rec(0, 70, 8))  # epoch 1, after its last snapshot (the clear came at 75)
    pr.trace(rec(0, 80, 7))  # epoch 2, before its first snapshot
    pr.snapshot(snap(90, 2, [row(1), row()]))
    pr.trace(rec(0, 200, 6))
    pr.snapshot(snap(300, 2, [row(2), row()]))
    pulses, _, report = pr.sequences([0, 1])
    assert report["complete"], report
    assert list(pulses[0]) == [7, 6]


def test_a_pulse_counted_while_the_row_was_read_is_placed_by_the_counts():
    # The clear came at 75; the epoch's first snapshot (STATUS at 90, rows read up to 130)
    # counted its pulse of 80 and also that of 110, classified while its row was being sent.
    pr = PulseRecords(P)
    pr.snapshot(snap(60, 1, [row(1), row()]))
    for t, w in ((50, 9), (70, 8), (80, 7), (110, 6), (200, 5)):
        pr.trace(rec(0, t, w))
    pr.snapshot(snap(90, 2, [row(2), row()], frame=20))
    pr.snapshot(snap(300, 2, [row(3), row()], frame=20))
    pulses, _, report = pr.sequences([0])
    assert report["complete"], report
    assert list(pulses[0]) == [7, 6, 5] and report["lines"]["0"]["edge"] == 0
    # Had the first snapshot not counted the pulse of 110 (read just before it), the counts
    # would place the run the same way.
    pr = PulseRecords(P)
    pr.snapshot(snap(60, 1, [row(1), row()]))
    for t, w in ((50, 9), (70, 8), (80, 7), (110, 6), (200, 5)):
        pr.trace(rec(0, t, w))
    pr.snapshot(snap(90, 2, [row(1), row()], frame=20))
    pr.snapshot(snap(300, 2, [row(3), row()], frame=20))
    pulses, _, report = pr.sequences([0])
    assert list(pulses[0]) == [7, 6, 5]


def test_saturated_pulses_are_joined_and_partial_ones_left_out():
    pr = PulseRecords(P)
    pr.snapshot(snap(0, 1, [row(), row()]))
    pr.trace(rec(0, 100, 30))
    top = 200 + P.max_width  # the saturated pulse started at 200
    pr.trace(rec(0, top, P.max_width, EventKind.OVERLONG))
    pr.trace(rec(0, top + 1000, 1000, EventKind.BUSY))
    pr.trace(rec(0, top + 1500, 500, EventKind.BUSY))
    pr.trace(rec(0, top + 2000, 0, EventKind.PARTIAL))
    pr.trace(rec(0, top + 2100, 40))
    pr.snapshot(snap(top + 9000, 1, [row(2, overlong=1, partial=1), row()]))
    pulses, starts, report = pr.sequences([0, 1])
    assert report["complete"], report
    assert list(pulses[0]) == [30, P.max_width + 1500, 40]
    assert list(starts[0]) == [70, 200, top + 2060]
    # Records of each kind must match their counters: one saturated pulse not counted as such.
    pr2 = PulseRecords(P)
    pr2.snapshot(snap(0, 1, [row(), row()]))
    pr2.trace(rec(0, 100, 30))
    pr2.trace(rec(0, 200, 30))
    pr2.snapshot(snap(9000, 1, [row(1, overlong=1), row()]))
    _, _, report = pr2.sequences([0])
    assert not report["complete"] and "records of each kind" in report["why"]


def test_a_bounded_store_says_it_was_truncated():
    pr = PulseRecords(P, max_records=3)
    pr.snapshot(snap(0, 1, [row(), row()]))
    for k in range(5):
        pr.trace(rec(0, 100 + 10 * k, 5))
    pr.snapshot(snap(9000, 1, [row(5), row()]))
    pulses, _, report = pr.sequences([0, 1])
    assert pulses == {} and report["truncated"] and not report["complete"]


def _capture(path, lose=False):
    """A small capture: INFO, windows, two snapshots, TRACE records of 60 pulses per line."""
    widths = {ch: [10 + (7 * k + 3 * ch) % 50 for k in range(60)] for ch in range(P.channels)}
    with CaptureWriter(path, meta={"port": "test"}) as w:
        w.raw_frame(frame_bytes(FrameType.INFO, encode_payload(
            None, FrameType.INFO, info_values(P, clock_hz=1_000_000))), time_ns=1)
        w.config({"PRESCALER": 1, "WINDOW_0_LO": 1, "WINDOW_0_HI": 1000,
                  "CHANNEL_ENABLE": 3}, time_ns=2)

        def snapshot(n, ts, counts, lost):
            w.raw_frame(frame_bytes(FrameType.STATUS, encode_payload(P, FrameType.STATUS, {
                "snapshot": n, "timestamp": ts, "epoch": 1,
                "flags": int(StatusFlags.QUIESCENT)}), n), time_ns=10 + n)
            for ch in range(P.channels):
                w.raw_frame(frame_bytes(FrameType.COUNTERS, encode_payload(
                    P, FrameType.COUNTERS, {
                        "snapshot": n, "channel": ch, "timestamp": ts, "epoch": 1,
                        "trace_lost": lost[ch], "counters": row(counts[ch])})), time_ns=10 + n)

        snapshot(0, 5, [0, 0], [0, 0])
        t = 100
        for k in range(60):
            for ch in range(P.channels):
                t += 100
                if lose and ch == 1 and k == 30:
                    continue
                w.raw_frame(frame_bytes(FrameType.TRACE, encode_payload(P, FrameType.TRACE, {
                    "channel": ch, "kind": int(EventKind.END), "index": 0,
                    "width": widths[ch][k], "timestamp": t})), time_ns=20)
        snapshot(1, t + 1000, [60, 60], [0, 1 if lose else 0])
    return widths


def test_a_capture_with_complete_records_gives_the_sequence(tmp_path):
    path = tmp_path / "c.rbcap"
    widths = _capture(path)
    m = capture_to_measurement(path)
    assert m.provenance["sequence"]["complete"]
    assert {ch: list(w) for ch, w in m.pulses.items()} == widths
    assert all(np.all(np.diff(np.asarray(m.pulse_starts[ch], dtype=float)) > 0) for ch in (0, 1))
    assert not [w for w in m.provenance["warnings"] if "pulse records" in w]
    m.to_json()  # the sequence is plain integers


def test_a_capture_that_lost_a_record_falls_back_and_warns(tmp_path):
    path = tmp_path / "c.rbcap"
    _capture(path, lose=True)
    m = capture_to_measurement(path)
    assert m.pulses == {} and not m.provenance["sequence"]["complete"]
    assert any("pulse records are incomplete (line 1: 1 pulse record(s) lost" in w
               for w in m.provenance["warnings"])

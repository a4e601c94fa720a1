"""TRACE records → each line's pulse sequence, checked against the counters
(``rbscope.device.traces``), and a capture's sequence through ``capture_to_measurement``."""

from array import array

import numpy as np
import pytest

from rbscope.analysis.measurement import Measurement
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
    assert report["lines"]["1"] == {"records": 5, "counted": 5, "lost": 0, "edge": 0,
                                    "missing": 0}


def test_a_summarised_run_opens_the_gap_before_its_last_pulse():
    from rbscope.gateware.link.summary import COUNT_BITS, LATE_KIND, SUMMARY_KIND

    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()]))
    pr.trace(rec(0, 100, 20))
    # A run of five: its first pulse, three summarised, its last (ended 50 ticks before the
    # records, at 450).
    pr.trace(rec(0, 500, 3 | 50 << COUNT_BITS, kind=SUMMARY_KIND))
    pr.trace(rec(0, 500, 20, kind=LATE_KIND))
    pr.trace(rec(0, 600, 20))
    pr.trace(rec(0, 700, 20))
    # A run of two: a SUMMARY of no pulse, the idle time before its last pulse is one gap.
    pr.trace(rec(0, 800, 0 | 10 << COUNT_BITS, kind=SUMMARY_KIND))
    pr.trace(rec(0, 800, 20, kind=LATE_KIND))
    pr.trace(rec(0, 900, 20))
    for k in range(9):
        pr.trace(rec(1, 100 + 50 * k, 30))
    pr.snapshot(snap(1000, 1, [row(9), row(9)]))
    pulses, starts, report = pr.sequences([0, 1])
    assert report["complete"] and report["summarised"] == 3
    assert list(starts[0]) == [80, 430, 580, 680, 770, 880]
    assert {ch: list(v) for ch, v in pr.gaps_open.items()} == {0: [1]}


def test_too_many_lost_records_make_the_line_unusable_and_say_so():
    pr = PulseRecords(P)
    pr.snapshot(snap(10, 1, [row(), row()], lost=(7, 0)))  # losses before the epoch: not ours
    for k in range(4):
        pr.trace(rec(0, 100 + 50 * k, 20))
        pr.trace(rec(1, 100 + 50 * k, 20))
    pr.snapshot(snap(1000, 1, [row(5), row(4)], lost=(8, 0)))
    pulses, starts, report = pr.sequences([0, 1])
    assert not report["usable"] and not report["complete"] and pulses == {} and starts == {}
    assert report["lines"]["0"]["lost"] == 1
    assert "line 0: 1 of its 5 pulses' records lost" in report["why"]
    assert "why" not in report["lines"]["1"]
    assert report["losses"] == [] or report["losses"] == [[10, 1000, 0, 1]]


def test_a_few_lost_records_leave_the_complete_stretches_as_the_sequence():
    # Snapshots every 1000 ticks; in (3000, 4000] line 0 lost 2 of its 10 pulses' records.
    pr = PulseRecords(P)
    pr.snapshot(snap(0, 1, [row(), row()]))
    n, lost, widths = 0, 0, []
    for t in range(1000, 10_001, 1000):
        for k in range(10):
            n += 1
            ts = t - 1000 + 50 + 90 * k
            pr.trace(rec(1, ts, 7))
            if 3000 < ts <= 4000 and k in (3, 4):
                lost += 1
                continue
            pr.trace(rec(0, ts, n))
            if not 3000 < ts <= 4000:
                widths.append(n)
        pr.snapshot(snap(t, 1, [row(n), row(n)], lost=(lost, 0)))
    pulses, starts, report = pr.sequences([0, 1])
    assert report["usable"] and not report["complete"] and report["lost"] == 2
    assert report["losses"] == [[3000, 4000, 0, 2]]
    line = report["lines"]["0"]
    assert (line["lost"], line["excluded"], line["missing"]) == (2, 8, 10)
    assert list(pulses[0]) == widths and len(pulses[1]) == 100
    assert "excluded" not in report["lines"]["1"]
    # The idle time before the first pulse after the stretch left out spans its pulses.
    assert {ch: list(v) for ch, v in pr.gaps_open.items()} == {0: [30]}


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


@pytest.mark.parametrize("first_count", [2, 1])
def test_a_pulse_counted_while_the_row_was_read_is_placed_by_the_counts(first_count):
    # The clear came at 75; the epoch's first snapshot (STATUS at 90, rows read up to 130)
    # counted its pulse of 80 and perhaps (first_count 2) that of 110, classified while its
    # row was being sent: the counts place the epoch's run the same way either way.
    pr = PulseRecords(P)
    pr.snapshot(snap(60, 1, [row(1), row()]))
    for t, w in ((50, 9), (70, 8), (80, 7), (110, 6), (200, 5)):
        pr.trace(rec(0, t, w))
    pr.snapshot(snap(90, 2, [row(first_count), row()], frame=20))
    pr.snapshot(snap(300, 2, [row(3), row()], frame=20))
    pulses, _, report = pr.sequences([0])
    assert report["complete"], report
    assert list(pulses[0]) == [7, 6, 5] and report["lines"]["0"]["edge"] == 0


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
    """A small capture: INFO, windows, a snapshot before and after every 5 pulses per line,
    TRACE records of 60 pulses per line (line 1 loses the record of its 31st with ``lose``)."""
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
            if k % 5 == 4:
                snapshot(k // 5 + 1, t + 50, [k + 1, k + 1], [0, int(lose and k >= 30)])
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


def test_a_capture_that_lost_a_record_keeps_its_complete_stretches(tmp_path):
    path = tmp_path / "c.rbcap"
    widths = _capture(path, lose=True)
    m = capture_to_measurement(path)
    seq = m.provenance["sequence"]
    assert seq["usable"] and not seq["complete"] and seq["lost"] == 1
    # Line 1's stretch of pulses 31-35 (one of them lost) is left out and counted as missing.
    assert list(m.pulses[1]) == widths[1][:30] + widths[1][35:] and m.pulses_lost == {1: 5}
    assert list(m.pulses[0]) == widths[0]
    assert any("the link lost 1 pulse record(s) (its FIFO was full) on line(s) 1" in w
               for w in m.provenance["warnings"])
    assert Measurement.from_json(m.to_json()).pulses_lost == {1: 5}


def test_a_capture_that_lost_too_many_records_falls_back_and_warns(tmp_path):
    path = tmp_path / "c.rbcap"
    _capture(path, lose=True)
    m = capture_to_measurement(path)
    assert m.provenance["sequence"]["usable"]
    with pytest.MonkeyPatch.context() as mp:  # the same records, a stricter limit: histograms
        mp.setattr("rbscope.device.traces.LOST_SHARE_MAX", 0.05)
        m = capture_to_measurement(path)
    assert m.pulses == {} and not m.provenance["sequence"]["usable"]
    assert any("pulse records are incomplete (line 1: 5 of its 60 pulses are in stretches "
               "where the link lost records" in w for w in m.provenance["warnings"])


def test_wa_bounds_the_pulses_missing_from_a_sequence():
    """The reference SSD's pulse sequences with two stretches of 2.5 % of each line's pulses
    left out (as a capture leaves out its stretches with lost records): the sequence classifier
    still runs, the missing pulses widen the interval (none to all programs), and it holds the
    truth and the estimate of the whole sequence."""
    from rbscope import refssd
    from rbscope.analysis.logical import from_bytes
    from rbscope.analysis.pipeline import wa_of

    drive = refssd.preset("ssd-v", blocks_per_plane=64, pages_per_block=64)
    work = refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, 2 << 20, seed=1)
    run = refssd.simulate(drive, work, seed=1, precondition="steady")
    logical = from_bytes(run.logical_bytes)
    whole = wa_of(refssd.to_measurement(run, clock_ns=1000, max_pulses=10**6), run.geometry,
                  logical, write_only=True)
    m = refssd.to_measurement(run, clock_ns=1000, max_pulses=10**6)
    missing = {}
    for ch in list(m.pulses):
        w, st = np.asarray(m.pulses[ch]), np.asarray(m.pulse_starts[ch])
        keep = np.ones(len(w), dtype=bool)
        n = len(w) // 40
        for a in (len(w) // 4, 2 * len(w) // 3 + 7 * ch):
            keep[a:a + n] = False
        missing[ch] = int((~keep).sum())
        m.pulses[ch] = array("Q", w[keep].astype(np.uint64).tobytes())
        m.pulse_starts[ch] = array("Q", st[keep].astype(np.uint64).tobytes())
    m.pulses_lost = missing
    r = wa_of(m, run.geometry, logical, write_only=True)
    assert whole.classifier == r.classifier == "sequence"
    iv, iw = r.wa_confidence, whole.wa_confidence
    assert iv.lo <= run.truth.wa_true <= iv.hi and iv.lo <= whole.wa.value <= iv.hi
    assert iv.hi - iv.lo > iw.hi - iw.lo
    assert r.wa.value == pytest.approx(run.truth.wa_true, rel=0.02)
    assert any(f"pulses whose records the link lost ({sum(missing.values()):,}" in x
               for x in r.interval_includes)
    assert sum(c.lost for c in r.channels) == sum(missing.values())


def test_more_stretches_with_losses_than_are_kept_make_the_line_unusable(monkeypatch):
    monkeypatch.setattr("rbscope.device.traces.MAX_LOSS_SPANS", 1)
    pr = PulseRecords(P)
    pr.snapshot(snap(0, 1, [row(), row()]))
    n = lost = 0
    for t in range(1000, 30_001, 1000):
        for k in range(10):
            n += 1
            if t in (5000, 9000) and k == 4:  # a record lost in two stretches
                lost += 1
                continue
            pr.trace(rec(0, t - 1000 + 50 + 90 * k, 5))
        pr.snapshot(snap(t, 1, [row(n), row()], lost=(lost, 0)))
    pulses, _, report = pr.sequences([0, 1])
    assert pulses == {} and not report["usable"]
    assert "records were lost in more than 1 stretches" in report["lines"]["0"]["why"]

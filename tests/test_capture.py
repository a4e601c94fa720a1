"""Capture files: writing, reading (also while written), truncation, corruption, Measurement."""

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbscope.analysis.measurement import Measurement
from rbscope.device import capture as cap
from rbscope.device import protocol as hp
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.rb_sniffer.params import SnifferParams

from .test_protocol import info_values

PARAMS = SnifferParams(channels=2)


def _frame(ftype, values, seq, params=PARAMS):
    return hp.frame_bytes(ftype, hp.encode_payload(params, ftype, values), seq)


def _write_session(path, *, snapshots=5, hist_values=(0xFFFFFFFE, 3, 10)):
    """A capture as a device session writes it; returns the raw frames in order."""
    seq = 0
    frames = []
    with cap.CaptureWriter(path, meta={"port": "test"}) as w:
        info = _frame(FrameType.INFO, info_values(PARAMS, clock_hz=1_000_000, prescaler=1), seq)
        w.raw_frame(info, time_ns=1)
        frames.append(info)
        regs = {"PRESCALER": 1, "GLITCH_TICKS": 2, "WINDOW_0_LO": 10, "WINDOW_0_HI": 100,
                "WINDOW_1_LO": 100, "WINDOW_1_HI": 3000, "CHANNEL_ENABLE_0": 3}
        w.config(regs, time_ns=2)
        w.event("config", time_ns=2, preset="test", class_names=["read", "program"])
        for n in range(snapshots):
            seq += 1
            st_ = _frame(FrameType.STATUS, {"snapshot": n, "timestamp": 1000 * (n + 1),
                                            "quiet_since": 500 * (n + 1), "epoch": 1,
                                            "flags": int(StatusFlags.QUIESCENT)}, seq)
            w.raw_frame(st_, time_ns=10 + n)
            frames.append(st_)
            for ch in range(PARAMS.channels):
                seq += 1
                row = [n * (ch + 1)] * PARAMS.counters_per_channel
                c = _frame(FrameType.COUNTERS, {"snapshot": n, "channel": ch,
                                                "timestamp": 1000 * (n + 1), "counters": row},
                           seq)
                w.raw_frame(c, time_ns=10 + n)
                frames.append(c)
        for v in hist_values:
            seq += 1
            h = _frame(FrameType.HISTOGRAM, {"channel": 0, "first": 0, "epoch": 1,
                                             "timestamp": 9000, "bins": [v] * 16}, seq)
            w.raw_frame(h, time_ns=100)
            frames.append(h)
        seq += 1
        t = _frame(FrameType.TRACE, {"channel": 1, "kind": 0, "index": 1, "width": 500,
                                     "timestamp": 9999}, seq)
        w.raw_frame(t, time_ns=101)
        frames.append(t)
        w.event("stop", time_ns=102, reason="test")
    return frames


def test_self_describing_round_trip(tmp_path):
    path = tmp_path / "a.rbcap"
    frames = _write_session(path)
    r = cap.CaptureReader(path)
    assert r.truncated == 0 and r.errors == []
    assert r.header["format"] == "rbscope.device.capture" and r.header["port"] == "test"
    assert r.records[0].kind == cap.RecordKind.HEADER
    assert r.records[1].kind == cap.RecordKind.FRAME and isinstance(r.records[1].frame, hp.Info)
    assert [f.raw for _, f in r.frames()] == frames
    assert r.params == PARAMS
    assert r.config.windows[1] == (100, 3000) and r.config.glitch_ticks == 2
    assert len(r.snapshots) == 5
    assert r.latest_counters()[1].counters[0] == 8
    # 0xFFFFFFFE, then 3 (wrapped: +5), then 10 (+7)
    assert r.histograms()[0][:16] == [0xFFFFFFFE + 12] * 16
    assert len(r.traces) == 1 and r.traces[0].width == 500
    assert [d["event"] for _, d in r.events] == ["config", "stop"]
    assert r.summary()["snapshots"] == 5


def test_capture_to_measurement(tmp_path):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    m = cap.capture_to_measurement(path)
    assert isinstance(m, Measurement)
    assert m.counts[1].classes == [8] * PARAMS.classes and m.counts[1].busy_ticks == 8
    assert m.counts[0].histogram[0] == 0xFFFFFFFE + 12
    assert m.class_names[:2] == ("read", "program")
    assert m.duration_ticks == 4000 and m.tick_seconds == pytest.approx(1e-6)
    assert [s.timestamp for s in m.snapshots] == [0, 1000, 2000, 3000, 4000]
    assert m.quiet_ticks == 5000 - 2500
    assert m.provenance["source"] == "capture"


def _record_ends(path):
    r = cap.CaptureReader(path)
    ends = []
    data = path.read_bytes()
    for rec in r.records:
        ends.append(rec.offset + cap.RECORD.size + len(rec.body) + cap.TRAILER.size)
    return data, r.records, ends


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=cap.PREAMBLE.size, max_value=10_000))
def test_any_prefix_reads_back_the_complete_records(tmp_path, cut):
    path = tmp_path / "full.rbcap"
    if not path.exists():
        _write_session(path)
    data, records, ends = _record_ends(path)
    cut = min(cut, len(data))
    part = tmp_path / "part.rbcap"
    part.write_bytes(data[:cut])
    r = cap.CaptureReader(part)
    complete = [rec for rec, end in zip(records, ends, strict=True) if end <= cut]
    assert [(x.kind, x.body, x.time_ns) for x in r.records] == [
        (x.kind, x.body, x.time_ns) for x in complete]
    assert r.errors == []
    assert r.truncated == cut - (ends[len(complete) - 1] if complete else cap.PREAMBLE.size)


def test_append_after_crash_cuts_the_partial_record(tmp_path):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    n = len(cap.CaptureReader(path).records)
    with open(path, "ab") as f:
        f.write(b"\xa5\x02\x40\x00")  # a record header cut short by a crash
    assert cap.CaptureReader(path).truncated == 4
    with cap.CaptureWriter(path) as w:
        w.event("resumed")
    r = cap.CaptureReader(path)
    # The second writer starts a session (a "start" event) before its own records.
    assert r.truncated == 0 and len(r.records) == n + 2
    assert [d["event"] for _, d in r.events[-2:]] == ["start", "resumed"]
    assert r.session == {"offset": r.records[-2].offset, "stop": None}


def test_readable_while_written(tmp_path):
    path = tmp_path / "live.rbcap"
    with cap.CaptureWriter(path) as w:
        assert len(cap.CaptureReader(path).records) == 1  # header already on disk
        w.event("one")
        r = cap.CaptureReader(path)
        w.event("two")
        assert len(r.records) == 2
        assert len(r.read().records) == 3


def test_corrupt_record_in_the_middle_is_reported_and_skipped(tmp_path):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    data, records, ends = _record_ends(path)
    bad = bytearray(data)
    victim = records[5]
    bad[victim.offset + cap.RECORD.size] ^= 0xFF
    path.write_bytes(bytes(bad))
    r = cap.CaptureReader(path)
    assert len(r.records) == len(records) - 1
    assert any(f"offset {victim.offset}" in e for e in r.errors)


def test_not_a_capture(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"hello world, not a capture")
    with pytest.raises(cap.CaptureError, match="bad magic at offset 0"):
        cap.CaptureReader(path)


def test_random_garbage_after_records_never_crashes(tmp_path):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    rng = random.Random(5)
    data = path.read_bytes()
    for i in range(30):
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        p = tmp_path / f"g{i}.rbcap"
        p.write_bytes(data + junk)
        r = cap.CaptureReader(p)
        assert len(r.records) >= len(cap.CaptureReader(path).records)
        os.unlink(p)


# Streaming ---------------------------------------------------------------------------------------

_ENC = {}


def _fast_frame(ftype, values, seq):
    if ftype not in _ENC:
        layout = PROTOCOL.payload_layout(PARAMS, ftype)
        _ENC[ftype] = (hp.compile_encoder(layout), wire.layout_bytes(layout))
    enc, size = _ENC[ftype]
    return hp.frame_bytes(ftype, enc(values).to_bytes(size, "little"), seq)


def _write_long(path, snapshots, *, epoch_change_at=None):
    """A long session: INFO, CONFIG, then ``snapshots`` snapshots (counts = 3 × index)."""
    with cap.CaptureWriter(path) as w:
        w.raw_frame(_frame(FrameType.INFO, info_values(PARAMS, clock_hz=1_000_000,
                                                       prescaler=1), 0), time_ns=1)
        w.config({"PRESCALER": 1, "WINDOW_1_LO": 100, "WINDOW_1_HI": 3000}, time_ns=2)
        w.event("config", time_ns=2, class_names=["read", "program"])
        seq = 0
        for n in range(snapshots):
            epoch = 2 if epoch_change_at is not None and n >= epoch_change_at else 1
            seq += 1
            w.raw_frame(_fast_frame(FrameType.STATUS, {"snapshot": n & 0xFFFF, "epoch": epoch,
                                                       "timestamp": 1000 * (n + 1)}, seq), 10)
            for ch in range(PARAMS.channels):
                seq += 1
                w.raw_frame(_fast_frame(FrameType.COUNTERS, {
                    "snapshot": n & 0xFFFF, "channel": ch, "epoch": epoch,
                    "timestamp": 1000 * (n + 1),
                    "counters": [3 * n] * PARAMS.counters_per_channel}, seq), 11)


def _records(r):
    return [(x.offset, x.kind, x.time_ns, x.body) for x in r.records]


@pytest.mark.parametrize("chunk", [1, 13, 100, 4096])
def test_chunked_reading_equals_whole_buffer_scan(tmp_path, chunk):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    data = path.read_bytes()
    whole = list(cap.CaptureReader.scan(data, cap.PREAMBLE.size))
    assert len(data) > 10 * 100  # several chunks for every chunk size but the last
    r = cap.CaptureReader(path, chunk_size=chunk)
    assert _records(r) == whole and r.truncated == 0 and r.errors == []
    assert len(r.snapshots) == 5 and r.histograms()[0][:16] == [0xFFFFFFFE + 12] * 16


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_truncated_tail_detected_at_any_chunk_size(tmp_path, chunk):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) - 30, len(data) // 2, cap.PREAMBLE.size + 5):
        part = tmp_path / "part.rbcap"
        part.write_bytes(data[:cut])
        ref = cap.CaptureReader(part)
        r = cap.CaptureReader(part, chunk_size=chunk)
        assert _records(r) == _records(ref)
        assert r.truncated == ref.truncated > 0 and r.end + r.truncated == cut
        assert cap.CaptureReader.valid_length(part) == r.end


@pytest.mark.parametrize("chunk", [5, 50, 4096])
def test_corruption_reported_by_offset_at_any_chunk_size(tmp_path, chunk):
    path = tmp_path / "a.rbcap"
    _write_session(path)
    data, records, ends = _record_ends(path)
    bad = bytearray(data)
    bad[records[5].offset + cap.RECORD.size] ^= 0xFF  # CRC mismatch
    # 300 bytes of garbage without a sync byte replace record 8: one message, however many
    # chunks the garbage spans.
    garbage = bytes(i % 256 for i in range(300)).replace(bytes([cap.SYNC]), b"\x00")
    bad[records[8].offset:ends[8]] = garbage
    path.write_bytes(bytes(bad))
    ref = cap.CaptureReader(path, chunk_size=1 << 20)
    r = cap.CaptureReader(path, chunk_size=chunk)
    assert _records(r) == _records(ref) and len(r.records) == len(records) - 2
    assert r.errors == ref.errors
    five = ends[5] - records[5].offset
    assert len(r.errors) == 2
    assert r.errors[0] in (f"offset {records[5].offset}: {why}; skipped {five} bytes to "
                           f"{ends[5]}" for why in ("record CRC mismatch",
                                                    "no record starts here (implausible body)"))
    assert r.errors[1] == (f"offset {records[8].offset}: no record starts here (bad sync, kind "
                           f"or length); skipped 300 bytes to {records[8].offset + 300}")


def test_bounded_reader_keeps_no_per_snapshot_objects(tmp_path):
    path = tmp_path / "long.rbcap"
    _write_long(path, 300)
    seen = []
    r = cap.CaptureReader(path, keep_records=False, keep_snapshots=False, keep_traces=False,
                          on_snapshot=seen.append, chunk_size=512)
    assert r.records == [] and r.snapshots == [] and r.snapshot_count == 300
    assert len(seen) == 300 and r.last_snapshot is seen[-1]
    assert r.latest_counters()[1].counters[0] == 3 * 299
    assert r.summary()["snapshots"] == 300 and r.summary()["records"] == 3 + 300 * 3 + 1


def test_snapshot_series_is_bounded_and_evenly_spaced():
    def row(n, epoch=1):
        status = hp.Status(0, b"", timestamp=10 * n, epoch=epoch)
        return hp.Snapshot(status, [hp.Counters(0, b"", channel=0, counters=(n,))], 0)
    s = cap.SnapshotSeries(max_points=8)
    for n in range(1000):
        s.add(row(n))
        assert len(s.kept) <= 8  # never more, at any point of the stream
    rows = s.rows()
    assert s.stride == 128 and s.count == 1000
    assert [ts for ts, _ in rows] == [10 * n for n in range(0, 1000, 128)] + [9990]
    assert [list(w) for _, w in rows][-1] == [999]
    s.add(row(5, epoch=2))  # a clear: the series restarts
    assert s.rows() == [(50, cap.array("Q", [5]))] and s.stride == 1


def test_capture_to_measurement_streams_a_decimated_series(tmp_path):
    path = tmp_path / "long.rbcap"
    _write_long(path, 500, epoch_change_at=100)
    m = cap.capture_to_measurement(path, max_snapshots=16, chunk_size=256)
    full = cap.capture_to_measurement(path, max_snapshots=10_000)
    assert m.counts == full.counts and m.duration_ticks == full.duration_ticks == 399_000
    assert len(full.snapshots) == 400  # the last epoch only
    assert 8 <= len(m.snapshots) <= 17
    assert m.snapshots[0].timestamp == 0 and m.snapshots[-1].timestamp == 399_000
    by_ts = {s.timestamp: s.counts for s in full.snapshots}
    assert all(s.counts == by_ts[s.timestamp] for s in m.snapshots)
    assert m.provenance["snapshots_total"] == 400 and m.provenance["snapshot_stride"] == 32
    every = cap.capture_to_measurement(path, snapshot_every=100)
    assert [s.timestamp for s in every.snapshots] == [0, 100_000, 200_000, 300_000, 399_000]


def test_reading_memory_does_not_grow_with_the_file(tmp_path):
    import tracemalloc

    def peak(n):
        path = tmp_path / f"m{n}.rbcap"
        _write_long(path, n)
        tracemalloc.start()
        try:
            cap.capture_to_measurement(path, max_snapshots=8, chunk_size=16 << 10)
            return tracemalloc.get_traced_memory()[1], os.path.getsize(path)
        finally:
            tracemalloc.stop()
    small, small_size = peak(500)
    large, large_size = peak(2500)
    assert large_size > 4.5 * small_size
    # Same bounded working set (chunk, a few frames, 8 series points) for 5× the file.
    assert large < 1.25 * small + 20_000, (small, large)
    assert large < large_size / 4


def test_dump_unpacks_a_batch_of_pulse_records(tmp_path, capsys):
    """`rbscope dump` shows a TRACE_BATCH's records as pulses, not as packed slots."""
    import json

    from rbscope.cli import main as cli_main

    path = tmp_path / "batch.rbcap"
    layout = wire.trace_record_layout(PARAMS)
    time_bits = layout["time"].width
    base = (3 << time_bits) | 40
    empty = layout.const({"kind": wire.TRACE_EMPTY_KIND}).as_value().value
    records = [layout.const({"kind": 0, "index": 2, "channel": 1, "width": 700,
                             "time": 40}).as_value().value] + [empty] * 31
    with cap.CaptureWriter(path, meta={"port": "test"}) as w:
        w.raw_frame(_frame(FrameType.INFO, info_values(PARAMS, clock_hz=1_000_000,
                                                      prescaler=1), 0), time_ns=1)
        w.raw_frame(_frame(FrameType.TRACE_BATCH, {"base": base, "records": records}, 1),
                    time_ns=2)
    assert cli_main(["dump", str(path), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    batch = [x for x in lines if x.get("type") == "trace_batch"]
    assert batch and batch[0]["records"] == [
        {"channel": 1, "kind": "END", "index": 2, "width": 700, "timestamp": base}]
    r = cap.CaptureReader(path)
    assert r.trace_count == 1 and r.traces[0].timestamp == base and r.errors == []

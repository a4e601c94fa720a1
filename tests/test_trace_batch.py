"""TRACE_BATCH: the gateware's batcher in the Amaranth simulator against a queue of records, and
the host's unpacking of a batch (``TraceBatch.traces``), with the faults it refuses."""

import random

import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from rbscope.device import protocol as hp
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.trace_batch import TraceBatcher
from rbscope.gateware.rb_sniffer.layouts import trace_layout
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferParams

P = SnifferParams(channels=3)
RECORD = wire.trace_record_layout(P)
TIME_BITS = RECORD["time"].width


def test_record_layouts_are_whole_bytes_with_enough_time():
    for params, size, time_bits in ((P, 7, 23), (SnifferParams(channels=16), 7, 21),
                                    (SnifferParams(channels=64), 7, 19),
                                    (SnifferParams(channels=64, width_bits=32), 8, 19)):
        layout = wire.trace_record_layout(params)
        assert layout.size == 8 * size and layout["time"].width == time_bits
        assert time_bits >= wire.TRACE_TIME_MIN_BITS
        batch = wire.trace_batch_layout(params)
        assert wire.layout_bytes(batch) == params.timestamp_bits // 8 + 32 * size


def _run_batcher(records, batches, *, gap=0, fast=False):
    """Feed ``records`` (dicts of trace fields) through a FIFO stand-in into the batcher and send
    ``batches`` frames of TRACE_BATCH_RECORDS word requests each, ``gap`` cycles apart; return
    each batch's (base, [record words]). ``fast``: a byte a cycle and the next request at
    once (faster than the frame builder asks)."""
    dut = TraceBatcher(P)
    layout = trace_layout(P)
    queue = list(records)
    out = []

    async def fifo(ctx):
        # The trace FIFO's head: after a pop it is unreadable for a cycle (counters._RecordFifo).
        gone = 0

        def present():
            if queue and not gone:
                ctx.set(dut.records.payload, layout.const(queue[0]))
            ctx.set(dut.records.valid, int(bool(queue) and not gone))

        present()
        async for _, _, ready, valid in ctx.tick().sample(dut.records.ready,
                                                          dut.records.valid):
            if ready and valid:
                queue.pop(0)
                gone = 1
            elif gone:
                gone -= 1
            present()

    async def frames(ctx):
        for _ in range(batches):
            # Between frames the base follows the head (the frame builder's time register).
            await ctx.tick().repeat(4)
            base = queue[0]["timestamp"] if queue else None
            ctx.set(dut.base, base or 0)
            await ctx.tick().repeat(2)
            words = []
            for _ in range(wire.TRACE_BATCH_RECORDS):
                ctx.set(dut.req.valid, 1)
                await ctx.tick().until(dut.req.ready)
                ctx.set(dut.req.valid, 0)
                ctx.set(dut.resp.ready, 1)
                await ctx.tick().until(dut.resp.valid)
                ctx.set(dut.resp.ready, 0)
                # The word's bytes, least significant first, a shift strobe after each.
                word = 0
                for k in range(RECORD.size // 8):
                    word |= ctx.get(dut.resp.payload) << 8 * k
                    ctx.set(dut.shift, 1)
                    await ctx.tick()
                    ctx.set(dut.shift, 0)
                    if not fast:
                        await ctx.tick()
                words.append(word)
                if gap:
                    await ctx.tick().repeat(gap)
            out.append((base, words))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(fifo)
    sim.add_testbench(frames)
    sim.run()
    return out


def _record(channel, timestamp, width=100, index=1, kind=EventKind.END):
    return {"channel": channel, "kind": kind, "index": index, "width": width,
            "timestamp": timestamp}


def _unpack(base, words):
    batch = hp.TraceBatch(0, b"", base=base, records=tuple(words))
    return [(t.channel, t.timestamp, t.width, t.index, t.kind) for t in batch.traces(P)]


def test_batcher_packs_records_in_order_and_ends_a_batch_at_the_window():
    rng = random.Random(5)
    window = 1 << TIME_BITS
    start = 7 * window - 40  # the third batch's records cross into the next window
    times = sorted(start - 5000 + rng.randrange(5000) for _ in range(45))
    times += [start + 10, start + 45, start + 70]
    records = [_record(rng.randrange(3), t, width=rng.randrange(1, 1 << 24),
                       index=rng.randrange(16), kind=rng.choice(list(EventKind)[:4]))
               for t in times]
    batches = _run_batcher(records, 3, gap=3)
    got = []
    for k, (base, words) in enumerate(batches):
        unpacked = _unpack(base, words)
        assert unpacked, f"batch {k} is empty"
        assert unpacked[0][1] == base
        got += unpacked
        if k == 1:
            # The second batch ends where the window does: its last slots are empty, and the
            # record past the window goes first in the third.
            kinds = [RECORD.from_bits(w).kind for w in words]
            assert kinds[-1] == wire.TRACE_EMPTY_KIND
            assert all(t < 7 * window for _, t, *_ in unpacked)
            assert batches[2][0] >= 7 * window
    want = [(r["channel"], r["timestamp"], r["width"], r["index"], int(r["kind"]))
            for r in records]
    assert got == want


def test_back_to_back_requests_fill_every_slot():
    """Requests as fast as the port takes them (the frame builder's are a byte time apart): a
    FIFO that holds records never answers an empty slot."""
    records = [_record(k % 3, 5000 + 17 * k, width=k + 1) for k in range(40)]
    (base, words), (base2, words2) = _run_batcher(records, 2, fast=True)
    kinds = [[w & 7 for w in batch] for batch in (words, words2)]  # (``kind``: bits 0-2)
    assert base == 5000 and base2 == 5000 + 17 * 32
    assert kinds[0] == [EventKind.END] * 32
    assert kinds[1] == [EventKind.END] * 8 + [wire.TRACE_EMPTY_KIND] * 24


def test_an_empty_fifo_answers_empty_slots():
    (base, words), = _run_batcher([], 1)
    assert base is None
    assert all(RECORD.from_bits(w).kind == wire.TRACE_EMPTY_KIND for w in words)
    assert _unpack(0, words) == []


def _words(*records):
    return tuple(RECORD.const(r).as_value().value for r in records)


def test_host_unpacks_a_batch_and_skips_empty_slots():
    base = (5 << TIME_BITS) | 1000
    empty = {"kind": wire.TRACE_EMPTY_KIND}
    words = _words({"kind": 0, "index": 2, "channel": 1, "width": 300, "time": 1000}, empty,
                   {"kind": 2, "index": 0, "channel": 2, "width": (1 << 24) - 1, "time": 5000},
                   *[empty] * 29)
    batch = hp.TraceBatch(9, b"", base=base, records=words)
    traces = batch.traces(P)
    assert [(t.channel, t.kind, t.index, t.width, t.timestamp) for t in traces] == [
        (1, 0, 2, 300, base), (2, 2, 0, (1 << 24) - 1, (5 << TIME_BITS) | 5000)]
    assert all(t.seq == 9 for t in traces)
    assert hp.trace_records(batch, P) == traces


def test_a_batch_names_its_summary_records_pulses_as_its_records_do():
    """``TraceBatch.summaries`` (the live view's cheap read of a full link) gives each SUMMARY
    record's channel and count, the low COUNT_BITS of its width, exactly as the unpacked
    records say; other kinds and empty slots are not in it."""
    from rbscope.gateware.link.summary import COUNT_BITS, COUNT_MAX, LATE_KIND, SUMMARY_KIND

    base = (3 << TIME_BITS) | 10
    age = 77 << COUNT_BITS  # the age of the run's last pulse sits above the count
    words = _words({"kind": 0, "index": 1, "channel": 2, "width": 40, "time": 10},
                   {"kind": SUMMARY_KIND, "index": 1, "channel": 2, "width": age | 13,
                    "time": 900},
                   {"kind": LATE_KIND, "index": 1, "channel": 2, "width": 41, "time": 900},
                   {"kind": SUMMARY_KIND, "index": 1, "channel": 0, "width": COUNT_MAX,
                    "time": 950},
                   *[{"kind": wire.TRACE_EMPTY_KIND}] * 28)
    batch = hp.TraceBatch(0, b"", base=base, records=words)
    assert batch.summaries(P) == [(2, 13), (0, COUNT_MAX)]
    assert batch.summaries(P) == [(t.channel, t.width & COUNT_MAX) for t in batch.traces(P)
                                  if t.kind == SUMMARY_KIND]


@pytest.mark.parametrize("records, message", [
    (({"kind": 0, "channel": 1, "time": 999},), "does not follow base"),
    (({"kind": 0, "channel": 1, "time": 1000}, {"kind": 0, "channel": 0, "time": 990}),
     "does not follow"),
    (({"kind": 0, "channel": 3, "time": 1000},), "channel 3 of a 3-channel device"),
])
def test_host_refuses_an_impossible_batch(records, message):
    words = _words(*records) + _words({"kind": wire.TRACE_EMPTY_KIND}) * (32 - len(records))
    batch = hp.TraceBatch(4, b"", base=1000, records=words)
    with pytest.raises(hp.ProtocolError, match=message):
        batch.traces(P)


def test_a_batch_round_trips_through_the_frame_decoder():
    base = 123_456_789
    words = _words({"kind": 0, "index": 1, "channel": 0, "width": 77,
                    "time": base & ((1 << TIME_BITS) - 1)},
                   *[{"kind": wire.TRACE_EMPTY_KIND}] * 31)
    payload = hp.encode_payload(P, wire.FrameType.TRACE_BATCH, {"base": base, "records": words})
    frame = hp.decode_frame_bytes(hp.frame_bytes(wire.FrameType.TRACE_BATCH, payload, 3), P)
    assert isinstance(frame, hp.TraceBatch) and frame.base == base
    assert [(t.channel, t.width, t.timestamp) for t in frame.traces(P)] == [(0, 77, base)]


def test_a_tag_builds_records_decode_around_the_tag():
    params = SnifferParams(channels=8, tag_bits=4)
    layout = wire.trace_record_layout(params)
    assert [name for name, _ in layout] == ["kind", "index", "channel", "width", "tag", "time"]
    base = 77 << layout["time"].width
    words = tuple(layout.const(r).as_value().value for r in (
        {"kind": 0, "index": 3, "channel": 7, "width": 1234, "tag": 15, "time": 0},
        {"kind": 0, "index": 1, "channel": 2, "width": 99, "tag": 9, "time": 40},
        *[{"kind": wire.TRACE_EMPTY_KIND}] * 30))
    traces = hp.TraceBatch(0, b"", base=base, records=words).traces(params)
    assert [(t.channel, t.index, t.width, t.timestamp) for t in traces] == [
        (7, 3, 1234, base), (2, 1, 99, base + 40)]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, (1 << 48) - 1),
       st.lists(st.integers(0, (1 << RECORD.size) - 1), min_size=32, max_size=32))
def test_any_batch_unpacks_or_is_refused_clearly(base, words):
    """Whatever a CRC-valid batch holds, the host returns its records in time order, each in the
    base's window and on the device's channels, or refuses it with a ProtocolError."""
    batch = hp.TraceBatch(0, b"", base=base, records=tuple(words))
    try:
        traces = batch.traces(P)
    except hp.ProtocolError as exc:
        assert "TRACE_BATCH" in str(exc)
        return
    times = [t.timestamp for t in traces]
    assert times == sorted(times)
    assert all(t >> TIME_BITS == base >> TIME_BITS for t in times)
    assert all(t.channel < P.channels and t.kind != wire.TRACE_EMPTY_KIND for t in traces)
    assert not traces or times[0] == base

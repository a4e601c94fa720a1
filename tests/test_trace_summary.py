"""The link's trace summariser in the Amaranth simulator, against what its records must say.

Random pulse events on a few channels (runs of one class, other classes, partial and saturated
pulses), one every 4-12 cycles (the summariser takes four an event; the sniffer offers one every
two at most, in bursts of at most one per channel, which its queue holds), with a FIFO that
refuses writes at random and flushes at random moments. From the records alone, each channel's
pulses are rebuilt (a SUMMARY's pulses as so many pulses of its class, its LATE record's pulse
ending its age before the record) and compared with the events: every pulse is there, in order,
the whole ones with their width, class and end; the records' times never go backwards; a
summarised run costs at most four records; no event is dropped unless the queue was full.
"""

import random

import pytest
from amaranth.sim import Simulator

from rbscope.gateware.link.summary import (
    COUNT_MAX,
    LATE_KIND,
    SUMMARY_KIND,
    TraceSummariser,
    summary_fields,
)
from rbscope.gateware.rb_sniffer.layouts import trace_layout
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferParams

END, PARTIAL, OVERLONG, BUSY = (EventKind.END, EventKind.PARTIAL, EventKind.OVERLONG,
                                EventKind.BUSY)


def make_events(rng, channels, count, classes, *, run_class=1, long_runs=False):
    """``count`` events ``(cycle offset, channel, kind, index, width)``: per channel, runs of
    ``run_class`` pulses (some long) between pulses of other classes and a few partial or
    saturated ones."""
    events = []
    for _ in range(count):
        ch = rng.randrange(channels)
        r = rng.random()
        if r < (0.85 if long_runs else 0.6):
            kind, index = END, run_class
        elif r < 0.92:
            kind, index = END, rng.choice([c for c in range(classes) if c != run_class])
        elif r < 0.96:
            kind, index = PARTIAL, classes + 1
        else:
            kind, index = OVERLONG, classes + 2
        events.append((ch, kind, index, rng.randrange(1, 1 << 12)))
    return events


def run(params, events, *, mask, seed, w_rdy_p=0.8, flush_p=0.002, gap=(4, 12),
        disable_at=None, delay=0, crowded=1.0):
    """Drive the summariser; return (records written, events offered, events refused)."""
    rng = random.Random(seed)
    dut = TraceSummariser(params)
    layout = trace_layout(params)
    out, offered, refused = [], [], []

    async def bench(ctx):
        now = 1000
        ctx.set(dut.mask, mask)
        ctx.set(dut.enable, 1)
        i = 0
        wait = delay
        cycles = 0
        final_flush = False
        # (The reset's clearing of the state RAM: a channel a cycle; events queue meanwhile.)
        while (i < len(events) or not ctx.get(dut.idle) or not final_flush
               or cycles < params.channels + 4):
            cycles += 1
            now += 1
            ctx.set(dut.timestamp, now)
            ctx.set(dut.w_rdy, rng.random() < w_rdy_p)
            ctx.set(dut.crowded, rng.random() < crowded)
            ctx.set(dut.flush, rng.random() < flush_p)
            # A snapshot's rows: one channel's run closed now and then.
            ctx.set(dut.flush_one, rng.random() < 5 * flush_p)
            ctx.set(dut.flush_channel, rng.randrange(params.channels))
            if disable_at is not None and i >= disable_at:
                ctx.set(dut.enable, 0)
            valid = False
            if i < len(events) and wait <= 0 and (disable_at is None or i < disable_at):
                ch, kind, index, width = events[i]
                rec = layout.const({"channel": ch, "kind": kind, "index": index,
                                    "width": width, "timestamp": now})
                ctx.set(dut.trace.payload, rec)
                valid = True
                wait = rng.randint(*gap)
            elif disable_at is not None and i >= disable_at and i < len(events):
                i = len(events)  # the rest are never offered (trace disabled)
            ctx.set(dut.trace.valid, valid)
            if valid:
                (refused if not ctx.get(dut.ready) else offered).append(
                    (now,) + events[i])
                i += 1
            wait -= 1
            if ctx.get(dut.w_en) and ctx.get(dut.w_rdy):
                # (The raw bits: a SUMMARY's or LATE's kind is no EventKind member.)
                raw = ctx.get(dut.w_data.as_value())
                out.append(tuple(raw >> layout[f].offset & ((1 << layout[f].width) - 1)
                                 for f in ("timestamp", "channel", "kind", "index", "width")))
            await ctx.tick()
            assert cycles < 200 * len(events) + 10_000, "the summariser never went idle"
            if i >= len(events) and ctx.get(dut.idle) and not final_flush:
                # The end of the capture: a snapshot closes the runs still open.
                final_flush = True
                ctx.set(dut.flush, 1)
                ctx.set(dut.trace.valid, 0)
                await ctx.tick()
                ctx.set(dut.flush, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, offered, refused


def rebuild(params, records):
    """Each channel's pulses from the records: ``(kind, index, width, end)`` with ``width``
    and ``end`` None for a pulse a SUMMARY stands for (``end`` None too where the age
    saturated)."""
    _, age_bits = summary_fields(params)
    age_max = (1 << age_bits) - 1
    lines, age = {}, {}
    last_time = 0
    for t, ch, kind, index, width in records:
        assert t >= last_time, "a record's time goes backwards"
        last_time = t
        line = lines.setdefault(ch, [])
        if age.get(ch) is not None and kind != LATE_KIND:
            age[ch] = None  # a SUMMARY of a run still open (its count was full)
        if kind == SUMMARY_KIND:
            count, a = width & COUNT_MAX, width >> 8
            line += [(END, index, None, None)] * count
            age[ch] = a
        elif kind == LATE_KIND:
            a = age.pop(ch)
            assert a is not None, "a LATE record after a full SUMMARY"
            line.append((END, index, width, None if a == age_max else t - a))
        else:
            line.append((kind, index, width, t))
    return lines


def expected(events):
    lines = {}
    for t, ch, kind, index, width in events:
        lines.setdefault(ch, []).append((kind, index, width, t))
    return lines


def matches(got, want):
    """Whether the pulses rebuilt are the events' (raises naming the first difference)."""
    for j, (g, w) in enumerate(zip(got, want, strict=False)):
        (gk, gi, gw, ge), (wk, wi, ww, we) = g, w
        if (gk, gi) != (wk, wi) or (gw is not None and gw != ww) or (
                ge is not None and ge != we):
            raise AssertionError(f"pulse {j}: rebuilt {g}, was {w}")
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} pulses rebuilt of {len(want)}")
    return True


PARAMS = SnifferParams(channels=4, classes=4, width_bits=16)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_pulse_is_in_the_records_in_order(seed):
    rng = random.Random(seed)
    events = make_events(rng, PARAMS.channels, 600, PARAMS.classes)
    out, offered, refused = run(PARAMS, events, mask=0b0010, seed=seed, flush_p=0.0005)
    assert not refused
    got, want = rebuild(PARAMS, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"
    # Runs were summarised: fewer records than pulses, and SUMMARY and LATE records among them.
    kinds = [k for _, _, k, _, _ in out]
    assert kinds.count(SUMMARY_KIND) > 10 and kinds.count(LATE_KIND) > 10
    assert len(out) < len(offered)


def test_long_runs_compress_and_saturate_the_count():
    params = SnifferParams(channels=2, classes=4, width_bits=16)
    rng = random.Random(7)
    # One channel, nearly all reads: runs longer than a SUMMARY counts.
    events = [(0, END, 1, rng.randrange(50, 60)) for _ in range(700)]
    events[300] = (0, END, 2, 999)
    out, offered, refused = run(params, events, mask=0b0010, seed=7, flush_p=0)
    assert not refused
    assert matches(rebuild(params, out)[0], expected(offered)[0])
    assert len(out) <= 12  # first, a full SUMMARY or two, SUMMARY, LATE; the other class ...
    assert any(k == SUMMARY_KIND and w == COUNT_MAX for _, _, k, _, w in out)


@pytest.mark.parametrize("always", [False, True])
def test_only_a_crowded_fifo_summarises_unless_always(always):
    """With the FIFO never crowded, every record is sent whole, unless bit ``classes`` says
    always; with it crowded now and then, runs are summarised in those stretches only, and
    every pulse is still rebuilt."""
    rng = random.Random(6)
    events = make_events(rng, PARAMS.channels, 300, PARAMS.classes, long_runs=True)
    mask = 0b0010 | (1 << PARAMS.classes if always else 0)
    out, offered, refused = run(PARAMS, events, mask=mask, seed=6, crowded=0.0, flush_p=0)
    kinds = [k for _, _, k, _, _ in out]
    assert (SUMMARY_KIND in kinds) is always
    got, want = rebuild(PARAMS, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"
    out, offered, refused = run(PARAMS, events, mask=0b0010, seed=6, crowded=0.5, flush_p=0)
    assert SUMMARY_KIND in [k for _, _, k, _, _ in out]
    got, want = rebuild(PARAMS, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"


def test_mask_zero_sends_every_record_whole():
    rng = random.Random(4)
    events = make_events(rng, PARAMS.channels, 300, PARAMS.classes)
    out, offered, refused = run(PARAMS, events, mask=0, seed=4)
    assert not refused
    assert [(t, ch, k, i, w) for t, ch, k, i, w in out] == [
        (t, ch, int(k), i, w) for t, ch, k, i, w in offered]


def test_a_flush_closes_every_run():
    """With no flush but the trace's disabling, every open run's records still come."""
    rng = random.Random(9)
    events = make_events(rng, PARAMS.channels, 200, PARAMS.classes, long_runs=True)
    out, offered, refused = run(PARAMS, events, mask=0b0010, seed=9, flush_p=0,
                                disable_at=150)
    assert len(offered) == 150 and not refused
    got, want = rebuild(PARAMS, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"


def test_a_full_queue_refuses_events_and_loses_nothing_else():
    """Back to back events (every other cycle) against a FIFO that rarely takes a record: the
    queue fills, events are refused (the caller counts them lost), and every event it took is
    in the records."""
    rng = random.Random(5)
    events = make_events(rng, PARAMS.channels, 400, PARAMS.classes)
    out, offered, refused = run(PARAMS, events, mask=0b0010, seed=5, w_rdy_p=0.1, gap=(2, 2))
    assert refused
    got, want = rebuild(PARAMS, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"


def test_a_burst_of_every_channel_at_once_is_held_by_the_queue():
    """Every channel of a 64-channel build ends a pulse at once: the sniffer offers their events
    one every two cycles; the queue (a place per channel) holds what the summariser has not
    yet taken, and nothing is refused."""
    params = SnifferParams(channels=64, classes=4, width_bits=16)
    rng = random.Random(8)
    events = [(ch, END, rng.choice([1, 1, 1, 2]), rng.randrange(20, 90)) for ch in range(64)]
    # (after the state RAM's clearing at reset: a channel a cycle)
    out, offered, refused = run(params, events, mask=0b0010, seed=8, gap=(2, 2), w_rdy_p=1.0,
                                flush_p=0, delay=80)
    assert not refused and len(offered) == len(events)
    got, want = rebuild(params, out), expected(offered)
    for ch in want:
        assert matches(got.get(ch, []), want[ch]), f"channel {ch}"


def test_the_age_saturates():
    params = SnifferParams(channels=1, classes=4, width_bits=16)  # 8 bits of age: 255 ticks
    events = [(0, END, 1, 5)] * 3 + [(0, END, 2, 40)]
    out, offered, refused = run(params, events, mask=0b0010, seed=3, gap=(300, 300),
                                flush_p=0)
    got = rebuild(params, out)[0]
    assert matches(got, expected(offered)[0])
    # The last read ended 300 ticks before the pulse that closed the run: more than 255.
    late = [r for r in out if r[2] == LATE_KIND]
    summary = [r for r in out if r[2] == SUMMARY_KIND]
    assert len(late) == 1 and summary[0][4] >> 8 == 255 and got[2][3] is None

"""Amaranth-simulator unit tests of the sniffer's blocks (docs/architecture.md is the spec)."""

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from rbscope.gateware.rb_sniffer.blocks import (
    QUIESCENCE_SEGMENT,
    Classifier,
    FrontEnd,
    LogBinner,
    Quiescence,
    TimeBase,
)
from rbscope.gateware.rb_sniffer.layouts import mailbox_layout
from rbscope.gateware.rb_sniffer.params import (
    QUIESCENT_LAG,
    Counter,
    EventKind,
    SnifferConfig,
    SnifferParams,
    hist_bin,
    hist_bin_lo,
)

P16 = SnifferParams(channels=1, width_bits=16)
P24 = SnifferParams(channels=4)


def run(dut, bench, clock=True):
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


# ---- TimeBase ----------------------------------------------------------------------------------

def run_after_reset(dut, bench, prescaler=1):
    """Run ``bench`` on a :class:`TimeBase` after one reset cycle with ``prescaler`` set, as the
    register file holds it; ``bench`` starts on cycle 0."""
    rst = Signal()
    top = Module()
    top.submodules.dut = ResetInserter(rst)(dut)

    async def wrapped(ctx):
        ctx.set(dut.prescaler, prescaler)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        await bench(ctx)

    run(top, wrapped)


@pytest.mark.parametrize("prescaler", [0, 1, 2, 3, 7])
def test_timebase_ticks_every_prescaler_cycles(prescaler):
    dut = TimeBase(P24)
    p = max(prescaler, 1)

    async def bench(ctx):
        for t in range(40):
            assert ctx.get(dut.tick) == ((t + 1) % p == 0), f"cycle {t}"
            assert ctx.get(dut.timestamp) == t // p, f"cycle {t}"
            await ctx.tick()

    run_after_reset(dut, bench, prescaler)


def test_timebase_prescaler_lowered_mid_count():
    dut = TimeBase(P24)

    async def bench(ctx):
        await ctx.tick().repeat(6)  # pc = 6
        # pc + 1 >= 3: the new value is seen two cycles later, which ticks at once; then every
        # 3 cycles.
        ctx.set(dut.prescaler, 3)
        ticks = []
        for _ in range(10):
            ticks.append(ctx.get(dut.tick))
            await ctx.tick()
        assert ticks == [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]

    run_after_reset(dut, bench, 10)


def test_timebase_timestamp_carries_between_its_halves():
    """The timestamp counts in two halves; across the lower half's wrap it still counts by one
    per tick (the lower half is preset near its end: 2**24 ticks are too many to simulate)."""
    p = SnifferParams(channels=1)
    dut = TimeBase(p)
    lower, upper = dut.timestamp_halves
    half = len(lower)

    async def bench(ctx):
        ctx.set(lower, (1 << half) - 3)
        ctx.set(upper, 5)
        seen = []
        for _ in range(6):
            seen.append(ctx.get(dut.timestamp))
            await ctx.tick()
        start = (5 << half) + (1 << half) - 3
        assert seen == [start + k for k in range(6)]

    run_after_reset(dut, bench, prescaler=1)


# ---- FrontEnd ----------------------------------------------------------------------------------

class FrontEndDriver:
    """Drive one front end cycle by cycle, ticking every cycle, and stand in for the sniffer's
    pipeline: every ``every`` cycles it visits the channel, records the start of a pulse in
    progress from its age and takes a pulse end, whose width it forms as the pipeline does
    (from the recorded start and the end's time stamp, or the front end's own measure)."""

    def __init__(self, params, take=True, every=1):
        self.params = params
        self.dut = FrontEnd(params)
        self.take = take
        self.every = every
        self.events = []
        self.cycle = 0
        self.start = None  # the recorded start of the pulse in progress (the pipeline's RAM)

    async def step(self, ctx, lvl, enable=1, n=1):
        """Hold the inputs for ``n`` cycles."""
        dut = self.dut
        k = self.params.stamp_bits
        for _ in range(n):
            ts = self.cycle  # a tick every cycle: the timestamp is the cycle number
            ctx.set(dut.lvl, lvl)
            ctx.set(dut.enable, enable)
            ctx.set(dut.tick, 1)
            ctx.set(dut.stamp, ts % (1 << k))
            visit = self.take and self.cycle % self.every == 0
            box = ctx.get(dut.mailbox)
            take_event = visit and box.valid
            take_fall = visit and ctx.get(dut.fall_req)
            ctx.set(dut.take_event, take_event)
            ctx.set(dut.take_fall, take_fall)
            if take_event:
                kind = EventKind.PARTIAL if box.partial else EventKind.END
                if box.rec:
                    end = ts - (ts - box.stamp) % (1 << k)
                    self.events.append((kind, end - self.start))
                else:
                    self.events.append((kind, box.stamp))
            if take_fall:
                self.start = ts - ctx.get(dut.age)
            await ctx.tick()
            ctx.set(dut.take_event, 0)
            ctx.set(dut.take_fall, 0)
            self.cycle += 1


@pytest.mark.parametrize("every", [1, 3, 1000])
def test_front_end_measures_width_in_ticks(every):
    """Every pulse's width, whether the pipeline saw its start (visits every cycle), sometimes
    (every third cycle) or never (its age measures it)."""
    d = FrontEndDriver(P24, every=every)

    async def bench(ctx):
        await d.step(ctx, 1, n=3)
        for width in (5, 1, 12):
            await d.step(ctx, 0, n=width)
            # A one-tick gap between pulses when visits are frequent; with rare visits, a gap
            # up to the next visit (one pulse end per visit fits the mailbox).
            await d.step(ctx, 1, n=1 if every < 10 else every - d.cycle % every + 1)
        await d.step(ctx, 1, n=3)

    run(d.dut, bench)
    assert d.events == [(EventKind.END, 5), (EventKind.END, 1), (EventKind.END, 12)]


def test_front_end_times_a_recorded_pulse_past_its_age_range():
    """A pulse whose start the pipeline recorded is timed by the time stamp of its end, however
    long it is (its age wraps many times)."""
    d = FrontEndDriver(P24, every=5)
    width = 9 * (1 << P24.stamp_bits) + 17

    async def bench(ctx):
        await d.step(ctx, 1, n=4)
        await d.step(ctx, 0, n=width)
        await d.step(ctx, 1, n=12)

    run(d.dut, bench)
    assert d.events == [(EventKind.END, width)]


def test_front_end_counts_only_tick_cycles():
    dut = FrontEnd(P24)

    async def bench(ctx):
        ctx.set(dut.enable, 1)
        ctx.set(dut.lvl, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.lvl, 0)
        for t in range(12):
            ctx.set(dut.tick, t % 3 == 2)
            await ctx.tick()
        ctx.set(dut.lvl, 1)
        await ctx.tick().repeat(2)
        box = ctx.get(dut.mailbox)
        # Never visited: the front end measured the pulse itself.
        assert (box.valid, box.partial, box.rec, box.stamp) == (1, 0, 0, 4)

    run(dut, bench)


@pytest.mark.parametrize("every", [1, 40])
def test_front_end_pulse_in_progress_at_reset_is_partial(every):
    d = FrontEndDriver(P24, every=every)

    async def bench(ctx):
        await d.step(ctx, 0, n=7)  # low from the first cycle: start not observed
        await d.step(ctx, 1, n=2 if every == 1 else every - d.cycle + 1)
        await d.step(ctx, 0, n=4)
        await d.step(ctx, 1, n=2 if every == 1 else 2 * every - d.cycle + 1)

    run(d.dut, bench)
    assert d.events == [(EventKind.PARTIAL, 7), (EventKind.END, 4)]


def test_front_end_disable_cuts_pulse_and_enable_while_low_is_partial():
    d = FrontEndDriver(P24)

    async def bench(ctx):
        await d.step(ctx, 1, n=2)
        await d.step(ctx, 0, n=3)
        await d.step(ctx, 0, enable=0, n=3)  # disabled mid-pulse: end not observed
        await d.step(ctx, 0, enable=1, n=5)  # enabled while low: start not observed
        await d.step(ctx, 1, n=2)
        await d.step(ctx, 0, enable=0, n=6)  # disabled channels see nothing
        await d.step(ctx, 1, enable=0, n=2)

    run(d.dut, bench)
    assert d.events == [(EventKind.PARTIAL, 3), (EventKind.PARTIAL, 5)]


def test_front_end_asks_once_for_its_start_and_reports_its_run():
    """`fall_req` until the pipeline records the start, then `run_rec` until the pulse ends, both
    registered (a cycle late); the age is the pulse's width so far."""
    dut = FrontEnd(P24)

    async def bench(ctx):
        ctx.set(dut.enable, 1)
        ctx.set(dut.tick, 1)
        ctx.set(dut.lvl, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.lvl, 0)
        seen = []
        for t in range(6):
            seen.append((ctx.get(dut.fall_req), ctx.get(dut.run_rec), ctx.get(dut.age)))
            ctx.set(dut.take_fall, t == 3)
            await ctx.tick()
        ctx.set(dut.take_fall, 0)
        ctx.set(dut.lvl, 1)
        await ctx.tick()
        seen.append((ctx.get(dut.fall_req), ctx.get(dut.run_rec), ctx.get(dut.age)))
        assert seen == [(0, 0, 0), (1, 0, 1), (1, 0, 2), (1, 0, 3), (0, 0, 4), (0, 1, 5),
                        (0, 0, 0)]

    run(dut, bench)


def test_front_end_counts_glitches_beside_the_mailbox():
    d = FrontEndDriver(P24, take=False)

    async def bench(ctx):
        dut = d.dut
        ctx.set(dut.glitch_off, 0)  # glitch_ticks = 3
        ctx.set(dut.glitch_now, 3 - 1)  # a tick every cycle: the threshold less this tick
        await d.step(ctx, 1, n=2)
        await d.step(ctx, 0, n=5)  # a pulse: occupies the mailbox
        for width in (1, 2, 1):  # ringing: glitches below 3 ticks
            await d.step(ctx, 1, n=1)
            await d.step(ctx, 0, n=width)
        await d.step(ctx, 1, n=1)
        await d.step(ctx, 0, n=3)  # exactly glitch_ticks: a pulse, and the mailbox is full
        await d.step(ctx, 1, n=2)
        box = ctx.get(dut.mailbox)
        assert (box.valid, box.stamp, box.glitches, box.lost) == (1, 5, 3, 1)
        ctx.set(dut.take_side, 1)
        await ctx.tick()
        box = ctx.get(dut.mailbox)
        assert (box.valid, box.glitches, box.lost) == (1, 0, 0)

    run(d.dut, bench)


@pytest.mark.parametrize("threshold", [1, 3, 255])
def test_front_end_glitch_verdict_around_the_threshold_and_past_a_wrapped_age(threshold):
    """A pulse is a glitch exactly when it is shorter than glitch_ticks: the verdict is a flag
    set when the age passes the threshold, so a pulse long enough to wrap the age (whose final
    age may be below the threshold again) is never one."""
    d = FrontEndDriver(P24, take=True, every=1)
    k = P24.stamp_bits
    wrapped = (1 << k) + max(threshold - 2, 0)  # its age at the end is below the threshold
    widths = [threshold - 1, threshold, threshold + 1, wrapped]

    async def bench(ctx):
        dut = d.dut
        ctx.set(dut.glitch_off, 0)
        ctx.set(dut.glitch_now, threshold - 1)  # a tick every cycle
        await d.step(ctx, 1, n=2)
        for width in widths:
            await d.step(ctx, 0, n=width)
            await d.step(ctx, 1, n=2)
        await d.step(ctx, 1, n=2)
        assert ctx.get(dut.mailbox.glitches) == (threshold > 1)

    run(d.dut, bench)
    # The recorded pulses' widths are formed by the driver from the recorded start.
    assert d.events == [(EventKind.END, w) for w in widths if w >= threshold]


def test_front_end_counts_lost_events_when_mailbox_is_full():
    d = FrontEndDriver(P24, take=False)

    async def bench(ctx):
        dut = d.dut
        await d.step(ctx, 1, n=2)
        for _ in range(5):
            await d.step(ctx, 0, n=2)
            await d.step(ctx, 1, n=1)
        await ctx.tick()  # a loss is added to the count one cycle after it happens
        box = ctx.get(dut.mailbox)
        assert (box.valid, box.stamp, box.lost) == (1, 2, 4)  # first kept, four lost
        ctx.set(dut.take_side, 1)
        await ctx.tick()
        ctx.set(dut.take_side, 0)
        assert ctx.get(dut.mailbox).lost == 0
        await d.step(ctx, 0, n=2)
        ctx.set(dut.lvl, 1)  # the pulse ends this cycle: a loss
        await ctx.tick()
        # Taking the side counts in the cycle the loss is added: lost becomes 0 + 1.
        ctx.set(dut.take_side, 1)
        await ctx.tick()
        ctx.set(dut.take_side, 0)
        assert ctx.get(dut.mailbox).lost == 1

    run(d.dut, bench)


# ---- Classifier --------------------------------------------------------------------------------

def classify_ref(params, config, width):
    k = config.classify(width)
    return params.counter_index(Counter.UNCLASSIFIED) if k is None else k


def test_classifier_window_edges_and_priority():
    p = P24
    config = SnifferConfig(windows=(
        (10, 20), (20, 50), (40, 100), (1000, 500), (0, 0))).validate(p)
    dut = Classifier(p)
    widths = [0, 9, 10, 19, 20, 39, 40, 49, 50, 99, 100, 500, 999, 1000, p.max_width - 1]
    # Edges lo-1, lo, hi-1, hi of each window; [40, 100) overlaps [20, 50): the lower index
    # wins; [1000, 500) and [0, 0) are empty.
    k = p.classes
    expected = [k, k, 0, 0, 1, 1, 1, 1, 2, 2, k, k, k, k, k]
    assert [classify_ref(p, config, w) for w in widths] == expected

    async def bench(ctx):
        ctx.set(dut.windows, [{"lo": lo, "hi": hi} for lo, hi in config.windows])
        for w, index in zip(widths, expected, strict=True):
            ctx.set(dut.width, w)
            assert ctx.get(dut.index) == index, f"width {w}"

    run(dut, bench, clock=False)


def test_classifier_random_against_reference():
    p = P24
    rng = random.Random(7)
    dut = Classifier(p)

    async def bench(ctx):
        for _ in range(20):
            windows = []
            for _ in range(p.classes):
                lo = rng.randrange(0, 5000)
                windows.append((lo, lo + rng.randrange(-100, 3000)))
            windows = [(lo, max(hi, 0)) for lo, hi in windows]
            config = SnifferConfig(windows=tuple(windows)).validate(p)
            ctx.set(dut.windows, [{"lo": lo, "hi": hi} for lo, hi in config.windows])
            for _ in range(50):
                w = rng.randrange(0, 9000)
                ctx.set(dut.width, w)
                assert ctx.get(dut.index) == classify_ref(p, config, w)

    run(dut, bench, clock=False)


# ---- LogBinner ---------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [P24, SnifferParams(channels=1, width_bits=20, hist_sub_bits=4)])
def test_log_binner_matches_definition(params):
    dut = LogBinner(params)
    s = params.hist_sub_bits
    widths = set(range(0, 300))
    for e in range(params.width_bits):
        for d in (-1, 0, 1):
            widths.add(max(0, (1 << e) + d))
    rng = random.Random(1)
    widths |= {rng.randrange(params.max_width) for _ in range(300)}
    widths = sorted(w for w in widths if w < params.max_width)

    async def bench(ctx):
        for w in widths:
            ctx.set(dut.width, w)
            assert ctx.get(dut.bin) == hist_bin(w, s), f"width {w}"

    run(dut, bench, clock=False)


def test_log_bins_tile_the_width_axis():
    p = P24
    s = p.hist_sub_bits
    assert p.hist_bins == 176
    assert hist_bin(p.max_width - 1, s) == p.hist_bins - 1
    for b in range(p.hist_bins - 1):
        lo, hi = hist_bin_lo(b, s), hist_bin_lo(b + 1, s)
        assert hi > lo
        assert hist_bin(lo, s) == b and hist_bin(hi - 1, s) == b and hist_bin(hi, s) == b + 1
        if lo >= 8:  # at least 8 bins per octave: each bin is at most 1/8 of its lower edge
            assert (hi - lo) * 8 <= lo


# ---- Quiescence --------------------------------------------------------------------------------

def test_quiescence_flag_and_timestamp():
    dut = Quiescence(P24)

    async def bench(ctx):
        ctx.set(dut.idle_ticks, 5)
        ctx.set(dut.tick, 1)
        seen = []
        levels = [1] * 8 + [0] * 3 + [1] * 8
        for t, ready in enumerate(levels):
            ctx.set(dut.all_ready, ready)
            ctx.set(dut.timestamp, 100 + t)
            seen.append((ctx.get(dut.quiescent), ctx.get(dut.quiet_since)))
            await ctx.tick()
        # Ready from t=0: idle reaches 5 at t=5. Busy t=8..10; ready again from t=11 (ts 111).
        # The flag is registered after a registered comparison: it shows each of those two
        # cycles later.
        assert [q for q, _ in seen] == [0] * 7 + [1] * 3 + [0] * 3 + [0] * 5 + [1] * 1
        assert seen[5][1] == 100 and seen[12][1] == 111 and seen[18][1] == 111

    run(dut, bench)


@pytest.mark.parametrize("idle_ticks", [0x0FF, 0x100, 0x105, 0x1FF, 0x2F0])
def test_quiescence_compares_across_segments(idle_ticks):
    """The segmented comparison (QUIESCENCE_SEGMENT bits per segment, joined a cycle later) is
    exact when the count and the threshold differ in any segment: the flag rises exactly
    QUIESCENT_LAG cycles after the count reaches idle_ticks, and not one cycle earlier."""
    # The count runs past the lowest segment (for 0xFF: just past, where the lowest segment
    # alone says "below").
    assert (idle_ticks + 4) >> QUIESCENCE_SEGMENT
    dut = Quiescence(P24)

    async def bench(ctx):
        ctx.set(dut.idle_ticks, idle_ticks)
        ctx.set(dut.tick, 1)
        ctx.set(dut.all_ready, 1)
        flags = []
        for _ in range(idle_ticks + QUIESCENT_LAG + 4):
            flags.append(ctx.get(dut.quiescent))
            await ctx.tick()
        # The count is t on cycle t (ready from reset, a tick every cycle).
        first = idle_ticks + QUIESCENT_LAG
        assert flags[:first] == [0] * first and set(flags[first:]) == {1}

    run(dut, bench)


def test_parameters_are_validated_with_the_offending_value():
    with pytest.raises(ValueError, match="channels must be an integer from 1 to 256, not 0"):
        SnifferParams(channels=0)
    with pytest.raises(ValueError, match="classes"):
        SnifferParams(channels=4, classes=11)
    with pytest.raises(ValueError, match="tag_bits must be an integer from 0 to 4, not 5"):
        SnifferParams(channels=4, tag_bits=5)
    with pytest.raises(TypeError, match="not 'x'"):
        mailbox_layout("x")
    with pytest.raises(ValueError, match=r"windows\[1\].hi"):
        SnifferConfig(windows=((1, 2), (3, -1))).validate(P24)
    with pytest.raises(ValueError, match="glitch_ticks must be an integer from 0 to 255"):
        SnifferConfig(glitch_ticks=256).validate(P24)
    with pytest.raises(ValueError, match="prescaler"):
        SnifferConfig(prescaler=1 << 16).validate(P24)

"""Amaranth-simulator tests of the whole sniffer: counters, histogram, clear, drops, reads."""

import pytest

from rbscope.device.stimulus import TrainSpec, merge_trains, random_trains
from rbscope.gateware.rb_sniffer import Counter, EventKind, SnifferConfig, SnifferParams, Space
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train

from .sniffer_harness import SnifferBench, pin_schedule

P3 = SnifferParams(channels=3)
K = P3.classes
IDX = {c: P3.counter_index(c) for c in Counter}
IDX_2 = {c: SnifferParams(channels=2).counter_index(c) for c in Counter}
CONFIG = SnifferConfig(prescaler=2, glitch_ticks=3,
                       windows=((5, 20), (20, 60), (60, 200)), idle_ticks=50)


def pulses(start, spec):
    """Edges for back-to-back pulses: spec = [(low_cycles, high_cycles), ...] from ``start``."""
    edges, t = [], start
    for low, high in spec:
        edges += [(t, 0), (t + low, 1)]
        t += low + high
    return edges


def test_counts_busy_time_and_histogram_of_known_pulses():
    bench = SnifferBench(P3)
    # Prescaler 2: ticks on odd cycles, so a low run of 2n cycles starting on an even cycle
    # holds n ticks. Widths (ticks): ch0 10, 30, 2 (glitch), 100; ch1 in progress at reset,
    # then 7; ch2 idle.
    trains = [
        (1, pulses(10, [(20, 10), (60, 10), (4, 10), (200, 10)])),
        (0, [(30, 1)] + pulses(40, [(14, 10)])),
        (1, []),
    ]
    _, schedule = pin_schedule(trains)
    rows, hists, seen = {}, {}, {}

    async def tb(ctx):
        await bench.reset(ctx, CONFIG, 0b101)
        await bench.play(ctx, schedule, 500)
        await bench.drain(ctx)
        for ch in range(3):
            rows[ch] = await bench.read_row(ctx, ch)
        hists[0] = await bench.read_histogram(ctx, 0)
        seen["quiescent"] = ctx.get(bench.dut.status.quiescent)

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()

    r0, r1, r2 = rows[0], rows[1], rows[2]
    assert r0[:K] == [1, 1, 1, 0, 0]  # 10 → [5,20), 30 → [20,60), 100 → [60,200)
    assert r0[IDX[Counter.GLITCH]] == 1
    assert r0[IDX[Counter.BUSY_TICKS]] == 10 + 30 + 100
    assert r1[IDX[Counter.PARTIAL]] == 1 and r1[0] == 1
    # ch1 was low for cycles [0, 30) after reset plus the 2 cycles of synchroniser latency
    # → 16 ticks, then the 7-tick pulse.
    assert r1[IDX[Counter.BUSY_TICKS]] == 16 + 7
    assert r2 == [0] * P3.row
    expected_hist = [0] * P3.hist_bins
    for w in (10, 30, 100):
        expected_hist[P3.hist_bin(w)] += 1
    assert hists[0] == expected_hist
    assert seen["quiescent"] == 1


@pytest.mark.parametrize("late", [False, True])
def test_clear_is_atomic_and_counts_resume_in_the_new_epoch(late):
    bench = SnifferBench(P3, normalise_late=late)
    log = {}

    async def tb(ctx):
        dut = bench.dut
        await bench.reset(ctx, CONFIG, 0b111)
        await bench.play(ctx, pin_schedule([(1, pulses(4, [(20, 4)] * 5))] + [(1, [])] * 2)[1],
                         200)
        await bench.drain(ctx)
        log["before"] = await bench.read_row(ctx, 0)
        log["epoch0"] = ctx.get(dut.status.epoch)
        # Two clears in a row: the second waits for the scrubber of the first.
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        log["busy_after_first"] = ctx.get(dut.status.clear_busy)
        log["after_clear"] = await bench.read_row(ctx, 0)
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        log["epoch_during_scrub"] = ctx.get(dut.status.epoch)
        cycles = 0
        while ctx.get(dut.status.clear_busy):
            await ctx.tick()
            cycles += 1
        log["scrub_cycles"] = cycles
        log["epoch_final"] = ctx.get(dut.status.epoch)
        bench.cycle += 1000  # only relative times matter from here on
        # New pulses after both clears: counted from zero; nothing from before resurrects.
        ctx.set(dut.rb, 0b110)
        await ctx.tick().repeat(30)
        ctx.set(dut.rb, 0b111)
        await bench.drain(ctx)
        log["after"] = await bench.read_row(ctx, 0)
        log["hist_after"] = await bench.read_histogram(ctx, 0)

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()

    assert log["before"][0] == 5 and log["before"][IDX[Counter.BUSY_TICKS]] == 50
    assert log["busy_after_first"] == 1
    assert log["after_clear"] == [0] * P3.row
    assert log["epoch_during_scrub"] == log["epoch0"] + 1
    assert log["epoch_final"] == log["epoch0"] + 2
    # Idle scrubbing: one word per two-cycle slot, over max(counter words, histogram words).
    depth = max(P3.channels * P3.row, P3.hist_bins * P3.channels_pow2)
    assert 2 * depth <= log["scrub_cycles"] <= 2 * (2 * depth + 10)
    assert log["after"][0] == 1 and log["after"][IDX[Counter.BUSY_TICKS]] == 15
    assert sum(log["after"]) == 16
    assert sum(log["hist_after"]) == 1 and log["hist_after"][P3.hist_bin(15)] == 1


def test_overload_drops_are_counted_and_nothing_else_is_lost():
    p = SnifferParams(channels=2)
    bench = SnifferBench(p)
    config = SnifferConfig(prescaler=1, glitch_ticks=0, windows=((1, 2),), idle_ticks=10)
    n_pulses = 300
    rows = {}

    async def tb(ctx):
        await bench.reset(ctx, config, 0b11)
        # One-cycle pulses every 3 cycles on channel 0: far faster than the 6-cycle scan.
        trains = [(1, pulses(5, [(1, 2)] * n_pulses)), (1, pulses(7, [(5, 40)] * 20))]
        await bench.play(ctx, pin_schedule(trains)[1], 5 + 3 * n_pulses + 20)
        await bench.drain(ctx)
        await bench.drain(ctx)
        rows[0] = await bench.read_row(ctx, 0)
        rows[1] = await bench.read_row(ctx, 1)

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()
    r0 = rows[0]
    dropped = r0[p.counter_index(Counter.DROPPED)]
    counted = r0[0]
    assert dropped > 0
    assert counted + dropped == n_pulses
    assert r0[p.counter_index(Counter.BUSY_TICKS)] == counted
    # The quiet channel beside it lost nothing.
    assert rows[1][p.counter_index(Counter.UNCLASSIFIED)] == 20
    assert rows[1][p.counter_index(Counter.DROPPED)] == 0


def test_trace_reports_every_event_and_bad_reads_return_zero():
    bench = SnifferBench(P3)
    records, reads = [], {}

    async def watch(ctx):
        async for _, _, valid, rec in ctx.tick().sample(bench.dut.trace.valid,
                                                        bench.dut.trace.payload):
            if valid:
                records.append((rec.channel, EventKind(rec.kind), rec.index, rec.width))

    async def tb(ctx):
        await bench.reset(ctx, CONFIG, 0b111)
        trains = [(1, pulses(4, [(20, 6), (4, 6)])), (1, []), (1, pulses(9, [(100, 5)]))]
        await bench.play(ctx, pin_schedule(trains)[1], 150)
        await bench.drain(ctx)
        reads["bad_channel"] = await bench.read(ctx, Space.COUNTERS, 3, 0)
        reads["bad_bin"] = await bench.read(ctx, Space.HISTOGRAM, 0, P3.hist_bins)

    sim = bench.simulator()
    sim.add_process(watch)
    sim.add_testbench(tb)
    sim.run()
    # The glitch (2 ticks) is a side count, not a traced event.
    assert sorted(records) == sorted([
        (0, EventKind.END, 0, 10),
        (2, EventKind.END, 1, 50),
    ])
    assert reads == {"bad_channel": 0, "bad_bin": 0}


#: (normalise_late, scramble_collisions): the two places of normalisation, each with the counter
#: and start RAMs returning the complement of the old word when a read meets a write of its
#: address (the iCE40 build's collision-free RAMs may return anything then).
VARIANTS = [(False, False), (True, False), (False, True), (True, True)]
#: The longest simulations run two variants by default (neither option, both), the mixed ones
#: in `make test-heavy`: each option alone is also checked by the shorter tests below.
VARIANTS_LONG = [(False, False), pytest.param(True, False, marks=pytest.mark.heavy),
                 pytest.param(False, True, marks=pytest.mark.heavy), (True, True)]


@pytest.mark.parametrize(("late", "scramble"), VARIANTS_LONG)
def test_random_trains_match_reference_model(late, scramble):
    """Seeded random NAND-like trains: every counter, bin and status field as the model says."""
    p = SnifferParams(channels=3, width_bits=16)
    config = SnifferConfig(prescaler=2, glitch_ticks=2, idle_ticks=30,
                           windows=((2, 6), (6, 60), (60, 1200), (1200, 2500)))
    cycles = 8000
    for seed in (1, 2):
        trains = random_trains(TrainSpec(3, cycles, gap=(10, 200), glitch_rate=0.3,
                                         low_at_reset=frozenset({1})), seed)
        model = SnifferModel(p, config).run(trains, cycles)
        assert not model.may_drop and len(model.pulses) > 30
        bench = SnifferBench(p, normalise_late=late, scramble_collisions=scramble)
        got = {}

        async def tb(ctx, bench=bench, trains=trains, got=got):
            initial, schedule = merge_trains(trains)
            await bench.reset(ctx, config, initial)
            await bench.play(ctx, schedule, cycles)
            got["status"] = ctx.get(bench.dut.status)
            await bench.drain(ctx)
            got["rows"] = [await bench.read_row(ctx, ch) for ch in range(3)]
            got["hists"] = [await bench.read_histogram(ctx, ch) for ch in range(3)]

        sim = bench.simulator()
        sim.add_testbench(tb)
        sim.run()
        assert got["rows"] == [c.row(p) for c in model.channels]
        assert got["hists"] == [c.histogram for c in model.channels]
        status = got["status"]
        assert status.timestamp == model.timestamp_at(cycles)
        assert status.quiescent == model.quiescent_at(cycles)
        assert status.quiet_since == model.quiet_since_at(cycles)


@pytest.mark.parametrize(("late", "scramble"), VARIANTS_LONG)
def test_events_during_the_scrub_are_counted_exactly(late, scramble):
    """Pulses on every channel while the scrubber sweeps the RAMs after a clear: a scrub job
    right behind an event job on the same word must not undo the event's update."""
    p = SnifferParams(channels=3, width_bits=16)
    config = SnifferConfig(prescaler=1, glitch_ticks=1, windows=((2, 12), (12, 40)),
                           idle_ticks=10)
    rounds = 3
    got = []
    bench = SnifferBench(p, normalise_late=late, scramble_collisions=scramble)

    async def tb(ctx):
        dut = bench.dut
        await bench.reset(ctx, config, 0b111)
        for r in range(rounds):
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            bench.cycle += 1
            t0 = bench.cycle + 2
            # Dense pulses of varied widths on every channel (one event per 11 to 24 cycles per
            # channel; the scanner visits each every 8), all while the scrubber runs.
            trains = [(1, pulses(t0 + 3 * ch, [(2 + (k * (ch + 5) + r) % 13, 9)
                                               for k in range(70)])) for ch in range(3)]
            await bench.play(ctx, pin_schedule(trains)[1], t0 + 70 * 24)
            await bench.drain(ctx)
            while ctx.get(dut.status.clear_busy):
                await ctx.tick()
                bench.cycle += 1
            rows = [await bench.read_row(ctx, ch) for ch in range(3)]
            hists = [await bench.read_histogram(ctx, ch) for ch in range(3)]
            got.append((trains, rows, hists))

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()
    model = SnifferModel(p, config)
    for trains, rows, hists in got:
        # Shift each round's pulses to start near cycle 0 for the model (only counts matter).
        shift = min(edges[0][0] for _, edges in trains) - 10
        result = model.run([Train(1, [(c - shift, v) for c, v in edges]) for _, edges in trains],
                           70 * 24 + 200)
        assert not result.may_drop
        assert rows == [c.row(p) for c in result.channels]
        assert hists == [c.histogram for c in result.channels]


@pytest.mark.parametrize(("late", "scramble"), VARIANTS)
def test_an_event_right_behind_the_scrub_of_its_word(late, scramble):
    """One busy channel with an event at every visit, the other idle, cleared at each of six
    phases of the scanner: the scrubber (in the idle channel's slots and the service slots)
    writes the busy channel's count word in the slot right before that channel's event at
    some phase, and the event's read meets the scrub's write. Every count is the model's."""
    p = SnifferParams(channels=2, width_bits=16)
    config = SnifferConfig(prescaler=1, glitch_ticks=1, windows=((2, 12), (12, 40)),
                           idle_ticks=10)
    got = []
    bench = SnifferBench(p, normalise_late=late, scramble_collisions=scramble)

    async def tb(ctx):
        dut = bench.dut
        await bench.reset(ctx, config, 0b11)
        for r in range(6):
            await bench.run_to(ctx, bench.cycle + r)
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            bench.cycle += 1
            t0 = bench.cycle + 1
            # A 3-tick pulse every 6 cycles (one scanner round of 3 slots): an event at
            # every visit of channel 1 while the scrubber sweeps its words.
            trains = [(1, []), (1, pulses(t0, [(3, 3)] * 40))]
            await bench.play(ctx, pin_schedule(trains)[1], t0 + 40 * 6 + 10)
            await bench.drain(ctx)
            while ctx.get(dut.status.clear_busy):
                await ctx.tick()
                bench.cycle += 1
            got.append((trains, [await bench.read_row(ctx, ch) for ch in range(2)]))

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()
    model = SnifferModel(p, config)
    for trains, rows in got:
        shift = trains[1][1][0][0] - 10
        result = model.run([Train(1, [(c - shift, v) for c, v in edges]) for _, edges in trains],
                           40 * 6 + 200)
        assert rows == [c.row(p) for c in result.channels]
        assert rows[1][0] == 40


@pytest.mark.parametrize(("late", "scramble"), VARIANTS)
def test_reads_during_traffic_never_see_a_collision(late, scramble):
    """Read requests for a busy channel's counters while its events are counted: a request
    often lands in the slot right after the channel's event, so its reads meet that event's
    writes. Each answer is the count as of the job before or after (never less than an earlier
    answer, never more than the final count), and the final counts are the model's."""
    p = SnifferParams(channels=2, width_bits=16)
    config = SnifferConfig(prescaler=1, glitch_ticks=1, windows=((2, 12), (12, 40)),
                           idle_ticks=10)
    t0, cycles = 20, 3000
    trains = [(1, pulses(t0, [(3 + k % 11, 5 + k % 3) for k in range(180)])), (1, [])]
    watched = [IDX_2[Counter.BUSY_TICKS], 0]  # busy time, and class 0's count
    bench = SnifferBench(p, normalise_late=late, scramble_collisions=scramble)
    answers = {index: [] for index in watched}
    got = {}

    async def pins(ctx):
        await bench.reset(ctx, config, 0b11)
        got["started"] = True
        await bench.play(ctx, pin_schedule(trains)[1], cycles)
        got["stop"] = True
        while "stopped" not in got:
            await ctx.tick()
        await bench.drain(ctx)
        got["rows"] = [await bench.read_row(ctx, ch) for ch in range(2)]

    async def reader(ctx):
        dut = bench.dut
        while "started" not in got:
            await ctx.tick()
        while "stop" not in got:
            for index in watched:
                ctx.set(dut.read_req.payload, {"space": Space.COUNTERS, "channel": 0,
                                               "index": index})
                ctx.set(dut.read_req.valid, 1)
                await ctx.tick().until(dut.read_req.ready)
                ctx.set(dut.read_req.valid, 0)
                ctx.set(dut.read_resp.ready, 1)
                value, = await ctx.tick().sample(dut.read_resp.payload).until(
                    dut.read_resp.valid)
                ctx.set(dut.read_resp.ready, 0)
                answers[index].append(value)
        got["stopped"] = True

    sim = bench.simulator()
    sim.add_testbench(pins)
    sim.add_testbench(reader)
    sim.run()
    result = SnifferModel(p, config).run([Train(init, edges) for init, edges in trains], cycles)
    assert not result.may_drop
    assert got["rows"] == [c.row(p) for c in result.channels]
    for index in watched:
        final = got["rows"][0][index]
        seen = answers[index]
        assert len(seen) > 100 and final > 0
        assert all(a <= b for a, b in zip(seen, seen[1:], strict=False)), seen
        assert max(seen) <= final


def test_bus_tap_tag_selects_the_class():
    """A tag_bits build: the tag sampled at a pulse's start picks its class (1 … K → K - 1);
    tag 0 and tags above K leave it to the windows. Busy time and histogram are unchanged."""
    p = SnifferParams(channels=2, classes=2, tag_bits=2)
    config = SnifferConfig(prescaler=1, glitch_ticks=2, windows=((5, 50), (50, 500)),
                           idle_ticks=10)
    # Channel 0: four 20-tick pulses (window 0) with tags 0, 1, 3, 2, each changed while the
    # pulse is low (only the value at its start counts). Channel 1: tag 2 → class 1.
    widths_tags = [(20, 0), (20, 1), (20, 3), (20, 2)]
    bench = SnifferBench(p)
    got, records = {}, []

    async def watch(ctx):
        async for _, _, valid, rec in ctx.tick().sample(bench.dut.trace.valid,
                                                        bench.dut.trace.payload):
            if valid:
                records.append((rec.channel, rec.index, rec.tag))

    async def tb(ctx):
        dut = bench.dut
        await bench.reset(ctx, config, 0b11)
        await bench.run_to(ctx, 10)
        for width, tag in widths_tags:
            ctx.set(dut.tag, tag | (2 << 2))
            # The synchroniser delays the level by two cycles: keep the tag two cycles more.
            ctx.set(dut.rb, 0b00)
            await bench.run_to(ctx, bench.cycle + 3)
            ctx.set(dut.tag, 1 << 2)  # channel 0: tag 0, channel 1: tag 1
            await bench.run_to(ctx, bench.cycle + width - 3)
            ctx.set(dut.rb, 0b11)
            await bench.run_to(ctx, bench.cycle + 30)
        await bench.drain(ctx)
        got["rows"] = [await bench.read_row(ctx, ch) for ch in range(2)]
        got["hist"] = await bench.read_histogram(ctx, 0)

    sim = bench.simulator()
    sim.add_process(watch)
    sim.add_testbench(tb)
    sim.run()
    row0, row1 = got["rows"]
    assert row0[:2] == [3, 1]  # tags 0 and 3 (> K): window 0; tag 1: class 0; tag 2: class 1
    assert row1[:2] == [0, 4]  # tag 2 every time, though the window says class 0
    assert row0[p.counter_index(Counter.BUSY_TICKS)] == 80
    assert got["hist"][p.hist_bin(20)] == 4
    assert [r for r in records if r[0] == 0] == [(0, 0, 0), (0, 0, 1), (0, 0, 3), (0, 1, 2)]
    assert [r for r in records if r[0] == 1] == [(1, 1, 2)] * 4

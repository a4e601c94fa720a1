"""Tests of the sniffer reference model (`rbscope.gateware.rb_sniffer.model`).

The fast, edge-based model is checked against a deliberately naive simulator written here straight
from the rules of docs/architecture.md, one clock cycle at a time, and against hand-computed cases.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbscope.gateware.rb_sniffer.model import (
    SYNC_LATENCY,
    ChannelCounts,
    ChannelTracker,
    PulseRecord,
    QuiescenceTracker,
    SnifferModel,
    Train,
)
from rbscope.gateware.rb_sniffer.params import (
    QUIESCENT_LAG,
    READY_LAG,
    Counter,
    EventKind,
    SnifferConfig,
    SnifferParams,
    hist_bin,
)

# The naive per-cycle reference ------------------------------------------------------------------


def pin_levels(train, length):
    """Return pin(t) for t in [0, length)."""
    pins = [train.initial] * length
    level, last = train.initial, 0
    for cycle, new in train.edges:
        if cycle >= length:
            break
        pins[last:cycle] = [level] * (cycle - last)
        level, last = new, cycle
    pins[last:length] = [level] * (length - last)
    return pins


def naive_run(params, config, trains, cycles):
    """Simulate the sniffer register by register, one cycle at a time.

    Returns (counts, pulses, timestamp, quiescent, quiet_since), the last three indexed by cycle
    0 … cycles.
    """
    config = config.validate(params)
    n = params.channels
    k = params.classes
    period = max(config.prescaler, 1)
    cmax = (1 << params.width_bits) - 1
    ts_mask = (1 << params.timestamp_bits) - 1
    enabled = [bool((config.enable >> i) & 1) for i in range(n)]
    pins = [pin_levels(train, cycles + 1) for train in trains]
    counts = [ChannelCounts([0] * k, 0, 0, 0, 0, 0, 0, [0] * params.hist_bins)
              for _ in range(n)]
    pulses = []
    ends = []  # (channel, cycle) of every pulse end that passes the mailbox (not glitches)

    def apply(ch, kind, width, t):
        c = counts[ch]
        if kind == EventKind.END:
            if width < config.glitch_ticks:
                c.glitch += 1
                index = k + Counter.GLITCH
            else:
                index = k + Counter.UNCLASSIFIED
                for j, (lo, hi) in enumerate(config.windows):
                    if lo <= width < hi:
                        index = j
                        break
                if index < k:
                    c.classes[index] += 1
                else:
                    c.unclassified += 1
                c.busy_ticks += width
                b = hist_bin(width, params.hist_sub_bits)
                c.histogram[b] = (c.histogram[b] + 1) % (1 << params.hist_bits)
        elif kind == EventKind.PARTIAL:
            c.partial += 1
            c.busy_ticks += width
            index = k + Counter.PARTIAL
        elif kind == EventKind.OVERLONG:
            c.overlong += 1
            c.busy_ticks += width
            index = k + Counter.OVERLONG
        else:
            c.busy_ticks += width
            index = k + Counter.BUSY_TICKS
        pulses.append(PulseRecord(ch, EventKind(kind), index, width, t))

    # Registers (reset values).
    pc = 0
    timestamp = 0
    idle = 0
    all_ready_prev = False
    quiet_since = 0
    # all_ready is READY_LAG registers of "no enabled channel low": after reset they hold the
    # levels the pins had during reset (their initial ones).
    all_ready_q = [not any(enabled[i] and trains[i].initial == 0 for i in range(n))] * READY_LAG
    cnt = [0] * n
    saturated = [False] * n
    armed = [False] * n
    low_prev = [False] * n

    quiescent_q = [False] * QUIESCENT_LAG  # reset
    ts_log, quiescent_log, quiet_since_log = [], [], []
    for t in range(cycles + 1):
        tick = pc + 1 >= period
        lvl = [pins[i][t - 2] if t >= 2 else trains[i].initial for i in range(n)]
        low = [enabled[i] and lvl[i] == 0 for i in range(n)]
        all_ready = all_ready_q[0]
        all_ready_q = all_ready_q[1:] + [not any(low)]
        ts_log.append(timestamp)
        # status.quiescent is registered: what all_ready and idle said QUIESCENT_LAG cycles
        # before.
        quiescent_log.append(quiescent_q[0])
        quiescent_q = quiescent_q[1:] + [all_ready and idle >= config.idle_ticks]
        quiet_since_log.append(quiet_since)
        for i in range(n):
            cnt_next, sat_next = cnt[i], saturated[i]
            if low[i] and tick:
                if cnt[i] + 1 == cmax:
                    if t < cycles:
                        apply(i, EventKind.BUSY if saturated[i] else EventKind.OVERLONG, cmax, t)
                    cnt_next, sat_next = 0, True
                else:
                    cnt_next = cnt[i] + 1
            if not low[i] and low_prev[i]:
                if t < cycles and not (not saturated[i] and armed[i] and enabled[i]
                                       and cnt[i] < config.glitch_ticks):
                    ends.append((i, t))
                if t < cycles:
                    if saturated[i]:
                        if cnt[i] > 0:
                            apply(i, EventKind.BUSY, cnt[i], t)
                    elif armed[i] and enabled[i]:
                        apply(i, EventKind.END, cnt[i], t)
                    else:
                        apply(i, EventKind.PARTIAL, cnt[i], t)
                cnt_next, sat_next = 0, False
            armed[i] = enabled[i] and (armed[i] or lvl[i] == 1)
            cnt[i], saturated[i], low_prev[i] = cnt_next, sat_next, low[i]
        if all_ready and not all_ready_prev:
            quiet_since = timestamp
        all_ready_prev = all_ready
        idle = min(idle + tick, ts_mask) if all_ready else 0
        timestamp = (timestamp + tick) & ts_mask
        pc = 0 if tick else pc + 1
    pulses.sort(key=lambda p: (p.end_cycle, p.channel))
    return counts, pulses, ts_log, quiescent_log, quiet_since_log, ends


def naive_may_drop(params, ends):
    # Only pulse ends pass the one-event mailbox: glitches are side counts, and saturations are
    # found by the pipeline at its visits. Two ends within a rotation may meet a full mailbox.
    last = {}
    for channel, cycle in ends:
        if channel in last and cycle - last[channel] < 2 * (params.channels + 1):
            return True
        last[channel] = cycle
    return False


def check_against_naive(params, config, trains, cycles, every_cycle=True, rng=None):
    result = SnifferModel(params, config).run(trains, cycles)
    counts, pulses, ts, quiescent, quiet_since, ends = naive_run(params, config, trains, cycles)
    assert result.pulses == pulses
    assert result.channels == counts
    assert [c.row(params) for c in result.channels] == [c.row(params) for c in counts]
    assert result.may_drop == naive_may_drop(params, ends)
    if every_cycle:
        times = range(cycles + 1)
    else:
        rng = rng or random.Random(cycles)
        times = sorted({0, 1, 2, cycles, *(rng.randrange(cycles + 1) for _ in range(300))}
                       | {p.end_cycle + d for p in pulses for d in (-1, 0, 1)
                          if 0 <= p.end_cycle + d <= cycles})
    for t in times:
        assert result.timestamp_at(t) == ts[t], t
        assert result.quiescent_at(t) == quiescent[t], t
        assert result.quiet_since_at(t) == quiet_since[t], t
    return result


# Random trains ------------------------------------------------------------------------------------


def random_train(rng, cycles, long_low=0):
    """A random pin: short and long pulses, redundant edges, edges at cycle 0 and near the end."""
    initial = rng.randrange(2)
    edges = []
    level = initial
    t = rng.choice([0, 0, 1, 2, 3, rng.randrange(20)])
    while t < cycles + 3:
        r = rng.random()
        if r < 0.1:
            new = level  # redundant edge
        else:
            new = 1 - level
        edges.append((t, new))
        level = new
        if level == 0 and long_low and rng.random() < 0.3:
            gap = rng.randrange(long_low // 2, long_low)
        elif rng.random() < 0.4:
            gap = rng.randrange(1, 4)
        else:
            gap = rng.randrange(1, 60)
        t += gap
    return Train(initial, edges)


def random_setup(rng, channels=None, width_bits=16):
    params = SnifferParams(channels=channels or rng.randrange(1, 5),
                           classes=rng.randrange(1, 5), width_bits=width_bits)
    # Small windows, some overlapping, some empty (lo >= hi).
    windows = [(rng.randrange(0, 30), rng.randrange(0, 50))
               for _ in range(rng.randrange(params.classes + 1))]
    config = SnifferConfig(
        prescaler=rng.randrange(0, 6),
        glitch_ticks=rng.randrange(0, 7),
        windows=tuple(windows),
        idle_ticks=rng.randrange(0, 30),
        enable=rng.choice([-1, -1, rng.randrange(1 << params.channels)]),
    )
    return params, config


@pytest.mark.parametrize("seed", range(40))
def test_random_trains_match_naive(seed):
    rng = random.Random(seed)
    params, config = random_setup(rng)
    cycles = rng.randrange(1, 1500)
    trains = [random_train(rng, cycles) for _ in range(params.channels)]
    check_against_naive(params, config, trains, cycles)


@pytest.mark.parametrize("prescaler", [1, 2, 3])
def test_saturation_matches_naive(prescaler):
    # width_bits=16: MAX = 65535 ticks; pulses of up to ~2.5 MAX ticks saturate once or twice,
    # some end exactly on or next to a multiple of MAX, one is in progress at reset and one is
    # still low at the end.
    params = SnifferParams(channels=2, classes=2, width_bits=16)
    config = SnifferConfig(prescaler=prescaler, glitch_ticks=2,
                           windows=((3, 50), (40, (1 << 16) - 1)), idle_ticks=7)
    cmax = params.max_width
    p = prescaler
    # Channel 0: starts low (partial, saturates), then pulses of exactly MAX, MAX-1, MAX+1 ticks.
    edges0 = [(cmax * p + 100 * p, 1)]
    t = edges0[-1][0] + 10
    for width in (cmax, cmax - 1, cmax + 1):
        start = t - t % p  # low from a tick-aligned start: [start+2, start+2+width*p) in lvl
        edges0 += [(start, 0), (start + width * p, 1)]
        t = start + width * p + 5
    cycles = t + 30
    # Channel 1: short pulses, then stuck low through the end of the run.
    edges1 = [(10, 0), (20, 1), (30, 0), (cmax * p + 45, 1), (cmax * p + 46, 0)]
    trains = [Train(0, edges0), Train(1, edges1)]
    result = check_against_naive(params, config, trains, cycles, every_cycle=False)
    kinds = [(q.channel, q.kind, q.width) for q in result.pulses]
    assert (0, EventKind.OVERLONG, cmax) in kinds
    assert (1, EventKind.OVERLONG, cmax) in kinds
    assert sum(q.kind == EventKind.BUSY and q.width == cmax for q in result.pulses) >= 2
    assert result.channels[0].partial == 0  # the initial pulse saturated: BUSY, not PARTIAL
    assert result.channels[0].overlong == 3


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(st.integers(0, 1), min_size=1, max_size=3),
    gaps=st.lists(st.lists(st.integers(1, 12), max_size=20), min_size=3, max_size=3),
    start=st.integers(0, 3),
    prescaler=st.integers(0, 5),
    glitch=st.integers(0, 4),
    window=st.tuples(st.integers(0, 8), st.integers(0, 12)),
    idle=st.integers(0, 12),
    enable=st.integers(0, 7),
    extra=st.integers(0, 10),
)
def test_hypothesis_matches_naive(initial, gaps, start, prescaler, glitch, window, idle, enable,
                                  extra):
    params = SnifferParams(channels=len(initial), classes=2, width_bits=16)
    config = SnifferConfig(prescaler=prescaler, glitch_ticks=glitch, windows=(window, (0, 5)),
                           idle_ticks=idle, enable=enable)
    trains = []
    end = 0
    for init, ch_gaps in zip(initial, gaps, strict=False):
        edges, t, level = [], start, init
        for gap in ch_gaps:
            level = 1 - level
            edges.append((t, level))
            t += gap
        end = max(end, t)
        trains.append(Train(init, edges))
    check_against_naive(params, config, trains, end + extra)


# Hand-computed cases ------------------------------------------------------------------------------


def pulses_train(*lows, initial=1):
    """A pin high except during the given (start, width) low pulses (in pin cycles)."""
    edges = []
    for start, width in lows:
        edges += [(start, 0), (start + width, 1)]
    return Train(initial, edges)


def run_one(config, train, cycles, classes=5, **kw):
    params = SnifferParams(channels=1, classes=classes, **kw)
    return params, SnifferModel(params, config).run([train], cycles)


def test_window_edges():
    lo, hi = 10, 20
    config = SnifferConfig(glitch_ticks=1, windows=((lo, hi),))
    widths = [lo - 1, lo, hi - 1, hi]
    lows, t = [], 5
    for w in widths:
        lows.append((t, w))
        t += w + 3
    params, result = run_one(config, pulses_train(*lows), t + 10)
    k = params.classes
    got = [(q.kind, q.width, q.index, q.end_cycle) for q in result.pulses]
    assert got == [
        (EventKind.END, w, 0 if lo <= w < hi else k + Counter.UNCLASSIFIED,
         s + w + SYNC_LATENCY)
        for (s, w) in lows
    ]
    counts = result.channels[0]
    assert counts.classes == [2, 0, 0, 0, 0]
    assert counts.unclassified == 2
    assert counts.busy_ticks == sum(widths)
    assert sum(counts.histogram) == 4
    for w in widths:
        assert counts.histogram[hist_bin(w, params.hist_sub_bits)] >= 1


def test_overlapping_windows_lowest_index_wins():
    config = SnifferConfig(glitch_ticks=0, windows=((5, 15), (10, 20), (0, 100), (30, 10)))
    widths = [7, 12, 17, 50, 100, 30]
    lows, t = [], 3
    for w in widths:
        lows.append((t, w))
        t += w + 2
    params, result = run_one(config, pulses_train(*lows), t + 5)
    k = params.classes
    assert [q.index for q in result.pulses] == [0, 0, 1, 2, k + Counter.UNCLASSIFIED, 2]
    assert result.channels[0].classes == [2, 1, 2, 0, 0]
    assert result.channels[0].unclassified == 1


def test_glitch_boundary():
    g = 4
    config = SnifferConfig(glitch_ticks=g, windows=((0, 1000),))
    params, result = run_one(config, pulses_train((10, g - 1), (20, g)), 40)
    k = params.classes
    assert [(q.kind, q.width, q.index) for q in result.pulses] == [
        (EventKind.END, g - 1, k + Counter.GLITCH),
        (EventKind.END, g, 0),
    ]
    counts = result.channels[0]
    assert counts.glitch == 1
    assert counts.classes[0] == 1
    assert counts.busy_ticks == g  # the glitch adds no busy time
    assert sum(counts.histogram) == 1
    assert counts.histogram[hist_bin(g, params.hist_sub_bits)] == 1


def test_zero_width_pulse_with_prescaler():
    # P = 4: ticks on cycles 3, 7, 11, ... A one-cycle low on lvl cycle 4 contains no tick.
    config = SnifferConfig(prescaler=4, glitch_ticks=0, windows=((0, 1),))
    params, result = run_one(config, pulses_train((4 - SYNC_LATENCY, 1), (7 - SYNC_LATENCY, 1)),
                             20)
    assert [(q.width, q.index) for q in result.pulses] == [(0, 0), (1, params.classes)]
    assert result.channels[0].histogram[0] == 1
    assert result.channels[0].histogram[1] == 1


def test_one_cycle_high_gap():
    config = SnifferConfig(glitch_ticks=1, windows=((0, 100),))
    # pin low [10, 20), high on cycle 20 only, low [21, 30).
    train = Train(1, [(10, 0), (20, 1), (21, 0), (30, 1)])
    _, result = run_one(config, train, 50)
    assert [(q.kind, q.width, q.end_cycle) for q in result.pulses] == [
        (EventKind.END, 10, 22),
        (EventKind.END, 9, 32),
    ]
    assert result.channels[0].classes[0] == 2


def test_partial_disabled_and_unfinished():
    params = SnifferParams(channels=3, classes=1)
    config = SnifferConfig(glitch_ticks=1, windows=((0, 100),), enable=0b011, idle_ticks=0)
    trains = [
        Train(0, [(5, 1), (10, 0), (15, 1)]),  # in progress at reset: partial, then a pulse
        Train(1, [(3, 0), (40, 1)]),  # still low at the end of the run
        Train(0, [(1, 1), (2, 0), (4, 1)]),  # disabled
    ]
    result = SnifferModel(params, config).run(trains, 30)
    k = params.classes
    assert [(q.channel, q.kind, q.width, q.index, q.end_cycle) for q in result.pulses] == [
        (0, EventKind.PARTIAL, 7, k + Counter.PARTIAL, 7),
        (0, EventKind.END, 5, 0, 17),
    ]
    assert result.channels[1] == ChannelCounts.zeros(params)
    assert result.channels[2] == ChannelCounts.zeros(params)
    assert result.channels[0].busy_ticks == 12
    assert result.channels[0].partial == 1
    # Channel 0 is low on lvl cycles 0 … 6 and channel 1 from 5 on: never all ready.
    assert not any(result.all_ready_at(t) for t in range(31))
    assert result.ready == []
    assert result.quiet_since_at(30) == 0


def test_end_at_run_length_not_counted():
    config = SnifferConfig(glitch_ticks=1)
    train = pulses_train((10, 5))  # lvl low on [12, 17): END on cycle 17
    assert run_one(config, train, 17)[1].pulses == []
    assert len(run_one(config, train, 18)[1].pulses) == 1


def test_saturation_hand_computed():
    config = SnifferConfig(glitch_ticks=1, windows=((0, (1 << 16) - 1),))
    kw = {"width_bits": 16}
    cmax = (1 << 16) - 1
    k = 5
    # Exactly MAX ticks: OVERLONG on the last tick, nothing at the end (rest 0).
    _, result = run_one(config, pulses_train((0, cmax)), cmax + 10, **kw)
    assert [(q.kind, q.width, q.index, q.end_cycle) for q in result.pulses] == [
        (EventKind.OVERLONG, cmax, k + Counter.OVERLONG, cmax + 1),
    ]
    assert result.channels[0].busy_ticks == cmax
    # MAX - 1 ticks: an ordinary (unclassifiable only by the window) END.
    _, result = run_one(config, pulses_train((0, cmax - 1)), cmax + 10, **kw)
    assert [(q.kind, q.width) for q in result.pulses] == [(EventKind.END, cmax - 1)]
    # 2 MAX + 5 ticks with P = 2, lvl low from cycle 2.
    config2 = SnifferConfig(prescaler=2, glitch_ticks=1)
    width = (2 * cmax + 5) * 2
    _, result = run_one(config2, pulses_train((0, width)), width + 10, **kw)
    # Ticks on odd cycles; the run [2, 2 + width) has its m-th tick on cycle 2m + 1.
    assert [(q.kind, q.width, q.end_cycle) for q in result.pulses] == [
        (EventKind.OVERLONG, cmax, 2 * cmax + 1),
        (EventKind.BUSY, cmax, 4 * cmax + 1),
        (EventKind.BUSY, 5, width + 2),
    ]
    counts = result.channels[0]
    assert (counts.overlong, counts.busy_ticks, counts.partial) == (1, 2 * cmax + 5, 0)
    assert sum(counts.histogram) == 0
    # Stuck low past the end: only the saturation events before the end count.
    _, result = run_one(config, pulses_train((0, 10 * cmax)), 2 * cmax + 1, **kw)
    assert [q.end_cycle for q in result.pulses] == [cmax + 1]
    _, result = run_one(config, pulses_train((0, 10 * cmax)), 2 * cmax + 2, **kw)
    assert [q.end_cycle for q in result.pulses] == [cmax + 1, 2 * cmax + 1]


def test_quiescence_hand_computed():
    params = SnifferParams(channels=2, classes=1)
    config = SnifferConfig(prescaler=3, idle_ticks=2)
    # lvl: channel 0 low [12, 20), channel 1 low [18, 25) -> all_ready (registered, READY_LAG
    # = 2 cycles behind the levels) on [0, 14) and [27, ...).
    assert READY_LAG == 2
    trains = [pulses_train((10, 8)), pulses_train((16, 7))]
    result = SnifferModel(params, config).run(trains, 60)
    assert result.ready == [(0, 14), (27, None)]
    # Ticks on cycles 2, 5, 8, ...; timestamp(t) = t // 3.
    assert [result.timestamp_at(t) for t in (0, 2, 3, 59)] == [0, 0, 1, 19]
    # idle(t) = ticks in [0, t) (first run) or [27, t) (second): >= 2 from t = 6 and t = 33;
    # quiescent is registered (QUIESCENT_LAG = 2): true from t = 8 to 15 and from t = 35.
    assert QUIESCENT_LAG == 2
    assert [result.quiescent_at(t) for t in (0, 7, 8, 15, 16, 28, 29, 34, 35, 60)] == [
        False, False, True, True, False, False, False, False, True, True]
    # quiet_since: timestamp(0) from t = 1, then timestamp(27) = 9 from t = 28.
    assert [result.quiet_since_at(t) for t in (0, 1, 27, 28, 60)] == [0, 0, 0, 9, 9]
    with pytest.raises(ValueError, match="61"):
        result.quiescent_at(61)


def test_may_drop():
    params = SnifferParams(channels=2, classes=1)
    config = SnifferConfig(glitch_ticks=1)
    gap = 2 * (params.channels + 1)
    far = SnifferModel(params, config).run([pulses_train((10, 3), (13 + gap - 3, 3)),
                                            pulses_train((10, 3))], 100)
    assert [q.end_cycle for q in far.pulses if q.channel == 0] == [15, 15 + gap]
    assert not far.may_drop
    near = SnifferModel(params, config).run([pulses_train((10, 3), (13 + gap - 4, 3)),
                                             pulses_train((10, 3))], 100)
    assert near.may_drop


def test_invariants_on_random_trains():
    # sum(histogram) == classes + unclassified; busy ticks + glitch widths == ticks spent low by
    # every enabled channel (all pulses end before the run does).
    rng = random.Random(1234)
    for _ in range(20):
        params, config = random_setup(rng, channels=3)
        cycles = 3000
        trains = [random_train(rng, 2000) for _ in range(params.channels)]
        for train in trains:
            train.edges.append((train.edges[-1][0] + 1, 1))
        result = SnifferModel(params, config).run(trains, cycles)
        period = max(config.prescaler, 1)
        for ch, counts in enumerate(result.channels):
            assert sum(counts.histogram) == sum(counts.classes) + counts.unclassified
            if not (config.enable >> ch) & 1:
                assert counts == ChannelCounts.zeros(params)
                continue
            pins = pin_levels(trains[ch], cycles)
            lvl = [trains[ch].initial] * SYNC_LATENCY + pins[:cycles - SYNC_LATENCY]
            low_ticks = sum(1 for t in range(cycles) if lvl[t] == 0 and (t + 1) % period == 0)
            glitches = sum(q.width for q in result.pulses
                           if q.channel == ch and q.index == params.classes + Counter.GLITCH)
            assert counts.busy_ticks + glitches == low_ticks


# Rows, wrapping, streaming and validation ---------------------------------------------------------


def test_row_layout_and_wrap():
    params = SnifferParams(channels=1, classes=3)
    counts = ChannelCounts([1, 2, (1 << 48) + 3], 4, 5, 6, 7, 8, 9, [0] * params.hist_bins)
    assert params.row == 16
    assert counts.row(params) == [1, 2, 3, 4, 5, 6, 7, 8, 9] + [0] * 7
    with pytest.raises(ValueError, match="5 classes"):
        counts.row(SnifferParams(channels=1, classes=5))


def test_histogram_bins_wrap():
    params = SnifferParams(channels=1)
    tracker = ChannelTracker(params, SnifferConfig(glitch_ticks=1), 0)
    b = hist_bin(7, params.hist_sub_bits)
    tracker.counts.histogram[b] = (1 << params.hist_bits) - 1
    tracker.change(10, 0)
    assert [q.width for q in tracker.change(17, 1)] == [7]
    assert tracker.counts.histogram[b] == 0
    assert tracker.counts.unclassified == 1


def test_streaming_tracker_matches_run():
    rng = random.Random(99)
    params = SnifferParams(channels=1, width_bits=16)
    config = SnifferConfig(prescaler=2, glitch_ticks=3, windows=((5, 40), (40, 1000)))
    cycles = 600_000
    train = random_train(rng, cycles, long_low=200_000)
    expected = SnifferModel(params, config).run([train], cycles)
    tracker = ChannelTracker(params, config, 0, initial=train.initial)
    got = []
    previous = 0
    for cycle, level in train.edges:
        cycle += SYNC_LATENCY
        if cycle >= cycles:
            break
        got += tracker.advance(max(previous, cycle - rng.randrange(0, 3)))
        got += tracker.change(cycle, level)
        previous = cycle + 1
    got += tracker.advance(cycles - 1)
    got += tracker.finish(cycles)
    assert got == expected.pulses
    assert tracker.counts == expected.channels[0]
    assert any(q.kind == EventKind.OVERLONG for q in got)
    with pytest.raises(RuntimeError, match="finished"):
        tracker.change(cycles + 5, 1)


def test_tracker_ordering_errors():
    params = SnifferParams(channels=2)
    tracker = ChannelTracker(params, SnifferConfig(), 1, initial=0)
    tracker.change(5, 1)
    with pytest.raises(ValueError, match="5"):
        tracker.change(5, 0)
    tracker.advance(20)
    with pytest.raises(ValueError, match="19"):
        tracker.change(19, 0)
    with pytest.raises(ValueError, match="level must be 0 or 1, not 2"):
        tracker.change(21, 2)
    quiet = QuiescenceTracker(params, SnifferConfig(), [1, 1])
    quiet.change(10, 0, 0)
    with pytest.raises(ValueError, match="9"):
        quiet.change(9, 1, 0)


@pytest.mark.parametrize(("make", "message"), [
    (lambda p, c: ChannelTracker(p, c, 2), "channel must be an integer from 0 to 1, not 2"),
    (lambda p, c: ChannelTracker(p, c, 0, initial=3), "initial must be 0 or 1, not 3"),
    (lambda p, c: SnifferModel(p, SnifferConfig(prescaler=-1)), "prescaler"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, [])], 10), "one Train per channel"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, []), (1, [])], 10), r"trains\[1\]"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, []), Train(1, [])], -4), "not -4"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, [(5, 0), (5, 1)]), Train(1, [])], 10),
     "at 5 follows 5"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, [(5, 2)]), Train(1, [])], 10), "not 2"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, [(-3, 0)]), Train(1, [])], 10),
     "non-negative, not -3"),
    (lambda p, c: SnifferModel(p, c).run([Train(1, [(4,)]), Train(1, [])], 10),
     r"edges\[0\] must be a \(cycle, level\) pair"),
    (lambda p, c: Train(7, []), "initial must be 0 or 1, not 7"),
    (lambda p, c: QuiescenceTracker(p, c, [1]), "2 levels, not 1"),
])
def test_argument_validation(make, message):
    params = SnifferParams(channels=2)
    with pytest.raises(ValueError, match=message):
        make(params, SnifferConfig())


def test_type_validation():
    with pytest.raises(TypeError, match="SnifferParams"):
        SnifferModel("params", SnifferConfig())
    with pytest.raises(TypeError, match="SnifferConfig"):
        SnifferModel(SnifferParams(channels=1), {"prescaler": 1})


def test_glitches_next_to_pulses_cannot_cause_drops():
    # Ringing right after a pulse: a 1-tick glitch 2 cycles after the pulse ends. The gateware
    # counts glitches beside the mailbox, so this never risks a drop.
    params = SnifferParams(channels=2, classes=1)
    config = SnifferConfig(glitch_ticks=2, windows=((2, 100),))
    result = SnifferModel(params, config).run([pulses_train((10, 5), (17, 1), (19, 1)),
                                               pulses_train((10, 3))], 100)
    assert result.channels[0].glitch == 2 and result.channels[0].classes == [1]
    assert not result.may_drop

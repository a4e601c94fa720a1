"""The model's batch path (numpy) against its edge-by-edge path."""

import random

import numpy as np
import pytest

from rbscope.gateware.rb_sniffer.model import (
    ChannelTracker,
    hist_bin_array,
    window_counts,
    window_index_array,
)
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferConfig, SnifferParams, hist_bin


def test_hist_bin_array_equals_hist_bin():
    widths = list(range(0, 4096)) + [(1 << k) + d for k in range(3, 48) for d in (-1, 0, 1)]
    for sub in (3, 4, 5):
        got = hist_bin_array(np.array(widths), sub).tolist()
        assert got == [hist_bin(w, sub) for w in widths]


@pytest.mark.parametrize("seed", range(40))
def test_window_classes_are_the_first_match(seed):
    # Overlapping, nested, touching and empty windows (lo >= hi): the lowest-numbered window
    # that contains a width wins, none gives len(windows).
    rng = random.Random(seed)
    windows = []
    for _ in range(rng.randint(0, 6)):
        lo = rng.randint(0, 60)
        windows.append((lo, lo + rng.randint(-5, 40)))
    widths = [rng.randint(0, 110) for _ in range(rng.randint(0, 400))]

    def first_match(w):
        return next((j for j, (lo, hi) in enumerate(windows) if lo <= w < hi), len(windows))

    want = [first_match(w) for w in widths]
    assert window_index_array(np.array(widths, dtype=np.int64), windows).tolist() == want
    assert window_counts(np.array(widths, dtype=np.int64), windows) == \
        [want.count(j) for j in range(len(windows) + 1)]


@pytest.mark.parametrize("seed", range(60))
def test_change_many_equals_change(seed):
    rng = random.Random(seed)
    # Levels as the importers pass them (int8), as bools, and as plain integers.
    dtype = (np.int8, np.bool_, np.int64)[seed % 3]
    params = SnifferParams(channels=2, width_bits=16)
    config = SnifferConfig(prescaler=rng.choice([1, 3]), glitch_ticks=rng.randint(0, 4),
                           windows=((2, 30), (10, 400), (400, 65000)), enable=rng.choice([1, 3]))
    initial = rng.randint(0, 1)
    one = ChannelTracker(params, config, 0, initial=initial)
    many = ChannelTracker(params, config, 0, initial=initial)
    cycle, edges = rng.choice([0, 1]), []
    for _ in range(rng.randint(0, 300)):
        edges.append((cycle, rng.randint(0, 1)))
        # Mostly short gaps; now and then one past the saturation width (65535 ticks).
        cycle += rng.choice([1, 2, 5, 50, 300, 1 + 300_000 * (rng.random() < 0.03)])
    measured = []
    pos = 0
    glitch = params.classes + 1
    while pos < len(edges):
        seg = edges[pos:pos + rng.randint(1, 50)]
        pos += len(seg)
        for c, level in seg:
            measured += [(r.end_cycle, r.width) for r in one.change(c, level)
                         if r.kind is EventKind.END and r.index != glitch]
        _, ends, widths = many.change_many(np.array([c for c, _ in seg]),
                                           np.array([lv for _, lv in seg], dtype=dtype))
        got = list(zip(ends.tolist(), widths.tolist(), strict=True))
        assert got == measured
        measured = []
        if rng.random() < 0.3:
            hi = edges[pos][0] if pos < len(edges) else seg[-1][0] + 100_000
            t = rng.randint(seg[-1][0] + 1, max(seg[-1][0] + 1, hi))
            one.advance(t)
            many.advance(t)
    end = max(one._now, edges[-1][0] if edges else 0) + 10
    one.finish(end)
    many.finish(end)
    assert many.counts == one.counts
    assert many.may_drop == one.may_drop


def test_change_many_rejects_bad_input():
    params = SnifferParams(channels=1)
    t = ChannelTracker(params, SnifferConfig(), 0)
    with pytest.raises(ValueError, match="increasing"):
        t.change_many(np.array([5, 5]), np.array([0, 1]))
    with pytest.raises(ValueError, match="0 or 1"):
        t.change_many(np.array([5, 6]), np.array([0, 2]))
    for bad in (-1, 2):
        with pytest.raises(ValueError, match="0 or 1"):
            t.change_many(np.array([5, 6]), np.array([0, bad], dtype=np.int8))
    with pytest.raises(ValueError, match="0 or 1"):
        t.change_many(np.array([5, 6]), np.array([0, 255], dtype=np.uint8))


@pytest.mark.parametrize("seed", range(20))
def test_stream_classifier_last_rise(seed):
    # The quiet time of an import ends at the last rise of any line: found from the end of a
    # batch, with repeats and runs of one level too.
    from rbscope.recordings.stream import _last_rise
    rng = random.Random(seed)
    for _ in range(50):
        levels = np.array([rng.choice((0, 1, 1)) if rng.random() < 0.5 else rng.randint(0, 1)
                           for _ in range(rng.randint(1, 12))], dtype=np.int8)
        before = rng.randint(0, 1)
        pairs = zip([before] + levels.tolist()[:-1], levels.tolist(), strict=True)
        rises = [k for k, (a, b) in enumerate(pairs) if a == 0 and b == 1]
        assert _last_rise(levels, before) == (rises[-1] if rises else -1)

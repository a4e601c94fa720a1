"""The allocation unit from read pairs (flashbench's aligned read pairs, at every page).

A drive that maps blocks (a hybrid or block-mapped FTL: logical block ``b`` on one physical
block of one die) keeps a logical block's pages together and puts the next logical block on
another die; a page-mapped drive with static striping puts consecutive pages on different dies.
Two reads of neighbouring pages sent at once overlap when the pages sit on different dies and
queue when they sit on one. flashbench reads pairs that straddle power-of-two boundaries, one
after the other; here the pairs go at once (the overlap is the signal) and every page boundary
is tried, so that an allocation unit that is not a power of two (a hybrid FTL's data area: 100
pages of a 128-page block) is found too.

Pattern
    The first ``pages`` pages of the range are written once, in order (FUA), so that every page
    is mapped (a drive answers a read of an unmapped page without the flash). Then, for every
    ``j`` in ``0 … pages − 2``, pages ``j`` and ``j + 1`` are read on two connections at once
    (one page each), and the same two pages one after the other on one connection, ``reps``
    times, every repetition in a new random order and either first at random (seeded).
Signal
    ``s(j)`` = the pair's mean time at once ÷ the median of all pairs' times in turn: about 1
    where both pages sit on one die (they queue), about 0.5-0.7 where they sit on two (the two
    dies read at once).
Decision rule
    The boundaries of a unit of ``P`` pages are every ``P``-th page: for every period ``P`` (2
    to a quarter of the pairs: at least four boundaries) and phase, the score is all pairs'
    median over the upper quartile of the pairs at that phase (all of a unit's boundaries
    overlap, so even their slower quarter stays below the rest, where half of a half-period's
    members would not; single fast pairs of noise do not line up). The unit
    is the smallest period scoring within :data:`HARMONIC` of the best (its multiples score as
    high), taken when the best scores :data:`SCORE` or more: value ``P × page`` bytes. That
    period comes down to its smallest divisor whose extra boundaries (those the period skips)
    overlap beyond chance: :data:`DIVISOR_SHARE` of them faster than halfway between the
    period's boundaries and the rest, a binomial tail under :data:`DIVISOR_P` at the other
    pairs' rate of fast pairs. A quarter of a unit's boundaries slowed by noise (a loaded host)
    lifts the unit's upper quartile and makes its double score best; the boundaries the double
    skips still overlap.
    Without such a period, a median pair below :data:`OVERLAP_MAX` of the time in turn is a
    page-mapped drive striping consecutive pages over its dies (every pair overlaps): no unit
    in reads, said so. Confidence: ``log2(score) ÷ log2(2 × SCORE)``, at most 1.
Limits
    One die (or every logical block on the same die) gives no overlapping pair. A read cache
    in front of the flash, or a drive that reads ahead, hides the second read. Units larger
    than a quarter of the pages probed are not found.
"""

import math
import random
import statistics

import numpy as np

from rbscope.analysis.sequence import binomial_at_least

from .detect import Finding, _pattern, _together
from .target import ProbeError, RangeTooSmall

__all__ = ["detect_read_unit", "read_unit_period", "SCORE", "OVERLAP_MAX"]

#: A period is taken when the other pairs' median is this much above its boundaries' upper
#: quartile.
SCORE = 1.25
#: Periods scoring within this factor of the best count as its harmonics: the smallest is taken.
HARMONIC = 1.1
#: A divisor of the period is taken when this share of the boundaries it adds overlap ...
DIVISOR_SHARE = 1 / 3
#: ... and the other pairs' rate of fast pairs gives so many with less than this probability.
DIVISOR_P = 1e-3
#: A median pair below this share of the time in turn: every pair overlaps (page mapping).
OVERLAP_MAX = 0.85


def read_unit_period(ratio):
    """The decision rule on ``ratio`` (pair ``j`` → time at once ÷ the pairs' median in turn):
    ``(pages, boundaries, confidence, note)``; ``pages`` is None where no periodic unit shows.

    Every period ``P`` (2 to a quarter of the pairs) and phase ``φ`` is scored: the median of
    all pairs over the upper quartile of the pairs ``j ≡ φ (mod P)`` (the boundaries'
    candidates: all of a unit's boundaries overlap, so even their slower quarter stays below
    the rest). The
    unit is the smallest period scoring within :data:`HARMONIC` of the best (its multiples
    score as high), taken when the best is :data:`SCORE` or more."""
    r = np.asarray(ratio, dtype=float)
    n = len(r)
    median = float(np.median(r))
    best = (0.0, None, None)
    scores = {}
    for period in range(2, n // 4 + 1):
        k = -(-n // period)
        folded = np.full(k * period, np.nan)
        folded[:n] = r
        upper = np.nanquantile(folded.reshape(k, period), 0.75, axis=0)
        phase = int(np.argmin(upper))
        score = median / float(upper[phase])
        scores[period] = (score, phase)
        if score > best[0]:
            best = (score, period, phase)
    top = best[0]
    if top < SCORE:
        if median < OVERLAP_MAX:
            return None, [], 0.0, (f"every neighbouring pair overlaps alike (median "
                                   f"{median:.2f} of the pairs' time in turn, no period "
                                   f"scoring {SCORE}): consecutive pages sit on different "
                                   f"units (a page-mapped drive striping its pages); no "
                                   f"allocation unit shows in reads")
        return None, [], 0.0, (f"no period of overlapping pairs (best score {top:.2f} < "
                               f"{SCORE}; median pair {median:.2f} of the time in turn): one "
                               f"unit, or reads served one at a time")
    period, phase = min((p, ph) for p, (s, ph) in scores.items() if s >= top / HARMONIC)
    period, phase = _smallest_divisor_overlapping(r, period, phase, median)
    boundaries = list(range(phase + 1, n + 1, period))
    conf = min(1.0, math.log2(top) / math.log2(2 * SCORE))
    return period, boundaries, conf, None


def _smallest_divisor_overlapping(r, period, phase, median):
    """``(period, phase)`` brought down to the smallest divisor ``d`` of ``period`` whose
    boundaries between the period's own (the pairs ``j ≡ phase (mod d)`` that are not
    ``≡ phase (mod period)``) overlap beyond chance: at least two and :data:`DIVISOR_SHARE` of
    them below halfway between the period's boundaries' median and all pairs' median, a count
    the other pairs' rate of such fast pairs gives with probability under :data:`DIVISOR_P`.
    The upper-quartile score misses a true unit when a quarter of its boundaries are slowed by
    noise (a loaded host) and takes its double; the boundaries the double skips tell them
    apart."""
    own = float(np.median(r[phase::period]))
    fast = r < (own + median) / 2
    for d in range(2, period):
        if period % d:
            continue
        at = np.zeros(len(r), dtype=bool)
        at[phase % d::d] = True
        extra = at.copy()
        extra[phase::period] = False
        n, k = int(extra.sum()), int(fast[extra].sum())
        rate = max(float(fast[~at].mean()) if (~at).any() else 0.0, 1 / len(r))
        if k >= 2 and k >= DIVISOR_SHARE * n and binomial_at_least(k, n, rate) < DIVISOR_P:
            return d, phase % d
    return period, phase


def detect_read_unit(target, page, *, pages=1024, reps=2, seed=0, progress=None):
    """The allocation unit from read pairs (see the module's docstring)."""
    if not page or page % 512:
        raise ProbeError(f"read-unit detector: page must be a multiple of 512, not {page}")
    if not isinstance(pages, int) or not 16 <= pages <= 1 << 16:
        raise ProbeError(f"read-unit detector: pages must be 16 to 65536, not {pages!r}")
    if not isinstance(reps, int) or reps < 1:
        raise ProbeError(f"read-unit detector: reps must be at least 1, not {reps!r}")
    first = -(-target.start // page) * page
    if first + pages * page > target.end:
        raise RangeTooSmall(f"read-unit detector: the range holds {target.end - target.start} "
                            f"bytes, it needs {pages * page} ({pages} pages of {page} bytes)")
    for k in range(pages):
        offset = first + k * page
        target.pwrite_through(offset, _pattern(offset, page))
    if progress:
        progress(f"read unit: {pages} pages written")
    other = target.clone()
    times = [[] for _ in range(pages - 1)]
    serial = []
    rng = random.Random(seed)
    try:
        for rep in range(reps):
            order = list(range(pages - 1))
            rng.shuffle(order)
            for j in order:
                a, c = first + j * page, first + (j + 1) * page

                def left(a=a):
                    target.pread(a, page)

                def right(c=c):
                    other.pread(c, page)

                def both(a=a, c=c):
                    target.pread(a, page)
                    target.pread(c, page)

                # (In turn, which of the two goes first.)
                if rng.random() < 0.5:
                    times[j].append(_together([left, right]))
                    serial.append(_together([both]))
                else:
                    serial.append(_together([both]))
                    times[j].append(_together([left, right]))
            if progress:
                progress(f"read unit: repetition {rep + 1} of {reps}")
    finally:
        other.close()
    mean = [statistics.fmean(t) for t in times]
    median = statistics.median(serial)
    ratio = [m / median for m in mean]
    period, boundaries, conf, note = read_unit_period(ratio)
    value = period * page if period else None
    summary = [f"pair at once ÷ pairs in turn: median {statistics.median(ratio):.2f}"
               + (f"; at the {len(boundaries)} unit boundaries: "
                  + ", ".join(f"{b}: {ratio[b - 1]:.2f}" for b in boundaries[:8])
                  + (" …" if len(boundaries) > 8 else "") if boundaries else "")]
    if value:
        summary.append(f"allocation unit {period} pages of {page} bytes = {value} bytes "
                       f"(boundaries every {period} pages)")
    return Finding(
        name="allocation_unit", value=value, confidence=round(conf, 3),
        evidence={"ratio": ratio, "boundaries": boundaries, "pages_per_unit": period,
                  "page": page, "median_serial_pair_s": median},
        rule="a page boundary is a unit's where reading its two neighbouring pages at once "
             "overlaps (pair time below the geometric mean of the extremes and 0.85 of the "
             "pairs' median in turn); the unit is the boundaries' common period",
        io={"writes": pages, "bytes_written": pages * page, "reads": 4 * reps * (pages - 1)},
        notes=[note] if note else [], summary=summary)

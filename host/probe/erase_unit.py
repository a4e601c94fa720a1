"""Erase-unit size: the period of the erase spikes in sequential writes on a collecting drive.

I/O pattern
    One-page writes with FUA (``page``: the effective page), one at a time, at consecutive
    offsets from the range's start (wrapping at its end), each timed, in chunks of 128 writes
    (or a quarter of those so far, if more), until the rule below holds or ``max_bytes``
    (default: the range, one pass) were written. The drive must be *collecting garbage* when
    it starts (free blocks at the firmware's threshold): run it after the ``gc`` detector, or
    on a drive filled at random before.

Signal
    A drive that collects garbage erases a block (and relocates its valid pages) each time an
    open block is full and a new one is needed. A page-mapped FTL that stripes consecutive
    pages over its ``units`` dies fills one block per die every ``units × pages per block``
    sequential writes, so each die's erase falls on the same write of every such period: the
    write that waits for it is the slowest of its phase, period after period. The page types
    of MLC/TLC blocks (fast and slow programs alternating) repeat with the period too, but
    their spread is far smaller than an erase.

Decision rule
    ``z`` = each latency over the median latency. For every candidate period ``P`` (writes; a
    multiple of ``units``, ``P ≥ 8 × units``, at least five whole periods written), the series
    is folded, and each phase keeps the lower quartile of its ``z`` over the periods: a phase
    where an erase falls every period keeps its height (one missing period in four is
    tolerated); a spike in some periods only (noise, or a period that is half the true one)
    does not. ``score(P)`` = the highest phase over the 80th percentile of all writes: the
    slowest page type's programs (a third to a half of the writes on MLC/TLC) reach it, so a
    period that lines them up, by its length or by chance, scores about 1 (their lower
    quartile is below it); the erases (one write in ``P ÷ units`` ≥ 8 per unit) stand above
    it. The period is
    the smallest ``P`` scoring at least 1.5; its multiples score as high and are not taken.
    It is kept when one more chunk of writes gives the same. The erase unit is ``P × page ÷
    units`` bytes: ``P ÷ units`` program units (pages per block in the guess's pages,
    multi-plane rows on a multi-plane drive). The phases of the period at the bound are
    counted too (``erase_phases``): one per unit whose erases fall every period, a reading of
    the units from the erases themselves (at most the units: a unit whose erase misses a
    quarter of the periods is not counted). Confidence: ``(score − 1) ÷ 2`` (at most 1),
    times ``1.5 × (1 − s ÷ score)`` (at most 1), ``s`` the best score of the shorter periods.

What it cannot tell
    The period is in host writes: dividing it by the units assumes the static striping of the
    reference SSD (consecutive pages on consecutive dies); a firmware allocating pages to dies
    as they become free gives no clean period per die, and two dies whose erases fall half a
    period apart would halve it. A drive that is not collecting (fresh, or with free blocks
    left) erases nothing while written and gives no period (reported as not found: run ``gc``
    first). Where the collections relocate nothing (sequential rewrites of a sequential fill)
    the spike is an erase alone: on TLC its time is that of an upper-page program and no phase
    stands out (on MLC barely); the first pass after the ``gc`` detector's random writes
    relocates pages in every collection, which stands out on every cell type. Hence one pass
    by default, and a range of at least six periods (``6 × units × pages per block`` pages).
    Reading the erase unit from read latencies (flashbench's pairs) needs a drive that maps
    blocks, not pages: the reference SSD's page-mapped FTL shows no block in reads.
"""

import numpy as np

from .detect import Finding, _pattern
from .target import ProbeError, RangeTooSmall

__all__ = ["detect_erase_unit", "erase_period", "SCORE", "QUANTILE"]

#: An erase phase is at least this many times the 80th percentile of all writes.
SCORE = 1.5
#: The quantile over the periods that a phase keeps (a spike missing in one period in four
#: keeps it; one in half of the periods does not).
QUANTILE = 0.25
#: The quantile of all latencies that stands for the slowest page type's programs (above
#: the upper pages of MLC and TLC, below the erases: at most one write in eight).
SLOW = 0.8
#: Whole periods a candidate needs, and the smallest period in program units per die.
FOLDS, MIN_UNIT_PAGES = 5, 8
#: Writes between two looks at the series (at least; a quarter of the series when longer).
CHUNK = 128


def erase_period(latencies, units=1, *, folds=FOLDS, min_pages=MIN_UNIT_PAGES):
    """The period of the erase spikes in ``latencies`` (see the module's rule).

    Returns a dict: ``period`` (writes, or None), ``erase_phases`` (the phases of the period at
    the bound: one per unit whose erases fall every period), ``score`` and ``second`` (the best
    score of the shorter periods), ``scores`` (period → score) and ``phase`` (the highest
    phase of the period).
    """
    z = np.asarray(latencies, dtype=float)
    med = float(np.median(z)) if len(z) else 0.0
    out = {"period": None, "score": None, "second": None, "scores": {}, "phase": None}
    if med <= 0:
        return out
    z = z / med
    slow = float(np.quantile(z, SLOW))
    scores = {}
    for p in range(units * min_pages, len(z) // folds + 1, units):
        scores[p] = _score(_phases(z, p), slow)
    out["scores"] = scores
    passing = [p for p, s in scores.items() if s >= SCORE]
    if not passing:
        out["score"] = max(scores.values(), default=None)
        return out
    period = min(passing)
    others = [s for p, s in scores.items() if p < period]
    phases = _phases(z, period)
    out.update(period=period, score=scores[period], second=max(others, default=1.0),
               phase=int(phases.argmax()), erase_phases=int((phases >= SCORE * slow).sum()))
    return out


def _phases(z, p):
    """The series folded at period ``p``: each phase's lower quartile over the periods."""
    k = len(z) // p
    return np.quantile(z[:k * p].reshape(k, p), QUANTILE, axis=0, method="lower")


def _score(phases, slow):
    """The highest phase over ``slow`` (the slowest page type's level)."""
    return float(phases.max() / slow) if slow > 0 else 0.0


def detect_erase_unit(target, page=4096, units=1, *, max_bytes=None, progress=None):
    """The erase-unit size (see the module's docstring). ``units``: the parallel units (the
    period is divided by them)."""
    if not page or page % 512:
        raise ProbeError(f"erase-unit detector: page must be a multiple of 512, not {page!r}")
    if not isinstance(units, int) or units < 1:
        raise ProbeError(f"erase-unit detector: units must be a positive integer, not {units!r}")
    pages = (target.end - target.start) // page
    if pages < CHUNK:
        raise RangeTooSmall(f"erase-unit detector: the range holds {pages} pages of {page} "
                            f"bytes, it needs at least {CHUNK}")
    if max_bytes is None:
        # One pass: the collections of a second pass find the first pass's blocks invalid
        # (an erase alone, no relocation), which stands out less.
        max_bytes = pages * page
    limit = max(CHUNK, max_bytes // page)
    clock = target.clock
    lat = []
    found = None
    last = None
    while len(lat) < limit:
        # Chunks grow with the series (a quarter of it): the folds are computed a few dozen
        # times, not once per chunk of a long run.
        for _ in range(min(max(CHUNK, len(lat) // 4), limit - len(lat))):
            off = target.start + (len(lat) % pages) * page
            t = clock()
            target.pwrite_through(off, _pattern(off + len(lat), page))
            lat.append(clock() - t)
        found = erase_period(lat, units)
        p = found["period"]
        if progress:
            progress(f"erase unit: {len(lat)} writes, period {p or 'none yet'}")
        # Kept when one more period written still gives it.
        if p is not None and p == last and len(lat) >= (FOLDS + 1) * p:
            break
        last = p
    p = found["period"] if found else None
    notes, summary = [], []
    evidence = {"write_bytes": page, "units": units, "writes": len(lat),
                "score": found["score"], "second_score": found["second"],
                "scores": {str(k): round(v, 3) for k, v in found["scores"].items()},
                "latency_s": lat}
    if p is None:
        value, conf = None, 0.0
        notes.append(f"no erase period in {len(lat)} sequential writes: the drive is not "
                     f"collecting garbage (run the gc detector first, or fill the drive at "
                     f"random), or its erase unit is larger than a quarter of what was written")
    else:
        value = p * page // units
        conf = round(min(1.0, (found["score"] - 1) / 2)
                     * min(1.0, 1.5 * (1 - found["second"] / found["score"])), 3)
        phases = found["erase_phases"]
        evidence.update(period_writes=p, stripe_bytes=p * page, phase=found["phase"],
                        pages_per_unit=p // units, erase_phases=phases)
        summary.append(f"an erase every {p} sequential writes of {page} bytes: erase unit "
                       f"{value} bytes = {p // units} x {page} bytes per unit (of {units})")
        summary.append(f"{phases} erase phase{'s' if phases != 1 else ''} per period (one per "
                       f"unit whose erases fall there every period: about the units, at most)")
    return Finding(
        name="erase_unit", value=value, confidence=conf, evidence=evidence,
        rule="the smallest period (a multiple of the units) whose folded phases (lower quartile "
             "over the periods) peak at 1.5 x the 80th percentile of all writes; erase unit = "
             "period x page / units",
        io={"writes": len(lat), "bytes_written": len(lat) * page}, notes=notes, summary=summary)

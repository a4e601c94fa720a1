"""Write-buffer size: how many bytes of writes a drive takes into DRAM before they wait for flash.

I/O pattern
    First the reference: ``ref`` (5) one-page writes with FUA at fresh offsets, each timed (a
    write the drive must program before it answers). Then ``trials`` (3) times: a FLUSH (the
    buffer written back and empty), then one-page writes *without* FUA at consecutive offsets
    from the range's start, one at a time, each timed, until the step below is confirmed or
    ``max_bytes`` (default: the range, at most 256 MiB) were written.

Signal
    A write the buffer takes completes at the speed of the host interface and the firmware
    (tens of µs). Once the buffer is full, each new page pushes an old one out to the flash,
    and the write waits for that program: it takes about as long as a written-through one.
    The reference SSD's buffer (``write_buffer`` of the drive, LRU, whole pages) writes back
    one page per new page once full, so after the step every write (on a multi-plane drive
    every write that completes a row) waits for a program; a firmware writing its buffer back
    in bursts shows the same first step, then periodic spikes.

Decision rule
    ``fast`` = the median of a trial's first four latencies, ``slow`` = the median of the
    reference; a write is slow when its latency is above ``sqrt(fast × slow)`` (the geometric
    middle). The buffer of a trial is the bytes written before the first slow write after
    which each block of four writes of the next eight holds a slow one (a quarter at least:
    one slow write alone, a host hiccup, is passed over). A hiccup up to four writes before the
    step is confirmed by the step itself, so of the confirmed slow writes among it and the next
    three, the one that starts the densest run of slow writes (nine writes) is the step (the
    earliest of equals: a multi-plane drive's step is its first slow write). When the first
    writes are themselves slow (``fast > 0.6 × slow``: a write without FUA about as long as one
    with it) the trial sees no buffer (0 bytes: none, or smaller than a page). A host that
    stalls (another process, a throttled container) can only end a trial early, never late: a
    slow host cannot make a trial take more buffered writes than the drive does. So the value
    is the largest buffer that two trials reached (within 10 %): when the first ``trials`` (3)
    do not all agree with the largest of them, more trials run, up to three times as many,
    until two meet at the largest; when none ever meet, the value is not claimed. Confidence:
    the share of trials within 10 % of the value, times the separation ``log10(slow ÷ fast)``
    (at most 1).

What it cannot tell
    A buffer larger than ``max_bytes`` (reported as not found, with the bound); a buffer the
    firmware writes back on a timer between the host's writes (the probe's writes come one
    after another, so a timer would have to be shorter than one write to show); an SLC cache
    (it takes written-through writes as fast as buffered ones: no step against the
    reference).
"""

import math
import statistics

from .detect import Finding, _pattern
from .target import ProbeError, RangeTooSmall

__all__ = ["detect_write_buffer", "buffer_step", "settled_buffer", "CONFIRM"]

#: (look, need): the writes after a slow one that are looked at, in ``need`` blocks of
#: ``look // need`` writes that must each hold a slow write.
CONFIRM = (8, 2)
#: A trial whose first writes are slower than this fraction of the reference sees no buffer
#: (without a buffer they take about the reference's time; with one, even a loaded host's
#: buffered writes stay well below it).
NO_BUFFER = 0.6
#: The latencies a trial's fast level is the median of.
FIRST = 4
#: A trial's value agrees with another's within this share.
AGREE = 0.1


def buffer_step(latencies, fast, slow, *, confirm=CONFIRM, start=0):
    """The first slow write of ``latencies`` that the next ones confirm (see the module).

    ``fast``, ``slow``: the two levels (seconds). Returns ``(index or None, resume)``: the
    writes before ``resume`` are settled (a growing series is scanned again from there).
    """
    bound = math.sqrt(fast * slow)
    look, need = confirm
    per = look // need  # after the step, every block of this many writes holds a slow one
    slow_at = [y > bound for y in latencies]

    def confirmed(i):
        return slow_at[i] and all(any(slow_at[i + 1 + k * per:i + 1 + (k + 1) * per])
                                  for k in range(need))

    i = start
    while i < len(latencies):
        if slow_at[i]:
            if len(latencies) < i + per + look:
                return None, i
            if confirmed(i):
                # A stall a few writes before the step is confirmed by the step itself: of the
                # confirmed slow writes of the next block, the one that starts the densest run
                # of slow writes is the step (the earliest of equals).
                best = max((c for c in range(i, i + per) if confirmed(c)),
                           key=lambda c: (sum(slow_at[c:c + look + 1]), -c))
                return best, i
        i += 1
    return None, i


def _near(a, b, page):
    return abs(a - b) <= AGREE * max(a, b, page)


def _unsettled(counts, page):
    """Whether the trials so far leave the value open: the largest is not yet met by another."""
    found = [c for c in counts if c is not None]
    if len(found) * 2 <= len(counts):
        return False  # most trials saw no step: more of them would not decide a buffer
    top = max(found)
    return settled_buffer(counts, page) != top


def settled_buffer(counts, page):
    """The largest trial value (bytes; None: no step seen) that another trial reached within
    10 %, or None when no two trials meet (see the module's docstring)."""
    found = sorted((c for c in counts if c is not None), reverse=True)
    for i, v in enumerate(found):
        if any(_near(v, w, page) for w in found[i + 1:]):
            return v
    return None


def detect_write_buffer(target, page=4096, *, trials=3, ref=5, max_bytes=None, progress=None):
    """The write-buffer size (see the module's docstring)."""
    if not page or page % 512:
        raise ProbeError(f"write-buffer detector: page must be a multiple of 512, not {page!r}")
    span = target.end - target.start
    if max_bytes is None:
        max_bytes = min(span - ref * page, 256 << 20)
    limit = max_bytes // page
    if limit < 16 or span < (limit + ref) * page:
        raise RangeTooSmall(f"write-buffer detector: the range holds {span} bytes, it needs "
                            f"{(max(limit, 16) + ref) * page} ({ref} reference writes and at "
                            f"least 16 pages)")
    clock = target.clock
    # The reference: written-through writes at the range's end (fresh for the trials).
    reference = []
    for i in range(ref):
        off = target.end - (i + 1) * page
        t = clock()
        target.pwrite_through(off, _pattern(off, page))
        reference.append(clock() - t)
    slow = statistics.median(reference)
    counts, fasts, series = [], [], []
    writes = ref
    trial = 0
    while trial < trials or (trial < 3 * trials and _unsettled(counts, page)):
        target.flush()
        lat = []
        step = None
        scan = 0
        while len(lat) < limit:
            off = target.start + len(lat) * page
            data = _pattern(off + trial, page)
            t = clock()
            target.pwrite(off, data)
            lat.append(clock() - t)
            if len(lat) >= FIRST + CONFIRM[0] and len(lat) % 4 == 0:
                fast = statistics.median(lat[:FIRST])
                if fast > slow * NO_BUFFER:
                    step = 0
                    break
                step, scan = buffer_step(lat, fast, slow, start=scan)
                if step is not None:
                    break
        writes += len(lat)
        fasts.append(statistics.median(lat[:FIRST]))
        counts.append(None if step is None else step * page)
        series.append(lat[:max(64, (step or 0) + 2 * CONFIRM[0])])
        trial += 1
        if progress:
            shown = "none seen" if step is None else f"{step * page} bytes"
            progress(f"write buffer: trial {trial}: {shown} ({len(lat)} writes)")
    target.flush()
    fast = statistics.median(fasts)
    notes, summary = [], []
    found = [c for c in counts if c is not None]
    value = settled_buffer(counts, page)
    if len(found) * 2 <= len(counts):
        value, conf = None, 0.0
        notes.append(f"no step in {limit * page} bytes of buffered writes: the buffer is larger "
                     f"(give a larger range) or the writes are never slowed")
    elif value is None:
        conf = 0.0
        notes.append(f"no two of {len(counts)} trials reached the same buffer "
                     f"({', '.join(str(c) for c in counts)} bytes): the drive's response "
                     f"times vary too much from trial to trial here (a loaded host, or a "
                     f"firmware writing back on its own schedule)")
    else:
        near = sum(1 for c in found if _near(c, value, page))
        sep = max(0.0, min(1.0, math.log10(slow / fast))) if fast > 0 else 1.0
        conf = round(near / len(counts) * (sep if value else 1.0), 3)
        if len(counts) > trials:
            top = max(found)
            notes.append(f"{len(counts)} trials: the first {trials} did not agree "
                         f"({', '.join(str(c) for c in counts)} bytes); a trial a slow host "
                         f"ends early sees less, so the largest that two trials reached counts"
                         + (f" (one trial alone reached {top} bytes: the buffer may be that "
                            f"large)" if not _near(top, value, page) else ""))
        if value == 0:
            summary.append("no write buffer seen: a write without FUA takes as long as one "
                           "with it (no DRAM buffer, or one smaller than a page)")
        else:
            summary.append(f"write buffer {value} bytes ({value // page} writes of {page} "
                           f"bytes complete in {fast * 1e6:.0f} us before one waits "
                           f"{slow * 1e6:.0f} us for the flash)")
    return Finding(
        name="write_buffer", value=value, confidence=conf,
        evidence={"reference_s": reference, "fast_s": fasts, "slow_s": slow,
                  "trial_bytes": counts, "latency_s": series, "write_bytes": page},
        rule="after a flush, the bytes written before the first write slower than "
             "sqrt(fast x written-through) after which each 4 of the next 8 writes hold a slow "
             "one (the densest such start of the next 4); the largest that two "
             "trials reached (up to 3x the trials when they disagree)",
        io={"writes": writes, "bytes_written": writes * page}, notes=notes, summary=summary)

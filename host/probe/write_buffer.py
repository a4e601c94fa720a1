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
    middle). The buffer of a trial is the bytes written before the first slow write that at
    least a quarter of the next eight writes confirm (one slow write alone, a host hiccup, is
    passed over). When the first writes are themselves slow (``fast > slow / 3``) the trial
    sees no buffer (0 bytes: none, or smaller than a page). Value: the median of the trials.
    Confidence: the share of trials within 10 % of it, times the separation
    ``log10(slow ÷ fast)`` (at most 1).

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

__all__ = ["detect_write_buffer", "buffer_step", "CONFIRM"]

#: Writes after a slow one that are looked at, and how many of them must be slow too.
CONFIRM = (8, 2)
#: A trial whose first writes are slower than this fraction of the reference sees no buffer.
NO_BUFFER = 1 / 3


def buffer_step(latencies, fast, slow, *, confirm=CONFIRM, start=0):
    """The first slow write of ``latencies`` that the next ones confirm (see the module).

    ``fast``, ``slow``: the two levels (seconds). Returns ``(index or None, resume)``: the
    writes before ``resume`` are settled (a growing series is scanned again from there).
    """
    bound = math.sqrt(fast * slow)
    look, need = confirm
    i = start
    while i < len(latencies):
        if latencies[i] > bound:
            after = latencies[i + 1:i + 1 + look]
            if len(after) < look:
                return None, i
            if sum(1 for y in after if y > bound) >= need:
                return i, i
        i += 1
    return None, i


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
    for trial in range(trials):
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
            if len(lat) >= 4 + CONFIRM[0] and len(lat) % 4 == 0:
                fast = statistics.median(lat[:4])
                if fast > slow * NO_BUFFER:
                    step = 0
                    break
                step, scan = buffer_step(lat, fast, slow, start=scan)
                if step is not None:
                    break
        writes += len(lat)
        fasts.append(statistics.median(lat[:4]))
        counts.append(None if step is None else step * page)
        series.append(lat[:max(64, (step or 0) + 2 * CONFIRM[0])])
        if progress:
            shown = "none seen" if step is None else f"{step * page} bytes"
            progress(f"write buffer: trial {trial + 1}: {shown} ({len(lat)} writes)")
    target.flush()
    fast = statistics.median(fasts)
    notes, summary = [], []
    found = [c for c in counts if c is not None]
    if len(found) * 2 <= trials:
        value, conf = None, 0.0
        notes.append(f"no step in {limit * page} bytes of buffered writes: the buffer is larger "
                     f"(give a larger range) or the writes are never slowed")
    else:
        value = int(statistics.median(found))
        near = sum(1 for c in found if abs(c - value) <= 0.1 * max(value, page))
        sep = max(0.0, min(1.0, math.log10(slow / fast))) if fast > 0 else 1.0
        conf = round(near / trials * (sep if value else 1.0), 3)
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
             "sqrt(fast x written-through) that 2 of the next 8 confirm; median of the trials",
        io={"writes": writes, "bytes_written": writes * page}, notes=notes, summary=summary)

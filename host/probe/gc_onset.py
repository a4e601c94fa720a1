"""Garbage-collection onset, and the over-provisioning it implies.

I/O pattern
    Writes of one page (``page`` bytes, aligned, FUA: each reaches the flash before the next is
    issued), one at a time, at random page offsets of the range (a seeded generator, with
    replacement), until the knee below is confirmed or ``max_bytes`` were written (default 2.5 ×
    the range). Each write is timed.

Signal
    On an empty drive every write lands in a pre-erased block: the throughput stays at the
    program rate. Once the drive has used up its free blocks, the firmware must collect garbage
    (relocate a victim block's valid pages, erase it) before it can place more writes: the
    first such write takes an erase and the relocations longer, and the throughput falls and
    stays lower (how much lower depends on how many valid pages the victims hold: random writes
    over the whole drive leave many, over a small range few).

Decision rule
    Throughput per window of ``window`` writes (bytes ÷ the window's summed latencies). The
    knee is found in two steps. Detection: the first window (after at least four) whose
    throughput is below ``0.75 ×`` the median of the windows before it, confirmed when the
    median of that window and the ``hold`` (4) after it is below the same bound (a single slow
    window, a hiccup of the host, is passed over). Location: the windows up to the confirming
    ones split into two levels with the least squared error; the split is the knee window (a
    shallow drop is confirmed only windows after it began), kept if the later level's median is
    below ``(1 + 0.75) / 2 = 0.875 ×`` the earlier's and at most an eighth of the earlier
    windows are below the bound (else the baseline was not steady: a drive collecting from
    the start). The onset is then refined to
    the first write, from the second half of the baseline to the knee window's end, more than
    1.5 × slower than every write of the baseline's first half (the write that waited for the
    first collection: an erase and relocations); without one, the knee window's first write.
    Value: the host bytes written before the onset. Confidence: the drop ``1 − post ÷ base``
    over 0.5 (capped at 1), times the share of the confirming windows below the bound, times
    the share of eight baseline windows seen.

What it implies, and what it cannot tell
    On a drive that was empty when the probe began (fresh, or trimmed / secure-erased whole)
    and that no one else writes, the bytes written before the onset are the physical space the
    firmware fills before collecting: the logical space plus the over-provisioning, minus the
    few free blocks per die the firmware keeps in reserve (its collection threshold) and its
    open blocks. So ``(onset + prior) ÷ logical size − 1`` (``prior``: the host bytes the
    probe's earlier detectors wrote, which filled flash too) is a *lower bound* of the
    over-provisioning, short of the true value by the reserve, dies × reserved blocks ÷
    logical size: on a real drive of thousands of blocks per die a fraction of a percent, on
    a toy drive of 32 blocks per die about a tenth. This holds whatever the range: the range
    sets how far the throughput falls after the onset (the victims' valid pages), not where
    the onset is. On a drive that held data before, the onset comes earlier (below the
    logical size: no bound is given) or the first windows are already collecting (no knee).
    Writes the drive merges in a write buffer do not count twice here: each write carries FUA.
"""

import random
import statistics

from .detect import Finding, _pattern
from .target import ProbeError, RangeTooSmall

__all__ = ["detect_gc_onset", "gc_knee", "DROP", "HOLD", "MIN_BASE", "SPIKE"]

#: A window is slow when its throughput is below this fraction of the earlier windows' median.
DROP = 0.75
#: Windows after the knee window that must confirm it (their median with it below the bound).
HOLD = 4
#: Baseline windows needed before a knee is looked for.
MIN_BASE = 4
#: A baseline with more than this share of its windows below the bound is not steady.
UNSTEADY = 1 / 8
#: The onset's write is this many times slower than every write of the baseline's first half.
SPIKE = 1.5


def gc_knee(latencies, window, *, drop=DROP, hold=HOLD, min_base=MIN_BASE, throughput=None):
    """The knee of a series of per-write latencies (seconds), by the rule of the module.

    Returns a dict: ``throughput`` (per window, writes per second), ``knee`` (the knee
    window's index, or None), ``onset`` (the index of the first write at or after the onset,
    or None), ``base`` and ``post`` (the median throughputs before and from the knee),
    ``confirming`` (the share of the confirming windows below the bound) and ``pending`` (True
    when a candidate knee waits for more windows).
    """
    n = len(latencies) // window
    thr = []
    for i in range(n):
        s = sum(latencies[i * window:(i + 1) * window])
        thr.append(window / s if s > 0 else float("inf"))
    out = {"throughput": thr, "knee": None, "onset": None, "base": None, "post": None,
           "confirming": None, "pending": False}
    for k in range(min_base, n):
        base = statistics.median(thr[:k])
        if thr[k] >= drop * base:
            continue
        post = thr[k:k + hold + 1]
        if len(post) < hold + 1:
            out["pending"] = True
            return out
        if statistics.median(post) >= drop * base:
            continue
        # Where the step is: the split of the windows up to the confirming ones into two
        # levels with the least squared error (a shallow drop, on a small range, is confirmed
        # windows after it began).
        end = k + hold + 1
        j = _step(thr[:end], min_base)
        base, post = statistics.median(thr[:j]), statistics.median(thr[j:end])
        # A baseline that is itself unsteady (a drive collecting from the start) has no knee.
        unsteady = sum(1 for x in thr[:j] if x < drop * base) > j * UNSTEADY
        if post >= (1 + drop) / 2 * base or unsteady:
            continue
        out.update(knee=j, base=base, post=post,
                   confirming=sum(1 for x in thr[j:end] if x < drop * base) / (end - j))
        break
    k = out["knee"]
    if k is None:
        return out
    # The first write 1.5 x slower than every write of the first half of the baseline (where
    # no collection ran), from there to the knee window's end.
    half = (k + 1) // 2
    top = SPIKE * max(latencies[:half * window])
    out["onset"] = k * window
    for i in range(half * window, (k + 1) * window):
        if latencies[i] > top:
            out["onset"] = i
            break
    return out


def _step(values, first):
    """The index ``j >= first`` splitting ``values`` into two levels with the least squared
    error."""
    n = len(values)
    s1, s2 = [0.0], [0.0]  # prefix sums of the values and of their squares
    for x in values:
        s1.append(s1[-1] + x)
        s2.append(s2[-1] + x * x)
    best, at = None, first
    for j in range(first, n):
        left = s2[j] - s1[j] ** 2 / j
        right = (s2[n] - s2[j]) - (s1[n] - s1[j]) ** 2 / (n - j)
        if best is None or left + right < best:
            best, at = left + right, j
    return at


def detect_gc_onset(target, page=4096, *, window=None, max_bytes=None, seed=0, prior_bytes=0,
                    progress=None):
    """Garbage-collection onset and the over-provisioning it implies (see the module).

    Parameters
    ----------
    target : Target
    page : int
        Bytes per write (the effective page; a multiple of 512).
    window : int, optional
        Writes per throughput window (default: the range's pages ÷ 64, from 32 to 4096).
    max_bytes : int, optional
        Stop after this many bytes without a confirmed knee (default 2.5 × the range).
    seed : int
        Seeds the random offsets.
    prior_bytes : int
        Bytes the probe wrote before this detector (other detectors of the same run): they
        filled flash too, and count towards the over-provisioning bound.
    """
    if not page or page % 512:
        raise ProbeError(f"gc-onset detector: page must be a multiple of 512, not {page!r}")
    span = target.end - target.start
    pages = span // page
    if pages < 64:
        raise RangeTooSmall(f"gc-onset detector: the range holds {pages} pages of {page} "
                            f"bytes, it needs at least 64")
    window = window or max(32, min(4096, pages // 64))
    if max_bytes is None:
        max_bytes = int(2.5 * span)
    limit = max(window * (MIN_BASE + HOLD + 1), max_bytes // page)
    rng = random.Random(seed)
    lat = []
    thr = []
    found = None
    clock = target.clock
    while len(lat) < limit:
        for _ in range(window):
            off = target.start + rng.randrange(pages) * page
            data = _pattern(off + len(lat), page)
            t = clock()
            target.pwrite_through(off, data)
            lat.append(clock() - t)
        found = gc_knee(lat, window, throughput=thr)
        if found["knee"] is not None:
            break
        if progress and len(lat) % (window * 8) == 0:
            thr = found["throughput"]
            progress(f"gc onset: {len(lat) * page / 2**20:.1f} MiB written, "
                     f"{thr[-1] * page / 1e6:.2f} MB/s in the last window")
    written = len(lat) * page
    size = target.size
    notes = []
    evidence = {"window_writes": window,
                "throughput_MB_s": [round(t * page / 1e6, 4) for t in found["throughput"]],
                "write_bytes": page, "logical_bytes": size,
                "range_bytes": span, "bytes_written": written, "prior_bytes": prior_bytes}
    value, conf, op = None, 0.0, None
    if found["knee"] is None:
        notes.append(f"no lasting drop of throughput in {written} bytes of random writes: "
                     f"either the drive has more free space than that (write more: "
                     f"max_bytes), or it was collecting garbage from the start (not empty: "
                     f"trim or secure-erase it first)")
    else:
        value = found["onset"] * page
        drop = 1 - found["post"] / found["base"]
        conf = round(max(0.0, min(1.0, drop / 0.5)) * found["confirming"]
                     * min(1.0, found["knee"] / 8), 3)
        k = found["knee"]
        evidence.update(knee_window=k, knee_latencies_s=lat[(k - 1) * window:(k + 1) * window],
                        base_MB_s=found["base"] * page / 1e6,
                        post_MB_s=found["post"] * page / 1e6, drop=drop)
        if value + prior_bytes >= size:
            op = (value + prior_bytes) / size - 1
            evidence["over_provisioning_at_least"] = op
        else:
            notes.append(f"garbage collection began after {value + prior_bytes} bytes (the "
                         f"probe's), below the drive's logical {size}: the drive held data "
                         f"before the probe (no over-provisioning bound)")
    summary = []
    if value is not None:
        summary.append(f"garbage collection began after {value / 2**20:.2f} MiB of random "
                       f"{page}-byte writes (throughput {evidence['base_MB_s']:.2f} -> "
                       f"{evidence['post_MB_s']:.2f} MB/s)")
    if op is not None:
        summary.append(f"over-provisioning at least {op:.1%} of the logical "
                       f"{size / 2**20:.2f} MiB (if the drive was empty: the reserve of free "
                       f"blocks is not seen)")
    if progress:
        progress(f"gc onset: {value if value is not None else 'none'} bytes "
                 f"({written} written)")
    return Finding(
        name="gc_onset", value=value, confidence=conf, evidence=evidence,
        rule=f"the first window whose throughput is below {DROP} x the median of the earlier "
             f"windows, confirmed by the median of it and the {HOLD} next, placed by a "
             f"two-level split; onset = the first write from there {SPIKE} x slower than every "
             f"write of the baseline's first half",
        io={"writes": len(lat), "bytes_written": written}, notes=notes, summary=summary)

"""Host-side geometry detectors: I/O patterns whose response times show an SSD's internals.

Each detector takes a :class:`~rbscope.probe.target.Target` (the same code for the virtual SSD
and a real drive) and returns a :class:`Finding`: the value, a confidence in [0, 1], the
evidence (the measured series) and the decision rule applied. ``docs/vssd.md`` describes each
pattern, signal and rule for a lab user.

Effective page size (Kuo, Hsieh and Chang's adjacent-offset updates)
    For each candidate boundary ``c`` (512 B … 128 KiB, powers of two), two 512-byte writes
    that must reach the flash before they complete (FUA) are issued at once on two
    connections: one ending at ``k·c`` and one starting there (``k`` odd, a fresh ``k`` per
    repetition). When both sectors lie in one flash page (``c`` below the page), both updates
    read-modify-write the same page on the same die, one after the other: the pair takes
    about twice one update. When ``c`` is a page boundary, the two pages are striped onto
    different parallel units and the updates overlap: the pair takes about one update. The
    boundaries are measured in rounds, one pair per boundary per round, so a change of the
    host's load (another process, a throttled container) falls on every boundary alike. Rule:
    for each split of the boundaries into smaller and larger ones, pool the pair times of each
    side. A split passes when the larger side is significantly the faster by rank within each
    round (Mann-Whitney's test stratified by round: the share of one round's (larger, smaller)
    pairs in that order is its AUC, the one-sided normal approximation of the summed U its p,
    below 10⁻³ over all splits), the larger side's trimmed mean (10 % each end) is below 0.85 ×
    the smaller side's, and the step holds: every larger boundary's trimmed mean is below the
    smaller side's, every smaller boundary's above the larger side's. Of the splits that pass,
    the smallest p wins (an intermediate boundary, such as the plane boundary of a multi-plane
    drive, splits the pairs less cleanly than the program unit does); then the boundary just
    below the winner joins the faster side while its own trimmed mean lies nearer that side's
    than the slower side's (by ratio) and its split passes too: the page is the first boundary
    of the fast level. Ranks and trimmed means, not plain means or medians: a host stall
    lengthens a few pairs by any amount, and the program times of MLC/TLC page types are
    multi-modal (a median jumps between the modes). On a
    drive striping ``Mp`` planes' pages onto one die (multi-plane programs), the step is at
    ``Mp × page``: the program unit, which is what the WA method counts per program pulse
    (``program_model = "single-plane"`` with that page size computes the same WA).

Parallel units (concurrent writers)
    ``q`` writers (1, 2, 4, … 64), each writing one effective page (FUA) at consecutive aligned
    offsets, all at once; ``max(reps, 4·reps/q)`` batches per ``q``, each on fresh offsets.
    While ``q`` is at most the number of units that can program at once, the batch takes as
    long as one write; beyond it, the batch grows as ``q / units``. Rule: units = the largest
    speed-up ``q · t(1) / t(q)`` seen, rounded to the nearest power of two; confidence
    ``1 − 2·|log2(raw / units)|``. Limits: a batch waits for its slowest program, so where
    program times spread widely (MLC/TLC page types, all dies of a fresh drive at the same page
    type) or the channels' buses are the bottleneck, the speed-up stays below the number of
    dies; and the host must keep up with every unit programming at once (``--slowdown``).
"""

import json
import math
import statistics
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .target import ProbeError

__all__ = ["Finding", "FindingsError", "load_findings", "detect_page_size",
           "detect_parallel_units", "page_step", "CANDIDATES"]

#: A split is a page boundary when its larger side's trimmed mean pair time is below this
#: fraction of the smaller side's (ideal: 0.5; the spread of program times between page types
#: and the host's own time per request narrow it).
THRESHOLD = 0.85
#: Candidate page boundaries (bytes).
CANDIDATES = tuple(512 << i for i in range(9))  # 512 B … 128 KiB


@dataclass
class Finding:
    """One detector's result.

    Members
    -------
    name : str
    value : int or None
        None when the rule found no step.
    confidence : float
        0 … 1.
    evidence : dict
        The measured series (seconds) and what was derived from it.
    rule : str
    io : dict
        Requests issued and bytes written.
    notes : list of str
    summary : list of str
        What the value means, in a line or two for the text output.
    """

    name: str
    value: object
    confidence: float
    evidence: dict = field(default_factory=dict)
    rule: str = ""
    io: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    summary: list = field(default_factory=list)

    def to_dict(self):
        return dict(self.__dict__)


class FindingsError(ValueError):
    """A findings file (``probe-geometry --json``) that cannot be read or is not one."""


#: Largest findings file read (bytes): a probe's series are a few thousand numbers.
MAX_FINDINGS_BYTES = 64 << 20


def read_findings_doc(path):
    """The JSON document of a findings file, read within :data:`MAX_FINDINGS_BYTES` (raises
    :class:`FindingsError` naming the file)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FINDINGS_BYTES + 1)
    except OSError as exc:
        raise FindingsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FINDINGS_BYTES:
        raise FindingsError(f"{path}: larger than {MAX_FINDINGS_BYTES >> 20} MiB: not "
                            f"probe-geometry's --json output")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FindingsError(f"{path}: not JSON ({type(exc).__name__})") from None


def load_findings(path):
    """Read ``rbscope probe-geometry --json`` output: ``(target, [Finding], notes, seconds)``.

    Raises :class:`FindingsError` naming the file and what is wrong with it."""
    doc = read_findings_doc(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise FindingsError(f"{path}: not the --json output of probe-geometry (no findings "
                            f"list)")
    findings = []
    for i, d in enumerate(doc["findings"]):
        try:
            f = Finding(**d)
        except TypeError as exc:
            raise FindingsError(f"{path}: finding {i + 1}: {exc}") from None
        bad = [k for k, t in (("name", str), ("rule", str), ("evidence", dict), ("io", dict),
                              ("notes", list), ("summary", list))
               if not isinstance(getattr(f, k), t)]
        if bad or isinstance(f.confidence, bool) \
                or not isinstance(f.confidence, (int, float)) \
                or not 0.0 <= f.confidence <= 1.0 \
                or not all(isinstance(x, str) for x in f.notes + f.summary):
            raise FindingsError(f"{path}: finding {i + 1}: malformed "
                                f"({', '.join(bad) or 'confidence, notes or summary'})")
        findings.append(f)
    target = doc.get("target", str(path))
    notes = doc.get("notes", [])
    if not isinstance(target, str) or not isinstance(notes, list) \
            or not all(isinstance(x, str) for x in notes):
        raise FindingsError(f"{path}: malformed target or notes")
    seconds = doc.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds):
        seconds = 0.0
    return target, findings, notes, float(seconds)


def _together(jobs):
    """Run the callables of ``jobs`` at once (one thread each); return the wall seconds until the
    last ended."""
    errors = []
    barrier = threading.Barrier(len(jobs) + 1)

    def run(job):
        try:
            barrier.wait()
            job()
        except Exception as exc:  # noqa: BLE001 - reported to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(j,), daemon=True) for j in jobs]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed


def _pattern(offset, length):
    """Distinct, non-zero data for a write (the virtual SSD keeps zeros as holes)."""
    word = (offset // 512 + 1).to_bytes(8, "little")
    return (word * (length // 8 + 1))[:length]


def _trim_mean(xs, cut=0.1):
    """The mean of ``xs`` without its ``cut`` smallest and largest shares."""
    xs = sorted(xs)
    k = int(len(xs) * cut)
    return statistics.fmean(xs[k:len(xs) - k] if len(xs) > 2 * k else xs)


def _u(low, high):
    """Mann-Whitney's U: the (x, y) pairs, ``x`` from ``low`` and ``y`` from ``high``, with
    ``x < y`` (ties count a half)."""
    lo, hs = np.asarray(low, float), np.sort(np.asarray(high, float))
    right = np.searchsorted(hs, lo, side="right")
    ties = right - np.searchsorted(hs, lo, side="left")
    return float((len(hs) - right).sum() + 0.5 * ties.sum())


def _round_auc(series, larger, smaller):
    """The share of (larger, smaller) pairs of one round in which the larger boundary's pair was
    the faster, over all rounds, and its one-sided p-value by chance (a Mann-Whitney test
    stratified by round: the normal approximation of the summed U)."""
    u = mean = var = 0.0
    for r in range(len(series[larger[0]])):
        low = [series[c][r] for c in larger]
        high = [series[c][r] for c in smaller]
        n1, n2 = len(low), len(high)
        u += _u(low, high)
        mean += n1 * n2 / 2
        var += n1 * n2 * (n1 + n2 + 1) / 12
    auc = u / (2 * mean)
    return auc, 0.5 * math.erfc((u - mean) / math.sqrt(var) / math.sqrt(2))


def page_step(series, *, threshold=THRESHOLD, alpha=1e-3):
    """The page boundary of the pair times ``series`` ({boundary: [seconds of round 0, 1, …]},
    one pair per boundary per round) by the rule of the module's docstring.

    Returns ``(value or None, confidence, splits)``: ``splits`` maps each larger side's first
    boundary to what the rule saw there (``auc``, ``p``, ``ratio``, ``holds``)."""
    cands = sorted(series)
    if len({len(series[c]) for c in cands}) != 1:
        raise ValueError("page_step: every boundary needs one pair per round")
    trimmed = {c: _trim_mean(series[c]) for c in cands}
    splits, sides = {}, {}
    for i in range(1, len(cands)):
        low = _trim_mean([x for c in cands[i:] for x in series[c]])
        high = _trim_mean([x for c in cands[:i] for x in series[c]])
        auc, p = _round_auc(series, cands[i:], cands[:i])
        holds = (all(trimmed[c] < high for c in cands[i:])
                 and all(trimmed[c] > low for c in cands[:i]))
        splits[cands[i]] = {"auc": auc, "p": p, "ratio": low / high, "holds": holds}
        sides[cands[i]] = low, high
    passing = [c for c, s in splits.items()
               if s["p"] < alpha / len(splits) and s["ratio"] < threshold and s["holds"]]
    if not passing:
        return None, 0.0, splits
    value = min(passing, key=lambda c: splits[c]["p"])
    # The page is the first boundary of the fast level: a boundary just below the winner whose
    # own trimmed mean lies nearer the faster side's (in ratio) joins that side, while its
    # split passes too (a boundary marginally slower than the larger ones, or a few pairs
    # slowed by the host, can make the next split's p the smaller).
    i = cands.index(value)
    while i > 1 and cands[i - 1] in passing:
        low, high = sides[value]
        u = trimmed[cands[i - 1]]
        if abs(math.log(u / low)) >= abs(math.log(u / high)):
            break
        i -= 1
        value = cands[i]
    after = [trimmed[c] for c in cands if c >= value]
    before = [trimmed[c] for c in cands if c < value]
    # Separation of the boundaries' trimmed means: 1 when every larger one is below every
    # smaller one.
    sep = sum(1 for x in after for y in before if x < y) / (len(after) * len(before))
    conf = round(max(0.0, min(1.0, (1 - splits[value]["ratio"]) / 0.4)) * sep, 3)
    return value, conf, splits


def detect_page_size(target, *, reps=21, progress=None):
    """The effective page size by adjacent-offset updates (see the module's docstring)."""
    other = target.clone()
    try:
        span = 2 * reps * CANDIDATES[-1] + CANDIDATES[-1]
        if target.end - target.start < span:
            raise ProbeError(f"page-size detector: the range holds {target.end - target.start} "
                             f"bytes, it needs {span}")
        base = target.start + CANDIDATES[-1]
        series = {c: [] for c in CANDIDATES}
        writes = 0
        for r in range(reps):
            k = 2 * r + 1
            # One pair per boundary per round: the host's load changes alike for all of them.
            for c in CANDIDATES:
                at = base + k * c
                a, b = at - 512, at

                def left(a=a):
                    target.pwrite_through(a, _pattern(a, 512))

                def right(b=b):
                    other.pwrite_through(b, _pattern(b, 512))

                series[c].append(_together([left, right]))
                writes += 2
            if progress:
                progress(f"page size: round {r + 1} of {reps}: mean pair "
                         f"{statistics.fmean(series[c][-1] for c in CANDIDATES) * 1e3:.2f} ms")
    finally:
        other.close()
    value, conf, splits = page_step(series)
    return Finding(
        name="page_size", value=value, confidence=conf,
        evidence={"mean_pair_s": {str(c): _trim_mean(series[c]) for c in CANDIDATES},
                  "pairs_s": {str(c): series[c] for c in CANDIDATES},
                  **{f"split_{k}": {str(c): sp[k] for c, sp in splits.items()}
                     for k in ("auc", "p", "ratio", "holds")},
                  "ratio": splits[value]["ratio"] if value else None},
        rule="the split of the boundaries whose larger side's pairs are the most significantly "
             "faster by rank within rounds, among splits significant at p < 1e-3 with a "
             "trimmed-mean ratio below 0.85 and a step that holds at every boundary; then "
             "moved down to the first boundary of the fast level",
        io={"writes": writes, "bytes_written": writes * 512})


def detect_parallel_units(target, page, *, depths=(1, 2, 4, 8, 16, 32, 64), reps=4,
                          progress=None):
    """The number of parallel units by concurrent writers (see the module's docstring)."""
    if not page or page % 512:
        raise ProbeError(f"parallel-units detector: page must be a multiple of 512, not {page}")
    need = sum(q * page * max(reps, 4 * reps // q) for q in depths)
    if target.end - target.start < need:
        raise ProbeError(f"parallel-units detector: the range holds "
                         f"{target.end - target.start} bytes, it needs {need}")
    conns = [target] + [target.clone() for _ in range(max(depths) - 1)]
    at = target.start
    series = {}
    writes = 0
    try:
        for q in depths:
            times = []
            # Small batches are cheap: more of them steady t(1), which every speed-up divides.
            for _ in range(max(reps, 4 * reps // q)):
                jobs = []
                for i in range(q):
                    off = at + i * page

                    def job(t=conns[i], off=off):
                        t.pwrite_through(off, _pattern(off, page))
                    jobs.append(job)
                times.append(_together(jobs))
                at += q * page
                writes += q
            series[q] = times
            if progress:
                progress(f"parallel units: {q} writers: mean batch "
                         f"{statistics.fmean(times) * 1e3:.2f} ms")
    finally:
        for t in conns[1:]:
            t.close()
    mean = {q: statistics.fmean(t) for q, t in series.items()}
    speedup = {q: q * mean[depths[0]] / depths[0] / mean[q] for q in depths}
    raw = max(speedup.values())
    value = 1 << max(0, round(math.log2(raw))) if raw > 0 else None
    conf = round(max(0.0, 1 - abs(math.log2(raw / value)) * 2), 3) if value else 0.0
    return Finding(
        name="parallel_units", value=value, confidence=conf,
        evidence={"mean_batch_s": {str(q): mean[q] for q in depths},
                  "speedup": {str(q): speedup[q] for q in depths}, "raw_speedup": raw},
        rule="units = the best speed-up q·t(1)/t(q), rounded to the nearest power of two",
        io={"writes": writes, "bytes_written": writes * page})

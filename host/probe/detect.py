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
    different parallel units and the updates overlap: the pair takes about one update. Rule:
    the page is the first boundary ``c`` whose mean pair time is below 0.85 × the median of the
    smaller boundaries' means and from which on every boundary's mean is below all smaller
    boundaries' means (a step that holds). Means, not medians: the program times of MLC/TLC
    page types are multi-modal, and a median jumps between the modes. On a
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

from .target import ProbeError

__all__ = ["Finding", "FindingsError", "load_findings", "detect_page_size",
           "detect_parallel_units", "CANDIDATES"]

#: A boundary is a page boundary when its mean pair time is below this fraction of the
#: smaller boundaries' (ideal: 0.5; the spread of program times between page types narrows it).
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


def detect_page_size(target, *, reps=21, progress=None):
    """The effective page size by adjacent-offset updates (see the module's docstring)."""
    other = target.clone()
    try:
        span = 2 * reps * CANDIDATES[-1] + CANDIDATES[-1]
        if target.end - target.start < span:
            raise ProbeError(f"page-size detector: the range holds {target.end - target.start} "
                             f"bytes, it needs {span}")
        base = target.start + CANDIDATES[-1]
        series = {}
        writes = 0
        for c in CANDIDATES:
            times = []
            for r in range(reps):
                k = 2 * r + 1
                at = base + k * c
                a, b = at - 512, at

                def left(a=a):
                    target.pwrite_through(a, _pattern(a, 512))

                def right(b=b):
                    other.pwrite_through(b, _pattern(b, 512))

                times.append(_together([left, right]))
                writes += 2
            series[c] = times
            if progress:
                progress(f"page size: boundary {c} B: mean pair "
                         f"{statistics.fmean(times) * 1e3:.2f} ms")
    finally:
        other.close()
    med = {c: statistics.fmean(t) for c, t in series.items()}
    # The first boundary whose mean is well below the smaller ones' (their median) and from
    # which on every mean stays below every smaller boundary's: a step that holds.
    value, best = None, None
    ratios = {}
    for i, c in enumerate(CANDIDATES[1:], 1):
        before = [med[x] for x in CANDIDATES[:i]]
        after = [med[x] for x in CANDIDATES[i:]]
        ratios[c] = med[c] / statistics.median(before)
        if value is None and ratios[c] < THRESHOLD and max(after) < min(before):
            value, best = c, ratios[c]
    if value is None:
        conf = 0.0
    else:
        after = [med[c] for c in CANDIDATES if c >= value]
        before = [med[c] for c in CANDIDATES if c < value]
        # Separation of the two groups: 1 when every later candidate is below every earlier.
        sep = sum(1 for x in after for y in before if x < y) / (len(after) * len(before))
        conf = round(max(0.0, min(1.0, (1 - best) / 0.4)) * sep, 3)
    return Finding(
        name="page_size", value=value, confidence=conf,
        evidence={"mean_pair_s": {str(c): med[c] for c in CANDIDATES},
                  "pairs_s": {str(c): series[c] for c in CANDIDATES},
                  "ratio_to_smaller": {str(c): r for c, r in ratios.items()}, "ratio": best},
        rule="the first boundary whose mean pair time is below 0.85 x the median of the "
             "smaller boundaries' and from which on every mean is below all smaller ones'",
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

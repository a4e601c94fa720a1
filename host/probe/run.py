"""Run the detectors a request names, in an order that lets each use the ones before.

:func:`run_detectors` is what ``rbscope probe-geometry`` calls (and what a benchmark or a test
calls without building a command line): a :class:`ProbeRequest` names the detectors and their
options; the findings come back in the order they ran.

Order and why: ``page`` (the effective page: the write size of the others), ``units`` (needs
the page), ``stripe`` (the address bits that stripe the units: needs the page), ``buffer`` (it
flushes first: what ran before does not matter), ``gc`` (random page
writes until garbage collection starts: it leaves the drive collecting, which the erase-unit
detector needs), ``erase`` (divides its period by the units found, or given).
"""

from dataclasses import dataclass

from .detect import Finding, detect_page_size, detect_parallel_units
from .erase_unit import detect_erase_unit
from .gc_onset import detect_gc_onset
from .guess import stripe_units
from .read_unit import detect_read_unit
from .stripe_bits import detect_stripe_bits, repetitions_fitting
from .target import ProbeError, RangeTooSmall
from .write_buffer import detect_write_buffer

__all__ = ["DETECTORS", "ProbeRequest", "run_detectors"]

#: The detectors, in the order they run.
DETECTORS = ("page", "units", "stripe", "alloc", "buffer", "gc", "erase")
#: The write size of the detectors after ``page`` when neither it nor ``page_size`` gives one.
DEFAULT_PAGE = 4096


@dataclass
class ProbeRequest:
    """What to probe.

    Members
    -------
    detectors : tuple of str
        Of :data:`DETECTORS` (run in that order whatever the order here).
    page_size : int or None
        The write size when the page detector does not run (or finds nothing); the units
        detector needs it, the others fall back to :data:`DEFAULT_PAGE`.
    reps : int
        Repetitions per page-size candidate.
    units : int or None
        The parallel units when the units detector does not run (the erase-unit detector
        divides its period by them; default 1: the period itself).
    gc_max_bytes : int or None
        The gc-onset detector stops after this many bytes (default 2.5 × the range).
    erase_max_bytes : int or None
        The erase-unit detector stops after this many bytes (default the range: one pass).
    seed : int
        Seeds the random offsets.
    """

    detectors: tuple = ("page", "units")
    page_size: int | None = None
    reps: int = 21
    units: int | None = None
    gc_max_bytes: int | None = None
    erase_max_bytes: int | None = None
    seed: int = 0

    def __post_init__(self):
        bad = [d for d in self.detectors if d not in DETECTORS]
        if bad or not self.detectors:
            raise ProbeError(f"unknown {', '.join(bad) or '(none given)'}; choose from "
                             f"{', '.join(DETECTORS)}")
        for d in ("units", "stripe", "alloc"):
            if d in self.detectors and "page" not in self.detectors and not self.page_size:
                raise ProbeError(f"the {d} detector without the page detector needs a page "
                                 f"size (--page-size)")


def run_detectors(target, request, progress=None):
    """Run ``request``'s detectors on ``target``; return their findings in the order they ran."""
    findings = []
    want = set(request.detectors)
    page = request.page_size
    units = request.units
    if "page" in want:
        f = detect_page_size(target, reps=request.reps, progress=progress)
        findings.append(f)
        page = f.value or page
    if "units" in want:
        if not page:
            raise ProbeError("no page size found for the units detector (give --page-size)")
        f = detect_parallel_units(target, page, progress=progress)
        findings.append(f)
        units = f.value or units
    if "stripe" in want:
        if not page:
            raise ProbeError("no page size found for the stripe detector (give --page-size)")
        # --reps ÷ 7 repetitions of runs of six pairs (3 for the default 21), fewer where the
        # range holds fewer (at least 2: a range too small for two is "not run").
        fits = repetitions_fitting(target, page) if page > 0 else 0
        f = _guarded("stripe_bits", lambda: detect_stripe_bits(
            target, page, reps=max(2, min(request.reps // 7, fits)), seed=request.seed,
            progress=progress))
        findings.append(f)
        # The erase detector divides by the units: the striping bits' where they address more
        # than the writers found (the guess's rule), unless --units named them.
        if request.units is None:
            units = max(units or 1, stripe_units(f, page) or 1)
    if "alloc" in want:
        if not page:
            raise ProbeError("no page size found for the alloc detector (give --page-size)")
        findings.append(_guarded("allocation_unit", lambda: detect_read_unit(
            target, page, seed=request.seed, progress=progress)))
    page = page or DEFAULT_PAGE
    # The later detectors run long (gc writes the drive over): one that cannot run (a range
    # too small for it) is reported as a finding without a value, not at the cost of the
    # others'.
    if "buffer" in want:
        findings.append(_guarded("write_buffer", lambda: detect_write_buffer(
            target, page, progress=progress)))
    if "gc" in want:
        # What the detectors before it wrote filled flash too (their host bytes: at most what
        # they programmed, so the over-provisioning stays a lower bound).
        prior = sum(f.io.get("bytes_written", 0) for f in findings)
        findings.append(_guarded("gc_onset", lambda: detect_gc_onset(
            target, page, max_bytes=request.gc_max_bytes, seed=request.seed,
            prior_bytes=prior, progress=progress)))
    if "erase" in want:
        findings.append(_guarded("erase_unit", lambda: detect_erase_unit(
            target, page, units or 1, max_bytes=request.erase_max_bytes, progress=progress)))
    return findings


def _guarded(name, run):
    try:
        return run()
    except RangeTooSmall as exc:
        return Finding(name=name, value=None, confidence=0.0, rule="not run",
                       notes=[f"not run: {exc}"])

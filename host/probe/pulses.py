"""The detectors' guess beside what the R/B# pulses of the same run show.

A probe run against ``rbscope vssd --record r.vcd`` (or a drive whose R/B# lines an rbscope
captured while the probe ran) leaves two readings of the same drive: the host's (the findings,
from response times) and the flash's (the pulses of every die). :func:`cross_check` reads the
recording, classifies each pulse by its width (the class windows of a geometry's
``[classifier]``, else ``rbscope analyze``'s generic MLC windows) and compares:

* **parallel units**: the R/B# lines that carry program pulses (the dies that were written),
  against the units detector's value, or the striping bits' units where they address more
  (the guess's rule; equal: agrees);
* **pages per block**: on each line with at least :data:`MIN_ERASES` erases, the program pulses
  between its first and its last erase ÷ the erases between (a die that collects garbage
  erases a block each time it has filled one, relocations included; the count starts after
  the first collection's burst of erases), the median over the lines, against the erase
  unit ÷ the page of the guess (within 5 %: agrees);
* **striping bits: writes per unit** (with a ``stripe_bits`` finding, when the stripe detector
  was the run's only writer): the writes each unit took if the bits found select the units,
  sorted, against each line's program and erase pulses, sorted (each within 5 %; the
  detector's writes erase nothing on a fresh drive, and the width windows put a TLC die's
  slowest programs among the erases): wrong bits predict another spread of the detector's
  pages over the units than the dies show;
* **garbage collection**: whether the pulses hold erases at all, against whether the gc
  detector found an onset (the reference SSD erases only to collect; a drive that erases on a
  schedule of its own would not agree);
* **program pulses per host write**: program pulses ÷ the detectors' writes, shown only (it
  is the write amplification times the write's pages per program, garbage collection and
  the page detector's read-modify-writes included: there is nothing in the guess to compare).

Where program and erase widths overlap (34 nm MLC: upper pages 1.3-2.2 ms, erases 1.9-2.3 ms)
the windows count some programs as erases and the pages per block read low: give the geometry
of the drive's part (``--geometry``) and read that row with care; the SLC, two-plane MLC and
cache-program presets separate.
"""

from dataclasses import dataclass

import numpy as np

from rbscope.analysis.presets import DEFAULT_PRESET
from rbscope.recordings.stream import RecordingError
from rbscope.recordings.vcd import read_header

from .detect import FindingsError, read_findings_doc
from .guess import stripe_units

__all__ = ["Check", "load_cross_check", "read_pulses", "classify_widths", "line_counts",
           "cross_check", "format_checks", "MIN_ERASES"]

#: Erases a line needs for a pages-per-block reading.
MIN_ERASES = 3
#: Relative difference within which pages per block agree.
TOLERANCE = 0.05


@dataclass
class Check:
    """One row of the cross-check: the guess's value, the pulses', and whether they agree
    (None: nothing to compare)."""

    quantity: str
    guess: object
    pulses: object
    agrees: bool | None
    evidence: str = ""

    def to_dict(self):
        return dict(self.__dict__)

    def cells(self):
        """``(quantity, guess, pulses, agrees)`` as a table shows them ('-': nothing)."""
        agree = "-" if self.agrees is None else "yes" if self.agrees else "NO"
        return (self.quantity, "-" if self.guess is None else str(self.guess),
                "-" if self.pulses is None else str(self.pulses), agree)


def read_pulses(path):
    """The low pulses of every scalar line of the VCD ``path``: ``{name: (starts_s, widths_s)}``
    (a line is busy while low, as R/B#)."""
    with open(path, encoding="ascii", errors="replace") as f:
        header = read_header(f, str(path))
        scale = header.timescale
        names = {v.ident: v.name for v in header.variables if v.size == 1}
        low_since = {}
        out = {ident: ([], []) for ident in names}
        now = 0
        for line in f:
            line = line.strip()
            if not line or line[0] == "$":
                continue
            if line[0] == "#":
                try:
                    now = int(line[1:])
                except ValueError:
                    raise RecordingError(f"{path}: bad time stamp {line[:40]!r}") from None
                continue
            value, ident = line[0], line[1:]
            if ident not in names:
                continue
            if value == "0":
                low_since.setdefault(ident, now)
            elif value == "1" and ident in low_since:
                start = low_since.pop(ident)
                out[ident][0].append(start)
                out[ident][1].append(now - start)
    return {names[i]: (np.asarray(s, dtype=float) * scale, np.asarray(w, dtype=float) * scale)
            for i, (s, w) in out.items()}


def classify_widths(widths_s, windows=None):
    """The class name of each width (seconds) by the first window ``(name, lo_us, hi_us)``
    holding it (``other`` for none); ``windows`` default to ``analyze``'s generic MLC ones."""
    windows = DEFAULT_PRESET.windows if windows is None else windows
    us = np.asarray(widths_s, dtype=float) * 1e6
    out = np.full(len(us), "other", dtype=object)
    free = np.ones(len(us), dtype=bool)
    for name, lo, hi in windows:
        hit = free & (us >= lo) & (us < hi)
        out[hit] = name
        free &= ~hit
    return out


def line_counts(classes):
    """Counts of one line's classified pulses (in time order) and its pages-per-block reading
    (program pulses between its first and last erase ÷ the erases between, or None)."""
    classes = np.asarray(classes, dtype=object)
    erases = np.flatnonzero(classes == "erase")
    programs = classes == "program"
    ppb = None
    # The first collection may erase several blocks at once (to reach the free-block
    # threshold): the count starts at the last erase of that first burst.
    first = 0
    while first + 1 < len(erases) and not programs[erases[first]:erases[first + 1]].any():
        first += 1
    if len(erases) - first >= MIN_ERASES:
        between = int(programs[erases[first]:erases[-1]].sum())
        ppb = between / (len(erases) - 1 - first)
    return {"programs": int(programs.sum()), "erases": int(len(erases)),
            "reads": int((classes == "read").sum()), "pages_per_block": ppb}


def cross_check(findings, vcd, *, windows=None):
    """Compare ``findings`` (the detectors', :class:`~rbscope.probe.detect.Finding` or their
    dicts) with the pulses of the recording ``vcd``; return ``(checks, per_line)``."""
    by = {}
    for f in findings:
        d = f if isinstance(f, dict) else f.to_dict()
        by[d["name"]] = d
    lines = read_pulses(vcd)
    per_line = {}
    for name, (_starts, widths) in sorted(lines.items()):
        per_line[name] = line_counts(classify_widths(widths, windows))
    checks = []
    active = [n for n, c in per_line.items() if c["programs"]]
    units = by.get("parallel_units", {}).get("value")
    given = ""
    if units is None and "erase_unit" in by:  # the units the erase detector was given
        units = by["erase_unit"].get("evidence", {}).get("units")
        given = " (the guess's units: as given to the erase detector)"
    stripe = by.get("stripe_bits")
    addressed = stripe_units(stripe, (stripe or {}).get("evidence", {}).get("page"))
    by_stripe = bool(addressed and addressed > (units or 0))
    if by_stripe:  # the guess's rule: the striping bits' units
        units, given = addressed, " (the guess's units: the striping bits')"
    expected = units
    predicted = ((stripe or {}).get("evidence") or {}).get("writes_per_unit")
    if by_stripe and predicted and set(by) == {"stripe_bits"}:
        # The stripe detector alone writes only the units its pairs reach.
        expected = sum(1 for n in predicted if n)
        written = [n for n, c in per_line.items() if c["programs"] + c["erases"]]
        given += (f"; its pairs reach {expected} of them, lines with program or erase "
                  f"pulses: {len(written)}")
        active = written
    checks.append(Check("parallel units", units, len(active),
                        None if units is None else expected == len(active),
                        f"R/B# lines with program pulses: {len(active)} of {len(per_line)}"
                        + given))
    if stripe is not None:
        checks.append(_striping_check(stripe, by, per_line))
    readings = [c["pages_per_block"] for c in per_line.values()
                if c["pages_per_block"] is not None]
    shown = round(float(np.median(readings)), 1) if readings else None
    page = by.get("page_size", {}).get("value")
    erase = by.get("erase_unit", {}).get("value")
    guess = erase // page if erase and page and erase % page == 0 else None
    if guess is None and erase and not page:
        write = by["erase_unit"].get("evidence", {}).get("write_bytes")
        guess = erase // write if write else None
    agrees = None if guess is None or shown is None else abs(shown / guess - 1) <= TOLERANCE
    checks.append(Check("pages per block", guess, shown, agrees,
                        f"program pulses between a line's first and last erase / erases "
                        f"between, median of {len(readings)} lines with >= {MIN_ERASES} "
                        f"erases"))
    erases = sum(c["erases"] for c in per_line.values())
    gc = by.get("gc_onset")
    found = None if gc is None else gc.get("value") is not None
    checks.append(Check("garbage collection", found, erases > 0,
                        None if found is None else found == (erases > 0),
                        f"{erases} erase pulses; the gc detector "
                        + ("did not run" if gc is None else
                           "found an onset" if found else "found none")))
    writes = sum(d.get("io", {}).get("writes", 0) for d in by.values())
    programs = sum(c["programs"] for c in per_line.values())
    checks.append(Check("program pulses per host write", None,
                        round(programs / writes, 3) if writes else None, None,
                        f"{programs} program pulses, {writes} writes by the detectors (write "
                        f"amplification x pages per write; garbage collection and "
                        f"read-modify-writes included)"))
    return checks, per_line


def _striping_check(stripe, by, per_line):
    """The writes each unit took if the striping bits select the units (sorted, from the
    detector) against the program pulses of each line (sorted): the lines' counts must match
    the prediction one for one (within :data:`TOLERANCE` each, and no line programmed beyond
    them). Only where the stripe detector is the run's one writer: the others' writes fall on
    the lines too."""
    predicted = (stripe.get("evidence") or {}).get("writes_per_unit")
    others = sum(d.get("io", {}).get("writes", 0) for n, d in by.items() if n != "stripe_bits")
    # Programs and erases: the stripe detector erases nothing on a fresh drive, and the width
    # windows put a TLC die's slowest pages among the erases.
    measured = sorted(c["programs"] + c["erases"] for c in per_line.values()
                      if c["programs"] + c["erases"])
    name = "striping bits: writes per unit"
    if not predicted:
        return Check(name, None, measured or None, None,
                     "no striping bits decided: nothing to predict")
    if others:
        return Check(name, predicted, measured, None,
                     f"not compared: other detectors wrote {others} pages in the same run")
    predicted = [n for n in predicted if n]
    agrees = len(measured) == len(predicted) and all(
        abs(m - p) <= max(1, TOLERANCE * p) for m, p in zip(measured, predicted, strict=True))
    return Check(name, predicted, measured, agrees,
                 "the stripe detector's writes per unit if its bits select the units (sorted, "
                 "the units it wrote) against each R/B# line's program and erase pulses "
                 "(sorted: a fresh drive erases nothing, and the width windows count a TLC "
                 "die's slowest programs as erases)")


def load_cross_check(path):
    """The cross-check kept in a findings file (``probe-geometry --findings F --pulses R --json``
    writes it beside the findings): ``(recording, [Check])``, or None when the file has none.
    Raises :class:`~rbscope.probe.detect.FindingsError` naming the file where it is malformed."""
    doc = read_findings_doc(path)
    cross = doc.get("cross_check") if isinstance(doc, dict) else None
    if cross is None:
        return None
    if not isinstance(cross, dict) or not isinstance(cross.get("recording"), str) \
            or not isinstance(cross.get("checks"), list):
        raise FindingsError(f"{path}: malformed cross_check (recording and checks)")
    checks = []
    for i, c in enumerate(cross["checks"]):
        if not isinstance(c, dict) or not isinstance(c.get("quantity"), str) \
                or not isinstance(c.get("evidence", ""), str) \
                or c.get("agrees") not in (True, False, None) \
                or not all(_plain(c.get(k)) for k in ("guess", "pulses")):
            raise FindingsError(f"{path}: cross_check row {i + 1}: malformed")
        checks.append(Check(c["quantity"], c.get("guess"), c.get("pulses"), c.get("agrees"),
                            c.get("evidence", "")))
    return cross["recording"], checks


def _plain(v):
    """A value a cross-check cell may hold: a number, a string, a flag, none, or a short list
    of numbers."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    return isinstance(v, list) and len(v) <= 256 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)


def format_checks(checks):
    """The checks as a text table."""
    rows = [("quantity", "guess", "pulses", "agrees")]
    rows += [c.cells() for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out = ["  ".join(r[i].ljust(widths[i]) for i in range(4)).rstrip() for r in rows]
    out += [f"  {c.quantity}: {c.evidence}" for c in checks]
    return out

"""What the R/B# pulses show of the drive's structure, beside what the geometry file says.

The WA engine uses the geometry file's pages per block, planes per operation, program scheme
and LUNs per line; the pulses carry evidence of each (the sequence classifier's counts), and a
geometry typed wrong gives a wrong WA without it. :func:`infer` reads that evidence off a
sequence-classified result and says, for each quantity, what the pulses show, how, and whether
it agrees with the geometry. The geometry's value stays the one used: a disagreement is a
warning for the user to settle (the bus tap or the parameter page decides), never a silent
replacement.

* **Planes per operation**: the tDBSY pulses queued before each program (80h…11h) give the
  pages each program pulse writes, pulse by pulse.
* **Program scheme**: the data loads (80h…1Ah) before each long program are a one-shot
  signature; otherwise the number of program modes found is consistent with some (cell,
  scheme) readings (one mode: SLC or one-shot; two: MLC pages or two-pass; three: TLC pages;
  four: QLC pages).
* **Pages per block**: programs ÷ erases, in single-page units per plane. In steady state
  every erase opens a block that the programs fill, so the ratio is the pages per block; on a
  drive that has not filled yet the erases lag the programs and the ratio is above it. When
  the geometry gives pages per block, the erase count was fitted under the cap it implies (the
  classifier's structural constraint), so the ratio is an independent reading only where the
  erases exceed that cap (the widths overrode it); otherwise it is reported, not compared.
* **LUNs per line**: on a line shared by several LUNs (wired-OR R/B#), the busies of LUNs
  working at once merge into pulses longer than any single operation; such pulses are the
  evidence.
"""

from dataclasses import dataclass

from .wa import _READINGS

__all__ = ["Finding", "infer", "READINGS"]

#: (cell, scheme) readings a number of program modes is consistent with (the WA engine's).
READINGS = {n: tuple((cell, scheme) for cell, scheme, _ in r) for n, r in _READINGS.items()}

#: Lines with fewer erases than this give no pages-per-block reading.
MIN_ERASES = 5


@dataclass
class Finding:
    """One quantity: what the pulses show, what the geometry says, and whether they agree.

    ``shown`` is None when the pulses cannot tell; ``agrees`` is None when there is nothing to
    compare (either side unknown, or the reading is not independent of the geometry).
    """

    quantity: str
    shown: object
    geometry: object
    evidence: str
    agrees: bool | None = None

    def to_dict(self):
        return {"quantity": self.quantity, "shown": self.shown, "geometry": self.geometry,
                "evidence": self.evidence, "agrees": self.agrees}

    @property
    def warning(self):
        """The warning text of a disagreement, or None."""
        if self.agrees is not False:
            return None
        return (f"the pulses show {self.quantity.replace('_', ' ')} {self.shown} where the "
                f"geometry says {self.geometry} ({self.evidence}); the geometry's value is used: "
                f"check it (rbscope identify reads the parameter page; the bus tap counts "
                f"confirms)")


def infer(result, measurement, geometry):
    """The structure findings of a sequence-classified WA result.

    Parameters
    ----------
    result : rbscope.analysis.wa.WAResult
        With ``classification`` (the sequence classifier's); a window-classified result gives
        no findings.
    measurement : rbscope.analysis.measurement.Measurement
    geometry : rbscope.analysis.geometry.Geometry

    Returns
    -------
    list of Finding
    """
    c = result.classification
    if not c or not c.get("dies"):
        return []
    dies = list(c["dies"].values())
    states = c.get("states", [])
    return [_planes(dies, geometry), _scheme(dies, states, geometry),
            _pages_per_block(c, dies, geometry), _luns(result, measurement, states)]


def _planes(dies, geometry):
    programs = sum(d["program_pulses"] for d in dies)
    queued = sum(d["multiplane_pages"] for d in dies)
    mp = geometry.pages_per_pulse
    if not programs:
        return Finding("planes_per_operation", None, mp, "no program pulse")
    if queued <= 0.01 * programs:
        return Finding("planes_per_operation", None, mp,
                       "no tDBSY pulse before the programs: single-plane programs, or a "
                       "multi-plane queueing busy shorter than the glitch filter")
    # Pages per program pulse over the pages each plane writes: a one-shot pulse writes its
    # bits per cell in each plane (the data loads announced them).
    per_plane = sum(d["program_pulses"] * (d.get("one_shot_bits") or 1) for d in dies)
    ratio = sum(d["pages"] for d in dies) / per_plane
    return Finding("planes_per_operation", round(ratio, 2), mp,
                   f"{queued:,.0f} tDBSY-queued pages before {programs:,.0f} program pulses",
                   abs(ratio - mp) <= 0.1 * mp)


def _scheme(dies, states, geometry):
    said = None
    scheme = geometry.program_scheme
    if geometry.cell is not None:
        said = f"{geometry.cell.upper()} {scheme or '(scheme not given)'}"
    bits = [d.get("one_shot_bits") for d in dies if d.get("one_shot_bits")]
    if bits:
        b = max(set(bits), key=bits.count)
        cell = {3: "tlc", 4: "qlc"}.get(b)
        shown = f"one-shot, {b} pages per plane"
        agrees = None if geometry.cell is None else \
            (geometry.cell == cell and scheme in (None, "one-shot"))
        return Finding("program_scheme", shown, said,
                       f"{b - 1} data loads (80h…1Ah) before each long program on {len(bits)} "
                       f"of {len(dies)} line(s)", agrees)
    modes = sum(1 for s in states if s.get("kind") == "program")
    readings = READINGS.get(modes)
    if not readings:
        return Finding("program_scheme", None, said, f"{modes} program modes found")
    if geometry.cell is not None:
        # The classifier fitted as many program modes as the geometry's cell and scheme make.
        return Finding("program_scheme", None, said,
                       f"{modes} program mode(s), as many as the geometry's cell makes: the "
                       f"widths were fitted to it, so they are no independent reading (no data "
                       f"loads before the programs: no one-shot signature)")
    shown = " or ".join(f"{c.upper()} {s}" for c, s in readings)
    agrees = None
    if geometry.cell is not None:
        agrees = any(c == geometry.cell and scheme in (None, s) for c, s in readings)
    return Finding("program_scheme", shown, said,
                   f"{modes} program mode(s) in the widths", agrees)


def _pages_per_block(c, dies, geometry):
    ppb = geometry.pages_per_block
    units = [(d.get("unit_pulses") if d.get("unit_pulses") is not None else d["program_pulses"])
             for d in dies]
    erases = [d["erase_pulses"] for d in dies]
    used = [(u, e) for u, e in zip(units, erases, strict=True) if e >= MIN_ERASES]
    if not used:
        return Finding("pages_per_block", None, ppb,
                       f"fewer than {MIN_ERASES} erases on every line: a drive that has not "
                       f"started garbage collection shows no block size")
    u = sum(x for x, _ in used)
    e = sum(x for _, x in used)
    ratio = u / e
    evidence = (f"{u:,.0f} page programs ÷ {e:,.0f} erases on {len(used)} line(s); the pages "
                f"per block in steady state, more before the drive has filled")
    caps = sum(d.get("erase_cap") or 0.0 for d in dies)
    if ppb and e <= 1.05 * caps:
        # The geometry's pages per block bounded the erase state while it was fitted (the
        # structural cap): only erases beyond the cap (the widths overrode it) read the block.
        return Finding("pages_per_block", round(ratio, 1), ppb,
                       evidence + "; the erase count was fitted under the geometry's cap "
                       "(programs ÷ its pages per block), so this is no independent reading")
    agrees = None
    if ppb:
        # Steady state gives the ratio ≈ ppb; a filling drive more. Fewer programs per erase
        # than 70 % of the geometry's block is more erasing than its blocks allow.
        agrees = ratio >= 0.7 * ppb
    return Finding("pages_per_block", round(ratio, 1), ppb, evidence, agrees)


def _luns(result, measurement, states):
    erase = [s for s in states if s.get("kind") == "erase"]
    declared = {r.name: r.dies for r in result.channels}
    shared = [n for n, d in declared.items() if d > 1]
    said = max(declared.values()) if declared else None
    if not erase or not measurement.pulses:
        return Finding("luns_per_line", None, said, "no per-pulse widths or no erase state")
    top_us = erase[0]["support_us"][1]
    tick_us = measurement.tick_seconds * 1e6
    lines = [r for r in result.channels if r.channel in measurement.pulses]
    long_ = {}
    total = 0
    for r in lines:
        w = measurement.pulses[r.channel]
        total += len(w)
        long_[r.name] = sum(1 for x in w if x * tick_us > top_us)
    merged = sum(long_.values())
    if merged > max(2, 0.002 * total):
        worst = max(long_, key=long_.get)
        agrees = None if shared else False
        return Finding("luns_per_line", "more than 1", said,
                       f"{merged:,} pulses longer than any single operation ({top_us:,.0f} µs, "
                       f"the erase state's upper edge), most on {worst}: busies of LUNs "
                       f"working at once merged", agrees)
    return Finding("luns_per_line", None, said,
                   "no pulse longer than a single operation: one LUN per line, or LUNs that "
                   "never overlapped")

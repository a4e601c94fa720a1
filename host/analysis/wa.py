"""The write-amplification engine: counts + geometry + logical volume → WA with its interval.

The RB-Explorer method (Sun et al. 2015, eq. 5–7) counts the program pulses ``N_Tprogram`` on
one die's R/B# and scales by the geometry::

    P_Volume = Nchannel × Nchip × Ndie × N_Tprogram × Mp × PageSize,   WA = P_Volume / L_Volume

rbscope generalises this to any set of probed lines (see ``docs/wa.md``):

* every enabled sniffer channel ``i`` watches ``d_i`` dies (``Probe.die_count``: 1 unless the
  probe lists a wired-OR line of several) and counted ``n_i`` pulses in the program window;
* the probed dies ``D_p = Σ d_i`` stand for all ``D = geometry.dies`` dies (the paper's
  full-parallelism assumption, needed only when ``D_p < D``)::

      N = (Σ n_i) × D / D_p,    P = N × Mp × page_size,    WA = P / L

* the **interval** is what the counts cannot tell apart, not a statistical confidence: a pulse
  whose width was not measured (``PARTIAL``: in progress at the start or cut at the end) or
  that the device had to drop (``DROPPED``) may or may not have been a program, so
  ``n_i ∈ [n_i, n_i + partial_i + dropped_i]``; the logical volume is itself an interval
  ``[L_lo, L_hi]`` (coarse NVMe counters); hence
  ``WA ∈ [P_lo / L_hi, P_hi / L_lo]`` — the exact minimum and maximum over every way of
  resolving the unknowns, which the tests check by brute force;
* ``per_die`` gives the paper's single-die estimate from each probed line, whose spread shows how
  far the full-parallelism assumption holds;
* an optional **overlap correction** (:func:`rbscope.analysis.calibrate.overlap_correction`)
replaces   ``n_i`` by ``n_i − E[erases inside the program window] + E[programs outside it]`` from a
  mixture fit of the channel's width histogram; the interval is widened to keep the raw count.

* the **confidence interval** ``wa_confidence`` (95 %) adds what the counts *can* tell
  statistically: when only some of the dies are probed, the probed lines are a sample of the
  dies, and the die-to-die spread of their program counts gives a Student-t interval on the
  extrapolated total (with the finite-population correction, so it shrinks to the deterministic
  interval when every die is probed). One probed line out of several dies gives no spread: the
  confidence interval is then unknown (``None``) and a warning says so;
* **endurance** (:class:`Endurance`): NAND bytes written, blocks erased and erases per block
  (needs ``pages_per_block`` and the raw capacity), the share of the rated P/E life this
  measurement used, and the projected endurance at this WA: ``TBW = P/E × raw capacity / WA``
  and drive writes per day over the warranty, ``DWPD = TBW / (user capacity × 365 × years)``.

:func:`decide_mp` implements the paper's calibration (section 3.5): on an incompressible
sequential write, WA computed with ``Mp = 1`` is ≈ ``1 / Mp``.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from rbscope.gateware.onfi_tap.params import PlaneKind
from rbscope.gateware.rb_sniffer.model import FIXED_COUNTERS

from .geometry import ERASE_FLOOR, WORDLINE_US, erase_floor_of, erases_implied
from .logical import LogicalVolume
from .presets import CLASS_NAMES

__all__ = [
    "WAError", "Interval", "ChannelPrograms", "WAResult", "compute_wa", "MpDecision",
    "decide_mp", "measured_mp", "SeriesRow", "wa_series", "program_class_index", "Endurance",
    "t_quantile", "opcode_wa", "opcode_wa_of_pages", "OpcodeWA",
]

#: Window classes of read-like pulses (reads, and the cache window where tCBSY falls), from the
#: one list of class names.
READ_CLASSES = tuple(n for n in CLASS_NAMES if n in ("read", "cache"))

#: Two-sided 95 % Student-t quantiles (0.975) for 1 … 30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(df):
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (95 % two-sided)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df!r}")
    if df <= 30:
        return _T975[df - 1]
    return 1.960 + 2.4 / df  # within 0.002 of the exact quantile beyond 30


@dataclass(frozen=True)
class Endurance:
    """What the measured writes mean for the drive's life (fields are None when an input is
    missing; ``missing`` says which)."""

    nand_bytes: float
    blocks_erased: float | None
    erases_per_block: float | None
    life_used: float | None  # erases per block / rated P/E cycles
    tbw_bytes: float | None
    dwpd: float | None
    missing: tuple = ()

    def to_dict(self):
        return {"nand_bytes": self.nand_bytes, "blocks_erased": self.blocks_erased,
                "erases_per_block": self.erases_per_block, "life_used": self.life_used,
                "tbw_bytes": self.tbw_bytes, "dwpd": self.dwpd, "missing": list(self.missing)}


class WAError(ValueError):
    """The inputs cannot give a write amplification; the message says which and why."""


@dataclass(frozen=True)
class Interval:
    """A point estimate and the bounds that contain every consistent value."""

    value: float
    lo: float
    hi: float

    def __post_init__(self):
        if not self.lo <= self.value <= self.hi:
            raise ValueError(f"interval must satisfy lo <= value <= hi, not "
                             f"{self.lo} <= {self.value} <= {self.hi}")

    def scale(self, factor):
        return Interval(self.value * factor, self.lo * factor, self.hi * factor)

    @property
    def width(self):
        return self.hi - self.lo

    def to_dict(self):
        def num(x):
            return x if math.isfinite(x) else None
        return {"value": num(self.value), "lo": num(self.lo), "hi": num(self.hi)}


@dataclass
class ChannelPrograms:
    """Program pulses counted on one probed line."""

    channel: int
    name: str
    dies: int
    programs: int
    unknown: int  # partial + dropped: pulses of unknown width
    corrected: float | None = None  # programs after overlap correction, if asked
    class_var: float = 0.0  # posterior variance of the program count (sequence classifier)
    class_slack: float = 0.0  # structural slack of the program count, both ways
    class_up: float = 0.0  # pulses that may be programs on top (cache-program ambiguity)
    hidden: float = 0.0  # program operations tDBSY pulses announce beyond the long pulses
    lost: int = 0  # pulses whose records the link lost (not in the classified sequence)
    lost_expected: float = 0.0  # programs among them, at the line's share (in the estimate)
    lost_max: float = 0.0  # programs among them if every one was a program
    summarised: int = 0  # pulses the device's trace summariser counted, not in the sequence
    summarised_expected: float = 0.0  # programs among them, by the model (in the estimate)

    @property
    def estimate(self):
        return self.programs if self.corrected is None else self.corrected

    def to_dict(self):
        return {"channel": self.channel, "name": self.name, "dies": self.dies,
                "programs": self.programs, "unknown": self.unknown,
                "corrected": self.corrected, "class_sd": math.sqrt(max(0.0, self.class_var)),
                "class_slack": self.class_slack, "class_up": self.class_up,
                "hidden_programs": self.hidden, "lost_records": self.lost,
                "lost_programs_expected": self.lost_expected,
                **({"summarised": self.summarised,
                    "summarised_programs_expected": self.summarised_expected}
                   if self.summarised else {})}


@dataclass
class WAResult:
    """Everything :func:`compute_wa` derived, for reports and ``--json``."""

    wa: Interval
    physical_bytes: Interval
    program_pulses: Interval  # extrapolated to all dies
    logical: LogicalVolume
    mp: int
    page_size: int
    dies: int
    dies_probed: int
    program_class: str
    channels: list
    per_die: list  # (channel name, WA from that line alone)
    class_totals: dict
    other_totals: dict
    warnings: list = field(default_factory=list)
    wa_confidence: Interval | None = None  # 95 %, with the sampling of dies
    endurance: Endurance | None = None
    classifier: str = "windows"  # "windows", "sequence" (per-pulse order) or "mixture"
    interval_includes: tuple = ()  # what the 95 % interval accounts for
    interval_excludes: tuple = ()  # what it does not
    checks: list = field(default_factory=list)  # plausibility checks that failed
    classification: dict | None = None  # the sequence classifier's evidence
    undetermined: bool = False  # R/B# alone cannot decide the value (see ``decide``)
    decide: list = field(default_factory=list)  # why, and the evidence that would decide it
    alternatives: list = field(default_factory=list)  # [{"reading", "wa"}] other readings
    knowledge_level: str = "L0"  # what the analysis knew: L0 geometry, L1 + maxima, L2 + tap
    knowledge: dict = field(default_factory=dict)  # what was supplied, by level
    scheme_reading: tuple | None = None  # (cell, scheme): the only scheme the modes fit

    @property
    def spread(self):
        """(min, max) of the single-line WA estimates, or None."""
        values = [w for _, w in self.per_die if w is not None]
        return (min(values), max(values)) if values else None

    def to_dict(self):
        spread = self.spread
        return {
            "wa": self.wa.to_dict(),
            "physical_bytes": self.physical_bytes.to_dict(),
            "program_pulses": self.program_pulses.to_dict(),
            "logical_bytes": self.logical.to_dict(),
            "mp": self.mp, "page_size": self.page_size, "dies": self.dies,
            "dies_probed": self.dies_probed, "program_class": self.program_class,
            "channels": [c.to_dict() for c in self.channels],
            "per_die_wa": [{"name": n, "wa": w} for n, w in self.per_die],
            "per_die_spread": list(spread) if spread else None,
            "class_totals": self.class_totals, "other_totals": self.other_totals,
            "warnings": self.warnings,
            "wa_confidence_95": self.wa_confidence.to_dict() if self.wa_confidence else None,
            "classifier": self.classifier,
            "interval_includes": list(self.interval_includes),
            "interval_excludes": list(self.interval_excludes),
            "checks": self.checks,
            "classification": self.classification,
            "endurance": self.endurance.to_dict() if self.endurance else None,
            "undetermined": bool(self.undetermined),
            "undetermined_reasons": list(self.decide),
            "alternatives": list(self.alternatives),
            "knowledge_level": self.knowledge_level,
            "knowledge": dict(self.knowledge),
        }


def erase_plausible(erases, programs, pages_per_block):
    """Can ``erases`` erase pulses go with ``programs`` program pulses?

    An erase opens a block that ``pages_per_block`` page programs then fill: over a run the
    erases are about programs ÷ pages per block (fewer on a fresh drive still using its free
    blocks), never many more. The bound allows twice as many, three standard deviations and the
    blocks open at either end of the capture.
    """
    expected = programs / pages_per_block
    return erases <= 2 * expected + 3 * math.sqrt(expected) + 8


def program_class_index(measurement, program_class="program"):
    """Resolve ``program_class`` (a window name or index) in ``measurement``."""
    k = measurement.params.classes
    if isinstance(program_class, int) or (isinstance(program_class, str)
                                          and program_class.isdigit()):
        index = int(program_class)
        if not 0 <= index < k:
            raise WAError(f"program class {index} is not a window index 0 … {k - 1}")
        return index
    try:
        return measurement.class_index(program_class)
    except KeyError as exc:
        windows = measurement.config.windows
        us = measurement.tick_seconds * 1e6
        if not any(lo < hi for lo, hi in windows):
            # A build's power-up state (a board's emulator build, never configured): there is
            # nothing to name, and nothing was classified.
            raise WAError("the capture's device had no class window set (every window off, "
                          "as a build powers up): nothing was classified; configure it before "
                          "capturing (rbscope configure PORT --preset NAME)") from None
        shown = ", ".join(f"{k}: [{lo * us:g}, {hi * us:g}) µs"
                          for k, (lo, hi) in enumerate(windows) if lo < hi)
        raise WAError(f"{exc.args[0]}; name the program window with --program-class (a name, "
                      f"or the index of one of the windows {shown})") from None


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WAError(f"{name} must be a positive integer, not {value!r}")
    return value


def _sequence_row(row, die, mp, balanced, page_types, mode="sequence"):
    """Fill a row's estimate and classification uncertainty from a sequence-classified die.

    The estimate is in single-page program pulses (``DieResult.units``: a one-shot TLC pulse
    counts 3), so that ``× Mp × page size`` gives the bytes.
    """
    units = die.units
    measured_mp = die.program_pulses > 0 and die.multiplane_pages > 0.01 * die.program_pulses
    per_pulse = 1.0 / mp if measured_mp else 1.0  # pages measured -> pulse equivalents
    pages = die.pages if measured_mp else units
    row.corrected = pages * per_pulse
    var = die.unit_var if die.unit_pulses is not None else die.program_var
    row.class_var = var * per_pulse ** 2
    chains = die.program_pulses and die.announced > 0.002 * die.program_pulses
    unit = units / die.program_pulses if die.program_pulses else 1.0  # pages per pulse
    # How far holding the page types equal moved the count (the classification held and the
    # one left free, where both were made): the interval spans that, whichever is the value.
    shift = die.balance_shift / unit if unit else 0.0
    if balanced and not chains:
        # Page types are equal over whole blocks; open blocks (host and GC streams) at the
        # edges of the capture leave each type up to 2 pages apart.
        slack = max(2 * 2 * page_types, shift)
    else:
        # (Cache-program chains shift each pulse to the previous page's time and double the
        # last: the page types no longer pin the erases either.)
        # Nothing pins the erase count: it may be anything up to its structural cap.
        hi_e = die.erase_cap if die.erase_cap is not None else 2 * die.erase_pulses
        slack = max(die.erase_pulses, hi_e - die.erase_pulses, shift)
    if die.erase_cap is not None:
        # The erases expected of the programs (a block is erased before it is filled): pulses
        # the erase state holds beyond or short of that may be programs either way.
        expect = erases_implied(die.erase_cap)
        slack = max(slack, abs(die.erase_pulses - expect))
    # The pulses the idle gaps moved between the slowest programs and the erases: the widths'
    # reading stays inside the interval.
    slack += die.gap_moved
    slack *= unit
    if mode == "mixture":
        # Histogram bins, not pulses: every pulse of a bin shares one posterior, so the pulses
        # the posterior leaves undecided may all go either way.
        slack = max(slack, die.undecided)
    row.class_slack = slack * per_pulse * (1 + (mp - 1) * measured_mp)
    if measured_mp:
        # Two estimates of the pages: tDBSY-measured, and program pulses × Mp; the interval
        # spans both (a reset or set-features pulse can pass for a tDBSY).
        row.class_slack += abs(units - row.corrected)
    up = die.ambiguous_short
    if mode == "mixture" and mp > 1 and die.multiplane_pulses:
        # Without the order, a tCBSY cannot be told from a read; but every multi-plane program
        # or erase queues Mp - 1 planes with a tDBSY pulse, so tDBSY pulses beyond the long
        # pulses' share count the programs that showed only a short pulse (cache programs).
        # That count (with a tenth and two pulses of margin) bounds the ambiguity better than
        # every short pulse in the tCBSY range, reads included.
        row.hidden = max(0.0, die.multiplane_pulses / (mp - 1) - die.program_pulses
                         - die.erase_pulses) * unit
        up = 1.1 * row.hidden + 2
    # A hidden program is one more program operation: one pulse of Mp pages.
    row.class_up = up


def _erased_room(die, geometry):
    """Program pulses the die's erased blocks hold: erases × pages per block, where the
    SLC-mode programs found (``die.slc_programs``, with the cell's bits known) fill blocks of
    pages per block ÷ bits and the rest full ones."""
    ppb, bits = geometry.pages_per_block, geometry.bits
    slc = min(die.slc_programs, die.program_pulses)
    if not bits or bits < 2 or slc <= 0:
        return die.erase_pulses * ppb
    slc_blocks = slc * bits / ppb
    return slc + max(0.0, die.erase_pulses - slc_blocks) * ppb


def _lost_records(row, die, lost):
    """A line whose sequence lacks ``lost`` pulses (records the link dropped, counted): their
    programs are estimated at the share of the pulses classified (added to the row's estimate)
    and bounded by none and all of them (``lost_expected``, ``lost_max``, in the estimate's
    units: a program pulse counts as the line's classified programs per program pulse)."""
    row.lost = lost
    est = row.estimate
    row.lost_expected = lost * est / die.pulses if die.pulses else 0.0
    row.lost_max = lost * max(_units_per_program(row, die), 1.0)
    row.corrected = est + row.lost_expected


def _summarised_records(row, count, units):
    """A line whose sequence lacks ``count`` pulses the device's trace summariser counted (the
    middle of runs of pulses of its summary windows): ``units``, the program units the model
    expects of them, goes into the estimate, and the interval spans none to twice that."""
    row.summarised = count
    row.summarised_expected = units
    row.corrected = row.estimate + units
    row.lost_expected += units
    row.lost_max += 2 * units


def summarised_units(measurement, sequence, ch, count):
    """The program units (single-page program pulses) the fitted model expects of ``count``
    pulses of line ``ch`` that the trace summariser left out of its sequence.

    Their widths are not known one by one, but they lie in the summary windows
    (``provenance["sequence"]["summary_windows"]``), and the line's histogram holds every
    pulse's width, theirs too: they are taken as distributed as the histogram inside those
    windows, each bin at the posterior program units of its centre (the model's emissions and
    weights, without the order: :meth:`SequenceResult.program_units_at`)."""
    seq = measurement.provenance.get("sequence") or {}
    windows = seq.get("summary_windows") or []
    hist = measurement.counts[ch].histogram
    if not count or not windows or not hist or sequence.prior is None or sequence.grid is None:
        return 0.0
    edges = measurement.bin_edges()
    weight = np.zeros(len(hist))
    for k in windows:
        lo, hi = measurement.config.windows[k]
        for b in range(len(hist)):
            if hist[b] and lo <= edges[b] and edges[b + 1] <= hi:
                weight[b] = hist[b]
    if not weight.sum():
        return 0.0
    centres = np.sqrt(np.maximum(np.asarray(edges[:-1], dtype=float), 0.5)
                      * np.asarray(edges[1:], dtype=float))
    units = sequence.program_units_at(centres * measurement.tick_seconds * 1e6)
    return count * float((weight * units).sum() / weight.sum())


def _units_per_program(row, die):
    """The units a program pulse of a line counts on average (its estimate over its program
    pulses; 1 where it has next to none)."""
    return row.estimate / die.program_pulses if die.program_pulses > 0.5 else 1.0


def compute_wa(measurement, geometry, logical, *, mp=None, program_class="program",
               channels=None, correction=None, sequence=None, write_only=False):
    """Compute the write amplification of a measurement.

    Parameters
    ----------
    measurement : Measurement
    geometry : Geometry
    logical : LogicalVolume
    mp : int, optional
        Pages per program pulse (default ``geometry.pages_per_pulse``).
    program_class : str or int
        The window holding program pulses.
    channels : sequence of int, optional
        Sniffer channels to use (default: every enabled channel).
    correction : dict of int to float, optional
        Overlap-corrected program counts per channel
        (:func:`rbscope.analysis.calibrate.overlap_correction`).
    sequence : SequenceResult, optional
        The sequence-aware classification of every used channel's pulses
        (:func:`rbscope.analysis.sequence.classify`, keyed by channel): its program pages replace
        the window counts, and its posterior and structural slack enter the 95 % interval.
    write_only : bool
        The workload wrote only (enables the read-pulse and WA < 1 checks).

    Returns
    -------
    WAResult
    """
    if not isinstance(logical, LogicalVolume):
        raise WAError(f"logical must be a LogicalVolume, not {logical!r}")
    if logical.hi == 0:
        raise WAError("the logical volume is 0 bytes: nothing was written, WA is undefined")
    mp = geometry.pages_per_pulse if mp is None else _check_positive_int("mp", mp)
    if mp > geometry.planes_per_die:
        raise WAError(f"Mp {mp} contradicts the geometry: a {geometry.planes_per_die}-plane die "
                      f"programs at most {geometry.planes_per_die} pages per pulse")
    k = program_class_index(measurement, program_class)
    name_of = measurement.class_names[k] or str(k)
    enabled = measurement.enabled
    if channels is None:
        channels = enabled
    else:
        for ch in channels:
            if ch not in enabled:
                raise WAError(f"channel {ch} is not an enabled channel of the measurement "
                              f"(enabled: {enabled})")
    if not channels:
        raise WAError("the measurement has no enabled channel")
    warnings = []
    rows = []
    seen = set()
    for ch in channels:
        probe = measurement.probes[ch]
        for loc in probe.dies:
            try:
                geometry.check_location(loc)
            except ValueError as exc:
                raise WAError(f"probe {probe.name!r}: {exc}") from None
            if loc in seen:
                raise WAError(f"die {loc} is watched by two probes; each die may be counted "
                              f"once")
            seen.add(loc)
        c = measurement.counts[ch]
        corrected = None if correction is None else correction.get(ch)
        rows.append(ChannelPrograms(ch, probe.name, probe.die_count, c.classes[k],
                                    c.partial + c.dropped, corrected))
        if sequence is not None:
            if ch in sequence.dies:
                _sequence_row(rows[-1], sequence.dies[ch], mp, sequence.balanced,
                              sequence.page_types, sequence.mode)
                lost = measurement.pulses_lost.get(ch, 0) if sequence.mode == "sequence" else 0
                if lost:
                    _lost_records(rows[-1], sequence.dies[ch], lost)
                summarised = (measurement.pulses_summarised.get(ch, 0)
                              if sequence.mode == "sequence" else 0)
                if summarised:
                    _summarised_records(rows[-1], summarised, summarised_units(
                        measurement, sequence, ch, summarised))
            elif sum(c.classes) + c.unclassified:
                raise WAError(f"line {probe.name or ch}: no pulse sequence was classified")
            # else: a line without a measured pulse has nothing to classify (no programs)
        if probe.die_count > 1:
            warnings.append(f"{probe.name}: a wired-OR line of {probe.die_count} dies; pulses of "
                            f"different dies that overlap merge into one, so programs are "
                            f"undercounted when the dies work in parallel")
    dies_probed = sum(r.dies for r in rows)
    dies = geometry.dies
    if dies_probed > dies:
        raise WAError(f"{dies_probed} dies are probed but {geometry.name} has only {dies}")
    scale = dies / dies_probed
    raw = sum(r.programs for r in rows)
    est = sum(r.estimate for r in rows)
    hi_count = sum(r.programs + r.unknown for r in rows)
    lo_count = min(raw, est)
    hi_count = max(hi_count, est)
    if sequence is not None:  # the windows' count is no bound of the classifier's estimate
        # Pulses whose records the link lost: none to all of them programs.
        lo_count = est - sum(r.lost_expected for r in rows)
        hi_count = est + sum(r.unknown + r.lost_max - r.lost_expected for r in rows)
    pulses = Interval(est * scale, lo_count * scale, hi_count * scale)
    unit = mp * geometry.page_size
    physical = pulses.scale(unit)
    lv = logical.value
    wa_value = physical.value / lv if lv else math.inf
    wa_lo = physical.lo / logical.hi
    wa_hi = physical.hi / logical.lo if logical.lo else math.inf
    wa = Interval(wa_value, min(wa_lo, wa_value), max(wa_hi, wa_value))
    per_die = []
    for r in rows:
        per_die.append((r.name, r.estimate / r.dies * dies * unit / lv if lv else None))

    names = [n or str(i) for i, n in enumerate(measurement.class_names)]
    class_totals = {names[i]: sum(measurement.counts[ch].classes[i] for ch in channels)
                    for i in range(measurement.params.classes)
                    if measurement.config.windows[i][0] < measurement.config.windows[i][1]}
    other = {f: sum(getattr(measurement.counts[ch], f) for ch in channels)
             for f in FIXED_COUNTERS}
    _warn(measurement, geometry, channels, k, rows, dies_probed, dies, other, class_totals,
          warnings, model=None if sequence is None else sequence.mode)

    # The 95 % interval: the bounds above, widened by the sampling of dies and, with the
    # sequence classifier, by the classification (posterior, structural slack, cache programs).
    includes = ["partial and dropped pulses", "logical-volume resolution"]
    if any(r.lost for r in rows):
        includes.append(f"pulses whose records the link lost ({sum(r.lost for r in rows):,}: "
                        f"none to all of them programs)")
    excludes = []
    sampling = None
    if dies_probed == dies:
        sampling = 0.0
        includes.append("every die probed (no die sampling)")
    elif len(rows) >= 2:
        samples = [r.estimate / r.dies for r in rows]
        mean = sum(samples) / len(samples)
        sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1))
        fpc = math.sqrt(max(0.0, (dies - dies_probed) / (dies - 1)))
        sampling = t_quantile(len(samples) - 1) * dies * sd / math.sqrt(len(samples)) * fpc
        includes.append("die sampling (Student t)")
    else:
        # One line for several dies: the others' traffic is not in the pulses at all, and one
        # line cannot measure how far the dies differ. No spread is assumed: the value keeps the
        # paper's full-parallelism reading, flagged undetermined below, and the interval spans
        # what the unprobed dies may physically have programmed (none to their busy-time limit).
        sampling = 0.0
        includes.append("the unprobed dies: none to as many programs as the capture's duration "
                        "allows (one probed line cannot measure the die-to-die spread)")
    class_sd = math.sqrt(max(0.0, sum(r.class_var for r in rows))) * scale
    class_slack = sum(r.class_slack for r in rows) * scale
    cache_suspected = sequence is not None and _cache_suspected(rows, sequence, write_only,
                                                                wa.value)
    class_up = sum(r.class_up for r in rows) * scale if cache_suspected else 0.0
    if sequence is not None and geometry.pages_per_block:
        # Programs the erases allow: every erased block is filled by pages_per_block programs
        # (in steady state nearly all of them within the capture). Programs that showed no
        # long pulse (host-paced cache programs: only tCBSY) are up to that many more.
        implied = sum(max(0.0, _erased_room(sequence.dies[r.channel], geometry)
                          - r.estimate) for r in rows) * scale
        if implied > 0:
            class_up += implied
            includes.append("programs the erases allow (erases × pages per block)")
    # Programs after an erase and reads may be the rest of a suspended erase (61h … D2h): the
    # lower end of the interval counts them as no programs (sequence.resumable).
    class_down = 0.0
    if sequence is not None:
        class_down = scale * sum(
            d.resumable * d.units / d.program_pulses for d in
            (sequence.dies[r.channel] for r in rows) if d.resumable and d.program_pulses)
        if class_down >= max(1.0, RESUMABLE_SHARE * pulses.value):
            includes.append(f"programs that may be the rest of suspended erases (≈"
                            f"{class_down:,.0f} follow an erase and 1-3 reads)")
        else:
            class_down = 0.0
    if sequence is not None:
        includes += ["classification posterior", "structural slack of the classification"]
        if cache_suspected:
            includes.append("cache-program ambiguity (short pulses that may be programs)")
    elif correction is None:
        # Window counts: the pulses within a quarter of the program window's edges could be on
        # either side (a width window cannot tell): both ways in the interval.
        edge = _window_edge_pulses(measurement, channels, k) * scale
        class_slack += edge
        includes.append("pulses near the program window's edges (either side)")
        excludes.append("classification beyond the window edges (the sequence classifier "
                        "needs per-pulse widths)")
    else:
        excludes.append("classification beyond the overlap correction's mixture fit")
    confidence = None
    if sampling is not None:
        margin = math.sqrt(sampling ** 2 + (1.96 * class_sd) ** 2) + class_slack
        lo_p = max(0.0, pulses.lo - margin - class_down) * unit
        hi_p = (pulses.hi + margin + class_up) * unit
        confidence = Interval(wa.value, min(lo_p / logical.hi, wa.value),
                              max(hi_p / logical.lo if logical.lo else math.inf, wa.value))

    undetermined, decide, alternatives, decided = False, [], [], None
    if sequence is not None:
        undetermined, decide, alternatives, confidence, decided = _undetermined(
            measurement, geometry, logical, rows, sequence, scale, unit, wa, confidence,
            cache_suspected)
        if undetermined:
            includes.append("every reading the pulses leave open (undetermined)")
        if any(getattr(d, "read_modes_open", 0.0) >= 0.5 for d in sequence.dies.values()):
            includes.append("read-width modes the idle gaps left open, as SLC-mode programs "
                            "(the upper end)")
    elif any(r.dies > 1 for r in rows):
        # Wired-OR lines counted by windows (too few pulses for the sequence classifier, or
        # counts only): merged busies lost programs as on the sequence path, and the line's busy
        # time bounds them with the program window's lower edge as the fastest program.
        undetermined = True
        lo_edge = measurement.config.windows[k][0] * measurement.tick_seconds * 1e6
        fastest = max(50.0, lo_edge) if lo_edge > 0 else 150.0
        extra = _wired_room(measurement, rows, fastest) * scale
        decide.append(f"wired-OR line(s) of {max(r.dies for r in rows)} LUNs: the line is low "
                      f"while any LUN is busy, so the busies of LUNs working at the same time "
                      f"merged (and a line busy past the width counter counts no pulse at "
                      f"all); up to {extra:,.0f} program pulses the line's busy time allows are "
                      f"in the interval; probe one R/B# per LUN, or tap the bus")
        includes.append("every reading the pulses leave open (undetermined)")
        if logical.lo:
            hi = (pulses.hi + extra) * unit / logical.lo
            base = confidence or wa
            confidence = Interval(wa.value, base.lo, max(base.hi, hi))

    if dies_probed < dies and len(rows) == 1:
        undetermined = True
        base = confidence or wa
        lo, hi, alone, reason = _unprobed_bounds(measurement, logical, rows, dies_probed, dies,
                                                 unit, wa, sequence, k)
        decide.append(reason)
        if alone is not None:
            alternatives.append({"reading": f"the {dies - dies_probed} unprobed dies "
                                            f"programmed nothing", "wa": alone})
        confidence = Interval(wa.value, min(base.lo, lo), max(base.hi, hi))
        if "every reading the pulses leave open (undetermined)" not in includes:
            includes.append("every reading the pulses leave open (undetermined)")

    erase_index = next((i for i, n in enumerate(measurement.class_names) if n == "erase"), None)
    erase_pulses = None if erase_index is None else \
        sum(measurement.counts[ch].classes[erase_index] for ch in channels) * scale
    classification = None
    if sequence is not None:
        erase_pulses = sum(sequence.dies[r.channel].erase_pulses for r in rows) * scale
        classification = sequence.to_dict()
    endurance = _endurance(geometry, physical.value, erase_pulses, mp, wa.value)
    checks = _checks(measurement, geometry, logical, channels, rows, k, mp, scale, wa, pulses,
                     erase_pulses, sequence, cache_suspected, write_only)
    warnings.extend(c["message"] for c in checks)
    return WAResult(wa=wa, physical_bytes=physical, program_pulses=pulses, logical=logical,
                    mp=mp, page_size=geometry.page_size, dies=dies, dies_probed=dies_probed,
                    program_class=name_of, channels=rows, per_die=per_die,
                    class_totals=class_totals, other_totals=other, warnings=warnings,
                    wa_confidence=confidence, endurance=endurance,
                    classifier="windows" if sequence is None else sequence.mode,
                    interval_includes=tuple(includes), interval_excludes=tuple(excludes),
                    checks=checks, classification=classification,
                    undetermined=undetermined, decide=decide, alternatives=alternatives,
                    scheme_reading=decided)


#: Cells and schemes a count of program modes is consistent with: (cell, scheme, pages per
#: pulse of the main modes), by the number of main modes the classifier found.
_READINGS = {
    1: (("slc", "page", 1.0), ("mlc", "one-shot", 2.0), ("tlc", "one-shot", 3.0),
        ("qlc", "one-shot", 4.0)),
    2: (("mlc", "page", 1.0), ("tlc", "two-pass", 1.5), ("qlc", "two-pass", 2.0)),
    3: (("tlc", "page", 1.0),),
    4: (("qlc", "page", 1.0),),
}


def _erases_off_implied(rows, dies):
    """How far the rows' erase pulses fall short of, and exceed, the erases their programs
    imply (a block erased for each block filled), each also in program pulses of the row's
    units: ``(short, short_units, surplus, surplus_units)``; dies without a cap count none."""
    short = short_units = surplus = surplus_units = 0.0
    for r in rows:
        d = dies[r.channel]
        if d.erase_cap is None or not d.program_pulses:
            continue
        off = d.erase_pulses - erases_implied(d.erase_cap)
        per = r.estimate / d.program_pulses
        if off < 0:
            short, short_units = short - off, short_units - off * per
        else:
            surplus, surplus_units = surplus + off, surplus_units + off * per
    return short, short_units, surplus, surplus_units


def _programs_inside(states, dies, lo):
    """Expected program pulses of ``dies`` whose widths lie above ``lo`` (octaves), each program
    mode taken as normal in log width (its ``mu`` and ``sigma``)."""
    n = 0.0
    for s in states:
        if s.kind not in ("program", "program_slc") or not s.sigma > 0:
            continue
        share = 0.5 * math.erfc((lo - s.mu) / (s.sigma * math.sqrt(2.0)))
        n += share * sum(d.expected.get(s.name, 0.0) for d in dies)
    return n


def _undetermined(m, geometry, logical, rows, sequence, scale, unit, wa, confidence,
                  cache_suspected):
    """What R/B# alone cannot decide: ``(flag, reasons, alternatives, widened interval)``.

    * **The program scheme** when the geometry does not state it: the number of program modes
      found is consistent with several (cell, scheme) readings (one mode: SLC, or one-shot
      MLC/TLC/QLC; two: MLC pages, or two-pass TLC/QLC), each its own pages per pulse. The
      readings below the physical bound (WA ≥ 1 without compression) are dropped while another
      remains; if more than one remains, the interval spans them.
    * **A wired-OR line** of several LUNs that was busy much of the time: overlapping pulses of
      different LUNs merged, so programs were lost. The interval spans the counted programs up
      to what the line's busy time allows (every LUN busy all the line's busy time, programs as
      fast as the fastest program mode).
    * **Short pulses that may be programs** (host-paced cache programs: R/B# shows only tCBSY,
      among the reads) when WA would be below 1 without them, or when host-paced cache programs
      were found and the unanchored chains' short pulses (``paced_open``) reach 1 % of the
      counted programs.
    """
    reasons, alts = [], []
    decided = None
    dies = {r.channel: sequence.dies[r.channel] for r in rows}
    states = sequence.states
    lo_wa = confidence.lo if confidence is not None else wa.lo
    hi_wa = confidence.hi if confidence is not None else wa.hi
    lv = logical.value
    has_logical = logical.source != "none"

    def wa_of_units(units):
        return units * scale * unit / lv if lv else math.inf

    counted = sum(r.estimate for r in rows)
    # Program modes: main modes (kind "program") and the rest (SLC mode, cache programs).
    main = [s.name for s in states if s.kind == "program"]
    main_units = sum(d.expected.get(n, 0.0) * s.pages for d in dies.values()
                     for s in states for n in [s.name] if n in main)
    main_pulses = sum(d.expected.get(n, 0.0) for d in dies.values() for n in main)
    undetermined = False
    signed = [d for d in dies.values() if d.load_bits]
    if signed and len(signed) >= 0.5 * len(dies):
        # The pulses decide: data loads before every long program (the one-shot signature).
        pass
    elif geometry.program_scheme is None and main_pulses > 0:
        n_modes = len(main)
        readings = [x for x in _READINGS.get(min(n_modes, 4), ())
                    if geometry.cell in (None, x[0])]
        # Physics: a page program of the fastest page type (SLC, a lower page) takes well under
        # a millisecond; a pulse that programs a word line's pages (one-shot, a pass of
        # two-pass) takes longer.
        fastest = min(2.0 ** s.mu for s in states if s.kind == "program")
        plausible = [x for x in readings if (x[1] == "page") == (fastest < WORDLINE_US)]
        readings = plausible or readings
        if len(readings) == 1 and readings[0][1] != "page":
            # The modes found and the stated cell fit one scheme only (a TLC page order would
            # show three modes; one mode on TLC cells is one-shot). A spurious or a merged mode
            # changes that count, so the reading is offered, not assumed: the interval spans it.
            cell, scheme, per = readings[0]
            decided = (cell, scheme)
            w = wa_of_units(main_pulses * per + sum(
                d.expected.get(s.name, 0.0) for d in dies.values() for s in states
                if s.kind == "program_slc"))
            undetermined = True
            alts.append({"reading": f"{scheme} {cell.upper()} (the only scheme {n_modes} "
                                    f"program mode(s) on {cell.upper()} cells fit)", "wa": w})
            lo_wa, hi_wa = min(lo_wa, w), max(hi_wa, w)
            reasons.append(f"the program scheme: {n_modes} program mode(s) on {cell.upper()} "
                           f"cells fit {scheme} only, unless a mode was missed or is spurious; "
                           f"say program_scheme in the geometry (the datasheet says which)")
        if len(readings) > 1:
            options = []
            slc = sum(d.expected.get(s.name, 0.0) for d in dies.values() for s in states
                      if s.kind == "program_slc")
            for cell, scheme, per in readings:
                if scheme == "page":
                    units = counted + main_pulses * per - main_units
                else:
                    # A word line's program: the short pulses before it are its data loads
                    # (1Ah) and plane queueing, never programs or extra pages; Mp planes.
                    units = main_pulses * per + slc
                options.append((cell, scheme, wa_of_units(units)))
            possible = [o for o in options if o[2] >= 0.98] if has_logical else options
            if len(possible) > 1 or (not possible and len(options) > 1):
                shown = possible or options
                undetermined = True
                reasons.append(
                    f"the program scheme: {n_modes} program mode(s) fit "
                    + ", ".join(f"{c.upper()} {s}" for c, s, _ in shown)
                    + "; say program_scheme and cell in the geometry (the power-up parameter "
                    "page or the datasheet says which), or tap the bus")
                for cell, scheme, w in options:
                    if abs(w - wa.value) > 1e-9 * max(1.0, wa.value):
                        alts.append({"reading": f"{scheme} {cell.upper()}", "wa": w})
                lo_wa = min(lo_wa, min(o[2] for o in shown))
                hi_wa = max(hi_wa, max(o[2] for o in shown))
            elif len(possible) == 1 and abs(possible[0][2] - wa.value) > 0.02 * wa.value:
                cell, scheme, w = possible[0]
                if scheme != "page":
                    decided = (cell, scheme)
                alts.append({"reading": f"{scheme} {cell.upper()} (the only reading with "
                                        f"WA ≥ 1)", "wa": w})
                hi_wa = max(hi_wa, w)
                lo_wa = min(lo_wa, w)
                undetermined = True
                reasons.append(f"the program scheme: only {scheme} {cell.upper()} gives WA ≥ 1; "
                               f"say program_scheme and cell in the geometry to confirm")
    # Program modes beyond those the stated cell's page order makes (a page each: `bits` modes;
    # one-shot one, two-pass two), each smaller than a page type holds and lying between the
    # page types' modes: a cluster of long pulses that is no page type. A publishing draw of
    # mlc-erase-suspend (1639 at L0, +1.46 % decided): a third mode at 1 ms between the MLC
    # pages' two, 8 pulses, 7 of them the rests of suspended erases (their resumes not told by
    # the gaps). Whether such pulses are
    # programs (a page type's tail) or pieces of suspended operations R/B# cannot say: the
    # interval's lower end counts them as none, and from 1 % of the programs the value is
    # undetermined. (Not on wired-OR lines, whose merged busies make modes of their own, nor
    # where cache programs were found: a back-to-back chain's 15h busy runs on to the previous
    # page's program, a mode of its own about twice as wide; on slc-seq-cache tuning draws.)
    bits = geometry.bits
    makes = ({"one-shot": 1, "two-pass": 2}.get(geometry.program_scheme, bits)
             if bits else None)
    if makes and main and len(main) > makes and not any(r.dies > 1 for r in rows) \
            and not any(s.kind == "cache" for s in states):
        pulses_of = {n: sum(d.expected.get(n, 0.0) for d in dies.values()) for n in main}
        total = sum(pulses_of.values())
        small = sorted(main, key=pulses_of.get)[:len(main) - makes]
        mu = {s.name: s.mu for s in states}
        kept = [mu[n] for n in main if n not in small]
        # (Only between the page types' modes: one beyond them is another thing. A publishing
        # draw of slc-seq-cache, 1688: a mode twice the SLC programs' width, a chain's 15h
        # busies running on to the previous page's program, no tCBSY cluster found.)
        extra = [n for n in small if pulses_of[n] < 0.5 * total / (makes + 1)
                 and min(kept) < mu[n] < max(kept)]
        if extra:
            n_extra = sum(pulses_of[n] for n in extra)
            units = sum(pulses_of[s.name] * s.pages for s in states if s.name in extra)
            lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - units)))
            if units >= 0.01 * counted:
                undetermined = True
                where = ", ".join(f"≈{2.0 ** s.mu:,.0f} µs" for s in states
                                  if s.name in extra)
                order = ("page order makes" if geometry.scheme == "page"
                         else f"{geometry.scheme} programs make")
                reasons.append(
                    f"{len(main)} program modes on {geometry.cell.upper()} cells, whose "
                    f"{order} {makes}: the ≈{n_extra * scale:,.0f} "
                    f"pulses of the smallest ({where}) are no page type; each may be a program "
                    f"or a piece of a suspended operation (its rest, or a first piece cut "
                    f"short), which R/B# cannot say: up to {units * scale:,.0f} fewer program "
                    f"pulses in the interval; tap the bus (84h/13h, 61h/D2h name suspensions)")
    # Wired-OR lines: the line is low while any of its LUNs is busy (the union of their busy
    # times), so the busies of LUNs working at the same time merge into one pulse and programs
    # are lost. Nothing on the line says how much they overlapped: undetermined.
    wired = [r for r in rows if r.dies > 1]
    if wired:
        extra_hi = _wired_room(m, wired, _fastest_program_us(states),
                               max(1.0, _max_pages(states)))
        est = 0.0
        tick_us = m.tick_seconds * 1e6
        for r in wired:
            d = dies[r.channel]
            busy = m.counts[r.channel].busy_ticks * tick_us  # the union U, µs
            # Estimate: the program rate of the line's single operations (what the states
            # other than the erase/merged one hold) over the LUNs' busy time, taken halfway
            # between no overlap (U) and full overlap (d × U).
            single = sum(d.expected.get(st.name, 0.0) * 2.0 ** st.mu for st in states
                         if st.kind != "erase")
            rate = r.estimate / single if single else 0.0
            est += max(r.estimate, rate * busy * (1 + r.dies) / 2)
        undetermined = True
        reasons.append(
            f"wired-OR line(s) of {max(r.dies for r in wired)} LUNs: the line is low while any "
            f"LUN is busy, so the busies of LUNs working at the same time merged and programs "
            f"were lost; probe one R/B# per LUN, or tap the bus (the opcode tap counts every "
            f"LUN's confirms)")
        others = sum(r.estimate for r in rows if r.dies == 1)
        alts.append({"reading": "the merged LUNs' busy time at their single operations' "
                                "program rate (halfway between no and full overlap)",
                     "wa": wa_of_units(others + est)})
        hi_wa = max(hi_wa, wa.hi + wa_of_units(extra_hi))
    # Suspended operations: joined pieces are a model's reading; pieces it left apart count as
    # programs of their own (each suspension found suggests more, their pieces in the clusters).
    joined = sum(getattr(d, "suspended", 0.0) for d in dies.values())
    unjoined = 0.0  # resumes the gaps named that were left unjoined (the interval's)
    off = _erases_off_implied(rows, dies)  # erases short of / beyond the blocks filled
    by_gap = [d for d in dies.values() if getattr(d, "resume_slack", None) is not None]
    if by_gap and joined >= max(1.0, 0.002 * counted):
        # The idle gaps named the resumes (a resume needs no data in); whether the long pulse
        # before a resume is its first piece (or a whole operation, the first piece passing for
        # a read) they do not say: the interval spans every resume joined to none (the
        # sequence classifier's resume_slack), and the joins' posterior spread.
        spread = 2.0 * math.sqrt(sum(d.resume_var for d in by_gap))
        more = sum(d.resume_slack[0] for d in by_gap) + spread
        fewer = sum(d.resume_slack[1] for d in by_gap) + spread
        reasons.append(f"≈{joined * scale:,.0f} suspended operations (a busy, reads, the rest "
                       f"of it) were joined, each rest told by the short idle gap before it (a "
                       f"resume needs no data in); whether the busy before a rest is its first "
                       f"piece (or a whole operation, the first piece passing for a read) R/B# "
                       f"cannot say: up to {more * scale:,.0f} more and {fewer * scale:,.0f} "
                       f"fewer joins in the interval; tap the bus (84h/13h, 61h/D2h name them)")
        if max(more, fewer) > 0.01 * counted:
            undetermined = True
        lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - more)))
        hi_wa = max(hi_wa, wa_of_units(counted + fewer))
        unjoined = more
    elif joined >= max(1.0, 0.002 * counted):
        undetermined = True
        reasons.append(f"≈{joined * scale:,.0f} suspended operations (a busy, reads, the rest "
                       f"of it) were joined; pieces that look like whole operations cannot be "
                       f"told apart by R/B#: tap the bus (84h/13h, 61h/D2h name them)")
        lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - SUSPEND_MISSED * joined)))
        hi_wa = max(hi_wa, wa_of_units(counted + joined))
    if joined >= max(1.0, 0.002 * counted):
        # A drive that suspends erases: an erase whose pieces were left apart is two pulses as
        # wide as programs when its first piece is short, and the erases then fall short of
        # the blocks the programs filled. Blocks not yet erased (free at the start) leave the
        # same shortfall: the interval spans two program pulses per missing erase. With the
        # resumes the gaps named but left unjoined, both lower the count: together from 1 %
        # of the programs the value is undetermined, and the interval's lower end takes both
        # (a tuning draw of mlc-erase-suspend: 172 suspensions, 79 joined, 37 resumes left
        # open and 65 erases short, each under 1 %; the count 1.3 % high, decided).
        short, short_units, _, _ = off
        hidden = 2 * short_units
        lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - hidden - unjoined)))
        if hidden > 0 and hidden + unjoined > 0.01 * counted:
            undetermined = True
            both = (f" (with the ≈{unjoined * scale:,.0f} resumes left unjoined, "
                    f"{100 * (hidden + unjoined) / counted:.1f} % of the programs)"
                    if hidden <= 0.01 * counted else "")
            reasons.append(f"the erases fall short of the blocks the programs filled (programs "
                           f"÷ pages per block) by ≈{short * scale:,.0f}: each may be a "
                           f"suspended erase whose two pieces both passed for programs, or a "
                           f"block not yet erased (free when the capture began); R/B# cannot "
                           f"say: up to {2 * short * scale:,.0f} fewer program pulses in the "
                           f"interval{both}; tap the bus (60h/D0h count the erases, 61h/D2h "
                           f"the suspensions)")
    # Erases beyond the blocks the programs filled, where the slowest program mode's widths
    # reach into the erases': each surplus pulse may be a slow program (a page type's tail
    # under the erase cluster) or a block erased ahead. The interval holds them (the erase
    # slack); from 1 % of the programs the value is undetermined (a tuning draw of mlc-easy,
    # heavy-tailed upper pages: 90 erases where the programs fill 66 blocks, truth 67: -1.1 %).
    prog_top = max((s.support[1] for s in states if s.kind in ("program", "program_slc")),
                   default=-math.inf)
    erase_lo = min((s.support[0] for s in states if s.kind == "erase"), default=math.inf)
    if prog_top > erase_lo:
        _, _, surplus, more = off
        hi_wa = max(hi_wa, wa_of_units(counted + more))
        if more >= ERASE_SURPLUS * counted:
            undetermined = True
            reasons.append(f"the erases exceed the blocks the programs filled (programs ÷ pages "
                           f"per block) by ≈{surplus * scale:,.0f}, and the slowest programs' "
                           f"widths reach into the erases': each may be a slow program or a "
                           f"block erased ahead; R/B# cannot say: up to "
                           f"{more * scale:,.0f} more program pulses in the interval; tap the "
                           f"bus (60h/D0h count the erases)")
        # Erases held at the classifier's floor (ERASE_FLOOR of the blocks the programs
        # filled, less two a line) where the widths overlap: the widths alone called fewer
        # pulses erases, the floor decided how many, and each erase short of the blocks filled
        # may be one more counted as a program (a steady drive erases a block for each block
        # it fills), as many as the program modes' widths put above the erase state's lower
        # end. Only where the erases sit at the floor: below it, no pulse the floor could move
        # was left, and the widths decided (a capture of a drive with erased blocks to spare).
        # Not where suspended erases were joined (their shortfall rule above spans two pulses
        # each). (A tuning draw of mlc-hostpaced-cache-50r, heavy-tailed widths: 41 erases at
        # the floor where the programs fill 56 blocks, truth 56: +1.05 % decided.)
        if joined < max(1.0, 0.002 * counted):
            held = [d for d in dies.values() if d.erase_cap is not None and d.program_pulses]
            filled = sum(erases_implied(d.erase_cap) for d in held)
            erased = sum(d.erase_pulses for d in held)
            floor = erase_floor_of(filled, len(held))
            short, short_units, _, _ = off
            inside = _programs_inside(states, dies.values(), erase_lo)
            fewer = short_units * min(1.0, inside / short) if short > 0 else 0.0
            if fewer > 0 and abs(erased - floor) <= max(1.0, 0.01 * floor):
                lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - fewer)))
                if fewer >= ERASE_HELD * counted:
                    undetermined = True
                    reasons.append(
                        f"the erases were held at the classifier's floor ({ERASE_FLOOR:g} of "
                        f"the blocks the programs filled), ≈{short * scale:,.0f} short of "
                        f"those blocks, and the slowest programs' widths reach into the "
                        f"erases': the widths cannot say how many of those pulses are erases; "
                        f"up to {fewer * scale:,.0f} fewer program pulses in the interval; "
                        f"tap the bus (60h/D0h count the erases)")
    # The tapped channel's rests (a trained model: pulses labelled as reads wider than the
    # reads) per program pulse, at the upper end of their Poisson spread, say how many pieces
    # these dies' programs may have left to join: joins short of that are rests that may each
    # have counted as a program of its own (two publishing draws of mlc-read-retry at L2,
    # +6.4 % and +3.8 %: the joins 186 and 176 short of the resume pieces, the intervals'
    # lower ends 0.44 % and 0.03 % above the truth).
    rate = getattr(sequence, "rest_rate_hi", None)
    if rate:
        short, hidden = 0.0, 0.0
        for r in rows:
            d = dies[r.channel]
            if not d.program_pulses:
                continue
            miss = max(0.0, rate * d.program_pulses - getattr(d, "suspended", 0.0))
            short += miss
            hidden += miss * r.estimate / d.program_pulses
        if hidden >= max(1.0, 0.002 * counted):
            lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - hidden)))
            if hidden > 0.01 * counted:
                undetermined = True
                reasons.append(f"the tapped channel showed up to {rate:.1%} rests of resumed "
                               f"operations per program (its count's 97.5 % upper end); the "
                               f"joins here fall short of that by "
                               f"≈{short * scale:,.0f}: each may be a rest counted as a program "
                               f"of its own: up to {hidden * scale:,.0f} fewer program pulses "
                               f"in the interval")
    suspect = sum(getattr(d, "suspect", 0.0) for d in dies.values())
    if suspect >= max(1.0, 0.002 * counted):
        undetermined = True
        reasons.append(f"≈{suspect * scale:,.0f} pairs of long pulses around reads look like "
                       f"suspended operations, more than suspension makes: whether they are "
                       f"(each pair one operation) R/B# cannot say; tap the bus (84h/13h, "
                       f"61h/D2h)")
        lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - suspect)))
    # Read-width modes whose pulses wait for a page's data in more often than not, too seldom
    # to be called programs (an SLC cache's programs mixed with a read tail, the gaps barely a
    # transfer apart): reads or SLC-mode programs (one page each), R/B# cannot say.
    open_ = sum(getattr(d, "read_modes_open", 0.0) for d in dies.values())
    if open_ >= 0.5:
        w_alt = wa_of_units(counted + open_)
        hi_wa = max(hi_wa, w_alt)
        # (the interval's upper end counts them, however few)
        if open_ >= 0.01 * counted:
            undetermined = True
            reasons.append(f"≈{open_ * scale:,.0f} pulses of read-width modes wait for a page's "
                           f"data in more often than not, too seldom to call them programs: "
                           f"reads or SLC-mode programs, the idle gaps cannot tell; tap the bus "
                           f"(00h…30h reads, 80h…10h programs)")
            alts.append({"reading": f"the {open_ * scale:,.0f} pulses of read-width modes left "
                                    f"open are SLC-mode programs", "wa": w_alt})
    # A width mode that is reads on some dies and programs on others: the dies of one drive run
    # one firmware on one part, so the same pulses are the same operation on every die.
    flips = _label_flips(rows, dies, states)
    if flips:
        more = sum(f["more"] for f in flips)
        fewer = sum(f["fewer"] for f in flips)
        w_more, w_fewer = wa_of_units(counted + more), wa_of_units(max(0.0, counted - fewer))
        lo_wa, hi_wa = min(lo_wa, w_fewer), max(hi_wa, w_more)
        undetermined = True
        for f in flips:
            reasons.append(
                f"one population of pulses is labelled reads ({f['read']}, ≈"
                f"{f['read_us']:,.0f} µs) on {_dies_text(f['read_dies'])} and programs "
                f"({f['program']}, ≈{f['program_us']:,.0f} µs) on "
                f"{_dies_text(f['program_dies'])}, as many on each die: on the dies of one "
                f"drive it is one operation, which R/B# cannot say: from "
                f"≈{f['fewer'] * scale:,.0f} fewer to ≈{f['more'] * scale:,.0f} more programs "
                f"in the interval; the datasheet's tR maximum (L1) or the bus tap decides")
        alts.append({"reading": "the pulses of a width mode read on some dies and "
                                "programmed on others are programs on every die",
                     "wa": w_more})
        alts.append({"reading": "the pulses of a width mode read on some dies and "
                                "programmed on others are reads on every die",
                     "wa": w_fewer})
    # Short pulses that may be host-paced cache programs.
    amb = sum(d.ambiguous_short for d in dies.values())
    if has_logical and wa.value < 0.98 and amb >= 0.5:
        w_alt = wa_of_units(counted + amb)
        alts.append({"reading": f"the {amb * scale:,.0f} short pulses in the tCBSY range are "
                                f"cache programs (host-paced: R/B# shows only tCBSY)",
                     "wa": w_alt})
        if not cache_suspected:
            hi_wa = max(hi_wa, w_alt)
        undetermined = True
        reasons.append("short pulses in the tCBSY range (a few µs to ~40 µs) may be reads or "
                       "cache programs: tap the bus (the opcode tap tells 15h from 30h)")
    # Back-to-back chains' heads told by being narrower than the reads (tCBSY): those as wide
    # as reads stayed reads, and a narrow pulse may be a fast read. As many again either way.
    narrow = sum(getattr(d, "narrow_heads", 0.0) for d in dies.values())
    if narrow >= 1.0:
        lo_wa = min(lo_wa, wa_of_units(max(0.0, counted - narrow)))
        hi_wa = max(hi_wa, wa_of_units(counted + narrow))
        if narrow >= NARROW_UNDECIDED * counted:
            undetermined = True
            reasons.append(f"≈{narrow * scale:,.0f} short pulses right before programs, "
                           f"narrower than the reads, were counted as heads of back-to-back "
                           f"cache-program chains (only tCBSY shows); heads as wide as reads "
                           f"cannot be told from the reads of pages being moved: up to as many "
                           f"more or fewer programs in the interval; tap the bus (the opcode "
                           f"tap tells 15h from 30h)")
    def leave_open(n, share, more, reason, reading):
        """Keep ``n`` program pulses the pulses cannot decide in the interval (``more``: at its
        upper end, else its lower); from ``share`` of the counted programs the value is
        undetermined, for ``reason``, with the alternative ``reading``."""
        nonlocal lo_wa, hi_wa, undetermined
        w_alt = wa_of_units(counted + n if more else max(0.0, counted - n))
        hi_wa, lo_wa = (max(hi_wa, w_alt), lo_wa) if more else (hi_wa, min(lo_wa, w_alt))
        if n >= share * counted:
            undetermined = True
            reasons.append(reason)
            alts.append({"reading": reading, "wa": w_alt})

    # Back-to-back cache-program chains (their heads counted): a chain's middle pulse (15h,
    # busy until the previous page's array program ends) may be as short as a read, so the
    # read states beside the main one hold reads or such programs: the interval's upper end
    # counts them programs, and from 1 % of the programs the value is undetermined.
    side = sum(getattr(d, "side_reads", 0.0) for d in dies.values())
    if side >= 0.5:
        leave_open(side, SIDE_READS_UNDECIDED, True,
                   f"back-to-back cache-program chains on this drive (their heads counted): "
                   f"≈{side * scale:,.0f} pulses of read-width modes beside the main reads may "
                   f"be reads or a chain's programs as short as reads (a 15h busy lasts until "
                   f"the previous page's program ends): up to that many more programs in the "
                   f"interval; tap the bus (the opcode tap tells 15h from 30h)",
                   f"the {side * scale:,.0f} pulses of the read-width modes beside the main "
                   f"reads are cache programs")
    # Heads of back-to-back chains counted (by a tCBSY cluster or the gaps) on a die whose cache
    # programs the silences found host-paced: its tCBSY cluster is those programs', and a read
    # as narrow as it, right before a program, passes for a chain's head. Both regimes on one
    # die R/B# cannot rule out: the interval's lower end counts those heads as reads (a
    # publishing draw of mlc-hostpaced-cache-50r, 1552: 12 such heads at L0, 27 at L1, no chain
    # on the drive; +1.12 % and +2.12 %, decided).
    mixed = sum(max(0.0, d.heads - d.narrow_heads) for d in dies.values()
                if getattr(d, "paced", 0.0) >= 1.0)
    if mixed >= 1.0:
        leave_open(mixed, MIXED_HEADS_UNDECIDED, False,
                   f"≈{mixed * scale:,.0f} short pulses right before programs were counted as "
                   f"heads of back-to-back cache-program chains on dies whose cache programs "
                   f"the idle gaps found host-paced: there the tCBSY cluster is the host-paced "
                   f"programs', and a read as short, before a program, passes for a head; up to "
                   f"that many fewer programs in the interval; tap the bus (the opcode tap "
                   f"tells 15h from 30h)",
                   f"the {mixed * scale:,.0f} heads counted beside host-paced cache programs "
                   f"are reads")
    # Host-paced chains the silences found but no slow program's silence anchored (a read
    # whose page is moved leaves a silence too): counted none, each possibly a cache program.
    paced = sum(getattr(d, "paced", 0.0) for d in dies.values())
    unanchored = sum(getattr(d, "paced_open", 0.0) for d in dies.values())
    if paced >= 1.0 and unanchored >= max(1.0, 0.01 * counted):
        w_alt = wa_of_units(counted + unanchored)
        alts.append({"reading": f"the {unanchored * scale:,.0f} short pulses in unanchored "
                                f"chains are host-paced cache programs too", "wa": w_alt})
        hi_wa = max(hi_wa, w_alt)
        undetermined = True
        reasons.append(f"≈{paced * scale:,.0f} host-paced cache programs were found by the "
                       f"silence after their tCBSY; ≈{unanchored * scale:,.0f} more short "
                       f"pulses head silences as long as a fast page's program, in chains "
                       f"no slow page's silence confirms (a read whose page is moved leaves "
                       f"such a silence too): tap the bus (the opcode tap tells 15h from 30h)")
    if has_logical and wa.value < 0.98 and not alts and not undetermined:
        undetermined = True
        reasons.append(f"WA {wa.value:.3f} is below 1, which no reading of these pulses "
                       f"explains: check Mp, the program scheme and the probes")
    if undetermined:
        confidence = Interval(wa.value, min(lo_wa, wa.value), max(hi_wa, wa.value))
    elif confidence is not None:
        # Decided: the widenings above that flagged nothing (too few to matter) still hold.
        confidence = Interval(confidence.value, min(confidence.lo, lo_wa),
                              max(confidence.hi, hi_wa))
    return undetermined, reasons, alts, confidence, decided


#: A label flip (:func:`_label_flips`): the share of a (read mode, program mode) pair's pulses
#: one label holds on a die for the die to count as labelling them so, the least a die's pair
#: holds (pulses, and share of the die's pulses), and how far apart the dies' pair counts may be
#: (the smallest over the largest) for them to be the same pulses.
FLIP_SHARE = 0.8
FLIP_MIN_PULSES = 50
FLIP_MIN_SHARE = 0.02
FLIP_BALANCE = 0.5


def _label_flips(rows, dies, states):
    """Width modes that are reads on some dies and programs on the others.

    For each pair of a read mode and a program mode (page, word-line or SLC-mode programs), the
    dies of single-LUN lines where the pair holds a real share of the pulses: if on some of
    them the read mode holds the pair's pulses (:data:`FLIP_SHARE` or more) and on others the
    program mode does, with as many of the pair's pulses on each (:data:`FLIP_BALANCE`), the
    classifier labelled one population of pulses differently die by die (a die's process
    spread moves its widths across the boundary the fit drew). Returns one dict per such pair:
    the modes and their centres, the dies on each side, and the program units counted if the
    read dies' pulses are programs too (``more``: each as many units as the die's programs
    average) or if the program dies' are reads too (``fewer``).
    """
    single = [r for r in rows if r.dies == 1 and r.channel in dies]
    if len(single) < 2:
        return []
    reads = [s for s in states if s.kind == "read"]
    programs = [s for s in states if s.kind in ("program", "program_slc")]
    # The least a die's pair must hold, and a program pulse's units, per die.
    floor = {r.channel: max(FLIP_MIN_PULSES,
                            FLIP_MIN_SHARE * sum(dies[r.channel].expected.values()))
             for r in single}
    per = {r.channel: _units_per_program(r, dies[r.channel]) for r in single}
    flips = []
    for rd in reads:
        for pg in programs:
            pair = {}  # channel -> (read-mode pulses, program-mode pulses)
            for r in single:
                d = dies[r.channel]
                a, b = d.expected.get(rd.name, 0.0), d.expected.get(pg.name, 0.0)
                if a + b >= floor[r.channel]:
                    pair[r.channel] = (a, b)
            read_dies = [c for c, (a, b) in pair.items() if a >= FLIP_SHARE * (a + b)]
            program_dies = [c for c, (a, b) in pair.items() if b >= FLIP_SHARE * (a + b)]
            if not read_dies or not program_dies:
                continue
            sums = [sum(pair[c]) for c in read_dies + program_dies]
            if min(sums) < FLIP_BALANCE * max(sums):
                continue
            more = sum(pair[c][0] * per[c] for c in read_dies)
            fewer = sum(pair[c][1] * per[c] for c in program_dies)
            flips.append({"read": rd.name, "program": pg.name,
                          "read_us": rd.center_us, "program_us": pg.center_us,
                          "read_dies": sorted(read_dies), "program_dies": sorted(program_dies),
                          "more": more, "fewer": fewer})
    return flips


def _dies_text(channels):
    """``"channel 0"``, ``"channels 0, 2"``."""
    return ("channel " if len(channels) == 1 else "channels ") + ", ".join(map(str, channels))


def _fastest_program_us(states):
    """The fastest program time (µs) the program modes allow: the fastest mode's lower edge."""
    lows = [2.0 ** (s.mu - 2 * s.sigma) for s in states if s.kind in ("program", "program_slc")]
    return max(50.0, min(lows)) if lows else 150.0


def _wired_room(m, rows, fastest_us, pages=1.0):
    """Program pulses the wired-OR lines among ``rows`` may have lost beyond those counted: the
    physical bound, every LUN busy all of the line's busy time (the union of theirs) and
    programming a pulse of ``pages`` pages every ``fastest_us``."""
    tick_us = m.tick_seconds * 1e6
    return sum(max(0.0, r.dies * m.counts[r.channel].busy_ticks * tick_us / fastest_us * pages
                   - r.estimate) for r in rows if r.dies > 1)


def _max_pages(states):
    return max([s.pages for s in states if s.kind == "program"] or [1.0])


@dataclass
class OpcodeWA:
    """WA from the opcode tap's operation counts (:func:`opcode_wa`)."""

    wa: Interval
    pages: int  # pages programmed on the tapped dies (final 10h and 15h confirms × planes)
    dies_tapped: int
    dies: int
    edge_pages: int  # pages the capture's edges may have cut, each way
    warnings: list = field(default_factory=list)
    period: str | None = None  # what the counts cover (a capture: from its start to its stop)

    def to_dict(self):
        return {"wa": self.wa.to_dict(), "pages": self.pages, "dies_tapped": self.dies_tapped,
                "dies": self.dies, "edge_pages": self.edge_pages, "warnings": self.warnings,
                "period": self.period}


def opcode_wa(labels, geometry, logical):
    """WA in opcode-aware mode: the pages the bus's program confirms name, not R/B# widths.

    The tap counts every final program confirm (10h, and 15h of a cache program, whose R/B#
    shows only tCBSY) with the planes its 11h queue added, so the pages programmed on each
    tapped die are counted, not classified. The only unknowns are the operations cut at the
    capture's edges: one per die at each edge, of up to ``planes_per_die`` pages.

    Parameters
    ----------
    labels : sequence of rbscope.analysis.labelled.LabelledPulses
        One per tapped channel (``rbscope label``, or
        :func:`rbscope.analysis.labelled.from_refssd`).
    geometry : Geometry
    logical : LogicalVolume

    Returns
    -------
    OpcodeWA
    """

    labels = list(labels)
    kinds = (PlaneKind.PROGRAM, PlaneKind.CACHE_PROGRAM)
    pages = sum(lab.pages(d, k) for lab in labels for d in range(len(lab.dies)) for k in kinds)
    return opcode_wa_of_pages(pages, sum(len(lab.dies) for lab in labels), geometry, logical)


def opcode_wa_of_pages(pages, tapped, geometry, logical):
    """:func:`opcode_wa` from the tap's page count of ``tapped`` dies (e.g. a capture's
    ``provenance["tap"]``: ``pages_programmed`` and its ``dies``)."""
    if not isinstance(logical, LogicalVolume):
        raise WAError(f"logical must be a LogicalVolume, not {logical!r}")
    if logical.hi == 0:
        raise WAError("the logical volume is 0 bytes: nothing was written, WA is undefined")
    if not tapped:
        raise WAError("no tapped die: opcode-aware WA needs the labels of at least one channel")
    if tapped > geometry.dies:
        raise WAError(f"{tapped} dies are tapped but {geometry.name} has only {geometry.dies}")
    edge = 2 * tapped * geometry.planes_per_die  # one operation per die at each edge
    warnings = []
    scale = geometry.dies / tapped
    if tapped < geometry.dies:
        warnings.append(f"{tapped} of {geometry.dies} dies tapped: their pages stand for every "
                        f"die (the full-parallelism assumption; tap every channel, or measure "
                        f"the others by R/B# with the classifier trained on these labels)")
    unit = geometry.page_size * scale
    value = pages * unit / logical.value
    lo = max(0, pages - edge) * unit / logical.hi
    hi = (pages + edge) * unit / logical.lo if logical.lo else math.inf
    return OpcodeWA(Interval(value, min(lo, value), max(hi, value)), pages, tapped,
                    geometry.dies, edge, warnings)


def _counted_short(sequence, rows, scale):
    """What the cache-program note says of the short pulses counted as programs, by the rule
    that counted each: a tDBSY before it, the program-long silence after it (a host-paced
    chain), or a long program right after it (a back-to-back chain's head). ``announced`` holds
    all three (:func:`rbscope.analysis.sequence._die_result`)."""
    dies = [sequence.dies[r.channel] for r in rows]
    paced = sum(d.paced for d in dies) * scale
    heads = sum(d.heads for d in dies) * scale
    total = sum(d.announced for d in dies) * scale
    tdbsy = max(0.0, total - paced - heads)
    parts = [(tdbsy, "a tDBSY announced them"),
             (paced, "a silence as long as a program followed them (host-paced chains)"),
             (heads, "a long program followed them at once (back-to-back chains' heads)")]
    said = [f"{n:,.0f} because {why}" for n, why in parts if round(n) > 0]
    if not said:
        return "No short pulse was counted as a program"
    return f"{total:,.0f} short pulses were counted as programs: " + ", ".join(said)


def _cache_suspected(rows, sequence, write_only, wa):
    """Does the capture show cache programs (80h…15h), whose R/B# shows only tCBSY?

    Either tDBSY pulses announced short pulses as programs, or (in a write-only run) there are
    more short pulses in the tCBSY range than garbage-collection reads explain.
    """
    dies = [sequence.dies[r.channel] for r in rows]
    programs = sum(d.program_pulses for d in dies)
    announced = sum(d.announced for d in dies)
    ambiguous = sum(d.ambiguous_short for d in dies)
    if not programs:
        return False
    if announced > 0.002 * programs:
        return True
    hidden = sum(r.hidden for r in rows)
    if hidden > 0.002 * programs + 2 * len(rows):
        return True
    gc = programs * max(0.0, 1 - 1 / wa) if wa > 0 else 0.0
    return bool(write_only and ambiguous > 1.2 * gc + 0.02 * programs)


def _checks(m, geometry, logical, channels, rows, k, mp, scale, wa, pulses, erase_pulses,
            sequence, cache_suspected, write_only):
    """Plausibility checks: ``[{"check": id, "message": text}]`` for each that fails."""
    out = []

    def fail(check, message):
        out.append({"check": check, "message": message})

    has_logical = logical.source != "none"
    if has_logical and wa.value < 0.98:
        fail("wa_below_1", f"WA {wa.value:.3f} is below 1: the drive cannot program less than "
                           f"the host wrote (unless it compresses or deduplicates). Programs are "
                           f"being missed: windows cutting the program cluster, a wrong Mp, or "
                           f"cache programs whose R/B# shows only tCBSY (tap the bus)")
    programs = pulses.value
    ppb = geometry.pages_per_block
    if ppb and erase_pulses is not None and programs >= 4 * ppb:
        expected = programs / ppb
        if not erase_plausible(erase_pulses, programs, ppb):
            fail("erase_count", f"{erase_pulses:,.0f} erase pulses, but programs ÷ pages per "
                                f"block gives ≈{expected:,.0f}: an erase opens a block that "
                                f"{ppb} page programs then fill, so most of these are programs "
                                f"(the erase window holds slow programs; use the sequence "
                                f"classifier or rbscope calibrate)")
    # Read-class pulses in a write-only run, beyond what garbage collection explains.
    if write_only and has_logical:
        if sequence is not None:
            reads = sum(v for r in rows for n, v in sequence.dies[r.channel].expected.items()
                        if sequence.state(n).kind in ("read", "cache")) * scale
            reads -= sum(sequence.dies[r.channel].announced for r in rows) * scale
        else:
            reads = sum(m.counts[ch].classes[i] for ch in channels
                        for i, n in enumerate(m.class_names)
                        if n in READ_CLASSES) * scale
        gc = max(0.0, programs * (1 - 1 / wa.value)) if wa.value > 0 else 0.0
        if reads > 1.2 * gc + 0.01 * programs + 10:
            fail("reads_in_write_run",
                 f"{reads:,.0f} read-class pulses in a write-only run, more than garbage "
                 f"collection explains (≤ ≈{gc:,.0f}): cache programs (80h…15h) show only "
                 f"tCBSY, which falls among the read widths — tap the bus (opcode-aware mode)")
    if cache_suspected and sequence.mode == "mixture":
        hidden = sum(r.hidden for r in rows) * scale
        fail("cache_programs",
             f"cache programs (80h…15h) on this drive: the tDBSY pulses queue ≈{hidden:,.0f} "
             f"more multi-plane operations than the program and erase pulses account for, so "
             f"about that many programs showed R/B# only a short tCBSY, which width histograms "
             f"cannot tell from reads. WA may be that much higher, and the 95 % interval "
             f"includes it. Capture per-pulse widths (the pulse order finds them), or tap the "
             f"bus (opcode-aware mode) for exact counts")
    elif cache_suspected:
        amb = sum(r.class_up for r in rows) * scale
        fail("cache_programs",
             f"cache programs (80h…15h) on this drive: R/B# shows only tCBSY for a chain's first "
             f"page (for every page of a chain the host paces). "
             f"{_counted_short(sequence, rows, scale)}; {amb:,.0f} more short pulses may be "
             f"programs or reads, and the 95 % interval includes them. Tap the bus "
             f"(opcode-aware mode) for exact counts")
    if sequence is not None:
        d = [sequence.dies[r.channel] for r in rows]
        prog = sum(x.program_pulses for x in d)
        if prog and sum(x.multiplane_pages for x in d) > 0.01 * prog:
            measured = sum(x.pages / (x.load_bits or 1) for x in d) / prog
            if abs(measured - mp) > 0.1 * mp:
                fail("mp_measured", f"tDBSY pulses show {measured:.2f} pages per program "
                                    f"pulse, but Mp is {mp}: the measured pages are used")
    else:
        fail_edges = _edge_pileup(m, channels)
        for name, edge_us in fail_edges:
            fail("window_edge", f"widths pile up against the edge {edge_us:g} µs of window "
                                f"{name!r}: the edge cuts through a cluster, so pulses of one "
                                f"class fall on both sides (rbscope calibrate, or the sequence "
                                f"classifier)")
    return out


#: Suspended operations the join may have missed, per one it found (pieces that fall inside a
#: program mode's widths look like operations of their own); tuned on zoo seeds < 1000.
SUSPEND_MISSED = 4.0
#: Erases beyond the blocks the programs filled, as program pulses, flag the value undetermined
#: from this share of the programs counted (where the program and erase widths overlap).
ERASE_SURPLUS = 0.01
#: Erases held at the classifier's floor, short of the blocks the programs filled, as program
#: pulses, flag the value undetermined from this share of the programs counted (where the
#: program and erase widths overlap).
ERASE_HELD = 0.005
#: Chain heads counted as narrower than the reads flag the value undetermined from this share of
#: the programs counted (as many again may hide among the reads).
NARROW_UNDECIDED = 0.005
#: Pulses of the read states beside the main one on a line with back-to-back cache-program
#: chains, as a share of the program pulses, from which the value is undetermined.
SIDE_READS_UNDECIDED = 0.01
#: Chain heads counted on dies with host-paced cache programs, as a share of the program pulses,
#: from which the value is undetermined.
MIXED_HEADS_UNDECIDED = 0.005
#: Programs after an erase and reads (possibly resumed erases) widen the interval's lower end
#: when they are at least this share of the programs counted.
RESUMABLE_SHARE = 0.002

def _unprobed_bounds(m, logical, rows, dies_probed, dies, unit, wa, sequence, k):
    """WA bounds when one line stands for several dies: ``(lo, hi, alone, reason)``, ``alone``
    the WA of the probed dies' programs alone.

    Low: the unprobed dies programmed nothing (no lower than WA 1 where the host's volume is
    known and the value is above it: every host byte is programmed at least once). High: each
    unprobed die busy with programs the whole capture, a pulse as fast as the fastest program
    the pulses show (or the program window's lower edge), as many pages as the widest mode.
    """
    lv = logical.value
    counted = sum(r.estimate for r in rows)
    if sequence is not None:
        fastest = _fastest_program_us(sequence.states)
        pages = max(1.0, _max_pages(sequence.states))
    else:  # windows: the program window's lower edge as the fastest program
        lo_edge = m.config.windows[k][0] * m.tick_seconds * 1e6
        fastest, pages = (max(50.0, lo_edge) if lo_edge > 0 else 150.0), 1.0
    duration_us = m.duration_ticks * m.tick_seconds * 1e6
    room = (dies - dies_probed) * duration_us / fastest * pages
    if not lv:
        return wa.lo, math.inf, None, _unprobed_reason(dies_probed, dies, None)
    alone = counted * unit / lv
    lo = counted * unit / logical.hi
    if logical.source != "none" and wa.value >= 1.0:
        lo = max(lo, 1.0)
    hi = (counted + room) * unit / logical.lo if logical.lo else math.inf
    if not duration_us:
        hi = math.inf
    return (min(lo, wa.value), max(hi, wa.value), alone,
            _unprobed_reason(dies_probed, dies, room if duration_us else None))


def _unprobed_reason(dies_probed, dies, room):
    limit = ("" if room is None else
             f"; up to {room:,.0f} program pulses the capture's duration allows them are in the "
             f"interval")
    return (f"{dies_probed} of {dies} dies probed on one line: the value assumes the others "
            f"programmed as much (full parallelism), which one line cannot check{limit}; probe "
            f"two or more lines (their spread bounds the rest) or every die")


def _window_edge_pulses(m, channels, k, factor=1.25):
    """Pulses whose histogram bins lie within ``factor`` of the edges of window ``k``."""
    params = m.params
    lo, hi = m.config.windows[k]
    hist = m.histogram_total(channels)
    total = 0
    for b, n in enumerate(hist):
        if not n:
            continue
        a = max(params.hist_bin_lo(b), 1)
        z = params.hist_bin_lo(b + 1) if b + 1 < params.hist_bins else params.max_width
        for edge in (lo, hi):
            if 1 < edge < params.max_width and a < edge * factor and z > edge / factor:
                total += n
                break
    return total


def _edge_pileup(m, channels, share=0.25):
    """Window edges with dense histogram bins on both sides: ``[(window, edge µs)]``."""
    hist = m.histogram_total(channels)
    params = m.params
    if not sum(hist):
        return []

    def density(b):
        lo = max(params.hist_bin_lo(b), 0.5)
        hi = params.hist_bin_lo(b + 1) if b + 1 < params.hist_bins else params.max_width
        return hist[b] / math.log2(hi / lo) if hi > lo else 0.0

    peak = max(density(b) for b in range(params.hist_bins))
    us = m.tick_seconds * 1e6
    out = []
    for name, (lo, hi) in zip(m.class_names, m.config.windows, strict=False):
        if not name or lo >= hi:
            continue
        for edge in (lo, hi):
            if edge <= 1 or edge >= params.max_width:
                continue
            below, above = params.hist_bin(edge - 1), params.hist_bin(edge)
            if below == above:  # the edge cuts a bin: look at its neighbours
                below, above = below - 1, above + 1
                if below < 0 or above >= params.hist_bins:
                    continue
            if min(density(below), density(above)) > share * peak:
                out.append((name, edge * us))
    return out


#: Expected erase pulses below this are none (a sequence classifier's posterior leaves a remainder
#: of 1e-230 pulses where there is no erase at all).
ERASE_DUST = 1e-6


def _endurance(geometry, nand_bytes, erase_pulses, mp, wa):
    """Endurance figures; a multi-plane erase pulse erases Mp blocks, like a program."""
    missing = []
    blocks_erased = per_block = life = tbw = dwpd = None
    if erase_pulses is None:
        missing.append("a window named 'erase'")
    else:
        # A classifier's expected count: posterior dust (1e-230 of a pulse) is no erase.
        blocks_erased = erase_pulses * mp if erase_pulses >= ERASE_DUST else 0.0
    if geometry.pages_per_block and geometry.raw_bytes and blocks_erased is not None:
        blocks = geometry.raw_bytes / (geometry.page_size * geometry.pages_per_block)
        per_block = blocks_erased / blocks
    elif blocks_erased is not None:
        missing.append("geometry.pages_per_block and capacity.raw_gb")
    if geometry.pe_cycles and per_block is not None:
        life = per_block / geometry.pe_cycles
    if geometry.pe_cycles and geometry.raw_bytes and wa and math.isfinite(wa):
        tbw = geometry.pe_cycles * geometry.raw_bytes / wa
        if geometry.user_bytes and geometry.warranty_years:
            dwpd = tbw / (geometry.user_bytes * 365 * geometry.warranty_years)
        else:
            missing.append("capacity.user_gb and endurance.warranty_years (for DWPD)")
    elif not geometry.pe_cycles:
        missing.append("endurance.pe_cycles")
    return Endurance(nand_bytes, blocks_erased, per_block, life, tbw, dwpd, tuple(missing))


def _warn(m, geometry, channels, k, rows, dies_probed, dies, other, class_totals, warnings,
          model=None):
    if dies_probed < dies:
        warnings.append(f"{dies_probed} of {dies} dies probed: the others are assumed to program "
                        f"as much as the probed ones (full parallelism)")
    if m.quiet_ticks is not None and m.quiet_ticks < m.config.idle_ticks:
        warnings.append(f"the lines were ready for only {m.quiet_ticks * m.tick_seconds:.3g} s at "
                        f"the end (quiescence needs {m.config.idle_ticks * m.tick_seconds:.3g} "
                        f"s): background programs may be missing")
    if other["partial"]:
        warnings.append(f"{other['partial']} pulse(s) with an unobserved start or end (partial); "
                        f"counted in the interval, not the estimate")
    if other["dropped"]:
        warnings.append(f"{other['dropped']} event(s) dropped by the device; counted in the "
                        f"interval, not the estimate")
    if m.may_drop:
        warnings.append("pulses came faster than the gateware's scanner can take them on some "
                        "line: a device could have dropped events here")
    if other["overlong"]:
        warnings.append(f"{other['overlong']} overlong pulse(s): a line stuck busy?")
    measured = sum(class_totals.values()) + other["unclassified"]
    if measured and other["unclassified"] > 0.05 * measured:
        share = (f"{other['unclassified']} of {measured} pulses "
                 f"({100 * other['unclassified'] / measured:.1f} %) fell outside every class "
                 f"window")
        if model is not None:
            # The WA came from the pulses' widths (and order), not from the windows.
            how = ("each line's pulse sequence" if model == "sequence"
                   else "the width histograms' mixture")
            warnings.append(f"{share} of the capture's configuration; the WA does not use the "
                            f"windows (it classified {how}), but the device's live class counts "
                            f"do: rbscope calibrate sets them")
        else:
            warnings.append(f"{share}: check the windows (rbscope calibrate)")
    lo, hi = m.config.windows[k]
    tick_us = m.tick_seconds * 1e6
    erase = geometry.timing.get("erase")
    if erase and lo * tick_us <= erase[1] and erase[0] < hi * tick_us:
        warnings.append(f"the program window [{lo * tick_us:g}, {hi * tick_us:g}) µs overlaps "
                        f"the erase time {erase[0]:g}–{erase[1]:g} µs of {geometry.name}: "
                        f"erases may count as programs (try --overlap-correct)")
    if not sum(r.programs for r in rows):
        warnings.append("no program pulse was counted")


@dataclass(frozen=True)
class MpDecision:
    """Outcome of :func:`decide_mp`."""

    mp: int | None  # None when ambiguous
    status: str  # "decided" or "ambiguous"
    implied: float  # 1 / WA(Mp=1)
    wa1: Interval
    candidates: tuple
    tolerance: float
    reason: str

    def to_dict(self):
        return {"mp": self.mp, "status": self.status, "implied_mp": self.implied,
                "wa_mp1": self.wa1.to_dict(), "candidates": list(self.candidates),
                "tolerance": self.tolerance, "reason": self.reason}


def measured_mp(sequence, tolerance=0.1):
    """Mp read off the tDBSY pulses of a sequence classification, or None.

    A multi-plane program queues each extra plane with 80h…11h, whose tDBSY pulse comes right
    before the program pulse; :func:`rbscope.analysis.sequence.classify` counts those pages. Returns
    ``(pages per program pulse, decided Mp or None)`` when tDBSY pulses were seen.
    """
    dies = list(sequence.dies.values())
    programs = sum(d.program_pulses for d in dies)
    if not programs or sum(d.multiplane_pages for d in dies) <= 0.01 * programs:
        return None
    ratio = sum(d.pages for d in dies) / programs
    m = round(ratio)
    return ratio, (m if m >= 1 and abs(ratio - m) <= tolerance * m else None)


def decide_mp(wa1, candidates=(1, 2, 4), tolerance=0.2, *, planes=None):
    """Decide Mp from the WA of a sequential, incompressible calibration write computed with Mp=1.

    Candidate ``m`` predicts ``WA(Mp=1) ≈ 1/m`` (the drive programs each logical page once; the
    tolerance absorbs metadata writes and an unfinished last page). ``m`` is decided when its
    band ``[(1 - tol)/m, (1 + tol)/m]`` holds the point estimate and no other candidate's band
    meets the interval ``wa1``; otherwise the result is ambiguous, with the reason.

    Parameters
    ----------
    wa1 : Interval or float
    candidates : tuple of int
        Possible Mp values (1 and the plane counts of the die).
    tolerance : float
        Relative tolerance (0 < tol < 1/3 keeps factor-2 candidates apart).
    planes : int, optional
        Planes per die: a pulse cannot program more pages than the die has planes, so larger
        candidates are never proposed.
    """
    if not isinstance(wa1, Interval):
        wa1 = Interval(float(wa1), float(wa1), float(wa1))
    if not 0 < tolerance < 1:
        raise WAError(f"tolerance must be between 0 and 1, not {tolerance!r}")
    cands = tuple(sorted(set(_check_positive_int("candidate", c) for c in candidates)))
    if planes is not None:
        cands = tuple(c for c in cands if c <= planes)
        if not cands:
            raise WAError(f"no Mp candidate is possible on a {planes}-plane die")
    implied = 1 / wa1.value if wa1.value > 0 else math.inf

    def band(m):
        return ((1 - tolerance) / m, (1 + tolerance) / m)

    holding = [m for m in cands if band(m)[0] <= wa1.value <= band(m)[1]]
    meeting = [m for m in cands if band(m)[0] <= wa1.hi and wa1.lo <= band(m)[1]]
    if len(holding) == 1 and meeting == holding:
        m = holding[0]
        return MpDecision(m, "decided", implied, wa1, cands, tolerance,
                          f"WA(Mp=1) = {wa1.value:.3f} is within {tolerance:.0%} of 1/{m}")
    if not holding:
        near = min(cands, key=lambda m: abs(math.log(wa1.value * m)) if wa1.value > 0
                   else math.inf)
        reason = (f"WA(Mp=1) = {wa1.value:.3f} (implied Mp {implied:.2f}) is within "
                  f"{tolerance:.0%} of no 1/Mp (nearest: 1/{near}); was the calibration write "
                  f"sequential, incompressible, large and finished?")
    elif len(holding) > 1:
        reason = f"bands of Mp {holding} overlap at tolerance {tolerance:.0%}"
    else:
        reason = (f"WA(Mp=1) = {wa1.value:.3f} fits Mp = {holding[0]}, but its interval "
                  f"[{wa1.lo:.3f}, {wa1.hi:.3f}] also meets Mp = "
                  f"{[m for m in meeting if m != holding[0]]}: write more data")
    return MpDecision(None, "ambiguous", implied, wa1, cands, tolerance, reason)


@dataclass(frozen=True)
class SeriesRow:
    """One interval of a time-resolved WA series."""

    t0: float
    t1: float
    programs: int  # on the probed lines, in this interval
    physical_bytes: float  # extrapolated to all dies
    logical_bytes: float | None
    wa: float | None
    cumulative_wa: float | None

    def to_dict(self):
        return dict(self.__dict__)


def wa_series(measurement, geometry, *, mp=None, program_class="program", logical_series=None,
              channels=None):
    """Physical bytes (and WA, given the host's cumulative bytes over time) per snapshot interval.

    ``logical_series`` is a list of ``(seconds, cumulative bytes)`` in the measurement's time
    (seconds since its start), increasing in time; it is interpolated linearly at the snapshot
    times (and held constant outside its range).
    """
    if not measurement.snapshots:
        raise WAError("the measurement has no snapshots: record with a snapshot period for a "
                      "time series")
    mp = geometry.pages_per_pulse if mp is None else _check_positive_int("mp", mp)
    k = program_class_index(measurement, program_class)
    channels = measurement.enabled if channels is None else channels
    dies_probed = sum(measurement.probes[ch].die_count for ch in channels)
    scale = geometry.dies / dies_probed * mp * geometry.page_size
    tick = measurement.tick_seconds
    points = [(0.0, 0)]
    for snap in measurement.snapshots:
        points.append((snap.timestamp * tick,
                       sum(snap.counts[ch].classes[k] for ch in channels)))
    final = sum(measurement.counts[ch].classes[k] for ch in channels)
    end = measurement.duration_ticks * tick
    if end > points[-1][0]:
        points.append((end, final))

    def logical_at(t):
        s = logical_series
        if t <= s[0][0]:
            return s[0][1]
        for (ta, ba), (tb, bb) in zip(s, s[1:], strict=False):
            if t <= tb:
                return ba + (bb - ba) * (t - ta) / (tb - ta) if tb > ta else bb
        return s[-1][1]

    if logical_series is not None:
        logical_series = sorted(logical_series)
        if not logical_series:
            raise WAError("the logical series is empty")
    rows = []
    for (t0, n0), (t1, n1) in zip(points, points[1:], strict=False):
        phys = (n1 - n0) * scale
        lb = wa = cum = None
        if logical_series is not None:
            lb = logical_at(t1) - logical_at(t0)
            wa = phys / lb if lb > 0 else None
            total = logical_at(t1) - logical_at(0.0)
            cum = n1 * scale / total if total > 0 else None
        rows.append(SeriesRow(t0, t1, n1 - n0, phys, lb, wa, cum))
    return rows

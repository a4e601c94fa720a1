"""Sequence-aware classification of R/B# pulses: a hidden-Markov model over each die's pulses.

A width window sees one pulse at a time; where upper-page programs (1.3–2.2 ms) and erases
(~2 ms) overlap, no window can tell them apart. The order of the pulses on a die carries more:

* page types follow the block's page order, so fast and slow programs alternate in a pattern
  (MLC lower/upper, TLC lower/middle/upper);
* an erase opens a block that programs then fill: over a run, erase pulses are about program
  pulses ÷ pages per block, never many more;
* reads cluster (host reads, garbage-collection reads), multi-plane programs are preceded by
  short tDBSY pulses (one per queued plane), cache-program chains have their own rhythm.

:func:`classify` fits a hidden-Markov model to the pulse sequences of the probed dies: one
hidden state per pulse class (short classes found in the data, one program state per page type,
an erase state), Gaussian emissions in ``log2(width)``, and a transition matrix learned by
expectation–maximisation (Baum–Welch) on the capture itself. The structure enters as a
constraint in every M-step: the expected erase count may not exceed
``programs ÷ pages_per_block`` by more than ``erase_slack`` (plus two blocks for the open ones),
which is what stops an "erase" state from swallowing the slow programs. The forward–backward
posteriors give, per die, the expected number of pulses of each class and the posterior variance
of the program count — the classification part of the interval the WA engine reports.

Pulses are given per die as widths (and optionally start times) in ticks; everything here works
in ``log2(width / µs)``. numpy does the forward–backward passes, batched over the dies.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from rbscope.nand.ops import PROGRAM_KINDS

from .calibrate import merged_peaks
from .geometry import ERASE_FLOOR, ERASE_SLACK, WORDLINE_US, erase_floor_of, erases_implied

__all__ = [
    "SequenceError", "State", "DieResult", "SequenceResult", "classify", "SEQUENCE_HINTS",
    "PROGRAM_KINDS", "TCBSY_US", "classify_measurement", "timing_hints", "binomial_at_least",
]

#: Operation time ranges (µs) that name the short states; program/erase ranges come from the
#: geometry's ``[timing]`` or these.
SEQUENCE_HINTS = {"multiplane": (0.2, 1.5), "cache": (1.5, 12.0), "read": (12.0, 150.0),
                  "program": (150.0, 2300.0), "erase": (1500.0, 10000.0)}

#: A program mode bounds the silences of host-paced cache programs (their array time) only
#: when it holds this share of the program pulses: a handful of pulses is no page type.
PACED_MODE_MIN = 0.02

#: tCBSY of a cache program (80h…15h): a few µs to ~35 µs, among the read widths (µs).
TCBSY_US = (1.5, 40.0)

_SIGMA_MIN = 0.02   # octaves: the narrowest seed
_FLOOR = 1e-30      # outlier likelihood so that no pulse is impossible under every state
_F_MIN = 1e-12      # smallest posterior-regularisation factor (relative to the largest)
#: At L1, the share of the pulses at most in the 0.3 octave above tR max for the split between
#: reads and programs to sit at tR max itself, where the reads' tail leaves no valley below it.
READ_MAX_GAP_SHARE = 1e-4
#: Log-likelihood (nats) per line, plus one, that joining suspended pieces must gain over none.
SUSPEND_GAIN = 5.0
#: Most joined suspensions per long pulse: beyond, the pairs are the drive's rhythm.
SUSPEND_MAX = 0.25
#: The idle gaps before the second pulse of the candidate pairs tell resumes from new
#: operations when a group of them sits at the gap between back-to-back programs (a resume waits
#: for the reads' data out, one page transfer, as a program waits for its data in) and the rest
#: lie this far above it (pooled standard deviations, log scale) ...
RESUME_GAP_SEPARATION = 1.5
#: ... and at least this many octaves (a new operation waits for its data in as well) ...
RESUME_GAP_STEP = 0.3
#: ... with at least this many gaps in the resumes' group, and the back-to-back programs' gap
#: this many octaves above a command alone (it holds a page's data in; on zoo tuning draws
#: with 4-8 KiB pages 16-18 µs against 11 µs, 0.6-0.75 octave; ~0 where cache programs load
#: their data while the array is busy).
RESUME_MIN = 10
RESUME_TRANSFER = 0.45
#: Fewest candidate gaps and back-to-back program gaps the gap reading needs.
RESUME_GAP_MIN = 30
#: Most reads between a resume and the piece before it (1-3 reads, each retried once).
RESUME_MAX_READS = 6
#: A candidate whose gap gives the resumes' group a probability from this to 1 minus this sits
#: between the two groups: the interval allows it joined (as far as the widths make it one).
RESUME_GAP_BETWEEN = 0.05
#: Host-paced chains (:func:`_host_paced`): with at least PACED_REF_MIN short pulses before
#: programs, a silence this many octaves above their gaps' lower quartile anchors a chain.
PACED_REF_MIN = 20
PACED_TRANSFER_STEP = 1.0
#: Programs told from erases by the data in before them (:func:`_programs_by_data_in`): at
#: least this many pulses above the empty stretch of gaps, which spans this many octaves.
ERASE_GAP_MIN = 3
ERASE_GAP_STEP = 1.0
ERASE_GAP_SHARE = 0.25
#: A long peak this close below the erase peak (octaves), and small, is the erases' shoulder.
ERASE_SHOULDER = 0.3
#: ... and one as small as the erases the programs imply, up to this far below (octaves).
ERASE_SHOULDER_FAR = 1.5
#: Program pulses past the tPROG maximum given (:func:`_programs_past_max`): parted from the
#: erases by an empty stretch of at least this many octaves.
CHAIN_END_GAP = 0.5
#: The split at tR max itself (L1, :func:`_is_valley`): the widths' share that may reach it.
TOP_EDGE_SHARE = 0.02
#: Unannounced SLC-mode modes (:func:`_modes_unannounced`): the main modes' pulses that a
#: tDBSY must announce, the share below which a mode is reads, and the fewest main-mode pulses
#: of a line judged.
ANNOUNCED_MAIN = 0.8
ANNOUNCED_FEW = 0.3
ANNOUNCE_MIN = 20
#: ... and the share of such a mode's pulses on lines that call it reads for a rebuild.
UNANNOUNCED_SHARE = 0.5
#: ... and, over those lines together, a mode queued like the main modes (each pulse after a
#: tDBSY with the chance ANNOUNCED_MAIN) would show as few after one with at most this chance
#: (binomial; 5 pulses none of them announced: 3e-4; 20 with 5: 2e-7).
UNANNOUNCED_CHANCE = 1e-3
#: Cache-chain heads by the gap after them (:func:`_chain_head_gaps`): at least this many short
#: pulses before programs, this many in each group, the groups this far apart (octaves: one
#: transfer against two, an octave less the commands; at most STEP_MAX: further is a silence)
#: and this well separated (pooled robust standard deviations). Tuned on zoo seeds < 1000.
CHAIN_GAP_MIN = 20
CHAIN_GAP_GROUP = 5
CHAIN_GAP_STEP = 0.5
CHAIN_GAP_STEP_MAX = 1.3
CHAIN_GAP_SEPARATION = 3.0
#: Chain heads narrower than the reads (:func:`_heads_below_reads`), beside those the gaps or a
#: tCBSY cluster counted: this many robust spreads below the reads' centre (a rate from at
#: least NARROW_REF_MIN reference reads), at least NARROW_MIN short pulses before programs, as
#: many by chance with at most NARROW_CHANCE.
NARROW_Z = 3.5
NARROW_REF_MIN = 200
NARROW_MIN = 5
NARROW_CHANCE = 1e-3
#: ... where the least-variance split fails, those at this many widest empty stretches.
TWO_GROUP_TRIES = 8
#: ... and the shorter group's pulses this much shorter (octaves, medians) than the longer's.
CHAIN_WIDTH_STEP = 0.4
#: ... on a line whose suspended operations joined stay under this share of its programs (a
#: tuning draw's SLC die, which suspends nothing, joined 0.3 % by widths: 19 heads lost).
CHAIN_GAP_JOINS = 0.01
#: A trained cache-program class with this share of its labelled widths within tCBSY is the
#: host-paced regime's: a short state told by order, not counted by width (:func:`_trained_states`).
PACED_TRAINED = 0.9
#: ... and with host-paced programs at this share of the program pulses, a trained
#: classification leaves the page types free (see the end of :func:`classify`).
PACED_FREE = 0.01
#: Reads told from the fastest programs by the data in before them: at least this many
#: confident reads and programs after the same kind of pulse, their gaps' medians this far apart
#: (octaves) and this well separated (pooled robust spreads). Tuned on zoo seeds < 1000.
DATA_IN_MIN = 30
DATA_IN_STEP = 0.4
DATA_IN_SEPARATION = 2.0
#: ... and a read-width mode is programs when this share of its gaps (after each kind of pulse)
#: lies nearer a program's than a read's (:func:`_waits_for_data_in`).
DATA_IN_WAITING = 0.7
#: ... and the fastest program mode's own programs (its pulses above its centre) wait for their
#: data in, after a kind of pulse, when this share of their gaps does (else they may be cache
#: programs, and the rule stands down there).
DATA_IN_CORE = 0.3
#: ... and a read-width mode short of DATA_IN_WAITING with at least this share after both kinds
#: of pulse is left open (reads or programs: the interval spans both).
DATA_IN_OPEN = 0.5
#: ... and a read-width mode is programs, whatever its share after long pulses, when after reads
#: DATA_IN_WAITING of its gaps wait (DATA_IN_MIN of them) and at most this share of the other
#: reads' gaps after reads do (DATA_IN_MIN of them): the host paces every read alike, so a mode
#: that waits where the other reads do not is another operation; after long pulses a read tail
#: as wide as the mode dilutes it, the reads there being many (:func:`_waits_unlike_reads`).
DATA_IN_CONTRAST = 0.1
#: Short pulses the order rules count as programs (tDBSY-announced, host-paced, chain heads), at
#: this share of the program pulses, enter the erase floor and cap of a refit (see the end of
#: :func:`classify`).
ORDER_REFIT = 0.01
#: Erases told from the slowest programs by the gap before them (:func:`_erases_by_data_in`):
#: where the two states' width densities overlap less than this (Bhattacharyya coefficient),
#: the widths keep their say and the gap multiplies their odds; else the gap alone judges.
ERASE_WIDTHS_APART = 0.05
#: A program-width mode is judged reads (:func:`_modes_alone`) by its pulses whose previous
#: pulse is of the mode with at most this probability.
MODE_ALONE_AFTER_OWN = 0.1
#: ... and is reads only where its pulses wait for a page's data in no more often than twice
#: the normal tail the command times' spread gives at half a transfer, plus this.
MODE_ALONE_SLACK = 0.05
#: ... beyond chance: that many waiting or more has at most this probability.
MODE_ALONE_P = 1e-3
#: Resolution of the emission histograms (also that of a trained classifier's file).
BINS_PER_OCTAVE = 32
_BINS_PER_OCTAVE = BINS_PER_OCTAVE
_SMOOTH = 1.0       # bins: Gaussian smoothing of the emission histograms
#: Most pulses per line the histogram mixture represents (see classify_measurement).
MIXTURE_PULSES = 200_000


class SequenceError(ValueError):
    """The pulse sequences cannot be classified (too few pulses, bad input)."""


class _Grid:
    """Bins of ``log2(width / µs)`` shared by every state's emission histogram."""

    def __init__(self, lo, hi):
        self.lo = math.floor(lo * _BINS_PER_OCTAVE) / _BINS_PER_OCTAVE
        self.step = 1.0 / _BINS_PER_OCTAVE
        self.n = int(math.ceil((hi - self.lo) / self.step)) + 1
        radius = int(4 * _SMOOTH) + 1
        k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / _SMOOTH) ** 2)
        self.kernel = k / k.sum()

    def index(self, x):
        return np.clip(((x - self.lo) / self.step).astype(np.int64), 0, self.n - 1)

    def centres(self):
        return self.lo + (np.arange(self.n) + 0.5) * self.step


@dataclass
class State:
    """One hidden state: a pulse class and its width distribution.

    The distribution is a smoothed histogram over ``log2(width / µs)`` (:class:`_Grid`), kept
    inside the state's ``support`` (octaves): no parametric shape is assumed, so uniform or
    skewed timing distributions fit as well as log-normal ones. ``mu`` and ``sigma`` summarise
    it (octaves).
    """

    name: str
    kind: str  # one of rbscope.nand.ops.KINDS
    mu: float
    sigma: float
    support: tuple = (-math.inf, math.inf)
    dens: np.ndarray | None = field(default=None, repr=False)
    fixed: bool = False  # keep the seeded (flat) distribution: a catch-all state
    pages: float = 1.0  # pages per plane one pulse of this program mode writes

    @property
    def center_us(self):
        return 2.0 ** self.mu

    def seed(self, grid):
        c = grid.centres()
        z = (c - self.mu) / self.sigma
        d = np.exp(-0.5 * z * z)
        self._limit(grid, d)

    def _limit(self, grid, d):
        c = grid.centres()
        d = np.where((c >= self.support[0]) & (c <= self.support[1]), d, 0.0)
        total = d.sum()
        if total <= 0:
            d = np.zeros(grid.n)
            d[grid.index(np.array([self.mu]))[0]] = 1.0
            total = 1.0
        self.dens = d / total

    def update(self, grid, idx, w):
        if self.fixed:
            return
        h = np.bincount(idx, weights=w, minlength=grid.n)
        tw = h.sum()
        if tw < 1e-6:
            return
        c = grid.centres()
        self.mu = float((h * c).sum() / tw)
        self.sigma = max(float(np.sqrt((h * (c - self.mu) ** 2).sum() / tw)), _SIGMA_MIN / 4)
        self._limit(grid, np.convolve(h, grid.kernel, mode="same") + 1e-6 * tw / grid.n)

    def to_dict(self):
        return {"name": self.name, "kind": self.kind, "center_us": self.center_us,
                "sigma_octaves": self.sigma, "pages_per_plane": self.pages,
                "support_us": [2.0 ** v if math.isfinite(v) else None for v in self.support]}


@dataclass
class DieResult:
    """Posterior counts of one die (or one probed line)."""

    pulses: int
    expected: dict  # state name -> expected pulses
    program_pulses: float  # expected program pulses (posterior mean)
    program_var: float  # posterior variance of the program-pulse count
    erase_pulses: float
    multiplane_pages: float  # extra pages announced by tDBSY pulses before programs
    erase_cap: float | None  # the structural cap on erases in force, if any
    announced: float = 0.0  # short pulses counted as programs (a tDBSY announced them)
    ambiguous_short: float = 0.0  # unannounced short pulses in the tCBSY range
    undecided: float = 0.0  # Σ min(p, 1 - p) of the program posteriors
    multiplane_pulses: float = 0.0  # expected tDBSY pulses (ordered or not)
    unit_pulses: float | None = None  # program pulses × pages per plane of their mode
    unit_var: float = 0.0  # posterior variance of unit_pulses
    load_bits: int = 0  # bits per cell of a one-shot signature (data loads before programs)
    suspended: float = 0.0  # expected suspended operations joined (pieces with reads between)
    suspect: float = 0.0  # pairs that look suspended but were not joined (too many to be)
    #: With joins the idle gaps decided (resumes need no data in): the joins left open,
    #: ``(more, fewer)``: every resume joined (Σ r (1 - w)), none of them (Σ r w); and the
    #: joins' posterior variance. None with width joins.
    resume_slack: tuple | None = None
    resume_var: float = 0.0
    resumable: float = 0.0  # program pulses after an erase and reads: maybe a resumed erase
    paced: float = 0.0  # short pulses counted as host-paced cache programs (idle gaps)
    paced_open: float = 0.0  # candidates of unanchored chains (not counted; the interval's)
    heads: float = 0.0  # tCBSY-cluster pulses counted as back-to-back cache-chain heads
    #: ... of them, those counted as narrower than the die's reads (:func:`_heads_below_reads`):
    #: the rest of such heads, inside the reads' widths, cannot be told (the interval's).
    narrow_heads: float = 0.0
    #: On a line with back-to-back cache-program chains (heads counted), the pulses of the read
    #: states beside the main one (the most pulses): reads, or a chain's pulses as short as
    #: reads (a 15h busy lasts until the previous page's array program ends, any time up to
    #: tPROG).
    side_reads: float = 0.0
    balance_shift: float = 0.0  # |units held to equal page types - units left free|
    #: SLC-mode program pulses among the programs (SLC states, and read-width programs the
    #: gaps found): a block of them holds pages_per_block ÷ bits pages.
    slc_programs: float = 0.0
    #: Pulses the idle gaps moved between the slowest programs and the erases (either way,
    #: in expected counts): a judgement the interval spans.
    gap_moved: float = 0.0
    #: Pulses of read-width modes the idle gaps could not judge (most wait for a page's data in,
    #: short of DATA_IN_WAITING): reads or SLC-mode programs.
    read_modes_open: float = 0.0

    @property
    def units(self):
        """Program pulses in single-page units (a one-shot TLC pulse is 3)."""
        return self.program_pulses if self.unit_pulses is None else self.unit_pulses

    @property
    def pages(self):
        """Pages programmed: program units plus the planes their tDBSY pulses queued."""
        return self.units + self.multiplane_pages

    def to_dict(self):
        return {"pulses": self.pulses, "expected": self.expected,
                "program_pulses": self.program_pulses,
                "program_sd": math.sqrt(max(0.0, self.program_var)),
                "erase_pulses": self.erase_pulses, "multiplane_pages": self.multiplane_pages,
                "pages": self.pages, "erase_cap": self.erase_cap,
                "unit_pulses": self.units, "one_shot_bits": self.load_bits or None,
                "suspended": self.suspended, "resume_slack": self.resume_slack,
                "resumable": self.resumable, "paced_short": self.paced,
                "balance_shift": self.balance_shift,
                "paced_open": self.paced_open,
                "chain_heads": self.heads, "narrow_heads": self.narrow_heads,
                "side_reads": self.side_reads,
                "announced_short": self.announced, "ambiguous_short": self.ambiguous_short,
                "multiplane_pulses": self.multiplane_pulses, "slc_programs": self.slc_programs,
                "gap_moved": self.gap_moved, "read_modes_open": self.read_modes_open}


@dataclass
class SequenceResult:
    """What :func:`classify` found: the model and the posterior counts per die."""

    states: list
    transitions: np.ndarray
    dies: dict  # key (channel) -> DieResult
    loglik: float
    iterations: int
    pages_per_block: int | None
    erase_capped: bool
    notes: list = field(default_factory=list)
    balanced: bool = False
    mode: str = "sequence"  # "sequence" (per-pulse order) or "mixture" (histograms only)
    #: The fitted model as the posteriors used it, for applying it to other pulses
    #: (:mod:`rbscope.analysis.streaming`): the prior of each state (the mixture weights times
    #: the structure's factors, normalised) and the emissions' grid ``(lo, step, bins)``.
    prior: np.ndarray | None = field(default=None, repr=False)
    grid: tuple | None = None
    #: Rests per program pulse the tapped channels showed, at the upper end of its sampling
    #: spread (a trained model's ``rest_rate_hi``), or None: the pieces a die's programs may
    #: leave to join.
    rest_rate_hi: float | None = None

    @property
    def page_types(self):
        """Number of program states (page types)."""
        return sum(1 for s in self.states if s.kind == "program")

    def state(self, name):
        return next(s for s in self.states if s.name == name)

    def program_units_at(self, widths_us):
        """The posterior program units (single-page program pulses) of a pulse of each width
        (µs), from the emissions and the prior alone (no order): what the model expects of
        pulses whose widths are all that is known. Zeros where the result keeps no model."""
        x = np.log2(np.maximum(np.asarray(widths_us, dtype=float), 1e-9))
        if self.prior is None or self.grid is None:
            return np.zeros(len(x))
        lo, step, n = self.grid
        bins = np.clip(((x - lo) / step).astype(np.int64), 0, n - 1)
        table = np.stack([st.dens for st in self.states], axis=1) + _FLOOR
        post = table * self.prior
        post /= post.sum(axis=1, keepdims=True)
        pj = [j for j, st in enumerate(self.states) if st.kind in PROGRAM_KINDS]
        pages = np.array([self.states[j].pages for j in pj], dtype=float)
        return (post[:, pj] * pages).sum(axis=1)[bins]

    def to_dict(self):
        names = [s.name for s in self.states]
        return {"model": "hmm", "states": [s.to_dict() for s in self.states],
                "transitions": {a: {b: float(self.transitions[i, j])
                                    for j, b in enumerate(names)} for i, a in enumerate(names)},
                "dies": {str(k): d.to_dict() for k, d in self.dies.items()},
                "loglik": self.loglik, "iterations": self.iterations,
                "pages_per_block": self.pages_per_block,
                "erase_capped": bool(self.erase_capped), "balanced": bool(self.balanced),
                "mode": self.mode, "notes": self.notes}


# Initialisation ----------------------------------------------------------------------------


def _peaks(x, lo, hi, *, per_octave=16, smooth=1.5, merge=0.6, min_share=0.005):
    """Cluster the values ``x`` (octaves) in ``[lo, hi)``: ``[(centre, sd, count)]``."""
    x = x[(x >= lo) & (x < hi)]
    if x.size == 0:
        return []
    nb = max(4, int(math.ceil((hi - lo) * per_octave)))
    counts, edges = np.histogram(x, bins=nb, range=(lo, hi))
    radius = max(1, int(3 * smooth))
    k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / smooth) ** 2)
    s = np.convolve(counts.astype(float), k / k.sum(), mode="same")
    _, cuts = merged_peaks(s.tolist(), merge)
    out = []
    for lo_b, hi_b in zip(cuts, cuts[1:], strict=False):
        sel = x[(x >= edges[lo_b]) & (x < edges[hi_b] if hi_b < nb else x <= edges[-1])]
        if sel.size < max(3, min_share * x.size):
            continue
        out.append((float(np.median(sel)), max(float(sel.std()), _SIGMA_MIN), int(sel.size)))
    return out


def _programs_past_max(x, phi, erase_peaks):
    """The program modes' upper bound (octaves) where a tPROG maximum (``phi``: the maximum
    with its spare) was given: ``phi``, or higher where pulses just past it are parted from the
    erases by an empty stretch.

    R/B# shows more than one tPROG where a program waits for the one before it: the last
    program of a back-to-back cache chain (80h…15h, then 10h) is busy while the previous page's
    array program ends, up to twice the maximum. Such pulses sit within an octave above
    ``phi``, and an erase cluster lies above them beyond an empty stretch of CHAIN_END_GAP
    octaves or more: the bound moves into that stretch (at most an octave past ``phi``). Where
    no such stretch parts them (programs' tails in the erases' widths), ``phi`` stays. (Tuning
    draw 36 of slc-seq-cache at L1: 38 chain ends of 605-730 µs past a tPROG max of 500 µs,
    the erases from 1 490 µs, taken for erases up to the structural cap: -2.5 %.)"""
    if not erase_peaks:
        return phi
    top = min(c for c, _sd, _n in erase_peaks)
    sel = np.sort(x[(x >= phi - 0.2) & (x < top)])
    if sel.size < 2:
        return phi
    gaps = np.diff(sel)
    i = int(np.argmax(gaps))
    if gaps[i] < CHAIN_END_GAP or sel[i] <= phi or sel[i] > phi + 1.0:
        return phi
    return min(0.5 * (sel[i] + sel[i + 1]), phi + 1.0)


def _valley(x, guess, reach=0.6):
    """The emptiest place (octaves) within ``reach`` of ``guess`` in the widths ``x``: where
    short pulses (reads, the longest of them a datasheet tR) end and programs begin."""
    lo, hi = guess - reach, guess + reach
    sel = x[(x >= lo) & (x < hi)]
    if sel.size < 20:
        return guess
    nb = int(round(2 * reach * 16))
    counts, edges = np.histogram(sel, bins=nb, range=(lo, hi))
    k = np.exp(-0.5 * (np.arange(-2, 3) / 1.0) ** 2)
    sm = np.convolve(counts.astype(float), k / k.sum(), mode="same")
    # Prefer the guess among equally empty places (a distance penalty of 1 % per bin).
    cost = sm + 0.01 * sm.max() * np.abs(np.arange(nb) - nb / 2) / nb
    b = int(np.argmin(cost))
    return float(0.5 * (edges[b] + edges[b + 1]))


def _nearest(center_us, hints, kinds):
    def dist(name):
        lo, hi = hints[name]
        v = math.log(center_us)
        if math.log(lo) <= v <= math.log(hi):
            return 0.0
        return min(abs(v - math.log(lo)), abs(v - math.log(hi)))
    return min(kinds, key=dist)


def _is_valley(x, at, lo, hi, depth=0.3, *, top_edge=False):
    """Whether the widths ``x`` are sparse at ``at`` (octaves): at most ``depth`` of the densest
    place of ``[lo, hi)`` within a sixteenth of an octave, and not at an edge of the range.
    With ``top_edge``, the upper edge is allowed where the widths ended below it: the last
    three sixteenths of an octave hold at most TOP_EDGE_SHARE of the range's widths (nothing
    reaches the edge; an SLC cache's program tail, flat up to it, does)."""
    edge = top_edge and at > hi - 0.125
    if not lo + 0.125 <= at <= (hi if edge else hi - 0.125):
        return False
    sel = x[(x >= lo) & (x < hi)]
    if sel.size < 20:
        return True
    counts, edges = np.histogram(sel, bins=max(1, int(round((hi - lo) * 16))), range=(lo, hi))
    b = min(max(int(np.searchsorted(edges, at, side="right")) - 1, 0), len(counts) - 1)
    here = counts[max(0, b - 1):b + 2].mean()
    if edge:
        return bool(here <= depth * counts.max()
                    and counts[-3:].sum() <= TOP_EDGE_SHARE * counts.sum())
    return bool(here <= depth * counts.max())


def _initial_states(x, hints, page_types, *, scheme=None, bits=None, erase_in_last=False,
                    read_max=None, pages_per_block=None, split_floor=None):
    """Seed the states from the clusters of all pulses and what the user knows.

    Clusters below the programs become short states named by the nearest hint (``multiplane``
    tDBSY or data load, ``cache``, ``read``). Above them, the **program modes come from the
    data**: every long cluster is a program mode unless the structure says otherwise — the
    slowest cluster is the erase only when it is small beside the others (an erase opens a
    block that many programs fill), else the erases hide in and above the slowest program mode
    and the erase state is seeded at its upper side. A program time maximum (``hints``
    ``program``: the datasheet's tPROG max, level L1) puts every longer pulse out of the
    program modes' reach. The cell and scheme, when known, say how many modes a block's page
    order makes (``page``: one per bit; ``one-shot``: one; ``two-pass``: two) and how many
    pages each writes per plane (``State.pages``); faster extra modes are SLC-mode programs
    (one page). ``erase_in_last``: the structure showed that the slowest cluster holds programs
    (restructure after a violated erase cap). ``split_floor`` (log2 µs): the split between
    reads and programs no lower (a rebuild after :func:`_modes_unannounced`).
    """
    # Short pulses and programs split halfway (in log) between the slowest read and the fastest
    # program: the hints' (a datasheet's tR max) or the defaults.
    read_hi = hints.get("read", SEQUENCE_HINTS["read"])[1]
    prog_lo = hints["program"][0] if "program" in hints else SEQUENCE_HINTS["program"][0]
    if read_hi < prog_lo:
        plo = 0.5 * (math.log2(read_hi) + math.log2(prog_lo))
    else:
        plo = math.log2(min(read_hi, prog_lo))
    if read_max is not None:
        # No read is longer than tR max (L1): the split is the emptiest place below it, unless
        # the reads fill the octave below it evenly (no valley there: the split would cut their
        # cluster, and the part's reads pass the maximum it states); then the split as at L0.
        top = math.log2(read_max)
        guess = plo
        plo = _valley(x, top - 0.3, reach=0.3)
        # (The emptiest place at tR max itself: the reads ended below it, nothing fills up to
        # it, and the split there keeps their whole tail.)
        at_top = _is_valley(x, plo, top - 0.6, top, top_edge=True)
        above = int(((x > top) & (x <= top + 0.3)).sum())
        if not at_top and above <= READ_MAX_GAP_SHARE * len(x):
            # The reads' tail fills the octave below tR max, but nothing lies in the 0.3 octave
            # above it: the reads end there and the programs begin further up, so the split is
            # tR max itself (a publishing draw of qlc-two-pass at L1, heavy-tailed reads to
            # 440 µs under a 450 µs maximum, programs from 1 ms: the split fell at 80 µs and the
            # reads' tail became a program mode, +746 %).
            plo = top
        elif not at_top:
            # (The lower of the valleys about the hints' halfway point, tR max over the 100 µs
            # floor a tPROG max leaves, and about L0's default split: on tuning draws of
            # mlc-read-retry, heavy-tailed reads to 140 µs, then suspended pieces and short
            # programs evenly up to the programs, the first alone split at 148 µs where L0
            # split at 120 µs and took a die's programs for reads, −6 % at L1 against −2 % at
            # L0; the second alone split in an SLC cache's program tail above the reads.)
            plo = min(_valley(x, guess),
                      _valley(x, min(math.log2(SEQUENCE_HINTS["read"][1]), top)))
    else:
        plo = _valley(x, plo)
    if split_floor is not None:
        # (A rebuild: the pulses below are reads, whatever the widths' valleys say.)
        plo = max(plo, split_floor)
    # (A program time given is a bound with 15 % to spare: a datasheet's typical range, or a
    # maximum that a worn die's tail may pass.)
    phi = math.log2(hints["program"][1]) + 0.2 if "program" in hints else None
    if erase_in_last:
        phi = None  # the erase cap showed programs beyond the program time given: from the data
    xmin, xmax = float(x.min()) - 0.5, float(x.max()) + 0.5
    states = []
    short = [k for k in ("multiplane", "cache", "read") if k in hints]
    used = {}
    peaks = _peaks(x, xmin, plo)
    kinds = [_nearest(2 ** c, hints, short) for c, _sd, _n in peaks]
    # The short states share the widths below the programs: each owns its cluster and reaches
    # towards its neighbours (the outer ones to the ends) — halfway, but not more than half an
    # octave beyond its kind's hinted range — so that a pulse too rare to make a cluster of its
    # own (a cache program's tCBSY among tDBSY and reads) still has a state.
    cuts = [xmin]
    for i in range(len(peaks) - 1):
        cut = 0.5 * (peaks[i][0] + peaks[i + 1][0])
        if kinds[i] != kinds[i + 1]:
            cut = min(cut, math.log2(hints[kinds[i]][1]) + 0.5)
        cuts.append(cut)
    last = plo + 0.25
    if kinds and kinds[-1] != "read":
        last = min(last, math.log2(hints[kinds[-1]][1]) + 0.5)
    cuts.append(last)
    for i, (c, sd, _n) in enumerate(peaks):
        kind = kinds[i]
        used[kind] = used.get(kind, 0) + 1
        name = kind if used[kind] == 1 else f"{kind}_{used[kind]}"
        sd = min(max(sd, _SIGMA_MIN), 0.5)
        states.append(State(name, kind, c, sd, (cuts[i], cuts[i + 1])))
    # Short pulses no cluster claims (a reset's tRST, set features, a rare tCBSY): not programs,
    # and not the tDBSY that would add a page to the next program.
    states.append(State("other", "other", 0.5 * (xmin + plo), 100.0, (xmin, plo + 0.25),
                        fixed=True))
    top = max(xmax, math.log2(hints["erase"][1]) + 0.1) if "erase" in hints else xmax
    long_peaks = sorted(_peaks(x, plo, top))
    erase = []
    if phi is not None:
        phi = _programs_past_max(x, phi, [p for p in long_peaks if p[0] >= phi])
        prog = [p for p in long_peaks if p[0] < phi]
        erase = [p for p in long_peaks if p[0] >= phi]
    data_driven = phi is None or not erase
    if data_driven:
        # (Also when a loose tPROG maximum separates nothing: the data decide, as at L0.)
        prog = list(long_peaks)
        if len(prog) >= 2:
            # The slowest cluster is the erase when it is small beside the program modes
            # (erases ≈ programs ÷ pages per block); a cluster as large as they are is a
            # program mode with the erases in and above it.
            # With pages_per_block known, a slowest cluster no larger than twice the erases the
            # programs imply is the erase too (beside a rare mode: merged cache-chain pulses).
            # (Small beside the median mode: page types come in equal counts, and a rare
            # faster cluster — a read tail, a few SLC-mode programs — is no yardstick.)
            per_pulse = {"one-shot": bits or 1, "two-pass": (bits or 2) / 2}.get(scheme, 1)
            def implied(faster):
                return (2.0 * per_pulse * sum(p[2] for p in faster) / pages_per_block
                        if pages_per_block else 0.0)
            if prog[-1][2] < 0.25 * float(np.median([p[2] for p in prog[:-1]])) \
                    or prog[-1][2] <= implied(prog[:-1]):
                erase = [prog.pop()]
            # A small peak below the erase peak is the erase cluster's own shoulder (a skewed
            # or heavy-tailed tBERS, few erases, dies whose tBERS differ), not a program
            # mode: no mode sits within ERASE_SHOULDER octaves of the erases with a quarter of
            # the main mode's pulses or fewer, nor further below with as few as the erases
            # that the faster modes' programs imply (with the ones already taken).
            while erase and len(prog) >= 2 \
                    and prog[-1][2] < 0.25 * max(p[2] for p in prog[:-1]) \
                    and (erase[0][0] - prog[-1][0] < ERASE_SHOULDER
                         or (erase[0][0] - prog[-1][0] < ERASE_SHOULDER_FAR
                             and prog[-1][2] + sum(p[2] for p in erase)
                             <= implied(prog[:-1]))):
                erase.append(prog.pop())
    limit = phi if phi is not None else top
    sel = np.sort(x[(x >= plo) & (x < limit)])
    modes = {"page": bits, "one-shot": 1, "two-pass": 2}.get(scheme) if bits else None
    if scheme in ("one-shot", "two-pass") and bits is None:
        modes = {"one-shot": 1, "two-pass": 2}[scheme]
    if page_types is not None:
        modes = page_types
    if modes and sel.size and len(prog) < modes:
        # Fewer clusters than the page order makes: quantile slices of the program widths.
        prog = []
        for t in range(modes):
            part = sel[t * sel.size // modes:(t + 1) * sel.size // modes]
            if part.size:
                prog.append((float(np.median(part)), float(part.std()), part.size))
    if not prog and sel.size:
        prog = [(float(np.median(sel)), float(sel.std()), sel.size)]
    prog = sorted(prog)
    # Pages per plane of each mode: the slowest `modes` clusters are the main cells' modes;
    # faster extra ones are SLC-mode programs (one page per plane).
    per_mode = {"one-shot": bits, "two-pass": (bits or 2) / 2}.get(scheme, 1)
    n_main = len(prog) if not modes else min(modes, len(prog))
    if not modes and bits and bits > 2 and len(prog) > bits:
        # The scheme unknown but the cell known: more modes than a page order of that cell
        # makes; the faster extra ones are SLC-mode programs (an SLC cache).
        n_main = bits
    for t, (c, sd, _n) in enumerate(prog):
        sd = max(sd, 0.03)
        hi = c + 4 * sd if phi is None else min(c + 4 * sd, phi)
        main = t >= len(prog) - n_main
        # The program modes reach a quarter octave below the split (the fastest programs'
        # tail). With tR max given the main cells' modes do not: the split then lies within
        # the octave below tR max, and a read cluster's tail there is reads (a row of the
        # accuracy table at L1, cache-prog 16K-RD-50 % initial: split at 64 µs, the reads'
        # tail at 54-60 µs taken whole by the fastest program mode, +1.27 % where L0 is
        # exact). SLC-mode programs may be as fast as reads: their mode still reaches below
        # (a tuning draw of tlc-slc-cache at L1, 73: −0.74 % when it did not).
        floor = plo if read_max is not None and main else plo - 0.25
        st = State(f"program_{t + 1}" if len(prog) > 1 else "program", "program",
                   c, sd, (max(c - 4 * sd, floor), max(hi, c + sd)))
        st.pages = per_mode if main else 1
        if not main:
            st.kind = "program_slc"
            st.name = f"program_slc{'' if t == 0 else t + 1}"
        states.append(st)
    if "erase" in hints:
        elo, ehi = (math.log2(v) for v in hints["erase"])
    else:
        elo = ehi = None
    if erase:
        c, sd, _n = max(erase, key=lambda p: p[2])
        sd = max(sd, _SIGMA_MIN)
        lo, hi = min(c - 3 * sd, phi if phi is not None else c - 3 * sd), c + 4 * sd
        if elo is not None:
            hi = max(hi, ehi + 0.1)
            if phi is None:
                lo = min(lo, elo - 0.1)
            # (With a tPROG maximum the erase cluster found above it starts the erases at most
            # there: a tBERS maximum's floor, 300 µs, reached into the programs, and a back-to-
            # back chain's last programs, 470-630 µs under a tPROG max of 700, went to the
            # erases: a tuning draw of slc-seq-cache, -1.2 % at L1 against -0.7 % at L0.)
    elif prog and data_driven:
        # The erases hide in and above the slowest program mode.
        c0, sd0, _n = prog[-1]
        sd = max(sd0, 0.05)
        c = c0 + 1.5 * sd
        lo, hi = c0 - 2 * sd, xmax + 0.5
    else:
        e_lo = elo if elo is not None else (phi if phi is not None else plo + 3)
        e_hi = ehi if ehi is not None else max(xmax, e_lo + 1)
        if elo is not None and ehi - elo < 0.05:
            e_lo = max(phi if phi is not None else plo, ehi - 2.0)  # a maximum: up to 4× below
        c, sd = 0.5 * (e_lo + e_hi), max(_SIGMA_MIN, (e_hi - e_lo) / 4)
        lo, hi = e_lo - 0.1, e_hi + 0.1
    if phi is not None:
        lo = max(min(lo, phi), plo)
    states.append(State("erase", "erase", c, sd, (lo, max(hi, xmax + 0.5))))
    return states


# Forward-backward --------------------------------------------------------------------------


def _emissions(idx, states):
    """Emission likelihoods ``(…, K)`` of the pulses in grid bins ``idx``."""
    table = np.stack([s.dens for s in states], axis=1)  # (bins, K)
    return table[idx] + _FLOOR


def _forward_backward(idx, mask, states, A, pi, f, want_xi=True):
    """Batched scaled forward–backward over padded sequences.

    ``idx`` is ``(T, D)`` grid bins (padded), ``mask`` ``(T, D)`` True where a pulse exists,
    ``f`` the posterior-regularisation factors. Returns ``(gamma (T, D, K), xi_sum (K, K))``.
    """
    T, D = idx.shape
    K = len(states)
    B = _emissions(idx, states) * f
    B[~mask] = 1.0
    alpha = np.empty((T, D, K))
    c = np.empty((T, D))
    a = pi[None, :] * B[0]
    c[0] = a.sum(axis=1)
    alpha[0] = a / c[0][:, None]
    for t in range(1, T):
        a = (alpha[t - 1] @ A) * B[t]
        c[t] = a.sum(axis=1)
        alpha[t] = a / c[t][:, None]
    beta = np.ones((D, K))
    gamma = np.empty((T, D, K))
    gamma[T - 1] = alpha[T - 1]
    xi = np.zeros((K, K))
    for t in range(T - 2, -1, -1):
        bb = B[t + 1] * beta / c[t + 1][:, None]
        if want_xi:
            m = mask[t + 1]
            if m.any():
                xi += alpha[t][m].T @ bb[m]
        beta = bb @ A.T
        g = alpha[t] * beta
        gamma[t] = g / g.sum(axis=1, keepdims=True)
    if want_xi:
        xi *= A
    return gamma, xi


def _pad(seqs):
    T = max(len(s) for s in seqs)
    out = np.zeros((T, len(seqs)), dtype=np.int64)
    mask = np.zeros((T, len(seqs)), dtype=bool)
    for d, s in enumerate(seqs):
        out[:len(s), d] = s
        mask[:len(s), d] = True
    return out, mask


# The model ----------------------------------------------------------------------------------


def _targets(counts, kinds, *, cap=None, balance=False):
    """The ratios ``target / count`` the structure asks of each state (1: unconstrained).

    With ``balance``, every program state should hold the mean of the program states (a block's
    page order programs each page type equally often); the erase state at most ``cap``.
    """
    r = np.ones(len(kinds))
    pj = [j for j, k in enumerate(kinds) if k == "program"]
    hit = False
    if balance and len(pj) > 1:
        mean = counts[pj].mean()
        for j in pj:
            if counts[j] > 1e-9:
                r[j] = mean / counts[j]
    if cap is not None:
        e = kinds.index("erase")
        if counts[e] > cap * (1 + 1e-9):
            r[e] = max(cap, 1e-3) / counts[e]
            hit = True
    return r, hit


def _project(b, hc, weights, f, kinds, cap_for, balance, sweeps=30, tol=1e-4, floor_for=None):
    """Project the posteriors of bins ``b`` (holding ``hc`` pulses) onto the structure.

    Posterior regularisation: the KL projection of a posterior onto constraints on expected
    counts multiplies each state's likelihood by a factor ``f_j`` and renormalises. The factors
    are found one constrained state at a time (each state's count grows with its own factor)
    by bisection on ``log f_j``, sweeping until the targets of :func:`_targets` hold. A state
    whose count does not respond to its factor (no other state claims its widths) is left
    alone. Returns ``(posteriors, f, capped)``.
    """
    lf = np.log(f)
    pj = [j for j, k in enumerate(kinds) if k == "program"]
    e = kinds.index("erase")

    def post(lf):
        g = b * (weights * np.exp(lf - lf.max()))
        g /= g.sum(axis=1, keepdims=True)
        return g, (g * hc[:, None]).sum(axis=0)

    g, counts = post(lf)
    hit = False
    fixed = []  # page types whose count no factor moves (no other state claims their widths)
    if balance and len(pj) > 1:
        for j in pj:
            probe = lf.copy()
            probe[j] += 1.0
            up = post(probe)[1][j]
            probe[j] -= 2.0
            if abs(up - post(probe)[1][j]) < 1e-3 * max(counts[j], 1.0):
                fixed.append(j)
    last = math.inf
    for _ in range(sweeps):
        cap = cap_for(counts)
        targets = {}
        if balance and len(pj) > 1:
            # Equal page types; a type whose count nothing can move sets the level.
            level = counts[fixed].mean() if fixed and len(fixed) < len(pj) else \
                counts[pj].mean()
            for j in pj:
                if j not in fixed or len(fixed) == len(pj):
                    targets[j] = level
        floor = floor_for(counts) if floor_for is not None else None
        raising = False
        if cap is not None and (counts[e] > cap * (1 + 1e-9) or lf[e] < 0):
            targets[e] = min(cap, counts[e]) if lf[e] >= 0 else cap
            hit = hit or counts[e] > cap * (1 + 1e-9)
        elif floor is not None and (counts[e] < floor * (1 - 1e-3) or lf[e] > 0):
            targets[e] = max(floor, counts[e]) if lf[e] <= 0 else floor
            raising = True
        worst = max((abs(counts[j] - t) / max(t, 1.0) for j, t in targets.items()),
                    default=0.0)
        if worst < tol or worst > 0.99 * last:
            break  # met, or no longer improving (the constraints cannot all hold)
        last = worst
        for j, t in targets.items():
            lo, hi = lf[j] - 30.0, lf[j] + 30.0
            if j == e and raising:
                lo = max(lo, 0.0)  # the floor only ever raises the erase factor
            elif j == e:
                hi = min(hi, 0.0)  # the cap only ever lowers it
            probe = lf.copy()
            probe[j] = lf[j] + 1.0
            up = post(probe)[1][j]
            probe[j] = lf[j] - 1.0
            down = post(probe)[1][j]
            if abs(up - down) < 1e-3 * max(abs(counts[j] - t), 1.0):
                continue  # nothing (that matters) to move
            mid = 0.5 * (lo + hi)
            for _b in range(40):
                mid = 0.5 * (lo + hi)
                probe[j] = mid
                c = post(probe)[1][j]
                if abs(c - t) <= 1e-5 * max(t, 1.0):
                    break  # close enough: a hundred-thousandth of a pulse per pulse
                if c < t:
                    lo = mid
                else:
                    hi = mid
            else:
                mid = 0.5 * (lo + hi)
            lf[j] = mid
            g, counts = post(lf)
    return g, np.exp(lf - lf.max()), hit


def _load_runs(x, pprog, planes, share=0.6):
    """The one-shot signature: ``(bits, runs)`` when most long programs follow the same run of
    ``planes × bits − 1`` short pulses (TLC or QLC one-shot: ``bits − 1`` 1Ah loads per plane
    and a tDBSY per queued plane), else ``(0, None)``. ``runs[i]`` is the number of short
    pulses right before pulse ``i`` (0 for the others)."""
    if not planes or len(x) < 20:
        return 0, None
    short = x <= math.log2(8.0)
    long_ = (pprog > 0.5) & (x > math.log2(100.0))
    n_long = int(long_.sum())
    if n_long < 10:
        return 0, None
    run = np.zeros(len(x), dtype=np.int64)
    acc = 0
    for i in range(len(x)):  # a short loop over the pulses (a counter, reset by long ones)
        run[i] = acc
        acc = acc + 1 if short[i] else 0
    r = run[long_]
    values, counts = np.unique(r, return_counts=True)
    top = int(values[np.argmax(counts)])
    if counts.max() < share * n_long or top < 2:
        return 0, None
    for b in (3, 4):
        if top + 1 == planes * b:
            return b, np.where(long_, run, 0)
    return 0, None


def _around_reads(is_long, is_read, max_reads):
    """Consecutive long pulses ``(a, b)`` (index arrays) with 1 … ``max_reads`` reads among
    the at most ``2 × max_reads`` pulses between them: where a suspended operation's pieces
    would stand."""
    idx = np.nonzero(is_long)[0]
    a, b = idx[:-1], idx[1:]
    cum = np.concatenate(([0], np.cumsum(is_read)))
    reads = cum[b] - cum[a + 1]
    ok = (reads >= 1) & (reads <= max_reads) & (b - a - 1 <= 2 * max_reads)
    return a[ok], b[ok]


def _suspend_pairs(x, g, states, w, grid, max_reads=3, gap_after=None):
    """Candidate pieces of suspended operations on one line: ``(pairs, join, sep, cls, gb,
    gpp, ga, before, wr)``.

    A program or erase suspended for reads (84h/13h, 61h/D2h) shows as a piece, the reads, and
    the rest. For each long pulse followed by 1 … ``max_reads`` reads and another long pulse,
    two readings compete: two operations (``sep = p(x_a) p(x_b)``, the fitted long-operation
    density per octave) or one operation of width ``T = a + b`` split at a uniform point
    (``join = p(log2 T) · a b ln 2 / T²``, the same density in the pieces' coordinates).
    ``cls`` is the class posterior of the whole operation (over the long states). A long pulse
    right after a tDBSY pulse is never a second piece: a resume is one command, while a new
    multi-plane operation queues its planes first (11h, D1h).

    With the idle time after each pulse (``gap_after``, log2 µs): ``gb``, the gap before each
    pair's second pulse, ``gpp``, the gaps between back-to-back program pulses (each a
    program's data in), ``ga``, the gap after each pair's first pulse (a read's command
    alone), and ``wr``, the probability that the widths make the pair one operation once the
    gap before the second pulse shows one transfer, not two; else all None. A single transfer
    leaves five readings: the pulse before the second piece a read (its data out) and the
    second piece the rest of the first (joined), a new erase (no data in), or the rest of an
    operation whose first piece passed for the first read after the first pulse; or the
    pulse before the second piece no read (no data out) and the second piece a new program
    (its data in): that pulse the rest of the first (too short to tell from a read), or a
    cache program's tCBSY. ``before``: the width (log2) of the pulse right before each pair's
    second pulse.
    """
    long_k = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS + ("erase",)]
    read_k = [j for j, st in enumerate(states) if st.kind in ("read", "cache")]
    if not long_k or not read_k or len(x) < 3:
        return None
    is_long = g[:, long_k].sum(axis=1) > 0.5
    is_read = g[:, read_k].sum(axis=1) > 0.5
    # Candidates: long, 1-3 reads (and their retries), long.
    a, b = _around_reads(is_long, is_read, max_reads)
    mp_k = [j for j, st in enumerate(states) if st.kind == "multiplane"]
    if mp_k and len(b):
        announced = g[b - 1][:, mp_k].sum(axis=1) > 0.5
        a, b = a[~announced], b[~announced]
    if not len(a):
        return None
    pairs = np.stack((a, b), axis=1)
    wl = np.asarray(w)[long_k]
    table = np.stack([states[j].dens for j in long_k], axis=1) * _BINS_PER_OCTAVE

    def dens(xs):
        # (A floor of 1 % per octave: a width no state claims is unlikely under either reading,
        # not infinitely better explained by one.)
        t = table[grid.index(xs)] * wl
        return np.maximum(t.sum(axis=1) / wl.sum(), 0.01), t
    wa_, wb_ = 2.0 ** x[pairs[:, 0]], 2.0 ** x[pairs[:, 1]]
    pa, _ = dens(x[pairs[:, 0]])
    pb, parts_b = dens(x[pairs[:, 1]])
    pt, parts = dens(np.log2(wa_ + wb_))
    sep = pa * pb + _FLOOR
    join = pt * wa_ * wb_ * math.log(2) / (wa_ + wb_) ** 2 + _FLOOR
    cls = parts / np.maximum(parts.sum(axis=1, keepdims=True), _FLOOR)
    gb = gpp = ga = wr = None
    before = x[pairs[:, 1] - 1]  # the pulse right before each second piece (a read's width)
    if gap_after is not None:
        erase_k = [n for n, j in enumerate(long_k) if states[j].kind == "erase"]
        pe = parts_b[:, erase_k].sum(axis=1) / wl.sum() if erase_k else 0.0

        def kind_dens(kind, xs):  # the density of one kind's states at xs (per octave)
            ks = [j for j in read_k if states[j].kind == kind]
            if not ks:
                return np.zeros(len(xs))
            wk = np.asarray(w)[ks]
            tk = np.stack([states[j].dens for j in ks], axis=1) * _BINS_PER_OCTAVE
            return (tk[grid.index(xs)] * wk).sum(axis=1) / wk.sum()
        p_read = np.maximum(kind_dens("read", before), 0.01)
        p_cache = kind_dens("cache", before)
        first = x[pairs[:, 0] + 1]  # the first pulse after the first piece
        p_first = np.where(pairs[:, 1] - pairs[:, 0] >= 3,
                           np.maximum(kind_dens("read", first), 0.01), 1.0)

        def joined(u, v):
            pt_, _ = dens(np.log2(u + v))
            return pt_ * u * v * math.log(2) / (u + v) ** 2
        wc, wf = 2.0 ** before, 2.0 ** first
        resume = join * p_read * p_first       # reads, then the rest of the first pulse
        other = (pa * pe * p_read * p_first    # reads, then a new erase
                 + np.where(pairs[:, 1] - pairs[:, 0] >= 3,
                            pa * joined(wf, wb_) * p_read, 0.0)  # a piece passed for a read
                 + joined(wa_, wc) * pb * p_first  # the rest (no data out), then a program
                 + pa * p_cache * pb * p_first  # a cache program's tCBSY, then a program
                 + _FLOOR)
        wr = resume / (resume + other)
        gb = gap_after[pairs[:, 1] - 1]
        ga = gap_after[pairs[:, 0]]
        prog_k = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS]
        is_prog = g[:, prog_k].sum(axis=1) > 0.5
        both = is_prog[:-1] & is_prog[1:]
        gpp = gap_after[:-1][both]
        gpp = gpp[np.isfinite(gpp)]
    return pairs, join, sep, cls, gb, gpp, ga, before, wr


def _suspend_share(cands, rounds=20):
    """The share of candidate pairs that are suspended operations, fitted by EM over every
    line (suspension is the drive's habit), and the log-likelihood it gains over none."""
    if not cands:
        return 0.0, 0.0
    join = np.concatenate([c[1] for c in cands])
    sep = np.concatenate([c[2] for c in cands])
    pi = 0.05
    for _ in range(rounds):
        q = pi * join / (pi * join + (1 - pi) * sep)
        pi = float(np.clip(q.mean(), 1e-5, 0.5))
    gain = float(np.log(pi * join + (1 - pi) * sep).sum() - np.log(sep).sum())
    return pi, gain


def _resume_gaps(cands):
    """Tell resumes from new operations by the idle gap before the second piece.

    A resume (13h, D2h) is one command after the reads' data out; a new operation after the
    same reads waits for its own data in as well. Where the drive suspends, the candidates'
    gaps split into two groups: the shorter about as long as a back-to-back program's gap (one
    page's data in; data out takes as long), the longer that plus a transfer. Returns
    ``(r, note)``: per candidate list the probability of the shorter group (its gap unknown:
    0), or ``(None, why)`` when the gaps do not show the two groups so.
    """
    gbs = [c[4] for c in cands if c[4] is not None]
    gpp = [c[5] for c in cands if c[5] is not None]
    if len(gbs) != len(cands) or not gbs:
        return None, "no idle times (the recording has no pulse starts)"
    gb = np.concatenate(gbs)
    gb = gb[np.isfinite(gb)]
    gpp = np.concatenate(gpp) if gpp else np.zeros(0)
    if len(gb) < RESUME_GAP_MIN or len(gpp) < RESUME_GAP_MIN:
        return None, (f"too few gaps ({len(gb)} before second pieces, {len(gpp)} between "
                      f"back-to-back programs; {RESUME_GAP_MIN} each needed)")
    # The resumes' group sits where a back-to-back program's gap does (one transfer and a
    # command): anchored there with that gap's spread; the other group is fitted freely. That
    # gap must hold a transfer: longer than a command alone (the gap between a long pulse and
    # the read after it). Cache programs load their data while the array is busy, and then
    # back-to-back programs are a command apart: no transfer to tell resumes by.
    m1 = float(np.median(gpp))
    ga = np.concatenate([c[6] for c in cands])
    ga = ga[np.isfinite(ga)]
    cmd = float(np.median(ga)) if len(ga) else m1
    s2 = None
    if m1 - cmd < RESUME_TRANSFER:
        why = (f"back-to-back programs {2 ** m1:.3g} µs apart, a command alone {2 ** cmd:.3g} "
               f"µs: no transfer between them")
        # Their data may be loaded while the array is busy. The gaps before the second pieces
        # then anchor themselves: two groups about a transfer apart (the data in a new operation
        # waits for), the shorter still a transfer above a command alone (the reads' data out),
        # and the pulses before it reads as long as the others' (a tCBSY there, shorter than
        # the reads, heads a cache-program chain: no resume).
        wb = np.concatenate([c[7][np.isfinite(c[4])] for c in cands])
        split = _two_groups(gb)
        if split is None:
            return None, why + "; the gaps before second pieces show no two groups"
        cut, (m1, s1), (m2, s2) = split
        low = gb < cut
        if m1 - cmd < RESUME_TRANSFER:
            return None, why + f"; their shorter group ({2 ** m1:.3g} µs) holds none either"
        if float(np.median(wb[low])) < float(np.median(wb[~low])) - CHAIN_WIDTH_STEP:
            return None, why + ("; the pulses before the shorter group's second pieces are "
                                "shorter than reads (cache-chain heads, not resumes)")
    else:
        s1 = max(1.4826 * float(np.median(np.abs(gpp - m1))), 0.05)
    if s2 is None:
        m2 = float(np.percentile(gb, 75))
        s2 = max(float(np.std(gb)) / 2, 0.05)
    w1 = 0.1
    for _ in range(60):
        l1 = w1 * np.exp(-0.5 * ((gb - m1) / s1) ** 2) / s1
        l2 = (1 - w1) * np.exp(-0.5 * ((gb - m2) / s2) ** 2) / s2
        r = l1 / (l1 + l2 + _FLOOR)
        n1, n2 = float(r.sum()), float((1 - r).sum())
        if n2 < 1:
            break
        w1 = n1 / len(gb)
        m2 = float(((1 - r) * gb).sum() / n2)
        s2 = max(math.sqrt(float(((1 - r) * (gb - m2) ** 2).sum() / n2)), 0.05)
    d = (m2 - m1) / math.sqrt((s1 ** 2 + s2 ** 2) / 2)
    what = (f"gaps before second pieces {2 ** m1:.3g} µs, as between back-to-back programs "
            f"({w1 * len(gb):.0f}), and {2 ** m2:.3g} µs")
    if w1 * len(gb) < RESUME_MIN:
        return None, f"{what}: no resume group"
    if d < RESUME_GAP_SEPARATION or m2 - m1 < RESUME_GAP_STEP:
        return None, f"{what}: not two groups"
    out = []
    for c in cands:
        x = c[4]
        ok = np.isfinite(x)
        l1 = w1 * np.exp(-0.5 * ((np.where(ok, x, m2) - m1) / s1) ** 2) / s1
        l2 = (1 - w1) * np.exp(-0.5 * ((np.where(ok, x, m2) - m2) / s2) ** 2) / s2
        out.append(np.where(ok, l1 / (l1 + l2 + _FLOOR), 0.0))
    return out, what


def _join_suspended(g, states, cand, q):
    """Apply the joins of one line: ``(posteriors, expected joins)``. ``q``: each candidate
    pair's probability of being one operation. A joined pair's first pulse takes the class of
    the whole operation, the second becomes no operation; a pair whose first pulse is itself
    the rest of a joined pair (an operation suspended twice) only drops its second (to the
    "other" state; where there is none, a trained model whose labels held too few resets or set
    features to train one, its posterior mass goes to no state: it counts nowhere)."""
    other = next((j for j, st in enumerate(states) if st.kind == "other"), None)
    if cand is None or q is None:
        return g, 0.0
    pairs, cls = cand[0], cand[3]
    long_k = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS + ("erase",)]
    first = np.zeros(len(g))   # joined as a first piece (holds the operation)
    second = np.zeros(len(g))  # joined as a later piece (no operation)
    g = g.copy()
    for n, (a, b) in enumerate(pairs):
        # (A pulse is joined as a first piece at most once and as a later piece at most once.)
        qq = min(float(q[n]), 1.0 - first[a], 1.0 - second[b])
        if qq <= 1e-6:
            continue
        chain = min(qq, second[a])  # a is already the rest of an earlier piece
        first[a] += qq
        second[b] += qq
        if qq > chain:
            row = g[a] * (1 - (qq - chain))
            row[long_k] += (qq - chain) * cls[n]
            g[a] = row
        row = g[b] * (1 - qq)
        if other is not None:
            row[other] += qq
        g[b] = row
    return g, float(second.sum())


def _resumable(g, states, max_reads=3):
    """Expected program pulses that may be the rest of a suspended erase: a pulse read as an
    erase, 1 … ``max_reads`` reads, then a pulse read as a program.

    An erase suspended for reads (61h, the reads, D2h) leaves a piece that its width may call
    an erase and a rest as wide as a program; a drive that does not suspend shows the
    same order whenever the firmware reads after an erase and then programs (garbage
    collection does). R/B# cannot tell the two apart (the bus tap can: 61h/D2h), so these
    programs are the lower end of what the pulses allow, not a correction.
    """
    e = [j for j, st in enumerate(states) if st.kind == "erase"]
    pk = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS]
    rk = [j for j, st in enumerate(states) if st.kind in ("read", "cache")]
    if not e or not pk or not rk or len(g) < 3:
        return 0.0
    p_erase = g[:, e].sum(axis=1)
    p_prog = g[:, pk].sum(axis=1)
    is_read = g[:, rk].sum(axis=1) > 0.5
    is_long = (p_erase + p_prog) > 0.5
    a, b = _around_reads(is_long, is_read, max_reads)
    return float((p_erase[a] * p_prog[b]).sum())


def _announced_loads(x, pprog, planes, share=0.5, bits=(3, 4)):
    """Pages loaded per plane before each word-line program when the short pulses between
    consecutive long programs number ``planes × pages − 1`` on most of them, ``pages`` one of
    ``bits`` (TLC or QLC one-shot: ``bits − 1`` data loads and the plane queueing of each page;
    each pass of a two-pass QLC program loads its four pages the same way), else 0."""
    if not planes:
        return 0
    long_ = (pprog > 0.5) & (x > math.log2(100.0))
    short = x <= math.log2(8.0)
    n_long = int(long_.sum())
    if n_long < 10 or not short.any():
        return 0
    idx = np.nonzero(long_)[0]
    between = np.diff(np.cumsum(short)[idx])
    values, counts = np.unique(between, return_counts=True)
    k = int(values[np.argmax(counts)])
    if counts.max() < share * len(between):
        return 0
    for b in bits:
        if k + 1 == planes * b:
            return b
    return 0


def _word_line_parse(x, g, pj, ej, planes, bits, mult=None):
    """``g`` with each long pulse of a one-shot (or two-pass) die made a program or an erase by
    the order.

    A one-shot operation of ``planes`` planes is announced by ``planes × bits − 1`` short
    pulses (``bits − 1`` data loads per plane and the tDBSY of each queued plane), a multi-plane
    erase by ``planes − 1`` (its tDBSY queue); reads may come between them, and an erase may
    come while a word line's loads are under way. Read in order, a long pulse (a program or an
    erase by its posterior) finding at least ``planes × bits − 1`` short pulses not yet spent
    is a program and spends them, else an erase (spending its queue). Widths alone cannot
    do this where slow or heavy-tailed erases overlap the programs. Each pass of a two-pass
    program loads its word line the same way (``bits``: the cell's, though a pass writes half
    of them; ``mult`` says what each state writes).
    """
    need = planes * bits - 1
    queue = planes - 1
    # A load whose busy ran long (a heavy-tailed 1Ah past the short bound) is not seen as one:
    # one missing load is forgiven where an erase's queue and the forgiven load together stay
    # short of a word line's (a swap of a program and an erase that came while its loads were
    # under way still keeps the count).
    forgive = 1 if need - queue > 2 else 0
    short = x <= math.log2(8.0)
    longs = (x > math.log2(100.0)) & (g[:, list(pj) + [ej]].sum(axis=1) > 0.5)
    if not longs.any():
        return g
    # The word-line program states (several pages per plane); without them (the scheme found
    # by the order, every mode a single page so far) every program state.
    pw = [j for j in pj if mult is not None and mult[j] > 1] or list(pj)
    rest = [j for j in pj if j not in pw]  # SLC-mode programs: no data loads, kept as they are
    # (The pending loads do not end at a program: on the reference SSD two streams' word lines
    # share a die, and one's loads may begin before the other's program. A long pulse that
    # finds no word line's loads spends an erase's queue whatever its widths say: sparing the
    # ones the widths call SLC-mode programs, the reads' tail among them, turned erases as wide
    # as such a state into programs on 6-plane one-shot tuning draws, +0.6 → +1.5 %.)
    prog = np.zeros(len(x), dtype=bool)
    pending = 0
    for i in range(len(x)):  # a short loop over the pulses (a counter)
        if short[i]:
            pending = min(pending + 1, 2 * need)
        elif longs[i]:
            if pending >= need - forgive:
                prog[i] = True
                pending = max(0, pending - need)
            else:
                pending = max(0, pending - queue)
    g = g.copy()
    mass = g[:, list(pj) + [ej]].sum(axis=1)
    row = g[:, pw]
    tot = row.sum(axis=1, keepdims=True)
    share = np.where(tot > 0, row / np.where(tot > 0, tot, 1.0), 0.0)
    share[tot[:, 0] <= 0, -1] = 1.0  # no program posterior yet: the slowest program state
    to_prog = longs & prog
    to_erase = longs & ~prog
    # A pulse that spent a word line's loads is that word line's program.
    g[np.ix_(to_prog, pw)] = share[to_prog] * mass[to_prog, None]
    if rest:
        g[np.ix_(to_prog, rest)] = 0.0
    g[to_prog, ej] = 0.0
    # One that found none is no word-line program: an erase (or an SLC-mode program).
    g[to_erase, ej] += g[np.ix_(to_erase, pw)].sum(axis=1)
    g[np.ix_(to_erase, pw)] = 0.0
    return g


def _host_paced(x, pprog, pshort, gap_after, prog_range, cbsy_hi, *, unanchored=False,
                plong=None):
    """Probability that each pulse is a host-paced cache program (with ``unanchored``, also
    that of the candidates whose chain no slow program's silence anchors, not counted).

    A cache program (80h…15h) whose host waits for the array before the next command shows on
    R/B# only its tCBSY, a few µs to tens of µs, as short as a read; the page's program runs
    while the line is high. The die is then silent for as long as a program takes (nothing else
    can use its array), and the chain goes on with the next cache program or ends with the 10h
    program. So a short pulse in the tCBSY range is a candidate when the idle time after it lies
    in the program modes' range (``prog_range = (lo, mid, hi)``, log2 µs) and the next pulse is
    a long program or another candidate. A read whose page is moved to a program (garbage
    collection) is followed by a silence too, the page's transfer, which can be as long as the
    fastest page type's program: a chain of candidates counts only when one of its silences is
    longer than that (``mid``, the slowest program mode's lower edge), which no transfer is.

    ``plong`` (default ``pprog``) is the chance that a pulse is a long operation, program or
    erase: the pulse that ends a chain. The 10h program that ends one may be as slow as an erase
    (the slowest page type's tail against the erases' lower edge); the anchored silences before
    it, not its width, say that the chain is one, so its program-or-erase doubt is not the
    chain's (a tuning draw lost 7 % of its cache programs to 0.93 ends).
    """
    n = len(x)
    out = np.zeros(n)
    if n < 2:
        return out
    lo, mid, hi = prog_range
    gap = np.nan_to_num(np.asarray(gap_after, dtype=float), nan=-np.inf)
    # (A short pulse wider than tCBSY's bound continues a chain, below.)
    wide = x > cbsy_hi
    seed = pshort * ((gap >= lo) & (gap <= hi))
    along = (pprog if plong is None else np.clip(plong, 0.0, 1.0)) * wide
    # The transfers of this drive: the gaps between a short pulse and the program after it,
    # mostly reads whose page is moved (data out, data in). A silence an octave above their
    # lower quartile is no transfer either, where that is below ``mid``.
    before = (pshort > 0.5) & (x <= cbsy_hi) & np.isfinite(gap)
    before[:-1] &= pprog[1:] * wide[1:] > 0.5
    before[-1] = False
    if before.sum() >= PACED_REF_MIN:
        mid = min(mid, max(lo, float(np.percentile(gap[before], 25)) + PACED_TRANSFER_STEP))
    anchor = gap >= mid
    # From the end backwards: the chance the chain from i on is one (next pulse a program or
    # another candidate), and whether a silence of the chain is a slow program's.
    anchored = np.zeros(n, dtype=bool)
    for i in np.nonzero(seed > 0)[0][::-1]:  # sparse: only the pulses a silence follows
        if i + 1 < n:
            out[i] = seed[i] * min(1.0, along[i + 1] + (1 - along[i + 1]) * out[i + 1])
            anchored[i] = anchor[i] or (out[i + 1] > 0 and anchored[i + 1])
    # A pulse wider than tCBSY's bound (a slow tCBSY's tail: the bound is a datasheet's, the
    # tail is the die's) continues a chain, never starts one; however wide, as long as it is
    # short (no program mode's) and the silences before and after it are a page's program.
    for i in np.nonzero(wide & (out > 0))[0]:
        if i == 0 or out[i - 1] <= 0:
            out[i] = 0.0
    # The anchor found further down the chain holds for the pulses before it too.
    for i in np.nonzero(out > 0)[0]:
        if i > 0 and out[i - 1] > 0 and anchored[i - 1]:
            anchored[i] = True
    if unanchored:
        return np.where(anchored, out, 0.0), np.where(anchored, 0.0, out)
    return np.where(anchored, out, 0.0)


def _two_groups(values, small_low=False):
    """Two groups of ``values`` (log2 gaps) about a transfer apart: ``(cut, (m1, s1), (m2,
    s2))``, medians and robust spreads of the shorter and the longer group split at ``cut``,
    or None when the values do not split so (fewer than CHAIN_GAP_GROUP in a group, the groups
    less than CHAIN_GAP_STEP or more than CHAIN_GAP_STEP_MAX octaves apart, or less than
    CHAIN_GAP_SEPARATION pooled spreads).

    The split is the one of least within-group variance. That one halves a large group rather
    than set a small one apart (a slc-seq-cache tuning draw: 12 chain heads' gaps of 24-38 µs
    below 1 103 reads' of 42-61 µs; it cut the reads at 51 µs): with ``small_low`` the splits
    at the TWO_GROUP_TRIES widest empty stretches are tried too, those whose shorter group is
    the smaller, and of those that qualify the likeliest as two normal groups is taken. (A
    small shorter group may be a long group's lower tail: the caller's other evidence must
    confirm it.)
    """
    gc = np.sort(np.asarray(values, dtype=float))
    n = len(gc)
    if n < 2 * CHAIN_GAP_GROUP:
        return None
    c1 = np.cumsum(gc)
    c2 = np.cumsum(gc ** 2)
    k = np.arange(1, n)
    left = c2[:-1] - c1[:-1] ** 2 / k
    right = (c2[-1] - c2[:-1]) - (c1[-1] - c1[:-1]) ** 2 / (n - k)
    tries = [int(np.argmin(left + right)) + 1]
    if small_low:
        inner = np.diff(gc)[CHAIN_GAP_GROUP - 1:n // 2]
        widest = np.argsort(inner, kind="stable")[::-1][:TWO_GROUP_TRIES]
        tries = [int(j) + CHAIN_GAP_GROUP for j in widest]
    best = None
    for i in tries:
        lo, hi = gc[:i], gc[i:]
        if len(lo) < CHAIN_GAP_GROUP or len(hi) < CHAIN_GAP_GROUP:
            continue
        m1, m2 = float(np.median(lo)), float(np.median(hi))
        s1 = max(1.4826 * float(np.median(np.abs(lo - m1))), 0.05)
        s2 = max(1.4826 * float(np.median(np.abs(hi - m2))), 0.05)
        if not CHAIN_GAP_STEP <= m2 - m1 <= CHAIN_GAP_STEP_MAX or \
                (m2 - m1) / math.sqrt((s1 ** 2 + s2 ** 2) / 2) < CHAIN_GAP_SEPARATION:
            continue  # (further apart: a silence, e.g. a host-paced program, not a transfer)
        # The split's likelihood as two normal groups (plain spreads: a value left on the
        # wrong side widens its group, where a robust spread would not see it).
        fit = sum(len(v) * (math.log(len(v) / n) - math.log(max(float(np.std(v)), 0.05)))
                  for v in (lo, hi))
        if best is None or fit > best[0]:
            best = (fit, 0.5 * (gc[i - 1] + gc[i]), (m1, s1), (m2, s2))
    return None if best is None else best[1:]


def _chain_head_gaps(pshort, nxt, gap_after, width=None):
    """Per pulse, the probability that a short pulse before a long program heads a back-to-back
    cache-program chain, by the idle gap between them; None when the gaps do not decide.

    A chain's head (80h…15h, the array idle: only tCBSY shows) is followed by the next page's
    data in and its 15h or 10h: one transfer. A read before a program (a page moved by garbage
    collection) is followed by its data out and the program's data in: two. Where both occur the
    gaps split into two groups about an octave apart (from CHAIN_GAP_STEP), the shorter the
    heads'; one group alone says nothing (all heads, or all reads), and then the widths decide.
    A read before a resumed operation (84h…13h, 61h…D2h after reads) is one transfer from it
    too: the shorter group counts only when its pulses (``width``, log2) are shorter than the
    longer group's by CHAIN_WIDTH_STEP (a tCBSY against a tR), not reads like the others. With
    the widths, a few heads among many reads are looked for too (``_two_groups`` with
    ``small_low``): the widths confirm that they are no lower tail of the reads' gaps.
    """
    cand = (pshort > 0.5) & (nxt > 0.5)
    gap = np.asarray(gap_after, dtype=float)
    cand &= np.isfinite(gap)
    gc = gap[cand]
    if len(gc) < CHAIN_GAP_MIN:
        return None
    split = _two_groups(gc)
    if split is None and width is not None:
        split = _two_groups(gc, small_low=True)  # (confirmed by the widths below)
    if split is None:
        return None
    cut, (m1, s1), (m2, s2) = split
    low = gc < cut
    if width is not None:
        wc = np.asarray(width, dtype=float)[cand]
        if float(np.median(wc[low])) > float(np.median(wc[~low])) - CHAIN_WIDTH_STEP:
            return None
    w1 = float(low.mean())
    known = np.isfinite(gap)
    x = np.where(known, gap, m2)
    l1 = w1 * np.exp(-0.5 * ((x - m1) / s1) ** 2) / s1
    l2 = (1 - w1) * np.exp(-0.5 * ((x - m2) / s2) ** 2) / s2
    return np.where(known, l1 / (l1 + l2 + _FLOOR), 0.0)


def _heads_below_reads(x, pshort, nxt, heads):
    """Per pulse, the chance that a short pulse right before a long program, narrower than the
    die's reads, heads a back-to-back cache-program chain.

    A chain's head shows only tCBSY (a few µs, up to the reads' widths); a read before a program
    (a page that garbage collection moves) is as wide as the other reads. The short pulses
    (reads) have a robust centre and spread (median, MAD, log2); NARROW_Z spreads below the
    centre, reads are rare: as rare as among the short pulses no long program follows, where
    there are NARROW_REF_MIN of them, else a normal tail's share. Where the short pulses before
    programs hold a significant excess there (binomial chance under NARROW_CHANCE, NARROW_MIN
    pulses at least), the excess is heads, shared evenly among them (beside those the gaps or a
    tCBSY cluster counted). Heads as wide as reads stay reads: the interval's and the
    undetermined flag's (a tuning draw of slc-seq-cache: 13 heads of 2-31 µs against reads of
    14-50 µs, the gaps after them overlapping; 11 below every read).
    """
    free = (pshort > 0.5) & (heads < 0.5)
    xs = x[pshort > 0.5]
    if len(xs) < NARROW_REF_MIN:
        return np.zeros(len(x))
    centre = float(np.median(xs))
    spread = max(1.4826 * float(np.median(np.abs(xs - centre))), 0.05)
    cut = centre - NARROW_Z * spread
    ref = free & (nxt < 0.5)
    if int(ref.sum()) >= NARROW_REF_MIN:
        rate = max(float((x[ref] < cut).mean()), 1.0 / int(ref.sum()))
    else:
        rate = 0.5 * math.erfc(NARROW_Z / math.sqrt(2.0))
    cand = free & (nxt > 0.5)
    below = cand & (x < cut)
    k, n = int(below.sum()), int(cand.sum())
    if k < NARROW_MIN or binomial_at_least(k, n, rate) > NARROW_CHANCE:
        return np.zeros(len(x))
    share = max(0.0, k - n * rate) / k
    return np.where(below, share * pshort * nxt, 0.0)


def _programs_by_data_in(g, pj, ej, mj, gap_after):
    """Long pulses right after a tDBSY, told program from erase by the idle gap before them.

    In a multi-plane sequence the host does not pause: the last plane's command is 60h…D0h for
    an erase (a command alone) but 80h…data…10h (or 15h) for a program (a page's data in), and
    a resume never follows a tDBSY. Where the sorted gaps before the line's announced long
    pulses have an empty stretch of at least ERASE_GAP_STEP octaves (at least 2 pulses and
    ERASE_GAP_SHARE of the erase state's below it, ERASE_GAP_MIN above; of several, the one
    whose split moves the least posterior, then the widest), a pulse of
    the longer group gives its erase posterior to the program states (in proportion to theirs,
    else to the slowest), and one of the shorter group its program posterior to the erase. A
    chain's last program, two programs' time long, can be as wide as an erase."""
    pm = g[:, mj].sum(axis=1)
    prev = np.concatenate([[0.0], pm[:-1]])
    gap = np.asarray(gap_after, dtype=float)
    gb = np.concatenate([[np.nan], gap[:-1]])
    pe = g[:, ej]
    pp = g[:, pj].sum(axis=1)
    ann = (prev > 0.5) & np.isfinite(gb) & (pe + pp > 0.5)
    v = np.sort(gb[ann])
    n = len(v)
    if n < ERASE_GAP_MIN + 2:
        return g
    # An empty stretch between the sorted gaps (a group of a few erases beside many programs
    # would not move a variance split, and a program group may be bimodal itself): below it
    # the erases, at least a quarter of the erase state's pulses (a few short gaps at the
    # bottom, with erases' gaps spread over the programs', split nothing). Of the stretches
    # that qualify, the one whose split the widths contradict least (the posterior it moves);
    # the widest of those. (A publishing draw of tlc-plane-reads-4p, 1570 at L0: the erases'
    # gaps spread over 1-20 µs, the programs' 83-102; the widest stretch, 1.3 to 6.2 µs, left
    # ten erases above it, and six went to the programs: +1.16 %.)
    jumps = np.diff(v)
    need = max(2.0, ERASE_GAP_SHARE * float(pe[ann].sum()))
    best = None
    for i in np.nonzero(jumps >= ERASE_GAP_STEP)[0] + 1:
        if i < need or n - i < ERASE_GAP_MIN:
            continue
        c = 0.5 * (v[i - 1] + v[i])
        moved = float(pe[ann & (gb >= c)].sum() + pp[ann & (gb < c)].sum())
        key = (moved, -float(jumps[i - 1]))
        if best is None or key < best[0]:
            best = (key, c)
    if best is None:
        return g
    cut = best[1]
    g = g.copy()
    move = ann & (gb >= cut) & (pe > 0)
    if move.any():
        w = g[np.ix_(move, pj)]
        tot = w.sum(axis=1, keepdims=True)
        share = np.where(tot > 0, w / np.maximum(tot, _FLOOR), 0.0)
        share[tot[:, 0] <= 0, -1] = 1.0
        g[np.ix_(move, pj)] = w + g[move, ej][:, None] * share
        g[move, ej] = 0.0
    back = ann & (gb < cut) & (pp > 0)
    if back.any():
        g[back, ej] += g[np.ix_(back, pj)].sum(axis=1)
        g[np.ix_(back, pj)] = 0.0
    return g


def _reads_by_data_in(x, g, states, gap_after, widths=True, skip=()):
    """Pulses as wide as the fastest program mode, told read from program by the idle gap
    before them, and read states that wait for data in: ``(posteriors, programs moved to
    reads in the fastest mode's widths (net), read-state pulses moved to programs)``.

    A program waits for its page's data in before its busy, a read does not; after the same
    kind of pulse (a read, whose data out comes first too, or a long operation) a program's gap
    is one transfer longer. A read's busy has a tail (retries inside the die, a slow plane)
    that can reach the fastest programs' widths (an SLC cache's, 3-4 times tR), and there the
    widths cannot tell. It needs a slower program mode to learn the programs' gaps from. The
    command's time and the transfer are the line's: fitted to the
    median gaps of its confident reads (narrower than the fastest mode) and programs (of the
    slower modes) after reads and after long pulses (groups of DATA_IN_MIN, at least two with
    different transfers), their robust spreads pooled. Where a program's gap lies DATA_IN_STEP
    octaves and DATA_IN_SEPARATION spreads above a read's after the same kind of pulse, each
    pulse in the fastest program mode's widths (above every read state's centre) is read by its
    gap alone (and any pulse above them the widths call a program), the share of reads among
    them fitted (EM). A gap more than 4 spreads from both groups (a pause, or a pulse before it
    misread) leaves the pulse as its width reads it. Lines with cache states (a tCBSY cluster, or
    a trained cache-program class: a tuning draw of slc-seq-cache at L2 moved 11 reads into it,
    +2.1 %) are left alone, and
    so is a kind of pulse after which the fastest mode's own programs (the pulses above its
    centre, DATA_IN_MIN of them; else the whole window's) have a median gap nearer the reads'
    group than the programs': a cache program's data in overlaps the busy before it. (The whole
    window's gaps alone misjudged a line whose fastest programs rarely follow a long pulse: the
    reads to find outnumbered them there.)

    A read state other than the fastest whose pulses, after both kinds of pulse, have a median
    gap nearer a program's (the gaps fitted with that state among the programs) is a program
    mode as fast as the reads (an SLC cache's programs among the TLC page types' reads): its
    pulses go to the fastest program mode and are then judged one by one like the window's.
    With ``widths`` false (a line where suspension may hide: a program's rest whose first piece
    passed for a read would be lost) only such a state is judged. ``skip``: program states
    found to be reads (:func:`_modes_alone`), left out."""
    rk = [j for j, st in enumerate(states) if st.kind == "read"]
    pk = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS]
    pk = [j for j in pk if j not in skip]
    if not rk or len(pk) < 2 or len(x) < 3 or \
            any(st.kind in ("cache", "cache_program") for st in states):
        return g, 0.0, 0.0, 0.0
    # (In µs: a gap is a command's time plus the transfers, and the commands' spread is the
    # same on both sides.)
    gb = 2.0 ** np.concatenate([[np.nan], np.asarray(gap_after, dtype=float)[:-1]])
    programs = float(g[:, pk].sum())
    lk = pk + [j for j, st in enumerate(states) if st.kind == "erase"]
    pr, pp = g[:, rk].sum(axis=1), g[:, pk].sum(axis=1)
    prev_r = np.concatenate([[0.0], pr[:-1]])
    prev_l = np.concatenate([[0.0], g[:-1][:, lk].sum(axis=1)])
    fast = min((states[j] for j in pk), key=lambda st: st.mu)
    top = max(states[j].mu for j in rk)
    lo = max(fast.mu - 2.5 * fast.sigma, top)
    hi = fast.mu + 2.5 * fast.sigma
    ok = np.isfinite(gb)
    # Each gap is a command's time plus a transfer for the data out of a read before it and one
    # for a program's own data in: fitted (least squares, weighted by count) to the medians of
    # the confident groups — reads narrower than the fastest program mode, programs of the
    # slower modes (the window holds the reads to find) — after a read and after a long pulse.
    fit = _data_in_fit(gb, ok, prev_r, prev_l, (pr > 0.9) & (x < lo), (pp > 0.9) & (x > hi))
    if fit is None:
        return g, 0.0, 0.0, 0.0
    # A read state whose pulses wait for their data in is a program mode as fast as the reads
    # (an SLC cache's programs, between the TLC page types' reads and the TLC programs). Each
    # read state but the fastest is tried as one: the gaps fitted with its pulses among the
    # programs (after them, no data out), and its pulses' gaps tested against that fit. (The
    # fastest read state is reads: no program is faster than every read.)
    main = min(rk, key=lambda j: states[j].mu)
    waiting, open_ = [], 0.0
    for j in rk:
        if j == main:
            continue
        pj_, rest = g[:, j], pr - g[:, j]
        # (Its pulses among the programs: a pulse after one of them has no data out before.)
        prev_rj, prev_lj = _shifted(rest), prev_l + _shifted(pj_)
        fit_j = _data_in_fit(gb, ok, prev_rj, prev_lj,
                             (rest > 0.9) & (x < lo), (pp > 0.9) & (x > hi))
        if fit_j is None:
            continue
        sel = ok & (pj_ > 0.9)
        if _waits_for_data_in(gb, sel, prev_rj, prev_lj, *fit_j) \
                or _waits_unlike_reads(gb, sel, ok & (rest > 0.9), prev_rj, prev_lj, *fit_j):
            waiting.append(j)
            continue
        # Short of that, a mode most of whose pulses wait after both kinds of pulse (the
        # programs mixed with a read tail, or the gaps less than DATA_IN_SEPARATION spreads
        # apart) cannot be judged: reads or programs, its pulses are left open (the interval's
        # upper end counts them programs).
        shares = _waiting_shares(gb, sel, prev_rj, prev_lj, *fit_j, apart=False)
        if shares and len(shares) == 2 and any(n >= DATA_IN_MIN for n, _, _ in shares) \
                and all(w >= DATA_IN_OPEN for _, w, _ in shares):
            open_ += float(pj_.sum())
    if not waiting and not widths:
        return g, 0.0, 0.0, open_
    g = g.copy()
    inw = g[:, waiting].sum(axis=1) if waiting else np.zeros(len(x))
    if waiting:
        # Their pulses go to the fastest program mode; each is then judged by its gap below.
        fj = pk[int(np.argmin([states[j].mu for j in pk]))]
        g[:, fj] += inw
        g[:, waiting] = 0.0
        pr, pp = g[:, rk].sum(axis=1), g[:, pk].sum(axis=1)
        fit = _data_in_fit(gb, ok, _shifted(pr), _shifted(g[:, lk].sum(axis=1)),
                           (pr > 0.9) & (x < lo), (pp > 0.9) & (x > hi)) or fit
    command, transfer, spread = fit
    in_waiting = float(inw.sum())
    for _ in range(2):  # (again with the pulses before each corrected: a read after a misread)
        pr, pp = g[:, rk].sum(axis=1), g[:, pk].sum(axis=1)
        prev_r = np.concatenate([[0.0], pr[:-1]])
        prev_l = np.concatenate([[0.0], g[:-1][:, lk].sum(axis=1)])
        # (Pulses in the fastest mode's widths, and those above the reads the widths call
        # programs.)
        win = ok & (x <= hi) & (pr + pp > 0.5) & ((((x >= lo) | ((x > top) & (pp > 0.5)))
                                                    & widths) | (inw > 0.5))
        _by_data_in_pass(g, states, rk, pk, gb, win, pr, pp, prev_r, prev_l, command,
                         transfer, spread, core=x >= fast.mu)
    moved = programs - float(g[:, pk].sum())
    # (The waiting read states' pulses now programs, counted apart from the fastest mode's:
    # those the passes did not give back to the reads.)
    back = float(g[:, rk][inw > 0.5].sum()) if waiting else 0.0
    to_programs = in_waiting - back
    return g, moved + to_programs, to_programs, open_


def _shifted(v):
    """``v`` one pulse later: each pulse's value of the pulse before it (0 for the first)."""
    return np.concatenate([[0.0], v[:-1]])


def _modes_unannounced(g, states, mk):
    """SLC-mode program modes of a line whose programs a tDBSY announces, with how often one
    announces theirs: ``[(the mode's index, its pulses, its pulses after a tDBSY)]``.

    A drive that programs several planes at once queues each plane's page with 80h…11h, a
    tDBSY busy of a microsecond right before the program's own busy: where at least
    ANNOUNCED_MAIN of the main program modes' pulses follow one, the drive programs so, and an
    SLC-mode program (a faster extra mode) of that drive is queued the same way. A mode whose
    pulses follow one in fewer than ANNOUNCED_FEW of cases is the reads' tail cut off by the
    split (a QLC drive's slowest reads), as reads follow no tDBSY (:func:`_reads_cut` judges
    the lines' counts together). A line whose programs follow no tDBSY gives nothing."""
    pk = [j for j, st in enumerate(states) if st.kind == "program"]
    sk = [j for j, st in enumerate(states) if st.kind == "program_slc"]
    if not (mk and pk and sk) or len(g) < 3:
        return []
    prev = _shifted(g[:, mk].sum(axis=1))
    main = g[:, pk].sum(axis=1)
    if main.sum() < ANNOUNCE_MIN or (main * prev).sum() < ANNOUNCED_MAIN * main.sum():
        return []
    return [(j, float(g[:, j].sum()), float((g[:, j] * prev).sum())) for j in sk]


def _reads_cut(keys, seqs, posteriors, states, mk):
    """The SLC-mode modes that are the reads' tail (``posteriors``: a line's posteriors).

    On the lines whose programs a tDBSY announces (:func:`_modes_unannounced`), a mode with
    fewer than ANNOUNCED_FEW of its pulses there after a tDBSY, so few that a mode queued like
    the main modes would show that with a chance under UNANNOUNCED_CHANCE (binomial), the lines
    holding at least UNANNOUNCED_SHARE of the mode's pulses. The lines are judged together: a
    read tail spread over the dies is the same evidence as on one. (Until session 21 each line
    needed ANNOUNCE_MIN of the mode's pulses: a two-pass QLC tuning draw's 33 pulses at 240 µs,
    16 and 17 on its two dies, were SLC-mode programs, +1.9 %; another's 8, on two dies, +1.1 %.)
    """
    if not any(st.kind == "program_slc" for st in states) or not mk:
        return []
    seen, after, total = {}, {}, {}
    for _k, s in zip(keys, seqs, strict=True):
        g = posteriors(s)
        for j, st in enumerate(states):
            if st.kind == "program_slc":
                total[j] = total.get(j, 0.0) + float(g[:, j].sum())
        for j, n, a in _modes_unannounced(g, states, mk):
            seen[j] = seen.get(j, 0.0) + n
            after[j] = after.get(j, 0.0) + a
    return [j for j, n in seen.items()
            if after[j] < ANNOUNCED_FEW * n and n >= UNANNOUNCED_SHARE * total[j]
            and _binomial_tail(after[j], n, ANNOUNCED_MAIN) < UNANNOUNCED_CHANCE]


def binomial_at_least(k, n, p):
    """The chance of at least ``k`` successes in ``n`` trials of chance ``p`` (summed in logs:
    exact for any ``n``)."""
    n, k = int(n), int(k)
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    i = np.arange(k, n + 1, dtype=float)
    logs = (math.lgamma(n + 1) - np.array([math.lgamma(v + 1) for v in i])
            - np.array([math.lgamma(n - v + 1) for v in i])
            + i * math.log(p) + (n - i) * math.log1p(-p))
    top = float(logs.max())
    return float(min(1.0, math.exp(top) * np.exp(logs - top).sum()))


def _binomial_tail(k, n, p):
    """The chance of at most ``k`` successes in ``n`` trials of chance ``p`` (expected counts:
    ``n`` rounded, ``k`` floored)."""
    n, k = int(round(n)), int(math.floor(k + 1e-9))
    if n <= 0:
        return 1.0
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i)
                     for i in range(0, min(k, n) + 1)))


def _modes_alone(x, g, states, gap_after):
    """Program modes, fastest first, whose pulses wait for no data in while the next slower
    mode's do: reads (``(posteriors, the modes' indices, pulses moved)``), their pulses given
    to the slowest read state.

    The mirror of the read states that wait (:func:`_reads_by_data_in`): where a TLC drive's
    slower read types sit with its SLC cache's programs between the reads' and the programs'
    clusters, the widths may split below them (a datasheet's tR max above the SLC programs'
    widths does not separate them) and call them a program mode. Each mode is judged with its
    pulses taken for reads (the pulse before a read is a read, with its data out), by those not
    right after one of its own (a run of SLC-mode programs waits for a page's data in after
    each, as long as a read's data out after a read: a tapped channel's trained SLC state, on a
    slower die, lost its 791 programs so, −10.8 %): the line's
    command time and transfer fitted to its confident reads (narrower than the mode) and the
    slower modes' programs, where DATA_IN_WAITING of the mode's gaps after each kind of pulse
    lie nearer a read's, and as many of the next slower mode's nearer a program's, the mode is
    reads. Cache programs (whose data in overlaps the busy before) are not taken for reads: the
    next mode must wait, and two program modes always stay."""
    alone = []
    rk = [j for j, st in enumerate(states) if st.kind == "read"]
    pk = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS]
    if not rk or len(pk) < 3 or any(st.kind == "cache" for st in states) or len(x) < 3:
        return g, alone, 0.0
    gb = 2.0 ** np.concatenate([[np.nan], np.asarray(gap_after, dtype=float)[:-1]])
    ok = np.isfinite(gb)
    lk = [j for j, st in enumerate(states) if st.kind == "erase"]
    moved = 0.0
    top = max(states[j].mu for j in rk)
    slowest_read = max(rk, key=lambda j: states[j].mu)

    while True:
        live = sorted((j for j in pk if j not in alone), key=lambda j: states[j].mu)
        if len(live) < 3:
            break
        fj, nj = live[0], live[1]
        fast = states[fj]
        lo = max(fast.mu - 2.5 * fast.sigma, top)
        hi = fast.mu + 2.5 * fast.sigma
        mine = g[:, fj]
        pr = g[:, rk].sum(axis=1) + mine
        pp = g[:, live[1:]].sum(axis=1)
        prev_r, prev_l = _shifted(pr), _shifted(pp + g[:, lk].sum(axis=1))
        fit = _data_in_fit(gb, ok, prev_r, prev_l, (pr - mine > 0.9) & (x < lo),
                           (pp > 0.9) & (x > hi))
        # (Judged by its pulses after a read or a long pulse, not after one of its own: a run
        # of SLC-mode programs, each after the last, waits for one page's data in, which is
        # what a read waits for after a read, its data out.)
        own = ok & (mine > 0.9) & (_shifted(mine) < MODE_ALONE_AFTER_OWN)
        if fit is None or not _waits_for_data_in(gb, own, prev_r, prev_l, *fit, alone=True) \
                or not _waits_for_data_in(gb, ok & (g[:, nj] > 0.9), prev_r, prev_l, *fit):
            break
        # Reads alone wait for a page's data in no more often than the spread of the command
        # times makes them seem to (twice the normal tail at half a transfer, and
        # MODE_ALONE_SLACK), beyond chance (MODE_ALONE_P); more is programs among them (a
        # tapped channel's trained SLC state on a slower die held its 791 SLC programs and 256
        # slow reads, the reads most of its pulses after a long one: a quarter of those
        # waited), and the mode stays to be judged pulse by pulse.
        command, transfer, spread = fit
        seem = 2 * 0.5 * math.erfc(transfer / (2 * spread) / math.sqrt(2)) + MODE_ALONE_SLACK
        shares = _waiting_shares(gb, own, prev_r, prev_l, command, transfer, spread) or []
        if any(binomial_at_least(round(w * n_), n_, min(seem, 1.0)) < MODE_ALONE_P
               for n_, w, _ in shares):
            break
        if not alone:
            g = g.copy()
        moved += float(mine.sum())
        g[:, slowest_read] += mine
        g[:, fj] = 0.0
        alone.append(fj)
    return g, alone, moved


def _erases_by_data_in(x, g, states, gap_after, cap=None):
    """Pulses where the slowest program mode's widths and the erases' meet, told erase from
    program by the idle gap before them: ``(posteriors, erases moved to programs, net)``.

    An erase is a command alone (60h, its address, D0h), a program waits for its page's data in
    (80h, address, data, 10h). After each kind of pulse (a read, a long operation) the line's
    own confident reads (a command alone too) and confident programs below the window give the
    two gaps to expect: their medians, DATA_IN_STEP octaves and DATA_IN_SEPARATION pooled robust
    spreads apart, each group of DATA_IN_MIN at least (else that kind of pulse is left alone:
    cache programs, whose data in overlaps the busy before them, show no wait). Each pulse above
    the slowest program mode's centre, or with an erase posterior, below the erase state's upper
    edge, is then read by its gap alone, the share of erases among them fitted (EM); a gap more
    than 4 spreads from both leaves the pulse as its width reads it. Where the two states'
    widths barely overlap (ERASE_WIDTHS_APART), the widths' odds stay and the gap's likelihood
    ratio multiplies them instead. Where a kind of pulse
    holds more than 2 % of the window and its gaps cannot judge, none is judged: the widths'
    errors on one side would be corrected and not the other's (whose count, held by the erase
    cap, cancelled them). Nor where the gaps' reading leaves more erases than ``cap`` (the
    structural cap of the programs, when the pages per block are known) and than the widths
    found: the gaps misjudged."""
    ej = next((j for j, st in enumerate(states) if st.kind == "erase"), None)
    rk = [j for j, st in enumerate(states) if st.kind == "read"]
    pk = [j for j, st in enumerate(states) if st.kind in PROGRAM_KINDS]
    if ej is None or not rk or not pk or any(st.kind == "cache" for st in states) \
            or len(x) < 3:
        return g, 0.0
    slow = max((states[j] for j in pk), key=lambda st: st.mu)
    er = states[ej]
    # (The states' spreads understate a tail: the window is every pulse above the slowest
    # programs' centre, or with an erase posterior, below the erases' upper edge.)
    lo, hi = slow.mu, er.mu + 2.5 * er.sigma
    # Widths that tell the two apart (an SLC die's 0.3 ms programs, its 2 ms erases) keep their
    # say: a chain's last program, two programs long, waits for a page's data in after a cache
    # program, as short as an erase's command alone after a long pulse (a tuning draw moved 8
    # of its 0.5-0.8 ms programs to erases 1.6 octaves wider by the gap alone).
    dens = getattr(slow, "dens", None), getattr(er, "dens", None)
    apart = dens[0] is not None and dens[1] is not None \
        and float(np.sqrt(dens[0] * dens[1]).sum()) < ERASE_WIDTHS_APART
    gb = 2.0 ** np.concatenate([[np.nan], np.asarray(gap_after, dtype=float)[:-1]])
    ok = np.isfinite(gb)
    lk = pk + [ej]
    g0, g = g, g.copy()
    erases = float(g[:, ej].sum())
    # (The widths' own odds, before any gap judged: the second pass must not count a gap twice.)
    w_erase = g[:, ej] / np.maximum(g[:, ej] + g[:, pk].sum(axis=1), _FLOOR)
    for _ in range(2):  # (again with the pulses before each corrected)
        pr, pe, pp = g[:, rk].sum(axis=1), g[:, ej], g[:, pk].sum(axis=1)
        win = ok & ((x >= lo) | (pe > 0.01)) & (x <= hi) & (pe + pp > 0.5)
        judged = []
        for prev in (np.concatenate([[0.0], pr[:-1]]),
                     np.concatenate([[0.0], g[:-1][:, lk].sum(axis=1)])):
            ctx = ok & (prev > 0.9)
            ra, rb = gb[ctx & (pr > 0.9)], gb[ctx & (pp > 0.9) & (x < lo)]
            at = np.nonzero(win & ctx)[0]
            if not len(at):
                continue
            refs = _gap_groups(ra, rb)
            if refs is None:
                if len(at) > max(2, 0.02 * win.sum()):
                    # (Pulses of the window the gaps cannot judge: judging the rest alone would
                    # correct one side of the widths' errors and not the other.)
                    return g, erases - float(g[:, ej].sum())
                continue
            judged.append((at, refs))
        for at, (ma, sa, mb, sb) in judged:
            mass = pe[at] + pp[at]
            rr = _command_alone(gb[at], ma, sa, mb, sb, pe[at], mass, top=0.9999,
                                prior=w_erase[at] if apart else None)
            # The programs' share within their states in proportion, else to the slowest.
            keep = pp[at]
            one = np.eye(len(pk))[int(np.argmax([states[j].mu for j in pk]))]
            frac = np.where(keep[:, None] > 1e-12,
                            g[np.ix_(at, pk)] / np.maximum(keep[:, None], _FLOOR), one[None, :])
            g[np.ix_(at, pk)] = frac * (mass * (1 - rr))[:, None]
            g[at, ej] = mass * rr
    if cap is not None and float(g[:, ej].sum()) > max(cap, erases):
        # More erases than the programs can have filled blocks for, where the widths' reading
        # had fewer: the gaps misjudged (command times spread as far as a transfer, a read's
        # tail where the erases' gap should be). The widths' reading stands.
        return g0, 0.0
    return g, erases - float(g[:, ej].sum())


def _gap_groups(ra, rb):
    """Two groups of gaps (a command alone, a command and a page's data in): ``(ma, sa, mb,
    sb)``, their medians and robust spreads, when each has DATA_IN_MIN and they lie
    DATA_IN_STEP octaves and DATA_IN_SEPARATION pooled spreads apart; else None."""
    if len(ra) < DATA_IN_MIN or len(rb) < DATA_IN_MIN:
        return None
    ma, mb = float(np.median(ra)), float(np.median(rb))
    sa = max(1.4826 * float(np.median(np.abs(ra - ma))), 0.1)
    sb = max(1.4826 * float(np.median(np.abs(rb - mb))), 0.1)
    spread = math.sqrt((len(ra) * sa ** 2 + len(rb) * sb ** 2) / (len(ra) + len(rb)))
    if ma <= 0 or mb <= ma or math.log2(mb / ma) < DATA_IN_STEP \
            or (mb - ma) / spread < DATA_IN_SEPARATION:
        return None
    return ma, sa, mb, sb


def _command_alone(v, ma, sa, mb, sb, own, mass, top, prior=None):
    """Each gap ``v``'s posterior of the group of a command alone (normal, ``ma``, ``sa``)
    against a command and a page's data in (``mb``, ``sb``), the group's share fitted (EM, at
    most ``top``), or with ``prior`` (per gap: the widths' posterior) that prior's odds times
    the gaps' likelihood ratio. A gap more than 4 spreads from both groups (a pause, or a pulse
    before it misread) keeps the widths' reading, ``own / mass``."""
    # (A floor of 10⁻⁴ of the lower peak, for the share's fit.)
    floor = 1e-4 / (max(sa, sb) * math.sqrt(2 * math.pi))
    la = np.exp(-0.5 * ((v - ma) / sa) ** 2) / (sa * math.sqrt(2 * math.pi)) + floor
    lb = np.exp(-0.5 * ((v - mb) / sb) ** 2) / (sb * math.sqrt(2 * math.pi)) + floor
    if prior is not None:
        q = np.clip(np.asarray(prior, dtype=float), 0.0, 1.0)
        rr = q * la / np.maximum(q * la + (1 - q) * lb, _FLOOR)
    else:
        share = 0.1
        for _ in range(50):
            rr = share * la / (share * la + (1 - share) * lb)
            share = float(np.clip(rr.mean(), 1e-4, top))
    far = np.minimum(np.abs(v - ma) / sa, np.abs(v - mb) / sb) > 4.0
    return np.where(far, own / np.maximum(mass, _FLOOR), rr)


def _data_in_fit(gb, ok, prev_r, prev_l, reads, programs):
    """The line's command time, transfer and pooled robust spread (µs) from the median gaps of
    its confident ``reads`` and ``programs`` after a read and after a long pulse (groups of
    DATA_IN_MIN; at least two with different transfers), or None."""
    groups = []
    for before_read, prev in ((1, prev_r), (0, prev_l)):
        ctx = ok & (prev > 0.9)
        for own, sel in ((0, ctx & reads), (1, ctx & programs)):
            v = gb[sel]
            if len(v) >= DATA_IN_MIN:
                m_ = float(np.median(v))
                groups.append((before_read + own, m_, len(v),
                               1.4826 * float(np.median(np.abs(v - m_)))))
    if len({n_ for n_, *_ in groups}) < 2:
        return None
    wts = np.sqrt([c_ for _, _, c_, _ in groups])
    design = np.array([[1.0, n_] for n_, *_ in groups]) * wts[:, None]
    (command, transfer), *_ = np.linalg.lstsq(design, np.array([m_ for _, m_, _, _ in groups])
                                              * wts, rcond=None)
    spread = max(math.sqrt(sum(c_ * s_ ** 2 for _, _, c_, s_ in groups)
                           / sum(c_ for _, _, c_, _ in groups)), 0.1)
    return float(command), float(transfer), spread


def _waits_for_data_in(gb, sel, prev_r, prev_l, command, transfer, spread, alone=False):
    """Whether the pulses ``sel`` wait for a page's data in: after each kind of pulse with 10
    of them (DATA_IN_MIN after one kind at least), DATA_IN_WAITING of their gaps are nearer a
    program's than a read's, the two DATA_IN_STEP octaves and DATA_IN_SEPARATION spreads apart.
    (A read mode some of whose reads wait for the host after a program, half of them or so,
    and none after a read, is no program mode: a mode of programs waits nearly every time.)
    With ``alone``, the mirror: whether they wait for none (that share nearer a read's)."""
    shares = _waiting_shares(gb, sel, prev_r, prev_l, command, transfer, spread)
    if shares is None or not any(n >= DATA_IN_MIN for n, _, _ in shares):
        return False
    if alone:
        return all(1.0 - w >= DATA_IN_WAITING for _, w, _ in shares)
    # (After a long pulse, a read tail mixed into the mode dilutes it, and a read may wait for
    # the host there; after a read neither: with both kinds seen, a majority after long pulses
    # suffices.)
    both = len(shares) == 2
    return all(w >= (DATA_IN_OPEN if both and not after_read else DATA_IN_WAITING)
               for _, w, after_read in shares)


def _waits_unlike_reads(gb, sel, reads, prev_r, prev_l, command, transfer, spread):
    """Whether the pulses ``sel`` wait for a page's data in after reads where the other reads
    (``reads``) do not: DATA_IN_WAITING of their gaps after a read nearer a program's than a
    read's, and at most DATA_IN_CONTRAST of the other reads' (DATA_IN_MIN of each).

    A host that pauses between its reads delays every read alike; a mode that waits after reads
    where the reads of the other modes do not is another operation, a program as fast as the
    reads (an SLC cache's programs among a TLC drive's reads). After long pulses its share may
    fall short of DATA_IN_OPEN: a read tail as wide as the mode is diluted among few programs
    there, as the drive's reads follow its programs (a publishing draw of tlc-slc-cache at L0:
    1 415 of the mode's pulses after reads, 97.8 % waiting; 178 after long pulses, 39 %; the
    other reads 0 % after reads; the SLC programs counted as reads, −28 %)."""
    def after_read(pulses):  # (pulses after a read, their share waiting)
        shares = _waiting_shares(gb, pulses, prev_r, prev_l, command, transfer, spread)
        return next(((n, w) for n, w, after in shares or () if after), (0, 0.0))

    (n, w), (n_reads, w_reads) = after_read(sel), after_read(reads)
    return (min(n, n_reads) >= DATA_IN_MIN and w >= DATA_IN_WAITING
            and w_reads <= DATA_IN_CONTRAST)


def _waiting_shares(gb, sel, prev_r, prev_l, command, transfer, spread, apart=True):
    """``[(pulses, share of their gaps nearer a program's than a read's, after a read)]`` of
    the pulses ``sel``, after each kind of pulse (a read, a long one) with 10 of them; None
    where the two gaps to expect are not DATA_IN_STEP octaves and DATA_IN_SEPARATION spreads
    apart (with ``apart`` false: not one spread apart)."""
    out = []
    for before_read, prev in ((1, prev_r), (0, prev_l)):
        v = gb[sel & (prev > 0.9)]
        if len(v) < 10:
            continue
        ma = command + transfer * before_read
        mb = ma + transfer
        if ma <= 0 or transfer < spread:
            return None
        if apart and (math.log2(mb / ma) < DATA_IN_STEP or transfer / spread < DATA_IN_SEPARATION):
            return None
        out.append((len(v), float((np.abs(v - mb) < np.abs(v - ma)).mean()), before_read))
    return out


def _by_data_in_pass(g, states, rk, pk, gb, win, pr, pp, prev_r, prev_l, command, transfer,
                     spread, core):
    """One pass of :func:`_reads_by_data_in` over ``g`` (in place); ``core`` marks the pulses
    above the fastest program mode's centre."""
    for before_read, prev in ((1, prev_r), (0, prev_l)):
        # After each kind of pulse, a read's gap and a program's, one transfer apart.
        at = np.nonzero(win & (prev > 0.9))[0]
        ma = float(command + transfer * before_read)
        mb, sa, sb = ma + float(transfer), spread, spread
        if not len(at) or ma <= 0 or math.log2(mb / ma) < DATA_IN_STEP \
                or transfer / spread < DATA_IN_SEPARATION:
            continue
        v = gb[at]
        # Whether the fastest mode's programs wait for their data in (cache programs do not):
        # DATA_IN_CORE of the gaps of its pulses above its centre, where few reads reach, else
        # of the window (where the reads to find may be the most). (Not half: after long
        # pulses, a read tail as wide as SLC programs may be as many as they are there.)
        ref = gb[at[core[at]]]
        ref = ref if len(ref) >= DATA_IN_MIN else v
        if float((np.abs(ref - mb) < np.abs(ref - ma)).mean()) < DATA_IN_CORE:
            continue
        mass = pr[at] + pp[at]
        rr = _command_alone(v, ma, sa, mb, sb, pr[at], mass, top=0.9)
        # Within each kind, in proportion to its states' posteriors, else all to the state
        # nearest the window (the slowest read, the fastest program).
        for ks, keep, new, near in ((rk, pr[at], mass * rr, np.argmax),
                                    (pk, pp[at], mass * (1 - rr), np.argmin)):
            one = np.eye(len(ks))[int(near([states[j].mu for j in ks]))]
            frac = np.where(keep[:, None] > 1e-12,
                            g[np.ix_(at, ks)] / np.maximum(keep[:, None], _FLOOR), one[None, :])
            g[np.ix_(at, ks)] = frac * new[:, None]


def _erase_misfit(dies, erase_slack):
    """How far the dies' erases lie from those their programs imply (a block erased for each
    block filled), summed."""
    return sum(abs(d.erase_pulses - erases_implied(d.erase_cap, erase_slack))
               for d in dies.values() if d.erase_cap is not None)


def _line_erase_cap(fill, pages_per_block, erase_slack):
    """The structural cap on one line's erases: the blocks its ``fill`` program pages (in the
    geometry's pages) fill, with ``erase_slack``, and two for the blocks open at the ends."""
    return (1 + erase_slack) * fill / pages_per_block + 2


def _die_result(x, g, names, pj, ej, mj, sj, cbsy_hi, pages_per_block, erase_slack, mk=(),
                mult=None, planes=None, loads=None, single_plane=False, one_shot=None,
                gap_after=None, prog_range=None, cj=(), chain_gaps=False, emult=None):
    """Counts of one die from its posteriors ``g``, with the order rules applied.

    * A tDBSY pulse (multi-plane queueing, 80h…11h or 60h…D1h) announces the program or erase
      that follows: a short pulse right after one is not a read but the tCBSY of a cache
      program heading a chain (R/B# shows only tCBSY while the array programs), so it counts
      as a program pulse (``announced``).
    * Each program pulse writes one page plus one per tDBSY pulse queued right before it
      (``extra_pages``): Mp measured pulse by pulse.
    * Short pulses in the tCBSY range that nothing announces may be reads or cache programs
      (``ambiguous_short``); the WA engine keeps them in the interval when the capture shows
      cache programs.
    * ``mult`` gives each state's pages per plane (one-shot and two-pass modes write several):
      ``unit_pulses`` counts program pulses in single-page units.
    * With the idle time after each pulse (``gap_after``, log2 µs) and the program modes' width
      range (``prog_range``), a short pulse in the tCBSY range followed by an idle gap as long
      as a program, then a program or another such pulse, is a host-paced cache program
      (:func:`_host_paced`): it counts as a program pulse (``paced``).
    * A pulse of the tCBSY cluster (``cj``: the short state below the reads) right before a
      long program heads a back-to-back cache-program chain (80h…15h with the array idle: only
      tCBSY shows, then the next page's 15h or the 10h waits for the array): a program pulse
      (``heads``). Not on a word-line drive, whose short pulses there are data loads.
    """
    if mult is None:
        mult = np.ones(len(names))
    if one_shot and _announced_loads(x, g[:, pj].sum(axis=1), one_shot[0],
                                     bits=(one_shot[1],)) == one_shot[1]:
        # A stated word-line scheme, ``one_shot = (planes, pages loaded per plane)`` (the bits
        # per cell: a one-shot program loads its word line, and so does each pass of a two-pass
        # one), whose data loads show on R/B#: programs and erases by order (a part whose loads
        # show no busy keeps the widths).
        g = _word_line_parse(x, g, pj, ej, *one_shot, mult=mult)
    if mj and pj and gap_after is not None and len(x) > 2:
        g = _programs_by_data_in(g, pj, ej, mj, gap_after)
    pprog = g[:, pj].sum(axis=1)
    punit = (g[:, pj] * mult[pj]).sum(axis=1)
    pshort = g[:, sj].sum(axis=1) if sj else np.zeros(len(x))
    announced = np.zeros(len(x))
    extra = 0.0
    bits, runs = _load_runs(x, pprog, planes) if loads is None else (0, None)
    fixed_planes = 0
    if bits:
        # One-shot programs: the short pulses before each long program are its data loads
        # (1Ah) and plane queueing (11h), never cache-program heads; the operation writes one
        # page per short pulse and one more (planes × bits per cell). The order tells the
        # programs from the erases.
        g = _word_line_parse(x, g, pj, ej, planes, bits, mult=mult)
        pprog = g[:, pj].sum(axis=1)
        punit = (g[:, pj] * mult[pj]).sum(axis=1)
        runs = np.where(pprog > 0.5, runs, 0)
        extra = float((punit * runs).sum())
        mj = []
    if mj:
        pm = g[:, mj].sum(axis=1)
        if len(x) > 1 and pshort[0] > 0:
            # A capture that starts at power-on shows reset (FFh), then set features (EFh),
            # as short as a tDBSY: that pulse announces nothing.
            pm = pm.copy()
            pm[1] *= 1.0 - pshort[0]
        prev = np.concatenate([[0.0], pm[:-1]])
        short = x <= cbsy_hi
        plong = pprog[~short]
        if plong.sum() and (plong * prev[~short]).sum() > 0.9 * plong.sum():
            # Every program on this die is multi-plane (a tDBSY before it): a short pulse
            # without one is no cache program's head, whatever its width suggests (a trained
            # tCBSY distribution overlaps the reads).
            moved = pprog * (1 - prev) * short
            pprog = pprog - moved
            punit = punit * (1 - (1 - prev) * short)
            pshort = pshort + moved
        announced = pshort * prev
        long_p = pprog * (x > cbsy_hi)
        if single_plane and (long_p * prev).sum() <= 0.5 * long_p.sum():
            # A single-plane drive whose programs come without a tDBSY: a pulse as short as
            # one is something else (set features before a read retry, a reset), and the read
            # after it is no cache program's head.
            announced = np.zeros(len(x))
        b = _announced_loads(x, pprog, planes) if loads is None and planes and planes > 1 \
            else 0
        if b:
            # The one-shot signature: between two long programs, planes × b − 1 short pulses:
            # the word line's data loads (80h…1Ah) and the plane queueing, not cache-program
            # heads. The long program writes b pages in each of the planes.
            bits = b
            announced = np.zeros(len(x))
            parsed = _word_line_parse(x, g, pj, ej, planes, b, mult=mult)
            pprog = pprog + parsed[:, pj].sum(axis=1) - g[:, pj].sum(axis=1)
            g = parsed
            punit = pprog * b
            fixed_planes = planes
        # (Clipped: the sums may round a hair past 1, and 1 − p feeds a variance.)
        pprog = np.clip(pprog + announced, 0.0, 1.0)
        punit = punit + announced
        # Expected run of tDBSY pulses right before each pulse: R(i) = pm(i-1) (1 + R(i-1)).
        run = np.zeros(len(x))
        acc = 0.0
        for i in range(1, len(x)):  # a short recurrence; vectorising it buys little
            acc = prev[i] * (1.0 + acc)
            run[i] = acc
        if fixed_planes:
            run = np.full(len(x), fixed_planes - 1.0)  # loads may pass for tDBSY: Mp planes
        extra = float((punit * run).sum())
    paced = np.zeros(len(x))
    result_paced_open = 0.0
    if gap_after is not None and prog_range is not None and not bits:
        pend = pprog + (g[:, ej] if ej is not None else 0.0)
        paced, paced_open = _host_paced(x, pprog, pshort * (1 - np.clip(announced, 0.0, 1.0)),
                                        gap_after, prog_range, cbsy_hi, unanchored=True,
                                        plong=pend)
        result_paced_open = float(paced_open.sum())
        pprog = np.clip(pprog + paced, 0.0, 1.0)
        punit = punit + paced
        announced = announced + paced
    heads = np.zeros(len(x))
    narrow_heads = 0.0
    if (cj or chain_gaps) and not bits and one_shot is None and len(x) > 1:
        # By the gaps where a tCBSY cluster below the reads shows chains, or where the line
        # shows no suspension (a read before a resume is one transfer from it, like a head);
        # else by the cluster alone.
        free = np.clip(1 - np.clip(announced, 0.0, 1.0), 0.0, 1.0) * (x <= cbsy_hi)
        nxt = np.concatenate([(pprog * (x > cbsy_hi))[1:], [0.0]])
        pc = (g[:, list(cj)].sum(axis=1) if cj else np.zeros(len(x))) * free
        by_gap = None
        if gap_after is not None and (chain_gaps or float((pc * nxt).sum()) >= CHAIN_GAP_GROUP):
            by_gap = _chain_head_gaps(pshort * free, nxt, gap_after, x)
        heads = (pshort * free * by_gap if by_gap is not None else pc) * nxt
        narrow = _heads_below_reads(x, pshort * free, nxt, heads)
        narrow_heads = float(narrow.sum())
        heads = heads + narrow
        pprog = np.clip(pprog + heads, 0.0, 1.0)
        punit = punit + heads
        announced = announced + heads
    ambiguous = float((pshort * (1 - announced) * (x <= cbsy_hi)).sum())
    # A cache-program chain ends with a 10h program; on a die whose programs are multi-plane
    # only the chains of single-plane programs (unannounced long programs) can hide a head.
    plong = g[:, pj].sum(axis=1)
    if mj:
        ambiguous = min(ambiguous, float((plong * (1 - prev)).sum()))
    cap = None
    if pages_per_block:
        fill = punit if emult is None else punit + (g[:, pj] * (emult[pj] - mult[pj])).sum(axis=1)
        cap = _line_erase_cap(float(fill.sum()), pages_per_block, erase_slack)
    expected = {n: float(g[:, j].sum()) for j, n in enumerate(names)}
    eu2 = (g[:, pj] * mult[pj] ** 2).sum(axis=1) + announced
    vu = float(np.maximum(eu2 - punit ** 2, 0.0).sum())
    result = DieResult(int(len(x)), expected, float(pprog.sum()),
                     float(np.maximum(pprog * (1 - pprog), 0.0).sum()), float(g[:, ej].sum()),
                     extra, cap,
                     float(announced.sum()), ambiguous,
                     float(np.minimum(pprog, 1 - pprog).sum()),
                     float(g[:, list(mk)].sum()) if mk else 0.0,
                     float(punit.sum()), vu)
    result.load_bits = bits
    result.paced = float(paced.sum())
    result.paced_open = result_paced_open
    result.heads = float(heads.sum())
    result.narrow_heads = narrow_heads
    return result


def _trained_states(trained, grid, hints, by_order=False):
    """Fixed emission states from a :class:`~rbscope.analysis.trained.TrainedClassifier` on
    ``grid``.

    Each class's labelled widths, smoothed like a learned state's, with a faint floor half an
    octave around them (a width a little beyond the training still belongs somewhere). An erase
    state is seeded from the hints when the labels held no erase. With ``by_order`` (the pulses'
    order and idle gaps known), a cache-program class of tCBSY widths joins the short pulses.
    """
    states = []
    cbsy_hi = math.log2(TCBSY_US[1])
    for t in trained.states:
        lo, hi = t.range_log2
        st = State(t.name, t.kind, 0.0, 0.0, (lo - 0.5, hi + 0.5), fixed=True)
        idx = np.arange(len(t.counts)) + t.first_bin - round(grid.lo * BINS_PER_OCTAVE)
        h = np.bincount(np.clip(idx, 0, grid.n - 1), weights=t.counts.astype(float),
                        minlength=grid.n)
        c = grid.centres()
        st.mu = float((h * c).sum() / h.sum())
        st.sigma = max(float(np.sqrt((h * (c - st.mu) ** 2).sum() / h.sum())), _SIGMA_MIN)
        st._limit(grid, np.convolve(h, grid.kernel, mode="same") + 1e-4 * h.sum() / grid.n)
        if by_order and t.kind == "cache_program" and \
                (h * (c <= cbsy_hi)).sum() >= PACED_TRAINED * h.sum():
            # Cache programs whose busy is only tCBSY (host-paced: the array works while R/B#
            # is high) overlap the reads, and a share fitted to two overlapping densities moves
            # by hundreds of pulses when either shifts a little (another die, another tick):
            # +2 to +5 % on tuning draws. They join the short pulses, which the order rules
            # tell apart by the idle gaps around them (host-paced chains), as untrained.
            st.kind = "read"
        states.append(st)
    if not any(s.kind == "erase" for s in states):
        elo, ehi = (math.log2(v) for v in hints["erase"])
        # Too few labelled erases to train one: the erases are slower than the trained
        # programs (a hint spanning the programs' widths would take programs as erases).
        top = max((s.mu + s.sigma for s in states if s.kind in PROGRAM_KINDS), default=elo)
        if elo < top < ehi - 0.5:
            elo = top
        st = State("erase", "erase", 0.5 * (elo + ehi), max(_SIGMA_MIN, (ehi - elo) / 4),
                   (elo - 0.1, ehi + 0.1))
        st.seed(grid)
        states.append(st)
    return states


def classify(pulses, tick_seconds, *, pages_per_block=None, hints=None, page_types=None,
             balance="auto", erase_slack=None, train_pulses=20000, iterations=100,
             hmm_iterations=0, ordered=True, trained=None, scheme=None, bits=None,
             erase_floor=None, planes=None, read_max="hints", starts=None, open_gaps=None,
             _erase_in_last=False, _split_floor=None, _order_pulses=0.0,
             _balance_dropped=False):
    """Classify each die's pulses with a constrained mixture / hidden-Markov model.

    Parameters
    ----------
    pulses : dict of key to sequence of int
        Per die (or probed line) the widths of its measured pulses in ticks, in order.
    starts : dict of key to sequence of int, optional
        The pulses' start ticks (``Measurement.pulse_starts``): the idle time between pulses
        tells host-paced cache programs from reads (:func:`_host_paced`).
    open_gaps : dict of key to sequence of int, optional
        Per die, the indices of the pulses whose idle time before them spans pulses not in
        ``pulses`` (``Measurement.pulse_gaps_open``: a summarised run's middle, records lost):
        that time is not one gap, and no rule reads it.
    tick_seconds : float
    pages_per_block : int, optional
        Enables the structural cap on erases (``programs ÷ pages_per_block``).
    hints : dict of str to (float, float), optional
        Operation time ranges in µs (``program``, ``erase``, ``read``, …); defaults
        :data:`SEQUENCE_HINTS`.
    page_types : int, optional
        Number of program page types (1 SLC, 2 MLC, 3 TLC); default: the clusters found.
    balance : bool or "auto"
        Hold the page types to equal counts (the page order of a block programs each type
        equally often). ``"auto"``: when 2 or 3 program clusters are found whose counts are
        within 50 % of each other (the erase seed counted with its nearest program state).
    erase_slack : float, optional
        Relative slack of the erase cap (default :data:`ERASE_SLACK`).
    train_pulses : int
        Fit the emissions on at most this many pulses per die (the posteriors use all).
    iterations, hmm_iterations : int
        EM iterations of the constrained mixture, then Baum–Welch iterations of the
        hidden-Markov model seeded by it (0: the mixture's posteriors).
    ordered : bool
        The widths are in pulse order (False for widths rebuilt from histograms: no order rule
        is applied).
    trained : rbscope.analysis.trained.TrainedClassifier, optional
        Class width distributions learned from labelled pulses (the opcode tap's): they replace
        the clusters found in the data as fixed emission densities (page types held equal as
        usual when the training found 2 or 3; the erase cap and the tDBSY rules apply).
    scheme : str, optional
        The program scheme (``"page"``, ``"one-shot"``, ``"two-pass"``) when the user knows it:
        it fixes the number of program modes with ``bits`` and the pages each writes.
    bits : int, optional
        Bits per cell, when known.
    planes : int, optional
        Planes per program operation (Mp): with it, the one-shot signature (each long program
        after ``planes × bits − 1`` short pulses) is looked for when the scheme is not stated.
    read_max : float, None or "hints"
        tR max (µs), a datasheet's bound: no read is longer, and the short/long split is the
        emptiest place below it. ``"hints"``: the read hint's upper end; ``None``: no such
        bound (a published typical range, which reads may pass: the split is then halfway to
        the programs).
    erase_floor : float
        (Default :data:`~rbscope.analysis.geometry.ERASE_FLOOR`.) With ``pages_per_block``: the
        erases are held to at least this share of
        ``programs ÷ pages_per_block`` (less two per line for the blocks open at the start),
        where the widths allow (a block is erased before it is filled).

    Returns
    -------
    SequenceResult
    """
    if erase_slack is None:
        erase_slack = ERASE_SLACK
    if erase_floor is None:
        erase_floor = ERASE_FLOOR
    if not tick_seconds > 0:
        raise SequenceError(f"tick must be positive, not {tick_seconds!r}")
    # The short classes are named by the default hints; program and erase times only by what
    # the user gave (level L1): at L0 the program modes and the erase come from the data.
    h = {k: v for k, v in SEQUENCE_HINTS.items() if k not in ("program", "erase")}
    if hints:
        h.update({k: v for k, v in hints.items() if k in SEQUENCE_HINTS})
    e_top = math.log2(h["erase"][1]) if "erase" in h else -math.inf
    tick_us = tick_seconds * 1e6
    keys = [k for k, w in pulses.items() if len(w)]
    if not keys:
        raise SequenceError("no per-pulse widths: sequence-aware classification needs the "
                            "pulse sequence (import a recording or capture with traces)")
    seqs = []
    gaps = {} if starts is not None and all(len(starts.get(k, ())) == len(pulses[k])
                                            for k in keys) else None
    for k in keys:
        w = np.asarray(pulses[k], dtype=float)
        if (w <= 0).any():
            raise SequenceError(f"line {k}: pulse widths must be positive ticks")
        seqs.append(np.log2(w * tick_us))
        if gaps is not None:
            # Idle time after each pulse (log2 µs; the last pulse's is unknown).
            st = np.asarray(starts[k], dtype=float)
            idle = np.append(st[1:] - (st[:-1] + w[:-1]), np.nan) * tick_us
            with np.errstate(divide="ignore", invalid="ignore"):
                gaps[k] = np.where(idle > 0, np.log2(np.where(idle > 0, idle, 1.0)), -np.inf)
            gaps[k][-1] = np.nan
            at = np.asarray((open_gaps or {}).get(k, ()), dtype=np.int64)
            if at.size:
                gaps[k][at - 1] = np.nan
    total = sum(s.size for s in seqs)
    if total < 50:
        raise SequenceError(f"only {total} pulses: too few for sequence-aware classification")
    allx = np.concatenate(seqs)
    if trained is not None:
        lo = min([float(allx.min())] + [t.range_log2[0] for t in trained.states])
        hi = max([float(allx.max()), e_top] + [t.range_log2[1] for t in trained.states])
        grid = _Grid(lo - 1.0, hi + 1.0)
        states = _trained_states(trained, grid, {"erase": SEQUENCE_HINTS["erase"], **h},
                                 by_order=ordered and gaps is not None)
        if scheme in ("one-shot", "two-pass"):
            # The trained program modes of a word-line scheme: those slower than a page program
            # write bits (one-shot) or bits / 2 (two-pass) pages per plane; faster ones are
            # SLC-mode programs.
            per = bits if scheme == "one-shot" else (bits or 2) / 2
            for st in states:
                if st.kind == "program":
                    if st.center_us >= WORDLINE_US:
                        st.pages = per
                    else:
                        st.kind = "program_slc"
    else:
        states = _initial_states(allx, h, page_types, scheme=scheme, bits=bits,
                                 erase_in_last=_erase_in_last, pages_per_block=pages_per_block,
                                 split_floor=_split_floor,
                                 read_max=(hints["read"][1] if hints and "read" in hints
                                           else None) if read_max == "hints" else read_max)
        grid = _Grid(float(allx.min()) - 0.5, max(float(allx.max()), e_top) + 1.0)
    for st in states:
        if st.dens is None:
            st.seed(grid)
    kinds = [st.kind for st in states]
    names = [st.name for st in states]
    K = len(states)
    # Program pulses: the page types ("program", held to equal counts) and a trained
    # classifier's cache programs (counted, not balanced).
    pj = [j for j, kd in enumerate(kinds) if kd in PROGRAM_KINDS]
    pt = [j for j, kd in enumerate(kinds) if kd == "program"]
    ej = kinds.index("erase")
    mult = np.array([st.pages for st in states])
    # Block fill per program pulse, in the geometry's pages: an SLC-mode block holds a word
    # line's one page per cell, pages_per_block ÷ bits, so an SLC-mode program fills `bits`
    # times its share (the erase cap and floor of an SLC-cached drive count its SLC blocks).
    emult = mult.astype(float).copy()
    if bits:
        for j, st in enumerate(states):
            if st.kind == "program_slc":
                emult[j] = float(bits)
    train = [grid.index(s[:train_pulses]) for s in seqs]
    # The mixture works on bin counts: every pulse of a bin has the same posterior.
    hist = np.bincount(np.concatenate([grid.index(s) for s in seqs]), minlength=grid.n)
    hist = hist.astype(float)
    occupied = np.nonzero(hist)[0]
    hc = hist[occupied]
    b = _emissions(occupied, states)
    weights = np.bincount(np.argmax(b, axis=1), weights=hc, minlength=K) + 1.0
    if balance == "auto" and pt:
        # Seeds split the overlap of the slowest page type and the erases arbitrarily: count
        # the erase seed with its nearest program state before comparing the page types.
        pc = weights[pt].copy()
        pc[int(np.argmin([abs(states[j].mu - states[ej].mu) for j in pt]))] += weights[ej]
        if scheme is None or (scheme == "page" and bits is None):
            balance = 2 <= len(pt) <= 4 and pc.max() <= 1.5 * pc.min()
        else:
            # The cell and scheme say how many modes the page order makes: equal counts.
            balance = len(pt) >= 2
    balance = bool(balance and len(pt) > 1)
    if pages_per_block:
        weights[ej] = max(1.0, (weights[pj] * emult[pj]).sum() / pages_per_block)
    weights /= weights.sum()
    f = np.ones(K)
    capped = False
    n_dies = len(seqs)

    def blocks(counts):
        # (With the short pulses the order rules count as programs, cache programs whose
        # R/B# shows only tCBSY: they fill blocks too. Known only after a first fit.)
        return ((counts[pj] * emult[pj]).sum() + _order_pulses) / pages_per_block

    def cap_for(counts):
        if not pages_per_block:
            return None
        return (1 + erase_slack) * blocks(counts) + 2 * n_dies

    def floor_for(counts):
        if not pages_per_block or not erase_floor:
            return None
        return erase_floor_of(blocks(counts), n_dies, erase_floor)

    it = 0
    for it in range(1, iterations + 1):  # noqa: B007 (reported)
        b = _emissions(occupied, states)
        g, f, hit = _project(b, hc, weights, f, kinds, cap_for, balance, floor_for=floor_for)
        capped = capped or hit
        old = np.stack([st.dens for st in states])
        for j, st in enumerate(states):
            st.update(grid, occupied, g[:, j] * hc)
        # The weights follow the projected posteriors (a constrained M-step); f then only
        # carries what the next E-step still needs to meet the structure.
        weights = (g * hc[:, None]).sum(axis=0) / hc.sum()
        f = np.ones(K)
        if np.abs(np.stack([st.dens for st in states]) - old).max() < 1e-6:
            break
    b = _emissions(occupied, states)
    f = np.ones(K)
    g, f, hit = _project(b, hc, weights, f, kinds, cap_for, balance, floor_for=floor_for)
    capped = capped or hit
    counts = (g * hc[:, None]).sum(axis=0)
    fitted = counts  # (every pulse's; the HMM's counts below are its training pulses')
    cap = cap_for(counts)
    if (cap is not None and counts[ej] > 1.5 * cap and trained is None and not _erase_in_last
            and page_types is None):
        # The cap could not hold: no program mode reaches the widths the erase state holds, so
        # a program mode hides under the erase cluster (upper pages as slow as the erases).
        # Restructure: the slowest cluster is a program mode, the erases in and above it.
        result = classify(pulses, tick_seconds, pages_per_block=pages_per_block, hints=hints,
                          read_max=read_max,
                          page_types=page_types, balance=balance if balance is not True else
                          "auto", erase_slack=erase_slack, train_pulses=train_pulses,
                          iterations=iterations, hmm_iterations=hmm_iterations,
                          ordered=ordered, trained=trained, scheme=scheme, bits=bits,
                          erase_floor=erase_floor, planes=planes, starts=starts,
                          open_gaps=open_gaps,
                          _erase_in_last=True, _split_floor=_split_floor)
        result.notes.insert(0, f"{counts[ej]:,.0f} pulses fitted the erase state, "
                               f"{counts[ej] / max(cap, 1e-9):.1f} × the structural cap "
                               f"(programs ÷ pages per block): a program mode hid under the "
                               f"erase cluster, and the model was rebuilt with one there")
        return result
    if balance and cap is not None and counts[ej] > 1.05 * cap:
        # Equal page types and the erase cap cannot both hold: the widths do not keep the page
        # order (cache-program chains shift each pulse to the previous page's program time and
        # double the last one). Keep the cap, drop the balance.
        result = classify(pulses, tick_seconds, pages_per_block=pages_per_block, hints=hints,
                          read_max=read_max,
                          page_types=page_types, balance=False, erase_slack=erase_slack,
                          train_pulses=train_pulses, iterations=iterations,
                          hmm_iterations=hmm_iterations, ordered=ordered, trained=trained,
                          scheme=scheme, bits=bits, erase_floor=erase_floor, planes=planes,
                          starts=starts, open_gaps=open_gaps,
                          _erase_in_last=_erase_in_last,
                          _split_floor=_split_floor, _order_pulses=_order_pulses,
                          _balance_dropped=True)
        note = ("equal page types conflict with the erase cap (cache-program chains, or page "
                "types whose widths overlap in their tails): page types not balanced")
        if not result.balanced and note not in result.notes:
            # (A refit below, with more blocks filled, may have balanced them after all.)
            result.notes.append(note)
        return result
    A = np.tile(weights, (K, 1))
    pi = weights.copy()
    if hmm_iterations:
        pidx, mask = _pad(train)
        for _ in range(hmm_iterations):
            gamma, xi = _forward_backward(pidx, mask, states, A, pi, f)
            g = gamma[mask]
            counts = g.sum(axis=0)
            r, hit = _targets(counts, kinds, cap=cap_for(counts), balance=balance)
            f = np.maximum(f * r / (f * r).max(), _F_MIN)
            capped = capped or hit
            for j, st in enumerate(states):
                st.update(grid, pidx[mask], g[:, j])
            A = xi + 1e-6
            A /= A.sum(axis=1, keepdims=True)
            pi = gamma[0][mask[0]].sum(axis=0) + 1e-6
            pi /= pi.sum()
    # With a word-line scheme stated, the short pulses are data loads and plane queueing: no
    # cache-program heads, no pages counted from them (Mp planes per operation).
    word_line = scheme in ("one-shot", "two-pass")
    # A stated word-line scheme whose loads may show on R/B#: ``(planes, pages loaded per plane
    # before each long program)``. One-shot: the bits per cell, every page of the word line. A
    # two-pass pulse writes half of them, but each pass loads them all (the fine pass programs
    # every page again): planes × bits − 1 short pulses before it, as before a one-shot one.
    word_line_loads = None
    if ordered and pj and max(mult[pj]) > 1:
        if scheme == "one-shot":
            word_line_loads = (planes or 1, int(max(mult[pj])))
        elif scheme == "two-pass" and bits:
            word_line_loads = (planes or 1, int(bits))
    # Posteriors on every pulse, die by die (bounded memory).
    dies = {}
    notes = []
    mk = [j for j, kd in enumerate(kinds) if kd == "multiplane"]
    mj = mk if ordered else []
    sj = [j for j, kd in enumerate(kinds) if kd in ("read", "cache", "other")]
    cj = [j for j, kd in enumerate(kinds) if kd == "cache"] if ordered else []
    cbsy_hi = math.log2(TCBSY_US[1])
    suspended = {}
    def posteriors(s):
        sidx = grid.index(s)
        if hmm_iterations:
            pidx, mask = _pad([sidx])
            return _forward_backward(pidx, mask, states, A, pi, f, want_xi=False)[0][:, 0, :]
        g = _emissions(sidx, states) * (weights * f)
        return g / g.sum(axis=1, keepdims=True)

    reads_cut = (_reads_cut(keys, seqs, posteriors, states, mk)
                 if ordered and trained is None and _split_floor is None else [])
    if reads_cut:
        # SLC-mode modes that no tDBSY announces on a drive whose programs it announces (on
        # most of their pulses' lines): the split cut the reads' tail off. Rebuilt with the
        # split above them, so that the program modes and the erases are fitted without them.
        top = max(states[j].mu + 3.0 * states[j].sigma for j in reads_cut)
        lowest_main = min(st.mu - 2.0 * st.sigma for st in states if st.kind == "program")
        if top < lowest_main:
            shown = ", ".join(f"{states[j].center_us:,.0f} µs" for j in reads_cut)
            result = classify(pulses, tick_seconds, pages_per_block=pages_per_block,
                              hints=hints, read_max=read_max, page_types=page_types,
                              balance=balance, erase_slack=erase_slack,
                              train_pulses=train_pulses, iterations=iterations,
                              hmm_iterations=hmm_iterations, ordered=ordered, trained=trained,
                              scheme=scheme, bits=bits, erase_floor=erase_floor, planes=planes,
                              starts=starts, open_gaps=open_gaps,
                              _erase_in_last=_erase_in_last, _split_floor=top)
            result.notes.insert(0, f"a program mode at {shown} that no tDBSY announces, on a "
                                   f"drive whose programs follow one, is the reads' tail: the "
                                   f"split between reads and programs moved above it "
                                   f"({2.0 ** top:,.0f} µs) and the model was rebuilt")
            return result
    # Suspended operations: candidates on every line first (the posteriors are recomputed
    # below, so that memory stays one line's), then one suspended share for the drive, used
    # only when it explains the pulses clearly better than none.
    cands = {}
    suspect = {}
    share = 0.0  # the joined share by widths; None: the gaps name the resumes (resume_q)
    resume_q = {}
    # A tapped channel that saw no resume (trained.resumes == 0: every long pulse labelled by
    # its own confirm) says the drive did not suspend: long pulses around reads are whole
    # operations (an SLC cache's programs, folding reads), none joined, none left open.
    may_suspend = trained is None or getattr(trained, "resumes", None) != 0
    if trained is not None and not may_suspend and ordered:
        notes.append("no suspended operation on the tapped channel (no resume among its "
                     "labelled pulses): long pulses are whole operations, none joined")
    if ordered and may_suspend:
        gap_cands = {}
        for k, s in zip(keys, seqs, strict=True):
            gs = posteriors(s)
            cands[k] = _suspend_pairs(s, gs, states, weights * f, grid)
            if gaps is not None:
                # (The gaps see further: a read retried three times is six reads.)
                gap_cands[k] = _suspend_pairs(s, gs, states, weights * f, grid,
                                              max_reads=RESUME_MAX_READS, gap_after=gaps[k])
        live = [c for c in cands.values() if c is not None]
        live_g = [c for c in gap_cands.values() if c is not None]
        share, gain = _suspend_share(live)
        n_long = sum(counts[j] for j, kd in enumerate(kinds)
                     if kd in PROGRAM_KINDS + ("erase",))
        joins = sum(float((share * c[1] / (share * c[1] + (1 - share) * c[2])).sum())
                    for c in live) if share else 0.0
        by_gap, gap_note = _resume_gaps(live_g) if live_g else (None, "")
        if by_gap is not None:
            # The gaps name the resumes (evidence of their own, whatever the widths gain): each
            # pair joined by its gap's group and its widths, no cap.
            live_keys = [k for k, c in gap_cands.items() if c is not None]
            resume_q = dict(zip(live_keys, by_gap, strict=True))
            cands = gap_cands
            notes.append(f"resumes told from new operations by the idle gap before them "
                         f"({gap_note})")
            share = None
        elif gain >= SUSPEND_GAIN * (1 + len(keys)) and joins > SUSPEND_MAX * n_long:
            # More joins than suspension makes (one long operation in four): the pairs are the
            # drive's rhythm (SLC programs, folding reads, programs), or suspension so heavy
            # that the model cannot tell. Joined: none; in the interval: all of them.
            suspect = {k: float((share * c[1] / (share * c[1] + (1 - share) * c[2])).sum())
                       for k, c in cands.items() if c is not None}
            share = 0.0
        elif gain < SUSPEND_GAIN * (1 + len(keys)):
            share = 0.0  # too little evidence
    # The program modes' width range, for the silences a host-paced cache program leaves: the
    # modes that hold PACED_MODE_MIN of the programs (a publishing draw of slc-seq-cache at L1:
    # three cache-program pulses made a 55 µs mode, every read was followed by a silence that
    # long, and all 338 reads became host-paced cache programs, +63 %).
    prog_n = [counts[j] for j, st in enumerate(states) if st.kind == "program"]
    ps_ = [st for j, st in enumerate(states) if st.kind == "program"
           and counts[j] >= PACED_MODE_MIN * sum(prog_n)]
    prog_range = ((min(st.mu - 2.5 * st.sigma for st in ps_),
                   max(st.mu - 2.0 * st.sigma for st in ps_),
                   max(st.mu + 2.5 * st.sigma for st in ps_) + 1.0)
                  if len(ps_) > 1 and gaps is not None and ordered else None)
    by_data_in, read_modes, erases_by_data_in, gap_moved, modes_alone = {}, {}, {}, {}, {}
    modes_open = {}
    for k, s in zip(keys, seqs, strict=True):
        g = posteriors(s)
        c = cands.get(k)
        slack = var = None
        if share is None and c is not None:
            # A resume (by its gap) joins the long pulse before it when the widths make that
            # its first piece (else the first piece was short enough to pass for a read).
            r, wr = resume_q[k], c[8]
            q = r * wr
            g, suspended[k] = _join_suspended(g, states, c, q)
            # What the pulses leave open: every resume joined to the long pulse before it (more
            # joins), or none of the joins: whether that pulse is the resume's first piece or a
            # whole operation (the first piece then short enough to pass for a read) neither the
            # widths nor the gaps decide (on the zoo's tuning draws the joins' count is off by
            # up to 5 % of the programs either way).
            # The gaps' two groups are fitted as normals, and their tails overlap: a resume
            # whose gap lies between them (r neither about 0 nor 1) may be one the fit left out
            # (a publishing draw of mlc-read-retry at L1: resumes 34-40 µs after the reads, new
            # operations from 42 µs, r 0.2-0.8; 42 of 234 rests counted as programs, +4.8 %,
            # the interval's lower end 0.2 % above the truth). Those, as far as the widths make
            # them one operation, are more joins the pulses allow.
            between = (r >= RESUME_GAP_BETWEEN) & (r <= 1 - RESUME_GAP_BETWEEN)
            slack = (float((r * (1 - wr)).sum() + ((1 - r) * wr)[between].sum()),
                     float(q.sum()))
            var = float((q * (1 - q)).sum())
        elif share and c is not None:
            g, suspended[k] = _join_suspended(g, states, c,
                                              share * c[1] / (share * c[1] + (1 - share) * c[2]))
        # Chain heads by the gaps only on a line without suspension (joins under
        # CHAIN_GAP_JOINS of its programs): a read before a resume is one transfer from it,
        # like a head (the heads' shorter widths guard that too). Reads by the data in only
        # where joins stay under 1 %: a resume waits for no data in, like a
        # read, and a program's rest whose first piece passed for a read would be lost.
        joined, n_prog = suspended.get(k, 0.0), float(g[:, pj].sum())
        no_suspension, few_joins = (share == 0.0 or (share is None and joined
                                                     < max(1.0, frac * n_prog))
                                    for frac in (CHAIN_GAP_JOINS, 0.01))
        if ordered and gaps is not None and not word_line:
            # (Where suspension may hide, only a read state waiting for data in as a whole: a
            # resume waits for none.)
            widths = few_joins and k not in suspect
            alone = ()
            if widths:
                g, alone, modes_alone[k] = _modes_alone(s, g, states, gaps[k])
            g, by_data_in[k], read_modes[k], modes_open[k] = _reads_by_data_in(
                s, g, states, gaps[k], widths=widths, skip=alone)
            if few_joins and k not in suspect and trained is None:
                # (A trained erase state has the labels' widths: the gaps' reading of a trained
                # line moved, on the zoo's tuning draws, as many pulses wrong as right.)
                before = g[:, ej].copy()
                cap = _line_erase_cap(float((g[:, pj] * emult[pj]).sum()), pages_per_block,
                                      erase_slack) if pages_per_block else None
                g, erases_by_data_in[k] = _erases_by_data_in(s, g, states, gaps[k], cap=cap)
                gap_moved[k] = float(np.abs(g[:, ej] - before).sum())  # (both ways)
        chain_gaps = ordered and not word_line and k not in suspect and no_suspension
        dies[k] = _die_result(s, g, names, pj, ej, [] if word_line else mj, sj,
                              cbsy_hi, pages_per_block, erase_slack, mk, mult,
                              planes=planes if ordered and scheme is None else None,
                              single_plane=planes == 1,
                              one_shot=word_line_loads,
                              gap_after=None if gaps is None else gaps[k],
                              prog_range=prog_range, cj=[] if word_line else cj, emult=emult,
                              chain_gaps=chain_gaps)
        dies[k].gap_moved = gap_moved.get(k, 0.0)
        if cj and not word_line and dies[k].heads >= 1.0:
            # (A publishing draw of slc-seq-cache, 1532 at L0: 8 chain pulses of 60-120 µs and
            # 5 reads of its tail made a read state at 67 µs beside the reads' at 23 µs, and the
            # value was decided 1.3 % low; a tuning draw's 21 chain pulses made one at 12 µs.)
            rk_ = [j for j, st in enumerate(states) if st.kind == "read"]
            if len(rk_) > 1:
                main_r = max(rk_, key=lambda j: float(g[:, j].sum()))
                dies[k].side_reads = float(g[:, [j for j in rk_ if j != main_r]].sum())
        dies[k].read_modes_open = modes_open.get(k, 0.0)
        dies[k].slc_programs = read_modes.get(k, 0.0) + float(sum(
            g[:, j].sum() for j, st in enumerate(states) if st.kind == "program_slc"))
        if bits and read_modes.get(k) and dies[k].erase_cap is not None:
            # The read-width programs that waited for their data in are SLC-mode programs: a
            # word line's one page fills a block's share of `bits` pages.
            dies[k].erase_cap += (1 + erase_slack) * read_modes[k] * (bits - 1) / pages_per_block
        if ordered and not share and may_suspend:
            # (None joined by widths, or joined by the gaps.)
            dies[k].resumable = _resumable(g, states)
        if share is None:
            dies[k].resume_slack, dies[k].resume_var = slack or (0.0, 0.0), var or 0.0
    for k, w in pulses.items():  # lines without a pulse: nothing programmed there
        if not len(w):
            dies[k] = DieResult(0, {n: 0.0 for n in names}, 0.0, 0.0, 0.0, 0.0,
                                2.0 if pages_per_block else None)
    e_now = sum(d.erase_pulses for d in dies.values())
    cap_now = sum(d.erase_cap or 0.0 for d in dies.values())
    # Short pulses the order rules count as programs, in pages of a block: cache programs
    # (R/B# shows only tCBSY), and read-width programs that waited for their data in on a
    # multi-bit cell (SLC-mode programs: each fills a block's share of ``bits`` pages).
    order = sum(d.announced for d in dies.values())
    slc_pages = sum(read_modes.values()) * bits if bits and bits > 1 else 0.0
    if (pages_per_block and erase_floor and not _order_pulses and trained is None
            and order + slc_pages >= ORDER_REFIT * max(
                1.0, sum(d.program_pulses for d in dies.values()))
            and e_now < erase_floor * (blocks(fitted) + (order + slc_pages) / pages_per_block)
            - 2 * n_dies - 1.0):
        # Programs the pulse order found among the short pulses (cache programs: R/B# shows
        # only tCBSY) fill blocks as the long ones do, but the fit's erase floor counted only
        # the long ones: erases as slow as the slowest page type were left as programs.
        # Refitted with them in the floor and the cap.
        # (Page types unbalanced for a cap that left these out are balanced again if they can.)
        result = classify(pulses, tick_seconds, pages_per_block=pages_per_block, hints=hints,
                          read_max=read_max, page_types=page_types,
                          balance="auto" if _balance_dropped else balance,
                          erase_slack=erase_slack, train_pulses=train_pulses,
                          iterations=iterations, hmm_iterations=hmm_iterations,
                          ordered=ordered, trained=trained, scheme=scheme, bits=bits,
                          erase_floor=erase_floor, planes=planes, starts=starts,
                          open_gaps=open_gaps,
                          _erase_in_last=_erase_in_last, _split_floor=_split_floor,
                          _order_pulses=order + slc_pages)
        what = " and ".join(x for x in (
            f"{order:,.0f} short pulses the pulse order counts as programs (cache programs)"
            if order else "",
            f"{sum(read_modes.values()):,.0f} read-width pulses that waited for their data in "
            f"(SLC-mode programs, {bits} pages of a block's each)" if slc_pages else "") if x)
        result.notes.insert(0, f"{what} fill blocks too: the erase floor and cap (programs ÷ "
                               f"pages per block) count them, and the model was refitted "
                               f"({e_now:,.0f} erases before)")
        return result
    if capped and 0.95 * cap_now <= e_now <= 1.05 * cap_now:
        notes.append(f"the erase state was held to the structural cap (programs ÷ pages per "
                     f"block): {e_now:,.0f} erases against a cap of {cap_now:,.0f}; the widths "
                     f"alone would have called more pulses erases")
    elif cap_now and e_now > 1.05 * cap_now:
        notes.append(f"{e_now:,.0f} pulses fitted the erase state, {e_now / cap_now:.1f} × the "
                     f"structural cap (programs ÷ pages per block, {cap_now:,.0f}): no program "
                     f"mode reaches their widths, so some may be programs")
    if balance:
        totals = [sum(d.expected.get(states[j].name, 0.0) for d in dies.values()) for j in pt]
        fastest = min(pj, key=lambda j: states[j].mu) if pj else None
        if totals and fastest in pt:
            # (The pulses the gaps moved from a read state to the fastest mode are no page type.)
            totals[pt.index(fastest)] -= sum(read_modes.values())
        spread = max(totals) / max(min(totals), 1e-9) - 1 if totals else 0.0
        if spread <= 0.02:
            notes.append(f"{len(pt)} program page types held to equal counts (block page "
                         f"order)")
        else:
            notes.append(f"{len(pt)} program page types held towards equal counts (block page "
                         f"order), to within {spread:.1%}: the widths of some types left no "
                         f"pulses to move")
    for k, q in suspended.items():
        dies[k].suspended = q
    for k, q in suspect.items():
        dies[k].suspect = q
    if suspect:
        notes.append(f"the long pulses pair up around reads like suspended operations "
                     f"(≈{sum(suspect.values()):,.0f} pairs) more often than suspension makes: "
                     f"none joined, the interval keeps them")
    if sum(suspended.values()) >= 1:
        notes.append(f"{sum(suspended.values()):,.0f} long operations were suspended (pieces "
                     f"with reads between, joined into one operation each)")
    waited = sum(read_modes.values())
    if waited >= 0.5:
        notes.append(f"{waited:,.0f} pulses as short as reads were programs by the idle gap "
                     f"before them (a width mode among the reads that waits for its data in: "
                     f"an SLC cache's programs), counted as the fastest program mode's")
    left_open = sum(modes_open.values())
    if left_open >= 0.5:
        notes.append(f"{left_open:,.0f} pulses of read-width modes wait for a page's data in more "
                     f"often than not, too seldom to call them programs: reads or SLC-mode "
                     f"programs (the interval's upper end counts them programs)")
    alone = sum(modes_alone.values())
    if alone >= 0.5:
        notes.append(f"{alone:,.0f} pulses of a program-width mode were reads: before them the "
                     f"idle gap shows no data in, where before the next slower mode's programs "
                     f"it does")
    e_moved = sum(erases_by_data_in.values())
    if abs(e_moved) >= 0.5:
        notes.append(f"{abs(e_moved):,.0f} pulses where the slowest programs' and the erases' "
                     f"widths overlap {'were programs' if e_moved > 0 else 'were erases'} by the "
                     f"idle gap before them, net (a program waits for its data in, an erase "
                     f"does not)")
    moved = sum(by_data_in.values())
    if abs(moved) >= 0.5:
        notes.append(f"{abs(moved):,.0f} pulses as wide as the fastest programs "
                     f"{'were reads' if moved > 0 else 'were programs'} by the idle gap before "
                     f"them, net (a program waits for its data in)")
    signed = [d.load_bits for d in dies.values() if d.load_bits]
    if signed:
        b = max(set(signed), key=signed.count)
        notes.append(f"one-shot signature on {len(signed)} of {len(dies)} line(s): {b - 1} "
                     f"short data-load busies (1Ah) come with each long program, so it programs "
                     f"{b} pages per plane; the loads count as no programs")
    if trained is not None:
        notes.append("classes with the width distributions trained on labelled pulses"
                     + (f" ({trained.source})" if trained.source else ""))
    paced = sum(d.paced for d in dies.values())
    paced_free = paced >= PACED_FREE * sum(d.program_pulses for d in dies.values())
    if balance and (trained is not None or paced_free):
        # Trained densities are fixed: equal page types are then the one assumption left, and
        # where the capture does not keep the page order (lower pages hidden among reads, a
        # cut block) holding them equal moves pulses between classes with no posterior
        # doubt. The same classification left free bounds what the assumption moved: the
        # interval (rbscope.analysis.wa) spans both. (Untrained, only where host-paced cache
        # programs were found: below.)
        free = classify(pulses, tick_seconds, pages_per_block=pages_per_block, hints=hints,
                        read_max=read_max, page_types=page_types, balance=False,
                        erase_slack=erase_slack, train_pulses=train_pulses,
                        iterations=iterations, hmm_iterations=hmm_iterations, ordered=ordered,
                        trained=trained, scheme=scheme, bits=bits, erase_floor=erase_floor,
                        planes=planes, starts=starts, open_gaps=open_gaps,
                        _erase_in_last=_erase_in_last,
                        _split_floor=_split_floor)
        for k, d in dies.items():
            if k in free.dies:
                d.balance_shift = abs(d.units - free.dies[k].units)
        # A trained model whose program modes are not the cell's page types (two modes on a
        # TLC or QLC cell of no stated scheme: page types merged in the labels' widths, an SLC
        # cache's programs among them, or two passes) has no page order to hold equal either:
        # the free classification is the value, the held one the interval's other end. (A
        # tuning draw of tlc-slc-cache at L2: two trained modes, SLC and lower pages in the
        # first, held equal: +6.1 %; free: +0.2 %.)
        merged = (trained is not None and scheme is None and bits is not None
                  and len(pt) not in (1, bits))
        if merged:
            free.notes.append(f"page types left free: the tapped channel's labels hold "
                              f"{len(pt)} program modes, not the {bits} page types of these "
                              f"cells' page programs (types merged in the widths, or another "
                              f"scheme), so their counts need not be equal")
            for k, d in free.dies.items():
                if k in dies:
                    d.balance_shift = dies[k].balance_shift
            return free
        if paced_free and (trained is not None or _erase_misfit(free.dies, erase_slack)
                           < _erase_misfit(dies, erase_slack) - len(dies)):
            # Host-paced cache programs (only their tCBSY shows) take pages of every type out
            # of the long pulses, in shares R/B# cannot see: the long pulses' page types need
            # not be equal, and holding them so moves erases into the slowest type. The free
            # classification is the value; the interval still spans both. Untrained, only
            # where its erases lie nearer those its programs imply (a block erased for each
            # block filled) than the held one's, by a pulse a line at least: the widths of a
            # free fit let a fifth of the erases go to the slowest page type (the erase floor),
            # +0.5 % on the tuning draws where holding the types equal kept them. (A
            # publishing draw of mlc-hostpaced-cache-50r at L1: 194 lower and 297 upper pages
            # a die paced, so 1 466 lower and 1 364 upper long pulses; held equal, the upper
            # type took the 104 erases and the erase state kept none: +3.1 %.)
            # (The free classification whole: its states, its dies and its notes, true of its
            # numbers; the held one's notes spoke of its own erase count.)
            free.notes.append(f"page types left free: {paced:,.0f} host-paced cache programs "
                              f"took pages of unknown types out of the long pulses")
            for k, d in free.dies.items():
                if k in dies:
                    d.balance_shift = dies[k].balance_shift
            return free
    prior = weights * f
    return SequenceResult(states, A, dies, 0.0, it, pages_per_block, capped, notes,
                          balanced=balance, prior=prior / prior.sum(),
                          grid=(grid.lo, grid.step, grid.n),
                          rest_rate_hi=getattr(trained, "rest_rate_hi", None))


def timing_hints(timing):
    """Classifier hints (µs ranges) from a geometry's ``[timing]``.

    A ``[lo, hi]`` pair is a range; a single value is the datasheet's maximum (tPROG, tBERS,
    tR max, as a parameter page states them), which bounds the class from above only.
    """
    out = {}
    for key, (lo, hi) in timing.items():
        if key not in SEQUENCE_HINTS:
            continue
        if lo == hi:  # a maximum
            floor = {"read": 1.0, "program": 100.0, "erase": 300.0}.get(key, hi / 8)
            lo, hi = min(floor, hi / 2), hi * 1.05
        out[key] = (lo, hi)
    return out


def geometry_options(geometry, hints, kw):
    """What a geometry tells :func:`classify`: ``(hints, pages_per_block)``, and ``kw`` (the
    caller's keyword arguments, updated in place) given ``read_max``, ``scheme``, ``bits`` and
    ``planes`` where the caller did not set them."""
    if hints is None and geometry is not None:
        hints = timing_hints(geometry.timing)
    if geometry is not None:
        # tR max bounds the reads only where the geometry gives it as a maximum (one number,
        # as a parameter page states it); a [lo, hi] range is a typical range reads may pass.
        read = geometry.timing.get("read")
        kw.setdefault("read_max", read[1] if read and read[0] == read[1] else None)
        kw.setdefault("scheme", geometry.program_scheme)
        kw.setdefault("bits", geometry.bits)
        kw.setdefault("planes", geometry.pages_per_pulse)
    ppb = kw.pop("pages_per_block", None)
    if ppb is None and geometry is not None:
        ppb = geometry.pages_per_block
    return hints, ppb


def classify_measurement(measurement, geometry=None, channels=None, *, hints=None, **kw):
    """Classify a :class:`~rbscope.analysis.measurement.Measurement`'s lines; keys are channels.

    With per-pulse widths (``measurement.pulses``, complete) the pulses keep their order
    (``mode "sequence"``); otherwise each channel's width histogram stands in for its pulses,
    one pulse per count at the bin's geometric centre, without order (``mode "mixture"``: the
    constrained mixture, which still holds the page types equal and the erases to their cap).

    Parameters
    ----------
    measurement : Measurement
    geometry : Geometry, optional
        Gives ``pages_per_block`` and the ``[timing]`` hints.
    channels : sequence of int, optional
        Default: every enabled channel.
    hints : dict, optional
        Timing hints (µs); default from the geometry.
    **kw
        Passed to :func:`classify`.
    """
    channels = measurement.enabled if channels is None else list(channels)
    hints, ppb = geometry_options(geometry, hints, kw)
    have = all(len(measurement.pulses.get(ch, ())) for ch in channels)
    if have and not measurement.pulses_truncated:
        pulses = {ch: measurement.pulses[ch] for ch in channels}
        mode = "sequence"
        if all(ch in measurement.pulse_starts for ch in channels):
            kw.setdefault("starts", {ch: measurement.pulse_starts[ch] for ch in channels})
            if measurement.pulse_gaps_open:
                kw.setdefault("open_gaps", {ch: measurement.pulse_gaps_open[ch]
                                            for ch in channels
                                            if ch in measurement.pulse_gaps_open})
    else:
        params = measurement.params
        pulses = {}
        scale = {}  # channel -> pulses each representative stands for
        for ch in channels:
            hist = measurement.counts[ch].histogram
            total = sum(hist)
            counted = sum(measurement.counts[ch].classes) + measurement.counts[ch].unclassified
            if counted and not total:
                raise SequenceError(f"line {measurement.probes[ch].name or ch} has counts but "
                                    f"no width histogram to classify")
            # Without the order of the pulses the mixture sees only each bin's share, so a long
            # capture is represented by at most MIXTURE_PULSES pulses in the same proportions
            # (memory and time stay bounded); the counts are scaled back afterwards.
            f = min(1.0, MIXTURE_PULSES / total) if total else 1.0
            widths = []
            kept = 0
            for b, n in enumerate(hist):
                k = round(n * f)
                if not k:
                    continue
                lo = max(params.hist_bin_lo(b), 1)
                hi = params.hist_bin_lo(b + 1) if b + 1 < params.hist_bins else params.max_width
                widths.append(np.full(k, math.sqrt(lo * max(hi - 1, lo))))
                kept += k
            pulses[ch] = np.concatenate(widths) if widths else np.zeros(0)
            scale[ch] = total / kept if kept else 1.0
        mode = "mixture"
        kw["hmm_iterations"] = 0
        kw["ordered"] = False
    hints = {k: (max(lo, 1e-3), max(hi, lo * 1.01, 1e-3)) for k, (lo, hi) in
             (hints or {}).items()}
    result = classify(pulses, measurement.tick_seconds, pages_per_block=ppb, hints=hints, **kw)
    result.mode = mode
    if mode == "mixture" and any(x != 1.0 for x in scale.values()):
        for ch, die in result.dies.items():
            x = scale.get(ch, 1.0)
            if x == 1.0:
                continue
            # Counts scale with x; the posterior variance of a count (a sum of independent
            # assignments) too.
            die.pulses = round(die.pulses * x)
            die.expected = {k: v * x for k, v in die.expected.items()}
            for name in ("program_pulses", "program_var", "erase_pulses", "multiplane_pages",
                         "announced", "ambiguous_short", "undecided", "multiplane_pulses",
                         "unit_var"):
                if hasattr(die, name):
                    setattr(die, name, getattr(die, name) * x)
            if die.unit_pulses is not None:
                die.unit_pulses *= x
            if die.erase_cap is not None:
                die.erase_cap *= x
        result.notes.append(f"the histograms hold more than {MIXTURE_PULSES:,} pulses per line: "
                            f"the mixture was fitted to a proportional sample of them")
    if mode == "mixture":
        why = ("the source kept only the first pulses" if measurement.pulses_truncated else
               "a device capture has them with `rbscope capture --trace --clear` while the "
               "link loses no more than a few records")
        result.notes.append(f"no per-pulse widths ({why}): the width histograms were "
                            f"classified without the order of the pulses (a constrained "
                            f"mixture)")
    return result

"""Merge the captures of several boards into one time-aligned, many-line measurement.

A drive with more R/B# lines than one board has inputs is probed by several boards at once. One
of them drives a pseudo-random sync pulse train (:mod:`rbscope.gateware.sync_out`, built with
``--sync-out``) and every board records that line on one of its channels, so each capture holds
the same train as pulse records, timed by its own board's clock. :func:`merge_captures`:

1. takes each capture's records of its sync channel (start, width; every epoch);
2. finds where each board's train lines up with the first board's (the *reference*): windows of
   :data:`WINDOW` consecutive pulses whose widths and spacings agree within the tolerances
   below are anchors; every anchor must tell the same alignment (else the train matches in two
   places: refused as ambiguous), then every pulse is paired with the reference pulse nearest
   where the anchors put it, if its width agrees too (a pulse lost by one board, an extra one,
   or a gap in the records leaves its partner unpaired and costs nothing else);
3. maps each board's ticks onto the reference's: piecewise linear through the paired pulses'
   starts (so a drift that changes with temperature is followed), beyond the first and last
   pair along the straight line fitted to all pairs (offset and rate);
4. reports the *residual skew*: each pair's start as the map made without that pair puts it
   (from its neighbours), against where the reference saw it: the error of the map between
   sync pulses, as max and RMS in reference ticks and in ns; and the straight line's offset,
   rate (ppm against the nominal tick) and residuals;
5. refuses (:class:`MergeError`, saying why) when a board has fewer than ``min_pulses`` paired
   sync pulses, the train is ambiguous, the residual skew exceeds ``max_skew_ticks``, the rate
   is off by more than ``max_ppm``, or the boards do not count in the same tick or windows;
6. builds one :class:`~rbscope.analysis.measurement.Measurement`: the boards' lines one board
   after the other (sync channels left out), each line's counts, histogram, pulse sequence and
   lost-record accounting as its board measured them, pulse starts and the snapshot series on
   the reference's time line; ``provenance["merge"]`` says which merged line is which board's
   channel, each board's completeness and sequence accounting, and each board's sync fit.

Widths stay in their own board's ticks (counts and histograms cannot be re-binned; the boards'
ticks differ by their oscillators' tens of ppm, a fraction of a tick on a NAND pulse).
"""

import math
import os
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from rbscope.analysis.measurement import Measurement, Probe, SeriesPoint
from rbscope.gateware.rb_sniffer.model import ChannelCounts
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferConfig, SnifferParams

from .capture import MAX_SERIES, CaptureError, capture_to_measurement

__all__ = ["MergeInput", "MergeRequest", "MergeError", "SyncPulses", "SyncFit", "TimeMap",
           "MergeResult", "merge_captures", "match_sync", "merge_measurements", "WINDOW"]

#: Consecutive sync pulses whose widths and spacings must agree for an anchor.
WINDOW = 4
#: Windows of a board tried as anchors (spread evenly over its train).
MAX_WINDOWS = 256
#: Width and start tolerance, in reference ticks, besides the rate: each board times an edge to
#: within a tick, so a width or a spacing measured by two boards differs by up to two ticks
#: (three allows for the pipeline's classification latency).
TICK_TOLERANCE = 3


class MergeError(ValueError):
    """Captures that cannot be merged; the message says which and why."""


@dataclass(frozen=True)
class MergeInput:
    """One board's capture: its ``path``, the channel its ``sync_channel`` recorded the sync line
    on, and a ``label`` (default: the file's name without its suffix) for its merged lines."""

    path: str
    sync_channel: int
    label: str = ""

    @property
    def name(self):
        return self.label or os.path.splitext(os.path.basename(os.fspath(self.path)))[0]


@dataclass(frozen=True)
class MergeRequest:
    """What :func:`merge_captures` merges, and the limits it refuses beyond.

    Members
    -------
    inputs : tuple of MergeInput
        The captures; the first is the reference, whose ticks the merged time line counts.
    max_skew_ticks : float
        Most residual skew (the largest leave-one-out error of a board's map, in reference
        ticks) a merge accepts.
    min_pulses : int
        Fewest sync pulses each board must share with the reference.
    max_ppm : float
        Most a board's tick may differ from the reference's (crystals: tens of ppm).
    """

    inputs: tuple
    max_skew_ticks: float = 4.0
    min_pulses: int = 8
    max_ppm: float = 1000.0

    def __post_init__(self):
        if len(self.inputs) < 2:
            raise MergeError(f"a merge needs at least two captures, not {len(self.inputs)}")
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise MergeError(f"two captures have the same label ({', '.join(names)}): give "
                             f"each its own")
        if not self.max_skew_ticks > 0:
            raise MergeError(f"max_skew_ticks must be positive, not {self.max_skew_ticks!r}")
        if not (isinstance(self.min_pulses, int) and self.min_pulses >= 3):
            raise MergeError(f"min_pulses must be an integer of at least 3, not "
                             f"{self.min_pulses!r}")
        if not self.max_ppm > 0:
            raise MergeError(f"max_ppm must be positive, not {self.max_ppm!r}")


@dataclass
class SyncPulses:
    """One capture's pulses of its sync channel: ``starts`` and ``widths`` (device ticks, in
    order), the records left out (``partial``: no width known) and the device resets seen
    (``segments``: only the last stretch of non-decreasing timestamps is kept)."""

    channel: int
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    widths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    partial: int = 0
    segments: int = 1


class _SyncCollector:
    """Collect a channel's pulse records as a capture is read (``on_trace``)."""

    def __init__(self, channel):
        self.channel = channel
        self.starts, self.widths = [], []
        self.partial = 0
        self.segments = 1
        self._open = None  # index of a saturated pulse whose BUSY records follow
        self._last = None

    def __call__(self, record):
        if record.channel != self.channel:
            return
        if self._last is not None and record.timestamp < self._last:
            # The timestamp went back: the device was reset; its earlier ticks do not line up
            # with the later ones, so the last stretch is the one kept.
            self.starts, self.widths, self._open = [], [], None
            self.segments += 1
        self._last = record.timestamp
        if record.kind == EventKind.END:
            self.starts.append(record.timestamp - record.width)
            self.widths.append(record.width)
            self._open = None
        elif record.kind == EventKind.OVERLONG:
            self.starts.append(record.timestamp - record.width)
            self.widths.append(record.width)
            self._open = len(self.widths) - 1
        elif record.kind == EventKind.BUSY and self._open is not None:
            self.widths[self._open] += record.width
        elif record.kind == EventKind.PARTIAL:
            self.partial += 1

    def pulses(self):
        starts = np.asarray(self.starts, dtype=np.int64)
        order = np.argsort(starts, kind="stable")
        return SyncPulses(self.channel, starts[order],
                          np.asarray(self.widths, dtype=np.int64)[order], self.partial,
                          self.segments)


class TimeMap:
    """A board's ticks → the reference's: piecewise linear through paired points ``(x, y)``
    (strictly increasing), along the fitted line ``y = offset + slope · x`` beyond them
    (through the end pairs)."""

    def __init__(self, x, y, slope):
        self.x = np.asarray(x, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.slope = float(slope)

    @classmethod
    def identity(cls):
        return cls([0.0, 1.0], [0.0, 1.0], 1.0)

    def __call__(self, ticks):
        t = np.asarray(ticks, dtype=np.float64)
        out = np.interp(t, self.x, self.y)
        lo, hi = t < self.x[0], t > self.x[-1]
        out[lo] = self.y[0] + (t[lo] - self.x[0]) * self.slope
        out[hi] = self.y[-1] + (t[hi] - self.x[-1]) * self.slope
        return out

    def one(self, tick):
        return float(self(np.array([tick]))[0])


@dataclass
class SyncFit:
    """How one board's sync train lines up with the reference's (all times in reference ticks
    unless named otherwise).

    Members
    -------
    label : str
    pulses, reference_pulses : int
        Sync pulses in this board's capture and in the reference's.
    paired : int
        Pulses paired with the reference's (the fit's points).
    unpaired, reference_unpaired : int
        Pulses within the span the two captures share that found no partner: lost by the other
        board, extra on this one (a glitch), or in a gap of the other's records.
    anchors : int
        Windows of :data:`WINDOW` pulses that matched (all at one alignment).
    offset_ticks : float
        The fitted line's offset: the reference's tick when this board's tick counter read 0.
    rate_ppm : float
        How much faster this board's clock runs than the reference's, in ppm (from the fitted
        line's slope, the reference's ticks per tick of this board, against the nominal tick
        ratio): positive when it counts more ticks in the same time.
    line_max_ticks, line_rms_ticks : float
        Residuals of the straight line (what a constant rate leaves: drift).
    skew_max_ticks, skew_rms_ticks : float
        The residual skew of the piecewise map: each pair left out of the map, and placed by its
        neighbours.
    tick_ns : float
        The reference tick in ns (the ``_ns`` members are the ticks times it).
    """

    label: str
    pulses: int
    reference_pulses: int
    paired: int
    unpaired: int
    reference_unpaired: int
    anchors: int
    offset_ticks: float
    rate_ppm: float
    line_max_ticks: float
    line_rms_ticks: float
    skew_max_ticks: float
    skew_rms_ticks: float
    tick_ns: float
    time_map: TimeMap = field(repr=False, default=None)

    @property
    def skew_max_ns(self):
        return self.skew_max_ticks * self.tick_ns

    @property
    def skew_rms_ns(self):
        return self.skew_rms_ticks * self.tick_ns

    def to_dict(self):
        out = {k: getattr(self, k) for k in (
            "label", "pulses", "reference_pulses", "paired", "unpaired", "reference_unpaired",
            "anchors", "offset_ticks", "rate_ppm", "line_max_ticks", "line_rms_ticks",
            "skew_max_ticks", "skew_rms_ticks", "tick_ns")}
        out["skew_max_ns"] = self.skew_max_ns
        out["skew_rms_ns"] = self.skew_rms_ns
        return out


@dataclass
class MergeResult:
    """The merged measurement, each board's sync fit (the reference's first, an identity), and
    the notes of the merge (also in ``measurement.provenance["warnings"]``)."""

    measurement: Measurement
    fits: list
    notes: list


# ---- matching -----------------------------------------------------------------------------------

def _tolerance(length, ppm):
    """Most two boards' measurements of ``length`` reference ticks may differ."""
    return TICK_TOLERANCE + abs(length) * ppm * 1e-6


def match_sync(ref, other, *, ratio=1.0, max_ppm=1000.0, min_pulses=8, label="board"):
    """Pair ``other``'s sync pulses with ``ref``'s (two :class:`SyncPulses`).

    ``ratio`` is the nominal tick of ``other`` over that of ``ref`` (1 for equal ticks). Returns
    ``(i, j, anchors)``: indices into ``ref`` and ``other`` of the paired pulses (both
    increasing) and the number of matching windows. Raises :class:`MergeError` when too few
    pulses pair or the train lines up in more than one place.
    """
    rs, rw = ref.starts.astype(np.float64), ref.widths.astype(np.float64)
    os_, ow = other.starts.astype(np.float64) * ratio, other.widths.astype(np.float64) * ratio
    if len(rs) < min_pulses or len(os_) < min_pulses:
        few = min(len(rs), len(os_))
        who = "the reference" if len(rs) < min_pulses else label
        raise MergeError(f"{label}: {few} sync pulse(s) in {who}'s capture, fewer than the "
                         f"{min_pulses} a merge needs (is the sync line on that channel, and "
                         f"was the capture taken with --trace?)")
    order = np.argsort(rw, kind="stable")
    sorted_w = rw[order]
    n_win = len(os_) - WINDOW + 1
    step = max(1, math.ceil(n_win / MAX_WINDOWS))
    anchors, multiple = [], 0
    for j in range(0, max(n_win, 0), step):
        lo = np.searchsorted(sorted_w, ow[j] - _tolerance(ow[j], max_ppm), side="left")
        hi = np.searchsorted(sorted_w, ow[j] + _tolerance(ow[j], max_ppm), side="right")
        found = []
        for i in order[lo:hi]:
            if i + WINDOW > len(rs):
                continue
            k = np.arange(1, WINDOW)
            dw = np.abs(rw[i + k] - ow[j + k])
            if (dw > _tolerance(ow[j + k], max_ppm)).any():
                continue
            gaps_r, gaps_o = rs[i + k] - rs[i], os_[j + k] - os_[j]
            if (np.abs(gaps_r - gaps_o) > _tolerance(gaps_o, max_ppm) + TICK_TOLERANCE).any():
                continue
            found.append(int(i))
        if len(found) == 1:
            anchors.append((found[0], j))
        elif len(found) > 1:
            multiple += 1
    if not anchors:
        if multiple:
            raise MergeError(f"{label}: the sync train is ambiguous: every window of {WINDOW} "
                             f"pulses matches the reference in more than one place (was the "
                             f"sync generator reset during the capture?)")
        raise MergeError(f"{label}: the sync pulses do not match the reference's (no "
                         f"{WINDOW} pulses in a row agree in widths and spacing): is the "
                         f"channel the sync line, on both boards?")
    # Every anchor must tell one alignment: their offsets may differ only by the rate.
    ai = np.array([a[0] for a in anchors])
    aj = np.array([a[1] for a in anchors])
    delta = rs[ai] - os_[aj]
    span = np.abs(os_[aj][:, None] - os_[aj][None, :])
    agree = np.abs(delta[:, None] - delta[None, :]) <= 2 * _tolerance(span, max_ppm)
    pivot = int(agree.sum(axis=1).argmax())
    keep = agree[pivot]
    if not keep.all():
        other_at = (rs[ai[~keep][0]] - rs[ai[pivot]]) - (os_[aj[~keep][0]] - os_[aj[pivot]])
        raise MergeError(f"{label}: the sync train is ambiguous: it matches the reference at "
                         f"two alignments ({int(keep.sum())} and {int((~keep).sum())} windows "
                         f"of {WINDOW} pulses, {abs(other_at):,.0f} ticks apart; was the sync "
                         f"generator reset during the capture?)")
    pairs = {}
    for i, j in anchors:
        for k in range(WINDOW):
            pairs[j + k] = i + k
    pj = np.array(sorted(pairs))
    pi = np.array([pairs[j] for j in pj])
    # Every pulse, placed by the anchors' map, pairs with the reference pulse nearest there if
    # its width agrees. The pulses are 100 ms or more apart: a quarter of the shortest spacing
    # of the reference's train (not less than the tolerance) is far from any neighbour.
    slope = _fit_line(os_[pj], rs[pi])[1] if len(pj) > 1 else 1.0
    guess = TimeMap(os_[pj], rs[pi], slope)(os_)
    spacing = np.diff(rs)
    near = max(np.median(spacing) / 4 if len(spacing) else 0, 4 * TICK_TOLERANCE)
    at = np.clip(np.searchsorted(rs, guess), 1, len(rs) - 1)
    cand = np.where(np.abs(rs[at - 1] - guess) <= np.abs(rs[at] - guess), at - 1, at)
    ok = (np.abs(rs[cand] - guess) <= near) & (np.abs(rw[cand] - ow) <= _tolerance(ow, max_ppm))
    j_all = np.flatnonzero(ok)
    i_all = cand[j_all]
    # One partner each, in order on both sides.
    keep_pairs = np.ones(len(j_all), dtype=bool)
    keep_pairs[1:] = np.diff(i_all) > 0
    i_all, j_all = i_all[keep_pairs], j_all[keep_pairs]
    if len(j_all) < min_pulses:
        raise MergeError(f"{label}: only {len(j_all)} sync pulse(s) pair with the reference's, "
                         f"fewer than the {min_pulses} a merge needs")
    return i_all, j_all, len(anchors)


def _fit_line(x, y):
    """Least-squares ``y = a + b·x``: ``(a, b)`` (x centred for precision)."""
    xm, ym = x.mean(), y.mean()
    dx = x - xm
    den = float((dx * dx).sum())
    b = float((dx * (y - ym)).sum() / den) if den > 0 else 1.0
    return ym - b * xm, b


def _leave_one_out(x, y, slope):
    """Each point ``y[k]`` less where the piecewise-linear map through the others puts it."""
    n = len(x)
    out = np.empty(n)
    if n >= 3:
        k = np.arange(1, n - 1)
        f = (x[k] - x[k - 1]) / (x[k + 1] - x[k - 1])
        out[1:-1] = y[k] - (y[k - 1] + f * (y[k + 1] - y[k - 1]))
    # The ends: along the fitted slope from their neighbour.
    out[0] = y[0] - (y[1] - (x[1] - x[0]) * slope)
    out[-1] = y[-1] - (y[-2] + (x[-1] - x[-2]) * slope)
    return out


def fit_sync(ref, other, *, ratio, max_ppm, min_pulses, label, tick_ns):
    """Pair two sync trains and fit the map of ``other``'s ticks onto ``ref``'s: a
    :class:`SyncFit` (with its :class:`TimeMap`)."""
    # Matched with twice the rate allowed: a board beyond it is then refused for its rate
    # (merge_captures), which says more than "no match".
    i, j, anchors = match_sync(ref, other, ratio=ratio, max_ppm=2 * max_ppm,
                               min_pulses=min_pulses, label=label)
    x = other.starts[j].astype(np.float64)
    y = ref.starts[i].astype(np.float64)
    a, b = _fit_line(x, y)
    line = y - (a + b * x)
    loo = _leave_one_out(x, y, b)
    # The pulses of each side within the span both captured that found no partner.
    r_in = (ref.starts >= ref.starts[i[0]]) & (ref.starts <= ref.starts[i[-1]])
    o_in = (other.starts >= other.starts[j[0]]) & (other.starts <= other.starts[j[-1]])
    return SyncFit(
        label=label, pulses=len(other.starts), reference_pulses=len(ref.starts),
        paired=len(i), unpaired=int(o_in.sum()) - len(j),
        reference_unpaired=int(r_in.sum()) - len(i), anchors=anchors,
        offset_ticks=a, rate_ppm=(ratio / b - 1) * 1e6,
        line_max_ticks=float(np.abs(line).max()),
        line_rms_ticks=float(math.sqrt((line * line).mean())),
        skew_max_ticks=float(np.abs(loo).max()),
        skew_rms_ticks=float(math.sqrt((loo * loo).mean())), tick_ns=tick_ns,
        time_map=TimeMap(x, y, b))


# ---- the merged measurement ---------------------------------------------------------------------

@dataclass
class _Board:
    input: MergeInput
    measurement: Measurement
    sync: SyncPulses
    fit: SyncFit = None

    @property
    def label(self):
        return self.input.name

    @property
    def lines(self):
        """The board's channels that are merged (all but its sync channel)."""
        return [c for c in range(self.measurement.params.channels)
                if c != self.input.sync_channel]


def _read(inp):
    collector = _SyncCollector(inp.sync_channel)
    try:
        m = capture_to_measurement(inp.path, on_trace=collector)
    except CaptureError as exc:
        raise MergeError(f"{inp.name}: {exc}") from None
    except OSError as exc:
        raise MergeError(f"{inp.name}: cannot read {inp.path}: {exc.strerror or exc}") from None
    if not 0 <= inp.sync_channel < m.params.channels:
        raise MergeError(f"{inp.name}: sync channel {inp.sync_channel} is not one of its "
                         f"channels 0 … {m.params.channels - 1}")
    if not (m.config.enable >> inp.sync_channel) & 1:
        raise MergeError(f"{inp.name}: sync channel {inp.sync_channel} is disabled: it "
                         f"recorded nothing")
    return _Board(inp, m, collector.pulses())


def _merged_params(boards):
    ps = [b.measurement.params for b in boards]
    for name in ("classes", "hist_sub_bits"):
        values = {getattr(p, name) for p in ps}
        if len(values) > 1:
            raise MergeError(f"the boards' sniffers differ in {name} ("
                             + ", ".join(f"{b.label}: {getattr(b.measurement.params, name)}"
                                         for b in boards) + "): their counts do not line up")
    widest = {name: max(getattr(p, name) for p in ps) for name in (
        "width_bits", "counter_bits", "hist_bits", "timestamp_bits", "prescaler_bits",
        "glitch_bits", "tag_bits")}
    return SnifferParams(channels=sum(len(b.lines) for b in boards), classes=ps[0].classes,
                         hist_sub_bits=ps[0].hist_sub_bits, **widest)


def _check_alike(boards):
    ref = boards[0].measurement
    for b in boards[1:]:
        m = b.measurement
        if not math.isclose(m.tick_seconds, ref.tick_seconds, rel_tol=1e-9):
            raise MergeError(
                f"{b.label} counts in ticks of {m.tick_seconds * 1e9:g} ns and "
                f"{boards[0].label} in ticks of {ref.tick_seconds * 1e9:g} ns: configure every "
                f"board with the same tick (rbscope configure … --set PRESCALER=…) before "
                f"capturing")
        if (m.config.windows != ref.config.windows
                or m.config.glitch_ticks != ref.config.glitch_ticks):
            raise MergeError(f"{b.label}'s class windows or glitch filter differ from "
                             f"{boards[0].label}'s: configure every board with the same preset "
                             f"before capturing")


def _counts_at(board, params, snaps, ts):
    """The board's counts (its merged lines) at its last snapshot at or before ``ts`` (mapped
    ticks), zeros before its first."""
    k = bisect_right(snaps[0], ts) - 1
    if k < 0:
        return [ChannelCounts.zeros(params) for _ in board.lines]
    counts = snaps[1][k]
    return [_widen(counts[c], params, histogram=False) for c in board.lines]


def _widen(counts, params, *, histogram=True):
    c = counts.copy(histogram=histogram)
    if histogram and c.histogram:
        c.histogram = list(c.histogram) + [0] * (params.hist_bins - len(c.histogram))
    elif not histogram:
        c.histogram = []
    return c


def merge_measurements(boards, params):
    """The merged :class:`Measurement` of boards whose maps are fitted (``_Board``)."""
    ref = boards[0].measurement
    # Every board's device ticks → the reference's; the merged time line starts at the
    # earliest first snapshot.
    t0s = [b.fit.time_map.one(b.measurement.provenance["first_snapshot_tick"]) for b in boards]
    ends = [b.fit.time_map.one(b.measurement.provenance["first_snapshot_tick"]
                               + b.measurement.duration_ticks) for b in boards]
    origin = min(t0s)
    counts, probes, lines, enable = [], [], [], 0
    pulses, starts, lost, summarised, summary_windows = {}, {}, {}, {}, set()
    gaps_open = {}
    with_pulses = all(b.measurement.pulses for b in boards)
    mapped_starts = {}
    for b in boards:
        m = b.measurement
        for c in b.lines:
            n = len(counts)
            counts.append(_widen(m.counts[c], params))
            probes.append(Probe(f"{b.label}:{m.probes[c].name}", m.probes[c].dies))
            lines.append([b.label, c])
            enable |= ((m.config.enable >> c) & 1) << n
            if with_pulses and c in m.pulses:
                pulses[n] = m.pulses[c]
                mapped_starts[n] = np.rint(b.fit.time_map(np.frombuffer(
                    m.pulse_starts[c], dtype=np.uint64).astype(np.float64))).astype(np.int64)
                if c in m.pulses_lost:
                    lost[n] = m.pulses_lost[c]
                if c in m.pulse_gaps_open:
                    gaps_open[n] = m.pulse_gaps_open[c]
                if c in m.pulses_summarised:
                    # (The boards' windows are the reference's: the merge checked them.)
                    summarised[n] = m.pulses_summarised[c]
                    summary_windows.update(
                        (m.provenance.get("sequence") or {}).get("summary_windows") or ())
    # Pulse starts count reference ticks; shifted up when a board's first pulses map before
    # the reference's tick 0.
    low = min((int(s.min()) for s in mapped_starts.values() if len(s)), default=0)
    shift = max(0, -low)
    for n, s in mapped_starts.items():
        s = np.maximum.accumulate(s + shift)  # (rounding cannot reorder; kept monotone anyway)
        starts[n] = array("Q", s.astype(np.uint64).tobytes())
    # The snapshot series: at every board's snapshot time, each board's latest counts.
    per_board = []
    for b in boards:
        m = b.measurement
        first = m.provenance["first_snapshot_tick"]
        times = b.fit.time_map(np.array([first + s.timestamp for s in m.snapshots],
                                        dtype=np.float64)) - origin
        per_board.append(([int(round(t)) for t in times], [s.counts for s in m.snapshots]))
    union = sorted({t for times, _ in per_board for t in times if t >= 0})
    if len(union) > MAX_SERIES:  # evenly thinned, the last kept (as a capture's series is)
        stride = math.ceil(len(union) / MAX_SERIES)
        union = union[:-1:stride] + union[-1:]
    series = []
    for ts in union:
        row = []
        for b, snaps in zip(boards, per_board, strict=True):
            row.extend(_counts_at(b, params, snaps, ts))
        series.append(SeriesPoint(ts, row))
    end = max(ends)
    quiet = None
    if all(b.measurement.quiet_ticks is not None for b in boards):
        quiet = max(0, int(min(end - b.fit.time_map.one(
            b.measurement.provenance["first_snapshot_tick"] + b.measurement.duration_ticks
            - b.measurement.quiet_ticks) for b in boards)))
    config = SnifferConfig(prescaler=ref.config.prescaler, glitch_ticks=ref.config.glitch_ticks,
                           windows=ref.config.windows, idle_ticks=ref.config.idle_ticks,
                           enable=enable)
    return Measurement(
        params=params, config=config, tick_seconds=ref.tick_seconds, counts=counts,
        class_names=ref.class_names, probes=probes,
        duration_ticks=max(0, int(round(end - origin))), quiet_ticks=quiet,
        may_drop=any(b.measurement.may_drop for b in boards), snapshots=series,
        pulses=pulses if with_pulses else {}, pulse_starts=starts if with_pulses else {},
        pulses_lost=lost if with_pulses else {},
        pulses_summarised=summarised if with_pulses else {},
        pulse_gaps_open=gaps_open if with_pulses else {},
        provenance={"lines": lines, "start_shift_ticks": shift, "origin_tick": origin,
                    **({"sequence": {"summary_windows": sorted(summary_windows)}}
                       if summarised and with_pulses else {})})


def merge_captures(request):
    """Merge the captures of ``request`` (a :class:`MergeRequest`): a :class:`MergeResult`.

    Raises :class:`MergeError` saying which capture and why when they cannot be merged.
    """
    boards = [_read(inp) for inp in request.inputs]
    _check_alike(boards)
    params = _merged_params(boards)
    ref = boards[0]
    tick_ns = ref.measurement.tick_seconds * 1e9
    ref.fit = SyncFit(ref.label, len(ref.sync.starts), len(ref.sync.starts),
                      len(ref.sync.starts), 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, tick_ns,
                      TimeMap.identity())
    notes = []
    for b in boards[1:]:
        b.fit = fit_sync(ref.sync, b.sync, ratio=b.measurement.tick_seconds
                         / ref.measurement.tick_seconds, max_ppm=request.max_ppm,
                         min_pulses=request.min_pulses, label=b.label, tick_ns=tick_ns)
        f = b.fit
        if abs(f.rate_ppm) > request.max_ppm:
            raise MergeError(f"{b.label}: its clock runs {f.rate_ppm:+,.1f} ppm against "
                             f"{ref.label}'s, more than the {request.max_ppm:g} ppm allowed "
                             f"(crystals differ by tens of ppm): are the clocks what INFO says?")
        if f.skew_max_ticks > request.max_skew_ticks:
            raise MergeError(f"{b.label}: residual skew {f.skew_max_ticks:.2f} ticks "
                             f"({f.skew_max_ns:,.0f} ns) at its worst sync pulse, above the "
                             f"limit of {request.max_skew_ticks:g} ticks (RMS "
                             f"{f.skew_rms_ticks:.2f}); a noisy sync line, or pulses paired "
                             f"wrongly")
    for b in boards:
        if b.sync.segments > 1:
            notes.append(f"{b.label}: its timestamps restarted {b.sync.segments - 1} time(s) "
                         f"(a device reset): only the sync pulses after the last restart "
                         f"are used")
        if b.fit.unpaired or b.fit.reference_unpaired:
            notes.append(f"{b.label}: {b.fit.unpaired} of its sync pulses and "
                         f"{b.fit.reference_unpaired} of {ref.label}'s found no partner "
                         f"(lost records, a glitch on the line, or a gap in a capture); the "
                         f"{b.fit.paired} paired ones make its map")
    merged = merge_measurements(boards, params)
    with_pulses = all(b.measurement.pulses for b in boards)
    if not with_pulses:
        short = [b.label for b in boards if not b.measurement.pulses]
        notes.append(f"no pulse sequence in the merged lines: {', '.join(short)} has none "
                     f"usable (see its warnings); the width histograms are classified")
    if any(b.measurement.params.width_bits != merged.params.width_bits for b in boards):
        notes.append("the boards' width counters differ ("
                     + ", ".join(f"{b.label}: {b.measurement.params.width_bits} bits"
                                 for b in boards)
                     + "): a narrower board's lines count a pulse overlong from its own "
                       "maximum width")
    names = {tuple(b.measurement.class_names) for b in boards
             if any(b.measurement.class_names)}
    if len(names) > 1:
        notes.append(f"the boards name their windows differently; {ref.label}'s names are used")
    missing, warnings = [], []
    for b in boards:
        prov = b.measurement.provenance
        missing += [f"{b.label}: {m}" for m in prov.get("missing", [])]
        warnings += [f"{b.label}: {w}" for w in prov.get("warnings", [])]
    warnings += notes
    extra = merged.provenance
    merged.provenance = {
        "source": "merge", "path": ", ".join(os.fspath(i.path) for i in request.inputs),
        "complete": not missing, "missing": missing, "warnings": warnings,
        "merge": {
            "reference": ref.label,
            "lines": extra["lines"],
            "start_shift_ticks": extra["start_shift_ticks"],
            "boards": [{
                "label": b.label, "path": os.fspath(b.input.path),
                "board": b.measurement.provenance.get("board"),
                "build_id": b.measurement.provenance.get("build_id"),
                "channels": b.measurement.params.channels,
                "sync_channel": b.input.sync_channel,
                "sync_pulses": len(b.sync.starts),
                "first_line": extra["lines"].index([b.label, b.lines[0]]) if b.lines else None,
                "complete": b.measurement.provenance.get("complete", True),
                "missing": b.measurement.provenance.get("missing", []),
                "link_errors": b.measurement.provenance.get("link_errors"),
                "may_drop": b.measurement.may_drop,
                "duration_ticks": b.measurement.duration_ticks,
                "sequence": b.measurement.provenance.get("sequence"),
                "sync": b.fit.to_dict(),
            } for b in boards],
        },
    }
    return MergeResult(merged, [b.fit for b in boards], notes)

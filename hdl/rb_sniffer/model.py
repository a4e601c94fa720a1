"""Bit-exact, cycle-exact reference model of the R/B# sniffer gateware.

The model reproduces what the sniffer's channel front ends emit and what the shared pipeline then
counts (class counters, glitches, overlong and partial pulses, busy ticks, histogram), together
with the status registers (timestamp, ``quiescent``, ``quiet_since``). Its definitions are those
of ``docs/architecture.md``, section "The R/B# sniffer"; cycle ``t`` counts clock cycles from the
first cycle after reset is released.

The model never steps cycle by cycle: a channel is described by the cycles at which its pin
changes, and every quantity is derived from those edges with arithmetic on the tick grid, so the
cost is proportional to the number of edges (plus one event per ``2**width_bits - 1`` ticks of a
stuck-low line). :class:`ChannelTracker` and :class:`QuiescenceTracker` consume level changes one
at a time, so that multi-gigabyte logic-analyser recordings can be classified in a streaming way;
:meth:`SnifferModel.run` drives them from in-memory :class:`Train` objects.

The model does not model the mailboxes: it applies every event, so ``dropped`` stays 0. When two
pulses of a channel end closer together than the scanner's rotation (``2 * (N + 1)`` cycles),
the gateware may drop one; :attr:`ModelResult.may_drop` then warns that its counts may differ.
(Saturation events never pass the mailbox: the pipeline finds them at its visits.)
"""

import heapq
import operator
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from rbscope.gateware.rb_sniffer.params import (
    QUIESCENT_LAG,
    READY_LAG,
    Counter,
    EventKind,
    SnifferConfig,
    SnifferParams,
    hist_bin,
)

__all__ = [
    "SYNC_LATENCY",
    "Train",
    "window_index_array",
    "window_counts",
    "ChannelCounts",
    "FIXED_COUNTERS",
    "PulseRecord",
    "ModelResult",
    "ChannelTracker",
    "QuiescenceTracker",
    "SnifferModel",
    "hist_bin_array",
]

#: Level arrays whose bytes are the levels (checked as bytes: 0 or 1).
_BYTE_LEVELS = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.bool_))

#: Saturation events of one low run listed one by one per advance; more are counted in bulk.
_SATURATIONS_LISTED = 1024

#: Cycles from a pin change to the synchronised level: ``lvl(t) = pin(t - SYNC_LATENCY)``.
SYNC_LATENCY = 2


def _check_params(params):
    if not isinstance(params, SnifferParams):
        raise TypeError(f"params must be a SnifferParams, not {params!r}")
    return params


def _check_config(params, config):
    if not isinstance(config, SnifferConfig):
        raise TypeError(f"config must be a SnifferConfig, not {config!r}")
    return config.validate(params)


def _check_level(name, level):
    try:
        value = operator.index(level)
    except TypeError:
        raise ValueError(f"{name} must be 0 or 1, not {level!r}") from None
    if value not in (0, 1):
        raise ValueError(f"{name} must be 0 or 1, not {level!r}")
    return value


def _check_cycle(name, cycle):
    try:
        value = operator.index(cycle)
    except TypeError:
        raise ValueError(f"{name} must be a non-negative integer, not {cycle!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {cycle!r}")
    return value


def _window_table(windows):
    """The first-match classes of ``windows`` as a step function of the width.

    Returns ``(edges, table)``: the distinct bounds of the windows that are not empty, increasing,
    and the class (``len(windows)`` for none) of the widths below ``edges[0]``, then of each
    ``[edges[i], edges[i + 1])``, then of those from ``edges[-1]`` on. Between two bounds no
    window starts or ends, so one width there stands for all of them.
    """
    k = len(windows)
    edges = sorted({bound for lo, hi in windows if lo < hi for bound in (lo, hi)})
    table = [k] + [next((j for j, (lo, hi) in enumerate(windows) if lo <= e < hi), k)
                   for e in edges]
    return edges, table


def window_index_array(widths, windows):
    """Return the class of each width (ticks) as the classifier assigns it: the index of the
    lowest-numbered half-open window ``[lo, hi)`` containing it, ``len(windows)`` for none."""
    widths = np.asarray(widths, dtype=np.int64)
    edges, table = _window_table(windows)
    return np.array(table, dtype=np.int64)[
        np.searchsorted(np.array(edges, dtype=np.int64), widths, side="right")]


def window_counts(widths, windows, table=None):
    """How many of ``widths`` fall in each class: ``bincount(window_index_array(widths,
    windows), minlength=len(windows) + 1)`` as a list, found with one comparison per bound.

    ``table`` is ``_window_table(windows)`` when the caller keeps it.
    """
    widths = np.asarray(widths, dtype=np.int64)
    edges, classes = table if table is not None else _window_table(windows)
    per = [0] * (len(windows) + 1)
    below = 0  # widths below the current bound
    for e, cls in zip(edges, classes, strict=False):  # classes has one entry more
        n = int(np.count_nonzero(widths < e))
        per[cls] += n - below
        below = n
    per[classes[-1]] += len(widths) - below
    return per


def hist_bin_array(widths, sub_bits):
    """Vectorised :func:`~rbscope.gateware.rb_sniffer.params.hist_bin` of non-negative widths
    below ``2**53`` (the model's are below ``2**32``)."""
    w = np.asarray(widths, dtype=np.int64)
    # A width w >= 2**sub_bits below 2**53 is exact in float64, whose bits are the biased exponent
    # (1023 + e, e = w.bit_length() - 1) over the bits after the leading one: the top sub_bits of
    # those are the bin's mantissa, so the bits from the exponent down to them, less the bias,
    # are ((e - sub_bits + 1) << sub_bits) + mantissa, the bin.
    binned = (w.astype(np.float64).view(np.int64) >> (52 - sub_bits)) - (
        (1022 + sub_bits) << sub_bits)
    return np.where(w < (1 << sub_bits), w, binned)


# Data ----------------------------------------------------------------------------------------


@dataclass
class Train:
    """The pin of one channel, as a list of edges.

    Parameters
    ----------
    initial : int
        Pin level (0 or 1) during reset and before the first edge; ``pin(t) = initial`` for
        ``t < 0``.
    edges : list of (int, int)
        ``(cycle, level)`` pairs, cycles non-negative and strictly increasing: ``pin(t) = level``
        from ``cycle`` until the next edge. An edge that repeats the current level is allowed and
        changes nothing. The edges are checked when the train is used.
    """

    initial: int
    edges: list = field(default_factory=list)

    def __post_init__(self):
        self.initial = _check_level("initial", self.initial)


#: The :class:`ChannelCounts` attribute of each fixed :class:`Counter`, in counter order.
FIXED_COUNTERS = tuple(c.name.lower() for c in Counter)


@dataclass
class ChannelCounts:
    """What the sniffer counted for one channel.

    The counters are kept exact (unbounded); :meth:`row` reduces them to the gateware's width.
    Histogram bins wrap modulo ``2**hist_bits`` as in the gateware.

    Parameters
    ----------
    classes : list of int
        Pulses classified into each of the K windows.
    unclassified, glitch, overlong, partial, dropped, busy_ticks : int
        The fixed counters (see :class:`~rbscope.gateware.rb_sniffer.params.Counter`).
    histogram : list of int
        ``params.hist_bins`` bins, each modulo ``2**params.hist_bits``.
    """

    classes: list = field(default_factory=list)
    unclassified: int = 0
    glitch: int = 0
    overlong: int = 0
    partial: int = 0
    dropped: int = 0
    busy_ticks: int = 0
    histogram: list = field(default_factory=list)

    @classmethod
    def zeros(cls, params):
        """Return all-zero counts shaped for ``params``."""
        _check_params(params)
        return cls(classes=[0] * params.classes, histogram=[0] * params.hist_bins)

    def counter(self, counter):
        """Return the (exact) value of the fixed counter ``counter``."""
        return getattr(self, Counter(counter).name.lower())

    def copy(self, *, histogram=True):
        """Return an independent copy (with an empty histogram unless ``histogram``)."""
        return ChannelCounts(list(self.classes), **{n: getattr(self, n) for n in FIXED_COUNTERS},
                             histogram=list(self.histogram) if histogram else [])

    def minus(self, base, params):
        """Return ``self - base`` counter by counter (histogram bins modulo ``hist_bits``)."""
        mod = 1 << params.hist_bits
        return ChannelCounts(
            [x - y for x, y in zip(self.classes, base.classes, strict=True)],
            **{n: getattr(self, n) - getattr(base, n) for n in FIXED_COUNTERS},
            histogram=[(x - y) % mod for x, y in zip(self.histogram, base.histogram,
                                                      strict=True)])

    def row(self, params):
        """Return the channel's counter-RAM row as the gateware lays it out.

        Parameters
        ----------
        params : SnifferParams
            Build parameters; fix the row length and the counter width.

        Returns
        -------
        list of int
            ``params.row`` words: the class counters at ``0 … K-1``, the fixed counters at
            ``K + Counter.X``, the rest 0; every value modulo ``2**params.counter_bits``.
        """
        _check_params(params)
        if len(self.classes) != params.classes:
            raise ValueError(f"classes has {len(self.classes)} entries but the sniffer was built "
                             f"with {params.classes} classes")
        mask = (1 << params.counter_bits) - 1
        words = [0] * params.row
        for k, value in enumerate(self.classes):
            words[k] = value & mask
        for counter in Counter:
            words[params.classes + counter] = self.counter(counter) & mask
        return words

    @classmethod
    def from_row(cls, params, row, histogram=()):
        """Return the counts of a counter-RAM row read from the gateware (the inverse of
        :meth:`row`, for counts that have not wrapped).

        Parameters
        ----------
        params : SnifferParams
        row : sequence of int
            At least the ``params.counters_per_channel`` words of :meth:`row`'s layout.
        histogram : sequence of int
            The channel's ``params.hist_bins`` bins, or empty.
        """
        _check_params(params)
        row = [operator.index(v) for v in row]
        if len(row) < params.counters_per_channel:
            raise ValueError(f"a counter row of {params.classes} classes has "
                             f"{params.counters_per_channel} words, not {len(row)}")
        histogram = [operator.index(v) for v in histogram]
        if histogram and len(histogram) != params.hist_bins:
            raise ValueError(f"histogram must have {params.hist_bins} bins, not "
                             f"{len(histogram)}")
        fixed = {name: row[params.classes + c]
                 for c, name in zip(Counter, FIXED_COUNTERS, strict=True)}
        return cls(classes=row[:params.classes], histogram=histogram, **fixed)


@dataclass(slots=True)
class PulseRecord:
    """One event emitted by a channel front end, with the counter it updates.

    Parameters
    ----------
    channel : int
        Channel index.
    kind : EventKind
        ``END``, ``PARTIAL``, ``OVERLONG`` or ``BUSY``.
    index : int
        Counter-row index the event increments: the class ``k``, or ``K + Counter.X`` for
        ``UNCLASSIFIED``, ``GLITCH``, ``PARTIAL`` and ``OVERLONG``; ``K + Counter.BUSY_TICKS``
        for ``BUSY`` (which only adds busy ticks).
    width : int
        Width carried by the event, in ticks.
    end_cycle : int
        Cycle at which the front end emits the event: the cycle on which ``lvl`` is high again
        for an ending pulse, the cycle of the saturating tick for ``OVERLONG`` and ``BUSY(MAX)``.
    """

    channel: int
    kind: EventKind
    index: int
    width: int
    end_cycle: int


@dataclass
class ModelResult:
    """Outcome of :meth:`SnifferModel.run`.

    Parameters
    ----------
    channels : list of ChannelCounts
        Counts per channel.
    pulses : list of PulseRecord
        Every event emitted before the end of the run, ordered by ``(end_cycle, channel)``.
    may_drop : bool
        True if some channel emitted two events fewer than ``2 * (N + 1)`` cycles apart; the
        gateware could then have dropped events and its counts may differ from the model's.
    cycles : int
        Run length; the status queries accept cycles ``0 … cycles``.
    ready : list of (int, int or None)
        The runs of ``all_ready`` as half-open cycle ranges ``[start, end)``, ``end`` None for a
        run lasting to the end (the last start is at most ``cycles``).
    params : SnifferParams
        Build parameters of the run.
    config : SnifferConfig
        The validated configuration of the run.
    """

    channels: list
    pulses: list
    may_drop: bool
    cycles: int = 0
    ready: list = field(default_factory=list, repr=False)
    params: SnifferParams | None = field(default=None, repr=False)
    config: SnifferConfig | None = field(default=None, repr=False)

    def _period(self):
        if self.config is None:
            raise ValueError("this ModelResult carries no config; status queries need one")
        return max(self.config.prescaler, 1)

    def _check_t(self, t):
        t = _check_cycle("t", t)
        if t > self.cycles:
            raise ValueError(f"t must be at most the run length {self.cycles}, not {t!r}")
        return t

    def _ready_run(self, t):
        i = bisect_right(self.ready, t, key=operator.itemgetter(0)) - 1
        if i < 0:
            return None
        start, end = self.ready[i]
        return start if end is None or t < end else None

    def timestamp_at(self, t):
        """Return the value of the timestamp register during cycle ``t`` (ticks in ``[0, t)``)."""
        t = _check_cycle("t", t)
        return (t // self._period()) & ((1 << self.params.timestamp_bits) - 1)

    def all_ready_at(self, t):
        """Return whether no enabled channel is low during cycle ``t`` (``0 <= t <= cycles``)."""
        t = self._check_t(t)
        return self._ready_run(t) is not None

    def quiescent_at(self, t):
        """Return the value of ``status.quiescent`` during cycle ``t`` (``0 <= t <= cycles``).

        The output is registered: it says what ``all_ready`` and the idle count said on cycle
        ``t - QUIESCENT_LAG`` (0 on the first ``QUIESCENT_LAG`` cycles after reset).
        """
        t = self._check_t(t) - QUIESCENT_LAG
        if t < 0:
            return False
        period = self._period()
        start = self._ready_run(t)
        # The idle counter holds the ticks in [start, t); its saturation at 2**timestamp_bits - 1
        # never matters as idle_ticks is at most that value.
        return start is not None and t // period - start // period >= self.config.idle_ticks

    def quiet_since_at(self, t):
        """Return the value of ``status.quiet_since`` during cycle ``t`` (``0 <= t <= cycles``).

        That is the timestamp of the last cycle before ``t`` on which ``all_ready`` became true
        (0 before the first).
        """
        t = self._check_t(t)
        i = bisect_right(self.ready, t - 1, key=operator.itemgetter(0)) - 1
        if i < 0:
            return 0
        return self.timestamp_at(self.ready[i][0])


# Streaming trackers ------------------------------------------------------------------------------


class ChannelTracker:
    """Streaming model of one channel front end and of the counting its events cause.

    The tracker works on the synchronised level ``lvl``: a pin edge at cycle ``c`` is a level
    change at ``c + SYNC_LATENCY``. Feed the changes in increasing cycle order with
    :meth:`change`; call :meth:`advance` to flush the saturation events of a pulse that is still
    low, and :meth:`finish` at the end of the recording. Each call returns the events it emitted
    (in cycle order) and adds them to :attr:`counts`.

    Parameters
    ----------
    params : SnifferParams
        Build parameters.
    config : SnifferConfig
        Run-time configuration (validated against ``params``).
    channel : int
        Channel index, ``0 … params.channels - 1``.
    initial : int, optional
        ``lvl`` at cycle 0 unless a change at cycle 0 says otherwise (default 1, ready). A pulse
        low at cycle 0 has an unobserved start and is counted as partial.

    Attributes
    ----------
    counts : ChannelCounts
        What the events so far have counted.
    may_drop : bool
        True once two events were emitted fewer than ``2 * (N + 1)`` cycles apart.
    enabled : bool
        Whether the channel is enabled; a disabled channel never emits anything.
    """

    def __init__(self, params, config, channel, *, initial=1):
        self.params = _check_params(params)
        self.config = _check_config(params, config)
        if (not isinstance(channel, int) or isinstance(channel, bool)
                or not 0 <= channel < params.channels):
            raise ValueError(f"channel must be an integer from 0 to {params.channels - 1}, "
                             f"not {channel!r}")
        self.channel = channel
        initial = _check_level("initial", initial)
        self.enabled = bool((self.config.enable >> channel) & 1)
        self.counts = ChannelCounts.zeros(params)
        self.may_drop = False

        self._period = max(self.config.prescaler, 1)
        self._max = params.max_width
        self._glitch = self.config.glitch_ticks
        self._windows = self.config.windows
        self._window_table = None  # _window_table(self._windows), made on first use
        self._gap = 2 * (params.channels + 1)
        self._hist_mask = (1 << params.hist_bits) - 1
        k = params.classes
        self._i_unclassified = k + Counter.UNCLASSIFIED
        self._i_glitch = k + Counter.GLITCH
        self._i_overlong = k + Counter.OVERLONG
        self._i_partial = k + Counter.PARTIAL
        self._i_busy = k + Counter.BUSY_TICKS

        self._level = initial
        self._start = 0 if self.enabled and initial == 0 else None  # start of the low run
        self._saturations = 0  # saturation events already emitted in the current low run
        self._last_change = -1
        self._now = 0  # every event before this cycle has been emitted
        self._last_event = None
        self._finished = False

    @property
    def level(self):
        """The current synchronised level ``lvl``."""
        return self._level

    @property
    def low(self):
        """Whether the channel is low (enabled and ``lvl == 0``) at the last change."""
        return self._start is not None

    # Event emission -----------------------------------------------------------------------------

    def _mailbox(self, cycle):
        # A pulse end occupies the front end's one-event mailbox until the scanner's visit: two
        # closer together than a rotation may meet a full mailbox.
        if self._last_event is not None and cycle - self._last_event < self._gap:
            self.may_drop = True
        self._last_event = cycle

    def _emit(self, kind, width, cycle, out, mailbox=True):
        counts = self.counts
        if kind is EventKind.END:
            if width < self._glitch:
                # Glitches are side counts in the gateware: they never occupy the mailbox, so
                # they neither risk drops nor appear in the gateware's trace.
                counts.glitch += 1
                out.append(PulseRecord(self.channel, kind, self._i_glitch, width, cycle))
                return
            else:
                for k, (lo, hi) in enumerate(self._windows):
                    if lo <= width < hi:
                        counts.classes[k] += 1
                        index = k
                        break
                else:
                    counts.unclassified += 1
                    index = self._i_unclassified
                counts.busy_ticks += width
                b = hist_bin(width, self.params.hist_sub_bits)
                counts.histogram[b] = (counts.histogram[b] + 1) & self._hist_mask
        elif kind is EventKind.PARTIAL:
            counts.partial += 1
            counts.busy_ticks += width
            index = self._i_partial
        elif kind is EventKind.OVERLONG:
            counts.overlong += 1
            counts.busy_ticks += width
            index = self._i_overlong
        else:
            counts.busy_ticks += width
            index = self._i_busy
        if mailbox:
            self._mailbox(cycle)
        out.append(PulseRecord(self.channel, kind, index, width, cycle))

    def _saturate(self, cycle, out):
        # Emit the saturation events of the current low run that fall before `cycle`. The m-th
        # tick of a run starting at s falls on cycle (s // P + m) * P - 1; every MAX-th saturates.
        period, cmax = self._period, self._max
        tick = (self._start // period + (self._saturations + 1) * cmax) * period - 1
        if tick < cycle:
            # A line stuck low across a long stretch (a recording's time jump): beyond
            # _SATURATIONS_LISTED saturations the BUSY(MAX) events, which only add busy ticks, are
            # counted in one step rather than one by one (the counts are the same).
            n = (cycle - 1 - tick) // (cmax * period) + 1
            if n > _SATURATIONS_LISTED:
                bulk = n - _SATURATIONS_LISTED
                if self._saturations == 0:
                    self._emit(EventKind.OVERLONG, cmax, tick, out, mailbox=False)
                    self._saturations = 1
                    tick += cmax * period
                    bulk -= 1
                self.counts.busy_ticks += bulk * cmax
                self._saturations += bulk
                tick += bulk * cmax * period
        while tick < cycle:
            kind = EventKind.OVERLONG if self._saturations == 0 else EventKind.BUSY
            # Saturations are found by the pipeline itself (at a visit of the channel): they
            # never occupy the mailbox.
            self._emit(kind, cmax, tick, out, mailbox=False)
            self._saturations += 1
            tick += cmax * period

    def _end(self, cycle, out):
        # The low run [start, cycle) ends: lvl is high (or the channel ready) on `cycle`.
        start = self._start
        self._start = None
        if cycle == start:  # only at cycle 0: the initial low level never took effect
            return
        period = self._period
        rest = cycle // period - start // period - self._saturations * self._max
        if self._saturations:
            if rest:
                self._emit(EventKind.BUSY, rest, cycle, out)
            else:  # the end still passes the mailbox, as an empty BUSY the pipeline drops
                self._mailbox(cycle)
        elif start > 0:
            # Armed: lvl was high on cycle start - 1 (and armed does not change while low).
            self._emit(EventKind.END, rest, cycle, out)
        else:
            self._emit(EventKind.PARTIAL, rest, cycle, out)

    # Public interface ---------------------------------------------------------------------------

    def _check_time(self, what, cycle):
        if self._finished:
            raise RuntimeError(f"channel {self.channel} tracker is finished; no {what} accepted")
        cycle = _check_cycle("cycle", cycle)
        if cycle < self._now:
            raise ValueError(f"cycle {cycle} is before cycle {self._now}, up to which channel "
                             f"{self.channel} was already processed")
        return cycle

    def change(self, cycle, level):
        """Apply a change of the synchronised level and return the events it completes.

        Parameters
        ----------
        cycle : int
            First cycle with the new level; greater than the previous change's cycle and not
            before a cycle already passed to :meth:`advance`.
        level : int
            The new ``lvl`` (0 or 1). Repeating the current level is allowed.

        Returns
        -------
        list of PulseRecord
            Saturation events before ``cycle``, then the event emitted on ``cycle`` if the
            change ends a pulse.
        """
        cycle = self._check_time("change", cycle)
        if cycle <= self._last_change:
            raise ValueError(f"changes must have increasing cycles, but {cycle} follows "
                             f"{self._last_change} on channel {self.channel}")
        level = _check_level("level", level)
        out = []
        self._apply(cycle, level, out)
        return out

    def _apply(self, cycle, level, out):
        # change() without the checks; appends the events to `out`.
        self._last_change = cycle
        self._now = cycle
        if level == self._level:
            if self._start is not None:
                self._saturate(cycle, out)
            return
        self._level = level
        if not self.enabled:
            return
        if level:
            ticks = cycle // self._period - self._start // self._period
            if self._saturations or ticks >= self._max:  # else no saturation is due
                self._saturate(cycle, out)
            self._end(cycle, out)
        else:
            self._start = cycle
            self._saturations = 0

    def change_many(self, cycles, levels):
        """Apply many level changes at once, with numpy: the batch form of :meth:`change`.

        The counts, the state and ``may_drop`` end up exactly as after calling :meth:`change` for
        each pair in turn. Pulses that reach the saturation width, and a first pulse whose start
        was not observed, go through :meth:`change` itself; the others are counted in bulk.

        Parameters
        ----------
        cycles : numpy.ndarray of int64
            Strictly increasing cycles, the first after the previous change and not before a
            cycle already passed to :meth:`advance`.
        levels : numpy.ndarray
            The new levels (0 or 1); repeating the current level is allowed.

        Returns
        -------
        (starts, ends, widths) : tuple of numpy.ndarray of int64
            The pulses measured and not glitches (the ``END`` events that are not glitches, the
            ones the gateware traces), in order: first low cycle, end cycle, width in ticks.
        """
        cycles = np.asarray(cycles, dtype=np.int64)
        levels = np.asarray(levels)
        empty = np.zeros(0, dtype=np.int64)
        if not len(cycles):
            return empty, empty, empty
        if len(levels) != len(cycles):
            raise ValueError(f"{len(cycles)} cycles but {len(levels)} levels")
        self._check_time("change", int(cycles[0]))
        if cycles[0] <= self._last_change or bool((cycles[1:] <= cycles[:-1]).any()):
            raise ValueError(f"changes must have increasing cycles after {self._last_change} on "
                             f"channel {self.channel}")
        if levels.dtype in _BYTE_LEVELS:
            bad = bool((levels.view(np.uint8) > 1).any())
        else:
            bad = bool(((levels != 0) & (levels != 1)).any())
        if bad:
            raise ValueError(f"levels must be 0 or 1 on channel {self.channel}")
        last = int(cycles[-1])
        keep = np.empty(len(levels), dtype=bool)  # not a repeat of the level before
        keep[0] = levels[0] != self._level
        np.not_equal(levels[1:], levels[:-1], out=keep[1:])
        if keep.all():  # what the importers pass: no repeats
            c, lv = cycles, levels
        else:
            c, lv = cycles[keep], levels[keep]
        if not self.enabled or not len(c):
            if len(c):
                self._level = int(lv[-1])
            if self._start is not None and self._saturations:
                self.advance(last)
            self._last_change = self._now = last
            return empty, empty, empty
        parts = []  # (starts, ends, widths) of the measured pulses, in order
        k = 0
        # The slow cases one by one: a pulse already saturating, or one low since cycle 0.
        while k < len(c) and ((self._start is not None and (self._saturations or self._start == 0))
                              or c[k] == 0):
            self._apply_tracked(int(c[k]), int(lv[k]), parts)
            k += 1
        c, lv = c[k:], lv[k:]
        period = self._period
        if len(c):
            # Without repeats the levels alternate: the rises are every other change.
            first_rise = 0 if lv[0] == 1 else 1
            rises = c[first_rise::2].copy()  # copies: never views of the caller's array
            falls = c[1 - first_rise::2].copy()
            starts = falls if self._start is None else np.concatenate(
                (np.array([self._start], dtype=np.int64), falls))
            n = len(rises)
            if period == 1:
                ticks = rises - starts[:n]
            else:
                ticks = rises // period - starts[:n] // period
            if n and ticks.max() >= self._max:
                for cyc, lev in zip(c.tolist(), lv.tolist(), strict=True):  # rare: saturation
                    self._apply_tracked(cyc, lev, parts)
            else:
                parts.append(self._count_ends(starts[:n], rises, ticks))
                self._level = int(lv[-1])
                if len(starts) > n:
                    self._start, self._saturations = int(starts[-1]), 0
                else:
                    self._start = None
        self._last_change = self._now = last
        if self._start is not None and self._saturations:
            self._saturate(last, [])
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return empty, empty, empty
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(3))

    def _apply_tracked(self, cycle, level, parts):
        # _apply, collecting the measured pulse it may end as a (starts, ends, widths) part.
        start = self._start
        out = []
        self._apply(cycle, level, out)
        glitch = self.params.classes + Counter.GLITCH
        for r in out:
            if r.kind is EventKind.END and r.index != glitch:
                parts.append((np.array([start], dtype=np.int64),
                              np.array([r.end_cycle], dtype=np.int64),
                              np.array([r.width], dtype=np.int64)))

    def _count_ends(self, starts, ends, widths):
        # Bulk form of _end/_emit for armed pulses that never saturated.
        counts = self.counts
        real = widths >= self._glitch
        glitches = len(widths) - int(np.count_nonzero(real))
        if glitches:
            counts.glitch += glitches
            starts, ends, widths = starts[real], ends[real], widths[real]
        if not len(widths):
            return starts, ends, widths
        k = len(self._windows)
        if self._window_table is None:
            self._window_table = _window_table(self._windows)
        per = window_counts(widths, self._windows, self._window_table)
        for j in range(k):
            counts.classes[j] += per[j]
        counts.unclassified += per[k]
        counts.busy_ticks += int(widths.sum())
        bins = hist_bin_array(widths, self.params.hist_sub_bits)
        hist = np.bincount(bins, minlength=self.params.hist_bins)
        for b in np.flatnonzero(hist).tolist():
            counts.histogram[b] = (counts.histogram[b] + int(hist[b])) & self._hist_mask
        if (self._last_event is not None and int(ends[0]) - self._last_event < self._gap) or (
                len(ends) > 1 and int(np.diff(ends).min()) < self._gap):
            self.may_drop = True
        self._last_event = int(ends[-1])
        return starts, ends, widths

    def advance(self, cycle):
        """Emit the events that fall before ``cycle`` with no further level change.

        Only a pulse that is still low can emit such events (its saturations). A later change
        must not be before ``cycle``.
        """
        cycle = self._check_time("advance", cycle)
        out = []
        if self._start is not None:
            self._saturate(cycle, out)
        self._now = cycle
        return out

    def finish(self, cycle):
        """End the recording: emit the remaining events before ``cycle`` and close the tracker.

        A pulse still low at ``cycle`` is not ended (its saturation events before ``cycle`` do
        count). ``cycle`` must be after the last change.
        """
        cycle = self._check_time("finish", cycle)
        if cycle <= self._last_change:
            raise ValueError(f"finish cycle {cycle} must be after the last change "
                             f"{self._last_change} on channel {self.channel}")
        out = self.advance(cycle)
        self._finished = True
        return out


class QuiescenceTracker:
    """Streaming model of ``all_ready``: records the runs of cycles when no enabled channel is low.

    ``all_ready`` is a registered tree: on cycle ``t`` it says that no enabled channel was low on
    cycle ``t - READY_LAG`` (before that, with the levels of cycle 0, which the pins held during
    reset). A level change at cycle ``c`` therefore shows in ``all_ready`` from cycle
    ``c + READY_LAG``.

    Feed the synchronised level changes of all channels in non-decreasing cycle order with
    :meth:`change` (changes of several channels may share a cycle), then call :meth:`finish`.
    The result, :attr:`ready`, is what :class:`ModelResult` needs to answer ``quiescent`` and
    ``quiet_since``.

    Parameters
    ----------
    params : SnifferParams
        Build parameters.
    config : SnifferConfig
        Run-time configuration (validated against ``params``); only ``enable`` matters here.
    initial : sequence of int
        ``lvl`` of every channel at cycle 0 (``params.channels`` values of 0 or 1).

    Attributes
    ----------
    ready : list of [int, int or None]
        ``all_ready`` runs as half-open ranges ``[start, end)``; ``end`` is None while open.
    """

    def __init__(self, params, config, initial):
        self.params = _check_params(params)
        self.config = _check_config(params, config)
        initial = list(initial)
        if len(initial) != params.channels:
            raise ValueError(f"initial must have {params.channels} levels, not {len(initial)}")
        enable = self.config.enable
        self._enabled = [bool((enable >> i) & 1) for i in range(params.channels)]
        self._low = [en and _check_level(f"initial[{i}]", lvl) == 0
                     for i, (en, lvl) in enumerate(zip(self._enabled, initial, strict=True))]
        self._lows = sum(self._low)
        self._cycle = 0  # the cycle whose changes are being gathered
        self._was_ready = False  # all_ready before self._cycle (all_ready_prev(0) = 0)
        self._finished = False
        self.ready = []

    def _commit(self):
        ready = self._lows == 0
        if ready != self._was_ready:
            if ready:
                self.ready.append([self._cycle, None])
            else:
                self.ready[-1][1] = self._cycle
            self._was_ready = ready

    def change(self, cycle, channel, level):
        """Record that ``lvl`` of ``channel`` is ``level`` from ``cycle`` on (so ``all_ready``
        reflects it from ``cycle + READY_LAG`` on)."""
        if self._finished:
            raise RuntimeError("the quiescence tracker is finished; no change accepted")
        if cycle + READY_LAG < self._cycle:
            raise ValueError(f"changes must come in cycle order, but {cycle!r} follows "
                             f"{self._cycle - READY_LAG}")
        if cycle + READY_LAG > self._cycle:
            self._commit()
            self._cycle = cycle + READY_LAG
        if not self._enabled[channel]:
            return
        low = level == 0
        if low != self._low[channel]:
            self._low[channel] = low
            self._lows += 1 if low else -1

    def finish(self, cycle):
        """Close the recording at ``cycle`` (the last cycle the status is wanted for)."""
        if cycle + READY_LAG < self._cycle:
            raise ValueError(f"finish cycle {cycle!r} is before the last change "
                             f"{self._cycle - READY_LAG}")
        if self._cycle <= cycle:  # a change shortly before `cycle` shows only after it
            self._commit()
        self._finished = True
        return self.ready


# The model ---------------------------------------------------------------------------------------


def _lvl_changes(train, channel, limit):
    """Yield ``(cycle, channel, level)`` for the ``lvl`` changes of ``train`` up to ``limit``."""
    last = -1
    level = train.initial
    for k, edge in enumerate(train.edges):
        try:
            cycle, new = edge
        except (TypeError, ValueError):
            raise ValueError(f"channel {channel} edges[{k}] must be a (cycle, level) pair, "
                             f"not {edge!r}") from None
        if type(cycle) is not int:  # plain ints (the usual case) need no conversion
            cycle = _check_cycle(f"channel {channel} edges[{k}] cycle", cycle)
        if new != level:
            new = _check_level(f"channel {channel} edges[{k}] level", new)
        if cycle <= last:
            if cycle < 0:
                raise ValueError(f"channel {channel} edges[{k}] cycle must be non-negative, "
                                 f"not {cycle!r}")
            raise ValueError(f"channel {channel} edges must have strictly increasing cycles, "
                             f"but edges[{k}] at {cycle} follows {last}")
        last = cycle
        cycle += SYNC_LATENCY
        if cycle > limit:
            return
        if new != level:
            level = new
            yield cycle, channel, new


class SnifferModel:
    """Reference model of the whole sniffer for one configuration.

    Parameters
    ----------
    params : SnifferParams
        Build parameters.
    config : SnifferConfig
        Run-time configuration; validated (and padded) with ``config.validate(params)``.
    """

    def __init__(self, params, config):
        self.params = _check_params(params)
        self.config = _check_config(params, config)

    def run(self, trains, cycles):
        """Simulate cycles ``[0, cycles)`` of the given pins.

        Parameters
        ----------
        trains : sequence of Train
            One train per channel (``params.channels`` of them). The edges of enabled channels
            are checked as they are read; a disabled channel's edges are not read at all.
        cycles : int
            Run length. Events emitted on a cycle before ``cycles`` count; a pulse still low at
            the end is not ended, but its saturation events before ``cycles`` count.

        Returns
        -------
        ModelResult
        """
        params, config = self.params, self.config
        trains = list(trains)
        if len(trains) != params.channels:
            raise ValueError(f"trains must have one Train per channel ({params.channels}), "
                             f"not {len(trains)}")
        for i, train in enumerate(trains):
            if not isinstance(train, Train):
                raise ValueError(f"trains[{i}] must be a Train, not {train!r}")
        cycles = _check_cycle("cycles", cycles)

        trackers = [ChannelTracker(params, config, i, initial=train.initial)
                    for i, train in enumerate(trains)]
        quiet = QuiescenceTracker(params, config, [train.initial for train in trains])
        pulses = []
        # The status is wanted up to cycle `cycles` inclusive; events only before it. Disabled
        # channels affect nothing, so their trains are not read.
        streams = [_lvl_changes(train, i, cycles) for i, train in enumerate(trains)
                   if trackers[i].enabled]
        apply = [tracker._apply for tracker in trackers]
        quiet_change = quiet.change
        for cycle, channel, level in heapq.merge(*streams):
            quiet_change(cycle, channel, level)
            if cycle < cycles:
                apply[channel](cycle, level, pulses)
        quiet.finish(cycles)
        for tracker in trackers:
            if tracker.enabled:
                pulses.extend(tracker.finish(cycles))
        pulses.sort(key=operator.attrgetter("end_cycle", "channel"))
        return ModelResult(
            channels=[tracker.counts for tracker in trackers],
            pulses=pulses,
            may_drop=any(tracker.may_drop for tracker in trackers),
            cycles=cycles,
            ready=[tuple(run) for run in quiet.ready],
            params=params,
            config=config,
        )

"""Logic-analyser recordings → :class:`~rbscope.analysis.measurement.Measurement`, through the
bit-exact model.

The importers (:mod:`.vcd`, :mod:`.sigrok`) do not measure pulse widths themselves: they turn the
recording into pin edges on a system-clock grid and feed them, one at a time, to the reference
model's :class:`~rbscope.gateware.rb_sniffer.model.ChannelTracker` — the very classifier the
gateware implements,
with its synchroniser latency, tick prescaler, glitch filter, first-match windows, saturation
and log histogram. A recording imported here therefore counts exactly what an rbscope device
clocked at the recording's time base would have counted had it watched the same pins.

Time base (exact definitions)
-----------------------------
* The recording's sample grid is the system clock: cycle ``c`` covers recording time
  ``[T0 + c·C, T0 + (c+1)·C)``, ``T0`` the first time in the recording, ``C`` the clock period.
  The pin level of cycle ``c`` is the level in force at the *end* of that span (the last change
  at a time ``< T0 + (c+1)·C``): a change at time ``t`` takes effect on cycle
  ``floor((t - T0) / C)``; a pulse shorter than a cycle that starts and ends inside one span
  vanishes, as it would for a real sampler. This is sigrok's own down-sampling rule, so a VCD
  imported with ``C = N`` time units and the same VCD converted with
  ``sigrok-cli -I vcd:downsample=N`` give identical counts.
* For a sigrok session (``.sr``) the clock is the sample rate: sample ``i`` is cycle ``i``.
* The level before cycle 0 (during "reset") is the level of cycle 0 (for a VCD, the last level
  in ``[T0, T0 + C)``; for ``.sr``, sample 0); a line low there has an unobserved start, so its
  first pulse counts as ``PARTIAL``.
* The recording has ``N`` cycles (``.sr``: the sample count; VCD: ``floor((T_last - T0) / C)``
  whole cycles, ``T_last`` the last timestamp — sigrok's count — and at least one past the
  last change). The model then runs
  ``N + SYNC_LATENCY`` cycles with every pin holding its last level, so that a pulse ending in
  the last cycle is still counted; a line still low at the end is not (its saturation events
  are).
* The tick is ``prescaler`` cycles; ``tick_seconds = prescaler × C``.
"""

import operator
from array import array

import numpy as np

from rbscope.analysis.measurement import Measurement, Probe, SeriesPoint
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, ChannelTracker

__all__ = ["RecordingError", "StreamClassifier", "parse_time", "format_time", "chain"]

#: Units of time accepted on the command line and in VCD timescales, in seconds.
TIME_UNITS = {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12, "fs": 1e-15}


class RecordingError(ValueError):
    """A recording cannot be imported; the message names the file, line or byte offset."""


def parse_time(text):
    """Parse a duration such as ``10ns``, ``1 us``, ``2.5ms`` into seconds."""
    s = str(text).strip().replace(" ", "")
    for unit in sorted(TIME_UNITS, key=len, reverse=True):
        if s.endswith(unit):
            number = s[: -len(unit)]
            break
    else:
        raise ValueError(f"duration {text!r} needs a unit (s, ms, us, ns, ps, fs)")
    try:
        value = float(number) * TIME_UNITS[unit]
    except ValueError:
        raise ValueError(f"duration {text!r} does not start with a number") from None
    if not value > 0:
        raise ValueError(f"duration {text!r} must be positive")
    return value


def format_time(seconds):
    """Format seconds with an engineering unit (``1.5 ms``)."""
    if seconds == 0:
        return "0 s"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9), ("ps", 1e-12)):
        if abs(seconds) >= scale or unit == "ps":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:g} s"


#: Most snapshots an import records (each holds every channel's counts): a longer series is
#: refused before it is built, rather than exhausting memory on a recording's time jump.
MAX_SNAPSHOTS = 100_000

#: Buffered edges after which :meth:`StreamClassifier.edge` hands them to the model in bulk.
FLUSH_EDGES = 1 << 16

#: The last clock cycle at which a recording may change a line: edge cycles are 64-bit in the
#: model (at 1 GHz, 292 years). The recording itself may end later.
MAX_CYCLE = (1 << 63) - 1 - 64


def _cycle_array(cycles):
    """``cycles`` as int64, or :class:`RecordingError` when one is beyond :data:`MAX_CYCLE`."""
    try:
        out = np.asarray(cycles, dtype=np.int64)
    except OverflowError:
        out = None
    if out is None or (len(out) and int(out[-1]) > MAX_CYCLE):
        raise RecordingError(f"a time stamp of the recording lies beyond cycle {MAX_CYCLE} of "
                             "the sampling clock (a corrupt or runaway time stamp?)")
    return out


def _last_rise(levels, before):
    """The index of the last 0 → 1 change in ``levels`` (``before``: the level before them),
    or -1."""
    n = len(levels)
    # The last rise is almost always one of the last two changes (levels alternate).
    for k in range(n - 1, max(n - 3, 0) - 1, -1):
        if levels[k] == 1 and (levels[k - 1] if k else before) == 0:
            return k
    prev = np.empty_like(levels)
    prev[0] = before
    prev[1:] = levels[:-1]
    rises = np.flatnonzero((levels == 1) & (prev == 0))
    return int(rises[-1]) if len(rises) else -1


def chain(*callbacks):
    """Return one callable that calls each of ``callbacks`` that is not None, or None."""
    given = [c for c in callbacks if c is not None]
    if not given:
        return None
    if len(given) == 1:
        return given[0]

    def call(*args):
        for c in given:
            c(*args)
    return call


class StreamClassifier:
    """Feed pin edges of several channels to the bit-exact model; collect a Measurement.

    Edges come either one at a time with :meth:`edge` (non-decreasing cycle order across
    channels, several per cycle allowed, the last one of a channel in a cycle wins; they are
    buffered and applied in bulk) or as per-channel numpy arrays with :meth:`feed`. Either way the
    model's :meth:`~rbscope.gateware.rb_sniffer.model.ChannelTracker.change_many` counts them, so
    the cost per edge is a few numpy operations, not a Python call.

    Parameters
    ----------
    params, config
        Sniffer build parameters and run-time configuration.
    clock_seconds : float
        Period of one cycle.
    initial : sequence of int
        Pin level of every channel before cycle 0.
    class_names : tuple of str
    probes : list of Probe
    snapshot_cycles : int or None
        Record a :class:`SeriesPoint` every this many cycles.
    max_pulses : int
        Keep the widths of at most this many measured pulses (0: none). When the cap is reached
        inside one batch, which channels' widths are kept follows channel order within it.
    on_pulses : callable, optional
        Called as ``on_pulses(channel, starts, ends, widths)`` with the measured pulses (numpy
        arrays, ``lvl`` cycles and ticks) of each batch: the opcode tap labels them.
    on_edge : callable, optional
        Called as ``on_edge(cycle, channel, level)`` for every pin change fed (in cycle order,
        to replay the recording elsewhere, e.g. into RTL: :mod:`rbscope.cocotb.rb`). The pin
        levels before cycle 0 end up in the measurement's ``provenance["initial"]``.
    """

    def __init__(self, params, config, clock_seconds, initial, *, class_names=(), probes=(),
                 snapshot_cycles=None, max_pulses=1_000_000, on_pulses=None, on_edge=None):
        self.params = params
        self.config = config.validate(params)
        self.clock_seconds = clock_seconds
        self.class_names = class_names
        self.probes = list(probes) or [Probe(f"ch{i}") for i in range(params.channels)]
        initial = [operator.index(v) for v in initial]
        self.initial = initial
        self.on_edge = on_edge
        self.trackers = [ChannelTracker(params, self.config, i, initial=lvl)
                         for i, lvl in enumerate(initial)]
        self._pin = list(initial)  # pin level after the edges applied so far
        self._last_high = 0  # lvl cycle at which the last low run of any channel ended
        self.snapshot_cycles = snapshot_cycles
        self._next_snapshot = snapshot_cycles if snapshot_cycles else None
        self.snapshots = []
        self.max_pulses = max_pulses
        self.pulses = {i: array("Q") for i in range(params.channels)} if max_pulses else {}
        self.starts = {i: array("Q") for i in range(params.channels)} if max_pulses else {}
        self._kept = 0
        self.pulses_truncated = False
        self.on_pulses = on_pulses
        self._last_cycle = -1
        self._done = 0  # every edge before this pin cycle has been applied
        self._buf = [([], []) for _ in range(params.channels)]
        self._buffered = 0
        self.edges = 0

    def _apply(self, channel, cycles, levels):
        # Pin changes (numpy, pin cycles) of one channel → the tracker (lvl cycles).
        tracker = self.trackers[channel]
        starts, ends, widths = tracker.change_many(cycles + SYNC_LATENCY, levels)
        if len(widths):
            if self.max_pulses:
                room = self.max_pulses - self._kept
                if len(widths) > room:
                    self.pulses_truncated = True
                if room > 0:
                    kept = widths[:room]
                    self.pulses[channel].frombytes(kept.astype(np.uint64).tobytes())
                    # Start ticks, so the sequence classifier sees the idle time between pulses.
                    first = starts[:room] // max(self.config.prescaler, 1)
                    self.starts[channel].frombytes(first.astype(np.uint64).tobytes())
                    self._kept += len(kept)
            if self.on_pulses is not None:
                self.on_pulses(channel, starts, ends, widths)
        if tracker.enabled and len(levels):
            k = _last_rise(levels, self._pin[channel])
            if k >= 0:
                self._last_high = max(self._last_high, int(cycles[k]) + SYNC_LATENCY)
        if len(levels):
            self._pin[channel] = int(levels[-1])

    def _snapshot(self, boundary):
        counts = []
        for tracker in self.trackers:
            tracker.advance(boundary)
            counts.append(tracker.counts.copy(histogram=False))
        period = max(self.config.prescaler, 1)
        self.snapshots.append(SeriesPoint(boundary // period, counts))

    def feed(self, limit, changes):
        """Apply every pin change before pin cycle ``limit`` (and pass each to ``on_edge``).

        Parameters
        ----------
        limit : int
            No later change will be before this cycle.
        changes : sequence of (numpy.ndarray, numpy.ndarray)
            Per channel, the cycles (increasing, at least the previous ``limit``, below
            ``limit``) and new levels of its pin.
        """
        if limit < self._done:
            raise ValueError(f"limit {limit} is before the previous one {self._done}")
        if self._buffered:
            self._flush()
        changes = [(_cycle_array(c), np.asarray(lv, dtype=np.int8)) for c, lv in changes]
        for ch, (c, _) in enumerate(changes):
            if len(c) and (c[0] < self._done or c[-1] >= limit):
                raise ValueError(f"channel {ch}: changes at cycles {c[0]}…{c[-1]} are outside "
                                 f"[{self._done}, {limit})")
        if self.on_edge is not None:
            merged = sorted((int(cy), ch, int(lv)) for ch, (c, lvs) in enumerate(changes)
                            for cy, lv in zip(c, lvs, strict=True))
            for cycle, ch, level in merged:
                self.on_edge(cycle, ch, level)
        self._feed(limit, changes)

    def _feed(self, limit, changes):
        pos = [0] * len(changes)
        if self._next_snapshot is not None and self._next_snapshot <= limit:
            coming = (limit - self._next_snapshot) // self.snapshot_cycles + 1
            if len(self.snapshots) + coming > MAX_SNAPSHOTS:
                raise RecordingError(
                    f"a snapshot every {self.snapshot_cycles} cycles makes more than "
                    f"{MAX_SNAPSHOTS} snapshots by cycle {limit}; give a longer --snapshot "
                    f"period")
        # A snapshot at boundary B counts the changes whose lvl cycle is before B.
        while self._next_snapshot is not None and self._next_snapshot <= limit:
            boundary = self._next_snapshot
            for ch, (c, lv) in enumerate(changes):
                k = int(np.searchsorted(c, boundary - SYNC_LATENCY, side="left"))
                if k > pos[ch]:
                    self._apply(ch, c[pos[ch]:k], lv[pos[ch]:k])
                    pos[ch] = k
            self._snapshot(boundary)
            self._next_snapshot += self.snapshot_cycles
        for ch, (c, lv) in enumerate(changes):
            if pos[ch] < len(c):
                self._apply(ch, c[pos[ch]:], lv[pos[ch]:])
        self._done = limit
        self._last_cycle = max(self._last_cycle, limit - 1)

    def _flush(self):
        arrays = [(_cycle_array(cs), np.array(ls, dtype=np.int8)) for cs, ls in self._buf]
        self._buf = [([], []) for _ in self._buf]
        self._buffered = 0
        self._feed(self._last_cycle + 1, arrays)

    def edge(self, cycle, channel, level):
        """Record that the pin of ``channel`` has ``level`` from ``cycle`` on."""
        if cycle < self._last_cycle:
            raise ValueError(f"edges must come in cycle order: {cycle} after {self._last_cycle}")
        if cycle > self._last_cycle and self._buffered >= FLUSH_EDGES:
            self._flush()
        self._last_cycle = cycle
        cs, ls = self._buf[channel]
        if cs and cs[-1] == cycle:
            ls[-1] = level
        else:
            cs.append(cycle)
            ls.append(level)
            self._buffered += 1
        self.edges += 1
        if self.on_edge is not None:
            self.on_edge(cycle, channel, level)

    def finish(self, cycles, provenance):
        """Close the recording of ``cycles`` cycles; return the :class:`Measurement`."""
        if cycles <= self._last_cycle:
            raise ValueError(f"the recording length {cycles} must exceed the last edge cycle "
                             f"{self._last_cycle}")
        end = cycles + SYNC_LATENCY
        if self._buffered:
            self._flush()
        # Snapshots at boundaries before `end`; every change is before `cycles`.
        self._feed(max(end - 1, self._done), [(np.zeros(0, np.int64), np.zeros(0, np.int8))]
                   * len(self.trackers))
        for tracker in self.trackers:
            tracker.finish(end)
        period = max(self.config.prescaler, 1)
        if any(t.enabled and t.low for t in self.trackers):
            quiet = 0
        else:
            quiet = end // period - self._last_high // period
        return Measurement(
            params=self.params, config=self.config,
            tick_seconds=self.clock_seconds * period,
            counts=[t.counts for t in self.trackers], class_names=self.class_names,
            probes=self.probes, duration_ticks=end // period, quiet_ticks=quiet,
            may_drop=any(t.may_drop for t in self.trackers), snapshots=self.snapshots,
            pulses={ch: w for ch, w in self.pulses.items() if w},
            pulses_truncated=self.pulses_truncated,
            pulse_starts={ch: st for ch, st in self.starts.items() if st},
            provenance={**provenance, "initial": list(self.initial)})

"""Logic-analyser recordings → :class:`~rbscope.measurement.Measurement`, through the bit-exact
model.

The importers (:mod:`.vcd`, :mod:`.sigrok`) do not measure pulse widths themselves: they turn the
recording into pin edges on a system-clock grid and feed them, one at a time, to the reference
model's :class:`~rbscope.model.ChannelTracker` — the very classifier the gateware implements,
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

from rbscope.gateware.rb_sniffer.params import EventKind

from ..measurement import Measurement, Probe, SeriesPoint
from ..model import SYNC_LATENCY, ChannelTracker

__all__ = ["RecordingError", "StreamClassifier", "parse_time", "format_time"]

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


class StreamClassifier:
    """Feed pin edges of several channels to the bit-exact model; collect a Measurement.

    Edges come in non-decreasing cycle order across channels (several per cycle allowed; the last
    one of a channel in a cycle wins).

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
        Keep the widths of at most this many measured pulses (0: none).
    on_edge : callable, optional
        Called as ``on_edge(cycle, channel, level)`` for every pin change fed to :meth:`edge`
        (to replay the recording elsewhere, e.g. into RTL: :mod:`rbscope.cocotb.rb`). The pin
        levels before cycle 0 end up in the measurement's ``provenance["initial"]``.
    """

    def __init__(self, params, config, clock_seconds, initial, *, class_names=(), probes=(),
                 snapshot_cycles=None, max_pulses=1_000_000, on_edge=None):
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
        self._pending = [None] * params.channels  # (cycle, level) not yet applied
        self._low_since = [0 if (t.enabled and lvl == 0) else None
                           for t, lvl in zip(self.trackers, initial, strict=True)]
        self._last_high = 0  # lvl cycle at which the last low run of any channel ended
        self.snapshot_cycles = snapshot_cycles
        self._next_snapshot = snapshot_cycles if snapshot_cycles else None
        self.snapshots = []
        self.max_pulses = max_pulses
        self.pulses = {i: array("Q") for i in range(params.channels)} if max_pulses else {}
        self._kept = 0
        self.pulses_truncated = False
        self._last_cycle = -1
        self.edges = 0

    def _record(self, channel, records):
        if not self.max_pulses:
            return
        glitch = self.params.classes + 1
        for r in records:
            if r.kind is EventKind.END and r.index != glitch:
                if self._kept >= self.max_pulses:
                    self.pulses_truncated = True
                    return
                self.pulses[channel].append(r.width)
                self._kept += 1

    def _apply(self, channel, cycle, level):
        tracker = self.trackers[channel]
        lvl_cycle = cycle + SYNC_LATENCY
        records = tracker.change(lvl_cycle, level)
        if records:
            self._record(channel, records)
        if tracker.enabled:
            if level == 0 and self._low_since[channel] is None:
                self._low_since[channel] = lvl_cycle
            elif level == 1 and self._low_since[channel] is not None:
                self._low_since[channel] = None
                self._last_high = max(self._last_high, lvl_cycle)

    def _flush_before(self, lvl_limit):
        for ch, pend in enumerate(self._pending):
            if pend is not None and pend[0] + SYNC_LATENCY < lvl_limit:
                self._apply(ch, *pend)
                self._pending[ch] = None

    def _snapshot(self, boundary):
        self._flush_before(boundary)
        counts = []
        for ch, tracker in enumerate(self.trackers):
            records = tracker.advance(boundary)
            if records:
                self._record(ch, records)
            counts.append(tracker.counts.copy(histogram=False))
        period = max(self.config.prescaler, 1)
        self.snapshots.append(SeriesPoint(boundary // period, counts))

    def edge(self, cycle, channel, level):
        """Record that the pin of ``channel`` has ``level`` from ``cycle`` on."""
        if cycle < self._last_cycle:
            raise ValueError(f"edges must come in cycle order: {cycle} after {self._last_cycle}")
        self._last_cycle = cycle
        while self._next_snapshot is not None and cycle >= self._next_snapshot:
            self._snapshot(self._next_snapshot)
            self._next_snapshot += self.snapshot_cycles
        pend = self._pending[channel]
        if pend is not None and pend[0] != cycle:
            self._apply(channel, *pend)
        self._pending[channel] = (cycle, level)
        self.edges += 1
        if self.on_edge is not None:
            self.on_edge(cycle, channel, level)

    def finish(self, cycles, provenance):
        """Close the recording of ``cycles`` cycles; return the :class:`Measurement`."""
        if cycles <= self._last_cycle:
            raise ValueError(f"the recording length {cycles} must exceed the last edge cycle "
                             f"{self._last_cycle}")
        end = cycles + SYNC_LATENCY
        while self._next_snapshot is not None and self._next_snapshot < end:
            self._snapshot(self._next_snapshot)
            self._next_snapshot += self.snapshot_cycles
        self._flush_before(end + 1)
        for ch, tracker in enumerate(self.trackers):
            records = tracker.finish(end)
            if records:
                self._record(ch, records)
        period = max(self.config.prescaler, 1)
        if any(s is not None for s in self._low_since):
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
            provenance={**provenance, "initial": list(self.initial)})

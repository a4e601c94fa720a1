"""The source-independent record of what an rbscope run counted: :class:`Measurement`.

Every source of R/B# counts — a live device, a simulated device, a capture file, a VCD or sigrok
recording classified through the bit-exact model — produces a :class:`Measurement`, and the WA
engine (:mod:`rbscope.analysis.wa`), calibration (:mod:`rbscope.analysis.calibrate`) and reports
consume only this. A measurement saves to and loads from JSON (:meth:`Measurement.to_json`,
:meth:`Measurement.from_json`), so ``rbscope analyze`` can also take a saved measurement file.

The contract (also in ``docs/wa.md``)
-------------------------------------
* ``params`` and ``config`` are the sniffer's build parameters and the (validated, padded)
  run-time configuration in force for the whole measurement. A source whose configuration
  changed during a run must split it into several measurements.
* ``tick_seconds`` is the tick period in seconds: ``config.prescaler`` clock cycles. Widths,
  windows, histogram bins, busy ticks and timestamps are all in ticks.
* ``class_names`` names the K class windows (``""`` for an unnamed or unused window). The WA
  engine finds the program class by the name ``"program"`` unless told otherwise.
* ``counts[i]`` is a :class:`~rbscope.gateware.rb_sniffer.model.ChannelCounts` of sniffer channel
``i``: the
  *cumulative* counts since the start of the measurement (after the device's clear), exact and
  unbounded (a device reader unwraps ``counter_bits`` / ``hist_bits`` wrap-arounds before
  building it). ``histogram`` holds ``params.hist_bins`` exact bin totals, bin edges from
  :func:`~rbscope.gateware.rb_sniffer.params.hist_bin_lo`. Disabled channels hold zeros.
* ``probes[i]`` tells what sniffer channel ``i`` is clipped to: a name (the pin or signal name)
  and the NAND dies whose R/B# that line carries, as ``(channel, chip, die)`` triples of the
  SSD's geometry. An empty tuple means "one die, location unknown"; several dies mean a wired-OR
  line.
* ``duration_ticks`` is the length of the measurement in ticks, ``quiet_ticks`` how long every
  enabled line had been ready at its end (the RB-Explorer method reads after long quiescence;
  ``None`` if unknown) and ``may_drop`` whether the gateware could have dropped events that the
  counts do not show (``counts[i].dropped`` counts the drops it knows of).
* ``snapshots`` (optional) is a time series of cumulative counts: :class:`SeriesPoint` objects with
  increasing device timestamps (ticks since the start) and one ``ChannelCounts`` per channel
  whose ``histogram`` may be empty. The final counts need not repeat as a snapshot.
* ``pulses`` (optional) maps a channel to the widths (ticks) of its measured pulses (the
  ``END`` events that were not glitches), in order; sources that cannot see single pulses leave
  it empty. ``pulses_truncated`` says a source stopped keeping widths to bound its memory.
  ``pulses_lost`` (optional) maps a channel to the number of its counted pulses that are not in
  ``pulses`` because their records were lost (a device's link dropped them): the sequence is
  the pulses received, in order, and the analysis bounds the lost ones. ``pulses_summarised``
  (optional) maps a channel to the number of its counted pulses that the device's trace
  summariser left out of ``pulses`` (the middle of runs of pulses of one class window, which
  the summariser counts: ``provenance["sequence"]["summary_windows"]`` says which windows);
  the analysis counts them with the programs the fitted model expects in those windows.
  ``pulse_gaps_open`` (optional) maps a channel to the indices ``i`` (increasing, ``1 ≤ i <
  len(pulses[ch])``) of the pulses whose idle time before them, ``pulse_starts[ch][i]`` less
  the end of pulse ``i − 1``, spans pulses that are not in ``pulses`` (summarised, or left out
  with records the link lost): that idle time is not one gap, and the order rules that read
  gaps leave it out.
* ``provenance`` is a free JSON object: at least ``source`` (``"vcd"``, ``"sigrok"``,
  ``"device"``, ``"capture"``, ``"simulation"``, …) and, for files, ``path``.
"""

import json
import math
import operator
from array import array
from dataclasses import dataclass, field
from itertools import pairwise

from rbscope.files import atomic_output
from rbscope.gateware.rb_sniffer.model import FIXED_COUNTERS, ChannelCounts
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

__all__ = ["FORMAT", "FORMAT_VERSION", "MeasurementError", "Probe", "SeriesPoint", "Measurement"]

#: Value of the ``format`` member of a saved measurement.
FORMAT = "rbscope.analysis.measurement"
#: Version of the saved format this code writes (and the highest it reads).
FORMAT_VERSION = 1


class MeasurementError(ValueError):
    """A measurement (or its JSON form) is invalid; the message names the offending field."""


def _int(where, value, lo=0):
    if isinstance(value, bool):
        raise MeasurementError(f"{where} must be an integer, not {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise MeasurementError(f"{where} must be an integer, not {value!r}") from None
    if value < lo:
        raise MeasurementError(f"{where} must be at least {lo}, not {value!r}")
    return value


def _get(obj, key, where):
    if not isinstance(obj, dict):
        raise MeasurementError(f"{where} must be a JSON object, not {type(obj).__name__}")
    if key not in obj:
        raise MeasurementError(f"{where}.{key} is missing")
    return obj[key]


@dataclass(frozen=True)
class Probe:
    """What one sniffer channel is clipped to.

    Parameters
    ----------
    name : str
        Pin or signal name (for reports).
    dies : tuple of (int, int, int)
        ``(channel, chip, die)`` of every NAND die driving this R/B# line; empty for "one die,
        location unknown".
    """

    name: str = ""
    dies: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise MeasurementError(f"probe name must be a string, not {self.name!r}")
        dies = []
        for k, loc in enumerate(self.dies):
            if not isinstance(loc, (tuple, list)) or len(loc) != 3:
                raise MeasurementError(f"probe {self.name!r} dies[{k}] must be a "
                                       f"(channel, chip, die) triple, not {loc!r}")
            dies.append(tuple(_int(f"probe {self.name!r} dies[{k}]", v) for v in loc))
        object.__setattr__(self, "dies", tuple(dies))

    @property
    def die_count(self):
        """Number of dies on this line (1 when unknown)."""
        return max(1, len(self.dies))


@dataclass
class SeriesPoint:
    """One point of a measurement's time series: cumulative counts of every channel at one
    device timestamp (ticks since the start)."""

    timestamp: int
    counts: list


def _counts_to_json(counts, with_histogram=True):
    out = {"classes": list(counts.classes)}
    for name in FIXED_COUNTERS:
        out[name] = getattr(counts, name)
    if with_histogram:
        out["histogram"] = {str(b): n for b, n in enumerate(counts.histogram) if n}
    return out


def _counts_from_json(obj, where, params, with_histogram=True):
    classes = _get(obj, "classes", where)
    if not isinstance(classes, list) or len(classes) != params.classes:
        raise MeasurementError(f"{where}.classes must be a list of {params.classes} counts, "
                               f"not {classes!r}")
    counts = ChannelCounts.zeros(params)
    counts.classes = [_int(f"{where}.classes[{k}]", v) for k, v in enumerate(classes)]
    for name in FIXED_COUNTERS:
        setattr(counts, name, _int(f"{where}.{name}", _get(obj, name, where)))
    hist = obj.get("histogram", {}) if with_histogram else {}
    if not isinstance(hist, dict):
        raise MeasurementError(f"{where}.histogram must be an object of bin: count")
    for key, value in hist.items():
        try:
            b = int(key)
        except ValueError:
            raise MeasurementError(f"{where}.histogram key {key!r} is not a bin number") from None
        if not 0 <= b < params.hist_bins:
            raise MeasurementError(f"{where}.histogram bin {b} is outside 0 … "
                                   f"{params.hist_bins - 1}")
        counts.histogram[b] = _int(f"{where}.histogram[{b}]", value)
    if not with_histogram:
        counts.histogram = []
    return counts


def _channel_counts(obj, name):
    """``{channel: count}`` of the JSON member ``name`` (absent: empty)."""
    value = obj.get(name, {})
    if not isinstance(value, dict):
        raise MeasurementError(f"measurement.{name} must be an object of channel: count")
    parsed = {}
    for k, v in value.items():
        try:
            ch = int(k)
        except ValueError:
            raise MeasurementError(f"measurement.{name} key {k!r} is not a channel") from None
        parsed[ch] = _int(f"measurement.{name}[{k}]", v)
    return parsed


def _channel_columns(obj, key, what):
    """``obj[key]``: an object of channel → list of non-negative integers (``what``), as
    ``{channel: array('Q')}``; absent is empty."""
    out = {}
    cols = obj.get(key, {})
    if not isinstance(cols, dict):
        raise MeasurementError(f"measurement.{key} must be an object of channel: {what}")
    for name, values in cols.items():
        try:
            ch = int(name)
        except ValueError:
            raise MeasurementError(f"measurement.{key} key {name!r} is not a channel") from None
        if not isinstance(values, list):
            raise MeasurementError(f"measurement.{key}[{name}] must be a list of {what}")
        arr = array("Q")
        for k, v in enumerate(values):
            arr.append(_int(f"measurement.{key}[{name}][{k}]", v))
        out[ch] = arr
    return out


@dataclass
class Measurement:
    """Cumulative R/B# counts of one run, independent of where they came from.

    See the module docstring for the exact contract of every member.

    Parameters
    ----------
    params : SnifferParams
    config : SnifferConfig
        Validated against ``params`` on construction (windows padded to K).
    tick_seconds : float
        Tick period in seconds.
    counts : list of ChannelCounts
        One per sniffer channel.
    class_names : tuple of str
        Names of the K windows.
    probes : list of Probe
        One per sniffer channel (default: named ``ch0``, ``ch1``, …, location unknown).
    duration_ticks : int
    quiet_ticks : int or None
    may_drop : bool
    snapshots : list of SeriesPoint
    pulses : dict of int to sequence of int
    pulses_truncated : bool
    pulses_lost : dict of int to int
    pulses_summarised : dict of int to int
    pulse_gaps_open : dict of int to sequence of int
    provenance : dict
    """

    params: SnifferParams
    config: SnifferConfig
    tick_seconds: float
    counts: list
    class_names: tuple = ()
    probes: list = field(default_factory=list)
    duration_ticks: int = 0
    quiet_ticks: int | None = None
    may_drop: bool = False
    snapshots: list = field(default_factory=list)
    pulses: dict = field(default_factory=dict)
    pulses_truncated: bool = False
    pulse_starts: dict = field(default_factory=dict)
    pulses_lost: dict = field(default_factory=dict)
    pulses_summarised: dict = field(default_factory=dict)
    pulse_gaps_open: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.params, SnifferParams):
            raise MeasurementError(f"params must be a SnifferParams, not {self.params!r}")
        if not isinstance(self.config, SnifferConfig):
            raise MeasurementError(f"config must be a SnifferConfig, not {self.config!r}")
        try:
            self.config = self.config.validate(self.params)
        except ValueError as exc:
            raise MeasurementError(f"config: {exc}") from None
        k, n = self.params.classes, self.params.channels
        if (not isinstance(self.tick_seconds, (int, float)) or isinstance(self.tick_seconds, bool)
                or not math.isfinite(self.tick_seconds) or self.tick_seconds <= 0):
            raise MeasurementError(f"tick_seconds must be a positive number of seconds, "
                                   f"not {self.tick_seconds!r}")
        self.tick_seconds = float(self.tick_seconds)
        names = tuple(self.class_names) + ("",) * (k - len(self.class_names))
        if len(names) != k or not all(isinstance(s, str) for s in names):
            raise MeasurementError(f"class_names must be at most {k} strings, "
                                   f"not {self.class_names!r}")
        self.class_names = names
        if len(self.counts) != n:
            raise MeasurementError(f"counts must have one entry per channel ({n}), "
                                   f"not {len(self.counts)}")
        for i, c in enumerate(self.counts):
            if not isinstance(c, ChannelCounts) or len(c.classes) != k:
                raise MeasurementError(f"counts[{i}] must be a ChannelCounts with {k} classes")
        if not self.probes:
            self.probes = [Probe(f"ch{i}") for i in range(n)]
        if len(self.probes) != n or not all(isinstance(p, Probe) for p in self.probes):
            raise MeasurementError(f"probes must have one Probe per channel ({n})")
        self.duration_ticks = _int("duration_ticks", self.duration_ticks)
        if self.quiet_ticks is not None:
            self.quiet_ticks = _int("quiet_ticks", self.quiet_ticks)
        last = -1
        for j, snap in enumerate(self.snapshots):
            if not isinstance(snap, SeriesPoint) or len(snap.counts) != n:
                raise MeasurementError(f"snapshots[{j}] must be a SeriesPoint with {n} channels")
            if snap.timestamp <= last:
                raise MeasurementError(f"snapshots[{j}].timestamp {snap.timestamp} does not "
                                       f"increase (follows {last})")
            last = snap.timestamp
        for ch in self.pulses:
            if not isinstance(ch, int) or not 0 <= ch < n:
                raise MeasurementError(f"pulses key {ch!r} is not a channel of 0 … {n - 1}")
        for ch, st in self.pulse_starts.items():
            if ch not in self.pulses or len(st) != len(self.pulses[ch]):
                raise MeasurementError(f"pulse_starts[{ch}] must give one start per pulse of "
                                       f"channel {ch}")
            if any(b < a for a, b in pairwise(st)):
                raise MeasurementError(f"pulse_starts[{ch}] must not decrease")
        for name in ("pulses_lost", "pulses_summarised"):
            for ch, n in getattr(self, name).items():
                if ch not in self.pulses:
                    raise MeasurementError(f"{name} key {ch!r} is not a channel of pulses")
                _int(f"{name}[{ch}]", n)
        for ch, at in self.pulse_gaps_open.items():
            if ch not in self.pulse_starts:
                raise MeasurementError(f"pulse_gaps_open key {ch!r} is not a channel of "
                                       f"pulse_starts")
            if any(b <= a for a, b in pairwise(at)) or (len(at) and not (
                    1 <= at[0] and at[-1] < len(self.pulses[ch]))):
                raise MeasurementError(f"pulse_gaps_open[{ch}] must be increasing indices of "
                                       f"pulses 1 … {len(self.pulses[ch]) - 1}")
        if not isinstance(self.provenance, dict):
            raise MeasurementError("provenance must be a dict")

    # Views ---------------------------------------------------------------------------------------

    @property
    def enabled(self):
        """Indices of the enabled channels."""
        return [i for i in range(self.params.channels) if (self.config.enable >> i) & 1]

    @property
    def duration_seconds(self):
        return self.duration_ticks * self.tick_seconds

    def class_index(self, name):
        """Return the index of the window called ``name``; raise ``KeyError`` if there is none."""
        try:
            return self.class_names.index(name)
        except ValueError:
            raise KeyError(f"no class window is named {name!r} (names: "
                           f"{', '.join(n for n in self.class_names if n) or 'none'})") from None

    def windows_seconds(self):
        """Return ``{name or index: (lo, hi)}`` of the enabled windows in seconds."""
        out = {}
        for k, (lo, hi) in enumerate(self.config.windows):
            if lo < hi:
                out[self.class_names[k] or str(k)] = (lo * self.tick_seconds,
                                                      hi * self.tick_seconds)
        return out

    def histogram_total(self, channels=None):
        """Return the bin-wise sum of the histograms of ``channels`` (default: enabled)."""
        channels = self.enabled if channels is None else channels
        total = [0] * self.params.hist_bins
        for i in channels:
            for b, n in enumerate(self.counts[i].histogram):
                total[b] += n
        return total

    def bin_edges(self):
        """Return the ``hist_bins + 1`` bin edges in ticks (bin ``b`` is ``[e[b], e[b+1])``)."""
        p = self.params
        return [p.hist_bin_lo(b) for b in range(p.hist_bins)] + [p.max_width]

    # JSON ----------------------------------------------------------------------------------------

    def to_dict(self):
        """Return the JSON-ready form of the measurement."""
        p, c = self.params, self.config
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "params": {name: getattr(p, name) for name in p.__dataclass_fields__},
            "config": {"prescaler": c.prescaler, "glitch_ticks": c.glitch_ticks,
                       "windows": [list(w) for w in c.windows], "idle_ticks": c.idle_ticks,
                       "enable": c.enable},
            "tick_seconds": self.tick_seconds,
            "class_names": list(self.class_names),
            "probes": [{"name": pr.name, "dies": [list(d) for d in pr.dies]}
                       for pr in self.probes],
            "duration_ticks": self.duration_ticks,
            "quiet_ticks": self.quiet_ticks,
            "may_drop": self.may_drop,
            "counts": [_counts_to_json(cc) for cc in self.counts],
            "snapshots": [{"timestamp": s.timestamp,
                           "counts": [_counts_to_json(cc, with_histogram=bool(cc.histogram))
                                      for cc in s.counts]}
                          for s in self.snapshots],
            "pulses": {str(ch): list(w) for ch, w in self.pulses.items()},
            "pulses_truncated": self.pulses_truncated,
            "pulse_starts": {str(ch): list(st) for ch, st in self.pulse_starts.items()},
            "pulses_lost": {str(ch): n for ch, n in self.pulses_lost.items()},
            **({"pulses_summarised": {str(ch): n for ch, n in self.pulses_summarised.items()}}
               if self.pulses_summarised else {}),
            **({"pulse_gaps_open": {str(ch): list(at) for ch, at in self.pulse_gaps_open.items()}}
               if self.pulse_gaps_open else {}),
            "provenance": self.provenance,
        }

    def to_json(self, indent=None):
        """Return the measurement as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, obj):
        """Build a measurement from :meth:`to_dict`'s form, validating every field."""
        fmt = _get(obj, "format", "measurement")
        if fmt != FORMAT:
            raise MeasurementError(f"measurement.format must be {FORMAT!r}, not {fmt!r}")
        version = _int("measurement.version", _get(obj, "version", "measurement"), 1)
        if version > FORMAT_VERSION:
            raise MeasurementError(f"measurement.version {version} is newer than this rbscope "
                                   f"reads ({FORMAT_VERSION})")
        pobj = _get(obj, "params", "measurement")
        if not isinstance(pobj, dict):
            raise MeasurementError("measurement.params must be an object")
        unknown = set(pobj) - set(SnifferParams.__dataclass_fields__)
        if unknown:
            raise MeasurementError(f"measurement.params has unknown fields {sorted(unknown)}")
        try:
            params = SnifferParams(**pobj)
        except (TypeError, ValueError) as exc:
            raise MeasurementError(f"measurement.params: {exc}") from None
        cobj = _get(obj, "config", "measurement")
        try:
            windows = tuple(tuple(w) for w in _get(cobj, "windows", "measurement.config"))
            config = SnifferConfig(
                prescaler=_get(cobj, "prescaler", "measurement.config"),
                glitch_ticks=_get(cobj, "glitch_ticks", "measurement.config"),
                windows=windows,
                idle_ticks=_get(cobj, "idle_ticks", "measurement.config"),
                enable=_get(cobj, "enable", "measurement.config"))
        except TypeError as exc:
            raise MeasurementError(f"measurement.config: {exc}") from None
        counts_obj = _get(obj, "counts", "measurement")
        if not isinstance(counts_obj, list):
            raise MeasurementError("measurement.counts must be a list")
        counts = [_counts_from_json(o, f"measurement.counts[{i}]", params)
                  for i, o in enumerate(counts_obj)]
        probes = []
        for i, pr in enumerate(obj.get("probes", [])):
            where = f"measurement.probes[{i}]"
            name = _get(pr, "name", where)
            dies = _get(pr, "dies", where)
            if not isinstance(dies, list):
                raise MeasurementError(f"{where}.dies must be a list")
            probes.append(Probe(name, tuple(tuple(d) if isinstance(d, list) else d
                                            for d in dies)))
        snapshots = []
        for j, so in enumerate(obj.get("snapshots", [])):
            where = f"measurement.snapshots[{j}]"
            ts = _int(f"{where}.timestamp", _get(so, "timestamp", where))
            sc = _get(so, "counts", where)
            if not isinstance(sc, list):
                raise MeasurementError(f"{where}.counts must be a list")
            snapshots.append(SeriesPoint(ts, [
                _counts_from_json(o, f"{where}.counts[{i}]", params,
                                  with_histogram="histogram" in o)
                for i, o in enumerate(sc)]))
        pulses = _channel_columns(obj, "pulses", "widths")
        starts = _channel_columns(obj, "pulse_starts", "start ticks")
        gaps_open = _channel_columns(obj, "pulse_gaps_open", "pulse indices")
        lost, summarised = (_channel_counts(obj, name)
                            for name in ("pulses_lost", "pulses_summarised"))
        tick = _get(obj, "tick_seconds", "measurement")
        return cls(
            params=params, config=config, tick_seconds=tick, counts=counts,
            class_names=tuple(obj.get("class_names", ())), probes=probes,
            duration_ticks=obj.get("duration_ticks", 0), quiet_ticks=obj.get("quiet_ticks"),
            may_drop=bool(obj.get("may_drop", False)), snapshots=snapshots, pulses=pulses,
            pulses_truncated=bool(obj.get("pulses_truncated", False)), pulse_starts=starts,
            pulses_lost=lost, pulses_summarised=summarised, pulse_gaps_open=gaps_open,
            provenance=obj.get("provenance", {}))

    @classmethod
    def from_json(cls, text):
        """Parse :meth:`to_json`'s output; raise :class:`MeasurementError` naming the field."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MeasurementError(f"not valid JSON: {exc.msg} at line {exc.lineno} column "
                                   f"{exc.colno} (offset {exc.pos})") from None
        return cls.from_dict(obj)

    def save(self, path, *, inputs=(), force=False):
        """Write the measurement to ``path`` as JSON, atomically; ``inputs`` and ``force`` as
        for :func:`rbscope.files.check_output` (raises :class:`~rbscope.files.OutputError`)."""
        with atomic_output(path, kind="json", inputs=inputs, force=force) as f:
            f.write(self.to_json())
            f.write("\n")

    @classmethod
    def load(cls, path):
        """Read a measurement saved by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())

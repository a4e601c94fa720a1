"""R/B# stimulus for cocotb: replay pulse trains or a logic-analyser recording onto ``rb``.

A :class:`RbRecording` holds the pin changes of every channel on the clock-cycle grid and the
:class:`~rbscope.analysis.measurement.Measurement` that the bit-exact reference model counts for
them —
the same numbers ``rbscope analyze`` reports for the same file, because it is the same importer
(:mod:`rbscope.recordings`). :class:`RbDriver` plays it onto a ``rb`` port::

    rec = RbRecording.from_file("capture.vcd", params, config, clock=10e-9)
    await sniffer.reset(config, rb=rec.initial_word)     # rb holds its level during reset
    await RbDriver(dut.rb, period_ns=10).play(rec)       # returns during cycle rec.cycles
    got = await sniffer.measurement(config, tick_seconds=rec.expected.tick_seconds)
    assert got.counts == rec.expected.counts

Cycle ``c`` of a recording is the ``c``-th clock cycle after reset is released; :meth:`play`
must start at the falling clock edge on which ``rst`` falls (where :meth:`Sniffer.reset
<rbscope.cocotb.sniffer.Sniffer.reset>` returns) and changes the pins half a period before the
rising edge that samples them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rbscope.analysis.measurement import Measurement
from rbscope.device.stimulus import merge_trains
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.recordings.sigrok import import_sr
from rbscope.recordings.stream import RecordingError, StreamClassifier
from rbscope.recordings.vcd import default_clock, import_vcd, read_header

__all__ = ["RbRecording", "RbDriver"]


@dataclasses.dataclass
class RbRecording:
    """Pin changes of ``channels`` R/B# lines and what the model counts for them.

    Members
    -------
    trains : list of Train
        One per channel: the level before cycle 0 and the ``(cycle, level)`` changes.
    cycles : int
        Length ``N`` of the recording in clock cycles (after the last change).
    clock_seconds : float
        The clock period the cycles stand for.
    expected : Measurement
        The reference model's counts: events emitted up to cycle ``N + 2`` with every pin
        holding its last level after cycle ``N`` (see :mod:`rbscope.recordings`).
    """

    trains: list
    cycles: int
    clock_seconds: float
    expected: Measurement

    @property
    def initial_word(self):
        """The ``rb`` word before cycle 0 (bit ``i``: channel ``i``); drive it during reset."""
        return merge_trains(self.trains)[0]

    @property
    def schedule(self):
        """``[(cycle, rb word from that cycle on)]``, in cycle order."""
        return merge_trains(self.trains)[1]

    @classmethod
    def from_trains(cls, trains, cycles, params, config, *, clock_seconds=1e-8, class_names=()):
        """Build a recording from :class:`~rbscope.gateware.rb_sniffer.model.Train` objects (one
        per channel)."""
        trains = [t if isinstance(t, Train) else Train(*t) for t in trains]
        if len(trains) != params.channels:
            raise ValueError(f"trains must have one Train per channel ({params.channels}), not "
                             f"{len(trains)}")
        classifier = StreamClassifier(params, config, clock_seconds,
                                      [t.initial for t in trains], class_names=class_names)
        changes = sorted((c, ch, lvl) for ch, t in enumerate(trains) for c, lvl in t.edges)
        for cycle, channel, level in changes:
            classifier.edge(cycle, channel, level)
        expected = classifier.finish(cycles, {"source": "trains", "cycles": cycles})
        return cls(trains, cycles, clock_seconds, expected)

    @classmethod
    def from_file(cls, path, params, config, *, clock=None, signals=(), class_names=(),
                  unknown="hold"):
        """Read a VCD (``.vcd``) or sigrok session (``.sr``) through :mod:`rbscope.recordings`.

        Parameters
        ----------
        path : str or Path
        params, config : SnifferParams, SnifferConfig
            The sniffer the recording will be played into (``params.channels`` must equal the
            number of signals selected); the model uses ``config`` as it is, its prescaler
            included.
        clock : float, optional
            VCD only: clock period in seconds (default: the importer's, from the timescale).
            For ``.sr`` the sample period is the clock.
        signals : sequence of str
            The lines to take, in channel order (default: every 1-bit signal).
        class_names : sequence of str
            Names of the class windows, carried into the measurement.
        unknown : str
            VCD only: what ``x`` means (``"hold"``, ``"high"``, ``"low"``).

        Raises
        ------
        rbscope.recordings.RecordingError
            If the file cannot be read or does not fit ``params``.
        """

        path = Path(path)
        config = config.validate(params)
        changes = []

        def params_for(n):
            if n != params.channels:
                raise RecordingError(f"{path}: {n} signals selected but the sniffer has "
                                     f"{params.channels} channels")
            return params

        def preset_config(_params, _tick, _prescaler):
            return config, tuple(class_names)

        def on_edge(cycle, channel, level):
            changes.append((cycle, channel, level))

        common = dict(params_for=params_for, preset_config=preset_config, signals=signals,
                      on_edge=on_edge)
        suffix = path.suffix.lower()
        if suffix == ".vcd":

            if clock is None:
                with open(path, encoding="ascii", errors="replace") as f:
                    clock = default_clock(read_header(f, str(path)).timescale)
            m = import_vcd(path, clock=clock, tick=clock * max(config.prescaler, 1),
                           unknown=unknown, **common)
        elif suffix == ".sr":
            if clock is not None:
                raise ValueError("a sigrok session's clock is its sample rate; give no clock")

            m = import_sr(path, **common)
        else:
            raise ValueError(f"{path}: expected a .vcd or .sr file, not {suffix or 'no suffix'!r}")
        initial = m.provenance["initial"]
        edges = [[] for _ in range(params.channels)]
        for cycle, channel, level in changes:
            if edges[channel] and edges[channel][-1][0] == cycle:
                edges[channel][-1] = (cycle, level)  # the last change in a cycle wins
            else:
                edges[channel].append((cycle, level))
        trains = [Train(initial[ch], edges[ch]) for ch in range(params.channels)]
        return cls(trains, m.provenance["cycles"], m.tick_seconds / max(config.prescaler, 1), m)


class RbDriver:
    """Drive a ``rb`` port (one bit per channel) from an :class:`RbRecording`.

    Parameters
    ----------
    signal : cocotb handle
        The ``rb`` input of the design (or of its clock wrapper).
    period_ns : float
        The clock period of the simulation in ns (cycle ``c`` starts ``c * period_ns`` after
        :meth:`play` is called).
    """

    def __init__(self, signal, period_ns):
        if not period_ns > 0:
            raise ValueError(f"period_ns must be positive, not {period_ns!r}")
        self.signal = signal
        self.period_ns = period_ns

    async def play(self, recording, *, cycles=None):
        """Apply every pin change on its cycle; return ``cycles`` (default ``recording.cycles``)
        cycles after the start, the pins holding their last levels.

        Wakes the Python side only at pin changes (timers, no per-cycle edges), so the
        simulator runs at its own speed in between.
        """
        await self.play_schedule(recording.schedule,
                                 recording.cycles if cycles is None else cycles)

    async def play_schedule(self, schedule, cycles):
        """Apply ``[(cycle, rb word)]`` (as :func:`rbscope.device.stimulus.merge_trains` makes);
        return in cycle ``cycles``."""
        from cocotb.triggers import Timer  # optional: the [cocotb] extra

        now = 0
        for cycle, word in schedule:
            if cycle >= cycles:
                break
            if cycle > now:
                await Timer((cycle - now) * self.period_ns, unit="ns")
                now = cycle
            self.signal.value = word
        if cycles > now:
            await Timer((cycles - now) * self.period_ns, unit="ns")

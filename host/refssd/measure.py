"""From a reference-SSD run to what rbscope would measure: Measurements, WA, VCD.

:func:`to_measurement` feeds the dies' R/B# pulse trains, as pin edges on a 100 MHz clock grid,
to the bit-exact model of the sniffer through the importers' :class:`StreamClassifier` — the
path ``rbscope analyze`` takes for a VCD recording of the same pins — and returns the
:class:`~rbscope.analysis.measurement.Measurement`. :func:`measure_wa` then computes WA with the WA
engine as ``rbscope analyze`` does (R/B# only), with the windows a new user would use: the
bundled geometry's, or those ``rbscope calibrate`` proposes from the recording.
"""

import numpy as np

from rbscope.analysis.calibrate import CalibrationError, calibrate, hints_from_geometry
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Probe
from rbscope.analysis.pipeline import wa_of
from rbscope.analysis.presets import DEFAULT_PRESET
from rbscope.analysis.sequence import SequenceError
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.gateware.rb_sniffer.params import SnifferParams, classes_for_windows
from rbscope.recordings.stream import StreamClassifier
from rbscope.recordings.vcd import write_vcd as _write_vcd

from .drive import RefSSDError

__all__ = ["to_measurement", "measure_wa", "measure_wa_sequence", "user_preset", "write_vcd",
           "die_edges", "rb_lines"]

#: Default recording clock (ns): the gateware's 100 MHz, the importers' default for VCD.
CLOCK_NS = 10


def die_edges(pulses, clock_ns=CLOCK_NS):
    """Return ``(cycles, levels)`` of one die's R/B# pin on a ``clock_ns`` grid.

    A pulse ``[start, start + width)`` ns pulls the pin low from cycle ``start // clock_ns`` to
    cycle ``(start + width) // clock_ns`` (the importers' rule: a change at ``t`` takes effect on
    cycle ``floor(t / C)``). Pulses of zero width, or shorter than a cycle within one cycle,
    vanish; touching or overlapping pulses merge, as on the real pin (several dies' pulses on
    one wired-OR line, or a die's overlapping plane reads).
    """
    lo = pulses["start_ns"] // clock_ns
    hi = (pulses["start_ns"] + pulses["width_ns"]) // clock_ns
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if len(lo) > 1 and (np.diff(lo) < 0).any():
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
    # The line stays low until the latest end so far (a pulse may end inside an earlier one).
    hi = np.maximum.accumulate(hi) if len(hi) else hi
    # Merge pulses that touch or overlap on the grid (the pin cannot show the gap).
    if len(lo) > 1:
        gap = lo[1:] > hi[:-1]
        starts = np.concatenate([[True], gap])
        ends = np.concatenate([gap, [True]])
        lo, hi = lo[starts], hi[ends]
    cycles = np.empty(2 * len(lo), dtype=np.int64)
    cycles[0::2], cycles[1::2] = lo, hi
    levels = np.empty(2 * len(lo), dtype=np.int8)
    levels[0::2], levels[1::2] = 0, 1
    return cycles, levels


def rb_lines(drive, dies=None):
    """The R/B# lines a probe sees: ``[(name, [die, ...]), ...]``.

    One line per die, or with ``drive.wired_or`` one per chip carrying every LUN of it (the
    chip's R/B# pins are wired together). ``dies`` restricts to the lines carrying those dies
    (default: all).
    """
    dies = list(range(drive.dies)) if dies is None else list(dies)
    if not drive.wired_or:
        return [(f"die{d} R/B#", [d]) for d in dies]
    lines = {}
    for d in dies:
        ch, chip, _ = drive.die_location(d)
        if (ch, chip) not in lines:
            lines[(ch, chip)] = sorted(e for e in range(drive.dies)
                                       if drive.die_location(e)[:2] == (ch, chip))
    return [(f"ch{ch}.chip{chip} R/B# (LUNs {', '.join(str(e) for e in members)})", members)
            for (ch, chip), members in lines.items()]


def user_preset(run):
    """The classifier preset a user has for the drive: the bundled geometry's, or generic."""
    return run.geometry.classifier or DEFAULT_PRESET


def to_measurement(run, *, preset=None, dies=None, clock_ns=CLOCK_NS, width_bits=24,
                   max_pulses=0):
    """Classify the run's R/B# pulses through the bit-exact sniffer model.

    Parameters
    ----------
    run : Run
    preset : rbscope.analysis.presets.Preset, optional
        Windows (default :func:`user_preset`).
    dies : sequence of int, optional
        Dies whose R/B# is probed, one sniffer line each (default: all); with a wired-OR drive
        one line per chip, carrying all its LUNs (:func:`rb_lines`).
    clock_ns : int
        Recording clock; the tick is one clock (prescaler 1), as ``rbscope analyze`` defaults.
    width_bits : int
        The sniffer's width counter (``analyze --width-bits``, default 24).
    The recording ends the preset's idle time (``idle_s``, clamped to the timestamp) after the
    last pulse: the method reads after quiescence.
    max_pulses : int
        Keep the widths of at most this many pulses in ``Measurement.pulses``.
    """
    preset = preset or user_preset(run)
    dies = list(range(run.drive.dies)) if dies is None else list(dies)
    if not dies:
        raise RefSSDError("no die to probe")
    for d in dies:
        if not 0 <= d < run.drive.dies:
            raise RefSSDError(f"die {d} is not a die of {run.drive.name} (0 … "
                              f"{run.drive.dies - 1})")
    lines = rb_lines(run.drive, dies)
    params = SnifferParams(channels=len(lines), classes=classes_for_windows(len(preset.windows)),
                           width_bits=width_bits)
    tick = clock_ns / 1e9  # (not clock_ns * 1e-9: 1000 * 1e-9 is a hair above 1e-6)
    config, names, _ = preset.to_config(params, tick)
    probes = [Probe(name, tuple(run.die_location(d) for d in members))
              for name, members in lines]
    sc = StreamClassifier(params, config, tick, [1] * len(lines), class_names=names,
                          probes=probes, max_pulses=max_pulses)
    cyc, chan, lvl = [], [], []
    for i, (_, members) in enumerate(lines):
        pulses = (run.pulses[members[0]] if len(members) == 1
                  else np.concatenate([run.pulses[d] for d in members]))
        c, v = die_edges(pulses, clock_ns)
        cyc.append(c)
        lvl.append(v)
        chan.append(np.full(len(c), i, dtype=np.int64))
    cyc, chan, lvl = np.concatenate(cyc), np.concatenate(chan), np.concatenate(lvl)
    order = np.lexsort((chan, cyc))
    edge = sc.edge
    for c, ch, v in zip(cyc[order].tolist(), chan[order].tolist(), lvl[order].tolist(),
                        strict=True):
        edge(c, ch, v)
    last = int(cyc.max()) if len(cyc) else 0
    end = last + 2 + config.idle_ticks
    return sc.finish(end, {"source": "simulation", "refssd": run.drive.name,
                           "workload": run.workload, "precondition": run.precondition,
                           "seed": run.seed})


def measure_wa(run, *, windows=None, dies=None, clock_ns=CLOCK_NS, classifier="windows"):
    """WA as ``rbscope analyze --classifier windows`` computes it from the run's R/B# lines.

    R/B#-only mode with plain class windows (the RB-Explorer method); ``classifier="sequence"``
    (or ``"auto"``) applies ``analyze``'s sequence-aware classifier
    (:func:`rbscope.analysis.sequence.classify_measurement`) to the same measurement instead.

    Parameters
    ----------
    run : Run
    windows : str, optional
        ``"bundled"``: the user geometry's windows (generic ones if it has none);
        ``"calibrated"``: ``rbscope calibrate`` on this recording's histogram (with the
        geometry's timing as hints), then its proposed windows. Default: the drive's
        ``user_windows``.
    dies : sequence of int, optional
        Probed dies (default all).
    classifier : str
        ``"windows"``, ``"sequence"`` or ``"auto"``, as ``rbscope analyze --classifier``.

    Returns
    -------
    dict
        ``wa``, ``lo``, ``hi`` (the engine's interval), ``conf_lo``, ``conf_hi`` (its 95 %
        interval, or None), ``windows`` (name, lo µs, hi µs), ``warnings``, ``class_totals``.
    """
    windows = windows or run.drive.user_windows
    geometry = run.geometry
    preset = user_preset(run)
    notes = []
    if classifier not in ("windows", "sequence", "auto"):
        raise RefSSDError(f"classifier must be windows, sequence or auto, not {classifier!r}")
    # The sequence classifier reads each die's pulses in order; windows need only the counts.
    keep = 0 if classifier == "windows" else 50_000_000
    m = to_measurement(run, preset=preset, dies=dies, clock_ns=clock_ns, max_pulses=keep)
    if windows == "calibrated":
        try:
            result = calibrate(m.histogram_total(), m.params, m.tick_seconds,
                               hints=hints_from_geometry(geometry), glitch_us=preset.glitch_us)
        except CalibrationError as exc:
            notes.append(f"calibration failed ({exc}); the bundled windows were kept")
        else:
            preset = result.preset
            m = to_measurement(run, preset=preset, dies=dies, clock_ns=clock_ns,
                               max_pulses=keep)
    elif windows != "bundled":
        raise RefSSDError(f"windows must be bundled or calibrated, not {windows!r}")
    # WA exactly as `rbscope analyze` computes it (one path: rbscope.analysis.pipeline.wa_of).
    try:
        r = wa_of(m, geometry, from_bytes(run.logical_bytes), classifier=classifier,
                  notes=notes)
    except SequenceError as exc:
        raise RefSSDError(f"sequence classifier: {exc}") from None
    conf = r.wa_confidence
    return {"wa": r.wa.value, "lo": r.wa.lo, "hi": r.wa.hi,
            "conf_lo": None if conf is None else conf.lo,
            "conf_hi": None if conf is None else conf.hi,
            "windows": [list(w) for w in preset.windows], "warnings": notes + list(r.warnings),
            "class_totals": dict(r.class_totals), "measurement": m}


def write_vcd(run, path, *, dies=None, timescale_ns=1):
    """Write the run's R/B# lines (``rb<die>``, 1 = ready) as a VCD for ``rbscope analyze``.

    Times are in ``timescale_ns`` ns units; the file ends one second of quiescence after the
    last pulse, so that the method's idle condition holds.
    """
    dies = list(range(run.drive.dies)) if dies is None else list(dies)
    trains = []
    for d in dies:
        cycles, levels = die_edges(run.pulses[d], timescale_ns)
        trains.append(Train(1, list(zip(cycles.tolist(), levels.tolist(), strict=True))))
    end = (run.end_ns + 1_000_000_000) // timescale_ns
    with open(path, "w", encoding="ascii") as f:
        _write_vcd(f, trains, timescale=f"{timescale_ns} ns", names=[f"rb{d}" for d in dies],
                   scope="refssd", end=end)


def measure_wa_sequence(run):
    """:func:`measure_wa` with ``analyze``'s sequence-aware classifier (``--measure
    rbscope.refssd.measure:measure_wa_sequence`` in the accuracy benchmark)."""
    return measure_wa(run, classifier="sequence")

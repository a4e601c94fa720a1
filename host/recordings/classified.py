"""Export a recording's pulses, classified, as a VCD that GTKWave and PulseView open.

The recording (VCD or sigrok session) goes through the bit-exact model as ``rbscope analyze``
imports it. The VCD written holds, per R/B# line ``NAME``:

* ``NAME`` — the pin as recorded (1 bit), so the file stands on its own;
* ``NAME_class`` — a 4-bit code that holds, from the first low sample to the last of each
  measured pulse, ``k + 1`` for class window ``k`` and ``K + 1`` for a pulse outside every window;
  0 elsewhere (ready, glitches and partial pulses, which the sniffer does not classify). The
  header's ``$comment`` lists the codes, and :func:`gtkwave_filter` writes a GTKWave translate
  file that shows them by name;
* with ``onehot=True``, instead of the code, ``NAME_<class>`` — one 1-bit signal per class that
  is high during the pulses of that class: sigrok's VCD input takes only 1-bit signals (it stops
  reading at the first change of a vector), so this is the form PulseView shows
  (``sigrok-cli -I vcd -i out.vcd -o out.sr``).

Times are written on the recording's own time grid (its clock or sample period) with the
coarsest VCD timescale that represents it exactly, so importing the export again gives the same
counts.
"""

import math
import re
from array import array
from pathlib import Path

import numpy as np

from rbscope.files import atomic_output, check_output
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, window_index_array

from .sources import open_measurement
from .stream import RecordingError
from .vcd import _ident

__all__ = ["ExportResult", "export_classified_vcd", "gtkwave_filter", "timescale_for"]

_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("ps", 1e-12), ("fs", 1e-15))


def timescale_for(seconds):
    """Return ``(timescale text, units per cycle)``: the coarsest VCD timescale (1, 10 or 100 of
    s … fs) in which one cycle of ``seconds`` is a whole number of units (1 fs at worst,
    rounded)."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"cycle period must be a positive number of seconds, not {seconds!r}")
    for name, unit in _UNITS:
        for mult in (100, 10, 1):
            n = seconds / (unit * mult)
            if n >= 1 and abs(n - round(n)) <= 1e-9 * n:
                return f"{mult}{name}", round(n)
    return "1fs", max(1, round(seconds / 1e-15))


class ExportResult:
    """What :func:`export_classified_vcd` wrote: the measurement and the per-class counts."""

    def __init__(self, measurement, counts, codes, path):
        self.measurement = measurement
        self.counts = counts  # per line: {class name: pulses}
        self.codes = codes  # {code: class name}
        self.path = path


def export_classified_vcd(source, out, *, onehot=False, inputs=(), force=False,
                          **import_options):
    """Import ``source`` (a VCD or sigrok recording) and write its classified pulses to ``out``.

    ``import_options`` are those of :func:`rbscope.recordings.sources.open_measurement` (preset,
    windows, signals, clock, tick, ...). ``out`` is written atomically and may not be
    ``source`` nor any of ``inputs``; an existing file that is not a VCD is replaced only with
    ``force`` (:func:`rbscope.files.check_output`, whose :class:`~rbscope.files.OutputError`
    is raised before the import). Returns an :class:`ExportResult`.
    """
    inputs = (source, *inputs)
    check_output(out, kind="vcd", inputs=inputs, force=force)

    edges = {}  # channel -> (array of cycles, array of levels)
    pulses = {}  # channel -> list of (starts, ends, widths)

    def on_edge(cycle, channel, level):
        c, v = edges.setdefault(channel, (array("q"), array("b")))
        if c and c[-1] == cycle:
            v[-1] = level
        else:
            c.append(cycle)
            v.append(level)

    def on_pulses(channel, starts, ends, widths):
        pulses.setdefault(channel, []).append((starts, ends, widths))

    m, notes = open_measurement(source, on_edge=on_edge, on_pulses=on_pulses, **import_options)
    prov = m.provenance
    clock = prov.get("clock_s")
    cycles = prov.get("cycles")
    if not clock or cycles is None:
        raise RecordingError(f"{source}: the import did not record its clock and length")
    initial = prov.get("initial") or [1] * m.params.channels
    k = m.params.classes
    windows = m.config.windows
    names = [m.class_names[j] or f"class{j}" for j in range(k)]
    codes = {j + 1: names[j] for j in range(k) if windows[j][0] < windows[j][1]}
    codes[k + 1] = "unclassified"
    if len(codes) > 15:
        raise RecordingError("more than 14 classes do not fit the 4-bit class code")
    lines = _names([m.probes[ch].name or f"rb{ch}" for ch in range(m.params.channels)])
    scale_text, per_cycle = timescale_for(clock)

    # Every change of every signal as (time in cycles, signal index, value), then sorted.
    t_parts, s_parts, v_parts = [], [], []
    counts = []
    sig = 0
    signals = []  # (identifier, width, name, value at time 0)
    for ch in range(m.params.channels):
        raw = sig
        signals.append((_ident(sig), 1, lines[ch], int(initial[ch])))
        sig += 1
        code_sig = None
        if not onehot:
            code_sig = sig
            signals.append((_ident(sig), 4, f"{lines[ch]}_class", 0))
            sig += 1
        hot = {}
        if onehot:
            for code, name in codes.items():
                hot[code] = sig
                signals.append((_ident(sig), 1, f"{lines[ch]}_{name}", 0))
                sig += 1
        c, v = edges.get(ch, (array("q"), array("b")))
        if len(c):
            t_parts.append(np.frombuffer(c, dtype=np.int64))
            s_parts.append(np.full(len(c), raw, dtype=np.int64))
            v_parts.append(np.frombuffer(v, dtype=np.int8).astype(np.int64))
        parts = pulses.get(ch, [])
        if parts:
            starts = np.concatenate([p[0] for p in parts]) - SYNC_LATENCY
            ends = np.concatenate([p[1] for p in parts]) - SYNC_LATENCY
            code = window_index_array(np.concatenate([p[2] for p in parts]), windows) + 1
        else:
            starts = ends = code = np.zeros(0, dtype=np.int64)
        counts.append({codes[x]: int(n) for x, n in zip(*np.unique(code, return_counts=True),
                                                         strict=True)})
        targets = [(code_sig, code)] if code_sig is not None else []
        for target, value_on in targets + [(s, (code == x).astype(np.int64))
                                           for x, s in hot.items()]:
            if target == code_sig:  # the code itself
                on, keep = value_on, np.ones(len(starts), dtype=bool)
            else:  # a one-hot line: high during this class's pulses only
                on, keep = np.ones(len(starts), dtype=np.int64), value_on == 1
            t_parts += [starts[keep], ends[keep]]
            s_parts += [np.full(int(keep.sum()), target, dtype=np.int64)] * 2
            v_parts += [on[keep], np.zeros(int(keep.sum()), dtype=np.int64)]
    if t_parts:
        t = np.concatenate(t_parts)
        s = np.concatenate(s_parts)
        v = np.concatenate(v_parts)
        # At one instant a pulse's end (value 0) comes before the next pulse's start.
        order = np.lexsort((v != 0, s, t))
        t, s, v = t[order], s[order], v[order]
    else:
        t = s = v = np.zeros(0, dtype=np.int64)

    out = Path(out)
    try:
        with atomic_output(out, kind="vcd", inputs=inputs, force=force, encoding="ascii",
                           newline="\n") as f:
            f.write(f"$comment rbscope: classified R/B# pulses of {Path(str(source)).name}; "
                    f"NAME_class codes: 0 none, "
                    + ", ".join(f"{x} {n}" for x, n in codes.items()) + " $end\n")
            f.write(f"$timescale {scale_text} $end\n$scope module rbscope $end\n")
            for ident, width, name, _ in signals:
                f.write(f"$var wire {width} {ident} {name} $end\n")
            f.write("$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n")
            for ident, width, _, value in signals:
                f.write(_value(value, width, ident))
            f.write("$end\n")
            idents = [x[0] for x in signals]
            widths = [x[1] for x in signals]
            last = 0
            chunk = []
            for ti, si, vi in zip(t.tolist(), s.tolist(), v.tolist(), strict=True):
                if ti != last:
                    chunk.append(f"#{ti * per_cycle}\n")
                    last = ti
                chunk.append(_value(vi, widths[si], idents[si]))
                if len(chunk) > 65536:
                    f.write("".join(chunk))
                    chunk = []
            end = (cycles if cycles > last else last + 1) * per_cycle
            chunk.append(f"#{end}\n")
            f.write("".join(chunk))
    except OSError as exc:
        raise RecordingError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return ExportResult(m, counts, codes, out)


def _names(names):
    """VCD-safe, unique leaf names: the last part of a dotted name, other characters as ``_``."""
    out = []
    for i, name in enumerate(names):
        leaf = re.sub(r"[^A-Za-z0-9_]", "_", name.rsplit(".", 1)[-1]) or f"rb{i}"
        out.append(leaf if leaf not in out else f"{leaf}_{i}")
    return out


def _value(v, width, ident):
    if width == 1:
        return f"{v}{ident}\n"
    return f"b{v:b} {ident}\n"


def gtkwave_filter(codes):
    """Return a GTKWave translate-filter file that names the ``NAME_class`` codes."""
    lines = ["0 -"] + [f"{code:X} {name}" for code, name in sorted(codes.items())]
    return "\n".join(lines) + "\n"

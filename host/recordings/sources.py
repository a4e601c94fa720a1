"""Open any source of R/B# counts as a :class:`~rbscope.analysis.measurement.Measurement`.

A saved measurement (``.json``), a capture file (``rbscope capture``), a VCD or a sigrok session
(``.sr``): :func:`open_measurement` tells the format from the name, then the content, and
returns the measurement with the notes the import produced (:func:`open_source`: the measurement
alone, the notes in its ``provenance["notes"]``). The command line (``rbscope
analyze``, ``calibrate``) and the reports only call this.

Errors: :class:`SourceOptionError` for options that do not fit the source (a usage error), and
the sources' own errors — :class:`~rbscope.recordings.RecordingError` (every file problem,
capture files included), :class:`~rbscope.analysis.measurement.MeasurementError`,
:class:`~rbscope.analysis.presets.PresetError`.
"""

from pathlib import Path

from rbscope.analysis.measurement import Measurement, Probe
from rbscope.analysis.presets import DEFAULT_PRESET, Preset
from rbscope.device.capture import CaptureError, capture_to_measurement
from rbscope.gateware.rb_sniffer.params import SnifferParams, classes_for_windows

from .sigrok import import_sr
from .stream import RecordingError
from .vcd import import_vcd

__all__ = ["FORMATS", "SourceOptionError", "detect_format", "open_measurement",
           "open_source"]

#: The formats :func:`open_measurement` reads.
FORMATS = ("json", "capture", "vcd", "sr")


class SourceOptionError(ValueError):
    """Options that do not fit the source (a usage error: exit code 2)."""


def detect_format(path, fmt="auto"):
    """Return the format of ``path``: ``fmt`` if given, else from the suffix, then the content."""
    if fmt != "auto":
        if fmt not in FORMATS:
            raise SourceOptionError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in (".json", ".vcd", ".sr"):
        return suffix[1:]
    try:  # other names: by content
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot open: {exc.strerror or exc}") from None
    if head.startswith(b"\x89RBSCAP"):
        return "capture"
    if head.startswith(b"PK"):
        return "sr"
    if head.lstrip().startswith(b"{"):
        return "json"
    if head.lstrip().startswith(b"$"):
        return "vcd"
    raise SourceOptionError(f"{path}: cannot tell the format; give --format")


def _check_probes(probes, channels, source):
    out = {}
    for index, dies in probes:
        if not 0 <= index < channels:
            raise SourceOptionError(f"--probe {index}: {source} has lines 0 … {channels - 1}")
        if index in out:
            raise SourceOptionError(f"--probe {index} is given twice")
        out[index] = tuple(dies)
    return out


def open_measurement(path, *, fmt="auto", preset=None, windows=None, glitch_us=None,
                     signals=(), clock=None, tick=None, unknown="hold", width_bits=24,
                     snapshot_seconds=None, max_pulses=1_000_000, probes=(), progress=None,
                     bus=None, tap_for=None, on_edge=None, on_pulses=None, sequence=True):
    """Return ``(Measurement, notes)`` of the source ``path``.

    Parameters
    ----------
    fmt : str
        ``"auto"`` (from the suffix, then the content) or one of :data:`FORMATS`.
    preset : Preset, optional
        Class windows for a recording (VCD, sigrok); default :data:`DEFAULT_PRESET`.
    windows : sequence of (name, lo_us, hi_us), optional
        Replace the preset's windows.
    glitch_us : float, optional
        Replace the preset's glitch filter.
    signals, clock, tick, unknown, width_bits, snapshot_seconds, max_pulses, progress
        Import options of recordings (see :func:`rbscope.recordings.vcd.import_vcd`).
    probes : sequence of (line, dies)
        The dies on each sniffer line; a line outside the source's lines is an error.
    bus, tap_for
        The opcode tap: the recording's bus signals and the labeller factory (see
        :func:`rbscope.recordings.vcd.import_vcd`); recordings only.
    on_edge, on_pulses : callable, optional
        Recordings only: called with every pin change and every batch of measured pulses (see
        :class:`~rbscope.recordings.StreamClassifier`).
    """
    fmt = detect_format(path, fmt)
    notes = []
    recording_only = {"signals": signals, "clock": clock, "tick": tick, "windows": windows,
                      "glitch": glitch_us, "snapshot": snapshot_seconds, "bus-*": bus}
    hooks = {k: v for k, v in (("on_edge", on_edge), ("on_pulses", on_pulses)) if v}
    if hooks and fmt not in ("vcd", "sr"):
        raise SourceOptionError(f"{path}: single pulses need a recording (VCD or sigrok), "
                                f"not a {'saved measurement' if fmt == 'json' else 'capture'}")
    if fmt in ("json", "capture"):
        given = [k for k, v in recording_only.items() if v]
        if given:
            raise SourceOptionError(f"--{given[0]} is for VCD and sigrok recordings, not a "
                                    f"{'saved measurement' if fmt == 'json' else 'capture'}")
        if fmt == "json":
            try:
                m = Measurement.load(path)
            except OSError as exc:
                raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                raise RecordingError(f"{path}: not UTF-8 text (byte offset {exc.start})") \
                    from None
            if m.provenance.get("source") == "merge":
                # Several boards' captures merged (rbscope merge): their warnings, as a
                # capture's own are told.
                notes.extend(m.provenance.get("warnings", []))
        else:
            try:
                m = capture_to_measurement(path, sequence=sequence)
            except CaptureError as exc:
                raise RecordingError(str(exc)) from None
            except OSError as exc:
                raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
            notes.extend(m.provenance.get("warnings", []))
        for index, dies in _check_probes(probes, m.params.channels, path).items():
            m.probes[index] = Probe(m.probes[index].name, dies)
        return m, notes

    preset = DEFAULT_PRESET if preset is None else preset
    if windows or glitch_us is not None:
        preset = Preset(tuple(windows) if windows else preset.windows,
                        preset.glitch_us if glitch_us is None else glitch_us,
                        name=preset.name)
    if len(preset.windows) > 10:
        raise SourceOptionError(f"at most 10 windows, not {len(preset.windows)}")
    if not 16 <= width_bits <= 32:
        raise SourceOptionError(f"--width-bits must be 16 … 32, not {width_bits}")

    def params_for(n):
        if n > 256:
            raise RecordingError(f"{n} lines selected; the sniffer has at most 256")
        return SnifferParams(channels=n, classes=classes_for_windows(len(preset.windows)),
                             width_bits=width_bits)

    def preset_config(params, tick_seconds, prescaler):
        config, names, clamp = preset.to_config(params, tick_seconds, prescaler=prescaler)
        notes.extend(clamp)
        return config, names

    lines = [()] * 256
    for index, dies in _check_probes(probes, 256, "the sniffer").items():
        lines[index] = dies
    common = dict(params_for=params_for, preset_config=preset_config, signals=list(signals),
                  tick=tick, probes=lines, snapshot_seconds=snapshot_seconds,
                  max_pulses=max_pulses, progress=progress, **hooks)
    if bus is not None:
        common.update(bus=bus, tap_for=tap_for)
    if fmt == "vcd":
        m = import_vcd(path, clock=clock, unknown=unknown, **common)
    else:
        if clock is not None:
            raise SourceOptionError("--clock is for VCD sources; a sigrok session's clock is "
                                    "its sample rate")
        m = import_sr(path, **common)
    _check_probes(probes, m.params.channels, f"{path} (as imported)")
    notes.extend(m.provenance.get("warnings", []))
    return m, notes


def open_source(path, **options):
    """Return the measurement of any source, the import's notes in ``provenance["notes"]``.

    ``options`` as for :func:`open_measurement`.
    """
    m, notes = open_measurement(path, **options)
    m.provenance.setdefault("notes", list(notes))
    return m

"""The analysis pipeline: a request in, a write amplification out.

:func:`analyse` is what ``rbscope analyze`` computes, taking an :class:`AnalysisRequest` (a
dataclass, not parsed command-line arguments), so that the report, the demo, the reference SSD
and the benchmarks run exactly the same path as the command line::

    from rbscope.analysis import load_geometry
    from rbscope.analysis.logical import from_bytes
    from rbscope.analysis.pipeline import AnalysisRequest, SourceOptions, analyse

    a = analyse(AnalysisRequest("run.vcd", load_geometry("ssd-v"), from_bytes(2 << 30),
                                options=SourceOptions(probes=((0, ((0, 0, 0),)),))))
    print(a.result.wa)

:func:`wa_of` is the engine's part alone, for a :class:`~rbscope.analysis.measurement.Measurement`
already in hand (the reference SSD, the demo).
"""

import os
from dataclasses import dataclass, field, fields

from rbscope.files import check_output
from rbscope.recordings.sources import SourceOptionError, detect_format, open_measurement
from rbscope.recordings.stream import RecordingError

from . import calibrate as cal
from .geometry import GeometryError, with_parameter_page
from .logical import LogicalVolume
from .sequence import SequenceError, classify_measurement
from .streaming import STREAM_BYTES, stream_classify
from .structure import infer as infer_structure
from .wa import compute_wa, opcode_wa_of_pages, wa_series

__all__ = ["SourceOptions", "AnalysisRequest", "Analysis", "RequestError", "load_source",
           "analyse", "wa_of", "knowledge_of", "LEVELS"]

#: The knowledge levels an analysis works at (``docs/wa.md``): what the user supplied.
LEVELS = {
    "L0": "geometry only (no timing)",
    "L1": "geometry and datasheet maxima (geometry [timing], or --preset windows)",
    "L2": "a tapped channel's labelled pulses (--trained) or the power-up parameter page",
}


def knowledge_of(geometry, *, preset=None, windows=(), trained=None, param_page=None):
    """The knowledge level of an analysis and what was supplied: ``(level, {key: value})``.

    L0: the geometry alone (channels, chips, dies, planes, page size, program model and, where
    known, ``pages_per_block``, ``cell``, ``program_scheme``); L1: plus datasheet maxima (a
    geometry ``[timing]`` table, or class windows: ``--preset``, ``--window``); L2: plus a
    tapped channel's labelled pulses (``--trained``) or the power-up parameter page.
    """
    supplied = {"geometry": [k for k in ("channels", "chips_per_channel", "dies_per_chip",
                                         "planes_per_die", "page_size", "program_model")]
                + [k for k in ("pages_per_block", "cell", "program_scheme")
                   if getattr(geometry, k, None) is not None]}
    level = "L0"
    if getattr(geometry, "timing", None):
        supplied["timing"] = sorted(geometry.timing)
        level = "L1"
    if preset is not None or windows:
        supplied["windows"] = "preset" if preset is not None else "--window"
        level = "L1"
    if trained is not None:
        supplied["trained"] = getattr(trained, "source", "") or "labelled pulses"
        level = "L2"
    if param_page is not None:
        supplied["parameter_page"] = True
        level = "L2"
    return level, supplied

#: The classifiers :func:`wa_of` knows.
CLASSIFIERS = ("auto", "sequence", "windows")
#: When to stream a capture's pulse records (:mod:`rbscope.analysis.streaming`): ``"auto"``
#: above :data:`~rbscope.analysis.streaming.STREAM_BYTES`.
STREAM = ("auto", "always", "never")


class RequestError(SourceOptionError):
    """A request that does not fit its source or geometry (a usage error on the command line)."""


@dataclass(frozen=True)
class SourceOptions:
    """How to read a source: :func:`rbscope.recordings.sources.open_measurement`'s options.

    Members
    -------
    fmt : str
        ``"auto"`` (from the name, then the content), ``"json"``, ``"capture"``, ``"vcd"``,
        ``"sr"``.
    preset : Preset, optional
        The class windows of an imported recording (default: the generic MLC preset).
    windows : tuple of (name, lo_us, hi_us)
        Class windows replacing the preset's, in priority order.
    probes : tuple of (line, ((channel, chip, die), ...))
        The die(s) on each sniffer line (several for a wired-OR line).
    progress : callable, optional
        ``progress(done_bytes, total_bytes)`` while a recording is read.

    The others (``glitch_us``, ``signals``, ``clock``, ``tick``, ``unknown``, ``width_bits``,
    ``snapshot_seconds``, ``max_pulses``, ``bus``, ``tap_for``) are those of
    :func:`~rbscope.recordings.sources.open_measurement`.
    """

    fmt: str = "auto"
    preset: object = None
    windows: tuple = ()
    glitch_us: float | None = None
    signals: tuple = ()
    clock: float | None = None
    tick: float | None = None
    unknown: str = "hold"
    width_bits: int = 24
    snapshot_seconds: float | None = None
    max_pulses: int = 10_000_000
    probes: tuple = ()
    bus: object = None
    tap_for: object = None
    progress: object = None

    def open_options(self):
        """The keyword arguments of :func:`~rbscope.recordings.sources.open_measurement`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["windows"] = list(self.windows)
        out["signals"] = list(self.signals)
        out["probes"] = list(self.probes)
        return out


@dataclass(frozen=True)
class AnalysisRequest:
    """One analysis: a source, the drive's geometry, the host's logical volume and the choices.

    Members
    -------
    source : str or Path
        A measurement (``.json``), a capture file, a VCD or a sigrok session.
    geometry : Geometry
    logical : LogicalVolume, optional
        Bytes the host wrote; None gives the physical volume only (no WA).
    options : SourceOptions
    mp : int, optional
        Pages per program pulse (default: the geometry's).
    program_class : str or int
        The window of program pulses.
    classifier : str
        ``"auto"`` (sequence when it can, else windows), ``"sequence"`` or ``"windows"``.
    write_only : bool
        The workload only wrote (enables the read-pulse and cache-program checks).
    trained : TrainedClassifier, optional
        Class width distributions learned from labelled pulses (sequence classifier only).
    overlap_correct : bool
        Correct the program count by a mixture fit of the width histogram.
    series : bool
        Also compute WA per snapshot interval.
    logical_series : tuple of (seconds, cumulative bytes), optional
        Host bytes over time, for the series.
    save_measurement : str, optional
        Also save the measurement there (JSON; never over the source).
    force_output : bool
        Let ``save_measurement`` replace an existing file that is not JSON.
    param_page : rbscope.nand.ident.ParameterPage, optional
        The dies' power-up parameter page: its tPROG / tBERS / tR maxima, pages per block and
        bits per cell complete the geometry (knowledge level L2).
    stream : str
        ``"auto"``: a capture file larger than
        :data:`~rbscope.analysis.streaming.STREAM_BYTES` has its pulse records classified as a
        stream (fit windows, then chunks; bounded memory); ``"always"``, ``"never"``.
    notes : tuple of str
        Notes the caller adds (e.g. on the logical volume's unit).
    """

    source: object
    geometry: object
    logical: LogicalVolume | None = None
    options: SourceOptions = field(default_factory=SourceOptions)
    mp: int | None = None
    program_class: object = "program"
    classifier: str = "auto"
    write_only: bool = False
    trained: object = None
    overlap_correct: bool = False
    series: bool = False
    logical_series: tuple | None = None
    save_measurement: str | None = None
    force_output: bool = False
    notes: tuple = ()
    param_page: object = None
    stream: str = "auto"


@dataclass
class Analysis:
    """What one analysis computed (also what ``rbscope report`` shows of a run)."""

    measurement: object
    geometry: object
    logical: object  # LogicalVolume or None: physical volume only
    result: object  # WAResult
    notes: list
    series: list | None = None
    evidence: dict | None = None
    opcode: object = None  # OpcodeWA: WA by the bus tap's program confirms, if it watched
    structure: list = field(default_factory=list)  # structure.Finding: what the pulses show
    streaming: dict | None = None  # how the pulse records were streamed (None: in memory)


def load_source(source, options=None, *, save_to=None, force=False, sequence=True):
    """Return the :class:`Measurement` of ``source`` and the notes of its import (and save it
    to ``save_to`` when given: never over ``source``, over an existing file that is not JSON
    only with ``force``; :class:`~rbscope.files.OutputError` is raised before the import).
    ``sequence=False`` leaves a capture's pulse records to the streaming classifier."""
    options = SourceOptions() if options is None else options
    if save_to:
        check_output(save_to, kind="json", inputs=(source,), force=force,
                     option="--save-measurement")
    m, notes = open_measurement(source, **options.open_options(), sequence=sequence)
    if save_to:
        try:
            m.save(save_to, inputs=(source,), force=force)
        except OSError as exc:
            raise RecordingError(f"{save_to}: cannot write: {exc.strerror}") from None
    return m, notes


def analyse(request):
    """Load the request's source and compute its WA exactly as ``rbscope analyze`` does.

    Raises the loaders' and the engine's errors, and :class:`RequestError` for a probe outside
    the geometry or a choice that does not fit the others.
    """
    geometry = request.geometry
    if request.param_page is not None:
        geometry = with_parameter_page(geometry, request.param_page)
    if request.mp is not None and (isinstance(request.mp, bool) or request.mp < 1):
        raise RequestError(f"--mp must be a positive integer, not {request.mp}")
    if request.classifier not in CLASSIFIERS:
        raise RequestError(f"classifier must be one of {', '.join(CLASSIFIERS)}, "
                           f"not {request.classifier!r}")
    for index, dies in request.options.probes:
        for loc in dies:
            try:
                geometry.check_location(loc)
            except GeometryError as exc:
                raise RequestError(f"--probe {index}: {exc}") from None
    if request.stream not in STREAM:
        raise RequestError(f"stream must be one of {', '.join(STREAM)}, not {request.stream!r}")
    stream = _streams(request)
    m, notes = load_source(request.source, request.options, save_to=request.save_measurement,
                           force=request.force_output, sequence=not stream)
    notes.extend(request.notes)
    seq = None
    if stream and (m.provenance.get("sequence") or {}).get("streamed"):
        try:
            seq = stream_classify(request.source, m, geometry, trained=request.trained,
                                  progress=request.options.progress)
        except SequenceError as exc:
            if request.classifier == "sequence":
                raise
            notes.append(f"sequence classifier not used ({exc}); the width histograms are "
                         f"classified")
        else:
            notes.append(seq.streaming_note)
    correction = evidence = None
    if request.overlap_correct:
        correction, evidence = cal.overlap_correction(
            m, request.program_class, hints=cal.hints_from_geometry(geometry))
    rows = None
    if request.series:
        rows = wa_series(m, geometry, mp=request.mp, program_class=request.program_class,
                         logical_series=request.logical_series)
    result = wa_of(m, geometry, request.logical, mp=request.mp,
                   program_class=request.program_class, classifier=request.classifier,
                   write_only=request.write_only, correction=correction, notes=notes,
                   trained=request.trained, preset=request.options.preset,
                   windows=request.options.windows, param_page=request.param_page,
                   sequence=seq)
    if seq is not None and seq.streaming.get("drift_warning"):
        result.warnings.append(seq.streaming["drift_warning"])
    if request.logical is not None:
        plausibility_warning(result, request.logical)
    opcode = None
    tap = m.provenance.get("tap")
    if tap and request.logical is not None and tap.get("dies"):
        # The capture holds the bus tap's counts: WA by the pages its confirms name.
        opcode = opcode_wa_of_pages(tap["pages_programmed"], len(tap["dies"]), geometry,
                                    request.logical)
        period = tap.get("period") or {}
        opcode.period = period.get("tap")
        # The two figures cover the periods their counters do: said where they differ.
        opcode.warnings += [f"the two WA figures cover different periods: {d}"
                            for d in period.get("differ", ())]
    structure = infer_structure(result, m, geometry) if result.classification else []
    return Analysis(m, geometry, request.logical, result, notes, rows, evidence, opcode,
                    structure, None if seq is None else seq.streaming)


def _streams(request):
    """Whether the request's source is a capture whose pulse records are to be streamed."""
    if request.stream == "never" or request.classifier == "windows" or request.overlap_correct:
        return False
    try:
        if detect_format(request.source, request.options.fmt) != "capture":
            return False
        size = os.path.getsize(request.source)
    except (OSError, SourceOptionError, RecordingError):
        return False
    return request.stream == "always" or size > STREAM_BYTES


#: WA outside this range is no real drive's: the logical volume is then most likely wrong (a
#: unit or digits missing, another run's figure).
PLAUSIBLE_WA = (0.2, 50.0)


def plausibility_warning(result, logical):
    """Add a warning to ``result.warnings`` when its WA lies outside :data:`PLAUSIBLE_WA`."""
    value = result.wa.value
    lo, hi = PLAUSIBLE_WA
    if value != value or lo <= value <= hi or result.physical_bytes.hi <= 0:
        return
    result.warnings.append(
        f"WA {value:.3g} is implausible (real drives lie between about {lo:g} and {hi:g}): "
        f"check the logical volume, {logical.value:,.0f} bytes from {logical.source} "
        f"({logical.detail or 'given'}); a unit or digits may be missing")


def wa_of(m, geometry, logical, *, mp=None, program_class="program", classifier="auto",
          write_only=False, correction=None, notes=None, trained=None, preset=None,
          windows=(), param_page=None, sequence=None):
    """The WA of a measurement as ``rbscope analyze`` computes it (classifier included).

    ``logical`` None gives the physical volume only. Notes of the classifier go to ``notes``.
    ``trained`` (a :class:`~rbscope.analysis.trained.TrainedClassifier`) gives the sequence
    classifier the class width distributions learned from labelled pulses. ``preset`` and
    ``windows`` (the class windows the user supplied) only count towards the knowledge level
    (:func:`knowledge_of`), which the result states.
    """
    seq = None
    if trained is not None and (classifier == "windows" or correction is not None):
        raise RequestError("--trained needs the sequence classifier (not --classifier windows "
                           "or --overlap-correct)")
    if sequence is not None:
        seq = sequence  # (classified already: a streamed capture)
    elif classifier != "windows" and correction is None:
        try:
            seq = classify_measurement(m, geometry, trained=trained)
        except SequenceError as exc:
            if classifier == "sequence":
                raise
            if notes is not None:
                notes.append(f"sequence classifier not used ({exc}); window counts instead")
    # Without a logical volume: the physical volume only (a placeholder of 1 byte).
    lv = logical if logical is not None else LogicalVolume(1, 1, "none")
    result = compute_wa(m, geometry, lv, mp=mp, program_class=program_class,
                        correction=correction, sequence=seq, write_only=write_only)
    result.knowledge_level, result.knowledge = knowledge_of(
        geometry, preset=preset, windows=windows, trained=trained, param_page=param_page)
    return result

"""The ``rbscope analyze`` and ``rbscope calibrate`` subcommands.

``analyze`` turns a source of R/B# counts — a saved measurement (``.json``), a VCD, a sigrok
session (``.sr``) — into a write amplification, given the drive's geometry and the host's
logical volume. ``calibrate`` proposes class windows from a source's width histogram, writes
them as a preset TOML, and decides Mp from a sequential calibration write.

Both register themselves with :func:`add_analyze_parser` / :func:`add_calibrate_parser` on the
``rbscope`` parser's subparsers. Exit codes: 0 success, 1 failure (an input that cannot be read
or analysed), 2 usage error.
"""

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from rbscope.analysis import logical as lg
from rbscope.analysis import pipeline
from rbscope.analysis.calibrate import (
    CalibrationError,
    ascii_histogram,
    calibrate,
    hints_from_geometry,
)
from rbscope.analysis.drive_counters import DriveCounterError, disagrees, drive_wa
from rbscope.analysis.geometry import GeometryError, load_geometry
from rbscope.analysis.labelled import LabelledError, LabelledPulses
from rbscope.analysis.measurement import MeasurementError
from rbscope.analysis.pipeline import AnalysisRequest, RequestError, SourceOptions
from rbscope.analysis.presets import DEFAULT_PRESET, PresetError, format_preset, resolve_preset
from rbscope.analysis.sequence import SequenceError, classify_measurement
from rbscope.analysis.streaming import STREAM_BYTES, hold_freed_memory
from rbscope.analysis.trained import TrainedClassifier, TrainedError, train
from rbscope.analysis.wa import (
    MpDecision,
    WAError,
    compute_wa,
    decide_mp,
    measured_mp,
)
from rbscope.files import OutputError, check_output, write_text
from rbscope.nand.ident import ParameterPageError, parse_parameter_page
from rbscope.recordings.sources import SourceOptionError
from rbscope.recordings.stream import RecordingError, format_time, parse_time

from .argtypes import integer
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, err, force_option, input_paths

__all__ = ["add_analyze_parser", "add_calibrate_parser", "cmd_analyze", "cmd_calibrate",
           "load_source", "request_from_args", "source_options"]



class UsageError(RequestError):
    """A bad option value or combination (exit code 2)."""


# Option parsing helpers -----------------------------------------------------------------------


def _window(text):
    name, sep, rng = text.partition("=")
    lo, sep2, hi = rng.partition(":")
    try:
        if not (sep and sep2 and name):
            raise ValueError
        return name, float(lo), float(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=LO:HI in µs (e.g. program=150:2300), "
                                         f"not {text!r}") from None


def _probe(text):
    index, sep, locs = text.partition("=")
    try:
        if not sep:
            raise ValueError
        dies = []
        for loc in locs.split("+"):
            c, p, d = (int(x) for x in loc.split(":"))
            dies.append((c, p, d))
        return int(index), tuple(dies)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LINE=CH:CHIP:DIE[+CH:CHIP:DIE…] (e.g. "
                                         f"0=0:0:0), not {text!r}") from None


def _size(text):
    try:
        lg.parse_size(text)
    except lg.LogicalSourceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _duration(text):
    try:
        value = parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not value <= 1e6:
        raise argparse.ArgumentTypeError(f"duration {text!r} is longer than 10^6 s")
    return value


def _add_source_options(p, *, positional=True):
    if positional:
        p.add_argument("source", metavar="SOURCE", nargs="?" if positional == "optional" else None,
                       help="a measurement (.json), a capture file (rbscope capture), a VCD "
                            "(.vcd) or a sigrok session (.sr)")
    force_option(p)
    p.add_argument("--format", choices=("auto", "json", "capture", "vcd", "sr"),
                   default="auto",
                   help="source format (default: from the extension, then the content)")
    g = p.add_argument_group("import (VCD and sigrok sources)")
    g.add_argument("--signal", action="append", default=[], metavar="NAME",
                   help="an R/B# line to import, in sniffer-channel order (repeat; default: "
                        "every 1-bit VCD variable / every sigrok probe); VCD vector bits as "
                        "name[i]")
    g.add_argument("--clock", type=_duration, metavar="PERIOD",
                   help="VCD only: the system clock the recording is sampled at, a whole "
                        "multiple of the timescale (default: the smallest one >= 10 ns)")
    g.add_argument("--tick", type=_duration, metavar="PERIOD",
                   help="tick period, a whole multiple of the clock / sample period "
                        "(default: one clock cycle)")
    g.add_argument("--x-as", choices=("hold", "high", "low"), default="hold",
                   help="VCD only: what an unknown (x) value means (default: hold the level; "
                        "z always reads as 1, the pull-up)")
    g.add_argument("--preset", metavar="TOML",
                   help="classifier preset (a [classifier] table, e.g. from rbscope calibrate; "
                        "default: the geometry's, else a generic MLC one)")
    g.add_argument("--window", action="append", type=_window, default=[],
                   metavar="NAME=LO:HI", help="a class window in µs, replacing the preset's "
                                              "(repeat, in priority order)")
    g.add_argument("--glitch", type=float, metavar="US",
                   help="glitch filter in µs (default: the preset's)")
    g.add_argument("--width-bits", type=integer(16, 32), default=24, metavar="W",
                   help="sniffer width counter bits, 16 … 32 (default 24)")
    g.add_argument("--snapshot", type=_duration, metavar="PERIOD",
                   help="record cumulative snapshots at this period (for --series)")
    g.add_argument("--max-pulses", type=integer(0), default=10_000_000, metavar="N",
                   help="keep at most N per-pulse widths for the sequence classifier "
                        "(default 10000000; 0: none)")
    g.add_argument("--save-measurement", metavar="JSON",
                   help="also save the measurement, to analyse again without re-importing")
    p.add_argument("--probe", action="append", type=_probe, default=[],
                   metavar="LINE=CH:CHIP:DIE",
                   help="the die(s) on sniffer line LINE (several joined by + for a wired-OR "
                        "line); default: one die each, location unknown")
    p.add_argument("--geometry", metavar="TOML|NAME",
                   help="drive geometry file, or a bundled one: ssd-v, ssd-i, ssd-m, ssd-s")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def _add_logical_options(p):
    g = p.add_argument_group("logical volume (bytes the host wrote; give one)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--logical", metavar="BYTES", type=_size,
                   help="a byte count: 2147483648, 2GiB, 2GB… (units spelled exactly)")
    x.add_argument("--fio", metavar="JSON", help="fio --output-format=json output")
    x.add_argument("--sysfs", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="two copies of /sys/block/<dev>/stat")
    x.add_argument("--smartctl", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="two smartctl -A (or -j -A) outputs")
    x.add_argument("--nvme", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="two nvme smart-log (or -o json) outputs")
    g.add_argument("--lba-bytes", type=int, default=None, metavar="N",
                   help="bytes per unit of ATA attribute 241 (default 512)")


def _logical(args):
    if args.logical is not None:
        return lg.from_bytes(lg.parse_size(args.logical))
    if args.fio:
        return lg.read_fio_json(args.fio)
    if args.sysfs:
        return lg.read_sysfs_stat(*args.sysfs)
    if args.smartctl:
        return lg.read_smartctl(*args.smartctl,
                                lba_bytes=512 if args.lba_bytes is None else args.lba_bytes)
    if args.nvme:
        return lg.read_nvme_smart_log(*args.nvme)
    return None


# Loading a source -----------------------------------------------------------------------------


def _preset(args, geometry):
    """The preset of ``--preset`` (a file or a built-in name), else the geometry's, else None."""
    if args.preset:
        return resolve_preset(args.preset)
    if geometry is not None and geometry.classifier is not None:
        return geometry.classifier
    return None


def _progress(quiet):
    if quiet or not sys.stderr.isatty():
        return None
    start = time.monotonic()

    def show(done, total):
        elapsed = time.monotonic() - start
        rate = done / elapsed if elapsed > 0 else 0
        eta = (total - done) / rate if rate else 0
        pct = 100 * done / total if total else 100
        print(f"\r  {done / 1e6:,.0f} / {total / 1e6:,.0f} MB ({pct:.0f} %), "
              f"{rate / 1e6:.1f} MB/s, ETA {eta:.0f} s   ", end="", file=sys.stderr)
        if done >= total:
            print(file=sys.stderr)
    return show


def source_options(args, geometry):
    """The :class:`~rbscope.analysis.pipeline.SourceOptions` that the source options in
    ``args`` stand for."""
    return SourceOptions(
        fmt=args.format, preset=_preset(args, geometry), windows=tuple(args.window),
        glitch_us=args.glitch, signals=tuple(args.signal), clock=args.clock, tick=args.tick,
        unknown=args.x_as, width_bits=args.width_bits, snapshot_seconds=args.snapshot,
        max_pulses=args.max_pulses, probes=tuple(args.probe), progress=_progress(args.quiet),
        bus=getattr(args, "bus", None), tap_for=getattr(args, "tap_for", None))


def load_source(args, geometry):
    """The measurement of ``args.source`` and its import's notes (saved to
    ``--save-measurement`` when given)."""
    return pipeline.load_source(args.source, source_options(args, geometry),
                                save_to=getattr(args, "save_measurement", None),
                                force=getattr(args, "force", False))


def request_from_args(args, geometry, *, series=None):
    """The :class:`~rbscope.analysis.pipeline.AnalysisRequest` that ``rbscope analyze``'s
    options in ``args`` stand for (``series`` overrides ``--series``)."""
    notes = []
    if getattr(args, "smartctl", None) and args.lba_bytes is None:
        notes.append("ATA attribute 241 (Total_LBAs_Written) taken in 512-byte units, the "
                     "usual unit: give --lba-bytes if the drive's vendor documents another")
    want_series = args.series if series is None else series
    ls = None
    if want_series:
        if args.logical_series:
            ls = lg.read_series_csv(args.logical_series)
        if args.fio_bw_log:
            ls = lg.read_fio_bw_log(args.fio_bw_log)
    trained = TrainedClassifier.load(args.trained) if getattr(args, "trained", None) else None
    page = None
    if getattr(args, "param_page", None):
        try:
            data = Path(args.param_page).read_bytes()
        except OSError as exc:
            raise RecordingError(f"{args.param_page}: cannot read: {exc.strerror}") from None
        try:
            page = parse_parameter_page(data)
        except ParameterPageError as exc:
            raise RecordingError(f"{args.param_page}: {exc}") from None
    return AnalysisRequest(
        source=args.source, geometry=geometry, logical=_logical(args),
        options=source_options(args, geometry), mp=args.mp, program_class=args.program_class,
        classifier=args.classifier, write_only=args.write_only, trained=trained,
        overlap_correct=args.overlap_correct, series=want_series,
        logical_series=None if ls is None else tuple(ls),
        save_measurement=args.save_measurement, force_output=getattr(args, "force", False),
        notes=tuple(notes), param_page=page, stream=getattr(args, "stream", "auto"))


# analyze --------------------------------------------------------------------------------------


def add_analyze_parser(subparsers):
    """Register ``rbscope analyze`` on ``subparsers``."""
    p = subparsers.add_parser(
        "analyze", help="compute write amplification from counts, a VCD or a sigrok session",
        description=(
            "Compute the write amplification WA = physical / logical bytes. Program pulses "
            "counted on the probed R/B# lines are scaled to every die of the drive "
            "(--geometry) and multiplied by Mp pages of page_size bytes; the logical volume "
            "comes from one of the logical-volume options. VCD and sigrok recordings are "
            "classified through the bit-exact model of the sniffer gateware. The result is a "
            "value and an interval that also holds every count the recording cannot decide "
            "(partial or dropped pulses, coarse logical counters)."),
        epilog=("examples:\n"
                "  rbscope analyze run.vcd --geometry ssd-v --fio fio.json\n"
                "  rbscope analyze run.sr --geometry ssd-m --probe 0=0:0:0 --logical 2GiB --json\n"
                "  rbscope analyze saved.json --geometry my.toml --nvme before.txt after.txt\n"
                "docs/wa.md explains the method and the interval.\n"
                "exit codes: 0 success, 1 failure, 2 usage error"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_source_options(p)
    _add_logical_options(p)
    g = p.add_argument_group("WA")
    g.add_argument("--mp", type=int, metavar="N",
                   help="pages per program pulse (default: the geometry's)")
    g.add_argument("--program-class", default="program", metavar="NAME|K",
                   help="the window of program pulses (default: 'program')")
    g.add_argument("--stream", choices=pipeline.STREAM, default="auto",
                   help="classify a capture's pulse records as a stream in bounded memory: a "
                        "model fitted on 8 windows spread over the file, then every pulse in "
                        "chunks (docs/wa.md, 'Streaming'); 'auto' (default): captures over "
                        f"{STREAM_BYTES >> 20} MiB")
    g.add_argument("--classifier", choices=("auto", "sequence", "windows"), default="auto",
                   help="how pulses become programs: 'sequence' classifies each die's pulse "
                        "sequence (page-type balance, erase cap, tDBSY-announced programs) and "
                        "puts its uncertainty in the 95 %% interval; 'windows' counts the "
                        "program window as exact; 'auto' (default): sequence, from per-pulse "
                        "widths or else the histograms, falling back to windows")
    g.add_argument("--write-only", action="store_true",
                   help="the workload only wrote (enables the read-pulse and cache-program "
                        "checks)")
    g.add_argument("--trained", metavar="JSON",
                   help="classify with the width distributions trained on labelled pulses "
                        "(rbscope calibrate --labelled ... -o JSON; docs/accuracy.md)")
    g.add_argument("--param-page", metavar="FILE",
                   help="the dies' ONFI or JEDEC parameter page as read at power-up (256- or "
                        "512-byte copies, binary): its tPROG/tBERS/tR maxima, pages per block "
                        "and bits per cell complete the geometry (knowledge level L2)")
    g.add_argument("--drive-counters", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="the drive's own NAND-write counters before and after the run "
                        "(smartctl -j or nvme-cli -o json, OCP smart-add-log included): shows "
                        "'the drive says WA x' beside rbscope's and flags a disagreement "
                        "beyond both intervals (docs/identify.md)")
    g.add_argument("--overlap-correct", action="store_true",
                   help="correct the program count for erases inside the program window and "
                        "programs outside it, from a mixture fit of the width histogram")
    g.add_argument("--series", action="store_true",
                   help="also show WA per snapshot interval (needs snapshots: --snapshot)")
    g.add_argument("--logical-series", metavar="CSV",
                   help="host bytes over time for --series: lines 'seconds,cumulative bytes' "
                        "(what `rbscope sample-sysfs` records)")
    g.add_argument("--fio-bw-log", metavar="LOG", nargs="+",
                   help="host bytes over time for --series from fio bandwidth logs "
                        "(--write_bw_log with --log_avg_msec; every job's log)")
    p.set_defaults(handler=cmd_analyze)
    return p


def cmd_analyze(args):
    """Handle ``rbscope analyze``; return the exit code."""
    try:
        geometry = load_geometry(args.geometry) if args.geometry else None
    except GeometryError as exc:
        err("analyze", exc)
        return EXIT_FAILURE if Path(str(args.geometry)).exists() else EXIT_USAGE
    if geometry is None:
        err("analyze", "--geometry is required (a TOML file or ssd-v, ssd-i, ssd-m, ssd-s)")
        return EXIT_USAGE
    if args.mp is not None and args.mp < 1:
        err("analyze", f"--mp must be a positive integer, not {args.mp}")
        return EXIT_USAGE
    claim = None
    if getattr(args, "drive_counters", None):
        try:
            claim = drive_wa(*args.drive_counters)
        except DriveCounterError as exc:
            err("analyze", exc)
            return EXIT_FAILURE
    try:
        if args.save_measurement:
            check_output(args.save_measurement, kind="json", inputs=input_paths(args),
                         force=args.force, option="--save-measurement")
        hold_freed_memory()  # (a process that analyses: chunks' memory kept for the next)
        a = pipeline.analyse(request_from_args(args, geometry))
    except (SourceOptionError, PresetError, OutputError) as exc:
        err("analyze", exc)
        return EXIT_USAGE
    except (RecordingError, MeasurementError, GeometryError, lg.LogicalSourceError, WAError,
            CalibrationError, SequenceError, TrainedError) as exc:
        err("analyze", exc)
        return EXIT_FAILURE
    m, logical, result, notes = a.measurement, a.logical, a.result, a.notes
    series, evidence = a.series, a.evidence
    drive = None
    if claim is not None:
        ours = result.wa_confidence or result.wa if logical is not None else None
        drive = {**claim.to_dict(), "disagrees": disagrees(claim, ours and ours.lo,
                                                           ours and ours.hi)}
    if args.json:
        out = {"source": m.provenance, "measurement": _summary(m), "geometry": a.geometry.to_dict(),
               "notes": notes, "complete": m.provenance.get("complete", True),
               "missing": m.provenance.get("missing", [])}
        data = result.to_dict()
        if logical is None:
            for key in ("wa", "logical_bytes", "per_die_wa", "per_die_spread"):
                data.pop(key)
            data["wa"] = None
        out.update(data)
        if evidence is not None:
            out["overlap_correction"] = evidence
        if series is not None:
            out["series"] = [r.to_dict() for r in series]
        if a.opcode is not None:
            out["opcode_wa"] = a.opcode.to_dict()
        if drive is not None:
            out["drive_says"] = drive
        out["structure"] = [f.to_dict() for f in a.structure]
        out["streaming"] = a.streaming
        print(json.dumps(out, indent=2, default=_jsonable))
    else:
        _print_analysis(m, a.geometry, result, logical, notes, evidence, series)
        _print_structure(a.structure)
        if a.streaming is not None:
            d = a.streaming["drift"]
            print(f"streamed {a.streaming['pulses']:,} pulses in chunks; model fitted on "
                  f"{a.streaming['windows']} windows spread over the file "
                  f"({a.streaming['fit_pulses']:,} pulses); drift check: "
                  + (f"refitted on the last {d['windows']} windows, programs per pulse "
                     f"{d['relative']:+.2%} (in the interval)" if "relative" in d
                     else d.get("refit", "none")))
        if drive is not None:
            _print_drive_claim(drive, result if logical is not None else None)
        if a.opcode is not None:
            w = a.opcode.wa
            covers = f"; it covers {a.opcode.period}" if a.opcode.period else ""
            print(f"WA by the bus tap              {w.value:.4f}  [{w.lo:.4f}, {w.hi:.4f}]  "
                  f"(opcode-aware: {a.opcode.pages:,} pages confirmed on "
                  f"{a.opcode.dies_tapped} tapped dies; the interval: operations cut at the "
                  f"capture's edges{covers})")
            if a.opcode.period and m.provenance.get("source") == "capture":
                print(f"  (the WRITE AMPLIFICATION above, by R/B#, covers "
                      f"{m.provenance['tap']['period']['rb']})")
            for x in a.opcode.warnings:
                print(f"warning: {x}")
    return EXIT_OK


def _small(x):
    """A figure that may be tiny, in at most 4 significant digits, without denormal dust:
    values below 1e-9 print as 0, others below 1e-4 as "< 0.0001"."""
    if abs(x) < 1e-9:
        return "0"
    if abs(x) < 1e-4:
        return "< 0.0001"
    return f"{x:.4g}"


def _print_drive_claim(drive, result):
    """The drive's own WA (its NAND-write counters) beside rbscope's."""
    if drive["wa"] is None:
        print(f"the drive says                 nothing ({drive['method']})")
    else:
        hi = "∞" if not math.isfinite(drive["hi"]) else f"{drive['hi']:.4f}"
        print(f"the drive says WA              {drive['wa']:.4f}  [{drive['lo']:.4f}, {hi}]  "
              f"({drive['method']})")
    if drive["disagrees"]:
        ours = result.wa_confidence or result.wa
        print(f"  DISAGREEMENT: the drive's interval and rbscope's [{ours.lo:.4f}, "
              f"{ours.hi:.4f}] do not overlap (counters' units, missed pulses, or a drive that "
              f"counts other writes: docs/identify.md)")
    for x in drive["caveats"] + drive["notes"]:
        print(f"  note: {x}")


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


def _summary(m):
    return {"channels": m.params.channels, "enabled": m.enabled, "tick_s": m.tick_seconds,
            "duration_s": m.duration_seconds,
            "quiet_s": None if m.quiet_ticks is None else m.quiet_ticks * m.tick_seconds,
            "windows_us": {k: [lo * 1e6, hi * 1e6] for k, (lo, hi) in m.windows_seconds().items()},
            "glitch_ticks": m.config.glitch_ticks, "may_drop": m.may_drop,
            "snapshots": len(m.snapshots), "pulses_kept": sum(len(w) for w in m.pulses.values())}


def _bytes(n):
    if not math.isfinite(n):
        return "∞"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.0f} B"


def _print_structure(findings):
    """What the pulses show of the drive's structure beside the geometry file (rbscope.analysis.
    structure); a disagreement is a warning, the geometry's value stays the one used."""
    if not findings:
        return
    print()
    print("structure (what the pulses show; the geometry's values are the ones used):")
    for f in findings:
        shown = "cannot tell" if f.shown is None else f.shown
        said = "not given" if f.geometry is None else f.geometry
        mark = {True: "agrees", False: "DISAGREES", None: ""}[f.agrees]
        print(f"  {f.quantity.replace('_', ' '):<22} {str(shown):<28} geometry: "
              f"{str(said):<14} {mark}")
        print(f"  {'':<22} ({f.evidence})")
    for f in findings:
        if f.warning:
            print(f"  WARNING: {f.warning}")


def _print_analysis(m, geometry, r, logical, notes, evidence, series):
    src = m.provenance.get("path", "measurement")
    print(f"source   {src} ({m.provenance.get('source', '?')}): {len(m.enabled)} line(s), "
          f"{format_time(m.duration_seconds)}, tick {format_time(m.tick_seconds)}")
    print(f"drive    {geometry.name}: {geometry.dies} dies ({geometry.channels} ch × "
          f"{geometry.chips_per_channel} chip × {geometry.dies_per_chip} die), page "
          f"{geometry.page_size} B, Mp {r.mp}")
    windows = "  ".join(f"{k} [{lo * 1e6:g}, {hi * 1e6:g})"
                        for k, (lo, hi) in m.windows_seconds().items())
    print(f"windows  {windows} µs")
    supplied = "; ".join(f"{k}: {', '.join(v) if isinstance(v, list) else v}"
                         for k, v in r.knowledge.items())
    print(f"knowledge level {r.knowledge_level}: {pipeline.LEVELS.get(r.knowledge_level, '')}"
          + (f" ({supplied})" if supplied else ""))
    if r.classifier != "windows":
        c = r.classification or {}
        states = "  ".join(f"{st['name']} ~{st['center_us']:.4g}" for st in c.get("states", []))
        print(f"classes  {r.classifier} classifier: {states} µs")
        for note in c.get("notes", []):
            print(f"         {note}")
    print()
    names = list(r.class_totals)
    header = f"  {'line':<20} {'dies':>4} " + "".join(f"{n:>10}" for n in names) + \
        f"{'unclass.':>10}{'partial':>9}{'dropped':>9}" + \
        (f"{'programs':>11}" if r.classifier != "windows" else "") + \
        (f"{'WA(die)':>9}" if logical else "")
    print(header)
    per_die = dict(r.per_die)
    k_of = {n or str(i): i for i, n in enumerate(m.class_names)}
    for row in r.channels:
        c = m.counts[row.channel]
        line = f"  {row.name[-20:]:<20} {row.dies:>4} " + \
            "".join(f"{c.classes[k_of[n]]:>10}" for n in names) + \
            f"{c.unclassified:>10}{c.partial:>9}{c.dropped:>9}"
        if r.classifier != "windows":
            line += f"{row.estimate:>11.1f}"
        if logical:
            line += f"{per_die[row.name]:>9.3f}"
        print(line)
    print()
    pp = r.program_pulses
    label = f"program pulses ({r.dies} dies)"
    print(f"{label:<31}{pp.value:,.1f}  [{pp.lo:,.1f}, {pp.hi:,.1f}]")
    ph = r.physical_bytes
    print(f"physical volume                {_bytes(ph.value)}  [{_bytes(ph.lo)}, "
          f"{_bytes(ph.hi)}]")
    if evidence is not None:
        print(f"overlap correction             ×{evidence['factor']:.4f} (≈"
              f"{evidence['erases_in_window']:.1f} erases in the window, ≈"
              f"{evidence['programs_outside_window']:.1f} programs outside it)")
    if logical is None:
        print("logical volume                 not given (--logical, --fio, --sysfs, --smartctl, "
              "--nvme): no WA")
    else:
        lv = logical
        rng = "" if lv.exact else f"  [{_bytes(lv.lo)}, {_bytes(lv.hi)}]"
        print(f"logical volume                 {_bytes(lv.value)}{rng}  ({lv.source}: "
              f"{lv.detail})")
        wa = r.wa
        hi = "∞" if not math.isfinite(wa.hi) else f"{wa.hi:.4f}"
        flag = "" if m.provenance.get("complete", True) else \
            "  (INCOMPLETE CAPTURE: see the warnings)"
        print(f"WRITE AMPLIFICATION            {wa.value:.4f}  [{wa.lo:.4f}, {hi}]{flag}")
        if r.wa_confidence is not None:
            ci = r.wa_confidence
            chi = "∞" if not math.isfinite(ci.hi) else f"{ci.hi:.4f}"
            print(f"  95 % interval                [{ci.lo:.4f}, {chi}]  "
                  f"({r.dies_probed} of {r.dies} dies probed)")
        if r.undetermined:
            print("  UNDETERMINED: R/B# alone cannot decide this value; the interval spans "
                  "every reading the pulses leave open")
            for reason in r.decide:
                print(f"    - {reason}")
        for alt in r.alternatives:
            print(f"  alternative: {alt['reading']}: WA {alt['wa']:.4f}")
        if r.interval_includes:
            print(f"  it includes: {'; '.join(r.interval_includes)}")
        if r.interval_excludes:
            print(f"  it does NOT include: {'; '.join(r.interval_excludes)}")
        spread = r.spread
        if spread and len(r.per_die) > 1:
            print(f"single-die estimates           {spread[0]:.4f} … {spread[1]:.4f}")
        e = r.endurance
        if e is not None:
            if e.erases_per_block is not None:
                used = "" if e.life_used is None else \
                    f", {_small(100 * e.life_used)} % of rated life"
                print(f"erases per block               {_small(e.erases_per_block)}  "
                      f"({e.blocks_erased:,.0f} blocks erased{used})")
            if e.tbw_bytes is not None:
                dwpd = "" if e.dwpd is None else f", {e.dwpd:.3g} drive writes/day over warranty"
                print(f"projected endurance at this WA {e.tbw_bytes / 1e12:,.1f} TBW{dwpd}")
            if e.missing:
                print(f"  (endurance needs: {'; '.join(e.missing)})")
    tap = m.provenance.get("tap")
    if tap:
        mp = "–" if tap["mp"] is None else f"{tap['mp']:.3f}"
        print(f"bus tap (by command)           {tap['program_ops']:,} program operations "
              f"({tap['cache_programs']:,} cache programs), {tap['pages_programmed']:,} pages, "
              f"measured Mp {mp}; {tap['erase_ops']:,} erases ({tap['blocks_erased']:,} "
              f"blocks); {tap['reads']:,} page reads")
    if series:
        print()
        print(f"  {'from':>10} {'to':>10} {'programs':>10} {'physical':>12} {'logical':>12} "
              f"{'WA':>8} {'cum. WA':>8}")
        for s in series:
            lb = "" if s.logical_bytes is None else _bytes(s.logical_bytes)
            wa = "" if s.wa is None else f"{s.wa:.3f}"
            cum = "" if s.cumulative_wa is None else f"{s.cumulative_wa:.3f}"
            print(f"  {format_time(s.t0):>10} {format_time(s.t1):>10} {s.programs:>10} "
                  f"{_bytes(s.physical_bytes):>12} {lb:>12} {wa:>8} {cum:>8}")
    warnings = list(notes) + [w for w in r.warnings
                              if logical is not None or "no program" in w or "probed" in w]
    if warnings:
        print()
        print("warnings:")
        for w in warnings:
            print(f"  - {w}")


# calibrate ------------------------------------------------------------------------------------


def add_calibrate_parser(subparsers):
    """Register ``rbscope calibrate`` on ``subparsers``."""
    p = subparsers.add_parser(
        "calibrate", help="propose class windows from a width histogram; decide Mp",
        description=(
            "Find the clusters of pulse widths in a source's histogram (import with wide "
            "windows), fit a log-normal mixture, name the clusters from the drive's timing "
            "(geometry [timing]) and propose class windows at the density crossings. With a "
            "logical volume of a sequential incompressible write, also decide Mp (pages per "
            "program pulse): WA computed with Mp = 1 is about 1/Mp."),
        epilog=("examples:\n"
                "  rbscope calibrate gc-run.sr --geometry ssd-v -o ssd-v-windows.toml\n"
                "  rbscope calibrate seq-2GB.vcd --geometry ssd-m --logical 2GB\n"
                "  rbscope calibrate --labelled tapped.labels.json -o trained.json\n"
                "exit codes: 0 success, 1 failure, 2 usage error"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_source_options(p, positional="optional")
    _add_logical_options(p)
    p.add_argument("-o", "--output", metavar="TOML|JSON",
                   help="write the proposed preset here (with --labelled: the trained "
                        "classifier, JSON, for rbscope analyze --trained)")
    p.add_argument("--labelled", metavar="JSON", action="append",
                   help="train the R/B#-only classifier on labelled pulses (rbscope label's "
                        "output; repeat for several tapped channels) instead of proposing "
                        "windows from a source")
    p.add_argument("--program-class", default="program", metavar="NAME|K",
                   help="window of program pulses, for the Mp decision (default: 'program')")
    p.add_argument("--mp-candidates", default="1,2,4", metavar="LIST",
                   help="possible Mp values (default 1,2,4)")
    p.add_argument("--tolerance", type=float, default=0.2,
                   help="relative tolerance of the Mp decision (default 0.2)")
    p.set_defaults(handler=cmd_calibrate)
    return p


def cmd_calibrate(args):
    """Handle ``rbscope calibrate``; return the exit code."""
    if args.labelled:
        if args.source is not None:
            err("calibrate", "give either a SOURCE or --labelled, not both")
            return EXIT_USAGE
        return _cmd_train(args)
    if args.source is None:
        err("calibrate", "a SOURCE (or --labelled FILE) is required")
        return EXIT_USAGE
    try:
        candidates = tuple(int(x) for x in args.mp_candidates.split(","))
        if not candidates or min(candidates) < 1:
            raise ValueError
    except ValueError:
        err("calibrate", f"--mp-candidates must be positive integers, not "
                          f"{args.mp_candidates!r}")
        return EXIT_USAGE
    if not 0 < args.tolerance < 1:
        err("calibrate", f"--tolerance must be between 0 and 1, not {args.tolerance}")
        return EXIT_USAGE
    try:
        geometry = load_geometry(args.geometry) if args.geometry else None
    except GeometryError as exc:
        err("calibrate", exc)
        return EXIT_FAILURE
    try:
        inputs = input_paths(args)
        if args.output:
            check_output(args.output, kind="toml", inputs=inputs, force=args.force, option="-o")
        if args.save_measurement:
            check_output(args.save_measurement, kind="json", inputs=inputs, force=args.force,
                         option="--save-measurement")
        logical = _logical(args)
        if logical is not None and geometry is None:
            raise UsageError("deciding Mp needs --geometry (dies and page size)")
        m, notes = load_source(args, geometry)
        hints = hints_from_geometry(geometry)
        result = calibrate(m.histogram_total(), m.params, m.tick_seconds, hints=hints,
                           glitch_us=(args.glitch if args.glitch is not None
                                      else (_preset(args, geometry)
                                            or DEFAULT_PRESET).glitch_us),
                           pages_per_block=geometry.pages_per_block if geometry else None)
        decision = None
        if logical is not None:
            decision = _decide_mp(m, geometry, logical, args, candidates, notes)
    except (SourceOptionError, PresetError, OutputError) as exc:
        err("calibrate", exc)
        return EXIT_USAGE
    except (RecordingError, MeasurementError, GeometryError, lg.LogicalSourceError, WAError,
            CalibrationError) as exc:
        err("calibrate", exc)
        return EXIT_FAILURE
    comments = [f"rbscope calibrate {m.provenance.get('path', '')}",
                f"{result.total} pulses; tick {format_time(m.tick_seconds)}"]
    if m.provenance.get("source") == "capture" and m.config.idle_ticks:
        # What the capture's device was configured with (configure --set idle_s=…), not the
        # 300 s default: configure --from-toml of this file keeps it.
        idle_s = float(f"{m.config.idle_ticks * m.tick_seconds:.6g}")
        result.preset = dataclasses.replace(result.preset, idle_s=idle_s)
        comments.append(f"idle_s {idle_s:g} s: the quiescence the capture was taken with")
    for a, b, x, how in result.boundaries:
        comments.append(f"{a} | {b} at {x:.4g} µs ({how})")
    if args.output:
        try:
            write_text(args.output, format_preset(result.preset, comments), kind="toml",
                       inputs=inputs, force=args.force, option="-o")
        except OutputError as exc:
            err("calibrate", exc)
            return EXIT_USAGE
        except OSError as exc:
            err("calibrate", f"{args.output}: cannot write: {exc.strerror}")
            return EXIT_FAILURE
    if args.json:
        out = {"source": m.provenance, "calibration": result.to_dict(), "notes": notes,
               "preset_file": args.output}
        if decision is not None:
            out["mp"] = decision.to_dict()
        print(json.dumps(out, indent=2, default=_jsonable))
        return EXIT_OK
    us = m.tick_seconds * 1e6
    print(f"{result.total} measured pulses in {len(result.clusters)} cluster(s):")
    for c in result.clusters:
        print(f"  peak {c.peak * us:>10.4g} µs   range {c.lo * us:.4g} – {c.hi * us:.4g} µs   "
              f"{c.count} pulses")
    print("mixture fit:")
    for c in result.components:
        print(f"  {c.name:<10} centre {c.center * us:>10.4g} µs   σ {c.sigma:.3f} octave   "
              f"{c.weight:,.0f} pulses")
    print("boundaries:")
    for a, b, x, how in result.boundaries:
        print(f"  {a} | {b}  at {x:.4g} µs ({how})")
    if result.overlap:
        o = result.overlap
        print(f"overlap: ≈{o['erases_in_program_window']:.1f} erases inside the program window, "
              f"≈{o['programs_outside_program_window']:.1f} programs outside it")
    print()
    for line in ascii_histogram(m.histogram_total(), m.params, m.tick_seconds,
                                result.preset.windows):
        print(line)
    print()
    print("proposed windows (µs):  " + "  ".join(f"{n} [{lo:g}, {hi:g})"
                                                 for n, lo, hi in result.preset.windows))
    if args.output:
        print(f"preset written to {args.output}")
    if decision is not None:
        print(f"Mp: {decision.mp if decision.mp else 'ambiguous'} — {decision.reason}")
    for note in notes + result.notes:
        print(f"note: {note}")
    return EXIT_OK


def _cmd_train(args):
    """``rbscope calibrate --labelled``: train the classifier on labelled pulses."""

    try:
        inputs = input_paths(args)
        if args.output:
            check_output(args.output, kind="json", inputs=inputs, force=args.force, option="-o")
        labels = [LabelledPulses.load(path) for path in args.labelled]
        trained = train(labels, source=", ".join(args.labelled))
        if args.output:
            trained.save(args.output, inputs=inputs, force=args.force)
    except OutputError as exc:
        err("calibrate", exc)
        return EXIT_USAGE
    except (LabelledError, TrainedError) as exc:
        err("calibrate", exc)
        return EXIT_FAILURE
    if args.json:
        out = trained.to_dict()
        out["notes"] = trained.notes
        out["output"] = args.output
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"trained on {sum(s.pulses for s in trained.states):,} labelled pulses "
          f"({', '.join(args.labelled)}):")
    for st in trained.states:
        lo, hi = st.range_log2
        print(f"  {st.name:<14} {st.kind:<11} {st.pulses:>10,} pulses   "
              f"{2 ** lo:.4g} – {2 ** hi:.4g} µs")
    if trained.mp is not None:
        print(f"Mp measured: {trained.mp:.3g} pages per program")
    if trained.resumes == 0:
        print("suspension: none on the tapped channel (no resumed operation among its labels)")
    elif trained.resumes:
        print(f"suspension: {trained.resumes:,} resumed operations on the tapped channel (each "
              f"labelled as a read far longer than any)")
    if trained.rest_rate:
        print(f"rests of resumed operations: {trained.rests:,} per {trained.program_pulses:,} "
              f"program pulses ({trained.rest_rate:.1%}; labelled reads wider than the reads): "
              f"analyze widens the interval where its joins fall short of that")
    for note in trained.notes:
        print(f"note: {note}")
    if args.output:
        print(f"classifier written to {args.output} (rbscope analyze --trained "
              f"{args.output})")
    return EXIT_OK


def _decide_mp(m, geometry, logical, args, candidates, notes):
    """Mp from tDBSY pulses when the pulse sequence shows them, else from WA(Mp = 1).

    Candidates above the die's planes are never proposed. WA(Mp = 1) counts program pulses with
    the sequence classifier when it can (windows miss programs on cache-program drives, which
    would suggest an Mp the die does not have).
    """
    planes = geometry.planes_per_die
    dropped = [c for c in candidates if c > planes]
    if dropped:
        notes.append(f"Mp candidates {dropped} exceed the {planes} planes per die of "
                     f"{geometry.name}: not considered")
    seq = None
    try:
        seq = classify_measurement(m, geometry)
    except SequenceError as exc:
        notes.append(f"sequence classifier not used for Mp ({exc})")
    if seq is not None:
        found = measured_mp(seq)
        if found is not None:
            ratio, mp = found
            if mp is not None and mp <= planes:
                wa1 = compute_wa(m, geometry, logical, mp=mp, sequence=seq).wa.scale(1 / mp)
                return MpDecision(mp, "decided", ratio, wa1, (mp,), args.tolerance,
                                  f"tDBSY pulses (multi-plane queueing) show {ratio:.3f} pages "
                                  f"per program pulse")
        # WA(Mp = 1) from program pulses (not the pages the tDBSY pulses add).
        dies = seq.dies
        for d in dies.values():
            d.multiplane_pages = 0.0
    wa1 = compute_wa(m, geometry, logical, mp=1, program_class=args.program_class,
                     sequence=seq)
    return decide_mp(wa1.wa, candidates, args.tolerance, planes=planes)


def add_sample_sysfs_parser(commands):
    """Register ``rbscope sample-sysfs``: record a block device's written bytes over time."""
    p = commands.add_parser(
        "sample-sysfs",
        help="record a block device's written bytes over time (for WA over time)",
        description=("Sample /sys/block/DEV/stat every --interval seconds while a workload runs "
                     "and write 'seconds,bytes' lines (bytes written since the first sample), "
                     "flushed line by line, for `rbscope analyze --series --logical-series`. "
                     "Start it together with `rbscope capture`; the file's first line records "
                     "the wall-clock start. Stop with Ctrl-C or --duration."),
        epilog="example: rbscope sample-sysfs nvme0n1 -o host-bytes.csv --interval 0.5")
    p.add_argument("device", metavar="DEV", help="block device name (sdb, nvme0n1) or a stat path")
    p.add_argument("-o", "--output", required=True, metavar="CSV")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds between samples (default 1)")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    force_option(p)
    p.set_defaults(handler=cmd_sample_sysfs)
    return p


def cmd_sample_sysfs(args):
    if not args.interval > 0:
        err("sample-sysfs", f"--interval must be positive, not {args.interval}")
        return EXIT_USAGE
    try:
        check_output(args.output, kind="csv", inputs=input_paths(args), force=args.force,
                     option="-o")
    except OutputError as exc:
        err("sample-sysfs", exc)
        return EXIT_USAGE
    try:
        n = lg.sample_sysfs(args.device, args.output, interval=args.interval,
                            duration=args.duration)
    except lg.LogicalSourceError as exc:
        err("sample-sysfs", exc)
        return EXIT_FAILURE
    print(f"rbscope sample-sysfs: {n} samples in {args.output}", file=sys.stderr)
    return EXIT_OK

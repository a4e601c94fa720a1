"""The ``rbscope report`` subcommand: a self-contained HTML report (and its PDF).

Each source is analysed exactly as ``rbscope analyze`` would analyse it with the same options
(the options are ``analyze``'s own), and the report shows every run; several sources, or a
``--study`` file naming drives and workloads, add the side-by-side comparison ranked by WA and
by projected endurance. Exit codes: 0 success, 1 failure (an input that cannot be read or
analysed, a browser that fails), 2 usage error.
"""

import argparse
import copy
import json
import sys
from importlib import resources
from pathlib import Path

from rbscope.analysis import logical as lg
from rbscope.analysis import pipeline
from rbscope.analysis.calibrate import CalibrationError
from rbscope.analysis.drive_counters import DriveCounterError, disagrees, drive_wa
from rbscope.analysis.geometry import GeometryError, load_geometry
from rbscope.analysis.measurement import MeasurementError
from rbscope.analysis.presets import PresetError
from rbscope.analysis.sequence import SequenceError
from rbscope.analysis.wa import WAError
from rbscope.files import OutputError, check_output, write_text
from rbscope.probe import FindingsError, load_findings
from rbscope.probe.plots import finding_figures
from rbscope.probe.pulses import load_cross_check
from rbscope.recordings.classified import export_classified_vcd, gtkwave_filter
from rbscope.recordings.sources import SourceOptionError
from rbscope.recordings.stream import RecordingError
from rbscope.report import ReportError, analyse_run, build_report, write_report
from rbscope.report.figures import inline_svg
from rbscope.report.study import load_study

from . import analyze as ac
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, input_paths

__all__ = ["add_report_parser", "add_export_parser", "add_sigrok_parser", "cmd_report",
           "cmd_export_vcd", "run_from_namespace", "sigrok_decoder_dir"]


_FAILURES = (RecordingError, MeasurementError, GeometryError, lg.LogicalSourceError, WAError,
             CalibrationError, SequenceError, DriveCounterError)


def add_report_parser(subparsers):
    """Register ``rbscope report`` on ``subparsers``."""
    p = subparsers.add_parser(
        "report", help="write a self-contained HTML (and PDF) report of one or more runs",
        description=(
            "Analyse each SOURCE as `rbscope analyze` does (same options) and write one HTML "
            "file that needs nothing else to view: the WA with its interval and what the "
            "interval holds, NAND bytes, programs, erases and reads per die, endurance, "
            "pulse-width histograms with the class windows, rates and WA over time, a per-die "
            "comparison, geometry, windows and provenance, with CSV and JSON exports of every "
            "table. Several sources (or a --study file) add the procurement view: a "
            "side-by-side table ranked by WA and by projected endurance. --pdf prints the same "
            "report with headless Chromium."),
        epilog=("examples:\n"
                "  rbscope report run.rbcap --geometry ssd-v --logical 2GiB -o run.html\n"
                "  rbscope report a.rbcap b.rbcap --label 'drive A' --label 'drive B' \\\n"
                "      --geometry ssd-m --fio fio.json -o compare.html --pdf compare.pdf\n"
                "  rbscope report --study candidates.toml -o candidates.html\n"
                "  rbscope report --study candidates.toml --check\n"
                "the study format is described in docs/report.md.\n"
                "exit codes: 0 success, 1 failure, 2 usage error"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="captures, measurements (.json), VCDs or sigrok sessions")
    p.add_argument("--study", metavar="TOML",
                   help="a study file naming every run (instead of SOURCEs)")
    p.add_argument("-o", "--output", metavar="HTML",
                   help="the report to write (required but with --check)")
    p.add_argument("--check", action="store_true",
                   help="check the study file (every run's keys and options, as `rbscope "
                        "analyze` parses them, and its geometry) or the options, then exit: no "
                        "source is read, nothing analysed (before a long study)")
    p.add_argument("--pdf", metavar="PDF", help="also print the report to this PDF")
    p.add_argument("--browser", metavar="EXE",
                   help="the headless browser for --pdf (default: chromium on PATH)")
    p.add_argument("--title", help="the report's title (default: the study's, or a generic one)")
    p.add_argument("--label", action="append", default=[], metavar="TEXT",
                   help="the name of each SOURCE in the report, in order (repeat)")
    p.add_argument("--drive", action="append", default=[], metavar="TEXT",
                   help="the drive of each SOURCE (default: the geometry's name; repeat)")
    p.add_argument("--workload", action="append", default=[], metavar="TEXT",
                   help="the workload of each SOURCE (repeat)")
    ac._add_source_options(p, positional=False)
    ac._add_logical_options(p)
    g = p.add_argument_group("WA")
    g.add_argument("--mp", type=int, metavar="N",
                   help="pages per program pulse (default: the geometry's)")
    g.add_argument("--program-class", default="program", metavar="NAME|K",
                   help="the window of program pulses (default: 'program')")
    g.add_argument("--logical-series", metavar="CSV",
                   help="host bytes over time ('seconds,cumulative bytes'), for WA over time")
    g.add_argument("--classifier", choices=("auto", "sequence", "windows"), default="auto",
                   help="as for `rbscope analyze` (default auto: sequence-aware when the "
                        "source has per-pulse widths)")
    g.add_argument("--write-only", action="store_true",
                   help="as for `rbscope analyze`: the host only wrote during the run")
    p.add_argument("--probe-findings", action="append", default=[], metavar="JSON",
                   help="a `rbscope probe-geometry --json` output: the drive's structure as "
                        "its block device shows it, a section of the report with each "
                        "detector's figure (repeat; a study gives probe_findings = [...])")
    g.add_argument("--drive-counters", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="as for `rbscope analyze` (one SOURCE; a study run gives it in its "
                        "options): the drive's own NAND-write counters, shown beside "
                        "rbscope's WA")
    p.set_defaults(handler=cmd_report, fio_bw_log=None, overlap_correct=False, series=False,
                   save_measurement=None)
    return p


class _ParserError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    """An argument parser that raises instead of printing usage and exiting."""

    def error(self, message):
        raise _ParserError(message)


def analyze_namespace(argv, where):
    """Parse ``argv`` with ``rbscope analyze``'s parser; raise ReportError naming ``where``."""
    parser = _RaisingParser(prog="rbscope", add_help=False)
    sub = parser.add_subparsers(dest="command")
    ac.add_analyze_parser(sub)
    try:
        return parser.parse_args(["analyze", *argv])
    except _ParserError as exc:
        raise ReportError(f"{where}: {exc}") from None
    except SystemExit:  # --help or --version inside a run's options
        raise ReportError(f"{where}: options may not ask for help") from None


def _check_options_keep_keys(run, ns, where):
    """Refuse a study run whose ``options`` change what its keys set (``logical = "2GiB"`` with
    ``options = ["--logical", "1"]``: argparse would silently keep the last one)."""
    if not run.options:
        return
    keys = analyze_namespace(run.argv[:len(run.argv) - len(run.options)], where)
    defaults = analyze_namespace([run.argv[0]], where)
    for dest, value in vars(keys).items():
        if value != getattr(defaults, dest) and getattr(ns, dest) != value:
            raise ReportError(f"{where}: options change {dest.replace('_', '-')} that the "
                              f"run's keys set ({value!r} → {getattr(ns, dest)!r}); give it "
                              f"once")


def _checked_geometry(ns):
    """The geometry of one run's options, after the checks that need no source: a geometry
    given and valid, a positive Mp."""
    if not ns.geometry:
        raise ac.UsageError(f"{ns.source}: a geometry is needed (--geometry FILE or a bundled "
                            f"name: ssd-v, ssd-i, ssd-m, ssd-s)")
    geometry = load_geometry(ns.geometry)
    if ns.mp is not None and ns.mp < 1:
        raise ac.UsageError(f"--mp must be a positive integer, not {ns.mp}")
    return geometry


def run_from_namespace(ns, *, label=None, drive=None, workload="", logical_series=None):
    """Load and analyse one source given ``analyze``-style options, exactly as ``rbscope
    analyze`` would; return a ReportRun."""
    geometry = _checked_geometry(ns)
    a = pipeline.analyse(ac.request_from_args(ns, geometry, series=False))
    series = None
    if logical_series:
        series = lg.read_series_csv(logical_series)
    elif getattr(ns, "fio_bw_log", None):
        series = lg.read_fio_bw_log(ns.fio_bw_log)
    notes = list(a.notes)
    if a.logical is None:
        notes.append("no host write volume given: physical volume only, no WA")
    claim = None
    if getattr(ns, "drive_counters", None):
        c = drive_wa(*ns.drive_counters)
        ours = (a.result.wa_confidence or a.result.wa) if a.logical is not None else None
        claim = {**c.to_dict(), "disagrees": disagrees(c, ours and ours.lo, ours and ours.hi)}
    return analyse_run(a.measurement, geometry, a.logical, result=a.result, label=label,
                       drive=drive, workload=workload, program_class=ns.program_class,
                       logical_series=series, notes=notes, drive_claim=claim,
                       structure=a.structure)


def _pick(values, i, what, n):
    if not values:
        return None
    if len(values) != n:
        raise ac.UsageError(f"give --{what} once per SOURCE ({n}), not {len(values)} times")
    return values[i]


def _runs(args, inputs, *, check=False):
    """The runs of ``args`` and the study's title; every file a run reads joins ``inputs``.
    ``check``: parse every run's options only, and return their count instead of runs."""
    if args.study:
        if args.sources:
            raise ac.UsageError("give SOURCEs or --study, not both")
        study = load_study(args.study)
        runs = []
        for i, sr in enumerate(study.runs):
            where = f"{args.study}: run {i + 1}"
            ns = analyze_namespace(sr.argv, where)
            _check_options_keep_keys(sr, ns, where)
            inputs.extend(input_paths(ns))
            if sr.logical_series:
                inputs.append(sr.logical_series)
            if check:
                try:
                    _checked_geometry(ns)
                except _FAILURES as exc:
                    raise type(exc)(f"{where}: {exc}") from None
                continue
            try:
                runs.append(run_from_namespace(ns, label=sr.label, drive=sr.drive,
                                               workload=sr.workload,
                                               logical_series=sr.logical_series))
            except (SourceOptionError, PresetError) as exc:
                raise ac.UsageError(f"{where}: {exc}") from None
            except _FAILURES as exc:
                raise type(exc)(f"{where}: {exc}") from None
        return (len(study.runs) if check else runs), study.title
    if not args.sources:
        raise ac.UsageError("give one or more SOURCEs, or --study")
    if check:
        for source in args.sources:
            ns = copy.copy(args)
            ns.source = source
            _checked_geometry(ns)
        return len(args.sources), None
    n = len(args.sources)
    if args.drive_counters and n > 1:
        raise ac.UsageError("--drive-counters reads one run's counters: give one SOURCE, or "
                            "each run's in a study's options")
    runs = []
    for i, source in enumerate(args.sources):
        ns = copy.copy(args)
        ns.source = source
        runs.append(run_from_namespace(
            ns, label=_pick(args.label, i, "label", n), drive=_pick(args.drive, i, "drive", n),
            workload=_pick(args.workload, i, "workload", n) or "",
            logical_series=args.logical_series))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        # Same drive and workload twice: tell the runs apart by their files.
        for r, source in zip(runs, args.sources, strict=True):
            r.label = f"{r.label} ({Path(source).name})"
    return runs, None


def _probe_findings(args, inputs):
    """``[(target, findings, notes, path, figures, cross)]`` of ``--probe-findings`` and the
    study's ``probe_findings`` (each path joins ``inputs``; ``figures``: ``[(name, SVG)]``, each
    detector's series drawn; ``cross``: the cross-check against the pulses the file holds, or
    None); a file that is not probe-geometry's ``--json`` output is a ReportError naming it."""
    paths = list(args.probe_findings)
    if args.study and not args.sources:  # (both: the usage error comes with the runs)
        paths += list(load_study(args.study).probe_findings)
    out = []
    for path in paths:
        inputs.append(path)
        try:
            target, findings, notes, _ = load_findings(path)
            cross = load_cross_check(path)
        except FindingsError as exc:
            raise ReportError(f"--probe-findings {exc}") from None
        figs, notes = [], list(notes)
        for f in findings:
            try:
                drawn = finding_figures([f])
            except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
                # (A findings file edited by hand, or of another version: the table stands.)
                notes.append(f"{f.name}: its series cannot be drawn ({type(exc).__name__})")
                continue
            figs += [(name, inline_svg(fig)) for name, fig in drawn]
        out.append((target, findings, notes, path, figs, cross))
    return out


def cmd_report(args):
    """Handle ``rbscope report``; return the exit code."""
    try:
        inputs = input_paths(args)
        if args.check:
            n, _ = _runs(args, inputs, check=True)
            print(f"{args.study or 'the options'}: {n} run(s), options and geometries valid "
                  f"(no source read, nothing analysed)")
            return EXIT_OK
        if not args.output:
            raise ac.UsageError("give the report to write (-o HTML), or --check")
        probes = _probe_findings(args, inputs)
        check_output(args.output, kind="html", inputs=inputs, force=args.force, option="-o")
        if args.pdf:
            check_output(args.pdf, kind="pdf", inputs=inputs, force=args.force, option="--pdf")
        runs, study_title = _runs(args, inputs)
        title = args.title or study_title or (
            "rbscope write-amplification report" if len(runs) == 1 else
            "rbscope write-amplification comparison")
        report = build_report(runs, title=title, probes=probes)
        paths = write_report(report, args.output, pdf_path=args.pdf, browser=args.browser,
                             inputs=inputs, force=args.force)
    except (SourceOptionError, PresetError, OutputError) as exc:
        print(f"rbscope report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ReportError, *_FAILURES) as exc:
        print(f"rbscope report: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # a source that vanished or cannot be read
        name = f"{exc.filename}: " if exc.filename else ""
        print(f"rbscope report: {name}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps({
            "html": str(paths[0]), "pdf": str(paths[1]) if len(paths) > 1 else None,
            "runs": [{"label": r.label, "drive": r.drive, "workload": r.workload,
                      "wa": r.result.wa.to_dict() if r.logical_given else None,
                      "wa_95": r.interval95.to_dict() if r.interval95 else None,
                      "tbw_bytes": r.tbw} for r in runs]}, indent=2))
    else:
        for path in paths:
            print(path)
    return EXIT_OK


# export-vcd ------------------------------------------------------------------------------------


def add_export_parser(subparsers):
    """Register ``rbscope export-vcd`` on ``subparsers``."""
    p = subparsers.add_parser(
        "export-vcd", help="write a recording's pulses, classified, as a VCD for GTKWave or "
                           "PulseView",
        description=(
            "Import a VCD or sigrok recording as `rbscope analyze` does (same options) and "
            "write a VCD with, per R/B# line, the recorded pin and a NAME_class signal that "
            "holds the class code of every measured pulse while it lasts (the codes are listed "
            "in the file's $comment). --onehot adds one 1-bit signal per class, the form "
            "sigrok's VCD input (and so PulseView) reads; --gtkwave-filter writes a translate "
            "file that shows the codes by name in GTKWave."),
        epilog=("examples:\n"
                "  rbscope export-vcd run.sr --geometry ssd-v -o run-classes.vcd --onehot\n"
                "  gtkwave run-classes.vcd   # with: rbscope export-vcd ... --gtkwave-filter "
                "classes.txt\n"
                "  sigrok-cli -I vcd -i run-classes.vcd -o run-classes.sr && pulseview "
                "run-classes.sr\n"
                "exit codes: 0 success, 1 failure, 2 usage error"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ac._add_source_options(p)
    p.add_argument("-o", "--output", required=True, metavar="VCD", help="the VCD to write")
    p.add_argument("--onehot", action="store_true",
                   help="also one 1-bit signal per class (for sigrok / PulseView)")
    p.add_argument("--gtkwave-filter", metavar="FILE",
                   help="also write a GTKWave translate filter naming the class codes")
    p.set_defaults(handler=cmd_export_vcd)
    return p


def cmd_export_vcd(args):
    """Handle ``rbscope export-vcd``; return the exit code."""
    try:
        geometry = load_geometry(args.geometry) if args.geometry else None
        options = ac.source_options(args, geometry)
        inputs = input_paths(args)
        if args.gtkwave_filter:
            check_output(args.gtkwave_filter, kind=("text", "csv"), force=args.force,
                         inputs=(*inputs, args.output), option="--gtkwave-filter")
        result = export_classified_vcd(args.source, args.output, onehot=args.onehot,
                                       inputs=inputs, force=args.force,
                                       **options.open_options())
        if args.gtkwave_filter:
            try:
                write_text(args.gtkwave_filter, gtkwave_filter(result.codes),
                           kind=("text", "csv"), inputs=(*inputs, args.output),
                           force=args.force, option="--gtkwave-filter")
            except OSError as exc:
                raise RecordingError(f"{args.gtkwave_filter}: cannot write: "
                                     f"{exc.strerror}") from None
    except (SourceOptionError, PresetError, OutputError) as exc:
        print(f"rbscope export-vcd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except _FAILURES as exc:
        print(f"rbscope export-vcd: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    m = result.measurement
    if args.json:
        print(json.dumps({"output": str(result.path), "codes": result.codes,
                          "lines": [{"name": m.probes[ch].name, "pulses": result.counts[ch]}
                                    for ch in range(m.params.channels)]}, indent=2))
    else:
        for ch in range(m.params.channels):
            counts = ", ".join(f"{n} {c:,}" for n, c in sorted(result.counts[ch].items()))
            print(f"{m.probes[ch].name or ch}: {counts or 'no measured pulse'}")
        print(f"written {result.path}")
    return EXIT_OK


# sigrok-decoder --------------------------------------------------------------------------------


def sigrok_decoder_dir():
    """The directory holding rbscope's libsigrokdecode protocol decoder (``rbscope_rb``)."""
    return Path(str(resources.files("rbscope.recordings").joinpath("sigrok_decoders")))


def add_sigrok_parser(subparsers):
    """Register ``rbscope sigrok-decoder`` on ``subparsers``."""
    p = subparsers.add_parser(
        "sigrok-decoder", help="where rbscope's sigrok protocol decoders (R/B# classes, ONFI "
                               "bus) are",
        description=(
            "Print the directory of rbscope's libsigrokdecode protocol decoders: 'rbscope_rb' "
            "classifies the busy pulses of an R/B# line by width (as the sniffer does) so that "
            "PulseView and sigrok-cli show the classes live; 'rbscope_onfi' decodes one "
            "target's ONFI SDR bus (commands, addresses, data, status, the parameter page's "
            "fields). Point SIGROKDECODE_DIR at it."),
        epilog=("examples:\n"
                "  export SIGROKDECODE_DIR=$(rbscope sigrok-decoder)\n"
                "  sigrok-cli -i run.sr -P rbscope_rb:rb=D0:windows=read=12-150/"
                "program=150-1950 -A rbscope_rb\n"
                "  sigrok-cli -i powerup.sr -P rbscope_onfi:ce=D0:cle=D1:ale=D2:we=D3:re=D4:"
                "dq0=D5:...:dq7=D12 -A rbscope_onfi=commands:fields\n"
                "  pulseview run.sr   # add the 'R/B# classes' decoder to a channel"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(handler=lambda args: print(sigrok_decoder_dir()) or EXIT_OK)
    return p

"""``rbscope probe-geometry``: guess an SSD's geometry from response times (host-side)."""

import argparse
import json
import sys
import time

from rbscope.analysis.geometry import GeometryError, load_geometry
from rbscope.files import OutputError, check_output, write_text
from rbscope.probe import (
    DETECTORS,
    FindingsError,
    ProbeError,
    ProbeRequest,
    guess_toml,
    load_findings,
    open_target,
    parse_range,
    run_detectors,
)
from rbscope.probe.plots import write_plots
from rbscope.probe.pulses import cross_check, format_checks
from rbscope.recordings.stream import RecordingError

from .argtypes import integer
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, err, force_option, input_paths

__all__ = ["add_probe_parser"]


def add_probe_parser(commands):
    p = commands.add_parser(
        "probe-geometry",
        help="guess an SSD's geometry (page, parallel units, GC onset …) from response times",
        description=(
            "Run host-side detectors against TARGET, an NBD export (nbd+unix:///?socket=PATH, "
            "e.g. `rbscope vssd`) or a block device / plain file (O_DIRECT), and print a "
            "geometry guess with its evidence and confidence, as a TOML geometry file that "
            "`rbscope analyze --geometry` accepts. The detectors write: they run only with "
            "--destructive and an explicit --range START:END, and every request stays in that "
            "range (its data is overwritten). A mounted block device (or one with a mounted "
            "partition) is refused. Detectors: page (the effective page size, from pairs of "
            "adjacent 512-byte updates, Kuo et al. 2011), units (parallel units, from "
            "concurrent page writers), stripe (the page-address bits that stripe the units: "
            "two writes one bit apart, at once against in turn, in runs of six pairs, as "
            "SSDcheck does), alloc (the allocation unit of a drive that maps blocks: "
            "neighbouring pages read at once overlap only across a unit's boundary, as "
            "flashbench's read pairs, at every page), "
            "buffer (the write buffer's size: buffered writes after "
            "a flush until one waits for the flash), gc (garbage-collection onset and the "
            "over-provisioning it implies, from random page writes until the throughput "
            "drops; on an empty drive, with a range of the whole drive), erase (the erase unit, "
            "from the period of the erase spikes in sequential writes on a drive collecting "
            "garbage: after gc). See docs/vssd.md."),
        epilog=(
            "example:\n"
            "  rbscope vssd ssd-v --socket /tmp/ssd.sock --slowdown 10 &\n"
            "  rbscope probe-geometry 'nbd+unix:///?socket=/tmp/ssd.sock' --destructive "
            "--range 0:64MiB -o guess.toml\n"
            "cross-check with the pulses of the same run (the recording is written when vssd "
            "stops):\n"
            "  rbscope vssd small.toml --socket /tmp/s.sock --slowdown 20 --record r.vcd "
            "--run \\\n"
            "    'rbscope probe-geometry \"$uri\" --destructive --range 0:12MiB --detectors "
            "gc,erase --units 4 --json > p.json'\n"
            "  rbscope probe-geometry --findings p.json --pulses r.vcd"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", nargs="?",
                   help="nbd+unix:///?socket=PATH, a block device or a plain file (none with "
                        "--findings)")
    p.add_argument("--destructive", action="store_true",
                   help="allow writes (overwrites the --range bytes); the detectors need it")
    p.add_argument("--range", dest="byte_range", metavar="START:END",
                   help="the bytes the probe may use (multiples of 4096; suffixes KiB MiB GiB)")
    p.add_argument("--detectors", default="page,units", metavar="LIST",
                   help=f"comma-separated, of: {', '.join(DETECTORS)} (default page,units); "
                        f"they run in that order")
    p.add_argument("--page-size", type=integer(512, 1 << 24), metavar="BYTES",
                   help="write size of the other detectors when page is not run (units needs "
                        "it; the others default to 4096)")
    p.add_argument("--gc-max-bytes", type=_size, metavar="BYTES",
                   help="the gc detector stops after this many bytes (default 2.5 x the range; "
                        "suffixes KiB MiB GiB)")
    p.add_argument("--erase-max-bytes", type=_size, metavar="BYTES",
                   help="the erase detector stops after this many bytes (default the range: one "
                        "pass)")
    p.add_argument("--units", type=integer(1, 4096), metavar="N",
                   help="parallel units when units is not run (erase divides its period by "
                        "them; default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random offsets (gc)")
    p.add_argument("--reps", type=integer(3, 1000), default=21, metavar="N",
                   help="repetitions per page-size candidate (default 21)")
    p.add_argument("--findings", metavar="JSON",
                   help="report the findings of an earlier run's --json instead of probing "
                        "(with --pulses: cross-check them against that run's recording)")
    p.add_argument("--pulses", metavar="VCD",
                   help="cross-check the findings against the R/B# pulses of the same run "
                        "(rbscope vssd --record, or a capture made while the probe ran)")
    p.add_argument("--geometry", metavar="TOML",
                   help="class windows for --pulses: a geometry name or file with a "
                        "[classifier] (default: analyze's generic MLC windows)")
    p.add_argument("--plots", metavar="DIR",
                   help="draw each detector's series with its decision (SVG files and "
                        "DIR/probe.html, one page with all of them)")
    p.add_argument("-o", "--output", metavar="TOML", help="write the geometry guess here")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    force_option(p)
    p.set_defaults(handler=_cmd_probe)


def _size(text):
    try:
        return parse_range(f"0:{text}")[1] if text.strip() != "0" else 0
    except ProbeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count that is a multiple of "
                                         f"4096 (e.g. 64MiB)") from None


def _cmd_probe(args):
    if args.findings is not None:
        return _from_findings(args)
    detectors = tuple(d.strip() for d in args.detectors.split(",") if d.strip())
    try:
        request = ProbeRequest(detectors=detectors, page_size=args.page_size, reps=args.reps,
                               units=args.units, gc_max_bytes=args.gc_max_bytes,
                               erase_max_bytes=args.erase_max_bytes, seed=args.seed)
    except ProbeError as exc:
        err("probe-geometry", f"--detectors: {exc}")
        return EXIT_USAGE
    if args.target is None:
        err("probe-geometry", "give a TARGET to probe (or --findings JSON of an earlier run)")
        return EXIT_USAGE
    if not _outputs_ok(args):
        return EXIT_USAGE
    if not args.destructive:
        err("probe-geometry", "the detectors write to the target: give --destructive and "
                              "--range START:END (the bytes that may be overwritten)")
        return EXIT_USAGE
    try:
        byte_range = parse_range(args.byte_range) if args.byte_range is not None else None
        target = open_target(args.target, destructive=args.destructive, byte_range=byte_range)
    except ProbeError as exc:
        err("probe-geometry", str(exc))
        return EXIT_USAGE
    say = None if args.quiet else (lambda m: print(f"probe-geometry: {m}", file=sys.stderr,
                                                   flush=True))
    t0 = time.monotonic()
    try:
        with target:
            for note in target.notes:
                if say:
                    say(f"note: {note}")
            findings = run_detectors(target, request, progress=say)
            notes = list(target.notes)
    except ProbeError as exc:
        err("probe-geometry", str(exc))
        return EXIT_FAILURE
    return _report(args, args.target, findings, notes, time.monotonic() - t0)


def _outputs_ok(args):
    if args.output:
        try:
            check_output(args.output, kind="toml", inputs=input_paths(args), force=args.force,
                         option="--output")
        except OutputError as exc:
            err("probe-geometry", str(exc))
            return False
    return True


def _from_findings(args):
    """Report the findings of an earlier run's ``--json`` (with ``--pulses``: the cross-check
    against the recording the run left)."""
    if args.target is not None:
        err("probe-geometry", "--findings reports an earlier run: give no TARGET")
        return EXIT_USAGE
    if not _outputs_ok(args):
        return EXIT_USAGE
    try:
        target, findings, notes, seconds = load_findings(args.findings)
    except FindingsError as exc:
        err("probe-geometry", f"--findings {exc}")
        return EXIT_USAGE
    return _report(args, target, findings, notes, seconds)


def _report(args, target_name, findings, notes, elapsed):
    checks = None
    if args.pulses:
        windows = None
        try:
            if args.geometry:
                g = load_geometry(args.geometry)
                windows = g.classifier.windows if g.classifier else None
            checks, per_line = cross_check(findings, args.pulses, windows=windows)
        except (OSError, GeometryError, RecordingError) as exc:
            err("probe-geometry", f"--pulses {args.pulses}: {exc}")
            return EXIT_FAILURE
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = None
    if any(f.name == "page_size" and f.value for f in findings):
        text = guess_toml(findings, target_name, when)
    if args.output:
        if text is None:
            err("probe-geometry", "no page size was found: no geometry written")
            return EXIT_FAILURE
        try:
            write_text(args.output, text, kind="toml", force=args.force, option="--output")
        except (OSError, OutputError) as exc:
            err("probe-geometry", f"--output {args.output}: {exc}")
            return EXIT_FAILURE
    if args.plots:
        try:
            written = write_plots(findings, args.plots,
                                  title=f"rbscope probe-geometry of {target_name}, {when}")
        except (OSError, OutputError) as exc:
            err("probe-geometry", f"--plots {args.plots}: {exc}")
            return EXIT_FAILURE
        if not args.quiet:
            print(f"probe-geometry: plots: {written[-1]} ({len(written) - 1} figures)",
                  file=sys.stderr)
    if args.json:
        out = {"target": target_name, "seconds": elapsed, "notes": notes,
               "findings": [f.to_dict() for f in findings], "geometry_toml": text}
        if checks is not None:
            out["cross_check"] = {"recording": args.pulses,
                                  "checks": [c.to_dict() for c in checks],
                                  "lines": per_line}
        print(json.dumps(out, indent=1))
    else:
        for f in findings:
            print(f"{f.name:16} {f.value!s:>8}  confidence {f.confidence:.2f}  "
                  f"({f.io.get('writes', 0)} writes)")
            for line in f.summary if f.value is not None else f.notes:
                print(f"{'':16} {line}")
        print(f"{'seconds':16} {elapsed:8.1f}")
        if checks is not None:
            print()
            print(f"cross-check against the R/B# pulses of {args.pulses}:")
            for line in format_checks(checks):
                print(f"  {line}")
        if text and not args.output:
            print()
            print(text, end="")
    return EXIT_OK

"""The ``rbscope label`` subcommand: label a tapped channel's busy pulses by opcode.

``rbscope label`` imports a VCD or sigrok recording that holds one NAND channel's bus (CE#, CLE,
ALE, WE#, DQ[7:0]) beside its dies' R/B# lines, runs the opcode tap's bit-exact model over it and
writes a labelled-pulse file (:mod:`rbscope.analysis.labelled`): every measured busy pulse with the
class of the command that started it, the operation counts (by confirm command, also for cache
programs that show no long pulse), the measured Mp and the width histograms per class. That file
is the training data of the R/B#-only classifier used on the other dies (``docs/opcode_tap.md``).

Exit codes: 0 success, 1 failure (an input that cannot be read), 2 usage error.
"""

import json
import sys

import numpy as np

from rbscope.analysis.labelled import LabelledError, LabelledPulses
from rbscope.files import OutputError, check_output
from rbscope.gateware.onfi_tap.model import BusSignals
from rbscope.gateware.onfi_tap.params import OpClass, PlaneKind, TapConfig, TapParams
from rbscope.recordings.onfi_bus import CheckedLabeller, expand_dq
from rbscope.recordings.sources import SourceOptionError
from rbscope.recordings.stream import RecordingError, format_time

from .analyze import (
    UsageError,
    _add_source_options,
    load_source,
)
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, input_paths

__all__ = ["add_label_parser", "cmd_label"]


def add_label_parser(subparsers):
    p = subparsers.add_parser(
        "label", help="label a tapped channel's busy pulses by opcode (bus + R/B# recording)",
        description=(
            "Import a VCD or sigrok recording that holds one NAND channel's bus (CE#, CLE, ALE, "
            "WE#, DQ[7:0]) beside its dies' R/B# lines, run the opcode tap's bit-exact model "
            "over it and write a labelled-pulse file: every measured busy pulse with the class "
            "of the command that started it, the operation counts by confirm command (cache "
            "programs included), the measured Mp and the width histograms per class. That file "
            "trains the R/B#-only classifier used on the other dies (docs/opcode_tap.md)."),
        epilog="example: rbscope label tapped.vcd --signal RB0 --signal RB1 --bus-ce CE0 "
               "--bus-ce CE1 --bus-cle CLE --bus-ale ALE --bus-we WE --bus-dq 'DQ[7:0]' "
               "-o tapped.labels.json")
    _add_source_options(p)
    g = p.add_argument_group("bus of the tapped channel (signal names in the recording)")
    g.add_argument("--bus-ce", action="append", default=[], metavar="NAME",
                   help="CE# of a target, in target order (repeat per target)")
    g.add_argument("--bus-cle", metavar="NAME", help="CLE")
    g.add_argument("--bus-ale", metavar="NAME", help="ALE")
    g.add_argument("--bus-we", metavar="NAME", help="WE#")
    g.add_argument("--bus-dq", action="append", default=[], metavar="NAME",
                   help="DQ0 … DQ7 in bit order (repeat 8 times), or one 8-bit VCD vector as "
                        "NAME[7:0]")
    g.add_argument("--luns", type=int, default=1, metavar="N",
                   help="LUNs per target (1, 2 or 4); the --signal lines are the dies in "
                        "target-major order")
    g.add_argument("--lun-shift", type=int, default=0, metavar="BIT",
                   help="bit of the LUN number in the row address")
    g.add_argument("--no-bus-check", action="store_true",
                   help="label a bus that does not look wired as named (commands on CLE that "
                        "are no ONFI opcodes, addresses after no command, busy pulses after no "
                        "confirm); refused otherwise")
    p.add_argument("-o", "--output", metavar="JSON", help="write the labelled-pulse file here")
    p.set_defaults(handler=cmd_label)


def cmd_label(args):
    try:
        try:
            bus = BusSignals(ce=tuple(args.bus_ce), cle=args.bus_cle, ale=args.bus_ale,
                             we=args.bus_we, dq=expand_dq(args.bus_dq))
            config = TapConfig(lun_shift=args.lun_shift)
            TapParams(targets=len(bus.ce), luns=args.luns, sniffer=None)
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        holder = []

        def tap_for(params):
            tp = TapParams(targets=len(bus.ce), luns=args.luns, sniffer=params)
            if tp.dies != params.channels:
                raise ValueError(f"{params.channels} R/B# line(s) selected but the bus has "
                                 f"{tp.dies} dies ({len(bus.ce)} target(s) × {args.luns} LUNs); "
                                 f"give one --signal per die")
            holder.append(CheckedLabeller(tp, config, max_pulses=args.max_pulses))
            return holder[-1]

        inputs = input_paths(args)
        if args.output:
            check_output(args.output, kind="json", inputs=inputs, force=args.force, option="-o")
        args.bus, args.tap_for = bus, tap_for
        m, notes = load_source(args, None)
        if not holder:
            raise UsageError("rbscope label needs a VCD or sigrok recording")
        problems = holder[0].problems(m.provenance.get("clock_s"))
        if problems and not args.no_bus_check:
            raise RecordingError(
                "the bus does not look wired as named: " + "; ".join(problems) + " (check "
                "--bus-cle and --bus-ale, not swapped, and that no --signal names WE# or "
                "another bus line instead of an R/B#; --no-bus-check labels it anyway)")
        notes = [*notes, *(f"bus check (--no-bus-check): {p}" for p in problems)]
        lab = LabelledPulses.from_labeller(
            holder[0], tick_seconds=m.tick_seconds, clock_seconds=m.provenance["clock_s"],
            names=[p.name for p in m.probes])
        if args.output:
            try:
                lab.save(args.output, inputs=inputs, force=args.force)
            except OSError as exc:
                raise RecordingError(f"{args.output}: cannot write: {exc.strerror}") from None
    except (SourceOptionError, OutputError) as exc:  # UsageError included
        print(f"rbscope label: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (RecordingError, LabelledError) as exc:  # LabelledError: a file it may not write
        print(f"rbscope label: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    summary = _summary(lab, notes)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, lab)
    return EXIT_OK


def _summary(lab, notes):
    classes = {}
    for c in OpClass:
        w = lab.widths(c)
        total = sum(row.get(c.name, 0) for row in lab.ops)
        if not len(w) and not total:
            continue
        entry = {"operations": total, "pulses_kept": int(len(w))}
        if len(w):
            us = w * lab.tick_seconds * 1e6
            entry.update(min_us=float(us.min()), median_us=float(np.median(us)),
                         max_us=float(us.max()))
        classes[c.name] = entry
    return {
        "dies": lab.dies, "classes": classes,
        "mp": lab.program_mp(),
        "mp_by_confirm": {k.name: lab.mp(kind=k) for k in PlaneKind},
        "pages_programmed": lab.program_pages(),
        "blocks_erased": lab.pages(kind=PlaneKind.ERASE),
        "pulses_truncated": lab.pulses_truncated, "notes": notes,
    }


def _print(summary, lab):
    print(f"dies: {', '.join(summary['dies'])}")
    print(f"{'class':<16}{'ops':>10}{'pulses':>10}  widths (min / median / max)")
    for name, e in summary["classes"].items():
        widths = ""
        if "min_us" in e:
            widths = " / ".join(format_time(e[k] * 1e-6) for k in ("min_us", "median_us",
                                                                   "max_us"))
        print(f"{name:<16}{e['operations']:>10}{e['pulses_kept']:>10}  {widths}")
    mp = summary["mp"]
    print(f"Mp (pages ÷ final 10h/15h confirms, measured): {mp:.3g}" if mp
          else "Mp: no program seen")
    print(f"pages programmed: {summary['pages_programmed']}, blocks erased: "
          f"{summary['blocks_erased']}")
    for note in summary["notes"]:
        print(f"note: {note}")

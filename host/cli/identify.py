"""The ``rbscope identify`` subcommand: a geometry file from the drive's own power-up traffic.

``rbscope identify SOURCE -o drive.toml`` decodes the ONFI bus of a VCD or sigrok recording
(:mod:`rbscope.recordings.onfi_bus`); ``rbscope identify --port PORT -o drive.toml`` reads the
bus tap's power-up recorder instead (:func:`rbscope.device.tap.read_record`). Either way it finds
the Read ID and parameter page reads of each target and writes a geometry file
(:mod:`rbscope.analysis.identify`) that ``rbscope analyze --geometry`` takes once the values the
drive cannot tell (channels, targets per channel, the program model) are given, here as options
or by editing the file. It prints where each value came from.

Exit codes: 0 success, 1 failure (a recording that cannot be read, no parameter page in it, a
recorder that holds nothing), 2 usage error, 3 device or port error, 4 device timeout.
"""

import json
import sys
from pathlib import Path

from rbscope.analysis.geometry import PROGRAM_MODELS
from rbscope.analysis.identify import IdentifyError, drive_fields, geometry_toml
from rbscope.device.tap import read_record, record_control, record_cycles
from rbscope.files import OutputError, check_output, write_text
from rbscope.gateware.onfi_tap.model import BusSignals
from rbscope.gateware.onfi_tap.params import RECORD_ARM, RECORD_START
from rbscope.recordings.onfi_bus import BusDecode, expand_dq, group_commands, identities, read_bus
from rbscope.recordings.sources import SourceOptionError
from rbscope.recordings.stream import RecordingError

from .analyze import _duration
from .argtypes import integer
from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    PORT_HELP,
    device_errors,
    force_option,
    open_device,
    port_options,
)

__all__ = ["add_identify_parser", "cmd_identify"]


def add_identify_parser(subparsers):
    p = subparsers.add_parser(
        "identify", help="write a geometry file from a recording of the drive's power-up "
                         "(Read ID, ONFI/JEDEC parameter page)",
        description=(
            "Decode the ONFI bus (CE#, CLE, ALE, WE#, RE#, DQ0-7) of a VCD or sigrok recording "
            "of a drive's power-up, find each target's Read ID (90h) and parameter page (ECh) "
            "reads, and write a geometry file for rbscope analyze --geometry: page and spare "
            "size, pages per block, planes, LUNs per target, cell and the tPROG/tBERS/tR maxima "
            "come from the page; channels, targets per channel and the program model the page "
            "cannot know: give them here, or edit the placeholders in the file "
            "(docs/identify.md)."),
        epilog="examples: rbscope identify powerup.sr --bus-ce CE0 --bus-ce CE1 --channels 4 "
               "--program-model multi-plane -o drive.toml; rbscope identify --port "
               "/dev/ttyUSB1 -o drive.toml (the bus tap's power-up recorder)")
    p.add_argument("source", metavar="SOURCE", nargs="?",
                   help="a VCD (.vcd) or sigrok session (.sr); or give --port")
    r = p.add_argument_group("the bus tap's power-up recorder (instead of SOURCE)")
    r.add_argument("--port", metavar="PORT",
                   help=f"read the recorder of the device here: {PORT_HELP}")
    port_options(r, json=False)
    act = r.add_mutually_exclusive_group()
    act.add_argument("--arm", action="store_true",
                     help="re-arm the recorder (it forgets its cells and waits for each "
                          "target's next Reset), then exit: power-cycle the drive and run "
                          "identify --port again")
    act.add_argument("--start", action="store_true",
                     help="start recording every target now (no Reset needed), then exit")
    p.add_argument("--format", choices=("auto", "vcd", "sr"), default="auto",
                   help="source format (default: from the extension, then the content)")
    p.add_argument("--clock", type=_duration, metavar="PERIOD",
                   help="VCD only: the sampling grid, a whole multiple of the timescale "
                        "(default: the smallest one >= 10 ns)")
    p.add_argument("--x-as", choices=("hold", "high", "low"), default="hold",
                   help="VCD only: what an unknown (x) value means (default: hold)")
    g = p.add_argument_group("bus signals (names in the recording)")
    g.add_argument("--bus-ce", action="append", default=[], metavar="NAME",
                   help="CE# of a target, in target order (repeat; default CE0)")
    g.add_argument("--bus-cle", default="CLE", metavar="NAME", help="CLE (default CLE)")
    g.add_argument("--bus-ale", default="ALE", metavar="NAME", help="ALE (default ALE)")
    g.add_argument("--bus-we", default="WE", metavar="NAME", help="WE# (default WE)")
    g.add_argument("--bus-re", default="RE", metavar="NAME", help="RE# (default RE)")
    g.add_argument("--bus-dq", action="append", default=[], metavar="NAME",
                   help="DQ0 … DQ7 in bit order (repeat 8 times), or one 8-bit VCD vector as "
                        "NAME[7:0] (default DQ0 … DQ7)")
    g.add_argument("--bus-rb", action="append", default=[], metavar="NAME",
                   help="R/B# of each target (optional, repeat): busy times after each command")
    d = p.add_argument_group("what the drive cannot tell")
    d.add_argument("--channels", type=integer(1), metavar="N", help="flash channels")
    d.add_argument("--chips-per-channel", type=integer(1), metavar="N",
                   help="targets (CE#) per channel")
    d.add_argument("--program-model", choices=PROGRAM_MODELS,
                   help="how the controller programs: one plane or all of a die's at once")
    p.add_argument("--name", help="the geometry's name (default: the page's maker and model)")
    p.add_argument("-o", "--output", metavar="TOML",
                   help="write the geometry file here (never over the recording; an existing "
                        "file that is not TOML only with --force)")
    force_option(p)
    p.add_argument("--commands", action="store_true", help="also list the decoded commands")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=cmd_identify)


def cmd_identify(args):
    if (args.source is None) == (args.port is None):
        print("rbscope identify: give a recording (SOURCE) or a device (--port), not "
              + ("both" if args.port else "neither"), file=sys.stderr)
        return EXIT_USAGE
    if (args.arm or args.start) and args.port is None:
        print("rbscope identify: --arm and --start need --port", file=sys.stderr)
        return EXIT_USAGE
    if args.output:
        try:
            # Before any work: the recording itself, or a file of another kind, is refused.
            check_output(args.output, kind="toml", inputs=[args.source], force=args.force,
                         option="-o")
        except OutputError as exc:
            print(f"rbscope identify: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.port is not None:
        return _from_device(args)
    try:
        bus = BusSignals(ce=tuple(args.bus_ce) or ("CE0",), cle=args.bus_cle,
                         ale=args.bus_ale, we=args.bus_we,
                         dq=expand_dq(args.bus_dq or [f"DQ{i}" for i in range(8)]))
    except ValueError as exc:
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        decoded = read_bus(args.source, bus, args.bus_re, rb=tuple(args.bus_rb),
                           fmt=args.format, clock=args.clock, unknown=args.x_as)
        fields = _write(args, decoded, Path(args.source).name)
    except SourceOptionError as exc:
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (IdentifyError, RecordingError) as exc:
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except ValueError as exc:  # signals that do not fit together (one R/B# per target)
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _report(args, decoded, fields)


def _write(args, decoded, source):
    """The geometry fields of ``decoded``, written to ``--output`` when given."""
    fields = drive_fields(decoded.targets, source=source, channels=args.channels,
                          chips_per_channel=args.chips_per_channel,
                          program_model=args.program_model, name=args.name)
    text = geometry_toml(fields)
    if args.output:
        try:
            write_text(args.output, text, kind="toml", inputs=[args.source],
                       force=args.force, option="-o")
        except OutputError as exc:
            raise RecordingError(str(exc)) from None
        except OSError as exc:
            raise RecordingError(f"{args.output}: cannot write: {exc.strerror}") from None
    return fields


def _report(args, decoded, fields, recorder=None):
    summary = _summary(decoded, fields, args.output)
    if recorder is not None:
        summary["recorder"] = recorder
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, decoded if args.commands else None)
    return EXIT_OK


@device_errors("identify")
def _from_device(args):
    with open_device(args) as dev:
        if args.arm or args.start:
            record_control(dev, RECORD_ARM if args.arm else RECORD_START)
            if args.arm:
                print("recorder re-armed: each target records from its next Reset (FFh); "
                      "power-cycle the drive, then run rbscope identify --port again")
            else:
                print("recorder started: every target records from now on")
            return EXIT_OK
        cells = read_record(dev)
    state = {t: {"cells": c[0].fill, "armed": c[0].armed, "recording": c[0].recording}
             for t, c in cells.items()}
    targets = len(cells)
    if not any(c[0].fill for c in cells.values()):
        print("rbscope identify: the power-up recorder holds nothing: "
              + ("every target is still armed (no Reset seen since the device started or was "
                 "re-armed): power the drive up with the probe attached"
                 if all(c[0].armed for c in cells.values()) else "no bus cycle recorded"),
              file=sys.stderr)
        return EXIT_FAILURE
    cycles = record_cycles(cells)
    commands = group_commands(cycles)
    decoded = BusDecode(cycles, commands, identities(commands, targets), [])
    for t, st in state.items():
        if st["armed"]:
            decoded.notes.append(f"target {t}: armed, no Reset (FFh) seen: nothing recorded")
        elif not st["recording"]:
            decoded.notes.append(f"target {t}: the recorder is full ({st['cells']} cells); "
                                 f"later cycles were not kept")
    try:
        fields = _write(args, decoded, f"power-up recorder on {args.port}")
    except IdentifyError as exc:
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except RecordingError as exc:
        print(f"rbscope identify: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return _report(args, decoded, fields, recorder=state)


def _summary(decoded, fields, output):
    targets = []
    for t in decoded.targets:
        entry = {"target": t.target, "resets": t.resets}
        if t.read_id is not None:
            entry["read_id"] = {"bytes": t.read_id.id_bytes.hex(),
                                "manufacturer": t.read_id.manufacturer,
                                "onfi": t.read_id.onfi, "jedec": t.read_id.jedec}
        if t.page is not None:
            p = t.page
            entry["page"] = {"standard": p.standard, "version": p.version,
                             "manufacturer": p.manufacturer, "model": p.model,
                             "copy": p.copy, "voted": p.voted}
        targets.append(entry)
    return {
        "targets": targets, "geometry": fields.values, "timing": fields.timing,
        "origin": fields.origin, "missing": fields.missing, "warnings": fields.warnings,
        "notes": decoded.notes, "output": output,
    }


def _print(summary, decoded):
    for t in summary["targets"]:
        ident = t.get("read_id")
        page = t.get("page")
        line = f"target {t['target']}:"
        line += f" ID {ident['bytes']} ({ident['manufacturer'] or 'unknown maker'})" \
            if ident else " no Read ID"
        line += (f", {page['standard']} {page['version']} parameter page "
                 f"({page['manufacturer']} {page['model']}"
                 f"{', majority of the copies' if page['voted'] else ''})") if page \
            else ", no parameter page"
        print(line)
    if decoded is not None:
        for cmd in decoded.commands:
            busy = f", busy {cmd.busy * 1e6:.3g} µs" if cmd.busy is not None else ""
            # (The recorder keeps the order of the cycles, not their time.)
            when = f"{cmd.time * 1e6:12.3f} µs" if cmd.time is not None else " " * 15
            print(f"  {when}  CE {cmd.targets()}  {cmd.name():<10} "
                  f"addr {bytes(cmd.address).hex() or '-'}  in {len(cmd.data_in)}  "
                  f"out {len(cmd.data_out)}{busy}")
    print("from the drive:")
    for key, value in {**summary["geometry"], **{f"timing.{k}": v for k, v in
                                                summary["timing"].items()}}.items():
        if key not in summary["missing"]:
            print(f"  {key} = {value}  ({summary['origin'][key]})")
    if summary["missing"]:
        print("you must still give (placeholders in the file; rbscope analyze refuses them):")
        for key in summary["missing"]:
            print(f"  {key}: {summary['geometry'][key]}")
    for w in summary["warnings"] + summary["notes"]:
        print(f"note: {w}")
    if summary["output"]:
        print(f"wrote {summary['output']}")

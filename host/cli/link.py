"""The device subcommands of ``rbscope``: ``info``, ``configure``, ``capture``, ``dump``.

Registered on the main parser by :func:`add_link_parsers` (called from :mod:`rbscope.cli`).
Exit codes (also in ``rbscope --help``): 0 success, 1 failure (e.g. an unreadable capture file),
2 usage error (bad option, unknown preset, invalid TOML), 3 device or port error (cannot open,
vanished and did not come back, an error RESPONSE, a different device after a reconnection),
4 timeout (the device does not answer).
"""

import argparse
import json
import os
import signal
import sys
import time

from rbscope.analysis.presets import (
    PRESETS,
    apply_overrides,
    get_preset,
    identify,
    load_toml,
)
from rbscope.device.capture import CaptureError, CaptureReader, CaptureWriter, RecordKind
from rbscope.device.device import DeviceError
from rbscope.device.live import LiveView
from rbscope.device.protocol import CRC_BYTES, HEADER_BYTES, ProtocolError, Status, TraceBatch
from rbscope.device.tap import has_tap, read_tap
from rbscope.gateware.link.protocol import (
    config_from_registers,
    counters_layout,
    layout_bytes,
    status_layout,
)

from .argtypes import integer, number
from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    PORT_HELP,
    device_errors,
    err,
    open_device,
    port_options,
)

__all__ = ["add_link_parsers"]

# info ------------------------------------------------------------------------------------------


@device_errors("info")
def _cmd_info(args):
    with open_device(args) as dev:
        info = dev.info
        regs = dev.read_registers()
        if args.json:
            print(json.dumps({"port": dev.port_name, "info": info.to_dict(),
                              "params": {k: getattr(dev.params, k)
                                         for k in dev.params.__dataclass_fields__},
                              "registers": regs}))
            return EXIT_OK
        tick = max(regs.get("PRESCALER", 1), 1) / info.clock_hz if info.clock_hz else 0
        print(f"port        {dev.port_name}")
        print(f"board       {info.board_name} (build 0x{info.build_id:08x}, gateware "
              f"{info.version_string}, protocol {info.protocol_version})")
        print(f"channels    {info.channels}, {info.classes} classes, counters "
              f"{info.counter_bits} bit, histogram {info.hist_bins} bins x {info.hist_bits} bit")
        print(f"clock       {info.clock_hz} Hz, prescaler {regs.get('PRESCALER')} "
              f"(tick {tick * 1e6:g} µs)")
        print("registers")
        for name, value in regs.items():
            print(f"  {name:<18} {value:>12}  0x{value:08x}")
    return EXIT_OK


# configure -------------------------------------------------------------------------------------


def _preset_from_args(args):
    user = load_toml(args.from_toml) if args.from_toml else {}
    name = args.preset
    if name is None:
        if len(user) == 1:
            name = next(iter(user))
        else:
            raise argparse.ArgumentTypeError("give --preset NAME (or a TOML file holding one "
                                             "preset)")
    return apply_overrides(get_preset(name, user), args.set or [])


def _timing_line(tick, what, ticks, old, unit):
    """``configure``'s line for the glitch filter or the quiescence time: the value set, and
    the one it replaces when that differs (e.g. a preset file's idle_s over ``--set idle_s``)."""
    scale = 1e6 if unit == "µs" else 1.0
    line = f"{what} {ticks * tick * scale:g} {unit} ({ticks} ticks)"
    if old != ticks:
        line += f"; was {old * tick * scale:g} {unit}: changed"
    return line


@device_errors("configure")
def _cmd_configure(args):

    if args.list:
        if args.json:
            print(json.dumps({n: p.to_dict() for n, p in PRESETS.items()}))
        else:
            for n, p in PRESETS.items():
                print(f"{n:<12} {p.description}")
        return EXIT_OK
    if args.port is None:
        err("configure", "PORT is required (or --list)")
        return EXIT_USAGE
    try:
        preset, regs = _preset_from_args(args)
    except argparse.ArgumentTypeError as exc:
        err("configure", str(exc))
        return EXIT_USAGE
    with open_device(args) as dev:
        values = preset.registers(dev.params, dev.info.clock_hz, prescaler=args.prescaler)
        values.update(regs)
        epoch = None
        dev.read_registers()
        before = dev.config  # what is in force, to say what configure changes
        if args.no_clear and not args.dry_run:
            # Counts kept across a change of windows (or tick, or glitch filter) would be one
            # epoch classified two ways, and nothing in a capture could tell: refuse.
            checked = dev.check_configuration(values, allow_overlap=args.allow_overlap)
            dev.read_registers()  # what is in force now, every register
            old = dev.config
            new = config_from_registers(dev.params, {**dev.registers, **checked})
            if (old.windows, old.prescaler, old.glitch_ticks) != (
                    new.windows, new.prescaler, new.glitch_ticks):
                err("configure", "--no-clear with other class windows, tick or glitch filter "
                                 "would count this epoch's pulses under two configurations, "
                                 "which no analysis can tell apart: configure without "
                                 "--no-clear (the counters are cleared), or keep the windows")
                return EXIT_USAGE
        if args.dry_run:
            back = dev.check_configuration(values, allow_overlap=args.allow_overlap)
        else:
            back = dev.configure(values, clear=False, allow_overlap=args.allow_overlap,
                                 event={"preset": preset.name,
                                        "class_names": list(preset.names)})
            if not args.no_clear:
                # Counts taken under the previous windows must not carry the new names.
                epoch = dev.clear()
        tick = max(back.get("PRESCALER", dev.registers.get("PRESCALER", 1)), 1) \
            / dev.info.clock_hz
        if args.json:
            print(json.dumps({"preset": preset.to_dict(), "registers": back,
                              "tick_seconds": tick, "dry_run": args.dry_run,
                              "cleared_epoch": epoch}))
        else:
            print(f"preset {preset.name}: {preset.description}")
            print(f"tick {tick * 1e6:g} µs (prescaler {round(tick * dev.info.clock_hz)})")
            config = config_from_registers(dev.params, {**dev.registers, **back})
            for k, (lo, hi) in enumerate(config.windows):
                name = preset.names[k] if k < len(preset.names) else f"class{k}"
                state = (f"[{lo}, {hi}) ticks = [{lo * tick * 1e6:g}, {hi * tick * 1e6:g}) µs"
                         if lo < hi else "off")
                print(f"  {name:<11} {state}")
            print(_timing_line(tick, "glitch filter", config.glitch_ticks, before.glitch_ticks,
                               "µs"))
            print(_timing_line(tick, "quiescent after", config.idle_ticks, before.idle_ticks,
                               "s"))
            if args.dry_run:
                print("(dry run: nothing written)")
            elif epoch is not None:
                print(f"counters cleared (epoch {epoch})")
            else:
                print("counters NOT cleared (--no-clear): counts taken before this "
                      "configuration are classified with other windows")
    return EXIT_OK


# capture ---------------------------------------------------------------------------------------


def _snapshot_seconds(dev):
    """Device time one snapshot (STATUS and every channel's COUNTERS) takes on the link."""

    frame = HEADER_BYTES + CRC_BYTES + 2  # + the two END bytes; stuffing adds ~1 %
    size = (frame + layout_bytes(status_layout(dev.params))
            + dev.params.channels * (frame + layout_bytes(counters_layout(dev.params))))
    return dev.transfer_seconds(size * 1.02)


def _capture_target_problem(path, dev):
    """Why the capture file ``path`` cannot take ``dev``'s records (None: it can)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    try:
        old = CaptureReader(path, keep_records=False, keep_snapshots=False, keep_traces=False)
    except CaptureError as exc:
        return f"{path} exists and is not a capture file ({exc}); give another -o"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    info = old.info
    if info is not None and (old.params != dev.params or info.build_id != dev.info.build_id
                             or info.board_name != dev.info.board_name):
        return (f"{path} holds a capture of another device ({info.board_name}, build "
                f"0x{info.build_id:08x}, {info.channels} channels); this one is "
                f"{dev.info.board_name}, build 0x{dev.info.build_id:08x}, "
                f"{dev.info.channels} channels: write to another file")
    return None


def _summary_mask(spec, dev):
    """The TRACE_SUMMARY mask of ``--summarise``'s classes (names of the windows in force, or
    indices), or a sentence saying what is wrong."""
    names = ()
    for _, d in reversed(dev.events):
        if isinstance(d, dict) and d.get("class_names"):
            names = tuple(d["class_names"])
            break
    if not names:
        preset = identify(dev.params, dev.info.clock_hz, dev.read_registers())
        names = preset.names if preset is not None else ()
    mask = 0
    for token in (t.strip() for t in spec.split(",")):
        if token.isdigit() and int(token) < dev.params.classes:
            mask |= 1 << int(token)
        elif token in names:
            mask |= 1 << names.index(token)
        else:
            return (f"no class {token!r} (the device's classes: "
                    f"{', '.join(n or str(i) for i, n in enumerate(names)) or 'unnamed'}; "
                    f"or give indices 0 to {dev.params.classes - 1})")
    return mask


@device_errors("capture")
def _cmd_capture(args):
    if args.wait_for_activity is not None and not args.until_quiescent:
        err("capture", "--wait-for-activity needs --until-quiescent (it says which quiescence "
                       "ends the capture)")
        return EXIT_USAGE
    stop = {"why": None}

    def on_sigterm(signum, frame):
        stop["why"] = "terminated"
    def on_sigint(signum, frame):
        # The first Ctrl-C ends the capture cleanly (final snapshot, histograms, stop record)
        # wherever it lands, even while it starts; a second one interrupts at once.
        if stop["why"] == "interrupted":
            raise KeyboardInterrupt
        stop["why"] = "interrupted"
    old_term = signal.signal(signal.SIGTERM, on_sigterm)
    old_int = signal.signal(signal.SIGINT, on_sigint)
    dev = writer = None
    restore = {}
    try:
        dev = open_device(args, reconnect_timeout=args.reconnect_timeout)
        settings = {}
        if args.snapshot_ms is not None:
            period = round(args.snapshot_ms * dev.info.clock_hz / 1000)
            if args.snapshot_ms and not period:
                period = 1
            need = _snapshot_seconds(dev)
            # Snapshots may fill at most 80 % of the link: commands and histograms need room.
            if period and period / dev.info.clock_hz < 1.25 * need:
                err("capture", f"--snapshot-ms {args.snapshot_ms:g}: one snapshot takes "
                                f"{need * 1e3:.3g} ms of this link; give at least "
                                f"{1.25 * need * 1e3:.3g} ms (or 0: off)")
                return EXIT_USAGE
            settings["SNAPSHOT_PERIOD"] = period
        if args.hist_every is not None:
            settings["HIST_PERIOD"] = args.hist_every
        if args.summarise:
            if not args.trace:
                err("capture", "--summarise needs --trace (it shortens the pulse records)")
                return EXIT_USAGE
            mask = _summary_mask(args.summarise, dev)
            if isinstance(mask, str):
                err("capture", f"--summarise: {mask}")
                return EXIT_USAGE
            try:
                dev.summarise_trace(mask)
            except DeviceError as exc:
                err("capture", f"--summarise: {exc}")
                return EXIT_FAILURE
            restore["TRACE_SUMMARY"] = 0  # (the power-up value: whole records)
        if args.trace:
            settings["TRACE_ENABLE"] = 1
            if not args.clear:
                # The counters' epoch began before the records: the sequence cannot be checked
                # complete, and analyze will classify the histograms.
                print("rbscope capture: note: --trace without --clear: the records will not "
                      "cover the counters' epoch, so analyze cannot use the pulse sequence "
                      "(add --clear)", file=sys.stderr)
            if args.hist_every:
                # A histogram burst's chunks alternate with the trace batches while it lasts.
                print("rbscope capture: note: --hist-every with --trace: each histogram burst "
                      "takes about 30 % of the link from the pulse records while it lasts, so "
                      "at full load records may be lost (the capture reads the histograms at "
                      "its end without it)", file=sys.stderr)
        problem = _capture_target_problem(args.output, dev)
        if problem:
            err("capture", problem)
            return EXIT_FAILURE
        try:
            writer = CaptureWriter(args.output, fsync=args.fsync,
                                   meta={"port": str(args.port), "argv": sys.argv[1:]})
        except (OSError, CaptureError) as exc:
            err("capture", f"cannot write {args.output}: {exc}")
            return EXIT_FAILURE
        for name in settings:
            restore[name] = dev.read_reg(name)
        for name, value in settings.items():
            dev.write_reg(name, value)
        dev.attach_capture(writer)  # INFO and the registers first: the file describes itself
        view = None
        try:
            if args.clear:
                dev.clear()
            if has_tap(dev.info):
                # The bus tap's counters never clear: the run's counts are the difference of
                # this read and the one at the end (capture_to_measurement takes it).
                writer.tap(read_tap(dev), "start")
            names = ()
            for _, d in reversed(dev.events):
                if isinstance(d, dict) and d.get("class_names"):
                    names = d["class_names"]
            config = dev.config
            tick = max(config.prescaler, 1) / dev.info.clock_hz
            if not names:
                # No preset was applied in this session: recognise a built-in preset from the
                # windows the device holds, else name each window by its bounds (µs) rather than
                # guess what it is for.
                preset = identify(dev.params, dev.info.clock_hz, dev.registers)
                if preset is not None:
                    names = preset.names
                else:
                    names = tuple(f"[{lo * tick * 1e6:g},{hi * tick * 1e6:g})µs" if lo < hi else ""
                                  for lo, hi in config.windows)
            view = LiveView(dev.params, tick, names, idle_seconds=config.idle_ticks * tick or None,
                            json=args.json, stream=sys.stdout if args.json else sys.stderr)
            start = time.monotonic()
            end = None if args.duration is None else start + args.duration
            # Quiescence since before the capture: the snapshot the clear took (or the first
            # one) already quiescent, and its quiet_since unchanged since, means no line has
            # been busy during the capture. --until-quiescent stops there at once (and says
            # so); with --wait-for-activity it waits, at most that long, for activity first.
            wait_until = (None if args.wait_for_activity is None
                          else start + args.wait_for_activity)
            seen = None
            idle_since = None
            start_snap = dev.latest_snapshot
            if start_snap is not None and start_snap.status.quiescent:
                idle_since = start_snap.status.quiet_since
            active = start_snap is not None and idle_since is None
            for _, frame in dev.frames():
                view.trace(frame)
                if isinstance(frame, Status) or frame is None:
                    snap = dev.latest_snapshot
                    if snap is not None and snap is not seen:
                        first = seen is None and start_snap is None
                        seen = snap
                        view.update(snap, dev.stats,
                                    extra=f"{writer.records} records")
                        st = snap.status
                        if first and st.quiescent:
                            idle_since = st.quiet_since
                        elif not st.quiescent or st.quiet_since != idle_since:
                            active = True
                        if args.until_quiescent and st.quiescent and (
                                active or wait_until is None):
                            stop["why"] = "quiescent"
                now = time.monotonic()
                if (not stop["why"] and not active and wait_until is not None
                        and now >= wait_until):
                    stop["why"] = "no activity"
                if end is not None and now >= end:
                    stop["why"] = stop["why"] or "duration"
                if stop["why"]:
                    break
            if stop["why"] in ("quiescent", "no activity") and not active:
                print("rbscope capture: note: no line was busy during the capture (the device "
                      "was quiescent when it began and stayed so); start the workload first, "
                      "or give --wait-for-activity S", file=sys.stderr)
        except KeyboardInterrupt:
            stop["why"] = "interrupted"
        # Final, complete counts: a solicited snapshot and the histograms.
        final = dev.snapshot()
        dev.read_histograms()
        if has_tap(dev.info):
            writer.tap(read_tap(dev), "stop")
        if view is not None:
            view.update(final, dev.stats, force=True, extra=f"{writer.records} records")
            view.close()
        writer.event("stop", reason=stop["why"], link=dev.stats.to_dict(),
                     queue_overflow=dev.queue_overflow)
        if not args.json:
            print(f"rbscope capture: {stop['why']}; {writer.records} records in {args.output}",
                  file=sys.stderr)
        return EXIT_OK
    except KeyboardInterrupt:
        if writer is not None:
            writer.event("stop", reason="interrupted during start or stop")
        return EXIT_FAILURE
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        if dev is not None:
            # This capture's link settings end with it (also when it failed): the device is
            # left as it was found.
            for name, value in restore.items():
                try:
                    dev.write_reg(name, value)
                except DeviceError as exc:
                    err("capture", f"could not restore {name} = {value}: {exc}")
            dev.close()
        if writer is not None:
            writer.close()


# dump ------------------------------------------------------------------------------------------


def _batch_records(batch, params):
    """A TRACE_BATCH's records as dicts (channel, kind, index, width, timestamp), or its packed
    slots and why they cannot be read."""
    try:
        return [{k: v for k, v in t.to_dict().items() if k not in ("type", "seq")}
                for t in batch.traces(params)]
    except (ProtocolError, ValueError, TypeError) as exc:
        return {"packed": [int(x) for x in batch.records], "error": str(exc)}


def _cmd_dump(args):
    try:
        reader = CaptureReader(args.file)
    except (OSError, CaptureError) as exc:
        err("dump", str(exc))
        return EXIT_FAILURE
    out = sys.stdout
    try:
        if args.summary:
            summary = reader.summary()
            print(json.dumps(summary) if args.json else
                  "\n".join(f"{k}: {v}" for k, v in summary.items()))
            return EXIT_OK
        for rec in reader.records:
            kind = RecordKind.names.get(rec.kind, str(rec.kind))
            if rec.kind == RecordKind.FRAME:
                body = rec.frame.to_dict() if rec.frame is not None else {
                    "type": "undecodable", "raw": rec.body.hex()}
                if isinstance(rec.frame, TraceBatch):
                    body["records"] = _batch_records(rec.frame, reader.params)
            else:
                body = rec.data if rec.data is not None else {"raw": rec.body.hex()}
            if args.json:
                out.write(json.dumps({"offset": rec.offset, "record": kind,
                                      "time_ns": rec.time_ns, **(
                                          body if isinstance(body, dict) else {"data": body})})
                          + "\n")
            else:
                t = time.strftime("%H:%M:%S", time.localtime(rec.time_ns / 1e9))
                t += f".{rec.time_ns // 1_000_000 % 1000:03d}"
                if rec.kind == RecordKind.FRAME and isinstance(body, dict):
                    what = body.pop("type", "?")
                    detail = " ".join(f"{k}={v}" for k, v in body.items())
                    out.write(f"{t} {rec.offset:>10} {what:<9} {detail}\n")
                else:
                    out.write(f"{t} {rec.offset:>10} {kind:<9} {json.dumps(body)}\n")
        if reader.truncated:
            err("dump", f"ignored {reader.truncated} bytes of an incomplete last record")
        for e in reader.errors:
            err("dump", e)
    except BrokenPipeError:
        # `rbscope dump F | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_OK


# parsers ---------------------------------------------------------------------------------------


_nonneg_float = number(0)
_positive_int = integer(1)
_nonneg_int = integer(0)


def add_link_parsers(commands):
    """Add ``info``, ``configure``, ``capture`` and ``dump`` to the subparsers ``commands``."""
    fmt = argparse.RawDescriptionHelpFormatter
    info = commands.add_parser(
        "info", help="show what a device is and its registers", formatter_class=fmt,
        description="Read INFO and every register of the device on PORT.",
        epilog="example: rbscope info /dev/ttyUSB0\n"
               "exit codes: 0 ok, 3 device/port error, 4 timeout")
    info.add_argument("port", metavar="PORT", help=PORT_HELP)
    port_options(info)
    info.set_defaults(handler=_cmd_info)

    conf = commands.add_parser(
        "configure", help="set class windows and tick from a timing preset", formatter_class=fmt,
        description="Write the class windows, tick prescaler, glitch filter and quiescence "
                    "time of a NAND timing preset (converted to ticks for the device's "
                    "clock). Built-in presets: see --list. User presets: --from-toml FILE "
                    "with [preset.NAME] tables. Overrides: --set NAME=VALUE, where NAME is "
                    "tick_us, glitch_us, idle_s, a class (program=150:2300, in µs) or a "
                    "register in upper case (WINDOW_1_LO=1500).",
        epilog="example: rbscope configure /dev/ttyUSB0 --preset mlc34nm --set program=180:2400"
               "\nexit codes: 0 ok, 2 bad preset/override, 3 device/port error, 4 timeout")
    conf.add_argument("port", metavar="PORT", nargs="?", help=PORT_HELP)
    conf.add_argument("--preset", metavar="NAME", help="preset name")
    conf.add_argument("--set", metavar="NAME=VALUE", action="append",
                      help="override a preset field or a register (repeatable)")
    conf.add_argument("--from-toml", metavar="FILE", help="user presets ([preset.NAME] tables)")
    conf.add_argument("--prescaler", type=_positive_int, metavar="N",
                      help="use this prescaler instead of the preset's tick")
    conf.add_argument("--dry-run", action="store_true", help="check and show, do not write")
    conf.add_argument("--no-clear", action="store_true",
                      help="keep the counters (by default they are cleared after writing, so "
                           "that no count taken under the old windows is labelled with the "
                           "new ones)")
    conf.add_argument("--allow-overlap", action="store_true",
                      help="accept overlapping windows (the lowest-numbered one takes the "
                           "overlap)")
    conf.add_argument("--list", action="store_true", help="list the built-in presets")
    port_options(conf)
    conf.set_defaults(handler=_cmd_configure)

    capture = commands.add_parser(
        "capture", help="record everything a device sends to a capture file",
        formatter_class=fmt,
        description="Record every frame the device on PORT sends into FILE (append-only, "
                    "flushed record by record; see docs/capture.md), with a live view of "
                    "per-channel counts and rates. Stops after --duration, on quiescence "
                    "(--until-quiescent), or on Ctrl-C; the file is complete in every case "
                    "(a final snapshot and the histograms are read before closing). A port "
                    "that vanishes (unplug) is reopened for --reconnect-timeout seconds and "
                    "the capture continues without losing counts.",
        epilog="example: rbscope capture /dev/ttyUSB0 -o run.rbcap --until-quiescent\n"
               "exit codes: 0 ok, 1 cannot write FILE, 3 device/port error, 4 timeout")
    capture.add_argument("port", metavar="PORT", help=PORT_HELP)
    capture.add_argument("-o", "--output", metavar="FILE", required=True,
                         help="capture file (appended to if it exists)")
    capture.add_argument("--duration", type=_nonneg_float, metavar="S", help="stop after S s")
    capture.add_argument("--until-quiescent", action="store_true",
                         help="stop when the device reports quiescence (IDLE_TICKS of ready); "
                              "a device already quiescent when the capture starts stops it at "
                              "once (see --wait-for-activity)")
    capture.add_argument("--wait-for-activity", type=_nonneg_float, metavar="S",
                         help="with --until-quiescent: count only quiescence after a line was "
                              "busy during the capture, waiting at most S s for that (then "
                              "stop: reason 'no activity')")
    capture.add_argument("--trace", action="store_true",
                         help="record one TRACE per pulse: each line's pulse sequence, which "
                              "analyze's sequence classifier uses when no record was lost "
                              "(with --clear, so that the records cover the whole epoch)")
    capture.add_argument("--summarise", metavar="CLASSES",
                         help="with --trace: while the link does not keep up (the device's "
                              "trace FIFO a quarter full), the device sends each run of pulses "
                              "of these classes (names or indices, comma-separated: e.g. read) "
                              "as its first pulse, a count and its last pulse, instead of "
                              "losing records (builds with the trace summariser: the "
                              "ECP5 boards'; docs/link.md, \"Trace summary\")")
    capture.add_argument("--snapshot-ms", type=_nonneg_float, metavar="N",
                         help="periodic snapshot every N ms (0: off)")
    capture.add_argument("--hist-every", type=_nonneg_int, metavar="N",
                         help="histograms after every N-th periodic snapshot (0: off)")
    capture.add_argument("--clear", action="store_true", help="clear the counters first")
    capture.add_argument("--fsync", action="store_true", help="fsync after every record")
    capture.add_argument("--reconnect-timeout", type=_nonneg_float, default=60.0, metavar="S",
                         help="keep reopening a vanished port this long (default 60)")
    port_options(capture)
    capture.set_defaults(handler=_cmd_capture)

    dump = commands.add_parser(
        "dump", help="print a capture file as text or JSON lines", formatter_class=fmt,
        description="Print every record of a capture file (it may still be being written; an "
                    "incomplete last record is ignored and reported).",
        epilog="example: rbscope dump run.rbcap --json | jq 'select(.type==\"counters\")'\n"
               "exit codes: 0 ok, 1 unreadable file")
    dump.add_argument("file", metavar="FILE")
    dump.add_argument("--json", action="store_true", help="one JSON object per record")
    dump.add_argument("--summary", action="store_true", help="only a summary of the file")
    dump.set_defaults(handler=_cmd_dump)

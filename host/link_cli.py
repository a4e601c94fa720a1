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

__all__ = ["add_link_parsers", "EXIT_DEVICE", "EXIT_TIMEOUT"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DEVICE = 3
EXIT_TIMEOUT = 4

_PORT_HELP = "serial device (/dev/ttyUSB0), pty path (from `rbscope sim`) or pyserial URL"


def _err(cmd, msg):
    print(f"rbscope {cmd}: {msg}", file=sys.stderr)


def _device_errors(cmd):
    """Map device exceptions onto exit codes (a decorator for command handlers)."""
    def wrap(fn):
        def run(args):
            from .device import DeviceError, DeviceTimeout
            from .presets import PresetError
            try:
                return fn(args)
            except DeviceTimeout as exc:
                _err(cmd, f"timeout: {exc}")
                return EXIT_TIMEOUT
            except DeviceError as exc:
                _err(cmd, str(exc))
                return EXIT_DEVICE
            except PresetError as exc:
                _err(cmd, str(exc))
                return EXIT_USAGE
        return run
    return wrap


def _open(args, **kw):
    from .device import Device
    return Device(args.port, baudrate=args.baud, timeout=args.timeout, **kw)


# info ------------------------------------------------------------------------------------------


@_device_errors("info")
def _cmd_info(args):
    with _open(args) as dev:
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
    from .presets import apply_overrides, get_preset, load_toml
    user = load_toml(args.from_toml) if args.from_toml else {}
    name = args.preset
    if name is None:
        if len(user) == 1:
            name = next(iter(user))
        else:
            raise argparse.ArgumentTypeError("give --preset NAME (or a TOML file holding one "
                                             "preset)")
    return apply_overrides(get_preset(name, user), args.set or [])


@_device_errors("configure")
def _cmd_configure(args):
    from rbscope.gateware.link.protocol import config_from_registers

    from .presets import PRESETS
    if args.list:
        if args.json:
            print(json.dumps({n: p.to_dict() for n, p in PRESETS.items()}))
        else:
            for n, p in PRESETS.items():
                print(f"{n:<12} {p.description}")
        return EXIT_OK
    if args.port is None:
        _err("configure", "PORT is required (or --list)")
        return EXIT_USAGE
    try:
        preset, regs = _preset_from_args(args)
    except argparse.ArgumentTypeError as exc:
        _err("configure", str(exc))
        return EXIT_USAGE
    with _open(args) as dev:
        values = preset.registers(dev.params, dev.info.clock_hz, prescaler=args.prescaler)
        values.update(regs)
        if args.dry_run:
            back = values
        else:
            back = dev.configure(values)
        tick = back["PRESCALER"] / dev.info.clock_hz
        if args.json:
            print(json.dumps({"preset": preset.to_dict(), "registers": back,
                              "tick_seconds": tick, "dry_run": args.dry_run}))
        else:
            print(f"preset {preset.name}: {preset.description}")
            print(f"tick {tick * 1e6:g} µs (prescaler {back['PRESCALER']})")
            config = config_from_registers(dev.params, {**dev.registers, **back})
            for k, (lo, hi) in enumerate(config.windows):
                name = preset.names[k] if k < len(preset.names) else f"class{k}"
                state = (f"[{lo}, {hi}) ticks = [{lo * tick * 1e6:g}, {hi * tick * 1e6:g}) µs"
                         if lo < hi else "off")
                print(f"  {name:<11} {state}")
            if args.dry_run:
                print("(dry run: nothing written)")
    return EXIT_OK


# capture ---------------------------------------------------------------------------------------


@_device_errors("capture")
def _cmd_capture(args):
    from .capture import CaptureWriter
    from .live import LiveView
    from .presets import identify
    from .protocol import Status

    stop = {"why": None}

    def on_sigterm(signum, frame):
        stop["why"] = "terminated"
    old_term = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        writer = CaptureWriter(args.output, fsync=args.fsync,
                               meta={"port": str(args.port), "argv": sys.argv[1:]})
    except OSError as exc:
        _err("capture", f"cannot write {args.output}: {exc}")
        return EXIT_FAILURE
    dev = None
    try:
        dev = _open(args, reconnect_timeout=args.reconnect_timeout)
        if args.snapshot_ms is not None:
            dev.write_reg("SNAPSHOT_PERIOD",
                          max(1, round(args.snapshot_ms * dev.info.clock_hz / 1000)))
        if args.hist_every is not None:
            dev.write_reg("HIST_PERIOD", args.hist_every)
        if args.trace:
            dev.enable_trace(True)
        dev.attach_capture(writer)  # INFO and the registers first: the file describes itself
        if args.clear:
            dev.clear()
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
                names = tuple(preset.class_names)
            else:
                names = tuple(f"[{lo * tick * 1e6:g},{hi * tick * 1e6:g})µs" if lo < hi else ""
                              for lo, hi in config.windows)
        view = LiveView(dev.params, tick, names, idle_seconds=config.idle_ticks * tick or None,
                        json=args.json, stream=sys.stdout if args.json else sys.stderr)
        start = time.monotonic()
        end = None if args.duration is None else start + args.duration
        stop["why"] = None
        seen = None
        try:
            for _, frame in dev.frames():
                if isinstance(frame, Status) or frame is None:
                    snap = dev.latest_snapshot
                    if snap is not None and snap is not seen:
                        seen = snap
                        view.update(snap, dev.stats,
                                    extra=f"{writer.records} records")
                        if args.until_quiescent and snap.status.quiescent:
                            stop["why"] = "quiescent"
                if end is not None and time.monotonic() >= end:
                    stop["why"] = stop["why"] or "duration"
                if stop["why"]:
                    break
        except KeyboardInterrupt:
            stop["why"] = "interrupted"
        # Final, complete counts: a solicited snapshot and the histograms.
        final = dev.snapshot()
        dev.read_histograms()
        if args.trace:
            dev.enable_trace(False)
        view.update(final, dev.stats, force=True, extra=f"{writer.records} records")
        view.close()
        writer.event("stop", reason=stop["why"], link=dev.stats.to_dict(),
                     queue_overflow=dev.queue_overflow)
        if not args.json:
            print(f"rbscope capture: {stop['why']}; {writer.records} records in {args.output}",
                  file=sys.stderr)
        return EXIT_OK
    except KeyboardInterrupt:
        writer.event("stop", reason="interrupted during start or stop")
        return EXIT_FAILURE
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if dev is not None:
            dev.close()
        writer.close()


# dump ------------------------------------------------------------------------------------------


def _cmd_dump(args):
    from .capture import CaptureError, CaptureReader, RecordKind
    try:
        reader = CaptureReader(args.file)
    except (OSError, CaptureError) as exc:
        _err("dump", str(exc))
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
            _err("dump", f"ignored {reader.truncated} bytes of an incomplete last record")
        for e in reader.errors:
            _err("dump", e)
    except BrokenPipeError:
        # `rbscope dump F | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_OK


# parsers ---------------------------------------------------------------------------------------


def _nonneg_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, not {text}")
    return v


def _nonneg_int(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, not {v}")
    return v


def _port_options(p):
    p.add_argument("--baud", type=int, default=3_000_000, help="link rate (default 3000000)")
    p.add_argument("--timeout", type=_nonneg_float, default=0.5,
                   help="seconds to wait for an answer before retrying (default 0.5)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def add_link_parsers(commands):
    """Add ``info``, ``configure``, ``capture`` and ``dump`` to the subparsers ``commands``."""
    fmt = argparse.RawDescriptionHelpFormatter
    info = commands.add_parser(
        "info", help="show what a device is and its registers", formatter_class=fmt,
        description="Read INFO and every register of the device on PORT.",
        epilog="example: rbscope info /dev/ttyUSB0\n"
               "exit codes: 0 ok, 3 device/port error, 4 timeout")
    info.add_argument("port", metavar="PORT", help=_PORT_HELP)
    _port_options(info)
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
    conf.add_argument("port", metavar="PORT", nargs="?", help=_PORT_HELP)
    conf.add_argument("--preset", metavar="NAME", help="preset name")
    conf.add_argument("--set", metavar="NAME=VALUE", action="append",
                      help="override a preset field or a register (repeatable)")
    conf.add_argument("--from-toml", metavar="FILE", help="user presets ([preset.NAME] tables)")
    conf.add_argument("--prescaler", type=int, metavar="N",
                      help="use this prescaler instead of the preset's tick")
    conf.add_argument("--dry-run", action="store_true", help="show, do not write")
    conf.add_argument("--list", action="store_true", help="list the built-in presets")
    _port_options(conf)
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
    capture.add_argument("port", metavar="PORT", help=_PORT_HELP)
    capture.add_argument("-o", "--output", metavar="FILE", required=True,
                         help="capture file (appended to if it exists)")
    capture.add_argument("--duration", type=_nonneg_float, metavar="S", help="stop after S s")
    capture.add_argument("--until-quiescent", action="store_true",
                         help="stop when the device reports quiescence (IDLE_TICKS of ready)")
    capture.add_argument("--trace", action="store_true", help="record one TRACE per pulse")
    capture.add_argument("--snapshot-ms", type=_nonneg_float, metavar="N",
                         help="periodic snapshot every N ms (0: off)")
    capture.add_argument("--hist-every", type=_nonneg_int, metavar="N",
                         help="histograms after every N-th periodic snapshot (0: off)")
    capture.add_argument("--clear", action="store_true", help="clear the counters first")
    capture.add_argument("--fsync", action="store_true", help="fsync after every record")
    capture.add_argument("--reconnect-timeout", type=_nonneg_float, default=60.0, metavar="S",
                         help="keep reopening a vanished port this long (default 60)")
    _port_options(capture)
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

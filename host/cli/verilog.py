"""``rbscope verilog``: write the gateware's Verilog at any size, for simulators and vendor tools.

Build-time options only (run-time settings such as class windows go through the ``cfg`` port or
the device's registers). The work is done by :mod:`rbscope.gateware.export`; ``docs/ports.md``
describes the ports of every top and ``docs/cocotb.md`` how to simulate them.
"""

import argparse
import dataclasses
import json
import sys

from rbscope.files import OutputError, check_not_source
from rbscope.gateware.export import TOPS, check_module_name, check_timescale, write_top
from rbscope.gateware.nand_emu import EmuParams, Storage
from rbscope.gateware.onfi_tap import TapParams
from rbscope.gateware.rb_sniffer.params import SnifferParams, classes_for_windows

from .argtypes import integer
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

__all__ = ["TOP_KEYS", "add_verilog_parser", "emu_params_from", "jobs_of", "sniffer_params_from",
           "tap_params_from"]

#: The tops ``--top`` offers, in the order "all" writes them (rbscope.gateware.export.TOPS).
TOP_KEYS = tuple(TOPS)


#: Sniffer build parameters offered as options (SnifferParams fields, with dashes).
_SNIFFER_FIELDS = ("width_bits", "counter_bits", "hist_sub_bits", "hist_bits", "timestamp_bits",
                   "prescaler_bits", "glitch_bits")
#: Emulator build parameters offered as options (EmuParams fields, with dashes).
_EMU_FIELDS = ("dies", "page_bytes", "spare_bytes", "pages_per_block", "blocks_per_plane",
               "planes", "ticks_bits", "counter_bits")

_DESCRIPTION = """\
Write the Verilog of rbscope's top-level designs into OUTDIR (default build/), one file per top,
named after its module (--name changes it). The files build warning-free on Verilator with no
-W option, run the same under Icarus -g2005 and -g2012, and carry a `timescale 1ns/1ps.

tops (--top, repeatable; default: all five):
  sniffer   rb_sniffer      the R/B# sniffer: rb pins in, counters and histograms out
  emulator  nand_emu        ONFI NAND die emulator: SDR bus in, R/B# and ground truth out
  loopback  nand_loopback   emulated dies watched by a sniffer, one channel per die
  tap       onfi_tap        ONFI bus tap: a channel's bus, R/B# and a sniffer's trace in,
                            opcode tags and per-die command/pulse counters out
  device    rbscope_device  the whole instrument behind its UART (what a board runs)

class count K (--classes, --windows):
  A row of counters holds the K class counters, then the fixed ones (unclassified, glitch,
  overlong, partial, dropped, busy ticks) at K+0 ... K+5. `rbscope analyze` builds its model with
  K = max(5, number of windows of the preset), so build the RTL with --windows N (which sets
  that K) or the same --classes to compare rows with `analyze` directly.
"""

_EPILOG = """\
examples:
  rbscope verilog                                   # every top at its default size, in build/
  rbscope verilog --top sniffer --channels 4 --width-bits 16 sim/
  rbscope verilog --top emulator --dies 2 --storage array --page-bytes 512 sim/
  rbscope verilog --top sniffer --windows 7 --name rb_sniffer_k7 sim/
  rbscope verilog --top tap --targets 4 --luns 1 sim/

docs/ports.md lists every port, bit map and handshake; docs/cocotb.md shows a testbench
(`rbscope docs ports`, `rbscope docs cocotb` print them from the installed package).
exit codes: 0 success, 1 cannot write, 2 usage error (bad option or parameter)
"""


#: Option types (rbscope.cli.argtypes): sizes at least 1, a first channel at least 0.
_positive_int = integer(lo=1)
_non_negative_int = integer(lo=0)


def add_verilog_parser(subparsers):
    """Register ``rbscope verilog`` on ``subparsers``."""
    p = subparsers.add_parser(
        "verilog", help="write the gateware's Verilog (any size; sniffer, emulator, ...)",
        description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", metavar="OUTDIR", nargs="?", default="build",
                   help="directory to write into (created; default build/)")
    p.add_argument("--top", action="append", choices=TOP_KEYS,
                   help="a design to write (repeat for several; default: all)")
    p.add_argument("--name", metavar="MODULE", type=_module_name,
                   help="Verilog module (and file) name of the one --top written")
    p.add_argument("--timescale", default="1ns/1ps", metavar="UNIT/PREC", type=_timescale,
                   help="`timescale written at the head (default 1ns/1ps; 'none' for none)")
    p.add_argument("--clock-wrapper", type=float, metavar="NS",
                   help="also write <module>_clocked.v: the top with its clock made in Verilog, "
                        "period NS (fast cocotb runs; docs/cocotb.md)")
    p.add_argument("--json", action="store_true",
                   help="print {\"written\": [paths]} as JSON instead of one path a line")
    p.add_argument("--force", action="store_true",
                   help="write even into rbscope's own source directories (refused otherwise)")

    g = p.add_argument_group("sniffer (sniffer, loopback, device)")
    g.add_argument("--channels", type=_positive_int, metavar="N",
                   help="R/B# inputs (1 ... 256; default 16; loopback: --dies)")
    k = g.add_mutually_exclusive_group()
    k.add_argument("--classes", type=_positive_int, metavar="K",
                   help="class windows K (1 ... 10; default 5)")
    k.add_argument("--windows", type=_positive_int, metavar="N",
                   help="size K for N windows as `rbscope analyze` does: K = max(5, N)")
    for name in _SNIFFER_FIELDS:
        g.add_argument("--" + name.replace("_", "-"), type=_positive_int, metavar="BITS",
                       dest="snf_" + name, help=_SNIFFER_HELP[name])

    g = p.add_argument_group("emulator (emulator, loopback)")
    for name in _EMU_FIELDS:
        flag = "--emu-counter-bits" if name == "counter_bits" else "--" + name.replace("_", "-")
        g.add_argument(flag, type=_positive_int, metavar="N", dest="emu_" + name,
                       help=_EMU_HELP[name])
    g.add_argument("--storage", choices=("timing", "array"),
                   help="timing: no data array (default); array: data kept in block RAM")
    g.add_argument("--rb-wired", action="store_true",
                   help="one wired-OR R/B# line for all dies instead of one per die")

    g = p.add_argument_group("tap (the sniffer options size the trace it reads; --channels "
                             "default: its dies)")
    g.add_argument("--targets", type=_positive_int, metavar="N",
                   help="CE# inputs of the tapped channel (1 ... 8; default 2)")
    g.add_argument("--luns", type=_positive_int, metavar="N",
                   help="LUNs (dies) per target: 1, 2 or 4 (default 2)")
    g.add_argument("--first-channel", type=_non_negative_int, metavar="CH",
                   help="sniffer channel of die 0 (default 0)")

    g = p.add_argument_group("device")
    g.add_argument("--clock-hz", type=_positive_int, metavar="HZ",
                   help="clock the device reports to the host (default 48000000)")
    g.add_argument("--uart-divisor", type=_positive_int, metavar="CYCLES",
                   help="clock cycles per UART bit (at least 4; default 48)")
    p.set_defaults(handler=run_verilog)
    return p


_SNIFFER_HELP = {
    "width_bits": "pulse-width counter W; 2**W-1 ticks is overlong (16 ... 32; default 24)",
    "counter_bits": "per-channel counters (48 ... 64, multiple of 8; default 48)",
    "hist_sub_bits": "histogram bins per octave = 2**S (3 ... 5; default 3)",
    "hist_bits": "histogram bin width (32 ... 48, multiple of 8; default 32)",
    "timestamp_bits": "tick timestamp (48 ... 64, multiple of 8; default 48)",
    "prescaler_bits": "tick prescaler register (8 ... 24; default 16)",
    "glitch_bits": "glitch filter register (4 ... 16; default 8)",
}
_EMU_HELP = {
    "dies": "emulated dies, one CE# each (default 1; loopback 2)",
    "page_bytes": "data bytes per page (default 2048)",
    "spare_bytes": "spare bytes per page (default 64)",
    "pages_per_block": "pages per block (default 64)",
    "blocks_per_plane": "blocks per plane (default 1024)",
    "planes": "planes per die (default 2)",
    "ticks_bits": "busy-time registers in ticks (16 ... 32; default 24)",
    "counter_bits": "ground-truth counters (32 ... 64; default 48)",
}


def sniffer_params_from(args, channels=None):
    """Return the :class:`SnifferParams` the options ask for (``channels`` overrides)."""

    options = {f: getattr(args, "snf_" + f) for f in _SNIFFER_FIELDS
               if getattr(args, "snf_" + f) is not None}
    if args.windows is not None:
        options["classes"] = classes_for_windows(args.windows)
    elif args.classes is not None:
        options["classes"] = args.classes
    return SnifferParams(channels=channels or args.channels or 16, **options)


def emu_params_from(args, dies=None):
    """Return the :class:`EmuParams` the options ask for (``dies`` is the default die count)."""

    options = {f: getattr(args, "emu_" + f) for f in _EMU_FIELDS
               if getattr(args, "emu_" + f) is not None}
    if dies is not None:
        options.setdefault("dies", dies)
    if args.storage is not None:
        options["storage"] = Storage.ARRAY if args.storage == "array" else Storage.TIMING
    if args.rb_wired:
        options["rb_wired"] = True
    return EmuParams(**options)


def tap_params_from(args):
    """Return the :class:`TapParams` the options ask for (default: 2 targets of 2 LUNs, the
    trace of a sniffer with one channel per die)."""
    targets = 2 if args.targets is None else args.targets
    luns = 2 if args.luns is None else args.luns
    first = args.first_channel or 0
    channels = args.channels or first + targets * luns
    return TapParams(targets=targets, luns=luns, first_channel=first,
                     sniffer=sniffer_params_from(args, channels=channels))


def _module_name(text):
    try:
        return check_module_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _timescale(text):
    """``--timescale``: ``UNIT/PREC`` (checked and normalised) or ``none`` (None)."""
    if text.strip().lower() == "none":
        return None
    try:
        return check_timescale(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def jobs_of(args):
    """Return ``[(top, design options)]`` for the tops asked for."""
    tops = list(dict.fromkeys(args.top or TOP_KEYS))
    if args.name is not None and len(tops) != 1:
        raise ValueError("--name needs exactly one --top")
    jobs = []
    for top in tops:
        if top == "sniffer":
            jobs.append((top, {"sniffer": sniffer_params_from(args)}))
        elif top == "emulator":
            jobs.append((top, {"emulator": emu_params_from(args)}))
        elif top == "loopback":
            emu = emu_params_from(args, dies=args.channels or 2)
            if args.channels is not None and args.channels != emu.dies:
                raise ValueError(f"the loopback's sniffer has one channel per die: --channels "
                                 f"{args.channels} differs from --dies {emu.dies}")
            jobs.append((top, {"emulator": emu,
                               "sniffer": sniffer_params_from(args, channels=emu.dies)}))
        elif top == "tap":
            jobs.append((top, {"tap": tap_params_from(args)}))
        else:
            options = {"sniffer": sniffer_params_from(args)}
            if args.clock_hz is not None:
                options["clock_hz"] = args.clock_hz
            if args.uart_divisor is not None:
                options["uart_divisor"] = args.uart_divisor
            jobs.append((top, options))
    return jobs


def run_verilog(args):
    """Handle ``rbscope verilog``; return the exit code."""
    timescale = args.timescale
    try:
        check_not_source(args.outdir, force=args.force, option="OUTDIR")
        jobs = jobs_of(args)
    except (TypeError, ValueError, OutputError) as exc:
        print(f"rbscope verilog: {exc}", file=sys.stderr)
        return EXIT_USAGE
    written, tops = [], {}
    for top, options in jobs:
        try:
            paths = write_top(top, args.outdir, name=args.name, timescale=timescale,
                              wrapper_ns=args.clock_wrapper, **options)
        except (TypeError, ValueError) as exc:
            print(f"rbscope verilog: {top}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:
            print(f"rbscope verilog: cannot write to {args.outdir}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        written += [str(p) for p in paths]
        path = paths[0]
        tops[top] = {"path": str(path), "module": path.stem,
                     **{key: dataclasses.asdict(value) if dataclasses.is_dataclass(value)
                        else value for key, value in options.items()}}
    if args.json:
        print(json.dumps({"written": written, "tops": tops}, default=str))
    else:
        for path in written:
            print(path)
    return EXIT_OK

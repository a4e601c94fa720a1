"""``rbscope selftest``: the rig's counts against its own emulated NAND dies."""

import argparse
import json
import sys

from rbscope.device.selftest import SelftestError, run_selftest

from .common import EXIT_DEVICE, PORT_HELP, device_errors, err, open_device, port_options

__all__ = ["add_selftest_parser"]



def _geometry(text):
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        keys = ("page_bytes", "spare_bytes", "pages_per_block", "blocks_per_plane", "planes",
                "page_type_slots")
        if not sep or key not in keys:
            raise argparse.ArgumentTypeError(
                f"expected KEY=N,… with KEY one of {', '.join(keys)}; not {part!r}")
        try:
            out[key] = int(value, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key} must be an integer, not {value!r}") from None
    return out


def add_selftest_parser(commands):
    """Register ``rbscope selftest`` on the subcommand parser ``commands``."""

    p = commands.add_parser(
        "selftest",
        help="check the rig against its emulated NAND dies (emulator builds)",
        description=(
            "On a device built with the NAND emulator in loopback (a board's EMULATOR build or "
            "`rbscope sim --emulator`): program the on-chip traffic generator with a known mix "
            "(single- and multi-plane programs, reads, erases), wait in device time until it "
            "is done and the dies are quiescent, then compare every class count of every die, "
            "as the sniffer reports it over the link, with the dies' ground truth and with "
            "what the mix must produce. Prints a PASS/FAIL table."
        ),
        epilog="exit codes: 0 pass, 1 fail, 2 usage error, 3 device/port error or not an "
               "emulator build, 4 timeout",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("port", help=PORT_HELP)
    port_options(p)
    p.add_argument("--geometry", type=_geometry, metavar="K=N,…",
                   help="the emulator's geometry when it is not a standard build "
                        "(page_bytes, spare_bytes, pages_per_block, blocks_per_plane, planes)")
    p.add_argument("--verbose", action="store_true", help="report progress on stderr")
    p.set_defaults(handler=_cmd_selftest)


def _cmd_selftest(args):
    @device_errors("selftest")
    def run(args):
        with open_device(args) as dev:
            log = (lambda msg: print(f"rbscope selftest: {msg}", file=sys.stderr)) \
                if args.verbose else None
            try:
                result = run_selftest(dev, geometry=args.geometry, log=log)
            except SelftestError as exc:
                err("selftest", str(exc))
                return EXIT_DEVICE
        if args.json:
            print(json.dumps(result.to_dict()))
        else:
            print(result.table())
        return 0 if result.passed else 1
    return run(args)

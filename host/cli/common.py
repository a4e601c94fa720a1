"""What every ``rbscope`` subcommand shares: exit codes, error printing, the port options.

Exit codes (``rbscope --help`` lists them): 0 success, 1 failure (an input that cannot be read
or analysed), 2 usage error (bad option, unknown preset, invalid TOML), 3 device or port error
(cannot open, vanished and did not come back, an error RESPONSE, a different device after a
reconnection), 4 timeout (the device does not answer), 130 interrupted (Ctrl-C).
"""

import enum
import os
import sys

from rbscope.analysis.presets import PresetError
from rbscope.device.device import (
    BOARD_BAUDRATES,
    ConfigError,
    DeviceError,
    DeviceTimeout,
    open_any_rate,
)

from .argtypes import integer, number

__all__ = ["ExitCode", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_DEVICE", "EXIT_TIMEOUT",
           "EXIT_INTERRUPTED", "err", "PORT_HELP", "baud_rate", "port_options", "open_device",
           "device_errors", "OUTPUT_OPTIONS", "input_paths", "force_option"]


class ExitCode(enum.IntEnum):
    """The exit codes of every ``rbscope`` subcommand (the one table)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    DEVICE = 3
    TIMEOUT = 4
    INTERRUPTED = 130


EXIT_OK = ExitCode.OK
EXIT_FAILURE = ExitCode.FAILURE
EXIT_USAGE = ExitCode.USAGE
EXIT_DEVICE = ExitCode.DEVICE
EXIT_TIMEOUT = ExitCode.TIMEOUT
EXIT_INTERRUPTED = ExitCode.INTERRUPTED

PORT_HELP = "serial device (/dev/ttyUSB0), pty path (from `rbscope sim`) or pyserial URL"


def err(cmd, msg):
    """Print ``rbscope CMD: MSG`` on stderr."""
    print(f"rbscope {cmd}: {msg}", file=sys.stderr)


def baud_rate(text):
    """An argparse type: a link rate, 1 … 50 000 000, or ``auto`` (None)."""
    if text == "auto":
        return None
    return integer(1, 50_000_000)(text)


def port_options(p, json=True):
    """Add the options of a command that opens a device: ``--baud``, ``--timeout`` and (unless
    the command has its own) ``--json``."""
    p.add_argument("--baud", type=baud_rate, default=None, metavar="auto|RATE",
                   help="link rate, 1 … 50000000, or auto (the default): the first of "
                        + ", ".join(str(b) for b in BOARD_BAUDRATES)
                        + " at which the device answers (a simulated device answers at any)")
    p.add_argument("--timeout", type=number(0), default=0.5,
                   help="seconds to wait for an answer before retrying (default 0.5)")
    if json:
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


#: Attributes of a parsed command line that name files a command writes (never inputs).
OUTPUT_OPTIONS = frozenset({"output", "pdf", "save_measurement", "gtkwave_filter", "truth",
                            "record", "geometry_out"})


def input_paths(args):
    """Every existing file that an argument or option of ``args`` names, outputs excepted.

    A command may not write over any of them (:func:`rbscope.files.check_output`); a value
    that happens to name a file without being an input only narrows the outputs allowed.
    """
    out = []
    for key, value in vars(args).items():
        if key in OUTPUT_OPTIONS:
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, (str, os.PathLike)):
                try:
                    if os.path.isfile(v):
                        out.append(v)
                except (ValueError, OSError):  # a NUL byte, an over-long name
                    pass
    return out


def force_option(p):
    """Add ``--force``: replace an existing output file that is not of the command's kind."""
    p.add_argument("--force", action="store_true",
                   help="replace an existing output file of another kind (an output is never "
                        "written over one of the command's inputs)")


def open_device(args, **kw):
    """The :class:`~rbscope.device.device.Device` that ``args`` (port options) name; with
    ``--baud auto`` the first of the boards' rates at which it answers INFO
    (:func:`~rbscope.device.device.open_any_rate`)."""
    rates = BOARD_BAUDRATES if getattr(args, "baud", None) is None else (args.baud,)
    return open_any_rate(args.port, rates=rates, timeout=args.timeout, **kw)


def device_errors(cmd):
    """Map device exceptions onto exit codes (a decorator for command handlers)."""
    def wrap(fn):
        def run(args):
            try:
                return fn(args)
            except ConfigError as exc:
                err(cmd, f"invalid configuration (nothing written): {exc}")
                return EXIT_USAGE
            except DeviceTimeout as exc:
                err(cmd, f"timeout: {exc}")
                return EXIT_TIMEOUT
            except DeviceError as exc:
                err(cmd, str(exc))
                return EXIT_DEVICE
            except PresetError as exc:
                err(cmd, str(exc))
                return EXIT_USAGE
        return run
    return wrap

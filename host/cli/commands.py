"""The ``rbscope`` command line.

``rbscope`` follows the manner of ``git``: one program, one subcommand per task, ``--help`` on
each. Commands that produce data take ``--json`` for a machine-readable result on stdout.

Subcommands
-----------
``verilog``
    Write the gateware's Verilog at any size (:mod:`rbscope.cli.verilog`).
``analyze``, ``calibrate``
    Write amplification and class windows from counts, VCD or sigrok recordings
    (:mod:`rbscope.cli.analyze`).
``report``, ``export-vcd``
    A self-contained HTML (and PDF) report of one or more runs, and drive comparisons; a
    recording's pulses, classified, as a VCD for GTKWave or PulseView (:mod:`rbscope.cli.report`).
``info``, ``configure``, ``capture``, ``dump``
    Talk to a device over a serial port or pty, record captures, print them
    (:mod:`rbscope.cli.link`).
``label``, ``identify``
    Label a tapped channel's busy pulses by opcode (:mod:`rbscope.cli.label`); a geometry file
    from a recording of the drive's power-up: Read ID and parameter page
    (:mod:`rbscope.cli.identify`).
``merge``
    Several boards' captures, aligned by a shared sync line, as one measurement
    (:mod:`rbscope.cli.merge`).
``selftest``
    Check an emulator build's sniffer counts against its emulated dies' ground truth
    (:mod:`rbscope.device.selftest`).
``vssd``
    Serve a reference SSD as a network block device, recording its R/B# pulses and its true
    counts (:mod:`rbscope.cli.vssd`).
``probe-geometry``
    Guess an SSD's page size and parallel units from response times, against an NBD export or
    a block device (:mod:`rbscope.cli.probe`).

Exit codes
----------
0
    Success.
1
    The command ran and failed (for example, an output file could not be written).
2
    Usage error: unknown subcommand or option, an invalid option value, or a part of rbscope
    that is not installed or not written yet.
3
    Device or port error: the port cannot be opened or vanished for good, the device answered
    a command with an error, or it is a different device after a reconnection.
4
    Timeout: the device did not answer (after retries).
"""

import argparse
import os
import sys

from rbscope import __version__

from .analyze import add_analyze_parser, add_calibrate_parser, add_sample_sysfs_parser
from .common import EXIT_DEVICE, EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE
from .docs import add_docs_parser
from .identify import add_identify_parser
from .label import add_label_parser
from .link import add_link_parsers
from .merge import add_merge_parser
from .probe import add_probe_parser
from .report import add_export_parser, add_report_parser, add_sigrok_parser
from .selftest import add_selftest_parser
from .sim import add_sim_parser
from .verilog import add_verilog_parser
from .vssd import add_vssd_parser

__all__ = ["EXIT_DEVICE", "EXIT_FAILURE", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "main"]


_DESCRIPTION = """\
rbscope measures the write amplification of an SSD from the outside: an FPGA watches the
Ready/Busy# pins of the SSD's NAND dies, classifies every busy pulse by its width (read,
program, erase, ...) and counts them; the host turns those counts into reports.
"""

_EPILOG = """\
Run `rbscope COMMAND --help` for the options of one command. A help text's docs/NAME.md is
installed with the package: `rbscope docs NAME` prints it (`rbscope docs` lists them).

exit codes: 0 success, 1 failure, 2 usage error, 3 device or port error, 4 device timeout
"""


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``rbscope`` command."""
    parser = argparse.ArgumentParser(
        prog="rbscope",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rbscope {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")


    add_verilog_parser(commands)

    # Imported here so that `rbscope --help` and `rbscope verilog` do not load the WA engine.

    add_analyze_parser(commands)
    add_calibrate_parser(commands)
    add_sample_sysfs_parser(commands)


    add_label_parser(commands)
    add_identify_parser(commands)


    add_report_parser(commands)
    add_export_parser(commands)
    add_sigrok_parser(commands)


    add_link_parsers(commands)
    add_merge_parser(commands)


    add_sim_parser(commands)


    add_selftest_parser(commands)
    add_docs_parser(commands)
    add_vssd_parser(commands)
    add_probe_parser(commands)
    return parser


def main(argv=None) -> int:
    """Run the ``rbscope`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit
    code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.handler(args)
    except BrokenPipeError:
        # `rbscope … | head`: the reader has gone; stop quietly (and keep Python from
        # complaining when it flushes stdout at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

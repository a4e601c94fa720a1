"""``python -m rbscope.cli.ports``: write (or ``--check``) the port reference ``docs/ports.md``.

The reference itself is built by :func:`rbscope.gateware.ports.reference`; this face takes the
same size options as ``rbscope verilog``.
"""

import argparse
import sys

from rbscope.gateware.export import TOPS, design_of, port_reference
from rbscope.gateware.ports import reference

from .verilog import add_verilog_parser, jobs_of

__all__ = ["main"]


def main(argv=None):
    """``python -m rbscope.cli.ports [--check] [FILE] [rbscope verilog size options]``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    check = "--check" in argv
    argv = [a for a in argv if a != "--check"]
    parser = argparse.ArgumentParser(prog="python -m rbscope.cli.ports")
    sub = parser.add_subparsers(dest="command")
    add_verilog_parser(sub)
    args = parser.parse_args(["verilog", *argv])
    target = args.outdir if args.outdir != "build" else None
    if args.top:
        sections = [(top, design_of(top, **options), args.name or TOPS[top].module,
                     f"`rbscope verilog {' '.join(argv)}`") for top, options in jobs_of(args)]
        text = reference(sections)
    else:
        text = port_reference()
    if target is None:
        sys.stdout.write(text)
        return 0
    if check:
        try:
            with open(target, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            print(f"{target} is out of date: run python -m rbscope.cli.ports {target}",
                  file=sys.stderr)
            return 1
        return 0
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

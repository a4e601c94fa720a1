"""Option value types for the ``rbscope`` subcommands (argparse ``type=`` callables).

A bad value becomes ``argparse.ArgumentTypeError``, which argparse turns into a usage error
(exit code 2) naming the option.
"""

import argparse
import math

__all__ = ["integer", "number"]


def integer(lo=None, hi=None):
    """Return a type accepting an integer (any base: ``0x10``) from ``lo`` to ``hi``."""
    def parse(text):
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected an integer {_range(lo, hi)}, not {value}")
        return value
    return parse


def number(lo=None, hi=None):
    """Return a type accepting a finite number from ``lo`` to ``hi``."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
        if (not math.isfinite(value) or (lo is not None and value < lo)
                or (hi is not None and value > hi)):
            raise argparse.ArgumentTypeError(f"expected a number {_range(lo, hi)}, not {text}")
        return value
    return parse


def _range(lo, hi):
    if lo is not None and hi is not None:
        return f"from {lo} to {hi}"
    return f">= {lo}" if lo is not None else f"<= {hi}"

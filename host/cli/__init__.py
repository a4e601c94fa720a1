"""The ``rbscope`` command line: faces only (parse, call one library function, print)."""

from .commands import main

__all__ = ["main"]

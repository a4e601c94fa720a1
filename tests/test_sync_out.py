"""The sync pulse generator (``rbscope.gateware.sync_out``): its train is the model's, cycle for
cycle, in the Amaranth simulator and in its generated Verilog (Icarus); widths and gaps stay in
their bounds; the train is fixed by its seed."""

import gc
import os
import shutil
import subprocess
import sys
import warnings
from itertools import pairwise

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from rbscope.device.verilator_tool import verilator_env
from rbscope.gateware.export import convert
from rbscope.gateware.sync_out import (
    STIR,
    SyncPulseGenerator,
    SyncTrainParams,
    lfsr_step,
    sync_train,
)

#: Small units, so that a simulation covers many pulses.
SMALL = dict(width_min=3, width_step=1, gap_min=4, gap_step=1)


def simulate(params, cycles):
    """The generator's output, one level per cycle from the first cycle after reset."""
    dut = SyncPulseGenerator(params)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    levels = []

    async def bench(ctx):
        for _ in range(cycles):
            levels.append(ctx.get(dut.out))
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return levels


def pulses_of(levels):
    """``[(start, width)]`` of the low runs of ``levels`` that end within them."""
    out, start = [], None
    for t, level in enumerate(levels):
        if not level and start is None:
            start = t
        elif level and start is not None:
            out.append((start, t - start))
            start = None
    return out


@pytest.mark.parametrize("cycles_per_unit", [1, 3])
def test_gateware_train_is_the_models_cycle_for_cycle(cycles_per_unit):
    params = SyncTrainParams(cycles_per_unit, seed=0xACE1, **SMALL)
    levels = simulate(params, 12_000)
    assert levels[0] == 1  # high out of reset, through the first stir
    got = pulses_of(levels)
    want = [p for p in sync_train(params, 400) if p[0] + p[1] < len(levels)]
    assert len(got) >= 15
    assert got == want


def test_widths_and_gaps_stay_within_their_bounds_and_use_the_whole_range():
    params = SyncTrainParams(100)  # a 100 MHz board, 1 µs units
    train = sync_train(params, 5000)
    widths = [w // 100 for _, w in train]
    gaps = [(b[0] - a[0] - a[1] - STIR - 1) // 100 for a, b in pairwise(train)]
    assert min(widths) >= 50 and max(widths) <= 2090
    assert min(gaps) >= 100_000 and max(gaps) <= 355_000
    assert all((w - 50) % 8 == 0 for w in widths) and all(g % 1000 == 0 for g in gaps)
    # Every one of the 256 widths appears, and no width dominates.
    assert len(set(widths)) == 256 and max(widths.count(w) for w in set(widths)) < 60
    # A few pulses a second.
    seconds = train[-1][0] / 100e6
    assert 3 < len(train) / seconds < 6


def test_the_train_is_fixed_by_its_seed():
    a = sync_train(SyncTrainParams(1, seed=7, **SMALL), 200)
    assert a == sync_train(SyncTrainParams(1, seed=7, **SMALL), 200)
    b = sync_train(SyncTrainParams(1, seed=8, **SMALL), 200)
    assert [w for _, w in a] != [w for _, w in b]
    # Three widths in a row occur once in a long train (what the host matches on).
    wide = [w for _, w in sync_train(SyncTrainParams(1), 3000)]
    triples = [tuple(wide[i:i + 3]) for i in range(len(wide) - 2)]
    assert len(set(triples)) == len(triples)


def test_the_lfsr_does_not_fall_into_a_short_cycle():
    state, seen = 1, set()
    for _ in range(100_000):
        state = lfsr_step(state)
        assert state != 0
        seen.add(state)
    assert len(seen) == 100_000


def test_parameters_are_validated_with_the_offending_value():
    with pytest.raises(ValueError, match="seed must be .* not 0"):
        SyncTrainParams(1, seed=0)
    with pytest.raises(ValueError, match="cycles_per_unit .* not 0"):
        SyncTrainParams(0)
    # A refused component still exists until it is collected, and Amaranth warns then that it
    # was never elaborated: collect it here, so that no later test sees it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(TypeError, match="SyncTrainParams, not 3"):
            SyncPulseGenerator(3)
        gc.collect()


TESTBENCH = """\
`timescale 1ns/1ps
module tb;
  reg clk = 0, rst = 1;
  wire out;
  integer cycle = 0;
  top dut(.clk(clk), .rst(rst), .out(out));
  always #5 clk = ~clk;
  initial begin
    @(posedge clk); #1 rst = 0;
    repeat (CYCLES) begin
      $display("%0d", out);
      @(posedge clk); #1;
    end
    $finish;
  end
endmodule
"""


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not installed")
def test_generated_verilog_runs_the_same_train(tmp_path):
    params = SyncTrainParams(2, seed=0xBEEF, **SMALL)
    dut = SyncPulseGenerator(params)
    (tmp_path / "top.v").write_text(convert(dut, "top"))  # as `rbscope verilog` writes
    cycles = 3000
    (tmp_path / "tb.v").write_text(TESTBENCH.replace("CYCLES", str(cycles)))
    subprocess.run(["iverilog", "-o", str(tmp_path / "sim"), str(tmp_path / "tb.v"),
                    str(tmp_path / "top.v")], check=True, capture_output=True)
    run = subprocess.run(["vvp", "-n", str(tmp_path / "sim")], check=True, capture_output=True,
                         text=True)
    levels = [int(x) for x in run.stdout.split() if x in ("0", "1")]
    assert len(levels) == cycles
    assert levels == simulate(params, cycles)
    # And Verilator's default lint passes it.
    env = {**os.environ, **verilator_env()}
    lint = subprocess.run(["verilator", "--lint-only", "--top-module", "top",
                           str(tmp_path / "top.v")], capture_output=True, text=True, env=env)
    assert lint.returncode == 0 and "%Warning" not in lint.stdout + lint.stderr, lint.stderr


# ---- on the boards ------------------------------------------------------------------------------

@pytest.mark.parametrize("board, channels, pin", [("ecpix5", 63, "pmod7.10"),
                                                  ("ulx3s", 55, "gpio0.27-")])
def test_the_ecp5_boards_drive_the_sync_on_the_pin_after_the_rb_inputs(board, channels, pin):
    from rbscope.boards.build import board_class, elaborate

    platform, top, plan = elaborate(board, channels=channels, sync_out=True)
    assert type(top).__name__ == "SyncOutTop" and top.params.channels == channels
    rtlil = plan.files["rbscope.il"]
    assert "sync_out" in rtlil
    pins = subprocess.run([sys.executable, "-m", "rbscope.boards.build", board, "--pins",
                           "--sync-out", "--channels", str(channels)], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    assert pins[-1].startswith(f"sync out: {pin} (")
    assert board_class(board).default_channels == channels + 1


@pytest.mark.parametrize("board, channels, why", [
    ("ecpix5", 64, "needs a spare header pin, and the build uses all 64 .give --channels 63"),
    ("icebreaker", 8, "no sync output on this board .* record the sync line"),
])
def test_a_build_without_room_for_the_sync_output_is_refused(board, channels, why):
    from rbscope.boards.build import elaborate
    from rbscope.boards.top import BoardError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(BoardError, match=why):
            elaborate(board, channels=channels, sync_out=True)
        gc.collect()

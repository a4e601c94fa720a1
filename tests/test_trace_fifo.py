"""The link's trace FIFOs in the Amaranth simulator: the default one (LUT RAM, 16 records) and
the deep one of the ECP5 boards (block RAM, then a register, then a 16-record head), each against
a Python queue under random writes and reads, back-pressure on both sides included."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from rbscope.gateware.link.counters import _deep_fifo, _RecordFifo


def run_against_a_queue(dut, depth, cycles, seed):
    """Write and read at random for ``cycles`` cycles; every record read is the queue's head,
    a write is refused only when the FIFO holds at least ``depth`` records, and nothing is lost
    or duplicated. Returns (records written, read, refused)."""
    rng = random.Random(seed)
    stats = {"written": 0, "read": 0, "refused": 0, "crowded": 0}

    async def bench(ctx):
        model = deque()
        value = 0
        for cycle in range(cycles):
            # Bursts of writes and of reads: phases in which either side outruns the other.
            phase = (cycle // 200) % 3
            w_en = rng.random() < (0.9, 0.2, 0.5)[phase]
            r_en = rng.random() < (0.2, 0.9, 0.5)[phase]
            ctx.set(dut.w_data, value)
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.r_en, r_en)
            w_rdy, r_rdy, r_data = ctx.get(dut.w_rdy), ctx.get(dut.r_rdy), ctx.get(dut.r_data)
            held = len(model)  # (a record read in a full FIFO's cycle frees its slot after it)
            # "Crowded" (the trace summariser's cue): a quarter full, a cycle or two late (the
            # deep FIFO counts its bulk only: up to 17 records sit in its head and register).
            if ctx.get(dut.crowded):
                stats["crowded"] += 1
                assert held + 2 >= depth // 4, f"cycle {cycle}: crowded holding {held}"
            else:
                assert not cycle or held < depth // 4 + 19, \
                    f"cycle {cycle}: not crowded holding {held}"
            if r_en and r_rdy:
                assert model, f"cycle {cycle}: readable while empty"
                assert r_data == model.popleft(), f"cycle {cycle}: not the head"
                stats["read"] += 1
            if w_en:
                if w_rdy:
                    model.append(value)
                    stats["written"] += 1
                    value = (value + 1) & ((1 << 20) - 1)
                else:
                    # Full only when it holds what it was built for, nothing short of it.
                    assert held >= depth, f"cycle {cycle}: refused holding {held}"
                    stats["refused"] += 1
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        ctx.set(dut.r_en, 1)
        for _ in range(4 * depth + 20):  # drain: everything written comes out, in order
            if ctx.get(dut.r_rdy):
                assert ctx.get(dut.r_data) == model.popleft()
                stats["read"] += 1
            await ctx.tick()
        assert not model

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return stats


@pytest.mark.parametrize(("make", "depth"), [
    (lambda: _RecordFifo(20, 16, crowded=True), 16),
    (lambda: _RecordFifo(20, 256, crowded=True), 256),  # the iCEBreaker's (it has no summariser)
    (lambda: _deep_fifo(20, 64, crowded=True), 64),
])
def test_a_trace_fifo_is_a_queue(make, depth):
    stats = run_against_a_queue(make(), depth, 3000 if depth < 256 else 8000, seed=depth)
    # The phases filled and emptied it: writes were refused, and most records went through.
    assert stats["refused"] > 0 and stats["read"] == stats["written"] > 500
    assert stats["crowded"] > 0


def test_a_deep_fifo_refuses_a_shallow_depth():
    with pytest.raises(ValueError, match="power of two above 16, not 16"):
        _deep_fifo(20, 16)

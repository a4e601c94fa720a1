"""The link controller's snapshot timer, cycle by cycle: a snapshot request every
SNAPSHOT_PERIOD cycles (every other cycle for a period of 1), restarted when either period
register is written, whatever the phase of the write."""

import pytest
from amaranth.sim import Simulator

from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol
from rbscope.gateware.link.controller import LinkController
from rbscope.gateware.link.framing import decoded_command_layout
from rbscope.gateware.rb_sniffer import SnifferParams

P = SnifferParams(channels=2)
OP = protocol.Opcode


def run_timer(period, writes, lead, tail, ram_output_registers):
    """Run a controller whose snapshot period is ``period`` cycles; after ``lead`` cycles send
    ``writes`` (register name, value) one after the other, 200 cycles apart, then run ``tail``
    more. Return the cycles of its periodic requests and of each write's strobe."""
    dut = LinkController(P, wire=PROTOCOL, clock_hz=1000 * period, uart_divisor=4, snapshot_ms=1,
                         ram_output_registers=ram_output_registers)
    regs = {r.name: r for r in dut.registers}
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    pulses, written = [], {}

    async def sniffer(ctx):
        # Every read answered at once (the frame builder never waits on the sniffer).
        ctx.set(dut.read_req.ready, 1)
        ctx.set(dut.read_resp.valid, 1)
        ctx.set(dut.body.ready, 1)

    async def sample(ctx):
        timer = dut._timer  # (set as the simulator elaborates the design)
        cycle = 0
        async for _, _, periodic, period_w, hist_w in ctx.tick().sample(
                timer["periodic"], timer["period_written"], timer["hist_written"]):
            if periodic:
                pulses.append(cycle)
            if period_w:
                written["SNAPSHOT_PERIOD"] = cycle
            if hist_w:
                written["HIST_PERIOD"] = cycle
            cycle += 1

    async def bench(ctx):
        layout = decoded_command_layout()
        await ctx.tick().repeat(lead)
        for tag, (name, value) in enumerate(writes):
            ctx.set(dut.command.payload, layout.const({
                "status": protocol.ResponseStatus.OK,
                "command": {"tag": tag, "opcode": OP.WRITE_REG, "address": regs[name].address,
                            "value": value}}))
            ctx.set(dut.command.valid, 1)
            await ctx.tick().until(dut.command.ready)
            ctx.set(dut.command.valid, 0)
            await ctx.tick().repeat(200)
        await ctx.tick().repeat(tail)

    sim.add_testbench(sniffer)
    sim.add_process(sample)
    sim.add_testbench(bench)
    sim.run()
    return pulses, written


def spacing(pulses):
    return {b - a for a, b in zip(pulses, pulses[1:], strict=False)}


@pytest.mark.parametrize("ram_output_registers", [True, False])
@pytest.mark.parametrize("period", [1, 3, 7])
def test_writing_either_period_restarts_the_snapshot_timer(period, ram_output_registers):
    """Whatever the phase of a HIST_PERIOD write against the snapshot period (every phase is
    tried), the requests go on: the period in progress ends at most ``delay`` cycles (the
    periods' RAM reads stale) plus one period after the write, then they are regular again. A
    SNAPSHOT_PERIOD write restarts the timer with the new period."""
    delay = 3 if ram_output_registers else 2
    every = max(2, period)
    for lead in range(100, 100 + every + delay + 2):
        pulses, written = run_timer(period, [("HIST_PERIOD", 5)], lead, 150,
                                    ram_output_registers)
        hist_w = written["HIST_PERIOD"]
        before = [c for c in pulses if c <= hist_w]
        after = [c for c in pulses if c > hist_w]
        assert len(before) > 10 and spacing(before) == {every}, lead
        # The first request after the write: no later than the restart plus a period.
        assert after and after[0] <= hist_w + delay + every + 1, (lead, hist_w, after[:3])
        assert len(after) > 10 and spacing(after[1:]) == {every}, (lead, after[:5])
    new = period + 2
    pulses, written = run_timer(period, [("SNAPSHOT_PERIOD", new)], 100, 300,
                                ram_output_registers)
    period_w = written["SNAPSHOT_PERIOD"]
    after = [c for c in pulses if c > period_w + 1]
    # Its first request ``new`` cycles after the restart (``delay`` cycles after the write),
    # then every ``new`` cycles.
    assert after[0] == period_w + delay + new + 1
    assert len(after) > 10 and spacing(after) == {new}

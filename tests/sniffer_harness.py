"""Drive an :class:`RBSniffer` in the Amaranth simulator from pin trains and read it back.

Cycle convention (the reference model's): cycle 0 is the first cycle after reset is released;
``pin(t)`` is the level present during cycle ``t``. Reset is held for 3 cycles with the pins at
their initial levels, as the platform's power-on reset does.
"""

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from rbscope.device.stimulus import merge_trains
from rbscope.gateware.rb_sniffer import RBSniffer, Space
from rbscope.gateware.rb_sniffer.layouts import config_const
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.gateware.rb_sniffer.params import PIPELINE_DEPTH

RESET_CYCLES = 3


def pin_schedule(trains):
    """Return (initial pin word, [(cycle, pin word), …]) for ``(initial, edges)`` pairs."""
    return merge_trains([Train(init, list(edges)) for init, edges in trains])


class SnifferBench:
    """A sniffer inside a reset wrapper, with helpers for async testbenches.

    Keyword arguments beyond ``params`` go to :class:`RBSniffer` (e.g. ``hist_ram``).
    """

    def __init__(self, params, **sniffer_kw):
        self.params = params
        self.dut = RBSniffer(params, **sniffer_kw)
        self.rst = Signal()
        self.top = Module()
        self.top.submodules.dut = ResetInserter(self.rst)(self.dut)
        self.cycle = 0  # cycles since reset release, maintained by the helpers

    def simulator(self):
        sim = Simulator(self.top)
        sim.add_clock(1e-8)
        return sim

    async def reset(self, ctx, config, pins):
        ctx.set(self.dut.cfg.as_value(), config_const(self.params, config))
        ctx.set(self.dut.rb, pins)
        ctx.set(self.rst, 1)
        await ctx.tick().repeat(RESET_CYCLES)
        ctx.set(self.rst, 0)
        self.cycle = 0

    async def run_to(self, ctx, cycle):
        """Advance until ``cycle`` is the current cycle."""
        if cycle > self.cycle:
            await ctx.tick().repeat(cycle - self.cycle)
            self.cycle = cycle

    async def play(self, ctx, schedule, until):
        """Apply a pin schedule (from :func:`pin_schedule`) and run until cycle ``until``."""
        for cycle, word in schedule:
            if cycle >= until:
                break
            await self.run_to(ctx, cycle)
            ctx.set(self.dut.rb, word)
        await self.run_to(ctx, until)

    async def read(self, ctx, space, channel, index):
        dut = self.dut
        ctx.set(dut.read_req.payload, {"space": space, "channel": channel, "index": index})
        ctx.set(dut.read_req.valid, 1)
        waited = 0
        while True:
            ready = ctx.get(dut.read_req.ready)
            await ctx.tick()
            waited += 1
            if ready:
                break
        ctx.set(dut.read_req.valid, 0)
        ctx.set(dut.read_resp.ready, 1)
        while True:
            valid, value = ctx.get(dut.read_resp.valid), ctx.get(dut.read_resp.payload)
            await ctx.tick()
            waited += 1
            if valid:
                break
        ctx.set(dut.read_resp.ready, 0)
        self.cycle += waited
        return value

    async def read_row(self, ctx, channel):
        return [await self.read(ctx, Space.COUNTERS, channel, i) for i in range(self.params.row)]

    async def read_histogram(self, ctx, channel):
        return [await self.read(ctx, Space.HISTOGRAM, channel, b)
                for b in range(self.params.hist_bins)]

    async def drain(self, ctx):
        """Let every pending mailbox event pass through the pipeline."""
        await ctx.tick().repeat(2 * (self.params.channels + 1) + PIPELINE_DEPTH)
        self.cycle += 2 * (self.params.channels + 1) + PIPELINE_DEPTH

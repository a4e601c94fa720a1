"""Drive a :class:`NandEmulator` in the Amaranth simulator through its pins.

A minimal ONFI host at the pin level: every WE#/RE# level lasts ``hold`` clock cycles (the
emulator's synchronisers need at least one sample of each level). The cocotb driver
(``rbscope.cocotb.onfi``) is the full, timing-mode-aware one; this one keeps the
Amaranth-simulator unit tests short.
"""

from amaranth.sim import Simulator

from rbscope.gateware.nand_emu import EmuConfig, EmuCounter, NandEmulator
from rbscope.gateware.nand_emu.layouts import config_const


class EmuBench:
    def __init__(self, params, hold=2):
        self.params = params
        self.dut = NandEmulator(params)
        self.hold = hold
        self.die = 0

    def simulator(self):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        return sim

    def run(self, bench, config=None, vcd=None):
        config = EmuConfig() if config is None else config
        sim = self.simulator()

        async def wrapped(ctx):
            ctx.set(self.dut.cfg.as_value(), config_const(self.params, config))
            await ctx.tick().repeat(3)
            await bench(ctx)

        sim.add_testbench(wrapped)
        if vcd:
            with sim.write_vcd(vcd):
                sim.run()
        else:
            sim.run()

    def select(self, ctx, die):
        self.die = die
        ctx.set(self.dut.ce_n, ((1 << self.params.dies) - 1) & ~(1 << die))

    async def write(self, ctx, byte, cle=0, ale=0):
        dut = self.dut
        ctx.set(dut.ce_n, ((1 << self.params.dies) - 1) & ~(1 << self.die))
        ctx.set(dut.cle, cle)
        ctx.set(dut.ale, ale)
        ctx.set(dut.io_i, byte)
        ctx.set(dut.we_n, 0)
        await ctx.tick().repeat(self.hold)
        ctx.set(dut.we_n, 1)
        await ctx.tick().repeat(self.hold)
        ctx.set(dut.cle, 0)
        ctx.set(dut.ale, 0)

    async def command(self, ctx, byte):
        await self.write(ctx, byte, cle=1)

    async def address(self, ctx, *data):
        for b in data:
            await self.write(ctx, b, ale=1)

    async def data_in(self, ctx, data):
        for b in data:
            await self.write(ctx, b)

    async def data_out(self, ctx, n):
        dut = self.dut
        out = []
        await ctx.tick().repeat(4)  # tWHR / tRR
        for _ in range(n):
            ctx.set(dut.re_n, 0)
            await ctx.tick().repeat(self.hold)
            assert ctx.get(dut.io_oe), "die does not drive IO"
            out.append(ctx.get(dut.io_o))
            ctx.set(dut.re_n, 1)
            await ctx.tick().repeat(self.hold)
        return out

    async def wait_ready(self, ctx, limit=100_000):
        await ctx.tick().repeat(16)  # tWB
        for _ in range(limit):
            if ctx.get(self.dut.die_rb) >> self.die & 1:
                return
            await ctx.tick()
        raise AssertionError("R/B# stuck low")

    async def status(self, ctx):
        await self.command(ctx, 0x70)
        return (await self.data_out(ctx, 1))[0]

    async def counter(self, ctx, counter, die=None):
        # The counter bank answers when its scan gets there.
        return await stream_read(ctx, self.dut.read_req, self.dut.read_resp,
                                 {"die": self.die if die is None else die,
                                  "index": EmuCounter(counter)})



    async def counters(self, ctx, die=None):
        return {c: await self.counter(ctx, c, die) for c in EmuCounter}

    # Operations --------------------------------------------------------------------------------

    def row_bytes(self, row):
        return [row & 0xFF, row >> 8 & 0xFF, row >> 16 & 0xFF]

    async def program(self, ctx, block, page, data=(), col=0, confirm=0x10, wait=True):
        row = self.params.row(block, page)
        await self.command(ctx, 0x80)
        await self.address(ctx, col & 0xFF, col >> 8, *self.row_bytes(row))
        await self.data_in(ctx, data)
        await self.command(ctx, confirm)
        if wait:
            await self.wait_ready(ctx)

    async def read(self, ctx, block, page, n, col=0):
        row = self.params.row(block, page)
        await self.command(ctx, 0x00)
        await self.address(ctx, col & 0xFF, col >> 8, *self.row_bytes(row))
        await self.command(ctx, 0x30)
        await self.wait_ready(ctx)
        return await self.data_out(ctx, n)

    async def erase(self, ctx, block, confirm=0xD0, wait=True):
        await self.command(ctx, 0x60)
        await self.address(ctx, *self.row_bytes(self.params.row(block, 0)))
        await self.command(ctx, confirm)
        if wait:
            await self.wait_ready(ctx)


async def stream_read(ctx, req, resp, payload):
    """Send one request on the stream ``req`` and return the payload of the answer on ``resp``
    (a counter bank's read port: the request may wait for a free cycle)."""
    ctx.set(req.payload, payload)
    ctx.set(req.valid, 1)
    while not ctx.get(req.ready):
        await ctx.tick()
    await ctx.tick()
    ctx.set(req.valid, 0)
    ctx.set(resp.ready, 1)
    while not ctx.get(resp.valid):
        await ctx.tick()
    value = ctx.get(resp.payload)
    await ctx.tick()
    ctx.set(resp.ready, 0)
    return value

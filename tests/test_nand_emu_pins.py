"""The emulator's ONFI bus on pins (``OnfiPins``): a host drives CE#/CLE/ALE/WE#/RE#/WP# and DQ
through I/O buffers at ONFI timing mode 0, and reads DQ and the open-drain R/B# back."""

import gc
import warnings

import pytest
from amaranth.hdl import Module, UnusedElaboratable
from amaranth.sim import Simulator

from rbscope.gateware.nand_emu import EmuParams, NandEmulator
from rbscope.gateware.nand_emu.layouts import config_const
from rbscope.gateware.nand_emu.onfi_rom import id_bytes
from rbscope.gateware.nand_emu.params import EmuConfig, pattern_byte
from rbscope.gateware.nand_emu.pins import OnfiPins, OnfiPorts, connect_bus

PARAMS = EmuParams(dies=2, page_bytes=64, spare_bytes=8, pages_per_block=8, blocks_per_plane=8,
                   planes=2)
CLOCK_NS = 10  # 100 MHz
#: Timing mode 0 in clock periods at 100 MHz: tWP 50 ns, tWH 30 ns, tRP 50 ns, tREH 30 ns;
#: the host samples DQ at the end of RE# low (tREA 40 ns < tRP).
T_WP, T_WH, T_RP, T_REH = 5, 3, 5, 3


def build():
    ports = OnfiPorts.simulation(PARAMS)
    m = Module()
    m.submodules.emu = emu = NandEmulator(PARAMS)
    m.submodules.pins = pins = OnfiPins(PARAMS, ports)
    connect_bus(m, pins, emu)
    return m, emu, ports


class Host:
    """A timing-mode-0 ONFI host on the simulation ports."""

    def __init__(self, ports):
        self.p = ports

    async def idle(self, ctx):
        ctx.set(self.p.ce_n.i, 0b11)
        ctx.set(self.p.we_n.i, 1)
        ctx.set(self.p.re_n.i, 1)
        ctx.set(self.p.wp_n.i, 1)
        ctx.set(self.p.cle.i, 0)
        ctx.set(self.p.ale.i, 0)
        await ctx.tick().repeat(4)

    async def cycle(self, ctx, die, byte, *, cle=0, ale=0):
        ctx.set(self.p.ce_n.i, 0b11 ^ (1 << die))
        ctx.set(self.p.cle.i, cle)
        ctx.set(self.p.ale.i, ale)
        ctx.set(self.p.dq.i, byte)
        ctx.set(self.p.we_n.i, 0)
        await ctx.tick().repeat(T_WP)
        ctx.set(self.p.we_n.i, 1)  # the die latches on this rising edge
        await ctx.tick().repeat(T_WH)
        ctx.set(self.p.cle.i, 0)
        ctx.set(self.p.ale.i, 0)

    async def read(self, ctx, die, n):
        out = []
        ctx.set(self.p.ce_n.i, 0b11 ^ (1 << die))
        for _ in range(n):
            ctx.set(self.p.re_n.i, 0)
            await ctx.tick().repeat(T_RP)
            assert ctx.get(self.p.dq.oe) == 0xFF, "the die does not drive DQ while RE# is low"
            out.append(ctx.get(self.p.dq.o))
            ctx.set(self.p.re_n.i, 1)
            await ctx.tick().repeat(T_REH)
            assert ctx.get(self.p.dq.oe) == 0, "the die drives DQ while RE# is high"
        return out

    def busy(self, ctx, die):
        """R/B# of ``die`` is pulled low (open drain: output enabled with output 0)."""
        oe = ctx.get(self.p.rb_n.oe)
        assert ctx.get(self.p.rb_n.o) == 0, "R/B# must never be driven high"
        return bool((oe >> die) & 1)


def test_a_host_drives_the_emulator_through_its_pins():
    m, emu, ports = build()
    host = Host(ports)
    sim = Simulator(m)
    sim.add_clock(CLOCK_NS * 1e-9)
    config = EmuConfig(prescaler=2, times={"R": 10, "PROG0": 40, "RST": 5})

    async def bench(ctx):
        ctx.set(emu.cfg.as_value(), config_const(PARAMS, config))
        await host.idle(ctx)
        for die in range(2):
            await host.cycle(ctx, die, 0xFF, cle=1)  # reset
        await ctx.tick().repeat(40)
        assert not host.busy(ctx, 0) and not host.busy(ctx, 1)
        # Read ID at address 00h, and "ONFI" at 20h, from die 1 over DQ.
        await host.cycle(ctx, 1, 0x90, cle=1)
        await host.cycle(ctx, 1, 0x00, ale=1)
        assert bytes(await host.read(ctx, 1, 4)) == id_bytes(PARAMS)[:4]
        await host.cycle(ctx, 1, 0x90, cle=1)
        await host.cycle(ctx, 1, 0x20, ale=1)
        assert bytes(await host.read(ctx, 1, 4)) == b"ONFI"
        # Program a page of die 0: its R/B# is pulled low for tPROG, die 1's stays released.
        row = PARAMS.row(3, 0)
        await host.cycle(ctx, 0, 0x80, cle=1)
        for byte in (0, 0, row & 0xFF, row >> 8 & 0xFF, row >> 16):
            await host.cycle(ctx, 0, byte, ale=1)
        await host.cycle(ctx, 0, 0x10, cle=1)
        low = 0
        for _ in range(200):
            low += host.busy(ctx, 0)
            assert not host.busy(ctx, 1)
            await ctx.tick()
        assert low == 40 * 2  # tPROG ticks x prescaler, exactly
        # Read it back (timing-only die: the pattern), with WP# held high all along.
        await host.cycle(ctx, 0, 0x00, cle=1)
        for byte in (0, 0, row & 0xFF, row >> 8 & 0xFF, row >> 16):
            await host.cycle(ctx, 0, byte, ale=1)
        await host.cycle(ctx, 0, 0x30, cle=1)
        while host.busy(ctx, 0) or not low:
            low = 1
            await ctx.tick()
        await ctx.tick().repeat(30)
        assert await host.read(ctx, 0, 6) == [pattern_byte(row, c) for c in range(6)]

    sim.add_testbench(bench)
    sim.run()


def test_ports_must_match_the_build():
    ports = OnfiPorts.simulation(EmuParams(dies=1))
    # A refused component still exists until it is collected, and Amaranth warns then that it
    # was never elaborated: collect the refused ones here, so that no later test sees it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="ce_n has 1 pins; this emulator needs 2"):
            OnfiPins(PARAMS, ports)
        with pytest.raises(TypeError, match="OnfiPorts"):
            OnfiPins(PARAMS, object())
        gc.collect()

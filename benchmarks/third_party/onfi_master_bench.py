"""cocotb bench (GHDL): a third-party ONFI controller identifies rbscope's NAND emulator.

The controller is Alexey Lyashko's ``nand_master`` (VHDL, from a local checkout; see
``benchmarks/third_party_onfi.py``), simulated by GHDL behind ``onfi_master_wrap.vhd``. The
emulator (``NandEmulator``) runs in the Amaranth simulator in the same Python process, in lock
step: one emulator clock per controller clock (both 10 ns). Each cycle the controller's pins go
into the emulator and the emulator's DQ output, its drive enable and its R/B# come back.

The bench asks the controller what a drive's controller asks at power-up (its own commands:
chip enable, NAND reset, Read ID, Read Parameter Page), then reads back what the controller
stored and parsed (its ID bytes, its 256-byte parameter page buffer, its status register), and
writes them with every cycle of the bus (WE#, CLE, ALE, RE#, DQ, CE#, R/B#, one record per
clock) to the JSON file named by the bench parameter ``out``. The checks are made by the script
that ran it, on the tap's power-up recorder fed those cycles.
"""

import json

import cocotb
from amaranth.sim import Simulator
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from cocotb_tests.runner import bench_params
from rbscope.gateware.nand_emu import BusyTime, EmuConfig, EmuParams, NandEmulator
from rbscope.gateware.nand_emu.layouts import config_const

#: The controller's commands (its ``state_switch`` table, from its documentation).
NAND_RESET, READ_PARAMETER_PAGE, READ_ID = 1, 2, 3
GET_STATUS, CHIP_ENABLE, RESET_INDEX, GET_ID_BYTE, GET_PARAM_PAGE_BYTE = 8, 9, 13, 14, 15


class LockStep:
    """The emulator in the Amaranth simulator, advanced one 10 ns clock at a time."""

    def __init__(self, params, config):
        self.emu = emu = NandEmulator(params)
        self.sim = Simulator(emu)
        self.sim.add_clock(1e-8)
        self.pins = {"ce_n": 1, "we_n": 1, "re_n": 1, "cle": 0, "ale": 0, "io_i": 0xFF,
                     "wp_n": 0}
        self.out = {"io_o": 0, "io_oe": 0, "die_rb": 1}
        self.cycles = 0

        async def bench(ctx):
            ctx.set(emu.cfg.as_value(), config_const(params, config))
            while True:
                for name, value in self.pins.items():
                    ctx.set(getattr(emu, name), value)
                await ctx.tick()
                self.out = {"io_o": ctx.get(emu.io_o), "io_oe": ctx.get(emu.io_oe),
                            "die_rb": ctx.get(emu.die_rb) & 1}

        self.sim.add_testbench(bench, background=True)

    def step(self, **pins):
        self.pins.update(pins)
        self.cycles += 1
        self.sim.run_until(self.cycles * 1e-8)
        return self.out


def bit(handle, default=None):
    """A port's value as a number; the keeper's weak levels count as the levels they hold. An
    undefined value is ``default`` where one is given, an error otherwise."""
    text = str(handle.value).replace("H", "1").replace("L", "0")
    if set(text) - {"0", "1"}:
        if default is not None:
            return default
        raise AssertionError(f"{handle._name} is {handle.value}, not a number")
    return int(text, 2)


@cocotb.test()
async def identify_the_emulator(dut):
    p = bench_params()
    params = EmuParams(**p["emu"])
    config = EmuConfig(times={BusyTime.RST: p["reset_cycles"], BusyTime.R: p["read_cycles"]})
    emu = LockStep(params, config)
    ratio = p["ratio"]
    record = []

    dut.enable.value = 0  # the controller runs while enable is low
    dut.activate.value = 0
    dut.cmd_in.value = 0
    dut.data_in.value = 0
    dut.rnb.value = 1
    dut.dq_die.value = 0
    dut.dq_die_oe.value = 0
    dut.nreset.value = 0
    cocotb.start_soon(Clock(dut.clk, 10 * ratio, unit="ns").start())

    async def bus():
        """Every controller cycle: its pins into the emulator for ``ratio`` emulator cycles,
        the die's DQ, drive enable and R/B# back; one record per emulator cycle."""
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            we, cle, ale, re, ce = (bit(dut.nwe), bit(dut.cle), bit(dut.ale), bit(dut.nre),
                                    bit(dut.nce))
            wp = bit(dut.nwp)
            # Before its first command the controller drives its uninitialised data register
            # ('U'); that is never latched (checked: WE# high), and reads as FFh here.
            dq = bit(dut.dq, default=-1)
            if dq < 0:
                assert we == 1, "the controller latched an undefined byte"
                dq = 0xFF
            await FallingEdge(dut.clk)
            for _ in range(ratio):
                out = emu.step(we_n=we, cle=cle, ale=ale, re_n=re, ce_n=ce, io_i=dq, wp_n=wp)
                record.append((we, cle, ale, re, out["io_o"] if out["io_oe"] else dq, ce,
                               out["die_rb"]))
            dut.rnb.value = out["die_rb"]
            dut.dq_die.value = out["io_o"]
            dut.dq_die_oe.value = out["io_oe"]

    cocotb.start_soon(bus())
    for _ in range(4):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.nreset.value = 1

    async def command(code, read=False, limit=200_000):
        """Issue one controller command and wait until it is idle again; its data_out if
        ``read``."""
        await FallingEdge(dut.clk)
        dut.cmd_in.value = code
        dut.activate.value = 1
        await FallingEdge(dut.clk)
        dut.activate.value = 0
        for _ in range(limit):
            await FallingEdge(dut.clk)
            if not bit(dut.busy):
                return bit(dut.data_out) if read else None
        raise AssertionError(f"controller command {code} did not finish in {limit} cycles")

    for _ in range(4):
        await FallingEdge(dut.clk)
    await command(CHIP_ENABLE)
    await command(NAND_RESET)
    await command(READ_ID)
    await command(READ_PARAMETER_PAGE)
    status = await command(GET_STATUS, read=True)
    await command(RESET_INDEX)
    json.dump({"record": record}, open(p["out"] + ".dbg", "w"))
    page = [await command(GET_PARAM_PAGE_BYTE, read=True) for _ in range(256)]
    await command(RESET_INDEX)
    ident = [await command(GET_ID_BYTE, read=True) for _ in range(5)]
    for _ in range(8):
        await FallingEdge(dut.clk)

    # The controller's own parse of the page (its integer registers, read through VPI).
    parsed = {name: int(getattr(dut.master, name).value)
              for name in ("data_bytes_per_page", "oob_bytes_per_page", "addr_cycles")}
    with open(p["out"], "w") as f:
        json.dump({"status": status, "page": page, "id": ident, "parsed": parsed,
                   "record": record, "emulator_cycles": emu.cycles}, f)

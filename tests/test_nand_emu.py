"""Unit tests of the NAND emulator: parameters, the parameter page against the host's
independent parser and CRC, presets, the timing blocks, and the die in the Amaranth simulator
(``tests/nand_emu_harness.py``). The protocol on generated Verilog is in
``tests/test_nand_emu_cocotb.py``."""

import dataclasses
import random

import pytest
from amaranth.sim import Simulator

from rbscope.gateware.nand_emu import (
    BusyTime,
    EmuConfig,
    EmuCounter,
    EmuParams,
    Storage,
    TrafficConfig,
    pattern_byte,
)
from rbscope.gateware.nand_emu.families import PRESETS, preset
from rbscope.gateware.nand_emu.layouts import config_const, config_layout, traffic_const
from rbscope.gateware.nand_emu.onfi_rom import id_bytes, parameter_page
from rbscope.gateware.nand_emu.timing import BusyTimer, JitterLfsr, lfsr_step
from rbscope.nand.ident import ParameterPageError, parse_parameter_page
from rbscope.nand.onfi import onfi_crc16
from rbscope.nand.timebase import us_to_ticks
from tests.nand_emu_harness import EmuBench

SMALL = EmuParams(page_bytes=64, spare_bytes=8, pages_per_block=8, blocks_per_plane=4, planes=2)


# ---- Parameters and configuration -------------------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("dies", 0), ("page_bytes", 1000), ("pages_per_block", 3), ("planes", 3),
    ("ticks_bits", 8), ("maker", "X" * 13), ("rb_wired", 1), ("storage", 5),
])
def test_params_reject_bad_values_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        EmuParams(**{field: value})


def test_array_mode_refuses_large_geometry():
    with pytest.raises(ValueError, match="max_array_bytes"):
        EmuParams(storage=Storage.ARRAY)


def test_geometry_and_rows():
    p = SMALL
    assert (p.page_bits, p.block_bits, p.row_bits, p.blocks, p.pages) == (3, 3, 6, 8, 64)
    for block in range(p.blocks):
        for page in range(p.pages_per_block):
            assert p.split_row(p.row(block, page)) == (block, page)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match=r"times\[PROG0\]"):
        EmuConfig(times={"PROG0": 1 << 24}).validate(SMALL)
    with pytest.raises(ValueError, match="unknown busy time"):
        EmuConfig(times={"TPROG": 1}).validate(SMALL)
    with pytest.raises(ValueError, match=r"bad_blocks\[0\]"):
        EmuConfig(bad_blocks=(SMALL.blocks,)).validate(SMALL)
    with pytest.raises(ValueError, match="page_types"):
        EmuConfig(page_types=(0, 1, 2)).validate(SMALL)
    with pytest.raises(ValueError, match="multi_plane"):
        TrafficConfig(multi_plane=True).validate(dataclasses.replace(SMALL, planes=1))


def test_config_packs_into_the_layout():
    cfg = EmuConfig(prescaler=3, times={"PROG1": 77, BusyTime.BERS: 99}, jitter={"R": 7},
                    page_types=(0, 1), bad_blocks=(5,), seed=42)
    view = config_layout(SMALL).from_bits(config_const(SMALL, cfg))
    assert view.prescaler == 3 and view.seed == 42
    assert view.times[BusyTime.PROG1] == 77 and view.times[BusyTime.BERS] == 99
    assert view.jitter[BusyTime.R] == 7
    assert [view.page_types[i] for i in range(4)] == [0, 1, 0, 1]
    assert view.bad_blocks[0].valid == 1 and view.bad_blocks[0].block == 5
    assert view.bad_blocks[1].valid == 0
    assert traffic_const(SMALL, TrafficConfig(pages=8, blocks=2)) > 0


# ---- Parameter page and ID --------------------------------------------------------------------

def test_host_crc_matches_known_vector():
    # CRC-16 (poly 0x8005, init 0x4F4E, MSB first) of no data is the initial value.
    assert onfi_crc16(b"") == 0x4F4E
    # Bitwise definition, checked against a table-free recomputation of one byte by hand.
    crc = 0x4F4E ^ (0x4F << 8)
    for _ in range(8):
        crc = ((crc << 1) ^ 0x8005 if crc & 0x8000 else crc << 1) & 0xFFFF
    assert onfi_crc16(b"O") == crc


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_parameter_page_of_every_preset_parses(name):
    params = preset(name).params()
    page = parameter_page(params)
    assert len(page) == 256 and page[:4] == b"ONFI"
    assert onfi_crc16(page[:254]) == page[254] | page[255] << 8
    parsed = parse_parameter_page(page * 3)
    assert (parsed.page_bytes, parsed.spare_bytes, parsed.pages_per_block) == \
        (params.page_bytes, params.spare_bytes, params.pages_per_block)
    assert parsed.blocks_per_lun == params.blocks and parsed.planes == params.planes
    assert parsed.t_prog_us == params.t_prog_max_us and parsed.t_r_us == params.t_r_max_us
    assert parsed.bits_per_cell == params.bits_per_cell
    assert (parsed.row_address_cycles, parsed.column_address_cycles) == (3, 2)


def test_parser_rejects_corruption_with_offset():
    page = bytearray(parameter_page(SMALL))
    page[100] ^= 1
    with pytest.raises(ParameterPageError, match="254-255"):
        parse_parameter_page(bytes(page))
    with pytest.raises(ParameterPageError, match="256 bytes"):
        parse_parameter_page(b"ONFI")
    assert parse_parameter_page(bytes(page) + parameter_page(SMALL)).copy == 1


def test_id_bytes():
    ids = id_bytes(SMALL)
    assert ids[:2] == bytes([SMALL.maker_id, SMALL.device_id]) and ids[8:12] == b"ONFI"


# ---- Presets ----------------------------------------------------------------------------------

def test_family_busy_times_in_ticks():
    """A family's busy times are its part's middles in ticks of the one µs → tick conversion."""
    family = preset("mlc34nm")
    erase_us = family.part.typical_us("erase")
    assert erase_us == 2100  # the middle of 1900–2300 µs
    cfg = family.config(48e6, prescaler=48)  # 1 µs ticks
    assert cfg.times[BusyTime.BERS] == us_to_ticks(erase_us, 48 / 48e6) == 2100
    cfg = family.config(48e6, prescaler=1, scale=1000)  # 1/48 µs ticks, times / 1000
    assert cfg.times[BusyTime.BERS] == 101  # 2.1 µs = 100.8 ticks
    cfg = family.config(48e6, prescaler=4800)  # 100 µs ticks
    assert cfg.times[BusyTime.DBSY] == 1  # 0.75 µs: never rounds a busy time to 0
    for kw, name in (({"clock_hz": 0}, "clock_hz"), ({"prescaler": 0}, "prescaler"),
                     ({"scale": -1}, "scale")):
        with pytest.raises(ValueError, match=name):
            family.config(**{"clock_hz": 48e6, **kw})


def test_presets_validate_and_separate_program_from_erase():
    for name, p in PRESETS.items():
        params = p.params()
        cfg = p.config(48e6, prescaler=48).validate(params)
        progs = [cfg.times[BusyTime.PROG0 + cfg.page_type(i)] for i in range(8)]
        assert cfg.times[BusyTime.R] < min(progs), name
        assert max(progs) <= cfg.times[BusyTime.BERS], name
    with pytest.raises(KeyError, match="known"):
        preset("nope")


# ---- Timing blocks ----------------------------------------------------------------------------

@pytest.mark.parametrize("ticks, prescaler", [(1, 1), (5, 1), (3, 4), (7, 0), (0, 3)])
def test_busy_timer_lasts_ticks_times_prescaler(ticks, prescaler):
    dut = BusyTimer(8, 4)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.prescaler, prescaler)
        await ctx.tick().repeat(3)  # arbitrary phase: the timer restarts its prescaler
        ctx.set(dut.ticks, ticks)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        busy, dones = 0, 0
        for _ in range(100):
            busy += ctx.get(dut.busy)
            dones += ctx.get(dut.done)
            await ctx.tick()
        assert busy == ticks * max(prescaler, 1)
        assert dones == (ticks != 0)

    sim.add_testbench(bench)
    sim.run()


def test_lfsr_matches_host_reference():
    dut = JitterLfsr()
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.seed, 0xACE1)
        await ctx.tick()
        state = 0xACE1
        assert ctx.get(dut.value) == state
        seen = set()
        for _ in range(50):
            ctx.set(dut.step, 1)
            await ctx.tick()
            state = lfsr_step(state)
            assert ctx.get(dut.value) == state
            seen.add(state & 0xF)
        assert len(seen) > 8

    sim.add_testbench(bench)
    sim.run()


# ---- The die in the Amaranth simulator --------------------------------------------------------

TIMES = {"R": 5, "PROG0": 20, "PROG1": 30, "BERS": 40, "RST": 3, "FEAT": 2, "DBSY": 2,
         "CBSY": 4, "RCBSY": 3}


@pytest.mark.parametrize("storage", [Storage.TIMING, Storage.ARRAY])
def test_die_program_read_erase_and_rules(storage):
    params = dataclasses.replace(SMALL, storage=storage)
    b = EmuBench(params)
    rng = random.Random(1)

    async def bench(ctx):
        await b.command(ctx, 0xFF)
        await b.wait_ready(ctx)
        assert await b.status(ctx) == 0xE0
        await b.command(ctx, 0x90)
        await b.address(ctx, 0x20)
        assert bytes(await b.data_out(ctx, 4)) == b"ONFI"
        await b.command(ctx, 0xEC)
        await b.address(ctx, 0)
        await b.wait_ready(ctx)
        assert bytes(await b.data_out(ctx, 256)) == parameter_page(params)
        data = [rng.randrange(256) for _ in range(params.page_total)]
        await b.program(ctx, 1, 0, data)
        assert await b.status(ctx) == 0xE0
        got = await b.read(ctx, 1, 0, params.page_total)
        row = params.row(1, 0)
        want = data if storage == Storage.ARRAY else \
            [pattern_byte(row, c) for c in range(params.page_total)]
        assert got == want
        await b.program(ctx, 1, 0, data)  # not erased
        assert await b.status(ctx) == 0xE1
        await b.program(ctx, 1, 2, data)  # out of order
        assert await b.status(ctx) == 0xE1 | 0x02
        assert await b.read(ctx, 1, 1, 4) == [0xFF] * 4
        await b.erase(ctx, 1)
        assert await b.status(ctx) == 0xE0 | 0x02
        assert await b.read(ctx, 1, 0, 4) == [0xFF] * 4
        counts = await b.counters(ctx)
        assert {c.name: v for c, v in counts.items() if v} == {
            "PAGE_PROGRAMS": 1, "PROGRAM_OPS": 1, "BLOCK_ERASES": 1, "ERASE_OPS": 1,
            "PAGE_READS": 3, "RESETS": 1, "FAILED": 2, "FAIL_NOT_ERASED": 1, "FAIL_ORDER": 1,
            "PARAM_READS": 1}

    b.run(bench, EmuConfig(times=TIMES))


def test_traffic_generator_drives_the_emulator():
    """The generator's workload lands in the ground-truth counters (Amaranth simulator)."""
    from amaranth.hdl import Module

    from rbscope.gateware.nand_emu import NandEmulator
    from rbscope.gateware.nand_emu.traffic import TrafficGenerator

    params = dataclasses.replace(SMALL, dies=2)
    m = Module()
    m.submodules.emu = emu = NandEmulator(params)
    m.submodules.gen = gen = TrafficGenerator(params)
    for name in ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n"):
        m.d.comb += getattr(emu, name).eq(getattr(gen, name))
    m.d.comb += [emu.io_i.eq(gen.io), gen.rb.eq(emu.die_rb)]
    sim = Simulator(m)
    sim.add_clock(1e-8)
    traffic = TrafficConfig(dies=3, blocks=2, pages=3, reads=1, loops=1, multi_plane=True)

    async def bench(ctx):
        ctx.set(emu.cfg.as_value(), config_const(params, EmuConfig(times=TIMES)))
        ctx.set(gen.cfg.as_value(), traffic_const(params, traffic))
        await ctx.tick().repeat(3)
        ctx.set(gen.start, 1)
        await ctx.tick()
        ctx.set(gen.start, 0)
        for _ in range(20_000):
            if not ctx.get(gen.status.busy):
                break
            await ctx.tick()
        else:
            raise AssertionError("traffic generator never finished")
        # Per die and group: 3 page steps of 2 (11h, 10h) + 3 reads + 2 erase steps (D1h, D0h).
        assert ctx.get(gen.status.steps) == 2 * (2 * (3 * 2 + 3 + 2))
        for die in range(2):
            got = {}
            for c in (EmuCounter.PAGE_PROGRAMS, EmuCounter.PROGRAM_OPS, EmuCounter.PAGE_READS,
                      EmuCounter.BLOCK_ERASES, EmuCounter.FAILED, EmuCounter.ILLEGAL):
                ctx.set(emu.read_req.payload, {"die": die, "index": c})
                ctx.set(emu.read_req.valid, 1)
                while not ctx.get(emu.read_req.ready):
                    await ctx.tick()
                await ctx.tick()
                ctx.set(emu.read_req.valid, 0)
                got[c.name] = ctx.get(emu.read_resp.payload)
                ctx.set(emu.read_resp.ready, 1)
                await ctx.tick()
                ctx.set(emu.read_resp.ready, 0)
            assert got == {"PAGE_PROGRAMS": 2 * 3 * 2, "PROGRAM_OPS": 2 * 3, "PAGE_READS": 2 * 3,
                           "BLOCK_ERASES": 2 * 2, "FAILED": 0, "ILLEGAL": 0}, (die, got)

    sim.add_testbench(bench)
    sim.run()


# ---- The page-type map --------------------------------------------------------------------------

async def _program_width(b, ctx, block, page):
    """Program ``page`` of ``block`` and return how many cycles R/B# stayed low."""
    await b.program(ctx, block, page, wait=False)
    for _ in range(64):  # tWB
        if not ctx.get(b.dut.die_rb) & 1:
            break
        await ctx.tick()
    else:
        raise AssertionError(f"no busy period for page {page}")
    width = 0
    while not ctx.get(b.dut.die_rb) & 1:
        width += 1
        await ctx.tick()
    return width


PROG_TIMES = {"PROG0": 3, "PROG1": 5, "PROG2": 7, "PROG3": 9, "BERS": 4}


@pytest.mark.parametrize("pages_per_block, slots, used, programmed_block", [
    (128, 128, 128, 1),  # SSD-v: a 128-page MLC block, one entry per page (page-type RAM)
    (128, 128, 96, 2),  # a 96-page TLC block in a 128-page emulated block
    (8, 64, 8, 3),  # a map longer than the block: indexed by the page, not the row
    (16, 16, 16, 1),  # a short map, read from the configuration (no RAM)
])
def test_every_page_gets_its_types_tprog(pages_per_block, slots, used, programmed_block):
    """Each page's tPROG is the one of its entry in the map, with a map of up to a whole block
    (every page of a 128-page block, and the first 96 of one), twice: the map is rewritten at
    run time between the two passes and the second pass follows the new map."""
    params = EmuParams(page_bytes=16, spare_bytes=0, pages_per_block=pages_per_block,
                       blocks_per_plane=4, planes=1, page_type_slots=slots, jitter_bits=0,
                       bad_block_slots=0)
    rng = random.Random(pages_per_block * 1000 + used)
    # Random maps that hold each of the four types among the pages programmed.
    maps = [tuple(rng.sample(range(4), 4) + [rng.randrange(4) for _ in range(slots - 4)])
            for _ in range(2)]
    configs = [EmuConfig(times=PROG_TIMES, page_types=m).validate(params) for m in maps]
    b = EmuBench(params)

    async def bench(ctx):
        for k, cfg in enumerate(configs):
            if k:
                await b.erase(ctx, programmed_block)
                ctx.set(b.dut.cfg.as_value(), config_const(params, cfg))
            widths = [await _program_width(b, ctx, programmed_block, page)
                      for page in range(used)]
            assert widths == [cfg.prog_time(page) for page in range(used)], k
            assert len({cfg.page_type(page) for page in range(used)}) == 4
        await ctx.tick().repeat(4)  # (the last completion reaches the counter bank)
        assert await b.counter(ctx, EmuCounter.PROGRAM_OPS) == 2 * used
        assert await b.counter(ctx, EmuCounter.FAILED) == 0

    b.run(bench, configs[0])


def test_page_type_map_sizes_and_the_links_register_window():
    from rbscope.gateware.nand_emu.layouts import page_type_words
    from rbscope.gateware.nand_emu.link import emulator_extension
    with pytest.raises(ValueError, match="page_type_slots must be an integer from 1 to 1024"):
        EmuParams(page_type_slots=2048)
    with pytest.raises(ValueError, match="power of two"):
        EmuParams(page_type_slots=96)
    assert EmuParams().page_type_slots == EmuParams().pages_per_block == 64
    assert [page_type_words(EmuParams(page_type_slots=s)) for s in (4, 16, 32, 256)] == \
        [0, 0, 2, 16]
    # A 512-entry map fits the link's 64 EMU_CFG registers; 1024 entries do not, said clearly.
    regs = emulator_extension(EmuParams(pages_per_block=512, page_type_slots=512)).registers
    assert max(r.address for r in regs if r.name.startswith("EMU_CFG_")) < 0x1040
    with pytest.raises(ValueError, match=r"EMU_CFG: .*\(2592 bits\).* 64 registers"):
        emulator_extension(EmuParams(pages_per_block=1024, page_type_slots=1024))


def test_a_zero_tcbsy_cache_program_waits_for_its_page_types_array_time():
    """A cache program (15h) with tCBSY 0 completes at its load, three cycles after the
    operation: the background array program's time, taken from the page-type RAM (registered
    twice since the ULX3S emulator builds' timing fix) and the busy-time table, is ready only
    four cycles after. The array program must still run its own page type's time, not the
    time left in the registers by the operation before (`since` in the timing engine)."""
    from rbscope.gateware.nand_emu.layouts import page_type_words

    params = EmuParams(page_bytes=16, spare_bytes=0, pages_per_block=16, blocks_per_plane=4,
                       planes=1, page_type_slots=64, jitter_bits=0, bad_block_slots=0)
    assert page_type_words(params)  # (the map is read from the die's page-type RAM)
    times = {"PROG0": 150, "PROG1": 400, "BERS": 4, "CBSY": 0}
    pattern = (1, 0, 0, 1)  # page types of pages 0-3 (and on, repeating)
    cfg = EmuConfig(t_wb=0, times=times, page_types=pattern).validate(params)
    b = EmuBench(params)

    async def array_busy(ctx, page):
        """Cache-program ``page``; return the cycles until the status says the array is ready
        again (ARDY, bit 5), polling it."""
        await b.program(ctx, 1, page, confirm=0x15, wait=False)
        cycles = 0
        while True:
            await b.command(ctx, 0x70)
            start = cycles
            status = (await b.data_out(ctx, 1))[0]
            cycles = start + 12  # (a poll's command and data out, about this many cycles)
            if status & 0x20:
                return cycles
            await ctx.tick()
            cycles += 1

    async def bench(ctx):
        await b.erase(ctx, 1)
        got = [await array_busy(ctx, page) for page in range(4)]
        for page, busy in enumerate(got):
            expect = times["PROG1" if pattern[page] else "PROG0"]
            # (Within a few polls: the poll's own cycles are estimated.)
            assert abs(busy - expect) <= 60, (page, got)

    b.run(bench, cfg)

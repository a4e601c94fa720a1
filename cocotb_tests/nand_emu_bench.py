"""Cocotb protocol benches of the NAND emulator on its generated Verilog (Icarus and Verilator).

The pytest side is ``tests/test_nand_emu_cocotb.py``. The host side of the bus is the reusable
:mod:`rbscope.cocotb.onfi` at ONFI timing mode 0; the design runs at 48 MHz (the iCE40
clock).

Parameters (:func:`cocotb_tests.runner.bench_params`):

``params``
    Keyword arguments of :class:`EmuParams` (must match the design that was built).
``config``
    Keyword arguments of :class:`EmuConfig` (busy times by name).
``clock_ps``
    Clock period (default 20834 ps: 48 MHz).
``fuzz``
    ``{"seed": s, "sequences": n, "ops": k}`` for the fuzz test.
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer, ValueChange
from cocotb.utils import get_sim_time

from cocotb_tests.runner import bench_params
from rbscope.cocotb.emulator import EmuCounters
from rbscope.cocotb.onfi import (
    MODE0,
    SR_ARDY,
    SR_FAIL,
    SR_FAILC,
    SR_RDY,
    SR_WP_N,
    OnfiDriver,
    OnfiPins,
)
from rbscope.gateware.nand_emu import (
    BusyTime,
    EmuConfig,
    EmuCounter,
    EmuParams,
    Storage,
    pattern_byte,
)
from rbscope.gateware.nand_emu.layouts import config_const
from rbscope.nand.ident import parse_parameter_page
from rbscope.nand.onfi import onfi_crc16

READY = SR_RDY | SR_ARDY | SR_WP_N  # E0h


def load():
    prm = bench_params(params={}, config={}, clock_ps=20834,
                       fuzz={"seed": 1, "sequences": 20, "ops": 8})
    params = EmuParams(**prm["params"])
    config = EmuConfig(**{k: tuple(v) if isinstance(v, list) else v
                          for k, v in prm["config"].items()}).validate(params)
    return prm, params, config


class EmuBench:
    """The emulator's clock, reset, configuration, counters and an R/B# pulse recorder."""

    def __init__(self, dut, params, config, clock_ps):
        self.dut = dut
        self.params = params
        self.config = config
        self.clock_ps = clock_ps
        self.pulses = [[] for _ in range(params.dies)]  # (start_ps, end_ps) per die
        self.truth = EmuCounters(dut, params)  # the toolkit's ground-truth read-out
        pins = OnfiPins(ce_n=dut.ce_n, cle=dut.cle, ale=dut.ale, we_n=dut.we_n, re_n=dut.re_n,
                        wp_n=dut.wp_n, io_in=dut.io_i, io_out=dut.io_o, io_oe=dut.io_oe,
                        rb=dut.die_rb)
        self.nand = OnfiDriver(pins, MODE0, ready_timeout_ns=self.longest_busy_ns())

    def cycles_ns(self, cycles):
        return cycles * self.clock_ps / 1000

    def busy_cycles(self, time, jitter=True):
        c = self.config
        ticks = c.times[BusyTime(time)] + (c.jitter[BusyTime(time)] if jitter else 0)
        return ticks * max(c.prescaler, 1)

    def longest_busy_ns(self):
        # The longest busy a die can show: a 10h after a cache program waits for the array
        # (one tPROG) and then programs (another), plus tWB and the input synchroniser.
        longest = max(self.busy_cycles(t) for t in BusyTime)
        prog = max(self.busy_cycles(BusyTime.PROG0 + k) for k in range(4))
        return self.cycles_ns(max(longest, 2 * prog + self.busy_cycles(BusyTime.CBSY))
                              + self.config.t_wb + 10)

    async def start(self):
        dut = self.dut
        # Start the clock low and 1 ns late: a clock that starts high makes a posedge at t=0,
        # before the combinational logic has settled (see sniffer_bench).
        dut.clk.value = 0
        await Timer(1, unit="ns")
        Clock(dut.clk, self.clock_ps, unit="ps").start(start_high=False)
        self.set_config(self.config)
        self.truth.idle()
        await self.nand.idle()
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        cocotb.start_soon(self._record())
        await Timer(100, unit="ns")

    def set_config(self, config):
        self.config = config.validate(self.params)
        self.dut.cfg.value = config_const(self.params, self.config)

    async def _record(self):
        n = self.params.dies
        last = (1 << n) - 1
        starts = [None] * n
        while True:
            await ValueChange(self.dut.die_rb)
            now = get_sim_time("ps")
            value = int(self.dut.die_rb.value)
            for i in range(n):
                before, after = last >> i & 1, value >> i & 1
                if before and not after:
                    starts[i] = now
                elif after and not before and starts[i] is not None:
                    self.pulses[i].append((starts[i], now))
            last = value

    def widths(self, die=0):
        """Pulse widths in cycles (exact: R/B# changes on clock edges)."""
        out = []
        for a, b in self.pulses[die]:
            cycles, rest = divmod(b - a, self.clock_ps)
            assert rest == 0, f"R/B# pulse of {b - a} ps is not a whole number of cycles"
            out.append(cycles)
        return out

    async def counter(self, counter, die=0):
        return await self.truth.read(counter, die)

    async def counters(self, die=0):
        return await self.truth.counters(die)

    async def delta(self, before, die=0):
        return await self.truth.delta(before, die)


async def setup(dut):
    prm, params, config = load()
    bench = EmuBench(dut, params, config, prm["clock_ps"])
    await bench.start()
    await bench.nand.reset()
    return prm, params, bench


def row_of(params, block, page):
    return params.row(block, page)


@cocotb.test()
async def reset_status_and_read_id(dut):
    """Reset, status E0h, Read ID 00h (maker, device) and 20h ("ONFI"); per die."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    for die in range(params.dies):
        nand.select(die)
        await nand.reset()
        assert await nand.read_status() == READY
        ident = await nand.read_id(0x00, 2)
        assert ident == bytes([params.maker_id, params.device_id]), ident
        assert await nand.read_id(0x20, 4) == b"ONFI"
        assert await nand.read_status_enhanced(0) == READY
    assert (await bench.counter(EmuCounter.RESETS, 0)) == 2


@cocotb.test()
async def parameter_page_three_copies_valid_crc(dut):
    """ECh returns three copies, each with a CRC the host computes independently."""
    _, params, bench = await setup(dut)
    data = await bench.nand.read_parameter_page(copies=3)
    for copy in range(3):
        chunk = data[256 * copy:256 * (copy + 1)]
        assert onfi_crc16(chunk[:254]) == chunk[254] | chunk[255] << 8, f"copy {copy}"
    assert data[:256] == data[256:512] == data[512:]
    page = parse_parameter_page(data)
    assert page.copy == 0
    assert (page.page_bytes, page.spare_bytes, page.pages_per_block) == \
        (params.page_bytes, params.spare_bytes, params.pages_per_block)
    assert page.blocks_per_lun == params.blocks and page.planes == params.planes
    assert (page.t_prog_us, page.t_bers_us, page.t_r_us) == \
        (params.t_prog_max_us, params.t_bers_max_us, params.t_r_max_us)
    assert page.timing_modes & 1 and page.luns == 1
    # One corrupted copy: the parser falls back to the next.
    broken = bytes([data[0] ^ 1]) + data[1:]
    assert parse_parameter_page(broken).copy == 1
    # Also by status polling.
    again = await bench.nand.read_parameter_page(copies=1, by="status")
    assert again == data[:256]
    assert await bench.counter(EmuCounter.PARAM_READS) == 2


@cocotb.test()
async def program_read_erase_data(dut):
    """Data read back: bit-exact (array mode, spare included) or the address pattern (timing
    mode); erased pages read FFh; change read/write column; bad blocks read 00h."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    rng = random.Random(3)
    total = params.page_total
    before = await bench.counters()
    pages = {}
    for page in range(3):
        data = bytes(rng.randrange(256) for _ in range(total))
        row = row_of(params, 2, page)
        status = await nand.program_page(row, data)
        assert status == READY, hex(status)
        pages[row] = data
    # Change write column: program a page in two pieces.
    row = row_of(params, 2, 3)
    data = bytes(rng.randrange(256) for _ in range(total))
    await nand.command(0x80)
    await nand.address(0, 0, *nand.row_cycles(row))
    await Timer(MODE0.tADL, unit="ns")
    await nand.write_data(data[:10])
    await nand.change_write_column(10, data[10:])
    await nand.command(0x10)
    await nand.wait_ready()
    assert await nand.read_status() == READY
    pages[row] = data
    for row, data in pages.items():
        got = await nand.read_page(row, total)
        if params.storage == Storage.ARRAY:
            assert got == data, f"row {row}"
        else:
            assert got == bytes(pattern_byte(row, c) for c in range(total)), f"row {row}"
    # Change read column within the last page read.
    tail = await nand.change_read_column(total - 5, 5)
    assert tail == got[-5:]
    # Erased page, then erase and read again.
    assert await nand.read_page(row_of(params, 2, 5), 8) == b"\xff" * 8
    assert await nand.erase_block(row_of(params, 2, 0)) == READY
    assert await nand.read_page(row_of(params, 2, 0), 8) == b"\xff" * 8
    delta = await bench.delta(before)
    assert delta == {"PAGE_PROGRAMS": 4, "PROGRAM_OPS": 4, "PAGE_READS": 6, "BLOCK_ERASES": 1,
                     "ERASE_OPS": 1}, delta
    # A listed bad block reads 00h (the factory marker) and refuses program and erase.
    bench.set_config(EmuConfig(**{**bench.config.__dict__, "bad_blocks": (5,)}))
    assert await nand.read_page(row_of(params, 5, 0), 4) == b"\x00" * 4


@cocotb.test()
async def busy_widths_equal_configuration(dut):
    """R/B# low for exactly ticks × prescaler cycles per operation; jitter stays in bounds."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    base = bench.config
    bench.pulses[0].clear()
    expected = []

    async def op(kind, coro):
        await coro
        expected.append(bench.busy_cycles(kind, jitter=False))

    await op(BusyTime.RST, nand.reset())
    await op(BusyTime.R, nand.read_page(row_of(params, 1, 0), 1))
    for page in range(4):  # page types follow the map
        kind = BusyTime.PROG0 + base.page_type(page)
        await op(kind, nand.program_page(row_of(params, 1, page)))
    await op(BusyTime.BERS, nand.erase_block(row_of(params, 1, 0)))
    await op(BusyTime.FEAT, nand.set_features(0x01, b"\x01"))
    await op(BusyTime.FEAT, nand.get_features(0x01))
    await op(BusyTime.R, nand.read_parameter_page(copies=0))
    await nand.read_page(row_of(params, 1, 0), 0)
    expected.append(bench.busy_cycles(BusyTime.R, jitter=False))
    await op(BusyTime.RCBSY, nand.command(0x31))
    await nand.wait_ready()
    await op(BusyTime.RCBSY, nand.command(0x3F))
    await nand.wait_ready()
    await Timer(200, unit="ns")
    assert bench.widths(0) == expected, (bench.widths(0), expected)

    # Jitter: widths vary, stay within [t, t + mask], and differ between draws.
    bench.pulses[0].clear()
    mask = (1 << min(params.jitter_bits, 4)) - 1
    bench.set_config(EmuConfig(**{**base.__dict__, "jitter": {"PROG0": mask, "PROG1": mask},
                                  "seed": 0x1234}))
    for page in range(8):
        await nand.program_page(row_of(params, 3, page))
    widths = bench.widths(0)
    p = max(base.prescaler, 1)
    for page, w in enumerate(widths):
        t = base.prog_time(page)
        assert t * p <= w <= (t + mask) * p and w % p == 0, (page, w, t)
    assert len({w - base.prog_time(i) * p for i, w in enumerate(widths)}) > 1, widths
    bench.set_config(base)


@cocotb.test()
async def cache_program_status_bits(dut):
    """80h…15h: RDY returns after tCBSY while ARDY stays low through the array program; the
    final 10h waits for the array, then programs; FAILC follows the previous operation."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    cfg = bench.config
    before = await bench.counters()
    bench.pulses[0].clear()
    await nand.program_page(row_of(params, 0, 0), b"\x11" * 4, confirm=0x15, wait=False)
    await nand.wait_ready()
    status = await nand.read_status()
    assert status & SR_RDY and not status & SR_ARDY, hex(status)
    # While the array is busy, a second cache program is accepted.
    await nand.program_page(row_of(params, 0, 1), b"\x22" * 4, confirm=0x15, wait=False)
    await nand.wait_ready()
    status = await nand.read_status()
    assert status & SR_RDY and not status & SR_ARDY, hex(status)
    # A read is not allowed while the array is busy: counted as illegal, state kept.
    await nand.command(0x00)
    await nand.program_page(row_of(params, 0, 2), b"\x33" * 4, confirm=0x10, wait=False)
    await nand.wait_ready()
    assert await nand.read_status() == READY
    widths = bench.widths(0)
    p = max(cfg.prescaler, 1)
    cbsy = bench.busy_cycles(BusyTime.CBSY, jitter=False)
    if params.storage == Storage.ARRAY:
        # The page buffer is copied into the array (one byte per cycle) during tCBSY.
        cbsy = max(cbsy, params.page_total + 2)
    assert widths[0] == cbsy, widths
    # The second 15h waits for page 0's array program, then tCBSY: longer than tCBSY.
    assert widths[1] > cbsy
    # The final 10h: waits for page 1, then page 2's tPROG.
    assert widths[2] >= cfg.prog_time(2) * p + 1
    delta = await bench.delta(before)
    assert delta == {"PAGE_PROGRAMS": 3, "PROGRAM_OPS": 3, "CACHE_OPS": 2, "ILLEGAL": 1}, delta
    if params.storage == Storage.ARRAY:
        for page, byte in ((0, 0x11), (1, 0x22), (2, 0x33)):
            assert await nand.read_page(row_of(params, 0, page), 4) == bytes([byte]) * 4


@cocotb.test()
async def nand_rules_fail_and_count(dut):
    """Every rule violation sets FAIL and is counted; nothing is silently accepted."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    before = await bench.counters()
    bench.set_config(EmuConfig(**{**bench.config.__dict__, "bad_blocks": (6,)}))
    assert await nand.program_page(row_of(params, 4, 0)) == READY
    # Program of a non-erased page.
    assert await nand.program_page(row_of(params, 4, 0)) == READY | SR_FAIL
    # FAILC carries the previous result; a good program clears FAIL.
    assert await nand.program_page(row_of(params, 4, 1)) == READY | SR_FAILC
    # Out of order (skips page 2).
    assert await nand.program_page(row_of(params, 4, 3)) == READY | SR_FAIL
    # Bad block: program and erase.
    assert await nand.program_page(row_of(params, 6, 0)) & SR_FAIL
    assert await nand.erase_block(row_of(params, 6, 0)) & SR_FAIL
    # Write protect: program and erase refused; status shows WP#.
    await nand.write_protect(True)
    status = await nand.program_page(row_of(params, 4, 2))
    assert status == SR_RDY | SR_ARDY | SR_FAIL | SR_FAILC, hex(status)
    assert await nand.erase_block(row_of(params, 4, 0)) == SR_RDY | SR_ARDY | SR_FAIL | SR_FAILC
    await nand.write_protect(False)
    # The refused operations left the state alone: page 2 is still next, block 4 not erased.
    assert await nand.program_page(row_of(params, 4, 2)) & SR_FAIL == 0
    delta = await bench.delta(before)
    assert delta == {"PAGE_PROGRAMS": 3, "PROGRAM_OPS": 3, "FAILED": 6, "FAIL_NOT_ERASED": 1,
                     "FAIL_ORDER": 1, "FAIL_PROTECTED": 2, "FAIL_BAD_BLOCK": 2}, delta


@cocotb.test()
async def multi_plane_program_and_erase(dut):
    """80h…11h…80h…10h: one tDBSY then one tPROG pulse for Mp pages, counted as Mp pages."""
    _, params, bench = await setup(dut)
    if params.planes < 2:
        return
    nand = bench.nand
    before = await bench.counters()
    bench.pulses[0].clear()
    mp = params.planes
    for page in range(2):
        for plane in range(mp):
            last = plane == mp - 1
            await nand.program_page(row_of(params, 8 + plane, page),
                                    bytes([page * 16 + plane]) * 4,
                                    confirm=0x10 if last else 0x11,
                                    opcode=0x80 if plane == 0 else 0x81, wait=False)
            await nand.wait_ready()
        assert await nand.read_status() == READY
    for plane in range(mp):
        await nand.erase_block(row_of(params, 10 + plane, 0),
                               confirm=0xD0 if plane == mp - 1 else 0xD1, wait=False)
        await nand.wait_ready()
    delta = await bench.delta(before)
    assert delta == {"PAGE_PROGRAMS": 2 * mp, "PROGRAM_OPS": 2, "BLOCK_ERASES": mp,
                     "ERASE_OPS": 1}, delta
    dbsy = bench.busy_cycles(BusyTime.DBSY, jitter=False)
    p = max(bench.config.prescaler, 1)
    tprog = [bench.config.prog_time(page) * p for page in range(2)]
    berase = bench.busy_cycles(BusyTime.BERS, jitter=False)
    assert bench.widths(0) == ([dbsy] * (mp - 1) + [tprog[0]] + [dbsy] * (mp - 1) + [tprog[1]]
                               + [dbsy] * (mp - 1) + [berase])
    if params.storage == Storage.ARRAY:
        for page in range(2):
            for plane in range(mp):
                got = await nand.read_page(row_of(params, 8 + plane, page), 4)
                assert got == bytes([page * 16 + plane]) * 4, (page, plane, got)


@cocotb.test()
async def read_cache_features_and_illegal(dut):
    """31h/3Fh walk the pages; set/get features (timing mode); unknown or misplaced commands are
    counted and ignored; status polling instead of R/B#."""
    _, params, bench = await setup(dut)
    nand = bench.nand
    rng = random.Random(5)
    data = {}
    for page in range(4):
        data[page] = bytes(rng.randrange(256) for _ in range(8))
        await nand.program_page(row_of(params, 7, page), data[page])
    before = await bench.counters()

    def expect(page):
        if params.storage == Storage.ARRAY:
            return data[page]
        return bytes(pattern_byte(row_of(params, 7, page), c) for c in range(8))

    assert await nand.read_page(row_of(params, 7, 0), 8) == expect(0)
    for page, opcode in ((0, 0x31), (1, 0x31), (2, 0x3F)):
        await nand.command(opcode)
        await nand.wait_ready(by="status")
        await nand.command(0x00)
        assert await nand.read_data(8) == expect(page), (page, opcode)
    await nand.set_features(0x01, b"\x02\x00\x00\x00")
    assert await nand.get_features(0x01) == b"\x02\x00\x00\x00"
    assert await nand.get_features(0x80) == b"\x00" * 4
    for opcode in (0x42, 0x30, 0x10, 0xD0, 0xE0, 0x3F, 0x85):
        await nand.command(opcode)
    await nand.address(0x12, 0x34)  # stray address cycles are ignored
    assert await nand.read_status() == READY
    assert await nand.read_page(row_of(params, 7, 3), 8, by="status") == expect(3)
    delta = await bench.delta(before)
    assert delta == {"PAGE_READS": 4, "CACHE_OPS": 3, "FEATURE_OPS": 3, "ILLEGAL": 7}, delta


@cocotb.test()
async def fuzz_random_sequences(dut):
    """Seeded random command sequences, illegal ones and resets in the middle of operations:
    R/B# always returns within the longest busy time, and a reset always recovers."""
    prm, params, bench = await setup(dut)
    nand = bench.nand
    fz = prm["fuzz"]
    rng = random.Random(fz["seed"])
    limit = bench.longest_busy_ns()
    total = params.page_total
    opcodes = [0x00, 0x05, 0x30, 0x31, 0x3F, 0x60, 0x70, 0x78, 0x80, 0x81, 0x85, 0x90, 0x10,
               0x11, 0x15, 0xD0, 0xD1, 0xE0, 0xEC, 0xEE, 0xEF, 0xFF]
    ops = 0
    for _seq in range(fz["sequences"]):
        nand.select(rng.randrange(params.dies))
        for _ in range(rng.randrange(1, fz["ops"] + 1)):
            ops += 1
            block = rng.randrange(params.blocks)
            row = row_of(params, block, rng.randrange(params.pages_per_block))
            choice = rng.random()
            if choice < 0.25:
                await nand.program_page(row, bytes(rng.randrange(256)
                                                   for _ in range(rng.randrange(4))),
                                        confirm=rng.choice([0x10, 0x10, 0x15, 0x11]),
                                        wait=False)
            elif choice < 0.35:
                await nand.erase_block(row, confirm=rng.choice([0xD0, 0xD1]), wait=False)
            elif choice < 0.5:
                await nand.command(0x00)
                await nand.address(rng.randrange(256), rng.randrange(256) % (total >> 8 or 1),
                                   *nand.row_cycles(row))
                await nand.command(rng.choice([0x30, 0x30, 0x31, 0x3F, 0x42]))
            elif choice < 0.75:
                await nand.command(rng.choice(opcodes) if rng.random() < 0.7
                                   else rng.randrange(256))
                for _ in range(rng.randrange(4)):
                    await nand.address(rng.randrange(256))
                if rng.random() < 0.3:
                    await nand.write_data(bytes(rng.randrange(256) for _ in range(4)))
            elif choice < 0.85:
                await nand.read_data(rng.randrange(1, 4))
            else:
                await nand.wait_ready(limit)
                await nand.read_status()
            if rng.random() < 0.2:
                # Reset in the middle of whatever is going on.
                await Timer(rng.randrange(1, 400), unit="ns")
                await nand.command(0xFF)
            # The die must always come back.
            await nand.wait_ready(limit)
        await nand.reset()
        status = await nand.read_status()
        assert status == READY, f"sequence {_seq}: status {status:#04x} after reset"
        assert await nand.read_id(0x20, 4) == b"ONFI", f"sequence {_seq}"
    dut._log.info("fuzz: %d sequences, %d operations", fz["sequences"], ops)

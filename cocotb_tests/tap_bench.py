"""Cocotb bench of the ``onfi_tap`` top with the toolkit only (Icarus and Verilator).

ONFI traffic comes from :class:`rbscope.cocotb.onfi.OnfiDriver` on the pins that
:meth:`rbscope.cocotb.tap.Tap.pins` gives it; the tags and every counter are read back with
:class:`rbscope.cocotb.tap.Tap` and checked against the commands sent (``docs/opcode_tap.md``).
The pytest side is ``tests/test_tap_cocotb.py``.

Parameters (:func:`cocotb_tests.runner.bench_params`): ``targets``, ``luns`` (the build's
:class:`TapParams`) and ``lun_shift``.
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from cocotb_tests.runner import bench_params
from rbscope.cocotb.onfi import MODE0, OnfiDriver, Opcode
from rbscope.cocotb.readport import ReadTimeout
from rbscope.cocotb.tap import Tap
from rbscope.device.tap import record_cycles
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.nand_emu.onfi_rom import id_bytes, parameter_page
from rbscope.gateware.onfi_tap import RECORD_ARM, OpClass, PlaneKind, TapConfig, TapParams
from rbscope.gateware.onfi_tap.model import TapCounts
from rbscope.recordings.onfi_bus import group_commands, identities

PERIOD_NS = 10


@cocotb.test()
async def decoded_commands_and_tags(dut):
    """Programs (one and two planes, cache), erases (two planes), reads and a target-wide reset
    on four dies: each confirm is counted on the die its row address selects."""
    prm = bench_params(targets=2, luns=2, lun_shift=16)
    params = TapParams(targets=prm["targets"], luns=prm["luns"])
    assert params.dies == 4, "the scenario below addresses four dies"
    shift = prm["lun_shift"]
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    tap = Tap(dut, params, period_ns=PERIOD_NS)
    nand = OnfiDriver(tap.pins(), MODE0)
    await tap.reset(TapConfig(lun_shift=shift))
    assert await tap.counts() == TapCounts.zeros(params)  # the counters start at zero

    def row(lun, block, page):
        return lun << shift | block << 6 | page

    # Die 0 (target 0, LUN 0): one page program.
    await nand.program_page(row(0, 3, 0), b"\x11\x22", wait=False)
    await tap.settle()
    assert tap.tags()[0] is OpClass.PROGRAM
    # Die 1 (target 0, LUN 1): a two-plane program, then a cache program.
    await nand.program_page(row(1, 4, 0), b"\x33", confirm=Opcode.PROGRAM_MP_CONFIRM, wait=False)
    await nand.program_page(row(1, 5, 0), b"\x44", wait=False)
    await nand.program_page(row(1, 4, 1), b"\x55", confirm=Opcode.PROGRAM_CACHE, wait=False)
    # Die 2 (target 1, LUN 0): a two-plane erase.
    nand.select(1)
    await nand.erase_block(row(0, 8, 0), confirm=Opcode.ERASE_MP_CONFIRM, wait=False)
    await nand.erase_block(row(0, 9, 0), wait=False)
    # Die 3 (target 1, LUN 1): a page read (00h, five address cycles, 30h).
    await nand.command(Opcode.READ)
    await nand.address(0, 0, *nand.row_cycles(row(1, 2, 7)))
    await nand.command(Opcode.READ_CONFIRM)
    await tap.settle()
    assert tap.tags() == [OpClass.PROGRAM, OpClass.CACHE_PROGRAM, OpClass.ERASE, OpClass.READ]

    # A busy pulse on die 3's R/B# takes the die's tag.
    dut.rb.value = 0b0111
    await Timer(20 * PERIOD_NS, unit="ns")
    dut.rb.value = 0b1111
    await tap.settle()
    assert tap.tags("pulse_tag")[3] is OpClass.READ

    # A reset to target 1 addresses both its LUNs; it is counted once, on LUN 0 (die 2).
    await nand.reset(wait=False)
    await tap.settle()
    assert tap.tags()[2:] == [OpClass.RESET, OpClass.RESET]
    await nand.idle()
    await tap.settle()

    got = await tap.counts()
    expected = TapCounts.zeros(params)
    expected.ops[0][OpClass.PROGRAM] = 1
    expected.ops[1][OpClass.MP_QUEUE] = 1
    expected.ops[1][OpClass.PROGRAM] = 1
    expected.ops[1][OpClass.CACHE_PROGRAM] = 1
    expected.ops[2][OpClass.ERASE_QUEUE] = 1
    expected.ops[2][OpClass.ERASE] = 1
    expected.ops[2][OpClass.RESET] = 1
    expected.ops[3][OpClass.READ] = 1

    def planes(die, kind, n):
        expected.planes[die][int(kind) * 4 + n - 1] += 1

    planes(0, PlaneKind.PROGRAM, 1)
    planes(1, PlaneKind.PROGRAM, 2)
    planes(1, PlaneKind.CACHE_PROGRAM, 1)
    planes(2, PlaneKind.ERASE, 2)
    assert got == expected, f"\n read     {got.to_dict()}\n expected {expected.to_dict()}"
    summary = got.summary()  # 10h on 1 and 2 planes, 15h on 1: 4 pages by 3 final confirms
    assert (summary["program_ops"], summary["pages_programmed"], got.mp(1)) == (3, 4, 2.0)
    # No sniffer trace was given: no pulse is counted.
    assert not any(any(row) for row in got.pulses)


@cocotb.test()
async def read_gives_up_instead_of_hanging(dut):
    """A read that is not answered within its cycle limit raises ReadTimeout (the tap answers
    in three to four cycles; a limit of two is too short); the port then still works."""
    params = TapParams(**{k: v for k, v in bench_params(targets=2, luns=2, lun_shift=16).items()
                          if k != "lun_shift"})
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    tap = Tap(dut, params, period_ns=PERIOD_NS, timeout_cycles=2)
    await tap.reset()
    try:
        await tap.read(0, 0)
    except ReadTimeout as exc:
        assert "never answered within 2 cycles" in str(exc), exc
    else:
        raise AssertionError("a two-cycle limit did not time out")
    tap.port.timeout_cycles = 100
    await Timer(10 * PERIOD_NS, unit="ns")
    await tap.settle()
    assert await tap.read(0, 0) == 0


class Die:
    """The bytes a die would drive: each RE# falling edge puts the next queued byte on ``io``
    (the tap listens only, so the bench plays the die's side of a read)."""

    def __init__(self, dut):
        self.dut = dut
        self.queue = bytearray()
        cocotb.start_soon(self._serve())

    async def _serve(self):
        while True:
            await FallingEdge(self.dut.re_n)
            self.dut.io.value = self.queue.pop(0) if self.queue else 0


@cocotb.test()
async def power_up_recorder_keeps_what_each_target_said(dut):
    """Reset, Read ID (00h, 20h) and the parameter page of each target, as a controller
    identifies its dies at power-up: the recorder's cells decode into the page served; re-armed,
    it forgets them and waits for the next Reset."""
    prm = bench_params(targets=2, luns=2, lun_shift=16)
    params = TapParams(targets=prm["targets"], luns=prm["luns"])
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    tap = Tap(dut, params, period_ns=PERIOD_NS)
    nand = OnfiDriver(tap.pins(), MODE0)
    die = Die(dut)
    await tap.reset()
    emu = [EmuParams(dies=1, planes=2 << t, pages_per_block=128 << t, bits_per_cell=2 + t,
                     maker="RBSCOPE", model=f"COCOTB-{t}") for t in range(params.targets)]
    # A status read before any Reset is not recorded.
    await nand.read_status()
    for t in range(params.targets):
        nand.select(t)
        await nand.reset(wait=False)
        await nand.idle()
        die.queue += id_bytes(emu[t])[:5]
        assert await nand.read_id(0x00, 5) == id_bytes(emu[t])[:5]
        die.queue += b"ONFI"
        assert await nand.read_id(0x20, 4) == b"ONFI"
        await nand.command(Opcode.READ_PARAM)
        await nand.address(0x00)
        die.queue += parameter_page(emu[t])
        assert await nand.read_data(256) == parameter_page(emu[t])
        await nand.idle()
    await tap.settle()
    cells = await tap.record()
    for t in range(params.targets):
        # FFh; 90h 00h + 5; 90h 20h + 4; ECh 00h + 256.
        assert cells[t][0].fill == 1 + 2 + 5 + 2 + 4 + 2 + 256, cells[t][0]
        assert cells[t][0].recording and not cells[t][0].armed
    idents = identities(group_commands(record_cycles(cells)), params.targets)
    for t, ident in enumerate(idents):
        assert ident.errors == [] and ident.resets == 1, ident.errors
        page = ident.page
        assert (page.planes, page.pages_per_block, page.bits_per_cell, page.model) == \
            (2 << t, 128 << t, 2 + t, f"COCOTB-{t}")
    await tap.record_strobe(RECORD_ARM)
    await tap.settle()
    cells = await tap.record()
    assert all(c[0].fill == 0 and c[0].armed and not c[0].recording for c in cells.values())

"""The tap's power-up recorder (issue 23, item 1): the emulator's power-up, recorded on its pins,
replayed into the tap cycle for cycle, read back from the ``RECORD`` space and decoded into the
Read ID and parameter page the emulator was built with.

The same pins also go through the recordings' software decoder (``decode_cycles``, what
``rbscope identify`` uses on a VCD): the recorder's cells must be exactly its cycles, per target.
"""

import pytest

from rbscope.analysis.identify import drive_fields
from rbscope.device.tap import record_cycles
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.nand_emu.onfi_rom import id_bytes, parameter_page
from rbscope.gateware.onfi_tap import (
    RECORD_ARM,
    RECORD_START,
    RecordKind,
    TapParams,
    TapSpace,
    decode_record_word,
)
from rbscope.gateware.rb_sniffer.params import SnifferParams
from rbscope.recordings.onfi_bus import group_commands, identities

from .powerup_harness import RAW, drive_pins, record_powerup, replay, software_cycles

#: Two targets of a 4-plane QLC die: fields that differ from every default.
PARAMS = EmuParams(dies=2, page_bytes=16384, spare_bytes=1872, pages_per_block=512,
                   blocks_per_plane=256, planes=4, bits_per_cell=4, t_prog_max_us=3100,
                   t_bers_max_us=9000, t_r_max_us=85, maker="RBSCOPE", model="EMU-QLC",
                   maker_id=0x2C, device_id=0xC4)


@pytest.fixture(scope="module")
def powerup():
    return record_powerup(PARAMS)


@pytest.fixture(scope="module")
def recorded(powerup):
    """The power-up replayed into a tap with the default recorder: its words per target."""
    return replay(tap_params(), powerup[0])


def tap_params(cells=1024):
    return TapParams(targets=PARAMS.dies, sniffer=SnifferParams(channels=PARAMS.dies),
                     record_cells=cells)


def test_recorder_keeps_each_targets_power_up_and_decodes_to_the_emulators_page(powerup,
                                                                               recorded):
    record, seen = powerup
    words = recorded
    reference = software_cycles(record, PARAMS.dies)
    for t in range(PARAMS.dies):
        cells = words[t]
        head = cells[0]
        assert not head.armed and head.recording  # started at its Reset, not full
        kept = [c for c in cells if c.valid]
        assert len(kept) == head.fill
        # Exactly the software decoder's cycles of this target, from its first Reset (FFh).
        mine = [c for c in reference if c.sel == 1 << t]
        assert [(RecordKind[c.kind.upper()], c.byte) for c in mine] == \
            [(c.kind, c.byte) for c in kept]
        assert (kept[0].kind, kept[0].byte) == (RecordKind.CMD, 0xFF)
    cycles = record_cycles({t: words[t] for t in range(PARAMS.dies)})
    idents = identities(group_commands(cycles), PARAMS.dies)
    for t, ident in enumerate(idents):
        assert ident.errors == [] and ident.resets == 1
        assert ident.read_id.id_bytes == id_bytes(PARAMS)[:8] == seen[t][0]
        page = ident.page
        assert (page.page_bytes, page.spare_bytes, page.pages_per_block, page.planes,
                page.blocks_per_lun, page.bits_per_cell) == (
            16384, 1872, 512, 4, PARAMS.blocks, 4)
        assert (page.t_prog_us, page.t_bers_us, page.t_r_us) == (3100, 9000, 85)
        assert bytes(seen[t][2][:256]) == parameter_page(PARAMS)
    fields = drive_fields(idents, source="recorder")
    assert fields.values["planes_per_die"] == 4 and fields.values["cell"] == "qlc"


def test_a_small_recorder_stops_when_full_and_the_strobes_rearm_or_start_it(powerup):
    record, _seen = powerup
    params = tap_params(cells=64)
    words = replay(params, record)
    for t in range(PARAMS.dies):
        head = words[t][0]
        assert head.fill == 64 and not head.recording and not head.armed
        assert all(c.valid for c in words[t])  # all 64 cells hold cycles

    def strobe(bits):
        async def step(ctx, dut):
            ctx.set(dut.record, bits)
            await ctx.tick()
            ctx.set(dut.record, 0)
            await ctx.tick()
        return step

    arm, start = strobe(RECORD_ARM), strobe(RECORD_START)
    # Re-armed after the power-up: nothing kept, each target waits for its next Reset.
    words = replay(params, record, after=[arm])
    for t in range(PARAMS.dies):
        head = words[t][0]
        assert (head.fill, head.armed, head.recording, head.valid) == (0, True, False, False)
    # Started before the power-up's traffic: recording from the first cycle of each target
    # (the same cycles here, as the power-up begins with FFh).
    words = replay(params, record, before=[start])
    assert all(words[t][0].recording is False and words[t][0].fill == 64 for t in range(2))


def test_a_tap_without_a_recorder_answers_its_space_with_zero(powerup):
    record, _seen = powerup
    words = replay(tap_params(cells=0), record[:400])
    assert all(words[t] == [decode_record_word(0)] for t in range(2))


@pytest.mark.heavy  # (the whole device in the simulator; make test-heavy, CI)
def test_the_device_reads_the_recorder_over_the_link(powerup):
    """The power-up up to target 0's parameter page read, replayed into the tap pins of a
    ``DeviceCore``: the cells read one by one through ``TAP_READ``/``TAP_DATA`` equal those of
    the tap alone; ``TAP_RECORD`` starts and re-arms the recorder."""
    from rbscope.gateware.device import DeviceCore
    from rbscope.gateware.link import protocol
    from rbscope.gateware.onfi_tap.link import (
        TAP_DATA_DONE,
        TAP_READ_GO,
        TAP_SPACE_SHIFT,
        tap_extension,
    )

    from .test_device_core import CoreBench

    record, _seen = powerup
    # (we, cle, ale, re, dq, ce, rb): up to the first ECh command cycle.
    cut = next(i for i, r in enumerate(record) if r[1] and not r[0] and r[4] == 0xEC)
    record = record[:cut]
    snf = SnifferParams(channels=PARAMS.dies, tag_bits=4)
    params = TapParams(targets=PARAMS.dies, sniffer=snf, record_cells=64)
    direct = replay(params, record)
    assert 10 < direct[0][0].fill < 30 and direct[1][0].armed
    dut = DeviceCore(snf, clock_hz=1_000_000, uart_divisor=4, board="unit-test", tap=params)
    bench = CoreBench(dut=dut)
    regs = {r.name: r.address for r in tap_extension(params).registers}
    op = protocol.Opcode
    got = {}

    async def word(ctx, index):
        go = TAP_READ_GO | int(TapSpace.RECORD) << TAP_SPACE_SHIFT | index
        await bench.command(ctx, 1, op.WRITE_REG, regs["TAP_READ"], go)
        hi, _ = await bench.command(ctx, 2, op.READ_REG, regs["TAP_DATA_HI"])
        assert hi.value >> (TAP_DATA_DONE - 32) & 1
        lo, _ = await bench.command(ctx, 3, op.READ_REG, regs["TAP_DATA_LO"])
        return decode_record_word(lo.value)

    async def drive(ctx):
        await drive_pins(ctx, dut, record, prefix="tap_")

    async def reader(ctx):
        await ctx.tick().repeat(len(record) + 20)
        got[0] = [await word(ctx, params.record_index(0, i))
                  for i in range(direct[0][0].fill)]
        got[1] = await word(ctx, params.record_index(1, 0))
        await bench.command(ctx, 4, op.WRITE_REG, regs["TAP_RECORD"], RECORD_START)
        got["started"] = await word(ctx, params.record_index(1, 0))
        await bench.command(ctx, 5, op.WRITE_REG, regs["TAP_RECORD"], RECORD_ARM)
        got["armed"] = await word(ctx, params.record_index(0, 0))

    bench.run(reader, drive)
    assert got[0] == direct[0][:direct[0][0].fill]
    assert got[1] == direct[1][0]
    started, armed = got["started"], got["armed"]
    assert (started.fill, started.armed, started.recording) == (0, False, True)
    assert (armed.fill, armed.armed, armed.recording, armed.valid) == (0, True, False, False)


class RecorderDevice:
    """A stand-in for :class:`rbscope.device.device.Device` that answers ``TAP_READ`` and
    ``TAP_DATA`` with the words the gateware gave in :func:`replay` (``RAW``) and keeps the
    ``TAP_RECORD`` writes: ``rbscope identify --port`` against the recorder's real words without
    a serial link (the link path itself is the test above)."""

    def __init__(self, params):
        from rbscope.gateware.onfi_tap.link import TapLink

        self.tap = params
        self.params = params.sniffer
        self.link = TapLink(params.targets, params.luns, 0, 0)
        self.retries = 0
        self.word = 0
        self.strobes = []

    def extension(self, name):
        assert name == "tap"
        return self.link

    def write_reg(self, name, value):
        from rbscope.gateware.onfi_tap.link import TAP_READ_GO, TAP_SPACE_SHIFT

        if name == "TAP_RECORD":
            self.strobes.append(value)
            return
        assert name == "TAP_READ" and value & TAP_READ_GO
        assert value >> TAP_SPACE_SHIFT & 7 == TapSpace.RECORD
        self.word = RAW[self.tap.record_cells, value & (TAP_READ_GO >> 3) - 1]

    def read_reg(self, name):
        return {"TAP_DATA_HI": 1 << 31 | self.word >> 32,
                "TAP_DATA_LO": self.word & 0xFFFF_FFFF}[name]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_identify_reads_the_recorder_of_a_device(recorded, tmp_path, monkeypatch, capsys):
    import json

    from rbscope.analysis.geometry import load_geometry
    from rbscope.cli import commands as cli
    from rbscope.cli import identify as identify_cli

    params = tap_params()  # (`recorded` filled RAW with the gateware's words)
    dev = RecorderDevice(params)
    monkeypatch.setattr(identify_cli, "open_device", lambda args: dev)
    out = tmp_path / "drive.toml"
    argv = ["identify", "--port", "/dev/ttyRBSCOPE", "--channels", "1", "--chips-per-channel",
            "2", "--program-model", "multi-plane", "-o", str(out), "--json"]
    assert cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    # FFh; 70h + status; 90h-00h + 8; 90h-20h + 4; ECh-00h + three 256-byte copies.
    cells = 1 + 2 + 2 + 8 + 2 + 4 + 2 + 768
    assert summary["recorder"] == {str(t): {"cells": cells, "armed": False, "recording": True}
                                   for t in range(2)}
    assert summary["missing"] == [] and "byte 113" in summary["origin"]["planes_per_die"]
    g = load_geometry(out)
    assert (g.planes_per_die, g.page_size, g.pages_per_block, g.cell) == (4, 16384, 512, "qlc")
    assert g.timing == {"program": (3100.0, 3100.0), "erase": (9000.0, 9000.0),
                        "read": (85.0, 85.0)}
    # --arm strobes the recorder and says what to do next.
    assert cli.main(["identify", "--port", "/dev/ttyRBSCOPE", "--arm"]) == 0
    assert dev.strobes == [RECORD_ARM] and "power-cycle the drive" in capsys.readouterr().out
    # Neither or both of SOURCE and --port: a usage error.
    assert cli.main(["identify"]) == 2
    assert "not neither" in capsys.readouterr().err
    assert cli.main(["identify", "x.vcd", "--port", "/dev/null"]) == 2


def test_identify_of_an_empty_recorder_says_why(powerup, monkeypatch, capsys):
    from rbscope.cli import commands as cli
    from rbscope.cli import identify as identify_cli

    record, _seen = powerup
    params = tap_params(cells=128)
    replay(params, record[:5])  # before any Reset: both targets still armed
    monkeypatch.setattr(identify_cli, "open_device", lambda args: RecorderDevice(params))
    assert cli.main(["identify", "--port", "/dev/ttyRBSCOPE"]) == 1
    assert "every target is still armed" in capsys.readouterr().err

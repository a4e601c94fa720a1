"""One ONFI command table and one list of operation classes, and every user agreeing with them:
the emulator and its traffic generator, the opcode tap and its model, the reference SSD and its
RTL replay, the cocotb driver, the trained classifier."""

import ast
import inspect

import numpy as np
from amaranth.hdl import Shape
from amaranth.sim import Simulator

from rbscope import refssd
from rbscope.analysis.trained import KIND_OF_CLASS
from rbscope.cocotb import onfi as cocotb_onfi
from rbscope.gateware.nand_emu import EmuParams, TrafficConfig
from rbscope.gateware.nand_emu import fsm as emu_fsm
from rbscope.gateware.nand_emu.layouts import traffic_const
from rbscope.gateware.nand_emu.traffic import TrafficGenerator
from rbscope.gateware.onfi_tap import params as tap_params
from rbscope.gateware.onfi_tap.model import CMD, Strobe, TapModel
from rbscope.nand.onfi import COLUMN_COMMANDS, Opcode
from rbscope.nand.ops import CONFIRM_CLASS, KINDS, OPS, WINDOW_CLASSES, OpClass, kind_of
from rbscope.refssd import rtl
from rbscope.refssd.timing import CLASS, CONFIRM, FIRST, NandOp
from rbscope.refssd.workload import READ, Workload


def test_the_table_is_consistent():
    assert len({int(op) for op in Opcode}) == len(Opcode)  # no alias hides a byte
    assert all(0 <= op <= 0xFF for op in Opcode)
    assert COLUMN_COMMANDS <= set(Opcode)
    # Every class but NONE is started by table commands, and each command sets one class.
    assert set(OPS) == set(OpClass) - {OpClass.NONE}
    assert sum(len(info.confirms) for info in OPS.values()) == len(CONFIRM_CLASS)
    for op_class, info in OPS.items():
        assert info.kind in KINDS and isinstance(info.first, Opcode)
        assert all(CONFIRM_CLASS[op] is op_class for op in info.confirms)
        assert kind_of(op_class) == kind_of(op_class.name) == info.kind
    assert set(WINDOW_CLASSES) - {"reset"} <= set(KINDS)


def test_emulator_decodes_the_table():
    # The die's command decoder switches on the members of the one table.
    assert emu_fsm.Opcode is Opcode


def _commands_sent(traffic):
    """The command bytes the traffic generator sends for ``traffic`` (Amaranth simulator)."""
    params = EmuParams(dies=1, page_bytes=64, spare_bytes=8, pages_per_block=8,
                       blocks_per_plane=4, planes=2)
    gen = TrafficGenerator(params)
    sim = Simulator(gen)
    sim.add_clock(1e-8)
    sent = []

    async def bench(ctx):
        ctx.set(gen.cfg.as_value(), traffic_const(params, traffic))
        await ctx.tick()
        ctx.set(gen.start, 1)
        await ctx.tick()
        ctx.set(gen.start, 0)
        we = 1
        for _ in range(5_000):
            if ctx.get(gen.we_n) and not we and ctx.get(gen.cle):  # a command cycle's WE# edge
                sent.append(ctx.get(gen.io))
            we = ctx.get(gen.we_n)
            if not ctx.get(gen.status.busy):
                break
            await ctx.tick()
        else:
            raise AssertionError("the traffic generator never finished")

    sim.add_testbench(bench)
    sim.run()
    return sent


def test_traffic_generator_sends_table_commands():
    op = Opcode
    # Two-plane programs (plane 0 queued with 11h), a read after each page, a two-plane erase.
    sent = _commands_sent(TrafficConfig(blocks=1, pages=2, reads=1, multi_plane=True))
    page = [op.PROGRAM, op.PROGRAM_MP_CONFIRM, op.PROGRAM, op.PROGRAM_CONFIRM]
    read = [op.READ, op.READ_CONFIRM]
    erase = [op.ERASE, op.ERASE_MP_CONFIRM, op.ERASE, op.ERASE_CONFIRM]
    assert sent == [*page, *read, *page, *read, *erase]
    # Cache programs: 15h for every page of the block but its last, which ends with 10h.
    sent = _commands_sent(TrafficConfig(blocks=1, pages=3, cache=True))
    assert sent == [op.PROGRAM, op.PROGRAM_CACHE, op.PROGRAM, op.PROGRAM_CACHE, op.PROGRAM,
                    op.PROGRAM_CONFIRM, op.ERASE, op.ERASE_CONFIRM]


def test_tap_classes_are_the_one_list():
    gateware = tap_params.OpClass
    assert [(c.name, c.value) for c in gateware] == [(c.name, c.value) for c in OpClass]
    assert Shape.cast(gateware) == Shape.cast(tap_params.OpClass.NONE.__class__) == \
        Shape(4, signed=False)
    assert all(isinstance(op, Opcode) for op in tap_params.CONFIRM_CLASS)
    assert {op: c.name for op, c in tap_params.CONFIRM_CLASS.items()} == \
        {op: c.name for op, c in CONFIRM_CLASS.items()}
    assert all(type(c) is gateware for c in tap_params.CONFIRM_CLASS.values())
    assert all(type(c) is gateware for c in tap_params.TARGET_CLASSES)


def test_trained_classifier_bridge_is_derived():
    assert set(KIND_OF_CLASS) == {c.name for c in OpClass} - {"NONE"}
    assert all(state == kind == kind_of(name) for name, (state, kind) in KIND_OF_CLASS.items())


def test_reference_ssd_commands_are_table_commands_the_tap_classifies_alike():
    for op in NandOp:
        assert isinstance(FIRST[op], Opcode) and isinstance(CONFIRM[op], Opcode)
        if op in CLASS:  # the 2026 sequences (loads, suspend, resume) are not tap classes
            assert CONFIRM_CLASS[CONFIRM[op]] is CLASS[op]
    # A drive with every kind of sequence: two-plane programs and erases (11h, D1h), cache
    # programs (15h), cache reads (31h, 3Fh), power-on (FFh, EFh).
    drive = refssd.preset("cache-prog", channels=1, dies_per_chip=1, blocks_per_plane=64,
                          pages_per_block=16)
    w = refssd.micro("32K-SQ-100%-W-4KiB-align", drive.logical_bytes, 2 * drive.logical_bytes,
                     seed=1)  # twice the logical space: garbage collection erases
    w = Workload("w+r", np.concatenate([w.ops, np.full(16, READ)]),  # then sequential reads
                 np.concatenate([w.offsets, np.arange(16) * 32768]),
                 np.concatenate([w.sizes, np.full(16, 32768)]))
    run = refssd.simulate(drive, w, seed=1)
    c = run.commands
    assert set(np.unique(c["first"]).tolist()) <= set(Opcode)
    assert set(np.unique(c["confirm"]).tolist()) <= set(Opcode)
    seen = set()
    for first, confirm, op in zip(c["first"].tolist(), c["confirm"].tolist(), c["op"].tolist(),
                                  strict=True):
        op_class = CONFIRM_CLASS[confirm]
        seen.add(op_class)
        if op_class in (OpClass.READ_CACHE_END, OpClass.ERASE_QUEUE):  # set per row
            assert CLASS[NandOp(op)] in (OpClass.READ_CACHE, OpClass.MP_QUEUE)
        else:
            assert op_class is CLASS[NandOp(op)]
        assert first == OPS[op_class].first
    assert {OpClass.PROGRAM, OpClass.CACHE_PROGRAM, OpClass.MP_QUEUE, OpClass.ERASE,
            OpClass.ERASE_QUEUE, OpClass.READ, OpClass.READ_CACHE, OpClass.READ_CACHE_END,
            OpClass.RESET, OpClass.SET_FEATURES} <= seen
    # The tap's model counts the replayed confirms in the same classes.
    tap = TapModel(tap_params.TapParams())
    for i, confirm in enumerate(c["confirm"].tolist()):
        tap.strobe(Strobe(i, CMD, 1, confirm))
    counted = {tap_params.OpClass(k).name: n for k, n in enumerate(tap.counts.ops[0]) if n}
    expected = {}
    for confirm in c["confirm"].tolist():
        name = CONFIRM_CLASS[confirm].name
        expected[name] = expected.get(name, 0) + 1
    assert counted == expected


def test_rtl_replay_sends_table_commands():
    emu = EmuParams(dies=1, page_bytes=64, spare_bytes=0, pages_per_block=8,
                    blocks_per_plane=4, planes=2)
    row = np.zeros(1, dtype=refssd.COMMAND_DTYPE)[0]
    for op in CLASS:  # the sequences the emulator replays (not the 2026 loads or suspends)
        row["first"], row["confirm"], row["op"] = FIRST[op], CONFIRM[op], op
        row["block"], row["page"], row["plane"] = 1, 2, 0
        cycles = rtl.bus_cycles(row, emu)
        commands = [byte for kind, byte in cycles if kind == rtl.CMD]
        assert set(commands) <= set(Opcode), op
        assert commands[-1] == CONFIRM[op] or op is NandOp.SET_FEATURES
        assert commands[0] == FIRST[op]


def test_cocotb_driver_sends_table_commands():
    """Every command the driver issues is a member of the table (or the caller's, for the
    operations that take the opcode or the confirm), never a literal byte."""
    tree = ast.parse(inspect.getsource(cocotb_onfi.OnfiDriver))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "command"
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
    assert len(calls) >= 15
    for call in calls:
        (arg,) = call.args
        if isinstance(arg, ast.Name):
            assert arg.id in ("opcode", "confirm"), ast.dump(arg)
            continue
        assert (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
                and arg.value.id == "Opcode" and arg.attr in Opcode.__members__), ast.dump(arg)
    program = inspect.signature(cocotb_onfi.OnfiDriver.program_page).parameters
    assert program["opcode"].default is Opcode.PROGRAM
    assert program["confirm"].default is Opcode.PROGRAM_CONFIRM
    erase = inspect.signature(cocotb_onfi.OnfiDriver.erase_block).parameters
    assert erase["confirm"].default is Opcode.ERASE_CONFIRM
    assert cocotb_onfi.Opcode is Opcode

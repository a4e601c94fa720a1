"""The link's extension point: blocks plug in from their own folders; the link names none.

``test_wire_is_unchanged`` pins the wire of a device built with the emulator and the tap (INFO's
layout and bytes, the register map, the frame types and opcodes) to the values the gateware had
before the extensions moved into their blocks' folders (computed then, kept here as literals):
the move changed no bit on the wire.
"""

import ast
from pathlib import Path

import pytest
from amaranth.hdl import Fragment
from amaranth.lib import data, enum

from rbscope.device import protocol as hp
from rbscope.device.emulator import Truth
from rbscope.gateware.device import DeviceCore
from rbscope.gateware.extensions import KINDS, PROTOCOL
from rbscope.gateware.link import protocol
from rbscope.gateware.link.controller import LinkController, link_registers
from rbscope.gateware.link.extension import (
    ExtensionFrame,
    ExtensionKind,
    ExtPort,
    InfoField,
    LinkExtension,
)
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.nand_emu.link import EMU_COUNTERS, EmuFrameType, emulator_extension
from rbscope.gateware.onfi_tap.params import TapParams
from rbscope.gateware.rb_sniffer import SnifferParams

ROOT = Path(__file__).resolve().parent.parent
RO, RW = "ro", "rw"

#: INFO's fields (name, bit offset, bits) before the move.
INFO_LAYOUT = [
    ("protocol_version", 0, 8), ("gateware_version", 8, 16), ("channels", 24, 16),
    ("classes", 40, 8), ("row", 48, 8), ("width_bits", 56, 8), ("counter_bits", 64, 8),
    ("hist_sub_bits", 72, 8), ("hist_bins", 80, 16), ("hist_bits", 96, 8),
    ("timestamp_bits", 104, 8), ("glitch_bits", 112, 8), ("prescaler_bits", 120, 8),
    ("clock_hz", 128, 32), ("prescaler", 160, 16), ("tick_period_ps", 176, 48),
    ("uart_divisor", 224, 16), ("build_id", 240, 32), ("board", 272, 128),
    ("emu_dies", 400, 8), ("emu_cfg_bits", 408, 16), ("emu_traffic_bits", 424, 16),
    ("tag_bits", 440, 8), ("tap_targets", 448, 8), ("tap_luns", 456, 8),
]
#: The INFO payload of that build (prescaler 0: as the gateware's constants hold it).
INFO_BYTES = bytes.fromhex(
    "01020002000510183003b00020300810006cdc02000061510000000010001cdd046974000000000000000000"
    "00000000000002a0024700040201")
#: Its registers: name, address, access, field, shift, reset, bits.
REGISTERS = [
    ("ID", 0, RO, "link.id", 0, 1129529938, 32),
    ("PRESCALER", 1, RW, "prescaler", 0, 1, 16),
    ("GLITCH_TICKS", 2, RW, "glitch_ticks", 0, 1, 8),
    ("IDLE_TICKS_LO", 3, RW, "idle_ticks", 0, 1000000, 32),
    ("IDLE_TICKS_HI", 4, RW, "idle_ticks", 32, 0, 16),
    ("SNAPSHOT_PERIOD", 5, RW, "link.snapshot_period", 0, 4800000, 32),
    ("HIST_PERIOD", 6, RW, "link.hist_period", 0, 0, 16),
    ("TRACE_ENABLE", 7, RW, "link.trace_enable", 0, 0, 1),
    ("CHANNEL_ENABLE_0", 16, RW, "enable", 0, 3, 2),
    ("WINDOW_0_LO", 256, RW, "windows.0.lo", 0, 0, 24),
    ("WINDOW_0_HI", 257, RW, "windows.0.hi", 0, 0, 24),
    ("WINDOW_1_LO", 258, RW, "windows.1.lo", 0, 0, 24),
    ("WINDOW_1_HI", 259, RW, "windows.1.hi", 0, 0, 24),
    ("WINDOW_2_LO", 260, RW, "windows.2.lo", 0, 0, 24),
    ("WINDOW_2_HI", 261, RW, "windows.2.hi", 0, 0, 24),
    ("WINDOW_3_LO", 262, RW, "windows.3.lo", 0, 0, 24),
    ("WINDOW_3_HI", 263, RW, "windows.3.hi", 0, 0, 24),
    ("WINDOW_4_LO", 264, RW, "windows.4.lo", 0, 0, 24),
    ("WINDOW_4_HI", 265, RW, "windows.4.hi", 0, 0, 24),
    ("EMU_CFG_0", 4096, RW, "emu.cfg", 0, 131073, 32),
    ("EMU_CFG_1", 4097, RW, "emu.cfg", 32, 0, 32),
    ("EMU_CFG_2", 4098, RW, "emu.cfg", 64, 0, 32),
    ("EMU_CFG_3", 4099, RW, "emu.cfg", 96, 0, 32),
    ("EMU_CFG_4", 4100, RW, "emu.cfg", 128, 0, 32),
    ("EMU_CFG_5", 4101, RW, "emu.cfg", 160, 0, 32),
    ("EMU_CFG_6", 4102, RW, "emu.cfg", 192, 0, 32),
    ("EMU_CFG_7", 4103, RW, "emu.cfg", 224, 0, 32),
    ("EMU_CFG_8", 4104, RW, "emu.cfg", 256, 0, 32),
    ("EMU_CFG_9", 4105, RW, "emu.cfg", 288, 0, 32),
    ("EMU_CFG_10", 4106, RW, "emu.cfg", 320, 0, 32),
    ("EMU_CFG_11", 4107, RW, "emu.cfg", 352, 0, 32),
    ("EMU_CFG_12", 4108, RW, "emu.cfg", 384, 0, 32),
    ("EMU_CFG_13", 4109, RW, "emu.cfg", 416, 0, 32),
    ("EMU_CFG_14", 4110, RW, "emu.cfg", 448, 0, 32),
    ("EMU_CFG_15", 4111, RW, "emu.cfg", 480, 0, 32),
    ("EMU_CFG_16", 4112, RW, "emu.cfg", 512, 0, 32),
    ("EMU_CFG_17", 4113, RW, "emu.cfg", 544, 0, 32),
    ("EMU_CFG_18", 4114, RW, "emu.cfg", 576, 65536, 32),
    ("EMU_CFG_19", 4115, RW, "emu.cfg", 608, 0, 32),
    ("EMU_CFG_20", 4116, RW, "emu.cfg", 640, 0, 32),
    ("TRAFFIC_CFG_0", 4160, RW, "emu.traffic", 0, 0, 32),
    ("TRAFFIC_CFG_1", 4161, RW, "emu.traffic", 32, 0, 32),
    ("TRAFFIC_CFG_2", 4162, RW, "emu.traffic", 64, 0, 7),
    ("TRAFFIC_CONTROL", 4176, RW, "emu.control", 0, 0, 2),
    ("TRAFFIC_BUSY", 4177, RO, "emu.busy", 0, 0, 32),
    ("TRAFFIC_STEPS", 4178, RO, "emu.steps", 0, 0, 32),
    ("TAP_CFG_0", 4352, RW, "tap.cfg", 0, 0, 32),
    ("TAP_CFG_1", 4353, RW, "tap.cfg", 32, 0, 32),
    ("TAP_CFG_2", 4354, RW, "tap.cfg", 64, 0, 5),
    ("TAP_READ", 4368, RW, "tap.read", 0, 0, 20),
    ("TAP_DATA_LO", 4369, RO, "tap.data", 0, 0, 32),
    ("TAP_DATA_HI", 4370, RO, "tap.data", 32, 0, 32),
    ("TAP_RECORD", 4371, RW, "tap.record", 0, 0, 2),
]
FRAME_TYPES = {"INFO": 0x01, "STATUS": 0x02, "COUNTERS": 0x03, "HISTOGRAM": 0x04,
               "TRACE": 0x05, "RESPONSE": 0x06, "TRUTH": 0x07, "TRACE_BATCH": 0x7F,
               "COMMAND": 0x80}
OPCODES = {"PING": 0x00, "READ_INFO": 0x01, "READ_REG": 0x02, "WRITE_REG": 0x03,
           "SNAPSHOT": 0x04, "READ_HISTOGRAMS": 0x05, "CLEAR": 0x06, "READ_TRUTH": 0x07}
#: TRUTH's fields (name, bit offset, bits) for 48-bit timestamps.
TRUTH_LAYOUT = [("die", 0, 16), ("timestamp", 16, 48), ("counters", 64, 768)]


def _facts(layout):
    return [(name, f.offset, data.Layout.cast(f.shape).size if isinstance(f.shape, data.Layout)
             else data.Shape.cast(f.shape).width) for name, f in data.Layout.cast(layout)]


def _build():
    params = SnifferParams(channels=2, tag_bits=4)
    core = DeviceCore(params, clock_hz=48_000_000, uart_divisor=16, board="t",
                      emulator=EmuParams(dies=2), tap=TapParams(targets=2, sniffer=params))
    # Elaborated, so that no part of it is left for the garbage collector to report as unused
    # (Amaranth's UnusedElaboratable) during whichever test happens to run then.
    Fragment.get(core, None)
    return params, core.controller


def test_wire_is_unchanged():
    params, link = _build()
    layout = PROTOCOL.info_layout(params)
    assert _facts(layout) == INFO_LAYOUT
    info = link._info_values()
    packed = 0
    for name, offset, _ in INFO_LAYOUT:
        value = info[name]
        packed |= (int.from_bytes(bytes(value), "little") if name == "board" else value) << offset
    assert packed.to_bytes(len(INFO_BYTES), "little") == INFO_BYTES
    assert [(r.name, r.address, r.access.value, r.field, r.shift, r.reset, r.bits)
            for r in link.registers] == REGISTERS
    types = {t.name: int(t) for t in PROTOCOL.frame_types}
    assert types == FRAME_TYPES
    opcodes = {op.name: int(op) for op in protocol.Opcode}
    opcodes.update({op.name: int(op) for kind in KINDS for op in kind.opcodes})
    assert opcodes == OPCODES
    assert _facts(PROTOCOL.payload_layout(params, EmuFrameType.TRUTH)) == TRUTH_LAYOUT
    assert link.extension.source.opcode == OPCODES["READ_TRUTH"]
    # The host reads those INFO bytes back to the same fields.
    decoded = hp.decode_frame_bytes(hp.frame_bytes(protocol.FrameType.INFO, INFO_BYTES), None)
    assert (decoded.emu_dies, decoded.emu_cfg_bits, decoded.emu_traffic_bits,
            decoded.tag_bits, decoded.tap_targets, decoded.tap_luns) == (2, 672, 71, 4, 2, 1)


def test_the_host_rebuilds_the_register_map_from_info():
    params, link = _build()
    info = hp.decode_frame_bytes(hp.frame_bytes(protocol.FrameType.INFO, INFO_BYTES), None)
    host = PROTOCOL.register_map(params, info=info)
    # (The host's map is a summarising build's: it has TRACE_SUMMARY, which a build without
    # the summariser, as this one, lacks: a read or write of it answers BAD_ADDRESS.)
    assert [(r.name, r.address, r.access, r.bits) for r in host
            if r.name != "TRACE_SUMMARY"] == \
        [(r.name, r.address, r.access, r.bits) for r in link.registers]
    assert "TRACE_SUMMARY" in {r.name for r in host}
    assert set(PROTOCOL.describe(info)) == {"emulator", "tap"}
    # Without the blocks, INFO's fields of theirs are zero and their registers absent.
    plain = hp.Info(0, b"", **hp.info_values(params, clock_hz=1_000_000))
    assert (plain.emu_dies, plain.tap_targets) == (0, 0)
    assert PROTOCOL.describe(plain) == {}
    assert [r.name for r in PROTOCOL.register_map(params, info=plain)] == \
        [r.name for r in protocol.register_map(params)]


def test_extension_frames_decode_on_the_host():
    params = SnifferParams(channels=2)
    layout = PROTOCOL.payload_layout(params, EmuFrameType.TRUTH)
    values = {"die": 1, "timestamp": 12345, "counters": list(range(EMU_COUNTERS))}
    payload = hp.encode_payload(params, EmuFrameType.TRUTH, values)
    assert len(payload) == protocol.layout_bytes(layout)
    frame = hp.decode_frame_bytes(hp.frame_bytes(EmuFrameType.TRUTH, payload), params)
    assert isinstance(frame, Truth) and frame.TYPE is EmuFrameType.TRUTH
    assert (frame.die, frame.timestamp, list(frame.counters)) == (1, 12345,
                                                                  list(range(EMU_COUNTERS)))
    assert frame.to_dict()["type"] == "truth"


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or "")
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("path", [*sorted((ROOT / "hdl" / "link").glob("*.py")),
                                  ROOT / "host" / "device" / "protocol.py",
                                  ROOT / "host" / "device" / "device.py"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_link_core_imports_no_block_it_serves(path):
    for module in _imports(path):
        for block in ("nand_emu", "onfi_tap"):
            assert block not in module, f"{path.name} imports {module}"


def test_the_link_core_names_no_blocks_field():
    # The link's modules (code, not their prose) name no emulator's or tap's field or frame.
    for path in (ROOT / "hdl" / "link").glob("*.py"):
        names = {node.id for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Name)}
        names |= {node.value for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and " " not in node.value}
        bad = {n for n in names if n.startswith(("emu_", "tap_", "EMU", "TAP", "Emu", "Tap"))
               or n in ("TRUTH", "READ_TRUTH")}
        assert not bad, f"{path.name} names {sorted(bad)}"


def test_emulator_extension_ports_and_source():
    ext = emulator_extension(EmuParams(dies=2))
    assert {port.port_name for port in ext.ports} == {"emu_cfg", "emu_traffic", "emu_control",
                                                      "emu_busy", "emu_steps"}
    assert ext.source.frame_type is EmuFrameType.TRUTH
    assert ext.source.units == 2 and ext.source.words == EMU_COUNTERS


def test_extension_must_bind_every_register_field():
    reg = protocol.Register("X", 0x2000, protocol.Access.RW, "ext.x")
    with pytest.raises(ValueError, match="bind fields"):
        LinkExtension(registers=(reg,), ports=())
    ok = LinkExtension(registers=(reg,), ports=(ExtPort("ext.x", 8, protocol.Access.RW),))
    clash = LinkExtension(registers=(protocol.Register("Y", 0x0001, protocol.Access.RW,
                                                      "ext.x"),),
                          ports=(ExtPort("ext.x", 8, protocol.Access.RW),))
    params = SnifferParams(channels=2)
    link = LinkController(params, wire=PROTOCOL, clock_hz=1_000_000, uart_divisor=4,
                          extension=ok)
    assert len(link.ext_x) == 8
    Fragment.get(link, None)
    with pytest.raises(ValueError, match="collide with the link's addresses 0x0001"):
        link_registers(params, extension=clash)


class _Frames(enum.IntEnum, shape=8):
    LOW = 0x05  # a link frame type's number
    MINE = 0x20
    OTHER = 0x21


def test_kinds_that_collide_are_refused():
    def layout(params):
        return data.StructLayout({"x": 8})
    with pytest.raises(ValueError, match="outside the extensions' range"):
        ExtensionKind("bad", frames=(ExtensionFrame(_Frames.LOW, layout),))
    with pytest.raises(TypeError, match="8-bit amaranth.lib.enum.IntEnum"):
        ExtensionKind("bad", opcodes=(0x20,))
    with pytest.raises(ValueError, match="need info_after"):
        ExtensionKind("bad", info=(InfoField("x", 8),))
    with pytest.raises(ValueError, match="multiple of 8"):
        InfoField("x", 4)
    one = ExtensionKind("one", info=(InfoField("one_x", 8),), info_after="board",
                        frames=(ExtensionFrame(_Frames.MINE, layout),))
    with pytest.raises(ValueError, match="INFO field 'one_x' is declared twice"):
        protocol.LinkProtocol([one, ExtensionKind("two", info=(InfoField("one_x", 8),),
                                                  info_after="tag_bits")])
    with pytest.raises(ValueError, match="no field 'nowhere'"):
        protocol.LinkProtocol([ExtensionKind("two", info=(InfoField("x", 8),),
                                             info_after="nowhere")])
    with pytest.raises(ValueError, match="0x20 is taken twice"):
        protocol.LinkProtocol([one, ExtensionKind(
            "two", frames=(ExtensionFrame(_Frames.MINE, layout),))])
    # A new kind after the others: the fields before it keep their places.
    wire = protocol.LinkProtocol([*KINDS, ExtensionKind(
        "three", info=(InfoField("three_x", 16),), info_after="tap_luns",
        frames=(ExtensionFrame(_Frames.OTHER, layout),))])
    params = SnifferParams(channels=2)
    assert _facts(wire.info_layout(params))[:-1] == INFO_LAYOUT
    assert wire.frame_type(0x21) is _Frames.OTHER and wire.frame_type(0x22) is None
    with pytest.raises(ValueError, match="no extension field 'nope'"):
        wire.info_values(params, clock_hz=1, extension=LinkExtension(info={"nope": 1}))

"""The link's extension point: other blocks plug in from outside; the link imports none of them."""

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
from amaranth.hdl import Fragment

from rbscope.gateware.device import emulator_extension
from rbscope.gateware.link import protocol
from rbscope.gateware.link.controller import LinkController, link_registers
from rbscope.gateware.link.extension import ExtPort, LinkExtension
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.rb_sniffer import SnifferParams

LINK_DIR = Path(__file__).resolve().parent.parent / "hdl" / "link"


def test_link_imports_no_block_it_serves():
    for path in LINK_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
            elif isinstance(node, ast.Import):
                module = ",".join(alias.name for alias in node.names)
            else:
                continue
            assert "nand_emu" not in module, f"{path.name} imports {module}"


def test_emulator_extension_matches_the_host_register_map():
    emu = EmuParams(dies=2)
    ext = emulator_extension(emu)
    params = SnifferParams(channels=2)
    # The host rebuilds the registers from INFO's emulator fields: the same names and addresses.
    info = SimpleNamespace(**protocol.info_values(params, clock_hz=1_000_000, emu=ext.emu))
    host = protocol.register_map(params, emu=protocol.EmuLink.from_info(info))
    link = LinkController(params, clock_hz=1_000_000, uart_divisor=4, extension=ext)
    Fragment.get(link, None)  # it elaborates
    assert [(r.name, r.address) for r in link.registers] == [(r.name, r.address) for r in host]
    # One port per register field, named after it.
    assert {port.port_name for port in ext.ports} == {"emu_cfg", "emu_traffic", "emu_control",
                                                      "emu_busy", "emu_steps"}
    assert ext.source.frame_type == protocol.FrameType.TRUTH
    assert ext.source.units == 2 and ext.source.words == protocol.EMU_COUNTERS


def test_extension_must_bind_every_register_field():
    reg = protocol.Register("X", 0x2000, protocol.Access.RW, "ext.x")
    with pytest.raises(ValueError, match="bind fields"):
        LinkExtension(registers=(reg,), ports=())
    ok = LinkExtension(registers=(reg,), ports=(ExtPort("ext.x", 8, protocol.Access.RW),))
    clash = LinkExtension(registers=(protocol.Register("Y", 0x0001, protocol.Access.RW,
                                                      "ext.x"),),
                          ports=(ExtPort("ext.x", 8, protocol.Access.RW),))
    params = SnifferParams(channels=2)
    link = LinkController(params, clock_hz=1_000_000, uart_divisor=4, extension=ok)
    assert len(link.ext_x) == 8
    Fragment.get(link, None)
    with pytest.raises(ValueError, match="collide with the link's addresses 0x0001"):
        link_registers(params, extension=clash)

"""How another block on the chip adds registers and a read source to the link.

The link knows the sniffer; anything else (the NAND emulator, its traffic generator) plugs in
from outside with a :class:`LinkExtension`: its registers (from the protocol's register map), the
ports they bind to, the INFO fields that describe it, and optionally a :class:`ReadSource` that
a command turns into a burst of frames read word by word. ``hdl/link/`` therefore never imports
the blocks it serves.
"""

from dataclasses import dataclass, field

from amaranth.lib import data

from . import protocol

__all__ = ["ExtPort", "ReadSource", "LinkExtension"]


@dataclass(frozen=True)
class ExtPort:
    """A port of the link bound to an extension's registers.

    ``field`` is the registers' ``Register.field`` (e.g. ``"emu.cfg"``); the controller's port is
    named after it with dots as underscores (``emu_cfg``). A read-write port is held by the link
    (an ``Out`` with ``reset``); with ``strobe`` it reads back 0 and is high for the one cycle
    after a write. A read-only port is an ``In`` that the block drives.
    """

    field: str
    width: int
    access: protocol.Access
    reset: int = 0
    strobe: bool = False

    @property
    def port_name(self):
        return self.field.replace(".", "_")


@dataclass(frozen=True)
class ReadSource:
    """Frames of one type, each carrying ``words`` words read from a block, one frame per unit.

    The command ``opcode`` sends frames for units ``0 … units - 1``. The frame's layout
    (``protocol.payload_layout(params, frame_type)``) has a ``unit_field`` (e.g. ``"die"``), a
    ``"timestamp"`` and one array field read word by word through the ports ``ext_read_req``
    (payload: ``unit``, ``index``) and ``ext_read_resp`` (``word_bits`` wide). The source must
    hold a response's payload from its transfer until the next request: the link sends the
    word's bytes from it (as it does from the sniffer's read port).
    """

    frame_type: protocol.FrameType
    opcode: protocol.Opcode
    units: int
    unit_field: str
    words: int
    word_bits: int

    @property
    def request_layout(self):
        return data.StructLayout({"unit": max(1, (self.units - 1).bit_length()),
                                  "index": max(1, (self.words - 1).bit_length())})


@dataclass(frozen=True)
class LinkExtension:
    """Registers, ports, INFO fields and a read source that a block adds to the link.

    Members
    -------
    registers : tuple of protocol.Register
        Added to the register map (their addresses must not collide with the sniffer's).
    ports : tuple of ExtPort
        One per distinct ``Register.field`` of ``registers``.
    info : dict
        INFO fields this extension sets (the others stay as :func:`protocol.info_values` gives).
    emu : protocol.EmuLink, optional
        What INFO says of the emulator (the host rebuilds the register map from it).
    source : ReadSource, optional
    """

    registers: tuple = ()
    ports: tuple = ()
    emu: protocol.EmuLink = None
    source: ReadSource = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        fields = {reg.field for reg in self.registers}
        names = {port.field for port in self.ports}
        if fields != names:
            raise ValueError(f"Extension registers bind fields {sorted(fields)} but its ports "
                             f"are {sorted(names)}")

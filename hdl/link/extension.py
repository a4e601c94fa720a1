"""How another block on the chip adds registers, INFO fields and frames to the link.

The link knows the sniffer and nothing else by name. A kind of block that talks through the link
(the NAND emulator, the bus tap, …) declares, in its own folder (``hdl/<block>/link.py``), an
:class:`ExtensionKind`: the INFO fields that describe it (:class:`InfoField`, zero in a build
without it), the frame types and opcodes allocated to it (:class:`ExtensionFrame`), how the host
rebuilds its description from INFO (``from_info``) and the registers of a description
(``registers``). :class:`~.protocol.LinkProtocol` assembles the wire protocol from the kinds it
is given, in their order.

A build that has the block adds a :class:`LinkExtension`: its registers, the ports they bind to,
the values of its INFO fields, and optionally a :class:`ReadSource` that a command turns into a
burst of frames read word by word. ``hdl/link/`` therefore never imports the blocks it serves.
"""

from dataclasses import dataclass, field

from amaranth.hdl import Shape
from amaranth.lib import data

from . import protocol

__all__ = ["InfoField", "ExtensionFrame", "ExtensionKind", "ExtPort", "ReadSource",
           "LinkExtension"]


@dataclass(frozen=True)
class InfoField:
    """An INFO field that a kind of block declares: ``bits`` wide (a multiple of 8)."""

    name: str
    bits: int

    def __post_init__(self):
        if not isinstance(self.bits, int) or self.bits <= 0 or self.bits % 8:
            raise ValueError(f"INFO field {self.name!r}: its width must be a positive multiple "
                             f"of 8 bits, not {self.bits!r}")


@dataclass(frozen=True)
class ExtensionFrame:
    """A frame type allocated to a kind of block.

    ``type`` is a member of an 8-bit ``amaranth.lib.enum.IntEnum`` the block defines (its value
    in :data:`~.protocol.EXTENSION_FRAME_TYPES`); ``layout(params)`` is its payload layout for a
    device built with ``params`` (a whole number of bytes).
    """

    type: object
    layout: object

    @property
    def name(self):
        return self.type.name


@dataclass(frozen=True)
class ExtensionKind:
    """What the wire protocol carries of one kind of block, whether a build has it or not.

    Members
    -------
    name : str
        A short name (``"emulator"``, ``"tap"``): the key of its description on the host.
    info : tuple of InfoField
        Its INFO fields, in wire order; zero in a build without the block.
    info_after : str
        The INFO field its fields follow (a field of the link's own, or of a kind given before
        it): where they were placed when the kind was added, so that INFO's layout never moves.
    frames : tuple of ExtensionFrame
        Frame types allocated to it.
    opcodes : tuple
        Opcodes allocated to it (members of an 8-bit ``IntEnum``, values in
        :data:`~.protocol.EXTENSION_OPCODES`).
    from_info : callable
        ``from_info(info)``: its description (what :attr:`registers` takes) from an INFO frame
        (any object with INFO's fields as attributes), or ``None`` when the device has no such
        block.
    registers : callable
        ``registers(description)``: its registers (:class:`~.protocol.Register`), the same names
        and addresses as the gateware's.
    """

    name: str
    info: tuple = ()
    info_after: str = None
    frames: tuple = ()
    opcodes: tuple = ()
    from_info: object = None
    registers: object = None

    def __post_init__(self):
        if self.info and self.info_after is None:
            raise ValueError(f"Extension kind {self.name!r}: INFO fields need info_after")
        for frame in self.frames:
            _check_code(self.name, "frame type", frame.type, protocol.EXTENSION_FRAME_TYPES)
        for opcode in self.opcodes:
            _check_code(self.name, "opcode", opcode, protocol.EXTENSION_OPCODES)

    def describe(self, info):
        """Its description from INFO (``None`` without the block, or without ``from_info``)."""
        return None if self.from_info is None else self.from_info(info)


def _check_code(kind, what, member, allowed):
    shape = getattr(type(member), "_amaranth_shape_", None)
    if shape is None or Shape.cast(shape).width != 8 or not hasattr(member, "name"):
        raise TypeError(f"Extension kind {kind!r}: a {what} is a member of an 8-bit "
                        f"amaranth.lib.enum.IntEnum, not {member!r}")
    if int(member) not in allowed:
        raise ValueError(f"Extension kind {kind!r}: {what} {member.name} = {int(member):#04x} is "
                         f"outside the extensions' range {allowed.start:#04x} … "
                         f"{allowed.stop - 1:#04x}")


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

    The command ``opcode`` sends frames for units ``0 … units - 1``. The frame (an
    :class:`ExtensionFrame`) has a ``unit_field`` (e.g. ``"die"``), a ``"timestamp"`` and one
    array field read word by word through the ports ``ext_read_req`` (payload: ``unit``,
    ``index``) and ``ext_read_resp`` (``word_bits`` wide). The source must hold a response's
    payload from its transfer until the next request: the link sends the word's bytes from it
    (as it does from the sniffer's read port).
    """

    frame: ExtensionFrame
    opcode: object
    units: int
    unit_field: str
    words: int
    word_bits: int

    @property
    def frame_type(self):
        return self.frame.type

    @property
    def request_layout(self):
        return data.StructLayout({"unit": max(1, (self.units - 1).bit_length()),
                                  "index": max(1, (self.words - 1).bit_length())})


@dataclass(frozen=True)
class LinkExtension:
    """Registers, ports, INFO values and a read source that a block adds to the link.

    Members
    -------
    registers : tuple of protocol.Register
        Added to the register map (their addresses must not collide with the sniffer's).
    ports : tuple of ExtPort
        One per distinct ``Register.field`` of ``registers``.
    info : dict
        Values of INFO fields its kind declares (the others stay zero).
    source : ReadSource, optional
    """

    registers: tuple = ()
    ports: tuple = ()
    source: ReadSource = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        fields = {reg.field for reg in self.registers}
        names = {port.field for port in self.ports}
        if fields != names:
            raise ValueError(f"Extension registers bind fields {sorted(fields)} but its ports "
                             f"are {sorted(names)}")

    @classmethod
    def joined(cls, *extensions):
        """One extension of several (``None`` entries left out; ``None`` if none is left): their
        registers, ports and INFO values; at most one of them may have a read source."""
        extensions = [e for e in extensions if e is not None]
        if not extensions:
            return None
        if len(extensions) == 1:
            return extensions[0]
        sources = [e.source for e in extensions if e.source is not None]
        if len(sources) > 1:
            raise ValueError("The link serves one read source; these extensions have "
                             f"{len(sources)}")
        info = {}
        for e in extensions:
            info.update(e.info)
        return cls(registers=sum((e.registers for e in extensions), ()),
                   ports=sum((e.ports for e in extensions), ()),
                   source=sources[0] if sources else None, info=info)

"""The NAND emulator's part of the link: its registers, INFO fields and ground-truth frames.

Everything the link carries of the emulator and its traffic generator is declared here, for the
gateware and the host alike: :data:`EMULATOR` (the :class:`~..link.extension.ExtensionKind`:
INFO's ``emu_dies``, ``emu_cfg_bits`` and ``emu_traffic_bits``, the TRUTH frame and the
READ_TRUTH opcode, the registers rebuilt from INFO) and :func:`emulator_extension` (what a build
with an emulator adds to the link). The wire format is documented in ``docs/nand_emu.md``
("Behind the link") and ``docs/link.md``.
"""

from dataclasses import dataclass

from amaranth.lib import data, enum

from ..link import protocol
from ..link.extension import (
    ExtensionFrame,
    ExtensionKind,
    ExtPort,
    InfoField,
    LinkExtension,
    ReadSource,
)
from . import layouts
from .params import EmuConfig

__all__ = ["EmuFrameType", "EmuOpcode", "EMU_COUNTERS", "EMU_COUNTER_BITS", "EmuLink",
           "truth_layout", "emu_registers", "TRUTH", "EMULATOR", "emulator_extension",
           "emulator_link"]

#: Ground-truth counters per emulated die and their width (:class:`~.params.EmuCounter`; the
#: link carries exactly these).
EMU_COUNTERS = 16
EMU_COUNTER_BITS = 48


class EmuFrameType(enum.IntEnum, shape=8):
    """The frame type allocated to the emulator."""

    TRUTH = 0x07  # one emulated die's ground-truth counters


class EmuOpcode(enum.IntEnum, shape=8):
    """The opcode allocated to the emulator."""

    READ_TRUTH = 0x07  # RESPONSE, then one TRUTH frame per emulated die (UNKNOWN_OPCODE if none)


def truth_layout(params):
    """TRUTH: one emulated die's ground-truth counters (``EmuCounter`` order), read at
    ``timestamp`` (sniffer ticks)."""
    return data.StructLayout({
        "die": 16,
        "timestamp": params.timestamp_bits,
        "counters": data.ArrayLayout(EMU_COUNTER_BITS, EMU_COUNTERS),
    })


TRUTH = ExtensionFrame(EmuFrameType.TRUTH, truth_layout)


@dataclass(frozen=True)
class EmuLink:
    """What the link needs to know of a build's NAND emulator (INFO carries the first three).

    The emulator's configuration and the traffic generator's are exposed as 32-bit slices of
    their packed layouts (:mod:`.layouts`); the host packs an ``EmuConfig`` or ``TrafficConfig``
    with the build's ``EmuParams`` and writes the slices.
    """

    dies: int
    cfg_bits: int
    traffic_bits: int
    cfg_reset: int = 0
    traffic_reset: int = 0

    @classmethod
    def from_info(cls, info):
        """From an INFO frame's fields; ``None`` when the device has no emulator."""
        if not getattr(info, "emu_dies", 0):
            return None
        return cls(info.emu_dies, info.emu_cfg_bits, info.emu_traffic_bits)


def emu_registers(emu):
    """The registers of a build's NAND emulator (``emu`` an :class:`EmuLink`)."""
    if not isinstance(emu, EmuLink):
        raise TypeError(f"Emulator description must be an EmuLink, not {emu!r}")
    Access, Register = protocol.Access, protocol.Register
    regs = protocol.packed_registers("EMU_CFG", 0x1000, "emu.cfg", emu.cfg_bits, emu.cfg_reset,
                                     "emulator configuration", 0x40)
    regs += protocol.packed_registers("TRAFFIC_CFG", 0x1040, "emu.traffic", emu.traffic_bits,
                                      emu.traffic_reset, "traffic generator programme", 0x10)
    regs += [
        Register("TRAFFIC_CONTROL", 0x1050, Access.RW, "emu.control", bits=2,
                 doc="write 1: start the traffic generator; 2: stop it (reads back 0 after)"),
        Register("TRAFFIC_BUSY", 0x1051, Access.RO, "emu.busy", doc="1 while it runs"),
        Register("TRAFFIC_STEPS", 0x1052, Access.RO, "emu.steps",
                 doc="operations issued by the traffic generator since its start"),
    ]
    return regs


#: The emulator as the wire protocol carries it. Its INFO fields follow ``board`` (zero in a
#: build without an emulator).
EMULATOR = ExtensionKind(
    name="emulator",
    info=(InfoField("emu_dies", 8), InfoField("emu_cfg_bits", 16),
          InfoField("emu_traffic_bits", 16)),
    info_after="board",
    frames=(TRUTH,),
    opcodes=(EmuOpcode.READ_TRUTH,),
    from_info=EmuLink.from_info,
    registers=emu_registers,
)


def _width(shape):
    if isinstance(shape, data.Layout):
        return shape.size
    return data.Shape.cast(shape).width


def emulator_extension(emu, config=None, traffic=None):
    """The NAND emulator's and traffic generator's part of the link (a :class:`LinkExtension`).

    Parameters
    ----------
    emu : EmuParams
    config : EmuConfig, optional
        The emulator's boot configuration (default: its defaults).
    traffic : TrafficConfig, optional
        The traffic generator's boot programme (default: all zero).

    Returns
    -------
    LinkExtension
        Its registers (with these reset values), their ports, INFO's values and the TRUTH
        frames' read source (:func:`emulator_link` gives its :class:`EmuLink`).
    """
    if emu.counter_bits != EMU_COUNTER_BITS:
        raise ValueError(f"The link carries {EMU_COUNTER_BITS}-bit ground-truth "
                         f"counters; the emulator has {emu.counter_bits}")
    link = emulator_link(emu, config, traffic)
    status = layouts.traffic_status_layout(emu)
    rw, ro = protocol.Access.RW, protocol.Access.RO
    ports = (
        ExtPort("emu.cfg", link.cfg_bits, rw, link.cfg_reset),
        ExtPort("emu.traffic", link.traffic_bits, rw, link.traffic_reset),
        ExtPort("emu.control", 2, rw, strobe=True),
        ExtPort("emu.busy", _width(status["busy"].shape), ro),
        ExtPort("emu.steps", _width(status["steps"].shape), ro),
    )
    truth = ReadSource(TRUTH, EmuOpcode.READ_TRUTH, units=emu.dies, unit_field="die",
                       words=EMU_COUNTERS, word_bits=EMU_COUNTER_BITS)
    return LinkExtension(registers=tuple(emu_registers(link)), ports=ports, source=truth,
                         info={"emu_dies": link.dies, "emu_cfg_bits": link.cfg_bits,
                               "emu_traffic_bits": link.traffic_bits})


def emulator_link(emu, config=None, traffic=None):
    """The :class:`EmuLink` of a build's emulator (``EmuParams``) with its boot configuration
    and traffic programme (reset values of its registers)."""
    config = EmuConfig() if config is None else config
    return EmuLink(
        emu.dies, layouts.config_layout(emu).size, layouts.traffic_layout(emu).size,
        layouts.config_const(emu, config),
        0 if traffic is None else layouts.traffic_const(emu, traffic))

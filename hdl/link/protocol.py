"""The rbscope wire protocol: the one definition used by the gateware and by the host.

Framing
-------
Every frame, in both directions, is ``header + payload + CRC-32`` (CRC-32/ISO-HDLC over header and
payload, sent little-endian), byte-stuffed and delimited (HDLC/SLIP style)::

    END  stuffed(header | payload | crc32)  END

``END`` (0xC0) never occurs inside a frame: a data byte 0xC0 is sent as ``ESC ESC_END`` and 0xDB as
``ESC ESC_ESC``. A receiver resynchronises at the next ``END`` after any corruption; empty frames
(two ``END`` in a row) are ignored. Byte stuffing rather than COBS because it is a single pass
with no look-ahead: the gateware encodes a byte stream on the fly without buffering a frame.
Overhead is 2/256 of the bytes on random data; the worst case (every byte escaped) doubles a frame,
which the bandwidth budget in ``docs/link.md`` allows for.

All multi-byte fields are little-endian. A layout's first field is its first byte: the packed
integer of a ``data.StructLayout`` is converted to bytes with ``int.to_bytes(size, "little")``
(and back with ``layout.from_bits(int.from_bytes(…, "little"))``).

Frames
------
Device → host: ``INFO``, ``STATUS`` (snapshot header), ``COUNTERS`` (one channel's counter row,
part of a snapshot), ``HISTOGRAM`` (a chunk of one channel's bins), ``TRACE`` (one pulse) and
``RESPONSE`` (to a command). Host → device: ``COMMAND``. The header carries a 16-bit sequence number
that the device increments on every frame it sends (a gap tells the host frames were lost) and the
payload length (checked against the type).

Registers
---------
32-bit registers written and read with ``COMMAND`` frames; :func:`register_map` lists them for a
given :class:`SnifferParams`. 64-bit quantities occupy a ``_LO``/``_HI`` pair.
"""

from dataclasses import dataclass, replace

from amaranth.lib import data, enum

from ..rb_sniffer.params import SnifferConfig, SnifferParams

__all__ = [
    "PROTOCOL_VERSION", "GATEWARE_VERSION", "FRAME_END", "FRAME_ESC", "ESC_END", "ESC_ESC",
    "CRC_ALGORITHM", "HIST_CHUNK", "ID_MAGIC", "BOARD_NAME_BYTES",
    "FrameType", "Opcode", "ResponseStatus", "StatusFlags", "Access", "Register",
    "HEADER", "COMMAND", "RESPONSE", "info_layout", "status_layout", "counters_layout",
    "histogram_layout", "trace_layout", "truth_layout", "register_map", "register_values",
    "config_from_registers", "payload_layout",
    "layout_bytes", "EmuLink", "EMU_COUNTERS", "EMU_COUNTER_BITS", "emu_registers",
    "TapLink", "tap_registers", "TAP_READ_GO", "TAP_SPACE_SHIFT", "TAP_DATA_DONE",
    "clock_period_ps", "tick_period_ps", "info_values",
]

PROTOCOL_VERSION = 1
#: Gateware version as (major, minor); sent as ``major << 8 | minor``.
GATEWARE_VERSION = (0, 1)

FRAME_END = 0xC0
FRAME_ESC = 0xDB
ESC_END = 0xDC
ESC_ESC = 0xDD

#: CRC of every frame: CRC-32/ISO-HDLC (as Ethernet, zlib). ``amaranth.lib.crc.catalog`` name.
CRC_ALGORITHM = "CRC32_ISO_HDLC"

#: Histogram bins per HISTOGRAM frame.
HIST_CHUNK = 16
#: Value of the read-only ID register: "RBSC".
ID_MAGIC = 0x43534252
BOARD_NAME_BYTES = 16


class FrameType(enum.IntEnum, shape=8):
    """The ``type`` byte of a frame header."""

    INFO = 0x01
    STATUS = 0x02
    COUNTERS = 0x03
    HISTOGRAM = 0x04
    TRACE = 0x05
    RESPONSE = 0x06
    TRUTH = 0x07
    COMMAND = 0x80


class Opcode(enum.IntEnum, shape=8):
    """What a COMMAND asks for. Every command gets exactly one RESPONSE."""

    PING = 0x00
    READ_INFO = 0x01  # RESPONSE, then an INFO frame
    READ_REG = 0x02  # RESPONSE with value = register
    WRITE_REG = 0x03  # RESPONSE with value = register after the write
    SNAPSHOT = 0x04  # RESPONSE, then STATUS and one COUNTERS frame per channel
    READ_HISTOGRAMS = 0x05  # RESPONSE, then every channel's HISTOGRAM frames
    CLEAR = 0x06  # RESPONSE (value = new epoch) once the clear has taken effect
    READ_TRUTH = 0x07  # RESPONSE, then one TRUTH frame per emulated die (UNKNOWN_OPCODE if none)


class ResponseStatus(enum.IntEnum, shape=8):
    """Outcome of a command, in its RESPONSE."""

    OK = 0x00
    BAD_FRAME = 0x01  # CRC error, framing error or wrong length; tag is 0xFFFF if unreadable
    UNKNOWN_OPCODE = 0x02
    BAD_ADDRESS = 0x03
    READ_ONLY = 0x04
    BAD_VALUE = 0x05


class StatusFlags(enum.IntFlag):
    """Bits of ``STATUS.flags``."""

    QUIESCENT = 0x01
    CLEAR_BUSY = 0x02
    TRACE_ON = 0x04
    SOLICITED = 0x08  # this snapshot answers a SNAPSHOT command (else periodic)


#: Frame header: type, protocol version, sequence number, payload length in bytes.
HEADER = data.StructLayout({
    "type": FrameType,
    "version": 8,
    "seq": 16,
    "length": 16,
})

#: Host → device command.
COMMAND = data.StructLayout({
    "tag": 16,
    "opcode": Opcode,
    "reserved": 8,
    "address": 16,
    "value": 32,
})

#: Device → host answer to one command.
RESPONSE = data.StructLayout({
    "tag": 16,
    "opcode": 8,
    "status": ResponseStatus,
    "address": 16,
    "value": 32,
})


def _check(params):
    if not isinstance(params, SnifferParams):
        raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")


def info_layout(params):
    """INFO: what the device is and how to read it."""
    _check(params)
    return data.StructLayout({
        "protocol_version": 8,
        "gateware_version": 16,
        "channels": 16,
        "classes": 8,
        "row": 8,
        "width_bits": 8,
        "counter_bits": 8,
        "hist_sub_bits": 8,
        "hist_bins": 16,
        "hist_bits": 8,
        "timestamp_bits": 8,
        "glitch_bits": 8,
        "prescaler_bits": 8,
        "clock_hz": 32,
        "prescaler": 16,
        "tick_period_ps": 48,
        "uart_divisor": 16,
        "build_id": 32,
        "board": data.ArrayLayout(8, BOARD_NAME_BYTES),
        # The NAND emulator, when the build has one (else zeros): see EmuLink.
        "emu_dies": 8,
        "emu_cfg_bits": 16,
        "emu_traffic_bits": 16,
        # The opcode-aware bus tap, when the build has one (else zeros): see TapLink. tag_bits
        # is the sniffer's tag input width (its classes follow the tap's tags).
        "tag_bits": 8,
        "tap_targets": 8,
        "tap_luns": 8,
    })


def status_layout(params):
    """STATUS: the header of a snapshot (device-wide state)."""
    _check(params)
    return data.StructLayout({
        "snapshot": 16,
        "timestamp": params.timestamp_bits,
        "quiet_since": params.timestamp_bits,
        "epoch": 16,
        "flags": 8,
        "rx_frames": 32,
        "rx_errors": 32,
        "trace_lost": 32,
    })


def counters_layout(params):
    """COUNTERS: one channel's cumulative counters, read at ``timestamp``.

    ``counters[i]`` is the sniffer's counter-row word ``i`` (classes, then the fixed
    :class:`~rbscope.gateware.rb_sniffer.params.Counter` words); ``trace_lost`` counts this
    channel's trace records dropped because the link was busy. ``epoch`` and ``timestamp`` are
    taken when the frame starts; a clear never lands inside a frame, so a row never mixes epochs.
    """
    _check(params)
    return data.StructLayout({
        "snapshot": 16,
        "channel": 16,
        "epoch": 16,
        "timestamp": params.timestamp_bits,
        "trace_lost": 32,
        "counters": data.ArrayLayout(params.counter_bits, params.counters_per_channel),
    })


def histogram_layout(params):
    """HISTOGRAM: bins ``first … first + HIST_CHUNK - 1`` of one channel (zero past the end)."""
    _check(params)
    return data.StructLayout({
        "channel": 16,
        "first": 16,
        "epoch": 16,
        "timestamp": params.timestamp_bits,
        "bins": data.ArrayLayout(params.hist_bits, HIST_CHUNK),
    })


def trace_layout(params):
    """TRACE: one pulse as the sniffer classified it (``timestamp`` = when it was classified)."""
    _check(params)
    return data.StructLayout({
        "channel": 16,
        "kind": 8,
        "index": 8,
        "width": 32,
        "timestamp": params.timestamp_bits,
    })


#: Ground-truth counters per emulated die and their width (``rbscope.gateware.nand_emu``'s
#: ``EmuCounter``; the link carries exactly these).
EMU_COUNTERS = 16
EMU_COUNTER_BITS = 48


def truth_layout(params):
    """TRUTH: one emulated die's ground-truth counters (``EmuCounter`` order), read at
    ``timestamp`` (sniffer ticks)."""
    _check(params)
    return data.StructLayout({
        "die": 16,
        "timestamp": params.timestamp_bits,
        "counters": data.ArrayLayout(EMU_COUNTER_BITS, EMU_COUNTERS),
    })


@dataclass(frozen=True)
class EmuLink:
    """What the link needs to know of a build's NAND emulator (INFO carries the first three).

    The emulator's configuration and the traffic generator's are exposed as 32-bit slices of
    their packed layouts (``rbscope.gateware.nand_emu.layouts``); the host packs an ``EmuConfig``
    or ``TrafficConfig`` with the build's ``EmuParams`` and writes the slices. The gateware side
    makes one from an ``EmuParams`` (``rbscope.gateware.device.emulator_extension``), so that
    this module and the link need not know the emulator.
    """

    dies: int
    cfg_bits: int
    traffic_bits: int
    cfg_reset: int = 0
    traffic_reset: int = 0

    @classmethod
    def from_info(cls, info):
        """From an INFO frame's fields; ``None`` when the device has no emulator."""
        if not info.emu_dies:
            return None
        return cls(info.emu_dies, info.emu_cfg_bits, info.emu_traffic_bits)


@dataclass(frozen=True)
class TapLink:
    """What the link needs to know of a build's opcode-aware bus tap (INFO carries the first
    two).

    The tap's configuration is exposed as 32-bit slices of its packed layout
    (``rbscope.gateware.onfi_tap.tap.config_layout``, ``cfg_bits`` wide); its counter words are
    read one at a time through ``TAP_READ`` and ``TAP_DATA_LO``/``_HI``. The gateware side makes
    one from a ``TapParams`` (``rbscope.gateware.device.tap_extension``).
    """

    targets: int
    luns: int
    cfg_bits: int
    cfg_reset: int = 0


#: ``TAP_READ``: writing ``TAP_READ_GO | space << TAP_SPACE_SHIFT | index`` reads one word of the
#: tap's counter spaces into ``TAP_DATA``, whose bit ``TAP_DATA_DONE`` is set once it is there.
TAP_READ_GO = 1 << 18
TAP_SPACE_SHIFT = 16
TAP_DATA_DONE = 63


def _packed_registers(prefix, address, path, bits, reset, what, words):
    """Read-write registers ``PREFIX_0`` … at ``address`` … holding a packed layout of ``bits``
    bits (its reset value ``reset``) 32 bits at a time, at config path ``path``; at most
    ``words`` of them (the next registers' address comes after)."""
    if bits > 32 * words:
        raise ValueError(f"{prefix}: the {what} ({bits} bits) does not fit its {words} "
                         f"registers at {address:#06x}… ({32 * words} bits)")
    return [Register(f"{prefix}_{i}", address + i, Access.RW, path, 32 * i,
                     reset=(reset >> 32 * i) & 0xFFFF_FFFF,
                     doc=f"{what}, bits 32i… of its packed layout",
                     bits=min(32, bits - 32 * i))
            for i in range((bits + 31) // 32)]


def tap_registers(tap):
    """The registers of a build's bus tap (``tap`` a :class:`TapLink`; none for ``None``)."""
    if tap is None:
        return []
    if not isinstance(tap, TapLink):
        raise TypeError(f"Tap description must be a TapLink, not {tap!r}")
    regs = _packed_registers("TAP_CFG", 0x1100, "tap.cfg", tap.cfg_bits, tap.cfg_reset,
                             "bus tap configuration", 0x10)
    regs += [
        Register("TAP_READ", 0x1110, Access.RW, "tap.read", bits=19,
                 doc="write GO (bit 18) | space << 16 | index: read one tap counter word "
                     "(reads back 0)"),
        Register("TAP_DATA_LO", 0x1111, Access.RO, "tap.data", 0,
                 doc="the word read (low 32 bits)"),
        Register("TAP_DATA_HI", 0x1112, Access.RO, "tap.data", 32,
                 doc="(high bits; bit 31: the word is there)"),
    ]
    return regs


def clock_period_ps(clock_hz):
    """The system clock period in whole picoseconds (rounded to nearest)."""
    if not isinstance(clock_hz, int) or clock_hz <= 0:
        raise ValueError(f"Clock frequency must be a positive integer (Hz), not {clock_hz!r}")
    return (2 * 10**12 + clock_hz) // (2 * clock_hz)


def tick_period_ps(prescaler, clock_hz):
    """INFO's ``tick_period_ps``: the prescaler (0 acts as 1) times the rounded clock period.

    Informational: the exact tick is ``prescaler / clock_hz``. The gateware computes this very
    product (a constant times its PRESCALER register), and test devices report it too.
    """
    return max(1, prescaler) * clock_period_ps(clock_hz)


def info_values(params, *, clock_hz, prescaler=1, uart_divisor=4, build_id=0, board="",
                emu=None, tap=None):
    """The fields of the INFO frame of a device built with ``params``.

    The one definition of INFO's contents: the gateware sends these values (``prescaler`` and
    ``tick_period_ps`` follow its PRESCALER register), and test devices and synthetic captures
    use them. ``emu`` is the build's :class:`EmuLink`, ``tap`` its :class:`TapLink`, if any.
    """
    _check(params)
    name = board.encode("ascii")
    if len(name) > BOARD_NAME_BYTES:
        raise ValueError(f"Board name must be at most {BOARD_NAME_BYTES} ASCII characters, "
                         f"not {board!r}")
    return {
        "protocol_version": PROTOCOL_VERSION,
        "gateware_version": GATEWARE_VERSION[0] << 8 | GATEWARE_VERSION[1],
        "channels": params.channels, "classes": params.classes, "row": params.row,
        "width_bits": params.width_bits, "counter_bits": params.counter_bits,
        "hist_sub_bits": params.hist_sub_bits, "hist_bins": params.hist_bins,
        "hist_bits": params.hist_bits, "timestamp_bits": params.timestamp_bits,
        "glitch_bits": params.glitch_bits, "prescaler_bits": params.prescaler_bits,
        "clock_hz": clock_hz, "prescaler": prescaler,
        "tick_period_ps": tick_period_ps(prescaler, clock_hz), "uart_divisor": uart_divisor,
        "build_id": build_id, "board": list(name.ljust(BOARD_NAME_BYTES, b"\0")),
        "emu_dies": emu.dies if emu else 0,
        "emu_cfg_bits": emu.cfg_bits if emu else 0,
        "emu_traffic_bits": emu.traffic_bits if emu else 0,
        "tag_bits": params.tag_bits,
        "tap_targets": tap.targets if tap else 0,
        "tap_luns": tap.luns if tap else 0,
    }


def layout_bytes(layout):
    """Size in bytes of a layout (every protocol layout is a whole number of bytes)."""
    size = data.Layout.cast(layout).size
    if size % 8:
        raise ValueError(f"Layout of {size} bits is not a whole number of bytes")
    return size // 8


def payload_layout(params, frame_type):
    """Layout of the payload of ``frame_type`` for a device built with ``params``."""
    return {
        FrameType.INFO: info_layout,
        FrameType.STATUS: status_layout,
        FrameType.COUNTERS: counters_layout,
        FrameType.HISTOGRAM: histogram_layout,
        FrameType.TRACE: trace_layout,
        FrameType.TRUTH: truth_layout,
        FrameType.RESPONSE: lambda p: RESPONSE,
        FrameType.COMMAND: lambda p: COMMAND,
    }[FrameType(frame_type)](params)


class Access(enum.Enum):
    RO = "ro"
    RW = "rw"


@dataclass(frozen=True)
class Register:
    """One 32-bit register.

    ``field`` names what it holds: a path into the sniffer's ``cfg`` (``"prescaler"``,
    ``"windows.2.lo"``, ``"enable"`` with ``shift``) or a link-level setting (``"link.…"``).
    ``shift`` selects which 32-bit slice of a wider field the register holds.
    """

    name: str
    address: int
    access: Access
    field: str
    shift: int = 0
    reset: int = 0
    doc: str = ""
    #: Meaningful bits: the gateware keeps only these, so a host must refuse wider values.
    bits: int = 32

    def check(self, value):
        """Return ``value`` if it fits this register, else raise ``ValueError`` saying why."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{self.name}: a register value is an integer, not {value!r}")
        if not 0 <= value < 1 << self.bits:
            raise ValueError(f"{self.name} holds {self.bits} bit(s): 0 … {(1 << self.bits) - 1}"
                             f", not {value}")
        return value


def register_map(params, *, snapshot_period=0, config=None, emu=None, tap=None):
    """Return the registers of a device built with ``params``, ordered by address.

    ``snapshot_period`` is the reset value of ``SNAPSHOT_PERIOD`` (system clock cycles), which
    the build chooses from its clock (100 ms by default). ``config``, a :class:`SnifferConfig`,
    gives the reset values of the sniffer's registers (a build's default timing preset).
    ``emu``, an :class:`EmuLink`, adds the NAND emulator's and traffic generator's registers;
    ``tap``, a :class:`TapLink`, the bus tap's.
    """
    _check(params)
    regs = _registers(params, snapshot_period) + emu_registers(emu) + tap_registers(tap)
    if config is None:
        return regs
    values = register_values(params, config)
    return [replace(reg, reset=values[reg.name]) if reg.name in values else reg for reg in regs]


def _config_field(reg):
    """``(SnifferConfig attribute, window index or None, 0 for lo / 1 for hi)`` of a sniffer
    register; ``None`` for a link or emulator register."""
    if reg.field.startswith(("link.", "emu.")):
        return None
    parts = reg.field.split(".")
    if parts[0] == "windows":
        return "windows", int(parts[1]), 0 if parts[2] == "lo" else 1
    return parts[0], None, None


def register_values(params, config):
    """Return ``{register name: value}`` of the sniffer registers that hold ``config``.

    The one translation from a :class:`SnifferConfig` to registers (derived from
    :func:`register_map`); ``config`` is validated against ``params`` first (``ValueError``).
    """
    _check(params)
    config = config.validate(params)
    out = {}
    for reg in _registers(params, 0):
        where = _config_field(reg)
        if where is None:
            continue
        name, k, edge = where
        value = getattr(config, name)
        if k is not None:
            value = value[k][edge]
        out[reg.name] = (value >> reg.shift) & ((1 << reg.bits) - 1)
    return out


def config_from_registers(params, registers):
    """Return the :class:`SnifferConfig` that register values ``{name: value}`` describe.

    The inverse of :func:`register_values`. A register missing from ``registers`` takes its
    reset value; a value that is not an integer or does not fit the register raises
    ``ValueError`` naming it (nothing is truncated).
    """
    _check(params)
    if not isinstance(registers, dict):
        raise ValueError(f"register values must be a {{name: value}} object, not "
                         f"{type(registers).__name__}")
    fields = {"prescaler": 0, "glitch_ticks": 0, "idle_ticks": 0, "enable": 0}
    windows = [[0, 0] for _ in range(params.classes)]
    for reg in _registers(params, 0):
        where = _config_field(reg)
        if where is None:
            continue
        value = reg.check(registers.get(reg.name, reg.reset)) << reg.shift
        name, k, edge = where
        if k is None:
            fields[name] |= value
        else:
            windows[k][edge] |= value
    return SnifferConfig(windows=tuple(map(tuple, windows)), **fields).validate(params)


def emu_registers(emu):
    """The registers of a build's NAND emulator (``emu`` an :class:`EmuLink`; none for
    ``None``)."""
    if emu is None:
        return []
    if not isinstance(emu, EmuLink):
        raise TypeError(f"Emulator description must be an EmuLink, not {emu!r}")
    regs = _packed_registers("EMU_CFG", 0x1000, "emu.cfg", emu.cfg_bits, emu.cfg_reset,
                             "emulator configuration", 0x40)
    regs += _packed_registers("TRAFFIC_CFG", 0x1040, "emu.traffic", emu.traffic_bits,
                              emu.traffic_reset, "traffic generator programme", 0x10)
    regs += [
        Register("TRAFFIC_CONTROL", 0x1050, Access.RW, "emu.control", bits=2,
                 doc="write 1: start the traffic generator; 2: stop it (reads back 0 after)"),
        Register("TRAFFIC_BUSY", 0x1051, Access.RO, "emu.busy", doc="1 while it runs"),
        Register("TRAFFIC_STEPS", 0x1052, Access.RO, "emu.steps",
                 doc="operations issued by the traffic generator since its start"),
    ]
    return regs


def _registers(params, snapshot_period):
    regs = [
        Register("ID", 0x0000, Access.RO, "link.id", reset=ID_MAGIC, doc='"RBSC"'),
        Register("PRESCALER", 0x0001, Access.RW, "prescaler", reset=1, bits=params.prescaler_bits,
                 doc="system clock cycles per tick (0 acts as 1)"),
        Register("GLITCH_TICKS", 0x0002, Access.RW, "glitch_ticks", reset=1,
                 bits=params.glitch_bits,
                 doc="lows shorter than this many ticks are glitches"),
        Register("IDLE_TICKS_LO", 0x0003, Access.RW, "idle_ticks", 0, reset=1_000_000,
                 doc="quiescence: ticks all lines must stay ready (low 32 bits)"),
        Register("IDLE_TICKS_HI", 0x0004, Access.RW, "idle_ticks", 32, doc="(high bits)",
                 bits=params.timestamp_bits - 32),
        Register("SNAPSHOT_PERIOD", 0x0005, Access.RW, "link.snapshot_period",
                 reset=snapshot_period, doc="system clock cycles between snapshots; 0: off"),
        Register("HIST_PERIOD", 0x0006, Access.RW, "link.hist_period", reset=0, bits=16,
                 doc="send histograms after every N-th periodic snapshot; 0: on request only"),
        Register("TRACE_ENABLE", 0x0007, Access.RW, "link.trace_enable", reset=0, bits=1,
                 doc="1: send a TRACE frame per pulse while the link has room"),
    ]
    for i in range((params.channels + 31) // 32):
        mask = (1 << min(32, params.channels - 32 * i)) - 1
        regs.append(Register(f"CHANNEL_ENABLE_{i}", 0x0010 + i, Access.RW, "enable", 32 * i,
                             reset=mask, doc=f"enable bits of channels {32 * i}…",
                             bits=min(32, params.channels - 32 * i)))
    for k in range(params.classes):
        regs.append(Register(f"WINDOW_{k}_LO", 0x0100 + 2 * k, Access.RW, f"windows.{k}.lo",
                             doc=f"class {k} window start (ticks, inclusive)",
                             bits=params.width_bits))
        regs.append(Register(f"WINDOW_{k}_HI", 0x0101 + 2 * k, Access.RW, f"windows.{k}.hi",
                             doc=f"class {k} window end (ticks, exclusive)",
                             bits=params.width_bits))
    return regs

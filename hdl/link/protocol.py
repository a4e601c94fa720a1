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
part of a snapshot), ``HISTOGRAM`` (a chunk of one channel's bins), ``TRACE_BATCH`` (up to
:data:`TRACE_BATCH_RECORDS` pulses, the gateware's pulse stream), ``TRACE`` (one pulse: test
devices and older captures) and ``RESPONSE`` (to a command). Host → device: ``COMMAND``. The
header carries a 16-bit sequence number that the device increments on every frame it sends (a
gap tells the host frames were lost) and the payload length (checked against the type).

Registers
---------
32-bit registers written and read with ``COMMAND`` frames; :func:`register_map` lists them for a
given :class:`SnifferParams`. 64-bit quantities occupy a ``_LO``/``_HI`` pair.

Extensions
----------
This module names no block but the sniffer. Another block (the NAND emulator, a bus tap)
declares its INFO fields, frame types, opcodes and registers in its own folder
(``hdl/<block>/link.py``, an :class:`~.extension.ExtensionKind`); a :class:`LinkProtocol`
assembles the whole wire protocol from the kinds it is given (``rbscope.gateware.extensions``
lists them, in wire order). Frame types :data:`EXTENSION_FRAME_TYPES` and opcodes
:data:`EXTENSION_OPCODES` are left to extensions; their registers take addresses from 0x1000 on.
"""

from dataclasses import dataclass, replace
from fractions import Fraction

from amaranth.lib import data, enum

from ..rb_sniffer.params import SnifferConfig, SnifferParams

__all__ = [
    "PROTOCOL_VERSION", "GATEWARE_VERSION", "FRAME_END", "FRAME_ESC", "ESC_END", "ESC_ESC",
    "CRC_ALGORITHM", "HIST_CHUNK", "ID_MAGIC", "BOARD_NAME_BYTES",
    "FrameType", "Opcode", "ResponseStatus", "StatusFlags", "Access", "Register",
    "HEADER", "COMMAND", "RESPONSE", "INFO_FIELDS", "status_layout", "counters_layout",
    "histogram_layout", "trace_layout", "trace_record_layout", "trace_batch_layout",
    "TRACE_BATCH_RECORDS", "TRACE_EMPTY_KIND", "TRACE_TIME_MIN_BITS", "register_map",
    "register_values",
    "config_from_registers", "layout_bytes", "packed_registers",
    "EXTENSION_FRAME_TYPES", "EXTENSION_OPCODES", "LinkProtocol",
    "clock_period_ps", "tick_period_ps", "encode_uart_divisor", "decode_uart_divisor",
    "UART_DIVISOR_FRACTION",
]

PROTOCOL_VERSION = 1
#: Gateware version as (major, minor); sent as ``major << 8 | minor``.
GATEWARE_VERSION = (0, 2)

FRAME_END = 0xC0
FRAME_ESC = 0xDB
ESC_END = 0xDC
ESC_ESC = 0xDD

#: CRC of every frame: CRC-32/ISO-HDLC (as Ethernet, zlib). ``amaranth.lib.crc.catalog`` name.
CRC_ALGORITHM = "CRC32_ISO_HDLC"

#: Histogram bins per HISTOGRAM frame.
HIST_CHUNK = 16
#: Record slots per TRACE_BATCH frame (the frame programme's loop holds at most 32 words).
TRACE_BATCH_RECORDS = 32
#: A TRACE_BATCH slot whose ``kind`` is this holds no record (no :class:`EventKind` has it).
TRACE_EMPTY_KIND = 7
#: Fewest bits of a batch record's time (see :func:`trace_record_layout`).
TRACE_TIME_MIN_BITS = 16
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
    TRACE_BATCH = 0x7F
    COMMAND = 0x80


#: Frame types an extension may take (device to host; see :class:`LinkProtocol`).
EXTENSION_FRAME_TYPES = range(0x07, 0x7F)


class Opcode(enum.IntEnum, shape=8):
    """What a COMMAND asks for. Every command gets exactly one RESPONSE."""

    PING = 0x00
    READ_INFO = 0x01  # RESPONSE, then an INFO frame
    READ_REG = 0x02  # RESPONSE with value = register
    WRITE_REG = 0x03  # RESPONSE with value = register after the write
    SNAPSHOT = 0x04  # RESPONSE, then STATUS and one COUNTERS frame per channel
    READ_HISTOGRAMS = 0x05  # RESPONSE, then every channel's HISTOGRAM frames
    CLEAR = 0x06  # RESPONSE (value = new epoch) once the clear has taken effect


#: Opcodes an extension may take (an opcode the build does not serve: UNKNOWN_OPCODE).
EXTENSION_OPCODES = range(0x07, 0x100)


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


#: INFO's fields of the link's own (the sniffer's and the link's), in wire order; extensions'
#: fields are placed among them (:class:`LinkProtocol`). ``tag_bits`` is the sniffer's tag input
#: width (its classes may follow a bus tap's tags).
INFO_FIELDS = (
    ("protocol_version", 8),
    ("gateware_version", 16),
    ("channels", 16),
    ("classes", 8),
    ("row", 8),
    ("width_bits", 8),
    ("counter_bits", 8),
    ("hist_sub_bits", 8),
    ("hist_bins", 16),
    ("hist_bits", 8),
    ("timestamp_bits", 8),
    ("glitch_bits", 8),
    ("prescaler_bits", 8),
    ("clock_hz", 32),
    ("prescaler", 16),
    ("tick_period_ps", 48),
    ("uart_divisor", 16),
    ("build_id", 32),
    ("board", data.ArrayLayout(8, BOARD_NAME_BYTES)),
    ("tag_bits", 8),
)


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


def trace_record_layout(params):
    """One record of a TRACE_BATCH frame: a TRACE's fields in a few bytes.

    ``kind`` (:data:`TRACE_EMPTY_KIND`: an empty slot, every other field zero), ``index``,
    ``channel`` and ``width`` are the sniffer's (``tag`` too, in a build with tags); ``time`` is
    the low bits of the record's ``timestamp``, as many as make the record a whole number of
    bytes with at least :data:`TRACE_TIME_MIN_BITS` of them (the ECPIX-5's 64 channels: 7 bytes,
    19 bits of time). Its other bits are the batch's ``base``'s.
    """
    _check(params)
    fields = {"kind": 3, "index": params.row_bits, "channel": params.channel_bits,
              "width": params.width_bits}
    if params.tag_bits:
        fields["tag"] = params.tag_bits
    used = sum(fields.values())
    fields["time"] = 8 * -(-(used + TRACE_TIME_MIN_BITS) // 8) - used
    return data.StructLayout(fields)


def trace_batch_layout(params):
    """TRACE_BATCH: up to :data:`TRACE_BATCH_RECORDS` pulses in classification order.

    ``base`` is the timestamp of the first record. Every record of the batch lies in the aligned
    window of ``2**time`` ticks that holds ``base``: its timestamp is ``base`` with the low bits
    replaced by its ``time``. A record outside the window ends the batch (the remaining slots
    are empty) and goes first in the next; slots are empty, too, where the FIFO ran dry while
    the frame was sent. The records of a batch, and the batches, come in the order the pulses
    were classified.
    """
    _check(params)
    record = trace_record_layout(params)
    return data.StructLayout({
        "base": params.timestamp_bits,
        "records": data.ArrayLayout(record.size, TRACE_BATCH_RECORDS),
    })


def clock_period_ps(clock_hz):
    """The system clock period in whole picoseconds (rounded to nearest)."""
    if not isinstance(clock_hz, int) or clock_hz <= 0:
        raise ValueError(f"Clock frequency must be a positive integer (Hz), not {clock_hz!r}")
    return (2 * 10**12 + clock_hz) // (2 * clock_hz)


#: INFO's ``uart_divisor`` of a fractional divisor (``link/uart.py``): this bit set, the
#: divisor in 64ths of a cycle below it (25/3 → 0x8215, 8.328 cycles: 0.06 % off the exact
#: rate, which the gateware keeps). An integer divisor is sent as it is.
UART_DIVISOR_FRACTION = 0x8000


def encode_uart_divisor(divisor):
    """INFO's 16-bit ``uart_divisor`` of a divisor (an integer, or a Fraction)."""
    if isinstance(divisor, int) and not isinstance(divisor, bool):
        if not 0 <= divisor < UART_DIVISOR_FRACTION:
            raise ValueError(f"UART divisor {divisor} does not fit INFO's field")
        return divisor
    d = Fraction(divisor)
    if d.denominator == 1:
        return encode_uart_divisor(int(d))
    sixty_fourths = round(d * 64)
    if not 0 < sixty_fourths < UART_DIVISOR_FRACTION:
        raise ValueError(f"UART divisor {d} does not fit INFO's field")
    return UART_DIVISOR_FRACTION | sixty_fourths


def decode_uart_divisor(value):
    """Clock cycles per bit from INFO's ``uart_divisor`` (a float for a fractional one)."""
    return (value & ~UART_DIVISOR_FRACTION) / 64 if value & UART_DIVISOR_FRACTION else value


def tick_period_ps(prescaler, clock_hz):
    """INFO's ``tick_period_ps``: the prescaler (0 acts as 1) times the rounded clock period.

    Informational: the exact tick is ``prescaler / clock_hz``. The gateware computes this very
    product (a constant times its PRESCALER register), and test devices report it too.
    """
    return max(1, prescaler) * clock_period_ps(clock_hz)


def layout_bytes(layout):
    """Size in bytes of a layout (every protocol layout is a whole number of bytes)."""
    size = data.Layout.cast(layout).size
    if size % 8:
        raise ValueError(f"Layout of {size} bits is not a whole number of bytes")
    return size // 8


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


def register_map(params, *, snapshot_period=0, config=None):
    """Return the link's own registers (the sniffer's and the link's) of a device built with
    ``params``, ordered by address.

    ``snapshot_period`` is the reset value of ``SNAPSHOT_PERIOD`` (system clock cycles), which
    the build chooses from its clock (100 ms by default). ``config``, a :class:`SnifferConfig`,
    gives the reset values of the sniffer's registers (a build's default timing preset). An
    extension's registers come from its kind (:meth:`LinkProtocol.register_map`).
    """
    _check(params)
    regs = _registers(params, snapshot_period)
    if config is None:
        return regs
    values = register_values(params, config)
    return [replace(reg, reset=values[reg.name]) if reg.name in values else reg for reg in regs]


def _config_field(reg):
    """``(SnifferConfig attribute, window index or None, 0 for lo / 1 for hi)`` of a sniffer
    register; ``None`` for a link register."""
    if reg.field.startswith("link."):
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
                 doc="1: send every pulse in TRACE_BATCH frames while the link has room"),
        Register("TRACE_SUMMARY", 0x0008, Access.RW, "link.trace_summary", reset=0,
                 bits=params.classes + 1,
                 doc="bit k < classes: send runs of class-k pulses as first, count and last "
                     "while the trace FIFO is a quarter full; bit `classes`: at any fill "
                     "(builds with the summariser; absent in the others)"),
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


def packed_registers(prefix, address, path, bits, reset, what, words):
    """Read-write registers ``PREFIX_0`` … at ``address`` … holding a packed layout of ``bits``
    bits (its reset value ``reset``) 32 bits at a time, at config path ``path``; at most
    ``words`` of them (the next registers' address comes after). For extensions, whose
    configurations are packed layouts."""
    if bits > 32 * words:
        raise ValueError(f"{prefix}: the {what} ({bits} bits) does not fit its {words} "
                         f"registers at {address:#06x}… ({32 * words} bits)")
    return [Register(f"{prefix}_{i}", address + i, Access.RW, path, 32 * i,
                     reset=(reset >> 32 * i) & 0xFFFF_FFFF,
                     doc=f"{what}, bits 32i… of its packed layout",
                     bits=min(32, bits - 32 * i))
            for i in range((bits + 31) // 32)]


class LinkProtocol:
    """The wire protocol of the link and the extension kinds given, in their order.

    What the gateware sends and the host decodes: INFO's layout (the link's fields with each
    kind's placed after its ``info_after``), the frame types and opcodes (the link's and the
    kinds'), the payload layouts, and the register map a host rebuilds from INFO. A kind's INFO
    fields are in INFO whether or not a build has the block (zero then), so INFO's layout
    depends only on the kinds, never on a build.

    Parameters
    ----------
    kinds : sequence of ExtensionKind
        ``rbscope.gateware.extension.ExtensionKind`` s; names, INFO fields, frame types and
        opcodes must not collide (``ValueError`` naming the clash).
    """

    def __init__(self, kinds=()):
        self.kinds = tuple(kinds)
        names = [kind.name for kind in self.kinds]
        _unique("extension kind", names)
        info = list(INFO_FIELDS)
        for kind in self.kinds:
            if not kind.info:
                continue
            at = [name for name, _ in info]
            if kind.info_after not in at:
                raise ValueError(f"Extension kind {kind.name!r}: INFO has no field "
                                 f"{kind.info_after!r} to follow")
            _unique("INFO field", at + [f.name for f in kind.info])
            i = at.index(kind.info_after) + 1
            info[i:i] = [(f.name, f.bits) for f in kind.info]
        self._info = data.StructLayout(dict(info))
        self.info_fields = tuple(name for name, _ in info)
        self.frames = {}
        for kind in self.kinds:
            for frame in kind.frames:
                if int(frame.type) in self.frames:
                    raise ValueError(f"Frame type {int(frame.type):#04x} is taken twice "
                                     f"({self.frames[int(frame.type)].name}, {frame.name})")
                self.frames[int(frame.type)] = frame
        _unique("extension opcode", [int(op) for kind in self.kinds for op in kind.opcodes])

    def __repr__(self):
        return f"LinkProtocol({[kind.name for kind in self.kinds]})"

    def kind(self, name):
        """The extension kind called ``name`` (``KeyError`` if there is none)."""
        for kind in self.kinds:
            if kind.name == name:
                return kind
        raise KeyError(f"no extension kind {name!r}; kinds: {[k.name for k in self.kinds]}")

    @property
    def frame_types(self):
        """Every frame type: the link's (:class:`FrameType`) and the extensions'."""
        return (*FrameType, *(frame.type for frame in self.frames.values()))

    def frame_type(self, code):
        """The frame type member of ``code``, or ``None`` for a type nobody declared."""
        try:
            return FrameType(code)
        except ValueError:
            frame = self.frames.get(code)
            return None if frame is None else frame.type

    def info_layout(self, params):
        """INFO: what the device is and how to read it."""
        _check(params)
        return self._info

    def payload_layout(self, params, frame_type):
        """Layout of the payload of ``frame_type`` for a device built with ``params``."""
        _check(params)
        frame = self.frames.get(int(frame_type))
        if frame is not None:
            return frame.layout(params)
        return {
            FrameType.INFO: self.info_layout,
            FrameType.STATUS: status_layout,
            FrameType.COUNTERS: counters_layout,
            FrameType.HISTOGRAM: histogram_layout,
            FrameType.TRACE: trace_layout,
            FrameType.TRACE_BATCH: trace_batch_layout,
            FrameType.RESPONSE: lambda p: RESPONSE,
            FrameType.COMMAND: lambda p: COMMAND,
        }[FrameType(frame_type)](params)

    def info_values(self, params, *, clock_hz, prescaler=1, uart_divisor=4, build_id=0,
                    board="", extension=None):
        """The fields of the INFO frame of a device built with ``params``.

        The one definition of INFO's contents: the gateware sends these values (``prescaler``
        and ``tick_period_ps`` follow its PRESCALER register), and test devices and synthetic
        captures use them. ``extension`` (a ``LinkExtension``, e.g. several joined) sets the
        fields of the kinds the build has; the other kinds' fields are zero.
        """
        _check(params)
        name = board.encode("ascii")
        if len(name) > BOARD_NAME_BYTES:
            raise ValueError(f"Board name must be at most {BOARD_NAME_BYTES} ASCII characters, "
                             f"not {board!r}")
        values = dict.fromkeys(self.info_fields, 0)
        values.update({
            "protocol_version": PROTOCOL_VERSION,
            "gateware_version": GATEWARE_VERSION[0] << 8 | GATEWARE_VERSION[1],
            "channels": params.channels, "classes": params.classes, "row": params.row,
            "width_bits": params.width_bits, "counter_bits": params.counter_bits,
            "hist_sub_bits": params.hist_sub_bits, "hist_bins": params.hist_bins,
            "hist_bits": params.hist_bits, "timestamp_bits": params.timestamp_bits,
            "glitch_bits": params.glitch_bits, "prescaler_bits": params.prescaler_bits,
            "clock_hz": clock_hz, "prescaler": prescaler,
            "tick_period_ps": tick_period_ps(prescaler, clock_hz),
            "uart_divisor": encode_uart_divisor(uart_divisor), "build_id": build_id,
            "board": list(name.ljust(BOARD_NAME_BYTES, b"\0")),
            "tag_bits": params.tag_bits,
        })
        if extension is not None:
            core = {name for name, _ in INFO_FIELDS}
            for key, value in extension.info.items():
                if key not in values or key in core:
                    raise ValueError(f"INFO has no extension field {key!r} (the extension "
                                     f"kinds declare {sorted(set(values) - core)})")
                values[key] = value
        return values

    def describe(self, info):
        """``{kind name: description}`` of the extensions INFO says the device has."""
        out = {}
        for kind in self.kinds:
            description = kind.describe(info)
            if description is not None:
                out[kind.name] = description
        return out

    def register_map(self, params, *, snapshot_period=0, config=None, info=None):
        """The registers of a device built with ``params``: :func:`register_map`'s and, with
        ``info`` (an INFO frame), those of every extension INFO says the device has (as each
        kind rebuilds them from INFO: the same names and addresses as the gateware's)."""
        regs = register_map(params, snapshot_period=snapshot_period, config=config)
        if info is not None:
            described = self.describe(info)
            for kind in self.kinds:
                if kind.name in described:
                    regs += list(kind.registers(described[kind.name]))
        return regs


def _unique(what, names):
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"The {what} {name!r} is declared twice")
        seen.add(name)

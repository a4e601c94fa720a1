"""Host side of the rbscope wire protocol: framing, frame objects, commands, link accounting.

Everything on the wire is defined once, in :mod:`rbscope.gateware.link.protocol` (the gateware
encodes with those very layouts). This module only turns bytes into those layouts and back:

* :func:`stuff` / :func:`unstuff` — HDLC/SLIP byte stuffing with ``FRAME_END`` / ``FRAME_ESC``;
* :func:`encode_frame` — ``END stuffed(header | payload | crc32) END``;
* :class:`FrameDecoder` — an incremental decoder: ``feed(bytes) -> [Frame, …]``. It never raises
  on bad input and never returns a frame whose CRC, version, type or length is wrong; every kind
  of rejection is counted in :class:`LinkStats`;
* typed frames (:class:`Info`, :class:`Status`, :class:`Counters`, :class:`Histogram`,
  :class:`Trace`, :class:`Response`, :class:`Command`) whose fields are those of the layouts;
  INFO's fields and the extensions' frames (:func:`frame_class`) are made from the
  declarations of the wire protocol (``rbscope.gateware.extensions.PROTOCOL``), so this module
  names no block but the sniffer;
* :class:`LinkMonitor` — sequence-gap accounting (16-bit wrap) and device-reset detection.

Decoding uses the protocol layouts through :func:`compile_layout`, which walks a layout once
(field names, offsets, widths, enum shapes — nothing else) and returns a function equivalent to
``layout.from_bits(int.from_bytes(payload, "little"))`` followed by reading every field, about
fifty times faster than going through Amaranth's ``data.Const`` objects. The tests check that the
two agree on every layout; the layouts themselves are never restated here.
"""

import collections
import enum as py_enum
import zlib
from dataclasses import dataclass, field, fields, make_dataclass

from amaranth.hdl import Shape
from amaranth.lib import data

from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import (
    FRAME_END,
    FRAME_ESC,
    HEADER,
    PROTOCOL_VERSION,
    FrameType,
    Opcode,
    ResponseStatus,
    StatusFlags,
)
from rbscope.gateware.link.summary import COUNT_MAX, SUMMARY_KIND
from rbscope.gateware.rb_sniffer.params import Counter, EventKind, SnifferParams

__all__ = [
    "ProtocolError", "LinkStats", "Frame", "Info", "Status", "Snapshot", "Counters", "Histogram",
    "Trace", "TraceBatch", "trace_records", "frame_class", "info_values",
    "Response", "Command", "FrameDecoder", "LinkMonitor", "LinkEvent", "compile_layout",
    "compile_encoder", "stuff", "unstuff", "encode_frame", "encode_payload", "encode_command",
    "frame_bytes", "decode_frame_bytes", "params_from_info", "HEADER_BYTES", "CRC_BYTES",
    "NO_TAG", "ResponseStatus",
]


HEADER_BYTES = wire.layout_bytes(HEADER)
CRC_BYTES = 4
#: Tag of a RESPONSE to a command frame the device could not read (CRC or length error).
NO_TAG = 0xFFFF

_END = bytes([FRAME_END])
_ESC = bytes([FRAME_ESC])
_ESC_END = bytes([FRAME_ESC, wire.ESC_END])
_ESC_ESC = bytes([FRAME_ESC, wire.ESC_ESC])
#: zlib.crc32 over data followed by its own little-endian CRC-32 (the CRC-32 "residue").
_CRC_RESIDUE = zlib.crc32(b"\x00" * 4 + zlib.crc32(b"\x00" * 4).to_bytes(4, "little"))


class ProtocolError(ValueError):
    """Bytes that cannot be decoded; the message names the offending field or byte offset."""


# Layout compilation ------------------------------------------------------------------------------


def _width(shape):
    if isinstance(shape, data.Layout):
        return shape.size
    return Shape.cast(shape).width


def _is_enum(shape):
    return isinstance(shape, type) and issubclass(shape, py_enum.Enum)


def _enum_conv(shape):
    members = {int(m.value): m for m in shape}

    def conv(v, members=members):
        return members.get(v, v)  # an unknown value stays an int (checked by the caller)
    return conv


def compile_layout(layout):
    """Return ``decode(value) -> dict`` for the packed integer ``value`` of ``layout``.

    Structs become dicts, arrays tuples, enum fields enum members (or the plain int when the
    value is not a member), other fields ints. Equivalent to reading every field of
    ``layout.from_bits(value)``.
    """
    layout = data.Layout.cast(layout)

    def build(shape, offset):
        if isinstance(shape, data.ArrayLayout):
            elem, n = shape.elem_shape, shape.length
            w = _width(elem)
            if not isinstance(elem, data.Layout) and not _is_enum(elem):
                mask = (1 << w) - 1
                offsets = [offset + i * w for i in range(n)]
                return lambda v: tuple((v >> o) & mask for o in offsets)
            subs = [build(elem, offset + i * w) for i in range(n)]
            return lambda v: tuple(s(v) for s in subs)
        if isinstance(shape, data.Layout):
            items = [(name, build(f.shape, offset + f.offset)) for name, f in shape]
            return lambda v: {name: s(v) for name, s in items}
        mask = (1 << _width(shape)) - 1
        if _is_enum(shape):
            conv = _enum_conv(shape)
            return lambda v: conv((v >> offset) & mask)
        return lambda v: (v >> offset) & mask

    return build(layout, 0)


def compile_encoder(layout):
    """Return ``encode(values) -> int``, the inverse of :func:`compile_layout`'s function.

    ``values`` is a dict (struct) / sequence (array) / int or enum member, as decoded. Missing
    struct members are zero. Out-of-range values raise :class:`ProtocolError` naming the field.
    """
    layout = data.Layout.cast(layout)

    def build(shape, offset, path):
        if isinstance(shape, data.ArrayLayout):
            w = _width(shape.elem_shape)
            subs = [build(shape.elem_shape, offset + i * w, f"{path}[{i}]")
                    for i in range(shape.length)]

            def enc_array(v, subs=subs, path=path):
                if len(v) > len(subs):
                    raise ProtocolError(f"{path} has at most {len(subs)} elements, not {len(v)}")
                out = 0
                for s, x in zip(subs, v, strict=False):
                    out |= s(x)
                return out
            return enc_array
        if isinstance(shape, data.Layout):
            subs = {name: build(f.shape, offset + f.offset, f"{path}.{name}" if path else name)
                    for name, f in shape}

            def enc_struct(v, subs=subs, path=path):
                unknown = set(v) - set(subs)
                if unknown:
                    raise ProtocolError(f"{path or 'layout'} has no field {sorted(unknown)[0]!r}")
                out = 0
                for name, x in v.items():
                    out |= subs[name](x)
                return out
            return enc_struct
        width = _width(shape)

        def enc_int(v, offset=offset, width=width, path=path):
            v = int(v)
            if not 0 <= v < 1 << width:
                raise ProtocolError(f"{path} must be from 0 to {(1 << width) - 1}, not {v}")
            return v << offset
        return enc_int

    return build(layout, 0, "")


class _Bounded(collections.OrderedDict):
    """A cache of at most ``size`` entries, least recently used first out."""

    def __init__(self, size, make):
        super().__init__()
        self.size = size
        self.make = make

    def get_or_make(self, key):
        try:
            self.move_to_end(key)
            return self[key]
        except KeyError:
            self[key] = value = self.make(key)
            while len(self) > self.size:
                self.popitem(last=False)
            return value


# Per distinct device parameters, a few layouts: bounded, since INFO frames (from a corrupt link
# or a fuzzer) may describe any number of parameter sets.
_decoders = _Bounded(128, compile_layout)
_encoders = _Bounded(128, compile_encoder)


def _decoder(layout):
    return _decoders.get_or_make(layout)


def _encoder(layout):
    return _encoders.get_or_make(layout)


# Frames ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Frame:
    """A frame whose CRC, version and length were checked.

    ``seq`` is the header sequence number, ``raw`` the unstuffed ``header | payload`` (without
    the CRC) exactly as received, so it can be stored and decoded again later; ``gap`` is the
    number of device frames missing before this one according to the sequence numbers.
    """

    seq: int
    raw: bytes = field(repr=False, compare=False)
    gap: int = field(default=0, repr=False, compare=False)

    TYPE = None

    @property
    def payload(self):
        return self.raw[HEADER_BYTES:]

    def to_dict(self):
        """Return the frame as a JSON-ready dict (``type`` and every field)."""
        out = {"type": self.TYPE.name.lower()}
        for f in fields(self):
            if f.name in ("raw", "gap"):
                continue
            v = getattr(self, f.name)
            if isinstance(v, (tuple, list)):
                v = [int(x) for x in v]
            elif isinstance(v, py_enum.Enum):
                v = v.name
            elif isinstance(v, bytes):
                v = v.hex()
            out[f.name] = v
        return out


class _InfoMethods:
    """What :class:`Info` adds to its fields."""

    __slots__ = ()

    @property
    def board_name(self):
        """The board name (NUL padding removed, undecodable bytes replaced)."""
        return bytes(self.board).rstrip(b"\0").decode("ascii", "replace")

    @property
    def version_string(self):
        return f"{self.gateware_version >> 8}.{self.gateware_version & 0xFF}"

    @property
    def params(self):
        """The :class:`SnifferParams` of the device (see :func:`params_from_info`)."""
        return params_from_info(self)

    def to_dict(self):
        out = Frame.to_dict(self)
        out["board"] = self.board_name
        return out


def _layout_fields(layout):
    """Dataclass fields of a frame layout's fields, in order: arrays as tuples, the rest ints."""
    return [(name, tuple, field(default=())) if isinstance(f.shape, data.ArrayLayout)
            else (name, int, field(default=0)) for name, f in data.Layout.cast(layout)]


#: INFO: what the device is and how to read it, one attribute per field of the protocol's INFO
#: layout (the link's own and every extension kind's: ``rbscope.gateware.extensions``).
Info = make_dataclass(
    "Info", _layout_fields(PROTOCOL.info_layout(SnifferParams(channels=1))),
    bases=(_InfoMethods, Frame), slots=True,
    namespace={"TYPE": FrameType.INFO, "__module__": __name__,
               "__doc__": "INFO: what the device is and how to read it (fields of the "
                          "protocol's INFO layout)."})


@dataclass(slots=True)
class Status(Frame):
    """STATUS: the header of a snapshot (fields of ``status_layout``)."""

    snapshot: int = 0
    timestamp: int = 0
    quiet_since: int = 0
    epoch: int = 0
    flags: int = 0
    rx_frames: int = 0
    rx_errors: int = 0
    trace_lost: int = 0

    TYPE = FrameType.STATUS

    @property
    def solicited(self):
        return bool(self.flags & StatusFlags.SOLICITED)

    @property
    def quiescent(self):
        return bool(self.flags & StatusFlags.QUIESCENT)

    def to_dict(self):
        out = Frame.to_dict(self)
        out["flags"] = [f.name for f in StatusFlags if self.flags & f]
        return out


@dataclass(slots=True)
class Counters(Frame):
    """COUNTERS: one channel's cumulative counter row (fields of ``counters_layout``)."""

    snapshot: int = 0
    channel: int = 0
    epoch: int = 0
    timestamp: int = 0
    trace_lost: int = 0
    counters: tuple = ()

    TYPE = FrameType.COUNTERS

    def classes(self, params):
        """The K class counts."""
        return self.counters[:params.classes]

    def counter(self, params, counter):
        """The value of a fixed :class:`~rbscope.gateware.rb_sniffer.params.Counter`."""
        return self.counters[params.classes + Counter(counter)]


@dataclass(slots=True)
class Histogram(Frame):
    """HISTOGRAM: bins ``first … first + HIST_CHUNK - 1`` of one channel."""

    channel: int = 0
    first: int = 0
    epoch: int = 0
    timestamp: int = 0
    bins: tuple = ()

    TYPE = FrameType.HISTOGRAM


@dataclass(slots=True)
class Trace(Frame):
    """TRACE: one pulse as classified (``kind`` an :class:`EventKind` when valid)."""

    channel: int = 0
    kind: int = 0
    index: int = 0
    width: int = 0
    timestamp: int = 0

    TYPE = FrameType.TRACE

    def to_dict(self):
        out = Frame.to_dict(self)
        try:
            out["kind"] = EventKind(self.kind).name
        except ValueError:
            pass
        return out


@dataclass(slots=True)
class TraceBatch(Frame):
    """TRACE_BATCH: up to ``TRACE_BATCH_RECORDS`` pulses (``records``: the packed record slots,
    :func:`~rbscope.gateware.link.protocol.trace_record_layout`), the first at ``base``.

    :meth:`traces` unpacks them into :class:`Trace` frames (this frame's ``seq`` and ``raw``),
    which is how every reader of pulse records sees them (:func:`trace_records`).
    """

    base: int = 0
    records: tuple = ()

    TYPE = FrameType.TRACE_BATCH

    def traces(self, params):
        """The batch's records as :class:`Trace` frames, in order, empty slots left out.

        Raises :class:`ProtocolError` when the first record's time is not the base's, a
        record's time goes backwards, or a record names a channel the device does not have.
        """
        (kind_at, kind_mask), (index_at, index_mask), (channel_at, channel_mask), \
            (width_at, width_mask), (time_at, time_mask) = _record_fields(params)
        window = self.base & ~time_mask
        out = []
        last = None
        for slot, bits in enumerate(self.records):
            kind = bits >> kind_at & kind_mask
            if kind == wire.TRACE_EMPTY_KIND:
                continue
            timestamp = window | bits >> time_at & time_mask
            if (last is None and timestamp != self.base) or (last is not None
                                                              and timestamp < last):
                raise ProtocolError(f"TRACE_BATCH seq {self.seq}: slot {slot}'s time "
                                    f"{timestamp} does not follow base {self.base}"
                                    + ("" if last is None else f" and {last}"))
            channel = bits >> channel_at & channel_mask
            if channel >= params.channels:
                raise ProtocolError(f"TRACE_BATCH seq {self.seq}: slot {slot} names channel "
                                    f"{channel} of a {params.channels}-channel device")
            last = timestamp
            out.append(Trace(self.seq, self.raw, channel=channel, kind=kind,
                             index=bits >> index_at & index_mask,
                             width=bits >> width_at & width_mask, timestamp=timestamp))
        return out

    def summaries(self, params):
        """``(channel, pulses)`` of each SUMMARY record in the batch (the trace summariser's,
        ``docs/link.md`` "Trace summary"), in order: the pulses the device counted instead of
        sending. Only the kind, channel and count of each slot are read, so a live display can
        keep up with a full link; :meth:`traces` checks the rest."""
        (kind_at, kind_mask), _, (channel_at, channel_mask), (width_at, _), _ = \
            _record_fields(params)
        out = []
        for bits in self.records:
            if bits >> kind_at & kind_mask == SUMMARY_KIND:
                out.append((bits >> channel_at & channel_mask,
                            bits >> width_at & COUNT_MAX))
        return out


def _make_record_fields(params):
    layout = wire.trace_record_layout(params)
    return tuple((layout[name].offset, (1 << layout[name].width) - 1)
                 for name in ("kind", "index", "channel", "width", "time"))


#: (offset, mask) of a batch record's kind, index, channel, width and time, per parameter set.
_RECORD_FIELDS = _Bounded(16, _make_record_fields)


def _record_fields(params):
    return _RECORD_FIELDS.get_or_make(params)


def trace_records(frame, params):
    """The pulse records a frame carries: a TRACE itself, a TRACE_BATCH's unpacked
    (:meth:`TraceBatch.traces`), none for any other frame."""
    if isinstance(frame, Trace):
        return [frame]
    if isinstance(frame, TraceBatch):
        return frame.traces(params)
    return []


@dataclass(slots=True)
class Response(Frame):
    """RESPONSE to a command (``status`` a :data:`ResponseStatus` member or an unknown int)."""

    tag: int = 0
    opcode: int = 0
    status: int = 0
    address: int = 0
    value: int = 0

    TYPE = FrameType.RESPONSE

    @property
    def ok(self):
        return self.status == ResponseStatus.OK

    def to_dict(self):
        out = Frame.to_dict(self)
        try:
            out["opcode"] = Opcode(self.opcode).name
        except ValueError:
            pass
        return out


@dataclass(slots=True)
class Command(Frame):
    """COMMAND from the host (decoded by devices, e.g. the fake device)."""

    tag: int = 0
    opcode: int = 0
    reserved: int = 0
    address: int = 0
    value: int = 0

    TYPE = FrameType.COMMAND


@dataclass
class Snapshot:
    """A complete snapshot: the STATUS frame and one COUNTERS frame per channel, in channel
    order (``time_ns``: host time of its STATUS; ``arrival``: frames received before it
    completed, on a live link)."""

    status: Status
    counters: list  # index = channel
    time_ns: int = 0
    arrival: int = field(default=0, repr=False)  # frames received before it completed

    @property
    def timestamp(self):
        return self.status.timestamp

    @property
    def epoch(self):
        return self.status.epoch

    @property
    def solicited(self):
        return self.status.solicited


#: Payload layouts that do not depend on the device's parameters.
_FIXED_TYPES = (FrameType.INFO, FrameType.RESPONSE, FrameType.COMMAND)
#: Any params will do for layouts that do not depend on them (and for the names of fields).
_ANY_PARAMS = SnifferParams(channels=1)


def _extension_class(frame):
    name = "".join(part.title() for part in frame.name.split("_"))
    return make_dataclass(
        name, _layout_fields(frame.layout(_ANY_PARAMS)), bases=(Frame,), slots=True,
        namespace={"TYPE": frame.type, "__module__": __name__,
                   "__doc__": f"{frame.name}: a frame of an extension (its layout's fields)."})


_CLASSES = {cls.TYPE: cls for cls in (Info, Status, Counters, Histogram, Trace, TraceBatch,
                                      Response, Command)}
_CLASSES.update({frame.type: _extension_class(frame) for frame in PROTOCOL.frames.values()})


def frame_class(frame_type):
    """The class of the decoded frames of ``frame_type`` (the link's or an extension's, e.g.
    the emulator's TRUTH: made from its declared layout)."""
    try:
        return _CLASSES[PROTOCOL.frame_type(int(frame_type))]
    except KeyError:
        raise KeyError(f"no frame type {frame_type!r} in {PROTOCOL!r}") from None


def params_from_info(info):
    """Build the device's :class:`SnifferParams` from an INFO frame.

    Raises :class:`ProtocolError` naming the field when INFO holds impossible values, or when
    the derived quantities (row, hist_bins) disagree with what INFO states.
    """
    names = ("channels", "classes", "width_bits", "counter_bits", "hist_sub_bits", "hist_bits",
             "timestamp_bits", "prescaler_bits", "glitch_bits", "tag_bits")
    try:
        params = SnifferParams(**{n: getattr(info, n) for n in names})
    except ValueError as exc:
        raise ProtocolError(f"INFO: {exc}") from None
    if info.row != params.row:
        raise ProtocolError(f"INFO.row is {info.row} but {params.classes} classes imply "
                            f"{params.row}")
    if info.hist_bins != params.hist_bins:
        raise ProtocolError(f"INFO.hist_bins is {info.hist_bins} but the histogram geometry "
                            f"implies {params.hist_bins}")
    for t in (FrameType.STATUS, FrameType.COUNTERS, FrameType.HISTOGRAM, FrameType.TRACE,
              FrameType.TRACE_BATCH):
        try:
            wire.layout_bytes(PROTOCOL.payload_layout(params, t))
        except ValueError:
            raise ProtocolError(f"INFO describes a device whose {t.name} frame is not a whole "
                                f"number of bytes (timestamp_bits={params.timestamp_bits}, "
                                f"counter_bits={params.counter_bits})") from None
    return params


class _TypeTable:
    """Per-params payload sizes and decoders of every frame type."""

    def __init__(self, params):
        self.params = params
        self.size = {}
        self.decode = {}
        for t in PROTOCOL.frame_types:
            p = params if params is not None else _ANY_PARAMS
            if params is None and t not in _FIXED_TYPES:
                continue
            layout = PROTOCOL.payload_layout(p, t)
            self.size[t] = wire.layout_bytes(layout)
            self.decode[t] = _decoder(layout)
        self.max_payload = max(self.size.values())


_HEADER_DECODE = _decoder(HEADER)
#: Decoder tables of the parameter sets seen last (bounded, as above).
_TABLES = _Bounded(16, _TypeTable)


def _table(params):
    return _TABLES.get_or_make(params)


# Framing -----------------------------------------------------------------------------------------


def stuff(body):
    """Escape ``FRAME_ESC`` and ``FRAME_END`` bytes of ``body``."""
    return bytes(body).replace(_ESC, _ESC_ESC).replace(_END, _ESC_END)


def unstuff(body):
    """Undo :func:`stuff`; return None if ``body`` holds an invalid escape sequence."""
    body = bytes(body)
    if FRAME_ESC not in body:
        return body
    n = body.count(_ESC)
    if body.count(_ESC_END) + body.count(_ESC_ESC) != n:
        return None  # an ESC followed by something else, or ending the frame
    # Every ESC starts a two-byte escape (the second byte is never ESC), so the replacements
    # cannot overlap.
    return body.replace(_ESC_END, _END).replace(_ESC_ESC, _ESC)


def frame_bytes(frame_type, payload, seq=0, version=PROTOCOL_VERSION):
    """Return the unstuffed ``header | payload`` of a frame (what :attr:`Frame.raw` holds)."""
    header = _encoder(HEADER)({"type": int(frame_type), "version": version, "seq": seq & 0xFFFF,
                               "length": len(payload)})
    return header.to_bytes(HEADER_BYTES, "little") + bytes(payload)


def encode_frame(frame_type, payload, seq=0, version=PROTOCOL_VERSION):
    """Return a complete frame on the wire: ``END stuffed(header|payload|crc32) END``."""
    body = frame_bytes(frame_type, payload, seq, version)
    body += zlib.crc32(body).to_bytes(CRC_BYTES, "little")
    return _END + stuff(body) + _END


def info_values(params, *, clock_hz, prescaler=1, uart_divisor=4, build_id=0, board=""):
    """The fields of an INFO frame describing a device built with ``params`` and no extension
    (for test devices and synthetic captures): the gateware's own definition,
    :meth:`~rbscope.gateware.link.protocol.LinkProtocol.info_values` (a board name longer than
    the field is cut)."""
    board = board.encode("ascii")[:wire.BOARD_NAME_BYTES].decode("ascii")
    return PROTOCOL.info_values(params, clock_hz=clock_hz, prescaler=max(prescaler, 1),
                                uart_divisor=uart_divisor, build_id=build_id, board=board)


def encode_payload(params, frame_type, values):
    """Pack ``values`` (a dict as decoded) into the payload bytes of ``frame_type``."""
    layout = PROTOCOL.payload_layout(params if params is not None else _ANY_PARAMS, frame_type)
    return _encoder(layout)(values).to_bytes(wire.layout_bytes(layout), "little")


def encode_command(tag, opcode, address=0, value=0, seq=0):
    """Return the wire bytes of one COMMAND frame."""
    payload = encode_payload(None, FrameType.COMMAND, {
        "tag": tag, "opcode": int(opcode), "address": address, "value": value})
    return encode_frame(FrameType.COMMAND, payload, seq)


# Decoding ----------------------------------------------------------------------------------------


@dataclass
class LinkStats:
    """What a :class:`FrameDecoder` and :class:`LinkMonitor` saw. Every rejection is counted."""

    bytes: int = 0  #: bytes fed
    frames: int = 0  #: frames accepted
    leading_bytes: int = 0  #: bytes before the first END (a frame already in progress at open)
    crc_errors: int = 0
    bad_escapes: int = 0  #: ESC followed by neither ESC_END nor ESC_ESC
    runts: int = 0  #: too short for header and CRC
    oversize: int = 0  #: longer than any frame of the device
    bad_length: int = 0  #: header length differs from the bytes received or the type's layout
    bad_version: int = 0
    unknown_type: int = 0
    no_params: int = 0  #: valid frames that need INFO (params) before they can be decoded
    bad_info: int = 0  #: INFO frames describing impossible parameters
    discarded_bytes: int = 0  #: bytes of rejected frames
    lost_frames: int = 0  #: device frames missing according to the sequence numbers
    seq_gaps: int = 0  #: places where frames were missing
    resets: int = 0  #: device resets detected
    epoch_changes: int = 0
    reconnects: int = 0  #: filled in by :class:`rbscope.device.Device`

    @property
    def errors(self):
        """Frames rejected for any reason."""
        return (self.crc_errors + self.bad_escapes + self.runts + self.oversize + self.bad_length
                + self.bad_version + self.unknown_type + self.bad_info)

    def to_dict(self):
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["errors"] = self.errors
        return out


def decode_frame_bytes(raw, params, stats=None):
    """Decode an unstuffed, CRC-checked ``header | payload`` (as stored by a capture).

    Returns the typed frame, or None after counting the rejection in ``stats``. ``params`` may
    be None, in which case only INFO, RESPONSE and COMMAND frames decode.
    """
    stats = stats if stats is not None else LinkStats()
    table = _table(params)
    if len(raw) < HEADER_BYTES:
        stats.runts += 1
        return None
    header = _HEADER_DECODE(int.from_bytes(raw[:HEADER_BYTES], "little"))
    ftype = PROTOCOL.frame_type(int(header["type"]))
    if ftype is None:
        stats.unknown_type += 1
        return None
    if header["version"] != PROTOCOL_VERSION:
        stats.bad_version += 1
        return None
    length = len(raw) - HEADER_BYTES
    size = table.size.get(ftype)
    if size is None:
        stats.no_params += 1
        return None
    if header["length"] != length or length != size:
        stats.bad_length += 1
        return None
    values = table.decode[ftype](int.from_bytes(raw[HEADER_BYTES:], "little"))
    return _CLASSES[ftype](header["seq"], bytes(raw), 0, **values)


class FrameDecoder:
    """Incremental frame decoder: bytes in, checked and typed frames out.

    Parameters
    ----------
    params : SnifferParams, optional
        The device's build parameters. Without them only INFO, RESPONSE and COMMAND frames
        decode (the others are counted as ``no_params``); an INFO frame sets them, so a decoder
        fed a device's whole output from the start needs none.
    learn_params : bool
        Whether INFO frames replace ``params`` (default True).
    stats : LinkStats, optional
        Where to count (a new one by default); shared with a :class:`LinkMonitor`.

    :meth:`feed` never raises on any input: garbage, dropped or flipped bytes, frames split over
    any number of reads, frames too short or too long. A frame is returned only if its CRC, its
    version, its type and its length (against the header and the type's layout) are all right.
    """

    def __init__(self, params=None, *, learn_params=True, stats=None):
        self.stats = stats if stats is not None else LinkStats()
        self.learn_params = learn_params
        self._buf = bytearray()
        self._synced = False  # seen an END yet
        self._overflow = False  # the current frame is being discarded as oversize
        self.params = None
        self._set_params(params)

    def _set_params(self, params):
        self.params = params
        self._table = _table(params)
        # Worst case: every byte of the largest frame escaped, plus slack for a bigger INFO.
        self._max_stuffed = 2 * (HEADER_BYTES + max(self._table.max_payload, 64) + CRC_BYTES)

    def reset(self):
        """Forget a partial frame (e.g. after reopening the port)."""
        self._buf.clear()
        self._synced = False
        self._overflow = False

    def feed(self, chunk):
        """Consume ``chunk`` and return the list of frames it completes."""
        stats = self.stats
        stats.bytes += len(chunk)
        out = []
        parts = bytes(chunk).split(_END)
        buf = self._buf
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if self._overflow:
                stats.discarded_bytes += len(part)
                if not last:
                    # The END after the discarded run is a frame boundary: what follows is
                    # a frame, exactly as if the run had come in the same call.
                    self._overflow = False
                    self._synced = True
                continue
            if last:  # no END after it yet
                if len(buf) + len(part) > self._max_stuffed:
                    stats.oversize += 1
                    stats.discarded_bytes += len(buf) + len(part)
                    buf.clear()
                    self._overflow = True
                else:
                    buf += part
                break
            body = bytes(buf) + part if buf else part
            buf.clear()
            if not self._synced:
                self._synced = True
                stats.leading_bytes += len(body)
                continue
            if not body:
                continue  # END END: an empty frame, idle fill
            if len(body) > self._max_stuffed:
                stats.oversize += 1
                stats.discarded_bytes += len(body)
                continue
            frame = self._frame(body)
            if frame is not None:
                out.append(frame)
        return out

    def _frame(self, body):
        stats = self.stats
        raw = unstuff(body)
        if raw is None:
            stats.bad_escapes += 1
            stats.discarded_bytes += len(body)
            return None
        if len(raw) < HEADER_BYTES + CRC_BYTES:
            stats.runts += 1
            stats.discarded_bytes += len(body)
            return None
        if zlib.crc32(raw) != _CRC_RESIDUE:
            stats.crc_errors += 1
            stats.discarded_bytes += len(body)
            return None
        before = stats.errors + stats.no_params
        frame = decode_frame_bytes(raw[:-CRC_BYTES], self.params, stats)
        if frame is None:
            if stats.errors + stats.no_params != before:
                stats.discarded_bytes += len(body)
            return None
        if isinstance(frame, Info) and self.learn_params:
            try:
                params = params_from_info(frame)
            except ProtocolError:
                stats.bad_info += 1
                stats.discarded_bytes += len(body)
                return None
            if params != self.params:
                self._set_params(params)
        stats.frames += 1
        return frame


# Link monitoring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkEvent:
    """Something the :class:`LinkMonitor` noticed.

    ``kind`` is ``"gap"`` (``lost`` frames missing), ``"reset"`` (the device restarted:
    ``reason`` says how it was seen), ``"epoch"`` (the counters were cleared: ``old`` → ``new``)
    or ``"build"`` (INFO shows a different build or parameters: a different device).
    """

    kind: str
    seq: int = 0
    lost: int = 0
    reason: str = ""
    old: int = 0
    new: int = 0


class LinkMonitor:
    """Sequence-gap accounting and device-reset detection over a stream of device frames.

    The device numbers every frame it sends (16 bits, wrapping). A forward jump of the sequence
    number by ``g + 1`` means ``g`` frames were lost (a gap of 2**15 or more is taken as the
    sequence going backwards). A device reset restarts the sequence and the timestamp: it is
    detected when a STATUS/COUNTERS/HISTOGRAM/TRACE timestamp goes backwards, or when the
    sequence goes backwards together with a new INFO. Epoch changes (clears) and INFO frames
    with another ``build_id`` or other parameters are reported too.

    Call :meth:`observe` with every decoded device frame, in order; it returns a list of
    :class:`LinkEvent`. After a reconnection call :meth:`resync` so the gap across the outage
    is not counted as lost frames (frames sent while nobody listened cost no counts).
    """

    def __init__(self, stats=None):
        self.stats = stats if stats is not None else LinkStats()
        self.last_seq = None
        self.last_timestamp = None
        self.epoch = None
        self.info = None

    def resync(self):
        self.last_seq = None

    def observe(self, frame):
        events = []
        stats = self.stats
        if isinstance(frame, Command):
            return events
        seq = frame.seq
        backwards = False
        if self.last_seq is not None:
            gap = (seq - self.last_seq - 1) & 0xFFFF
            if gap >= 0x8000:
                backwards = True
            elif gap:
                stats.seq_gaps += 1
                stats.lost_frames += gap
                frame.gap = gap
                events.append(LinkEvent("gap", seq, lost=gap))
        self.last_seq = seq
        ts = getattr(frame, "timestamp", None)
        if isinstance(frame, Info):
            if self.info is not None and (frame.build_id != self.info.build_id or any(
                    getattr(frame, n) != getattr(self.info, n) for n in (
                        "channels", "classes", "width_bits", "counter_bits", "hist_sub_bits",
                        "hist_bits", "timestamp_bits", "clock_hz"))):
                events.append(LinkEvent("build", seq, old=self.info.build_id,
                                        new=frame.build_id))
                self.last_timestamp = None
                self.epoch = None
            elif backwards:
                stats.resets += 1
                events.append(LinkEvent("reset", seq, reason="sequence restarted"))
                self.last_timestamp = None
            self.info = frame
        elif ts is not None and not isinstance(frame, Trace):
            # Trace records carry the time a pulse was classified, which may precede the
            # timestamp of a snapshot sent just before them; only snapshot/histogram times are
            # monotonic.
            if self.last_timestamp is not None and ts < self.last_timestamp:
                stats.resets += 1
                events.append(LinkEvent("reset", seq, reason="timestamp went backwards",
                                        old=self.last_timestamp, new=ts))
            self.last_timestamp = ts
        epoch = getattr(frame, "epoch", None)
        if epoch is not None:
            if self.epoch is not None and epoch != self.epoch:
                stats.epoch_changes += 1
                events.append(LinkEvent("epoch", seq, old=self.epoch, new=epoch))
            self.epoch = epoch
        return events

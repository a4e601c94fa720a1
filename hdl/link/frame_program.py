"""The frame programme: every frame of the link compiled into one ROM entry per byte.

Frames are serialised byte by byte from the layouts of ``protocol.py``. At elaboration, every
field of every payload layout is bound to a value (a constant, a register, a latched status
value, or a word read from the sniffer's read port or an extension's) and the frames are
compiled into a *frame programme*: one ROM entry per byte, saying where the byte comes from
(a constant, byte ``k`` of the table of variable bytes, or the next byte of a word read from a
read port). The :class:`~.frame_builder.FrameBuilder`'s walker steps through the ROM, one byte
per entry, so the logic does not grow with the number of frame fields: the only wide
multiplexer left is the registered one that picks a variable byte. A layout change in
``protocol.py`` therefore changes the gateware and the host decoder together; a field left
unbound is an elaboration error.
"""

from amaranth.hdl import Cat, Const, Signal, Value
from amaranth.lib import data, enum

from . import protocol

__all__ = ["COUNT_BITS", "READ_WORDS", "FrameProgram", "Latch", "RamShifter", "Shifter",
           "Source"]


class Source(enum.Enum, shape=2):
    """Where a byte of a frame comes from (a frame-programme ROM entry's ``kind``)."""

    CONST = 0  # ``arg`` is the byte
    VAR = 1  # byte ``arg`` of the table of variable bytes
    READ = 2  # the next byte of a word read from the frame's read port (or, ``arg != 0`` on
    # a first byte, no byte: latch ``arg`` is read whole into its shifter)


#: Bits of a READ entry's ``arg`` that hold the word count less one (the rest: the address of
#: the word's first entry, where the walker jumps back for the next word).
COUNT_BITS = 5


class Latch:
    """A field read from entry ``address`` of the link's counter RAM just before its first byte
    goes out, copied whole into the register of shifter ``into`` and sent from there (never
    torn). Its programme is one entry more than its bytes: the read, which sends nothing."""

    def __init__(self, address, width, into):
        if width > len(into.reg):
            raise ValueError(f"A latch of {width} bits does not fit a shifter of "
                             f"{len(into.reg)}")
        self.address = address
        self.width = width
        self.into = into


#: Marks a field read word by word from the frame's read port.
READ_WORDS = object()


class Shifter:
    """A register whose bytes frames send least significant first, shifting it as they go.

    Its fields (``segments``, each a whole number of bytes) lie in it in the order a frame sends
    them. The walker sends the register's low byte and shifts it right by a byte (or, with
    ``rotate``, rotates it, so that a counter is whole again once its frame has sent it): the
    shift packs with the register's own flip-flops, so a shifter costs one input of the
    variable-byte multiplexer instead of one per byte. Whoever owns the register loads it (or
    updates it) only between the frames that send it.

    Parameters
    ----------
    name : str
    widths : list of int
        Width in bits of each segment (rounded up to whole bytes).
    reg : Value, optional
        The register (default: a new signal as wide as the segments).
    rotate : bool
    """

    def __init__(self, name, widths, *, reg=None, rotate=False):
        self.seg_bytes = [(w + 7) // 8 for w in widths]
        total = 8 * sum(self.seg_bytes)
        self.reg = Signal(total, name=name) if reg is None else reg
        if rotate and len(self.reg) != total:
            raise ValueError(f"A rotating shifter of {len(self.reg)} bits has {total} bits of "
                             f"segments")
        self.rotate = rotate
        self.shift = Signal(name=f"{name}_shift")

    @classmethod
    def of(cls, name, values, **kwargs):
        """A shifter holding ``values`` (see :meth:`load`)."""
        return cls(name, [len(Value.cast(v)) for v in values], **kwargs)

    def __getitem__(self, index):
        return Segment(self, index)

    def load(self, values):
        """The statement loading ``values`` (one per segment) into the register."""
        parts = []
        for value, nbytes in zip(values, self.seg_bytes, strict=True):
            value = Value.cast(value)
            parts.append(value)
            if len(value) < 8 * nbytes:
                parts.append(Const(0, 8 * nbytes - len(value)))
        return self.reg.eq(Cat(*parts))

    def low(self):
        """The byte a frame sends next."""
        return self.reg[:8]

    def advance(self):
        """The statement moving on to the next byte (once the low byte is sent)."""
        if self.rotate:
            return self.reg.eq(Cat(self.reg[8:], self.reg[:8]))
        return self.reg.eq(self.reg >> 8)


class RamShifter(Shifter):
    """A :class:`Shifter` whose bytes are in a RAM, read in order through a read port.

    ``data`` is the read port's data (registered or not: ``ram_output_registers``), whose
    address is a pointer that the RAM's owner keeps: the walker sends ``data`` and strobes
    ``shift``, on which the owner increments the pointer, and the next byte is there before the
    walker comes back for it (at least three cycles later: SEND, NEXT, PICK). Whoever writes the
    bytes resets the pointer.
    """

    def __init__(self, name, widths, *, data):
        super().__init__(name, widths, reg=Const(0, 1))
        self.data = data

    def low(self):
        return self.data

    def advance(self):
        return []  # (the RAM's owner moves the pointer on ``shift``)

    def load(self, values):
        raise TypeError("A RAM shifter is written through its RAM's write port")


class Segment:
    """Field ``index`` of a :class:`Shifter`."""

    def __init__(self, shifter, index):
        self.shifter = shifter
        self.index = index


class FrameProgram:
    """The frame programme: one ROM entry per byte of every frame, from the protocol layouts.

    Frames are added one by one (:meth:`add_frame`), then packed (:meth:`finish`).

    Parameters
    ----------
    params : SnifferParams
    seq : Value
        The frame sequence number (every header's ``seq``).
    wire : LinkProtocol
        The wire protocol (the frames' layouts, the extensions' with the link's).

    Attributes
    ----------
    rom : list of int
        The ROM's words (``entry_layout``), after :meth:`finish`.
    start : dict
        ``{FrameType: address of the frame's first entry}``.
    var_bytes : list of Value
        The inputs of the walker's variable-byte multiplexer: bytes of values, and the low byte
        of every :class:`Shifter`.
    shifters : dict
        ``{index in var_bytes: Shifter}``.
    latches : list of Latch
        The latches, in the order of their numbers (a latch entry's ``arg`` is its number, from
        1).
    """

    def __init__(self, params, seq, wire):
        self.params = params
        self.wire = wire
        self.seq = seq
        self.rom = []
        self.start = {}
        self.var_bytes = []
        self.shifters = {}
        self.latches = []
        self._var_keys = {}
        self._entries = []

    def _var(self, value, byte):
        key = (id(value), byte)
        if key not in self._var_keys:
            self._var_keys[key] = len(self.var_bytes)
            self.var_bytes.append(value[8 * byte:8 * byte + 8])
        return self._var_keys[key]

    def _shift_input(self, shifter):
        key = (id(shifter), None)
        if key not in self._var_keys:
            self._var_keys[key] = len(self.var_bytes)
            self.shifters[len(self.var_bytes)] = shifter
            self.var_bytes.append(shifter.low())
        return self._var_keys[key]

    def _value_bytes(self, value, nbytes, used):
        if isinstance(value, Segment):
            shifter = value.shifter
            have = shifter.seg_bytes[value.index]
            if have > nbytes:
                raise ValueError(f"A segment of {have} bytes does not fit a {nbytes}-byte field")
            used.setdefault(id(shifter), (shifter, []))[1].append(value.index)
            return ([(Source.VAR, self._shift_input(shifter))] * have
                    + [(Source.CONST, 0)] * (nbytes - have))
        if isinstance(value, int):
            value = Const(value, 8 * nbytes)
        value = value.as_value() if hasattr(value, "as_value") else value
        if isinstance(value, Const):
            return [(Source.CONST, (value.value >> 8 * b) & 0xFF) for b in range(nbytes)]
        out = []
        for b in range(nbytes):
            if 8 * b >= len(value):  # a narrow value: its high bytes are zero
                out.append((Source.CONST, 0))
            else:
                out.append((Source.VAR, self._var(value, b)))
        return out

    def add_frame(self, ftype, values):
        """Append the programme of frame ``ftype`` whose payload fields are bound to
        ``values`` (a value, a :class:`Segment` of a shifter, a :class:`Latch`, or
        ``READ_WORDS`` for an array read word by word)."""
        layout = self.wire.payload_layout(self.params, ftype)
        bound = set(values)
        fields = [name for name, _ in layout]
        if bound != set(fields):
            raise ValueError(f"{ftype.name}: fields {sorted(set(fields) - bound)} unbound, "
                             f"{sorted(bound - set(fields))} unknown")
        steps = []  # (kind, arg, word_first, word_last)
        used = {}  # shifter id → (shifter, segments in the order sent)
        length = protocol.layout_bytes(layout)
        header = {"type": int(ftype), "version": protocol.PROTOCOL_VERSION, "seq": self.seq,
                  "length": length}
        for name, field in protocol.HEADER:
            nbytes = data.Shape.cast(field.shape).width // 8
            steps += [(k, a, 0, 0) for k, a in self._value_bytes(header[name], nbytes, used)]
        for name, field in layout:
            value = values[name]
            if isinstance(value, Latch):
                self.latches.append(value)
                nbytes = data.Shape.cast(field.shape).width // 8
                steps += [(Source.READ, len(self.latches), 1, 0)]
                steps += [(Source.VAR, self._shift_input(value.into), 0, 0)] * nbytes
                continue
            if value is READ_WORDS:
                elem_bytes = data.Shape.cast(field.shape.elem_shape).width // 8
                count = field.shape.length
                if count > 1 << COUNT_BITS or not 2 <= elem_bytes <= 8:
                    raise ValueError(f"{ftype.name}.{name}: {count} words of {elem_bytes} bytes "
                                     f"do not fit the frame programme's loop")
                # One word, repeated by the walker (see the READ case of the walker): the entry
                # of its last byte holds the address of its first (absolute, so that the walker
                # needs no subtractor).
                loop = (count - 1) | (len(self._entries) + len(steps)) << COUNT_BITS
                steps += [(Source.READ, loop if b == elem_bytes - 1 else 0, int(b == 0),
                           int(b == elem_bytes - 1)) for b in range(elem_bytes)]
                continue
            size = (data.Layout.cast(field.shape).size if isinstance(field.shape, data.Layout)
                    else data.Shape.cast(field.shape).width)
            steps += [(k, a, 0, 0) for k, a in self._value_bytes(value, size // 8, used)]
        # A frame sends a shifter's segments in order from the first (and a rotating one whole,
        # so that it is back in place afterwards).
        for shifter, segments in used.values():
            whole = list(range(len(shifter.seg_bytes)))
            if segments != whole[:len(segments)] or (shifter.rotate and segments != whole):
                raise ValueError(f"{ftype.name}: segments {segments} of a shifter sent out of "
                                 f"order")
        self.start[ftype] = len(self._entries)
        for i, step in enumerate(steps):
            self._entries.append((*step, int(i == len(steps) - 1)))

    @property
    def entry_layout(self):
        arg_bits = max(8, (len(self.var_bytes) - 1).bit_length(),
                       COUNT_BITS + max(1, len(self._entries) - 1).bit_length())
        # (``latch`` marks a latch's entry, a READ's first with ``arg != 0``: decoded here, not
        # by the walker.)
        return data.StructLayout({"kind": Source, "arg": arg_bits, "word_first": 1,
                                  "word_last": 1, "last": 1, "latch": 1})

    def finish(self):
        """Pack the entries into ROM words."""
        layout = self.entry_layout
        self.rom = [layout.const({"kind": kind, "arg": arg, "word_first": first,
                                  "word_last": wlast, "last": last,
                                  "latch": int(kind is Source.READ and first and arg != 0)})
                    .as_value().value
                    for kind, arg, first, wlast, last in self._entries]

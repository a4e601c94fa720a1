"""Frame encoder and command decoder for the byte-stuffed, CRC-32 frames of ``protocol.py``."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out

from . import protocol

__all__ = ["FrameByte", "FrameEncoder", "CommandDecoder", "decoded_command_layout"]

#: A byte of a frame's body, with a flag on its last byte.
FrameByte = data.StructLayout({"data": 8, "last": 1})


class _SerialCrc(wiring.Component):
    """The frames' CRC (``protocol.CRC_ALGORITHM``, a reflected CRC) one bit per cycle, whose
    register then gives the CRC out a byte at a time by shifting: no multiplexer picks its
    bytes.

    Members
    -------
    start : In(1)
        Restart (the initial value).
    valid, data : In(1), In(1)
        A bit of the message, least significant bit of each byte first.
    shift : In(1)
        Move on to the CRC's next byte (once the message is through).
    byte : Out(8)
        The CRC's next byte (least significant first, as frames send it).
    match : Out(1)
        The message so far ends in its own CRC (a received frame is whole).
    """

    start: In(1)
    valid: In(1)
    data: In(1)
    shift: In(1)
    byte: Out(8)
    match: Out(1)

    def elaborate(self, platform):
        m = Module()
        algo = getattr(crc.catalog, protocol.CRC_ALGORITHM)
        width = algo.crc_width
        if not (algo.reflect_input and algo.reflect_output):
            raise ValueError(f"{protocol.CRC_ALGORITHM} is not a reflected CRC")
        poly = int(f"{algo.polynomial:0{width}b}"[::-1], 2)
        init, xor_out = algo.initial_crc, algo.xor_output
        # The register after a message and its CRC (least significant byte first): the same
        # for every message, the algorithm's residue.
        residue = algo(data_width=1).residue()
        reg = Signal(width, init=init)
        feedback = reg[0] ^ self.data
        with m.If(self.start):
            m.d.sync += reg.eq(init)
        with m.Elif(self.valid):
            m.d.sync += reg.eq((reg >> 1) ^ Mux(feedback, poly, 0))
        with m.Elif(self.shift):
            m.d.sync += reg.eq(reg >> 8)
        m.d.comb += [self.byte.eq(reg[:8] ^ (xor_out & 0xFF)), self.match.eq(reg == residue)]
        return m


class FrameEncoder(wiring.Component):
    """Turn a frame body (header and payload bytes) into a delimited, stuffed frame with its CRC.

    Output: ``END``, the stuffed body, the stuffed CRC-32 (little-endian), ``END``. Two
    registered stages, so that every path is a few LUTs deep (the UART takes a byte only every
    40 or more cycles): a state machine puts the frame's unstuffed symbols (a delimiter, a body
    byte, a CRC byte) into a one-symbol register, and a stuffer, a cycle after a symbol arrived
    there (its ``special`` and ``is_end`` flags are registered from it), sends it, or ``ESC`` and
    its escape code, through the registered output byte, at most one byte every other cycle. The
    CRC is computed one bit per cycle (least significant first, as the reflected CRC-32 takes a
    byte), which is far smaller than a byte-wide one and still five times faster than the
    fastest UART (4 clocks per bit): a body byte is taken once the previous one has gone through.

    Members
    -------
    body : In(stream.Signature(FrameByte))
        The frame's bytes; ``last`` marks the end of the frame.
    wire : Out(stream.Signature(8))
        Bytes for the UART.
    """

    body: In(stream.Signature(FrameByte))
    wire: Out(stream.Signature(8))

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = crc_gen = _SerialCrc()
        crc_sent = Signal(range(5))  # CRC bytes sent
        # ``crc_sent == 4`` as a flip-flop: the CRC register's shift enable (32 flip-flops) and
        # the state machine then start from a single LUT of flip-flops (on the iCEBreaker the
        # comparison, the state and the enable's fan-out made the critical path).
        crc_done = Signal()
        # The byte going through the CRC, one bit per cycle, and its bits left.
        crc_shift = Signal(8)
        crc_bits = Signal(range(9))
        crc_idle = Signal(init=1)  # registered ``crc_bits == 0``
        with m.If(crc_bits != 0):
            m.d.comb += [crc_gen.valid.eq(1), crc_gen.data.eq(crc_shift[0])]
            m.d.sync += [crc_shift.eq(crc_shift >> 1), crc_bits.eq(crc_bits - 1),
                         crc_idle.eq(crc_bits == 1)]

        # Stage 2, the stuffer. The output byte is registered (a slot, free or full): no
        # combinational path from here into the UART's state machine, nor back.
        out_valid = Signal()
        out_byte = Signal(8)
        m.d.comb += [self.wire.valid.eq(out_valid), self.wire.payload.eq(out_byte)]
        with m.If(self.wire.ready):
            m.d.sync += out_valid.eq(0)
        # The symbol register between the stages; ``checked`` once its flags are registered.
        sym_full = Signal()
        sym_byte = Signal(8)
        sym_data = Signal()  # a body or CRC byte (stuffed), not a delimiter
        checked = Signal()
        special = Signal()  # a data byte that must be escaped
        is_end = Signal()  # ... and it is ``END`` (else ``ESC``)
        esc_sent = Signal()  # the ``ESC`` of its pair has gone out
        m.d.sync += [
            special.eq(sym_data & ((sym_byte == protocol.FRAME_END)
                                   | (sym_byte == protocol.FRAME_ESC))),
            is_end.eq(sym_byte == protocol.FRAME_END),
            checked.eq(sym_full),
        ]
        take = Signal()  # the FSM fills the (empty) symbol register
        with m.If(~out_valid & checked):
            m.d.sync += out_valid.eq(1)
            with m.If(special & ~esc_sent):
                m.d.sync += [out_byte.eq(protocol.FRAME_ESC), esc_sent.eq(1)]
            with m.Else():
                m.d.sync += [sym_full.eq(0), checked.eq(0), esc_sent.eq(0)]
                with m.If(special):
                    m.d.sync += out_byte.eq(Mux(is_end, protocol.ESC_END, protocol.ESC_ESC))
                with m.Else():
                    m.d.sync += out_byte.eq(sym_byte)
        with m.If(take):
            m.d.sync += sym_full.eq(1)

        def emit(byte, data):
            m.d.comb += take.eq(1)
            m.d.sync += [sym_byte.eq(byte), sym_data.eq(data)]

        # The body byte is taken into a register first, so that no combinational path runs
        # from the encoder back to the frame's source.
        have = Signal()
        held = Signal(FrameByte)
        m.d.comb += self.body.ready.eq(~have)
        with m.If(self.body.valid & ~have):
            m.d.sync += [held.eq(self.body.payload), have.eq(1)]

        # Stage 1: the frame's symbols, each into the empty symbol register.
        with m.FSM():
            with m.State("IDLE"):
                with m.If(have & ~sym_full):
                    emit(protocol.FRAME_END, 0)
                    m.d.comb += crc_gen.start.eq(1)
                    m.next = "BODY"
            with m.State("BODY"):
                with m.If(have & crc_idle & ~sym_full):
                    emit(held.data, 1)
                    m.d.sync += [crc_shift.eq(held.data), crc_bits.eq(8), crc_idle.eq(0),
                                 have.eq(0)]
                    with m.If(held.last):
                        m.next = "CRC_LOAD"
            with m.State("CRC_LOAD"):
                # The CRC register holds the last bit's update one cycle after it was fed; it
                # then keeps its value while its bytes are sent.
                m.d.sync += [crc_sent.eq(0), crc_done.eq(0)]
                with m.If(crc_idle):
                    m.next = "CRC"
            with m.State("CRC"):
                with m.If(~sym_full):
                    with m.If(crc_done):
                        emit(protocol.FRAME_END, 0)
                        m.next = "IDLE"
                    with m.Else():
                        emit(crc_gen.byte, 1)
                        m.d.comb += crc_gen.shift.eq(1)
                        m.d.sync += [crc_sent.eq(crc_sent + 1), crc_done.eq(crc_sent == 3)]
        return m


def decoded_command_layout():
    """A command frame as decoded: its status (OK or BAD_FRAME) and, if OK, its contents."""
    return data.StructLayout({"status": protocol.ResponseStatus, "command": protocol.COMMAND})


class CommandDecoder(wiring.Component):
    """Find COMMAND frames in the received byte stream and check them.

    Bytes are unstuffed and collected until ``END``. An empty frame is ignored. A frame with the
    exact size of a command, a good CRC, type COMMAND, our protocol version and the right length
    field is delivered with status OK; anything else is delivered as BAD_FRAME (so the host gets a
    RESPONSE and never waits for a lost command).

    Members
    -------
    wire : In(stream.Signature(8))
        Received bytes. The CRC takes a byte's bits one per cycle (as the encoder's does), so a
        byte is taken at most every ten cycles (a UART delivers one every ten bit times of at
        least four cycles). A frame whose command bytes arrive while the previous result has
        not been taken is lost and counted in ``dropped`` (the host keeps one command
        outstanding).
    command : Out(stream.Signature(decoded_command_layout()))
        The payload is the register the command bytes are collected in: it stays as it is after
        the command is taken, until the next frame's command bytes arrive.
    rotate : In(1)
        Rotates the held command by a byte (its first byte becomes its last), so that its bytes
        can be read one at a time from the low byte; ten rotations bring it back. Only while
        the command is held (``command.valid``).
    load, value : In(1), In(32)
        Replaces the held command's value field by ``value`` (only while held, not rotated).
    zero : In(1)
        Replaces the held command's value field by 0 (as ``load``; it wins over ``load``).
    good : Out(1)
        Pulses for each good frame.
    bad : Out(1)
        Pulses for each bad frame.
    dropped : Out(1)
        Pulses for each frame lost because ``command`` was still full.
    """

    wire: In(stream.Signature(8))
    command: Out(stream.Signature(decoded_command_layout()))
    rotate: In(1)
    load: In(1)
    zero: In(1)
    value: In(32)
    good: Out(1)
    bad: Out(1)
    dropped: Out(1)

    FRAME_BYTES = (protocol.layout_bytes(protocol.HEADER) + protocol.layout_bytes(protocol.COMMAND)
                   + 4)

    def elaborate(self, platform):
        m = Module()
        # The CRC is bit-serial (a quarter of a byte-wide one's logic): a data byte goes through
        # it least significant bit first in the eight cycles after it is stored, and no byte is
        # taken from the wire meanwhile (so the CRC is complete when a frame's END is seen).
        m.submodules.crc = crc_gen = _SerialCrc()
        crc_shift = Signal(8)
        crc_bits = Signal(range(9))
        # ``crc_bits == 0`` as a flip-flop: the wire's ``ready`` is then a gate of two
        # flip-flops, and the UART's handshake no longer starts from a comparison (at 12 Mbaud
        # on the iCEBreaker the path from the count through the handshake into the unstuffing
        # was the critical one).
        crc_idle = Signal(init=1)
        with m.If(crc_bits != 0):
            m.d.comb += [crc_gen.valid.eq(1), crc_gen.data.eq(crc_shift[0])]
            m.d.sync += [crc_shift.eq(crc_shift >> 1), crc_bits.eq(crc_bits - 1),
                         crc_idle.eq(crc_bits == 1)]
        size = self.FRAME_BYTES
        header_bytes = protocol.layout_bytes(protocol.HEADER)
        command_bytes = protocol.layout_bytes(protocol.COMMAND)
        count = Signal(range(size + 2))  # saturates at size + 1: "too long"
        escape = Signal()
        broken = Signal()  # an invalid escape sequence in this frame
        # The header is checked byte by byte as it arrives (``header_bad``); only the command's
        # bytes are kept, in the register that is also the output (held until taken).
        header_bad = Signal()
        # A command byte arrived while the previous command was still held: this frame is lost.
        skipped = Signal()
        buffer = Signal(8 * command_bytes)
        expected = protocol.HEADER.const({
            "type": protocol.FrameType.COMMAND, "version": protocol.PROTOCOL_VERSION,
            "length": command_bytes}).as_value().value
        checked = {protocol.HEADER[name].offset // 8 + k
                   for name in ("type", "version", "length")
                   for k in range(protocol.HEADER[name].width // 8)}

        store = Signal()
        m.d.comb += [self.wire.ready.eq(~store & crc_idle),
                     self.command.payload.command.eq(buffer)]
        with m.If(self.command.ready):
            m.d.sync += self.command.valid.eq(0)

        # Stage 1: unstuff. A byte becomes, one cycle later, a data byte (``store``, ``value``),
        # the end of a frame (``end``, ``dangling`` if it ended in an escape) or a bad escape.
        byte = self.wire.payload
        value = Signal(8)
        end = Signal()
        dangling = Signal()
        bad_escape = Signal()
        m.d.sync += [store.eq(0), end.eq(0), bad_escape.eq(0)]
        with m.If(self.wire.valid & self.wire.ready):
            with m.If(byte == protocol.FRAME_END):
                m.d.sync += [end.eq(1), dangling.eq(escape), escape.eq(0)]
            with m.Elif(escape):
                m.d.sync += escape.eq(0)
                with m.If(byte == protocol.ESC_END):
                    m.d.sync += [store.eq(1), value.eq(protocol.FRAME_END)]
                with m.Elif(byte == protocol.ESC_ESC):
                    m.d.sync += [store.eq(1), value.eq(protocol.FRAME_ESC)]
                with m.Else():
                    m.d.sync += bad_escape.eq(1)
            with m.Elif(byte == protocol.FRAME_ESC):
                m.d.sync += escape.eq(1)
            with m.Else():
                m.d.sync += [store.eq(1), value.eq(byte)]

        # Stage 2: check and collect. (The CRC's match and the size are registered: neither
        # changes in the cycle an END is taken, when the CRC is idle and no byte is stored.)
        match = Signal()
        whole = Signal()
        m.d.sync += [match.eq(crc_gen.match), whole.eq(count == size)]
        with m.If(bad_escape):
            m.d.sync += broken.eq(1)
        with m.If(end):
            with m.If(count != 0):
                ok = ~broken & ~dangling & ~header_bad & whole & match
                m.d.comb += [self.good.eq(ok), self.bad.eq(~ok)]
                with m.If((self.command.valid & ~self.command.ready) | skipped):
                    m.d.comb += self.dropped.eq(1)
                with m.Else():
                    m.d.sync += [
                        self.command.valid.eq(1),
                        self.command.payload.status.eq(
                            Mux(ok, protocol.ResponseStatus.OK,
                                protocol.ResponseStatus.BAD_FRAME)),
                    ]
            m.d.sync += [count.eq(0), broken.eq(0), header_bad.eq(0), skipped.eq(0)]
            m.d.comb += crc_gen.start.eq(1)

        # Whether the next byte stored is one of the command's, registered from the count (a
        # data byte is stored at most every ten cycles; an END clears it, as the count): the
        # command register's enable is then a gate from flip-flops.
        collect = Signal()
        m.d.sync += collect.eq((count >= header_bytes) & (count < header_bytes + command_bytes))
        with m.If(end):
            m.d.sync += collect.eq(0)
        with m.If(store):
            m.d.sync += [crc_shift.eq(value), crc_bits.eq(8), crc_idle.eq(0)]
            with m.Switch(count):
                for k in sorted(checked):
                    with m.Case(k):
                        with m.If(value != (expected >> 8 * k) & 0xFF):
                            m.d.sync += header_bad.eq(1)
            with m.If(collect):
                with m.If(self.command.valid):
                    m.d.sync += skipped.eq(1)
                with m.Else():
                    m.d.sync += buffer.eq(Cat(buffer[8:], value))
            with m.If(count <= size):
                m.d.sync += count.eq(count + 1)
        with m.If(self.rotate):
            m.d.sync += buffer.eq(Cat(buffer[8:], buffer[:8]))
        with m.If(self.load):
            field = protocol.COMMAND["value"]
            m.d.sync += buffer[field.offset:field.offset + 32].eq(self.value)
        with m.If(self.zero):
            m.d.sync += buffer[field.offset:field.offset + 32].eq(0)
        return m

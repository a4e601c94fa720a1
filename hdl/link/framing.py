"""Frame encoder and command decoder for the byte-stuffed, CRC-32 frames of ``protocol.py``."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out

from . import protocol

__all__ = ["FrameByte", "FrameEncoder", "CommandDecoder", "decoded_command_layout"]

#: A byte of a frame's body, with a flag on its last byte.
FrameByte = data.StructLayout({"data": 8, "last": 1})


def _crc_parameters():
    return getattr(crc.catalog, protocol.CRC_ALGORITHM)(data_width=8)


def _special(byte):
    return (byte == protocol.FRAME_END) | (byte == protocol.FRAME_ESC)


def _escape_code(byte):
    return Mux(byte == protocol.FRAME_END, protocol.ESC_END, protocol.ESC_ESC)


class FrameEncoder(wiring.Component):
    """Turn a frame body (header and payload bytes) into a delimited, stuffed frame with its CRC.

    Output: ``END``, the stuffed body, the stuffed CRC-32 (little-endian), ``END``. It is a
    single pass with no buffering: at most two output bytes per input byte.

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
        m.submodules.crc = crc_gen = _crc_parameters().create()
        crc_bytes = Signal(32)
        crc_left = Signal(range(5))
        escaped = Signal(8)  # the second byte of an escape pair

        def emit(byte):
            m.d.comb += [self.wire.valid.eq(1), self.wire.payload.eq(byte)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.body.valid):
                    emit(protocol.FRAME_END)
                    with m.If(self.wire.ready):
                        m.d.comb += crc_gen.start.eq(1)
                        m.next = "BODY"
            with m.State("BODY"):
                byte = self.body.payload.data
                with m.If(self.body.valid):
                    emit(Mux(_special(byte), protocol.FRAME_ESC, byte))
                    with m.If(self.wire.ready):
                        m.d.comb += [
                            self.body.ready.eq(1),
                            crc_gen.valid.eq(1),
                            crc_gen.data.eq(byte),
                        ]
                        m.d.sync += escaped.eq(_escape_code(byte))
                        with m.If(_special(byte)):
                            m.next = "BODY_ESC"
                            with m.If(self.body.payload.last):
                                m.next = "BODY_ESC_LAST"
                        with m.Elif(self.body.payload.last):
                            m.next = "CRC_LOAD"
            with m.State("BODY_ESC"):
                emit(escaped)
                with m.If(self.wire.ready):
                    m.next = "BODY"
            with m.State("BODY_ESC_LAST"):
                emit(escaped)
                with m.If(self.wire.ready):
                    m.next = "CRC_LOAD"
            with m.State("CRC_LOAD"):
                # The CRC register holds the last byte's update one cycle after it was fed.
                m.d.sync += [crc_bytes.eq(crc_gen.crc), crc_left.eq(4)]
                m.next = "CRC"
            with m.State("CRC"):
                byte = crc_bytes[:8]
                with m.If(crc_left == 0):
                    emit(protocol.FRAME_END)
                    with m.If(self.wire.ready):
                        m.next = "IDLE"
                with m.Else():
                    emit(Mux(_special(byte), protocol.FRAME_ESC, byte))
                    with m.If(self.wire.ready):
                        m.d.sync += [
                            crc_bytes.eq(crc_bytes >> 8),
                            crc_left.eq(crc_left - 1),
                            escaped.eq(_escape_code(byte)),
                        ]
                        with m.If(_special(byte)):
                            m.next = "CRC_ESC"
            with m.State("CRC_ESC"):
                emit(escaped)
                with m.If(self.wire.ready):
                    m.next = "CRC"
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
        Received bytes. Always ready: a frame completing while the previous result has not been
        taken is counted in ``dropped`` (the host keeps one command outstanding).
    command : Out(stream.Signature(decoded_command_layout()))
    good : Out(1)
        Pulses for each good frame.
    bad : Out(1)
        Pulses for each bad frame.
    dropped : Out(1)
        Pulses for each frame lost because ``command`` was still full.
    """

    wire: In(stream.Signature(8))
    command: Out(stream.Signature(decoded_command_layout()))
    good: Out(1)
    bad: Out(1)
    dropped: Out(1)

    FRAME_BYTES = (protocol.layout_bytes(protocol.HEADER) + protocol.layout_bytes(protocol.COMMAND)
                   + 4)

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = crc_gen = _crc_parameters().create()
        size = self.FRAME_BYTES
        buffer = Signal(8 * size)
        count = Signal(range(size + 2))  # saturates at size + 1: "too long"
        escape = Signal()
        broken = Signal()  # an invalid escape sequence in this frame

        header_bits = 8 * protocol.layout_bytes(protocol.HEADER)
        header = protocol.HEADER(buffer[:header_bits])
        command = protocol.COMMAND(buffer[header_bits:header_bits + protocol.COMMAND.size])

        m.d.comb += self.wire.ready.eq(1)
        with m.If(self.command.ready):
            m.d.sync += self.command.valid.eq(0)

        byte = self.wire.payload
        store = Signal()
        value = Signal(8)
        with m.If(self.wire.valid):
            with m.If(byte == protocol.FRAME_END):
                with m.If(count != 0):
                    ok = (~broken & ~escape & (count == size) & crc_gen.match_detected &
                          (header.type == protocol.FrameType.COMMAND) &
                          (header.version == protocol.PROTOCOL_VERSION) &
                          (header.length == protocol.layout_bytes(protocol.COMMAND)))
                    m.d.comb += [self.good.eq(ok), self.bad.eq(~ok)]
                    with m.If(self.command.valid & ~self.command.ready):
                        m.d.comb += self.dropped.eq(1)
                    with m.Else():
                        m.d.sync += [
                            self.command.valid.eq(1),
                            self.command.payload.status.eq(
                                Mux(ok, protocol.ResponseStatus.OK,
                                    protocol.ResponseStatus.BAD_FRAME)),
                            self.command.payload.command.eq(command),
                        ]
                m.d.sync += [count.eq(0), escape.eq(0), broken.eq(0)]
                m.d.comb += crc_gen.start.eq(1)
            with m.Elif(escape):
                m.d.sync += escape.eq(0)
                with m.If(byte == protocol.ESC_END):
                    m.d.comb += [store.eq(1), value.eq(protocol.FRAME_END)]
                with m.Elif(byte == protocol.ESC_ESC):
                    m.d.comb += [store.eq(1), value.eq(protocol.FRAME_ESC)]
                with m.Else():
                    m.d.sync += broken.eq(1)
            with m.Elif(byte == protocol.FRAME_ESC):
                m.d.sync += escape.eq(1)
            with m.Else():
                m.d.comb += [store.eq(1), value.eq(byte)]

        with m.If(store):
            m.d.comb += [crc_gen.valid.eq(1), crc_gen.data.eq(value)]
            with m.If(count < size):
                m.d.sync += buffer.eq(Cat(buffer[8:], value))
            with m.If(count <= size):
                m.d.sync += count.eq(count + 1)
        return m

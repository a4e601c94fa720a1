"""The TRACE_BATCH frames' read port: trace records, a few bytes each, popped from the FIFO.

Part of the :class:`~.frame_builder.FrameBuilder`. A TRACE_BATCH frame (``protocol.py``,
:func:`~.protocol.trace_batch_layout`) is a ``base`` timestamp and
:data:`~.protocol.TRACE_BATCH_RECORDS` record slots, which the frame programme reads word by word
from this port: each request pops the trace FIFO's head into a record
(:func:`~.protocol.trace_record_layout`), or answers an empty slot.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.sniffer import TraceSignature
from . import protocol

__all__ = ["TraceBatcher"]


class TraceBatcher(wiring.Component):
    """Answer the batch frame's word requests from the trace FIFO's head.

    The batch's ``base`` (the frame builder's time register) is the timestamp of the FIFO's head
    when the frame starts (it follows the head between frames, and a batch starts only with a
    record at the head). A record's ``time`` is the low bits of its timestamp; it goes into this
    batch only if the rest of its timestamp is the base's (then ``base`` with its low bits
    replaced is its timestamp). Otherwise, and when the FIFO is empty, the slot is empty
    (``kind`` :data:`~.protocol.TRACE_EMPTY_KIND`) and the record stays at the head for the next
    batch. Records in one batch thus lie within one aligned window of ``2**time`` ticks; no
    subtractor is needed, only an equality of the high bits.

    A request is answered a cycle after it is taken, from a register held until the next
    request: the frame builder sends its low byte (``resp.payload``) and strobes ``shift`` for
    the next, so that only a byte, not the word, reaches its byte multiplexer. After a pop the
    FIFO's head is not readable in the next cycle and is new two cycles after (see
    ``counters._RecordFifo``); the high bits' comparison is registered, so a record is taken
    only once the head has been readable for two cycles in a row (``steady``), and no request
    is taken in the three cycles after a pop: a request that finds no steady head finds the
    FIFO empty (or a record written in the last two cycles, which goes in the next slot).

    Members
    -------
    records : In(stream.Signature(trace_layout))
        The trace FIFO's head; ``ready`` pops it.
    base : In(timestamp_bits)
        The batch's base. The frame sends it first, rotating it a byte at a time; it is whole
        again a cycle after its last byte, two cycles before the walker can ask for the first
        record (SEND, NEXT, PICK), and the comparison with it is registered once.
    req : In(stream.Signature(1))
        A word request (its payload is not used).
    resp : Out(stream.Signature(8))
        The record, or an empty slot: its next byte, from its least significant.
    shift : In(1)
        The byte on ``resp.payload`` was sent: the next takes its place (the cycle after).
    """

    def __init__(self, params):
        self.params = params
        self.record_layout = protocol.trace_record_layout(params)
        self.time_bits = self.record_layout["time"].width
        super().__init__({
            "records": In(stream.Signature(TraceSignature(params).members["payload"].shape)),
            "base": In(params.timestamp_bits),
            "req": In(stream.Signature(1)),
            "resp": Out(stream.Signature(8)),
            "shift": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        head = self.records.payload
        t = self.time_bits
        # The head, registered: whether it has been readable for two cycles, and whether its
        # timestamp lies in the base's window.
        readable = Signal()
        steady = Signal()
        same_window = Signal()
        m.d.sync += [readable.eq(self.records.valid),
                     steady.eq(readable & self.records.valid),
                     same_window.eq(head.timestamp[t:] == self.base[t:])]
        # (``steady`` as a register is a cycle older than the head it describes: it is used
        # with ``valid`` of this cycle, and a pop clears ``readable`` at once.)
        answered = Signal()
        word = Signal(self.record_layout)
        m.d.comb += [self.resp.valid.eq(answered), self.resp.payload.eq(word.as_value()[:8])]
        with m.If(self.shift):
            m.d.sync += word.eq(word.as_value() >> 8)
        with m.If(self.resp.valid & self.resp.ready):
            m.d.sync += answered.eq(0)
        cooling = Signal(2)  # cycles left after a pop before a request is taken
        with m.If(cooling != 0):
            m.d.sync += cooling.eq(cooling - 1)
        take = Signal()
        m.d.comb += [self.req.ready.eq(~answered & (cooling == 0)),
                     take.eq(steady & self.records.valid & same_window)]
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += answered.eq(1)
            with m.If(take):
                m.d.comb += self.records.ready.eq(1)
                m.d.sync += [readable.eq(0), steady.eq(0), cooling.eq(3)]
                fields = {"kind": head.kind, "index": head.index, "channel": head.channel,
                          "width": head.width, "time": head.timestamp[:t]}
                if self.params.tag_bits:
                    fields["tag"] = head.tag
                m.d.sync += word.eq(self.record_layout.const({}).as_value())
                for name, value in fields.items():
                    m.d.sync += getattr(word, name).eq(value)
            with m.Else():
                m.d.sync += word.eq(self.record_layout.const(
                    {"kind": protocol.TRACE_EMPTY_KIND}).as_value())
        return m

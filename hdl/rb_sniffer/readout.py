"""The sniffer's read port: a request register, and the response captured at c9.

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import read_request_layout
from .params import SnifferParams, Space

__all__ = ["ReadPort"]


class ReadPort(wiring.Component):
    """Take read requests of one counter or histogram bin, and answer each with its word.

    A request is first taken into a register (``read_req.ready`` depends on that register
    only), so that neither direction of the handshake passes combinationally through the
    pipeline's arbitration: the requester's logic and the sniffer's meet at flip-flops. The
    job stage takes a waiting request (``take``) into a slot; the request is in flight from
    then (c4) to its response (the end of c9), and no other is taken meanwhile, nor while a
    response waits to be taken.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    read_req : In(stream.Signature(read_request_layout))
        The requests.
    read_resp : Out(stream.Signature(counter_bits))
        The responses, registered at c9 (0 for a request outside the channels or the bins).
    waiting : Out(1)
        A request waits and may be taken.
    request : Out(read_request_layout)
        The request waiting.
    take : In(1)
        The job stage takes the request (at its c4).
    phase : In(1)
        The scanner's phase (1 on a job's c5, c7, c9).
    read, bad : In(1)
    space : In(Space)
        From K at c8: the job is a read request (``bad``: answered with 0), of ``space``.
    counter : In(counter_bits)
        The counter RAM's word, normalised (at c9).
    bin : In(hist_bits)
        The histogram bin's value (at c9).
    """

    def __init__(self, params):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        super().__init__({
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
            "waiting": Out(1),
            "request": Out(read_request_layout(params)),
            "take": In(1),
            "phase": In(1),
            "read": In(1),
            "bad": In(1),
            "space": In(Space),
            "counter": In(params.counter_bits),
            "bin": In(params.hist_bits),
        })

    def elaborate(self, platform):
        m = Module()
        phase = self.phase
        read_busy = Signal()
        pending = Signal()
        pending_req = Signal(read_request_layout(self.params), reset_less=True)
        m.d.comb += [
            self.read_req.ready.eq(~pending),
            self.waiting.eq(pending & ~read_busy & ~self.read_resp.valid),
            self.request.eq(pending_req),
        ]
        with m.If(~pending):
            # Loaded whatever the requester offers; kept once `pending` says it was valid.
            m.d.sync += [pending.eq(self.read_req.valid), pending_req.eq(self.read_req.payload)]
        with m.If(self.take):
            m.d.sync += pending.eq(0)

        # ---- Read responses (captured at c9) -------------------------------------------------
        # A counter read reads its word at c6 and again at c7 (both of its job's counter-RAM
        # reads address it); the second read is the one registered in q at c9. K's read flags
        # are kept for c9.
        resp_read = Signal(reset_less=True)
        resp_bad = Signal(reset_less=True)
        resp_space = Signal(Space, reset_less=True)
        with m.If(~phase):  # c8
            m.d.sync += [resp_read.eq(self.read), resp_bad.eq(self.bad),
                         resp_space.eq(self.space)]
        with m.If(phase & resp_read):
            m.d.sync += [
                self.read_resp.valid.eq(1),
                self.read_resp.payload.eq(Mux(
                    resp_bad, 0, Mux(resp_space == Space.HISTOGRAM, self.bin, self.counter))),
            ]
        with m.Elif(self.read_resp.ready):
            m.d.sync += self.read_resp.valid.eq(0)
        # A request is in flight from its acceptance (c4) to its response (end of c9).
        with m.If(self.take):
            m.d.sync += read_busy.eq(1)
        with m.Elif(phase & resp_read):
            m.d.sync += read_busy.eq(0)
        return m

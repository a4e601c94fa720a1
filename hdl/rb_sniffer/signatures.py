"""The sniffer's register-side interface: the signatures its blocks and its users share.

:class:`~.sniffer.RBSniffer` exposes :class:`SnifferSignature` (with the ``rb`` pins beside it);
its trace port is a :class:`TraceSignature`, which the link and the bus tap take in.
"""

from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import config_layout, read_request_layout, status_layout, trace_layout
from .params import SnifferParams

__all__ = ["SnifferSignature", "TraceSignature"]


class TraceSignature(wiring.Signature):
    """A strobe with a record and no back-pressure (the consumer counts what it cannot take)."""

    def __init__(self, params):
        super().__init__({"valid": Out(1), "payload": Out(trace_layout(params))})


class SnifferSignature(wiring.Signature):
    """The sniffer's register-side ports, from the sniffer's point of view.

    One definition for every component that exposes a sniffer: :class:`~.sniffer.RBSniffer`
    itself (with the ``rb`` pins beside it) and the emulator's loopback top (with each member
    prefixed).

    Members
    -------
    cfg : In(config_layout)
    clear : In(1)
    read_req : In(stream.Signature(read_request_layout))
    read_resp : Out(stream.Signature(counter_bits))
    status : Out(status_layout)
    trace : Out(TraceSignature)
    """

    def __init__(self, params):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        super().__init__({
            "cfg": In(config_layout(params)),
            "clear": In(1),
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
            "status": Out(status_layout(params)),
            "trace": Out(TraceSignature(params)),
        })

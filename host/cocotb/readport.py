"""One word through a ``read_req`` / ``read_resp`` stream pair of an rbscope top, from cocotb.

Every rbscope top with counters (the emulator, the tap; the sniffer's helper has its own copy of
this loop) reads them the same way: a request on ``<prefix>_req__payload`` with its ``valid`` /
``ready``, then one response on ``<prefix>_resp__payload``. :class:`ReadPort` follows the stream
rules of ``docs/ports.md`` (inputs driven at the falling edge, outputs sampled just before the
rising edge) and gives up after a number of cycles instead of waiting for ever.
"""

from __future__ import annotations

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["ReadPort", "ReadTimeout"]


class ReadTimeout(AssertionError):
    """A read request was not accepted, or not answered, within the cycles allowed."""


class ReadPort:
    """The ``<prefix>_req`` / ``<prefix>_resp`` streams of a top.

    Parameters
    ----------
    dut : cocotb handle
        The top (or its clock wrapper); ``clk`` must be running.
    prefix : str
        ``"read"`` for ``read_req__*`` / ``read_resp__*``; ``"emu_read"`` for the loopback's
        emulator port, and so on.
    timeout_cycles : int
        Clock cycles to wait for each side of the handshake before :class:`ReadTimeout`.
    """

    def __init__(self, dut, prefix="read", *, timeout_cycles=1000):
        if not isinstance(timeout_cycles, int) or timeout_cycles < 1:
            raise ValueError(f"timeout_cycles must be a positive integer, not {timeout_cycles!r}")
        self.dut = dut
        self.timeout_cycles = timeout_cycles
        try:
            self.req_payload = getattr(dut, f"{prefix}_req__payload")
            self.req_valid = getattr(dut, f"{prefix}_req__valid")
            self.req_ready = getattr(dut, f"{prefix}_req__ready")
            self.resp_payload = getattr(dut, f"{prefix}_resp__payload")
            self.resp_valid = getattr(dut, f"{prefix}_resp__valid")
            self.resp_ready = getattr(dut, f"{prefix}_resp__ready")
        except AttributeError as exc:
            raise AttributeError(f"the top has no {prefix}_req__* / {prefix}_resp__* ports "
                                 f"({exc})") from None

    def idle(self):
        """Drive the port's inputs to their idle levels (no request, not ready): call before
        reset."""
        self.req_valid.value = 0
        self.req_payload.value = 0
        self.resp_ready.value = 0

    async def read(self, request, what="read"):
        """Send ``request`` (the packed payload, an int) and return the response as an int.

        Call it away from a rising edge (e.g. after ``FallingEdge``); it returns at a falling
        edge. ``what`` names the read in a :class:`ReadTimeout`.
        """
        self.req_payload.value = request
        self.req_valid.value = 1
        await self._transfer(self.req_ready, f"{what}: request never accepted")
        self.req_valid.value = 0
        self.resp_ready.value = 1
        value = await self._transfer(self.resp_valid, f"{what}: request never answered")
        self.resp_ready.value = 0
        if not value.is_resolvable:
            raise AssertionError(f"{what}: the response is {value}")
        return int(value)

    async def _transfer(self, flag, what):
        # The transfer is on the first rising edge at which the other side's flag is high: sample
        # it (and the response) just before that edge, then step to the falling edge after it.
        for _ in range(self.timeout_cycles):
            await ReadOnly()
            high = int(flag.value)
            value = self.resp_payload.value
            await RisingEdge(self.dut.clk)
            await FallingEdge(self.dut.clk)
            if high:
                return value
        raise ReadTimeout(f"{what} within {self.timeout_cycles} cycles")

"""Read the emulated NAND dies' ground-truth counters from cocotb.

The ``nand_emu`` top (and the loopback's ``emu_read`` port) counts what its dies really did:
pages programmed, blocks erased, reads, refused operations, ... (:class:`~rbscope.gateware.
nand_emu.EmuCounter`, one set per die). :class:`EmuCounters` reads them through the read stream
with a cycle limit, so a testbench compares them with what the bus or the sniffer saw::

    truth = EmuCounters(dut, params)              # params: the EmuParams of the build
    truth.idle()                                  # before reset: no request pending
    before = await truth.counters(die=0)
    await nand.program_page(row=0, data=b"...")   # rbscope.cocotb.onfi.OnfiDriver
    assert await truth.delta(before, die=0) == {"PAGE_PROGRAMS": 1, "PROGRAM_OPS": 1}

The counters never clear (not even by ``rst``): they start at zero and wrap at
``counter_bits``; :meth:`EmuCounters.delta` diffs two reads modulo that width.
"""

from __future__ import annotations

from rbscope.gateware.nand_emu import EmuCounter, EmuParams
from rbscope.gateware.nand_emu.layouts import read_request_layout

from .readport import ReadPort, ReadTimeout

__all__ = ["EmuCounter", "EmuCounters", "ReadTimeout"]


class EmuCounters:
    """The ground-truth counters of an emulator top.

    Parameters
    ----------
    dut : cocotb handle
        The ``nand_emu`` top (ports ``read_req__*``, ``read_resp__*``) or a ``nand_loopback``
        (``prefix="emu_read"``); its clock must be running.
    params : EmuParams
        The parameters the Verilog was built with.
    prefix : str
        Name stem of the read ports.
    timeout_cycles : int
        Cycles to wait for each side of a read (a request is accepted within ``dies * 16 + 3``
        cycles, when the counter bank's scanner passes that counter).
    """

    def __init__(self, dut, params, *, prefix="read", timeout_cycles=1000):
        if not isinstance(params, EmuParams):
            raise TypeError(f"params must be an EmuParams, not {params!r}")
        self.params = params
        self.port = ReadPort(dut, prefix, timeout_cycles=timeout_cycles)
        self._request = read_request_layout(params)

    def idle(self):
        """Drive the read port idle (call before and during reset)."""
        self.port.idle()

    async def read(self, counter, die=0):
        """Return one counter (an :class:`EmuCounter` or its name) of ``die``."""
        counter = EmuCounter[counter] if isinstance(counter, str) else EmuCounter(counter)
        if not isinstance(die, int) or not 0 <= die < self.params.dies:
            raise ValueError(f"die must be from 0 to {self.params.dies - 1}, not {die!r}")
        request = self._request.const({"die": die, "index": counter}).as_value().value
        return await self.port.read(request, f"{counter.name} of die {die}")

    async def counters(self, die=0):
        """Return ``{EmuCounter: value}`` of every counter of ``die``."""
        return {c: await self.read(c, die) for c in EmuCounter}

    async def delta(self, before, die=0):
        """Return ``{name: change}`` of the counters of ``die`` that changed since ``before``
        (a :meth:`counters` result), modulo ``counter_bits``."""
        after = await self.counters(die)
        mask = (1 << self.params.counter_bits) - 1
        return {c.name: (after[c] - before[c]) & mask for c in EmuCounter
                if after[c] != before[c]}

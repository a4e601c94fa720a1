"""Drive and read out the ``rb_sniffer`` Verilog top from cocotb.

:class:`Sniffer` resets the design with ``rb`` at its idle level, loads the run-time
configuration on ``cfg``, reads counters and histogram bins through the read stream, and
returns everything as a :class:`~rbscope.analysis.measurement.Measurement` — the class that
``rbscope analyze`` consumes and that :class:`~rbscope.cocotb.rb.RbRecording` carries as the
model's expectation, so RTL and model compare with ``==``::

    snf = Sniffer(dut, params, period_ns=10)
    await snf.reset(config, rb=recording.initial_word)
    await RbDriver(dut.rb, 10).play(recording)     # now in cycle N
    got = await snf.measurement(config)            # settles to N + 2, one scanner round, reads
    assert [c.row(params) for c in got.counts] == [c.row(params) for c in
                                                   recording.expected.counts]

The port names, bit maps and timing rules are in ``docs/ports.md``; the packing uses the
gateware's own layouts (:mod:`rbscope.gateware.rb_sniffer.layouts`).
"""

from __future__ import annotations

from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, Timer

from rbscope.analysis.measurement import Measurement
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams, Space
from rbscope.gateware.rb_sniffer.layouts import config_const, read_request_layout, status_layout
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, ChannelCounts
from rbscope.gateware.rb_sniffer.params import PIPELINE_DEPTH

__all__ = ["Sniffer", "SnifferTimeout", "RESET_CYCLES"]

#: Rising edges with ``rst`` high in :meth:`Sniffer.reset` (the synchronisers fill with the
#: idle level in 2).
RESET_CYCLES = 3


class SnifferTimeout(AssertionError):
    """The sniffer did not accept a read request or answer it in time."""


class Sniffer:
    """Control an ``rb_sniffer`` (or its clock wrapper) from a cocotb test.

    Parameters
    ----------
    dut : cocotb handle
        The top: ports ``clk``, ``rst``, ``rb``, ``cfg``, ``clear``, ``read_req__*``,
        ``read_resp__*`` and ``status``. ``clk`` may be driven by cocotb's ``Clock`` or by the
        Verilog wrapper of :func:`rbscope.cocotb.build.clock_wrapper`; it must be running.
    params : SnifferParams
        The parameters the Verilog was built with.
    period_ns : float
        The clock period.
    """

    def __init__(self, dut, params, *, period_ns):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"params must be a SnifferParams, not {params!r}")
        self.dut = dut
        self.params = params
        self.period_ns = period_ns
        self._request = read_request_layout(params)
        self._status = status_layout(params)
        self.settled_status = None

    @property
    def scanner_round(self):
        """Cycles of one scanner round: every event reaches the counters within one round and
        :data:`~rbscope.gateware.rb_sniffer.params.PIPELINE_DEPTH` cycles."""
        return 2 * (self.params.channels + 1)

    async def reset(self, config, rb=None, cycles=RESET_CYCLES):
        """Load ``config``, hold ``rst`` high for ``cycles`` rising edges with ``rb`` at ``rb``
        (default: all ready) and release it on a falling edge, where this returns: the next
        rising edge ends cycle 0.
        """
        dut, p = self.dut, self.params
        if not isinstance(config, SnifferConfig):
            raise TypeError(f"config must be a SnifferConfig, not {config!r}")
        dut.cfg.value = config_const(p, config)
        dut.rb.value = (1 << p.channels) - 1 if rb is None else rb
        dut.clear.value = 0
        dut.read_req__valid.value = 0
        dut.read_req__payload.value = 0
        dut.read_resp__ready.value = 0
        dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        self.settled_status = None

    def status(self):
        """Return the ``status`` port as a view of its layout (timestamp, quiet_since, epoch,
        quiescent, clear_busy)."""
        return self._status.from_bits(int(self.dut.status.value))

    async def settle(self):
        """Called in cycle ``N`` (e.g. when :meth:`RbDriver.play` returns): run to cycle
        ``N + 2``, keep its status (:attr:`settled_status`), then one scanner round more, so
        that the counters hold every event the model counts for a recording of ``N`` cycles."""
        await Timer(SYNC_LATENCY * self.period_ns, unit="ns")
        self.settled_status = self.status()
        await Timer((self.scanner_round + PIPELINE_DEPTH) * self.period_ns, unit="ns")

    async def read(self, space, channel, index, timeout_cycles=1000):
        """Read one word: ``space`` :class:`Space` ``COUNTERS`` (``index`` in the row) or
        ``HISTOGRAM`` (``index`` the bin). Follows the stream rules of ``docs/ports.md``."""
        dut = self.dut
        dut.read_req__payload.value = self._request.const(
            {"space": space, "channel": channel, "index": index}).as_value().value
        dut.read_req__valid.value = 1
        await self._transfer(dut.read_req__ready, timeout_cycles,
                             f"read request {space!r} {channel}/{index} never accepted")
        dut.read_req__valid.value = 0
        dut.read_resp__ready.value = 1
        value = await self._transfer(dut.read_resp__valid, timeout_cycles,
                                     f"read of {space!r} {channel}/{index} never answered")
        dut.read_resp__ready.value = 0
        if not value.is_resolvable:
            raise AssertionError(f"read of {space!r} {channel}/{index} returned {value}")
        return int(value)

    async def _transfer(self, flag, timeout_cycles, what):
        """Wait for a rising edge at which ``flag`` (the other side's ``ready`` or ``valid``)
        is high, so that the transfer happens on it; return ``read_resp__payload`` as sampled
        just before that edge, at the falling edge after it."""
        dut = self.dut
        for _ in range(timeout_cycles):
            await ReadOnly()
            high = int(flag.value)
            value = dut.read_resp__payload.value
            await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            if high:
                return value
        raise SnifferTimeout(what)

    async def read_channel(self, channel, histogram=True):
        """Return the :class:`~rbscope.gateware.rb_sniffer.model.ChannelCounts` of ``channel`` as
        read."""
        p = self.params
        row = [await self.read(Space.COUNTERS, channel, i) for i in range(p.counters_per_channel)]
        bins = ([await self.read(Space.HISTOGRAM, channel, b) for b in range(p.hist_bins)]
                if histogram else [])
        return ChannelCounts.from_row(p, row, bins)

    async def measurement(self, config, *, clock_seconds=None, class_names=(), settle=True,
                          histogram=True, provenance=None):
        """Read every channel and return a :class:`~rbscope.analysis.measurement.Measurement`.

        Parameters
        ----------
        config : SnifferConfig
            The configuration the run used (as given to :meth:`reset`).
        clock_seconds : float, optional
            The clock period the cycles stand for (default ``period_ns``);
            ``tick_seconds = clock_seconds * prescaler``.
        class_names : sequence of str
        settle : bool
            Call :meth:`settle` first (call this in cycle ``N``); ``duration_ticks`` is then the
            timestamp of cycle ``N + 2``, as in the model's measurement.
        histogram : bool
            Read the histograms too (``hist_bins`` reads per channel).
        """
        if settle:
            await self.settle()
        status = self.status() if self.settled_status is None else self.settled_status
        p = self.params
        clock = self.period_ns * 1e-9 if clock_seconds is None else clock_seconds
        counts = [await self.read_channel(ch, histogram) for ch in range(p.channels)]
        if not histogram:
            for c in counts:
                c.histogram = [0] * p.hist_bins
        return Measurement(
            params=p, config=config, tick_seconds=clock * max(config.prescaler, 1),
            counts=counts, class_names=tuple(class_names), duration_ticks=status.timestamp,
            may_drop=any(c.dropped for c in counts),
            provenance={"source": "simulation", "epoch": status.epoch,
                        "quiescent": bool(status.quiescent), "quiet_since": status.quiet_since,
                        **(provenance or {})})

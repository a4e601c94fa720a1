"""The link's snapshot timer: periodic snapshots, and histograms every so many of them.

Part of the :class:`~.controller.LinkController`.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..synthesis import COLLISION_FREE

__all__ = ["SnapshotTimer"]


class SnapshotTimer(wiring.Component):
    """Ask for a snapshot every ``SNAPSHOT_PERIOD`` cycles, and for histograms with every
    ``HIST_PERIOD``-th of them.

    The two periods are kept in a block RAM (one entry, both side by side, always read): no
    flip-flops hold them. The register file writes them (``snapshot_period_write``,
    ``hist_period_write``, with ``value``), and writing a period restarts its counter.

    Parameters
    ----------
    snapshot_period : int
        ``SNAPSHOT_PERIOD`` at power-up, in cycles (0: no periodic snapshots).
    ram_output_registers : bool
        Register the periods RAM's output before any logic (see
        :class:`~.controller.LinkController`).

    Members
    -------
    value : In(32)
        The value written.
    snapshot_period_write, hist_period_write : In(1)
        Strobes: write ``value`` to ``SNAPSHOT_PERIOD``, ``HIST_PERIOD`` (its low 16 bits).
    periodic : Out(1)
        Strobe: a periodic snapshot is due (never in two consecutive cycles).
    hist_expired : Out(1)
        Strobe, with ``periodic``: the histogram period ends with this snapshot.
    hist_on : Out(1)
        ``HIST_PERIOD`` is not 0 (histograms are sent when it ends).
    """

    def __init__(self, *, snapshot_period, ram_output_registers):
        self.snapshot_period = snapshot_period
        self.ram_output_registers = bool(ram_output_registers)
        super().__init__({
            "value": In(32),
            "snapshot_period_write": In(1),
            "hist_period_write": In(1),
            "periodic": Out(1),
            "hist_expired": Out(1),
            "hist_on": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        periods = Memory(shape=48, depth=1, init=[self.snapshot_period],
                         attrs={"ram_style": "block"})
        m.submodules["periods" + COLLISION_FREE] = periods
        periods_rd = periods.read_port()
        periods_wr = periods.write_port(granularity=16)
        period_written = self.snapshot_period_write
        hist_written = self.hist_period_write
        value = self.value
        m.d.comb += [periods_wr.en[:2].eq(Mux(period_written, 0b11, 0)),
                     periods_wr.en[2].eq(hist_written),
                     periods_wr.data.eq(Cat(value, value[:16]))]

        # Up-counters from 1, compared with the period (their flip-flops, no adder before the
        # comparison) and set back to 1 (a flip-flop's synchronous set or reset: no
        # multiplexer) as they reach it and when it is written: a snapshot every
        # SNAPSHOT_PERIOD cycles, histograms every HIST_PERIOD-th of them.
        # (The periods RAM's output is registered first where block RAM is slow.)
        if self.ram_output_registers:
            period_value = Signal(48)
            m.d.sync += period_value.eq(periods_rd.data)
        else:
            period_value = periods_rd.data
        snapshot_period = period_value[:32]
        hist_period = period_value[32:]
        # This period's cycle, from 1, is ``count_ahead - 1``: the counter runs a cycle ahead,
        # so that "the count is at the period" is compared for the next cycle and registered
        # (``at_period``; the period's RAM output goes into no logic before ``expired``).
        count_ahead = Signal(32, init=2)
        at_period = Signal(init=self.snapshot_period == 1)
        hist_count = Signal(16, init=1)  # this histogram period's snapshot, from 1
        # (Once the new period can be compared, two cycles after the write (three with the
        # register): what the read port returns the cycle after the RAM is written is stale.
        # Nothing expires from the write until then, and a write of either period restarts the
        # snapshot counter (a period whose last cycle fell in those cycles would otherwise be
        # passed over, and the counter run on to its wrap); a write of HIST_PERIOD restarts
        # the histogram count too. Whether a period is 0, off, is registered as it is written.)
        delay = 3 if self.ram_output_registers else 2
        # (From power-up and a logic reset too, the read port's first words are not the
        # periods: the snapshot counter starts as after a write, once they are.)
        reload_period = Signal(delay, init=(1 << delay) - 1)
        reload_hist = Signal(delay)
        m.d.sync += [reload_period.eq(Cat(period_written, reload_period)),
                     reload_hist.eq(Cat(hist_written, reload_hist))]
        stale = (reload_period | reload_hist).any()
        period_on = Signal(init=self.snapshot_period != 0, reset_less=True)
        hist_on = Signal(reset_less=True)
        with m.If(period_written):
            m.d.sync += period_on.eq(value != 0)
        with m.If(hist_written):
            m.d.sync += hist_on.eq(value[:len(hist_period)] != 0)
        m.d.comb += self.hist_on.eq(hist_on)
        expired = Signal()  # the period's last cycle (a period of 0 is off: see period_on)
        periodic = self.periodic
        m.d.comb += expired.eq(at_period & ~stale)
        # (Registered: the histogram period's count and the requests follow a cycle later. At
        # least a cycle apart, so that ``hist_last`` has seen the count's last change: a period
        # of 1 gives a request every other cycle, which is as many as a snapshot can take.)
        m.d.sync += periodic.eq(expired & period_on & ~periodic)
        with m.If(expired | reload_period[-1] | reload_hist[-1]):
            m.d.sync += [count_ahead.eq(2), at_period.eq(snapshot_period == 1)]
        with m.Else():
            m.d.sync += [count_ahead.eq(count_ahead + 1),
                         at_period.eq(count_ahead == snapshot_period)]
        hist_last = Signal()  # the count is at the period (registered)
        m.d.sync += hist_last.eq(hist_count == hist_period)
        m.d.comb += self.hist_expired.eq(periodic & hist_last)
        with m.If(self.hist_expired | reload_hist[-1]):
            m.d.sync += hist_count.eq(1)
        with m.Elif(periodic):
            m.d.sync += hist_count.eq(hist_count + 1)
        return m

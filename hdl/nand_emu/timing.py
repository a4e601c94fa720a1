"""The emulator's timing blocks: the prescaled busy timer and the jitter LFSR.

A busy time of ``t`` ticks lasts exactly ``t * P`` clock cycles (``P`` the prescaler, 0 acting
as 1): the timer's prescaler restarts when the timer is loaded, so the R/B# pulse a die drives
has the same width in ticks for any sniffer using the same prescaler, whatever the phase of the
sniffer's own time base (any ``t * P`` consecutive cycles contain exactly ``t`` of its ticks).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BusyTimer", "JitterLfsr", "lfsr_step", "LFSR_TAPS"]

#: Galois LFSR feedback mask of x^32 + x^22 + x^2 + x + 1 (maximal length).
LFSR_TAPS = 0x80200003
#: LFSR steps per draw: consecutive draws share no bits of a plain shift.
LFSR_STEPS = 8


def lfsr_step(state, steps=LFSR_STEPS):
    """Return the LFSR state ``steps`` steps after ``state`` (host-side reference)."""
    for _ in range(steps):
        lsb = state & 1
        state >>= 1
        if lsb:
            state ^= LFSR_TAPS
    return state


class BusyTimer(wiring.Component):
    """Count a busy time of ``ticks`` ticks of ``prescaler`` cycles each.

    Parameters
    ----------
    ticks_bits : int
        Width of ``ticks``.
    prescaler_bits : int
        Width of ``prescaler``.

    Members
    -------
    start : In(1)
        Load ``ticks`` and restart the prescaler. ``busy`` rises in the next cycle unless
        ``ticks`` is 0 (then nothing happens).
    ticks : In(ticks_bits)
    prescaler : In(prescaler_bits)
        Cycles per tick (0 behaves as 1); sampled every cycle.
    abort : In(1)
        Stop at once (takes precedence over ``start``).
    busy : Out(1)
        High for exactly ``ticks * prescaler`` cycles after ``start``.
    done : Out(1)
        High in the last busy cycle (combinational).
    """

    def __init__(self, ticks_bits, prescaler_bits):
        self.ticks_bits = ticks_bits
        self.prescaler_bits = prescaler_bits
        super().__init__({
            "start": In(1), "ticks": In(ticks_bits), "prescaler": In(prescaler_bits),
            "abort": In(1), "busy": Out(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        remaining = Signal(self.ticks_bits)
        last = Signal()  # remaining == 1, kept as a flag (no wide compare on the done path)
        # The prescaler counts down to zero from `prescaler - 1`, looked up one cycle ahead
        # (the prescaler is configuration: it does not change while a die is busy).
        pc = Signal(self.prescaler_bits)
        reload = Signal(self.prescaler_bits)
        m.d.sync += reload.eq(Mux(self.prescaler == 0, 0, self.prescaler - 1))
        tick = Signal()
        m.d.comb += [
            tick.eq(pc == 0),
            self.done.eq(self.busy & tick & last),
        ]
        with m.If(self.abort):
            m.d.sync += self.busy.eq(0)
        with m.Elif(self.start):
            m.d.sync += [remaining.eq(self.ticks), last.eq(self.ticks == 1),
                         pc.eq(Mux(self.prescaler == 0, 0, self.prescaler - 1)),
                         self.busy.eq(self.ticks != 0)]
        with m.Elif(self.busy):
            m.d.sync += pc.eq(Mux(tick, reload, pc - 1))
            with m.If(tick):
                m.d.sync += [remaining.eq(remaining - 1), last.eq(remaining == 2)]
                with m.If(last):
                    m.d.sync += self.busy.eq(0)
        return m


class JitterLfsr(wiring.Component):
    """A 32-bit Galois LFSR, seeded from configuration after every reset.

    Members
    -------
    seed : In(32)
        Seed (0 behaves as 1), loaded in the first cycle after reset.
    step : In(1)
        Advance by :data:`LFSR_STEPS` steps.
    value : Out(32)
        The current state.
    """

    seed: In(32)
    step: In(1)
    value: Out(32)

    def elaborate(self, platform):
        m = Module()
        seeded = Signal()
        nxt = self.value
        for i in range(LFSR_STEPS):
            step = Signal(32, name=f"step{i}")  # a signal per step keeps the netlist linear
            m.d.comb += step.eq(Mux(nxt[0], (nxt >> 1) ^ LFSR_TAPS, nxt >> 1))
            nxt = step
        with m.If(~seeded):
            # The seed is run-time configuration, so it cannot be a reset value.
            m.d.sync += [self.value.eq(Mux(self.seed == 0, 1, self.seed)), seeded.eq(1)]
        with m.Elif(self.step):
            m.d.sync += self.value.eq(nxt[:32])
        return m

"""8N1 UART transmitter and receiver with a clock divisor.

The divisor is the number of system clock cycles per bit (at least 4): 16 gives 3 Mbaud at 48 MHz,
33 gives 3.03 Mbaud at 100 MHz. Both sides are build-time configured; the divisor is reported in
the device's INFO frame.

A divisor may also be a fraction (:class:`fractions.Fraction`, denominator at most
:data:`MAX_DENOMINATOR`): the ECPIX-5 makes the FT2232H's 12 Mbaud from 100 MHz with 25/3 clocks
a bit, where a divisor of 8 would be 4 % fast (its stop bit 1.3 cycles early). A bit then lasts
``floor(d)`` or ``floor(d) + 1`` cycles, so that bit ``k`` of a frame (the start bit 0) begins at
cycle ``floor(k · d)`` of it: every edge within one cycle of where the exact rate puts it, never
late, the error not growing over the frame (a phase accumulator of the divisor's fractional
part, restarted at each frame). The receiver samples bit ``k`` at ``floor((k + 1/2) · d)``
cycles after the start bit's falling edge was seen, the same way. An integer divisor builds
exactly the logic it always did.
"""

from fractions import Fraction

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "UartRx", "check_divisor", "divisor_cycles", "MAX_DENOMINATOR"]

#: The largest denominator of a fractional divisor (its phase accumulator's range).
MAX_DENOMINATOR = 64


def check_divisor(divisor):
    """An integer divisor of at least 4 as it is (a whole Fraction as its integer); a
    :class:`~fractions.Fraction` of at least 4 with a denominator of at most
    :data:`MAX_DENOMINATOR` as it is; anything else a ValueError."""
    if isinstance(divisor, Fraction) and divisor.denominator == 1:
        divisor = int(divisor)
    if isinstance(divisor, Fraction):
        if divisor < 4 or divisor.denominator > MAX_DENOMINATOR:
            raise ValueError(f"UART divisor must be at least 4 with a denominator of at most "
                             f"{MAX_DENOMINATOR}, not {divisor}")
        return divisor
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 4:
        raise ValueError(f"UART divisor must be an integer of at least 4 (or a Fraction), not "
                         f"{divisor!r}")
    return divisor


def divisor_cycles(divisor, bits):
    """The cycles each of ``bits`` consecutive bits lasts from a frame's start (bit 0)."""
    d = Fraction(check_divisor(divisor))
    return [int((k + 1) * d) - int(k * d) for k in range(bits)]


class _Phase:
    """A phase accumulator of a fractional divisor's fractional part ``num / den`` (in
    ``scale``-ths of the denominator: the receiver's sampling points sit at half bits)."""

    def __init__(self, divisor, scale=1):
        d = Fraction(divisor)
        self.base = int(d)
        self.num = (d.numerator - self.base * d.denominator) * scale
        self.den = d.denominator * scale
        self.acc = Signal(range(self.den))

    def next_bit(self):
        """``(extra, statements)``: whether the next bit lasts one cycle more than
        ``floor(d)``, and the accumulator's update for it."""
        over = self.acc + self.num >= self.den
        return over, [self.acc.eq(self.acc + self.num - self.den * over)]


class UartTx(wiring.Component):
    """Send bytes as 8N1 frames: a start bit, 8 data bits LSB first, one stop bit.

    Parameters
    ----------
    divisor : int or Fraction
        Clock cycles per bit.

    Members
    -------
    data : In(stream.Signature(8))
        Bytes to send. A byte is taken as its start bit begins; back-to-back bytes leave no gap.
    tx : Out(1)
        The serial line (idles high).
    """

    def __init__(self, divisor):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        if isinstance(d, Fraction):
            # A fraction: the start bit lasts floor(d) cycles and the accumulator carries
            # frac(d) into bit 1; each later bit floor(d) or floor(d) + 1 (the accumulator's).
            phase = _Phase(d)
            timer = Signal(range(phase.base + 1))
            extra, advance = phase.next_bit()
        else:
            timer = Signal(range(self.divisor))
        bits = Signal(10)  # stop, data[7:0], start; shifted out LSB first
        left = Signal(range(11))
        # ``left == 0``, ``left == 1`` and ``timer == 0`` as flip-flops, set with the counters
        # (the handshake and the counters' enables start from flip-flops).
        idle = Signal(init=1)
        last = Signal()
        timer_zero = Signal(init=1)
        if isinstance(d, Fraction):
            start = [timer.eq(phase.base - 1), timer_zero.eq(0), phase.acc.eq(phase.num)]
            reload = [timer.eq(phase.base - 1 + extra), timer_zero.eq(0), *advance]
        else:
            start = reload = [timer.eq(self.divisor - 1), timer_zero.eq(self.divisor == 1)]

        # Ready when idle, or in the last cycle of a stop bit: back-to-back bytes leave no gap.
        m.d.comb += self.data.ready.eq(idle | (last & timer_zero))
        with m.If(self.data.valid & self.data.ready):
            frame = Cat(Const(0, 1), self.data.payload, Const(1, 1))
            m.d.sync += [
                bits.eq(frame >> 1),
                self.tx.eq(0),
                left.eq(10), idle.eq(0), last.eq(0),
                *start,
            ]
        with m.Elif(~idle):
            with m.If(timer_zero):
                m.d.sync += [
                    *reload,
                    left.eq(left - 1), idle.eq(left == 1), last.eq(left == 2),
                ]
                with m.If(~last):
                    m.d.sync += [self.tx.eq(bits[0]), bits.eq(bits >> 1)]
            with m.Else():
                m.d.sync += [timer.eq(timer - 1), timer_zero.eq(timer == 1)]
        return m


class UartRx(wiring.Component):
    """Receive 8N1 frames, sampling each bit near its middle by a majority of three samples.

    A start bit must still be low at its middle (else it was a glitch and is ignored); a byte
    whose stop bit is low is a framing error: it is not delivered, ``error`` pulses, and the
    receiver waits for the line to return high before looking for the next start bit.

    Parameters
    ----------
    divisor : int or Fraction
        Clock cycles per bit.

    Members
    -------
    rx : In(1)
        The serial line, asynchronous to the clock.
    data : Out(stream.Signature(8))
        Received bytes. A byte not taken before the next one completes is lost (``overrun``).
    error : Out(1)
        Pulses on a framing error.
    overrun : Out(1)
        Pulses when a received byte is lost because ``data`` was still full.
    """

    def __init__(self, divisor):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(stream.Signature(8)),
            "error": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        if isinstance(d, Fraction):
            # Bit k sampled floor((k + 1/2) d) cycles after the edge: the accumulator holds
            # frac((k + 1/2) d) in halves of the denominator; bit k + 1 comes floor(d) or
            # floor(d) + 1 cycles after bit k.
            phase = _Phase(d, scale=2)
            extra, advance = phase.next_bit()
            first, bit, span = int(d / 2), phase.base - 1 + extra, 2 * phase.base + 2
            begin = [phase.acc.eq(d.numerator % (2 * d.denominator))]
        else:
            first, bit, span, advance, begin = d // 2, d - 1, 2 * d, [], []
        line = Signal(init=1)
        # The line is asynchronous: two flip-flops for metastability; init=1 (idle high).
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)

        # Three consecutive samples ending at the sampling point; their majority is the bit.
        history = Signal(3, init=0b111)
        m.d.sync += history.eq(Cat(line, history[:2]))
        majority = (history[0] & history[1]) | (history[0] & history[2]) | (history[1] & history[2])

        timer = Signal(range(span))
        # Whether the timer is 0: a flip-flop set as the timer is loaded or counts down (the
        # state machine's decisions start from flip-flops).
        timer_zero = Signal(init=1)
        shift = Signal(8)
        count = Signal(range(9))

        def load(value):
            m.d.sync += [timer.eq(value), timer_zero.eq(value == 0)]

        def count_down():
            m.d.sync += [timer.eq(timer - 1), timer_zero.eq(timer == 1)]

        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    # Sample the start bit one sample past its middle (the third of three).
                    load(first)
                    m.d.sync += begin
                    m.next = "START"
            with m.State("START"):
                with m.If(timer_zero):
                    with m.If(~majority):
                        load(bit)
                        m.d.sync += [count.eq(0), *advance]
                        m.next = "DATA"
                    with m.Else():
                        m.next = "IDLE"  # a glitch, not a start bit
                with m.Else():
                    count_down()
            with m.State("DATA"):
                with m.If(timer_zero):
                    load(bit)
                    m.d.sync += [shift.eq(Cat(shift[1:], majority)), count.eq(count + 1),
                                 *advance]
                    with m.If(count == 7):
                        m.next = "STOP"
                with m.Else():
                    count_down()
            with m.State("STOP"):
                with m.If(timer_zero):
                    with m.If(majority):
                        with m.If(self.data.valid & ~self.data.ready):
                            m.d.comb += self.overrun.eq(1)
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += self.error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    count_down()
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m

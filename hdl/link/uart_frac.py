"""8N1 UART transmitter and receiver with a fractional clock divisor.

The integer-divisor UART (``uart.py``) makes 3 Mbaud from 48 MHz (16) or 3.03 Mbaud from 100 MHz
(33). The FT2232H of the ECPIX-5 runs 12 Mbaud, 8.33 cycles of 100 MHz a bit: a divisor of 8
would be 4 % fast, its stop bit 1.3 cycles early, and a divisor of 25/3 keeps the rate exact.
Here a bit lasts ``floor(d)`` or ``floor(d) + 1`` cycles, so that bit ``k`` of a frame (the
start bit 0) begins at cycle ``floor(k · d)`` of it: every edge is within one cycle of where
the exact rate puts it, never late, and the error does not grow over the frame (a phase
accumulator of the divisor's fractional part, restarted at each frame). The receiver samples
bit ``k`` at ``floor((k + 1/2) · d)`` cycles after the start bit's falling edge, the same way.

:func:`uart_tx` and :func:`uart_rx` build the integer UART for an integer divisor (its logic
unchanged) and these for a :class:`fractions.Fraction`.
"""

from fractions import Fraction

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from .uart import UartRx, UartTx

__all__ = ["FracUartTx", "FracUartRx", "uart_tx", "uart_rx", "divisor_cycles",
           "check_divisor", "MAX_DENOMINATOR"]

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


def uart_tx(divisor):
    """The transmitter for ``divisor``: :class:`~.uart.UartTx` or :class:`FracUartTx`."""
    divisor = check_divisor(divisor)
    return FracUartTx(divisor) if isinstance(divisor, Fraction) else UartTx(divisor)


def uart_rx(divisor):
    """The receiver for ``divisor``: :class:`~.uart.UartRx` or :class:`FracUartRx`."""
    divisor = check_divisor(divisor)
    return FracUartRx(divisor) if isinstance(divisor, Fraction) else UartRx(divisor)


class _Phase:
    """A phase accumulator of the divisor's fractional part ``num / den`` (in ``scale``-ths of
    the denominator: the receiver's sampling points sit at half bits)."""

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


class FracUartTx(wiring.Component):
    """:class:`~.uart.UartTx` with a fractional divisor (see the module's docstring).

    Members
    -------
    data : In(stream.Signature(8))
        Bytes to send. A byte is taken as its start bit begins; back-to-back bytes leave no gap.
    tx : Out(1)
        The serial line (idles high).
    """

    def __init__(self, divisor):
        self.divisor = check_divisor(divisor)
        if not isinstance(self.divisor, Fraction):
            raise ValueError(f"FracUartTx takes a fractional divisor (UartTx the integer "
                             f"{self.divisor})")
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        phase = _Phase(self.divisor)
        timer = Signal(range(phase.base + 1))
        bits = Signal(10)  # stop, data[7:0], start; shifted out LSB first
        left = Signal(range(11))
        # As UartTx: ``left == 0``, ``left == 1`` and ``timer == 0`` as flip-flops.
        idle = Signal(init=1)
        last = Signal()
        timer_zero = Signal(init=1)
        extra, advance = phase.next_bit()

        m.d.comb += self.data.ready.eq(idle | (last & timer_zero))
        with m.If(self.data.valid & self.data.ready):
            frame = Cat(Const(0, 1), self.data.payload, Const(1, 1))
            m.d.sync += [
                bits.eq(frame >> 1),
                self.tx.eq(0),
                left.eq(10), idle.eq(0), last.eq(0),
                # The start bit lasts floor(d) cycles (floor(1 · d) - floor(0)); the
                # accumulator carries frac(d) into bit 1.
                timer.eq(phase.base - 1), timer_zero.eq(0), phase.acc.eq(phase.num),
            ]
        with m.Elif(~idle):
            with m.If(timer_zero):
                m.d.sync += [
                    timer.eq(phase.base - 1 + extra), timer_zero.eq(0), *advance,
                    left.eq(left - 1), idle.eq(left == 1), last.eq(left == 2),
                ]
                with m.If(~last):
                    m.d.sync += [self.tx.eq(bits[0]), bits.eq(bits >> 1)]
            with m.Else():
                m.d.sync += [timer.eq(timer - 1), timer_zero.eq(timer == 1)]
        return m


class FracUartRx(wiring.Component):
    """:class:`~.uart.UartRx` with a fractional divisor: the same majority of three samples,
    glitch and framing-error handling, each bit sampled at ``floor((k + 1/2) · d)`` cycles after
    the start bit's falling edge was seen.

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
        if not isinstance(self.divisor, Fraction):
            raise ValueError(f"FracUartRx takes a fractional divisor (UartRx the integer "
                             f"{self.divisor})")
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(stream.Signature(8)),
            "error": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        history = Signal(3, init=0b111)
        m.d.sync += history.eq(Cat(line, history[:2]))
        majority = (history[0] & history[1]) | (history[0] & history[2]) | (history[1] & history[2])

        # frac((k + 1/2) d) in halves of the denominator: bit k + 1 is sampled floor(d) or
        # floor(d) + 1 cycles after bit k.
        phase = _Phase(d, scale=2)
        extra, advance = phase.next_bit()
        timer = Signal(range(2 * phase.base + 2))
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
                    load(int(d / 2))
                    m.d.sync += phase.acc.eq(d.numerator % (2 * d.denominator))
                    m.next = "START"
            with m.State("START"):
                with m.If(timer_zero):
                    with m.If(~majority):
                        load(phase.base - 1 + extra)
                        m.d.sync += [count.eq(0), *advance]
                        m.next = "DATA"
                    with m.Else():
                        m.next = "IDLE"  # a glitch, not a start bit
                with m.Else():
                    count_down()
            with m.State("DATA"):
                with m.If(timer_zero):
                    load(phase.base - 1 + extra)
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

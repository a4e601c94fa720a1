"""8N1 UART transmitter and receiver with a clock divisor.

The divisor is the number of system clock cycles per bit (at least 4): 16 gives 3 Mbaud at 48 MHz,
33 gives 3.03 Mbaud at 100 MHz. Both sides are build-time configured; the divisor is reported in
the device's INFO frame.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "UartRx"]


def _check_divisor(divisor):
    if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 4:
        raise ValueError(f"UART divisor must be an integer of at least 4, not {divisor!r}")
    return divisor


class UartTx(wiring.Component):
    """Send bytes as 8N1 frames: a start bit, 8 data bits LSB first, one stop bit.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit.

    Members
    -------
    data : In(stream.Signature(8))
        Bytes to send. A byte is taken as its start bit begins; back-to-back bytes leave no gap.
    tx : Out(1)
        The serial line (idles high).
    """

    def __init__(self, divisor):
        self.divisor = _check_divisor(divisor)
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        bits = Signal(10)  # stop, data[7:0], start; shifted out LSB first
        left = Signal(range(11))
        # ``left == 0``, ``left == 1`` and ``timer == 0`` as flip-flops, set with the counters
        # (the handshake and the counters' enables start from flip-flops).
        idle = Signal(init=1)
        last = Signal()
        timer_zero = Signal(init=1)
        reload = [timer.eq(self.divisor - 1), timer_zero.eq(self.divisor == 1)]

        # Ready when idle, or in the last cycle of a stop bit: back-to-back bytes leave no gap.
        m.d.comb += self.data.ready.eq(idle | (last & timer_zero))
        with m.If(self.data.valid & self.data.ready):
            frame = Cat(Const(0, 1), self.data.payload, Const(1, 1))
            m.d.sync += [
                bits.eq(frame >> 1),
                self.tx.eq(0),
                left.eq(10), idle.eq(0), last.eq(0),
                *reload,
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
    divisor : int
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
        self.divisor = _check_divisor(divisor)
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
        # The line is asynchronous: two flip-flops for metastability; init=1 (idle high).
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)

        # Three consecutive samples ending at the sampling point; their majority is the bit.
        history = Signal(3, init=0b111)
        m.d.sync += history.eq(Cat(line, history[:2]))
        majority = (history[0] & history[1]) | (history[0] & history[2]) | (history[1] & history[2])

        timer = Signal(range(2 * d))
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
                    load(d // 2)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer_zero):
                    with m.If(~majority):
                        load(d - 1)
                        m.d.sync += count.eq(0)
                        m.next = "DATA"
                    with m.Else():
                        m.next = "IDLE"  # a glitch, not a start bit
                with m.Else():
                    count_down()
            with m.State("DATA"):
                with m.If(timer_zero):
                    load(d - 1)
                    m.d.sync += [shift.eq(Cat(shift[1:], majority)), count.eq(count + 1)]
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

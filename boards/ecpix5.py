"""ECPIX-5 with an ECP5-85F (LFE5UM5G-85F): 64 R/B# channels at 100 MHz.

Probe header: the eight PMODs, pins 1–4 and 7–10 of each: PMOD ``k`` carries channels
``8k … 8k+7``. With 64 channels every PMOD pin is an R/B# input; a build with fewer channels
gives the PMODs after the last R/B# one to the bus tap (``--tap T``: CE# × T, CLE, ALE, WE#,
RE#, DQ[7:0]) and to the emulator's ONFI bus (``--emu-bus``), in that order. Pins are LVCMOS33
with the pull-up on, so an unconnected channel idles ready (high).

Clock: the 100 MHz oscillator through an EHXPLLL (100 MHz out; the PLL's lock holds the reset).
Reset: the board's reset button. UART: the FT2232H's second channel at its highest rate,
12 Mbaud (a fractional divisor of 25/3 clocks a bit: ``hdl/link/uart.py``).
LEDs: RGB LED 0 green = link traffic, RGB LED 1 green = R/B# activity.
"""

import sys

from amaranth.build import Attrs
from amaranth_boards.ecpix5 import ECPIX585Platform

from .top import BoardMixin

__all__ = ["ECPIX5_85F"]

_PMOD_PINS = (1, 2, 3, 4, 7, 8, 9, 10)


class ECPIX5_85F(BoardMixin, ECPIX585Platform):
    """The ECPIX-5 85F with rbscope's probe header, PLL, reset button and LEDs."""

    board_name = "ecpix5"
    target_hz = 100_000_000
    default_channels = 64
    header = BoardMixin.header_from_connectors(
        ECPIX585Platform.connectors,
        [("pmod", conn, pin) for conn in range(8) for pin in _PMOD_PINS])
    led_link = ("rgb_led", 0, "g")
    led_activity = ("rgb_led", 1, "g")
    reset_button = ("rst", 0)
    io_attrs = Attrs(IO_TYPE="LVCMOS33", PULLMODE="UP")
    # Trace records the link's FIFO holds: 16 block RAMs of the part's 208 ride out the
    # snapshots' hold of the link and bursts (the default, 16, is LUT RAM).
    trace_depth = 4096
    #: Runs of reads sent as first, count and last where the host asks (TRACE_SUMMARY).
    trace_summary = True
    # The FT2232H's 12 Mbaud: four times the records of 3 Mbaud (the host tries both).
    uart_baud = 12_000_000

    def create_clock(self, m):
        return self.ecp5_pll(m, ("clk100", 0))


if __name__ == "__main__":
    from .build import main
    sys.exit(main(["ecpix5", *sys.argv[1:]]))

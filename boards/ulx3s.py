"""ULX3S with an ECP5-85F: 56 R/B# channels at 100 MHz.

Probe header: the 56 GPIO of the 2×20 headers (``gpio0`` pairs 0+ 0- 1+ … 27-) in that order:
channel ``i`` is the ``i``-th pin of that list, so the full header gives 56 R/B# channels. A bus
tap (``--tap T``: CE# × T, CLE, ALE, WE#, RE#, DQ[7:0]) takes the pins after the R/B# ones:
56 − 12 − T channels remain (40 with four targets). An emulator build with its ONFI bus on the
header (``--emu-bus``) uses 7 + 8 + dies pins (CE# per die, CLE, ALE, WE#, RE#, WP#, R/B#,
DQ[7:0]). Pins are LVCMOS33 with the pull-up on, so an unconnected channel idles ready.

Clock: the 25 MHz oscillator into an EHXPLLL, 100 MHz out. UART: the FTDI (US1 port), 3.03 Mbaud
(divisor 33). LEDs: 0 = link traffic, 1 = R/B# activity.
"""

import sys

from amaranth.build import Attrs
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from .top import BoardMixin

__all__ = ["ULX3S85F"]


class ULX3S85F(BoardMixin, ULX3S_85F_Platform):
    """The ULX3S-85F with rbscope's probe header, PLL and LEDs."""

    board_name = "ulx3s"
    target_hz = 100_000_000
    default_channels = 56
    header = BoardMixin.header_from_connectors(
        ULX3S_85F_Platform.connectors,
        [("gpio", 0, f"{pair}{sign}") for pair in range(28) for sign in "+-"])
    led_link = ("led", 0)
    led_activity = ("led", 1)
    io_attrs = Attrs(IO_TYPE="LVCMOS33", PULLMODE="UP")
    # Trace records the link's FIFO holds: 16 block RAMs of the part's 208 ride out the
    # snapshots' hold of the link and bursts (the default, 16, is LUT RAM).
    trace_depth = 1024
    #: Runs of reads sent as first, count and last where the host asks (TRACE_SUMMARY).
    trace_summary = True

    def create_clock(self, m):
        return self.ecp5_pll(m, ("clk25", 0))


if __name__ == "__main__":
    from .build import main
    sys.exit(main(["ulx3s", *sys.argv[1:]]))

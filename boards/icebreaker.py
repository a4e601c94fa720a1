"""iCEBreaker (iCE40UP5K-SG48): 16 R/B# channels at 48 MHz.

Probe header: PMOD1A pins 1–4, 7–10 are R/B# channels 0–7 and PMOD1B the same pins channels
8–15. PMOD2 (8 more pins, channels 16–23, or the bus tap) is free only with the break-off
LED/button section removed. There are not enough pins for the emulator's ONFI bus (15 pins) beside
R/B# inputs; an emulator build runs in loopback. Pins are 3.3 V LVCMOS with the FPGA's pull-up on,
so an unconnected channel idles ready (high).

Sniffer: 20-bit widths (``width_bits``), to save logic cells: at the default 0.1 µs tick a pulse
is overlong from about 0.1 s on (erases take a few ms). Seven of the ten class-window bounds are
held and compared in the UP5K's DSP blocks (``dsp_bounds``; the link's tick-period multiplier
takes the eighth), which saves their flip-flops and carry chains. The link leaves out the
registers it keeps after its block RAMs' outputs for the ECP5 (``ram_output_registers``): the
iCE40's block RAM output is fast, and each of them would cost a logic cell.

Clock: the 12 MHz oscillator into an SB_PLL40_PAD, 48 MHz out (12 × 64 / 16). UART: the FTDI's
second channel (pins 6/9) at the FT2232H's 12 Mbaud (divisor 4; 3 Mbaud before 2026-12-03:
``docs/benchmarks.md``, "Boards"). LEDs: green = link traffic, red = R/B# activity.
"""

import sys

from amaranth.build import Attrs
from amaranth_boards.icebreaker import ICEBreakerPlatform

from .top import BoardMixin

__all__ = ["ICEBreaker"]

_PMOD_PINS = (1, 2, 3, 4, 7, 8, 9, 10)


class ICEBreaker(BoardMixin, ICEBreakerPlatform):
    """The iCEBreaker with rbscope's probe header, PLL and LEDs."""

    board_name = "icebreaker"
    target_hz = 48_000_000
    default_channels = 16
    header = BoardMixin.header_from_connectors(
        ICEBreakerPlatform.connectors,
        [("pmod", conn, pin) for conn in (0, 1, 2) for pin in _PMOD_PINS])
    led_link = ("led_g", 0)
    led_activity = ("led_r", 0)
    io_attrs = Attrs(IO_STANDARD="SB_LVCMOS", PULLUP=1)
    width_bits = 20
    dsp_bounds = 7
    ram_output_registers = False
    # 12 Mbaud, and TRACE_BATCH frames between a snapshot's frames (the default): the FIFO then
    # waits at most one frame for the link. 256 records: the five block RAMs its 80-bit records
    # fill hold that many, so the depth costs only wider pointers, and rides out 16 dies whose
    # reads arrive together at 4 x 2 000 pulses/s each (docs/benchmarks.md).
    uart_baud = 12_000_000
    trace_batches_in_bursts = True
    trace_depth = 256

    def create_clock(self, m):
        return self.ice40_pll(m, ("clk12", 0))


if __name__ == "__main__":
    from .build import main
    sys.exit(main(["icebreaker", *sys.argv[1:]]))

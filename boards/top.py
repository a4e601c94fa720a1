"""What every board shares: the probe-header plan, clocks and resets, and the top level.

A board file (``icebreaker.py``, ``ulx3s.py``, ``ecpix5.py``) subclasses an amaranth-boards
platform and adds :class:`BoardMixin`: the header pins it offers to probes, in order, the target
clock and how its PLL reaches it. :class:`RBScopeTop` then builds the same design on any of them:
clock and reset, the probe pins, the device (``RBScopeDevice``), the UART and two LEDs.

Probe header plan
-----------------
The header pins are handed out in order (:func:`plan_header`): first the R/B# inputs (channel
``i`` on header pin ``i``), then, when the build asks for them, the emulator's ONFI bus (a real
NAND host controller drives the emulated dies through it) and the bus-tap inputs of the
opcode-aware sniffer (one NAND channel: CE# per target, CLE, ALE, WE#, DQ[7:0]). A build that
asks for more pins than the header has is refused with :class:`BoardError`, naming the count.
"""

from dataclasses import dataclass, field

from amaranth.build import Attrs, Pins, Resource, Subsignal
from amaranth.hdl import ClockDomain, ClockSignal, Const, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from ..gateware.device import RBScopeDevice
from ..gateware.nand_emu import boot
from ..gateware.onfi_tap.params import TapParams
from ..gateware.rb_sniffer import SnifferParams

__all__ = ["BoardError", "BoardMixin", "HeaderPlan", "RBScopeTop", "plan_header",
           "ice40_pll_params", "ecp5_pll_params", "UART_BAUD"]

#: Link rate of a board (FTDI bridge, 8N1) unless its class says otherwise (``uart_baud``); the
#: UART divisor is the clock over it, rounded (or a fraction), and must give it within 2 %.
UART_BAUD = 3_000_000

def uart_divisor(platform, clock_hz):
    """The UART divisor that makes the board's ``uart_baud`` from ``clock_hz`` (whole clocks a
    bit within 2 %, else a fraction exact to 0.1 %: :func:`_fractional_divisor`)."""
    baud = platform.uart_baud
    divisor = round(clock_hz / baud)
    if divisor < 4 or abs(clock_hz / divisor - baud) > 0.02 * baud:
        # No whole number of clocks a bit within 2 %: a fractional divisor (the link's
        # uart.py), where one of a small denominator is within 0.1 %; else a BoardError.
        # (Defined after the board classes: this function keeps its lines.)
        return _fractional_divisor(platform, clock_hz, baud, divisor)
    return divisor


#: The emulator's ONFI bus pins besides its CE# (one per die) and R/B# (one per die, or one
#: wired for all): (name, direction).
EMU_BUS_PINS = (("cle", "i"), ("ale", "i"), ("we_n", "i"), ("re_n", "i"), ("wp_n", "i"),
                ("io", "io"))
#: The bus tap's pins besides its CE# (one per target); all inputs.
TAP_PINS = ("cle", "ale", "we_n", "re_n", "io")


class BoardError(Exception):
    """A board build that cannot be made (too many pins, unreachable clock, bad option)."""


@dataclass(frozen=True)
class HeaderPlan:
    """Which header pin does what in one build (physical pin names of the FPGA package).

    Members
    -------
    rb : tuple of str
        R/B# input of channel ``i`` is ``rb[i]``.
    emu_bus : dict of str to tuple of str
        The emulator's ONFI bus: ``ce_n`` (one per die), ``cle``, ``ale``, ``we_n``, ``re_n``,
        ``wp_n``, ``rb_n`` (open-drain-style output, wired-AND of the dies), ``io`` (8 pins).
    tap : dict of str to tuple of str
        The bus tap: ``ce_n`` (per target), ``cle``, ``ale``, ``we_n``, ``re_n``, ``io`` (8 pins).
    spare : tuple of str
        Header pins left over.
    """

    rb: tuple
    emu_bus: dict = field(default_factory=dict)
    tap: dict = field(default_factory=dict)
    spare: tuple = ()

    def describe(self, header_names):
        """Return lines ``role: header pin (package pin)`` for the documentation and the CLI."""
        lines = [f"R/B# ch{i}: {header_names[p]} ({p})" for i, p in enumerate(self.rb)]
        for group, pins in (("emu", self.emu_bus), ("tap", self.tap)):
            for name, members in pins.items():
                for j, p in enumerate(members):
                    suffix = f"[{j}]" if len(members) > 1 else ""
                    lines.append(f"{group} {name}{suffix}: {header_names[p]} ({p})")
        return lines


def plan_header(header, channels, *, emu_dies=0, emu_rb=1, tap_targets=0):
    """Hand out the header pins of a build.

    Parameters
    ----------
    header : sequence of str
        The board's probe-header pins (package pin names) in the order they are handed out.
    channels : int
        R/B# inputs (0 in a loopback build, whose sniffer watches the emulated dies).
    emu_dies : int
        Emulated dies whose ONFI bus goes to the header (0: none).
    emu_rb : int
        The emulator's R/B# outputs (1 when the dies' are wired together, else one per die).
    tap_targets : int
        Targets (CE# lines) of the bus tap's NAND channel (0: no tap).

    Returns
    -------
    HeaderPlan

    Raises
    ------
    BoardError
        When the header has too few pins.
    """
    for name, value in (("channels", channels), ("emu_dies", emu_dies),
                        ("tap_targets", tap_targets)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BoardError(f"{name} must be a non-negative integer, not {value!r}")
    emu_width = {"ce_n": emu_dies, "rb_n": emu_rb,
                 **{n: (8 if n == "io" else 1) for n, _ in EMU_BUS_PINS}}
    tap_width = {"ce_n": tap_targets, **{n: (8 if n == "io" else 1) for n in TAP_PINS}}
    need = (channels + (sum(emu_width.values()) if emu_dies else 0)
            + (sum(tap_width.values()) if tap_targets else 0))
    if need > len(header):
        raise BoardError(
            f"The build needs {need} header pins ({channels} R/B#"
            + (f", {sum(emu_width.values())} emulator bus" if emu_dies else "")
            + (f", {sum(tap_width.values())} bus tap" if tap_targets else "")
            + f") but the header has {len(header)}")
    pins = iter(header)

    def take(count):
        return tuple(next(pins) for _ in range(count))

    rb = take(channels)
    emu = {n: take(w) for n, w in emu_width.items()} if emu_dies else {}
    tap = {n: take(w) for n, w in tap_width.items()} if tap_targets else {}
    return HeaderPlan(rb, emu, tap, tuple(pins))


#: How far from the asked frequency a PLL may land.
PLL_TOLERANCE = 0.01


# ---- PLL parameter search ------------------------------------------------------------------------

def ice40_pll_params(f_in, f_out):
    """SB_PLL40 dividers giving the frequency nearest ``f_out`` from ``f_in`` (Hz).

    The iCE40 PLL makes ``f_in * (DIVF + 1) / ((DIVR + 1) * 2**DIVQ)`` with a phase detector
    between 10 and 133 MHz and a VCO between 533 and 1066 MHz (iCE40 sysCLOCK PLL guide).

    Returns
    -------
    dict
        ``divr``, ``divf``, ``divq``, ``filter_range`` and the ``freq`` reached (Hz).
    """
    best = None
    for divr in range(16):
        pfd = f_in / (divr + 1)
        if not 10e6 <= pfd <= 133e6:
            continue
        for divq in range(1, 7):
            for divf in range(128):
                vco = pfd * (divf + 1)
                if not 533e6 <= vco <= 1066e6:
                    continue
                freq = vco / (1 << divq)
                if best is None or abs(freq - f_out) < abs(best["freq"] - f_out):
                    # Loop filter range by phase-detector frequency (same guide).
                    filter_range = next(i for i, top in enumerate(
                        (17e6, 26e6, 44e6, 66e6, 101e6, 1e12), start=1) if pfd < top)
                    best = dict(divr=divr, divf=divf, divq=divq, filter_range=filter_range,
                                freq=freq)
    if best is None or abs(best["freq"] - f_out) > PLL_TOLERANCE * f_out:
        raise BoardError(f"No iCE40 PLL setting makes {f_out / 1e6:g} MHz from "
                         f"{f_in / 1e6:g} MHz within {PLL_TOLERANCE:.0%}")
    return best


def ecp5_pll_params(f_in, f_out):
    """EHXPLLL dividers giving the frequency nearest ``f_out`` from ``f_in`` (Hz).

    With feedback from CLKOP: ``f_out = f_in * CLKFB_DIV / CLKI_DIV`` and a VCO of
    ``f_out * CLKOP_DIV`` between 400 and 800 MHz (ECP5 sysCLOCK guide).
    """
    best = None
    for clki in range(1, 129):
        pfd = f_in / clki
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for clkfb in range(1, 81):
            freq = pfd * clkfb
            for clkop in range(1, 129):
                if 400e6 <= freq * clkop <= 800e6:
                    break
            else:
                continue
            if best is None or abs(freq - f_out) < abs(best["freq"] - f_out):
                best = dict(clki_div=clki, clkfb_div=clkfb, clkop_div=clkop, freq=freq)
    if best is None or abs(best["freq"] - f_out) > PLL_TOLERANCE * f_out:
        raise BoardError(f"No ECP5 PLL setting makes {f_out / 1e6:g} MHz from "
                         f"{f_in / 1e6:g} MHz within {PLL_TOLERANCE:.0%}")
    return best


# ---- board mixin ---------------------------------------------------------------------------------

class BoardMixin:
    """What a board file adds to its amaranth-boards platform.

    Class attributes
    ----------------
    board_name : str
        Reported in INFO (at most 16 ASCII characters).
    header : dict of str to str
        Probe-header pins in hand-out order: ``{"pmod0.1": "4", …}`` (label → package pin).
    target_hz : int
        The system clock the PLL makes.
    led_link, led_activity : (str, int) or (str, int, str)
        Resources of the two LEDs (with a subsignal name for one colour of an RGB LED).
    reset_button : (str, int) or None
        A reset button resource, or none.
    uart : (str, int)
        The UART resource through the board's FTDI.
    io_attrs : Attrs
        Electrical attributes of the probe pins.
    width_bits : int
        The sniffer's width counter size on this board (``SnifferParams.width_bits``): a pulse of
        ``2**width_bits - 1`` ticks or more is overlong. Narrower on a part short of logic.
    dsp_bounds : int
        Class-window bounds held and compared in the part's DSP blocks (iCE40UP: up to 8, one
        per ``SB_MAC16``, less those the link uses); 0 for none.
    ram_output_registers : bool
        Whether the link registers its block RAMs' outputs before logic (the ECP5, whose block
        RAM clock to output is slow); ``False`` saves those logic cells on the iCE40.
    uart_baud : int
        The link's rate (the USB bridge's): the UART divisor is the clock over it, rounded, and
        must give it within 2 % (the bridges tolerate about 3 %).
    """

    board_name = "board"
    header = {}
    target_hz = 48_000_000
    led_link = ("led", 0)
    led_activity = ("led", 1)
    uart = ("uart", 0)
    reset_button = None
    io_attrs = Attrs()
    width_bits = 24
    dsp_bounds = 0
    ram_output_registers = True
    uart_baud = UART_BAUD

    @classmethod
    def header_from_connectors(cls, connectors, names):
        """Return ``{label: package pin}`` for connector pins ``(conn, number, pin)`` in order."""
        by_key = {(c.name, c.number): c for c in connectors}
        return {f"{conn}{number}.{pin}": by_key[(conn, number)].mapping[str(pin)]
                for conn, number, pin in names}

    def add_probe_resources(self, plan):
        """Add the plan's pins as resources ``rb``, ``emu_bus``, ``tap`` (requested with
        ``dir="-"``)."""
        if plan.rb:
            self.add_resources([Resource("rb", 0, Pins(" ".join(plan.rb), dir="i"),
                                         self.io_attrs)])
        for name, group in (("emu_bus", plan.emu_bus), ("tap", plan.tap)):
            if group:
                # R/B# is open drain (driven low or released), so its pins are bidirectional.
                dirs = {**dict(EMU_BUS_PINS), "rb_n": "io"} if name == "emu_bus" else {}
                self.add_resources([Resource(name, 0, *[
                    Subsignal(sig, Pins(" ".join(pins), dir=dirs.get(sig, "i")))
                    for sig, pins in group.items()], self.io_attrs)])

    def create_clock(self, m):
        """Make the ``sync`` domain at :attr:`target_hz`; return a signal that is high once the
        PLL is locked. Board files implement this with their PLL."""
        raise NotImplementedError

    def ice40_pll(self, m, clk_resource):
        """Clock the ``sync`` domain from an SB_PLL40_PAD on ``clk_resource``'s pin."""
        clk_in = self.request(*clk_resource, dir="-")
        f_in = self.lookup(*clk_resource).clock.frequency
        pll = ice40_pll_params(f_in, self.target_hz)
        self.pll_hz = round(pll["freq"])
        m.domains.sync = ClockDomain("sync")
        clk, lock = Signal(name="pll_clk"), Signal(name="pll_lock")
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE",
            p_DIVR=pll["divr"], p_DIVF=pll["divf"], p_DIVQ=pll["divq"],
            p_FILTER_RANGE=pll["filter_range"],
            i_RESETB=Const(1), i_BYPASS=Const(0),
            io_PACKAGEPIN=clk_in.io,
            o_PLLOUTGLOBAL=clk,
            o_LOCK=lock,
        )
        return lock

    def ecp5_pll(self, m, clk_resource):
        """Clock the ``sync`` domain from an EHXPLLL fed by ``clk_resource``."""
        clk_in = self.request(*clk_resource, dir="-")
        f_in = self.lookup(*clk_resource).clock.frequency
        m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_in)
        pll = ecp5_pll_params(f_in, self.target_hz)
        self.pll_hz = round(pll["freq"])
        m.domains.sync = ClockDomain("sync")
        clk, lock = Signal(name="pll_clk"), Signal(name="pll_lock")
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=str(f_in / 1e6),
            a_FREQUENCY_PIN_CLKOP=str(self.pll_hz / 1e6),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=pll["clki_div"], p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_DIV=pll["clkop_div"], p_CLKOP_CPHASE=pll["clkop_div"] - 1,
            p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=pll["clkfb_div"],
            i_CLKI=clk_buf.i, i_CLKFB=clk,
            i_RST=Const(0), i_STDBY=Const(0), i_PHASESEL0=Const(0), i_PHASESEL1=Const(0),
            i_PHASEDIR=Const(1), i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1),
            i_PLLWAKESYNC=Const(0), i_ENCLKOP=Const(0),
            o_CLKOP=clk,
            o_LOCK=lock,
        )
        return lock


# ---- the top level -------------------------------------------------------------------------------

#: Power-on reset length in system clock cycles (after the PLL locks).
POR_CYCLES = 1 << 10
#: LED pulse stretch: an event keeps its LED lit for one to two periods of 2**LED_STRETCH_BITS
#: cycles (44–87 ms at 48 MHz, 21–42 ms at 100 MHz).
LED_STRETCH_BITS = 21


class RBScopeTop(Elaboratable):
    """The rbscope device on a board: clock, reset, probe pins, UART and LEDs.

    Parameters
    ----------
    params : SnifferParams
        The sniffer; in a loopback build its channel count equals the emulated dies.
    emulator : EmuParams, optional
        Build the NAND emulator in loopback (the sniffer watches the emulated dies).
    emu_bus : bool
        Route the emulator's ONFI bus to the header (a real host controller drives the dies).
    tap_targets : int
        Build the opcode-aware bus tap (``rbscope.gateware.onfi_tap``) for a NAND channel of
        this many targets (one LUN each) on header pins; its dies are R/B# channels
        ``0 … tap_targets - 1`` and ``params.tag_bits`` must be 4. In a loopback build the tap
        listens to the emulated bus instead (one target per emulated die, no pins).
    snapshot_ms : int
        Default snapshot period.
    """

    def __init__(self, params, *, emulator=None, emu_bus=False, tap_targets=0, snapshot_ms=100):
        if not isinstance(params, SnifferParams):
            raise BoardError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.emulator = emulator
        self.emu_bus = emu_bus
        self.tap_targets = tap_targets
        self.snapshot_ms = snapshot_ms
        self.device = None
        self.tap = None
        if tap_targets:
            targets = emulator.dies if emulator is not None else tap_targets
            if params.tag_bits != 4:
                raise BoardError("a build with the bus tap needs a sniffer with tag_bits=4")
            try:
                self.tap = TapParams(targets=targets, sniffer=params)
            except ValueError as exc:
                raise BoardError(f"bus tap: {exc}") from None

    def plan(self, platform):
        """The header plan of this build on ``platform``."""
        loopback = self.emulator is not None
        return plan_header(
            list(platform.header.values()), 0 if loopback else self.params.channels,
            emu_dies=self.emulator.dies if loopback and self.emu_bus else 0,
            emu_rb=self.emulator.rb_count if loopback else 1,
            tap_targets=0 if loopback else self.tap_targets)

    def elaborate(self, platform):
        uart_divisor(platform, platform.target_hz)  # (before anything is built)
        m = Module()
        plan = self.plan(platform)
        platform.add_probe_resources(plan)

        # ---- clock and reset ---------------------------------------------------------------
        lock = platform.create_clock(m)
        clock_hz = platform.pll_hz
        # Power-on reset: held while the PLL is unlocked and for POR_CYCLES after it locks,
        # counted in a reset-less domain on the same clock (nothing may reset the counter
        # that ends the reset).
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += ClockSignal("por").eq(ClockSignal("sync"))
        por_count = Signal(range(POR_CYCLES + 1))
        por_done = Signal()
        with m.If(~lock):
            m.d.por += por_count.eq(0)
        with m.Elif(~por_done):
            m.d.por += por_count.eq(por_count + 1)
        m.d.comb += por_done.eq(por_count == POR_CYCLES)
        rst_request = Signal()
        m.d.comb += rst_request.eq(~por_done)
        if platform.reset_button is not None:
            # The button is asynchronous: it goes through io.Buffer into the reset synchroniser
            # below (which asserts at once and releases on a clock edge).
            button = platform.request(*platform.reset_button, dir="-")
            m.submodules.button = button_buf = io.Buffer("i", button)
            m.d.comb += rst_request.eq(~por_done | button_buf.i)
        # Reset synchroniser: the sync domain leaves reset on a clock edge, two flip-flops after
        # the request goes away, so no flip-flop sees the release in its setup window.
        m.submodules.rst_sync = ResetSynchronizer(rst_request, domain="sync")

        # ---- the device --------------------------------------------------------------------
        divisor = uart_divisor(platform, clock_hz)
        self.device = device = RBScopeDevice(
            self.params, uart_divisor=divisor, clock_hz=clock_hz, board=platform.board_name,
            snapshot_ms=self.snapshot_ms, emulator=self.emulator, tap=self.tap,
            dsp_bounds=platform.dsp_bounds if self.emulator is None else 0,
            ram_output_registers=platform.ram_output_registers, **self.device_options(platform))
        m.submodules.device = device

        # ---- pins --------------------------------------------------------------------------
        # Every external input is asynchronous to the system clock. Here it passes an io.Buffer
        # (a plain input cell); its metastability guard is the FFSynchronizer(init=1) that the
        # receiving block applies first thing (the sniffer's R/B# synchroniser, the UART
        # receiver's): two more flip-flops here would only add latency.
        rb_any_low = Signal()
        if plan.rb:
            rb = platform.request("rb", 0, dir="-")
            m.submodules.rb_buf = rb_buf = io.Buffer("i", rb)
            m.d.comb += [device.rb.eq(rb_buf.i), rb_any_low.eq(~rb_buf.i.all())]
        uart = platform.request(*platform.uart, dir="-")
        m.submodules.uart_rx = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx_buf = io.Buffer("o", uart.tx)
        m.d.comb += [device.uart_rx.eq(rx_buf.i), tx_buf.o.eq(device.uart_tx)]
        if plan.emu_bus:
            self._connect_emu_bus(m, platform, device)
        if plan.tap:
            # The opcode-aware bus tap: inputs only (it never drives the bus), synchronised by
            # the tap's own bus front end (two flip-flops, all lines alike).
            tap = platform.request("tap", 0, dir="-")
            for name in plan.tap:
                m.submodules[f"tap_{name}"] = buf = io.Buffer("i", getattr(tap, name))
                m.d.comb += getattr(device, f"tap_{name}").eq(buf.i)

        # ---- LEDs --------------------------------------------------------------------------
        # Link: lit while bytes move either way; activity: lit while any R/B# line is busy.
        # Both are stretched so that a single byte or pulse is visible: one free-running
        # counter marks periods, and each LED stays lit for the rest of the period of an event
        # and the whole next one (two flip-flops per LED instead of a counter each).
        period = Signal(LED_STRETCH_BITS)
        m.d.sync += period.eq(period + 1)
        for resource, event in ((platform.led_link, ~rx_buf.i | ~device.uart_tx),
                                (platform.led_activity, rb_any_low)):
            prefix = "_".join(map(str, resource))
            seen = Signal(name=f"{prefix}_seen")  # an event in this period
            seen_before = Signal(name=f"{prefix}_seen_before")  # … in the previous one
            with m.If(period.all()):
                m.d.sync += [seen_before.eq(seen | event), seen.eq(0)]
            with m.Else():
                m.d.sync += seen.eq(seen | event)
            led = platform.request(*resource[:2], dir="-")
            if len(resource) > 2:  # one colour of an RGB LED
                led = getattr(led, resource[2])
            buf = io.Buffer("o", led)
            m.submodules["_".join(map(str, resource))] = buf
            m.d.comb += buf.o.eq(seen | seen_before | event)
        return m

    def _connect_emu_bus(self, m, platform, device):
        # The bus inputs pass io.Buffer here; the emulator's bus front end synchronises them
        # (two flip-flops, all with the same delay so a cycle's CLE/ALE/IO line up with WE#).
        bus = platform.request("emu_bus", 0, dir="-")
        for name in ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n"):
            m.submodules[f"emu_{name}"] = buf = io.Buffer("i", getattr(bus, name))
            m.d.comb += getattr(device, f"emu_{name}").eq(buf.i)
        m.submodules.emu_io = io_buf = io.Buffer("io", bus.io)
        m.d.comb += [device.emu_io_i.eq(io_buf.i), io_buf.o.eq(device.emu_io_o),
                     io_buf.oe.eq(device.emu_io_oe)]
        # R/B# is open drain, as on a real die: pulled low when busy, released when ready.
        for i in range(len(device.emu_rb)):
            m.submodules[f"emu_rb_{i}"] = rb_buf = io.Buffer("io", bus.rb_n[i])
            m.d.comb += [rb_buf.o.eq(0), rb_buf.oe.eq(~device.emu_rb[i])]

    def device_options(self, platform):
        """The device's options beyond those every board sets in :meth:`elaborate`.

        * The registers' power-up values: an emulator build's dies and windows hold the
          self-test's configuration (:mod:`rbscope.gateware.nand_emu.boot`: real busy times on
          the emulator's bus, every pulse in a named window); a build for R/B# pins holds none
          (its windows are the probed drive's, written by ``rbscope configure``).
        * The trace FIFO's depth: the board class's ``trace_depth`` where it sets one (the ECP5
          boards, whose block RAM holds a deep FIFO), else the link's default. A loopback build
          keeps the default: its few dies' records need no more, and with the deep FIFO
          Yosys 0.70 stops the ECPIX-5's emulator build on an internal assertion (in ABC9's
          reintegration, 2026-12-01).
        * TRACE_BATCH frames between a burst's frames, unless the board class says
          ``trace_batches_in_bursts = False`` (no board does since 2026-12-03).
        * The trace summariser, where the board class says ``trace_summary = True`` (the
          ECP5 boards: their 56 and 64 lines offer more reads than their links carry).
        """
        if self.emulator is None:
            depth = getattr(platform, "trace_depth", None)
            options = {} if depth is None else {"trace_depth": depth}
            if not getattr(platform, "trace_batches_in_bursts", True):
                options["batches_in_bursts"] = False
            if getattr(platform, "trace_summary", False):
                options["trace_summary"] = True
            return options
        return {"config": boot.sniffer_config(self.params),
                "emu_config": boot.emu_config(self.emulator)}


def _fractional_divisor(platform, clock_hz, baud, whole):
    """:func:`uart_divisor`'s fraction (``uart.MAX_DENOMINATOR`` at most), or a
    :class:`BoardError` naming the rate that cannot be made."""
    # (Both here, not at the top: the module's lines, and so every board top's netlist, stay.)
    from fractions import Fraction  # (as above)

    from rbscope.gateware.link.uart import MAX_DENOMINATOR  # (as above)

    d = Fraction(clock_hz, baud).limit_denominator(MAX_DENOMINATOR)
    if d >= 4 and abs(clock_hz / d - baud) <= 0.001 * baud:
        return d
    raise BoardError(f"{platform.board_name}: a {clock_hz / 1e6:g} MHz clock cannot make "
                     f"{baud / 1e6:g} Mbaud (divisor {whole}: "
                     f"{clock_hz / max(whole, 1) / 1e6:.3f} Mbaud; at least 4 clocks a "
                     f"bit, within 2 %, nor a fraction of denominator {MAX_DENOMINATOR} or less "
                     f"within 0.1 %)")

"""A pseudo-random sync pulse train, for aligning the captures of several boards.

One board drives :class:`SyncPulseGenerator`'s output onto a spare header pin; every board taking
part (that one too, by a wire back to one of its inputs) records the line on one of its R/B#
channels, where its pulses arrive as ordinary pulse records (start, width). ``rbscope merge``
(:mod:`rbscope.device.merge`) then matches the boards' records of the train by their widths and
spacing and maps every board's ticks onto one board's (``docs/capture.md``, "Several boards").

The train is low (busy) for a width and high for a gap, both drawn from a 32-bit Galois LFSR
(taps 32, 22, 2, 1: maximal length) that is stepped :data:`STIR` times before each pulse, so that
consecutive pulses draw fresh bits. Widths and gaps are whole *units* of ``cycles_per_unit``
clock cycles (1 µs by default):

* the stir: :data:`STIR` cycles (the LFSR steps once a cycle), then one cycle that computes the
  width and the gap from the LFSR's low 16 bits; the line is high throughout;
* low for ``width_min + width_step × (lfsr & 0xFF)`` units (50 … 2 090 µs by default);
* high for ``gap_min + gap_step × ((lfsr >> 8) & 0xFF)`` units (100 … 355 ms: about four
  pulses a second), then the next stir.

256 widths 8 µs apart and 256 gaps 1 ms apart: three pulses in a row match another place of the
train by chance once in 2^48, so a few pulses tell where two boards' records line up, and the
LFSR does not repeat for millennia. :func:`sync_train` is the cycle-exact model (the tests hold
the gateware to it); a host uses it to make the same train in a simulation.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["SyncPulseGenerator", "SyncTrainParams", "sync_train", "lfsr_step", "STIR",
           "LFSR_TAPS"]

#: Galois feedback mask of the LFSR x^32 + x^22 + x^2 + x + 1 (shifting right).
LFSR_TAPS = 0x80200003
#: LFSR steps (clock cycles) before each pulse.
STIR = 16


def lfsr_step(state):
    """One step of the sync LFSR (32-bit Galois, shifting right)."""
    return (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)


class SyncTrainParams:
    """The shape of a sync train.

    Parameters
    ----------
    cycles_per_unit : int
        Clock cycles per unit of width and gap (the board's clock in MHz: 1 µs units).
    seed : int
        The LFSR's initial state (1 … 2^32 - 1).
    width_min, width_step : int
        Low width: ``width_min + width_step × r`` units, ``r`` in 0 … 255.
    gap_min, gap_step : int
        High time after a pulse: ``gap_min + gap_step × g`` units, ``g`` in 0 … 255.
    """

    def __init__(self, cycles_per_unit, *, seed=0x5EED1234, width_min=50, width_step=8,
                 gap_min=100_000, gap_step=1_000):
        for name, value, lo in (("cycles_per_unit", cycles_per_unit, 1),
                                ("width_min", width_min, 1), ("width_step", width_step, 1),
                                ("gap_min", gap_min, 1), ("gap_step", gap_step, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                raise ValueError(f"{name} must be an integer of at least {lo}, not {value!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 < seed < 1 << 32:
            raise ValueError(f"seed must be an integer from 1 to 2**32 - 1, not {seed!r}")
        self.cycles_per_unit = cycles_per_unit
        self.seed = seed
        self.width_min, self.width_step = width_min, width_step
        self.gap_min, self.gap_step = gap_min, gap_step

    @property
    def width_max(self):
        return self.width_min + 255 * self.width_step

    @property
    def gap_max(self):
        return self.gap_min + 255 * self.gap_step

    def draw(self, state):
        """The ``(width, gap)`` in units that the LFSR ``state`` (after its stir) chooses."""
        return (self.width_min + self.width_step * (state & 0xFF),
                self.gap_min + self.gap_step * ((state >> 8) & 0xFF))


def sync_train(params, pulses):
    """The first ``pulses`` pulses of the train: ``[(start, width)]`` in clock cycles.

    Cycle 0 is the first cycle after reset: the output is high, the first stir begins. A pulse
    starts (the output is low from that cycle) ``STIR + 1`` cycles after its stir begins and
    lasts ``width × cycles_per_unit`` cycles; the next stir begins ``gap × cycles_per_unit``
    cycles after it ends.
    """
    state, cycle, out = params.seed, 0, []
    cpu = params.cycles_per_unit
    for _ in range(pulses):
        for _ in range(STIR):
            state = lfsr_step(state)
        width, gap = params.draw(state)
        start = cycle + STIR + 1
        out.append((start, width * cpu))
        cycle = start + (width + gap) * cpu
    return out


class SyncPulseGenerator(wiring.Component):
    """Drive the sync pulse train (see the module docstring).

    Parameters
    ----------
    params : SyncTrainParams

    Members
    -------
    out : Out(1)
        The line, from a flip-flop: 1 high (idle), 0 during a pulse. High in reset.
    """

    out: Out(1, init=1)

    def __init__(self, params):
        if not isinstance(params, SyncTrainParams):
            raise TypeError(f"Sync train parameters must be a SyncTrainParams, not {params!r}")
        self.params = params
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        p = self.params
        lfsr = Signal(32, init=p.seed)
        stir = Signal(range(STIR + 1))  # steps left in the stir
        width = Signal(range(p.width_max + 1))
        gap = Signal(range(p.gap_max + 1))
        units = Signal(range(max(p.width_max, p.gap_max) + 1))  # units left in the phase
        sub = Signal(range(p.cycles_per_unit))  # cycles of the current unit
        unit_end = Signal()
        m.d.comb += unit_end.eq(sub == p.cycles_per_unit - 1)
        with m.If(unit_end):
            m.d.sync += sub.eq(0)
        with m.Else():
            m.d.sync += sub.eq(sub + 1)
        with m.FSM(init="STIR"):
            with m.State("STIR"):
                m.d.sync += [lfsr.eq((lfsr >> 1) ^ (lfsr[0].replicate(32) & LFSR_TAPS)),
                             stir.eq(stir + 1)]
                with m.If(stir == STIR - 1):
                    m.d.sync += stir.eq(0)
                    m.next = "DRAW"
            with m.State("DRAW"):
                # The products are by constants (shifts and adds); registered here, so that
                # neither follows the LFSR's feedback in the same cycle.
                m.d.sync += [width.eq(p.width_min + p.width_step * lfsr[0:8]),
                             gap.eq(p.gap_min + p.gap_step * lfsr[8:16]),
                             self.out.eq(0), sub.eq(0)]
                m.next = "LOW"
            with m.State("LOW"):
                with m.If(unit_end):
                    with m.If(units + 1 == width):
                        m.d.sync += [units.eq(0), self.out.eq(1)]
                        m.next = "HIGH"
                    with m.Else():
                        m.d.sync += units.eq(units + 1)
            with m.State("HIGH"):
                with m.If(unit_end):
                    with m.If(units + 1 == gap):
                        m.d.sync += units.eq(0)
                        m.next = "STIR"
                    with m.Else():
                        m.d.sync += units.eq(units + 1)
        return m

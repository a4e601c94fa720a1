"""NAND families for the emulator: the parts catalogue's dies as emulator parameters.

A :class:`NandFamily` is one part of :data:`rbscope.nand.parts.PARTS` seen by the emulator:
:meth:`NandFamily.params` gives the build-time :class:`EmuParams` (the part's geometry, its pages
and blocks rounded up to powers of two) and :meth:`NandFamily.config` its busy times in ticks for
a clock frequency, a prescaler and an optional time scale (simulations divide every time by
``scale`` so milliseconds of NAND time take thousands of cycles). The emulator has one busy time
per operation and page type: each is the middle of the part's range
(:meth:`rbscope.nand.parts.Part.typical_us`), as in the reference SSD's RTL replay. Times become
ticks by the one conversion, :func:`rbscope.nand.timebase.us_to_ticks`.
"""

from dataclasses import dataclass

from rbscope.nand.parts import PARTS, Part
from rbscope.nand.timebase import us_to_ticks

from .params import BusyTime, EmuConfig, EmuParams

__all__ = ["NandFamily", "PRESETS", "preset", "PAGE_TYPE_MAPS", "BUSY_TIME_KEYS"]

#: The emulator's page-type map (``EmuConfig.page_types``, repeating over a block's pages) of
#: each cell type: lower and upper pages alternate in MLC (a simplification of real MLC maps).
PAGE_TYPE_MAPS = {"slc": (0,), "mlc": (0, 1), "tlc": (0, 1, 2, 0), "qlc": (0, 1, 2, 3)}

#: The emulator's busy times other than tR and tPROG, and the busy-time key
#: (:data:`rbscope.nand.parts.BUSY_KEYS`) of each.
BUSY_TIME_KEYS = {BusyTime.BERS: "erase", BusyTime.CBSY: "cache_busy",
                  BusyTime.DBSY: "plane_busy", BusyTime.RCBSY: "read_cache_busy",
                  BusyTime.RST: "reset", BusyTime.FEAT: "feature"}


def _pow2_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class NandFamily:
    """One part of the catalogue as the emulator's family.

    Parameters
    ----------
    part : rbscope.nand.parts.Part
    """

    part: Part

    @property
    def name(self):
        return self.part.name

    @property
    def source(self):
        return self.part.source

    @property
    def t_r_us(self):
        """tR: the middle of the part's read range (the emulator has one tR)."""
        return self.part.typical_us("read")

    @property
    def t_prog_us(self):
        """tPROG per page type of a word line (lower, middle, upper …), each its range's middle."""
        return tuple(self.part.typical_us(f"program_{level}") for level in self.part.levels)

    @property
    def t_bers_us(self):
        return self.part.typical_us("erase")

    @property
    def page_types(self):
        return PAGE_TYPE_MAPS[self.part.cell]

    def params(self, **overrides):
        """Return the :class:`EmuParams` of one die of this family (``overrides`` win)."""
        p = self.part
        kw = dict(page_bytes=p.page_size, spare_bytes=p.spare_size,
                  pages_per_block=_pow2_at_least(p.pages_per_block),
                  blocks_per_plane=_pow2_at_least(p.blocks_per_plane),
                  planes=p.planes_per_die, bits_per_cell=p.bits_per_cell,
                  t_prog_max_us=round(max(self.t_prog_us)), t_bers_max_us=round(self.t_bers_us),
                  t_r_max_us=max(1, round(self.t_r_us)), model=p.name[:20])
        kw.update(overrides)
        return EmuParams(**kw)

    def config(self, clock_hz, prescaler=1, scale=1.0, t_wb=2, seed=1, bad_blocks=(),
               jitter_us=None):
        """Return the :class:`EmuConfig` of this family in ticks.

        A tick is ``prescaler`` cycles of ``clock_hz``; every time is divided by ``scale``; a
        non-zero time never becomes 0 ticks. ``jitter_us`` maps a :class:`BusyTime` (or its
        name) to a jitter bound in µs, rounded down to a mask ``2**k - 1`` ticks.
        """
        if (isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float))
                or not clock_hz > 0):
            raise ValueError(f"clock_hz must be a positive frequency, not {clock_hz!r}")
        if isinstance(prescaler, bool) or not isinstance(prescaler, int) or prescaler < 1:
            raise ValueError(f"prescaler must be an integer >= 1, not {prescaler!r}")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ValueError(f"scale must be a positive number, not {scale!r}")
        tick = prescaler * scale / clock_hz

        def ticks(us, what):
            return us_to_ticks(us, tick, what=f"{self.name}: {what}", nonzero=True)

        progs = self.t_prog_us + (self.t_prog_us[-1],) * (4 - len(self.t_prog_us))
        times = {BusyTime.R: ticks(self.t_r_us, "tR")}
        for i, us in enumerate(progs):
            times[BusyTime(BusyTime.PROG0 + i)] = ticks(us, f"tPROG{i}")
        for busy_time, key in BUSY_TIME_KEYS.items():
            times[busy_time] = ticks(self.part.typical_us(key), key)
        jitter = {}
        for key, us in (jitter_us or {}).items():
            busy_time = BusyTime[key] if isinstance(key, str) else BusyTime(key)
            bound = ticks(us, f"jitter of {busy_time.name}")
            jitter[busy_time] = (1 << bound.bit_length() - 1) - 1 if bound else 0
        return EmuConfig(prescaler=prescaler, t_wb=t_wb, times=times, jitter=jitter,
                         page_types=self.page_types, seed=seed, bad_blocks=tuple(bad_blocks))


#: Every part of the catalogue as an emulator family, by part name.
PRESETS = {name: NandFamily(p) for name, p in PARTS.items()}


def preset(name):
    """Return the family of the part called ``name`` (see :data:`PRESETS`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown NAND preset {name!r}; known: {sorted(PRESETS)}") from None

"""NAND families for the emulator (geometry and busy times from published timings).

A :class:`NandFamily` holds a family's geometry and its busy times in microseconds;
:meth:`NandFamily.params` gives the build-time :class:`EmuParams` and :meth:`NandFamily.config`
converts the times to ticks for a clock frequency, a prescaler and an optional time scale
(simulations divide every time by ``scale`` so milliseconds of NAND time take thousands of cycles).
"""

from dataclasses import dataclass, field

from rbscope.nand.timebase import us_to_ticks as _us_to_ticks

from .params import BusyTime, EmuConfig, EmuParams

__all__ = ["NandFamily", "PRESETS", "preset", "us_to_ticks"]


def us_to_ticks(us, clock_hz, prescaler=1, scale=1.0):
    """Return ``us`` microseconds (divided by ``scale``) in ticks of ``prescaler`` cycles.

    Rounds to the nearest tick (:func:`rbscope.nand.timebase.us_to_ticks`); a non-zero time never
    becomes 0 ticks.
    """
    if clock_hz <= 0 or prescaler < 1 or scale <= 0:
        raise ValueError(f"need clock_hz > 0, prescaler >= 1, scale > 0; got {clock_hz!r}, "
                         f"{prescaler!r}, {scale!r}")
    return _us_to_ticks(us, prescaler * scale / clock_hz, nonzero=True)


@dataclass(frozen=True)
class NandFamily:
    """A NAND family: geometry, busy times (µs) and the tPROG page-type map.

    ``t_prog_us`` lists the program time per page type (lower, upper, extra, fast);
    ``page_types`` maps page index (repeating) to a type; ``jitter_us`` the jitter bound per busy
    time (rounded down to a mask ``2**k - 1`` ticks in :meth:`config`).
    """

    name: str
    source: str
    page_bytes: int
    spare_bytes: int
    pages_per_block: int
    blocks_per_plane: int
    planes: int
    bits_per_cell: int
    t_r_us: float
    t_prog_us: tuple
    t_bers_us: float
    page_types: tuple = (0,)
    t_cbsy_us: float = 3.0
    t_dbsy_us: float = 0.5
    t_rcbsy_us: float = 3.0
    t_rst_us: float = 5.0
    t_feat_us: float = 1.0
    jitter_us: dict = field(default_factory=dict)

    def params(self, **overrides):
        """Return the :class:`EmuParams` of one die of this family (``overrides`` win)."""
        kw = dict(page_bytes=self.page_bytes, spare_bytes=self.spare_bytes,
                  pages_per_block=self.pages_per_block, blocks_per_plane=self.blocks_per_plane,
                  planes=self.planes, bits_per_cell=self.bits_per_cell,
                  t_prog_max_us=round(max(self.t_prog_us)), t_bers_max_us=round(self.t_bers_us),
                  t_r_max_us=max(1, round(self.t_r_us)), model=self.name[:20])
        kw.update(overrides)
        return EmuParams(**kw)

    def config(self, clock_hz, prescaler=1, scale=1.0, t_wb=2, seed=1, bad_blocks=()):
        """Return the :class:`EmuConfig` of this family in ticks."""
        def ticks(us):
            return us_to_ticks(us, clock_hz, prescaler, scale)

        progs = tuple(self.t_prog_us) + (self.t_prog_us[-1],) * (4 - len(self.t_prog_us))
        times = {BusyTime.R: ticks(self.t_r_us), BusyTime.BERS: ticks(self.t_bers_us),
                 BusyTime.CBSY: ticks(self.t_cbsy_us), BusyTime.DBSY: ticks(self.t_dbsy_us),
                 BusyTime.RCBSY: ticks(self.t_rcbsy_us), BusyTime.RST: ticks(self.t_rst_us),
                 BusyTime.FEAT: ticks(self.t_feat_us)}
        for i, us in enumerate(progs):
            times[BusyTime(BusyTime.PROG0 + i)] = ticks(us)
        jitter = {}
        for key, us in self.jitter_us.items():
            bound = ticks(us)
            jitter[BusyTime[key] if isinstance(key, str) else key] = \
                (1 << bound.bit_length() - 1) - 1 if bound else 0
        return EmuConfig(prescaler=prescaler, t_wb=t_wb, times=times, jitter=jitter,
                         page_types=self.page_types, seed=seed, bad_blocks=tuple(bad_blocks))


_MLC_PAIRS = (0, 1)  # lower / upper pages alternate (a simplification of real MLC maps)

PRESETS = {p.name: p for p in (
    NandFamily("ssd-v-mlc34", "RB-Explorer SSD-v (Intel MD332, 34 nm MLC)", 4096, 128, 128, 2048, 2,
           2, t_r_us=50, t_prog_us=(400, 1400), t_bers_us=2000, page_types=_MLC_PAIRS,
           jitter_us={"PROG0": 128, "PROG1": 512}),
    NandFamily("ssd-m-mlc25", "RB-Explorer SSD-M (Micron 25 nm MLC, Crucial m4)", 4096, 224, 256,
           2048, 2, 2, t_r_us=75, t_prog_us=(500, 1800), t_bers_us=3800, page_types=_MLC_PAIRS),
    NandFamily("ssd-s-slc34", "RB-Explorer SSD-S (34 nm SLC)", 4096, 224, 64, 4096, 2, 1,
           t_r_us=25, t_prog_us=(250,), t_bers_us=2000),
    NandFamily("agrawal-slc", "Agrawal et al. SLC", 4096, 128, 64, 2048, 2, 1,
           t_r_us=25, t_prog_us=(200,), t_bers_us=1500),
    NandFamily("hubi-mlc", "hUBI paper, Huawei MLC", 2048, 64, 128, 2048, 2, 2,
           t_r_us=50, t_prog_us=(800, 800), t_bers_us=1500, page_types=_MLC_PAIRS),
    NandFamily("samsung-k9", "Samsung K9 (Kuo thesis)", 2048, 64, 64, 1024, 2, 1,
           t_r_us=20, t_prog_us=(200,), t_bers_us=1500),
    NandFamily("tlc-mqsim", "modern TLC (MQSim defaults)", 16384, 1024, 256, 1024, 2, 3,
           t_r_us=75, t_prog_us=(750, 750, 750), t_bers_us=3800, page_types=(0, 1, 2, 0)),
)}


def preset(name):
    """Return the preset called ``name`` (see :data:`PRESETS`)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown NAND preset {name!r}; known: {sorted(PRESETS)}") from None

"""The parts catalogue: every NAND part rbscope knows, each fact defined once (data, no Amaranth).

A :class:`Part` is one die type: its geometry (``page_size``, ``spare_size``, ``pages_per_block``,
``blocks_per_plane``, ``planes_per_die``), its cell type (``cell``: ``"slc"``, ``"mlc"``,
``"tlc"``, ``"qlc"``), its timing in microseconds and the class windows (µs) that classify its
busy pulses. Everything else is derived from :data:`PARTS`:

* the timing presets of ``rbscope configure`` / ``analyze --preset``
  (``rbscope.analysis.presets.PRESETS``: a part's windows);
* the bundled geometries (``rbscope.nand/geometries/*.toml``, ``--geometry ssd-v``): each names
  its part (``part = "mlc34nm"``) and gives only what belongs to the drive (channels, capacity,
  endurance); the page, planes, cell, ``[timing]`` and ``[classifier]`` are the part's;
* the emulator's NAND families (``rbscope.gateware.nand_emu.families``: busy times in ticks);
* the reference SSD's drives (``rbscope.refssd.PRESETS``: the die of each drive and its busy-time
  distributions).

Timing
------
Two facts per part, each with one spelling:

``timing``
    The published ranges per operation, ``{"read": (lo, hi), "program": (lo, hi), "erase":
    (lo, hi)}`` (a single published value is ``(v, v)``): what a datasheet or paper gives, what a
    geometry file's ``[timing]`` table holds (it names calibration clusters and warns when a
    program window overlaps the erase time).
``busy``
    The busy-time distributions of the part's model, ``{key: (lo, hi)}`` over :data:`BUSY_KEYS`
    (per page type: ``read_lower``, ``program_upper`` …; ``erase``, ``cache_busy`` …). The
    reference SSD draws each pulse from these ranges; the emulator's families and the reference
    SSD's RTL replay use their middles (:meth:`Part.typical_us`). Keys a part does not give are
    :data:`GENERIC_BUSY`'s (a 34 nm-class die on an ONFI 1.0 bus).

Class windows
-------------
``windows`` are half-open ``[lo, hi)`` µs ranges in priority order (window ``k`` of the sniffer
is the ``k``-th; the first match wins), named from :data:`rbscope.nand.ops.WINDOW_CLASSES`.

**SSD-v's program window is [150, 1950) µs** (``mlc34nm``, which SSD-v and SSD-I use). The
RB-Explorer paper measured this part's programs at 200–2200 µs and its erases at ~2 ms, so no
window separates them: an edge at 2300 µs counts every erase (~2 ms) as a program, and
``rbscope analyze`` itself warns that such a window overlaps the part's erase time; an edge at
1950 µs keeps the erases out and counts the slowest upper pages (1950–2200 µs) as erases. The
bundled geometry, every figure of ``docs/accuracy.md`` and ``docs/benchmarks.md`` (SSD-v's
plain-window rows 9–10 % low, the OP sweep) and the tests use 1950; the device preset
``mlc34nm`` used to give [150, 2300) (with erase [2300, 10000), read [5, 120), cache [0.5, 5))
and now gives the same windows as the geometry. The plain-window error on SSD-v is documented in
``docs/accuracy.md``; the sequence classifier (``analyze``'s default) does not use the windows.
"""

import math
from dataclasses import dataclass, field

from .ops import WINDOW_CLASSES

__all__ = ["CELLS", "CELL_BITS", "PAGE_LEVELS", "BUSY_KEYS", "GENERIC_BUSY", "Part", "PartError",
           "PARTS", "part"]

#: Cell types, and the bits each stores.
CELL_BITS = {"slc": 1, "mlc": 2, "tlc": 3, "qlc": 4}
CELLS = tuple(CELL_BITS)

#: The page types of a word line of each cell type (the suffix of the per-page busy keys).
PAGE_LEVELS = {"slc": ("slc",), "mlc": ("lower", "upper"), "tlc": ("lower", "middle", "upper"),
               "qlc": ("lower", "middle", "upper", "top")}

#: Busy-time keys of a part (µs) and what they are.
BUSY_KEYS = {
    "read_slc": "tR of an SLC page (or an SLC-mode block)", "read_lower": "tR of a lower page",
    "read_middle": "tR of a middle page", "read_upper": "tR of an upper page",
    "read_top": "tR of a top page (QLC)",
    "program_slc": "tPROG of an SLC page (or an SLC-mode block)",
    "program_lower": "tPROG of a lower page", "program_middle": "tPROG of a middle page",
    "program_upper": "tPROG of an upper page", "program_top": "tPROG of a top page (QLC)",
    "erase": "tBERS",
    "cache_busy": "tCBSY (cache program: data register to cache register)",
    "read_cache_busy": "tRCBSY (cache read)", "plane_busy": "tDBSY (multi-plane queueing)",
    "reset": "tRST of an idle die", "feature": "tFEAT (set features)",
}

#: The busy times every part starts from (µs): a 34 nm-class die on an ONFI 1.0 bus (the
#: lower/upper pages are Intel's 34 nm MLC, ``mlc34nm``; the SLC-mode and middle-page times are
#: typical of the same generation).
GENERIC_BUSY = {
    "read_slc": (20.0, 30.0), "read_lower": (25.0, 40.0), "read_middle": (35.0, 50.0),
    "read_upper": (40.0, 60.0),
    "program_slc": (200.0, 300.0), "program_lower": (200.0, 500.0),
    "program_middle": (700.0, 1200.0), "program_upper": (1300.0, 2200.0),
    "erase": (1900.0, 2300.0), "cache_busy": (3.0, 35.0), "read_cache_busy": (2.0, 4.0),
    "plane_busy": (0.5, 1.0), "reset": (3.0, 5.0), "feature": (0.8, 1.2),
}

_TIMING_KEYS = ("read", "program", "erase")


class PartError(ValueError):
    """A part of the catalogue (or one asked for) is invalid; the message names the field."""


def _range(where, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and math.isfinite(v) for v in value)
            or not 0 < value[0] <= value[1]):
        raise PartError(f"{where} must be a positive time in µs or a (lo, hi) pair with "
                        f"0 < lo <= hi, not {value!r}")
    return (float(value[0]), float(value[1]))


@dataclass(frozen=True)
class Part:
    """One NAND part (die type) of the catalogue.

    Parameters
    ----------
    name : str
        The catalogue key (also the name of its timing preset).
    source : str
        Where the figures come from (paper, datasheet, model).
    cell : str
        ``"slc"``, ``"mlc"``, ``"tlc"`` or ``"qlc"``.
    page_size, spare_size : int
        Data and spare bytes per page.
    pages_per_block, blocks_per_plane, planes_per_die : int
    busy : dict of str to (float, float)
        The model's busy-time ranges (µs) by :data:`BUSY_KEYS`; missing keys are
        :data:`GENERIC_BUSY`'s.
    timing : dict of str to (float, float)
        Published ranges (µs) of ``read``, ``program`` and ``erase``; missing ones are the
        range of :attr:`busy` over the cell's page types.
    windows : tuple of (str, float, float)
        Class windows ``(name, lo_us, hi_us)``, half-open, in priority order; empty for a part
        with no published windows (its users calibrate).
    glitch_us : float
        Lows shorter than this are glitches.
    """

    name: str
    source: str
    cell: str
    page_size: int
    spare_size: int
    pages_per_block: int
    blocks_per_plane: int
    planes_per_die: int
    busy: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    windows: tuple = ()
    glitch_us: float = 0.2

    def __post_init__(self):
        where = f"part {self.name}"
        if self.cell not in CELL_BITS:
            raise PartError(f"{where}: cell must be one of {', '.join(CELLS)}, not {self.cell!r}")
        for key in ("page_size", "spare_size", "pages_per_block", "blocks_per_plane",
                    "planes_per_die"):
            v = getattr(self, key)
            lo = 0 if key == "spare_size" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise PartError(f"{where}: {key} must be an integer >= {lo}, not {v!r}")
        busy = dict(GENERIC_BUSY)
        for key, value in self.busy.items():
            if key not in BUSY_KEYS:
                raise PartError(f"{where}: busy.{key} is not a busy time (known: "
                                f"{', '.join(BUSY_KEYS)})")
            busy[key] = _range(f"{where}: busy.{key}", value)
        missing = [f"{op}_{level}" for op in ("read", "program")
                   for level in PAGE_LEVELS[self.cell] if f"{op}_{level}" not in busy]
        if missing:
            raise PartError(f"{where}: busy.{missing[0]} is missing (a {self.cell.upper()} "
                            f"part needs every page type's read and program time)")
        object.__setattr__(self, "busy", busy)
        timing = {}
        for key in _TIMING_KEYS:
            if key in self.timing:
                timing[key] = _range(f"{where}: timing.{key}", self.timing[key])
            else:
                timing[key] = self.busy_range(key)
        unknown = sorted(set(self.timing) - set(_TIMING_KEYS))
        if unknown:
            raise PartError(f"{where}: timing.{unknown[0]} is not an operation (known: "
                            f"{', '.join(_TIMING_KEYS)})")
        object.__setattr__(self, "timing", timing)
        windows = []
        for w in self.windows:
            if (not isinstance(w, tuple) or len(w) != 3 or w[0] not in WINDOW_CLASSES
                    or not 0 <= w[1] < w[2]):
                raise PartError(f"{where}: a window is (class, lo, hi) with a class of "
                                f"{', '.join(WINDOW_CLASSES)} and 0 <= lo < hi, not {w!r}")
            windows.append((w[0], float(w[1]), float(w[2])))
        object.__setattr__(self, "windows", tuple(windows))

    @property
    def bits_per_cell(self):
        """Bits per cell of :attr:`cell`."""
        return CELL_BITS[self.cell]

    @property
    def levels(self):
        """The page types of a word line (:data:`PAGE_LEVELS`)."""
        return PAGE_LEVELS[self.cell]

    def busy_range(self, op):
        """``(lo, hi)`` µs of ``op`` (``read``, ``program`` or ``erase``) over the page types."""
        if op == "erase":
            return self.busy["erase"]
        ranges = [self.busy[f"{op}_{level}"] for level in self.levels]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges))

    def typical_us(self, key):
        """The middle of a busy range (:data:`BUSY_KEYS`, or ``read``/``program``/``erase``
        over the page types): the one time a fixed-timing model (the emulator) uses."""
        lo, hi = self.busy[key] if key in self.busy else self.busy_range(key)
        return (lo + hi) / 2

    @property
    def description(self):
        """One line: the source and the published times."""
        def span(op, scale=1, unit="µs"):
            lo, hi = self.timing[op]
            return (f"{lo / scale:g} {unit}" if lo == hi
                    else f"{lo / scale:g}–{hi / scale:g} {unit}")
        return (f"{self.source}; tR {span('read')}, tPROG {span('program')}, "
                f"tBERS {span('erase', 1000, 'ms')}")


def _windows(read, program, erase):
    # The published families' windows: read, program, erase, then cache busy below the reads.
    return (("read", *read), ("program", *program), ("erase", *erase), ("cache", 0.5, read[0]))


#: The catalogue, by name.
PARTS = {p.name: p for p in (
    Part("mlc34nm", "RB-Explorer SSD-v and SSD-I: Intel MD332 34 nm MLC", "mlc",
         page_size=4096, spare_size=128, pages_per_block=128,  # 128: typical, not in the paper
         blocks_per_plane=4096,  # SSD-v: 16 GB raw over 4 dies of 2 planes
         planes_per_die=2,
         # Programs 200–2200 µs (lower/upper pages; 900 typical), erases ~2 ms: measured by the
         # paper; reads up to 50 µs (from 20 ns: cache reads).
         timing={"read": (0.02, 50), "program": (200, 2200), "erase": 2000},
         windows=(("cache", 1.5, 12), ("read", 12, 150), ("program", 150, 1950),
                  ("erase", 1950, 12000))),
    Part("micron25nm", "RB-Explorer SSD-M: Micron 25 nm MLC, Crucial m4", "mlc",
         page_size=4096, spare_size=224, pages_per_block=256,  # 256: typical, not in the paper
         blocks_per_plane=2048, planes_per_die=2,
         busy={"read_lower": (50, 65), "read_upper": (65, 80), "program_lower": (250, 600),
               "program_upper": (1400, 2400), "erase": (3500, 4100)},
         timing={"read": 75, "program": (200, 2200), "erase": 3800},  # programs 1300 typical
         windows=(("cache", 1.5, 20), ("read", 20, 160), ("program", 160, 2800),
                  ("erase", 2800, 20000))),
    Part("slc34nm", "RB-Explorer SSD-S: 34 nm SLC", "slc",
         page_size=4096, spare_size=224, pages_per_block=64,  # 64: typical, not in the paper
         blocks_per_plane=4096, planes_per_die=2,
         busy={"program_slc": (200, 500), "erase": (1800, 2200)},
         timing={"read": 25, "program": (200, 500), "erase": 2000},  # programs 250 typical
         windows=(("cache", 1.5, 12), ("read", 12, 120), ("program", 120, 900),
                  ("erase", 900, 12000))),
    Part("agrawal_slc", "Agrawal et al. SLC", "slc",
         page_size=4096, spare_size=128, pages_per_block=64, blocks_per_plane=2048,
         planes_per_die=2,
         busy={"read_slc": 25, "program_slc": 200, "erase": 1500},
         windows=_windows(read=(10, 80), program=(120, 500), erase=(800, 4000))),
    Part("hubi_mlc", "hUBI paper, Huawei MLC", "mlc",
         page_size=2048, spare_size=64, pages_per_block=128, blocks_per_plane=2048,
         planes_per_die=1,
         busy={"read_lower": (40, 50), "read_upper": (45, 60), "program_lower": (300, 600),
               "program_upper": (900, 1500), "erase": (1400, 1600)},
         timing={"read": 50, "program": 800, "erase": 1500},
         windows=_windows(read=(20, 150), program=(300, 1200), erase=(1200, 4000))),
    Part("samsung_k9", "Samsung K9 (Kuo thesis)", "slc",
         page_size=2048, spare_size=64, pages_per_block=64, blocks_per_plane=1024,
         planes_per_die=2,
         busy={"read_slc": 20, "program_slc": 200, "erase": 1500},
         windows=_windows(read=(8, 60), program=(100, 500), erase=(800, 4000))),
    Part("tlc_mqsim", "Modern TLC, MQSim defaults", "tlc",
         page_size=16384, spare_size=1024, pages_per_block=256, blocks_per_plane=1024,
         planes_per_die=2,
         busy={"read_lower": 75, "read_middle": 75, "read_upper": 75, "program_lower": 750,
               "program_middle": 750, "program_upper": 750, "erase": 3800},
         windows=_windows(read=(30, 200), program=(300, 2500), erase=(2500, 10000))),
    # The two reference-SSD dies below are models, not published parts: no spare area
    # (spare_size 0: not modelled) and no windows (their users calibrate).
    Part("tlc16k", "reference-SSD model: TLC, 16 KiB pages, 192-page blocks", "tlc",
         page_size=16384, spare_size=0, pages_per_block=192, blocks_per_plane=512,
         planes_per_die=2,
         busy={"read_slc": (30, 40), "read_lower": (50, 70), "read_middle": (60, 80),
               "read_upper": (70, 95), "program_slc": (150, 250), "program_lower": (400, 700),
               "program_middle": (1200, 1800), "program_upper": (2500, 4000),
               "erase": (3000, 4500)}),
    Part("mlc8k", "reference-SSD model: MLC, 8 KiB pages, 256-page blocks", "mlc",
         page_size=8192, spare_size=0, pages_per_block=256, blocks_per_plane=1024,
         planes_per_die=2,
         busy={"program_lower": (250, 600), "program_upper": (1400, 2400),
               "erase": (2500, 3500)}),
)}


def part(name):
    """Return the part ``name`` of :data:`PARTS` (:class:`PartError` lists the names)."""
    try:
        return PARTS[name]
    except (KeyError, TypeError):
        raise PartError(f"no part named {name!r}; parts: {', '.join(PARTS)}") from None

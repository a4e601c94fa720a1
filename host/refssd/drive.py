"""The reference SSD's description: geometry, cell type, timing and firmware options.

A :class:`Drive` is everything :func:`rbscope.refssd.simulate` needs to know about the SSD:

* the flash array (channels × chips × dies × planes, blocks per plane, pages per block, page
  size) and its cell type (SLC, MLC, TLC) with the page order inside a block;
* the firmware: over-provisioning, garbage collection policy and trigger, hot/cold open blocks,
  static wear levelling, DRAM write buffer, multi-plane / cache programs, cache reads;
* the NAND timing distributions (µs) the timing model draws from;
* the view a user of rbscope has of this drive (:meth:`Drive.user_geometry`): a
  :class:`rbscope.analysis.geometry.Geometry` with the classifier windows a new user would start
  from.

Drives come from named presets (:data:`PRESETS`, :func:`preset`) or from a TOML drive spec
(:func:`load_drive`)::

    name = "my-mlc"
    preset = "ssd-v"                  # optional: start from a preset, override what follows
    [array]
    channels = 4
    chips_per_channel = 1
    dies_per_chip = 1
    planes_per_die = 2
    blocks_per_plane = 64
    pages_per_block = 128
    page_size = 4096
    cell = "mlc"                      # slc | mlc | tlc | qlc
    [firmware]
    over_provisioning = 0.14          # (physical - logical) / logical
    gc = "greedy"                     # greedy | cost-benefit
    gc_free_units = 3                 # GC runs while a die has fewer free blocks than this
    open_streams = 2                  # 1: GC shares the host's open block; 2: hot/cold blocks
    wear_levelling = 0                # static WL threshold in erases (0: off)
    write_buffer = 0                  # DRAM write buffer, bytes (0: none)
    multi_plane = false               # one program writes a page in every plane
    cache_program = false             # 80h…15h chains
    cache_read = false                # 31h/3Fh sequential reads
    [timing]                          # µs: [lo, hi] (a truncated normal) or one value
    program_lower = [200, 500]
    program_upper = [1300, 2200]
    erase = [1900, 2300]
    [user]                            # what a rbscope user is told (see Drive.user_geometry)
    geometry = "ssd-v"                # a bundled geometry whose classifier windows apply
    windows = "bundled"               # bundled | calibrated

Page order within a block (:func:`page_types`)
----------------------------------------------
Multi-level cells share one word line between two (MLC) or three (TLC) pages. Manufacturers
program them in a "staircase": the upper page of a word line is written only after the lower
page of the next word line, so that the coupling of the neighbour's programming is already in
place when the final (narrow) distribution is placed. We model the common one-word-line-lag
order: the page of bit level ``s`` (0 lower, 1 middle, 2 upper) of word line ``w`` is programmed
at step ``w + s``, and within a step lower levels first (higher word lines first). For MLC this
is L0 L1 U0 L2 U1 L3 U2 … L(n-1) U(n-2) U(n-1); for TLC L0 L1 M0 L2 M1 U0 L3 M2 U1 … — the
orders of the shared-page tables of Micron and Intel MLC/TLC datasheets. Page addresses are
numbered in program order (page ``p`` of a block is its ``p``-th program).

3D parts program a word line's pages together (``program_scheme``): ``one-shot`` loads the
lower, middle (and for QLC upper) pages with 80h…1Ah, each a short busy (``data_load``), then the
last page with 80h…10h and one long tPROG programs all of them; ``two-pass`` (QLC) does that
twice, a coarse "foggy" program and a "fine" one, the pages loaded again for the second. Their
pages are numbered word line by word line (L M U [T]).

The 2026 options (see :class:`Drive`: ``program_scheme``, ``cache_regime``, suspends, read
retry, ``plane_reads``, ``wired_or``, ``timing_shape``, ``die_spread``, ``wear_drift``) go in
``[firmware]`` of a drive spec; ``[timing]`` takes ``read_top``, ``program_top``, ``data_load``,
``program_foggy``, ``program_fine`` and ``suspend`` too.
"""

import math
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from pathlib import Path

import numpy as np

from rbscope.analysis.geometry import Geometry, GeometryError, load_geometry
from rbscope.nand.parts import BUSY_KEYS, GENERIC_BUSY, PAGE_LEVELS, PartError, part
from rbscope.nand.parts import CELL_BITS as PART_CELL_BITS

__all__ = [
    "RefSSDError", "PageType", "CELL_BITS", "page_types", "Drive", "PRESETS", "preset",
    "from_part", "load_drive", "parse_drive",
]


class RefSSDError(ValueError):
    """Invalid input to the reference SSD; the message names the offending field or value."""


class PageType(IntEnum):
    """Type of the page an operation addresses (what its tPROG / tR depends on)."""

    SLC = 0
    LOWER = 1
    MIDDLE = 2
    UPPER = 3
    TOP = 4  # the fourth page of a QLC word line
    NONE = 15  # erase, reset, set features


#: Bits per cell of each cell type the reference SSD models (the catalogue's).
CELL_BITS = dict(PART_CELL_BITS)
_LEVELS = {1: (PageType.SLC,), 2: (PageType.LOWER, PageType.UPPER),
           3: (PageType.LOWER, PageType.MIDDLE, PageType.UPPER),
           4: (PageType.LOWER, PageType.MIDDLE, PageType.UPPER, PageType.TOP)}
_TYPE_KEY = {PageType.SLC: "slc", PageType.LOWER: "lower", PageType.MIDDLE: "middle",
             PageType.UPPER: "upper", PageType.TOP: "top"}

#: How a word line's pages are programmed: ``page`` (one program operation per page, in the
#: staircase order), ``one-shot`` (the word line's pages loaded with 80h…1Ah, the last with
#: 80h…10h, then one tPROG programs them all: 3D TLC/QLC), ``two-pass`` (the pages loaded and
#: programmed coarsely, "foggy", then loaded again and programmed finely: QLC).
PROGRAM_SCHEMES = ("page", "one-shot", "two-pass")
#: Cache-program regimes: ``back-to-back`` (the next 15h comes at once and its busy lasts until
#: the previous array program is done) and ``host-paced`` (the host's data arrives after the
#: array program ended: R/B# shows only tCBSY, and the array program hides).
CACHE_REGIMES = ("back-to-back", "host-paced")
#: Width distributions of the timing draws (:func:`draw`).
TIMING_SHAPES = ("normal", "lognormal", "heavy-tail")


def page_types(cell, pages_per_block, scheme="page"):
    """Return the :class:`PageType` of every page of a block, in program (= address) order.

    Parameters
    ----------
    cell : str
        ``"slc"``, ``"mlc"``, ``"tlc"`` or ``"qlc"``.
    pages_per_block : int
        A multiple of the bits per cell.
    scheme : str
        ``"page"``: the staircase order below; ``"one-shot"`` and ``"two-pass"``: word line by
        word line, each word line's pages in level order (L M U [T]), as its pages are loaded
        for one operation.

    Returns
    -------
    numpy.ndarray of uint8
    """
    if cell not in CELL_BITS:
        raise RefSSDError(f"cell must be one of {', '.join(CELL_BITS)}, not {cell!r}")
    if scheme not in PROGRAM_SCHEMES:
        raise RefSSDError(f"program_scheme must be one of {', '.join(PROGRAM_SCHEMES)}, "
                          f"not {scheme!r}")
    bits = CELL_BITS[cell]
    if pages_per_block < bits or pages_per_block % bits:
        raise RefSSDError(f"pages_per_block ({pages_per_block}) must be a multiple of the "
                          f"{bits} bits per cell of {cell.upper()}")
    lines = pages_per_block // bits
    if scheme != "page":
        return np.tile(np.array(_LEVELS[bits], dtype=np.uint8), lines)
    order = sorted((w + s, s, -w) for w in range(lines) for s in range(bits))
    levels = _LEVELS[bits]
    return np.array([levels[s] for _, s, _ in order], dtype=np.uint8)


# Timing ------------------------------------------------------------------------------------------

#: Timing keys of a drive (µs) and what they are: the parts catalogue's busy times of the page
#: types modelled here (:data:`rbscope.nand.parts.BUSY_KEYS`), and the controller's overhead.
_UNMODELLED = ({level for levels in PAGE_LEVELS.values() for level in levels}
               - {level for cell in CELL_BITS for level in PAGE_LEVELS[cell]})
TIMING_KEYS = {
    **{key: what for key, what in BUSY_KEYS.items()
       if key.partition("_")[2] not in _UNMODELLED},
    "overhead": "controller time between a die's ready and its next command",
    "read_top": "tR of a QLC top page", "program_top": "tPROG of a QLC top page (one-shot: "
    "of the word line)",
    "data_load": "busy after 80h…1Ah (a one-shot / two-pass page loaded into its register)",
    "program_foggy": "tPROG of a two-pass word line's first (foggy) program",
    "program_fine": "tPROG of a two-pass word line's second (fine) program",
    "suspend": "tSPD: busy left after a program or erase suspend command (84h / 61h)",
}


#: Longest busy time (µs) a timing range may name (10 s: beyond any NAND operation; larger
#: values would overflow the model's nanosecond clock).
MAX_TIME_US = 1e7
#: Largest value of each integer field of a :class:`Drive` (physical limits, with room: the
#: model allocates per page, so absurd sizes would exhaust memory or time).
_LIMITS = {"channels": 64, "chips_per_channel": 64, "dies_per_chip": 8, "planes_per_die": 8,
           "blocks_per_plane": 1 << 16, "pages_per_block": 8192, "page_size": 1 << 16,
           "gc_free_units": 1 << 16, "open_streams": 2, "wear_levelling": 1 << 30,
           "write_buffer": 1 << 40, "slc_cache": 1 << 16, "hybrid_log_pages": 8192,
           "slc_prefix": 0xFF}
_MAY_BE_ZERO = ("wear_levelling", "write_buffer", "slc_cache", "hybrid_log_pages")
#: Most pages a drive may have (16 TiB of 4 KiB pages).
MAX_PHYSICAL_PAGES = 1 << 32


def _short(v, limit=60):
    r = repr(v)
    return r if len(r) <= limit else r[:limit - 1] + "…"


def _dist(where, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, value]
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            or not 0 < value[0] <= value[1] <= MAX_TIME_US):
        raise RefSSDError(f"{where} must be a positive time in µs or a [lo, hi] pair with "
                          f"0 < lo <= hi <= {MAX_TIME_US:g}, not {_short(value)}")
    return (float(value[0]), float(value[1]))


def draw(rng, dist, n, shape="normal"):
    """Draw ``n`` durations (ns, int64) from ``dist`` = (lo, hi) µs.

    ``shape``:

    * ``"normal"``: a normal centred on the middle of the range with σ a quarter of its width,
      clipped to the range: most values sit near the middle, a few at the edges (as in a
      datasheet's typ/max);
    * ``"lognormal"``: median the range's geometric middle, σ (of the log) a quarter of the
      range's log width, not clipped: ``hi`` is exceeded by 2.3 % of the draws, by far on the
      right (a skewed distribution with a tail, like measured tPROG);
    * ``"heavy-tail"``: that lognormal for 95 % of the draws, and for 5 % a second lognormal
      centred 1.3 × ``hi`` (σ 0.2): a heavy right tail (retried program loops, slow blocks).
    """
    lo, hi = dist
    if lo == hi or n == 0:
        return np.full(n, round(lo * 1000), dtype=np.int64)
    if shape == "normal":
        x = rng.normal((lo + hi) / 2, (hi - lo) / 4, n)
        return np.rint(np.clip(x, lo, hi) * 1000).astype(np.int64)
    if shape not in TIMING_SHAPES:
        raise RefSSDError(f"timing_shape must be one of {', '.join(TIMING_SHAPES)}, "
                          f"not {shape!r}")
    sigma = math.log(hi / lo) / 4
    x = np.exp(rng.normal(math.log(math.sqrt(lo * hi)), sigma, n))
    if shape == "heavy-tail":
        tail = rng.random(n) < 0.05
        x[tail] = np.exp(rng.normal(math.log(1.3 * hi), 0.2, int(tail.sum())))
    return np.rint(np.maximum(x, 0.05) * 1000).astype(np.int64)


# The drive ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drive:
    """A reference SSD: flash array, firmware options and NAND timing.

    Parameters
    ----------
    name : str
    channels, chips_per_channel, dies_per_chip, planes_per_die : int
    blocks_per_plane, pages_per_block : int
    page_size : int
        Data bytes per page (a multiple of 512).
    cell : str
        ``"slc"``, ``"mlc"`` or ``"tlc"``.
    over_provisioning : float
        ``(physical - logical) / logical`` pages; the logical space is what the host may write.
    gc : str
        Victim selection: ``"greedy"`` (fewest valid pages) or ``"cost-benefit"``
        (``(1 - u) / 2u × age``).
    gc_free_units : int
        A die collects garbage while it has fewer free (erased) blocks than this.
    open_streams : int
        1: relocated pages go to the host's open block; 2: a separate (cold) open block.
    wear_levelling : int
        Static wear levelling: when a die's erase counts differ by more than this, the coldest
        block is relocated and erased (0: off).
    write_buffer : int
        DRAM write buffer in bytes (0: none). It merges sub-page writes of the same page.
    multi_plane : bool
        Programs and erases address one block in every plane at once (Mp = planes).
    cache_program, cache_read : bool
    slc_cache : int
        Erase units per die run in SLC mode as a write cache in front of MLC/TLC (0: none).
    ftl : str
        ``"page"`` (:class:`~rbscope.refssd.ftl.PageFTL`) or ``"hybrid"``
        (:class:`~rbscope.refssd.ftl.HybridFTL`, hUBI-like: each block holds
        ``pages_per_block - hybrid_log_pages`` data pages and a log area of
        ``hybrid_log_pages``; over-provisioning is then the log area plus two spare blocks
        per die, and ``over_provisioning`` is not used).
    hybrid_log_pages : int
        Log pages per block of the hybrid FTL.
    bus_mb_s : float
        Channel data rate (MB/s) for data in and out.
    timing : dict of str to (float, float)
        µs ranges, see :data:`TIMING_KEYS`.
    power_on : bool
        Every die starts with a reset (FFh) and a set-features (EFh) pulse.
    user_geometry_name : str or None
        Bundled geometry whose classifier windows and timing a user would use (None: the
        generic default windows).
    user_windows : str
        ``"bundled"`` (the geometry's windows) or ``"calibrated"`` (``rbscope calibrate`` on the
        recording first, as a user without a preset does).
    description : str
    program_scheme : str
        ``"page"``, ``"one-shot"`` or ``"two-pass"`` (foggy-fine), TLC or QLC; see
        :data:`PROGRAM_SCHEMES`.
    cache_regime : str
        ``"back-to-back"`` or ``"host-paced"`` cache programs (:data:`CACHE_REGIMES`).
    program_suspend, erase_suspend : float
        Probability that a program (erase) is suspended (84h / 61h) for reads waiting behind it
        on the die: its busy is split into 2 or 3 pieces, resumed with 13h (D2h), and 1 or 2 of
        the reads that follow it in the die's queue are served in each gap.
    read_retry : float
        Probability that a page read fails its ECC and is retried: 1 to 3 retries, each a set
        features (EFh, a new read level) and another tR of the same page.
    plane_reads : bool
        Independent plane reads: reads of different planes of a die are issued while the die is
        busy and overlap (R/B# is low while any plane reads: their busies merge).
    wired_or : bool
        The LUNs of each chip share one R/B# pin (open drain, wired-OR: the line is low while
        any of them is busy); :func:`rbscope.refssd.measure.to_measurement` probes one line per
        chip.
    slc_prefix : int
        The vendor prefix command of an SLC-mode program or read on a MLC/TLC/QLC die (DAh, or
        A2h), carried in the bus command stream (``COMMAND_DTYPE["prefix"]``).
    timing_shape : str
        Width distribution of every timing draw (:func:`draw`, :data:`TIMING_SHAPES`).
    die_spread : float
        Process spread between dies: every die's timing of each kind is scaled by its own
        ``exp(N(0, die_spread))``.
    wear_drift : float
        Wear drift over the run: tBERS grows by ``wear_drift`` and tPROG shrinks by half that,
        linearly from the die's first operation to its last.
    """

    name: str
    channels: int = 4
    chips_per_channel: int = 1
    dies_per_chip: int = 1
    planes_per_die: int = 2
    blocks_per_plane: int = 64
    pages_per_block: int = 128
    page_size: int = 4096
    cell: str = "mlc"
    over_provisioning: float = 0.14
    gc: str = "greedy"
    gc_free_units: int = 3
    open_streams: int = 2
    wear_levelling: int = 0
    write_buffer: int = 0
    multi_plane: bool = False
    cache_program: bool = False
    cache_read: bool = False
    slc_cache: int = 0
    ftl: str = "page"
    hybrid_log_pages: int = 0
    bus_mb_s: float = 40.0
    timing: dict = field(default_factory=dict)
    power_on: bool = True
    user_geometry_name: str | None = None
    user_windows: str = "bundled"
    description: str = ""
    program_scheme: str = "page"
    cache_regime: str = "back-to-back"
    program_suspend: float = 0.0
    erase_suspend: float = 0.0
    read_retry: float = 0.0
    plane_reads: bool = False
    wired_or: bool = False
    slc_prefix: int = 0xDA
    timing_shape: str = "normal"
    die_spread: float = 0.0
    wear_drift: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not 0 < len(self.name) <= 200:
            raise RefSSDError(f"drive name must be a string of 1 to 200 characters, not "
                              f"{_short(self.name)}")
        for key, top in _LIMITS.items():
            v = getattr(self, key)
            low = 0 if key in _MAY_BE_ZERO else 1
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= top:
                raise RefSSDError(f"drive {self.name}: {key} must be an integer from {low} to "
                                  f"{top}, not {_short(v)}")
        if self.physical_pages > MAX_PHYSICAL_PAGES:
            raise RefSSDError(f"drive {self.name}: {self.physical_pages} pages is more than "
                              f"the {MAX_PHYSICAL_PAGES} a reference SSD may model")
        for key in ("description",):
            if not isinstance(getattr(self, key), str):
                raise RefSSDError(f"drive {self.name}: {key} must be a string")
        g = self.user_geometry_name
        if g is not None and (not isinstance(g, str) or not 0 < len(g) <= 4096):
            raise RefSSDError(f"drive {self.name}: user geometry must be a geometry name or "
                              f"file (a string), not {_short(g)}")
        if not isinstance(self.timing, dict):
            raise RefSSDError(f"drive {self.name}: timing must be a table of µs ranges")
        if self.page_size % 512:
            raise RefSSDError(f"drive {self.name}: page_size must be a multiple of 512, "
                              f"not {self.page_size}")
        if self.open_streams > 2:
            raise RefSSDError(f"drive {self.name}: open_streams must be 1 or 2, "
                              f"not {self.open_streams}")
        # validates cell, pages_per_block and program_scheme
        page_types(self.cell, self.pages_per_block, self.program_scheme)
        self._check_modern()
        if self.gc not in ("greedy", "cost-benefit"):
            raise RefSSDError(f"drive {self.name}: gc must be greedy or cost-benefit, "
                              f"not {self.gc!r}")
        for key in ("wear_levelling", "write_buffer", "slc_cache"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise RefSSDError(f"drive {self.name}: {key} must be an integer >= 0, "
                                  f"not {v!r}")
        op = self.over_provisioning
        if isinstance(op, bool) or not isinstance(op, (int, float)) or not 0 < op < 10:
            raise RefSSDError(f"drive {self.name}: over_provisioning must be a fraction "
                              f"between 0 and 10 (e.g. 0.07), not {op!r}")
        if (isinstance(self.bus_mb_s, bool) or not isinstance(self.bus_mb_s, (int, float))
                or not 0 < self.bus_mb_s <= 1e6):
            raise RefSSDError(f"drive {self.name}: bus_mb_s must be a number above 0 and at "
                              f"most 1e6, not {_short(self.bus_mb_s)}")
        if self.user_windows not in ("bundled", "calibrated"):
            raise RefSSDError(f"drive {self.name}: user windows must be bundled or "
                              f"calibrated, not {self.user_windows!r}")
        timing = dict(DEFAULT_TIMING)
        for key, value in self.timing.items():
            if key not in TIMING_KEYS:
                raise RefSSDError(f"drive {self.name}: unknown timing key {key!r} (known: "
                                  f"{', '.join(TIMING_KEYS)})")
            timing[key] = _dist(f"drive {self.name}: timing.{key}", value)
        object.__setattr__(self, "timing", timing)
        units = self.units_per_die
        if units <= self.gc_free_units + self.open_streams + 1:
            raise RefSSDError(f"drive {self.name}: {units} blocks per die are too few for "
                              f"{self.gc_free_units} free and {self.open_streams} open blocks")
        if self.logical_pages < 1:
            raise RefSSDError(f"drive {self.name}: no logical space left after "
                              f"over-provisioning")
        if self.ftl not in ("page", "hybrid"):
            raise RefSSDError(f"drive {self.name}: ftl must be page or hybrid, not {self.ftl!r}")
        if self.ftl == "hybrid":
            if self.multi_plane or self.slc_cache:
                raise RefSSDError(f"drive {self.name}: the hybrid FTL supports neither "
                                  f"multi-plane programs nor an SLC cache")
            if not 0 < self.hybrid_log_pages < self.pages_per_block:
                raise RefSSDError(f"drive {self.name}: hybrid_log_pages must be between 1 and "
                                  f"pages_per_block - 1, not {self.hybrid_log_pages!r}")
            return
        if self.slc_cache and self.cell == "slc":
            raise RefSSDError(f"drive {self.name}: an SLC cache needs MLC or TLC cells")
        spare = units - self.slc_cache - math.ceil(self.logical_pages / self.dies
                                                   / self.pages_per_block / self.mp)
        if self.slc_cache == 1:
            raise RefSSDError(f"drive {self.name}: an SLC cache needs at least 2 units per die "
                              f"(one open while the oldest migrates)")
        if spare < self.gc_free_units + self.open_streams + 1:
            raise RefSSDError(
                f"drive {self.name}: {units} blocks per die with {self.over_provisioning:.1%} "
                f"over-provisioning leave {spare} spare blocks per die; garbage collection "
                f"needs at least {self.gc_free_units + self.open_streams + 1} (more blocks per "
                f"plane, or more over-provisioning)")

    # Derived sizes -------------------------------------------------------------------------

    @property
    def dies(self):
        """Number of dies (LUNs)."""
        return self.channels * self.chips_per_channel * self.dies_per_chip

    @property
    def mp(self):
        """Pages per program operation: the planes with multi-plane programs, else 1."""
        return self.planes_per_die if self.multi_plane else 1

    @property
    def units_per_die(self):
        """Erase units per die: blocks, or multi-plane block groups."""
        return self.planes_per_die * self.blocks_per_plane // self.mp

    @property
    def physical_pages(self):
        """Pages of the whole array."""
        return self.dies * self.planes_per_die * self.blocks_per_plane * self.pages_per_block

    @property
    def logical_pages(self):
        """Pages the host can address: the physical pages over (1 + over-provisioning); for the
        hybrid FTL the data areas of all blocks but two per die."""
        if self.ftl == "hybrid":
            return (self.dies * (self.units_per_die - 2)
                    * (self.pages_per_block - self.hybrid_log_pages))
        return int(self.physical_pages / (1 + self.over_provisioning))

    @property
    def logical_bytes(self):
        """User capacity in bytes."""
        return self.logical_pages * self.page_size

    def die_location(self, die):
        """Return ``(channel, chip, die)`` of die index ``die``.

        Die indices interleave channels first (die 0 on channel 0, die 1 on channel 1, …), so
        consecutive programs go to different channels (die interleaving).
        """
        ch = die % self.channels
        rest = die // self.channels
        return (ch, rest // self.dies_per_chip, rest % self.dies_per_chip)

    def page_types(self):
        """The page types of a block in program order (see :func:`page_types`)."""
        return page_types(self.cell, self.pages_per_block, self.program_scheme)

    @property
    def modern(self):
        """Whether any option of the 2026 physics is on (the timing model then takes the
        general path; without them it is the original, draw for draw)."""
        return (self.program_scheme != "page" or self.cache_regime != "back-to-back"
                or self.program_suspend > 0 or self.erase_suspend > 0 or self.read_retry > 0
                or self.plane_reads or self.timing_shape != "normal" or self.die_spread > 0
                or self.wear_drift > 0 or self.cell == "qlc")

    @property
    def word_line_pages(self):
        """Pages one program operation (per plane) programs: the bits per cell for one-shot
        and two-pass word lines (SLC-mode blocks excepted), else 1."""
        return CELL_BITS[self.cell] if self.program_scheme != "page" else 1

    def _check_modern(self):
        """Validate the options of the 2026 physics (each error names the field)."""
        where = f"drive {self.name}"
        scheme = self.program_scheme
        if scheme != "page" and self.cell not in ("tlc", "qlc"):
            raise RefSSDError(f"{where}: program_scheme {scheme} needs TLC or QLC cells, "
                              f"not {self.cell!r}")
        if scheme != "page" and self.cache_program:
            raise RefSSDError(f"{where}: cache_program is not modelled with program_scheme "
                              f"{scheme} (its loads are already cached)")
        if scheme != "page" and self.ftl == "hybrid":
            raise RefSSDError(f"{where}: the hybrid FTL programs pages one by one "
                              f"(program_scheme must be page)")
        if self.cache_regime not in CACHE_REGIMES:
            raise RefSSDError(f"{where}: cache_regime must be one of {', '.join(CACHE_REGIMES)}, "
                              f"not {self.cache_regime!r}")
        if self.timing_shape not in TIMING_SHAPES:
            raise RefSSDError(f"{where}: timing_shape must be one of "
                              f"{', '.join(TIMING_SHAPES)}, not {self.timing_shape!r}")
        for key in ("program_suspend", "erase_suspend", "read_retry", "die_spread",
                    "wear_drift"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise RefSSDError(f"{where}: {key} must be a number from 0 to 1, not {v!r}")
        for key in ("plane_reads", "wired_or"):
            if not isinstance(getattr(self, key), bool):
                raise RefSSDError(f"{where}: {key} must be true or false, "
                                  f"not {getattr(self, key)!r}")
        if self.slc_prefix not in (0xDA, 0xA2):
            raise RefSSDError(f"{where}: slc_prefix must be 0xDA or 0xA2, "
                              f"not {self.slc_prefix!r}")
        if self.planes_per_die > 8:
            raise RefSSDError(f"{where}: planes_per_die must be at most 8, "
                              f"not {self.planes_per_die}")

    def with_(self, **changes):
        """Return a copy with ``changes`` (e.g. ``blocks_per_plane=32``)."""
        known = {f.name for f in fields(self)}
        for key in changes:
            if key not in known:
                raise RefSSDError(f"drive has no field {key!r}")
        if "timing" in changes:
            t = dict(self.timing)
            t.update(changes["timing"])
            changes["timing"] = t
        return replace(self, **changes)

    # The user's view ------------------------------------------------------------------------

    def user_geometry(self):
        """Return the :class:`rbscope.analysis.geometry.Geometry` a rbscope user would give for
        this drive.

        The array layout, page size, program model and capacities are this drive's; the
        classifier windows and timing hints come from the bundled geometry named by
        ``user_geometry_name`` (what a user of that drive class would pass), else rbscope's
        generic windows and this drive's datasheet ranges as hints.
        """
        classifier = None
        timing = {"read": self._range("read"), "program": self._range("program"),
                  "erase": self.timing["erase"]}
        if self.user_geometry_name:
            try:
                bundled = load_geometry(self.user_geometry_name)
            except GeometryError as exc:
                raise RefSSDError(f"drive {self.name}: {exc}") from None
            classifier = bundled.classifier
            timing = dict(bundled.timing) or timing
        raw = self.physical_pages * self.page_size
        return Geometry(
            name=f"{self.name} (reference SSD)", channels=self.channels,
            chips_per_channel=self.chips_per_channel, dies_per_chip=self.dies_per_chip,
            planes_per_die=self.planes_per_die, page_size=self.page_size,
            program_model="multi-plane" if self.multi_plane else "single-plane",
            pages_per_block=self.pages_per_block, raw_bytes=float(raw),
            user_bytes=float(self.logical_bytes), timing=timing, classifier=classifier,
            description=self.description)

    def _range(self, op):
        levels = _LEVELS[CELL_BITS[self.cell]]
        ranges = [self.timing[f"{op}_{_TYPE_KEY[t]}"] for t in levels]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges))

    def type_key(self, page_type):
        """The timing-key suffix of a :class:`PageType` (``lower`` …)."""
        return _TYPE_KEY[PageType(page_type)]


#: Timing every drive starts from (µs): the catalogue's generic die (a 34 nm-class die on an
#: ONFI 1.0 bus, :data:`rbscope.nand.parts.GENERIC_BUSY`) and a controller overhead.
#: The 2026 physics' busy times are used only by the drives that turn it on.
DEFAULT_TIMING = {
    **GENERIC_BUSY, "overhead": (1.0, 20.0),
    "read_top": (60.0, 90.0), "program_top": (2500.0, 4000.0), "data_load": (1.0, 5.0),
    "program_foggy": (1200.0, 2000.0), "program_fine": (2500.0, 4000.0),
    "suspend": (5.0, 20.0),
}


def from_part(name, part_name, **fields_):
    """Return a :class:`Drive` named ``name`` of dies of the catalogue's part ``part_name``.

    The die's planes, blocks per plane, pages per block, page size, cell type and busy-time
    distributions are the part's (:data:`rbscope.nand.parts.PARTS`); ``fields_`` set the
    drive's layout and firmware (and may shrink ``blocks_per_plane``).
    """
    try:
        p = part(part_name)
    except PartError as exc:
        raise RefSSDError(f"drive {name}: {exc}") from None
    die = dict(planes_per_die=p.planes_per_die, blocks_per_plane=p.blocks_per_plane,
               pages_per_block=p.pages_per_block, page_size=p.page_size, cell=p.cell,
               timing=dict(p.busy))
    return Drive(name=name, **{**die, **fields_})


def _presets():
    p = {}
    p["ssd-v"] = from_part(
        "ssd-v", "mlc34nm", description="RB-Explorer's SSD-v: 34 nm MLC, 4 channels x 1 chip x "
        "1 die x 2 planes, single-plane programs, greedy GC, small write buffer",
        channels=4, over_provisioning=16 / 14.0 - 1, write_buffer=32 * 1024, bus_mb_s=40.0,
        user_geometry_name="ssd-v")
    p["ssd-i"] = from_part(
        "ssd-i", "mlc34nm", description="RB-Explorer's SSD-I (Intel X25-V 40 GB class): 34 nm "
        "MLC, 5 channels x 1 chip x 2 dies x 2 planes, single-plane programs, the OP-sweep "
        "drive", channels=5, dies_per_chip=2, blocks_per_plane=2048,
        over_provisioning=40 / 37.2 - 1, write_buffer=32 * 1024, bus_mb_s=40.0,
        user_geometry_name="ssd-i")
    p["mlc-2plane"] = from_part(
        "mlc-2plane", "micron25nm", description="SSD-M class: 25 nm MLC, 8 channels x 1 chip x "
        "2 dies x 2 planes, two-plane programs and erases, 1 MiB write buffer",
        channels=8, dies_per_chip=2, blocks_per_plane=1024, over_provisioning=64 / 59.6 - 1,
        write_buffer=1 << 20, multi_plane=True, bus_mb_s=166.0, user_geometry_name="ssd-m")
    p["tlc-gc"] = from_part(
        "tlc-gc", "tlc16k", description="TLC with heavy garbage collection: 4 channels x 2 "
        "dies, 16 KiB pages, 7 % over-provisioning, cost-benefit GC, no write buffer",
        channels=4, dies_per_chip=2, over_provisioning=0.07, gc="cost-benefit",
        wear_levelling=50, bus_mb_s=200.0, user_windows="calibrated")
    p["tlc-slc"] = p["tlc-gc"].with_(
        name="tlc-slc", description="TLC with an SLC write cache (16 SLC-mode blocks per die), "
        "4 channels x 2 dies, 16 KiB pages, 10 % over-provisioning, greedy GC",
        over_provisioning=0.10, slc_cache=16, gc="greedy", wear_levelling=0)
    p["hubi"] = from_part(
        "hubi", "hubi_mlc", description="hUBI-paper class MLC (2 KiB pages, 128-page blocks) "
        "with a hybrid FTL: 100 data + 28 log pages per block, single-block merge",
        channels=4, ftl="hybrid", hybrid_log_pages=28, user_windows="calibrated")
    p["cache-prog"] = from_part(
        "cache-prog", "mlc8k", description="MLC with cache programs (80h-15h chains) and cache "
        "reads, two-plane, 4 channels x 1 chip x 2 dies, 256 KiB write buffer",
        channels=4, dies_per_chip=2, over_provisioning=0.12, write_buffer=256 * 1024,
        multi_plane=True, cache_program=True, cache_read=True, bus_mb_s=100.0,
        user_windows="calibrated")
    p["slc"] = from_part(
        "slc", "slc34nm", description="SSD-S class SLC: 4 channels x 2 chips x 2 dies x 2 "
        "planes, two-plane programs", channels=4, chips_per_channel=2, dies_per_chip=2,
        blocks_per_plane=512, over_provisioning=32 / 28.1 - 1, multi_plane=True,
        write_buffer=64 * 1024, user_geometry_name="ssd-s")
    return p


#: Named drives, each of a part of the catalogue (:func:`from_part`). SSD-v's array is the full
#: drive's (16 GiB raw); SSD-I, the SSD-M class, and the SLC drive model fewer blocks per plane
#: than their parts have. Shrink any with ``preset(name, blocks_per_plane=…)`` for quick runs.
PRESETS = _presets()


def preset(name, **changes):
    """Return the preset drive ``name`` with optional field ``changes``."""
    try:
        drive = PRESETS[name]
    except KeyError:
        raise RefSSDError(f"no drive preset {name!r} (presets: {', '.join(PRESETS)})") from None
    return drive.with_(**changes) if changes else drive


_SECTIONS = {
    "array": ("channels", "chips_per_channel", "dies_per_chip", "planes_per_die",
              "blocks_per_plane", "pages_per_block", "page_size", "cell"),
    "firmware": ("ftl", "hybrid_log_pages", "over_provisioning", "gc", "gc_free_units",
                 "open_streams", "wear_levelling",
                 "write_buffer", "multi_plane", "cache_program", "cache_read", "slc_cache",
                 "bus_mb_s", "power_on", "program_scheme", "cache_regime", "program_suspend",
                 "erase_suspend", "read_retry", "plane_reads", "wired_or", "slc_prefix",
                 "timing_shape", "die_spread", "wear_drift"),
    "user": ("geometry", "windows"),
}


def parse_drive(text, source="drive spec"):
    """Parse a TOML drive spec (see the module docstring); errors name ``source`` and the key."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RefSSDError(f"{source}: invalid TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # absurd nesting, 4 301-digit integers
        raise RefSSDError(f"{source}: cannot be read as TOML: {type(exc).__name__}: "
                          f"{str(exc)[:100]}") from None
    unknown = sorted(set(doc) - {"name", "description", "preset", "timing", *_SECTIONS})
    if unknown:
        raise RefSSDError(f"{source}: unknown key(s) {', '.join(unknown)}")
    if "preset" in doc and not isinstance(doc["preset"], str):
        raise RefSSDError(f"{source}: preset must be a preset name (a string; presets: "
                          f"{', '.join(PRESETS)}), not {_short(doc['preset'])}")
    base = preset(doc["preset"]) if "preset" in doc else None
    changes = {}
    for section, keys in _SECTIONS.items():
        table = doc.get(section, {})
        if not isinstance(table, dict):
            raise RefSSDError(f"{source}: [{section}] must be a table")
        bad = sorted(set(table) - set(keys))
        if bad:
            raise RefSSDError(f"{source}: [{section}] has unknown key(s) {', '.join(bad)} "
                              f"(allowed: {', '.join(keys)})")
        for key, value in table.items():
            if section == "user":
                changes["user_geometry_name" if key == "geometry" else "user_windows"] = value
            else:
                changes[key] = value
    for key in ("multi_plane", "cache_program", "cache_read", "power_on", "plane_reads",
                "wired_or"):
        if key in changes and not isinstance(changes[key], bool):
            raise RefSSDError(f"{source}: firmware.{key} must be true or false, "
                              f"not {changes[key]!r}")
    timing = doc.get("timing", {})
    if not isinstance(timing, dict):
        raise RefSSDError(f"{source}: [timing] must be a table")
    changes["timing"] = {k: _dist(f"{source}: timing.{k}", v) for k, v in timing.items()}
    name = doc.get("name", base.name if base else None)
    if not isinstance(name, str) or not name:
        raise RefSSDError(f"{source}: name must be a non-empty string, not {name!r}")
    changes["name"] = name
    if "description" in doc:
        if not isinstance(doc["description"], str):
            raise RefSSDError(f"{source}: description must be a string")
        changes["description"] = doc["description"]
    try:
        if base is not None:
            return base.with_(**changes)
        return Drive(**changes)
    except RefSSDError as exc:
        raise RefSSDError(f"{source}: {exc}") from None
    except TypeError as exc:
        raise RefSSDError(f"{source}: {exc}") from None


def load_drive(spec):
    """Return a :class:`Drive` from a preset name, a TOML path, or a Drive (returned as is)."""
    if isinstance(spec, Drive):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    if not isinstance(spec, (str, os.PathLike)):
        raise RefSSDError(f"a drive spec is a preset name, a TOML path or a Drive, not "
                          f"{_short(spec)}")
    name = _short(str(spec), 120)
    path = Path(spec)
    try:
        exists = path.is_file()
        text = path.read_text(encoding="utf-8") if exists else None
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, not UTF-8
        raise RefSSDError(f"{name}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                          [:300]) from None
    if text is None:
        raise RefSSDError(f"{name}: no such drive spec file and no preset of that name "
                          f"(presets: {', '.join(PRESETS)})")
    return parse_drive(text, str(spec))

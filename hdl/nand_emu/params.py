"""Build-time parameters and run-time configuration of the ONFI NAND die emulator.

Nothing here elaborates gateware, so the host (presets, register codecs) and the benches use the
very definitions the gateware is built from. The enumerations are Amaranth enums with explicit
shapes: signal shapes in the gateware, plain ``IntEnum`` members on the host.
"""

from dataclasses import dataclass, field, replace

from amaranth.lib import enum

__all__ = [
    "BusyTime", "EmuCounter", "Storage", "EmuParams", "EmuConfig", "TrafficConfig",
    "pattern_byte", "PAGE_TYPES", "PAGE_TYPE_WORD", "LEAN", "SMALL_GEOMETRY", "standard_builds",
]

#: Page types of the tPROG map: index into the four ``PROG*`` busy times.
PAGE_TYPES = ("lower", "upper", "extra", "fast")

#: Entries of the page-type map per word of the dies' page-type RAM (32 bits). A map of at most
#: this many entries is read straight from the configuration.
PAGE_TYPE_WORD = 16


class Storage(enum.IntEnum, shape=1):
    """What the die stores (build-time)."""

    TIMING = 0  # no data array: reads return pattern_byte(row, column); page state is kept
    ARRAY = 1  # a real array in block RAM: data written is read back bit-exact, spare included


class BusyTime(enum.IntEnum, shape=4):
    """Index of a busy time (and of its jitter mask) in the configuration."""

    R = 0  # page read (00h-30h), parameter page read (ECh)
    PROG0 = 1  # page program, page type 0 (SLC / MLC lower / TLC lower)
    PROG1 = 2  # page type 1 (MLC upper / TLC middle)
    PROG2 = 3  # page type 2 (TLC extra / upper)
    PROG3 = 4  # page type 3 (e.g. SLC-cache region)
    BERS = 5  # block erase
    CBSY = 6  # cache program: data register to cache register (R/B# low, array keeps going)
    DBSY = 7  # multi-plane queueing (11h, D1h)
    RCBSY = 8  # read cache (31h, 3Fh)
    RST = 9  # reset (FFh)
    FEAT = 10  # set / get features (EFh, EEh)


class EmuCounter(enum.IntEnum, shape=4):
    """Index of a die's ground-truth counters (read port ``index``)."""

    PAGE_PROGRAMS = 0  # pages programmed (a two-plane program counts 2), at completion
    PROGRAM_OPS = 1  # array program operations completed (one tPROG each)
    BLOCK_ERASES = 2  # blocks erased (a two-plane erase counts 2), at completion
    ERASE_OPS = 3  # erase operations completed (one tBERS each)
    PAGE_READS = 4  # array page reads completed (30h, and the background read of 31h)
    CACHE_OPS = 5  # cache commands accepted (15h, 31h, 3Fh)
    RESETS = 6  # FFh commands accepted
    ILLEGAL = 7  # commands ignored: unknown opcode, or not allowed in the current state
    FAILED = 8  # pages/blocks refused by a NAND rule (sum of the four reasons below)
    FAIL_NOT_ERASED = 9  # program of a page that is not erased
    FAIL_ORDER = 10  # program skipping pages of the block (out of order)
    FAIL_PROTECTED = 11  # program or erase while WP# is low
    FAIL_BAD_BLOCK = 12  # program or erase of a listed bad block
    ABORTED = 13  # operations cut short by a reset
    FEATURE_OPS = 14  # set / get features completed
    PARAM_READS = 15  # parameter page reads completed


def pattern_byte(row, column):
    """Return the byte a timing-only die reads at ``row``, ``column`` of a programmed page.

    Erased pages read ``0xFF`` and pages of listed bad blocks ``0x00`` in both storage modes.
    """
    value = column ^ (column >> 8) ^ row ^ (row >> 8) ^ (row >> 16) ^ 0xA5
    return value & 0xFF


def _is_pow2(value):
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class EmuParams:
    """Build-time parameters of the NAND die emulator.

    Parameters
    ----------
    dies : int
        Emulated dies (1 … 8). Each has its own CE# and R/B# (one LUN per target).
    rb_wired : bool
        Wire all R/B# outputs together (wired-OR of the open-drain pins: one ``rb`` output).
    page_bytes : int
        Data bytes per page (power of two, 16 … 16384).
    spare_bytes : int
        Spare bytes per page (0 … 2048).
    pages_per_block : int
        Pages per block (power of two, 2 … 1024).
    blocks_per_plane : int
        Blocks per plane (power of two, 1 … 16384).
    planes : int
        Planes per die (1, 2 or 4); the plane is the low bits of the block address.
    storage : Storage
        :attr:`Storage.TIMING` or :attr:`Storage.ARRAY` (array only for small geometries).
    ticks_bits : int
        Width of every busy time in ticks (16 … 32).
    jitter_bits : int
        Width of every jitter mask (0 … 24); 0 builds no jitter.
    prescaler_bits : int
        Width of the tick prescaler (1 … 24).
    counter_bits : int
        Width of the ground-truth counters (32 … 64).
    bad_block_slots : int
        Entries of the run-time bad-block list (0 … 32).
    page_type_slots : int
        Entries of the run-time page-type map (power of two, 1 … 1024): the type of page ``p``
        (its page number in the block) is ``map[p % page_type_slots]``, so with
        ``page_type_slots >= pages_per_block`` every page of a block has its own entry. A map
        of more than :data:`PAGE_TYPE_WORD` entries is read by the dies from a small RAM.
    maker, model : str
        Parameter-page manufacturer (12 characters at most) and model (20 at most).
    maker_id, device_id : int
        Read ID bytes 0 and 1.
    bits_per_cell : int
        Parameter-page bits per cell.
    t_prog_max_us, t_bers_max_us, t_r_max_us : int
        Parameter-page timing bytes 133–138 (µs), e.g. from a host preset.
    max_array_bytes : int
        Refuse an :attr:`Storage.ARRAY` build larger than this (bytes of array).
    """

    dies: int = 1
    rb_wired: bool = False
    page_bytes: int = 2048
    spare_bytes: int = 64
    pages_per_block: int = 64
    blocks_per_plane: int = 1024
    planes: int = 2
    storage: Storage = Storage.TIMING
    ticks_bits: int = 24
    jitter_bits: int = 16
    prescaler_bits: int = 16
    counter_bits: int = 48
    bad_block_slots: int = 4
    page_type_slots: int = 64
    maker: str = "RBSCOPE"
    model: str = "NAND-EMU"
    maker_id: int = 0xEE
    device_id: int = 0x01
    bits_per_cell: int = 2
    t_prog_max_us: int = 2200
    t_bers_max_us: int = 3800
    t_r_max_us: int = 75
    max_array_bytes: int = 1 << 18

    def __post_init__(self):
        def check(name, lo, hi, pow2=False):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {value!r}")
            if pow2 and not _is_pow2(value):
                raise ValueError(f"{name} must be a power of two, not {value!r}")

        check("dies", 1, 8)
        if not isinstance(self.rb_wired, bool):
            raise ValueError(f"rb_wired must be a bool, not {self.rb_wired!r}")
        check("page_bytes", 16, 16384, pow2=True)
        check("spare_bytes", 0, 2048)
        check("pages_per_block", 2, 1024, pow2=True)
        check("blocks_per_plane", 1, 16384, pow2=True)
        check("planes", 1, 4, pow2=True)
        if not isinstance(self.storage, Storage):
            try:
                object.__setattr__(self, "storage", Storage(self.storage))
            except ValueError:
                raise ValueError(f"storage must be a Storage, not {self.storage!r}") from None
        check("ticks_bits", 16, 32)
        check("jitter_bits", 0, 24)
        check("prescaler_bits", 1, 24)
        check("counter_bits", 32, 64)
        check("bad_block_slots", 0, 32)
        check("page_type_slots", 1, 1024, pow2=True)
        check("maker_id", 0, 255)
        check("device_id", 0, 255)
        check("bits_per_cell", 1, 8)
        for name in ("t_prog_max_us", "t_bers_max_us", "t_r_max_us"):
            check(name, 0, 0xFFFF)
        check("max_array_bytes", 0, 1 << 30)
        for name, limit in (("maker", 12), ("model", 20)):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > limit or not value.isascii():
                raise ValueError(f"{name} must be ASCII text of at most {limit} characters, "
                                 f"not {value!r}")
        if self.row_bits > 24:
            raise ValueError(f"a row address must fit 3 address cycles; this geometry needs "
                             f"{self.row_bits} bits")
        if self.storage == Storage.ARRAY and self.array_bytes > self.max_array_bytes:
            raise ValueError(f"an array-mode die of {self.array_bytes} bytes exceeds "
                             f"max_array_bytes={self.max_array_bytes}; use Storage.TIMING")

    # Derived quantities -------------------------------------------------------------------------

    @property
    def page_total(self):
        """Bytes per page, spare included (the column range)."""
        return self.page_bytes + self.spare_bytes

    @property
    def col_bits(self):
        return max(1, (self.page_total - 1).bit_length())

    @property
    def page_bits(self):
        return (self.pages_per_block - 1).bit_length()

    @property
    def plane_bits(self):
        return (self.planes - 1).bit_length()

    @property
    def blocks(self):
        """Blocks per die (all planes)."""
        return self.blocks_per_plane * self.planes

    @property
    def block_bits(self):
        return max(1, (self.blocks - 1).bit_length())

    @property
    def row_bits(self):
        """Bits of a row address: page in the low bits, block above."""
        return self.page_bits + self.block_bits

    @property
    def pages(self):
        """Pages per die."""
        return self.blocks * self.pages_per_block

    @property
    def array_bytes(self):
        return self.pages * self.page_total

    @property
    def die_bits(self):
        return max(1, (self.dies - 1).bit_length())

    @property
    def rb_count(self):
        """Number of R/B# outputs (1 when wired together)."""
        return 1 if self.rb_wired else self.dies

    def row(self, block, page):
        """Row address of ``page`` in ``block``."""
        return (block << self.page_bits) | page

    def split_row(self, row):
        """Return ``(block, page)`` of a row address (bits above the geometry are ignored)."""
        page = row & (self.pages_per_block - 1)
        block = (row >> self.page_bits) & ((1 << self.block_bits) - 1)
        return block, page


@dataclass(frozen=True)
class EmuConfig:
    """Run-time configuration of the emulator (what the register file holds).

    Parameters
    ----------
    prescaler : int
        System clock cycles per tick (0 behaves as 1). A busy time of ``t`` ticks holds R/B# low
        for exactly ``t * prescaler`` cycles.
    t_wb : int
        Cycles from the confirm command's (synchronised) WE# rising edge to R/B# low.
    times : dict
        Busy time in ticks per :class:`BusyTime` (name or member); missing ones are 0 (no busy).
    jitter : dict
        Jitter mask per :class:`BusyTime`: each busy period adds ``lfsr & mask`` ticks.
    page_types : tuple of int
        Page-type map (0 … 3, indexing ``PROG0`` … ``PROG3``), repeated over the block.
    seed : int
        Seed of the 32-bit jitter LFSR (0 behaves as 1).
    bad_blocks : tuple of int
        Factory bad blocks (die block numbers): erase and program refused, reads return 00h.
    """

    prescaler: int = 1
    t_wb: int = 2
    times: dict = field(default_factory=dict)
    jitter: dict = field(default_factory=dict)
    page_types: tuple = (0,)
    seed: int = 1
    bad_blocks: tuple = ()

    def validate(self, params):
        """Return a copy checked against ``params`` with complete ``times``/``jitter`` maps.

        Raises ``ValueError`` naming the offending field.
        """
        def value(name, v, bits):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << bits:
                raise ValueError(f"{name} must be an integer from 0 to {(1 << bits) - 1}, "
                                 f"not {v!r}")
            return v

        def timemap(name, given, bits):
            out = {t: 0 for t in BusyTime}
            if not isinstance(given, dict):
                raise ValueError(f"{name} must be a dict of busy times, not {given!r}")
            for key, v in given.items():
                try:
                    member = BusyTime[key] if isinstance(key, str) else BusyTime(key)
                except (KeyError, ValueError):
                    raise ValueError(f"{name} has an unknown busy time {key!r}; known: "
                                     f"{[t.name for t in BusyTime]}") from None
                out[member] = value(f"{name}[{member.name}]", v, bits)
            return out

        value("prescaler", self.prescaler, params.prescaler_bits)
        value("t_wb", self.t_wb, 8)
        value("seed", self.seed, 32)
        times = timemap("times", self.times, params.ticks_bits)
        jitter = timemap("jitter", self.jitter, max(params.jitter_bits, 1))
        if params.jitter_bits == 0 and any(jitter.values()):
            raise ValueError("jitter needs an emulator built with jitter_bits > 0")
        types = tuple(self.page_types)
        if not 1 <= len(types) <= params.page_type_slots or \
                params.page_type_slots % len(types):
            raise ValueError(f"page_types must have a divisor of {params.page_type_slots} "
                             f"entries, not {len(types)}")
        for i, t in enumerate(types):
            value(f"page_types[{i}]", t, 2)
        types = types * (params.page_type_slots // len(types))
        bad = tuple(self.bad_blocks)
        if len(bad) > params.bad_block_slots:
            raise ValueError(f"bad_blocks has {len(bad)} entries but the emulator was built with "
                             f"{params.bad_block_slots} slots")
        for i, b in enumerate(bad):
            if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b < params.blocks:
                raise ValueError(f"bad_blocks[{i}] must be a block from 0 to "
                                 f"{params.blocks - 1}, not {b!r}")
        return replace(self, times=times, jitter=jitter, page_types=types, bad_blocks=bad)

    def page_type(self, page):
        """Type (0 … 3) of ``page`` within its block (validated configurations only)."""
        return self.page_types[page % len(self.page_types)]

    def prog_time(self, page):
        """Base tPROG (ticks) of ``page`` (validated configurations only)."""
        return self.times[BusyTime(BusyTime.PROG0 + self.page_type(page))]


@dataclass(frozen=True)
class TrafficConfig:
    """Run-time configuration of the on-chip traffic generator.

    The generator runs ``loops`` times (0: until stopped) over ``blocks`` block groups starting
    at ``first_block``: in each, it programs pages ``0 … pages-1`` (with ``reads`` reads of the
    page just programmed after each program) and then erases the group when ``erase`` is set.
    Each step goes to every die of ``dies`` in turn, then waits until all are ready. With
    ``multi_plane``, a block group is one block per plane (block ``g*planes + k``), programmed
    and erased with multi-plane commands (80h…11h…10h, 60h…D1h…D0h); otherwise a group is one
    block.

    Parameters
    ----------
    dies : int
        Bit mask of dies to drive.
    first_block, blocks, pages, reads, loops : int
    multi_plane, erase : bool
    cache : bool
        Cache programs: every page of a block but the last is confirmed with 15h (the last with
        10h). Single-plane, and without reads (a read waits for the array, which a cache
        program keeps busy).
    phase_cycles : int
        Cycles of each WE# level (1 … 15).
    wb_wait : int
        Cycles to wait after a confirm before looking at R/B# (must exceed the emulator's
        ``t_wb`` plus 4 cycles: input synchronisation and the two-cycle command decoder).
    """

    dies: int = 1
    first_block: int = 0
    blocks: int = 1
    pages: int = 1
    reads: int = 0
    loops: int = 1
    multi_plane: bool = False
    erase: bool = True
    cache: bool = False
    phase_cycles: int = 2
    wb_wait: int = 16

    def validate(self, params):
        def value(name, v, lo, hi):
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {v!r}")

        value("dies", self.dies, 0, (1 << params.dies) - 1)
        value("first_block", self.first_block, 0, params.blocks - 1)
        value("blocks", self.blocks, 0, params.blocks)
        value("pages", self.pages, 0, params.pages_per_block)
        value("reads", self.reads, 0, 255)
        value("loops", self.loops, 0, 0xFFFF)
        value("phase_cycles", self.phase_cycles, 1, 15)
        value("wb_wait", self.wb_wait, 1, 255)
        if self.multi_plane and params.planes == 1:
            raise ValueError("multi_plane needs an emulator with more than one plane")
        if self.cache and (self.multi_plane or self.reads):
            raise ValueError("cache programs are single-plane and without reads")
        return self


#: Build options of the smaller die for small FPGAs (the iCE40UP5K): no jitter, no bad-block
#: list, 4 page-type slots, 16-bit busy times (up to 1.3 ms in µs ticks at 48 MHz).
LEAN = dict(jitter_bits=0, bad_block_slots=0, page_type_slots=4, ticks_bits=16)

#: The geometry of the test suite's small simulated dies (fast to simulate).
SMALL_GEOMETRY = dict(page_bytes=64, spare_bytes=8, pages_per_block=8, blocks_per_plane=8,
                      planes=2)


def standard_builds(dies):
    """The emulator builds a host can expect, for ``dies`` dies: the default die, the lean die
    (:data:`LEAN`) and the small simulated die (:data:`SMALL_GEOMETRY`).

    Board builds use the first two; the host identifies which from INFO's layout sizes.
    """
    return [EmuParams(dies=dies), EmuParams(dies=dies, **LEAN),
            EmuParams(dies=dies, **SMALL_GEOMETRY)]

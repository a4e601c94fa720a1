"""A page-mapped flash translation layer: the reference SSD's firmware.

The FTL turns host requests (write, read, TRIM of byte ranges) into NAND operations per die and
keeps the true counts. It models:

* page mapping at the page size (``l2p``: logical page → physical slot, ``p2l`` back);
* erase units: one block, or with multi-plane programs a group of one block per plane whose
  program operations write a page in every plane at once (a *row*);
* static striping of logical pages over the dies, channels first (die interleaving): logical
  page ``p`` lives on die ``(p // Mp) mod dies``, so consecutive pages go to different channels,
  a die gets ``Mp`` consecutive pages for one multi-plane row, and every die holds exactly its
  share of the logical space (with dynamic striping a die can drift above its share and, at
  small over-provisioning, run out of blocks to collect);
* one or two open units per die (hot host data; cold relocated data with ``open_streams = 2``);
* garbage collection per die while it has fewer than ``gc_free_units`` free units: the victim is
  the closed unit with the fewest valid pages (greedy) or the best ``(1 - u) / 2u × age``
  (cost-benefit); its valid pages are read and programmed into the cold stream, then it is
  erased;
* static wear levelling: after each erase, when the die's erase counts differ by more than the
  threshold, the least-erased closed unit is relocated and erased;
* an optional SLC cache: ``slc_cache`` units per die run in SLC mode (one page per word line,
  fast tPROG); host data lands there first, and when the die has no free SLC unit the oldest
  one is migrated (its valid pages read and programmed into MLC/TLC units, cause ``SLC``) and
  erased;
* an optional DRAM write buffer (LRU, whole pages with a sector mask) that merges small writes;
* read-modify-write: a page written in part (sub-page or unaligned writes), whose old data is
  mapped, is read (tR) and programmed whole; a partial page with no old data is programmed
  without a read;
* TRIM: whole pages in the range are unmapped.

Operations are appended to a per-die log (:attr:`PageFTL.log`, packed integers, see
:func:`pack`) in the order the firmware issues them; the timing model
(:mod:`rbscope.refssd.timing`) gives them times and R/B# pulses.
"""

from array import array
from collections import OrderedDict, deque
from enum import IntEnum

import numpy as np

from .drive import CELL_BITS, PageType, RefSSDError

__all__ = ["Cause", "FtlOp", "PageFTL", "HybridFTL", "make_ftl", "pack", "unpack"]


class Cause(IntEnum):
    """Why the firmware issued a NAND operation."""

    HOST = 0  # host data (a full page, or a partial page with nothing to merge)
    GC = 1  # garbage collection (relocation reads and programs, victim erases)
    RMW = 2  # read-modify-write of a partially written page
    WL = 3  # static wear levelling
    PAD = 4  # a multi-plane row closed with padding at a flush
    INIT = 5  # power-on reset and set features
    SLC = 6  # migration of data from the SLC cache into MLC/TLC blocks
    NONE = 15


class FtlOp(IntEnum):
    """Kinds of operations in the FTL's log (the timing model expands them into NAND commands)."""

    READ = 0
    PROGRAM = 1
    ERASE = 2


# Packed log entry: kind 4 bits | cause 4 | page type 4 | planes 4 | chain 1 | plane 3 |
# row 16 | unit 28. ``plane`` is the plane a single-page read addresses in a multi-plane unit.
_PLANE_SHIFT, _ROW_SHIFT, _UNIT_SHIFT = 17, 20, 36


def pack(kind, cause, ptype, planes, chain, row, unit, plane=0):
    """Pack one log entry into an integer."""
    return (kind | cause << 4 | ptype << 8 | planes << 12 | chain << 16
            | plane << _PLANE_SHIFT | row << _ROW_SHIFT | unit << _UNIT_SHIFT)


def unpack(log):
    """Unpack a log (array of packed entries) into a dict of numpy arrays."""
    a = np.frombuffer(log, dtype=np.int64) if len(log) else np.zeros(0, dtype=np.int64)
    return {"kind": (a & 15).astype(np.uint8), "cause": ((a >> 4) & 15).astype(np.uint8),
            "page_type": ((a >> 8) & 15).astype(np.uint8),
            "planes": ((a >> 12) & 15).astype(np.uint8), "chain": ((a >> 16) & 1).astype(bool),
            "plane": ((a >> _PLANE_SHIFT) & 7).astype(np.uint8),
            "row": ((a >> _ROW_SHIFT) & 0xFFFF).astype(np.int32),
            "unit": (a >> _UNIT_SHIFT).astype(np.int32)}


_FREE, _OPEN, _CLOSED = 0, 1, 2
_SLC_STREAM = 2  # the open SLC-cache unit of a die (streams 0 hot and 1 cold are MLC/TLC)


class PageFTL:
    """Page-mapped FTL over a :class:`~rbscope.refssd.drive.Drive`.

    Parameters
    ----------
    drive : Drive

    Attributes
    ----------
    log : list of array
        Per die, the packed operations in issue order (:func:`unpack`).
    host_bytes_written, host_bytes_read, host_bytes_trimmed : int
    programs, reads : numpy.ndarray
        ``[die, cause]`` counts of program operations and of page reads.
    pages_programmed : numpy.ndarray
        ``[die, cause]`` pages programmed (a multi-plane program writes Mp pages).
    erases : numpy.ndarray
        ``[die, cause]`` erase operations (each erases Mp blocks).
    """

    def __init__(self, drive):
        self.drive = d = drive
        self.dies = d.dies
        self.mp = d.mp
        self.units = d.units_per_die
        self.slots = d.pages_per_block * self.mp  # slots per unit
        self.sectors = d.page_size // 512
        self.full_mask = (1 << self.sectors) - 1
        self.logical_pages = d.logical_pages
        nunits = self.dies * self.units
        self.l2p = array("q", [-1]) * self.logical_pages
        self.p2l = array("q", [-1]) * (nunits * self.slots)
        self.valid = [0] * nunits
        self.erase_count = [0] * nunits
        self.state = bytearray(nunits)
        self.stamp = [0] * nunits  # host page clock when the unit was last written
        self.next_slot = [0] * nunits
        slc = d.slc_cache
        self.is_slc = bytearray(nunits)
        self.cap = [self.slots] * nunits  # slots a unit holds
        self.free = []
        self.free_slc = []
        self.slc_closed = [deque() for _ in range(self.dies)]  # oldest first
        for i in range(self.dies):
            base = i * self.units
            self.free_slc.append(deque(range(base, base + slc)))
            self.free.append(deque(range(base + slc, base + self.units)))
            for u in range(base, base + slc):
                self.is_slc[u] = 1
                self.cap[u] = d.pages_per_block // CELL_BITS[d.cell] * self.mp
        self.open = [[None, None, None] for _ in range(self.dies)]
        self.types = [int(t) for t in d.page_types()]
        self.log = [array("q") for _ in range(self.dies)]
        self.clock = 0
        self.buffer = OrderedDict()
        self.buffer_pages = d.write_buffer // d.page_size
        self._in_gc = False
        self._last_read = [None] * self.dies
        self._request = 0
        self.host_bytes_written = 0
        self.host_bytes_read = 0
        self.host_bytes_trimmed = 0
        self.programs = np.zeros((self.dies, 16), dtype=np.int64)
        self.pages_programmed = np.zeros((self.dies, 16), dtype=np.int64)
        self.reads = np.zeros((self.dies, 16), dtype=np.int64)
        self.erases = np.zeros((self.dies, 16), dtype=np.int64)

    # Low-level -------------------------------------------------------------------------------

    def _emit(self, die, kind, cause, ptype, planes, chain, row, unit, plane=0):
        self.log[die].append(kind | cause << 4 | ptype << 8 | planes << 12 | chain << 16
                             | plane << _PLANE_SHIFT | row << _ROW_SHIFT | unit << _UNIT_SHIFT)

    def _invalidate(self, lpn):
        old = self.l2p[lpn]
        if old >= 0:
            self.valid[old // self.slots] -= 1
            self.p2l[old] = -1
            self.l2p[lpn] = -1

    def _take_free(self, die, slc=False):
        pool = self.free_slc[die] if slc else self.free[die]
        if not pool:
            raise RefSSDError(f"die {die} ran out of free blocks: over-provisioning too small "
                              f"for the garbage collector")
        u = pool.popleft()
        self.state[u] = _OPEN
        self.next_slot[u] = 0
        return u

    def _place(self, die, stream, lpn, cause):
        """Map ``lpn`` to the next slot of the die's open unit of ``stream``."""
        opened = self.open[die]
        u = opened[stream]
        cap = self.cap
        if u is None or self.next_slot[u] == cap[u]:
            if u is not None:
                self._close(die, u)
                opened[stream] = None
            if stream == _SLC_STREAM:
                if not self.free_slc[die]:
                    self._migrate(die)
                u = opened[stream] = self._take_free(die, slc=True)
            else:
                if not self._in_gc:
                    self._collect(die)  # relocations may open this stream's unit (one stream)
                u = opened[stream]
                if u is None or self.next_slot[u] == cap[u]:
                    if u is not None:
                        self._close(die, u)
                    u = opened[stream] = self._take_free(die)
        slot = self.next_slot[u]
        self.next_slot[u] = slot + 1
        g = u * self.slots + slot
        if lpn >= 0:
            self.p2l[g] = lpn
            self.l2p[lpn] = g
            self.valid[u] += 1
        self.stamp[u] = self.clock
        if (slot + 1) % self.mp == 0:
            self._program_row(die, u, slot // self.mp, cause)
        return g

    def _close(self, die, u):
        self.state[u] = _CLOSED
        if self.is_slc[u]:
            self.slc_closed[die].append(u)

    def _migrate(self, die):
        """Move the oldest SLC-cache unit of ``die`` into MLC/TLC units and erase it."""
        if not self.slc_closed[die]:
            raise RefSSDError(f"die {die}: the SLC cache has no closed unit to migrate")
        u = self.slc_closed[die].popleft()
        self._collect(die)
        self._in_gc = True
        try:
            self._relocate(die, u, Cause.SLC)
        finally:
            self._in_gc = False

    def _program_row(self, die, unit, row, cause):
        mp = self.mp
        ptype = PageType.SLC if self.is_slc[unit] else self.types[row]
        self._emit(die, FtlOp.PROGRAM, cause, ptype, mp, 0, row, unit % self.units)
        self.programs[die, cause] += 1
        self.pages_programmed[die, cause] += mp
        self._last_read[die] = None

    def _read(self, die, g, cause, chain_key=None):
        u, slot = divmod(g, self.slots)
        row = slot // self.mp
        chain = 0
        last = self._last_read[die]
        if chain_key is not None and last == (chain_key, g - 1):
            chain = 1  # the next slot of the same unit, in the same host request
        self._last_read[die] = (chain_key, g) if chain_key is not None else None
        ptype = PageType.SLC if self.is_slc[u] else self.types[row]
        self._emit(die, FtlOp.READ, cause, ptype, 1, chain, row, u % self.units, slot % self.mp)
        self.reads[die, cause] += 1

    def _erase(self, die, u, cause):
        self._emit(die, FtlOp.ERASE, cause, PageType.NONE, self.mp, 0, 0, u % self.units)
        self.erases[die, cause] += 1
        self.erase_count[u] += 1
        self.state[u] = _FREE
        self.next_slot[u] = 0
        (self.free_slc[die] if self.is_slc[u] else self.free[die]).append(u)
        self._last_read[die] = None

    def _relocate(self, die, u, cause):
        base = u * self.slots
        p2l = self.p2l
        stream = 1 if self.drive.open_streams == 2 or self.drive.slc_cache else 0
        for g in range(base, base + self.cap[u]):
            lpn = p2l[g]
            if lpn >= 0:
                self._read(die, g, cause)
                self._invalidate(lpn)
                self._place(die, stream, lpn, cause)
        self._erase(die, u, cause)

    def _victim(self, die):
        lo, hi = die * self.units, (die + 1) * self.units
        state, valid, is_slc = self.state, self.valid, self.is_slc
        closed = [u for u in range(lo, hi) if state[u] == _CLOSED and not is_slc[u]]
        if not closed:
            return None
        if self.drive.gc == "greedy":
            return min(closed, key=valid.__getitem__)
        slots, clock, stamp = self.slots, self.clock, self.stamp

        def benefit(u):
            v = valid[u]
            if v == 0:
                return float("inf")
            util = v / slots
            return (1 - util) / (2 * util) * (clock - stamp[u] + 1)
        return max(closed, key=benefit)

    def _collect(self, die):
        """Garbage-collect ``die`` until it has ``gc_free_units`` free units."""
        need = self.drive.gc_free_units
        if len(self.free[die]) >= need:
            return
        self._in_gc = True
        try:
            while len(self.free[die]) < need:
                u = self._victim(die)
                if u is None or self.valid[u] >= self.slots:
                    raise RefSSDError(f"die {die}: no block to collect (every closed block "
                                      f"is full of valid data): over-provisioning too small")
                self._relocate(die, u, Cause.GC)
                self._level(die)
        finally:
            self._in_gc = False

    def _level(self, die):
        threshold = self.drive.wear_levelling
        if not threshold:
            return
        lo, hi = die * self.units, (die + 1) * self.units
        counts = [self.erase_count[u] for u in range(lo, hi) if not self.is_slc[u]]
        if max(counts) - min(counts) <= threshold:
            return
        closed = [u for u in range(lo, hi) if self.state[u] == _CLOSED and not self.is_slc[u]]
        if not closed:
            return
        coldest = min(closed, key=self.erase_count.__getitem__)
        if max(counts) - self.erase_count[coldest] > threshold:
            self._relocate(die, coldest, Cause.WL)

    # Host interface -------------------------------------------------------------------------

    def _host_program(self, lpn, cause):
        die = (lpn // self.mp) % self.dies  # static striping, channels first
        self._invalidate(lpn)
        self.clock += 1
        return self._place(die, _SLC_STREAM if self.drive.slc_cache else 0, lpn, cause)

    def _commit(self, lpn, mask):
        """Program logical page ``lpn`` whose sectors ``mask`` are new."""
        if mask == self.full_mask:
            self._host_program(lpn, Cause.HOST)
            return
        old = self.l2p[lpn]
        if old >= 0:
            self._read(old // (self.units * self.slots), old, Cause.RMW)
            self._host_program(lpn, Cause.RMW)
        else:
            self._host_program(lpn, Cause.HOST)

    def _check_range(self, offset, size, what):
        if offset < 0 or size <= 0 or offset + size > self.logical_pages * self.drive.page_size:
            raise RefSSDError(f"{what} of {size} bytes at offset {offset} is outside the "
                              f"logical space of {self.logical_pages * self.drive.page_size} "
                              f"bytes")
        if offset % 512 or size % 512:
            raise RefSSDError(f"{what} at offset {offset}, size {size}: not whole 512-byte "
                              f"sectors")

    def _pages(self, offset, size):
        ps = self.drive.page_size
        first, last = offset // ps, (offset + size - 1) // ps
        for lpn in range(first, last + 1):
            lo = max(offset, lpn * ps) - lpn * ps
            hi = min(offset + size, (lpn + 1) * ps) - lpn * ps
            mask = ((1 << ((hi - lo) // 512)) - 1) << (lo // 512)
            yield lpn, mask

    def write(self, offset, size):
        """Write ``size`` bytes at byte ``offset`` (whole 512-byte sectors)."""
        self._check_range(offset, size, "write")
        self._request += 1
        self.host_bytes_written += size
        buf = self.buffer
        for lpn, mask in self._pages(offset, size):
            if not self.buffer_pages:
                self._commit(lpn, mask)
                continue
            if lpn in buf:
                buf[lpn] |= mask
                buf.move_to_end(lpn)
            else:
                buf[lpn] = mask
                if len(buf) > self.buffer_pages:
                    old, m = buf.popitem(last=False)
                    self._commit(old, m)

    def read(self, offset, size):
        """Read ``size`` bytes at byte ``offset``: NAND reads of the mapped pages not buffered."""
        self._check_range(offset, size, "read")
        self._request += 1
        self.host_bytes_read += size
        key = self._request
        per_die = self.units * self.slots
        for lpn, mask in self._pages(offset, size):
            m = self.buffer.get(lpn, 0)
            if m & mask == mask:
                continue
            g = self.l2p[lpn]
            if g >= 0:
                self._read(g // per_die, g, Cause.HOST, key)

    def trim(self, offset, size):
        """Unmap the whole pages inside ``size`` bytes at ``offset``."""
        self._check_range(offset, size, "trim")
        self._request += 1
        self.host_bytes_trimmed += size
        for lpn, mask in self._pages(offset, size):
            if mask == self.full_mask:
                self.buffer.pop(lpn, None)
                self._invalidate(lpn)

    def flush(self):
        """Write the buffer back and close every partly filled multi-plane row (and one-shot or
        two-pass word line) with padding."""
        while self.buffer:
            lpn, m = self.buffer.popitem(last=False)
            self._commit(lpn, m)
        wl = self.drive.word_line_pages
        if self.mp > 1 or wl > 1:
            for die in range(self.dies):
                for stream in (0, 1, _SLC_STREAM):
                    u = self.open[die][stream]
                    # A one-shot or two-pass word line is programmed only once all its pages
                    # are loaded: pad it whole (SLC-mode units program page by page).
                    step = self.mp * (1 if u is None or self.is_slc[u] else wl)
                    while u is not None and self.next_slot[u] % step:
                        self._place(die, stream, -1, Cause.PAD)

    # Checks and summaries --------------------------------------------------------------------

    def check(self):
        """Check the mapping invariants; raise AssertionError naming the first violation.

        Every mapped logical page maps to a slot that maps back to it; no slot is claimed twice;
        each unit's valid count equals the slots mapping a logical page; free units hold none.
        """
        seen = {}
        for lpn, g in enumerate(self.l2p):
            if g >= 0:
                assert self.p2l[g] == lpn, f"l2p[{lpn}] = {g} but p2l[{g}] = {self.p2l[g]}"
                assert g not in seen, f"slot {g} mapped by {seen[g]} and {lpn}"
                seen[g] = lpn
        valid = [0] * len(self.valid)
        for g, lpn in enumerate(self.p2l):
            if lpn >= 0:
                assert self.l2p[lpn] == g, f"p2l[{g}] = {lpn} but l2p[{lpn}] = {self.l2p[lpn]}"
                valid[g // self.slots] += 1
        assert valid == self.valid, "valid-page counts disagree with the mapping"
        for u, s in enumerate(self.state):
            if s == _FREE:
                assert valid[u] == 0, f"free unit {u} holds {valid[u]} valid pages"
        for die in range(self.dies):
            assert len(set(self.free[die])) == len(self.free[die]), f"die {die}: free list dup"
            assert all(self.is_slc[u] for u in self.free_slc[die])
            assert not any(self.is_slc[u] for u in self.free[die])

    def reset_counts(self):
        """Zero the counters and the logs (after preconditioning); the mapping stays."""
        for a in (self.programs, self.pages_programmed, self.reads, self.erases):
            a[:] = 0
        self.log = [array("q") for _ in range(self.dies)]
        self.host_bytes_written = self.host_bytes_read = self.host_bytes_trimmed = 0
        self._last_read = [None] * self.dies


class HybridFTL(PageFTL):
    """A hybrid-mapping FTL in the manner of hUBI: block mapping with a log area per block.

    Logical block ``b`` (``d = pages_per_block - hybrid_log_pages`` logical pages) lives in one
    physical block of die ``b mod dies``. Writes append to that block (its data area on the first
    pass, then its log area of ``hybrid_log_pages`` pages); when the block is full, a
    single-block merge copies the latest version of each of its logical pages, in order, into a
    free block (reads and programs of cause ``GC``), erases the old block, and the write goes on
    in the new one. Random single-page updates of full blocks thus cost ``(l + d) / l``
    programs per page (hUBI with d = 100, l = 26: 4.85). Sub-page writes, the write buffer, reads
    and TRIM behave as in :class:`PageFTL`.
    """

    def __init__(self, drive):
        if drive.ftl != "hybrid":
            raise RefSSDError(f"drive {drive.name} is not a hybrid-FTL drive")
        super().__init__(drive)
        self.data_pages = drive.pages_per_block - drive.hybrid_log_pages
        self.blockmap = [-1] * (self.logical_pages // self.data_pages)

    def _host_program(self, lpn, cause):
        lb = lpn // self.data_pages
        die = lb % self.dies
        u = self.blockmap[lb]
        if u < 0:
            u = self.blockmap[lb] = self._take_free(die)
        elif self.next_slot[u] == self.slots:
            u = self._merge(die, lb, u)
        self._invalidate(lpn)
        self.clock += 1
        return self._append(die, u, lpn, cause)

    def _append(self, die, u, lpn, cause):
        """Program ``lpn`` into the next page of unit ``u``; return the slot."""
        slot = self.next_slot[u]
        self.next_slot[u] = slot + 1
        g = u * self.slots + slot
        self.p2l[g] = lpn
        self.l2p[lpn] = g
        self.valid[u] += 1
        self._program_row(die, u, slot, cause)
        return g

    def _merge(self, die, lb, old):
        new = self._take_free(die)
        first = lb * self.data_pages
        for lpn in range(first, first + self.data_pages):
            g = self.l2p[lpn]
            if g < 0:
                continue
            self._read(die, g, Cause.GC)
            self._invalidate(lpn)
            self._append(die, new, lpn, Cause.GC)
        self.state[old] = _CLOSED
        self._erase(die, old, Cause.GC)
        self.blockmap[lb] = new
        return new


def make_ftl(drive):
    """The FTL of ``drive``: :class:`PageFTL` or :class:`HybridFTL` (``drive.ftl``)."""
    return HybridFTL(drive) if drive.ftl == "hybrid" else PageFTL(drive)

"""Synthetic drives for the WA model's tests and tuning: R/B# pulse trains of 2026 NAND physics.

The reference SSD (``rbscope.refssd``) models one family of drives; the classifier must work on
drives it was not written against. This generator builds pulse trains directly from a drive
description (:class:`Spec`) with the physics the reference SSD lacked when it was written, and
keeps the truth (pages programmed, host pages) beside them:

* cells SLC/MLC/TLC/QLC, programmed page by page (the block's staircase of page types), one-shot
  (``bits − 1`` short 1Ah data-load busies per plane, then one long tPROG for the word line's
  pages) or two-pass (foggy and fine: two long busies for a word line's pages);
* 1, 2, 4 or 6 planes with multi-plane operations (a short tDBSY per queued plane);
* an SLC-mode cache in front of TLC/QLC (fast one-page programs, later folded);
* host-paced cache programs (R/B# shows only tCBSY for a chain's pages but the last);
* erase suspend (an erase split into 2–3 pieces with reads between);
* several LUNs on one wired-OR R/B# (the line is low while any LUN is busy);
* optionally the bus: a page's data in before each program (and each queued plane) and its
  data out after each read lengthen the idle gaps (``transfer_us``), and the measurement keeps
  each pulse's start (``starts``), as a recording does;
* per-die process spread and log-normal tails on every time.

The classifier is never handed these distributions: tests give it a geometry at a knowledge
level (:func:`geometry_for`), as a user would. Seeds below 1000 are for tuning.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from rbscope.analysis.geometry import CELL_BITS, Geometry
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Measurement, Probe
from rbscope.analysis.presets import DEFAULT_PRESET
from rbscope.gateware.rb_sniffer.model import ChannelCounts
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

TICK = 1e-8  # 10 ns, the default recording clock

#: Program time ranges (µs) per page type (lower, middle, upper, top) by cell.
_PROGRAM = {
    "slc": ((180, 300),),
    "mlc": ((250, 600), (1300, 2200)),
    "tlc": ((400, 700), (1200, 1800), (2500, 3500)),
    "qlc": ((500, 900), (1300, 2000), (2400, 3400), (3800, 5200)),
}


@dataclass(frozen=True)
class Spec:
    """A synthetic drive and its workload."""

    name: str = "mlc"
    cell: str = "mlc"
    scheme: str = "page"
    planes: int = 2
    multi_plane: bool = False
    dies: int = 4
    luns_per_line: int = 1
    ppb: int = 128  # pages per block per plane
    blocks: int = 40  # blocks programmed per die
    gc_share: float = 0.3  # share of programmed pages that are relocations
    reads: float = 0.3  # host reads per program operation
    program: tuple | None = None  # ranges per page type (µs), default by cell
    oneshot_us: tuple = (1800, 2600)
    erase_us: tuple = (3000, 5000)
    read_us: tuple = (20, 90)
    slc_cache: bool = False  # host data lands in SLC mode first, then is folded
    slc_us: tuple = (150, 260)
    host_paced: float = 0.0  # share of programs in host-paced cache chains (only tCBSY shows)
    suspend: float = 0.0  # share of erases split into pieces with reads between
    spread: float = 0.05  # per-die process spread (relative sd)
    tail: float = 0.08  # log-normal sigma of every width around its draw
    parallel: bool = True  # wired-OR LUNs work at the same time
    loads: bool = True  # one-shot data loads (1Ah) show a short busy (some parts show none)
    retry: float = 0.0  # share of reads retried: set features (~1 µs), then tR again
    program_suspend: float = 0.0  # share of programs suspended for 1-3 reads
    transfer_us: float = 0.0  # one page on the bus (data in before a program, out after a read)
    starts: bool = False  # keep each pulse's start in the measurement (a recording's order)

    @property
    def bits(self):
        return CELL_BITS[self.cell]


def _draw(rng, rng_us, n=None, scale=1.0, tail=0.0):
    lo, hi = rng_us
    x = rng.uniform(lo, hi, n) * scale
    if tail:
        x = x * np.exp(rng.normal(0.0, tail, n))
    return x


#: Busies whose command carries a page of data in (a queued plane's tDBSY too).
_DATA_IN = ("program", "program_slc", "cache_program", "dbsy", "load")


def _page_order(levels, ppb):
    lines = ppb // levels
    return [s for _, s, _ in sorted((w + s, s, -w) for w in range(lines) for s in range(levels))]


def _lun_ops(spec, rng):
    """One LUN's operations: ``[(width_us, kind, pages)]`` with ``gap_us`` before each."""
    scale = max(0.7, 1.0 + rng.normal(0.0, spec.spread))
    tail = spec.tail
    mp = spec.planes if spec.multi_plane else 1
    prog = spec.program or _PROGRAM[spec.cell]
    ops = []  # (gap_us, width_us, kind, pages)
    host_pages = 0.0
    total_pages = 0.0

    data_out = [0.0]  # the last read's data, still to leave over the bus

    def busy(kind, rng_us, pages=0.0, gap=None):
        # The idle gap: the command's own time, the data out of a read before it, and the
        # data in of a program (each plane's, before its tDBSY or the program's busy).
        gap = rng.uniform(1, 20) if gap is None else gap
        gap += data_out[0] + (spec.transfer_us if kind in _DATA_IN else 0.0)
        data_out[0] = spec.transfer_us if kind == "read" else 0.0
        ops.append((gap, float(_draw(rng, rng_us, scale=scale, tail=tail)), kind, pages))

    def piece(gap, width, kind, pages):
        # A suspended operation's piece: its data (if any) came before the first piece.
        gap += data_out[0]
        data_out[0] = 0.0
        ops.append((gap, width, kind, pages))

    def dbsy(n):
        for _ in range(n):
            busy("dbsy", (0.5, 1.0))

    def read(n=1):
        for _ in range(n):
            busy("read", spec.read_us)
            if rng.random() < spec.retry:
                busy("set_features", (0.7, 1.5))
                busy("read", spec.read_us)

    def program(rng_us, pages):
        if rng.random() < spec.program_suspend:
            total = float(_draw(rng, rng_us, scale=scale, tail=tail))
            cut = rng.uniform(0.2, 0.8) * total
            piece(rng.uniform(1, 5) + spec.transfer_us, cut, "program_piece", pages)
            read(int(rng.integers(1, 4)))
            piece(rng.uniform(1, 5), total - cut, "program_piece", 0.0)
        else:
            busy("program", rng_us, pages)

    def erase():
        dbsy(mp - 1)
        if rng.random() < spec.suspend:
            total = float(_draw(rng, spec.erase_us, scale=scale, tail=tail))
            k = int(rng.integers(2, 4))
            cuts = np.sort(rng.uniform(0.2, 0.8, k - 1)) * total
            pieces = np.diff(np.concatenate([[0.0], cuts, [total]]))
            for i, p in enumerate(pieces):
                piece(rng.uniform(1, 5), float(p), "erase_piece", 0.0)
                if i < len(pieces) - 1:
                    read(int(rng.integers(1, 4)))
        else:
            busy("erase", spec.erase_us)

    # Word-line program units of a block, in program order: (kind, page type, pages per plane).
    if spec.scheme == "one-shot":
        units = [("oneshot", None, spec.bits)] * (spec.ppb // spec.bits)
    elif spec.scheme == "two-pass":
        units = [("pass", p, spec.bits / 2) for _ in range(spec.ppb // spec.bits)
                 for p in (0, 1)]
    else:
        units = [("page", t, 1) for t in _page_order(spec.bits, spec.ppb)]
    chain = 0
    for _b in range(spec.blocks):
        erase()
        for kind, ptype, per_plane in units:
            gc = rng.random() < spec.gc_share
            if gc:
                read(max(1, round(per_plane)))
            elif rng.random() < spec.reads:
                read()
            if spec.slc_cache and not gc:
                # Host data first lands in SLC mode (one page per plane per program) ...
                for _ in range(math.ceil(per_plane)):
                    dbsy(mp - 1)
                    busy("program_slc", spec.slc_us, mp)
                    total_pages += mp
                host_pages += per_plane * mp
                read(math.ceil(per_plane))  # ... and is folded into the main block later
            elif not gc:
                host_pages += per_plane * mp
            if kind == "oneshot":
                for p in range(mp):
                    for _ in range(spec.bits - 1 if spec.loads else 0):
                        busy("load", (1.0, 5.0))
                    if p < mp - 1:
                        dbsy(1)
                busy("program", spec.oneshot_us, per_plane * mp)
            elif kind == "pass":
                dbsy(mp - 1)
                rng_us = (prog[-1][0] * 0.6, prog[-1][1] * 0.7) if ptype == 0 else prog[-1]
                busy("program", rng_us, per_plane * mp)
            else:
                dbsy(mp - 1)
                if chain or rng.random() < spec.host_paced:
                    # A host-paced cache chain: only tCBSY shows for its pages but the last.
                    chain = chain + 1 if chain else 1
                    if chain < 4:
                        busy("cache_program", (8.0, 30.0), per_plane * mp)
                    else:
                        busy("program", prog[ptype], per_plane * mp)
                        chain = 0
                else:
                    program(prog[ptype], per_plane * mp)
            total_pages += per_plane * mp
    return ops, total_pages, host_pages


def _timeline(ops, rng, t0=0.0):
    starts, widths, kinds = [], [], []
    t = t0 + rng.uniform(0, 50)
    for gap, w, kind, _pages in ops:
        t += gap
        starts.append(t)
        widths.append(w)
        kinds.append(kind)
        t += w
    return np.array(starts), np.array(widths), kinds


def _union(timelines):
    """Merge the busy intervals of several LUNs (the wired-OR line): widths of the union."""
    s = np.concatenate([t[0] for t in timelines])
    e = np.concatenate([t[0] + t[1] for t in timelines])
    order = np.argsort(s)
    s, e = s[order], e[order]
    out_s, out_e = [], []
    cs, ce = s[0], e[0]
    for a, b in zip(s[1:], e[1:], strict=True):
        if a <= ce:
            ce = max(ce, b)
        else:
            out_s.append(cs)
            out_e.append(ce)
            cs, ce = a, b
    out_s.append(cs)
    out_e.append(ce)
    return np.array(out_e) - np.array(out_s)


@dataclass
class Drive:
    """A generated drive: its measurement, truth and the specification."""

    spec: Spec
    measurement: Measurement
    pages: float  # pages programmed (every die)
    host_pages: float
    page_size: int = 4096

    @property
    def wa_true(self):
        return self.pages / self.host_pages

    @property
    def logical(self):
        return from_bytes(round(self.host_pages * self.page_size))


def generate(spec, seed):
    """Generate ``spec``'s pulse trains with ``seed``: a :class:`Drive`."""
    rng = np.random.default_rng(seed)
    lines = spec.dies // spec.luns_per_line
    widths, starts = {}, {}
    pages = host = 0.0
    for line in range(lines):
        tls = []
        for _lun in range(spec.luns_per_line):
            ops, p, h = _lun_ops(spec, rng)
            pages += p
            host += h
            tls.append(_timeline(ops, rng))
        if spec.luns_per_line == 1:
            widths[line] = tls[0][1]
            starts[line] = tls[0][0]
        elif spec.parallel:
            widths[line] = _union(tls)
        else:
            # LUNs taking turns: the second starts after the first is done.
            end = tls[0][0][-1] + tls[0][1][-1] + 100.0
            second = [(s + end, w, k) for s, w, k in tls[1:]]
            widths[line] = _union([tls[0], *second])
    if not spec.starts or spec.luns_per_line != 1:
        starts = None
    return Drive(spec, _measurement(spec, widths, starts), pages, host)


def _measurement(spec, widths_us, starts_us=None):
    preset = DEFAULT_PRESET
    params = SnifferParams(channels=len(widths_us))
    windows = tuple((round(lo * 1e-6 / TICK), round(min(hi * 1e-6 / TICK, params.max_width)))
                    for _, lo, hi in preset.windows)
    config = SnifferConfig(prescaler=1, glitch_ticks=20, windows=windows,
                           idle_ticks=10 ** 8)
    counts, pulses, st = [], {}, {}
    locs = []
    for line, w_us in widths_us.items():
        w = np.maximum(1, np.round(np.asarray(w_us) * 1e-6 / TICK)).astype(np.int64)
        c = ChannelCounts.zeros(params)
        c.overlong = int((w > params.max_width).sum())
        kept = w <= params.max_width
        w = w[kept]
        if starts_us is not None:
            st[line] = np.round(np.asarray(starts_us[line]) * 1e-6 / TICK).astype(np.int64)[
                kept].tolist()
        for k, (lo, hi) in enumerate(windows):
            c.classes[k] = int(((w >= lo) & (w < hi)).sum())
        inside = np.zeros(len(w), dtype=bool)
        for lo, hi in windows:
            inside |= (w >= lo) & (w < hi)
        c.unclassified = int((~inside).sum())
        c.busy_ticks = int(w.sum())
        for b, n in zip(*np.unique([params.hist_bin(int(x)) for x in w], return_counts=True),
                        strict=True):
            c.histogram[int(b)] += int(n)
        counts.append(c)
        pulses[line] = w.tolist()
        locs.append(tuple((line, 0, lun) for lun in range(spec.luns_per_line)))
    probes = [Probe(f"rb{i}", dies) for i, dies in enumerate(locs)]
    duration = int(sum(sum(p) for p in pulses.values()) * 2)
    return Measurement(params, config, TICK, counts, tuple(n for n, _, _ in preset.windows),
                       probes=probes, duration_ticks=duration, quiet_ticks=10 ** 9,
                       pulses=pulses, pulse_starts=st,
                       provenance={"source": "simulation", "path": spec.name})


def geometry_for(drive, level="L0", *, tell=("cell", "scheme", "ppb"), tprog_max=None):
    """The geometry a user gives for ``drive`` at a knowledge level.

    ``L0``: the array (channels, dies, planes, page size, program model) and what ``tell``
    names (``cell``, ``scheme``, ``ppb``); ``L1``: plus datasheet maxima (above every drawn
    width: the largest range's top × 1.3, rounded up to 100 µs).
    """
    s = drive.spec
    timing = {}
    if level != "L0":
        def mx(x):
            return float(math.ceil(x * 1.3 / 100.0) * 100)
        top = max(r[1] for r in (s.program or _PROGRAM[s.cell]))
        if s.scheme == "one-shot":
            top = max(top, s.oneshot_us[1])
        timing = {k: (v, v) for k, v in (("program", tprog_max or mx(top)),
                                         ("erase", mx(s.erase_us[1])),
                                         ("read", mx(s.read_us[1])))}
    return Geometry(
        name=s.name, channels=s.dies // s.luns_per_line, chips_per_channel=1,
        dies_per_chip=s.luns_per_line, planes_per_die=s.planes, page_size=drive.page_size,
        program_model="multi-plane" if s.multi_plane else "single-plane",
        pages_per_block=s.ppb if "ppb" in tell else None, timing=timing,
        cell=s.cell if "cell" in tell else None,
        program_scheme=s.scheme if "scheme" in tell else None)


#: Named families of the issue (fixed shapes; a seed draws the pulses).
FAMILIES = {
    "mlc-easy": Spec("mlc-easy", erase_us=(2500, 3500)),
    "mlc-overlap": Spec("mlc-overlap", erase_us=(1900, 2300)),
    "tlc-gc-overlap": Spec("tlc-gc-overlap", cell="tlc", ppb=192, gc_share=0.7,
                           erase_us=(3000, 5000)),
    "tlc-oneshot-4p": Spec("tlc-oneshot-4p", cell="tlc", scheme="one-shot", planes=4,
                           multi_plane=True, ppb=384, blocks=12, gc_share=0.3),
    "qlc-twopass": Spec("qlc-twopass", cell="qlc", scheme="two-pass", ppb=256, blocks=20),
    "slc-seq": Spec("slc-seq", cell="slc", ppb=64, gc_share=0.0, reads=0.0,
                    erase_us=(1500, 2500)),
    "tlc-slc-cache": Spec("tlc-slc-cache", cell="tlc", ppb=192, blocks=15, slc_cache=True),
    "mlc-suspend": Spec("mlc-suspend", suspend=1 / 3, erase_us=(3000, 5000)),
    "mlc-2plane": Spec("mlc-2plane", multi_plane=True, erase_us=(3500, 4100)),
    "mlc-6plane": Spec("mlc-6plane", planes=6, multi_plane=True, blocks=20,
                       erase_us=(3000, 4500)),
    "wired-or-2lun": Spec("wired-or-2lun", luns_per_line=2, dies=4, blocks=30),
    "mlc-hostpaced-50r": Spec("mlc-hostpaced-50r", host_paced=0.5, reads=0.5,
                              read_us=(20, 60)),
    "mlc-retry-suspend": Spec("mlc-retry-suspend", retry=0.3, program_suspend=0.2, reads=0.5,
                              erase_us=(2500, 3500)),
}


def family(name, **changes):
    """The named family's :class:`Spec`, with optional changes."""
    return replace(FAMILIES[name], **changes)

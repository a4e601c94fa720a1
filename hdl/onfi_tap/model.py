"""Bit-exact reference model of the ONFI bus tap (:class:`rbscope.gateware.onfi_tap.OnfiTap`).

The model consumes what the gateware sees, in cycle order:

* bus *strobes* (command, address, data-in cycles) with the CE# selection and the byte, on the
  cycle the tap's front end emits them — :class:`BusDecoder` derives them from pin changes with
  the front end's exact rule (WE# rising at pin cycle ``c``: the strobe is on cycle
  ``c + STROBE_LATENCY``, CLE/ALE/CE#/DQ are those of pin cycle ``c - 1``);
* changes of each die's synchronised R/B# level (``lvl``, as
:mod:`rbscope.gateware.rb_sniffer.model` defines it);
* the sniffer's END records of each die (their widths in ticks).

and keeps the gateware's state and counters: tags, LUN tracking, multi-plane queues, confirm
counts per die and class, final confirms per plane count, measured pulses per die and class and
the width histogram per class. Same-cycle order: R/B# changes first (they capture the tag as it
was before the cycle), then strobes. See ``docs/opcode_tap.md``.
"""

import bisect
from array import array
from dataclasses import dataclass, field

import numpy as np

from rbscope.gateware.onfi_tap.params import (
    CLASS_SLOTS,
    CONFIRM_CLASS,
    MAX_PLANES,
    TARGET_CLASSES,
    OpClass,
    PlaneKind,
    TapConfig,
    TapParams,
    TapSpace,
)
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, hist_bin_array
from rbscope.gateware.rb_sniffer.params import hist_bin
from rbscope.nand.onfi import Opcode

#: Cycles from a WE# rising edge on the pins to the front end's strobe: the synchroniser's, plus
#: one because the front end registers its strobes (:class:`~rbscope.gateware.nand_emu.bus.
#: BusFrontEnd`).
STROBE_LATENCY = SYNC_LATENCY + 1

__all__ = ["Strobe", "BusDecoder", "TapCounts", "TapModel", "CMD", "ADDR", "DIN", "PIN_WE",
           "PIN_CLE", "PIN_ALE", "PIN_IO", "PIN_CE"]

#: Strobe kinds.
CMD, ADDR, DIN = "cmd", "addr", "din"

#: Bit positions of the bus pins in :class:`BusDecoder`'s pin word.
PIN_WE, PIN_CLE, PIN_ALE, PIN_IO, PIN_CE = 0, 1, 2, 3, 11


@dataclass(frozen=True, slots=True)
class Strobe:
    """One decoded bus cycle: ``kind`` on ``cycle`` to the targets in ``sel`` (bit mask)."""

    cycle: int
    kind: str
    sel: int
    byte: int


def strobe_of(cycle, word, targets):
    """Return the strobe of a WE# rising edge at pin cycle ``cycle``, ``word`` the pins before it.

    ``word`` holds the pins of cycle ``cycle - 1`` (bit layout ``PIN_*``); ``None`` when CLE and
    ALE are both high (no bus cycle).
    """
    cle, ale = word >> PIN_CLE & 1, word >> PIN_ALE & 1
    if cle and ale:
        return None
    kind = CMD if cle else ADDR if ale else DIN
    sel = ~(word >> PIN_CE) & ((1 << targets) - 1)
    return Strobe(cycle + STROBE_LATENCY, kind, sel, word >> PIN_IO & 0xFF)


class BusDecoder:
    """Turn pin changes into strobes, as the tap's (and the emulator's) bus front end does.

    Parameters
    ----------
    targets : int
        CE# pins.
    initial : int
        Pin word before cycle 0 (default: idle bus, WE# and every CE# high).

    Feed :meth:`change` in non-decreasing cycle order (several pins may change on one cycle).
    """

    def __init__(self, targets, initial=None):
        self.targets = targets
        idle = 1 << PIN_WE | ((1 << targets) - 1) << PIN_CE
        self.word = idle if initial is None else initial  # pins as of the last applied cycle
        self._cycle = 0
        self._next = None  # the word being assembled for self._cycle

    def _commit(self):
        out = None
        if self._next is not None:
            if self._next >> PIN_WE & 1 and not self.word >> PIN_WE & 1:
                out = strobe_of(self._cycle, self.word, self.targets)
            self.word = self._next
            self._next = None
        return out

    def change(self, cycle, pin, level):
        """Pin ``pin`` (bit position) is ``level`` from pin cycle ``cycle``; return the strobe
        completed by an earlier cycle, if any."""
        out = None
        if cycle != self._cycle:
            if cycle < self._cycle:
                raise ValueError(f"pin changes must come in cycle order: {cycle} after "
                                 f"{self._cycle}")
            out = self._commit()
            self._cycle = cycle
        base = self.word if self._next is None else self._next
        self._next = (base & ~(1 << pin)) | (level << pin)
        return out

    def advance(self, cycle):
        """Time has reached pin cycle ``cycle``: return the strobe of an earlier pending cycle."""
        if self._next is not None and cycle > self._cycle:
            return self._commit()
        return None

    def finish(self):
        """Return the strobe of the last cycle, if any."""
        return self._commit()


def strobes_at(cycles, words, targets, last=None):
    """Vectorised :func:`strobe_of`: the strobes of WE# rising edges at pin ``cycles``.

    Parameters
    ----------
    cycles : numpy.ndarray
        Pin cycles of the WE# rising edges, increasing.
    words : numpy.ndarray
        The pin word (``PIN_*`` layout) of the cycle before each edge.
    targets : int
    last : Strobe, optional
        The strobe before these (for the data-in filter).

    Returns
    -------
    list of Strobe
        The strobes that can change the tap's state: every command and address cycle, and a
        data-in cycle only when the strobe before it was not a data-in cycle to the same targets
        (a second one in a row changes nothing: its target's address run is already closed).
    """

    words = np.asarray(words, dtype=np.int64)
    cle = (words >> PIN_CLE) & 1
    ale = (words >> PIN_ALE) & 1
    valid = ~((cle == 1) & (ale == 1))
    cycles, words, cle, ale = cycles[valid], words[valid], cle[valid], ale[valid]
    sel = ~(words >> PIN_CE) & ((1 << targets) - 1)
    din = (cle == 0) & (ale == 0)
    prev_din = np.empty_like(din)
    prev_sel = np.empty_like(sel)
    if len(din):
        prev_din[0] = last is not None and last.kind == DIN
        prev_sel[0] = last.sel if last is not None else -1
        prev_din[1:], prev_sel[1:] = din[:-1], sel[:-1]
    keep = ~(din & prev_din & (sel == prev_sel))
    out = []
    for c, w, s, k, a in zip(cycles[keep].tolist(), words[keep].tolist(), sel[keep].tolist(),
                             cle[keep].tolist(), ale[keep].tolist(), strict=True):
        out.append(Strobe(c + STROBE_LATENCY, CMD if k else ADDR if a else DIN, s,
                          w >> PIN_IO & 0xFF))
    return out


@dataclass
class TapCounts:
    """The tap's counters (exact; :meth:`word` reduces them to the gateware's width).

    Members
    -------
    ops : list of list of int
        ``ops[die][class]``: confirm commands (target-wide ones on LUN 0 of the target).
    planes : list of list of int
        ``planes[die][kind * 4 + planes - 1]``: final confirms with that many planes.
    pulses : list of list of int
        ``pulses[die][class]``: measured (END) busy pulses.
    hist : list of list of int
        ``hist[class][bin]``: END widths per class (all dies), sniffer's log bins.
    """

    ops: list
    planes: list
    pulses: list
    hist: list

    @classmethod
    def zeros(cls, params):
        nd = params.dies
        return cls(ops=[[0] * CLASS_SLOTS for _ in range(nd)],
                   planes=[[0] * CLASS_SLOTS for _ in range(nd)],
                   pulses=[[0] * CLASS_SLOTS for _ in range(nd)],
                   hist=[[0] * params.sniffer.hist_bins for _ in range(CLASS_SLOTS)])

    @staticmethod
    def planes_slots():
        """The slots of a die's ``planes`` row that can count (``kind * 4 + planes - 1``)."""
        return [int(k) * MAX_PLANES + n for k in PlaneKind for n in range(MAX_PLANES)]

    def mp(self, die=None, kind=PlaneKind.PROGRAM):
        """Measured planes per final confirm of ``kind`` (all dies, or ``die``); None if none."""
        dies = range(len(self.planes)) if die is None else [die]
        ops = sum(self.operations(d, kind) for d in dies)
        return sum(self.pages(d, kind) for d in dies) / ops if ops else None

    def to_dict(self):
        """The per-die counters as JSON members (``ops``, ``planes``, ``pulses``)."""
        return {"ops": self.ops, "planes": self.planes, "pulses": self.pulses}

    @classmethod
    def between(cls, start, stop, bits=48):
        """The counts from ``start`` to ``stop`` (two :meth:`to_dict` of the same device; the
        counters wrap at ``bits``), as a :class:`TapCounts` without histogram."""
        mask = (1 << bits) - 1

        def diff(name):
            return [[(b - a) & mask for a, b in zip(ra, rb, strict=True)]
                    for ra, rb in zip(start[name], stop[name], strict=True)]
        return cls(ops=diff("ops"), planes=diff("planes"), pulses=diff("pulses"), hist=[])

    def summary(self):
        """What the tap says of the run, all dies together and per die (JSON members).

        ``program_ops`` counts final program confirms (10h and 15h), ``cache_programs`` the 15h
        among them, ``pages_programmed`` the pages they covered and ``mp`` pages ÷ final
        confirms (the measured Mp); erases likewise; ``reads`` page reads (30h), and per die
        the confirm commands and the pulses per opcode class.
        """
        dies = range(len(self.ops))
        prog = [PlaneKind.PROGRAM, PlaneKind.CACHE_PROGRAM]

        def total(fn, kinds):
            return sum(fn(d, k) for d in dies for k in kinds)
        finals = total(self.operations, prog)
        pages = total(self.pages, prog)
        erases = total(self.operations, [PlaneKind.ERASE])
        return {
            "program_ops": finals,
            "cache_programs": sum(r[OpClass.CACHE_PROGRAM] for r in self.ops),
            "pages_programmed": pages,
            "mp": pages / finals if finals else None,
            "erase_ops": erases,
            "blocks_erased": total(self.pages, [PlaneKind.ERASE]),
            "reads": sum(r[OpClass.READ] for r in self.ops),
            "dies": [{"ops": {c.name: self.ops[d][c] for c in OpClass if self.ops[d][c]},
                      "pulses": {c.name: self.pulses[d][c] for c in OpClass
                                 if self.pulses[d][c]}} for d in dies],
        }

    def word(self, params, space, index):
        """Return what the gateware reads at ``(space, index)``."""
        space = TapSpace(space)
        if space is TapSpace.HIST:
            op_class, b = index >> params.bin_bits, index & ((1 << params.bin_bits) - 1)
            row = self.hist[op_class]
            value = row[b] if b < len(row) else 0
            return value & ((1 << params.hist_bits) - 1)
        die, slot = divmod(index, CLASS_SLOTS)
        table = {TapSpace.OPS: self.ops, TapSpace.PLANES: self.planes,
                 TapSpace.PULSES: self.pulses}[space]
        value = table[die][slot] if die < params.dies else 0
        return value & ((1 << params.counter_bits) - 1)

    def pages(self, die, kind=PlaneKind.PROGRAM):
        """Pages (blocks for ``ERASE``) the final confirms of ``kind`` covered on ``die``."""
        row = self.planes[die]
        base = int(PlaneKind(kind)) * MAX_PLANES
        return sum((k + 1) * row[base + k] for k in range(MAX_PLANES))

    def operations(self, die, kind=PlaneKind.PROGRAM):
        """Final confirms of ``kind`` on ``die``."""
        base = int(PlaneKind(kind)) * MAX_PLANES
        return sum(self.planes[die][base:base + MAX_PLANES])


@dataclass
class _Target:
    arun: int = 0
    abuf: int = 0
    lun: int = 0


@dataclass
class TapModel:
    """Reference model of :class:`~rbscope.gateware.onfi_tap.OnfiTap`.

    Parameters
    ----------
    params : TapParams
    config : TapConfig
    """

    params: TapParams
    config: TapConfig = field(default_factory=TapConfig)

    def __post_init__(self):
        if not isinstance(self.params, TapParams):
            raise TypeError(f"params must be a TapParams, not {self.params!r}")
        if not isinstance(self.config, TapConfig):
            raise TypeError(f"config must be a TapConfig, not {self.config!r}")
        self.config = self.config.validate(self.params)
        p = self.params
        self.counts = TapCounts.zeros(p)
        self._targets = [_Target() for _ in range(p.targets)]
        nd = p.dies
        self.tag = [OpClass.NONE] * nd
        self.pulse_tag = [OpClass.NONE] * nd
        self.ended = [OpClass.NONE] * nd
        self._queued = [0] * nd
        self._equeued = [0] * nd
        self._lvl = [1] * nd

    # Bus ------------------------------------------------------------------------------------

    def _lun_now(self, t):
        tgt = self._targets[t]
        if self.params.luns > 1 and tgt.arun == 3:
            return (tgt.abuf >> self.config.lun_shift) & (self.params.luns - 1)
        return tgt.lun

    def strobe(self, strobe):
        """Apply one decoded bus cycle (:class:`Strobe`)."""
        p = self.params
        nl = p.luns
        kind, byte = strobe.kind, strobe.byte
        op_class = CONFIRM_CLASS.get(byte) if kind == CMD else None
        counted = False
        for t in range(p.targets):
            if not strobe.sel >> t & 1:
                continue
            tgt = self._targets[t]
            lun_now = self._lun_now(t)
            if kind == ADDR:
                tgt.arun = min(tgt.arun + 1, 3)
                tgt.abuf = (tgt.abuf >> 8) | byte << 16
                continue
            tgt.arun = 0
            tgt.lun = lun_now
            if kind == CMD and nl > 1 and byte in (Opcode.SELECT_LUN0, Opcode.SELECT_LUN1):
                tgt.lun = byte - Opcode.SELECT_LUN0
            if op_class is None:
                continue
            wide = op_class in TARGET_CLASSES
            count_die = p.die(t, 0 if wide else lun_now)
            queued, equeued = self._queued[count_die], self._equeued[count_die]
            for lun in range(nl):
                d = p.die(t, lun)
                if not (wide or lun == lun_now):
                    continue
                self.tag[d] = op_class
                if op_class is OpClass.MP_QUEUE:
                    self._queued[d] = min(self._queued[d] + 1, 3)
                elif op_class in (OpClass.PROGRAM, OpClass.CACHE_PROGRAM):
                    self._queued[d] = 0
                elif op_class is OpClass.ERASE_QUEUE:
                    self._equeued[d] = min(self._equeued[d] + 1, 3)
                elif op_class is OpClass.ERASE:
                    self._equeued[d] = 0
                elif op_class is OpClass.RESET:
                    self._queued[d] = self._equeued[d] = 0
            if counted:
                continue  # a command to several targets is counted on the lowest one
            counted = True
            self.counts.ops[count_die][op_class] += 1
            kinds = {OpClass.PROGRAM: (PlaneKind.PROGRAM, queued),
                     OpClass.CACHE_PROGRAM: (PlaneKind.CACHE_PROGRAM, queued),
                     OpClass.ERASE: (PlaneKind.ERASE, equeued)}
            if op_class in kinds:
                pk, q = kinds[op_class]
                self.counts.planes[count_die][p.planes_index(0, pk, q + 1)] += 1

    # R/B# and the sniffer's records --------------------------------------------------------

    def rb_change(self, die, level):
        """The synchronised R/B# of ``die`` is ``level`` from now on (apply before the strobes
        of the same cycle)."""
        if level == self._lvl[die]:
            return
        self._lvl[die] = level
        if level:
            self.ended[die] = self.pulse_tag[die]
        else:
            self.pulse_tag[die] = self.tag[die]

    def end_record(self, die, width):
        """Count a sniffer END record of ``die`` (its pulse has ended); return its class."""
        op_class = self.ended[die]
        self.counts.pulses[die][op_class] += 1
        b = hist_bin(width, self.params.sniffer.hist_sub_bits)
        self.counts.hist[op_class][b] += 1
        return op_class


# Importers: label the pulses a recording's R/B# lines show ----------------------------------


@dataclass(frozen=True)
class BusSignals:
    """Which recorded signals carry one channel's bus (names as the recording calls them).

    Parameters
    ----------
    ce : tuple of str
        CE# of each target, in target order.
    cle, ale, we : str
        CLE, ALE and WE#.
    dq : tuple of str
        DQ0 … DQ7, in bit order.
    """

    ce: tuple
    cle: str
    ale: str
    we: str
    dq: tuple

    def __post_init__(self):
        if not self.ce or not 1 <= len(self.ce) <= 8:
            raise ValueError(f"the bus needs 1 to 8 CE# signals, not {len(self.ce)}")
        if len(self.dq) != 8:
            raise ValueError(f"the bus needs 8 DQ signals (DQ0 … DQ7), not {len(self.dq)}")
        for name in ("cle", "ale", "we"):
            if not getattr(self, name):
                raise ValueError(f"the bus needs a {name.upper()} signal")

    def pins(self):
        """``(name, pin bit)`` of every bus signal, pin bits as :class:`BusDecoder` numbers them."""
        out = [(self.we, PIN_WE), (self.cle, PIN_CLE), (self.ale, PIN_ALE)]
        out += [(name, PIN_IO + i) for i, name in enumerate(self.dq)]
        out += [(name, PIN_CE + t) for t, name in enumerate(self.ce)]
        return out


class TapLabeller:
    """The tap model as an importer uses it: strobes in, R/B# pulses labelled in bulk.

    The importer hands over the bus strobes (:meth:`strobe`) before the R/B# changes of the same
    stretch of the recording; :meth:`label` then gives each measured pulse the class the tap had
    captured at its start (``pulse_tag``: the die's tag from the strobes before the pulse's first
    low ``lvl`` cycle) and counts it as the gateware counts its END record.

    Parameters
    ----------
    params : TapParams
    config : TapConfig
    max_pulses : int
        Keep at most this many labelled pulses (die, start, width, class) for the labelled-pulse
        file; the counts and histograms always cover every pulse.
    """

    def __init__(self, params, config=None, *, max_pulses=1_000_000):

        self._np = np
        self.model = TapModel(params, TapConfig() if config is None else config)
        self.params = params
        nd = params.dies
        self._log_cycles = [[-1] for _ in range(nd)]  # tag changes: strobe cycle, new tag
        self._log_tags = [[int(OpClass.NONE)] for _ in range(nd)]
        self.max_pulses = max_pulses

        # Compact columns (8 bytes per value): a million kept pulses take 40 MB, not 200.
        self.kept = {k: array("q") for k in ("die", "start", "end", "width", "class")}
        self.pulses_truncated = False
        self.strobes = 0

    @property
    def counts(self):
        """The tap's counters (:class:`TapCounts`)."""
        return self.model.counts

    def strobe(self, strobe):
        """Apply one bus strobe (in cycle order)."""
        model = self.model
        before = list(model.tag)
        model.strobe(strobe)
        self.strobes += 1
        for d, (old, new) in enumerate(zip(before, model.tag, strict=True)):
            if old != new or strobe.kind == CMD and strobe.byte in CONFIRM_CLASS:
                if self._log_cycles[d][-1] == strobe.cycle:
                    self._log_tags[d][-1] = int(new)
                elif self._log_tags[d][-1] != int(new):
                    self._log_cycles[d].append(strobe.cycle)
                    self._log_tags[d].append(int(new))

    def label(self, die, starts, ends, widths):
        """Label and count measured pulses of ``die`` (numpy arrays: first low ``lvl`` cycle,
        end cycle, width in ticks); return their classes."""
        np = self._np
        cycles = np.asarray(self._log_cycles[die], dtype=np.int64)
        tags = np.asarray(self._log_tags[die], dtype=np.int64)
        # The tag a pulse starting on cycle s captured: the last change on a cycle before s.
        classes = tags[np.searchsorted(cycles, starts, side="left") - 1]
        counts = self.model.counts
        for c, n in enumerate(np.bincount(classes, minlength=CLASS_SLOTS).tolist()):
            counts.pulses[die][c] += n
        sub = self.params.sniffer.hist_sub_bits
        bins = hist_bin_array(widths, sub)
        flat = np.bincount(classes * self.params.sniffer.hist_bins + bins,
                           minlength=CLASS_SLOTS * self.params.sniffer.hist_bins)
        for k in np.flatnonzero(flat).tolist():
            c, b = divmod(k, self.params.sniffer.hist_bins)
            counts.hist[c][b] += int(flat[k])
        room = self.max_pulses - len(self.kept["die"])
        if len(widths) > room:
            self.pulses_truncated = True
        if room > 0:
            n = min(room, len(widths))
            self.kept["die"].extend([die] * n)
            self.kept["start"].frombytes(starts[:n].astype(np.int64).tobytes())
            self.kept["end"].frombytes(ends[:n].astype(np.int64).tobytes())
            self.kept["width"].frombytes(widths[:n].astype(np.int64).tobytes())
            self.kept["class"].frombytes(classes[:n].astype(np.int64).tobytes())
        # Tag changes before the earliest start still to come are no longer needed.
        self._trim(die, int(ends[-1]) if len(ends) else None)
        return classes

    def _trim(self, die, before):
        if before is None:
            return
        cycles, tags = self._log_cycles[die], self._log_tags[die]
        if len(cycles) > 1024:
            k = bisect.bisect_left(cycles, before) - 1
            if k > 0:
                del cycles[:k], tags[:k]

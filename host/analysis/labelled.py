"""Labelled busy pulses: the opcode tap's output, the R/B#-only classifier's training data.

A labelled-pulse file records, for one tapped channel, every measured busy pulse of each die with
the class of the command that started it (:class:`~rbscope.gateware.onfi_tap.OpClass`), the
tap's operation counts (confirm commands per class, final confirms per plane count) and the
width histograms per class. It is what ``rbscope label`` writes and what a classifier trained on
a drive's real timing reads (``docs/opcode_tap.md``, "Workflow").

File format (JSON, ``format: "rbscope.analysis.labelled-pulses"``, ``version: 1``)
-------------------------------------------------------------------------
* ``tick_seconds``: the tick period; every width and cycle below is in ticks or clock cycles
  (``clock_seconds``).
* ``classes``: the class names by number (``NONE``, ``PROGRAM``, ``CACHE_PROGRAM`` …).
* ``dies``: per die ``{"name": …}`` (the R/B# signal).
* ``ops``: per die, per class name, confirm commands counted (target-wide commands on LUN 0).
* ``planes``: per die, per kind (``PROGRAM``, ``CACHE_PROGRAM``, ``ERASE``), the number of final
  confirms with 1, 2, 3 and 4 planes (so ``Mp`` is measured: pages = Σ k × count).
* ``histograms``: per class name, ``{bin: count}`` of the sniffer's log bins
  (``hist_sub_bits``), all dies together.
* ``pulses``: columns ``die``, ``start`` (first low cycle of the synchronised line), ``width``
  (ticks) and ``class`` (number), one entry per measured pulse in the order measured (per die
  in time order); ``pulses_truncated`` says the source kept only the first ``len`` of them.
"""

import json
from dataclasses import dataclass, field

import numpy as np

from rbscope.files import atomic_output
from rbscope.gateware.onfi_tap.model import ADDR, CMD, Strobe, TapLabeller
from rbscope.gateware.onfi_tap.params import MAX_PLANES, OpClass, PlaneKind, TapConfig, TapParams
from rbscope.gateware.rb_sniffer.params import SnifferParams, hist_bin_lo
from rbscope.nand.onfi import address_bytes

__all__ = ["FORMAT", "LabelledPulses", "LabelledError", "from_refssd", "measured_mp", "MP_KINDS"]

FORMAT = "rbscope.analysis.labelled-pulses"
VERSION = 1


#: Tick periods (seconds) a labelled file may have: 0.1 ns (a 10 GHz clock) to 10 ms.
TICK_RANGE = (1e-10, 1e-2)
#: Histogram mantissa bits (the sniffer builds 3 … 5).
SUB_BITS = (1, 8)
#: Octaves of a histogram (a bin's index is below ``MAX_OCTAVES << hist_sub_bits``).
MAX_OCTAVES = 48
#: Largest width or start time (ticks) and largest count.
MAX_TICKS = (1 << 62) - 1
MAX_COUNT = 1 << 53
#: Most dies of a tapped channel (8 targets of 4 LUNs, with room).
MAX_DIES = 64

#: The final confirms whose planes make the measured Mp: 10h and 15h (a cache program's pages
#: are pages programmed), as the tap's own summary counts them
#: (:meth:`rbscope.gateware.onfi_tap.model.TapCounts.summary`; ``docs/opcode_tap.md``).
MP_KINDS = (PlaneKind.PROGRAM, PlaneKind.CACHE_PROGRAM)


def measured_mp(pages, finals):
    """The one definition of the measured Mp: pages ÷ final program confirms (10h and 15h,
    :data:`MP_KINDS`), or None when there is none."""
    return pages / finals if finals else None


class LabelledError(ValueError):
    """A labelled-pulse file is malformed; the message names the member."""


@dataclass
class LabelledPulses:
    """Labelled busy pulses of one channel's dies (see the module documentation).

    Members
    -------
    tick_seconds, clock_seconds : float
    hist_sub_bits : int
    dies : list of str
        R/B# signal of each die.
    ops : list of dict
        ``ops[die][class_name]``.
    planes : list of dict
        ``planes[die][kind_name]`` = counts for 1 … 4 planes.
    histograms : dict
        ``histograms[class_name][bin] = count``.
    die, start, width, op_class : numpy.ndarray
        The pulses, column by column.
    pulses_truncated : bool
    """

    tick_seconds: float
    clock_seconds: float
    hist_sub_bits: int
    dies: list
    ops: list
    planes: list
    histograms: dict
    die: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    width: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    op_class: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pulses_truncated: bool = False

    @classmethod
    def from_labeller(cls, labeller, *, tick_seconds, clock_seconds, names):
        """Build from a :class:`~rbscope.gateware.onfi_tap.model.TapLabeller` after an import."""
        counts = labeller.counts
        p = labeller.params
        kept = labeller.kept
        return cls(
            tick_seconds=tick_seconds, clock_seconds=clock_seconds,
            hist_sub_bits=p.sniffer.hist_sub_bits, dies=list(names),
            ops=[{c.name: int(row[c]) for c in OpClass if row[c]} for row in counts.ops],
            planes=[{k.name: [int(x) for x in row[k * MAX_PLANES:(k + 1) * MAX_PLANES]]
                     for k in PlaneKind} for row in counts.planes],
            histograms={OpClass(c).name: {b: int(n) for b, n in enumerate(row) if n}
                        for c, row in enumerate(counts.hist) if c < len(OpClass) and any(row)},
            die=np.frombuffer(kept["die"], np.int64).copy(),
            start=np.frombuffer(kept["start"], np.int64).copy(),
            width=np.frombuffer(kept["width"], np.int64).copy(),
            op_class=np.frombuffer(kept["class"], np.int64).copy(),
            pulses_truncated=labeller.pulses_truncated)

    # Queries -----------------------------------------------------------------------------------

    def widths(self, op_class, die=None):
        """Widths (ticks) of the kept pulses of ``op_class`` (an OpClass or its name)."""
        c = OpClass[op_class] if isinstance(op_class, str) else OpClass(op_class)
        sel = self.op_class == int(c)
        if die is not None:
            sel &= self.die == die
        return self.width[sel]

    def mp(self, die=None, kind=PlaneKind.PROGRAM):
        """Mean planes per final confirm of ``kind`` (the measured Mp), or None if none."""
        kind = PlaneKind(kind)
        rows = self.planes if die is None else [self.planes[die]]
        ops = sum(sum(r[kind.name]) for r in rows)
        pages = sum(sum((k + 1) * n for k, n in enumerate(r[kind.name])) for r in rows)
        return pages / ops if ops else None

    def program_mp(self, die=None):
        """The measured Mp: pages ÷ final program confirms, 10h and 15h together
        (:func:`~rbscope.gateware.onfi_tap.params.measured_mp`), or None if none."""
        return measured_mp(self.program_pages(die), self.program_finals(die))

    def program_pages(self, die=None):
        """Pages programmed: those of the final 10h and 15h confirms."""
        return sum(self.pages(die, k) for k in MP_KINDS)

    def program_finals(self, die=None):
        """Final program confirms (10h and 15h)."""
        rows = self.planes if die is None else [self.planes[die]]
        return sum(sum(r[k.name]) for r in rows for k in MP_KINDS)

    def pages(self, die=None, kind=PlaneKind.PROGRAM):
        """Pages (blocks for ERASE) covered by the final confirms of ``kind``."""
        kind = PlaneKind(kind)
        rows = self.planes if die is None else [self.planes[die]]
        return sum(sum((k + 1) * n for k, n in enumerate(r[kind.name])) for r in rows)

    def histogram_edges(self, op_class):
        """``(lo_ticks, count)`` pairs of the class's histogram, by bin."""
        c = OpClass[op_class] if isinstance(op_class, str) else OpClass(op_class)
        h = self.histograms.get(c.name, {})
        return [(hist_bin_lo(b, self.hist_sub_bits), n) for b, n in sorted(h.items())]

    # Files ------------------------------------------------------------------------------------

    def to_dict(self):
        return {
            "format": FORMAT, "version": VERSION,
            "tick_seconds": self.tick_seconds, "clock_seconds": self.clock_seconds,
            "hist_sub_bits": self.hist_sub_bits,
            "classes": [c.name for c in OpClass],
            "dies": [{"name": n} for n in self.dies],
            "ops": self.ops, "planes": self.planes,
            "histograms": {c: {str(b): n for b, n in h.items()}
                           for c, h in self.histograms.items()},
            "pulses": {"die": self.die.tolist(), "start": self.start.tolist(),
                       "width": self.width.tolist(), "class": self.op_class.tolist()},
            "pulses_truncated": self.pulses_truncated,
        }

    def save(self, path, *, inputs=(), force=False):
        """Write the file (JSON), atomically; ``inputs`` and ``force`` as for
        :func:`rbscope.files.check_output` (raises :class:`~rbscope.files.OutputError`)."""
        with atomic_output(path, kind="json", inputs=inputs, force=force) as f:
            json.dump(self.to_dict(), f)
            f.write("\n")

    @classmethod
    def from_dict(cls, obj):
        """Read a parsed file; :class:`LabelledError` names the member that is wrong.

        Every member's type and range is checked here, so that nothing the file says can
        make training allocate or compute more than the file's own size warrants.
        """
        if not isinstance(obj, dict):
            raise LabelledError("the file must hold a JSON object")

        def get(key):
            if key not in obj:
                raise LabelledError(f"missing member {key!r}")
            return obj[key]

        if get("format") != FORMAT:
            raise LabelledError(f"format is {_short(obj['format'])}, not {FORMAT!r}")
        if get("version") != VERSION:
            raise LabelledError(f"version {_short(obj['version'])} is not {VERSION}")
        if get("classes") != [c.name for c in OpClass]:
            raise LabelledError("classes differ from this version's OpClass names")
        dies = get("dies")
        if not isinstance(dies, list) or not all(isinstance(d, dict) and isinstance(
                d.get("name"), str) for d in dies):
            raise LabelledError("dies must be a list of {\"name\": string} objects")
        pulses = get("pulses")
        if not isinstance(pulses, dict):
            raise LabelledError("pulses must be an object of columns")
        cols = {}
        for key in ("die", "start", "width", "class"):
            if key not in pulses:
                raise LabelledError(f"pulses: missing member {key!r}")
            col = pulses[key]
            if not isinstance(col, list) or not all(
                    type(x) is int and 0 <= x <= MAX_TICKS for x in col):
                raise LabelledError(f"pulses.{key} must be a list of integers from 0 to "
                                    f"{MAX_TICKS}")
            cols[key] = np.array(col, dtype=np.int64)
        histograms = get("histograms")
        if not isinstance(histograms, dict) or not all(
                isinstance(h, dict) for h in histograms.values()):
            raise LabelledError("histograms must be an object of {bin: count} objects")
        hist = {}
        for c, h in histograms.items():
            bins = {}
            for b, n in h.items():
                if not (isinstance(b, str) and b.isascii() and b.isdigit() and len(b) <= 6):
                    raise LabelledError(f"histograms.{_field(c)}: bin {_short(b)} is not a "
                                        f"bin number")
                bins[int(b)] = n
            hist[c] = bins
        truncated = obj.get("pulses_truncated", False)
        if not isinstance(truncated, bool):
            raise LabelledError("pulses_truncated must be true or false")
        return cls(
            tick_seconds=get("tick_seconds"), clock_seconds=get("clock_seconds"),
            hist_sub_bits=get("hist_sub_bits"), dies=[d["name"] for d in dies],
            ops=get("ops"), planes=get("planes"), histograms=hist, die=cols["die"],
            start=cols["start"], width=cols["width"], op_class=cols["class"],
            pulses_truncated=truncated)

    def __post_init__(self):
        self.check()

    def check(self):
        """Check every member's type and range (on construction, so also before a save);
        raise :class:`LabelledError` naming the member."""
        for key in ("tick_seconds", "clock_seconds"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    TICK_RANGE[0] <= v <= TICK_RANGE[1]):
                raise LabelledError(f"{key} must be a number of seconds from {TICK_RANGE[0]:g} "
                                    f"to {TICK_RANGE[1]:g}, not {_short(v)}")
        sb = self.hist_sub_bits
        if type(sb) is not int or not SUB_BITS[0] <= sb <= SUB_BITS[1]:
            raise LabelledError(f"hist_sub_bits must be an integer from {SUB_BITS[0]} to "
                                f"{SUB_BITS[1]}, not {_short(sb)}")
        n = len(self.dies) if isinstance(self.dies, list) else -1
        if not 1 <= n <= MAX_DIES or not all(isinstance(d, str) for d in self.dies):
            raise LabelledError(f"dies must name 1 to {MAX_DIES} dies")
        if not isinstance(self.ops, list) or len(self.ops) != n:
            raise LabelledError(f"ops must be a list of one object per die ({n})")
        names = {c.name for c in OpClass}
        for d, row in enumerate(self.ops):
            if not isinstance(row, dict) or not all(
                    k in names and _count(v) for k, v in row.items()):
                raise LabelledError(f"ops[{d}] must map operation classes to counts from 0 to "
                                    f"{MAX_COUNT}")
        if not isinstance(self.planes, list) or len(self.planes) != n:
            raise LabelledError(f"planes must be a list of one object per die ({n})")
        kinds = {k.name for k in PlaneKind}
        for d, row in enumerate(self.planes):
            if not isinstance(row, dict) or not set(row) <= kinds or not all(
                    isinstance(v, list) and len(v) == MAX_PLANES and all(map(_count, v))
                    for v in row.values()):
                raise LabelledError(f"planes[{d}] must map {', '.join(sorted(kinds))} to "
                                    f"{MAX_PLANES} counts from 0 to {MAX_COUNT}")
            for k in kinds - set(row):
                row[k] = [0] * MAX_PLANES
        if not isinstance(self.histograms, dict):
            raise LabelledError("histograms must map operation classes to histograms")
        top = MAX_OCTAVES << sb
        for c, h in self.histograms.items():
            if c not in names or not isinstance(h, dict):
                raise LabelledError(f"histograms: {_short(c)} is not an operation class")
            for b, v in h.items():
                if type(b) is not int or not 0 <= b < top or not _count(v):
                    raise LabelledError(f"histograms.{c}: bins must be from 0 to {top - 1} and "
                                        f"counts from 0 to {MAX_COUNT}, not {_short(b)}: "
                                        f"{_short(v)}")
        cols = {"die": self.die, "start": self.start, "width": self.width,
                "class": self.op_class}
        for key, col in cols.items():
            if not isinstance(col, np.ndarray) or col.ndim != 1 or col.dtype.kind not in "iu":
                raise LabelledError(f"pulses.{key} must be a one-dimensional integer array")
        if len({len(v) for v in cols.values()}) > 1:
            raise LabelledError("pulses columns have different lengths")
        if len(self.die) and (self.die.min() < 0 or self.die.max() >= n):
            raise LabelledError(f"pulses.die must be from 0 to {n - 1} (the dies listed)")
        if len(self.width) and (self.width.min() < 0 or self.width.max() > MAX_TICKS):
            raise LabelledError(f"pulses.width must be from 0 to {MAX_TICKS} ticks")
        if len(self.op_class) and not np.isin(self.op_class, [int(c) for c in OpClass]).all():
            raise LabelledError("pulses.class holds a value that is not an operation class")
        if not isinstance(self.pulses_truncated, bool):
            raise LabelledError("pulses_truncated must be true or false")

    @classmethod
    def load(cls, path):
        """Read a labelled-pulse file; :class:`LabelledError` names what is wrong."""
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except OSError as exc:
            raise LabelledError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise LabelledError(f"{path}: not JSON: {exc}") from None
        except UnicodeDecodeError as exc:
            raise LabelledError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
        except (ValueError, RecursionError) as exc:  # 4 301-digit integers, deep nesting
            raise LabelledError(f"{path}: not JSON that can be read: {exc}"[:300]) from None
        try:
            return cls.from_dict(obj)
        except LabelledError as exc:
            raise LabelledError(f"{path}: {exc}") from None


def _count(v):
    return type(v) is int and 0 <= v <= MAX_COUNT


def _short(v, limit=60):
    r = repr(v)
    return r if len(r) <= limit else r[:limit - 1] + "…"


def _field(name):
    return name if isinstance(name, str) and name.isidentifier() else _short(name)


def from_refssd(run, channel=0, *, tick_seconds=1e-6, max_pulses=1_000_000):
    """What the opcode tap reports on one channel of a reference-SSD run (:mod:`rbscope.refssd`).

    The run's bus command stream (``run.commands``) is replayed as bus cycles — the first
    command, its address cycles (the LUN in the row address) and the confirm command at its time
    — through the tap's model (1 ns cycles), and each die's R/B# pulses (``run.pulses``) are
    labelled as the gateware labels them. The dies of the channel are those whose
    ``die_location`` is on it, in (chip, LUN) order; chips are the tap's targets.

    Parameters
    ----------
    run : rbscope.refssd.Run
    channel : int
        The tapped channel.
    tick_seconds : float
        Tick of the widths (a whole number of nanoseconds).

    Returns
    -------
    LabelledPulses
    """


    drive = run.drive
    if not 0 <= channel < drive.channels:
        raise ValueError(f"channel must be from 0 to {drive.channels - 1}, not {channel!r}")
    tick_ns = round(tick_seconds * 1e9)
    if tick_ns < 1 or abs(tick_ns - tick_seconds * 1e9) > 1e-6:
        raise ValueError(f"tick_seconds must be a whole number of ns, not {tick_seconds!r}")
    dies = sorted((d for d in range(drive.dies) if drive.die_location(d)[0] == channel),
                  key=lambda d: drive.die_location(d)[1:])
    chips = 1 + max(drive.die_location(d)[1] for d in dies)
    luns = drive.dies_per_chip
    if luns not in (1, 2, 4) or chips > 8:
        raise ValueError(f"the tap takes 1 to 8 targets of 1, 2 or 4 LUNs, not {chips} × {luns}")
    lun_shift = 22  # above any page and block bits the row carries here
    params = TapParams(targets=chips, luns=luns, sniffer=SnifferParams(channels=len(dies)))
    lab = TapLabeller(params, TapConfig(lun_shift=lun_shift if luns > 1 else 0),
                      max_pulses=max_pulses)
    local = {d: params.die(*drive.die_location(d)[1:]) for d in dies}
    cmds = run.commands[run.commands["channel"] == channel]
    for row in cmds:
        chip, lun = int(row["chip"]), int(row["lun"])
        sel = 1 << chip
        first, confirm = int(row["first"]), int(row["confirm"])
        t = int(row["time_ns"])
        if first != confirm:
            lab.strobe(Strobe(t, CMD, sel, first))
            if luns > 1:
                # The row address selects the LUN; with one LUN per target the tap's model
                # ignores address cycles (they only feed its LUN selection): not replayed.
                r = lun << lun_shift | (int(row["block"]) & 0x3FFF) << 8 | int(row["page"]) & 0xFF
                for k, byte in enumerate(address_bytes(first, r)):
                    lab.strobe(Strobe(t + 1 + k, ADDR, sel, byte))
        lab.strobe(Strobe(int(row["confirm_ns"]), CMD, sel, confirm))
    for d in dies:
        p = run.pulses[d]
        starts = p["start_ns"].astype(np.int64)
        widths = p["width_ns"].astype(np.int64)
        order = np.argsort(starts, kind="stable")
        lab.label(local[d], starts[order], starts[order] + widths[order],
                  widths[order] // tick_ns)
    names = [f"ch{channel}.chip{drive.die_location(d)[1]}.die{drive.die_location(d)[2]}"
             for d in dies]
    return LabelledPulses.from_labeller(lab, tick_seconds=tick_ns * 1e-9, clock_seconds=1e-9,
                                        names=names)

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

__all__ = ["FORMAT", "LabelledPulses", "LabelledError", "from_refssd"]

FORMAT = "rbscope.analysis.labelled-pulses"
VERSION = 1


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
            ops=[{c.name: row[c] for c in OpClass if row[c]} for row in counts.ops],
            planes=[{k.name: row[k * MAX_PLANES:(k + 1) * MAX_PLANES] for k in PlaneKind}
                    for row in counts.planes],
            histograms={OpClass(c).name: {b: n for b, n in enumerate(row) if n}
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
        """Read a parsed file; :class:`LabelledError` names what is wrong."""
        def get(o, key, where):
            if not isinstance(o, dict) or key not in o:
                raise LabelledError(f"{where}: missing member {key!r}")
            return o[key]

        if get(obj, "format", "file") != FORMAT:
            raise LabelledError(f"format is {obj['format']!r}, not {FORMAT!r}")
        if get(obj, "version", "file") != VERSION:
            raise LabelledError(f"version {obj['version']!r} is not {VERSION}")
        names = [c.name for c in OpClass]
        if get(obj, "classes", "file") != names:
            raise LabelledError("classes differ from this version's OpClass names")
        pulses = get(obj, "pulses", "file")
        cols = {}
        for key in ("die", "start", "width", "class"):
            try:
                cols[key] = np.asarray(get(pulses, key, "pulses"), dtype=np.int64)
            except (TypeError, ValueError):
                raise LabelledError(f"pulses.{key} must be a list of integers") from None
        if len({len(v) for v in cols.values()}) > 1:
            raise LabelledError("pulses columns have different lengths")
        try:
            hist = {c: {int(b): int(n) for b, n in h.items()}
                    for c, h in get(obj, "histograms", "file").items()}
            return cls(
                tick_seconds=float(get(obj, "tick_seconds", "file")),
                clock_seconds=float(get(obj, "clock_seconds", "file")),
                hist_sub_bits=int(get(obj, "hist_sub_bits", "file")),
                dies=[d["name"] for d in get(obj, "dies", "file")],
                ops=list(get(obj, "ops", "file")), planes=list(get(obj, "planes", "file")),
                histograms=hist, die=cols["die"], start=cols["start"], width=cols["width"],
                op_class=cols["class"], pulses_truncated=bool(obj.get("pulses_truncated")))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise LabelledError(f"malformed member: {exc}") from None

    @classmethod
    def load(cls, path):
        """Read a labelled-pulse file."""
        try:
            with open(path) as f:
                obj = json.load(f)
        except OSError as exc:
            raise LabelledError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise LabelledError(f"{path}: not JSON: {exc}") from None
        return cls.from_dict(obj)


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

"""A classifier trained on labelled pulses: the drive's real timing per operation class.

The opcode tap labels every busy pulse of a tapped channel with the command that started it
(``rbscope label`` → :class:`~rbscope.analysis.labelled.LabelledPulses`). :func:`train` turns those
labels into the width distribution of each pulse class the sequence-aware classifier knows
(``program`` — one state per page type where the program widths form 2 or 3 clusters, and a
``program_slc`` state for an SLC cache's faster programs beside them —,
``cache_program``, ``erase``, ``multiplane`` for tDBSY, ``read``, ``other``), and
:func:`rbscope.analysis.sequence.classify` (``trained=``) then uses them as fixed emission
densities on
R/B#-only captures of every other die: only the mixture weights and the structure (erase cap,
tDBSY-announced programs) are left to fit. With known densities the share of two overlapping
classes (a cache program's tCBSY among reads, a chain's last program among erases) is
identifiable where untrained clusters are not.

File format (JSON, ``format: "rbscope.analysis.trained-classifier"``, ``version: 1``)
---------------------------------------------------------------------------
* ``bins_per_octave``: the histogram resolution (that of :mod:`rbscope.analysis.sequence`);
* ``states``: one per class, ``name``, ``kind``, ``first_bin`` (bin ``k`` spans
  ``log2(width / µs)`` from ``k / bins_per_octave``), ``counts`` (pulses per bin), ``pulses``;
* ``mp``: the measured planes per program (final confirms), or null;
* ``source``: where the labels came from (free text);
* ``resumes`` (optional): suspended operations resumed on the tapped channels (the rest of a
  program or erase, labelled as a read far longer than any), or null when unknown. With 0, the
  classifier joins no pulses as suspended pieces: the drive did not suspend while tapped.
* ``rests`` and ``program_pulses`` (optional, both or neither): pulses labelled as reads wider
  than the reads (the rests of resumed operations, short ones too) and program pulses on the
  tapped channels: the rate at which the drive's programs were suspended while tapped, which
  bounds how many pieces the classifier should have joined (``docs/wa.md``, "Suspended
  operations"), or null.

``rbscope calibrate --labelled FILE -o trained.json`` writes it, ``rbscope analyze --trained
trained.json`` classifies with it (``docs/accuracy.md``, "Labelled training").
"""

import json
import math
from dataclasses import dataclass, field

import numpy as np

from rbscope.files import atomic_output
from rbscope.gateware.rb_sniffer.params import hist_bin_lo
from rbscope.nand.ops import KINDS, OPS, PROGRAM_KINDS, OpClass

from .labelled import measured_mp
from .sequence import BINS_PER_OCTAVE

__all__ = ["TrainedClassifier", "TrainedError", "train", "FORMAT", "KIND_OF_CLASS"]

FORMAT = "rbscope.analysis.trained-classifier"
VERSION = 1

#: Operation class (:class:`rbscope.nand.ops.OpClass` name) → (state name, state kind) of the
#: classifier: one state per pulse kind, named after it (:attr:`rbscope.nand.ops.OpInfo.kind`).
KIND_OF_CLASS = {cls.name: (info.kind, info.kind) for cls, info in OPS.items()}

#: Fewest labelled pulses that make a class's distribution.
MIN_PULSES = 5
#: Widths a state may cover: 2^-MAX_OCTAVE … 2^MAX_OCTAVE µs (below 1 fs … 18 minutes).
MAX_OCTAVE = 30
MAX_BIN = MAX_OCTAVE * BINS_PER_OCTAVE
#: Largest count, most states and largest Mp a file may hold.
MAX_COUNT = 1 << 53
MAX_STATES = 64
MAX_MP = 16
#: The largest classifier file read: MAX_STATES states of 2 × MAX_BIN counts of 16 digits
#: each are about 2.3 MB (what this version writes is a few kB); a larger file is refused
#: before it is parsed (an 8.5 MB one took 2 s of CPU in json alone: a fuzzed input).
MAX_FILE_BYTES = 4 << 20
#: A pulse labelled a read is no read beyond READ_SPAN times the median labelled read width
#: and READ_MAX_US (µs): the tap labels a busy by the last confirm it saw, and a resume (13h,
#: D2h) is not in its vocabulary, so the rest of a program or erase resumed after reads comes
#: labelled as one more, far longer, read. Such pulses count the resumes the tap saw.
READ_SPAN = 4.0
READ_MAX_US = 150.0
#: Most samples drawn from one class's histogram (a larger histogram is scaled down to this:
#: training uses its shape, and memory stays bounded whatever the counts say).
MAX_HIST_SAMPLES = 1_000_000


def _short(v, limit=60):
    r = repr(v)
    return r if len(r) <= limit else r[:limit - 1] + "…"


class TrainedError(ValueError):
    """Labels that train nothing, or a malformed trained-classifier file."""


@dataclass
class TrainedState:
    """The width distribution of one class: pulses per ``log2`` bin from ``first_bin``."""

    name: str
    kind: str
    first_bin: int
    counts: np.ndarray
    pulses: int

    @property
    def range_log2(self):
        """(lo, hi) of ``log2(width / µs)`` the samples cover."""
        return self.first_bin / BINS_PER_OCTAVE, (self.first_bin + len(self.counts)) / \
            BINS_PER_OCTAVE


@dataclass
class TrainedClassifier:
    """Per-class width distributions learned from labelled pulses (see the module doc)."""

    states: list
    mp: float | None = None
    source: str = ""
    notes: list = field(default_factory=list)
    #: Resumed operations seen on the tapped channels (:func:`_resumes_seen`), or None
    #: (unknown: a file written before they were counted, or too few labelled reads to tell).
    resumes: int | None = None
    #: Pulses labelled as reads wider than the reads (every rest the tap saw, short ones
    #: too: :func:`_read_edge`) and program pulses on the tapped channels, or None.
    rests: int | None = None
    program_pulses: int | None = None

    @property
    def rest_rate(self):
        """Rests the tapped channels showed per program pulse, or None."""
        if self.rests is None or not self.program_pulses:
            return None
        return self.rests / self.program_pulses

    @property
    def rest_rate_hi(self):
        """The upper end of :attr:`rest_rate` at about 97.5 % (the rests a Poisson count:
        ``rests + 2 √rests``), or None."""
        if self.rests is None or not self.program_pulses:
            return None
        return (self.rests + 2.0 * math.sqrt(self.rests)) / self.program_pulses

    def state(self, name):
        return next((s for s in self.states if s.name == name), None)

    def to_dict(self):
        return {"format": FORMAT, "version": VERSION, "bins_per_octave": BINS_PER_OCTAVE,
                "source": self.source, "mp": self.mp, "resumes": self.resumes,
                "rests": self.rests, "program_pulses": self.program_pulses,
                "states": [{"name": s.name, "kind": s.kind, "first_bin": s.first_bin,
                            "counts": [int(x) for x in s.counts], "pulses": s.pulses}
                           for s in self.states]}

    def save(self, path, *, inputs=(), force=False):
        """Write the classifier (JSON), atomically; ``inputs`` and ``force`` as for
        :func:`rbscope.files.check_output` (raises :class:`~rbscope.files.OutputError`)."""
        try:
            with atomic_output(path, kind="json", inputs=inputs, force=force) as f:
                json.dump(self.to_dict(), f, indent=1)
                f.write("\n")
        except OSError as exc:
            raise TrainedError(f"{path}: cannot write: {exc.strerror}") from None

    @classmethod
    def from_dict(cls, obj):
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise TrainedError(f"not a trained classifier (format must be {FORMAT!r})")
        if obj.get("version") != VERSION:
            raise TrainedError(f"version {obj.get('version')!r} is not supported (only "
                               f"{VERSION})")
        if obj.get("bins_per_octave") != BINS_PER_OCTAVE:
            raise TrainedError(f"bins_per_octave must be {BINS_PER_OCTAVE}, not "
                               f"{obj.get('bins_per_octave')!r}")
        states = []
        kinds = {k for _, k in KIND_OF_CLASS.values()} | {"program_slc"}
        raw = obj.get("states")
        if raw is not None and not isinstance(raw, list):
            raise TrainedError("states must be a list")
        if raw and len(raw) > MAX_STATES:
            raise TrainedError(f"states: at most {MAX_STATES}, not {len(raw)}")
        for i, s in enumerate(raw or []):
            if not isinstance(s, dict) or not {"name", "kind", "first_bin", "counts",
                                                "pulses"} <= set(s):
                raise TrainedError(f"states[{i}]: needs name, kind, first_bin, counts and "
                                   f"pulses")
            name, kind, first, counts, pulses = (s["name"], s["kind"], s["first_bin"],
                                                 s["counts"], s["pulses"])
            if not isinstance(name, str) or not 0 < len(name) <= 64:
                raise TrainedError(f"states[{i}].name must be a string of 1 to 64 characters")
            if not isinstance(kind, str) or kind not in kinds:
                raise TrainedError(f"states[{i}].kind: unknown kind {_short(kind)} (known: "
                                   f"{', '.join(sorted(kinds))})")
            if type(first) is not int or not -MAX_BIN <= first <= MAX_BIN:
                raise TrainedError(f"states[{i}].first_bin must be an integer from {-MAX_BIN} "
                                   f"to {MAX_BIN} (widths of 2^±{MAX_OCTAVE} µs), not "
                                   f"{_short(first)}")
            if not isinstance(counts, list) or not 0 < len(counts) <= 2 * MAX_BIN or not all(
                    type(x) is int and 0 <= x <= MAX_COUNT for x in counts) or not sum(counts):
                raise TrainedError(f"states[{i}].counts must be a list of 1 to {2 * MAX_BIN} "
                                   f"counts from 0 to {MAX_COUNT}, not all zero")
            if first + len(counts) > MAX_BIN:
                raise TrainedError(f"states[{i}]: first_bin + len(counts) is above {MAX_BIN}")
            if type(pulses) is not int or not 0 <= pulses <= MAX_COUNT:
                raise TrainedError(f"states[{i}].pulses must be an integer from 0 to "
                                   f"{MAX_COUNT}, not {_short(pulses)}")
            states.append(TrainedState(name, kind, first, np.array(counts, dtype=np.int64),
                                       pulses))
        if not any(s.kind == "program" for s in states):
            raise TrainedError("no program state: the labels held no program pulse")
        mp = obj.get("mp")
        if mp is not None and (isinstance(mp, bool) or not isinstance(mp, (int, float))
                               or not 1 <= mp <= MAX_MP):
            raise TrainedError(f"mp must be a number from 1 to {MAX_MP} or null, not "
                               f"{_short(mp)}")
        source = obj.get("source", "")
        if not isinstance(source, str):
            raise TrainedError("source must be a string")
        resumes = obj.get("resumes")
        if resumes is not None and (type(resumes) is not int or not 0 <= resumes <= MAX_COUNT):
            raise TrainedError(f"resumes must be an integer from 0 to {MAX_COUNT} or null, not "
                               f"{_short(resumes)}")
        rests, programs = obj.get("rests"), obj.get("program_pulses")
        for key, v in (("rests", rests), ("program_pulses", programs)):
            if v is not None and (type(v) is not int or not 0 <= v <= MAX_COUNT):
                raise TrainedError(f"{key} must be an integer from 0 to {MAX_COUNT} or null, "
                                   f"not {_short(v)}")
        if (rests is None) != (programs is None):
            raise TrainedError("rests and program_pulses come together (both or neither)")
        return cls(states, mp, source, resumes=resumes, rests=rests, program_pulses=programs)

    @classmethod
    def load(cls, path):
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
            if len(raw) > MAX_FILE_BYTES:
                raise TrainedError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB: not a "
                                   f"trained-classifier file (this version writes a few kB)")
            obj = json.loads(raw.decode("utf-8"))
        except OSError as exc:
            raise TrainedError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise TrainedError(f"{path}: not JSON: {exc}") from None
        except UnicodeDecodeError as exc:
            raise TrainedError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
        except (ValueError, RecursionError) as exc:  # 4 301-digit integers, deep nesting
            raise TrainedError(f"{path}: not JSON that can be read: {exc}"[:300]) from None
        try:
            return cls.from_dict(obj)
        except TrainedError as exc:
            raise TrainedError(f"{path}: {exc}") from None


def _class_widths_us(labels):
    """``{OpClass name: widths in µs}`` of the labelled pulses (the kept ones, else the
    histograms' bins at their geometric centre)."""

    us = labels.tick_seconds * 1e6
    out = {}
    if len(labels.width) and not labels.pulses_truncated:
        for c in np.unique(labels.op_class):
            out[OpClass(int(c)).name] = labels.width[labels.op_class == c] * us
        return out
    for name, bins in labels.histograms.items():
        w = []
        total = sum(bins.values())
        scale = min(1.0, MAX_HIST_SAMPLES / total) if total else 1.0
        for b, n in bins.items():
            lo = max(hist_bin_lo(int(b), labels.hist_sub_bits), 1)
            hi = max(hist_bin_lo(int(b) + 1, labels.hist_sub_bits) - 1, lo)
            k = n if scale == 1.0 else max(round(n * scale), 1 if n else 0)
            w.append(np.full(int(k), math.sqrt(lo * hi) * us))
        if w:
            out[name] = np.concatenate(w)
    return out


def _resume_cut(widths):
    """The width (µs) above which one channel's labelled read widths are the rest of a
    resumed operation (see :data:`READ_SPAN`), or None when too few reads tell."""
    widths = np.asarray(widths, dtype=float)
    if len(widths) < 4 * MIN_PULSES:
        return None
    return max(READ_SPAN * float(np.median(widths)), READ_MAX_US)


#: Bin (octaves) and factor of :func:`_read_edge`: the reads end after the last bin holding
#: more than this many times the resumed rests' mean count per bin above :func:`_resume_cut`.
_EDGE_BIN = 0.25
_EDGE_OVER = 2.0


def _read_edge(widths):
    """The width (µs) above which one channel's labelled read widths train no read state.

    The rests of resumed operations (labelled as reads, :data:`READ_SPAN`) spread over the
    program widths, a low plateau that reaches down into the reads' own tail: the surely
    resumed ones (above :func:`_resume_cut`) give the plateau's level per bin, and the reads end
    after the last bin below the cut that holds more than :data:`_EDGE_OVER` times that level
    (the last from the top: a valley between two read modes, retries and first reads, is no
    end). None (every labelled read trains) with fewer than :data:`MIN_PULSES` resumes or too
    few reads to tell."""
    cut = _resume_cut(widths)
    if cut is None:
        return None
    x = np.log2(np.maximum(np.asarray(widths, dtype=float), 1e-3))
    top, above = math.log2(cut), x > math.log2(cut)
    if above.sum() < MIN_PULSES:
        return None  # (no resumes to speak of: the labels as they are)
    level = float(above.sum()) / max(1.0, (float(x.max()) - top) / _EDGE_BIN)
    edges = np.arange(float(x.min()), top + _EDGE_BIN, _EDGE_BIN)
    counts, _ = np.histogram(x[~above], bins=edges)
    if not len(counts):
        return cut
    held = np.nonzero(counts > _EDGE_OVER * level)[0]
    return min(cut, float(2.0 ** edges[held[-1] + 1])) if len(held) else cut


def _resumes_seen(widths):
    """Pulses among one channel's labelled read widths (µs) that are the rest of a resumed
    operation (see :data:`READ_SPAN`), or None when too few reads tell."""
    cut = _resume_cut(widths)
    return None if cut is None else int((np.asarray(widths, dtype=float) > cut).sum())


#: A page type's share of the program pulses may depart from ``1 / k`` by this fraction of it
#: (the block page order programs each type once per word line; blocks open at the edges of the
#: recording and cache programs move the shares a little, never by a quarter).
PAGE_SHARE_TOL = 0.2
#: Two page types are told apart only where the width density between them falls below this
#: fraction of the thinner type's peak density (a valley, not a wide cluster's ripple).
PAGE_VALLEY = 0.2
#: Histogram resolution (bins per octave) and smoothing (bins) of that density.
_PT_PER_OCTAVE = 16
_PT_SMOOTH = 1.5


def _page_types(x):
    """Split program widths ``x`` (octaves) into the page types the labels support.

    A drive programs each page type of a block once per word line, so ``k`` page types have
    equal counts: they are supported only when the widths split, at ``k - 1`` cuts that each
    leave every type within :data:`PAGE_SHARE_TOL` of a ``1 / k`` share, into clusters with a
    valley between each (the density there below :data:`PAGE_VALLEY` of each side's peak).
    Three types are tried, then an SLC cache's faster programs beside three or two types (a
    cluster below the first valley, of any share, the rest splitting as above), then two types;
    otherwise the program widths stay one state (a wide cluster with ripples or two humps of
    unequal counts is one type, never invented ones).

    Returns
    -------
    (list of numpy.ndarray, int)
        The widths of each part, fastest first (one array when no split holds), and how many
        leading parts are SLC-mode programs (0 or 1).
    """

    x = np.sort(np.asarray(x, dtype=float))
    if len(x) < 4 * MIN_PULSES:
        return [x], 0
    dens, centres = _density(x)
    parts = _equal_types(x, 3, dens, centres)
    if parts:
        return parts, 0
    # The first valley: SLC-mode programs (an SLC cache in front of the main cells) are the
    # fastest, in their own cluster, and as many as the cache takes.
    peak = 0.0
    for c in range(1, len(dens) - 1):
        peak = max(peak, dens[c - 1])
        if dens[c] <= dens[c - 1] and dens[c] <= dens[c + 1] and \
                dens[c] < PAGE_VALLEY * min(peak, dens[c + 1:].max()):
            fast, rest = x[x < centres[c]], x[x >= centres[c]]
            if len(fast) >= MIN_PULSES and len(rest) >= 4 * MIN_PULSES:
                for k in (3, 2):
                    parts = _equal_types(rest, k, *_density(rest))
                    if parts:
                        return [fast, *parts], 1
            break
    parts = _equal_types(x, 2, dens, centres)
    return (parts, 0) if parts else ([x], 0)


def _density(x):
    """The smoothed width density of sorted ``x`` (octaves) and its bins' centres."""
    lo, hi = float(x[0]) - 0.25, float(x[-1]) + 0.25
    nb = max(8, int(math.ceil((hi - lo) * _PT_PER_OCTAVE)))
    counts, edges = np.histogram(x, bins=nb, range=(lo, hi))
    radius = max(1, int(3 * _PT_SMOOTH))
    kern = np.exp(-0.5 * (np.arange(-radius, radius + 1) / _PT_SMOOTH) ** 2)
    dens = np.convolve(counts.astype(float), kern / kern.sum(), mode="same")
    return dens, 0.5 * (edges[:-1] + edges[1:])


def _equal_types(x, k, dens, centres):
    """``k`` page types of equal counts split at valleys of ``dens`` (see :func:`_page_types`),
    or None."""
    n, nb = len(x), len(dens)
    cuts = []
    for j in range(1, k):
        q_lo = np.quantile(x, max(0.0, j / k - PAGE_SHARE_TOL / k))
        q_hi = np.quantile(x, min(1.0, j / k + PAGE_SHARE_TOL / k))
        inside = np.flatnonzero((centres >= q_lo) & (centres <= q_hi))
        if not len(inside):
            inside = np.array([int(np.clip(np.searchsorted(centres, q_lo), 0, nb - 1))])
        cuts.append(int(inside[np.argmin(dens[inside])]))
    bounds = [0, *cuts, nb]
    if not all(a < b for a, b in zip(bounds, bounds[1:], strict=False)):
        return None
    for i, c in enumerate(cuts):
        left = dens[bounds[i]:c].max(initial=0.0)
        right = dens[c + 1:bounds[i + 2]].max(initial=0.0)
        if not dens[c] < PAGE_VALLEY * min(left, right):
            return None
    parts = np.split(x, np.searchsorted(x, [float(centres[c]) for c in cuts]))
    if all(abs(len(p) / n - 1 / k) <= PAGE_SHARE_TOL / k + 1e-9 for p in parts):
        return parts
    return None


def train(labels, *, source=""):
    """Learn the width distribution of each class from labelled pulses.

    Parameters
    ----------
    labels : LabelledPulses or sequence of them
        One or more tapped channels' labels (``rbscope label``).
    source : str
        Recorded in the file.

    Returns
    -------
    TrainedClassifier
    """

    if not isinstance(labels, (list, tuple)):
        labels = [labels]
    samples = {}
    kinds = {}
    mp_pages = mp_ops = 0
    resumes = 0
    rests, program_pulses = 0, 0
    rng = np.random.default_rng(0)  # (a fixed dither: the same labels train the same file)
    for lab in labels:
        tick_us = lab.tick_seconds * 1e6
        widths = _class_widths_us(lab)
        read_widths = np.concatenate(
            [np.zeros(0)] + [w for c, w in widths.items()
                             if c in KIND_OF_CLASS and KIND_OF_CLASS[c][1] == "read"])
        seen = _resumes_seen(read_widths)
        resumes = None if seen is None or resumes is None else resumes + seen
        cut = _read_edge(read_widths)
        # Every rest the tap saw, short ones too (above the reads' edge; none where too few
        # resumes give an edge), against the program pulses: how often the drive suspended
        # while tapped, a lower bound on the pieces the classifier should join.
        rests += int((read_widths > cut).sum()) if cut is not None else 0
        program_pulses += sum(len(w) for c, w in widths.items()
                              if KIND_OF_CLASS.get(c, (None, None))[1] in PROGRAM_KINDS)
        for cls_name, w in widths.items():
            if cls_name not in KIND_OF_CLASS or not len(w):
                continue
            name, kind = KIND_OF_CLASS[cls_name]
            if kind == "read" and cut is not None:
                # The rests of resumed operations, labelled as reads, are no reads: a read
                # state that learned them would claim program widths (a tuning draw of
                # mlc-read-retry: a trained read state 1.3 octaves wide, reaching 3 ms, took
                # 166 programs, −10 %). They count the resumes (above) and train nothing;
                # those as short as the reads' tail stay (no label tells them).
                w = np.asarray(w)[np.asarray(w, dtype=float) <= cut]
                if not len(w):
                    continue
            # The tap's clock quantises a width to whole ticks (a tDBSY of 0.4-1.4 µs reads 0
            # or 1 at 1 µs): spread each over the ticks it may stand for, one either side (a
            # count of whole ticks, or of the samples the pulse spanned, whatever its phase),
            # so that the learned shape covers the real widths and no width below one tick is
            # lost (a width cannot be negative: 0 ticks stand for 0-1).
            w = np.asarray(w, dtype=float)
            w = np.maximum(np.abs(w + (2 * rng.random(len(w)) - 1) * tick_us), 0.05 * tick_us)
            samples.setdefault(name, []).append(w)
            kinds[name] = kind
        mp_pages += lab.program_pages()
        mp_ops += lab.program_finals()
    states, notes = [], []
    for name, parts in samples.items():
        w = np.concatenate(parts)
        w = w[w > 0]
        if len(w) < MIN_PULSES:
            notes.append(f"{name}: only {len(w)} labelled pulses, not used")
            continue
        x = np.log2(w)
        if name == "program":
            # Page types (lower / middle / upper) are clusters of the program widths: one
            # state each, so that the classifier can hold them to equal counts; SLC-mode
            # programs, faster, a state of their own (counted, not balanced).
            parts, n_slc = _page_types(x)
            groups = [("program_slc" if i < n_slc else f"program_{i + 1 - n_slc}", g,
                       "program_slc" if i < n_slc else kinds[name])
                      for i, g in enumerate(parts)]
            if len(groups) == 1:
                groups = [(name, x, kinds[name])]
        else:
            groups = [(name, x, kinds[name])]
        for state_name, xs, kind in groups:
            k = np.floor(xs * BINS_PER_OCTAVE).astype(np.int64)
            first = int(k.min())
            states.append(TrainedState(state_name, kind, first, np.bincount(k - first),
                                       len(xs)))
    if not any(s.kind == "program" for s in states):
        raise TrainedError("the labels hold no program pulses: tap the bus while the drive "
                           "writes")
    states.sort(key=lambda s: (KINDS.index(s.kind), s.first_bin))
    trained = TrainedClassifier(states, measured_mp(mp_pages, mp_ops), source, notes,
                                resumes=resumes, rests=rests if program_pulses else None,
                                program_pulses=program_pulses or None)
    # What is written must read back: the reader's checks, applied before anything is saved.
    try:
        TrainedClassifier.from_dict(trained.to_dict())
    except TrainedError as exc:
        raise TrainedError(f"the labels train a classifier outside what a classifier file may "
                           f"hold ({exc}): check the labelled files' tick_seconds") from None
    return trained

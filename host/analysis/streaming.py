"""The sequence classifier streaming over a capture too long to hold (``docs/wa.md``).

A day of pulse records on 64 lines is billions of pulses; :func:`classify` needs each line's
pulses in memory. :func:`stream_classify` classifies a capture file in two passes whose memory
does not grow with the capture:

1. **Fit.** :data:`FIT_WINDOWS` windows spread evenly over the file (by byte offset) give each
   line :data:`FIT_PULSES` pulses in all, in order with their start ticks; :func:`classify`
   fits the model on them, with every order rule (the same call as in memory). Windows spread
   over the capture fit the mixture's weights to the whole day's mix of reads, programs and
   erases (a load curve changes it), where one window would fit its own hour.
2. **Apply.** The capture is read again in chunks of :data:`CHUNK_RECORDS` records; each line's
   pulses go through the fitted model with its states and prior fixed (:class:`StreamModel`:
   the posterior of every grid bin, so a pulse's posterior is one table look-up) and the
   **streamed order rules**, the tDBSY rules of :func:`~rbscope.analysis.sequence._die_result`
   (a tDBSY announces the program after it; each program writes one page more per tDBSY
   queued before it; unannounced short pulses are ambiguous), whose state is carried from one
   chunk to the next (the previous pulse's tDBSY posterior and the run of tDBSY pulses before
   it), so the sums are those of one pass over the whole line (``tests/test_streaming.py``).

The order rules :func:`classify` applies beyond those (idle gaps: host-paced cache programs,
chain heads, reads and erases told by their data in; suspended operations; word-line loads)
look at a whole line's statistics. They are not re-run on the stream: their effect on each
line is measured on the fit windows (the full classification less the streamed rules' on the
same pulses) and added in proportion to the line's pulses (a difference estimator).

**Drift.** The model is refitted on the last :data:`LATE_WINDOWS` windows alone and both
models are applied to them: where the programs per pulse they find differ by more than
:data:`DRIFT_WARN`, a warning says so. Either way the interval includes the difference, and
the difference between the order rules' effect on the late windows and on all of them, each
scaled to the line's pulses (``DieResult.gap_moved``: slack on both sides).
"""

import contextlib
import ctypes
import math
import multiprocessing as mp
import os
from dataclasses import dataclass, field

import numpy as np

from rbscope.device import capture
from rbscope.device.capture import (
    CHUNK_SIZE,
    PREAMBLE,
    RECORD,
    TRAILER,
    RecordKind,
    _scan,
    iter_record_blocks,
    iter_records,
)
from rbscope.device.protocol import HEADER_BYTES, decode_frame_bytes, trace_records
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import FrameType
from rbscope.gateware.link.summary import COUNT_BITS, COUNT_MAX, LATE_KIND, SUMMARY_KIND
from rbscope.gateware.rb_sniffer.params import EventKind

from .sequence import (
    _FLOOR,
    PROGRAM_KINDS,
    TCBSY_US,
    DieResult,
    SequenceError,
    SequenceResult,
    classify,
    geometry_options,
)

__all__ = ["StreamModel", "LineStream", "TraceScanner", "stream_classify", "STREAM_BYTES",
           "FIT_WINDOWS", "FIT_PULSES", "LATE_WINDOWS", "DRIFT_WARN", "CHUNK_RECORDS"]

#: ``rbscope analyze`` streams a capture with pulse records larger than this (bytes, about 20
#: million records of 7 bytes in TRACE_BATCH frames: the in-memory reader's limit,
#: ``rbscope.device.traces.MAX_RECORDS``).
STREAM_BYTES = 160 << 20
#: Fit windows, spread evenly over the file.
FIT_WINDOWS = 8
#: Pulses per line the fit windows hold in all (at most; fewer on a short line).
FIT_PULSES = 24_000
#: The last windows, refitted alone for the drift check.
LATE_WINDOWS = 2
#: Programs per pulse that may differ between the two models on the late windows before a
#: warning says the model no longer fits (the difference is in the interval either way).
DRIFT_WARN = 0.01
#: Pulse records unpacked and classified at a time (all lines together).
CHUNK_RECORDS = 1 << 21


# The fitted model, applied pulse by pulse --------------------------------------------------


@dataclass
class StreamModel:
    """A fitted :class:`~rbscope.analysis.sequence.SequenceResult` as tables over its grid.

    Members
    -------
    result : SequenceResult
        The fit (states, prior, grid).
    tick_us : float
    post : ndarray (bins, K)
        The posterior of a pulse in each grid bin (emission × prior, normalised), exactly as
        :func:`classify` computes it pulse by pulse.
    """

    result: SequenceResult
    tick_us: float
    pages_per_block: int | None = None
    erase_slack: float = 0.25
    single_plane: bool = False
    bits: int | None = None
    post: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        r = self.result
        if r.prior is None or r.grid is None:
            raise SequenceError("the classification keeps no model to stream with")
        if r.iterations and r.transitions is not None and r.mode != "sequence":
            raise SequenceError("only a sequence classification can be streamed")
        states = r.states
        self.lo, self.step, self.n = r.grid
        table = np.stack([s.dens for s in states], axis=1) + _FLOOR
        g = table * r.prior
        self.post = g / g.sum(axis=1, keepdims=True)
        kinds = [s.kind for s in states]
        self.names = [s.name for s in states]
        self.pj = [j for j, k in enumerate(kinds) if k in PROGRAM_KINDS]
        self.ej = kinds.index("erase")
        self.mk = [j for j, k in enumerate(kinds) if k == "multiplane"]
        self.sj = [j for j, k in enumerate(kinds) if k in ("read", "cache", "other")]
        self.slc = [j for j, k in enumerate(kinds) if k == "program_slc"]
        mult = np.array([s.pages for s in states], dtype=float)
        self.mult = mult
        # Block fill per program pulse (classify's): an SLC-mode program fills `bits` times
        # its share of a block.
        emult = mult.copy()
        if self.bits:
            for j, st in enumerate(states):
                if st.kind == "program_slc":
                    emult[j] = float(self.bits)
        p = self.post
        self.b_prog = p[:, self.pj].sum(axis=1)
        self.b_unit = (p[:, self.pj] * mult[self.pj]).sum(axis=1)
        self.b_u2 = (p[:, self.pj] * mult[self.pj] ** 2).sum(axis=1)
        self.b_fill = self.b_unit + (p[:, self.pj] * (emult[self.pj] - mult[self.pj])).sum(axis=1)
        self.b_short = p[:, self.sj].sum(axis=1) if self.sj else np.zeros(self.n)
        self.b_mp = p[:, self.mk].sum(axis=1) if self.mk else np.zeros(self.n)
        self.cbsy_hi = math.log2(TCBSY_US[1])

    def bins(self, widths):
        """``(x, bin)`` of widths in ticks: ``log2`` µs and the grid bin (as :class:`_Grid`)."""
        x = np.log2(np.asarray(widths, dtype=float) * self.tick_us)
        return x, np.clip(((x - self.lo) / self.step).astype(np.int64), 0, self.n - 1)


def _affine_scan(a, c, r0):
    """``r[i] = a[i] r[i-1] + c[i]`` with ``r[-1] = r0``, vectorised (a doubling scan).

    The products of ``a`` over the doubled spans decay fast (``a`` is a tDBSY posterior: runs
    of tDBSY pulses are a few long), so the scan stops once every span's product is below
    1e-18: what it leaves out is below the floating-point rounding of the sum.
    """
    A, C = a.astype(float).copy(), c.astype(float).copy()
    n = len(A)
    s = 1
    while s < n:
        if A[s:].max(initial=0.0) < 1e-18:
            break
        C[s:] = A[s:] * C[:-s] + C[s:]
        A[s:] = A[s:] * A[:-s]
        s *= 2
    return A * r0 + C


class LineStream:
    """One line's streamed counts: feed its pulses in order, chunk by chunk, then
    :meth:`result`.

    The line-level choices of the tDBSY rules (every program on the line multi-plane: a short
    pulse without a tDBSY before it is no chain head; a single-plane line whose programs come
    without one: nothing is announced) are taken on the fit windows (``decisions``) or, without
    them, on the first chunk.
    """

    def __init__(self, model, decisions=None):
        self.m = model
        self.decisions = decisions
        self.n = 0
        self.prev_mp = 0.0  # the previous pulse's tDBSY posterior (after the start-up rule)
        self.run = 0.0  # expected run of tDBSY pulses before the previous pulse
        self.first_short = 0.0  # the line's first pulse's short posterior
        K = len(model.names)
        self.expected = np.zeros(K)
        self.sums = dict.fromkeys(("prog", "var", "und", "unit", "u_var", "extra", "ann",
                                   "amb", "amb_cap", "fill"), 0.0)

    def _decide(self, x, prev, pprog):
        m = self.m
        short = x <= m.cbsy_hi
        plong = pprog[~short]
        all_mp = bool(plong.sum() and (plong * prev[~short]).sum() > 0.9 * plong.sum())
        long_p = pprog * (~short)
        no_announce = bool(m.single_plane and (long_p * prev).sum() <= 0.5 * long_p.sum())
        return all_mp, no_announce

    def feed(self, widths):
        """Account the next pulses of the line (widths in ticks, in order)."""
        m = self.m
        if not len(widths):
            return
        x, b = m.bins(widths)
        n = len(x)
        self.expected += np.bincount(b, minlength=m.n) @ m.post
        pprog = m.b_prog[b]
        punit = m.b_unit[b]
        pshort = m.b_short[b]
        s = self.sums
        if m.mk:
            pm = m.b_mp[b].copy()
            if self.n == 0:
                self.first_short = float(pshort[0])
            # A capture starting at power-on: a reset, then set features as short as a tDBSY.
            i1 = 1 - self.n
            if 0 <= i1 < n and self.first_short > 0:
                pm[i1] *= 1.0 - self.first_short
            prev = np.concatenate([[self.prev_mp if self.n else 0.0], pm[:-1]])
            if self.decisions is None:
                self.decisions = self._decide(x, prev, pprog)
            all_mp, no_announce = self.decisions
            short = x <= m.cbsy_hi
            plong0 = pprog
            if all_mp:
                moved = pprog * (1 - prev) * short
                pprog = pprog - moved
                punit = punit * (1 - (1 - prev) * short)
                pshort = pshort + moved
            announced = np.zeros(n) if no_announce else pshort * prev
            pprog = np.clip(pprog + announced, 0.0, 1.0)
            punit = punit + announced
            run = _affine_scan(prev, prev, self.run)
            s["extra"] += float((punit * run).sum())
            s["amb_cap"] += float((plong0 * (1 - prev)).sum())
            self.prev_mp, self.run = float(pm[-1]), float(run[-1])
        else:
            announced = np.zeros(n)
            s["amb_cap"] = math.inf
        s["ann"] += float(announced.sum())
        s["amb"] += float((pshort * (1 - announced) * (x <= m.cbsy_hi)).sum())
        s["prog"] += float(pprog.sum())
        s["var"] += float(np.maximum(pprog * (1 - pprog), 0.0).sum())
        s["und"] += float(np.minimum(pprog, 1 - pprog).sum())
        s["unit"] += float(punit.sum())
        eu2 = m.b_u2[b] + announced
        s["u_var"] += float(np.maximum(eu2 - punit ** 2, 0.0).sum())
        s["fill"] += float((punit + m.b_fill[b] - m.b_unit[b]).sum())
        self.n += n

    def result(self):
        """The line's :class:`DieResult` (the streamed rules only)."""
        m, s = self.m, self.sums
        ex = self.expected
        cap = None
        if m.pages_per_block:
            cap = (1 + m.erase_slack) * s["fill"] / m.pages_per_block + 2
        d = DieResult(int(self.n), {nm: float(ex[j]) for j, nm in enumerate(m.names)},
                      s["prog"], s["var"], float(ex[m.ej]), s["extra"], cap, s["ann"],
                      min(s["amb"], s["amb_cap"]), s["und"],
                      float(ex[m.mk].sum()) if m.mk else 0.0, s["unit"], s["u_var"])
        d.slc_programs = float(ex[m.slc].sum()) if m.slc else 0.0
        return d


def apply_model(model, pulses, decisions=None, chunk=None):
    """The streamed rules' :class:`DieResult` of each line of ``pulses`` (``{line: widths}``),
    fed ``chunk`` pulses at a time (None: at once). Returns ``({line: DieResult},
    {line: decisions})``."""
    out, dec = {}, {}
    for k, w in pulses.items():
        w = np.asarray(w)
        ls = LineStream(model, None if decisions is None else decisions.get(k))
        step = len(w) if not chunk else chunk
        for i in range(0, len(w), max(step, 1)):
            ls.feed(w[i:i + step])
        out[k], dec[k] = ls.result(), ls.decisions
    return out, dec


# Reading the pulse records fast ---------------------------------------------------------------


def _records_from(path, at, chunk_size=CHUNK_SIZE):
    """:func:`~rbscope.device.capture.iter_records` from byte ``at`` on: the reader's own
    resynchronisation finds the first whole record after it (the bytes before are not
    reported)."""
    with open(path, "rb") as f:
        base = max(at, PREAMBLE.size)
        f.seek(base)
        buf = bytearray(f.read(chunk_size))
        pos, skip = 0, [None]
        while True:
            more = f.read(chunk_size)
            final = not more
            pos = yield from _scan(buf, pos, base, [], final, skip)
            if final:
                return
            del buf[:pos]
            base += pos
            pos = 0
            buf += more


class TraceScanner:
    """Unpack a capture's pulse records a chunk at a time, vectorised.

    TRACE_BATCH frames have a fixed size: their bodies are gathered and unpacked together with
    numpy (the record slots' bit fields, the timestamps rebuilt from each batch's ``base``);
    TRACE frames (older captures, test devices) go through the protocol decoder. Saturated
    pulses get their BUSY records' ticks; PARTIAL records are left out (their width is unknown).

    Yields, per chunk, ``(offset, {line: (widths, starts, gaps_open)})`` with ``offset`` the
    file offset the chunk ends at and ``gaps_open`` whether the idle time before each pulse
    spans pulses not in the sequence (``Measurement.pulse_gaps_open``); the last pulse of each
    line is held back to the next chunk (a BUSY record may still extend it). ``starts=False``:
    no starts nor ``gaps_open`` (None: a pass that needs only the widths skips them).
    ``bulk``: read the records in blocks (default :data:`rbscope.device.capture.BULK`), or one
    by one (the reference).
    """

    def __init__(self, path, params, *, from_tick=-1, to_tick=None, chunk=CHUNK_RECORDS,
                 losses=(), start=0, stop=None, bulk=None, starts=True):
        self.path = os.fspath(path)
        self.starts = starts
        self.bulk = capture.BULK if bulk is None else bulk
        self.stop = stop
        self.params = params
        self.from_tick, self.to_tick = from_tick, to_tick
        self.chunk = chunk
        self.errors = []
        self.start = start
        self.excluded = {}
        self.summarised = {}  # line -> pulses its SUMMARY records stand for
        self._hidden = {}  # line -> pulses not in its sequence since its last one in it
        self._age = {}  # line -> the age of a SUMMARY that ended a chunk (its LATE follows)
        self.losses = {}
        for a, b, ch, _ in losses:
            self.losses.setdefault(int(ch), []).append((a, b))
        layout = PROTOCOL.payload_layout(params, FrameType.TRACE_BATCH)
        rec = wire.trace_record_layout(params)
        self.slots = layout["records"].shape.length
        self.rec_bytes = rec.size // 8
        self.base_bytes = layout["base"].width // 8
        self.body = HEADER_BYTES + wire.layout_bytes(layout)
        self.aligned = (layout["records"].offset % 8 == 0 and rec.size % 8 == 0
                        and layout["base"].offset == 0 and self.rec_bytes <= 8)
        self.f = {n: (rec[n].offset, (1 << rec[n].width) - 1)
                  for n in ("kind", "channel", "width", "time")}
        self.held = {}

    def _unpack(self, bodies):
        """Records of fixed-size TRACE_BATCH bodies: ``(channel, kind, width, timestamp)``.

        ``bodies``: a list of ``(body, offset)`` (bytes and the record's file offset), or of
        ``(rows, offsets)`` (arrays: one body a row). A batch the protocol refuses
        (:meth:`~rbscope.device.protocol.TraceBatch.traces`: its first record not at its base,
        a record's time going backwards, a channel the device does not have) is decoded alone,
        which notes the error at its offset, and gives no record, as in every other reader."""
        if isinstance(bodies[0][0], bytes):
            bodies = [(np.frombuffer(b"".join(b for b, _ in bodies), dtype=np.uint8).reshape(
                -1, self.body), np.array([o for _, o in bodies], dtype=np.int64))]
        h, nb, rb = HEADER_BYTES, self.base_bytes, self.rec_bytes
        n = sum(len(b) for b, _ in bodies)
        base = np.zeros((n, 8), dtype=np.uint8)
        slots = np.zeros((n, self.slots, 8), dtype=np.uint8)
        i = 0
        for raw, _ in bodies:
            k = len(raw)
            base[i:i + k, :nb] = raw[:, h:h + nb]
            slots[i:i + k, :, :rb] = raw[:, h + nb:].reshape(k, self.slots, rb)
            i += k
        base = base.view("<u8")[:, 0]
        bits = slots.view("<u8")[:, :, 0]
        f = self.f
        at, mask = f["kind"]
        kind = (bits >> np.uint64(at)) & np.uint64(mask)
        full = kind != wire.TRACE_EMPTY_KIND
        tmask = np.uint64(f["time"][1])
        times = ((base & ~tmask)[:, None] | ((bits >> np.uint64(f["time"][0])) & tmask)).view(
            np.int64)
        at, mask = f["channel"]
        channels = (bits >> np.uint64(at)) & np.uint64(mask)
        bad = self._refused(full, times, base.view(np.int64), channels)
        if bad.any():
            offsets = np.concatenate([o for _, o in bodies])
            rows = np.concatenate([np.asarray(r) for r, _ in bodies]) if len(bodies) > 1 \
                else np.asarray(bodies[0][0])
            for r in np.flatnonzero(bad).tolist():
                # (Decoded alone: the protocol's own error, at the record's offset.)
                recs = self._frame_records(rows[r].tobytes(), int(offsets[r]))
                if recs:  # (cannot happen: the same rules)
                    raise AssertionError(f"offset {int(offsets[r])}: a batch refused here "
                                         "decoded")
            full &= ~bad[:, None]
        times = times[full]
        bits = bits[full]

        def field_(name):
            # (The narrowest unsigned type that holds the field: less to move about.)
            at, mask = f[name]
            return ((bits >> np.uint64(at)) & np.uint64(mask)).astype(
                np.min_scalar_type(mask) if mask < 1 << 32 else np.int64)

        return (field_("channel"), kind[full].astype(np.min_scalar_type(f["kind"][1])),
                field_("width"), times)

    def _refused(self, full, times, base, channels):
        """Per batch (row), whether :meth:`~rbscope.device.protocol.TraceBatch.traces` refuses
        it: its first record's time not the base, a record's time before the one before it, or
        a record naming a channel the device does not have (empty slots do not count)."""
        rows = full.any(axis=1)
        first = full.argmax(axis=1)
        idx = np.arange(len(full))
        bad = rows & (times[idx, first] != base)
        # Each record against the latest of the records before it in its batch.
        held = np.where(full, times, np.iinfo(np.int64).min)
        before = np.maximum.accumulate(held, axis=1)
        bad |= (full[:, 1:] & (times[:, 1:] < before[:, :-1])).any(axis=1)
        bad |= (full & (channels >= np.uint64(self.params.channels))).any(axis=1)
        return bad

    def __iter__(self):
        for end, records, final in self.chunks():
            yield end, self._split(records, final)

    def chunks(self):
        """``(offset, records, final)`` of each chunk: its records in order (:meth:`_records`),
        not yet split by line (:meth:`_split`, which keeps the state carried between chunks:
        another process may read the records, :class:`_Ahead`)."""
        groups = self._iter_bulk() if self.bulk else self._iter_records()
        for end, bodies, singles, final in groups:
            yield end, self._records(bodies, singles), final

    def _iter_bulk(self):
        """:meth:`_iter_records` on :func:`~rbscope.device.capture.iter_record_blocks`: the
        same chunks (cut at the same record), the same errors; the TRACE_BATCH bodies are
        gathered from each block with numpy (strided views of evenly spaced records), so
        nothing runs per record but the rare TRACE frames and batches of another size."""
        bodies, singles = [], []
        pending = 0
        end = 0
        size, trailer = RECORD.size, TRAILER.size
        step = size + self.body + trailer  # (from one batch record to the next, adjacent)
        blocks = iter_record_blocks(self.path, errors=self.errors, start=(
            None if self.start <= 0 else self.start))
        for block in blocks:
            off = block.base + block.at
            stopped = False
            if self.stop is not None:
                k = int(np.searchsorted(off, self.stop))
                if k < len(off):
                    stopped, end = True, int(off[k])
                    block = block.select(np.arange(len(off)) < k)
            if len(block):
                arr = np.frombuffer(block.data, dtype=np.uint8)
                at, length = block.at, block.length
                t = np.where(block.kind == RecordKind.FRAME, arr[at + size], -1)
                fast = (t == FrameType.TRACE_BATCH) & (length == self.body) & self.aligned
                other = ((t == FrameType.TRACE_BATCH) | (t == FrameType.TRACE)) & ~fast
                trace = np.flatnonzero(fast | other)
                if not stopped:
                    end = int(off[-1])
                # Runs of batches between the other trace frames.
                singles_at = np.flatnonzero(other[trace])
                i = 0
                while i < len(trace):
                    j = int(singles_at[np.searchsorted(singles_at, i)]) if len(singles_at) and \
                        singles_at[-1] >= i else len(trace)
                    if j == i:  # a TRACE frame, or a batch of another size
                        r = int(trace[i])
                        i += 1
                        p = int(at[r]) + size
                        recs = self._frame_records(block.data[p:p + int(length[r])],
                                                   int(off[r]))
                        if recs is None:
                            continue
                        singles.append((len(bodies), recs))
                        pending += len(recs)
                        if pending >= self.chunk:
                            yield int(off[r]), bodies, singles, False
                            bodies, singles, pending = [], [], 0
                        continue
                    # Batches trace[i:j]; as many as fill the chunk.
                    take = min(j - i, max(1, -(-(self.chunk - pending) // self.slots)))
                    starts = at[trace[i:i + take]] + size
                    cuts = np.flatnonzero(np.diff(starts) != step) + 1
                    for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, take].tolist(),
                                    strict=True):
                        bodies.append((np.lib.stride_tricks.as_strided(
                            arr[int(starts[a]):], shape=(b - a, self.body), strides=(step, 1),
                            writeable=False), off[trace[i + a:i + b]]))
                    pending += take * self.slots
                    i += take
                    if pending >= self.chunk:
                        yield int(off[trace[i - 1]]), bodies, singles, False
                        bodies, singles, pending = [], [], 0
            if stopped:
                break
        yield end, bodies, singles, True

    def _iter_records(self):
        """The reference: record by record (:func:`~rbscope.device.capture.iter_records`)."""
        bodies, singles = [], []
        pending = 0
        end = 0
        records = (iter_records(self.path, errors=self.errors) if self.start <= 0 else
                   _records_from(self.path, self.start))
        for offset, kind, _time, body in records:
            end = offset
            if self.stop is not None and offset >= self.stop:
                break
            if kind != RecordKind.FRAME or not body:
                continue
            t = body[0]
            if t == FrameType.TRACE_BATCH and len(body) == self.body and self.aligned:
                bodies.append((body, offset))
                pending += self.slots
            elif t in (FrameType.TRACE_BATCH, FrameType.TRACE):
                recs = self._frame_records(body, offset)
                if recs is None:
                    continue
                singles.append((len(bodies), recs))
                pending += len(recs)
            else:
                continue
            if pending >= self.chunk:
                yield end, bodies, singles, False
                bodies, singles, pending = [], [], 0
        yield end, bodies, singles, True

    def _records(self, bodies, singles):
        """A chunk's records in order, ``(channel, kind, width, timestamp)`` arrays (None:
        none)."""
        parts = []
        if bodies:
            parts.append(self._unpack(bodies))
        if singles:
            # (Rare: TRACE frames, or a batch of another size. Kept in file order.)
            recs = [r for _, rs in singles for r in rs]
            extra = tuple(np.array(v, dtype=np.int64) for v in zip(*(
                (r.channel, r.kind, r.width, r.timestamp) for r in recs), strict=True))
            if bodies:
                # Interleave by position: a single frame after batch i goes after its records.
                ch, kd, w, ts = parts[0]
                parts = [tuple(np.concatenate([a, b]) for a, b in zip(parts[0], extra,
                                                                       strict=True))]
                o = np.argsort(parts[0][3], kind="stable")
                parts = [tuple(v[o] for v in parts[0])]
                del ch, kd, w, ts
            else:
                parts.append(extra)
        if not parts:
            return None
        ch, kd, w, ts = parts[0]
        keep = ts > self.from_tick
        if self.to_tick is not None:
            keep &= ts <= self.to_tick
        if not keep.all():
            ch, kd, w, ts = ch[keep], kd[keep], w[keep], ts[keep]
        return ch, kd, w, (ts if self.starts or self.losses else None)

    def _frame_records(self, body, offset):
        """A TRACE or TRACE_BATCH frame's records, or None (a frame that does not decode; one
        whose records do not, noted in ``errors`` at its ``offset``)."""
        frame = decode_frame_bytes(body, self.params)
        if frame is None:
            return None
        try:
            return trace_records(frame, self.params)
        except ValueError as exc:
            self.errors.append(f"offset {offset}: {exc}")
            return None

    def _split(self, records, final=False):
        """A chunk's records (:meth:`_records`) as each line's ``(widths, starts, gaps_open)``."""
        out = {}
        if records is not None:
            ch, kd, w, ts = records
            if len(ch):
                # Each line's records in order: a stable sort by line (one permutation; on
                # 16-bit keys numpy's is a radix sort).
                order = np.argsort(ch.astype(np.uint16, copy=False) if ch.max() < 1 << 16
                                   else ch, kind="stable")
                count = np.bincount(ch)
                kd, w = kd[order], w[order].astype(np.int64, copy=False)
                ts = ts[order] if ts is not None else None
                ends = np.cumsum(count).tolist()
                for c in np.flatnonzero(count).tolist():
                    a, b = ends[c] - int(count[c]), ends[c]
                    out[c] = self._line(c, kd[a:b], w[a:b], None if ts is None else ts[a:b])
        for c in list(self.held):
            if c not in out:
                none = np.zeros(0, dtype=np.int64)
                out[c] = (none, none, np.zeros(0, dtype=bool))
        if final:
            for c, (hw, hs, hg) in list(self.held.items()):
                w, s, g = out[c]
                out[c] = (np.r_[w, hw], None if hs is None else np.r_[s, hs],
                          None if hs is None else np.r_[g, hg])
            self.held = {}
        return out

    def _line(self, c, kd, w, ts):
        """One line's chunk: whole pulses (saturated ones with their BUSY ticks), the losses'
        stretches left out; the held-back pulse first, the last one held back. With starts,
        also whether each pulse's idle time before it spans pulses not in the sequence (a
        SUMMARY's, a partial pulse's, those left out with a loss:
        ``Measurement.pulse_gaps_open``)."""
        end = ts
        hidden = None
        if ts is not None:
            # The pulses not in the sequence up to each record (a SUMMARY's count, a partial
            # pulse), from the chunk's start.
            hidden = np.cumsum(np.where(kd == SUMMARY_KIND, w & COUNT_MAX,
                                        kd == EventKind.PARTIAL))
            hidden_end = int(hidden[-1]) if len(hidden) else 0
        summary, late = kd == SUMMARY_KIND, kd == LATE_KIND
        if summary.any() or late.any():
            # The trace summariser's records (docs/link.md, "Trace summary"): a SUMMARY stands
            # for pulses not in the sequence (counted), a LATE record is the run's last pulse,
            # which ended the SUMMARY's age before its record.
            self.summarised[c] = (self.summarised.get(c, 0)
                                  + int((w[summary] & COUNT_MAX).sum()))
            if ts is not None and late.any():
                ages = np.zeros(len(kd), dtype=np.int64)
                at = np.flatnonzero(late)
                before = at - 1
                inside = before >= 0
                ages[at[inside]] = np.where(kd[before[inside]] == SUMMARY_KIND,
                                            w[before[inside]] >> COUNT_BITS, 0)
                if not inside.all():
                    ages[at[~inside]] = self._age.get(c, 0)
                end = ts - ages
            if kd[-1] == SUMMARY_KIND:
                self._age[c] = int(w[-1]) >> COUNT_BITS
            kd = np.where(late, EventKind.END, kd)
            kd, w = kd[~summary], w[~summary]
            ts = None if ts is None else ts[~summary]
            end = None if end is None else end[~summary]
            hidden = None if hidden is None else hidden[~summary]
        busy = kd == EventKind.BUSY
        if busy.any():
            # Each BUSY record adds its ticks to the pulse before it (a saturated one).
            idx = np.flatnonzero(~busy)
            owner = np.searchsorted(idx, np.flatnonzero(busy), side="right") - 1
            w = w.copy()
            inside = owner >= 0
            np.add.at(w, idx[owner[inside]], w[np.flatnonzero(busy)[inside]])
            if (~inside).any() and c in self.held:
                hw, hs, hg = self.held[c]
                self.held[c] = (hw + w[np.flatnonzero(busy)[~inside]].sum(), hs, hg)
            kd, w = kd[~busy], w[~busy]
            ts = None if ts is None else ts[~busy]
            end = None if end is None else end[~busy]
            hidden = None if hidden is None else hidden[~busy]
        st = None  # (starts=False)
        if ts is not None:
            st = end - np.where(kd == EventKind.OVERLONG, self.params.max_width, w)
        whole = (kd == EventKind.END) | (kd == EventKind.OVERLONG)
        spans = self.losses.get(c)
        if spans:
            out = np.zeros(len(ts), dtype=bool)
            for a, b in spans:
                out |= (ts > a) & (ts <= b)
            self.excluded[c] = self.excluded.get(c, 0) + int((out & whole).sum())
            if hidden is not None and len(out):
                left = np.cumsum(out & whole)
                hidden = hidden + left
                hidden_end += int(left[-1])
            whole &= ~out
        w = w[whole]
        gap = None
        if st is not None:
            st = st[whole]
            # Pulses hidden since the line's last pulse in the sequence (``_hidden``: those
            # at the end of the chunks before).
            at = hidden[whole]
            carry = self._hidden.get(c, 0)
            gap = np.diff(at, prepend=-carry) > 0
            self._hidden[c] = hidden_end - int(at[-1]) if len(at) else carry + hidden_end
        if c in self.held:
            hw, hs, hg = self.held.pop(c)
            w = np.r_[hw, w]
            if st is not None:
                st, gap = np.r_[hs, st], np.r_[hg, gap]
        if len(w):
            self.held[c] = (w[-1:], None if st is None else st[-1:],
                            None if gap is None else gap[-1:])
            w, st, gap = w[:-1], (None if st is None else st[:-1]), (
                None if gap is None else gap[:-1])
        return w, st, gap


class _Child:
    """``fn(*args)`` computed in a forked process (``fork``; else here, when asked for):
    :meth:`result` returns its value or raises its exception, as the call would."""

    def __init__(self, fn, *args, fork=True):
        self.fn, self.args = fn, args
        self.proc = None
        if fork:
            ctx = mp.get_context("fork")
            self.recv, send = ctx.Pipe(duplex=False)
            self.proc = ctx.Process(target=_child_main, args=(send, fn, args), daemon=True)
            self.proc.start()
            send.close()

    def result(self):
        if self.proc is None:
            return self.fn(*self.args)
        try:
            ok, value = self.recv.recv()
        except EOFError:
            ok, value = False, RuntimeError(f"the process computing {self.fn.__name__} ended "
                                            f"early")
        finally:
            self.close()
        if not ok:
            raise value
        return value

    def close(self):
        if self.proc is not None:
            self.recv.close()
            if self.proc.is_alive():
                self.proc.terminate()
            self.proc.join()
            self.proc = None


def _child_main(conn, fn, args):
    try:
        out = (True, fn(*args))
    except BaseException as exc:  # (raised again by the parent)
        out = (False, exc)
    try:
        conn.send(out)
    except Exception as exc:  # (a value or exception that does not pickle)
        conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


class _Ahead:
    """A :class:`TraceScanner`'s chunks, each line's widths only (``(offset, {line: widths})``),
    their records read and unpacked by another process (forked, :meth:`TraceScanner.chunks`)
    while this one splits them by line and classifies the chunk before: the same chunks, in
    the same order, with a chunk or two in the pipe between them (bounded memory). With
    a small file, or one CPU (:func:`~rbscope.device.capture.read_ahead`), the scanner runs
    here. ``excluded``, ``summarised`` and ``errors`` are the scanner's once the chunks are
    read."""

    def __init__(self, scan):
        self.scan = scan
        self.chunk = scan.chunk
        self.excluded = scan.excluded
        self.summarised = scan.summarised
        self.errors = scan.errors

    def __iter__(self):
        scan = self.scan
        if not capture.read_ahead(scan.path):
            for end, chunk in scan:
                yield end, {c: w for c, (w, *_) in chunk.items()}
            return
        for msg in capture.forked_messages(_read_ahead, (self.scan,), self.scan.path):
            if msg[0] == "chunk":
                _, end, records, final = msg
                chunk = scan._split(records, final)
                yield end, {c: w for c, (w, *_) in chunk.items()}
            elif msg[0] == "done":
                self.errors.extend(msg[1])
                return
            else:
                raise msg[1]


def _read_ahead(conn, scan):
    """The read-ahead process of :class:`_Ahead`: each chunk's widths, then the scanner's
    accounting (or the exception it raised), sent on ``conn``."""
    try:
        for end, records, final in scan.chunks():
            if records is not None:
                ch, kd, w, ts = records
                # (TRACE frames' records come as int64: narrower when the values fit, as
                # they do for the protocol's fields; fewer bytes through the pipe.)
                if ch.dtype == np.int64 and (not len(ch) or (
                        ch.max() < 1 << 16 and 0 <= kd.min() and kd.max() < 1 << 8
                        and 0 <= w.min() and w.max() < 1 << 32)):
                    records = (ch.astype(np.uint16), kd.astype(np.uint8), w.astype(np.uint32),
                               ts)
            conn.send(("chunk", end, records, final))
        conn.send(("done", scan.errors))
    except BaseException as exc:  # (raised again by the reader)
        capture.send_failure(conn, exc)
    finally:
        conn.close()


#: glibc's ``mallopt`` parameters (``malloc.h``) and what :func:`hold_freed_memory` sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
HOLD_TRIM_BYTES = 1 << 30
HOLD_MMAP_BYTES = 32 << 20  # (glibc's largest)


def hold_freed_memory():
    """Ask the C library's allocator to keep the memory a pass frees for its next chunk.

    The passes allocate and free a chunk's arrays (megabytes each) thousands of times; by
    default glibc returns them to the kernel each time, and every page of the next chunk's
    arrays then costs a page fault and zeroing: on the 24-hour, 64-line capture of
    ``benchmarks/analyze_day.py`` 230 of the analysis's 917 CPU seconds were the kernel's. With
    a trim threshold of 1 GiB and arrays under 32 MiB taken from the heap, that memory is
    reused (peak memory does not change: the chunks are bounded). Process-wide, so for a
    process that only analyses (``rbscope analyze`` calls it; forked read-ahead processes
    inherit it). Returns whether the allocator took it (False off glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_TRIM_THRESHOLD, HOLD_TRIM_BYTES)) and bool(
        mallopt(_M_MMAP_THRESHOLD, HOLD_MMAP_BYTES))


# The two passes ----------------------------------------------------------------------------


def _windows(path, params, seq, n_lines, *, windows=None, per_line=None):
    """The fit windows: ``[{line: (widths, starts)}]``, one per window, each starting at an
    even fraction of the file and holding about ``per_line / windows`` pulses of every line
    (fewer where the next window starts first: no pulse is in two windows)."""
    windows = windows or FIT_WINDOWS
    per_line = per_line or FIT_PULSES
    size = os.path.getsize(path)
    want = max(per_line // windows, 50)
    out = []
    for i in range(windows):
        at = int(size * i / windows)
        scan = TraceScanner(path, params, from_tick=seq["from_tick"], to_tick=seq["to_tick"],
                            chunk=max(4096, want * n_lines // 2),
                            losses=seq.get("losses", ()), start=at,
                            stop=int(size * (i + 1) / windows))
        got = {}
        for _end, lines in scan:
            for c, (w, s, g) in lines.items():
                pw, ps, pg = got.get(c, (np.zeros(0, np.int64), np.zeros(0, np.int64),
                                         np.zeros(0, bool)))
                got[c] = (np.r_[pw, w][:want], np.r_[ps, s][:want], np.r_[pg, g][:want])
            if len(got) >= n_lines and all(len(v[0]) >= want for v in got.values()):
                break
        out.append(got)
    return out


def _joined(windows):
    """Each line's pulses of several windows, one after the other (a window's first pulse
    follows the previous window's last after an idle gap of hours, which spans the pulses
    between the windows: an open gap), as ``(pulses, starts, open gaps)``: the latter's
    indices as ``Measurement.pulse_gaps_open``'s."""
    keys = sorted({k for w in windows for k in w})
    pulses, starts, gaps_open = {}, {}, {}
    for k in keys:
        ws = [w[k] for w in windows if k in w and len(w[k][0])]
        if not ws:
            continue
        pulses[k] = np.concatenate([x[0] for x in ws])
        starts[k] = np.maximum.accumulate(np.concatenate([x[1] for x in ws]))
        g = np.concatenate([x[2] for x in ws])
        g[np.cumsum([len(x[0]) for x in ws])[:-1]] = True
        if len(g):
            g[0] = False
        gaps_open[k] = np.flatnonzero(g)
    return pulses, starts, gaps_open


_ADDITIVE = ("program_pulses", "program_var", "erase_pulses", "multiplane_pages", "announced",
             "ambiguous_short", "undecided", "multiplane_pulses", "unit_var", "suspended",
             "suspect", "resumable", "paced", "paced_open", "heads", "balance_shift",
             "slc_programs", "gap_moved", "read_modes_open")


def _extrapolate(core, full_w, core_w, n_all):
    """``core`` (the whole line, streamed rules) plus the other rules' effect measured on the
    windows (``full_w - core_w``), scaled from the windows' pulses to the line's."""
    x = n_all / full_w.pulses if full_w.pulses else 0.0
    d = DieResult(core.pulses, dict(core.expected), 0, 0, 0, 0, core.erase_cap)
    for name in _ADDITIVE:
        v = getattr(core, name) + (getattr(full_w, name) - getattr(core_w, name)) * x
        setattr(d, name, max(v, 0.0) if name not in ("multiplane_pages",) else v)
    for n in d.expected:
        d.expected[n] = max(0.0, core.expected[n] + (full_w.expected.get(n, 0.0)
                                                     - core_w.expected.get(n, 0.0)) * x)
    d.unit_pulses = core.units + (full_w.units - core_w.units) * x
    d.program_pulses = min(d.program_pulses, float(core.pulses))
    if core.erase_cap is not None and full_w.erase_cap is not None and \
            core_w.erase_cap is not None:
        d.erase_cap = core.erase_cap + (full_w.erase_cap - core_w.erase_cap) * x
    d.load_bits = full_w.load_bits
    if full_w.resume_slack is not None:
        d.resume_slack = tuple(v * x for v in full_w.resume_slack)
        d.resume_var = full_w.resume_var * x
    return d


def stream_classify(path, measurement, geometry=None, *, trained=None, hints=None,
                    progress=None, **kw):
    """Classify a capture's pulse sequences in two passes of bounded memory.

    ``measurement`` is the capture's :class:`~rbscope.analysis.measurement.Measurement` read
    without its pulses (``capture_to_measurement(path, sequence=False)``), whose
    ``provenance["sequence"]`` says which records are the last epoch's and where records were
    lost. Returns a :class:`SequenceResult` like
    :func:`~rbscope.analysis.sequence.classify_measurement`'s, with ``streaming`` (a JSON-able
    dict: windows, pulses, drift) set, and the measurement's ``pulses_lost`` filled in.
    """
    seq = measurement.provenance.get("sequence")
    if not seq or not seq.get("streamed"):
        raise SequenceError("the capture holds no pulse records to stream")
    if seq.get("losses_capped"):
        raise SequenceError("records were lost in more stretches between snapshots than are "
                            "kept")
    params = measurement.params
    lines = sorted(int(c) for c in seq["lines"])
    for c in lines:
        v = seq["lines"][str(c)]
        if v["lost"] > 0.1 * max(v["counted"], 1):
            raise SequenceError(f"line {c}: {v['lost']:,} of its {v['counted']:,} pulses' "
                                f"records lost (at most 10 % may be missing)")
    hints, ppb = geometry_options(geometry, hints, kw)
    hints = {k: (max(lo, 1e-3), max(hi, lo * 1.01, 1e-3)) for k, (lo, hi) in
             (hints or {}).items()}
    tick_us = measurement.tick_seconds * 1e6
    # Pass 1: the fit windows.
    wins = _windows(path, params, seq, len(lines))
    pulses_w, starts_w, open_w = _joined(wins)
    late_p, late_s, late_o = _joined(wins[-LATE_WINDOWS:])
    if not pulses_w:
        raise SequenceError("the capture's fit windows hold no pulse")

    def fit(p, s, o):
        return classify(p, measurement.tick_seconds, pages_per_block=ppb, hints=hints,
                        starts=s, open_gaps=o, trained=trained, **kw)

    # The late windows' refit (the drift check) runs alongside in a second process.
    late_fit = _Child(fit, late_p, late_s, late_o, fork=capture.read_ahead(path))
    try:
        full = fit(pulses_w, starts_w, open_w)
    except BaseException:
        late_fit.close()
        raise
    erase_slack = 0.25

    def model_of(r):
        return StreamModel(r, tick_us, ppb, erase_slack, single_plane=kw.get("planes") == 1,
                           bits=kw.get("bits"))

    model = model_of(full)
    core_w, decisions = apply_model(model, pulses_w)
    # Drift: refit on the late windows; both models on them.
    drift = {"windows": LATE_WINDOWS}
    late_rate = {}
    try:
        late = late_fit.result()
    except SequenceError as exc:
        late = None
        drift["refit"] = f"not refitted ({exc})"
    if late is not None:
        a, _ = apply_model(model, late_p, decisions)
        b, _ = apply_model(model_of(late), late_p)
        ua = sum(d.units + d.multiplane_pages for d in a.values())
        ub = sum(d.units + d.multiplane_pages for d in b.values())
        n_late = sum(d.pulses for d in a.values())
        drift["programs_per_pulse"] = [ua / max(n_late, 1), ub / max(n_late, 1)]
        drift["relative"] = (ub - ua) / ua if ua else 0.0
        for k, d in b.items():
            if k in late.dies and d.pulses:
                late_rate[k] = (late.dies[k].units - d.units) / d.pulses
    # Pass 2: every pulse, chunk by chunk (read ahead by another process).
    streams = {c: LineStream(model, decisions.get(c)) for c in lines}
    scan = _Ahead(TraceScanner(path, params, from_tick=seq["from_tick"],
                               to_tick=seq["to_tick"], losses=seq.get("losses", ()),
                               chunk=CHUNK_RECORDS, starts=False))
    size = os.path.getsize(path)
    with contextlib.closing(iter(scan)) as chunks:
        for end, chunk in chunks:
            for c, w in chunk.items():
                if c in streams and len(w):
                    if (w <= 0).any():
                        raise SequenceError(f"line {c}: a record gives a width of 0 ticks")
                    streams[c].feed(w)
            if progress is not None:
                progress(end, size)
    dies = {}
    rel = abs(drift.get("relative", 0.0))
    lost = {}
    for c in lines:
        core = streams[c].result()
        if c in full.dies and c in core_w:
            d = _extrapolate(core, full.dies[c], core_w[c], core.pulses)
            if core_w[c].pulses and c in late_rate:
                rate_all = (full.dies[c].units - core_w[c].units) / core_w[c].pulses
                unit = d.units / d.program_pulses if d.program_pulses else 1.0
                d.gap_moved += abs(late_rate[c] - rate_all) * core.pulses / unit
            d.gap_moved += rel * d.program_pulses
        else:
            d = core
        dies[c] = d
        v = seq["lines"][str(c)]
        missing = v["lost"] + scan.excluded.get(c, 0)
        if missing:
            lost[c] = missing
    measurement.pulses_lost = lost
    n_all = sum(d.pulses for d in dies.values())
    notes = list(full.notes)
    drift_note = ""
    if "relative" in drift:
        drift_note = (f"a model refitted on the last {LATE_WINDOWS} windows finds "
                      f"{drift['relative']:+.2%} programs per pulse on them")
    result = SequenceResult(full.states, full.transitions, dies, full.loglik, full.iterations,
                            full.pages_per_block, full.erase_capped, notes,
                            balanced=full.balanced, mode="sequence", prior=full.prior,
                            grid=full.grid, rest_rate_hi=full.rest_rate_hi)
    measurement.pulses_summarised = {c: n for c, n in scan.summarised.items()
                                     if n and c in lines}
    counted = {c: seq["lines"][str(c)]["whole"] - seq["lines"][str(c)]["lost"]
               - scan.excluded.get(c, 0) - scan.summarised.get(c, 0) for c in lines}
    edge = {c: dies[c].pulses - counted[c] for c in lines if dies[c].pulses != counted[c]}
    for c, e in edge.items():
        if abs(e) > max(2, 0.001 * counted[c]):
            # (The records of a pulse classified while a snapshot's row was read may fall on
            # either side of the epoch's ends: a record or two.)
            raise SequenceError(f"line {c}: its {dies[c].pulses:,} pulse records of the epoch "
                                f"do not fit its counts ({counted[c]:,} whole pulses)")
    result.streaming = {
        "windows": FIT_WINDOWS, "fit_pulses": sum(len(v) for v in pulses_w.values()),
        "fit_pulses_per_line": FIT_PULSES, "pulses": n_all, "chunk_records": scan.chunk,
        "drift": drift, "drift_warn": DRIFT_WARN, "edge": {str(k): v for k, v in edge.items()},
        "order_rules_extrapolated": {str(k): (full.dies[k].units - core_w[k].units)
                                     for k in lines if k in full.dies and k in core_w},
        "scan_errors": scan.errors[:20]}
    result.streaming_note = (
        f"streamed: {n_all:,} pulses classified in chunks of {scan.chunk:,} records with "
        f"the model fitted on {FIT_WINDOWS} windows spread over the file "
        f"({result.streaming['fit_pulses']:,} pulses); " + (drift_note or drift.get("refit", "")))
    if rel > DRIFT_WARN:
        result.streaming["drift_warning"] = (
            f"the model no longer fits the capture's end: {drift_note} than the model fitted on "
            f"all windows (more than {DRIFT_WARN:.0%}); the interval includes the difference")
    return result

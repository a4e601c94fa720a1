"""A capture's TRACE records as each line's pulse sequence, with exact accounting.

The sniffer sends one TRACE record per front-end event while ``TRACE_ENABLE`` is set
(``docs/link.md``, "Trace"): ``END`` (a whole pulse: its width), ``OVERLONG`` (a pulse reached
the width counter's maximum; ``BUSY`` records carry its further ticks) and ``PARTIAL`` (a pulse
not observed whole). ``timestamp`` is the tick at which the pipeline classified the event, a few
cycles after the pulse ended, so a pulse's start is ``timestamp − width`` to within that
latency (``4(N+1) + 1`` clock cycles at most, well under a tick at the usual prescalers).

A record that finds the link's FIFO full is dropped and counted (``trace_lost``, per channel in
COUNTERS, cumulative since power-up). :class:`PulseRecords` rebuilds each line's pulses and
checks them against the counters of the last epoch (a CLEAR starts one): a line's sequence is
*complete* when no record was lost during the epoch and its records of each kind number
exactly the pulses its counters hold (``END``: the class counters plus ``UNCLASSIFIED``;
``OVERLONG``; ``PARTIAL``). A line that lost records (at most :data:`LOST_SHARE_MAX` of its
pulses) is still *usable*: the stretches between two snapshots in which it lost no record are
its sequence, and the pulses of the others (lost or received: the order is broken there) are
counted as missing, exactly (the analysis classifies the sequence and bounds the missing pulses
in the interval). Beyond that share, or when records are missing without a loss count (records not
enabled for the whole epoch), the line is reported with what is missing and the histograms are
classified instead. When and where records were lost (between which two snapshots, on which
line) is reported too.

A build with the trace summariser (``TRACE_SUMMARY``, ``docs/link.md`` "Trace summary") sends a
run of pulses of the classes the host chose as its first pulse (an ``END`` record), a
``SUMMARY`` record (the number of pulses between the first and the last, and how long before
the record the last one ended) and a ``LATE`` record (the last pulse's width and class), the
two stamped with the time the run ended. Here a SUMMARY is kept as one entry that stands for
its pulses (they count as whole pulses of the epoch, but have no width nor time: they are not
in the sequence, ``summarised`` says how many a line has), and a LATE record as the whole
pulse it is, ending its age before its record. The accounting below counts pulses, a
SUMMARY's as many as it says. The summariser closes every run at each snapshot and at a
clear, so a snapshot's count ends on a record.

Which records belong to the last epoch: the sniffer's timestamp counts ticks since power-up (a
clear does not reset it), and records come in the order the pulses were classified, so the
epoch's records of a line are a run as long as its last snapshot's count, which ends where that
count does and starts where the epoch's first snapshot's count says (records the previous
epoch counted before the clear come before it). A snapshot's counters are read while its frames
are sent, so a pulse classified during that time may or may not be counted: the run is the one
that both snapshots' counts allow (``PulseRecords._line``).
"""

from array import array

import numpy as np

from rbscope.gateware.link.summary import COUNT_BITS, COUNT_MAX, LATE_KIND, SUMMARY_KIND
from rbscope.gateware.rb_sniffer.params import Counter, EventKind

__all__ = ["PulseRecords", "MAX_RECORDS", "LOST_SHARE_MAX"]

#: Most pulses kept over all lines (17 bytes each): beyond it the sequence is truncated and the
#: histograms classify (``Measurement.pulses_truncated``).
MAX_RECORDS = 20_000_000

#: Most of a line's pulses that may be missing from its sequence (lost records, and the records
#: of the stretches between two snapshots in which records were lost) for the rest still to be
#: its sequence: the sequence classifier then classifies the complete stretches and the missing
#: pulses are bounded in the interval (none to all of them programs); beyond it the histograms
#: classify the line.
LOST_SHARE_MAX = 0.10

#: Loss intervals kept for the report (per channel and time); beyond it only the totals.
MAX_LOSS_SPANS = 10_000

_END, _OVERLONG, _PARTIAL, _SUMMARY = 0, 1, 2, 3


class _Mark:
    """What one snapshot says of each channel: the pulses of each record kind counted, the
    cumulative records lost, and when its counters were read.

    A snapshot's STATUS time is latched as its first frame starts; each channel's row is read
    word by word while its COUNTERS frame is sent (that frame's own time, plus at most one frame
    time), so the row counts every pulse classified up to the STATUS time and perhaps some
    classified up to ``read_by``."""

    __slots__ = ("timestamp", "epoch", "counted", "lost", "read_by")

    def __init__(self, snap, params):
        k = params.classes
        self.timestamp = snap.status.timestamp
        self.epoch = snap.status.epoch
        self.counted = []
        for row in snap.counters:
            c = row.counters
            self.counted.append((sum(c[:k]) + c[k + Counter.UNCLASSIFIED],
                                 c[k + Counter.OVERLONG], c[k + Counter.PARTIAL]))
        self.lost = [row.trace_lost for row in snap.counters]
        times = [self.timestamp] + [row.timestamp for row in snap.counters]
        frame = max(max(b - a for a, b in zip(times, times[1:], strict=False)), 0)
        self.read_by = [max(row.timestamp, self.timestamp) + frame for row in snap.counters]


class PulseRecords:
    """Collect TRACE records and snapshots of one device; rebuild the last epoch's sequences.

    Feed it every TRACE frame (:meth:`trace`) and every complete snapshot (:meth:`snapshot`) in
    file order; :meth:`new_device` when the records that follow are another device's.

    Parameters
    ----------
    params : SnifferParams
    max_records : int
        Most records kept over all channels (bounded memory); the rest are counted only.
    """

    def __init__(self, params, max_records=MAX_RECORDS):
        self.params = params
        self.max_records = max_records
        self._reset()

    def _reset(self):
        n = self.params.channels
        self.ts = [array("Q") for _ in range(n)]  # timestamp of each record (event order)
        self.width = [array("Q") for _ in range(n)]  # the pulse's width (ticks; 0: partial)
        self.kind = [array("B") for _ in range(n)]
        # (Per channel: the age, in ticks, of each LATE record's pulse by its index; the age
        # of the SUMMARY just read, for the LATE record that follows it.)
        self.late = [{} for _ in range(n)]
        self.gaps_open = {}  # (set by sequences)
        self._age = {}
        self.summaries = 0
        self.kept = 0
        self.truncated = False
        self._open = {}  # channel -> index of its saturated pulse still being added to
        self._prev = self._first = self._last = None  # the last epoch's delimiting snapshots
        self.prev = self.first = self.last = None  # their _Marks (made by sequences)
        # (from tick, to tick, channel, records lost): the records a line lost between two
        # snapshots (from the first's time to the last moment the second's row was read).
        self.losses = []
        self.losses_capped = False  # more stretches with losses than MAX_LOSS_SPANS
        self.records = 0
        self.malformed = 0

    def new_device(self, params=None):
        """Start afresh (another device's records follow)."""
        if params is not None:
            self.params = params
        self._reset()

    def trace(self, frame):
        """Account one TRACE frame."""
        ch = frame.channel
        if not 0 <= ch < self.params.channels:
            self.malformed += 1
            return
        self.records += 1
        if frame.kind == EventKind.BUSY:
            # More ticks of a saturated pulse: added to it, no record of its own.
            j = self._open.get(ch)
            if j is not None:
                self.width[ch][j] += frame.width
            return
        age = self._age.pop(ch, None)
        late = None
        if frame.kind == EventKind.END:
            kind = _END
        elif frame.kind == SUMMARY_KIND:
            kind = _SUMMARY
            self.summaries += 1
            self._age[ch] = frame.width >> COUNT_BITS
        elif frame.kind == LATE_KIND:
            if age is None:
                self.malformed += 1  # (a LATE record follows its SUMMARY)
                return
            kind, late = _END, age
        elif frame.kind == EventKind.OVERLONG:
            kind = _OVERLONG
        elif frame.kind == EventKind.PARTIAL:
            kind = _PARTIAL
        else:
            self.malformed += 1
            return
        self._open.pop(ch, None)
        if self.kept >= self.max_records:
            self.truncated = True
            return
        if late is not None:
            self.late[ch][len(self.ts[ch])] = late
        self.ts[ch].append(frame.timestamp)
        self.width[ch].append(0 if kind == _PARTIAL else frame.width & COUNT_MAX
                              if kind == _SUMMARY else frame.width)
        self.kind[ch].append(kind)
        self.kept += 1
        if kind == _OVERLONG:
            self._open[ch] = len(self.ts[ch]) - 1

    def snapshot(self, snap):
        """Account one complete snapshot (its epoch, counts and losses). Cheap: the snapshots
        that delimit the last epoch are kept as they are, and the losses compared only once
        records have come."""
        if self._last is not None and snap.status.epoch != self._last.status.epoch:
            self._prev, self._first = self._last, snap
        elif self._first is None:
            self._first = snap
        if self.records and self._last is not None:
            before = self._last.counters
            mark = None
            for ch, row in enumerate(snap.counters):
                if row.trace_lost == before[ch].trace_lost:
                    continue
                mark = mark or _Mark(snap, self.params)
                if len(self.losses) < MAX_LOSS_SPANS:
                    self.losses.append((self._last.status.timestamp, mark.read_by[ch], ch,
                                        (row.trace_lost - before[ch].trace_lost) & 0xFFFFFFFF))
                else:
                    self.losses_capped = True
        self._last = snap

    def sequences(self, channels):
        """The last epoch's pulse sequence of each of ``channels``, and the accounting.

        Returns
        -------
        (pulses, starts, report)
            ``pulses`` and ``starts``: ``{channel: array('Q')}`` of widths and start ticks of
            the epoch's whole pulses (saturated ones with their full width; partial ones left
            out), both empty unless every channel's sequence is usable: complete, or short of
            at most :data:`LOST_SHARE_MAX` of its pulses by records the link lost (counted).
            ``report``: a dict (JSON members) with ``records`` (TRACE records read),
            ``complete`` (bool: nothing lost), ``usable`` (bool), ``lost`` (records lost in
            the epoch, all lines), ``losses`` (``[from tick, to tick, channel, records]``: when
            and where they were lost, between two snapshots), ``lines`` (per channel:
            ``records``, ``counted``, ``lost``, ``edge``, ``excluded`` (records received in
            the stretches with losses, left out), ``missing`` (pulses not in the sequence:
            lost plus excluded) and, when unusable, ``why``) and ``why`` (one sentence, when
            unusable).

            After the call ``gaps_open`` holds, per channel of ``pulses``, the indices of the
            pulses whose idle time before them spans pulses not in the sequence (those of a
            SUMMARY, a partial pulse, or the records left out with a loss):
            ``Measurement.pulse_gaps_open``.
        """
        self.gaps_open = {}
        report = {"records": self.records, "complete": False, "usable": False, "lost": 0,
                  "losses": [], "lines": {}}
        mark = {}  # id(snapshot) -> _Mark
        for snap in (self._prev, self._first, self._last):
            if snap is not None and id(snap) not in mark:
                mark[id(snap)] = _Mark(snap, self.params)
        self.prev, self.first, self.last = (None if snap is None else mark[id(snap)] for snap in
                                            (self._prev, self._first, self._last))
        if self.last is None:
            report["why"] = "no complete snapshot to check the records against"
            return {}, {}, report
        if self.truncated:
            report["why"] = (f"more than {self.max_records:,} pulse records: only the first "
                             f"were kept")
            report["truncated"] = True
            return {}, {}, report
        pulses, starts, bad = {}, {}, []
        gaps_open = self.gaps_open = {}
        for ch in channels:
            line, why, run = self._line(ch)
            report["lines"][str(ch)] = line
            if why:
                line["why"] = why
                bad.append(ch)
                continue
            ts = np.frombuffer(self.ts[ch], dtype=np.uint64)[run].astype(np.int64)
            w = np.frombuffer(self.width[ch], dtype=np.uint64)[run].astype(np.int64)
            kind = np.frombuffer(self.kind[ch], dtype=np.uint8)[run]
            end = ts
            if self.late[ch]:
                # A LATE record's pulse ended its age before the record.
                end = ts.copy()
                for j, age in self.late[ch].items():
                    if run.start <= j < run.stop:
                        end[j - run.start] -= age
            summary = kind == _SUMMARY
            if summary.any():
                line["summarised"] = int(w[summary].sum())
            whole = (kind != _PARTIAL) & ~summary
            # The pulses before each whole one that are not in the sequence (a SUMMARY's,
            # a partial pulse): the idle time before it spans them.
            hidden = np.cumsum(np.where(summary, w, kind == _PARTIAL))[whole]
            gap_open = np.diff(hidden, prepend=hidden[:1]) > 0
            ts, w, kind, end = ts[whole], w[whole], kind[whole], end[whole]
            if line["lost"] and self.losses_capped:
                line["why"] = (f"records were lost in more than {MAX_LOSS_SPANS:,} stretches "
                               f"between snapshots")
                bad.append(ch)
                continue
            if line["lost"]:
                # The stretches between two snapshots in which the line lost records: their
                # records received are left out too (the order is broken there), so the
                # sequence is the complete stretches, and every pulse of the lossy ones is
                # counted as missing.
                keep = np.ones(len(ts), dtype=bool)
                for a, b, c, _ in self.losses:
                    if c == ch:
                        keep &= ~((ts > a) & (ts <= b))
                line["excluded"] = int((~keep).sum())
                left = np.cumsum(~keep)[keep]
                gap_open = gap_open[keep] | (np.diff(left, prepend=left[:1]) > 0)
                ts, w, kind, end = ts[keep], w[keep], kind[keep], end[keep]
            line["missing"] = line["lost"] + line.get("excluded", 0)
            if line["missing"] > LOST_SHARE_MAX * line["counted"]:
                line["why"] = (f"{line['missing']:,} of its {line['counted']:,} pulses are in "
                               f"stretches where the link lost records (its FIFO was full; "
                               f"at most {LOST_SHARE_MAX:.0%} may be)")
                bad.append(ch)
                continue
            if (w <= 0).any():
                line["why"] = "a record gives a width of 0 ticks"
                bad.append(ch)
                continue
            # A pulse ends when it is classified, within the pipeline's latency: its start is
            # its record's time less its width (held in order: the latency varies by a tick);
            # a saturated pulse's record came when it reached the maximum width.
            first = np.where(kind == _OVERLONG, self.params.max_width, w)
            st = np.maximum.accumulate(np.maximum(end - first, 0))
            pulses[ch] = array("Q", w.astype(np.uint64).tobytes())
            starts[ch] = array("Q", st.astype(np.uint64).tobytes())
            if len(gap_open) > 1 and gap_open[1:].any():
                gaps_open[ch] = array("Q", (np.flatnonzero(gap_open[1:]) + 1).astype(
                    np.uint64).tobytes())
        if bad:
            first = report["lines"][str(bad[0])]["why"]
            report["why"] = (f"line{'s' if len(bad) > 1 else ''} "
                             f"{', '.join(str(c) for c in bad)}: {first}"
                             + (" (and others)" if len(bad) > 1 else ""))
            self.gaps_open = {}
            return {}, {}, report
        base = self.prev if self.prev is not None else self.first
        report["lost"] = sum(report["lines"][str(ch)]["lost"] for ch in channels)
        report["summarised"] = sum(report["lines"][str(ch)].get("summarised", 0)
                                   for ch in channels)
        report["losses"] = [list(x) for x in self.losses
                            if x[0] >= base.timestamp and x[2] in channels]
        report["usable"] = True
        report["complete"] = not report["lost"]
        return pulses, starts, report

    def _line(self, ch):
        """``(line report, why not complete or None, slice of the epoch's records)``.

        The epoch's records are a run of ``n`` (the pulses the last snapshot counted) in the
        channel's record order. The run ends where the last snapshot's count does: after the
        records up to its STATUS time, before those after its row was read; it starts where the
        first snapshot of the epoch says (its count of the epoch's pulses, read the same way),
        and after every record the previous epoch's last snapshot counted. Where a record was
        classified while a row was being read the run's ends may be uncertain by a record;
        ``edge`` says by how many records (0 when exact).
        """
        first, last, prev = self.first, self.last, self.prev
        counted = last.counted[ch]
        n_all = sum(counted)
        base = prev if prev is not None else first
        lost = (last.lost[ch] - base.lost[ch]) & 0xFFFFFFFF
        lost0 = (first.lost[ch] - base.lost[ch]) & 0xFFFFFFFF  # before the first snapshot
        line = {"records": 0, "counted": n_all, "lost": lost}
        if lost > LOST_SHARE_MAX * n_all:
            return line, (f"{lost:,} of its {n_all:,} pulses' records lost (the link's FIFO was "
                          f"full; at most {LOST_SHARE_MAX:.0%} may be missing)"), None
        n = n_all - lost  # the pulses whose records the epoch sent
        ts = np.frombuffer(self.ts[ch], dtype=np.uint64)
        kind_all = np.frombuffer(self.kind[ch], dtype=np.uint8)
        summary = kind_all == _SUMMARY
        # ``pulses[i]``: the pulses the records before record ``i`` stand for (a SUMMARY as
        # many as it counts, every other record one).
        if summary.any():
            weight = np.where(summary, np.frombuffer(self.width[ch], dtype=np.uint64), 1)
            pulses = np.concatenate(([0], np.cumsum(weight, dtype=np.int64)))
        else:
            pulses = np.arange(len(ts) + 1, dtype=np.int64)
        total = int(pulses[-1])

        def upto(t):
            return int(pulses[np.searchsorted(ts, t, side="right")])

        n0 = sum(first.counted[ch]) - lost0
        lo = max(upto(last.timestamp) - n, upto(first.timestamp) - n0,
                 upto(prev.timestamp) if prev is not None else 0, 0)
        hi = min(upto(last.read_by[ch]) - n, upto(first.read_by[ch]) - n0)
        line["records"] = min(n, max(0, total - lo))
        if hi < 0 or lo + n > total:
            missing = n - line["records"] if lo + n > total else n0 - upto(first.read_by[ch])
            return line, (f"{missing:,} of its {n_all:,} pulses have no record (records were "
                          f"not enabled for the whole epoch, or the capture ended before the "
                          f"device sent them)"), None
        # The epoch's records: from the first record boundary at ``lo`` pulses or more, as
        # many records as make ``n`` pulses (a record boundary: the summariser closes its runs
        # at every snapshot and clear).
        a = int(np.searchsorted(pulses, lo, side="left"))
        fits = lo <= hi and a <= len(ts) and pulses[a] <= hi
        if fits:
            b = int(np.searchsorted(pulses, pulses[a] + n, side="left"))
            fits = b <= len(ts) and pulses[b] == pulses[a] + n
        if not fits:
            return line, (f"its {len(ts):,} records do not fit its counts ({n0 + lost0:,} "
                          f"pulses at the epoch's first snapshot, {n_all:,} at its last)"), None
        line["edge"] = hi - lo
        kinds = np.bincount(kind_all[a:b], minlength=4)
        got = [int(x) for x in kinds[:3]]
        if kinds[_SUMMARY]:
            got[_END] += int(np.frombuffer(self.width[ch], dtype=np.uint64)[a:b][
                summary[a:b]].sum())
        got = tuple(got)
        # Without losses the records of each kind are the counts; with them, at most.
        fits = all(g <= c for g, c in zip(got, counted, strict=True)) and (lost or
                                                                          got == tuple(counted))
        if not fits:
            return line, ("its records of each kind (whole, saturated, partial: "
                          f"{', '.join(str(x) for x in got)}) are not the pulses its "
                          f"counters hold ({', '.join(str(x) for x in counted)}"
                          + (f", {lost:,} lost)" if lost else ")")), None
        return line, None, slice(a, b)

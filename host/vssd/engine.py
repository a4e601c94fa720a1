"""The online reference SSD: host requests one at a time, each with its completion time.

:class:`Engine` runs the reference SSD's FTL (:mod:`rbscope.refssd.ftl`) on every request as it
arrives, expands the NAND operations the request caused with the timing model's durations
(:func:`rbscope.refssd.timing.expand`) and places them on the dies and channels at once:

* a die is busy from its command until its R/B# pulse ends, then ready again after the data out
  of a read and the controller's overhead (drawn per operation, ``timing.overhead``);
* the dies of a channel share its bus: a command sequence (command and address cycles, the data
  in of a program) holds the bus for ``CMD_NS`` plus the data at ``bus_mb_s``; the channel
  serves its dies that have work in the order they became ready, each command in the first
  gap of the bus from its die's ready time (the bus keeps its busy intervals: a later request
  may use the bus before an earlier request's later commands);
* with cache programs (80h-15h) the die's array keeps programming after R/B# rises; the next
  program on the die waits for it, as in the batch model;
* a write's operations start once its data has crossed the host interface (``host_mb_s``);
  a request completes when the last of its operations (and a read's data out) ends, plus the
  host transfer of a read's data and the firmware's overhead: requests queue behind each other
  on busy dies and buses.

What the batch simulator (:func:`rbscope.refssd.simulate`) does differently, on purpose: it
schedules the whole log at the end, so a die's operations from later requests may fill its idle
time before an earlier request's arrival (the batch model has no arrival times). The FTL is the
same object and sees the same requests in the same order, so the true counts (pages programmed
by cause, program operations, erases, reads, host bytes, WA) are identical; the R/B# pulse
counts are identical too except where the expansion looks across request boundaries: cache
program chains (80h-15h) end at each request's last program here, suspensions look only within
a request's operations, and independent plane reads are not overlapped.

Data is kept sparse: a dict of the 512-byte sectors written (a read of a sector never written,
or trimmed, returns zeros), so a drive of any size costs only what the host wrote.
"""

import bisect
import json
import os
from dataclasses import dataclass

import numpy as np

from rbscope.refssd.drive import RefSSDError, load_drive
from rbscope.refssd.ftl import make_ftl
from rbscope.refssd.measure import write_vcd
from rbscope.refssd.sim import Run, ftl_truth, precondition_ftl
from rbscope.refssd.timing import CMD_NS, PULSE_DTYPE, TWB_NS, NandOp, expand, power_on_rows

__all__ = ["Engine", "Completion", "HOST_MB_S", "SECTOR", "READ", "WRITE", "TRIM", "FLUSH"]

#: Host interface rate (MB/s, 1 MB = 1e6 bytes): SATA 6 Gb/s after its 8b/10b coding.
HOST_MB_S = 550.0
#: The sector the engine keeps data in (bytes); requests are whole sectors.
SECTOR = 512
#: Request kinds.
READ, WRITE, TRIM, FLUSH = "read", "write", "trim", "flush"
_KINDS = (READ, WRITE, TRIM, FLUSH)
_ZERO = bytes(SECTOR)


@dataclass(frozen=True)
class Completion:
    """What :meth:`Engine.submit` returns.

    Members
    -------
    arrival_ns, end_ns : int
        When the request arrived and when it completes (model ns).
    operations : int
        NAND operations (R/B# pulses) the request caused.
    data : bytes or None
        The data of a read.
    """

    arrival_ns: int
    end_ns: int
    operations: int
    data: bytes = None

    @property
    def latency_ns(self):
        return self.end_ns - self.arrival_ns


class Engine:
    """The reference SSD taking requests one by one.

    Parameters
    ----------
    drive : Drive, str or path
        A :class:`~rbscope.refssd.drive.Drive`, a preset name or a TOML drive spec.
    seed : int
        Seeds the timing draws and the preconditioning.
    precondition : str
        ``fresh``, ``initial`` or ``steady`` (:data:`rbscope.refssd.sim.PRECONDITIONS`); not
        counted in the truth and not recorded.
    host_mb_s : float
        Host interface rate (default :data:`HOST_MB_S`).
    keep_data : bool
        Keep the written data (off: reads return zeros; for timing-only runs).
    """

    def __init__(self, drive, *, seed=0, precondition="fresh", steady_passes=1.0,
                 host_mb_s=HOST_MB_S, keep_data=True):
        self.drive = d = load_drive(drive)
        if not (isinstance(host_mb_s, (int, float)) and not isinstance(host_mb_s, bool)
                and host_mb_s > 0):
            raise RefSSDError(f"host_mb_s must be a number above 0, not {host_mb_s!r}")
        self.seed = seed
        self.precondition = precondition
        self.ftl = make_ftl(d)
        precondition_ftl(self.ftl, precondition, seed=seed, steady_passes=steady_passes)
        self.rng = np.random.default_rng(seed)
        self.host_ns_per_byte = 1000.0 / host_mb_s
        self.bus_ns_per_byte = 1000.0 / d.bus_mb_s
        self.out_ns = round(d.page_size * self.bus_ns_per_byte)
        self.capacity = d.logical_bytes
        self.keep_data = keep_data
        self.data = {}
        self._done = [0] * d.dies  # log entries of each die already scheduled
        self._ready = [0] * d.dies  # when each die can take its next command
        self._array_free = [0] * d.dies  # when each die's array ends a cached operation
        # Each channel's bus: its busy intervals [start, end) from the earliest request still
        # running on (a later request may use a gap before an earlier one's commands).
        self._bus = [[] for _ in range(d.channels)]
        self._channel = [d.die_location(die)[0] for die in range(d.dies)]
        self._pulses = [[] for _ in range(d.dies)]
        self.retries = 0
        self.suspensions = 0
        self.requests = {k: 0 for k in _KINDS}
        self.end_ns = 0
        if d.power_on:
            start = 1000
            for die in range(d.dies):
                self._place_die_rows({die: power_on_rows(d, self.rng)}, start)

    # Requests ----------------------------------------------------------------------------------

    def _check(self, kind, offset, length, data):
        if kind not in _KINDS:
            raise RefSSDError(f"request kind must be one of {', '.join(_KINDS)}, not {kind!r}")
        if kind == FLUSH:
            return
        for name, v in (("offset", offset), ("length", length)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise RefSSDError(f"{kind}: {name} must be a non-negative integer, not {v!r}")
        if length == 0 or offset % SECTOR or length % SECTOR:
            raise RefSSDError(f"{kind}: offset {offset} and length {length} must be whole "
                              f"{SECTOR}-byte sectors, length above 0")
        if offset + length > self.capacity:
            raise RefSSDError(f"{kind} of {length} bytes at offset {offset} is beyond the "
                              f"drive's {self.capacity} bytes")
        if kind == WRITE and data is not None and len(data) != length:
            raise RefSSDError(f"write: data is {len(data)} bytes, length says {length}")

    def submit(self, kind, offset=0, length=0, arrival_ns=None, data=None):
        """Run one request; return its :class:`Completion`.

        Parameters
        ----------
        kind : str
            ``"read"``, ``"write"``, ``"trim"`` or ``"flush"``.
        offset, length : int
            Byte range (whole 512-byte sectors; ignored for a flush).
        arrival_ns : int, optional
            When the request reaches the drive (model ns; default: when the last operation
            scheduled so far ends, i.e. a host waiting for each request).
        data : bytes, optional
            A write's data (default: zeros).
        """
        self._check(kind, offset, length, data)
        if arrival_ns is None:
            arrival_ns = self.end_ns
        arrival_ns = int(arrival_ns)
        self.requests[kind] += 1
        ftl = self.ftl
        out = None
        xfer = 0
        if kind == WRITE:
            ftl.write(offset, length)
            xfer = round(length * self.host_ns_per_byte)
            if self.keep_data:
                self._store(offset, length, data)
        elif kind == READ:
            ftl.read(offset, length)
            out = self._load(offset, length)
        elif kind == TRIM:
            ftl.trim(offset, length)
            for s in range(offset // SECTOR, (offset + length) // SECTOR):
                self.data.pop(s, None)
        else:
            ftl.flush()
        ops = 0
        new = {}
        for die in range(self.drive.dies):
            log = ftl.log[die]
            if len(log) > self._done[die]:
                new[die] = expand(self.drive, log[self._done[die]:], self.rng, die)
                self._done[die] = len(log)
                ops += len(new[die][0])
        ovh = int(self._draw("overhead", 1)[0])
        nand_end = self._place_die_rows(new, arrival_ns + xfer) if new else arrival_ns
        end = max(nand_end, arrival_ns + xfer)
        if kind == READ:
            end += round(length * self.host_ns_per_byte)
        end += ovh
        return Completion(arrival_ns, end, ops, out)

    def write(self, offset, length, arrival_ns=None, data=None):
        return self.submit(WRITE, offset, length, arrival_ns, data)

    def read(self, offset, length, arrival_ns=None):
        return self.submit(READ, offset, length, arrival_ns)

    def trim(self, offset, length, arrival_ns=None):
        return self.submit(TRIM, offset, length, arrival_ns)

    def flush(self, arrival_ns=None):
        return self.submit(FLUSH, arrival_ns=arrival_ns)

    # Data ----------------------------------------------------------------------------------

    def _store(self, offset, length, data):
        first = offset // SECTOR
        if data is None:
            for s in range(first, first + length // SECTOR):
                self.data.pop(s, None)
            return
        mv = memoryview(bytes(data))
        for i in range(length // SECTOR):
            chunk = mv[i * SECTOR:(i + 1) * SECTOR]
            if chunk == _ZERO:
                self.data.pop(first + i, None)
            else:
                self.data[first + i] = bytes(chunk)

    def _load(self, offset, length):
        first = offset // SECTOR
        get = self.data.get
        return b"".join(get(s, _ZERO) for s in range(first, first + length // SECTOR))

    # Scheduling --------------------------------------------------------------------------------

    def _draw(self, key, n):
        lo, hi = self.drive.timing[key]
        if lo == hi:
            return np.full(n, round(lo * 1000), dtype=np.int64)
        x = self.rng.normal((lo + hi) / 2, (hi - lo) / 4, n)
        return np.rint(np.clip(x, lo, hi) * 1000).astype(np.int64)

    def _place_die_rows(self, new, avail):
        """Give the rows of ``new`` (die → :func:`expand` tuple) their times; return when the
        last ends (a read's data out included)."""
        d = self.drive
        end = avail
        by_channel = {}
        for die in new:
            by_channel.setdefault(self._channel[die], []).append(die)
        CP, P, CR, R = NandOp.CACHE_PROGRAM, NandOp.PROGRAM, NandOp.CACHE_READ, NandOp.READ
        PR = NandOp.PROGRAM_RESUME
        host_paced = d.cache_regime == "host-paced"
        for ch, members in by_channel.items():
            rows = {die: new[die][0] for die in members}
            ops = {die: rows[die]["op"].tolist() for die in members}
            base = {die: new[die][1].tolist() for die in members}
            arr = {die: new[die][2].tolist() for die in members}
            bus_ns = {die: (CMD_NS + np.rint(new[die][6] * self.bus_ns_per_byte))
                      .astype(np.int64).tolist() for die in members}
            ovh = {die: self._draw("overhead", len(ops[die])).tolist() for die in members}
            starts = {die: [0] * len(ops[die]) for die in members}
            widths = {die: [0] * len(ops[die]) for die in members}
            nxt = {die: 0 for die in members}
            for die in members:
                self._ready[die] = max(self._ready[die], avail)
                extras = new[die][7]
                if extras is not None:
                    self.retries += extras["retries"]
                    self.suspensions += extras["suspensions"]
            ready, array_free = self._ready, self._array_free
            busy = self._bus[ch]
            while busy and busy[0][1] <= avail:  # no command starts before this request
                busy.pop(0)
            active = [die for die in members if ops[die]]
            while active:
                die = min(active, key=ready.__getitem__) if len(active) > 1 else active[0]
                i = nxt[die]
                s = _gap(busy, ready[die], bus_ns[die][i])
                t = s + bus_ns[die][i] + TWB_NS
                o = ops[die][i]
                if o == CP or o == CR:
                    w = max(0, array_free[die] - t) + base[die][i]
                    array_free[die] = t + w + arr[die][i]
                elif o == P:
                    w = max(0, array_free[die] - t) + arr[die][i]
                    array_free[die] = t + w
                else:
                    w = base[die][i]
                    if o == R or o == PR:
                        array_free[die] = max(array_free[die], t + w)
                starts[die][i] = t
                widths[die][i] = w
                e = t + w
                ready[die] = e + ovh[die][i] + (self.out_ns if o in (R, CR) else 0)
                if host_paced and o == CP:
                    ready[die] = max(ready[die], array_free[die])
                end = max(end, e + (self.out_ns if o in (R, CR) else 0), array_free[die])
                nxt[die] = i + 1
                if i + 1 == len(ops[die]):
                    active.remove(die)
            for die in members:
                r = rows[die]
                r["start_ns"] = starts[die]
                r["width_ns"] = widths[die]
                self._pulses[die].append(r)
        self.end_ns = max(self.end_ns, end)
        return end

    # Results ---------------------------------------------------------------------------------

    def pulses(self):
        """Per die, the R/B# pulses so far (:data:`PULSE_DTYPE`, in time order)."""
        out = []
        for parts in self._pulses:
            a = np.concatenate(parts) if parts else np.zeros(0, PULSE_DTYPE)
            out.append(a[np.argsort(a["start_ns"], kind="stable")])
        return out

    def truth(self):
        """The FTL's true counts since the start (:class:`rbscope.refssd.sim.Truth`)."""
        pulses = self.pulses()
        ops = np.concatenate([p["op"] for p in pulses]) if pulses else np.zeros(0, np.uint8)
        return ftl_truth(self.ftl, ops, read_retries=self.retries,
                         suspensions=self.suspensions)

    def run(self, name="vssd"):
        """The recording so far as a :class:`~rbscope.refssd.sim.Run` (commands not kept)."""
        pulses = self.pulses()
        end = max((int((p["start_ns"] + p["width_ns"]).max()) for p in pulses if len(p)),
                  default=0)
        return Run(drive=self.drive, workload=name, precondition=self.precondition,
                   pulses=pulses, commands=None, truth=self.truth(),
                   geometry=self.drive.user_geometry(),
                   logical_bytes=self.ftl.host_bytes_written, end_ns=end, seed=self.seed,
                   stats={"requests": dict(self.requests)}, ftl=self.ftl)

    def write_recording(self, path):
        """Write the R/B# pulse trains so far as a VCD (``rb<die>``, 1 ns timescale) that
        ``rbscope analyze`` reads."""
        write_vcd(self.run(), path)

    def truth_dict(self):
        """The truth as a JSON-ready dict, with the drive, the requests and the geometry."""
        t = self.truth().to_dict()
        d = self.drive
        t.update(drive=d.name, page_size=d.page_size, pages_per_block=d.pages_per_block,
                 dies=d.dies, channels=d.channels, planes_per_die=d.planes_per_die,
                 multi_plane=d.multi_plane, requests=dict(self.requests),
                 precondition=self.precondition, seed=self.seed, end_ns=self.end_ns)
        return t

    def write_truth(self, path):
        """Write :meth:`truth_dict` as JSON (written to a temporary name, then renamed)."""
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.truth_dict(), f, indent=1, default=_json_default)
            f.write("\n")
        os.replace(tmp, path)


def _gap(busy, start, length):
    """The earliest time from ``start`` when the bus is free for ``length`` ns; books it.

    ``busy`` is the channel's sorted, disjoint list of ``[start, end)`` intervals.
    """
    t = start
    for a, b in busy:
        if b <= t:
            continue
        if a >= t + length:
            break
        t = b
    bisect.insort(busy, (t, t + length))
    return t


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {v!r}")


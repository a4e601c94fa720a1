"""Capture files: an append-only, self-describing record of everything a device sent.

The format (documented in ``docs/capture.md``) is a 16-byte preamble followed by records::

    preamble  b"\\x89RBSCAP\\r\\n\\x1a\\n" (11 bytes) | version u8 | reserved (4 bytes, zero)
    record    sync 0xA5 | kind u8 | length u32 | host_time_ns i64 | body (length bytes)
              | crc32 u32 (CRC-32/ISO-HDLC over kind, length, host_time_ns and body)

All integers little-endian. Kinds: ``HEADER`` (JSON: file metadata; always the first record),
``FRAME`` (the unstuffed ``header | payload`` of one device frame, exactly as received; decoded
again with the protocol layouts on reading), ``CONFIG`` (JSON: register values), ``EVENT``
(JSON: a host event — reconnect, clear, link statistics, stop …).

A record is written with one ``write`` and flushed (optionally ``fsync``-ed) before the next, so
a crash or unplug can leave at most the last record incomplete; the reader stops at the first
record that is incomplete and reports how many bytes it ignored. A record whose CRC is wrong in
the middle of a file (disk corruption) is reported with its byte offset; the reader then looks
for the next record that checks.
"""

import json
import multiprocessing as mp
import os
import socket
import struct
import time
import zlib
from array import array
from dataclasses import dataclass, field

import numpy as np
from amaranth.lib import data as layouts

from rbscope import __version__
from rbscope.analysis.measurement import Measurement, Probe, SeriesPoint
from rbscope.analysis.presets import identify
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link.protocol import (
    PROTOCOL_VERSION,
    FrameType,
    StatusFlags,
    config_from_registers,
    layout_bytes,
)
from rbscope.gateware.onfi_tap.model import TapCounts
from rbscope.gateware.rb_sniffer.model import FIXED_COUNTERS, ChannelCounts
from rbscope.gateware.rb_sniffer.params import Counter

from .protocol import (
    HEADER_BYTES,
    Counters,
    Histogram,
    Info,
    LinkStats,
    ProtocolError,
    Snapshot,
    Status,
    Trace,
    TraceBatch,
    _Bounded,
    decode_frame_bytes,
    encode_payload,
    frame_bytes,
    info_values,
    params_from_info,
    trace_records,
)
from .traces import PulseRecords, _Mark

__all__ = [
    "MAGIC", "FORMAT_VERSION", "RecordKind", "CaptureRecord", "CaptureWriter", "CaptureReader",
    "CaptureError", "SnapshotSeries", "HistogramAccumulator",
    "capture_to_measurement", "iter_records", "iter_record_blocks", "RecordBlock", "CHUNK_SIZE",
    "MAX_SERIES", "write_sample",
]

MAGIC = b"\x89RBSCAP\r\n\x1a\n"
FORMAT_VERSION = 1
PREAMBLE = struct.Struct("<11sB4x")
SYNC = 0xA5
RECORD = struct.Struct("<BBIq")  # sync, kind, length, host_time_ns
TRAILER = struct.Struct("<I")
#: ``zlib.crc32`` of a record's kind … body followed by its (right) CRC trailer.
_CRC_RESIDUE = zlib.crc32(bytes(4) + zlib.crc32(bytes(4)).to_bytes(4, "little"))
#: Refuse records longer than this (a corrupted length field must not make the reader allocate
#: gigabytes).
MAX_BODY = 1 << 20
#: Longest FRAME body (a device frame is a few hundred bytes at most); a longer FRAME record is
#: corrupt. Also bounds the CRC work a resynchronisation can spend on one false record header.
MAX_FRAME_BODY = 4096
#: The reader reads files in chunks of this many bytes (it never holds the whole file).
CHUNK_SIZE = 4 << 20
#: Read records in bulk (:func:`iter_record_blocks`) where the result is the same; False: one by
#: one (:func:`iter_records`), the reference the bulk readers are tested against.
BULK = True
#: Files larger than this are read ahead by a second process (:func:`iter_record_blocks`'s
#: ``ahead``, the streaming classifier's pass 2) when this one may use two CPUs; None: never.
AHEAD_BYTES = 64 << 20
#: Default bound on the snapshot time series :func:`capture_to_measurement` keeps.
MAX_SERIES = 4096


class RecordKind:
    HEADER = 1
    FRAME = 2
    CONFIG = 3
    EVENT = 4

    names = {1: "header", 2: "frame", 3: "config", 4: "event"}


class CaptureError(ValueError):
    """A capture file cannot be read; the message names the byte offset."""


@dataclass(slots=True)
class CaptureRecord:
    """One record: ``kind``, host receive time (ns since the epoch), file ``offset``, ``body``.

    ``frame`` is the decoded frame of a FRAME record (None if it cannot be decoded, e.g. a
    COUNTERS frame before any INFO), ``data`` the parsed JSON of the other kinds.
    """

    kind: int
    time_ns: int
    offset: int
    body: bytes = field(repr=False)
    frame: object = None
    data: object = None


def _pack(kind, body, time_ns):
    head = RECORD.pack(SYNC, kind, len(body), time_ns)
    crc = zlib.crc32(body, zlib.crc32(head[1:]))
    return head + body + TRAILER.pack(crc)


class CaptureWriter:
    """Append records to a capture file.

    Parameters
    ----------
    path : str or path-like
        Created, or appended to if it exists and is a capture file (a truncated last record of
        an existing file is cut off first so the file stays readable).
    fsync : bool
        ``os.fsync`` after every record (survives power loss; slower).
    meta : dict
        Extra members of the HEADER record.
    """

    def __init__(self, path, *, fsync=False, meta=None):
        self.path = os.fspath(path)
        self.fsync = fsync
        self.records = 0
        exists = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if exists:
            good = CaptureReader.valid_length(self.path)
            self._file = open(self.path, "r+b")
            self._file.truncate(good)
            self._file.seek(good)
            # A new session in an existing file: what the reader checks for a stop record.
            self._write(RecordKind.EVENT, json.dumps({
                "event": "start", "rbscope": __version__, "host": socket.gethostname(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(meta or {})}).encode())
        else:
            self._file = open(self.path, "wb")
            self._file.write(PREAMBLE.pack(MAGIC, FORMAT_VERSION))
            self._write(RecordKind.HEADER, json.dumps({
                "format": "rbscope.device.capture", "version": FORMAT_VERSION,
                "rbscope": __version__, "host": socket.gethostname(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(meta or {}),
            }).encode())

    def _write(self, kind, body, time_ns=None):
        if self._file is None:
            raise ValueError(f"capture file {self.path} is closed")
        if len(body) > MAX_BODY:
            raise ValueError(f"record of {len(body)} bytes is longer than {MAX_BODY}")
        self._file.write(_pack(kind, body, time.time_ns() if time_ns is None else time_ns))
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())
        self.records += 1

    def frame(self, frame, time_ns=None):
        """Record one decoded device frame (its raw bytes as received)."""
        self._write(RecordKind.FRAME, frame.raw, time_ns)

    def raw_frame(self, raw, time_ns=None):
        """Record the unstuffed ``header | payload`` of a frame."""
        self._write(RecordKind.FRAME, bytes(raw), time_ns)

    def config(self, registers, time_ns=None):
        """Record the register values ``{name: value}`` in force from now on."""
        self._write(RecordKind.CONFIG, json.dumps({"registers": dict(registers)}).encode(),
                    time_ns)

    def event(self, event, time_ns=None, **fields_):
        """Record a host event: ``event`` names it, ``fields_`` are JSON members."""
        self._write(RecordKind.EVENT, json.dumps({"event": event, **fields_}).encode(), time_ns)

    def tap(self, counts, phase, time_ns=None):
        """Record a read of the bus tap's counters (a
        :class:`~rbscope.gateware.onfi_tap.model.TapCounts`):
        ``phase`` ``"start"`` or ``"stop"``; the run's opcode counts are their difference."""
        self.event("tap", time_ns, phase=phase, **counts.to_dict())

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Reading -----------------------------------------------------------------------------------------


class HistogramAccumulator:
    """Rebuild exact histogram totals from successive reads of wrapping ``hist_bits`` bins.

    Each read of a bin adds ``(new - old) mod 2**hist_bits`` to its total, so totals are exact
    as long as no bin counts ``2**hist_bits`` pulses or more between two reads (2^32 pulses: over
    an hour of back-to-back 1 µs pulses on one bin). A new epoch (a clear) restarts the totals.
    """

    def __init__(self, params):
        self.params = params
        self._mod = 1 << params.hist_bits
        self.raw = {}
        self.totals = {}
        self.epoch = {}
        self.timestamp = {}

    def update(self, frame):
        """Apply one HISTOGRAM frame."""
        ch, first, bins = frame.channel, frame.first, frame.bins
        n = self.params.hist_bins
        if not 0 <= ch < self.params.channels or first >= n:
            return
        if self.epoch.get(ch) != frame.epoch:
            self.epoch[ch] = frame.epoch
            self.raw[ch] = [0] * n
            self.totals[ch] = [0] * n
        raw, totals = self.raw[ch], self.totals[ch]
        mod = self._mod
        for i, value in enumerate(bins[:n - first]):
            b = first + i
            totals[b] += (value - raw[b]) % mod
            raw[b] = value
        self.timestamp[ch] = frame.timestamp


_KINDS = (RecordKind.HEADER, RecordKind.FRAME, RecordKind.CONFIG, RecordKind.EVENT)


def _plausible(kind, length):
    """Whether a record header could be real (cheap checks before any CRC work)."""
    if kind == RecordKind.FRAME:
        return HEADER_BYTES <= length <= MAX_FRAME_BODY
    return kind in _KINDS and 2 <= length <= MAX_BODY


def _plausible_body(kind, length, buf, start, avail):
    """Whether the body of a record starting at ``start`` could be real, from what ``buf``
    holds up to ``avail``: a FRAME's own header states its payload length; the other kinds are
    JSON objects in ASCII (``json.dumps`` escapes every other character), so they hold no
    SYNC byte.

    This keeps a resynchronisation linear in the file size: a FRAME candidate costs at most
    :data:`MAX_FRAME_BODY` bytes of CRC; a JSON candidate is rejected at the first SYNC byte
    inside its body, and one that has none is CRC-checked over bytes that hold no other
    candidate (every candidate starts with a SYNC byte), so no byte is checked more than a
    record header's length of times however the garbage is crafted."""
    if avail <= start:
        return True
    if kind == RecordKind.FRAME:
        if avail < start + HEADER_BYTES:
            return True
        return int.from_bytes(buf[start + 4:start + 6], "little") == length - HEADER_BYTES
    if buf[start] != 0x7B:  # "{"
        return False
    if avail >= start + length and buf[start + length - 1] != 0x7D:  # "}"
        return False
    return buf.find(SYNC, start, min(avail, start + length)) < 0


def _skip(buf, pos, base, skip, why):
    """Start (or continue) a run of garbage at ``pos``; return the next candidate position."""
    if skip[0] is None:
        skip[0] = (base + pos, why)
    nxt = buf.find(SYNC, pos + 1)
    return len(buf) if nxt < 0 else nxt


def _end_run(skip, errors, at):
    if skip[0] is not None:
        start, why = skip[0]
        if errors is not None:
            errors.append(f"offset {start}: {why}; skipped {at - start} bytes to {at}")
        skip[0] = None


def _scan(buf, pos, base, errors, final, skip):
    """Yield the complete, valid records of ``buf[pos:]`` (offsets ``base`` + position).

    Returns the position up to which ``buf`` is consumed: the start of the first incomplete
    record (the caller keeps the rest and appends the next chunk), or ``len(buf)`` when the end
    is garbage without a sync byte. ``final`` says no more data follows. ``skip`` (a one-element
    list) carries the start of a run of garbage across chunks: a run is everything between two
    valid records that is not one, and gives one error message when it ends, so the messages
    and offsets do not depend on how the file is cut into chunks. Every decision is taken only
    once the bytes it depends on are in ``buf``; the CRC work per candidate record is bounded
    (:data:`MAX_FRAME_BODY`, or a JSON body's first and last bytes checked first).
    """
    n = len(buf)
    size = RECORD.size
    while pos < n:
        if buf[pos] != SYNC:  # decided on one byte, however few follow
            pos = _skip(buf, pos, base, skip, "no record starts here (bad sync, kind or length)")
            continue
        if n - pos < size:
            break
        sync, kind, length, time_ns = RECORD.unpack_from(buf, pos)
        if not _plausible(kind, length):
            pos = _skip(buf, pos, base, skip, "no record starts here (bad sync, kind or length)")
            continue
        end = pos + size + length + TRAILER.size
        if not _plausible_body(kind, length, buf, pos + size, min(n, end - TRAILER.size)):
            pos = _skip(buf, pos, base, skip, "no record starts here (implausible body)")
            continue
        if end > n:
            break  # wait for more (at the end of the file: the truncated tail)
        (crc,) = TRAILER.unpack_from(buf, pos + size + length)
        with memoryview(buf) as view:  # no copy of a candidate's body before its CRC passes
            good = zlib.crc32(view[pos + size:pos + size + length],
                              zlib.crc32(view[pos + 1:pos + size])) == crc
        if not good:
            pos = _skip(buf, pos, base, skip, "record CRC mismatch")
            continue
        body = bytes(buf[pos + size:pos + size + length])
        _end_run(skip, errors, base + pos)
        yield base + pos, kind, time_ns, body
        pos = end
    if final:
        _end_run(skip, errors, base + pos)
    return pos


def iter_records(path, *, errors=None, chunk_size=CHUNK_SIZE):
    """Yield ``(offset, kind, time_ns, body)`` of every complete, valid record of ``path``.

    The file is read in chunks of ``chunk_size`` bytes, so memory does not grow with its
    length (a record is at most :data:`MAX_BODY` bytes). Corrupt records are reported in
    ``errors`` (a list) with their byte offsets and skipped, as by :meth:`CaptureReader.scan`.
    The generator's return value is ``(end, size)``: the offset after the last complete record
    and the number of bytes read; ``size - end`` bytes at the end form no complete record (the
    truncated tail). Raises :class:`CaptureError` for a file that is not a capture.
    """
    path = os.fspath(path)
    chunk_size = max(int(chunk_size), 1)
    with open(path, "rb") as f:
        buf = bytearray(f.read(max(chunk_size, PREAMBLE.size)))
        CaptureReader._check_preamble(buf, path)
        base, pos, total = 0, PREAMBLE.size, len(buf)
        skip = [None]
        while True:
            more = f.read(chunk_size)
            final = not more
            pos = yield from _scan(buf, pos, base, errors, final, skip)
            if final:
                return base + pos, total
            # Keep the unconsumed tail (an incomplete record), append the next chunk.
            del buf[:pos]
            base += pos
            pos = 0
            buf += more
            total += len(more)


# Reading in bulk ---------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordBlock:
    """Consecutive valid records of one chunk, as arrays (:func:`iter_record_blocks`).

    ``data`` holds the chunk's bytes, of which ``base`` is the file offset; ``at`` are the
    records' positions in ``data`` (their file offsets are ``base + at``), ``kind``, ``length``
    (of the body) and ``time_ns`` their header fields. A body starts at ``at + RECORD.size``.
    """

    data: bytes
    base: int
    at: np.ndarray
    kind: np.ndarray
    length: np.ndarray
    time_ns: np.ndarray

    def __len__(self):
        return len(self.at)

    def records(self):
        """``(offset, kind, time_ns, body)`` of each record, as :func:`iter_records` yields."""
        d, b, size = self.data, self.base, RECORD.size
        for p, k, n, t in zip(self.at.tolist(), self.kind.tolist(), self.length.tolist(),
                              self.time_ns.tolist(), strict=True):
            yield b + p, k, t, d[p + size:p + size + n]

    def select(self, keep):
        """The block's records where the boolean array ``keep`` is set (same ``data``)."""
        return RecordBlock(self.data, self.base, self.at[keep], self.kind[keep],
                           self.length[keep], self.time_ns[keep])


def _u32(arr, at):
    """Little-endian u32 at each position ``at`` of the byte array ``arr``."""
    a = arr[at].astype(np.int64)
    for i in (1, 2, 3):
        a |= arr[at + i].astype(np.int64) << (8 * i)
    return a


def _rows(arr, at, width):
    """``arr[a:a + width]`` for each position ``a`` of ``at``, one a row (a copy)."""
    return np.lib.stride_tricks.sliding_window_view(arr, width)[at]


def _chain(arr, pos, n):
    """Positions of the records that follow one another from ``pos`` by their length fields,
    as far as each next one starts with a SYNC byte and has its header in ``arr[:n]``.

    Vectorised: every SYNC byte with room for a header is a candidate; each candidate's
    successor is looked up once, and the path from ``pos`` is unrolled by pointer doubling
    (``log2`` of its length rounds over the candidates), so no Python runs per record."""
    size = RECORD.size
    cand = np.flatnonzero(arr[pos:max(n - size + 1, pos)] == SYNC) + pos
    if not len(cand) or cand[0] != pos:
        return cand[:0]
    nxt = cand + (size + TRAILER.size) + _u32(arr, cand + 2)
    j = np.minimum(np.searchsorted(cand, nxt), len(cand) - 1)
    jump = np.where(cand[j] == nxt, j, len(cand))
    jump = np.append(jump, len(cand))  # the end of the path leads to itself
    path = np.zeros(1, dtype=np.int64)
    while path[-1] != len(cand):
        path = np.concatenate([path, jump[path]])
        jump = jump[jump]
    return cand[path[:np.argmax(path == len(cand))]]


def _valid_prefix(data, arr, at, n):
    """How many of the chained records ``at`` are, one after the other, what :func:`_scan`
    yields at once: complete in ``data[:n]``, plausible (:func:`_plausible`,
    :func:`_plausible_body`) and with a CRC that checks. Also returns their kinds and body
    lengths."""
    size = RECORD.size
    kind = arr[at + 1]
    length = _u32(arr, at + 2)
    end = at + size + length + TRAILER.size
    frame = kind == RecordKind.FRAME
    ok = end <= n
    ok &= np.where(frame, (length >= HEADER_BYTES) & (length <= MAX_FRAME_BODY),
                   np.isin(kind, _KINDS) & (length >= 2) & (length <= MAX_BODY))
    if not ok.all():
        k = int(np.argmin(ok))
        at, kind, length, frame = at[:k], kind[:k], length[:k], frame[:k]
    body = at + size
    if len(at):
        # A FRAME's own header states its payload length (bytes 4-5: _plausible_body's).
        stated = arr[np.where(frame, body + 4, 0)].astype(np.int64) | \
            arr[np.where(frame, body + 5, 0)].astype(np.int64) << 8
        ok = ~frame | (stated == length - HEADER_BYTES)
        for i in np.flatnonzero(~frame).tolist():  # (JSON records: few)
            p, m = int(body[i]), int(length[i])
            ok[i] = _plausible_body(int(kind[i]), m, data, p, p + m)
        if not ok.all():
            k = int(np.argmin(ok))
            at, kind, length, body = at[:k], kind[:k], length[:k], body[:k]
    if len(at):
        # CRC-32 over kind … body and the trailer: the residue when the trailer is the CRC.
        crc = zlib.crc32
        view = memoryview(data)
        got = np.fromiter(map(crc, map(view.__getitem__, map(
            slice, (at + 1).tolist(), (body + length + TRAILER.size).tolist()))),
            dtype=np.uint32, count=len(at))
        view.release()
        good = got == _CRC_RESIDUE
        if not good.all():
            k = int(np.argmin(good))
            at, kind, length = at[:k], kind[:k], length[:k]
    return at, kind, length


def _scan_blocks(buf, pos, base, errors, final, skip):
    """:func:`_scan` in bulk: yields the same records, as :class:`RecordBlock`\\ s.

    Runs of valid records are found with numpy (:func:`_chain`, :func:`_valid_prefix`: one
    ``zlib.crc32`` call per record is all that runs per record); wherever a record is not
    valid — garbage, a CRC mismatch, an incomplete record at the end of the chunk — or a run
    of garbage is open, :func:`_scan` itself decides, up to the next record it yields. The
    errors, the records and the returned position are therefore :func:`_scan`'s."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    arr = np.frombuffer(data, dtype=np.uint8)
    n = len(data)
    size = RECORD.size
    while pos < n:
        if (skip[0] is None and data[pos] == SYNC and pos + size <= n
                and pos + size + TRAILER.size + int.from_bytes(data[pos + 2:pos + 6], "little")
                <= n):  # (a whole record at pos: else the reference decides, cheaply)
            at, kind, length = _valid_prefix(data, arr, _chain(arr, pos, n), n)
            if len(at):
                t = _rows(arr, at + 6, 8).view("<i8")[:, 0]  # (RECORD's q)
                yield RecordBlock(data, base, at, kind, length, t)
                pos = int(at[-1] + size + length[-1] + TRAILER.size)
                continue
        gen = _scan(data, pos, base, errors, final, skip)
        try:
            offset, kind, time_ns, body = next(gen)
        except StopIteration as stop:
            return stop.value
        gen.close()
        p = offset - base
        yield RecordBlock(data, base, np.array([p], dtype=np.int64),
                          np.array([kind], dtype=np.uint8),
                          np.array([len(body)], dtype=np.int64),
                          np.array([time_ns], dtype=np.int64))
        pos = p + size + len(body) + TRAILER.size
    if final:
        _end_run(skip, errors, base + pos)
    return pos


def read_ahead(path):
    """Whether ``path`` is worth reading ahead in a second process (:data:`AHEAD_BYTES`): on
    Linux (processes forked), with two CPUs or more for this one."""
    if AHEAD_BYTES is None or not hasattr(os, "sched_getaffinity") or cpus() < 2:
        return False
    try:
        return os.path.getsize(path) > AHEAD_BYTES
    except OSError:
        return False


def forked_messages(target, args, what):
    """Run ``target(conn, *args)`` in a forked process and yield what it sends on ``conn``
    until it closes the pipe (the caller returns on its last message); a process that ends
    without its last message raises :class:`RuntimeError` naming ``what`` it was reading. The
    process is stopped when the caller stops early."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(send, *args), daemon=True)
    proc.start()
    send.close()
    try:
        while True:
            try:
                yield recv.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(f"the process reading {what} ahead ended early (exit code "
                                   f"{proc.exitcode})") from None
    finally:
        recv.close()
        if proc.is_alive():
            proc.terminate()
        proc.join()


def send_failure(conn, exc):
    """Send ``("error", exc)`` from a :func:`forked_messages` process (an exception that does
    not pickle goes as a :class:`RuntimeError` naming it)."""
    try:
        conn.send(("error", exc))
    except Exception:
        conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def cpus():
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def iter_record_blocks(path, *, errors=None, chunk_size=CHUNK_SIZE, start=None, ahead=False):
    """:func:`iter_records` in bulk: the same records, as :class:`RecordBlock`\\ s (a few per
    chunk), the same errors and the same return value, at a fraction of the cost per record.

    ``start``: begin at this byte offset instead (the records from the first that checks after
    it, as a resynchronisation finds it; no preamble check, no errors reported). ``ahead``:
    the records are found (chained, CRCs checked) by a second process, forked, a block or two
    ahead; this one reads the blocks' bytes again (from the page cache) — the same blocks,
    errors (in the same order relative to the blocks) and return value.
    """
    if ahead:
        return (yield from _blocks_ahead(path, errors, chunk_size, start))
    path = os.fspath(path)
    chunk_size = max(int(chunk_size), 1)
    with open(path, "rb") as f:
        if start is None:
            buf = f.read(max(chunk_size, PREAMBLE.size))
            CaptureReader._check_preamble(buf, path)
            base, pos, total = 0, PREAMBLE.size, len(buf)
        else:
            base = max(int(start), PREAMBLE.size)
            f.seek(base)
            buf = f.read(chunk_size)
            pos, total, errors = 0, base + len(buf), []
        skip = [None]
        while True:
            more = f.read(chunk_size)
            final = not more
            pos = yield from _scan_blocks(buf, pos, base, errors, final, skip)
            if final:
                return base + pos, total
            # The unconsumed tail (an incomplete record) and the next chunk (a new bytes object:
            # the blocks yielded hold the old one).
            buf = buf[pos:] + more
            base += pos
            pos = 0
            total += len(more)


def _blocks_ahead(path, errors, chunk_size, start):
    """:func:`iter_record_blocks` with ``ahead``: see there."""
    with open(path, "rb") as f:
        for msg in forked_messages(_find_blocks, (path, chunk_size, start), path):
            if msg[0] == "error":
                raise msg[1]
            if errors is not None:
                errors.extend(msg[1])
            if msg[0] == "done":
                return msg[2]
            _, _, lo, hi, at, kind, length, time_ns = msg
            f.seek(lo)
            data = f.read(hi - lo)
            if len(data) != hi - lo:
                raise CaptureError(f"{path}: changed while it was read (offset {lo})")
            yield RecordBlock(data, lo, at, kind, length, time_ns)


def _find_blocks(conn, path, chunk_size, start):
    """The read-ahead process of :func:`_blocks_ahead`: each block's span of the file, its
    records' positions and header fields, and the errors found before it, sent on ``conn``;
    then the return value (or the exception raised)."""
    errors = []
    sent = 0
    try:
        gen = iter_record_blocks(path, errors=errors, chunk_size=chunk_size, start=start)
        while True:
            try:
                b = next(gen)
            except StopIteration as stop:
                conn.send(("done", errors[sent:], stop.value))
                return
            lo = int(b.at[0])
            hi = int(b.at[-1] + RECORD.size + b.length[-1] + TRAILER.size)
            conn.send(("block", errors[sent:], b.base + lo, b.base + hi, b.at - lo, b.kind,
                       b.length, b.time_ns))
            sent = len(errors)
    except BaseException as exc:  # (raised again by the reader)
        send_failure(conn, exc)
    finally:
        conn.close()


#: The first body byte (the header's ``type``) of frames that carry pulse records.
_TRACE_TYPES = (int(FrameType.TRACE), int(FrameType.TRACE_BATCH))


class CaptureReader:
    """Read a capture file (also while it is being written).

    The file is read in chunks (:func:`iter_records`), never whole; what the reader keeps is
    chosen by the ``keep_*`` parameters, so a reader for a day-long capture can run in bounded
    memory (``keep_records=False, keep_snapshots=False, keep_traces=False``: only the latest
    counters, the histogram totals, the header, registers and events).

    Parameters
    ----------
    path : str or path-like
    keep_records : bool
        Keep every :class:`CaptureRecord` in :attr:`records` (needed by :meth:`frames`).
    keep_snapshots : bool
        Keep every complete snapshot in :attr:`snapshots`; otherwise only the last one
        (:attr:`last_snapshot`) and their number (:attr:`snapshot_count`).
    keep_traces : bool
        Keep every pulse record (a TRACE frame, or one of a TRACE_BATCH's, unpacked) in
        :attr:`traces` (otherwise only their number, :attr:`trace_count`).
    pulse_records : bool
        Rebuild the last device's pulse sequences from its TRACE frames, checked against its
        counters (:attr:`pulse_records`, a :class:`~.traces.PulseRecords`; compact arrays).
    skip_traces : bool
        Leave TRACE and TRACE_BATCH frames undecoded (a reader that streams the pulses itself:
        :mod:`rbscope.analysis.streaming`); :attr:`trace_frames` counts them, and with
        ``pulse_records`` the snapshots still account the records lost, per line and interval.
    on_snapshot : callable, optional
        Called with each complete :class:`~rbscope.device.protocol.Snapshot`, in file order, as it
        is read.
    on_device : callable, optional
        Called (no arguments) when an INFO frame shows another device than the one before
        (a file appended to by a second writer): the records that follow are that device's.
    on_trace : callable, optional
        Called with each pulse record (a :class:`~rbscope.device.protocol.Trace`, a
        TRACE_BATCH's unpacked), in file order, as it is read (``rbscope merge`` takes the
        sync line's records this way).
    chunk_size : int
        Bytes read at a time.
    bulk : bool, optional
        Read in bulk (:meth:`_apply_block`; default :data:`BULK`) unless ``keep_records``;
        False: record by record (the reference).

    Attributes (after :meth:`read`, which the constructor calls)
    ----------
    records : list of CaptureRecord
    info : Info or None
        The last INFO frame.
    params : SnifferParams or None
    registers : dict
        The register values of the last CONFIG record.
    truncated : int
        Bytes at the end that do not form a complete record (ignored).
    errors : list of str
        Corrupt records skipped, with their byte offsets.
    stats : LinkStats
        Frames that could not be decoded.
    """

    def __init__(self, path, *, keep_records=True, keep_snapshots=True, keep_traces=True,
                 pulse_records=False, on_snapshot=None, on_device=None, on_trace=None,
                 chunk_size=CHUNK_SIZE, skip_traces=False, bulk=None):
        self.path = os.fspath(path)
        self.bulk = BULK if bulk is None else bulk
        self.skip_traces = skip_traces
        self.keep_records = keep_records
        self.keep_snapshots = keep_snapshots
        self.keep_traces = keep_traces
        self.want_pulse_records = pulse_records
        self.on_snapshot = on_snapshot
        self.on_device = on_device
        self.on_trace = on_trace
        self.chunk_size = chunk_size
        self.read()

    @staticmethod
    def scan(buf, start=0, errors=None):
        """Yield ``(offset, kind, time_ns, body)`` of the complete, valid records in ``buf``.

        Stops at the first incomplete record; returns (as the generator's value) the offset
        after the last complete record.
        """
        return (yield from _scan(buf, start, 0, errors, True, [None]))

    @classmethod
    def valid_length(cls, path):
        """Return the length of the longest prefix of ``path`` made of complete records."""
        gen = iter_records(path)
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                return stop.value[0]

    @staticmethod
    def _check_preamble(buf, path):
        if len(buf) < PREAMBLE.size:
            raise CaptureError(f"{path}: {len(buf)} bytes is too short for a capture file")
        magic, version = PREAMBLE.unpack_from(buf, 0)
        if magic != MAGIC:
            raise CaptureError(f"{path}: not an rbscope capture file (bad magic at offset 0)")
        if version > FORMAT_VERSION:
            raise CaptureError(f"{path}: capture format version {version} is newer than this "
                               f"rbscope reads ({FORMAT_VERSION}); byte offset 11")

    def read(self):
        """(Re)read the whole file; picks up records appended since the last read."""
        self.records = []
        self.errors = []
        self.stats = LinkStats()
        self.header = None
        self.info = None
        self.params = None
        self.registers = {}
        self.config_history = []
        self.events = []
        self._snapshots = []
        self._pending = None
        self.last_snapshot = None
        self.snapshot_count = 0
        self.latest = {}
        self.traces = []
        self.trace_count = 0
        self.trace_frames = 0  # (skip_traces) TRACE and TRACE_BATCH frames left undecoded
        self.pulse_records = None
        self.hist = None
        self.frame_count = 0
        self.record_count = 0
        self.device_snapshots = 0  # complete snapshots of the last device
        self.devices = 0  # distinct devices (INFO with other parameters or build) seen
        self.session = None  # the last session: {"offset", "stop"}
        self.last_time_ns = None
        if self.bulk and not self.keep_records:
            gen = iter_record_blocks(self.path, errors=self.errors, chunk_size=self.chunk_size,
                                     ahead=read_ahead(self.path))
            while True:
                try:
                    block = next(gen)
                except StopIteration as stop:
                    end, size = stop.value
                    break
                self._apply_block(block)
        else:
            gen = iter_records(self.path, errors=self.errors, chunk_size=self.chunk_size)
            while True:
                try:
                    offset, kind, time_ns, body = next(gen)
                except StopIteration as stop:
                    end, size = stop.value
                    break
                rec = CaptureRecord(kind, time_ns, offset, body)
                self._apply(rec)
                self.last_time_ns = time_ns
                self.record_count += 1
                if self.keep_records:
                    self.records.append(rec)
        self.end = end
        self.truncated = size - end
        return self

    def _apply_block(self, block):
        """:meth:`_apply` every record of a :class:`RecordBlock`, in order, with the same
        effects; in bulk where that is exact: runs of pulse-record frames ``skip_traces``
        leaves undecoded are counted, and a snapshot as the device sends it (STATUS, then one
        COUNTERS frame per channel in channel order, all of it, nothing between) is decoded
        with numpy and completed at once. Every other record goes through :meth:`_apply`."""
        n = len(block)
        arr = np.frombuffer(block.data, dtype=np.uint8)
        body = block.at + RECORD.size
        ftype = np.where(block.kind == RecordKind.FRAME, arr[body], -1)
        if self.skip_traces:
            special = np.flatnonzero(~np.isin(ftype, _TRACE_TYPES))
        else:
            special = np.arange(n)
        # INFO frames may change the parameters: the groups are found anew after each.
        info = np.flatnonzero(ftype == FrameType.INFO).tolist() + [n]
        group = _SnapshotGroups.find(self, block, arr, body, ftype, 0, info[0])
        times = block.time_ns
        done = 0  # records of the block accounted
        k = 0
        special = special.tolist()
        while k < len(special):
            i = special[k]
            if i > done:
                self._count_traces(i - done, int(times[i - 1]))
            if i > info[0]:
                info.pop(0)
                group = _SnapshotGroups.find(self, block, arr, body, ftype, i, info[0])
            if group is not None and i in group.start:
                group.apply(self, i)
                k += group.size
                done = i + group.size
                continue
            p, m = int(block.at[i]), int(block.length[i])
            time_ns = int(times[i])
            self._apply(CaptureRecord(int(block.kind[i]), time_ns, block.base + p,
                                      block.data[p + RECORD.size:p + RECORD.size + m]))
            self.last_time_ns = time_ns
            self.record_count += 1
            done = i + 1
            k += 1
        if n > done:
            self._count_traces(n - done, int(times[n - 1]))

    def _count_traces(self, count, last_time_ns):
        """``count`` pulse-record frames left undecoded (``skip_traces``), as :meth:`_apply`
        accounts them one by one."""
        self.trace_frames += count
        if self.pulse_records is not None:
            self.pulse_records.records += count
        self.record_count += count
        self.last_time_ns = last_time_ns

    def _apply(self, rec):
        if rec.kind == RecordKind.FRAME:
            if self.skip_traces and rec.body and rec.body[0] in _TRACE_TYPES:
                self.trace_frames += 1
                if self.pulse_records is not None:
                    self.pulse_records.records += 1  # (losses are accounted once records come)
                return
            frame = decode_frame_bytes(rec.body, self.params, self.stats)
            rec.frame = frame
            if frame is None:
                return
            self.frame_count += 1
            if isinstance(frame, Info):
                try:
                    params = params_from_info(frame)
                except ValueError as exc:
                    self.errors.append(f"offset {rec.offset}: {exc}")
                    return
                old = self.info
                if (old is None or params != self.params or old.build_id != frame.build_id
                        or old.board_name != frame.board_name):
                    # Another device (appended by a second writer): its records stand apart.
                    self.devices += 1
                    self.params = params
                    self.hist = HistogramAccumulator(params)
                    if self.want_pulse_records:
                        self.pulse_records = PulseRecords(params)
                    self.latest = {}
                    self._pending = None
                    self.last_snapshot = None
                    self.device_snapshots = 0
                    if self.on_device is not None and self.devices > 1:
                        self.on_device()
                self.info = frame
            elif isinstance(frame, Status):
                self._flush_pending()
                self._pending = (rec.time_ns, frame, {})
            elif isinstance(frame, Counters):
                self.latest[frame.channel] = frame
                p = self._pending
                if p is not None and frame.snapshot == p[1].snapshot:
                    p[2][frame.channel] = frame
                    self._flush_pending()
            elif isinstance(frame, Histogram):
                if self.hist is not None:
                    self.hist.update(frame)
            elif isinstance(frame, (Trace, TraceBatch)):
                try:
                    records = trace_records(frame, self.params)
                except ProtocolError as exc:
                    self.errors.append(f"offset {rec.offset}: {exc}")
                    return
                self.trace_count += len(records)
                if self.keep_traces:
                    self.traces.extend(records)
                if self.pulse_records is not None:
                    for record in records:
                        self.pulse_records.trace(record)
                if self.on_trace is not None:
                    for record in records:
                        self.on_trace(record)
            return
        what = RecordKind.names.get(rec.kind, rec.kind)
        try:
            rec.data = json.loads(rec.body)
        except (ValueError, RecursionError):
            self.errors.append(f"offset {rec.offset}: {what} record is not valid JSON")
            return
        if not isinstance(rec.data, dict):
            self.errors.append(f"offset {rec.offset}: {what} record is not a JSON object")
            rec.data = None
            return
        if rec.kind == RecordKind.HEADER:
            self.header = rec.data
            self.session = {"offset": rec.offset, "stop": None}
        elif rec.kind == RecordKind.CONFIG:
            regs = rec.data.get("registers")
            if not isinstance(regs, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    and 0 <= v < 1 << 32 for k, v in regs.items()):
                self.errors.append(f"offset {rec.offset}: config record does not hold "
                                   f"registers {{NAME: 32-bit value}}")
                return
            self.registers = dict(regs)
            self.config_history.append((rec.time_ns, dict(regs)))
        elif rec.kind == RecordKind.EVENT:
            self.events.append((rec.time_ns, rec.data))
            event = rec.data.get("event")
            if event == "start":
                self.session = {"offset": rec.offset, "stop": None}
            elif event == "stop" and self.session is not None:
                self.session["stop"] = rec.data.get("reason") or "stopped"

    def _flush_pending(self):
        if self._pending is None or self.params is None:
            return
        time_ns, status, counters = self._pending
        n = self.params.channels
        if all(ch in counters for ch in range(n)):
            self._pending = None
            p = Snapshot(status, [counters[ch] for ch in range(n)], time_ns)
            self.last_snapshot = p
            self.snapshot_count += 1
            self.device_snapshots += 1
            if self.keep_snapshots:
                self._snapshots.append(p)
            if self.pulse_records is not None:
                self.pulse_records.snapshot(p)
            if self.on_snapshot is not None:
                self.on_snapshot(p)

    # Views ---------------------------------------------------------------------------------------

    @property
    def snapshots(self):
        """Complete snapshots (STATUS + every channel's COUNTERS), in order (empty unless
        ``keep_snapshots``)."""
        return list(self._snapshots)

    def latest_counters(self):
        """Return ``{channel: Counters}``: the most recent counters of every channel."""
        return dict(self.latest)

    def histograms(self):
        """Return ``{channel: [exact bin totals]}`` rebuilt from every HISTOGRAM frame."""
        return {} if self.hist is None else {ch: list(t) for ch, t in self.hist.totals.items()}

    def frames(self):
        """Yield ``(time_ns, frame)`` of every decodable frame."""
        for rec in self.records:
            if rec.kind == RecordKind.FRAME and rec.frame is not None:
                yield rec.time_ns, rec.frame

    @property
    def config(self):
        """The :class:`SnifferConfig` of the last CONFIG record (needs INFO); raises
        :class:`CaptureError` when the registers do not fit the device."""
        if self.params is None:
            return None
        try:
            return config_from_registers(self.params, self.registers)
        except ValueError as exc:
            raise CaptureError(f"{self.path}: the recorded registers do not fit the device: "
                               f"{exc}") from None

    def missing(self, *, recent_s=10.0):
        """Return what the capture lacks to be complete, as sentences (empty: complete).

        A capture is complete when it ends with a ``stop`` record, no record is cut or corrupt,
        it holds one device, and the last snapshot was taken at quiescence. ``recent_s``: a
        file modified this recently without a stop record is said to be still being written.
        """
        out = []
        if self.truncated:
            out.append(f"the file ends inside a record ({self.truncated} bytes ignored): it was "
                       f"cut short or is still being written")
        if self.errors:
            out.append(f"{len(self.errors)} corrupt region(s) skipped: their records are "
                       f"missing")
        if self.session is None or self.session["stop"] is None:
            try:
                age = time.time() - os.path.getmtime(self.path)
            except OSError:
                age = None
            why = ("is still being written" if age is not None and age < recent_s
                   else "was killed or lost its end")
            out.append(f"no stop record after the last capture session: the capture {why}; "
                       f"counts after the last complete snapshot are missing")
        elif self.session["stop"] not in ("quiescent", "duration"):
            out.append(f"the capture was stopped early ({self.session['stop']})")
        if self.devices > 1:
            out.append(f"the file holds captures of {self.devices} devices (different INFO); "
                       f"only the last device's records are used")
        last = self.last_snapshot
        if last is not None and not last.status.quiescent:
            out.append("the device was not quiescent at the last snapshot: operations may have "
                       "been in progress and counts may still have grown")
        return out

    def summary(self):
        """Return a JSON-ready summary of the capture."""
        last = self.last_snapshot
        return {
            "path": self.path,
            "records": self.record_count,
            "frames": self.frame_count,
            "snapshots": self.snapshot_count,
            "traces": self.trace_count,
            "events": [d.get("event") for _, d in self.events if isinstance(d, dict)],
            "truncated_bytes": self.truncated,
            "errors": list(self.errors),
            "board": self.info.board_name if self.info else None,
            "channels": self.params.channels if self.params else None,
            "last_timestamp": last.timestamp if last else None,
            "epoch": last.status.epoch if last else None,
            "devices": self.devices,
            "missing": self.missing(),
        }


class _SnapshotGroups:
    """The snapshots of a :class:`RecordBlock` that :meth:`CaptureReader._apply_block` can
    complete at once: a STATUS frame followed by the COUNTERS frames of channels 0 … n-1 in
    order, of its snapshot number, each with the header :func:`decode_frame_bytes` accepts
    (version, type, length), nothing in between. Their COUNTERS payloads are decoded together
    with numpy (fields of the protocol's layout, read as little-endian bit fields)."""

    def __init__(self, start, size, fields, seq):
        self.start = start  # {record index of the STATUS: group number}
        self.size = size  # records in a group (STATUS and n COUNTERS)
        self.fields = fields  # {name: ndarray (groups, n[, elements])}
        self.seq = seq

    @staticmethod
    def _plan(params):
        """``[(name, [(bit offset, width), …] or None, (bit offset, width))]`` of the COUNTERS
        layout's fields, or None if one is not an unsigned integer (or array of them) of at
        most 56 bits."""
        layout = layouts.Layout.cast(PROTOCOL.payload_layout(params, FrameType.COUNTERS))
        plan = []
        for name, f in layout:
            shape = f.shape
            if isinstance(shape, layouts.ArrayLayout) and isinstance(shape.elem_shape, int) \
                    and shape.elem_shape <= 56:
                w = shape.elem_shape
                plan.append((name, [(f.offset + i * w, w) for i in range(shape.length)]))
            elif isinstance(shape, int) and shape <= 56:
                plan.append((name, (f.offset, shape)))
            else:
                return None
        if [name for name, _ in plan] != list(_COUNTERS_FIELDS):
            return None
        status = layouts.Layout.cast(PROTOCOL.payload_layout(params, FrameType.STATUS))
        f = status["snapshot"]
        if not isinstance(f.shape, int) or f.shape > 56:
            return None
        return plan, (f.offset, f.shape)

    @classmethod
    def find(cls, reader, block, arr, body, ftype, lo, hi):
        """The groups of records ``lo … hi - 1`` (decoded with the reader's ``params``)."""
        params = reader.params
        if params is None or reader.keep_records:
            return None
        n = params.channels
        status = np.flatnonzero(ftype[lo:max(hi - n, lo)] == FrameType.STATUS) + lo
        if not len(status):
            return None
        plan, status_snapshot, status_size, counters_size = _PLANS.get_or_make(params)
        if plan is None:
            return None
        rows = status[:, None] + np.arange(1, n + 1)  # each STATUS's n records after it
        ok = (ftype[rows] == FrameType.COUNTERS).all(axis=1)
        status, rows = status[ok], rows[ok]
        if not len(status):
            return None
        # Headers (type, version, seq, length) as decode_frame_bytes checks them.
        heads = np.concatenate([status[:, None], rows], axis=1)
        hb = body[heads]
        version = arr[hb + 1]
        stated = arr[hb + 4].astype(np.int64) | arr[hb + 5].astype(np.int64) << 8
        length = block.length[heads] - HEADER_BYTES
        sizes = np.r_[status_size, np.full(n, counters_size)]
        ok = ((version == PROTOCOL_VERSION) & (stated == length) & (length == sizes)).all(axis=1)
        status, rows, hb = status[ok], rows[ok], hb[ok]
        if not len(status):
            return None
        # Payload bytes of the COUNTERS frames (and 8 spare zero bytes), one frame a row.
        pay = np.zeros((len(status), n, counters_size + 8), dtype=np.uint8)
        pay[:, :, :counters_size] = _rows(arr, body[rows] + HEADER_BYTES, counters_size)

        def bits(offset, width):
            b = offset // 8
            v = np.ascontiguousarray(pay[:, :, b:b + 8]).view("<u8")[..., 0]
            return (v >> np.uint64(offset % 8)) & np.uint64((1 << width) - 1)

        fields = {}
        for name, spec in plan:
            fields[name] = (np.stack([bits(*x) for x in spec], axis=-1) if isinstance(spec, list)
                            else bits(*spec))
        sp = np.zeros((len(status), 16), dtype=np.uint8)
        o, w = status_snapshot
        sp[:, :8] = _rows(arr, body[status] + HEADER_BYTES + o // 8, 8)
        snap = (sp.view("<u8")[:, 0] >> np.uint64(o % 8)) & np.uint64((1 << w) - 1)
        ok = ((fields["channel"] == np.arange(n, dtype=np.uint64)).all(axis=1)
              & (fields["snapshot"] == snap[:, None]).all(axis=1))
        if not ok.all():
            status, hb = status[ok], hb[ok]
            fields = {k: v[ok] for k, v in fields.items()}
        if not len(status):
            return None
        seq = arr[hb + 2].astype(np.int64) | arr[hb + 3].astype(np.int64) << 8
        groups = cls(dict(zip(status.tolist(), range(len(status)), strict=True)), n + 1,
                     fields, seq.tolist())
        groups.block = block
        return groups

    def apply(self, reader, i):
        """What :meth:`CaptureReader._apply` does with the group's records, one by one."""
        block, g = self.block, self.start[i]
        size = RECORD.size
        at = block.at[i:i + self.size].tolist()
        length = block.length[i:i + self.size].tolist()
        data = block.data
        raws = [data[p + size:p + size + m] for p, m in zip(at, length, strict=True)]
        status = decode_frame_bytes(raws[0], reader.params, reader.stats)
        seq = self.seq[g]
        f = [self.fields[name][g].tolist() for name in _COUNTERS_FIELDS]
        counters = [Counters(seq[j + 1], raws[j + 1], 0, snapshot, channel, epoch, timestamp,
                             lost, tuple(row))
                    for j, (snapshot, channel, epoch, timestamp, lost, row) in enumerate(zip(
                        *f, strict=True))]
        reader.frame_count += self.size
        reader._flush_pending()
        time_ns = int(block.time_ns[i])
        reader.latest.update(enumerate(counters))
        reader._pending = (time_ns, status, dict(enumerate(counters)))
        reader._flush_pending()
        reader.record_count += self.size
        reader.last_time_ns = int(block.time_ns[i + self.size - 1])


#: The fields of a COUNTERS frame, in layout order (:class:`Counters`' after the header's).
_COUNTERS_FIELDS = ("snapshot", "channel", "epoch", "timestamp", "trace_lost", "counters")


def _make_plan(params):
    plan = _SnapshotGroups._plan(params)
    sizes = tuple(layout_bytes(PROTOCOL.payload_layout(params, t))
                  for t in (FrameType.STATUS, FrameType.COUNTERS))
    return (None, None, *sizes) if plan is None else (*plan, *sizes)


#: Per device parameters (bounded, as the protocol's decoders): the COUNTERS decoding plan, the
#: STATUS snapshot field, and the STATUS and COUNTERS payload sizes.
_PLANS = _Bounded(16, _make_plan)


class SnapshotSeries:
    """The snapshot time series of the last epoch, in bounded memory.

    Feed it every complete :class:`~rbscope.device.protocol.Snapshot` in order
    (``CaptureReader(on_snapshot=...)``).
    It keeps the timestamp and the counter words of every ``stride``-th snapshot of the current
    epoch as one compact ``array('Q')`` per kept snapshot (no frame objects), starting with
    ``stride = every``; whenever more than ``max_points`` are kept it drops every other one and
    doubles the stride. The kept snapshots are therefore evenly spaced, at most ``max_points``
    of them, whatever the length of the capture (a 24-hour capture at 100 ms has 864 000
    snapshots: with the default 4096 points one in 256 is kept, every 25.6 s). The last
    snapshot is always kept (:meth:`rows` appends it). A new epoch (a clear) starts afresh.
    """

    def __init__(self, max_points=MAX_SERIES, every=1):
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, not {max_points}")
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.max_points = max_points
        self.every = every
        self.epoch = None
        self.device = 0
        self.key = None
        self.first_time_ns = None
        self.epochs = 0  # epochs (or devices) seen: more than one, the counters were cleared
        self._reset()

    def _reset(self):
        self.stride = self.every
        self.count = 0  # snapshots of the current epoch seen
        self.first = None
        self.last_row = None  # the latest snapshot (a Snapshot)
        self.kept = []  # [(index, timestamp, words)]

    @staticmethod
    def _words(row):
        out = array("Q")
        for counters in row.counters:
            out.extend(counters.counters)
        return out

    def new_device(self):
        """Another device's snapshots follow: start afresh (as a new epoch does)."""
        self.device += 1

    def add(self, row):
        """Account one complete snapshot."""
        if (self.device, row.status.epoch) != (self.key, self.epoch):
            self.epoch = row.status.epoch
            self.key = self.device
            self.epochs += 1
            self._reset()
            self.first = row.status
            self.first_time_ns = row.time_ns
        i = self.count
        self.count += 1
        self.last_row = row
        if i % self.stride == 0:
            self.kept.append((i, row.timestamp, self._words(row)))
            if len(self.kept) > self.max_points:
                self.kept = self.kept[::2]
                self.stride *= 2

    __call__ = add

    def rows(self):
        """``[(timestamp, words)]`` of the kept snapshots and the last one, in order."""
        out = [(ts, w) for _, ts, w in self.kept]
        if self.count and self.kept[-1][0] != self.count - 1:
            out.append((self.last_row.timestamp, self._words(self.last_row)))
        return out


def capture_to_measurement(path, *, class_names=None, probes=None, max_snapshots=MAX_SERIES,
                           snapshot_every=1, chunk_size=CHUNK_SIZE, on_trace=None,
                           sequence=True):
    """Return the :class:`rbscope.analysis.measurement.Measurement` of a capture file.

    The counts are those of the last complete snapshot, histograms the exact totals of the last
    epoch; the snapshot time series is that of the last epoch (timestamps relative to its first
    snapshot). ``duration_ticks`` runs from the first to the last snapshot of the last epoch.

    The file is streamed (bounded memory, whatever its length). The time series keeps every
    ``snapshot_every``-th snapshot, thinned by halving (see :class:`SnapshotSeries`) so that
    at most ``max_snapshots`` remain, plus the last one; ``provenance["snapshot_stride"]``
    says how many device snapshots one kept snapshot stands for.

    When the capture holds TRACE records (``rbscope capture --trace``), each line's pulse
    sequence of the last epoch is rebuilt from them (:class:`~.traces.PulseRecords`) and, if
    every enabled line's is usable (one record per pulse counted, or short of a few pulses whose
    records the link lost: ``pulses_lost``), given as ``pulses`` and ``pulse_starts`` (the
    sequence classifier's input); ``provenance["sequence"]`` holds the accounting either way,
    and lost or missing records are a warning that says what is missing.

    ``on_trace`` is :class:`CaptureReader`'s (every pulse record, as it is read).
    ``provenance["first_snapshot_tick"]`` is the device timestamp of the epoch's first snapshot,
    from which the series' timestamps and ``duration_ticks`` count (pulse starts are device
    timestamps).

    With ``sequence=False`` the TRACE records are left undecoded (the streaming classifier,
    :mod:`rbscope.analysis.streaming`, reads them itself; ``on_trace`` sees none): the
    measurement has no ``pulses``, and ``provenance["sequence"]`` says which records are the
    last epoch's (``from_tick``, ``to_tick``), what each line counted and lost, and where
    (``losses``).
    """

    series = SnapshotSeries(max_snapshots, snapshot_every)
    reader = CaptureReader(path, keep_records=False, keep_snapshots=False, keep_traces=False,
                           pulse_records=True, on_snapshot=series, on_device=series.new_device,
                           on_trace=on_trace, chunk_size=chunk_size,
                           skip_traces=not sequence)
    if reader.info is None:
        raise CaptureError(f"{reader.path}: no INFO frame; cannot interpret the counters")
    if not reader.device_snapshots:
        raise CaptureError(f"{reader.path}: no complete snapshot"
                           + (" of the last device" if reader.snapshot_count else ""))
    params = reader.params
    config = reader.config
    last_epoch = series.epoch
    t0 = series.first.timestamp
    width = params.counters_per_channel

    k = params.classes
    fixed = [(name, k + int(c)) for c, name in zip(Counter, FIXED_COUNTERS, strict=True)]

    def counts_of(words, with_hist):
        # ChannelCounts.from_row of each channel's row, its checks done once (up to 4096
        # snapshots of 256 channels).
        words = words.tolist()
        out = []
        for a in range(0, params.channels * width, width):
            row = words[a:a + width]
            out.append(ChannelCounts(classes=row[:k], histogram=(
                [0] * params.hist_bins if with_hist else []), **{
                name: row[i] for name, i in fixed}))
        return out

    rows = series.rows()
    counts = counts_of(rows[-1][1], True)
    for ch, totals in reader.histograms().items():
        if reader.hist.epoch.get(ch) == last_epoch:
            counts[ch].histogram = list(totals)
    snaps = []
    last_ts = -1
    for timestamp, words in rows:
        ts = timestamp - t0
        if ts > last_ts:
            snaps.append(SeriesPoint(ts, counts_of(words, False)))
            last_ts = ts
    last = series.last_row.status
    quiet = last.timestamp - last.quiet_since if last.quiescent else None
    info = reader.info
    prescaler = max(config.prescaler, 1)
    missing = reader.missing()
    warnings = [f"incomplete capture: {m}" for m in missing]
    # The windows in force must not have changed while the counts of the epoch accumulated.
    before = None
    for time_ns, regs in reader.config_history:
        try:
            cfg = config_from_registers(params, regs)
        except ValueError:
            continue
        if time_ns <= series.first_time_ns:
            before = cfg
        elif before is not None and (cfg.windows, cfg.prescaler) != (before.windows,
                                                                       before.prescaler):
            warnings.append("the class windows or the tick changed during the analysed epoch: "
                            "counts before the change were classified with other windows "
                            "(clear the counters after configuring)")
            break
    names = class_names
    if names is None:
        for _, d in reversed(reader.events):
            got = d.get("class_names") if d.get("event") == "config" else None
            if isinstance(got, list) and got and len(got) <= params.classes and all(
                    isinstance(n, str) for n in got):
                names = tuple(got)
                break
    if names is None and reader.registers and info.clock_hz:
        # Configured in another session: recognise a built-in preset from the windows.
        preset = identify(params, info.clock_hz, reader.registers)
        if preset is not None:
            names = preset.names
    if not info.clock_hz:
        warnings.append("INFO gives no clock frequency: times assume a 1 µs tick")
    provenance_tap = {}
    taps = [d for _, d in reader.events if isinstance(d, dict) and d.get("event") == "tap"]
    starts = [d for d in taps if d.get("phase") == "start"]
    stops = [d for d in taps if d.get("phase") == "stop"]
    if starts and stops:
        try:
            provenance_tap = {"tap": TapCounts.between(starts[0], stops[-1]).summary()}
        except (KeyError, TypeError, ValueError):
            warnings.append("the bus tap's counts in the capture are unreadable: left out")
        else:
            provenance_tap["tap"]["period"] = _tap_period(series, counts_of(rows[0][1], False),
                                                          counts)
    elif taps:
        warnings.append("the capture holds only one read of the bus tap's counters (the "
                        "capture did not end normally): no opcode counts")
    pulses, starts, lost, summarised, gaps_open = {}, {}, {}, {}, {}
    whole, sequence = sequence, None
    if not whole:
        sequence = _epoch_records(reader, config) if reader.trace_frames else None
    elif reader.trace_count and reader.pulse_records is not None:
        enabled = [ch for ch in range(params.channels) if (config.enable >> ch) & 1]
        pulses, starts, sequence = reader.pulse_records.sequences(enabled)
        gaps_open = reader.pulse_records.gaps_open
        if not sequence["usable"]:
            warnings.append(f"the capture's pulse records are incomplete ({sequence['why']}): "
                            f"no pulse sequence, the width histograms are classified")
        else:
            summarised = {int(ch): v["summarised"] for ch, v in sequence["lines"].items()
                          if v.get("summarised")}
            if summarised:
                # The classes the summariser was asked for (the register as last written).
                mask = int(reader.registers.get("TRACE_SUMMARY", 0) or 0)
                sequence["summary_windows"] = [k for k in range(params.classes)
                                               if mask >> k & 1]
                windows = ", ".join(
                    f"{k} ({names[k] if names and k < len(names) and names[k] else 'window'} "
                    f"[{config.windows[k][0]}, {config.windows[k][1]}) ticks)"
                    for k in sequence["summary_windows"])
                warnings.append(
                    f"the device summarised {sum(summarised.values()):,} pulse(s) of class "
                    f"{windows or '?'}: the middle of runs of such pulses, counted but not sent "
                    f"one by one; the sequence classifier has each run's first and last pulse "
                    f"(the idle time between them, which spans the others, is read as no gap), "
                    f"and the analysis counts the others with the programs its model expects "
                    f"at their widths")
        if sequence["usable"] and sequence["lost"]:
            lost = {int(ch): v["missing"] for ch, v in sequence["lines"].items()
                    if v["missing"]}
            warnings.append(
                f"the link lost {sequence['lost']:,} pulse record(s) (its FIFO was full) on "
                f"line(s) {', '.join(str(ch) for ch in sorted(lost))}: the sequence classifier "
                f"classifies the stretches between snapshots with no loss, and the "
                f"{sum(lost.values()):,} pulses of the others are in the interval (none to all "
                f"of them programs)")
    return Measurement(
        params=params,
        config=config,
        tick_seconds=prescaler / info.clock_hz if info.clock_hz else 1e-6,
        counts=counts,
        class_names=tuple(names or ()),
        probes=list(probes) if probes else [Probe(f"ch{i}") for i in range(params.channels)],
        duration_ticks=max(0, last.timestamp - t0),
        quiet_ticks=quiet,
        may_drop=any(c.dropped for c in counts),
        snapshots=snaps,
        pulses=pulses,
        pulse_starts=starts,
        pulses_lost=lost,
        pulses_summarised=summarised,
        pulse_gaps_open=gaps_open,
        provenance={"source": "capture", "path": reader.path, "board": info.board_name,
                    "build_id": info.build_id, "epoch": last_epoch,
                    "link_errors": reader.stats.errors,
                    "snapshots_total": series.count, "snapshot_stride": series.stride,
                    "first_snapshot_tick": t0,
                    "complete": not missing, "missing": missing, "warnings": warnings,
                    **({"sequence": sequence} if sequence is not None else {}),
                    **provenance_tap},
    )


def _epoch_records(reader, config):
    """What the streaming classifier needs to pick the last epoch's pulse records out of a
    capture read with ``skip_traces`` (a JSON-able dict, ``provenance["sequence"]``).

    ``from_tick`` and ``to_tick``: the epoch's records are those classified after the previous
    epoch's last snapshot (none: from the start) and up to the last snapshot's STATUS time;
    ``lines``: each enabled line's ``counted`` pulses (whole, saturated and partial) and the
    records it ``lost`` during the epoch; ``losses``: ``[from tick, to tick, line, records]``
    of every snapshot interval with a loss (as :class:`~.traces.PulseRecords` accounts them).
    """
    pr = reader.pulse_records
    if pr is None or pr._last is None:
        return None
    last = _Mark(pr._last, pr.params)
    base = _Mark(pr._prev if pr._prev is not None else pr._first, pr.params)
    enabled = [ch for ch in range(pr.params.channels) if (config.enable >> ch) & 1]
    lines = {}
    for ch in enabled:
        lines[str(ch)] = {"counted": sum(last.counted[ch]),
                          "whole": last.counted[ch][0] + last.counted[ch][1],
                          "lost": (last.lost[ch] - base.lost[ch]) & 0xFFFFFFFF}
    return {"streamed": True, "records": reader.trace_frames,
            "from_tick": pr._prev.status.timestamp if pr._prev is not None else -1,
            "to_tick": last.timestamp, "lost": sum(v["lost"] for v in lines.values()),
            "losses": [list(x) for x in pr.losses if x[0] >= base.timestamp and
                       str(x[2]) in lines],
            "losses_capped": pr.losses_capped, "lines": lines}


def _tap_period(series, first, last):
    """What the bus tap's counts (capture start to stop) and the R/B# counts (the last epoch:
    since the counters' last clear) each cover, and where the two differ (JSON members)."""
    before = sum(sum(c.classes) + c.unclassified for c in first)
    total = sum(sum(c.classes) + c.unclassified for c in last)
    differ = []
    if before and before > 0.01 * total:
        differ.append(f"the R/B# counts include {before:,} of their {total:,} pulses "
                      f"({before / total:.0%}) counted before the capture's first snapshot "
                      f"(since the counters' last clear: capture without --clear), the bus "
                      f"tap's only the capture's")
    if series.epochs > 1:
        differ.append("the counters were cleared during the capture: the R/B# counts cover "
                      "the time since that clear, the bus tap's the whole capture")
    return {"tap": "the capture, from its start to its stop",
            "rb": "the counters' last epoch, from their last clear to the last snapshot",
            "pulses_before_capture": before, "epochs_in_capture": series.epochs,
            "differ": differ}


def write_sample(path, params, *, snapshots=3):
    """Write a small, well-formed capture to ``path``: INFO, a configuration with two windows
    (``read`` 10-100 ticks, ``program`` 100-3000), ``snapshots`` quiescent snapshots of every
    channel's counters, one histogram and a stop. The fuzzers' seed (``tests/fuzzing.py``,
    ``benchmarks/fuzz.py``)."""
    p = params
    with CaptureWriter(path, meta={"port": "sample"}) as w:
        w.raw_frame(frame_bytes(FrameType.INFO, encode_payload(
            None, FrameType.INFO, info_values(p, clock_hz=1_000_000))), time_ns=1)
        w.config({"PRESCALER": 1, "WINDOW_0_LO": 10, "WINDOW_0_HI": 100,
                  "WINDOW_1_LO": 100, "WINDOW_1_HI": 3000}, time_ns=2)
        w.event("config", time_ns=2, preset="sample", class_names=["read", "program"])
        for n in range(snapshots):
            w.raw_frame(frame_bytes(FrameType.STATUS, encode_payload(p, FrameType.STATUS, {
                "snapshot": n, "timestamp": 1000 * (n + 1), "epoch": 1,
                "flags": int(StatusFlags.QUIESCENT)}), n), time_ns=10 + n)
            for ch in range(p.channels):
                w.raw_frame(frame_bytes(FrameType.COUNTERS, encode_payload(
                    p, FrameType.COUNTERS, {
                        "snapshot": n, "channel": ch, "timestamp": 1000 * (n + 1),
                        "counters": [n + ch] * p.counters_per_channel})), time_ns=10 + n)
        w.raw_frame(frame_bytes(FrameType.HISTOGRAM, encode_payload(
            p, FrameType.HISTOGRAM, {"channel": 0, "first": 0, "epoch": 1,
                                     "timestamp": 9000, "bins": [3] * 16})), time_ns=20)
        w.event("stop", reason="quiescent", time_ns=30)

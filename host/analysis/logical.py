"""Logical volume: how many bytes the host wrote, from the sources a lab has at hand.

Every source returns a :class:`LogicalVolume`: an interval ``[lo, hi]`` of bytes (exact sources
give ``lo == hi``; counters with coarse units give the interval their rounding allows), with the
source and how it was derived.

Sources
-------
* a byte count given by the user (``--logical 2GiB``): exact;
* fio's JSON output (``fio --output-format=json``): the sum of ``jobs[*].write.io_bytes``
  (``io_kbytes`` × 1024 when ``io_bytes`` is absent): exact;
* two readings of ``/sys/block/<dev>/stat`` (before and after the workload): field 7, sectors
  written, always in 512-byte units: exact;
* two readings of ``smartctl -A`` (text) or ``smartctl -j -A`` (JSON): for ATA drives attribute
  241 ``Total_LBAs_Written`` × the LBA unit (``lba_bytes``, default 512; some vendors count
  32 MiB units) — exact in that unit; for NVMe drives ``Data Units Written``;
* two readings of ``nvme smart-log`` (text or ``-o json``): ``data_units_written``.

NVMe's Data Units Written counts thousands of 512-byte units *rounded up* (NVMe base
specification, SMART / Health log), so a reading ``n >= 1`` means ``(n-1)·1000 < units <=
n·1000``; the difference of two readings ``b`` (before) and ``a`` (after) bounds the bytes
written to ``((a-b-1)·512000, (a-b+1)·512000)`` — write at least a few GB so this is small.

Every parser raises :class:`LogicalSourceError` naming the file and the offending field, line
or byte offset.
"""

import json
import math
import re
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

__all__ = [
    "LogicalSourceError", "LogicalVolume", "parse_size", "from_bytes", "read_fio_json",
    "read_sysfs_stat", "read_smartctl", "read_nvme_smart_log", "NVME_DATA_UNIT",
    "read_fio_bw_log", "read_series_csv", "sample_sysfs",
]

#: Bytes per NVMe "data unit" (1000 × 512 bytes).
NVME_DATA_UNIT = 512_000

#: Byte units, spelled exactly (``B`` is a byte; ``b`` would be a bit, ``m`` milli: a unit
#: that could mean either is refused, since it would scale WA by 8 or by 1000).
_UNITS = {
    "": 1, "B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "s": 512,
}


#: Largest byte count accepted (16 EiB: far beyond what a host writes to one drive; larger
#: figures are typing errors, and unbounded ones would overflow the floats of the WA engine).
MAX_BYTES = 1 << 64
#: Most significant digits read from any number (``MAX_BYTES`` has 20).
_MAX_DIGITS = 24


class LogicalSourceError(ValueError):
    """A logical-volume source is invalid; the message names the file and field."""


def _bounded_int(text, what):
    """``int(text)`` of a string of ASCII digits, refused (naming ``what``) when it has more
    significant digits than any byte count (no 4 301-digit conversion, no float overflow)."""
    digits = text.lstrip("0")
    if len(digits) > _MAX_DIGITS:
        raise LogicalSourceError(f"{what}: a {len(digits)}-digit number is larger than any byte "
                                 f"count (at most {MAX_BYTES})")
    return int(digits or "0")


@dataclass(frozen=True)
class LogicalVolume:
    """Bytes written by the host, as an interval.

    Parameters
    ----------
    lo, hi : int
        Bounds in bytes (``lo <= hi``).
    source : str
        Where the figure comes from (``"bytes"``, ``"fio"``, ``"sysfs"``, ``"smartctl"``,
        ``"nvme"``).
    detail : str
        How it was derived, for reports.
    """

    lo: int
    hi: int
    source: str = "bytes"
    detail: str = ""

    def __post_init__(self):
        if not 0 <= self.lo <= self.hi:
            raise LogicalSourceError(f"logical volume must satisfy 0 <= lo <= hi, not "
                                     f"[{self.lo}, {self.hi}]")
        if self.hi > MAX_BYTES:
            raise LogicalSourceError(f"logical volume of {self.hi} bytes is larger than "
                                     f"{MAX_BYTES} (16 EiB)")

    @property
    def value(self):
        """Point estimate: the middle of the interval."""
        return (self.lo + self.hi) / 2

    @property
    def exact(self):
        return self.lo == self.hi

    def to_dict(self):
        return {"lo": self.lo, "hi": self.hi, "value": self.value, "source": self.source,
                "detail": self.detail}


def parse_size(text):
    """Parse a byte count such as ``2147483648``, ``2GiB``, ``2 GB``, ``4096s`` (sectors)."""
    m = re.fullmatch(r"\s*([0-9]+)(?:\.([0-9]+))?\s*([A-Za-z]*)\s*", str(text))
    if m and m.group(3) not in _UNITS:
        unit = m.group(3)
        close = [u for u in _UNITS if u and u.lower() == unit.lower()]
        if close or unit.lower() in ("k", "m", "g", "t", "ki", "mi", "gi", "ti"):
            raise LogicalSourceError(
                f"byte count {text!r}: the unit {unit!r} is ambiguous (b is a bit, m is milli, "
                f"a bare prefix may be 1000 or 1024); write it exactly: B, kB, MB, GB, TB "
                f"(powers of 1000), KiB, MiB, GiB, TiB (powers of 1024) or s (512-byte "
                f"sectors)")
    if not m or m.group(3) not in _UNITS:
        raise LogicalSourceError(f"byte count {_short(text)} is not a number with an optional "
                                 f"unit (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB, s = 512-byte "
                                 f"sectors)")
    what = f"byte count {_short(text)}"
    whole = _bounded_int(m.group(1), what)
    frac = (m.group(2) or "").rstrip("0")
    if len(frac) > _MAX_DIGITS:
        raise LogicalSourceError(f"{what}: more decimals than any unit needs")
    value = (whole + Fraction(int(frac or "0"), 10 ** len(frac))) * _UNITS[m.group(3)]
    if value.denominator != 1:
        raise LogicalSourceError(f"{what} is not a whole number of bytes")
    if value > MAX_BYTES:
        raise LogicalSourceError(f"{what} is larger than {MAX_BYTES} bytes (16 EiB)")
    return int(value)


def _short(text, limit=40):
    """``repr(text)``, cut to ``limit`` characters (a 5000-digit value is not echoed whole)."""
    r = repr(str(text))
    return r if len(r) <= limit else f"{r[:limit - 5]}…' ({len(str(text))} characters)"


def from_bytes(count, detail="given"):
    """Return an exact logical volume of ``count`` bytes (an int or a size string)."""
    n = parse_size(count) if isinstance(count, str) else count
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise LogicalSourceError(f"byte count must be a non-negative integer, not "
                                 f"{_short(count)}")
    return LogicalVolume(n, n, "bytes", detail)


def _read(source):
    """Return ``(text, name)`` of a path or of text given directly (as ``(text, name)``)."""
    if isinstance(source, tuple):
        return source
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogicalSourceError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8"), str(path)
    except UnicodeDecodeError as exc:
        raise LogicalSourceError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None


# fio ---------------------------------------------------------------------------------------------


def read_fio_json(source):
    """Bytes written according to fio's JSON output (a path, or ``(text, name)``).

    fio may print warnings before the JSON object; they are skipped.
    """
    text, name = _read(source)
    start = text.find("{")
    if start < 0:
        raise LogicalSourceError(f"{name}: no JSON object found (run fio with "
                                 f"--output-format=json)")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise LogicalSourceError(f"{name}: invalid JSON at line {exc.lineno} column {exc.colno} "
                                 f"(offset {exc.pos}): {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # 4 301-digit integers, deep nesting
        raise LogicalSourceError(f"{name}: invalid JSON: {exc}") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise LogicalSourceError(f"{name}: field 'jobs' must be a non-empty list of fio jobs")
    total = 0
    for i, job in enumerate(jobs):
        write = job.get("write") if isinstance(job, dict) else None
        if not isinstance(write, dict):
            raise LogicalSourceError(f"{name}: field 'jobs[{i}].write' is missing or not an "
                                     f"object")
        if "io_bytes" in write:
            value, field, scale = write["io_bytes"], f"jobs[{i}].write.io_bytes", 1
        elif "io_kbytes" in write:
            value, field, scale = write["io_kbytes"], f"jobs[{i}].write.io_kbytes", 1024
        else:
            raise LogicalSourceError(f"{name}: field 'jobs[{i}].write.io_bytes' is missing")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise LogicalSourceError(f"{name}: field '{field}' must be a non-negative integer, "
                                     f"not {value!r}")
        total += value * scale
    return LogicalVolume(total, total, "fio",
                         f"{name}: sum of write.io_bytes over {len(jobs)} job(s)")


# sysfs -------------------------------------------------------------------------------------------


def _sysfs_sectors(source):
    text, name = _read(source)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise LogicalSourceError(f"{name}: expected one line of /sys/block/<dev>/stat, found "
                                 f"{len(lines)}")
    fields = lines[0].split()
    if len(fields) < 7:
        raise LogicalSourceError(f"{name}: /sys/block/<dev>/stat has {len(fields)} fields, "
                                 f"needs at least 7 (field 7 = sectors written)")
    for k, f in enumerate(fields[:11], 1):
        if not f.isdigit():
            raise LogicalSourceError(f"{name}: field {k} of /sys/block/<dev>/stat is not a "
                                     f"non-negative integer: {f!r}")
    return _bounded_int(fields[6], f"{name}: field 7 of /sys/block/<dev>/stat"), name


def read_sysfs_stat(before, after):
    """Bytes written between two readings of ``/sys/block/<dev>/stat`` (sectors × 512)."""
    b, bname = _sysfs_sectors(before)
    a, aname = _sysfs_sectors(after)
    if a < b:
        raise LogicalSourceError(f"{aname}: field 7 (sectors written) {a} is below the "
                                 f"'before' reading {b} in {bname} (device reset or swapped "
                                 f"files?)")
    n = (a - b) * 512
    return LogicalVolume(n, n, "sysfs", f"({a} - {b}) sectors × 512 B")


# smartctl / nvme ---------------------------------------------------------------------------------


def _number(text, what):
    return _bounded_int(text.replace(",", "").replace("_", "").replace(" ", ""), what)


def _smart_reading(source):
    """Return ``(kind, value, name)``: kind ``"lba"`` (ATA 241) or ``"nvme"`` (data units)."""
    text, name = _read(source)
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LogicalSourceError(f"{name}: invalid JSON at line {exc.lineno} column "
                                     f"{exc.colno} (offset {exc.pos}): {exc.msg}") from None
        except (ValueError, RecursionError) as exc:  # 4 301-digit integers, deep nesting
            raise LogicalSourceError(f"{name}: invalid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise LogicalSourceError(f"{name}: the JSON document must be an object")
        nvme = doc.get("nvme_smart_health_information_log")
        if isinstance(nvme, dict) or "data_units_written" in doc:
            holder = nvme if isinstance(nvme, dict) else doc
            field = ("nvme_smart_health_information_log.data_units_written"
                     if holder is nvme else "data_units_written")
            value = holder.get("data_units_written")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise LogicalSourceError(f"{name}: field '{field}' must be a non-negative "
                                         f"integer, not {value!r}")
            return "nvme", value, name
        table = doc.get("ata_smart_attributes", {})
        table = table.get("table") if isinstance(table, dict) else None
        if not isinstance(table, list):
            raise LogicalSourceError(f"{name}: neither 'nvme_smart_health_information_log' nor "
                                     f"'ata_smart_attributes.table' is present")
        for i, attr in enumerate(table):
            if isinstance(attr, dict) and attr.get("id") == 241:
                raw = attr.get("raw")
                value = raw.get("value") if isinstance(raw, dict) else None
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise LogicalSourceError(f"{name}: field 'ata_smart_attributes.table[{i}]"
                                             f".raw.value' must be a non-negative integer, "
                                             f"not {value!r}")
                return "lba", value, name
        raise LogicalSourceError(f"{name}: attribute 241 (Total_LBAs_Written) is not in "
                                 f"'ata_smart_attributes.table'")
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*data[ _]units[ _]written\s*:\s*([0-9][0-9,_ ]*)", line, re.I)
        if m:
            return "nvme", _number(m.group(1), f"{name}: line {lineno}"), name
        if re.match(r"\s*data[ _]units[ _]written\s*:", line, re.I):
            raise LogicalSourceError(f"{name}: line {lineno}: 'Data Units Written' has no "
                                     f"number: {line.strip()!r}")
        if re.match(r"\s*241\s", line):
            fields = line.split()
            if len(fields) < 10:
                raise LogicalSourceError(f"{name}: line {lineno}: attribute 241 has "
                                         f"{len(fields)} columns, expected 10: {line.strip()!r}")
            raw = fields[9]
            if not raw.isdigit():
                raise LogicalSourceError(f"{name}: line {lineno}: RAW_VALUE of attribute 241 is "
                                         f"not an integer: {raw!r}")
            return "lba", _bounded_int(raw, f"{name}: line {lineno}"), name
    raise LogicalSourceError(f"{name}: found neither attribute 241 (Total_LBAs_Written) nor "
                             f"'Data Units Written'")


def _nvme_interval(b, a, bname, aname, source):
    if a < b:
        raise LogicalSourceError(f"{aname}: data_units_written {a} is below the 'before' "
                                 f"reading {b} in {bname}")
    d = a - b
    lo = max(0, d - 1) * NVME_DATA_UNIT
    # With b == 0 nothing was written before: the after-reading alone bounds the volume.
    hi = (d + 1) * NVME_DATA_UNIT if b > 0 else d * NVME_DATA_UNIT
    return LogicalVolume(lo, hi, source, f"data units {a} - {b}, each 1000 × 512 B rounded up")


def read_smartctl(before, after, lba_bytes=512):
    """Bytes written between two ``smartctl -A`` readings (text or ``-j`` JSON)."""
    if isinstance(lba_bytes, bool) or not isinstance(lba_bytes, int) or lba_bytes < 1:
        raise LogicalSourceError(f"lba_bytes must be a positive integer, not {lba_bytes!r}")
    kb, b, bname = _smart_reading(before)
    ka, a, aname = _smart_reading(after)
    if kb != ka:
        raise LogicalSourceError(f"{bname} and {aname} are readings of different kinds "
                                 f"({kb} vs {ka})")
    if kb == "nvme":
        return _nvme_interval(b, a, bname, aname, "smartctl")
    if a < b:
        raise LogicalSourceError(f"{aname}: Total_LBAs_Written {a} is below the 'before' "
                                 f"reading {b} in {bname}")
    n = (a - b) * lba_bytes
    return LogicalVolume(n, n, "smartctl", f"Total_LBAs_Written ({a} - {b}) × {lba_bytes} B")


def read_nvme_smart_log(before, after):
    """Bytes written between two ``nvme smart-log`` readings (text or ``-o json``)."""
    kb, b, bname = _smart_reading(before)
    ka, a, aname = _smart_reading(after)
    for kind, name in ((kb, bname), (ka, aname)):
        if kind != "nvme":
            raise LogicalSourceError(f"{name}: no data_units_written (not an NVMe smart log)")
    return _nvme_interval(b, a, bname, aname, "nvme")


# Logical volume over time (for time-resolved WA) ------------------------------------------------


def read_series_csv(path):
    """Host bytes over time from a CSV of lines ``seconds,cumulative bytes`` (what ``rbscope
    sample-sysfs`` records; a header line and ``#`` comments are skipped): ``[(s, bytes), …]``.
    """
    rows = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise LogicalSourceError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LogicalSourceError(f"{path}: not a text file") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(",")
        try:
            if len(parts) != 2:
                raise ValueError
            row = (float(parts[0]), float(parts[1]))
            if not all(math.isfinite(x) and x >= 0 for x in row) or row[1] > MAX_BYTES:
                raise ValueError
            rows.append(row)
        except ValueError:
            if not rows and lineno == 1:
                continue  # a header line
            raise LogicalSourceError(f"{path}: line {lineno}: expected 'seconds,bytes', "
                                     f"got {line!r}") from None
    return rows


def read_fio_bw_log(paths):
    """Cumulative bytes written over time from fio bandwidth logs: ``[(seconds, bytes), …]``.

    Give the logs of every job (fio writes ``<name>_bw.<job>.log`` with ``--write_bw_log``);
    they are summed. Each line is ``msec, KiB/s, direction, block size, offset[, priority]``;
    only writes (direction 1) count. Run fio with ``--log_avg_msec=N``: each entry is then the
    mean bandwidth of the preceding N ms, and bytes = Σ bandwidth × interval, which is exact up
    to the rounding of the logged bandwidth to whole KiB/s (per-I/O logs without averaging are
    rejected, since their values are per-request rates). Raises :class:`LogicalSourceError`
    naming the file and line.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "read_text"):
        paths = [paths]
    events = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise LogicalSourceError(f"{path}: cannot read: {exc.strerror}") from None
        last_ms = 0
        rows = 0
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            parts = [p.strip() for p in line.split(",")]
            try:
                if len(parts) < 5:
                    raise ValueError
                if any(len(p) > _MAX_DIGITS for p in parts[:3]):
                    raise ValueError
                ms, kib_s, direction = int(parts[0]), int(parts[1]), int(parts[2])
            except ValueError:
                raise LogicalSourceError(f"{path}: line {lineno}: expected 'msec, KiB/s, "
                                         f"direction, bs, offset', got {line.strip()!r}") from None
            if ms < last_ms or kib_s < 0:
                raise LogicalSourceError(f"{path}: line {lineno}: time goes backwards or the "
                                         f"bandwidth is negative")
            if direction == 1:
                if ms == last_ms and rows:
                    raise LogicalSourceError(f"{path}: line {lineno}: two write entries at "
                                             f"{ms} ms: a per-I/O log; run fio with "
                                             f"--log_avg_msec")
                events[ms] = events.get(ms, 0) + kib_s * 1024 * (ms - last_ms) / 1000
                last_ms = ms
                rows += 1
        if not rows:
            raise LogicalSourceError(f"{path}: no write entries (direction 1)")
    series, total = [], 0.0
    for ms in sorted(events):
        total += events[ms]
        series.append((ms / 1000, total))
    return series


def sample_sysfs(device, output, *, interval=1.0, duration=None, clock=None, sleep=None):
    """Record ``/sys/block/<device>/stat`` every ``interval`` s as ``seconds,bytes`` lines.

    ``bytes`` is sectors written × 512 since the first sample; ``seconds`` counts from it. The
    first line is a comment with the wall-clock start (``# start_unix_ns=…``) so the series can
    be aligned with a capture. Every line is flushed. Stops after ``duration`` s (or on
    KeyboardInterrupt). Returns the number of samples written.
    """
    clock = clock or time.time_ns
    sleep = sleep or time.sleep
    stat = device if "/" in str(device) else f"/sys/block/{device}/stat"
    first_sectors, _ = _sysfs_sectors(stat)
    start = clock()
    n = 0
    with open(output, "w", encoding="utf-8") as out:
        out.write(f"# start_unix_ns={start} device={device}\nseconds,bytes\n")
        try:
            while True:
                now = clock()
                sectors, name = _sysfs_sectors(stat)
                if sectors < first_sectors:
                    raise LogicalSourceError(f"{name}: sectors written went backwards")
                out.write(f"{(now - start) / 1e9:.6f},{(sectors - first_sectors) * 512}\n")
                out.flush()
                n += 1
                if duration is not None and (now - start) / 1e9 >= duration:
                    break
                sleep(interval)
        except KeyboardInterrupt:
            pass
    return n

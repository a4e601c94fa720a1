"""Host workloads for the reference SSD: the RB-Explorer micro-benchmarks, preconditioning and
block-trace replay.

A :class:`Workload` is a list of requests (write, read or TRIM of a byte range). The 40
micro-benchmarks of the RB-Explorer paper (its Table 3) are named like the paper:
``{size}-{SQ|RD}-{100|50}%-W-{4KiB-align|4KiB-no-align}``:

* request size 512B, 4K, 8K, 16K or 32K;
* SQ: sequential from the start of the logical space (wrapping); RD: uniformly random offsets;
* 100 % writes, or 50 % (each request a write with probability 1/2; the reads follow their own
  sequential cursor, or random offsets, with the same size and alignment);
* 4KiB-align: offsets on 4 KiB boundaries; 4KiB-no-align: on 512-byte boundaries (a sequential
  stream starts 512 bytes into the space, so every request straddles 4 KiB boundaries);
* the workload stops once ``volume`` bytes have been written (the paper: 2 GB).

Traces: :func:`read_spc` reads the SPC format of the UMass traces (``ASU,LBA,size,opcode,
timestamp``; LBA in 512-byte sectors, size in bytes, opcode ``w``/``r``) and :func:`read_blkparse`
the default text output of ``blkparse`` (completed ``C`` events with ``W``/``R``/``D`` in the RWBS
field; sector and count in 512-byte sectors). Offsets beyond the drive wrap modulo its logical
space (ASUs are laid end to end).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .drive import RefSSDError

__all__ = ["WRITE", "READ", "TRIM", "Workload", "MICRO_BENCHMARKS", "micro", "parse_micro_name",
           "read_spc", "read_blkparse"]

WRITE, READ, TRIM = 0, 1, 2

_SIZES = {"512B": 512, "4K": 4096, "8K": 8192, "16K": 16384, "32K": 32768}


@dataclass
class Workload:
    """Requests for the reference SSD.

    Parameters
    ----------
    name : str
    ops : numpy.ndarray of uint8
        :data:`WRITE`, :data:`READ` or :data:`TRIM` per request.
    offsets, sizes : numpy.ndarray of int64
        Byte offset and size of each request (whole 512-byte sectors).
    """

    name: str
    ops: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray

    def __post_init__(self):
        self.ops = np.asarray(self.ops, dtype=np.uint8)
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        if not len(self.ops) == len(self.offsets) == len(self.sizes):
            raise RefSSDError(f"workload {self.name}: ops, offsets and sizes differ in length")

    def __len__(self):
        return len(self.ops)

    @property
    def logical_bytes(self):
        """Bytes the host writes."""
        return int(self.sizes[self.ops == WRITE].sum())

    @property
    def read_bytes(self):
        return int(self.sizes[self.ops == READ].sum())


def _name(size, random, write_pct, aligned):
    return (f"{size}-{'RD' if random else 'SQ'}-{write_pct}%-W-"
            f"{'4KiB-align' if aligned else '4KiB-no-align'}")


#: The 40 micro-benchmark names, in the paper's order of factors.
MICRO_BENCHMARKS = tuple(_name(s, r, w, a) for w in (100, 50) for r in (False, True)
                         for a in (True, False) for s in _SIZES)

#: A micro-benchmark name: the paper's factors, with any whole write share from 1 % to 100 % (the
#: paper's are 100 % and 50 %; a read-heavy run, e.g. ``4K-RD-10%-W-4KiB-align``, is the same
#: generator with nine reads to a write).
_NAME = re.compile(r"^(512B|4K|8K|16K|32K)-(SQ|RD)-(100|[1-9][0-9]?)%-W-"
                   r"(4KiB-align|4KiB-no-align)$")


def parse_micro_name(name):
    """Return ``(size_bytes, random, write_share, aligned)`` of a micro-benchmark name."""
    m = _NAME.match(name)
    if not m:
        raise RefSSDError(f"{name!r} is not a micro-benchmark name such as "
                          f"4K-SQ-50%-W-4KiB-align (sizes {', '.join(_SIZES)}; SQ or RD; a write "
                          f"share of 1% to 100% (the paper's: 100% or 50%); 4KiB-align or "
                          f"4KiB-no-align)")
    size, access, pct, align = m.groups()
    return _SIZES[size], access == "RD", int(pct) / 100, align == "4KiB-align"


def micro(name, space, volume, seed=0):
    """Build the micro-benchmark ``name`` over ``space`` logical bytes, writing ``volume`` bytes.

    Parameters
    ----------
    name : str
        A name from :data:`MICRO_BENCHMARKS`.
    space : int
        Bytes of the logical space the requests may address.
    volume : int
        Bytes to write; the workload stops at the request that reaches it.
    seed : int
    """
    size, random, share, aligned = parse_micro_name(name)
    align = 4096 if aligned else 512
    if space < 2 * max(size, 4096):
        raise RefSSDError(f"logical space of {space} bytes is too small for {name}")
    if volume < size:
        raise RefSSDError(f"volume {volume} is smaller than one request of {name}")
    rng = np.random.default_rng(seed)
    writes = -(-volume // size)
    if share < 1:
        is_write = rng.random(int(writes / share * 1.2) + 64) < share
        n = int(np.searchsorted(np.cumsum(is_write), writes) + 1)
        while n > len(is_write):  # unlucky draw: extend
            is_write = np.concatenate([is_write, rng.random(len(is_write)) < share])
            n = int(np.searchsorted(np.cumsum(is_write), writes) + 1)
        is_write = is_write[:n]
    else:
        is_write = np.ones(writes, dtype=bool)
    n = len(is_write)
    slots = (space - size) // align + 1  # offsets o with o % align == 0 and o + size <= space
    if random:
        offsets = rng.integers(0, slots, n) * align
    else:
        base = 0 if aligned else 512
        # Each stream (writes, reads) advances by `size` from `base`, wrapping inside the space.
        k = np.where(is_write, np.cumsum(is_write) - 1, np.cumsum(~is_write) - 1)
        span = (space - base) // size
        offsets = base + (k % span) * size
    ops = np.where(is_write, WRITE, READ).astype(np.uint8)
    return Workload(name, ops, offsets.astype(np.int64), np.full(n, size, dtype=np.int64))


def read_spc(path, space=None):
    """Read an SPC-format trace (``ASU,LBA,size,opcode,timestamp``) into a :class:`Workload`.

    ``space`` (bytes) wraps offsets into a smaller drive; LBAs are 512-byte sectors and ASUs are
    laid end to end at the largest extent seen.
    """
    rows = []
    text = _read_text(path)
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            raise RefSSDError(f"{path}: line {lineno}: expected ASU,LBA,size,opcode,timestamp, "
                              f"got {line!r}")
        try:
            asu, lba, size = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            raise RefSSDError(f"{path}: line {lineno}: ASU, LBA and size must be integers, "
                              f"got {line!r}") from None
        op = parts[3].lower()
        if op not in ("w", "r"):
            raise RefSSDError(f"{path}: line {lineno}: opcode must be w or r, not {parts[3]!r}")
        if asu < 0 or lba < 0 or size <= 0:
            raise RefSSDError(f"{path}: line {lineno}: negative ASU/LBA or empty request")
        rows.append((asu, lba * 512, -(-size // 512) * 512, WRITE if op == "w" else READ))
    if not rows:
        raise RefSSDError(f"{path}: no request in the trace")
    a = np.array(rows, dtype=np.int64)
    extent = int((a[:, 1] + a[:, 2]).max())
    offsets = a[:, 0] * extent + a[:, 1]
    return _wrap(Path(path).name, a[:, 3], offsets, a[:, 2], space)


_BLK = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+(\w)\s+(\w+)\s+(\d+)\s+\+\s+(\d+)")


def read_blkparse(path, space=None):
    """Read ``blkparse`` default text output; completed (``C``) requests become the workload.

    Writes (``W`` in RWBS), reads (``R``) and discards (``D``) are kept; other events and
    summary lines are skipped.
    """
    rows = []
    for line in _read_text(path).splitlines():
        m = _BLK.match(line)
        if not m:
            continue
        action, rwbs, sector, count = m.groups()
        if action != "C" or int(count) == 0:
            continue
        if "D" in rwbs:
            op = TRIM
        elif "W" in rwbs:
            op = WRITE
        elif "R" in rwbs:
            op = READ
        else:
            continue
        rows.append((int(sector) * 512, int(count) * 512, op))
    if not rows:
        raise RefSSDError(f"{path}: no completed read, write or discard (C event) in the "
                          f"blkparse output")
    a = np.array(rows, dtype=np.int64)
    return _wrap(Path(path).name, a[:, 2], a[:, 0], a[:, 1], space)


def _read_text(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RefSSDError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise RefSSDError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None


def _wrap(name, ops, offsets, sizes, space):
    if space is not None:
        sizes = np.minimum(sizes, space // 2 // 512 * 512)
        offsets = (offsets // 512 * 512) % (space - sizes + 512) // 512 * 512
    return Workload(name, ops, offsets, sizes)

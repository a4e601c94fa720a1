"""Targets of ``rbscope probe-geometry``: an NBD export or a block device / plain file.

Both give the detectors the same calls (:class:`Target`): ``pread``, ``pwrite``, ``flush`` and
``clone`` (another independent channel to the same target, for requests in flight at once), so
that a detector runs the same code against the virtual SSD and a real drive; only the transport
differs.

* ``nbd+unix:///?socket=PATH`` (and ``nbd+unix:///EXPORT?socket=PATH``): a small NBD client
  (fixed newstyle handshake, ``NBD_OPT_GO``, simple replies), one connection per channel.
* a path: ``O_DIRECT`` on a block device (the page cache bypassed); a plain file is opened with
  ``O_DIRECT`` where its filesystem allows it, else without (said in :attr:`Target.notes`). A
  block device that is mounted (itself or a partition of it, per ``/proc/self/mountinfo``) is
  refused.

Writing needs ``destructive=True`` and an explicit byte range; every request, read or write, is
checked against the range.
"""

import mmap
import os
import socket
import stat
import struct
import time
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from . import write_cache

__all__ = ["ProbeError", "RangeTooSmall", "Target", "open_target", "parse_range",
           "mounted_devices", "device_is_mounted"]


class ProbeError(ValueError):
    """A target that cannot be probed, or a request it refuses (the message names why)."""


class RangeTooSmall(ProbeError):
    """The range cannot hold what a detector writes (raised before it writes anything)."""


_SIZE_UNITS = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
               "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def _size(text, what):
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    if not num.isdigit() or unit not in _SIZE_UNITS:
        raise ProbeError(f"--range: {what} {text!r} is not a byte count (e.g. 1048576, 64MiB, "
                         f"1G)")
    return int(num) * _SIZE_UNITS[unit]


def parse_range(text):
    """``START:END`` (bytes, optional KiB/MiB/GiB/TiB suffix) → ``(start, end)``; both whole
    4 KiB multiples, ``start < end``."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise ProbeError(f"--range must be START:END in bytes, not {text!r}")
    a, b = text.split(":")
    start, end = _size(a, "START"), _size(b, "END")
    if start >= end:
        raise ProbeError(f"--range {text}: START must be below END")
    if start % 4096 or end % 4096:
        raise ProbeError(f"--range {text}: START and END must be multiples of 4096")
    return start, end


# Mount checks ------------------------------------------------------------------------------------


def mounted_devices(mountinfo_text):
    """The ``(major, minor)`` of every device in a ``/proc/self/mountinfo`` text."""
    out = set()
    for line in mountinfo_text.splitlines():
        fields = line.split()
        if len(fields) > 2 and ":" in fields[2]:
            major, _, minor = fields[2].partition(":")
            if major.isdigit() and minor.isdigit():
                out.add((int(major), int(minor)))
    return out


def _partitions(major, minor, sys_root):
    """``(major, minor)`` of the partitions of a block device, from sysfs (none if unknown)."""
    base = Path(sys_root) / "dev" / "block" / f"{major}:{minor}"
    out = []
    try:
        for sub in base.iterdir():
            dev = sub / "dev"
            if (sub / "partition").exists() and dev.exists():
                ma, _, mi = dev.read_text().strip().partition(":")
                out.append((int(ma), int(mi)))
    except OSError:
        pass
    return out


def device_is_mounted(rdev, mountinfo_text, sys_root="/sys"):
    """Whether block device ``rdev`` (``st_rdev``) or a partition of it is mounted."""
    mounted = mounted_devices(mountinfo_text)
    me = (os.major(rdev), os.minor(rdev))
    return me in mounted or any(p in mounted for p in _partitions(*me, sys_root))


# Targets -----------------------------------------------------------------------------------------


class Target:
    """What the detectors talk to. ``size`` bytes; ``start``, ``end``: the range they may use;
    ``writable``; ``notes``: what the target could not do (caches, O_DIRECT).

    Calls: ``pread(offset, length)``, ``pwrite(offset, data)``, ``pwrite_through(offset, data)``
    (written to the flash before it returns: FUA, or a write and a flush), ``flush()``,
    ``clone()`` and ``close()``; ``clock()``, the seconds the detectors time requests with
    (the wall clock here; the model's clock on :class:`rbscope.vssd.target.EngineTarget`).
    """

    kind = "target"

    def __init__(self, name, size, start, end, writable):
        self.name, self.size, self.start, self.end = name, size, start, end
        self.writable = writable
        self.notes = []

    def _check(self, offset, length, write):
        if write and not self.writable:
            raise ProbeError(f"{self.name}: writing needs --destructive and --range")
        if offset < self.start or offset + length > self.end:
            raise ProbeError(f"{self.name}: request [{offset}, {offset + length}) is outside "
                             f"the range [{self.start}, {self.end})")

    def clock(self):
        """Seconds on the clock the detectors time requests with (the wall clock)."""
        return time.perf_counter()

    def timed(self, fn, *args):
        """Run ``fn(*args)``; return the seconds it took on :meth:`clock`."""
        t = self.clock()
        fn(*args)
        return self.clock() - t

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# NBD ---------------------------------------------------------------------------------------------

_NBDMAGIC = b"NBDMAGIC"
_IHAVEOPT = b"IHAVEOPT"
_REPLY_MAGIC = 0x3E889045565A9
_REQ_MAGIC = 0x25609513
_SIMPLE_REPLY = 0x67446698
_OPT_GO = 7
_REP_ACK, _REP_INFO = 1, 3
_CMD_READ, _CMD_WRITE, _CMD_DISC, _CMD_FLUSH = 0, 1, 2, 3
_FLAG_FIXED_NEWSTYLE, _FLAG_NO_ZEROES = 1, 2
_SEND_FUA = 1 << 3  # transmission flag: the server takes NBD_CMD_FLAG_FUA
_CMD_FLAG_FUA = 1


def _recv(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError("the NBD server closed the connection")
        buf += chunk
    return bytes(buf)


class NbdTarget(Target):
    """One NBD connection over a Unix socket (``clone`` opens another)."""

    kind = "nbd"

    def __init__(self, uri, start=None, end=None, writable=False):
        parts = urlsplit(uri)
        if parts.scheme != "nbd+unix":
            raise ProbeError(f"{uri}: only nbd+unix:// URIs are supported (nbd+unix:///?socket="
                             f"PATH)")
        q = parse_qs(parts.query)
        if "socket" not in q:
            raise ProbeError(f"{uri}: the URI names no socket (nbd+unix:///?socket=PATH)")
        self.uri = uri
        self.path = q["socket"][0]
        self.export = unquote(parts.path.lstrip("/"))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(self.path)
        except OSError as exc:
            raise ProbeError(f"{uri}: cannot connect to {self.path}: {exc.strerror}") from None
        size = self._handshake()
        self._handle = 0
        start = 0 if start is None else start
        end = size if end is None else end
        if end > size:
            raise ProbeError(f"{uri}: --range ends at {end}, beyond the export's {size} bytes")
        super().__init__(uri, size, start, end, writable)
        self.notes.append("NBD: the write cache cannot be switched off; writes that must reach "
                          "the flash carry FUA (Force Unit Access)" if self.fua else
                          "NBD: the write cache cannot be switched off and the server takes no "
                          "FUA; writes that must reach the flash are followed by a FLUSH")

    def _handshake(self):
        s = self.sock
        head = _recv(s, 18)
        if head[:8] != _NBDMAGIC or head[8:16] != _IHAVEOPT:
            raise ProbeError(f"{self.uri}: not a newstyle NBD server")
        s.sendall(struct.pack("!I", _FLAG_FIXED_NEWSTYLE | _FLAG_NO_ZEROES))
        name = self.export.encode()
        data = struct.pack("!I", len(name)) + name + struct.pack("!H", 0)
        s.sendall(_IHAVEOPT + struct.pack("!II", _OPT_GO, len(data)) + data)
        size = None
        while True:
            magic, _opt, rtype, length = struct.unpack("!QIII", _recv(s, 20))
            body = _recv(s, length) if length else b""
            if magic != _REPLY_MAGIC:
                raise ProbeError(f"{self.uri}: bad option reply")
            if rtype & 0x80000000:
                raise ProbeError(f"{self.uri}: the server refused the export: "
                                 f"{body[:200].decode('utf-8', 'replace')}")
            if rtype == _REP_INFO and len(body) >= 12 and struct.unpack("!H", body[:2])[0] == 0:
                size, tflags = struct.unpack("!QH", body[2:12])
                self.fua = bool(tflags & _SEND_FUA)
            if rtype == _REP_ACK:
                break
        if size is None:
            raise ProbeError(f"{self.uri}: the server gave no export size")
        return size

    def _request(self, cmd, offset, length, data=b"", flags=0):
        self._handle += 1
        self.sock.sendall(struct.pack("!IHHQQI", _REQ_MAGIC, flags, cmd, self._handle, offset,
                                      length) + data)
        magic, error, handle = struct.unpack("!IIQ", _recv(self.sock, 16))
        if magic != _SIMPLE_REPLY or handle != self._handle:
            raise ProbeError(f"{self.uri}: bad reply")
        if error:
            raise ProbeError(f"{self.uri}: request failed (error {error})")
        return _recv(self.sock, length) if cmd == _CMD_READ else b""

    def pread(self, offset, length):
        self._check(offset, length, False)
        return self._request(_CMD_READ, offset, length)

    def pwrite(self, offset, data):
        self._check(offset, len(data), True)
        self._request(_CMD_WRITE, offset, len(data), bytes(data))

    def pwrite_through(self, offset, data):
        self._check(offset, len(data), True)
        if self.fua:
            self._request(_CMD_WRITE, offset, len(data), bytes(data), _CMD_FLAG_FUA)
        else:
            self._request(_CMD_WRITE, offset, len(data), bytes(data))
            self.flush()

    def flush(self):
        self._request(_CMD_FLUSH, 0, 0)

    def clone(self):
        return NbdTarget(self.uri, self.start, self.end, self.writable)

    def close(self):
        try:
            self.sock.sendall(struct.pack("!IHHQQI", _REQ_MAGIC, 0, _CMD_DISC, 0, 0, 0))
        except OSError:
            pass
        self.sock.close()


# Block devices and files -------------------------------------------------------------------------


class FileTarget(Target):
    """A block device or a plain file, ``O_DIRECT`` where possible."""

    kind = "file"

    def __init__(self, path, start=None, end=None, writable=False, *,
                 mountinfo_path="/proc/self/mountinfo", sys_root="/sys", manage_cache=True):
        self.path = str(path)
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise ProbeError(f"{path}: {exc.strerror}") from None
        self.block = stat.S_ISBLK(st.st_mode)
        if not self.block and not stat.S_ISREG(st.st_mode):
            raise ProbeError(f"{path}: neither a block device nor a regular file")
        if self.block:
            try:
                with open(mountinfo_path, encoding="utf-8") as f:
                    info = f.read()
            except OSError as exc:
                raise ProbeError(f"{path}: cannot read {mountinfo_path} to check that the "
                                 f"device is not mounted: {exc.strerror}") from None
            if device_is_mounted(st.st_rdev, info, sys_root):
                raise ProbeError(f"{path}: the device (or a partition of it) is mounted; "
                                 f"unmount it first (probe-geometry never touches a mounted "
                                 f"device)")
        self._flags = os.O_RDWR if writable else os.O_RDONLY
        notes = []
        try:
            self.fd = os.open(self.path, self._flags | os.O_DIRECT)
            self.direct = True
        except OSError:
            if self.block:
                raise ProbeError(f"{path}: cannot open with O_DIRECT") from None
            self.fd = os.open(self.path, self._flags)
            self.direct = False
            notes.append("O_DIRECT refused by the file's filesystem: the page cache is in the "
                         "way (latencies are not the device's)")
        size = os.lseek(self.fd, 0, os.SEEK_END)
        start = 0 if start is None else start
        end = size if end is None else end
        if end > size:
            os.close(self.fd)
            raise ProbeError(f"{path}: --range ends at {end}, beyond its {size} bytes")
        super().__init__(self.path, size, start, end, writable)
        self.notes += notes
        self.mountinfo_path, self.sys_root = mountinfo_path, sys_root
        self._restore_cache = None
        if self.block and writable:
            # The drive's own cache off while the detectors time writes, where Linux lets us (a
            # clone, ``manage_cache`` False, leaves it to the target that switched it).
            if manage_cache:
                note, self._restore_cache = write_cache.switch_off(st.st_rdev,
                                                                   sys_root=sys_root)
                self.notes.append(note)
        elif self.block:
            self.notes.append("read-only: the drive's write cache is left as it is")
        else:
            self.notes.append("a plain file: the drive's write cache is out of reach and left "
                              "as it is; writes that must reach the flash are issued with "
                              "RWF_DSYNC (FUA)")

    @staticmethod
    def _buffer(length):
        # O_DIRECT needs an aligned buffer: an anonymous mapping is page-aligned.
        return mmap.mmap(-1, max(length, mmap.PAGESIZE))

    def pread(self, offset, length):
        self._check(offset, length, False)
        buf = self._buffer(length)
        try:
            n = os.preadv(self.fd, [memoryview(buf)[:length]], offset)
            return bytes(buf[:n])
        finally:
            buf.close()

    def pwrite(self, offset, data):
        self._check(offset, len(data), True)
        buf = self._buffer(len(data))
        try:
            buf[:len(data)] = data
            os.pwritev(self.fd, [memoryview(buf)[:len(data)]], offset)
        finally:
            buf.close()

    def flush(self):
        os.fsync(self.fd)

    def pwrite_through(self, offset, data):
        # RWF_DSYNC: the write reaches stable storage before it returns (FUA on Linux).
        self._check(offset, len(data), True)
        buf = self._buffer(len(data))
        try:
            buf[:len(data)] = data
            os.pwritev(self.fd, [memoryview(buf)[:len(data)]], offset, os.RWF_DSYNC)
        finally:
            buf.close()

    def clone(self):
        return FileTarget(self.path, self.start, self.end, self.writable,
                          mountinfo_path=self.mountinfo_path, sys_root=self.sys_root,
                          manage_cache=False)

    def close(self):
        try:
            if self._restore_cache is not None:
                restore, self._restore_cache = self._restore_cache, None
                try:
                    restore()
                except OSError as exc:
                    raise ProbeError(f"{self.path}: the drive's write cache could not be put "
                                     f"back as it was ({exc.strerror}): switch it on by hand "
                                     f"(hdparm -W1, or nvme set-feature -f 6 -v 1)") from None
        finally:
            os.close(self.fd)


def open_target(spec, *, destructive=False, byte_range=None, **kw):
    """Open ``spec`` (an ``nbd+unix://`` URI or a path).

    Parameters
    ----------
    destructive : bool
        Allow writes; needs ``byte_range``.
    byte_range : (int, int), optional
        ``(start, end)``: every request stays inside it (default: the whole target, read-only).
    """
    if destructive and byte_range is None:
        raise ProbeError("--destructive needs an explicit --range START:END (the bytes that "
                         "may be overwritten)")
    start, end = byte_range if byte_range is not None else (None, None)
    if spec.startswith("nbd"):
        return NbdTarget(spec, start, end, destructive)
    return FileTarget(spec, start, end, destructive, **kw)

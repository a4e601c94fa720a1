"""nbdkit Python plugin of ``rbscope vssd``: a relay to the engine, standard library only.

nbdkit's Python plugin runs this file in the system's Python (Debian: /usr/bin/python3), not in
the interpreter rbscope is installed in, so it imports nothing of rbscope, NumPy or anything
outside the standard library. ``rbscope vssd`` runs the engine in its own process and starts
``nbdkit python nbd_plugin.py engine=SOCKET size=BYTES``; every NBD request becomes one message
on a Unix socket to that process (one connection per nbdkit worker thread), which answers once
the request's modelled completion time has come.

Message to the engine: kind (1 byte: ``r`` read, ``w`` write, ``W`` write with FUA: written back
before the answer, ``t`` trim, ``f`` flush), offset
(8 bytes), length (4 bytes), big-endian; a write's data follows. Answer: status (1 byte, 0 = done),
length (4 bytes), then a read's data, or the error text when the status is not 0.
"""

import errno
import socket
import struct
import threading

import nbdkit

API_VERSION = 2

_REQUEST = struct.Struct("!cQI")
_ANSWER = struct.Struct("!BI")
_config = {}
_local = threading.local()


def config(key, value):
    if key not in ("engine", "size"):
        raise RuntimeError(f"unknown parameter {key!r} (engine=SOCKET size=BYTES)")
    _config[key] = value


def config_complete():
    for key in ("engine", "size"):
        if key not in _config:
            raise RuntimeError(f"parameter {key}= is missing")
    _config["size"] = int(_config["size"])


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(readonly):  # noqa: A001 - the name nbdkit calls
    return 1


def get_size(h):
    return _config["size"]


def can_write(h):
    return True


def can_flush(h):
    return True


def can_trim(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE  # a write with FUA is written back before it is answered


def can_multi_conn(h):
    return True  # one engine behind every connection: a flush covers them all


def _connection():
    s = getattr(_local, "sock", None)
    if s is None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(_config["engine"])
        _local.sock = s
    return s


def _recv(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if not k:
            raise OSError("the rbscope vssd engine closed the connection")
        got += k
    return buf


def _call(kind, offset, length, data=b""):
    s = _connection()
    s.sendall(_REQUEST.pack(kind, offset, length) + bytes(data))
    status, n = _ANSWER.unpack(_recv(s, _ANSWER.size))
    body = _recv(s, n) if n else b""
    if status:
        nbdkit.set_error(errno.EINVAL if status == 2 else errno.EIO)
        raise RuntimeError(bytes(body).decode("utf-8", "replace"))
    return body


def pread(h, buf, offset, flags):
    buf[:] = _call(b"r", offset, len(buf))


def pwrite(h, buf, offset, flags):
    _call(b"W" if flags & nbdkit.FLAG_FUA else b"w", offset, len(buf), buf)


def trim(h, count, offset, flags):
    _call(b"t", offset, count)


def flush(h, flags):
    _call(b"f", 0, 0)

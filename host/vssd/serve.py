"""Serve an :class:`~rbscope.vssd.engine.Engine` as a network block device through nbdkit.

Where the engine runs
---------------------
nbdkit's Python plugin embeds the system's Python (Debian: /usr/bin/python3), which is not the
interpreter rbscope and NumPy are installed in. The engine therefore runs in the ``rbscope
vssd`` process itself; the plugin (:mod:`rbscope.vssd.nbd_plugin`, standard library only) relays
each NBD request over a private Unix socket to :class:`EngineServer`, one connection per
nbdkit worker thread. No path of the project is put on the system Python's ``sys.path``.

Real time
---------
The model's clock is the wall clock divided by the slowdown ``F``: a request arriving ``t``
seconds after the start arrives at model time ``t / F``; the engine gives its completion time
``e`` (model), and the answer is sent at wall time ``e × F`` (the worker sleeps until then).
With ``F = 1`` the drive answers in its own time; a larger ``F`` leaves a 2-core host the time
to run the FTL and the relay between requests. Requests the host could not answer in time
(the wall clock already past ``e × F`` when the engine was done) are counted as ``late``.
"""

import os
import shutil
import socket
import socketserver
import struct
import subprocess
import threading
import time
from pathlib import Path

from rbscope.refssd.drive import RefSSDError

from .engine import FLUSH, READ, TRIM, WRITE

__all__ = ["Service", "EngineServer", "nbdkit_command", "PLUGIN", "ServeError"]

#: The nbdkit plugin script (run by the system Python inside nbdkit).
PLUGIN = Path(__file__).with_name("nbd_plugin.py")
_REQUEST = struct.Struct("!cQI")
_ANSWER = struct.Struct("!BI")
_KINDS = {b"r": READ, b"w": WRITE, b"W": WRITE, b"t": TRIM, b"f": FLUSH}


class ServeError(RuntimeError):
    """nbdkit or its Python plugin is missing, or the server cannot start."""


class Service:
    """The engine behind a lock, on the wall clock slowed by ``slowdown``.

    Parameters
    ----------
    engine : Engine
    slowdown : float
        Wall seconds per model second (>= 1e-3).
    clock, sleep : callables
        ``time.monotonic`` and ``time.sleep`` (replaceable in tests).
    """

    def __init__(self, engine, slowdown=1.0, *, clock=time.monotonic, sleep=time.sleep):
        if not (isinstance(slowdown, (int, float)) and not isinstance(slowdown, bool)
                and slowdown >= 1e-3):
            raise RefSSDError(f"slowdown must be a number of at least 0.001, not {slowdown!r}")
        self.engine = engine
        self.slowdown = float(slowdown)
        self.clock, self.sleep = clock, sleep
        self.lock = threading.Lock()
        self.t0 = clock()
        # The engine's clock starts after the power-on pulses.
        self.offset_ns = engine.end_ns
        self.served = 0
        self.late = 0
        self.errors = 0
        self.latency_ns = 0  # summed model latencies

    def model_now(self):
        return self.offset_ns + int((self.clock() - self.t0) / self.slowdown * 1e9)

    def wall_of(self, model_ns):
        return self.t0 + (model_ns - self.offset_ns) * self.slowdown / 1e9

    def handle(self, kind, offset, length, data=None, fua=False):
        """Run one request, wait until its completion time, return a read's data.

        ``fua`` (a write with NBD's Force Unit Access): the drive writes its buffer back before
        it answers (a flush right after the write), as a drive with its write cache disabled.
        """
        with self.lock:
            c = self.engine.submit(kind, offset, length, self.model_now(), data)
            end = c.end_ns
            if fua:
                end = self.engine.submit(FLUSH, arrival_ns=c.end_ns).end_ns
            self.served += 1
            self.latency_ns += end - c.arrival_ns
        wait = self.wall_of(end) - self.clock()
        if wait > 0:
            self.sleep(wait)
        else:
            with self.lock:
                self.late += 1
        return c.data

    def stats(self):
        return {"requests": self.served, "late": self.late, "errors": self.errors,
                "slowdown": self.slowdown, "wall_s": self.clock() - self.t0,
                "mean_latency_us": (self.latency_ns / self.served / 1e3 if self.served
                                    else None)}


def _recv(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        service = self.server.service
        sock = self.request
        while True:
            head = _recv(sock, _REQUEST.size)
            if head is None:
                return
            code, offset, length = _REQUEST.unpack(head)
            kind = _KINDS.get(code)
            data = None
            if kind == WRITE:
                data = _recv(sock, length)
                if data is None:
                    return
            try:
                if kind is None:
                    raise RefSSDError(f"unknown request code {code!r}")
                out = service.handle(kind, offset, length, data, fua=code == b"W")
            except RefSSDError as exc:
                with service.lock:
                    service.errors += 1
                msg = str(exc).encode()
                sock.sendall(_ANSWER.pack(2, len(msg)) + msg)
                continue
            out = out if kind == READ else b""
            sock.sendall(_ANSWER.pack(0, len(out)) + out)


class EngineServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The engine's end of the relay: a Unix-socket server, one thread per connection."""

    daemon_threads = True

    def __init__(self, path, service):
        self.service = service
        super().__init__(str(path), _Handler)

    def start(self):
        t = threading.Thread(target=self.serve_forever, name="vssd-engine", daemon=True)
        t.start()
        return t


def nbdkit_command(socket_path, engine_socket, size, *, threads=16, run=None):
    """The nbdkit command line serving the plugin on ``socket_path`` (a Unix socket).

    Requests are aligned to 512-byte sectors by nbdkit's ``blocksize`` filter (it reads,
    modifies and writes the sectors around an unaligned request).
    """
    nbdkit = shutil.which("nbdkit")
    if nbdkit is None:
        raise ServeError("nbdkit is not installed (Debian: apt-get install nbdkit "
                         "nbdkit-plugin-python; `make` installs them)")
    cmd = [nbdkit, "--foreground", "--exit-with-parent", "--unix", str(socket_path),
           "--threads", str(threads), "--filter=blocksize", "python", str(PLUGIN),
           f"engine={engine_socket}", f"size={size}", "minblock=512", "maxdata=33554432"]
    if run is not None:
        cmd[1:1] = ["--run", run]
    return cmd


def check_python_plugin():
    """Raise :class:`ServeError` unless nbdkit has its Python plugin."""
    nbdkit = shutil.which("nbdkit")
    if nbdkit is None:
        raise ServeError("nbdkit is not installed (Debian: apt-get install nbdkit "
                         "nbdkit-plugin-python; `make` installs them)")
    r = subprocess.run([nbdkit, "python", "--version"], capture_output=True, text=True,
                       check=False)
    if r.returncode:
        raise ServeError("nbdkit has no Python plugin (Debian: apt-get install "
                         f"nbdkit-plugin-python): {r.stderr.strip()[:200]}")


def wait_for_socket(path, proc, timeout=20.0):
    """Wait until a server listens on Unix socket ``path``; False if ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(path):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                return True
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.05)
    return False

"""A probe target served by an in-process :class:`~rbscope.vssd.engine.Engine`, on its clock.

:class:`EngineTarget` gives the host-side detectors of :mod:`rbscope.probe` the reference SSD
without nbdkit, the relay or the wall clock: each request arrives when the previous one
completed (a host issuing one request at a time) and :meth:`EngineTarget.clock` is the model's
clock, so a detector measures the modelled latencies exactly. The tests and the benchmarks use
it to check a detector's decision rule against the drive's truth on a loaded machine; the same
detector code runs against ``rbscope vssd`` over NBD (wall clock) and against real drives.

It takes one request at a time: :meth:`EngineTarget.clone` (the concurrent writers of the
page-size and parallel-units detectors) is refused.
"""

from rbscope.probe.target import ProbeError, Target

__all__ = ["EngineTarget"]


class EngineTarget(Target):
    """The engine as a :class:`~rbscope.probe.target.Target` (one request in flight).

    Parameters
    ----------
    engine : Engine
    start, end : int, optional
        The byte range the detectors may use (default: the whole drive).
    """

    kind = "engine"

    def __init__(self, engine, start=None, end=None):
        start = 0 if start is None else start
        end = engine.capacity if end is None else end
        if not 0 <= start < end <= engine.capacity:
            raise ProbeError(f"engine target: range [{start}, {end}) is not inside the drive's "
                             f"{engine.capacity} bytes")
        super().__init__(f"engine:{engine.drive.name}", engine.capacity, start, end, True)
        self.engine = engine
        self.now_ns = engine.end_ns
        self.requests = 0
        self.notes.append("in-process reference SSD: the modelled latencies, one request at a "
                          "time")

    def clock(self):
        return self.now_ns / 1e9

    def _done(self, completion):
        self.now_ns = max(self.now_ns, completion.end_ns)
        self.requests += 1
        return completion

    def pread(self, offset, length):
        self._check(offset, length, False)
        return self._done(self.engine.read(offset, length, self.now_ns)).data

    def pwrite(self, offset, data):
        self._check(offset, len(data), True)
        self._done(self.engine.write(offset, len(data), self.now_ns, bytes(data)))

    def pwrite_through(self, offset, data):
        # As rbscope vssd serves a write with FUA: the write, then the buffer written back.
        self._check(offset, len(data), True)
        c = self.engine.write(offset, len(data), self.now_ns, bytes(data))
        self._done(self.engine.flush(c.end_ns))

    def flush(self):
        self._done(self.engine.flush(self.now_ns))

    def clone(self):
        raise ProbeError("the in-process engine target takes one request at a time (the "
                         "page-size and parallel-units detectors need rbscope vssd over NBD)")

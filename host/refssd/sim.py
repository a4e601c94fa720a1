"""``simulate``: run a workload on the reference SSD and return its pulses, commands and truth."""

import time
from dataclasses import dataclass, field

import numpy as np

from .drive import Drive, RefSSDError, load_drive
from .ftl import Cause, make_ftl
from .timing import NandOp, schedule
from .workload import READ, TRIM, WRITE, Workload

__all__ = ["Truth", "Run", "simulate", "ftl_truth", "precondition_ftl", "PRECONDITIONS"]

#: Drive states a workload can start from: ``fresh`` (never written), ``initial`` (filled once,
#: then trimmed whole: every block holds invalid data and is erased when needed — the paper's
#: "initial" state), ``steady`` (filled sequentially, then overwritten at random with 4 KiB
#: writes of ``steady_passes`` times the logical space — the paper's random-filled "steady"
#: state).
PRECONDITIONS = ("fresh", "initial", "steady")

_CAUSES = ("host", "gc", "rmw", "wl", "pad", "slc")


@dataclass
class Truth:
    """What the reference SSD really did during the workload (preconditioning excluded).

    Members
    -------
    host_bytes_written, host_bytes_read : int
    host_pages_written : float
        Host bytes written over the page size.
    pages_programmed : dict of str to int
        NAND pages programmed by cause (``host``, ``gc``, ``rmw``, ``wl``, ``pad``, ``slc``) and
        ``total``.
    program_operations : int
        Program operations (a multi-plane program is one operation of Mp pages).
    erases : dict of str to int
        Erase operations by cause and ``total`` (a multi-plane erase erases Mp blocks).
    reads : dict of str to int
        Page reads by cause and ``total``.
    per_die : list of dict
        The same counts for every die.
    pulses : dict of str to int
        R/B# pulses per :class:`NandOp` name, all dies.
    wa_true : float
        ``pages_programmed['total'] × page_size / host_bytes_written``.
    read_retries : int
        Extra tR of pages re-read after a failed ECC (``Drive.read_retry``); not in ``reads``,
        which counts the pages the firmware read.
    suspensions : int
        Programs and erases that were suspended for reads (each still one operation).
    """

    host_bytes_written: int
    host_bytes_read: int
    host_pages_written: float
    pages_programmed: dict
    program_operations: int
    erases: dict
    reads: dict
    per_die: list
    pulses: dict
    wa_true: float
    read_retries: int = 0
    suspensions: int = 0

    def to_dict(self):
        return dict(self.__dict__)


@dataclass
class Run:
    """Outcome of :func:`simulate`.

    Members
    -------
    drive : Drive
    workload : str
    precondition : str
    pulses : list of numpy.ndarray
        Per die, :data:`~rbscope.refssd.timing.PULSE_DTYPE` rows in time order.
    commands : numpy.ndarray
        The bus command stream, :data:`~rbscope.refssd.timing.COMMAND_DTYPE`, in time order.
    truth : Truth
    geometry : rbscope.analysis.geometry.Geometry
        The drive as a rbscope user describes it (see :meth:`Drive.user_geometry`).
    logical_bytes : int
        Host bytes written (the WA denominator).
    end_ns : int
        End of the last pulse.
    seed : int
    stats : dict
        Run times: ``ftl_s``, ``timing_s``, ``operations``, ``pulses``; and ``drawn_max_ns``,
        the longest tPROG, tBERS and tR the timing model drew (what a datasheet's maxima must
        cover).
    ftl : PageFTL
        The FTL after the run (to continue with ``simulate(..., ftl=run.ftl)``).
    """

    drive: Drive
    workload: str
    precondition: str
    pulses: list
    commands: np.ndarray
    truth: Truth
    geometry: object
    logical_bytes: int
    end_ns: int
    seed: int
    stats: dict = field(default_factory=dict)
    ftl: object = field(default=None, repr=False)

    def die_location(self, die):
        return self.drive.die_location(die)


def precondition_ftl(ftl, state, *, seed=0, steady_passes=1.0):
    """Bring ``ftl`` to ``state`` (one of :data:`PRECONDITIONS`) and zero its counters."""
    if state not in PRECONDITIONS:
        raise RefSSDError(f"precondition must be one of {', '.join(PRECONDITIONS)}, "
                          f"not {state!r}")
    if state == "fresh":
        ftl.reset_counts()
        return
    drive = ftl.drive
    ps = drive.page_size
    space = ftl.logical_pages * ps
    chunk = max(ps, 128 * 1024 // ps * ps)
    for off in range(0, space, chunk):
        ftl.write(off, min(chunk, space - off))
    if state == "initial":
        ftl.flush()
        ftl.trim(0, space)
    else:
        rng = np.random.default_rng(seed + 7919)
        n = int(space / 4096 * steady_passes)
        offs = rng.integers(0, space // 4096, n) * 4096
        for off in offs.tolist():
            ftl.write(off, 4096)
        ftl.flush()
    ftl.reset_counts()


def _counts(row):
    out = {name: int(row[int(Cause[name.upper()])]) for name in _CAUSES}
    out["total"] = int(row.sum())
    return out


def ftl_truth(ftl, ops, *, read_retries=0, suspensions=0):
    """The :class:`Truth` of ``ftl``'s counters since its last ``reset_counts``.

    Parameters
    ----------
    ftl : PageFTL
    ops : numpy.ndarray
        The :class:`NandOp` of every R/B# pulse the timing model gave the operations (all
        dies), counted into ``Truth.pulses``.
    read_retries, suspensions : int
        The timing model's counts (``schedule(..., stats=)``).
    """
    drive = ftl.drive
    written = ftl.host_bytes_written
    per_die = []
    for d in range(drive.dies):
        per_die.append({"pages_programmed": _counts(ftl.pages_programmed[d]),
                        "program_operations": int(ftl.programs[d].sum()),
                        "erases": _counts(ftl.erases[d]), "reads": _counts(ftl.reads[d])})
    total_pages = int(ftl.pages_programmed.sum())
    pulse_counts = {op.name: int((ops == op).sum()) for op in NandOp}
    return Truth(
        host_bytes_written=written, host_bytes_read=ftl.host_bytes_read,
        host_pages_written=written / drive.page_size,
        pages_programmed=_counts(ftl.pages_programmed.sum(axis=0)),
        program_operations=int(ftl.programs.sum()), erases=_counts(ftl.erases.sum(axis=0)),
        reads=_counts(ftl.reads.sum(axis=0)), per_die=per_die, pulses=pulse_counts,
        wa_true=total_pages * drive.page_size / written if written else float("nan"),
        read_retries=read_retries, suspensions=suspensions)


def simulate(drive, workload, *, seed=0, precondition="fresh", steady_passes=1.0,
             flush=True, ftl=None):
    """Run ``workload`` on ``drive``; return a :class:`Run`.

    Parameters
    ----------
    drive : Drive, str or path
        A :class:`Drive`, a preset name (``ssd-v``, ``mlc-2plane``, ``tlc-gc``, ``cache-prog``,
        ``slc``) or a TOML drive spec.
    workload : Workload
    seed : int
        Seeds the timing draws and the preconditioning.
    precondition : str
        ``fresh``, ``initial`` or ``steady`` (:data:`PRECONDITIONS`).
    steady_passes : float
        Random 4 KiB overwrites of the logical space for ``steady``.
    flush : bool
        Write the buffer back at the end (as a host's final fsync).
    ftl : PageFTL, optional
        Continue on this FTL (its state is kept, its counters are zeroed; ``precondition`` is
        not applied, only recorded): consecutive sub-tests of one experiment, or a state
        prepared once and copied. ``Run.ftl`` is the FTL.
    """
    drive = load_drive(drive)
    if not isinstance(workload, Workload):
        raise RefSSDError(f"workload must be a Workload, not {workload!r}")
    t0 = time.perf_counter()
    if ftl is None:
        ftl = make_ftl(drive)
        precondition_ftl(ftl, precondition, seed=seed, steady_passes=steady_passes)
    else:
        if ftl.drive != drive:
            raise RefSSDError("ftl belongs to another drive")
        ftl.reset_counts()
    t1 = time.perf_counter()
    write, read, trim = ftl.write, ftl.read, ftl.trim
    for op, off, size in zip(workload.ops.tolist(), workload.offsets.tolist(),
                             workload.sizes.tolist(), strict=True):
        if op == WRITE:
            write(off, size)
        elif op == READ:
            read(off, size)
        elif op == TRIM:
            trim(off, size)
        else:
            raise RefSSDError(f"workload {workload.name}: unknown request kind {op}")
    if flush:
        ftl.flush()
    t2 = time.perf_counter()
    rng = np.random.default_rng(seed)
    sched = {}
    pulses, commands, end_ns = schedule(drive, ftl.log, rng, stats=sched)
    t3 = time.perf_counter()
    ops = np.concatenate([p["op"] for p in pulses]) if pulses else np.zeros(0, np.uint8)
    truth = ftl_truth(ftl, ops, read_retries=sched.get("read_retries", 0),
                      suspensions=sched.get("suspensions", 0))
    written = ftl.host_bytes_written
    n_ops = sum(len(log) for log in ftl.log)
    stats = {"precondition_s": t1 - t0, "ftl_s": t2 - t1, "timing_s": t3 - t2,
             "operations": n_ops, "pulses": int(len(ops)),
             "pulses_per_s": len(ops) / (t3 - t2) if t3 > t2 else None,
             "drawn_max_ns": sched.get("drawn_max_ns", {})}
    return Run(drive=drive, workload=workload.name, precondition=precondition,
               pulses=pulses, commands=commands, truth=truth, geometry=drive.user_geometry(),
               logical_bytes=written, end_ns=int(end_ns), seed=seed, stats=stats, ftl=ftl)

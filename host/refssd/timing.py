"""The timing model: the FTL's operation log → each die's R/B# pulses and the bus command stream.

Expansion (vectorised with numpy)
---------------------------------
Each FTL operation becomes one or more NAND command sequences, each followed by one busy pulse
of the die (R/B# low):

============================  ===================  ============================================
FTL operation                 commands             R/B# low for
============================  ===================  ============================================
read                          00h-addr-30h         tR of the page type
read, continuing a sequence   31h                  tRCBSY, plus the wait for the array read
  (``cache_read``)            … 3Fh at the end     of the previous page
program, Mp planes            (80h-addr-data-11h)  tDBSY per queued plane, then
                              × (Mp-1), then       tPROG of the page type (10h), or only
                              80h-addr-data-10h    tCBSY plus the wait for the previous array
                              (15h in a chain)     program (15h)
erase, Mp planes              (60h-addr-D1h)       tDBSY per queued plane, then tBERS
                              × (Mp-1), 60h-D0h
power on                      FFh, then EFh        tRST, tFEAT
============================  ===================  ============================================

With ``cache_program`` every program followed on its die by another program is issued with 15h
(a chain ends with 10h): R/B# shows only tCBSY while the array keeps programming, and the next
15h (or the final 10h) waits for it — that pulse is the long one. With ``cache_read`` reads the
FTL marked as sequential within one host request use 31h and end with 3Fh.

Durations are drawn per pulse from the drive's ranges (:func:`rbscope.refssd.drive.draw`).

Scheduling (a loop per channel)
-------------------------------
The dies of one channel share its bus: a command sequence (command and address cycles, and the
data in for programs) occupies the channel for ``cmd + data`` ns. The channel serves the die that
has been ready longest; the die goes busy ``tWB`` after the confirm command and is ready again
after its pulse, plus the data out of a read and the controller overhead (drawn). Dies on
different channels run independently. Everything but this loop is vectorised; the loop is a few
float operations per pulse.
"""

from enum import IntEnum

import numpy as np

from rbscope.nand.onfi import Opcode
from rbscope.nand.ops import OPS, OpClass

from .drive import CELL_BITS, PageType, draw
from .ftl import Cause, FtlOp, unpack

__all__ = ["NandOp", "CLASS", "PULSE_DTYPE", "COMMAND_DTYPE", "CONFIRM", "FIRST", "schedule",
           "expand", "power_on_rows", "CMD_NS", "TWB_NS"]


class NandOp(IntEnum):
    """The NAND operation whose command started an R/B# pulse (the reference SSD's grouping of
    the operation classes, :data:`CLASS`)."""

    READ = 0  # 00h-30h
    CACHE_READ = 1  # 31h, or 3Fh at the end of a sequence
    PROGRAM = 2  # 80h-10h
    CACHE_PROGRAM = 3  # 80h-15h
    MULTIPLANE_QUEUE = 4  # 80h-11h or 60h-D1h (tDBSY)
    ERASE = 5  # 60h-D0h
    RESET = 6  # FFh
    SET_FEATURES = 7  # EFh
    DATA_LOAD = 8  # 80h-1Ah: a one-shot / two-pass page loaded (short busy)
    PROGRAM_RESUME = 9  # 13h: the rest of a suspended program
    ERASE_RESUME = 10  # D2h: the rest of a suspended erase
    PROGRAM_SUSPEND = 11  # 84h (a command only: it ends a busy, tSPD later)
    ERASE_SUSPEND = 12  # 61h (likewise)


#: The operation class (:class:`rbscope.nand.ops.OpClass`) of each operation's usual sequence;
#: a cache read's last pulse is a ``READ_CACHE_END`` (3Fh) and a multi-plane erase's queued one
#: an ``ERASE_QUEUE`` (60h-D1h), set per row.
CLASS = {NandOp.READ: OpClass.READ, NandOp.CACHE_READ: OpClass.READ_CACHE,
         NandOp.PROGRAM: OpClass.PROGRAM, NandOp.CACHE_PROGRAM: OpClass.CACHE_PROGRAM,
         NandOp.MULTIPLANE_QUEUE: OpClass.MP_QUEUE, NandOp.ERASE: OpClass.ERASE,
         NandOp.RESET: OpClass.RESET, NandOp.SET_FEATURES: OpClass.SET_FEATURES}
#: First command byte of each operation's sequence (:attr:`rbscope.nand.ops.OpInfo.first`).
FIRST = {op: OPS[cls].first for op, cls in CLASS.items()}
#: Confirm command byte (the one that starts the busy pulse); 3Fh and D1h are set per row.
CONFIRM = {op: OPS[cls].confirms[0] for op, cls in CLASS.items()}
# The 2026 operations: one-shot data loads, suspend and resume (each its own short sequence).
FIRST.update({NandOp.DATA_LOAD: Opcode.PROGRAM, NandOp.PROGRAM_RESUME: Opcode.PROGRAM_RESUME,
              NandOp.ERASE_RESUME: Opcode.ERASE_RESUME,
              NandOp.PROGRAM_SUSPEND: Opcode.PROGRAM_SUSPEND,
              NandOp.ERASE_SUSPEND: Opcode.ERASE_SUSPEND})
CONFIRM.update({NandOp.DATA_LOAD: Opcode.PROGRAM_LOAD,
                NandOp.PROGRAM_RESUME: Opcode.PROGRAM_RESUME,
                NandOp.ERASE_RESUME: Opcode.ERASE_RESUME,
                NandOp.PROGRAM_SUSPEND: Opcode.PROGRAM_SUSPEND,
                NandOp.ERASE_SUSPEND: Opcode.ERASE_SUSPEND})
_END = OPS[OpClass.READ_CACHE_END]
_ERASE_QUEUE = OPS[OpClass.ERASE_QUEUE]

#: One R/B# pulse of a die. ``block`` is the erase unit within the die (a block, or with
#: multi-plane operations the block index in every plane), ``page`` the page (row) in it; both
#: -1 where they do not apply. ``cause`` is a :class:`~rbscope.refssd.ftl.Cause`.
PULSE_DTYPE = np.dtype([("start_ns", "i8"), ("width_ns", "i8"), ("op", "u1"),
                        ("page_type", "u1"), ("planes", "u1"), ("block", "i4"), ("page", "i4"),
                        ("cause", "u1")])

#: One command sequence on a channel's bus. ``time_ns`` is its first cycle, ``confirm_ns`` the
#: rising WE# of the confirm command (the die goes busy ``tWB`` later); ``die`` the die index,
#: ``channel``/``chip``/``lun`` its location (``chip`` selects CE#); ``plane`` and ``block``
#: the physical address (block within the plane), ``page`` the page; ``data_bytes`` the data
#: in; ``pulse`` the index of the pulse it starts in the die's pulse array (a suspend command,
#: 84h or 61h, starts none: ``pulse`` is the pulse it ends); ``prefix`` a prefix command
#: issued before ``first`` (DAh or A2h: an SLC-mode program or read of a MLC/TLC/QLC die), or 0.
COMMAND_DTYPE = np.dtype([("time_ns", "i8"), ("confirm_ns", "i8"), ("die", "i2"),
                          ("channel", "i2"), ("chip", "i2"), ("lun", "i2"), ("first", "u1"),
                          ("confirm", "u1"), ("op", "u1"), ("planes", "u1"), ("plane", "i2"),
                          ("block", "i4"), ("page", "i4"), ("data_bytes", "i4"),
                          ("pulse", "i8"), ("prefix", "u1")])

#: Command and address cycles of one sequence (ns), and WE# high to R/B# low (tWB, ns).
CMD_NS = 200
TWB_NS = 100


def _expand(drive, log, rng):
    """Expand one die's FTL log into pulse rows (everything but times and waits)."""
    f = unpack(log)
    kind, planes, chain = f["kind"], f["planes"].astype(np.int64), f["chain"]
    n = len(kind)
    is_read = kind == FtlOp.READ
    is_prog = kind == FtlOp.PROGRAM
    chain = chain & is_read & bool(drive.cache_read)
    # A read starting a chain is the one before a chained read.
    nxt_chain = np.zeros(n, dtype=bool)
    nxt_chain[:-1] = chain[1:]
    chain_end = chain & ~nxt_chain
    nxt_prog = np.zeros(n, dtype=bool)
    nxt_prog[:-1] = is_prog[1:]
    cached = is_prog & nxt_prog & bool(drive.cache_program)
    cnt = np.where(is_read, 1, planes) + chain_end
    idx = np.repeat(np.arange(n), cnt)
    pos = np.arange(len(idx)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    main = pos == (np.where(is_read, 1, planes) - 1)[idx]
    extra = pos > (np.where(is_read, 1, planes) - 1)[idx]  # the 3Fh closing a read chain
    k = kind[idx]
    op = np.empty(len(idx), dtype=np.uint8)
    op[k == FtlOp.READ] = NandOp.READ
    op[(k == FtlOp.READ) & chain[idx]] = NandOp.CACHE_READ
    op[extra] = NandOp.CACHE_READ
    op[(k != FtlOp.READ) & ~main] = NandOp.MULTIPLANE_QUEUE
    op[(k == FtlOp.PROGRAM) & main] = NandOp.PROGRAM
    op[(k == FtlOp.PROGRAM) & main & cached[idx]] = NandOp.CACHE_PROGRAM
    op[(k == FtlOp.ERASE) & main] = NandOp.ERASE
    confirm = np.vectorize(CONFIRM.get, otypes=[np.uint8])(op) if len(op) else \
        np.zeros(0, np.uint8)
    confirm[extra] = _END.confirms[0]
    confirm[(k == FtlOp.ERASE) & ~main] = _ERASE_QUEUE.confirms[0]
    first = np.vectorize(FIRST.get, otypes=[np.uint8])(op) if len(op) else np.zeros(0, np.uint8)
    first[extra] = _END.first
    first[(k == FtlOp.ERASE) & ~main] = _ERASE_QUEUE.first
    rows = np.zeros(len(idx), dtype=PULSE_DTYPE)
    rows["op"] = op
    ptype = f["page_type"][idx]
    ptype[(k == FtlOp.ERASE)] = PageType.NONE
    rows["page_type"] = ptype
    rows["planes"] = planes[idx]
    rows["block"] = f["unit"][idx]
    rows["page"] = np.where(k == FtlOp.ERASE, -1, f["row"][idx])
    rows["cause"] = f["cause"][idx]
    plane = np.where(planes[idx] > 1, pos, f["plane"][idx])
    # Base busy times (ns) and the array time of each pulse (programs and reads).
    base = np.zeros(len(idx), dtype=np.int64)
    array_ns = np.zeros(len(idx), dtype=np.int64)
    t = drive.timing
    for ptv in np.unique(ptype):
        if ptv == PageType.NONE:
            continue
        key = drive.type_key(ptv)
        sel = (ptype == ptv) & ((op == NandOp.PROGRAM) | (op == NandOp.CACHE_PROGRAM))
        array_ns[sel] = draw(rng, t[f"program_{key}"], int(sel.sum()))
        sel = (ptype == ptv) & ((op == NandOp.READ) | (op == NandOp.CACHE_READ)) & ~extra
        array_ns[sel] = draw(rng, t[f"read_{key}"], int(sel.sum()))
    for o, key in ((NandOp.CACHE_PROGRAM, "cache_busy"), (NandOp.CACHE_READ, "read_cache_busy"),
                   (NandOp.MULTIPLANE_QUEUE, "plane_busy"), (NandOp.ERASE, "erase")):
        sel = op == o
        base[sel] = draw(rng, t[key], int(sel.sum()))
    sel = (op == NandOp.PROGRAM) | (op == NandOp.READ)
    base[sel] = array_ns[sel]
    data = np.where((k == FtlOp.PROGRAM), drive.page_size, 0)
    return rows, base, array_ns, confirm, first, plane, data


# The 2026 physics (Drive.modern) -----------------------------------------------------------------

# Roles of a pulse row in the general path (what its duration is drawn from).
_NORMAL, _FOGGY, _FINE, _CHAIN_END, _RETRY = 0, 1, 2, 3, 4
#: Reads looked ahead in a die's queue for a suspended operation to serve.
SUSPEND_LOOKAHEAD = 24


def _modern(drive, ex, rng, die):
    """The general expansion: program schemes, read retry, suspends, plane reads, timing shape,
    process spread and wear drift, applied to one die's rows from :func:`_expand`.

    Returns the same seven arrays and a dict of extras:
    ``overlap`` (the row is a plane read issued while the die's previous read still runs),
    ``spd`` (ns of busy left after the suspend command ending the row, or -1), ``retries`` and
    ``suspensions`` (counts).
    """
    rows, _, _, confirm, first, plane, data = ex
    levels = CELL_BITS[drive.cell]
    last_level = int(PageType.TOP) if levels == 4 else int(PageType.UPPER)
    scheme = drive.program_scheme
    t_rows = rows.tolist()
    conf, fst, pl, dat = confirm.tolist(), first.tolist(), plane.tolist(), data.tolist()
    n = len(t_rows)
    u_retry = rng.random(n).tolist()
    k_retry = rng.integers(1, 4, n).tolist()
    # Structural pass: schemes and read retries. A row: [row tuple, confirm, first, plane,
    # data, role].
    out = []
    P, CP = int(NandOp.PROGRAM), int(NandOp.CACHE_PROGRAM)
    R, SF, LOAD = int(NandOp.READ), int(NandOp.SET_FEATURES), int(NandOp.DATA_LOAD)
    SLC = int(PageType.SLC)
    retries = 0
    for i in range(n):
        row = t_rows[i]
        op, ptype, planes = row[2], row[3], row[4]
        if scheme != "page" and op in (P, CP) and ptype != SLC:
            if ptype != last_level:
                out.append([row[:2] + (LOAD,) + row[3:], Opcode.PROGRAM_LOAD, Opcode.PROGRAM,
                            pl[i], dat[i], _NORMAL])
                continue
            if scheme == "one-shot":
                out.append([row, conf[i], fst[i], pl[i], dat[i], _NORMAL])
                continue
            # Two-pass: this confirm starts the foggy program; then the word line's pages are
            # loaded again (queue rows copied) and the last confirm starts the fine program.
            queue = out[len(out) - (planes - 1):] if planes > 1 else []
            out.append([row, conf[i], fst[i], pl[i], dat[i], _FOGGY])
            page = row[6]
            for k in range(levels):
                level_page = page - (levels - 1) + k
                for q in queue:
                    out.append([q[0][:6] + (level_page,) + q[0][7:]] + q[1:5] + [_NORMAL])
                if k < levels - 1:
                    out.append([row[:2] + (LOAD, int(PageType.LOWER) + k) + row[4:6]
                                + (level_page,) + row[7:], Opcode.PROGRAM_LOAD, Opcode.PROGRAM,
                                pl[i], dat[i], _NORMAL])
                else:
                    out.append([row, conf[i], fst[i], pl[i], dat[i], _FINE])
            continue
        out.append([row, conf[i], fst[i], pl[i], dat[i], _CHAIN_END if fst[i] == 0x3F
                    else _NORMAL])
        if op == R and drive.read_retry and u_retry[i] < drive.read_retry:
            for _ in range(k_retry[i]):
                out.append([row[:2] + (SF, int(PageType.NONE), 1, -1, -1) + row[7:], 0xEF, 0xEF,
                            0, 0, _RETRY])
                out.append([row, conf[i], fst[i], pl[i], dat[i], _RETRY])
                retries += 1
    # Suspend pass: a program or erase with reads waiting behind it is split.
    ops = [r[0][2] for r in out]
    m = len(out)
    E = int(NandOp.ERASE)
    u_susp = rng.random(m).tolist()
    k_susp = rng.integers(2, 4, m).tolist()
    per_gap = rng.integers(1, 3, 2 * m).tolist()
    moved = set()
    pieces = {}  # index in the final list of a suspended row's first piece -> piece indices
    final = []
    suspensions = 0
    for i in range(m):
        if i in moved:
            continue
        row = out[i]
        op = ops[i]
        p = (drive.program_suspend if op == P and row[5] != _FOGGY else
             drive.erase_suspend if op == E else 0.0)
        if not p or u_susp[i] >= p:
            final.append(row)
            continue
        reads = [j for j in range(i + 1, min(m, i + 1 + SUSPEND_LOOKAHEAD))
                 if ops[j] == R and out[j][5] == _NORMAL and j not in moved
                 and not (j + 1 < m and out[j + 1][5] == _RETRY)]
        if not reads:
            final.append(row)
            continue
        suspensions += 1
        first_at = len(final)
        final.append(row)
        idx = [first_at]
        resume = int(NandOp.PROGRAM_RESUME if op == P else NandOp.ERASE_RESUME)
        code = Opcode.PROGRAM_RESUME if op == P else Opcode.ERASE_RESUME
        for g in range(k_susp[i] - 1):
            take, reads = reads[:per_gap[2 * i + g]], reads[per_gap[2 * i + g]:]
            if not take:
                break
            for j in take:
                moved.add(j)
                final.append(out[j])
            idx.append(len(final))
            final.append([row[0][:2] + (resume,) + row[0][3:], code, code, row[3], 0,
                          _NORMAL])
        pieces[first_at] = idx
    out = final
    m = len(out)
    new = np.array([r[0] for r in out], dtype=PULSE_DTYPE) if m else np.zeros(0, PULSE_DTYPE)
    op = new["op"]
    ptype = new["page_type"]
    role = np.array([r[5] for r in out], dtype=np.int8)
    confirm = np.array([r[1] for r in out], dtype=np.uint8)
    first = np.array([r[2] for r in out], dtype=np.uint8)
    plane = np.array([r[3] for r in out], dtype=np.int64)
    data = np.array([r[4] for r in out], dtype=np.int64)
    # Durations: base (what R/B# shows on its own) and array time, per timing key.
    base = np.zeros(m, dtype=np.int64)
    arr = np.zeros(m, dtype=np.int64)
    t = drive.timing
    factor = {}
    x = np.arange(m) / max(m - 1, 1)

    def fill(target, sel, key, kind=None):
        k = int(sel.sum())
        if not k:
            return
        if key not in factor:
            factor[key] = (float(np.exp(rng.normal(0.0, drive.die_spread)))
                           if drive.die_spread else 1.0)
        v = draw(rng, t[key], k, drive.timing_shape).astype(np.float64) * factor[key]
        if drive.wear_drift and kind == "program":
            v *= 1 - drive.wear_drift / 2 * x[sel]
        elif drive.wear_drift and kind == "erase":
            v *= 1 + drive.wear_drift * x[sel]
        target[sel] = np.rint(v).astype(np.int64)

    is_prog = (op == P) | (op == CP)
    is_read = ((op == R) | (op == NandOp.CACHE_READ)) & (role != _CHAIN_END)
    for ptv in np.unique(ptype):
        if ptv == PageType.NONE:
            continue
        key = drive.type_key(ptv)
        fill(arr, is_prog & (ptype == ptv) & (role != _FOGGY) & (role != _FINE),
             f"program_{key}", "program")
        fill(arr, is_read & (ptype == ptv), f"read_{key}")
    fill(arr, is_prog & (role == _FOGGY), "program_foggy", "program")
    fill(arr, is_prog & (role == _FINE), "program_fine", "program")
    for o, key, kind in ((NandOp.CACHE_PROGRAM, "cache_busy", None),
                         (NandOp.CACHE_READ, "read_cache_busy", None),
                         (NandOp.MULTIPLANE_QUEUE, "plane_busy", None),
                         (NandOp.ERASE, "erase", "erase"), (NandOp.DATA_LOAD, "data_load", None),
                         (NandOp.RESET, "reset", None), (NandOp.SET_FEATURES, "feature", None)):
        fill(base, op == o, key, kind)
    sel = (op == P) | (op == R)
    base[sel] = arr[sel]
    drawn = _drawn_max(op, base, arr)
    # Suspended operations: the drawn busy is cut into pieces at random points; every piece
    # but the last runs tSPD past its suspend command.
    spd = np.full(m, -1, dtype=np.int64)
    if pieces:
        spd_draw = draw(rng, t["suspend"], m, drive.timing_shape)
        for first_at, idx in pieces.items():
            total = int(arr[first_at] if op[first_at] == P else base[first_at])
            cuts = np.sort(rng.uniform(0.15, 0.85, len(idx) - 1))
            edges = np.rint(np.concatenate([[0.0], cuts, [1.0]]) * total).astype(np.int64)
            for k, j in enumerate(idx):
                w = int(edges[k + 1] - edges[k])
                if k < len(idx) - 1:
                    spd[j] = int(spd_draw[j])
                    w += spd[j]
                base[j] = w
                if k == 0 and op[j] == P:
                    arr[j] = w
    # Independent plane reads: consecutive reads of distinct planes overlap.
    overlap = np.zeros(m, dtype=bool)
    if drive.plane_reads and drive.planes_per_die > 1:
        read_plane = plane if drive.multi_plane else new["block"] % drive.planes_per_die
        group = set()
        for i in range(m):
            if op[i] == R and role[i] == _NORMAL:
                pln = int(read_plane[i])
                if group and pln not in group and len(group) < drive.planes_per_die:
                    overlap[i] = True
                    group.add(pln)
                else:
                    group = {pln}
            else:
                group = set()
    extras = {"overlap": overlap, "spd": spd, "retries": retries, "suspensions": suspensions,
              "drawn_max": drawn}
    return (new, base, arr, confirm, first, plane, data), extras


def _drawn_max(op, base, arr):
    """The longest array time drawn per operation kind (ns): ``program`` (tPROG, of a page or a
    word line), ``erase`` (tBERS, whole, before any suspend) and ``read`` (tR)."""
    out = {}
    for name, sel, src in (
            ("program", np.isin(op, (NandOp.PROGRAM, NandOp.CACHE_PROGRAM)), arr),
            ("erase", op == NandOp.ERASE, base),
            ("read", np.isin(op, (NandOp.READ, NandOp.CACHE_READ)), arr)):
        out[name] = int(src[sel].max()) if sel.any() else 0
    return out


def _power_on(drive, rng):
    rows = np.zeros(2, dtype=PULSE_DTYPE)
    rows["op"] = (NandOp.RESET, NandOp.SET_FEATURES)
    rows["page_type"] = PageType.NONE
    rows["planes"] = 1
    rows["block"] = rows["page"] = -1
    rows["cause"] = Cause.INIT
    base = np.concatenate([draw(rng, drive.timing["reset"], 1),
                           draw(rng, drive.timing["feature"], 1)])
    confirm = np.array([CONFIRM[NandOp.RESET], CONFIRM[NandOp.SET_FEATURES]], np.uint8)
    first = np.array([FIRST[NandOp.RESET], FIRST[NandOp.SET_FEATURES]], np.uint8)
    return (rows, base, np.zeros(2, np.int64), confirm, first, np.zeros(2, np.int64),
            np.zeros(2, np.int64))


def expand(drive, log, rng, die):
    """Expand a part of one die's FTL log into pulse rows and their durations (no times yet).

    The step :func:`schedule` takes per die, for a caller that schedules itself (the virtual
    SSD, :mod:`rbscope.vssd`, expands each request's operations as they come).

    Returns
    -------
    tuple
        ``(rows, base, array_ns, confirm, first, plane, data, extras)``: :data:`PULSE_DTYPE`
        rows (times unset), the busy each shows on its own and the array time (ns), the
        confirm and first command bytes, the plane, the data-in bytes, and with
        ``drive.modern`` a dict of extras (``overlap``, ``spd``, ``retries``, ``suspensions``,
        ``drawn_max``), else None.
    """
    ex = _expand(drive, log, rng)
    extras = None
    if drive.modern:
        ex, extras = _modern(drive, ex, rng, die)
    return ex + (extras,)


def power_on_rows(drive, rng):
    """The power-on reset and set-features rows of one die, as :func:`expand` returns them."""
    return _power_on(drive, rng) + (None,)


def schedule(drive, logs, rng, *, start_ns=1000, stats=None):
    """Give every operation of every die its command time and R/B# pulse.

    Parameters
    ----------
    drive : Drive
    logs : list of array
        The FTL's per-die logs (:attr:`PageFTL.log`).
    rng : numpy.random.Generator
    start_ns : int
        Time of the first command on every channel.
    stats : dict, optional
        Receives ``read_retries``, ``suspensions`` (operations suspended) and
        ``drawn_max_ns`` (the longest tPROG, tBERS and tR drawn, :func:`_drawn_max`).

    Returns
    -------
    pulses : list of numpy.ndarray
        Per die, rows of :data:`PULSE_DTYPE` in time order.
    commands : numpy.ndarray
        :data:`COMMAND_DTYPE` rows of every channel, in time order.
    end_ns : int
        When the last pulse ends.
    """
    dies = drive.dies
    parts = []
    for die in range(dies):
        ex = _expand(drive, logs[die], rng)
        if drive.power_on:
            po = _power_on(drive, rng)
            ex = tuple(np.concatenate([a, b]) for a, b in zip(po, ex, strict=True))
        extras = None
        if drive.modern:
            ex, extras = _modern(drive, ex, rng, die)
        parts.append(ex + (extras,))
    if stats is not None:
        stats["read_retries"] = sum(p[7]["retries"] for p in parts if p[7] is not None)
        stats["suspensions"] = sum(p[7]["suspensions"] for p in parts if p[7] is not None)
        drawn = [p[7]["drawn_max"] if p[7] is not None else _drawn_max(p[0]["op"], p[1], p[2])
                 for p in parts]
        stats["drawn_max_ns"] = {k: max((x[k] for x in drawn), default=0)
                                 for k in ("program", "erase", "read")}
    xfer_ns_per_byte = 1000.0 / drive.bus_mb_s
    pulses = [None] * dies
    cmd_parts = []
    end_all = start_ns
    for ch in range(drive.channels):
        members = [d for d in range(dies) if drive.die_location(d)[0] == ch]
        end_all = max(end_all, _run_channel(drive, members, parts, pulses, cmd_parts, rng,
                                            start_ns, xfer_ns_per_byte))
    commands = np.concatenate(cmd_parts) if cmd_parts else np.zeros(0, COMMAND_DTYPE)
    commands = commands[np.argsort(commands["time_ns"], kind="stable")]
    return pulses, commands, end_all


def _run_channel(drive, members, parts, pulses, cmd_parts, rng, start_ns, ns_per_byte):
    ovh = {d: draw(rng, drive.timing["overhead"], len(parts[d][0])).tolist() for d in members}
    bus_ns = {d: (CMD_NS + np.rint(parts[d][6] * ns_per_byte)).astype(np.int64).tolist()
              for d in members}
    out_ns = round(drive.page_size * ns_per_byte)
    starts = {d: [0] * len(parts[d][0]) for d in members}
    widths = {d: [0] * len(parts[d][0]) for d in members}
    cstart = {d: [0] * len(parts[d][0]) for d in members}
    ops = {d: parts[d][0]["op"].tolist() for d in members}
    base = {d: parts[d][1].tolist() for d in members}
    arr = {d: parts[d][2].tolist() for d in members}
    nxt = {d: 0 for d in members}
    modern = drive.modern
    overlap = {d: parts[d][7]["overlap"].tolist() + [False] if parts[d][7] is not None
               else None for d in members}
    group_end = {d: 0 for d in members}
    host_paced = drive.cache_regime == "host-paced"
    PR = NandOp.PROGRAM_RESUME
    ready = {d: start_ns for d in members}
    array_free = {d: start_ns for d in members}
    bus = start_ns
    end = start_ns
    CP, P, CR, R = (NandOp.CACHE_PROGRAM, NandOp.PROGRAM, NandOp.CACHE_READ, NandOp.READ)
    active = [d for d in members if len(parts[d][0])]
    while active:
        d = min(active, key=ready.__getitem__) if len(active) > 1 else active[0]
        i = nxt[d]
        s = max(bus, ready[d])
        bus = s + bus_ns[d][i]
        t = bus + TWB_NS
        o = ops[d][i]
        if o == CP:
            w = max(0, array_free[d] - t) + base[d][i]
            array_free[d] = t + w + arr[d][i]
        elif o == P:
            w = max(0, array_free[d] - t) + arr[d][i]
            array_free[d] = t + w
        elif o == CR:
            w = max(0, array_free[d] - t) + base[d][i]
            array_free[d] = t + w + arr[d][i]
        else:
            w = base[d][i]
            if o == R:
                array_free[d] = max(array_free[d], t + w) if modern else t + w
            elif o == PR:
                array_free[d] = t + w
        cstart[d][i] = s
        starts[d][i] = t
        widths[d][i] = w
        e = t + w
        if overlap[d] is not None and overlap[d][i + 1]:
            # An independent plane read follows: issued as soon as this one's cycles are done.
            ready[d] = bus
            group_end[d] = max(group_end[d], e + out_ns)
        else:
            ready[d] = e + ovh[d][i] + (out_ns if o in (R, CR) else 0)
            if group_end[d]:
                ready[d] = max(ready[d], group_end[d] + ovh[d][i])
                group_end[d] = 0
            if host_paced and o == CP:
                # The host's next page arrives only after this array program has ended.
                ready[d] = max(ready[d], array_free[d])
        end = max(end, e)
        nxt[d] = i + 1
        if i + 1 == len(ops[d]):
            active.remove(d)
    for d in members:
        rows = parts[d][0]
        rows["start_ns"] = starts[d]
        rows["width_ns"] = widths[d]
        pulses[d] = rows
        n = len(rows)
        c = np.zeros(n, dtype=COMMAND_DTYPE)
        loc = drive.die_location(d)
        c["time_ns"] = cstart[d]
        c["confirm_ns"] = rows["start_ns"] - TWB_NS
        c["die"] = d
        c["channel"], c["chip"], c["lun"] = loc
        c["first"] = parts[d][4]
        c["confirm"] = parts[d][3]
        c["op"] = rows["op"]
        c["planes"] = rows["planes"]
        unit = rows["block"].astype(np.int64)
        if drive.multi_plane:
            c["plane"] = np.where(unit >= 0, parts[d][5], -1)
            c["block"] = unit
        else:
            c["plane"] = np.where(unit >= 0, unit % drive.planes_per_die, -1)
            c["block"] = np.where(unit >= 0, unit // drive.planes_per_die, -1)
        c["page"] = rows["page"]
        c["data_bytes"] = parts[d][6]
        c["pulse"] = np.arange(n)
        if drive.cell != "slc":
            slc_mode = (rows["page_type"] == PageType.SLC) & np.isin(
                rows["op"], (P, CP, NandOp.MULTIPLANE_QUEUE, R, CR))
            c["prefix"] = np.where(slc_mode, drive.slc_prefix, 0)
        cmd_parts.append(c)
        if parts[d][7] is not None and (parts[d][7]["spd"] >= 0).any():
            spd = parts[d][7]["spd"]
            k = np.flatnonzero(spd >= 0)
            s = np.zeros(len(k), dtype=COMMAND_DTYPE)
            s["time_ns"] = s["confirm_ns"] = rows["start_ns"][k] + rows["width_ns"][k] - spd[k]
            s["die"] = d
            s["channel"], s["chip"], s["lun"] = loc
            is_erase = np.isin(rows["op"][k], (NandOp.ERASE, NandOp.ERASE_RESUME))
            s["op"] = np.where(is_erase, NandOp.ERASE_SUSPEND, NandOp.PROGRAM_SUSPEND)
            s["first"] = s["confirm"] = np.where(is_erase, Opcode.ERASE_SUSPEND,
                                                 Opcode.PROGRAM_SUSPEND)
            s["planes"] = rows["planes"][k]
            s["plane"], s["block"], s["page"] = c["plane"][k], c["block"][k], c["page"][k]
            s["pulse"] = k
            cmd_parts.append(s)
    return end

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

from rbscope.nand.ops import OPS, OpClass

from .drive import PageType, draw
from .ftl import Cause, FtlOp, unpack

__all__ = ["NandOp", "CLASS", "PULSE_DTYPE", "COMMAND_DTYPE", "CONFIRM", "FIRST", "schedule"]


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
#: in; ``pulse`` the index of the pulse it starts in the die's pulse array.
COMMAND_DTYPE = np.dtype([("time_ns", "i8"), ("confirm_ns", "i8"), ("die", "i2"),
                          ("channel", "i2"), ("chip", "i2"), ("lun", "i2"), ("first", "u1"),
                          ("confirm", "u1"), ("op", "u1"), ("planes", "u1"), ("plane", "i2"),
                          ("block", "i4"), ("page", "i4"), ("data_bytes", "i4"),
                          ("pulse", "i8")])

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


def schedule(drive, logs, rng, *, start_ns=1000):
    """Give every operation of every die its command time and R/B# pulse.

    Parameters
    ----------
    drive : Drive
    logs : list of array
        The FTL's per-die logs (:attr:`PageFTL.log`).
    rng : numpy.random.Generator
    start_ns : int
        Time of the first command on every channel.

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
        parts.append(ex)
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
                array_free[d] = t + w
        cstart[d][i] = s
        starts[d][i] = t
        widths[d][i] = w
        e = t + w
        ready[d] = e + ovh[d][i] + (out_ns if o in (R, CR) else 0)
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
        cmd_parts.append(c)
    return end

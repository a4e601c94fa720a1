"""An emulated die's command decoder: commands, address and data cycles, and the NAND rules.

Part of the :class:`~.fsm.Die`. The exact behaviour, its deviations from ONFI and the reasons
are in ``docs/nand_emu.md``.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .die_common import Increments, Op, Opcode, OutMode, increments_layout
from .params import BusyTime, EmuCounter

__all__ = ["DieDecoder"]

#: The actions a command strobe can take (one-hot, from stage 1 to stage 2).
ACTIONS = ("reset", "status", "status_enh", "setup", "read", "read_confirm", "rcache_seq",
           "rcache_end", "change_read", "program", "change_write", "prog_confirm",
           "prog_cache", "prog_queue", "erase_confirm", "erase_queue", "illegal")


class DieDecoder(wiring.Component):
    """Decode the bus cycles of one die: commands, address cycles, data in and out.

    A command is decoded in two cycles. Bus strobes are at least two cycles apart after the
    synchroniser (WE# must be seen low between two rising edges), so the cycle after a command
    strobe never holds another strobe of WE#. Stage 1 (the strobe's cycle) classifies the
    command against the state: which action it takes or that it is illegal, into one-hot
    registers. Stage 2 (the next cycle) applies the action: it starts an operation on the
    timing engine (``req``), checks a confirm against the NAND rules (the array state's
    ``rule_*``) and accepts or refuses it, and sets what RE# cycles read (``out_mode``).

    Address cycles assemble the column and the row; data-in cycles fill the page buffer
    (``buf_write``) or set a feature; data-out cycles move the column. The multi-plane queue
    holds the rows accepted so far for the operation being built (``mp_rows``).

    The ground-truth counts of commands (group ``cmd``: illegal commands, resets, cache
    operations, refused confirms and why) are reported in ``inc_cmd``.

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    cmd, addr, din, dout : In(1)
        Bus strobes, already gated with this die's CE#.
    byte : In(8)
        The latched IO byte of a ``cmd``/``addr``/``din`` strobe.
    wp : In(1)
        WP# (1 = not protected).
    rdy, ardy : In(1)
        The timing engine's RDY and ARDY.
    read_done : In(1)
        Strobe from the timing engine: a page read completed (read cache allowed).
    prog_type : In(2)
        The page type of ``row`` (it sets tPROG), one cycle after ``row`` changed.
    rule_bad, rule_next_page, rule_programmed : In(1)
        The NAND rules of ``row`` (:class:`~.die_array.ArrayState`).
    req : Out(1)
        Strobe: start an operation (after tWB).
    req_op, req_time, req_pages, req_row : Out(Op), Out(BusyTime), Out(plane_bits + 1),
        Out(row_bits)
        The operation, beside ``req``.
    reset_cmd : Out(1)
        Strobe: a reset (FFh), applied.
    accept_program, accept_erase : Out(1)
        Strobes: a program of the page of ``row``, an erase of its block, accepted.
    buf_write : Out(1)
        A data-in cycle of a program: ``byte`` goes to the page buffer at ``col``.
    row : Out(row_bits)
        The row of the command being assembled.
    out_row, out_row_next : Out(row_bits)
        The page the data output reads, and what it becomes at the end of this cycle.
    col, col_next : Out(col_bits)
        The column, and what it becomes at the end of this cycle.
    col_stepped : Out(1)
        The column moved to the next byte in the previous cycle.
    mp_rows : Out(ArrayLayout(row_bits, planes))
        The multi-plane queue's rows.
    out_mode : Out(OutMode)
        What RE# cycles read.
    id_sel, feat_addr, features : Out(1), Out(8), Out(ArrayLayout(8, 4))
        READ ID's address (20h), the feature address, feature 01h's parameters.
    fail, failc : Out(1)
        The status register's FAIL and FAILC.
    inc_cmd : Out(increments_layout)
        The counter increments of the group ``cmd``.
    """

    #: The counters each group of this block counts.
    COUNTS = {
        "cmd": (EmuCounter.ILLEGAL, EmuCounter.RESETS, EmuCounter.CACHE_OPS,
                EmuCounter.FAILED, EmuCounter.FAIL_PROTECTED, EmuCounter.FAIL_BAD_BLOCK,
                EmuCounter.FAIL_NOT_ERASED, EmuCounter.FAIL_ORDER),
    }

    def __init__(self, params):
        self.params = params
        col_w = max(params.col_bits, 10)  # the parameter page is read as 768 bytes
        row_w = params.row_bits
        super().__init__({
            "cmd": In(1), "addr": In(1), "din": In(1), "dout": In(1), "byte": In(8),
            "wp": In(1, init=1),
            "rdy": In(1), "ardy": In(1), "read_done": In(1),
            "prog_type": In(2),
            "rule_bad": In(1), "rule_next_page": In(1), "rule_programmed": In(1),
            "req": Out(1), "req_op": Out(Op), "req_time": Out(BusyTime),
            "req_pages": Out(params.plane_bits + 1), "req_row": Out(row_w),
            "reset_cmd": Out(1),
            "accept_program": Out(1), "accept_erase": Out(1), "buf_write": Out(1),
            "row": Out(row_w), "out_row": Out(row_w), "out_row_next": Out(row_w),
            "col": Out(col_w), "col_next": Out(col_w), "col_stepped": Out(1),
            "mp_rows": Out(data.ArrayLayout(row_w, params.planes)),
            "out_mode": Out(OutMode, init=OutMode.STATUS),
            "id_sel": Out(1), "feat_addr": Out(8), "features": Out(data.ArrayLayout(8, 4)),
            "fail": Out(1), "failc": Out(1),
            **{f"inc_{group}": Out(increments_layout(params, counters))
               for group, counters in self.COUNTS.items()},
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        col_w = max(p.col_bits, 10)
        row_w = p.row_bits
        # The decoder's registers, shared by the steps below.
        s = SimpleNamespace()
        s.cmd = Signal(8, name="opcode")  # opcode being assembled (apart from the strobe `cmd`)
        s.acount = Signal(3)  # address cycles received since `cmd`
        s.abytes = Array(Signal(8, name=f"abyte{i}") for i in range(5))
        s.col = Signal(col_w)
        s.col_next = Signal(col_w)
        # The column moved to the next byte in the previous cycle (a data-in or data-out
        # cycle). The output bytes (parameter page, address pattern) are read from registers
        # one cycle behind the column, for the column and for the next one; this picks the
        # one that is current, so the next byte is out as soon as before and no decoding sits
        # in front of the ROM or the pattern. (After a jump of the column, by address cycles,
        # the byte is right a cycle later, well within tWHR/tCCS.)
        s.col_step = Signal()
        s.col_stepped = Signal()
        s.row = Signal(row_w)  # row of the command being assembled
        s.row_next = Signal(row_w)  # what `row` becomes at the end of this cycle
        s.out_row = Signal(row_w)  # page the data output reads
        s.out_row_next = Signal(row_w)
        s.read_row = Signal(row_w)  # page in the data register (read cache)
        s.read_valid = Signal()  # a page read happened: 31h / 3Fh allowed
        s.prog_ready = Signal()  # 80h with 5 address cycles: data, 85h, 10h/11h/15h allowed
        s.out_mode = Signal(OutMode, init=OutMode.STATUS)
        s.resume_mode = Signal(OutMode, init=OutMode.PAGE)  # what 00h resumes after a status
        s.id_sel = Signal()
        s.feat_addr = Signal(8)
        s.features = Array(Signal(8, name=f"feature{i}") for i in range(4))  # feature 01h
        s.dcount = Signal(3)
        s.fail = Signal()
        s.failc = Signal()
        # Multi-plane queue: rows accepted so far for the operation being built.
        s.mp_rows = Array(Signal(row_w, name=f"mp_row{i}") for i in range(p.planes))
        s.mp_count = Signal(range(p.planes + 1))
        s.mp_erase = Signal()  # the queue holds erases (D1h), not programs (11h)
        s.mp_fail = Signal()
        m.d.comb += [
            self.row.eq(s.row), self.out_row.eq(s.out_row), self.out_row_next.eq(s.out_row_next),
            self.col.eq(s.col), self.col_next.eq(s.col_next), self.col_stepped.eq(s.col_stepped),
            *(self.mp_rows[i].eq(row) for i, row in enumerate(s.mp_rows)),
            self.out_mode.eq(s.out_mode), self.id_sel.eq(s.id_sel),
            self.feat_addr.eq(s.feat_addr),
            *(self.features[i].eq(feature) for i, feature in enumerate(s.features)),
            self.fail.eq(s.fail), self.failc.eq(s.failc),
        ]
        s.counts = Increments(m, p, "cmd")  # everything here happens on a command strobe

        # A completed page read allows read cache commands (the stages below override this).
        with m.If(self.read_done):
            m.d.sync += s.read_valid.eq(1)
        self._rules(m, s)
        self._columns(m, s)
        self._stage_1(m, s)
        self._stage_2(m, s)
        self._address_cycles(m, s)
        self._data_cycles(m, s)
        s.counts.drive(self.inc_cmd)
        return m

    def _start(self, m, s, op_, time, pages=1, row_=None):
        """Start operation ``op_`` (its busy ``time``, ``pages``, the row, default ``row``)."""
        m.d.comb += [self.req.eq(1), self.req_op.eq(op_), self.req_time.eq(time),
                     self.req_pages.eq(pages), self.req_row.eq(s.row if row_ is None else row_)]

    def _rules(self, m, s):
        """The rule evaluation of the row being confirmed (program or erase)."""
        s.prog_time = Signal(BusyTime)
        m.d.comb += s.prog_time.eq(BusyTime.PROG0 + self.prog_type)
        s.prog_ok = Signal()
        s.erase_ok = Signal()
        m.d.comb += [
            s.prog_ok.eq(self.wp & ~self.rule_bad & self.rule_next_page),
            s.erase_ok.eq(self.wp & ~self.rule_bad),
        ]
        # A program refused for its page (not the block's next one) is counted as "not erased"
        # or "out of order" a cycle later, when `rule_programmed` is ready (the row, and so the
        # rule port's word, stays put: the next address cycle is at least two cycles away). The
        # next command's stage 2 comes later still, so the command group stays one-hot.
        s.refused_page = Signal()
        refused_page_d = Signal()
        m.d.sync += refused_page_d.eq(s.refused_page)
        with m.If(refused_page_d):
            with m.If(self.rule_programmed):
                s.counts.count(EmuCounter.FAIL_NOT_ERASED)
            with m.Else():
                s.counts.count(EmuCounter.FAIL_ORDER)

    def _refuse(self, m, s, is_program):
        """A confirm the rules refuse: counted, and why."""
        s.counts.count(EmuCounter.FAILED)
        with m.If(~self.wp):
            s.counts.count(EmuCounter.FAIL_PROTECTED)
        with m.Elif(self.rule_bad):
            s.counts.count(EmuCounter.FAIL_BAD_BLOCK)
        if is_program:
            with m.Else():
                m.d.comb += s.refused_page.eq(1)

    def _confirm(self, m, s, is_program, kind):
        """A 10h/15h/11h (program) or D0h/D1h (erase) confirm of the row in `row`."""
        ok = s.prog_ok if is_program else s.erase_ok
        stale = Signal(name=f"stale_{kind}")  # the queue holds the other kind: drop it
        m.d.comb += stale.eq(s.mp_erase != int(not is_program))
        queued = Mux(stale, 0, s.mp_count)
        queued_fail = Mux(stale, 0, s.mp_fail)
        with m.If(ok):
            m.d.comb += (self.accept_program if is_program else self.accept_erase).eq(1)
            m.d.sync += s.mp_rows[queued].eq(s.row)
        with m.Else():
            self._refuse(m, s, is_program)
        pages = queued + ok
        if kind == "queue":
            with m.If(ok):
                m.d.sync += [s.mp_count.eq(queued + 1), s.mp_erase.eq(not is_program),
                             s.mp_fail.eq(queued_fail)]
                self._start(m, s, Op.QUEUE, BusyTime.DBSY)
            with m.Else():
                m.d.sync += [s.mp_count.eq(queued), s.mp_erase.eq(not is_program),
                             s.mp_fail.eq(1), s.fail.eq(1)]
        else:
            any_fail = queued_fail | ~ok
            m.d.sync += [s.mp_count.eq(0), s.mp_fail.eq(0), s.mp_erase.eq(0),
                         s.failc.eq(s.fail), s.fail.eq(any_fail)]
            with m.If(pages != 0):
                if kind == "program":
                    self._start(m, s, Op.PROG, s.prog_time, pages)
                elif kind == "cache":
                    self._start(m, s, Op.CACHE, BusyTime.CBSY, pages)
                else:
                    self._start(m, s, Op.ERASE, BusyTime.BERS, pages)
            if kind == "cache":
                s.counts.count(EmuCounter.CACHE_OPS)

    def _columns(self, m, s):
        """The column and rows: registered from their ``*_next`` values (which the cycles
        below override)."""
        m.d.sync += s.col_stepped.eq(s.col_step)
        m.d.comb += [s.col_next.eq(s.col), s.out_row_next.eq(s.out_row), s.row_next.eq(s.row)]
        m.d.sync += [s.col.eq(s.col_next), s.out_row.eq(s.out_row_next), s.row.eq(s.row_next)]

    def _stage_1(self, m, s):
        """Stage 1: classify a command strobe (``want_*``), registered for stage 2
        (``act_*``).

        Every state that stage 1 reads changes only through commands, address and data cycles
        (never in the cycle between the stages), except the timing engine's RDY/ARDY, which are
        decided on the strobe's cycle as before; the effects come one cycle later.
        """
        p = self.params
        cmd, acount, ardy = s.cmd, s.acount, self.ardy
        s.want = want = {a: Signal(name=f"want_{a}") for a in ACTIONS}
        s.act = act = {a: Signal(name=f"act_{a}") for a in ACTIONS}
        s.act_byte = Signal(8)  # the command byte, for stage 2
        m.d.sync += [act[a].eq(want[a]) for a in ACTIONS]
        m.d.sync += s.act_byte.eq(self.byte)

        busy_ok = Signal()  # command allowed while RDY = 0
        m.d.comb += busy_ok.eq((self.byte == Opcode.RESET) | (self.byte == Opcode.STATUS)
                               | (self.byte == Opcode.STATUS_ENH))

        def classify(action, cond=None):
            if cond is None:
                m.d.comb += want[action].eq(1)
            else:
                m.d.comb += [want[action].eq(cond), want["illegal"].eq(~cond)]

        with m.If(self.cmd):
            with m.If(~self.rdy & ~busy_ok):
                classify("illegal")
            with m.Else():
                with m.Switch(self.byte):
                    with m.Case(Opcode.RESET):
                        classify("reset")
                    with m.Case(Opcode.STATUS):
                        classify("status")
                    with m.Case(Opcode.STATUS_ENH):
                        classify("status_enh")
                    with m.Case(Opcode.READ_ID, Opcode.READ_PARAM, Opcode.GET_FEATURES,
                                Opcode.SET_FEATURES, Opcode.ERASE, Opcode.CHANGE_READ_COL):
                        classify("setup", ardy)
                    with m.Case(Opcode.READ):
                        classify("read", ardy)
                    with m.Case(Opcode.READ_CONFIRM):
                        classify("read_confirm", ardy & (cmd == Opcode.READ) & (acount >= 5))
                    with m.Case(Opcode.READ_CACHE_SEQ):
                        classify("rcache_seq", ardy & s.read_valid)
                    with m.Case(Opcode.READ_CACHE_END):
                        classify("rcache_end", ardy & s.read_valid)
                    with m.Case(Opcode.CHANGE_READ_COL_CONFIRM):
                        classify("change_read",
                                 ardy & (cmd == Opcode.CHANGE_READ_COL) & (acount >= 2))
                    with m.Case(Opcode.PROGRAM, Opcode.PROGRAM_MP):
                        classify("program")
                    with m.Case(Opcode.CHANGE_WRITE_COL):
                        classify("change_write", s.prog_ready)
                    with m.Case(Opcode.PROGRAM_CONFIRM):
                        classify("prog_confirm", s.prog_ready)
                    with m.Case(Opcode.PROGRAM_CACHE):
                        classify("prog_cache", s.prog_ready)
                    with m.Case(Opcode.PROGRAM_MP_CONFIRM):
                        classify("prog_queue", s.prog_ready & (s.mp_count < p.planes - 1))
                    with m.Case(Opcode.ERASE_CONFIRM):
                        classify("erase_confirm", ardy & (cmd == Opcode.ERASE) & (acount >= 3))
                    with m.Case(Opcode.ERASE_MP_CONFIRM):
                        classify("erase_queue", ardy & (cmd == Opcode.ERASE) & (acount >= 3)
                                 & (s.mp_count < p.planes - 1))
                    with m.Default():
                        classify("illegal")

    def _stage_2(self, m, s):
        """Stage 2: apply (exactly one action flag is high, in the cycle after the strobe)."""
        act, want, act_byte = s.act, s.want, s.act_byte
        cmd, out_mode = s.cmd, s.out_mode
        with m.If(act["illegal"]):
            s.counts.count(EmuCounter.ILLEGAL)
        with m.If(act["reset"]):
            m.d.comb += self.reset_cmd.eq(1)
            s.counts.count(EmuCounter.RESETS)
            m.d.sync += [cmd.eq(Opcode.RESET), s.prog_ready.eq(0), s.read_valid.eq(0),
                         s.mp_count.eq(0), s.mp_fail.eq(0), s.fail.eq(0), s.failc.eq(0),
                         out_mode.eq(OutMode.STATUS)]
        with m.If(act["status"]):
            m.d.sync += [cmd.eq(Opcode.STATUS), out_mode.eq(OutMode.STATUS)]
            with m.If(out_mode != OutMode.STATUS):
                m.d.sync += s.resume_mode.eq(out_mode)
        with m.If(act["status_enh"]):
            m.d.sync += [cmd.eq(Opcode.STATUS_ENH), s.acount.eq(0)]
            with m.If(out_mode != OutMode.STATUS):
                m.d.sync += s.resume_mode.eq(out_mode)
        with m.If(act["setup"]):
            m.d.sync += [cmd.eq(act_byte), s.acount.eq(0), s.dcount.eq(0), s.prog_ready.eq(0)]
        # 00h acts at once, in stage 1 (its logic is small): it is also "return to data output"
        # after a status poll (the page, the parameter page or the features, whichever was being
        # output), and hosts pull RE# low soon after it. No stage 2 writes in the same cycle.
        with m.If(want["read"]):
            m.d.sync += [cmd.eq(Opcode.READ), s.acount.eq(0), s.prog_ready.eq(0)]
            with m.If(out_mode == OutMode.STATUS):
                m.d.sync += out_mode.eq(s.resume_mode)
        with m.If(act["read_confirm"]):
            self._start(m, s, Op.READ, BusyTime.R)
            m.d.comb += s.out_row_next.eq(s.row)
            m.d.sync += [s.read_row.eq(s.row), cmd.eq(Opcode.READ_CONFIRM), s.read_valid.eq(0),
                         out_mode.eq(OutMode.PAGE)]
        with m.If(act["rcache_seq"] | act["rcache_end"]):
            seq = act["rcache_seq"]
            self._start(m, s, Op.RCACHE, BusyTime.RCBSY, seq)
            s.counts.count(EmuCounter.CACHE_OPS)
            m.d.comb += [s.out_row_next.eq(s.read_row), s.col_next.eq(0)]
            m.d.sync += [s.read_row.eq(s.read_row + 1), s.read_valid.eq(seq),
                         out_mode.eq(OutMode.PAGE), cmd.eq(act_byte)]
        with m.If(act["change_read"]):
            m.d.sync += [out_mode.eq(OutMode.PAGE), cmd.eq(act_byte)]
        with m.If(act["program"]):
            m.d.sync += [cmd.eq(Opcode.PROGRAM), s.acount.eq(0), s.prog_ready.eq(0),
                         s.read_valid.eq(0)]
        with m.If(act["change_write"]):
            m.d.sync += [cmd.eq(Opcode.CHANGE_WRITE_COL), s.acount.eq(0)]
        for action, kind in (("prog_confirm", "program"), ("prog_cache", "cache"),
                             ("prog_queue", "queue")):
            with m.If(act[action]):
                self._confirm(m, s, True, kind)
                m.d.sync += [s.prog_ready.eq(0), cmd.eq(act_byte)]
        for action, kind in (("erase_confirm", "erase"), ("erase_queue", "queue")):
            with m.If(act[action]):
                self._confirm(m, s, False, kind)
                m.d.sync += cmd.eq(act_byte)

    def _address_cycles(self, m, s):
        """Address cycles: the column, the row, and the one-address-cycle commands."""
        cmd, acount, abytes = s.cmd, s.acount, s.abytes
        with m.If(self.addr & (self.rdy | (cmd == Opcode.STATUS_ENH))):
            with m.If(acount < 5):
                m.d.sync += abytes[acount].eq(self.byte)
            with m.If(acount != 7):
                m.d.sync += acount.eq(acount + 1)
            row3 = Cat(abytes[0], abytes[1], self.byte)
            row5 = Cat(abytes[2], abytes[3], self.byte)
            with m.Switch(cmd):
                with m.Case(Opcode.READ, Opcode.PROGRAM):
                    with m.If(acount == 1):
                        m.d.comb += s.col_next.eq(Cat(abytes[0], self.byte))
                    with m.If(acount == 4):
                        m.d.comb += s.row_next.eq(row5)
                        with m.If(cmd == Opcode.PROGRAM):
                            m.d.sync += s.prog_ready.eq(1)
                with m.Case(Opcode.CHANGE_READ_COL, Opcode.CHANGE_WRITE_COL):
                    with m.If(acount == 1):
                        m.d.comb += s.col_next.eq(Cat(abytes[0], self.byte))
                with m.Case(Opcode.ERASE):
                    with m.If(acount == 2):
                        m.d.comb += s.row_next.eq(row3)
                with m.Case(Opcode.STATUS_ENH):
                    with m.If(acount == 2):
                        # One LUN per target: the LUN address selects this die's status.
                        m.d.sync += s.out_mode.eq(OutMode.STATUS)
                with m.Case(Opcode.READ_ID):
                    with m.If(acount == 0):
                        m.d.comb += s.col_next.eq(0)
                        m.d.sync += [s.out_mode.eq(OutMode.ID), s.id_sel.eq(self.byte == 0x20)]
                with m.Case(Opcode.READ_PARAM):
                    with m.If(acount == 0):
                        self._start(m, s, Op.PARAM, BusyTime.R)
                        m.d.comb += s.col_next.eq(0)
                        m.d.sync += s.out_mode.eq(OutMode.PARAM)
                with m.Case(Opcode.GET_FEATURES):
                    with m.If(acount == 0):
                        self._start(m, s, Op.FEAT, BusyTime.FEAT)
                        m.d.comb += s.col_next.eq(0)
                        m.d.sync += [s.out_mode.eq(OutMode.FEAT), s.feat_addr.eq(self.byte)]
                with m.Case(Opcode.SET_FEATURES):
                    with m.If(acount == 0):
                        m.d.sync += s.feat_addr.eq(self.byte)

    def _data_cycles(self, m, s):
        """Data-in cycles (a program's page buffer, a feature's parameters) and data-out
        cycles (the column moves on)."""
        cmd, dcount = s.cmd, s.dcount
        with m.If(self.din & self.rdy):
            with m.If(s.prog_ready & ((cmd == Opcode.PROGRAM) | (cmd == Opcode.CHANGE_WRITE_COL))):
                m.d.comb += [self.buf_write.eq(1), s.col_next.eq(s.col + 1), s.col_step.eq(1)]
            with m.Elif((cmd == Opcode.SET_FEATURES) & (s.acount >= 1) & (dcount < 4)):
                with m.If(s.feat_addr == 0x01):
                    m.d.sync += s.features[dcount[:2]].eq(self.byte)
                m.d.sync += dcount.eq(dcount + 1)
                with m.If(dcount == 3):
                    self._start(m, s, Op.FEAT, BusyTime.FEAT)

        # Status reads do not move the column: after polling, 00h resumes the page output where
        # it stopped. A read cache command applied in the same cycle (stage 2 lags its strobe by
        # a cycle, so an RE# edge before the command can meet it) restarts the column: it wins.
        with m.If(self.dout & (s.out_mode != OutMode.STATUS)
                  & ~s.act["rcache_seq"] & ~s.act["rcache_end"]):
            m.d.comb += [s.col_next.eq(s.col + 1), s.col_step.eq(1)]

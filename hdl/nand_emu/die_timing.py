"""An emulated die's timing engine (tWB, the busy periods, R/B#) and its page-type lookups.

Part of the :class:`~.fsm.Die`.
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .die_common import Increments, Op, Phase, increments_layout
from .layouts import config_layout, page_type_words, page_type_write_layout
from .params import PAGE_TYPE_WORD, BusyTime, EmuCounter, Storage
from .timing import BusyTimer, JitterLfsr

__all__ = ["PageTypes", "TimingEngine"]


class TimingEngine(wiring.Component):
    """Run a die's operations: tWB, then the busy period (R/B# low), then their completion.

    The command decoder starts an operation (``req``, with its kind, busy time, pages and row):
    after tWB (``cfg.t_wb`` cycles, at least 3) R/B# goes low for the busy time (the base time
    plus LFSR jitter, in ticks of the prescaler) and the operation completes as the busy timer
    expires. A cache program's array program then runs on in the background (its own timer,
    ARDY = 0), and delays the next operation (WAIT). A reset (``reset_cmd``) aborts everything.

    The ground-truth counts of completions (group ``done``), of the background program (group
    ``array``) and of aborted operations (group ``cmd``) are reported in ``inc_*``.

    Parameters
    ----------
    params : EmuParams
    index : int
        Die number (varies the jitter seed between dies).

    Members
    -------
    cfg : In(config_layout)
        Run-time configuration (prescaler, seed, busy times and jitter, tWB).
    req : In(1)
        Strobe: start an operation's busy period (after tWB).
    req_op, req_time, req_pages, req_row : In(Op), In(BusyTime), In(plane_bits + 1), In(row_bits)
        The operation, its busy time, the pages (blocks) it completes and the row of its final
        page (its page type sets the background program's tPROG), beside ``req``.
    reset_cmd : In(1)
        Strobe: a reset (FFh) aborts everything; R/B# stays low if it was (one merged pulse),
        else goes low after tWB.
    copy_busy : In(1)
        The storage's copy engine still writes the array (the program does not complete).
    array_type : In(2)
        The page type of ``op_row`` (:class:`PageTypes`), one cycle after it changed.
    op_row : Out(row_bits)
        The row of the operation's final page.
    op_pages : Out(plane_bits + 1)
        The pages the operation completes (the copy engine copies as many).
    copy_start, copy_abort : Out(1)
        Strobes to the copy engine: a program's busy period starts; a reset.
    rdy, ardy : Out(1)
        The status register's RDY (no operation) and ARDY (no background program either).
    pin_low : Out(1)
        The die pulls R/B# low (registered, glitch-free).
    read_done : Out(1)
        Strobe: a page read (00h-30h) completed (read cache commands are allowed from then).
    inc_done, inc_array, inc_cmd : Out(increments_layout)
        The counter increments of the groups ``done`` (completions), ``array`` (the background
        program) and ``cmd`` (aborted operations).
    """

    #: The counters each group of this block counts.
    COUNTS = {
        "done": (EmuCounter.PAGE_READS, EmuCounter.PARAM_READS, EmuCounter.PAGE_PROGRAMS,
                 EmuCounter.PROGRAM_OPS, EmuCounter.BLOCK_ERASES, EmuCounter.ERASE_OPS,
                 EmuCounter.FEATURE_OPS),
        "array": (EmuCounter.PAGE_PROGRAMS, EmuCounter.PROGRAM_OPS),
        "cmd": (EmuCounter.ABORTED,),
    }

    def __init__(self, params, index=0):
        self.params = params
        self.index = index
        pages_w = params.plane_bits + 1
        super().__init__({
            "cfg": In(config_layout(params)),
            "req": In(1), "req_op": In(Op), "req_time": In(BusyTime), "req_pages": In(pages_w),
            "req_row": In(params.row_bits),
            "reset_cmd": In(1),
            "copy_busy": In(1),
            "array_type": In(2),
            "op_row": Out(params.row_bits),
            "op_pages": Out(pages_w),
            "copy_start": Out(1),
            "copy_abort": Out(1),
            "rdy": Out(1),
            "ardy": Out(1),
            "pin_low": Out(1),
            "read_done": Out(1),
            **{f"inc_{group}": Out(increments_layout(params, counters))
               for group, counters in self.COUNTS.items()},
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        cfg = self.cfg
        pages_w = p.plane_bits + 1
        row_w = p.row_bits
        phase = Signal(Phase)
        op = Signal(Op)
        op_time = Signal(BusyTime)
        op_pages = Signal(pages_w)  # pages (blocks) the operation completes
        op_row = Signal(row_w)  # row of the final page (its type sets tPROG)
        wb_count = Signal(8)
        pin_low = Signal()
        tdone = Signal()  # the busy timer of the current BUSY phase has expired
        array_pages = Signal(pages_w)
        m.d.comb += [self.op_row.eq(op_row), self.op_pages.eq(op_pages),
                     self.pin_low.eq(pin_low)]

        m.submodules.timer = timer = BusyTimer(p.ticks_bits + 1, p.prescaler_bits)
        m.submodules.array_timer = atimer = BusyTimer(p.ticks_bits + 1, p.prescaler_bits)
        m.submodules.lfsr = lfsr = JitterLfsr()
        m.d.comb += [
            timer.prescaler.eq(cfg.prescaler),
            atimer.prescaler.eq(cfg.prescaler),
            lfsr.seed.eq(cfg.seed ^ (0x9E3779B9 * self.index & 0xFFFFFFFF)),
        ]
        done = Increments(m, p, "done")
        array = Increments(m, p, "array")
        cmd = Increments(m, p, "cmd")

        rdy = Signal()
        ardy = Signal()
        m.d.comb += [
            rdy.eq(phase == Phase.IDLE),
            ardy.eq(rdy & ~atimer.busy),
            self.rdy.eq(rdy),
            self.ardy.eq(ardy),
        ]

        # Busy times are looked up ahead, into registers, in two stages: (1) the base time and
        # the jitter of the selected busy time (11-way choices); (2) their sum, and whether it
        # is zero (both parts zero: no overflow). `prep` is low for two cycles after anything
        # they depend on changed (a new operation, a reset, an LFSR draw), and a busy period
        # starts only when it is high. So tWB lasts at least 3 cycles (t_wb 0 to 2 act as 3).
        def busy_ticks(time, name):
            base = Signal(p.ticks_bits, name=f"{name}_base")
            jit = Signal(max(p.jitter_bits, 1), name=f"{name}_jitter")
            ticks = Signal(p.ticks_bits + 1, name=f"{name}_ticks")
            zero = Signal(name=f"{name}_zero")
            m.d.sync += base.eq(cfg.times[time])
            if p.jitter_bits:
                m.d.sync += jit.eq(lfsr.value[:p.jitter_bits] & cfg.jitter[time])
            m.d.sync += [ticks.eq(base + jit), zero.eq((base == 0) & (jit == 0))]
            return ticks, zero

        changed = self.req | self.reset_cmd | lfsr.step
        prep1 = Signal()
        prep = Signal()
        m.d.sync += [prep1.eq(~changed), prep.eq(prep1 & ~changed)]
        load_ticks, load_zero = busy_ticks(op_time, "load")
        # The background array program of a cache program (its page type from `op_row`).
        array_time = Signal(BusyTime)
        m.d.comb += array_time.eq(BusyTime.PROG0 + self.array_type)
        array_ticks, array_zero = busy_ticks(array_time, "array")
        needs_copy = Const(0)
        if p.storage == Storage.ARRAY:
            needs_copy = (op == Op.PROG) | (op == Op.CACHE)

        # Cycles since the operation was loaded (saturating): the array time of a cache program
        # is ready four cycles after ``op_row`` (page type two, base and jitter three, ticks
        # four): a cache program that completes sooner (a tCBSY of 0 and a short tWB) waits.
        since = Signal(range(8))
        with m.If(self.req):
            m.d.sync += since.eq(0)
        with m.Elif(since != 7):
            m.d.sync += since.eq(since + 1)
        array_ready = (op != Op.CACHE) | (since >= 4)

        load = Signal()
        complete = Signal()
        with m.Switch(phase):
            with m.Case(Phase.WB):
                with m.If(wb_count <= 1):
                    # A background array program (cache program) delays the next operation,
                    # but not a multi-plane queueing (11h): its tDBSY is the data register's,
                    # and the 15h/10h that completes the set waits for the array instead.
                    with m.If(atimer.busy & (op != Op.QUEUE)):
                        m.d.sync += [phase.eq(Phase.WAIT), pin_low.eq(1)]
                    with m.Elif(prep):
                        m.d.comb += load.eq(1)
                with m.Else():
                    m.d.sync += wb_count.eq(wb_count - 1)
            with m.Case(Phase.WAIT):
                with m.If(~atimer.busy & prep):
                    m.d.comb += load.eq(1)
            with m.Case(Phase.BUSY):
                with m.If(timer.done):
                    m.d.sync += tdone.eq(1)
                with m.If((tdone | timer.done) & ~self.copy_busy & array_ready):
                    m.d.comb += complete.eq(1)
        with m.If(load):
            m.d.comb += [timer.start.eq(1), timer.ticks.eq(load_ticks),
                         self.copy_start.eq(needs_copy)]
            m.d.sync += tdone.eq(load_zero)
            if p.jitter_bits:
                m.d.comb += lfsr.step.eq(1)
            with m.If(load_zero & ~needs_copy & array_ready):
                m.d.comb += complete.eq(1)
            with m.Else():
                m.d.sync += [phase.eq(Phase.BUSY), pin_low.eq(1)]
        with m.If(complete):
            m.d.sync += [phase.eq(Phase.IDLE), pin_low.eq(0)]
            with m.Switch(op):
                with m.Case(Op.READ):
                    done.count(EmuCounter.PAGE_READS)
                    m.d.comb += self.read_done.eq(1)
                with m.Case(Op.PARAM):
                    done.count(EmuCounter.PARAM_READS)
                with m.Case(Op.PROG):
                    done.count(EmuCounter.PAGE_PROGRAMS, op_pages)
                    done.count(EmuCounter.PROGRAM_OPS)
                with m.Case(Op.CACHE):
                    # The data register is free: RDY returns, the array programs on (ARDY = 0).
                    m.d.comb += [atimer.start.eq(1), atimer.ticks.eq(array_ticks)]
                    if p.jitter_bits:
                        m.d.comb += lfsr.step.eq(1)
                    m.d.sync += array_pages.eq(op_pages)
                    with m.If(array_zero):
                        done.count(EmuCounter.PAGE_PROGRAMS, op_pages)
                        done.count(EmuCounter.PROGRAM_OPS)
                with m.Case(Op.RCACHE):
                    done.count(EmuCounter.PAGE_READS, op_pages)
                with m.Case(Op.ERASE):
                    done.count(EmuCounter.BLOCK_ERASES, op_pages)
                    done.count(EmuCounter.ERASE_OPS)
                with m.Case(Op.FEAT):
                    done.count(EmuCounter.FEATURE_OPS)
        with m.If(atimer.done):
            array.count(EmuCounter.PAGE_PROGRAMS, array_pages)
            array.count(EmuCounter.PROGRAM_OPS)

        with m.If(self.req):
            m.d.sync += [
                phase.eq(Phase.WB), wb_count.eq(cfg.t_wb), op.eq(self.req_op),
                op_time.eq(self.req_time), op_pages.eq(self.req_pages), op_row.eq(self.req_row),
            ]

        # Reset: abort everything; R/B# stays low if it was (one merged pulse), else after tWB.
        with m.If(self.reset_cmd):
            m.d.comb += [timer.abort.eq(1), atimer.abort.eq(1), self.copy_abort.eq(1)]
            m.d.sync += [op.eq(Op.RESET), op_time.eq(BusyTime.RST), op_pages.eq(0),
                         tdone.eq(0), wb_count.eq(cfg.t_wb)]
            with m.If(pin_low):
                m.d.sync += phase.eq(Phase.WAIT)
            with m.Else():
                m.d.sync += phase.eq(Phase.WB)
            with m.If((phase != Phase.IDLE) | atimer.busy):
                cmd.count(EmuCounter.ABORTED)

        done.drive(self.inc_done)
        array.drive(self.inc_array)
        cmd.drive(self.inc_cmd)
        return m


class PageTypes(wiring.Component):
    """The page types of two rows: the program being confirmed, and the operation's final page.

    The type of the page of a row (a register of its owner): entry ``page % page_type_slots``
    of the map, ready one cycle after the row changed (``array_type`` from a page-type RAM: two
    cycles, its entry registered once more to cut a long path). A map of a few entries is read
    from the configuration (a register, so the entry is registered here); a longer one from the
    die's page-type RAM (a synchronous read port addressed by the row, the entry picked from
    the word with the low bits registered alongside). Both callers leave their row alone for
    longer than that before the type is used: a confirm comes two cycles or more after the last
    address cycle, and the timing engine starts a cache program's background array program no
    sooner than four cycles after ``op_row`` was loaded (its ``since`` counter).

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    cfg : In(config_layout)
        Run-time configuration (``page_types``, when the map is short).
    page_types_w : In(page_type_write_layout)
        (Only with a page-type RAM, see :func:`~.layouts.page_type_words`.) Written into the
        RAM every cycle (see :class:`~.fsm.Die`).
    array_row, prog_row : In(row_bits)
        The timing engine's ``op_row``; the row being confirmed.
    array_type, prog_type : Out(2)
        Their page types.
    """

    def __init__(self, params):
        self.params = params
        ram = {"page_types_w": In(page_type_write_layout(params))} \
            if page_type_words(params) else {}
        super().__init__({
            "cfg": In(config_layout(params)),
            **ram,
            "array_row": In(params.row_bits), "array_type": Out(2),
            "prog_row": In(params.row_bits), "prog_type": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        cfg = self.cfg
        type_bits = (p.page_type_slots - 1).bit_length()
        words = page_type_words(p)
        if words:
            m.submodules.page_types = ptypes = Memory(
                shape=data.ArrayLayout(2, PAGE_TYPE_WORD), depth=words, init=[])
            pt_wr = ptypes.write_port()
            m.d.comb += [pt_wr.addr.eq(self.page_types_w.addr),
                         pt_wr.data.eq(self.page_types_w.data), pt_wr.en.eq(1)]
        word_bits = (PAGE_TYPE_WORD - 1).bit_length()

        def page_type_of(row_reg, name, *, staged=False):
            entry = Signal(max(type_bits, 1), name=f"{name}_entry")
            # (The page number modulo the map's size.)
            m.d.comb += entry.eq(row_reg[:p.page_bits])
            if not words:
                ptype = Signal(2, name=f"{name}_ptype")
                m.d.sync += ptype.eq(cfg.page_types[entry] if type_bits else cfg.page_types[0])
                return ptype
            port = ptypes.read_port()
            low = Signal(word_bits, name=f"{name}_ptype_low")
            m.d.comb += port.addr.eq(entry[word_bits:])
            m.d.sync += low.eq(entry[:word_bits])
            if not staged:
                return port.data[low]
            # The entry picked from the word is registered: the RAM's output, the word's
            # multiplexer and the busy time's table and jitter were one path (the ULX3S emulator
            # builds' slowest: 90.9 MHz with the tap); the type is then ready two cycles after
            # the row changed (the timing engine's ``since`` waits for it).
            staged_type = Signal(2, name=f"{name}_ptype_q")
            m.d.sync += staged_type.eq(port.data[low])
            return staged_type

        # (In this order: the RAM's read ports are numbered as they are made.)
        m.d.comb += self.array_type.eq(page_type_of(self.array_row, "array", staged=True))
        m.d.comb += self.prog_type.eq(page_type_of(self.prog_row, "prog"))
        return m

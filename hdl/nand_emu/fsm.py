"""One emulated die (LUN): command FSM, timing engine, status register, NAND rules, storage.

The exact behaviour, its deviations from ONFI and the reasons are in ``docs/nand_emu.md``.
"""

import functools
import operator

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rbscope.nand.onfi import Opcode  # the ONFI opcodes the die understands: the one table

from .counters import inc_bits
from .layouts import config_layout, page_type_words, page_type_write_layout
from .onfi_rom import id_bytes, parameter_page
from .params import PAGE_TYPE_WORD, BusyTime, EmuCounter, EmuParams, Storage
from .timing import BusyTimer, JitterLfsr

__all__ = ["Die", "Opcode", "OutMode", "Phase", "Op"]


class OutMode(enum.Enum, shape=3):
    """What an RE# cycle reads."""

    NONE = 0
    STATUS = 1
    ID = 2
    PARAM = 3
    PAGE = 4
    FEAT = 5


class Phase(enum.Enum, shape=2):
    """State of the timing engine."""

    IDLE = 0  # RDY = 1
    WB = 1  # tWB: RDY = 0, R/B# still high
    WAIT = 2  # R/B# low, waiting for the array (a program after a cache program) or for reset
    BUSY = 3  # R/B# low, the busy timer runs


class Op(enum.Enum, shape=4):
    """The operation whose busy period the engine runs (what happens at its end)."""

    READ = 0
    PARAM = 1
    PROG = 2
    CACHE = 3  # 15h: at the end of tCBSY the array program starts in the background
    QUEUE = 4  # 11h / D1h: tDBSY
    RCACHE = 5
    ERASE = 6
    FEAT = 7
    RESET = 8


class Die(wiring.Component):
    """Emulate one ONFI die behind an already decoded bus.

    Parameters
    ----------
    params : EmuParams
    index : int
        Die number (varies the jitter seed between dies).

    Members
    -------
    cmd, addr, din, dout : In(1)
        Bus strobes from :class:`~.bus.BusFrontEnd`, already gated with this die's CE#.
    byte : In(8)
        The latched IO byte of a ``cmd``/``addr``/``din`` strobe.
    wp : In(1)
        WP# (1 = not protected).
    cfg : In(config_layout)
        Run-time configuration.
    page_types_w : In(page_type_write_layout)
        (Only with a page-type RAM, see :func:`~.layouts.page_type_words`.) Written into the
        die's copy of the page-type map every cycle; :class:`~.emulator.NandEmulator` copies
        ``cfg.page_types`` into it word by word, round robin. The die ignores
        ``cfg.page_types`` then.
    rb_low : Out(1)
        The die pulls R/B# low (registered, glitch-free).
    data_out : Out(8)
        The byte the die drives when the host pulls RE# low.
    data_out_en : Out(1)
        The die has something to output (a status, ID, parameter, feature or page byte).
    status : Out(8)
        The status register (SR[0] FAIL, SR[1] FAILC, SR[5] ARDY, SR[6] RDY, SR[7] WP#).
    inc : Out(ArrayLayout(inc_bits, len(EmuCounter)))
        How much each ground-truth counter grew in the previous cycle (registered). The counters
        themselves live in the emulator's :class:`~.counters.CounterBank`.
    """

    def __init__(self, params, index=0):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        if not isinstance(index, int) or not 0 <= index < params.dies:
            raise ValueError(f"Die index must be an integer from 0 to {params.dies - 1}, "
                             f"not {index!r}")
        self.params = params
        self.index = index
        ram = {"page_types_w": In(page_type_write_layout(params))} \
            if page_type_words(params) else {}
        super().__init__({
            "cmd": In(1), "addr": In(1), "din": In(1), "dout": In(1), "byte": In(8),
            "wp": In(1, init=1),
            "cfg": In(config_layout(params)),
            **ram,
            "rb_low": Out(1), "data_out": Out(8), "data_out_en": Out(1), "status": Out(8),
            "inc": Out(data.ArrayLayout(inc_bits(params), len(EmuCounter))),
        })

    def elaborate(self, platform):  # noqa: C901 (one FSM, kept in one place on purpose)
        m = Module()
        p = self.params
        cfg = self.cfg
        total = p.page_total
        col_w = max(p.col_bits, 10)  # the parameter page is read as 768 bytes
        row_w = p.row_bits
        pages_w = p.plane_bits + 1

        def block_of(row):
            return row[p.page_bits:p.page_bits + p.block_bits]

        def page_of(row):
            return row[:p.page_bits]

        # ---- Registers ------------------------------------------------------------------------

        cmd = Signal(8)  # opcode being assembled
        acount = Signal(3)  # address cycles received since `cmd`
        abytes = Array(Signal(8, name=f"abyte{i}") for i in range(5))
        col = Signal(col_w)
        col_next = Signal(col_w)
        # The column moved to the next byte in the previous cycle (a data-in or data-out
        # cycle). The output bytes (parameter page, address pattern) are read from registers
        # one cycle behind the column, for the column and for the next one; this picks the
        # one that is current, so the next byte is out as soon as before and no decoding sits
        # in front of the ROM or the pattern. (After a jump of the column, by address cycles,
        # the byte is right a cycle later, well within tWHR/tCCS.)
        col_step = Signal()
        col_stepped = Signal()
        row = Signal(row_w)  # row of the command being assembled
        row_next = Signal(row_w)  # what `row` becomes at the end of this cycle
        out_row = Signal(row_w)  # page the data output reads
        out_row_next = Signal(row_w)
        read_row = Signal(row_w)  # page in the data register (read cache)
        read_valid = Signal()  # a page read happened: 31h / 3Fh allowed
        prog_ready = Signal()  # 80h with 5 address cycles: data, 85h, 10h/11h/15h allowed
        out_mode = Signal(OutMode, init=OutMode.STATUS)
        resume_mode = Signal(OutMode, init=OutMode.PAGE)  # what 00h resumes after a status
        id_sel = Signal()
        feat_addr = Signal(8)
        features = Array(Signal(8, name=f"feature{i}") for i in range(4))  # feature 01h
        dcount = Signal(3)
        fail = Signal()
        failc = Signal()

        # Multi-plane queue: rows accepted so far for the operation being built.
        mp_rows = Array(Signal(row_w, name=f"mp_row{i}") for i in range(p.planes))
        mp_count = Signal(range(p.planes + 1))
        mp_erase = Signal()  # the queue holds erases (D1h), not programs (11h)
        mp_fail = Signal()

        # Timing engine.
        phase = Signal(Phase)
        op = Signal(Op)
        op_time = Signal(BusyTime)
        op_pages = Signal(pages_w)  # pages (blocks) the operation completes
        op_row = Signal(row_w)  # row of the final page (its type sets tPROG)
        wb_count = Signal(8)
        pin_low = Signal()
        tdone = Signal()  # the busy timer of the current BUSY phase has expired
        array_pages = Signal(pages_w)

        m.submodules.timer = timer = BusyTimer(p.ticks_bits + 1, p.prescaler_bits)
        m.submodules.array_timer = atimer = BusyTimer(p.ticks_bits + 1, p.prescaler_bits)
        m.submodules.lfsr = lfsr = JitterLfsr()
        m.d.comb += [
            timer.prescaler.eq(cfg.prescaler),
            atimer.prescaler.eq(cfg.prescaler),
            lfsr.seed.eq(cfg.seed ^ (0x9E3779B9 * self.index & 0xFFFFFFFF)),
        ]

        # Counter increments by source group. The increments of one group are mutually exclusive
        # (the branches of one command strobe, of one completion, of the background program), so
        # a group's increments are OR-ed; the groups' are added.
        incs = {c: {} for c in EmuCounter}
        group = ["done"]

        def count(counter, amount=1):
            sig = Signal(pages_w, name=f"inc_{counter.name.lower()}_{group[0]}")
            incs[counter].setdefault(group[0], []).append(sig)
            m.d.comb += sig.eq(amount)

        # ---- Status ---------------------------------------------------------------------------

        rdy = Signal()
        ardy = Signal()
        m.d.comb += [
            rdy.eq(phase == Phase.IDLE),
            ardy.eq(rdy & ~atimer.busy),
            self.status.eq(Cat(fail, failc, Const(0, 3), ardy, rdy, self.wp)),
            self.rb_low.eq(pin_low),
        ]

        # ---- Page state (per block: pages programmed, in order) --------------------------------
        # One word per block holds how many pages have been programmed since the erase: the
        # sequential-program rule makes this the whole page state.

        m.submodules.bstate = bstate = Memory(shape=p.page_bits + 1, depth=p.blocks, init=[])
        bs_wr = bstate.write_port()
        bs_rule = bstate.read_port()
        bs_out = bstate.read_port()
        # The RAM's output is slow (about 6 ns on ECP5): every use of it is one comparison
        # straight into a register (a bare copy would be merged into the RAM's read port by
        # synthesis, leaving the slow output in front of the logic). Both ports are addressed
        # from registers (`row`, `out_row`), so no decoding sits in front of the RAM's address
        # either. The rule comparisons are therefore registered three cycles after the last
        # address cycle's strobe: the row is registered (1), read (2), compared (3). The
        # earliest confirm strobe comes two cycles after it (WE# rising edges are at least two
        # cycles apart after the synchroniser) and is applied a cycle later (the decoder's stage
        # 2), so it sees the comparisons of its own row. Writes happen only at confirms, and
        # every confirm follows address cycles of its own row, so the results are never stale
        # then and the ports need no write-through. The output port's comparison lags `out_row`
        # by two cycles, which a data output (after tWB and tR) never sees.
        m.d.comb += [
            bs_rule.addr.eq(block_of(row)),
            bs_out.addr.eq(block_of(out_row)),
        ]

        def is_bad(block):
            hits = [entry.valid & (entry.block == block) for entry in cfg.bad_blocks]
            return Cat(*hits).any() if p.bad_block_slots else Const(0)

        rule_block = block_of(row)
        rule_page = page_of(row)
        rule_bad = Signal()
        rule_next_page = Signal()  # the page is the block's next one (in order, erased)
        rule_programmed = Signal()  # the page was programmed since the erase
        out_bad = Signal()
        out_erased = Signal()
        # Only an equality (two LUT levels) sits behind the rule port's output. The orderings,
        # which need a carry chain, compare registered copies of the data a cycle later:
        # `rule_programmed` only picks which refusal a refused program is counted as (a cycle
        # later too, see `refuse`), and `out_erased` serves data output, long after tR.
        # The equality is registered in two halves (each a LUT level or two behind the RAM's
        # output) and their AND formed from the flip-flops: the whole comparison in front of the
        # register had reached five LUT levels on the ECP5 (`docs/benchmarks.md`).
        rule_data = Signal.like(bs_rule.data)
        out_data = Signal.like(bs_out.data)
        word = Cat(rule_page, Const(0, 1))  # the page, as wide as the RAM's word
        half = (len(word) + 1) // 2
        next_lo = Signal()
        next_hi = Signal()
        m.d.comb += rule_next_page.eq(next_lo & next_hi)
        m.d.sync += [
            rule_data.eq(bs_rule.data),
            out_data.eq(bs_out.data),
            rule_bad.eq(is_bad(rule_block)),
            next_lo.eq(word[:half] == bs_rule.data[:half]),
            next_hi.eq(word[half:] == bs_rule.data[half:]),
            rule_programmed.eq(rule_page < rule_data),
            out_erased.eq(page_of(out_row) >= out_data),
        ]
        m.d.comb += out_bad.eq(is_bad(block_of(out_row)))

        # ---- Storage --------------------------------------------------------------------------

        page_byte = Signal(8)
        copy_busy = Signal()
        copy_start = Signal()
        if p.storage == Storage.ARRAY:
            m.submodules.array = array = Memory(shape=8, depth=p.pages * total, init=[])
            m.submodules.pbuf = pbuf = Memory(shape=8, depth=p.planes * total, init=[])
            arr_rd = array.read_port()
            arr_wr = array.write_port()
            buf_wr = pbuf.write_port()
            buf_rd = pbuf.read_port()
            m.d.comb += [
                arr_rd.addr.eq(out_row_next * total + col_next[:p.col_bits]),
                page_byte.eq(arr_rd.data),
            ]
            # Copy engine: page buffer → array, one byte per cycle, for each queued row.
            copy_k = Signal(range(p.planes + 1))
            copy_col = Signal(range(total + 1))
            copy_n = Signal(pages_w)
            w_valid = Signal()
            w_addr = Signal(range(p.pages * total))
            cur = mp_rows[copy_k]
            plane = block_of(cur)[:p.plane_bits] if p.plane_bits else Const(0)
            m.d.comb += [
                buf_rd.addr.eq(plane * total + copy_col),
                arr_wr.addr.eq(w_addr),
                arr_wr.data.eq(buf_rd.data),
                arr_wr.en.eq(w_valid),
                copy_busy.eq((copy_k < copy_n) | w_valid),
            ]
            m.d.sync += w_valid.eq(0)
            with m.If(copy_start):
                m.d.sync += [copy_k.eq(0), copy_col.eq(0), copy_n.eq(op_pages)]
            with m.Elif(copy_k < copy_n):
                m.d.sync += [w_valid.eq(1), w_addr.eq(cur * total + copy_col)]
                with m.If(copy_col == total - 1):
                    m.d.sync += [copy_col.eq(0), copy_k.eq(copy_k + 1)]
                with m.Else():
                    m.d.sync += copy_col.eq(copy_col + 1)
        else:
            buf_wr = None

            def pattern(c):
                c = c[:p.col_bits]
                return (c ^ (c >> 8) ^ out_row ^ (out_row >> 8) ^ (out_row >> 16) ^ 0xA5)[:8]
            # The pattern of the column and of the next one, from registers (no decoding in
            # front of them; see `col_stepped`).
            at_col, at_next = Signal(8), Signal(8)
            m.d.sync += [at_col.eq(pattern(col)), at_next.eq(pattern(col + 1))]
            m.d.comb += page_byte.eq(Mux(col_stepped, at_next, at_col))
        copy_abort = Signal()
        if p.storage == Storage.ARRAY:
            with m.If(copy_abort):
                m.d.sync += [copy_n.eq(0), w_valid.eq(0)]

        # ---- Data output ----------------------------------------------------------------------

        m.submodules.param_rom = prom = Memory(shape=8, depth=256,
                                               init=list(parameter_page(p)))
        prom_rd = prom.read_port()
        prom_next = prom.read_port()
        prom_byte = Signal(8)
        m.d.comb += [
            prom_rd.addr.eq(col[:8]),
            prom_next.addr.eq((col + 1)[:8]),
            prom_byte.eq(Mux(col_stepped, prom_next.data, prom_rd.data)),
        ]
        id_rom = Array(Const(b, 8) for b in id_bytes(p))
        m.d.comb += self.data_out_en.eq(out_mode != OutMode.NONE)
        with m.Switch(out_mode):
            with m.Case(OutMode.STATUS):
                m.d.comb += self.data_out.eq(self.status)
            with m.Case(OutMode.ID):
                m.d.comb += self.data_out.eq(id_rom[Cat(col[:3], id_sel)])
            with m.Case(OutMode.PARAM):
                m.d.comb += self.data_out.eq(prom_byte)
            with m.Case(OutMode.PAGE):
                m.d.comb += self.data_out.eq(Mux(out_bad, 0x00, Mux(out_erased, 0xFF, page_byte)))
            with m.Case(OutMode.FEAT):
                m.d.comb += self.data_out.eq(
                    Mux((feat_addr == 0x01) & (col < 4), features[col[:2]], 0))

        # ---- Page types -----------------------------------------------------------------------
        # The type of the page of `row_reg` (a register): entry `page % page_type_slots` of the
        # map, ready one cycle after `row_reg` changed. A map of a few entries is read from the
        # configuration (a register, so the entry is registered here); a longer one from the
        # die's page-type RAM (a synchronous read port addressed by the register, the entry
        # picked from the word with the low bits registered alongside). Both callers leave
        # their row alone for longer than that before the type is used: a confirm comes two
        # cycles or more after the last address cycle, and `op_row` is loaded with the
        # operation, at least three cycles before the busy period that needs its type.
        type_bits = (p.page_type_slots - 1).bit_length()
        words = page_type_words(p)
        if words:
            m.submodules.page_types = ptypes = Memory(
                shape=data.ArrayLayout(2, PAGE_TYPE_WORD), depth=words, init=[])
            pt_wr = ptypes.write_port()
            m.d.comb += [pt_wr.addr.eq(self.page_types_w.addr),
                         pt_wr.data.eq(self.page_types_w.data), pt_wr.en.eq(1)]
        word_bits = (PAGE_TYPE_WORD - 1).bit_length()

        def page_type_of(row_reg, name):
            entry = Signal(max(type_bits, 1), name=f"{name}_entry")
            m.d.comb += entry.eq(page_of(row_reg))  # the page number modulo the map's size
            if not words:
                ptype = Signal(2, name=f"{name}_ptype")
                m.d.sync += ptype.eq(cfg.page_types[entry] if type_bits else cfg.page_types[0])
                return ptype
            port = ptypes.read_port()
            low = Signal(word_bits, name=f"{name}_ptype_low")
            m.d.comb += port.addr.eq(entry[word_bits:])
            m.d.sync += low.eq(entry[:word_bits])
            return port.data[low]

        # ---- Timing engine --------------------------------------------------------------------

        req = Signal()  # start an operation's busy period (after tWB)
        req_op = Signal(Op)
        req_time = Signal(BusyTime)
        req_pages = Signal(pages_w)
        req_row = Signal(row_w)
        reset_cmd = Signal()

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

        changed = req | reset_cmd | lfsr.step
        prep1 = Signal()
        prep = Signal()
        m.d.sync += [prep1.eq(~changed), prep.eq(prep1 & ~changed)]
        load_ticks, load_zero = busy_ticks(op_time, "load")
        # The background array program of a cache program (its page type from `op_row`).
        array_time = Signal(BusyTime)
        m.d.comb += array_time.eq(BusyTime.PROG0 + page_type_of(op_row, "array"))
        array_ticks, array_zero = busy_ticks(array_time, "array")
        needs_copy = Const(0)
        if p.storage == Storage.ARRAY:
            needs_copy = (op == Op.PROG) | (op == Op.CACHE)

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
                with m.If((tdone | timer.done) & ~copy_busy):
                    m.d.comb += complete.eq(1)
        with m.If(load):
            m.d.comb += [timer.start.eq(1), timer.ticks.eq(load_ticks), copy_start.eq(needs_copy)]
            m.d.sync += tdone.eq(load_zero)
            if p.jitter_bits:
                m.d.comb += lfsr.step.eq(1)
            with m.If(load_zero & ~needs_copy):
                m.d.comb += complete.eq(1)
            with m.Else():
                m.d.sync += [phase.eq(Phase.BUSY), pin_low.eq(1)]
        with m.If(complete):
            m.d.sync += [phase.eq(Phase.IDLE), pin_low.eq(0)]
            with m.Switch(op):
                with m.Case(Op.READ):
                    count(EmuCounter.PAGE_READS)
                    m.d.sync += read_valid.eq(1)
                with m.Case(Op.PARAM):
                    count(EmuCounter.PARAM_READS)
                with m.Case(Op.PROG):
                    count(EmuCounter.PAGE_PROGRAMS, op_pages)
                    count(EmuCounter.PROGRAM_OPS)
                with m.Case(Op.CACHE):
                    # The data register is free: RDY returns, the array programs on (ARDY = 0).
                    m.d.comb += [atimer.start.eq(1), atimer.ticks.eq(array_ticks)]
                    if p.jitter_bits:
                        m.d.comb += lfsr.step.eq(1)
                    m.d.sync += array_pages.eq(op_pages)
                    with m.If(array_zero):
                        count(EmuCounter.PAGE_PROGRAMS, op_pages)
                        count(EmuCounter.PROGRAM_OPS)
                with m.Case(Op.RCACHE):
                    count(EmuCounter.PAGE_READS, op_pages)
                with m.Case(Op.ERASE):
                    count(EmuCounter.BLOCK_ERASES, op_pages)
                    count(EmuCounter.ERASE_OPS)
                with m.Case(Op.FEAT):
                    count(EmuCounter.FEATURE_OPS)
        group[0] = "array"
        with m.If(atimer.done):
            count(EmuCounter.PAGE_PROGRAMS, array_pages)
            count(EmuCounter.PROGRAM_OPS)
        group[0] = "cmd"  # everything below happens on a command strobe

        with m.If(req):
            m.d.sync += [
                phase.eq(Phase.WB), wb_count.eq(cfg.t_wb), op.eq(req_op), op_time.eq(req_time),
                op_pages.eq(req_pages), op_row.eq(req_row),
            ]

        # Reset: abort everything; R/B# stays low if it was (one merged pulse), else after tWB.
        with m.If(reset_cmd):
            m.d.comb += [timer.abort.eq(1), atimer.abort.eq(1), copy_abort.eq(1)]
            m.d.sync += [op.eq(Op.RESET), op_time.eq(BusyTime.RST), op_pages.eq(0),
                         tdone.eq(0), wb_count.eq(cfg.t_wb)]
            with m.If(pin_low):
                m.d.sync += phase.eq(Phase.WAIT)
            with m.Else():
                m.d.sync += phase.eq(Phase.WB)
            with m.If((phase != Phase.IDLE) | atimer.busy):
                count(EmuCounter.ABORTED)

        # ---- Command decoding -----------------------------------------------------------------

        def start(op_, time, pages=1, row_=None):
            m.d.comb += [req.eq(1), req_op.eq(op_), req_time.eq(time), req_pages.eq(pages),
                         req_row.eq(row if row_ is None else row_)]

        def illegal():
            count(EmuCounter.ILLEGAL)

        prog_time = Signal(BusyTime)
        m.d.comb += prog_time.eq(BusyTime.PROG0 + page_type_of(row, "prog"))

        # Rule evaluation of the row being confirmed (program or erase).
        prog_ok = Signal()
        erase_ok = Signal()
        m.d.comb += [
            prog_ok.eq(self.wp & ~rule_bad & rule_next_page),
            erase_ok.eq(self.wp & ~rule_bad),
        ]

        def refuse(is_program):
            count(EmuCounter.FAILED)
            with m.If(~self.wp):
                count(EmuCounter.FAIL_PROTECTED)
            with m.Elif(rule_bad):
                count(EmuCounter.FAIL_BAD_BLOCK)
            if is_program:
                with m.Else():
                    m.d.comb += refused_page.eq(1)

        # A program refused for its page (not the block's next one) is counted as "not erased"
        # or "out of order" a cycle later, when `rule_programmed` is ready (the row, and so the
        # rule port's word, stays put: the next address cycle is at least two cycles away). The
        # next command's stage 2 comes later still, so the command group stays one-hot.
        refused_page = Signal()
        refused_page_d = Signal()
        m.d.sync += refused_page_d.eq(refused_page)
        with m.If(refused_page_d):
            with m.If(rule_programmed):
                count(EmuCounter.FAIL_NOT_ERASED)
            with m.Else():
                count(EmuCounter.FAIL_ORDER)

        def accept(is_program):
            m.d.comb += [bs_wr.addr.eq(rule_block), bs_wr.en.eq(1),
                         bs_wr.data.eq(rule_page + 1 if is_program else 0)]


        def confirm(is_program, kind):
            """A 10h/15h/11h (program) or D0h/D1h (erase) confirm of the row in `row`."""
            ok = prog_ok if is_program else erase_ok
            stale = Signal(name=f"stale_{kind}")  # the queue holds the other kind: drop it
            m.d.comb += stale.eq(mp_erase != int(not is_program))
            queued = Mux(stale, 0, mp_count)
            queued_fail = Mux(stale, 0, mp_fail)
            with m.If(ok):
                accept(is_program)
                m.d.sync += mp_rows[queued].eq(row)
            with m.Else():
                refuse(is_program)
            pages = queued + ok
            if kind == "queue":
                with m.If(ok):
                    m.d.sync += [mp_count.eq(queued + 1), mp_erase.eq(not is_program),
                                 mp_fail.eq(queued_fail)]
                    start(Op.QUEUE, BusyTime.DBSY)
                with m.Else():
                    m.d.sync += [mp_count.eq(queued), mp_erase.eq(not is_program),
                                 mp_fail.eq(1), fail.eq(1)]
            else:
                any_fail = queued_fail | ~ok
                m.d.sync += [mp_count.eq(0), mp_fail.eq(0), mp_erase.eq(0),
                             failc.eq(fail), fail.eq(any_fail)]
                with m.If(pages != 0):
                    if kind == "program":
                        start(Op.PROG, prog_time, pages)
                    elif kind == "cache":
                        start(Op.CACHE, BusyTime.CBSY, pages)
                    else:
                        start(Op.ERASE, BusyTime.BERS, pages)
                if kind == "cache":
                    count(EmuCounter.CACHE_OPS)

        m.d.sync += col_stepped.eq(col_step)
        m.d.comb += [col_next.eq(col), out_row_next.eq(out_row), row_next.eq(row)]
        m.d.sync += [col.eq(col_next), out_row.eq(out_row_next), row.eq(row_next)]
        # A command is decoded in two cycles. Bus strobes are at least two cycles apart after
        # the synchroniser (WE# must be seen low between two rising edges), so the cycle after a
        # command strobe never holds another strobe of WE#. Stage 1 (the strobe's cycle)
        # classifies the command against the state: which action it takes or that it is
        # illegal, into one-hot registers. Stage 2 (the next cycle) applies the action. Every
        # state that stage 1 reads changes only through commands, address and data cycles
        # (never in the cycle between the stages), except the timing engine's RDY/ARDY, which
        # are decided on the strobe's cycle as before; the effects come one cycle later.
        actions = ("reset", "status", "status_enh", "setup", "read", "read_confirm",
                   "rcache_seq", "rcache_end", "change_read", "program", "change_write",
                   "prog_confirm", "prog_cache", "prog_queue", "erase_confirm", "erase_queue",
                   "illegal")
        want = {a: Signal(name=f"want_{a}") for a in actions}
        act = {a: Signal(name=f"act_{a}") for a in actions}
        act_byte = Signal(8)  # the command byte, for stage 2
        m.d.sync += [act[a].eq(want[a]) for a in actions]
        m.d.sync += act_byte.eq(self.byte)

        busy_ok = Signal()  # command allowed while RDY = 0
        m.d.comb += busy_ok.eq((self.byte == Opcode.RESET) | (self.byte == Opcode.STATUS)
                               | (self.byte == Opcode.STATUS_ENH))

        def classify(action, cond=None):
            if cond is None:
                m.d.comb += want[action].eq(1)
            else:
                m.d.comb += [want[action].eq(cond), want["illegal"].eq(~cond)]

        with m.If(self.cmd):
            with m.If(~rdy & ~busy_ok):
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
                        classify("rcache_seq", ardy & read_valid)
                    with m.Case(Opcode.READ_CACHE_END):
                        classify("rcache_end", ardy & read_valid)
                    with m.Case(Opcode.CHANGE_READ_COL_CONFIRM):
                        classify("change_read",
                                 ardy & (cmd == Opcode.CHANGE_READ_COL) & (acount >= 2))
                    with m.Case(Opcode.PROGRAM, Opcode.PROGRAM_MP):
                        classify("program")
                    with m.Case(Opcode.CHANGE_WRITE_COL):
                        classify("change_write", prog_ready)
                    with m.Case(Opcode.PROGRAM_CONFIRM):
                        classify("prog_confirm", prog_ready)
                    with m.Case(Opcode.PROGRAM_CACHE):
                        classify("prog_cache", prog_ready)
                    with m.Case(Opcode.PROGRAM_MP_CONFIRM):
                        classify("prog_queue", prog_ready & (mp_count < p.planes - 1))
                    with m.Case(Opcode.ERASE_CONFIRM):
                        classify("erase_confirm", ardy & (cmd == Opcode.ERASE) & (acount >= 3))
                    with m.Case(Opcode.ERASE_MP_CONFIRM):
                        classify("erase_queue", ardy & (cmd == Opcode.ERASE) & (acount >= 3)
                                 & (mp_count < p.planes - 1))
                    with m.Default():
                        classify("illegal")

        # Stage 2: apply (exactly one action flag is high, in the cycle after the strobe).
        with m.If(act["illegal"]):
            illegal()
        with m.If(act["reset"]):
            m.d.comb += reset_cmd.eq(1)
            count(EmuCounter.RESETS)
            m.d.sync += [cmd.eq(Opcode.RESET), prog_ready.eq(0), read_valid.eq(0),
                         mp_count.eq(0), mp_fail.eq(0), fail.eq(0), failc.eq(0),
                         out_mode.eq(OutMode.STATUS)]
        with m.If(act["status"]):
            m.d.sync += [cmd.eq(Opcode.STATUS), out_mode.eq(OutMode.STATUS)]
            with m.If(out_mode != OutMode.STATUS):
                m.d.sync += resume_mode.eq(out_mode)
        with m.If(act["status_enh"]):
            m.d.sync += [cmd.eq(Opcode.STATUS_ENH), acount.eq(0)]
            with m.If(out_mode != OutMode.STATUS):
                m.d.sync += resume_mode.eq(out_mode)
        with m.If(act["setup"]):
            m.d.sync += [cmd.eq(act_byte), acount.eq(0), dcount.eq(0), prog_ready.eq(0)]
        # 00h acts at once, in stage 1 (its logic is small): it is also "return to data output"
        # after a status poll (the page, the parameter page or the features, whichever was being
        # output), and hosts pull RE# low soon after it. No stage 2 writes in the same cycle.
        with m.If(want["read"]):
            m.d.sync += [cmd.eq(Opcode.READ), acount.eq(0), prog_ready.eq(0)]
            with m.If(out_mode == OutMode.STATUS):
                m.d.sync += out_mode.eq(resume_mode)
        with m.If(act["read_confirm"]):
            start(Op.READ, BusyTime.R)
            m.d.comb += out_row_next.eq(row)
            m.d.sync += [read_row.eq(row), cmd.eq(Opcode.READ_CONFIRM), read_valid.eq(0),
                         out_mode.eq(OutMode.PAGE)]
        with m.If(act["rcache_seq"] | act["rcache_end"]):
            seq = act["rcache_seq"]
            start(Op.RCACHE, BusyTime.RCBSY, seq)
            count(EmuCounter.CACHE_OPS)
            m.d.comb += [out_row_next.eq(read_row), col_next.eq(0)]
            m.d.sync += [read_row.eq(read_row + 1), read_valid.eq(seq),
                         out_mode.eq(OutMode.PAGE), cmd.eq(act_byte)]
        with m.If(act["change_read"]):
            m.d.sync += [out_mode.eq(OutMode.PAGE), cmd.eq(act_byte)]
        with m.If(act["program"]):
            m.d.sync += [cmd.eq(Opcode.PROGRAM), acount.eq(0), prog_ready.eq(0),
                         read_valid.eq(0)]
        with m.If(act["change_write"]):
            m.d.sync += [cmd.eq(Opcode.CHANGE_WRITE_COL), acount.eq(0)]
        for action, kind in (("prog_confirm", "program"), ("prog_cache", "cache"),
                             ("prog_queue", "queue")):
            with m.If(act[action]):
                confirm(True, kind)
                m.d.sync += [prog_ready.eq(0), cmd.eq(act_byte)]
        for action, kind in (("erase_confirm", "erase"), ("erase_queue", "queue")):
            with m.If(act[action]):
                confirm(False, kind)
                m.d.sync += cmd.eq(act_byte)

        with m.If(self.addr & (rdy | (cmd == Opcode.STATUS_ENH))):
            with m.If(acount < 5):
                m.d.sync += abytes[acount].eq(self.byte)
            with m.If(acount != 7):
                m.d.sync += acount.eq(acount + 1)
            row3 = Cat(abytes[0], abytes[1], self.byte)
            row5 = Cat(abytes[2], abytes[3], self.byte)
            with m.Switch(cmd):
                with m.Case(Opcode.READ, Opcode.PROGRAM):
                    with m.If(acount == 1):
                        m.d.comb += col_next.eq(Cat(abytes[0], self.byte))
                    with m.If(acount == 4):
                        m.d.comb += row_next.eq(row5)
                        with m.If(cmd == Opcode.PROGRAM):
                            m.d.sync += prog_ready.eq(1)
                with m.Case(Opcode.CHANGE_READ_COL, Opcode.CHANGE_WRITE_COL):
                    with m.If(acount == 1):
                        m.d.comb += col_next.eq(Cat(abytes[0], self.byte))
                with m.Case(Opcode.ERASE):
                    with m.If(acount == 2):
                        m.d.comb += row_next.eq(row3)
                with m.Case(Opcode.STATUS_ENH):
                    with m.If(acount == 2):
                        # One LUN per target: the LUN address selects this die's status.
                        m.d.sync += out_mode.eq(OutMode.STATUS)
                with m.Case(Opcode.READ_ID):
                    with m.If(acount == 0):
                        m.d.comb += col_next.eq(0)
                        m.d.sync += [out_mode.eq(OutMode.ID), id_sel.eq(self.byte == 0x20)]
                with m.Case(Opcode.READ_PARAM):
                    with m.If(acount == 0):
                        start(Op.PARAM, BusyTime.R)
                        m.d.comb += col_next.eq(0)
                        m.d.sync += out_mode.eq(OutMode.PARAM)
                with m.Case(Opcode.GET_FEATURES):
                    with m.If(acount == 0):
                        start(Op.FEAT, BusyTime.FEAT)
                        m.d.comb += col_next.eq(0)
                        m.d.sync += [out_mode.eq(OutMode.FEAT), feat_addr.eq(self.byte)]
                with m.Case(Opcode.SET_FEATURES):
                    with m.If(acount == 0):
                        m.d.sync += feat_addr.eq(self.byte)

        with m.If(self.din & rdy):
            with m.If(prog_ready & ((cmd == Opcode.PROGRAM) | (cmd == Opcode.CHANGE_WRITE_COL))):
                if buf_wr is not None:
                    plane = block_of(row)[:p.plane_bits] if p.plane_bits else Const(0)
                    m.d.comb += [buf_wr.addr.eq(plane * total + col[:p.col_bits]),
                                 buf_wr.data.eq(self.byte),
                                 buf_wr.en.eq(col < total)]
                m.d.comb += [col_next.eq(col + 1), col_step.eq(1)]
            with m.Elif((cmd == Opcode.SET_FEATURES) & (acount >= 1) & (dcount < 4)):
                with m.If(feat_addr == 0x01):
                    m.d.sync += features[dcount[:2]].eq(self.byte)
                m.d.sync += dcount.eq(dcount + 1)
                with m.If(dcount == 3):
                    start(Op.FEAT, BusyTime.FEAT)

        # Status reads do not move the column: after polling, 00h resumes the page output where
        # it stopped. A read cache command applied in the same cycle (stage 2 lags its strobe by
        # a cycle, so an RE# edge before the command can meet it) restarts the column: it wins.
        with m.If(self.dout & (out_mode != OutMode.STATUS)
                  & ~act["rcache_seq"] & ~act["rcache_end"]):
            m.d.comb += [col_next.eq(col + 1), col_step.eq(1)]

        # ---- Counters -------------------------------------------------------------------------

        limit = (1 << len(self.inc[0])) - 1
        for c in EmuCounter:
            if incs[c]:
                most = len(incs[c]) * ((1 << pages_w) - 1)
                assert most <= limit, f"{c.name}: {most} per cycle exceeds the increment width"
                # Registered (the counts lag by a cycle, and the decoder's paths end here) and
                # reset-less like the counters: a logic reset loses no increment.
                reg = Signal(len(self.inc[c]), name=f"inc_{c.name.lower()}", reset_less=True)
                m.d.sync += reg.eq(
                    sum(functools.reduce(operator.or_, sigs) for sigs in incs[c].values()))
                m.d.comb += self.inc[c].eq(reg)
        return m

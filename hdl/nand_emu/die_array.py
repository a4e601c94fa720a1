"""An emulated die's array state: the page state of every block (the NAND rules) and storage.

Part of the :class:`~.fsm.Die`.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import config_layout
from .params import Storage

__all__ = ["ArrayState"]


class ArrayState(wiring.Component):
    """The die's array: the page state of every block, the rules it answers, and the data.

    **Page state.** One word per block holds how many pages have been programmed since the
    erase: the sequential-program rule makes this the whole page state. Two read ports answer
    for the row being confirmed (``rule_*``: is its block bad, is the page the block's next
    one, was it programmed) and for the row being read out (``out_*``: is its block bad, is the
    page erased); a confirm the rules accept writes the block's word (``accept_program``,
    ``accept_erase``).

    **Storage.** With :attr:`Storage.ARRAY` the pages' bytes are kept: data-in cycles write the
    page buffer of the row's plane (``buf_write``), and a program's busy period copies the
    buffers of the rows queued (``mp_rows``) into the array, one byte per cycle (the *copy
    engine*: ``copy_start``, ``copy_busy``, ``copy_abort``); data output reads the array. With
    :attr:`Storage.TIMING` a page reads as a pattern of its row and column.

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    cfg : In(config_layout)
        Run-time configuration (the bad-block list).
    row : In(row_bits)
        The row of the command being assembled (its rules).
    out_row, out_row_next : In(row_bits)
        The page the data output reads, and what it becomes at the end of the cycle.
    col, col_next : In(col_bits)
        The column, and what it becomes at the end of the cycle.
    col_stepped : In(1)
        The column moved to the next byte in the previous cycle (see the command decoder).
    byte : In(8)
        The bus byte of a data-in cycle.
    buf_write : In(1)
        Write ``byte`` to the page buffer at ``col`` (with :attr:`Storage.ARRAY`).
    accept_program, accept_erase : In(1)
        Strobes: a program of the page of ``row`` (it is the block's last programmed page
        now), an erase of its block (no page programmed), accepted.
    mp_rows : In(ArrayLayout(row_bits, planes))
        The rows of the operation (the multi-plane queue): the pages the copy engine copies.
    op_pages : In(plane_bits + 1)
        How many of them.
    copy_start, copy_abort : In(1)
        Strobes: start the copy engine (a program's busy period); stop it (a reset).
    rule_bad, rule_next_page, rule_programmed : Out(1)
        The rules of ``row`` (registered: see the comments).
    out_bad, out_erased : Out(1)
        The block of ``out_row`` is bad; its page is erased.
    page_byte : Out(8)
        The page byte at the column (stored or the pattern).
    copy_busy : Out(1)
        The copy engine is writing the array.
    """

    def __init__(self, params):
        self.params = params
        pages_w = params.plane_bits + 1
        col_w = max(params.col_bits, 10)
        super().__init__({
            "cfg": In(config_layout(params)),
            "row": In(params.row_bits),
            "out_row": In(params.row_bits),
            "out_row_next": In(params.row_bits),
            "col": In(col_w),
            "col_next": In(col_w),
            "col_stepped": In(1),
            "byte": In(8),
            "buf_write": In(1),
            "accept_program": In(1),
            "accept_erase": In(1),
            "mp_rows": In(data.ArrayLayout(params.row_bits, params.planes)),
            "op_pages": In(pages_w),
            "copy_start": In(1),
            "copy_abort": In(1),
            "rule_bad": Out(1),
            "rule_next_page": Out(1),
            "rule_programmed": Out(1),
            "out_bad": Out(1),
            "out_erased": Out(1),
            "page_byte": Out(8),
            "copy_busy": Out(1),
        })

    def _block_of(self, row):
        p = self.params
        return row[p.page_bits:p.page_bits + p.block_bits]

    def _page_of(self, row):
        return row[:self.params.page_bits]

    def elaborate(self, platform):
        m = Module()
        self._page_state(m)
        if self.params.storage == Storage.ARRAY:
            self._array_storage(m)
        else:
            self._pattern_storage(m)
        return m

    def _page_state(self, m):
        """The page state RAM (one word per block) and the rules read from it."""
        p = self.params
        cfg = self.cfg
        block_of, page_of = self._block_of, self._page_of
        row, out_row = self.row, self.out_row

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
        out_erased = Signal()
        m.d.comb += [self.rule_bad.eq(rule_bad), self.rule_next_page.eq(rule_next_page),
                     self.rule_programmed.eq(rule_programmed), self.out_erased.eq(out_erased)]
        # Only an equality (two LUT levels) sits behind the rule port's output. The orderings,
        # which need a carry chain, compare registered copies of the data a cycle later:
        # `rule_programmed` only picks which refusal a refused program is counted as (a cycle
        # later too, see the command decoder's `refuse`), and `out_erased` serves data output,
        # long after tR. The equality is registered in two halves (each a LUT level or two
        # behind the RAM's output) and their AND formed from the flip-flops: the whole
        # comparison in front of the register had reached five LUT levels on the ECP5
        # (`docs/benchmarks.md`).
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
        m.d.comb += self.out_bad.eq(is_bad(block_of(out_row)))

        # A confirm the rules accept: the block's word is the page programmed (its number
        # plus one), or 0 after an erase.
        with m.If(self.accept_program):
            m.d.comb += [bs_wr.addr.eq(rule_block), bs_wr.en.eq(1),
                         bs_wr.data.eq(rule_page + 1)]
        with m.If(self.accept_erase):
            m.d.comb += [bs_wr.addr.eq(rule_block), bs_wr.en.eq(1), bs_wr.data.eq(0)]

    def _array_storage(self, m):
        """Storage.ARRAY: the array, the page buffers, the copy engine."""
        p = self.params
        total = p.page_total
        pages_w = p.plane_bits + 1
        block_of = self._block_of
        mp_rows = Array(self.mp_rows[i] for i in range(p.planes))
        m.submodules.array = array = Memory(shape=8, depth=p.pages * total, init=[])
        m.submodules.pbuf = pbuf = Memory(shape=8, depth=p.planes * total, init=[])
        arr_rd = array.read_port()
        arr_wr = array.write_port()
        buf_wr = pbuf.write_port()
        buf_rd = pbuf.read_port()
        m.d.comb += [
            arr_rd.addr.eq(self.out_row_next * total + self.col_next[:p.col_bits]),
            self.page_byte.eq(arr_rd.data),
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
            self.copy_busy.eq((copy_k < copy_n) | w_valid),
        ]
        m.d.sync += w_valid.eq(0)
        with m.If(self.copy_start):
            m.d.sync += [copy_k.eq(0), copy_col.eq(0), copy_n.eq(self.op_pages)]
        with m.Elif(copy_k < copy_n):
            m.d.sync += [w_valid.eq(1), w_addr.eq(cur * total + copy_col)]
            with m.If(copy_col == total - 1):
                m.d.sync += [copy_col.eq(0), copy_k.eq(copy_k + 1)]
            with m.Else():
                m.d.sync += copy_col.eq(copy_col + 1)
        with m.If(self.copy_abort):
            m.d.sync += [copy_n.eq(0), w_valid.eq(0)]
        # Data-in cycles fill the page buffer of the row's plane.
        with m.If(self.buf_write):
            plane = block_of(self.row)[:p.plane_bits] if p.plane_bits else Const(0)
            m.d.comb += [buf_wr.addr.eq(plane * total + self.col[:p.col_bits]),
                         buf_wr.data.eq(self.byte),
                         buf_wr.en.eq(self.col < total)]

    def _pattern_storage(self, m):
        """Storage.TIMING: a page reads as a pattern of its row and column."""
        p = self.params
        out_row = self.out_row

        def pattern(c):
            c = c[:p.col_bits]
            return (c ^ (c >> 8) ^ out_row ^ (out_row >> 8) ^ (out_row >> 16) ^ 0xA5)[:8]
        # The pattern of the column and of the next one, from registers (no decoding in
        # front of them; see the command decoder's `col_stepped`).
        at_col = Signal(8)
        at_next = Signal(8)
        m.d.sync += [at_col.eq(pattern(self.col)), at_next.eq(pattern(self.col + 1))]
        m.d.comb += self.page_byte.eq(Mux(self.col_stepped, at_next, at_col))

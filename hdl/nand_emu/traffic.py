"""The on-chip traffic generator: an ONFI host small enough to sit beside the emulated dies.

It lets a board with no SSD and no external controller exercise its emulated dies (and the
loopback sniffer): programs across the pages of a block group, reads in between, an erase, in
loops. See :class:`~.params.TrafficConfig` for the exact sequence.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from rbscope.nand.onfi import Opcode

from .layouts import traffic_layout, traffic_status_layout
from .params import EmuParams

__all__ = ["TrafficGenerator", "Step"]


class Step(enum.Enum, shape=3):
    """One die operation of the sequence."""

    PROG_Q = 0  # 80h … 11h (multi-plane queue)
    PROG = 1  # 80h … 10h
    READ = 2  # 00h … 30h
    ERASE_Q = 3  # 60h … D1h
    ERASE = 4  # 60h … D0h


class _Stage(enum.Enum, shape=2):
    PROGRAM = 0
    READS = 1
    ERASE = 2


class TrafficGenerator(wiring.Component):
    """Drive the ONFI bus of a :class:`~.emulator.NandEmulator` with a programmed workload.

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    cfg : In(traffic_layout)
        The workload (read when ``start`` is strobed and while running).
    start : In(1)
        Strobe: start from the beginning (ignored while running).
    stop : In(1)
        Strobe: stop after the current step (the dies finish their operations).
    rb : In(dies)
        The dies' R/B# levels.
    ce_n, cle, ale, we_n, re_n, wp_n, io : Out
        The bus (``re_n`` and ``wp_n`` stay high).
    status : Out(traffic_status_layout)
        ``busy`` while running; ``steps`` die operations issued since reset.
    """

    def __init__(self, params):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        self.params = params
        n = params.dies
        super().__init__({
            "cfg": In(traffic_layout(params)), "start": In(1), "stop": In(1),
            "rb": In(n, init=(1 << n) - 1),
            "ce_n": Out(n, init=(1 << n) - 1), "cle": Out(1), "ale": Out(1),
            "we_n": Out(1, init=1), "re_n": Out(1, init=1), "wp_n": Out(1, init=1),
            "io": Out(8),
            "status": Out(traffic_status_layout(params)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        cfg = self.cfg
        n = p.dies

        loop = Signal(16)
        group = Signal(p.block_bits + 1)
        page = Signal(p.page_bits + 1)
        reads = Signal(8)
        # The page's reads end with the next one: registered (a step follows the previous one
        # by at least an operation's busy time), so that the carry chain of the comparison
        # reaches none of the step's enables.
        reads_last = Signal()
        m.d.sync += reads_last.eq(reads + 1 >= cfg.reads)
        plane = Signal(range(p.planes))
        stage = Signal(_Stage)
        kind = Signal(Step)
        die = Signal(range(n + 1))
        index = Signal(3)  # byte of the step's sequence
        half = Signal()  # 0: WE# low, 1: WE# high
        cnt = Signal(8)
        stopping = Signal()

        mp = cfg.multi_plane if p.planes > 1 else Const(0)
        block = Signal(p.block_bits)
        m.d.comb += block.eq(Mux(mp, cfg.first_block + group * p.planes + plane,
                                 cfg.first_block + group))
        page_now = Mux((kind == Step.ERASE) | (kind == Step.ERASE_Q), 0, page)
        row = Signal(24)
        m.d.comb += row.eq(Cat(page_now[:p.page_bits], block))
        erase_like = (kind == Step.ERASE) | (kind == Step.ERASE_Q)

        # The step's bus cycles: (is_command, byte), `last` marks the confirm.
        first = Mux(erase_like, Opcode.ERASE, Mux(kind == Step.READ, Opcode.READ, Opcode.PROGRAM))
        # Cache programs: 15h for every page of the block but its last, which ends with 10h.
        program_confirm = Mux(cfg.cache & (page + 1 < cfg.pages), Opcode.PROGRAM_CACHE,
                              Opcode.PROGRAM_CONFIRM)
        confirm = Array([Const(Opcode.PROGRAM_MP_CONFIRM, 8), program_confirm,
                         Const(Opcode.READ_CONFIRM, 8), Const(Opcode.ERASE_MP_CONFIRM, 8),
                         Const(Opcode.ERASE_CONFIRM, 8)])[kind]
        seq_len = Mux(erase_like, 5, 7)
        addr_bytes = Mux(erase_like,
                         Array([row[0:8], row[8:16], row[16:24]])[index - 1],
                         Array([Const(0, 8), Const(0, 8), row[0:8], row[8:16], row[16:24],
                                Const(0, 8)])[index - 1])
        is_cmd = (index == 0) | (index == seq_len - 1)
        byte = Mux(index == 0, first, Mux(index == seq_len - 1, confirm, addr_bytes))

        enabled = cfg.dies
        die_on = Signal()
        m.d.comb += die_on.eq(Array(enabled[i] for i in range(n))[die[:max(1, (n - 1)
                                                                            .bit_length())]]
                              & (die < n))
        ready = ((self.rb | ~enabled) == (1 << n) - 1)

        ce_mask = Signal(n)
        m.d.comb += ce_mask.eq(~(Const(1, n) << die[:max(1, (n - 1).bit_length())]))
        with m.If(self.stop):
            m.d.sync += stopping.eq(1)

        def next_step():
            """Choose the step after the one just completed (all dies ready)."""
            last_plane = Mux(mp, plane == p.planes - 1, 1)
            advance_group = Signal(name="advance_group")
            advance_page = Signal(name="advance_page")
            with m.Switch(stage):
                with m.Case(_Stage.PROGRAM):
                    with m.If(~last_plane):
                        m.d.sync += plane.eq(plane + 1)
                    with m.Elif(cfg.reads != 0):
                        m.d.sync += [plane.eq(0), stage.eq(_Stage.READS), reads.eq(0)]
                    with m.Else():
                        m.d.sync += plane.eq(0)
                        m.d.comb += advance_page.eq(1)
                with m.Case(_Stage.READS):
                    m.d.sync += reads.eq(reads + 1)
                    with m.If(reads_last):
                        m.d.comb += advance_page.eq(1)
                with m.Case(_Stage.ERASE):
                    with m.If(~last_plane):
                        m.d.sync += plane.eq(plane + 1)
                    with m.Else():
                        m.d.sync += plane.eq(0)
                        m.d.comb += advance_group.eq(1)
            with m.If(advance_page):
                m.d.sync += [page.eq(page + 1), stage.eq(_Stage.PROGRAM)]
                with m.If(page + 1 >= cfg.pages):
                    with m.If(cfg.erase):
                        m.d.sync += stage.eq(_Stage.ERASE)
                    with m.Else():
                        m.d.comb += advance_group.eq(1)
            with m.If(advance_group):
                # An erase-only programme (no pages) erases every group, not just the first.
                m.d.sync += [group.eq(group + 1), page.eq(0),
                             stage.eq(Mux(cfg.pages == 0, _Stage.ERASE, _Stage.PROGRAM))]
                with m.If(group + 1 >= cfg.blocks):
                    m.d.sync += [group.eq(0), loop.eq(loop + 1)]
                    with m.If((cfg.loops != 0) & (loop + 1 >= cfg.loops)):
                        m.d.sync += stopping.eq(1)

        with m.Switch(stage):
            with m.Case(_Stage.PROGRAM):
                m.d.comb += kind.eq(Mux(mp & (plane != p.planes - 1), Step.PROG_Q, Step.PROG))
            with m.Case(_Stage.READS):
                m.d.comb += kind.eq(Step.READ)
            with m.Case(_Stage.ERASE):
                m.d.comb += kind.eq(Mux(mp & (plane != p.planes - 1), Step.ERASE_Q, Step.ERASE))

        steps = self.status.steps
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [loop.eq(0), group.eq(0), page.eq(0), plane.eq(0), reads.eq(0),
                                 stage.eq(Mux(cfg.pages == 0, _Stage.ERASE, _Stage.PROGRAM)),
                                 stopping.eq((cfg.blocks == 0) | (cfg.pages == 0) & ~cfg.erase),
                                 die.eq(0)]
                    m.next = "CHECK"
            with m.State("CHECK"):  # start the next step, or finish
                m.d.comb += self.status.busy.eq(1)
                with m.If(stopping):
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [die.eq(0), index.eq(0), half.eq(0), cnt.eq(0)]
                    m.next = "ISSUE"
            with m.State("ISSUE"):  # one die at a time, every enabled die
                m.d.comb += self.status.busy.eq(1)
                with m.If(die >= n):
                    m.d.sync += cnt.eq(0)
                    m.next = "WB"
                with m.Elif(~die_on):
                    m.d.sync += die.eq(die + 1)
                with m.Else():
                    m.d.comb += [self.ce_n.eq(ce_mask), self.cle.eq(is_cmd),
                                 self.ale.eq(~is_cmd), self.io.eq(byte),
                                 self.we_n.eq(half)]
                    m.d.sync += cnt.eq(cnt + 1)
                    with m.If(cnt + 1 >= cfg.phase_cycles):
                        m.d.sync += [cnt.eq(0), half.eq(~half)]
                        with m.If(half):
                            m.d.sync += index.eq(index + 1)
                            with m.If(index == seq_len - 1):
                                m.d.sync += [index.eq(0), die.eq(die + 1), steps.eq(steps + 1)]
            with m.State("WB"):  # tWB: R/B# is not valid yet
                m.d.comb += self.status.busy.eq(1)
                m.d.sync += cnt.eq(cnt + 1)
                with m.If(cnt + 1 >= cfg.wb_wait):
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += self.status.busy.eq(1)
                with m.If(ready):
                    next_step()
                    m.next = "CHECK"
        return m

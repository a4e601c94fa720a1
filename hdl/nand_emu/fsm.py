"""One emulated die (LUN): command decoder, timing engine, status register, NAND rules, storage.

The exact behaviour, its deviations from ONFI and the reasons are in ``docs/nand_emu.md``.

:class:`Die` joins its blocks, each a component in its own module:

* :class:`~.die_decoder.DieDecoder` (``die_decoder.py``): the command decoder (commands in two
  stages, address and data cycles, the multi-plane queue, the NAND rules' verdicts);
* :class:`~.die_timing.TimingEngine` (``die_timing.py``): tWB, the busy periods and R/B#, the
  background program of a cache program; :class:`~.die_timing.PageTypes` (same module): the
  page types that set tPROG;
* :class:`~.die_array.ArrayState` (``die_array.py``): the page state of every block (the NAND
  rules) and the storage (the array and page buffers, or the timing-only pattern);
* :class:`~.die_output.DataOutput` (``die_output.py``): what an RE# cycle reads.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .counters import inc_bits
from .die_array import ArrayState
from .die_common import Op, Opcode, OutMode, Phase
from .die_decoder import DieDecoder
from .die_output import DataOutput
from .die_timing import PageTypes, TimingEngine
from .layouts import config_layout, page_type_words, page_type_write_layout
from .params import EmuCounter, EmuParams

__all__ = ["Die", "Opcode", "OutMode", "Phase", "Op"]


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

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.decoder = decoder = DieDecoder(p)
        m.submodules.timing = timing = TimingEngine(p, self.index)
        m.submodules.array_state = array = ArrayState(p)
        m.submodules.page_types = page_types = PageTypes(p)
        m.submodules.output = output = DataOutput(p)

        # The bus, into the command decoder.
        m.d.comb += [
            decoder.cmd.eq(self.cmd), decoder.addr.eq(self.addr), decoder.din.eq(self.din),
            decoder.dout.eq(self.dout), decoder.byte.eq(self.byte), decoder.wp.eq(self.wp),
        ]
        # The decoder starts operations on the timing engine.
        m.d.comb += [
            timing.cfg.eq(self.cfg),
            timing.req.eq(decoder.req), timing.req_op.eq(decoder.req_op),
            timing.req_time.eq(decoder.req_time), timing.req_pages.eq(decoder.req_pages),
            timing.req_row.eq(decoder.req_row), timing.reset_cmd.eq(decoder.reset_cmd),
            decoder.rdy.eq(timing.rdy), decoder.ardy.eq(timing.ardy),
            decoder.read_done.eq(timing.read_done),
        ]
        # The page types of the row being confirmed and of the operation's final page.
        m.d.comb += [
            page_types.cfg.eq(self.cfg),
            page_types.array_row.eq(timing.op_row), timing.array_type.eq(page_types.array_type),
            page_types.prog_row.eq(decoder.row), decoder.prog_type.eq(page_types.prog_type),
        ]
        if page_type_words(p):
            m.d.comb += page_types.page_types_w.eq(self.page_types_w)
        # The array state: the rules of the decoder's row, its writes, the copy engine.
        m.d.comb += [
            array.cfg.eq(self.cfg),
            array.row.eq(decoder.row), array.out_row.eq(decoder.out_row),
            array.out_row_next.eq(decoder.out_row_next),
            array.col.eq(decoder.col), array.col_next.eq(decoder.col_next),
            array.col_stepped.eq(decoder.col_stepped),
            array.byte.eq(self.byte), array.buf_write.eq(decoder.buf_write),
            array.accept_program.eq(decoder.accept_program),
            array.accept_erase.eq(decoder.accept_erase),
            array.mp_rows.eq(decoder.mp_rows), array.op_pages.eq(timing.op_pages),
            array.copy_start.eq(timing.copy_start), array.copy_abort.eq(timing.copy_abort),
            timing.copy_busy.eq(array.copy_busy),
            decoder.rule_bad.eq(array.rule_bad), decoder.rule_next_page.eq(array.rule_next_page),
            decoder.rule_programmed.eq(array.rule_programmed),
        ]
        # The status register and R/B#.
        m.d.comb += [
            self.status.eq(Cat(decoder.fail, decoder.failc, Const(0, 3), timing.ardy,
                               timing.rdy, self.wp)),
            self.rb_low.eq(timing.pin_low),
        ]
        # Data output.
        m.d.comb += [
            output.out_mode.eq(decoder.out_mode), output.status.eq(self.status),
            output.col.eq(decoder.col), output.col_stepped.eq(decoder.col_stepped),
            output.id_sel.eq(decoder.id_sel), output.feat_addr.eq(decoder.feat_addr),
            output.features.eq(decoder.features), output.page_byte.eq(array.page_byte),
            output.out_bad.eq(array.out_bad), output.out_erased.eq(array.out_erased),
            self.data_out.eq(output.data_out), self.data_out_en.eq(output.data_out_en),
        ]

        # Counter increments by source group: completions (``done``), the background program
        # (``array``), command strobes (``cmd``). The increments of one group are mutually
        # exclusive, so a group's increments are OR-ed (in its block); the groups' are added.
        groups = [timing.inc_done, timing.inc_array, timing.inc_cmd, decoder.inc_cmd]
        pages_w = p.plane_bits + 1
        limit = (1 << len(self.inc[0])) - 1
        for c in EmuCounter:
            terms = [port[c.name.lower()] for port in groups
                     if c.name.lower() in port.shape().members]
            if terms:
                most = len(terms) * ((1 << pages_w) - 1)
                assert most <= limit, f"{c.name}: {most} per cycle exceeds the increment width"
                # Registered (the counts lag by a cycle, and the decoder's paths end here) and
                # reset-less like the counters: a logic reset loses no increment.
                reg = Signal(len(self.inc[c]), name=f"inc_{c.name.lower()}", reset_less=True)
                m.d.sync += reg.eq(sum(terms))
                m.d.comb += self.inc[c].eq(reg)
        return m

"""The NAND emulator: a bus front end, ``dies`` emulated dies and the ground-truth read port."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .bus import BusFrontEnd
from .counters import CounterBank
from .fsm import Die
from .layouts import (
    bus_signature_members,
    config_layout,
    page_type_words,
    page_type_write_layout,
    read_request_layout,
)
from .params import PAGE_TYPE_WORD, EmuParams

__all__ = ["NandEmulator"]


class NandEmulator(wiring.Component):
    """Emulate ``dies`` ONFI dies (one LUN per CE#) on one asynchronous SDR bus.

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    ce_n : In(dies)
        Chip enables, one per die (active low).
    cle, ale, we_n, re_n, wp_n : In(1)
        Bus controls (asynchronous to the clock).
    io_i : In(8)
        IO as driven by the host.
    io_o : Out(8)
        IO as driven by the selected die.
    io_oe : Out(1)
        The selected die drives IO: CE# and RE# low while the die has data to output.
        Combinational from the (unsynchronised) CE#/RE# pins, so the byte appears within pad
        delays of RE# falling; ``io_o`` itself is registered and never changes while RE# is low.
    rb : Out(rb_count)
        R/B# levels (1 = ready): one per die, or one wired-OR line with ``rb_wired``.
    rb_oe : Out(rb_count)
        The open-drain pull-down enables (``~rb``), for an ``io.Buffer`` with output 0.
    die_rb : Out(dies)
        Each die's own R/B# level, whatever the wiring (loopback and debugging).
    cfg : In(config_layout)
        Run-time configuration. A page-type map of more than ``PAGE_TYPE_WORD`` entries is
        copied into every die's page-type RAM one word per cycle, round robin: a change of
        ``cfg.page_types`` reaches the dies within ``page_type_slots / PAGE_TYPE_WORD + 2``
        cycles (so does the first map after power-up: the RAMs start at type 0).
    read_req : In(stream.Signature(read_request_layout))
        Requests to read one ground-truth counter (``die``, ``index`` an :class:`EmuCounter`).
        ``ready`` rises when the counter bank's scanner writes that counter back: within
        ``dies * 16 + 3`` cycles.
    read_resp : Out(stream.Signature(counter_bits))
        The counter values, one per request, in order: each is the exact count of every
        operation counted up to two cycles before its request was accepted.
    """

    def __init__(self, params):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        self.params = params
        n = params.dies
        super().__init__({
            **bus_signature_members(params),
            "rb_oe": Out(params.rb_count),
            "die_rb": Out(n, init=(1 << n) - 1),
            "cfg": In(config_layout(params)),
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.dies
        m.submodules.bus = bus = BusFrontEnd(n)
        m.d.comb += [
            bus.ce_n.eq(self.ce_n), bus.cle.eq(self.cle), bus.ale.eq(self.ale),
            bus.we_n.eq(self.we_n), bus.re_n.eq(self.re_n), bus.wp_n.eq(self.wp_n),
            bus.io.eq(self.io_i),
        ]
        # The page-type map's copy in the dies' RAMs: one word per cycle, round robin, through
        # one shared multiplexer (a register stage on each side of it).
        words = page_type_words(p)
        if words:
            scan = Signal(range(words))
            write = Signal(page_type_write_layout(p))
            m.d.sync += scan.eq(Mux(scan == words - 1, 0, scan + 1))
            entries = self.cfg.page_types.as_value()
            word_bits = 2 * PAGE_TYPE_WORD
            m.d.sync += [write.addr.eq(scan),
                         write.data.eq(Array(entries[i * word_bits:(i + 1) * word_bits]
                                             for i in range(words))[scan])]
        dies = []
        for i in range(n):
            die = Die(p, i)
            m.submodules[f"die{i}"] = die
            sel = bus.sel[i]
            m.d.comb += [
                die.cmd.eq(bus.cmd & sel), die.addr.eq(bus.addr & sel),
                die.din.eq(bus.din & sel), die.dout.eq(bus.dout & sel),
                die.byte.eq(bus.byte), die.wp.eq(bus.wp), die.cfg.eq(self.cfg),
            ]
            if words:
                m.d.comb += die.page_types_w.eq(write)
            dies.append(die)

        lows = Cat(die.rb_low for die in dies)
        m.d.comb += self.die_rb.eq(~lows)
        if p.rb_wired:
            m.d.comb += self.rb_oe.eq(lows.any())
        else:
            m.d.comb += self.rb_oe.eq(lows)
        m.d.comb += self.rb.eq(~self.rb_oe)

        # IO output: the die whose CE# is low (lowest index if the host selects several).
        sel = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(~self.ce_n[i]):
                m.d.comb += sel.eq(i)
        outs = Array(die.data_out for die in dies)
        m.d.comb += [
            self.io_o.eq(outs[sel]),
            # Directly from the pins (no synchroniser): only an output enable, so a glitch at
            # a CE#/RE# edge is harmless, and the byte is out within pad delays (tREA).
            self.io_oe.eq(~self.ce_n.all() & ~self.re_n & ~self.cle & ~self.ale
                          & Array(die.data_out_en for die in dies)[sel]),
        ]

        # Ground truth: every die's counters in one RAM with one shared adder.
        m.submodules.counters = bank = CounterBank(p)
        for i, die in enumerate(dies):
            m.d.comb += bank.inc[i].eq(die.inc)
        wiring.connect(m, wiring.flipped(self.read_req), bank.read_req)
        wiring.connect(m, bank.read_resp, wiring.flipped(self.read_resp))
        return m

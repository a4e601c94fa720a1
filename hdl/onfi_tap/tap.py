"""The ONFI bus tap: label every busy pulse of a channel's dies with the command that started it.

The tap only listens: every bus pin is an input. It decodes bus cycles exactly as the emulator's
front end does (:class:`~rbscope.gateware.nand_emu.bus.BusFrontEnd`: two-flip-flop synchronisers,
the byte of a cycle taken from the last sample with WE# still low), follows the addressed LUN of
each target, and keeps

* a *tag* per die: the class (:class:`~.params.OpClass`) of the last busy-starting command sent to
  it, captured into ``pulse_tag`` when the die's R/B# falls (for the sniffer's optional tag input);
* counters of confirm commands per die and class, and of final confirms per plane count;
* from the sniffer's trace, the measured pulses per die and class and a width histogram per class.

See ``docs/opcode_tap.md`` for the exact semantics and the interface modes this supports.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rbscope.nand.onfi import Opcode

from ..nand_emu.bus import BusFrontEnd
from ..rb_sniffer.blocks import LogBinner
from ..rb_sniffer.params import EventKind
from ..rb_sniffer.sniffer import TraceSignature
from .params import (
    _RECORD_ARMED,
    _RECORD_CELLS,
    _RECORD_FILL,
    _RECORD_ON,
    _RECORD_VALID,
    CLASS_SLOTS,
    CONFIRM_CLASS,
    MAX_PLANES,
    TARGET_CLASSES,
    OpClass,
    PlaneKind,
    RecordKind,
    TapParams,
    TapSpace,
)

__all__ = ["CounterBank", "OnfiTap", "config_const", "config_layout", "read_request_layout"]


def _check(params):
    if not isinstance(params, TapParams):
        raise TypeError(f"Tap parameters must be a TapParams, not {params!r}")
    return params


def _in_range(value, lo, hi):
    """``lo <= value < hi`` for an unsigned ``value``, without the bounds that always hold.

    A compare with an end the value's width already implies (``value >= 0``, ``value < 2**n``)
    is constant; Verilator's default lint stops on it (``UNSIGNED``, ``CMPCONST``), so it is left
    out rather than waived.
    """
    terms = []
    if lo > 0:
        terms.append(value >= lo)
    if hi < 1 << len(value):
        terms.append(value < hi)
    if not terms:
        return Const(1, 1)
    return terms[0] & terms[1] if len(terms) == 2 else terms[0]


def config_layout(params):
    """Run-time configuration of the tap (see :class:`~.params.TapConfig`)."""
    _check(params)
    return data.StructLayout({"lun_shift": 5, "sniffer_tags": data.ArrayLayout(4, CLASS_SLOTS)})


def config_const(params, config):
    """Pack a :class:`~.params.TapConfig` into the integer value of :func:`config_layout`."""
    config = config.validate(params)
    return config_layout(params).const({
        "lun_shift": config.lun_shift, "sniffer_tags": config.tag_table(),
    }).as_value().value


def read_request_layout(params):
    """A read of one counter word: ``space`` and ``index`` (see :class:`~.params.TapSpace`)."""
    _check(params)
    return data.StructLayout({"space": TapSpace, "index": params.index_bits})


class CounterBank(wiring.Component):
    """A RAM of counters with one read-modify-write update per cycle and a read port.

    Four pipeline stages (registered update, address, registered RAM data, add and write) keep
    the update's source logic out of the RAM's address path and the RAM's output out of the
    adder's; the two writes still in flight are forwarded to a later update of the same word. A
    read is an update that adds zero and answers with the value.

    Parameters
    ----------
    depth : int
        Counter words (power of two).
    width : int
        Bits per counter (counters wrap).
    inc_bits : int
        Bits of an increment.

    Members
    -------
    upd_valid, upd_addr, upd_inc : In
        Add ``upd_inc`` to word ``upd_addr`` (one per cycle, back to back allowed).
    rd_req : In(stream.Signature(addr))
        Read requests; accepted in cycles without an update.
    rd_resp : Out(stream.Signature(width))
        The word read, one per request (three cycles after it is taken).
    """

    def __init__(self, depth, width, inc_bits=1):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        self.depth, self.width = depth, width
        abits = (depth - 1).bit_length()
        super().__init__({
            "upd_valid": In(1), "upd_addr": In(abits), "upd_inc": In(inc_bits),
            "rd_req": In(stream.Signature(abits)),
            "rd_resp": Out(stream.Signature(width)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        abits = len(self.upd_addr)
        pending = Signal(2)  # reads in the pipeline (at most one at a time)
        # Input stage: the update is registered first (the decoder's logic stays out of the
        # RAM's address path).
        i_valid = Signal()
        i_addr, i_inc = Signal(abits), Signal.like(self.upd_inc)
        m.d.sync += [i_valid.eq(self.upd_valid), i_addr.eq(self.upd_addr),
                     i_inc.eq(self.upd_inc)]
        take = self.rd_req.valid & ~i_valid & ~self.rd_resp.valid & (pending == 0)
        m.d.comb += self.rd_req.ready.eq(take)

        # Stage A: address the RAM.
        a_valid, a_read = Signal(), Signal()
        a_addr, a_inc = Signal(abits), Signal.like(self.upd_inc)
        m.d.comb += rd.addr.eq(Mux(i_valid, i_addr, self.rd_req.payload))
        m.d.sync += [
            a_valid.eq(i_valid | take), a_read.eq(take),
            a_addr.eq(rd.addr), a_inc.eq(Mux(i_valid, i_inc, 0)),
        ]
        with m.If(take):
            m.d.sync += pending.eq(1)
        # Stage B: the RAM's data, registered.
        b_valid, b_read = Signal(), Signal()
        b_addr, b_inc = Signal(abits), Signal.like(self.upd_inc)
        b_data = Signal(self.width)

        # Stage C (next): add and write. The RAM read of this word missed the writes of the
        # cycle it was read in and of the next one; which of them hit the word is decided here,
        # a cycle ahead, so that no comparator sits before the adder.
        w1_valid, w1_addr = Signal(), Signal(abits)
        w1_data, w2_data = Signal(self.width), Signal(self.width)
        use_w1, use_w2 = Signal(), Signal()
        m.d.sync += [
            b_valid.eq(a_valid), b_read.eq(a_read), b_addr.eq(a_addr), b_inc.eq(a_inc),
            b_data.eq(rd.data),
            # The write now (stage C) is w1 next cycle; the write of last cycle becomes w2.
            use_w1.eq(b_valid & (b_addr == a_addr)),
            use_w2.eq(w1_valid & (w1_addr == a_addr)),
        ]
        old = Signal(self.width)
        with m.If(use_w1):
            m.d.comb += old.eq(w1_data)
        with m.Elif(use_w2):
            m.d.comb += old.eq(w2_data)
        with m.Else():
            m.d.comb += old.eq(b_data)
        new = Signal(self.width)
        m.d.comb += [
            new.eq(old + b_inc),
            wr.addr.eq(b_addr), wr.data.eq(new), wr.en.eq(b_valid),
        ]
        m.d.sync += [
            w1_valid.eq(b_valid), w1_addr.eq(b_addr), w1_data.eq(new),
            w2_data.eq(w1_data),
        ]
        with m.If(b_valid & b_read):
            m.d.sync += [self.rd_resp.valid.eq(1), self.rd_resp.payload.eq(old), pending.eq(0)]
        with m.Elif(self.rd_resp.ready):
            m.d.sync += self.rd_resp.valid.eq(0)
        return m


class OnfiTap(wiring.Component):
    """Passive tap of one NAND channel's bus: opcode tags and counts per die.

    Parameters
    ----------
    params : TapParams

    Members
    -------
    ce_n : In(targets)
        CE# of each target (asynchronous).
    cle, ale, we_n, re_n : In(1)
        The control pins (asynchronous); RE# only for the power-up recorder's data-out cycles.
    io : In(8)
        DQ[7:0] (asynchronous).
    rb : In(dies)
        Each die's R/B# (the same pins the sniffer watches; 1 = ready).
    cfg : In(config_layout)
        Run-time configuration (``TapConfig``: ``lun_shift``, the row address bit of the LUN
        number; ``sniffer_tags``, the class to sniffer tag table).
    trace : In(TraceSignature(sniffer))
        The sniffer's trace: END records of the tap's channels are counted per class.
    tag : Out(ArrayLayout(OpClass, dies))
        Per die, the class of the last busy-starting command addressed to it.
    pulse_tag : Out(ArrayLayout(OpClass, dies))
        Per die, ``tag`` as it was when the die's synchronised R/B# last fell (the class of the
        pulse in progress or of the last one).
    sniffer_tag : Out(ArrayLayout(4, dies))
        Per die, ``cfg.sniffer_tags[tag]``: for the sniffer's optional per-channel tag input,
        which samples it at the first low cycle of a pulse (R/B# must fall at least two cycles
        after the confirm command's WE# rising edge, far less than tWB).
    read_req, read_resp : In(stream.Signature(read_request_layout)), Out(stream.Signature(...))
        Counter reads: a request ``{space, index}`` (``TapSpace``), then one response of
        ``counter_bits`` per request, in order. The ``RECORD`` space answers with the power-up
        recorder's cells (:func:`~.params.decode_record_word`; a zero word without a recorder).
    record : In(2)
        One-cycle strobes of the power-up recorder: :data:`~.params.RECORD_ARM` (forget the
        cells, wait for each target's next Reset), :data:`~.params.RECORD_START` (forget the
        cells, record every target from the next cycle).

    The power-up recorder (``params.record_cells`` > 0) keeps, per target, the bus cycles from
    the target's first Reset (FFh) after power-up or re-arming: commands, addresses, data in (on
    WE# rising edges) and data out (on RE# rising edges, DQ as it was in the last clock cycle
    with RE# low), each as a :class:`~.params.RecordKind` and its byte, until its
    ``record_cells`` cells are full. A cycle sent to several targets at once is kept by the
    lowest-numbered one.
    """

    def __init__(self, params):
        p = self.params = _check(params)
        super().__init__({
            "ce_n": In(p.targets, init=(1 << p.targets) - 1),
            "cle": In(1), "ale": In(1), "we_n": In(1, init=1), "re_n": In(1, init=1),
            "io": In(8),
            "rb": In(p.dies, init=(1 << p.dies) - 1),
            "cfg": In(config_layout(p)),
            "trace": In(TraceSignature(p.sniffer)),
            "tag": Out(data.ArrayLayout(OpClass, p.dies)),
            "pulse_tag": Out(data.ArrayLayout(OpClass, p.dies)),
            "sniffer_tag": Out(data.ArrayLayout(4, p.dies)),
            "read_req": In(stream.Signature(read_request_layout(p))),
            "read_resp": Out(stream.Signature(p.counter_bits)),
            "record": In(2),
        })

    def elaborate(self, platform):  # noqa: C901 (the decoder reads best in one place)
        m = Module()
        p = self.params
        nd, nl = p.dies, p.luns

        # ---- Bus cycles: the emulator's front end, so both latch the same bytes -------------
        # Its WP# input stays at its idle level: the tap never needs it; RE# gives the
        # recorder's data-out cycles.
        m.submodules.bus = bus = BusFrontEnd(p.targets)
        m.d.comb += [
            bus.ce_n.eq(self.ce_n), bus.cle.eq(self.cle), bus.ale.eq(self.ale),
            bus.we_n.eq(self.we_n), bus.re_n.eq(self.re_n), bus.io.eq(self.io),
        ]
        # One register stage between the front end and the decoder (timing); R/B# below gets
        # the same stage, so strobes and pulse starts keep their order cycle for cycle.
        cyc = Signal(data.StructLayout({"cmd": 1, "addr": 1, "din": 1, "dout": 1,
                                        "sel": p.targets, "byte": 8}))
        m.d.sync += [cyc.cmd.eq(bus.cmd), cyc.addr.eq(bus.addr), cyc.din.eq(bus.din),
                     cyc.dout.eq(bus.dout), cyc.sel.eq(bus.sel), cyc.byte.eq(bus.byte)]
        byte = cyc.byte

        # Decode the command byte once for all targets.
        is_conf = Signal()
        conf_class = Signal(OpClass)
        with m.Switch(byte):
            for opcode, op_class in CONFIRM_CLASS.items():
                with m.Case(opcode):
                    m.d.comb += [is_conf.eq(1), conf_class.eq(op_class)]
        target_wide = Signal()
        m.d.comb += target_wide.eq(Cat(conf_class == c for c in TARGET_CLASSES).any())

        # ---- Per die: tags and multi-plane queues -------------------------------------------

        tags = [Signal(OpClass, name=f"tag_{d}") for d in range(nd)]
        queued = [Signal(2, name=f"queued_{d}") for d in range(nd)]  # 11h since the last 10h/15h
        equeued = [Signal(2, name=f"equeued_{d}") for d in range(nd)]  # D1h since the last D0h
        for d in range(nd):
            m.d.comb += [self.tag[d].eq(tags[d]),
                         self.sniffer_tag[d].eq(self.cfg.sniffer_tags[tags[d]])]

        # Counter updates from the bus: at most one confirm per strobe is counted (a command
        # sent to several targets at once is counted on the lowest-numbered one).
        ops_valid = Signal()
        ops_addr = Signal((p.depth(TapSpace.OPS) - 1).bit_length())
        pl_valid = Signal()
        pl_addr = Signal((p.depth(TapSpace.PLANES) - 1).bit_length())

        for t in reversed(range(p.targets)):
            sel = cyc.sel[t]
            arun = Signal(2, name=f"arun_{t}")  # address cycles in a row (saturates at 3)
            abuf = Signal(24, name=f"abuf_{t}")  # the last three address bytes: a row address
            lun = Signal(range(nl), name=f"lun_{t}")  # the LUN last addressed
            lun_now = Signal(range(nl), name=f"lun_now_{t}")
            if nl > 1:
                row_lun = (abuf >> self.cfg.lun_shift)[:p.lun_bits]
                m.d.comb += lun_now.eq(Mux(arun == 3, row_lun, lun))
            with m.If(sel & cyc.addr):
                m.d.sync += [
                    arun.eq(Mux(arun == 3, 3, arun + 1)),
                    abuf.eq(Cat(abuf[8:], byte)),
                ]
            with m.If(sel & (cyc.cmd | cyc.din)):
                # A run of at least three address cycles ended: it carried a row address.
                m.d.sync += [arun.eq(0), lun.eq(lun_now)]
                if nl > 1:
                    with m.If(cyc.cmd & (byte == Opcode.SELECT_LUN0)):
                        m.d.sync += lun.eq(0)
                    with m.If(cyc.cmd & (byte == Opcode.SELECT_LUN1)):
                        m.d.sync += lun.eq(1)

            strobe = sel & cyc.cmd & is_conf
            for lun_i in range(nl):
                d = p.die(t, lun_i)
                hit = strobe & (target_wide | (lun_now == lun_i))
                with m.If(hit):
                    m.d.sync += tags[d].eq(conf_class)
                    with m.Switch(conf_class):
                        with m.Case(OpClass.MP_QUEUE):
                            m.d.sync += queued[d].eq(Mux(queued[d] == 3, 3, queued[d] + 1))
                        with m.Case(OpClass.PROGRAM, OpClass.CACHE_PROGRAM):
                            m.d.sync += queued[d].eq(0)
                        with m.Case(OpClass.ERASE_QUEUE):
                            m.d.sync += equeued[d].eq(Mux(equeued[d] == 3, 3, equeued[d] + 1))
                        with m.Case(OpClass.ERASE):
                            m.d.sync += equeued[d].eq(0)
                        with m.Case(OpClass.RESET):
                            m.d.sync += [queued[d].eq(0), equeued[d].eq(0)]
            # Counted once per target: target-wide commands on LUN 0.
            count_die = Signal(p.die_bits, name=f"count_die_{t}")
            m.d.comb += count_die.eq(t * nl + Mux(target_wide, 0, lun_now))
            with m.If(strobe):
                planes = Signal(range(MAX_PLANES), name=f"planes_{t}")  # planes - 1
                kind = Signal(PlaneKind, name=f"kind_{t}")
                m.d.comb += [
                    ops_valid.eq(1),
                    ops_addr.eq(Cat(conf_class, count_die)),
                    planes.eq(Array(queued)[count_die]),
                    kind.eq(PlaneKind.PROGRAM),
                ]
                with m.Switch(conf_class):
                    with m.Case(OpClass.PROGRAM):
                        m.d.comb += pl_valid.eq(1)
                    with m.Case(OpClass.CACHE_PROGRAM):
                        m.d.comb += [pl_valid.eq(1), kind.eq(PlaneKind.CACHE_PROGRAM)]
                    with m.Case(OpClass.ERASE):
                        m.d.comb += [pl_valid.eq(1), kind.eq(PlaneKind.ERASE),
                                     planes.eq(Array(equeued)[count_die])]
                m.d.comb += pl_addr.eq(Cat(planes, kind, count_die))

        # ---- R/B#: capture the tag at each pulse start, keep it for the pulse's END record ---

        lvl = Signal(nd, init=(1 << nd) - 1)
        # R/B# is asynchronous: the same two-flip-flop synchroniser as the sniffer's, so the tap
        # sees each pulse start and end on the very cycles the sniffer's front end does.
        m.submodules.rb_sync = FFSynchronizer(self.rb, lvl, init=(1 << nd) - 1)
        lvl_d = Signal(nd, init=(1 << nd) - 1)  # the decoder's register stage, for R/B#
        lvl_prev = Signal(nd, init=(1 << nd) - 1)
        m.d.sync += [lvl_d.eq(lvl), lvl_prev.eq(lvl_d)]
        lvl = lvl_d
        ended = [Signal(OpClass, name=f"ended_{d}") for d in range(nd)]
        for d in range(nd):
            with m.If(~lvl[d] & lvl_prev[d]):
                m.d.sync += self.pulse_tag[d].eq(tags[d])
            with m.If(lvl[d] & ~lvl_prev[d]):
                m.d.sync += ended[d].eq(self.pulse_tag[d])

        # ---- Trace: pulses per die and class, width histogram per class ---------------------

        tr = self.trace.payload
        die = Signal(range(max(nd, 2)))
        m.d.comb += die.eq(tr.channel - p.first_channel)
        ours = _in_range(tr.channel, p.first_channel, p.first_channel + nd)
        counted = self.trace.valid & (tr.kind == EventKind.END) & ours
        # An END record follows its pulse's end within one scanner round, before the channel's
        # next pulse can end (or the sniffer would have dropped it): `ended` is that pulse's tag.
        tr_class = Signal(OpClass)
        m.d.comb += tr_class.eq(Array(ended)[die])
        m.submodules.binner = binner = LogBinner(p.sniffer)
        m.d.comb += binner.width.eq(tr.width)

        # ---- Counter banks and the read port ------------------------------------------------

        banks = {
            TapSpace.OPS: CounterBank(p.depth(TapSpace.OPS), p.counter_bits),
            TapSpace.PLANES: CounterBank(p.depth(TapSpace.PLANES), p.counter_bits),
            TapSpace.PULSES: CounterBank(p.depth(TapSpace.PULSES), p.counter_bits),
            TapSpace.HIST: CounterBank(p.depth(TapSpace.HIST), p.hist_bits),
        }
        for space, bank in banks.items():
            m.submodules[f"bank_{space.name.lower()}"] = bank
        m.d.comb += [
            banks[TapSpace.OPS].upd_valid.eq(ops_valid),
            banks[TapSpace.OPS].upd_addr.eq(ops_addr),
            banks[TapSpace.OPS].upd_inc.eq(1),
            banks[TapSpace.PLANES].upd_valid.eq(pl_valid),
            banks[TapSpace.PLANES].upd_addr.eq(pl_addr),
            banks[TapSpace.PLANES].upd_inc.eq(1),
            banks[TapSpace.PULSES].upd_valid.eq(counted),
            banks[TapSpace.PULSES].upd_addr.eq(Cat(tr_class, die[:p.die_bits])),
            banks[TapSpace.PULSES].upd_inc.eq(1),
            banks[TapSpace.HIST].upd_valid.eq(counted),
            banks[TapSpace.HIST].upd_addr.eq(Cat(binner.bin[:p.bin_bits], tr_class)),
            banks[TapSpace.HIST].upd_inc.eq(1),
        ]
        # One request in flight; its bank (or the recorder) answers, the others stay idle.
        req = self.read_req.payload
        busy = Signal()
        rec_answer = self._recorder(m, cyc, req, busy)
        with m.If(rec_answer.valid):
            m.d.sync += [self.read_resp.valid.eq(1),
                         self.read_resp.payload.eq(rec_answer.payload)]
        for s, bank in banks.items():
            abits = len(bank.rd_req.payload)
            m.d.comb += [
                bank.rd_req.payload.eq(req.index[:abits]),
                bank.rd_req.valid.eq(self.read_req.valid & ~busy & (req.space == s)),
                bank.rd_resp.ready.eq(1),
            ]
            with m.If(bank.rd_req.valid & bank.rd_req.ready):
                m.d.comb += self.read_req.ready.eq(1)
                m.d.sync += busy.eq(1)
            with m.If(bank.rd_resp.valid):
                m.d.sync += [self.read_resp.valid.eq(1),
                             self.read_resp.payload.eq(bank.rd_resp.payload)]
        with m.If(self.read_resp.valid & self.read_resp.ready):
            m.d.sync += [self.read_resp.valid.eq(0), busy.eq(0)]
        return m

    def _recorder(self, m, cyc, req, busy):
        """The power-up recorder: its cells, and its answer to a ``RECORD`` read (accepted
        here, answered two cycles later as a one-cycle ``valid`` with ``payload``)."""
        p = self.params
        nt, cells = p.targets, p.record_cells
        answer = Signal(data.StructLayout({"valid": 1, "payload": p.counter_bits}))
        take = self.read_req.valid & ~busy & (req.space == TapSpace.RECORD)
        taken = Signal()
        m.d.sync += [taken.eq(take), answer.valid.eq(taken)]
        with m.If(take):
            m.d.comb += self.read_req.ready.eq(1)
            m.d.sync += busy.eq(1)
        if not cells:
            m.d.sync += answer.payload.eq(0)
            return answer

        cbits = (cells - 1).bit_length()
        tbits = p.target_bits
        cell_bits = 8 + RecordKind.as_shape().width  # the byte, then its kind
        m.submodules.record_mem = mem = Memory(shape=cell_bits, depth=cells << tbits, init=[])
        wr, rd = mem.write_port(), mem.read_port()
        ones = (1 << nt) - 1
        armed = Signal(nt, init=ones)  # waiting for the target's first Reset
        on = Signal(nt)  # recording (until full)
        fill = [Signal(range(cells + 1), name=f"record_fill_{t}") for t in range(nt)]

        # Which target keeps the cycle: the lowest selected one.
        first = Signal(range(max(nt, 2)))
        for t in reversed(range(nt)):
            with m.If(cyc.sel[t]):
                m.d.comb += first.eq(t)
        strobe = cyc.cmd | cyc.addr | cyc.din | cyc.dout
        is_reset = cyc.cmd & (cyc.byte == 0xFF)
        kind = Signal(RecordKind)
        with m.If(cyc.addr):
            m.d.comb += kind.eq(RecordKind.ADDR)
        with m.Elif(cyc.din):
            m.d.comb += kind.eq(RecordKind.DIN)
        with m.Elif(cyc.dout):
            m.d.comb += kind.eq(RecordKind.DOUT)
        # Registered write (the selects' priority stays out of the RAM's address path).
        w_en = Signal()
        w_addr = Signal(cbits + tbits)
        w_data = Signal(cell_bits)
        m.d.comb += [wr.en.eq(w_en), wr.addr.eq(w_addr), wr.data.eq(w_data)]
        m.d.sync += w_en.eq(0)
        for t in range(nt):
            starts = cyc.sel[t] & is_reset & armed[t]
            with m.If(starts):
                m.d.sync += [armed[t].eq(0), on[t].eq(1)]
            keeps = strobe & (first == t) & cyc.sel[t] & (on[t] | starts) & (fill[t] < cells)
            with m.If(keeps):
                m.d.sync += [
                    fill[t].eq(fill[t] + 1), w_en.eq(1),
                    w_addr.eq(Cat(fill[t][:cbits], Const(t, tbits))),
                    w_data.eq(Cat(cyc.byte, kind)),
                ]
        with m.If(self.record[0] | self.record[1]):
            m.d.sync += [armed.eq(Mux(self.record[0], ones, 0)),
                         on.eq(Mux(self.record[0], 0, ones))]
            m.d.sync += [f.eq(0) for f in fill]
            m.d.sync += w_en.eq(0)

        # The read: RAM addressed in the cycle the request is taken, its word registered.
        r_cell = Signal(cbits)
        r_target = Signal(range(max(nt, 2)))
        m.d.comb += rd.addr.eq(req.index[:cbits + tbits])
        with m.If(take):
            m.d.sync += [r_cell.eq(req.index[:cbits]), r_target.eq(req.index[cbits:cbits + tbits])]
        fills = Array(fill)
        t_fill = Signal(range(cells + 1))
        m.d.comb += t_fill.eq(fills[r_target])
        word = Signal(p.counter_bits)
        m.d.comb += [
            word[:cell_bits].eq(rd.data),
            word[_RECORD_VALID].eq(r_cell < t_fill),
            word[_RECORD_ON].eq(on.bit_select(r_target, 1) & (t_fill < cells)),
            word[_RECORD_ARMED].eq(armed.bit_select(r_target, 1)),
            word[_RECORD_FILL:_RECORD_FILL + len(t_fill)].eq(t_fill),
            word[_RECORD_CELLS:_RECORD_CELLS + 3].eq(cbits - 5),
        ]
        with m.If(taken):
            m.d.sync += answer.payload.eq(word)
        return answer

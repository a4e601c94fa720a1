"""The ground-truth counter bank: every die's counters in one RAM, one shared pipelined adder.

Each die reports, every cycle, how much each of its :class:`~.params.EmuCounter` counters grows
(``inc``, a few bits wide). The bank adds those increments into small per-counter *pending*
accumulators and a scanner visits the RAM words one per cycle, round robin: it reads a word,
takes that counter's pending amount (the accumulator restarts from the increments of that very
cycle, so nothing is lost or counted twice), adds and writes the sum back. Only the narrow
accumulators and one ``counter_bits``-wide adder live in logic; the wide values live in RAM.

A word is visited every ``dies * 16`` cycles, so an accumulator never holds more than that many
cycles of increments; its width is derived from that bound, which makes the scheme exact by
construction (no saturation, no lost counts).

A ground-truth read (``read_req``) waits for the scanner to write the requested word back and
returns exactly the value written: the counter's count of every increment up to that cycle. The
wait is at most one scan period.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import read_request_layout
from .params import EmuCounter, EmuParams

__all__ = ["CounterBank", "inc_bits"]

#: Pipeline stages between a word's read address and its write-back (read, add, write).
_LATENCY = 3


def inc_bits(params):
    """Width of one counter's per-cycle increment from a die.

    At most a few sources (an operation's completion, the background array program of a cache
    program, a command) add to one counter in one cycle, each at most ``planes`` pages; four
    sources of ``2 * planes - 1`` fit with room to spare.
    """
    return (4 * (2 * params.planes - 1)).bit_length()


class CounterBank(wiring.Component):
    """The dies' ground-truth counters in one RAM with one shared adder.

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    inc : In(ArrayLayout(ArrayLayout(inc_bits, 16), dies))
        Per die and counter, the amount it grows in this cycle.
    read_req : In(stream.Signature(read_request_layout))
        A read of one counter (``die``, ``index``). Accepted (``ready``) when the scanner
        writes that word back; a ``die`` beyond the build's reads 0 at once.
    read_resp : Out(stream.Signature(counter_bits))
        The values, one per request, in order.
    """

    def __init__(self, params):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        self.params = params
        self.inc_bits = inc_bits(params)
        super().__init__({
            "inc": In(data.ArrayLayout(data.ArrayLayout(self.inc_bits, len(EmuCounter)),
                                       params.dies)),
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        per_die = len(EmuCounter)
        words = p.dies * per_die
        period = words  # cycles between two visits of a word
        acc_bits = ((period + _LATENCY + 1) * ((1 << self.inc_bits) - 1)).bit_length()

        m.submodules.ram = ram = Memory(shape=p.counter_bits, depth=words, init=[])
        rd = ram.read_port()
        wr = ram.write_port()

        # Stage A: the scan address. Counts are never reset (reset-less like the counters of a
        # real die's firmware log), so neither is anything that carries them.
        addr_a = Signal(range(words), reset_less=True)
        m.d.sync += addr_a.eq(Mux(addr_a == words - 1, 0, addr_a + 1))
        m.d.comb += rd.addr.eq(addr_a)

        # Stage B: the word is on the read port; take the word's pending increments.
        valid_b = Signal(reset_less=True)
        addr_b = Signal(range(words), reset_less=True)
        take_b = Signal(words, reset_less=True)  # one-hot of addr_b
        m.d.sync += [valid_b.eq(1), addr_b.eq(addr_a), take_b.eq(Const(1, words) << addr_a)]
        pending = [Signal(acc_bits, name=f"pending{i}", reset_less=True) for i in range(words)]
        taken_c = Signal(acc_bits, reset_less=True)
        old_c = Signal(p.counter_bits, reset_less=True)
        for i, acc in enumerate(pending):
            inc = self.inc[i // per_die][i % per_die]
            m.d.sync += acc.eq(Mux(take_b[i], 0, acc) + inc)
        m.d.sync += [taken_c.eq(Array(pending)[addr_b]), old_c.eq(rd.data)]

        # Stage C: the one wide adder.
        valid_c = Signal(reset_less=True)
        addr_c = Signal(range(words), reset_less=True)
        m.d.sync += [valid_c.eq(valid_b), addr_c.eq(addr_b)]
        valid_d = Signal(reset_less=True)
        addr_d = Signal(range(words), reset_less=True)
        sum_d = Signal(p.counter_bits, reset_less=True)
        m.d.sync += [valid_d.eq(valid_c), addr_d.eq(addr_c), sum_d.eq(old_c + taken_c)]

        # Stage D: write back.
        m.d.comb += [wr.addr.eq(addr_d), wr.data.eq(sum_d), wr.en.eq(valid_d)]

        # Ground-truth reads: answered with the value the scanner writes back.
        req = self.read_req.payload
        req_addr = Signal(range(words + per_die))
        m.d.comb += req_addr.eq(Cat(req.index, req.die))
        outside = req.die >= p.dies
        resp_valid = Signal()
        resp = Signal(p.counter_bits)
        free = ~resp_valid | self.read_resp.ready
        hit = Signal()
        m.d.comb += [
            hit.eq(outside | (valid_d & (addr_d == req_addr))),
            self.read_req.ready.eq(free & hit),
            self.read_resp.valid.eq(resp_valid),
            self.read_resp.payload.eq(resp),
        ]
        with m.If(self.read_req.valid & self.read_req.ready):
            m.d.sync += [resp_valid.eq(1), resp.eq(Mux(outside, 0, sum_d))]
        with m.Elif(self.read_resp.ready):
            m.d.sync += resp_valid.eq(0)
        return m

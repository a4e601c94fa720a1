"""The sniffer's histogram RAM and its read-modify-write updates (pipeline stages c6 to c9).

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .jobs import hist_depth, job_layout
from .params import SnifferParams
from .ram import RAM_KINDS, SinglePortRAM

__all__ = ["HistogramRam", "hist_word_layout"]


def hist_word_layout(params):
    """A histogram RAM word: the bin's count, and the epoch bit it was written in."""
    return data.StructLayout({"value": params.hist_bits, "tag": 1})


class HistogramRam(wiring.Component):
    """The per-channel log histograms, ``{value, tag}``, in a single-port RAM: a bin is read at
    c6 and written at c9.

    The read data is registered in the RAM wrapper (:class:`~.ram.SinglePortRAM`, c7),
    normalised and incremented at c8 (``value``: the bin's new value; a read's increment is 0),
    and written at c9. The write of the job before lands at c7, with the write registers
    (``hw_*``) still holding it; they take this job's at the end of c7, from J.

    Parameters
    ----------
    params : SnifferParams
    kind : str
        The RAM's implementation, one of :data:`~.ram.RAM_KINDS` (see
        :class:`~.ram.SinglePortRAM`).
    spram_block : callable, optional
        Stand-in for the SPRAM primitive (a simulation model).

    Members
    -------
    phase : In(1)
        The scanner's phase (1 on a job's c5 and c7).
    job : In(job_layout)
        J, from the job stage.
    value : Out(hist_bits)
        The bin's new value (registered at c8): at a read request's c9, the bin it read.
    """

    def __init__(self, params, *, kind="memory", spram_block=None):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if kind not in RAM_KINDS:
            raise ValueError(f"kind must be one of {', '.join(RAM_KINDS)}, not {kind!r}")
        self.params = params
        self.kind = kind
        self.spram_block = spram_block
        super().__init__({
            "phase": In(1),
            "job": In(job_layout(params)),
            "value": Out(params.hist_bits),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        h_depth = hist_depth(p)
        phase = self.phase
        j = self.job

        hist_word = hist_word_layout(p)
        m.submodules.ram = hist = SinglePortRAM(
            hist_word.size, h_depth, kind=self.kind, spram_block=self.spram_block)
        h_rd = hist_word(hist.rdata)
        qh = Signal(p.hist_bits, reset_less=True)
        m.d.comb += self.value.eq(qh)
        hw_addr = Signal(range(h_depth), reset_less=True)
        hw_en = Signal(reset_less=True)
        hw_tag = Signal(reset_less=True)
        hw_zero = Signal(reset_less=True)
        hw_inc = Signal(reset_less=True)
        # A scrub skips its write when the job before writes the same bin in the same epoch (at
        # c7: that write scrubs it; the scrub's read came before it). Compared at c6, when both
        # are known already.
        h_hit = Signal(reset_less=True)
        with m.If(~phase):
            m.d.sync += h_hit.eq(hw_en & (hw_addr == j.h_addr) & (hw_tag == j.epoch))
        with m.If(phase):  # c7: the write of the job before lands now
            m.d.sync += [
                hw_addr.eq(j.h_addr), hw_tag.eq(j.epoch), hw_zero.eq(j.zero), hw_inc.eq(j.h_inc),
                hw_en.eq(j.h_we & ~(j.scrub & h_hit)),
            ]
        with m.Else():  # c8: the read data, normalised, for the write at c9
            # (The increment alone, or the word plus it: no multiplexer before the adder.)
            with m.If((h_rd.tag == hw_tag) & ~hw_zero):
                m.d.sync += qh.eq(h_rd.value + hw_inc)
            with m.Else():
                m.d.sync += qh.eq(hw_inc)
        h_write = phase & hw_en
        m.d.comb += [
            hist.addr.eq(Mux(h_write, hw_addr, j.h_addr)),
            hist.we.eq(h_write),
            hist.wdata.eq(Cat(qh, hw_tag)),
        ]
        return m

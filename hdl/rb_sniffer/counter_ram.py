"""The sniffer's counter RAM and its read-modify-write updates (pipeline stages c6 to c9).

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..synthesis import COLLISION_FREE
from .jobs import counter_depth, job_layout, late_job_layout
from .params import SnifferParams
from .ram import scrambled_read

__all__ = ["CounterRam", "counter_word_layout"]


def counter_word_layout(params):
    """A counter RAM word: the count, and the epoch bit it was written in."""
    return data.StructLayout({"value": params.counter_bits, "tag": 1})


class CounterRam(wiring.Component):
    """The per-channel counters, ``{value, tag}``: one read and one write per cycle.

    A job reads its first word (count, from J) at c6 and its second (busy time, from K) at c7;
    each read word is normalised (a word of another epoch, or a word a boot scrub rewrites,
    counts as 0) and registered (``q``) the next cycle, and written back plus the increment the
    cycle after: counts at c8, busy time at c9. No adder follows a RAM output in the same cycle.

    The RAM is collision-free: nothing uses a read that meets a write of its word (the iCE40's
    block RAM may return anything then, and the read-during-write bypass Yosys would add was the
    slowest path of the iCE40 build). Adjacent jobs are the only ones whose reads and writes
    share cycles (a job's reads at c6 and c7 meet the previous job's writes of its c8 and c9),
    and events in adjacent slots belong to different channels, so a read meets a write of its
    word only when one of the two jobs is a read or a scrub (whose two reads both address their
    word):

    * a scrub's read meets the write of the job before: the scrub skips its write (``a_hit``);
    * a read request's second read meets the previous job's busy-time write: the response takes
      its first read (held in ``q``), which came before that write, as a read-first RAM would
      return it;
    * a job's first read meets the previous scrub's write: ``q`` then holds the scrub's second
      read of the word, normalised, which is what the scrub writes; the job keeps it (or takes 0
      if it counts in another epoch).

    Parameters
    ----------
    params : SnifferParams
    normalise_late : bool or None
        Where a word read is normalised: ``False``, as it is registered; ``True``, after it is
        registered (see :class:`~.sniffer.RBSniffer`); None: ``False`` on an iCE40 platform,
        ``True`` elsewhere.
    scramble_collisions : bool
        Simulation aid: a read that meets a write of its word returns the complement of the old
        word.

    Members
    -------
    phase : In(1)
        The scanner's phase (1 on a job's c5 and c7).
    job : In(job_layout)
        J, from the job stage.
    late_job : In(late_job_layout)
        K, from the job stage.
    value : Out(counter_bits)
        ``q`` normalised: at a read request's c9, the word it read.
    """

    def __init__(self, params, *, normalise_late=None, scramble_collisions=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if normalise_late not in (None, False, True):
            raise ValueError(f"normalise_late must be None, False or True, "
                             f"not {normalise_late!r}")
        self.params = params
        self.normalise_late = normalise_late
        self.scramble_collisions = bool(scramble_collisions)
        super().__init__({
            "phase": In(1),
            "job": In(job_layout(params)),
            "late_job": In(late_job_layout(params)),
            "value": Out(params.counter_bits),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        cb, lb, wide = p.counter_bits, p.lost_bits, p.wide_bits
        a_depth = counter_depth(p)
        phase = self.phase
        j = self.job
        k = self.late_job

        counter_word = counter_word_layout(p)
        counters = Memory(shape=counter_word, depth=a_depth, init=[])
        m.submodules["counters" + COLLISION_FREE] = counters
        a_wr = counters.write_port()
        a_rd = counters.read_port()
        a_rd_data = a_rd.data
        if self.scramble_collisions:
            a_rd_data = counter_word(scrambled_read(m, "counters", a_rd, a_wr))

        w_addr = Signal(range(a_depth), reset_less=True)
        w_en = Signal(reset_less=True)
        w_inc = Signal(max(wide, lb), reset_less=True)
        w_tag = Signal(reset_less=True)
        q = Signal(cb, reset_less=True)
        # The job whose read data arrives this cycle (its first word at c7, its second at c8) is
        # the one J held the cycle before: its epoch and zero flag come from flip-flops.
        q_epoch = Signal(reset_less=True)
        q_zero = Signal(reset_less=True)
        m.d.sync += [q_epoch.eq(j.epoch), q_zero.eq(j.zero)]
        m.d.comb += a_rd.addr.eq(Mux(phase, k.acc_addr, j.cnt_addr))
        # c7: this job's first read met the previous job's write (col_c6); keep_c6: q holds the
        # word that write wrote and the job counts in its epoch. c8: the second read met the
        # previous job's busy-time write (col_c7): q keeps the first read.
        col_c6 = Signal(reset_less=True)
        col_c7 = Signal(reset_less=True)
        same_c6 = Signal(reset_less=True)  # that write was in this job's epoch
        keep_c6 = Signal()
        m.d.comb += keep_c6.eq(col_c6 & same_c6 & ~q_zero)
        q_hold = Signal()
        q_clear = Signal()
        m.d.comb += [q_hold.eq(Mux(phase, keep_c6, col_c7)), q_clear.eq(phase & col_c6)]
        # Carry-select: the increment is at most `width_bits` wide, so the word's upper part
        # only ever gains the carry out of the lower part. The write cycle adds `width_bits`
        # bits and, in parallel, increments the upper part, and the carry picks one of the two.
        split = max(wide, lb)
        low_sum = Signal(split + 1)
        late = self.normalise_late
        if late is None:
            late = not str(getattr(platform, "device", "")).startswith("iCE40")
        if not late:
            # Normalised as it is registered: one LUT level between the RAM's output and q (as
            # q's synchronous reset). The iCE40's block RAM is quick enough for that.
            with m.If(~q_hold):
                m.d.sync += q.eq(Mux((a_rd_data.tag == q_epoch) & ~q_zero & ~q_clear,
                                     a_rd_data.value, 0))
            q_value = q
            m.d.comb += low_sum.eq(q[:split] + w_inc)
            write_value = Cat(low_sum[:split], Mux(low_sum[split], q[split:] + 1, q[split:]))
        else:
            # Registered as read (the ECP5's block RAM has 5.8 ns of clock-to-output and sits
            # far from the logic), its tag beside it, and normalised where it is used: the
            # write cycle's sum (the increment alone for a stale word) and the read response.
            q_tag = Signal(reset_less=True)
            q_epoch_late = Signal(reset_less=True)
            q_zero_late = Signal(reset_less=True)
            q_ok = Signal()
            m.d.comb += q_ok.eq((q_tag == q_epoch_late) & ~q_zero_late)
            m.d.sync += [q_epoch_late.eq(q_epoch), q_zero_late.eq(q_zero)]
            with m.If(q_clear):
                # The word the previous scrub wrote: q normalised, with the scrub's epoch.
                m.d.sync += [q.eq(Mux(q_ok, q, 0)), q_tag.eq(q_epoch_late)]
            with m.Elif(~q_hold):
                m.d.sync += [q.eq(a_rd_data.value), q_tag.eq(a_rd_data.tag)]
            q_value = Mux(q_ok, q, 0)
            m.d.comb += low_sum.eq(Mux(q_ok, q[:split] + w_inc, w_inc))
            write_value = Cat(low_sum[:split],
                              Mux(low_sum[split], q[split:] + 1, q[split:]) &
                              q_ok.replicate(cb - split))
        m.d.comb += self.value.eq(q_value)

        # A scrub job reads its word at c6 and writes it at c8; the job before it writes at c6
        # (count) and c7 (busy time), after the scrub's read. If that was the same word in the
        # same epoch, the scrub's value is stale and that write has scrubbed the word already:
        # the scrub skips its write. (Jobs of one channel are a scanner round apart, so events
        # never meet such a hazard; a read may return a value one job old.)
        # Both writes are known at c6 (the c7 one is K's, loaded at the end of c6), so the hit
        # is a flip-flop at c7.
        # (Addresses and epochs are compared into separate flip-flops, joined after them.)
        same_c7 = Signal(reset_less=True)
        with m.If(~phase):
            m.d.sync += [
                col_c6.eq(w_en & (w_addr == j.cnt_addr)),
                col_c7.eq(k.acc_we & (k.acc_addr == j.cnt_addr)),
                same_c6.eq(w_tag == j.epoch),
                same_c7.eq(k.epoch == j.epoch),
            ]
        a_hit = (col_c6 & same_c6) | (col_c7 & same_c7)
        with m.If(phase):  # load the c8 write: J's count update
            m.d.sync += [
                w_addr.eq(j.cnt_addr), w_inc.eq(j.cnt_inc), w_tag.eq(j.epoch),
                w_en.eq(j.cnt_we & ~(j.scrub & a_hit)),
            ]
        with m.Else():  # load the c9 write: K's busy-time update
            m.d.sync += [
                w_addr.eq(k.acc_addr), w_inc.eq(k.acc_add), w_tag.eq(k.epoch),
                w_en.eq(k.acc_we),
            ]
        m.d.comb += [
            a_wr.addr.eq(w_addr), a_wr.en.eq(w_en),
            a_wr.data.value.eq(write_value), a_wr.data.tag.eq(w_tag),
        ]
        return m

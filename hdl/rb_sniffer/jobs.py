"""The sniffer's job stage: arbitration, classification and addresses (pipeline stages c4 to c6).

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .blocks import Classifier, first_window, leading_one_hot, log_bin
from .layouts import config_layout, index_bits, read_request_layout
from .params import Counter, EventKind, SnifferParams, Space
from .signatures import TraceSignature
from .width import slot_layout

__all__ = ["Job", "JobStage", "counter_depth", "hist_depth", "scrub_stop", "job_layout",
           "late_job_layout"]


class Job:
    """Job codes of the shared pipeline: the front-end event kinds, then service jobs."""

    END, PARTIAL, OVERLONG, BUSY, SIDE = (int(k) for k in EventKind)
    READ = 5
    SCRUB = 6
    NONE = 7
    SHAPE = 3


def counter_depth(params):
    """Words of the counter RAM: a row of ``2**row_bits`` counters per channel."""
    return params.channels << params.row_bits


def hist_depth(params):
    """Words of the histogram RAM: ``hist_bins`` rows of ``2**channel_bits`` channels."""
    return params.hist_bins << params.channel_bits


def scrub_stop(params):
    """The scrub pointer's last value. Values past the last word are no-op jobs: the next epoch
    flip waits until the last real scrub write has landed (see "Clear" in
    ``docs/architecture.md``)."""
    return max(counter_depth(params), hist_depth(params)) + 3


def job_layout(params):
    """J: what a job does at c6 and c7 (the count word's read and write, the histogram's).

    ``cnt_inc`` is added to the count word at ``cnt_addr`` (written when ``cnt_we``), ``h_inc``
    to the bin at ``h_addr`` (when ``h_we``); ``scrub``: the job rewrites its words normalised
    (with zero when ``zero``); ``epoch``: the epoch bit the job counts in.
    """
    return data.StructLayout({
        "cnt_addr": range(counter_depth(params)), "cnt_inc": params.lost_bits, "cnt_we": 1,
        "h_addr": range(hist_depth(params)), "h_inc": 1, "h_we": 1,
        "scrub": 1, "epoch": 1, "zero": 1,
    })


def late_job_layout(params):
    """K: what a job does at c7 and c8 (the busy word's read, its write, the read response).

    ``acc_add`` is added to the word at ``acc_addr`` (written when ``acc_we``); ``read``: the
    job is a read request (``space``; ``bad``: it is answered with 0).
    """
    return data.StructLayout({
        "acc_addr": range(counter_depth(params)), "acc_add": params.wide_bits, "acc_we": 1,
        "epoch": 1, "read": 1, "space": Space, "bad": 1,
    })


class JobStage(wiring.Component):
    """Arbitrate a slot between its front-end job and the service jobs (c4), classify the width
    and form the job's addresses (c5, c6), and trace each front-end event.

    At c4 (phase 0) a slot's front-end job (:class:`~.width.WidthStage`), else a waiting read
    request, else a scrub step, is registered (s1) together with the width's window matches
    (:class:`~.blocks.Classifier`) and its leading one. At c5 the first window and the log bin
    are found, and the job is registered twice from s1 (which holds through c6): J, at the end
    of c5, for c6 and c7; K, at the end of c6, for c7 and c8. Nothing is copied from one to the
    other.

    Parameters
    ----------
    params : SnifferParams
    dsp_bounds : int
        Window bounds held in iCE40UP DSP blocks (see :class:`~.sniffer.RBSniffer`); 0: none.

    Members
    -------
    phase : In(1)
        The scanner's phase (0: a slot's first cycle, c4 of the job in this stage).
    slot : In(slot_layout)
        The slot's front-end job, held through c5.
    scan_prev2 : In(range(channels + 1))
        The slot's channel during c4 and c5.
    windows : In(ArrayLayout(window_layout, classes))
        ``cfg.windows``.
    load : In(dsp_bounds)
    load_data : In(width_bits)
        Only with ``dsp_bounds``: the DSP bounds' loads (:class:`~.blocks.BoundLoader`).
    read_waiting : In(1)
        A read request waits and may be taken (:class:`~.readout.ReadPort`).
    read_request : In(read_request_layout)
        The request waiting.
    take_read : Out(1)
        The request is taken this cycle (c4).
    scrubbing, booting : In(1)
        A scrub is in progress; the boot scrub (which writes zeros) is (:class:`~.epochs.Epochs`).
    scrub_ptr : In(range(scrub_stop + 1))
        The word the next scrub job rewrites.
    next_epoch : In(1)
        The epoch bit a job arbitrated this cycle counts in.
    take_scrub : Out(1)
        A scrub job is taken this cycle (c4).
    scrub_step : Out(1)
        A scrub job is in c5 (the scrub pointer advances).
    timestamp : In(timestamp_bits)
        The timestamp, for the trace.
    job : Out(job_layout)
        J (registered at the end of c5).
    late_job : Out(late_job_layout)
        K (registered at the end of c6).
    trace : Out(TraceSignature)
        One record per front-end event, at its c5 (straight from the s1 registers).
    """

    def __init__(self, params, *, dsp_bounds=0):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.dsp_bounds = dsp_bounds
        n = params.channels
        members = {
            "phase": In(1),
            "slot": In(slot_layout(params)),
            "scan_prev2": In(range(n + 1)),
            "windows": In(config_layout(params).members["windows"]),
            "read_waiting": In(1),
            "read_request": In(read_request_layout(params)),
            "take_read": Out(1),
            "scrubbing": In(1),
            "booting": In(1),
            "scrub_ptr": In(range(scrub_stop(params) + 1)),
            "next_epoch": In(1),
            "take_scrub": Out(1),
            "scrub_step": Out(1),
            "timestamp": In(params.timestamp_bits),
            "job": Out(job_layout(params)),
            "late_job": Out(late_job_layout(params)),
            "trace": Out(TraceSignature(params)),
        }
        if dsp_bounds:
            members["load"] = In(dsp_bounds)
            members["load_data"] = In(params.width_bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        wb, lb, wide, tb = p.width_bits, p.lost_bits, p.wide_bits, p.tag_bits
        a_depth = counter_depth(p)
        h_depth = hist_depth(p)
        phase = self.phase
        sb = self.slot

        # ---- c4 (phase 0): arbitration with the service jobs; window comparisons, leading one
        is_slot = ~phase  # c4 of some slot
        free = ~sb.event & ~sb.side
        take_read = is_slot & free & self.read_waiting
        take_scrub = is_slot & free & ~take_read & self.scrubbing
        m.d.comb += [self.take_read.eq(take_read), self.take_scrub.eq(take_scrub)]

        s1_job = Signal(Job.SHAPE, init=Job.NONE, reset_less=True)
        s1_channel = Signal(p.channel_bits, reset_less=True)
        s1_width = Signal(wide, reset_less=True)
        s1_glitches = Signal(lb, reset_less=True)
        s1_space = Signal(Space, reset_less=True)
        s1_index = Signal(index_bits(p), reset_less=True)
        read_bad = Signal(reset_less=True)
        # The histogram address a read or a scrub job contributes (see c5), else 0.
        s1_h_service = Signal(range(h_depth), reset_less=True)
        s1_epoch = Signal(reset_less=True)
        s1_match = Signal(p.classes, reset_less=True)
        # The width's highest one (one-hot, from bit hist_sub_bits), for its log-bin.
        s1_lead = Signal(wb - p.hist_sub_bits, reset_less=True)
        s1_tag = Signal(tb, reset_less=True)
        m.submodules.classifier = classifier = Classifier(p, dsp_bounds=self.dsp_bounds)
        m.d.comb += [classifier.width.eq(sb.width[:wb]), classifier.windows.eq(self.windows)]
        if self.dsp_bounds:
            m.d.comb += [classifier.load.eq(self.load), classifier.load_data.eq(self.load_data)]
        # The log bin is found beside the window comparisons (its priority chain on the leading
        # one is several LUT levels deep) and registered with them.
        # The log-bin is found in two steps: the leading one here (a balanced tree), beside the
        # window comparisons, and the bin from it at c5 (a fixed slice per octave).
        lead = leading_one_hot(sb.width[:wb], p.hist_sub_bits, groups=sb.groups)

        with m.If(is_slot):
            m.d.sync += [
                s1_h_service.eq(0),
                s1_channel.eq(self.scan_prev2),
                # The epoch a job counts in: the bit in force when it is arbitrated.
                s1_epoch.eq(self.next_epoch),
                s1_width.eq(sb.width),
                s1_glitches.eq(sb.glitches),
                s1_match.eq(classifier.match),
                s1_lead.eq(lead),
                s1_tag.eq(sb.tag),
            ]
            with m.If(sb.side):
                m.d.sync += s1_job.eq(Job.SIDE)
            with m.Elif(sb.event):
                m.d.sync += s1_job.eq(sb.kind)
            with m.Elif(take_read):
                req = self.read_request
                m.d.sync += [
                    s1_job.eq(Job.READ),
                    s1_channel.eq(req.channel),
                    s1_space.eq(req.space),
                    s1_index.eq(req.index),
                    # A read outside the channels or the bins is answered with 0 (decided
                    # here, from the request's register).
                    read_bad.eq((req.channel >= n) | ((req.space == Space.HISTOGRAM) &
                                                      (req.index >= p.hist_bins))),
                    s1_h_service.eq(Mux(
                        (req.channel >= n) | (req.index >= p.hist_bins), 0,
                        Cat(Const(0, p.channel_bits),
                            req.index[:(p.hist_bins - 1).bit_length()]))),
                ]
            with m.Elif(take_scrub):
                # (Channel 0: the histogram address is formed by ORs, see c5.)
                m.d.sync += [s1_job.eq(Job.SCRUB), s1_channel.eq(0),
                             s1_h_service.eq(self.scrub_ptr)]
            with m.Else():
                m.d.sync += s1_job.eq(Job.NONE)

        # The scrub pointer advances at c5 of its job (the job's addresses are formed from it
        # then: no copy of it is registered); the next take is at the next c4.
        m.d.comb += self.scrub_step.eq(phase & (s1_job == Job.SCRUB))

        # ---- c5 (phase 1): first window, form addresses -----------------------------------

        class_index = Signal(p.row_bits)
        by_window = Signal(p.row_bits)
        first_window(m, s1_match, by_window, p)
        m.d.comb += class_index.eq(by_window)
        if tb:
            # A tag 1 … K names the class; the bus tap knows the operation.
            with m.If((s1_tag != 0) & (s1_tag <= p.classes)):
                m.d.comb += class_index.eq(s1_tag - 1)

        def counter_addr(channel, index):
            return Cat(Const(index, p.row_bits) if isinstance(index, int) else index[:p.row_bits],
                       channel[:p.channel_bits])

        def hist_addr(bin_, channel):
            return Cat(channel[:p.channel_bits], bin_)

        j = Signal(job_layout(p), reset_less=True)
        k = Signal(late_job_layout(p), reset_less=True)
        m.d.comb += [self.job.eq(j), self.late_job.eq(k)]
        is_event = s1_job <= Job.BUSY
        s1_bin = Signal(range(p.hist_bins))
        log_bin(m, s1_bin, s1_width[:wb], s1_lead, p)
        with m.If(phase):  # c5
            m.d.sync += [
                j.cnt_we.eq(0), j.cnt_inc.eq(0),
                j.h_we.eq(0), j.h_inc.eq(0),
                j.scrub.eq(0), j.zero.eq(0),
                j.epoch.eq(s1_epoch),
                # A service job's slot has no width (its bin is 0) and a scrub's channel is 0,
                # so the addresses of reads and scrubs are ORed into the bin's address: no
                # multiplexer after the log-bin.
                j.h_addr.eq(hist_addr(s1_bin, s1_channel) | s1_h_service),
            ]
            with m.Switch(s1_job):
                with m.Case(Job.END):
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, class_index)),
                        j.cnt_we.eq(1), j.cnt_inc.eq(1),
                        j.h_we.eq(1), j.h_inc.eq(1),
                    ]
                with m.Case(Job.PARTIAL, Job.OVERLONG):
                    index = Mux(s1_job == Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                                p.counter_index(Counter.OVERLONG))
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, index)),
                        j.cnt_we.eq(1), j.cnt_inc.eq(1),
                    ]
                with m.Case(Job.SIDE):
                    # Two counts in one job: DROPPED in the first read-modify-write (the lost
                    # count rides in the width), GLITCH in the second one that events use for
                    # busy time.
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.DROPPED))),
                        j.cnt_we.eq(1), j.cnt_inc.eq(s1_width[:lb]),
                    ]
                with m.Case(Job.READ):
                    m.d.sync += [
                        j.cnt_addr.eq(Mux(read_bad, 0, counter_addr(s1_channel, s1_index))),
                    ]
                with m.Case(Job.SCRUB):
                    # Rewrite each word once with its normalised value (adding zero); at boot,
                    # with zero.
                    m.d.sync += [
                        j.scrub.eq(1), j.zero.eq(self.booting),
                        j.cnt_addr.eq(self.scrub_ptr), j.cnt_we.eq(self.scrub_ptr < a_depth),
                        j.h_we.eq(self.scrub_ptr < h_depth),
                    ]
        with m.Else():  # c6 (s1 still holds the job)
            m.d.sync += [
                k.acc_we.eq(0), k.acc_add.eq(0), k.read.eq(0), k.bad.eq(0),
                k.epoch.eq(s1_epoch), k.space.eq(s1_space),
                k.acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.BUSY_TICKS))),
            ]
            with m.Switch(s1_job):
                with m.Case(Job.END, Job.PARTIAL, Job.OVERLONG, Job.BUSY):
                    m.d.sync += [k.acc_we.eq(1), k.acc_add.eq(s1_width)]
                with m.Case(Job.SIDE):
                    m.d.sync += [
                        k.acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.GLITCH))),
                        k.acc_we.eq(1), k.acc_add.eq(s1_glitches),
                    ]
                with m.Case(Job.READ):
                    # (Both of a read's counter-RAM reads address its word.)
                    m.d.sync += [k.read.eq(1), k.bad.eq(read_bad), k.acc_addr.eq(j.cnt_addr)]
                with m.Case(Job.SCRUB):
                    # A scrub reads its word twice too: the second read is what the next job
                    # takes if its first read meets the scrub's write (see the counter RAM).
                    m.d.sync += k.acc_addr.eq(j.cnt_addr)

        # Trace: one record per front-end event, straight from the c5 registers (the consumer
        # registers what it keeps).
        trace = self.trace
        m.d.comb += [
            trace.valid.eq(phase & is_event),
            trace.payload.channel.eq(s1_channel),
            trace.payload.kind.eq(s1_job),
            # A whole-width job (an overlong pulse's end seen with its saturation) can exceed MAX:
            # the record says MAX.
            trace.payload.width.eq(s1_width[:wb] | s1_width[wb:].replicate(wb)),
            trace.payload.timestamp.eq(self.timestamp),
        ]
        if tb:
            m.d.comb += trace.payload.tag.eq(s1_tag)
        m.d.comb += [
            trace.payload.index.eq(Mux(
                s1_job == Job.END, class_index,
                Mux(s1_job == Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                    Mux(s1_job == Job.OVERLONG, p.counter_index(Counter.OVERLONG),
                        p.counter_index(Counter.BUSY_TICKS))))),
        ]
        return m

"""The R/B# sniffer: many channels, one shared counter pipeline.

See ``docs/architecture.md`` ("The R/B# sniffer") for the exact semantics this implements and
the reasons for its structure.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .blocks import Classifier, FrontEnd, LogBinner, Quiescence, TimeBase
from .layouts import (
    EPOCH_BITS,
    config_layout,
    index_bits,
    mailbox_layout,
    read_request_layout,
    status_layout,
    trace_layout,
)
from .params import Counter, EventKind, SnifferParams, Space

__all__ = ["RBSniffer", "TraceSignature"]


class _Job:
    """Job codes of the shared pipeline: the front-end event kinds, then service jobs."""

    END, PARTIAL, OVERLONG, BUSY, SIDE = (int(k) for k in EventKind)
    READ = 5
    SCRUB = 6
    NONE = 7
    SHAPE = 3


class TraceSignature(wiring.Signature):
    """A strobe with a record and no back-pressure (the consumer counts what it cannot take)."""

    def __init__(self, params):
        super().__init__({"valid": Out(1), "payload": Out(trace_layout(params))})


class RBSniffer(wiring.Component):
    """Measure, classify and count the busy pulses of ``channels`` R/B# lines.

    Parameters
    ----------
    params : SnifferParams
        Build-time parameters (channel count, class count, widths).

    Members
    -------
    rb : In(channels)
        The R/B# pins, asynchronous to the clock (1 = ready).
    cfg : In(config_layout)
        Run-time configuration: prescaler, glitch filter, class windows, idle time, enables.
    clear : In(1)
        Strobe: start a new epoch (all counters and bins read as zero from then on).
    read_req : In(stream.Signature(read_request_layout))
        Requests to read one counter or one histogram bin.
    read_resp : Out(stream.Signature(counter_bits))
        The value read, one per request, in order.
    status : Out(status_layout)
        Timestamp, quiescence, epoch number, clear in progress.
    trace : Out(TraceSignature)
        One strobe per front-end event as the pipeline classifies it.
    """

    def __init__(self, params):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        super().__init__({
            "rb": In(params.channels, init=(1 << params.channels) - 1),
            "cfg": In(config_layout(params)),
            "clear": In(1),
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
            "status": Out(status_layout(params)),
            "trace": Out(TraceSignature(params)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        cb, hb = p.counter_bits, p.hist_bits
        a_depth = n << p.row_bits
        h_depth = p.hist_bins << p.channel_bits
        scrub_end = max(a_depth, h_depth)

        # ---- Time base, synchroniser, front ends, quiescence --------------------------------

        m.submodules.timebase = timebase = TimeBase(p)
        m.d.comb += timebase.prescaler.eq(self.cfg.prescaler)

        lvl = Signal(n, init=(1 << n) - 1)
        # The pins are asynchronous to our clock: two flip-flops bring each into the clock domain
        # (metastability); init=1 because a line idles ready.
        m.submodules.sync = FFSynchronizer(self.rb, lvl, init=(1 << n) - 1)

        front_ends = []
        for i in range(n):
            fe = FrontEnd(p)
            m.submodules[f"front_end_{i}"] = fe
            m.d.comb += [
                fe.lvl.eq(lvl[i]),
                fe.enable.eq(self.cfg.enable[i]),
                fe.tick.eq(timebase.tick),
                fe.glitch_ticks.eq(self.cfg.glitch_ticks),
            ]
            front_ends.append(fe)

        m.submodules.quiescence = quiet = Quiescence(p)
        m.d.comb += [
            quiet.all_ready.eq(~Cat(fe.low for fe in front_ends).any()),
            quiet.tick.eq(timebase.tick),
            quiet.timestamp.eq(timebase.timestamp),
            quiet.idle_ticks.eq(self.cfg.idle_ticks),
        ]

        # ---- Epochs and the clear scrubber --------------------------------------------------
        # Reset-less: a logic reset must not resurrect or lose counts; only `clear` erases them.

        epoch_bit = Signal(reset_less=True)
        epoch = Signal(EPOCH_BITS, reset_less=True)
        clear_pending = Signal(reset_less=True)
        scrubbing = Signal(reset_less=True)
        scrub_ptr = Signal(range(scrub_end + 1), reset_less=True)

        m.d.comb += [
            self.status.timestamp.eq(timebase.timestamp),
            self.status.quiet_since.eq(quiet.quiet_since),
            self.status.quiescent.eq(quiet.quiescent),
            self.status.epoch.eq(epoch),
            self.status.clear_busy.eq(clear_pending | scrubbing),
        ]

        # ---- Scanner: N channel slots and one service slot of two cycles each ---------------

        phase = Signal()  # 0: first cycle of a slot
        m.d.sync += phase.eq(~phase)
        scan = Signal(range(n + 1))
        with m.If(~phase):
            m.d.sync += scan.eq(Mux(scan == n, 0, scan + 1))

        box = mailbox_layout(p)(Array(fe.mailbox.as_value() for fe in front_ends)[scan])
        channel_slot = scan != n
        # Side counts are served when there is no event, or before they reach half their range
        # (they grow by at most N+1 between two visits, so they can never overflow).
        side_half = 1 << (p.lost_bits - 1)
        side_any = (box.lost != 0) | (box.glitches != 0)
        side_urgent = (box.lost >= side_half) | (box.glitches >= side_half)
        serve_side = channel_slot & side_any & (side_urgent | ~box.valid)
        serve_event = channel_slot & box.valid & ~serve_side
        for i, fe in enumerate(front_ends):
            this = ~phase & (scan == i)
            m.d.comb += [
                fe.take_event.eq(this & serve_event),
                fe.take_side.eq(this & serve_side),
            ]

        # Read requests: one in flight at a time.
        read_busy = Signal()
        service = ~phase & ~serve_event & ~serve_side
        take_read = service & self.read_req.valid & ~read_busy & ~self.read_resp.valid
        m.d.comb += self.read_req.ready.eq(take_read)
        take_scrub = service & ~take_read & scrubbing

        # ---- S0: select the slot's job ------------------------------------------------------

        s1_job = Signal(_Job.SHAPE, init=_Job.NONE)
        s1_channel = Signal(p.channel_bits)
        s1_width = Signal(p.width_bits)
        s1_glitches = Signal(p.lost_bits)
        s1_space = Signal(Space)
        s1_index = Signal(index_bits(p))
        s1_ptr = Signal(range(scrub_end + 1))

        with m.If(~phase):
            m.d.sync += s1_channel.eq(scan)
            with m.If(serve_side):
                m.d.sync += [
                    s1_job.eq(_Job.SIDE), s1_width.eq(box.lost), s1_glitches.eq(box.glitches),
                ]
            with m.Elif(serve_event):
                m.d.sync += [s1_job.eq(box.kind), s1_width.eq(box.width)]
            with m.Elif(take_read):
                req = self.read_req.payload
                m.d.sync += [
                    s1_job.eq(_Job.READ),
                    s1_channel.eq(req.channel),
                    s1_space.eq(req.space),
                    s1_index.eq(req.index),
                ]
            with m.Elif(take_scrub):
                m.d.sync += [s1_job.eq(_Job.SCRUB), s1_ptr.eq(scrub_ptr)]
            with m.Else():
                m.d.sync += s1_job.eq(_Job.NONE)

        # Clear: flip the epoch only at the start of a slot (phase 0) so that no job is caught
        # between its count write (S3, phase 1) and its busy write (S4, phase 0).
        with m.If(self.clear):
            m.d.sync += clear_pending.eq(1)
        with m.If(~phase):
            with m.If(take_scrub):
                m.d.sync += scrub_ptr.eq(scrub_ptr + 1)
                # The last pointer value is a no-op job: the next flip can then only happen after
                # the last real scrub job has written (its S3 precedes this job's S0).
                with m.If(scrub_ptr == scrub_end):
                    m.d.sync += scrubbing.eq(0)
            with m.Elif(clear_pending & ~scrubbing):
                m.d.sync += [
                    clear_pending.eq(self.clear),
                    epoch_bit.eq(~epoch_bit),
                    epoch.eq(epoch + 1),
                    scrubbing.eq(1),
                    scrub_ptr.eq(0),
                ]

        # ---- S1: classify, bin, form addresses (phase 1) ------------------------------------

        m.submodules.classifier = classifier = Classifier(p)
        m.submodules.binner = binner = LogBinner(p)
        m.d.comb += [
            classifier.width.eq(s1_width),
            classifier.windows.eq(self.cfg.windows),
            binner.width.eq(s1_width),
        ]

        def counter_addr(channel, index):
            return Cat(Const(index, p.row_bits) if isinstance(index, int) else index[:p.row_bits],
                       channel[:p.channel_bits])

        def hist_addr(bin_, channel):
            return Cat(channel[:p.channel_bits], bin_)

        # J: the job in S2 (phase 0) and S3 (phase 1), loaded at the end of S1.
        j_cnt_addr = Signal(range(a_depth))
        j_cnt_inc = Signal(p.width_bits)
        j_cnt_we = Signal()
        j_acc_addr = Signal(range(a_depth))
        j_acc_add = Signal(p.width_bits)
        j_acc_we = Signal()
        j_h_addr = Signal(range(h_depth))
        j_h_inc = Signal()
        j_h_we = Signal()
        j_read = Signal()
        j_space = Signal(Space)
        j_bad = Signal()

        is_event = s1_job <= _Job.BUSY
        with m.If(phase):
            m.d.sync += [
                j_cnt_we.eq(0), j_cnt_inc.eq(0),
                j_acc_we.eq(0), j_acc_add.eq(0),
                j_h_we.eq(0), j_h_inc.eq(0),
                j_read.eq(0), j_bad.eq(0),
                j_acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.BUSY_TICKS))),
                j_h_addr.eq(hist_addr(binner.bin, s1_channel)),
            ]
            with m.Switch(s1_job):
                with m.Case(_Job.END):
                    m.d.sync += [
                        j_cnt_addr.eq(counter_addr(s1_channel, classifier.index)),
                        j_cnt_we.eq(1), j_cnt_inc.eq(1),
                        j_acc_we.eq(1), j_acc_add.eq(s1_width),
                        j_h_we.eq(1), j_h_inc.eq(1),
                    ]
                with m.Case(_Job.PARTIAL, _Job.OVERLONG):
                    index = Mux(s1_job == _Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                                p.counter_index(Counter.OVERLONG))
                    m.d.sync += [
                        j_cnt_addr.eq(counter_addr(s1_channel, index)),
                        j_cnt_we.eq(1), j_cnt_inc.eq(1),
                        j_acc_we.eq(1), j_acc_add.eq(s1_width),
                    ]
                with m.Case(_Job.BUSY):
                    m.d.sync += [j_acc_we.eq(1), j_acc_add.eq(s1_width)]
                with m.Case(_Job.SIDE):
                    # Two counts in one job: DROPPED in the count step (S3), GLITCH in the
                    # second read-modify-write step (S4) that events use for busy time.
                    m.d.sync += [
                        j_cnt_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.DROPPED))),
                        j_cnt_we.eq(1), j_cnt_inc.eq(s1_width),
                        j_acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.GLITCH))),
                        j_acc_we.eq(1), j_acc_add.eq(s1_glitches),
                    ]
                with m.Case(_Job.READ):
                    bad = (s1_channel >= n) | ((s1_space == Space.HISTOGRAM) &
                                               (s1_index >= p.hist_bins))
                    m.d.sync += [
                        j_read.eq(1), j_space.eq(s1_space), j_bad.eq(bad),
                        j_cnt_addr.eq(Mux(bad, 0, counter_addr(s1_channel, s1_index))),
                        j_h_addr.eq(Mux(bad, 0, hist_addr(s1_index, s1_channel))),
                    ]
                with m.Case(_Job.SCRUB):
                    # Rewrite each word once with its normalised value (adding zero).
                    m.d.sync += [
                        j_cnt_addr.eq(s1_ptr), j_cnt_we.eq(s1_ptr < a_depth),
                        j_h_addr.eq(s1_ptr), j_h_we.eq(s1_ptr < h_depth),
                    ]

        # Trace: one record per front-end event, registered at the end of S1.
        with m.If(phase & is_event):
            m.d.sync += [
                self.trace.valid.eq(1),
                self.trace.payload.channel.eq(s1_channel),
                self.trace.payload.kind.eq(s1_job),
                self.trace.payload.width.eq(s1_width),
                self.trace.payload.timestamp.eq(timebase.timestamp),
                self.trace.payload.index.eq(Mux(
                    s1_job == _Job.END, classifier.index,
                    Mux(s1_job == _Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                        Mux(s1_job == _Job.OVERLONG, p.counter_index(Counter.OVERLONG),
                            p.counter_index(Counter.BUSY_TICKS))))),
            ]
        with m.Else():
            m.d.sync += self.trace.valid.eq(0)

        # J4: the job in S4 (phase 0), loaded from J at the end of S3.
        j4_acc_addr = Signal.like(j_acc_addr)
        j4_acc_add = Signal.like(j_acc_add)
        j4_acc_we = Signal()
        with m.If(phase):
            m.d.sync += [
                j4_acc_addr.eq(j_acc_addr),
                j4_acc_add.eq(j_acc_add),
                j4_acc_we.eq(j_acc_we),
            ]

        # ---- Counter RAM: {tag, value}; 1 read + 1 write per cycle --------------------------

        counter_word = data.StructLayout({"value": cb, "tag": 1})
        m.submodules.counters = counters = Memory(shape=counter_word, depth=a_depth, init=[])
        a_wr = counters.write_port()
        # Transparent: a service job reading a busy word in the cycle the previous job's S4
        # writes it must see the new value, or its scrub write would undo that update.
        a_rd = counters.read_port(transparent_for=(a_wr,))

        def normalised(word, tag, width):
            # A word written in another epoch reads as zero.
            return Mux(tag == epoch_bit, word, Const(0, width))

        a_value = Signal(cb)
        m.d.comb += a_value.eq(normalised(a_rd.data.value, a_rd.data.tag, cb))
        m.d.comb += [
            a_rd.addr.eq(Mux(phase, j_acc_addr, j_cnt_addr)),
            a_wr.data.tag.eq(epoch_bit),
        ]
        with m.If(phase):  # S3: count update of J
            m.d.comb += [
                a_wr.addr.eq(j_cnt_addr),
                a_wr.data.value.eq(a_value + j_cnt_inc),
                a_wr.en.eq(j_cnt_we),
            ]
        with m.Else():  # S4: busy-time update of J4
            m.d.comb += [
                a_wr.addr.eq(j4_acc_addr),
                a_wr.data.value.eq(a_value + j4_acc_add),
                a_wr.en.eq(j4_acc_we),
            ]

        # ---- Histogram RAM and its tags: single-port use (read in S2, write in S3) ----------

        m.submodules.histogram = histogram = Memory(shape=hb, depth=h_depth, init=[])
        m.submodules.histogram_tags = histogram_tags = Memory(shape=1, depth=h_depth, init=[])
        h_wr = histogram.write_port()
        h_rd = histogram.read_port()
        t_wr = histogram_tags.write_port()
        t_rd = histogram_tags.read_port()
        h_value = Signal(hb)
        m.d.comb += [
            h_rd.addr.eq(j_h_addr), h_wr.addr.eq(j_h_addr),
            t_rd.addr.eq(j_h_addr), t_wr.addr.eq(j_h_addr),
            h_value.eq(normalised(h_rd.data, t_rd.data, hb)),
            h_wr.data.eq(h_value + j_h_inc),
            t_wr.data.eq(epoch_bit),
            h_wr.en.eq(phase & j_h_we),
            t_wr.en.eq(phase & j_h_we),
        ]

        # ---- Read responses (captured in S3) -----------------------------------------------

        with m.If(phase & j_read):
            m.d.sync += [
                self.read_resp.valid.eq(1),
                self.read_resp.payload.eq(Mux(
                    j_bad, 0, Mux(j_space == Space.HISTOGRAM, h_value, a_value))),
            ]
        with m.Elif(self.read_resp.ready):
            m.d.sync += self.read_resp.valid.eq(0)
        # A request is in flight from its acceptance (S0) to its response (end of S3).
        with m.If(take_read):
            m.d.sync += read_busy.eq(1)
        with m.Elif(phase & j_read):
            m.d.sync += read_busy.eq(0)

        return m

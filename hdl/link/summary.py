"""The trace summariser: runs of short pulses sent as their first and last pulse and a count.

Part of the :class:`~.counters.LinkCounters` of builds with ``trace_summary`` (a board class's:
the ECP5 boards'). Under a read-heavy load a die makes far more pulses than the link carries
records: 64 dies pulsing at 8 000/s through their read stretches offer 512 000 records a second,
the ECPIX-5's 12 Mbaud link carries about 150 000 (``docs/benchmarks.md``, "The pulse stream at
full load"). What the sequence classifier needs pulse by pulse is everything around the reads:
the order of programs, erases, loads and cache busies, and the idle time before each of them (a
program waits for its data in). A run of reads between two other pulses is sent as

* its **first** pulse, whole, as it ends (an ordinary ``END`` record);
* a **SUMMARY** record (``kind`` :data:`SUMMARY_KIND`, 5) for the pulses between
  the first and the last: their number and how long before the record the last pulse ended;
* a **LATE** record (:data:`LATE_KIND`, 6) for the last pulse: its width and
  class, its ``END`` record held back until the run ended;

the SUMMARY and LATE records go into the trace FIFO together, just before the record of the
pulse that ended the run (or when the run is closed: below), and carry that moment's timestamp,
so that the records stay in the order of their timestamps over all channels (the host rebuilds
the last pulse's end as the records' time less the SUMMARY's age: ``docs/link.md``, "Trace
summary"). A run is the pulses of one class in ``mask`` (the ``TRACE_SUMMARY`` register; 0:
every record is sent whole, as without the summariser) that end one after the other on one
channel, with no other record of that channel between them: a pulse of another class, a
partial or saturated pulse ends it. A run of one pulse is that pulse's record alone; of two,
its first record, a SUMMARY of 0 pulses and the LATE record.

Only where the link does not keep up: runs start and go on while the trace FIFO is a quarter
full or more (``crowded``), so that under a load the link carries every pulse is sent whole and
the classifier loses nothing; a pulse of the class that comes while the FIFO is not crowded
ends the run, as another class would. Bit ``classes`` of ``TRACE_SUMMARY`` summarises at any
fill (tests, and a link known to be too slow).

A channel's run is closed, its SUMMARY and LATE records sent, as soon as a snapshot has read
the channel's counters (its COUNTERS frame has been sent: ``flush_one``), so that every pulse
the counters hold has its record by then, as without the summariser, and a snapshot's count
ends on a record. Every run is closed at a clear and when ``TRACE_ENABLE`` is cleared
(``flush``, and the enable's falling edge). The records of a run closed so carry the time the
closing began. A SUMMARY counts at most :data:`COUNT_MAX` pulses:
the pulses of a longer run are reported in several, each but the last followed by no LATE
record (a run is still open after it).

Records are never dropped here: the summariser waits for the FIFO's room (``w_rdy``). What is
dropped is an event of the sniffer that finds the summariser's queue full (``ready`` low: the
caller counts it lost, on its channel, as it counted a record the FIFO had no room for), so a
lost record is always one pulse.

Timing: an event is taken from the queue into flip-flops in one cycle, its channel's state is
read from a small RAM in the next, the state read is registered in the third, and the event is
decided in the fourth, in which a lone record is written: four cycles an event (the sniffer
offers one every two at most, in bursts the queue rides out; a real load, one every few hundred
cycles). A run's end writes up to three records, one a cycle. Closing the runs visits each
channel in four cycles. After a reset the state RAM (which a reset does not
clear) is cleared, a channel a cycle, before the first event is taken.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import trace_layout
from ..rb_sniffer.params import EventKind
from ..rb_sniffer.signatures import TraceSignature
from ..synthesis import COLLISION_FREE

__all__ = ["TraceSummariser", "COUNT_BITS", "COUNT_MAX", "SUMMARY_KIND", "LATE_KIND",
           "summary_fields"]

#: The ``kind`` of a SUMMARY record and of a LATE record: trace records only (the sniffer's
#: ``EventKind`` stops at 4; 7 is an empty TRACE_BATCH slot).
SUMMARY_KIND = 5
LATE_KIND = 6

#: Bits of a SUMMARY record's count (the low bits of its ``width``); its age takes the rest.
COUNT_BITS = 8
#: Most pulses one SUMMARY record counts.
COUNT_MAX = (1 << COUNT_BITS) - 1


def summary_fields(params):
    """``(count bits, age bits)`` of a SUMMARY record's ``width`` (count in the low bits)."""
    return COUNT_BITS, params.width_bits - COUNT_BITS


def _state_layout(params):
    fields = {
        "open": 1,  # a run is open: its first record was sent
        "index": params.row_bits,  # the run's class
        "count": COUNT_BITS,  # pulses between the first and the held one, not yet reported
        "held": 1,  # the run's latest pulse is held back (its END record not sent)
        "width": params.width_bits,  # the held pulse's width
        "timestamp": params.timestamp_bits,  # and the time of its END record
    }
    if params.tag_bits:
        fields["tag"] = params.tag_bits
    return data.StructLayout(fields)


class TraceSummariser(wiring.Component):
    """Summarise runs of short pulses between the sniffer's trace strobe and the trace FIFO.

    Parameters
    ----------
    params : SnifferParams
    queue_depth : int, optional
        Events the input queue holds (default: the channels, at least 16).

    Members
    -------
    trace : In(TraceSignature)
        The sniffer's trace strobe, already gated by ``TRACE_ENABLE`` (at most one event every
        two cycles).
    ready : Out(1)
        The queue has room: an event offered while it is low is dropped (the caller counts it).
    enable : In(1)
        ``TRACE_ENABLE``: its falling edge closes every run.
    mask : In(classes + 1)
        ``TRACE_SUMMARY``: the classes whose runs are summarised (bit ``k``: class ``k``; 0:
        none), while the trace FIFO is crowded, or at any fill with bit ``classes`` set.
    crowded : In(1)
        The trace FIFO is a quarter full or more: the link is not keeping up.
    flush : In(1)
        Strobe: close every run (a snapshot starts, a clear).
    flush_one, flush_channel : In(1), In(range(channels))
        Strobe: close the run of one channel (its COUNTERS frame has been sent). A second
        before the first was served closes every run.
    timestamp : In(timestamp_bits)
        The sniffer's time, which stamps the records of runs closed by ``flush``.
    w_data : Out(trace_layout)
    w_en : Out(1)
    w_rdy : In(1)
        The trace FIFO's write port.
    idle : Out(1)
        Nothing queued, held back or being closed (for tests and the host's drain).
    """

    def __init__(self, params, *, queue_depth=None):
        self.params = params
        self.queue_depth = max(16, params.channels) if queue_depth is None else queue_depth
        if not isinstance(self.queue_depth, int) or self.queue_depth < 2:
            raise ValueError(f"queue depth must be an integer of at least 2, not "
                             f"{queue_depth!r}")
        if params.width_bits <= COUNT_BITS:
            raise ValueError(f"a SUMMARY record needs more than {COUNT_BITS} bits of width")
        layout = trace_layout(params)
        super().__init__({
            "trace": In(TraceSignature(params)),
            "ready": Out(1),
            "enable": In(1),
            "mask": In(params.classes + 1),
            "crowded": In(1),
            "flush": In(1),
            "flush_one": In(1),
            "flush_channel": In(range(params.channels)),
            "timestamp": In(params.timestamp_bits),
            "w_data": Out(layout),
            "w_en": Out(1),
            "w_rdy": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        layout = trace_layout(p)
        state_layout = _state_layout(p)
        count_bits, age_bits = summary_fields(p)
        age_max = (1 << age_bits) - 1

        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=layout.size,
                                                           depth=self.queue_depth)
        m.d.comb += [queue.w_data.eq(self.trace.payload.as_value()),
                     queue.w_en.eq(self.trace.valid),
                     self.ready.eq(queue.w_rdy)]
        head = layout(queue.r_data)

        # (A state is read only after the write of the event before it: one event at a time.)
        m.submodules["state" + COLLISION_FREE] = state_ram = Memory(
            shape=state_layout, depth=n, init=[])
        rd = state_ram.read_port()
        wr = state_ram.write_port()
        # (The RAM's output registered before any logic: on the ECP5 a block RAM spends most of
        # a cycle in its clock to output.)
        st = Signal(state_layout)
        m.d.sync += st.eq(rd.data)

        ev = Signal(layout)  # the event being decided
        closing = Signal()  # deciding a channel of a flush, not an event
        close_time = Signal(p.timestamp_bits)  # the flush's time
        sweep = Signal(range(n + 1))  # the channel the clear or the flush visits
        flush_pending = Signal()
        was_enabled = Signal()
        one_pending = Signal()  # a channel's run to close (``flush_one``)
        one_channel = Signal(range(n))
        single = Signal()  # deciding that one channel
        m.d.sync += was_enabled.eq(self.enable)
        with m.If(self.flush | (was_enabled & ~self.enable) | (self.flush_one & one_pending)):
            m.d.sync += flush_pending.eq(1)
        with m.If(self.flush_one):
            m.d.sync += [one_pending.eq(1), one_channel.eq(self.flush_channel)]

        # The records waiting to be written, in order: a SUMMARY, a LATE, the event.
        out_sum, out_late, out_ev = Signal(), Signal(), Signal()
        sum_word, late_word, ev_word = Signal(layout), Signal(layout), Signal(layout)
        pending = out_sum | out_late | out_ev
        m.d.comb += self.w_en.eq(0)
        with m.If(out_sum):
            m.d.comb += [self.w_data.eq(sum_word), self.w_en.eq(1)]
            with m.If(self.w_rdy):
                m.d.sync += out_sum.eq(0)
        with m.Elif(out_late):
            m.d.comb += [self.w_data.eq(late_word), self.w_en.eq(1)]
            with m.If(self.w_rdy):
                m.d.sync += out_late.eq(0)
        with m.Elif(out_ev):
            m.d.comb += [self.w_data.eq(ev_word), self.w_en.eq(1)]
            with m.If(self.w_rdy):
                m.d.sync += out_ev.eq(0)

        # The decision (from ``ev`` or the channel closed, and its state read).
        kind_end = ev.kind == EventKind.END
        in_mask = Signal()
        # (Runs start and go on only while the FIFO is crowded, unless always: where the link
        # keeps up, every pulse is sent whole.)
        m.d.comb += in_mask.eq(kind_end & (ev.index < p.classes)
                               & (self.crowded | self.mask[p.classes])
                               & self.mask.bit_select(ev.index[:max(1, (p.classes - 1)
                                                                    .bit_length())], 1))
        extend = ~closing & in_mask & st.open & (st.index == ev.index)
        close = st.open & st.held & ~extend
        saturated = extend & st.held & (st.count == COUNT_MAX)
        now = Mux(closing, close_time, ev.timestamp)
        channel = Mux(closing, sweep, ev.channel)
        age = Signal(p.timestamp_bits)
        m.d.comb += age.eq(now - st.timestamp)
        age_field = Mux(age >= age_max, age_max, age[:age_bits])
        summary = Signal(layout)
        late = Signal(layout)
        m.d.comb += [
            summary.channel.eq(channel), summary.kind.eq(SUMMARY_KIND),
            summary.index.eq(st.index), summary.timestamp.eq(now),
            summary.width.eq(Mux(saturated, COUNT_MAX, Cat(st.count, age_field))),
            late.channel.eq(channel), late.kind.eq(LATE_KIND), late.index.eq(st.index),
            late.width.eq(st.width), late.timestamp.eq(now),
        ]
        if p.tag_bits:
            m.d.comb += late.tag.eq(st.tag)
        new = Signal(state_layout)
        with m.If(extend):
            m.d.comb += [new.open.eq(1), new.index.eq(ev.index), new.held.eq(1),
                         new.width.eq(ev.width), new.timestamp.eq(ev.timestamp),
                         new.count.eq(Mux(st.held, Mux(saturated, 1, st.count + 1), 0))]
            if p.tag_bits:
                m.d.comb += new.tag.eq(ev.tag)
        with m.Elif(~closing & in_mask):  # a new run: this pulse is its first
            m.d.comb += [new.open.eq(1), new.index.eq(ev.index)]

        in_idle = Signal()
        with m.FSM(init="CLEAR"):
            with m.State("CLEAR"):
                # The state RAM after a reset: every run closed.
                m.d.comb += [wr.addr.eq(sweep), wr.data.eq(0), wr.en.eq(1)]
                m.d.sync += sweep.eq(sweep + 1)
                with m.If(sweep == n - 1):
                    m.d.sync += [sweep.eq(0), flush_pending.eq(0)]
                    m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += in_idle.eq(1)
                with m.If(~pending & queue.r_rdy):
                    m.d.comb += queue.r_en.eq(1)
                    m.d.sync += [ev.eq(head), closing.eq(0)]
                    m.next = "ADDRESS"
                with m.Elif(~pending & flush_pending & (queue.level == 0)):
                    # Close every run, after the records of the events queued before (the
                    # queue is empty: an event written now has this very time).
                    m.d.sync += [flush_pending.eq(0), one_pending.eq(0), closing.eq(1),
                                 single.eq(0), sweep.eq(0), close_time.eq(self.timestamp)]
                    m.next = "ADDRESS"
                with m.Elif(~pending & one_pending & (queue.level == 0) & ~self.flush_one):
                    # Close the run of the channel whose counters were read.
                    m.d.sync += [one_pending.eq(0), closing.eq(1), single.eq(1),
                                 sweep.eq(one_channel), close_time.eq(self.timestamp)]
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                # The state's address, from flip-flops (the queue's head is a block RAM's
                # output, too slow to address another RAM in the same cycle).
                m.d.comb += rd.addr.eq(channel)
                m.next = "READ"
            with m.State("READ"):
                # The state read: registered (``st``) at the end of this cycle.
                m.next = "DECIDE"
            with m.State("DECIDE"):
                m.d.comb += [wr.addr.eq(channel), wr.data.eq(new), wr.en.eq(1)]
                emit_ev = ~closing & ~extend
                with m.If(close | saturated):
                    m.d.sync += [out_sum.eq(1), sum_word.eq(summary),
                                 out_late.eq(close), late_word.eq(late),
                                 out_ev.eq(emit_ev), ev_word.eq(ev)]
                with m.Elif(emit_ev):
                    # A lone record: written now if the FIFO has room.
                    m.d.comb += [self.w_data.eq(ev), self.w_en.eq(1)]
                    with m.If(~self.w_rdy):
                        m.d.sync += [out_ev.eq(1), ev_word.eq(ev)]
                with m.If(closing & ~single & (sweep != n - 1)):
                    m.d.sync += sweep.eq(sweep + 1)
                    m.next = "NEXT"
                with m.Else():
                    m.d.sync += [closing.eq(0), single.eq(0)]
                    m.next = "IDLE"
            with m.State("NEXT"):
                # The next channel of a flush, once the last one's records are written.
                with m.If(~pending):
                    m.next = "ADDRESS"
        m.d.comb += self.idle.eq(in_idle & ~pending & ~queue.r_rdy & ~flush_pending
                                 & ~one_pending)
        return m

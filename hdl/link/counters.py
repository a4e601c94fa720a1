"""The link's counters (trace records lost, frames received) and its trace FIFO.

Part of the :class:`~.controller.LinkController`.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..rb_sniffer.sniffer import TraceSignature
from ..synthesis import COLLISION_FREE
from .summary import TraceSummariser

__all__ = ["LinkCounters", "TRACE_FIFO_DEPTH"]

#: Trace records the FIFO holds by default (loopback builds, the simulated device): LUT RAM
#: whose read port is the head. A deeper one (``trace_depth``; the boards') is a
#: :class:`_DeepFifo` where block RAM output is slow (``ram_output_registers``, the ECP5: a head
#: read straight from block RAM was too slow for their 100 MHz, 83.6-91.6 MHz after place and
#: route on the ULX3S, 256 records), and on the iCE40 a :class:`_RecordFifo` as deep (its block
#: RAMs are 256 words deep, so 16 records take as many of them as 256: the iCEBreaker's 256 cost
#: 25 logic cells, its wider pointers).
TRACE_FIFO_DEPTH = 16


class LinkCounters(wiring.Component):
    """The trace FIFO, and the link's counters: trace records lost, frames received, errors.

    The sniffer's trace records (while ``trace_enable``) go into a FIFO (``trace_depth`` deep)
    that the frame builder empties with TRACE frames (``records``); a record that finds it full
    is counted as lost, per channel and in total (``lost_total``, which STATUS sends).

    One RAM holds the counters (entry ``i < channels``: channel ``i``'s trace records lost;
    ``channels``: frames received, ``channels + 1``: receive errors), updated by
    read-modify-write through one read port: read, the count registered the next cycle (a block
    RAM's output goes to no adder: its clock to output is most of a cycle on the ECP5), written
    the cycle after. A record dropped is counted the cycle after (``lost_now``); a received
    frame or error waits (one flag each) for a cycle where no record is counted (trace strobes
    are at least two cycles apart, frames and errors at least a byte time). Two updates of one
    counter never overlap (a channel drops at most one record per scan round of 4 cycles or
    more).

    The frame builder reads a counter through the same read port (``read_addr``,
    ``read_data``) whenever no update uses it: ``read_valid`` says when ``read_data`` is the
    count at ``read_addr``.

    Parameters
    ----------
    params : SnifferParams
    ram_output_registers : bool
        Register the counter RAM's output before the adder (three-stage update; see
        :class:`~.controller.LinkController`); ``False``: a two-stage update.
    trace_depth : int
        Records the trace FIFO holds (a power of two; default :data:`TRACE_FIFO_DEPTH`).
    trace_summary : bool
        A :class:`~.summary.TraceSummariser` between the strobe and the FIFO (with the members
        ``summary_mask``, ``summary_flush``, ``summary_flush_one``, ``summary_channel`` and
        ``timestamp``).

    Members
    -------
    trace : In(TraceSignature)
        The sniffer's trace strobe.
    trace_enable : In(1)
        The ``TRACE_ENABLE`` register: records are kept only while it is set.
    records : Out(stream.Signature(trace_layout))
        The FIFO's head (see :class:`_RecordFifo` for its timing).
    rx_good, rx_bad : In(1)
        Strobes counting received frames and receive errors.
    lost_total : Out(32)
        The total of trace records lost.
    read_addr : In(range(channels + 2))
        The counter the frame builder reads (a register of the frame builder).
    read_data : Out(32)
        The counter RAM's read port.
    read_valid : Out(1)
        ``read_data`` is the count at ``read_addr`` (as it was a cycle ago).
    """

    def __init__(self, params, *, ram_output_registers, trace_depth=TRACE_FIFO_DEPTH,
                 trace_summary=False):
        self.params = params
        self.ram_output_registers = bool(ram_output_registers)
        if not isinstance(trace_depth, int) or trace_depth < 2 or trace_depth & (trace_depth - 1):
            raise ValueError(f"trace FIFO depth must be a power of two of at least 2, not "
                             f"{trace_depth!r}")
        self.trace_depth = trace_depth
        self.trace_summary = bool(trace_summary)
        trace = TraceSignature(params)
        summary = {"summary_mask": In(params.classes + 1), "summary_flush": In(1),
                   "summary_flush_one": In(1),
                   "summary_channel": In(range(params.channels)),
                   "timestamp": In(params.timestamp_bits)} if trace_summary else {}
        super().__init__({
            **summary,
            "trace": In(trace),
            "trace_enable": In(1),
            "records": Out(stream.Signature(trace.members["payload"].shape)),
            "rx_good": In(1),
            "rx_bad": In(1),
            "lost_total": Out(32),
            "read_addr": In(ceil_log2(params.channels + 2)),
            "read_data": Out(32),
            "read_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.params.channels
        trace_shape = data.Layout.cast(self.trace.payload.shape())
        # (Where block RAM output is fast, the iCE40, the head is the RAM's read port at any
        # depth: a 16-record FIFO already fills whole block RAMs of 256 words there.)
        shallow = self.trace_depth <= 16 or not self.ram_output_registers
        m.submodules.trace_fifo = trace_fifo = (_RecordFifo if shallow else _deep_fifo)(
            trace_shape.size, self.trace_depth, self.trace_summary)
        trace_lost_total = Signal(32)
        m.d.comb += self.lost_total.eq(trace_lost_total)
        rx_base = n  # entries of rx_frames, rx_errors
        # (A read that collides with a write is never used: see tl_valid below.)
        m.submodules["counters" + COLLISION_FREE] = counter_ram = Memory(
            shape=32, depth=n + 2, init=[])
        tl_wr = counter_ram.write_port()
        # One read port (one block RAM less on the iCE40): it reads the counter being updated,
        # else the one a frame asks for (``read_addr``: the channel of the COUNTERS frame,
        # latched into tl_frame, or a receive counter that STATUS sends).
        tl_rd = counter_ram.read_port()
        addr_bits = len(tl_rd.addr)
        read_addr = self.read_addr
        m.d.comb += self.read_data.eq(tl_rd.data)
        push = self.trace.valid & self.trace_enable
        if self.trace_summary:
            # The summariser between the strobe and the FIFO: it waits for the FIFO's room, and
            # an event is dropped only when its queue is full (one pulse, on its channel).
            m.submodules.summariser = summ = TraceSummariser(self.params)
            m.d.comb += [summ.trace.valid.eq(push), summ.trace.payload.eq(self.trace.payload),
                         summ.enable.eq(self.trace_enable), summ.mask.eq(self.summary_mask),
                         summ.crowded.eq(trace_fifo.crowded),
                         summ.flush.eq(self.summary_flush),
                         summ.flush_one.eq(self.summary_flush_one),
                         summ.flush_channel.eq(self.summary_channel),
                         summ.timestamp.eq(self.timestamp),
                         trace_fifo.w_data.eq(summ.w_data.as_value()),
                         trace_fifo.w_en.eq(summ.w_en), summ.w_rdy.eq(trace_fifo.w_rdy)]
            accepted = summ.ready
        else:
            m.d.comb += [trace_fifo.w_data.eq(self.trace.payload.as_value()),
                         trace_fifo.w_en.eq(push)]
            accepted = trace_fifo.w_rdy
        m.d.comb += [self.records.valid.eq(trace_fifo.r_rdy),
                     self.records.payload.eq(trace_fifo.r_data),
                     trace_fifo.r_en.eq(self.records.ready)]
        # A dropped record is noted in flip-flops first (its channel too) and counted from
        # there, a cycle later: the FIFO's fullness does not reach the counter RAM's address.
        lost_now = Signal()
        lost_channel = Signal.like(self.trace.payload.channel)
        m.d.sync += [lost_now.eq(push & ~accepted),
                     lost_channel.eq(self.trace.payload.channel)]
        with m.If(lost_now):
            m.d.sync += trace_lost_total.eq(trace_lost_total + 1)
        rx_pending = Signal(2)  # a frame received, an error, not counted yet
        rx_serve = Signal()
        rx_which = Signal()  # 0: frames, 1: errors
        m.d.comb += [rx_serve.eq(~lost_now & rx_pending.any()), rx_which.eq(~rx_pending[0])]
        served = Mux(rx_serve, Mux(rx_which, 0b10, 0b01), 0)
        m.d.sync += rx_pending.eq((rx_pending & ~served) | Cat(self.rx_good, self.rx_bad))
        update = lost_now | rx_serve
        update_addr = Mux(lost_now, lost_channel, rx_base + rx_which)
        # The two stages of an update: read (stage 1: registered), written (stage 2).
        s1_valid = Signal()
        s2_valid = Signal()
        s1_addr = Signal(addr_bits)
        s2_addr = Signal(addr_bits)
        lost_count = Signal(32)
        m.d.sync += [s1_valid.eq(update), s1_addr.eq(update_addr),
                     s2_valid.eq(s1_valid), s2_addr.eq(s1_addr)]
        m.d.comb += tl_rd.addr.eq(Mux(update, update_addr, read_addr))
        if self.ram_output_registers:
            with m.If(s1_valid):
                m.d.sync += lost_count.eq(tl_rd.data)
            m.d.comb += [tl_wr.addr.eq(s2_addr), tl_wr.data.eq(lost_count + 1),
                         tl_wr.en.eq(s2_valid)]
        else:
            # (The iCE40's block RAM output is fast: the count goes straight to the adder and
            # is written in stage 1; there is no stage 2.)
            m.d.comb += [tl_wr.addr.eq(s1_addr), tl_wr.data.eq(tl_rd.data + 1),
                         tl_wr.en.eq(s1_valid)]
        # The read port's data is the count at ``read_addr`` (as it was a cycle ago): not while
        # an update used the port, nor while that counter is between its read and its write.
        tl_valid = Signal()
        m.d.comb += self.read_valid.eq(tl_valid)
        busy = s1_valid & (s1_addr == read_addr)
        if self.ram_output_registers:
            busy |= s2_valid & (s2_addr == read_addr)
        m.d.sync += tl_valid.eq(~update & ~busy)
        return m


class _RecordFifo(wiring.Component):
    """A FIFO whose head is read straight from its block RAM's read port.

    The interface of ``amaranth.lib.fifo``'s FIFOs (``w_data``, ``w_en``, ``w_rdy``, ``r_data``,
    ``r_rdy``, ``r_en``) with no output register: ``r_data`` is the RAM's read port, which
    always reads the head. ``r_rdy`` is a flip-flop: a record becomes readable three cycles
    after its write (once the port has read it), and after ``r_en`` the FIFO is not readable
    in the next cycle; the next head is on ``r_data`` when it is readable again, two cycles
    after ``r_en`` (the walker never looks sooner: a frame starts, then fetches its first
    programme entry).

    Parameters
    ----------
    width : int
    depth : int
        A power of two.

    Members
    -------
    w_data : In(width)
    w_en : In(1)
    w_rdy : Out(1)
    r_data : Out(width)
    r_rdy : Out(1)
    r_en : In(1)
    crowded : Out(1)
        (With ``crowded``: the trace summariser's builds.) A quarter full or more
        (registered).
    """

    def __init__(self, width, depth, crowded=False):
        if depth & (depth - 1):
            raise ValueError(f"FIFO depth must be a power of two, not {depth}")
        self.width = width
        self.depth = depth
        self.with_crowded = bool(crowded)
        super().__init__({
            "w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
            "r_data": Out(width), "r_rdy": Out(1), "r_en": In(1),
            **({"crowded": Out(1)} if crowded else {}),
        })

    def elaborate(self, platform):
        m = Module()
        # (The head is read again in every cycle and used only once readable: what the port
        # returns while the head's slot is written is never used.)
        m.submodules["storage" + COLLISION_FREE] = storage = Memory(
            shape=self.width, depth=self.depth, init=[])
        wr = storage.write_port()
        rd = storage.read_port()
        bits = self.depth.bit_length()  # one more than the address: full and empty differ
        produce = Signal(bits)
        produced = Signal(bits)  # ``produce`` a cycle late: what the read port has seen
        consume = Signal(bits)
        take = self.r_en & self.r_rdy
        m.d.sync += [produced.eq(produce), self.r_rdy.eq((produced != consume) & ~take)]
        # Fullness is a flip-flop too (``w_rdy`` reaches the write's enable through one gate):
        # the FIFO becomes full when a record is written, none taken, into its last free slot
        # (``produce`` one short of ``consume`` plus the depth: ``last_slot``, kept beside
        # ``consume``), and stops being full when one is taken.
        full = Signal()
        last_slot = Signal(bits, init=self.depth - 1)
        write = self.w_en & ~full
        with m.If(take):
            m.d.sync += [full.eq(0), last_slot.eq(last_slot + 1)]
        with m.Elif(write & (produce == last_slot)):
            m.d.sync += full.eq(1)
        m.d.comb += [
            self.w_rdy.eq(~full),
            wr.addr.eq(produce[:-1]), wr.data.eq(self.w_data),
            wr.en.eq(write),
            rd.addr.eq(consume[:-1]),
            self.r_data.eq(rd.data),
        ]
        with m.If(wr.en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(take):
            m.d.sync += consume.eq(consume + 1)
        if self.with_crowded:
            # A quarter full or more (a cycle late; the trace summariser's cue).
            m.d.sync += self.crowded.eq(((produce - consume)[:bits]) >= max(1, self.depth // 4))
        return m


def _deep_fifo(width, depth, crowded=False):
    """The trace FIFO of a build that asks for more than 16 records (the ECP5 boards:
    ``trace_depth`` in ``boards/ulx3s.py``, ``ecpix5.py``): a :class:`_DeepFifo`."""
    # (Checked before the component exists: one refused in its constructor would be an
    # elaboratable never used.)
    if depth & (depth - 1) or depth <= 16:
        raise ValueError(f"A deep FIFO's depth must be a power of two above 16, not {depth}")
    return _DeepFifo(width, depth, crowded)


class _DeepFifo(_RecordFifo):
    """A deep FIFO of block RAM whose head is read from LUT RAM.

    Amaranth's :class:`~amaranth.lib.fifo.SyncFIFOBuffered` (``depth`` records of block RAM)
    feeds, through one register, a 16-record :class:`_RecordFifo` (LUT RAM), whose head the
    frame builder reads as it reads the default FIFO's: the block RAM's slow clock-to-output
    (5.8 ns on the ULX3S's LFE5U-85F -6, and a multiplexer of its banks above 1 024 records)
    then ends in a flip-flop instead of running on into the frame builder's byte multiplexer
    (the ULX3S made 73-77 MHz of its 100 with the frame builder reading the block RAM). A
    record reaches the head three cycles after the bulk FIFO has it; ``w_rdy`` is the bulk's.

    The interface of :class:`_RecordFifo` (``w_data``, ``w_en``, ``w_rdy``, ``r_data``,
    ``r_rdy``, ``r_en``), and its read timing (the head's).
    """

    def elaborate(self, platform):
        m = Module()
        m.submodules.bulk = bulk = fifo.SyncFIFOBuffered(width=self.width, depth=self.depth)
        m.submodules.head = head = _RecordFifo(self.width, 16)
        if self.with_crowded:
            # (A quarter full or more: the bulk's fill, a cycle late.)
            m.d.sync += self.crowded.eq(bulk.level >= self.depth // 4)
        m.d.comb += [bulk.w_data.eq(self.w_data), bulk.w_en.eq(self.w_en),
                     self.w_rdy.eq(bulk.w_rdy),
                     self.r_data.eq(head.r_data), self.r_rdy.eq(head.r_rdy),
                     head.r_en.eq(self.r_en)]
        # One record in flight between the two: taken from the bulk when the register is empty
        # or is written into the head in this cycle.
        moving = Signal(self.width)
        moving_valid = Signal()
        take = Signal()
        m.d.comb += [take.eq(bulk.r_rdy & (~moving_valid | head.w_rdy)),
                     bulk.r_en.eq(take),
                     head.w_data.eq(moving), head.w_en.eq(moving_valid)]
        with m.If(take):
            m.d.sync += [moving.eq(bulk.r_data), moving_valid.eq(1)]
        with m.Elif(head.w_rdy):
            m.d.sync += moving_valid.eq(0)
        return m

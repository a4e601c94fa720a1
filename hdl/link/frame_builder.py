"""The link's frame builder: which frame goes next, and its bytes, one at a time.

Part of the :class:`~.controller.LinkController`. The frames are compiled into a programme ROM
(:mod:`.frame_program`) that a walker steps through, one byte per entry.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..rb_sniffer.layouts import config_layout, read_request_layout
from ..rb_sniffer.layouts import status_layout as sniffer_status_layout
from ..rb_sniffer.params import Space
from ..rb_sniffer.sniffer import TraceSignature
from . import protocol
from .frame_program import COUNT_BITS, READ_WORDS, FrameProgram, Latch, RamShifter, Shifter, Source
from .framing import FrameByte
from .trace_batch import TraceBatcher

__all__ = ["FrameBuilder"]

FT = protocol.FrameType


class FrameBuilder(wiring.Component):
    """Choose the next frame and send its body, byte by byte, to the frame encoder.

    Frames are asked for by the command unit (``send_*``: a RESPONSE, INFO, a snapshot,
    histograms, the extension's frames) and the snapshot timer (``periodic``, ``hist_expired``);
    TRACE_BATCH frames are sent while the trace FIFO has records (``records``, popped as the
    frame's slots go out by a :class:`~.trace_batch.TraceBatcher`). Each request is a flip-flop
    here, taken as its frame (or its burst of frames) starts. At a frame boundary the priority
    is RESPONSE (once written), INFO, a snapshot (STATUS, then one COUNTERS frame per channel),
    histograms (HISTOGRAM frames of every channel), the extension's frames (one per unit),
    TRACE_BATCH; between the frames of a burst a pending RESPONSE goes first. No frame starts
    while a clear is pending (``clear_pending``), so that no frame mixes counts of two epochs:
    the sniffer's epoch does not change during a frame, and frames send it as it is.

    A frame's bytes come from the frame programme (:class:`~.frame_program.FrameProgram`), one
    ROM entry per byte; a small state machine (the *walker*) steps through it: a constant, a
    byte of the table of variable bytes (picked by a registered multiplexer), or the next byte
    of a word read from a read port (the sniffer's counters and histogram bins, the
    extension's words), or a latch's read of a link counter (``counter_*``).

    Parameters
    ----------
    params : SnifferParams
    info : dict
        INFO's constant fields (:meth:`protocol.LinkProtocol.info_values`, with the
        extension's); the ``prescaler`` and ``tick_period_ps`` fields are sent live, from
        ``prescaler``.
    wire : LinkProtocol
        The wire protocol (INFO's layout, the extension's frame layout).
    clock_hz : int
        System clock frequency (``tick_period_ps``).
    source : ReadSource, optional
        The extension's read source (its frames, and the ``send_ext``, ``ext_read_req`` and
        ``ext_read_resp`` members).
    batches_in_bursts : bool
        A TRACE_BATCH frame between every two frames of a burst while the trace FIFO has
        records (else TRACE_BATCH frames wait for the burst's end).
    ram_output_registers : bool
        Where block RAM output is slow (``True``) the variable-byte multiplexer is one stage
        from the registered programme entry; otherwise (the iCE40) two stages, the first of
        which reads the programme ROM's output directly (see
        :class:`~.controller.LinkController`). The frames are the same.

    Members
    -------
    body : Out(stream.Signature(FrameByte))
        Frame bodies for the :class:`~.framing.FrameEncoder`.
    send_response, send_info, send_snapshot, send_histograms : In(1)
        Strobes from the command unit: a RESPONSE is written (sent once ``resp_writing`` is
        low), INFO, a snapshot (solicited: its STATUS flags say so), histograms.
    send_ext : In(1)
        (With ``source`` only.) Strobe: the extension's frames.
    response_pending : Out(1)
        A RESPONSE is to be sent.
    resp_writing : In(1)
        The RESPONSE is being written: it must not start yet.
    resp_byte : In(8)
        The RESPONSE's next byte (the command unit's scratch RAM).
    resp_next : Out(1)
        Strobe: ``resp_byte`` sent, move on to the next.
    clear_pending : In(1)
        A clear is pending: no frame starts.
    row_sent, row_channel : Out(1), Out(channel_bits)
        (With ``row_strobe``: the trace summariser's builds.) A strobe as a COUNTERS frame ends
        (its row read), and its channel: the trace summariser closes that channel's run, so
        that every pulse the row counts has its record by then.
    frame_idle : Out(1)
        Between frames (a clear may take effect).
    periodic, hist_expired, hist_on : In(1)
        The snapshot timer's strobes and ``HIST_PERIOD``'s state (see
        :class:`~.timer.SnapshotTimer`).
    records : In(stream.Signature(trace_layout))
        The trace FIFO's head.
    lost_total : In(32)
        Trace records lost in total (STATUS).
    counter_addr : Out(range(channels + 2))
        The link counter to read (a register): the snapshot's channel, or a receive counter.
    counter_data, counter_valid : In(32), In(1)
        The link counters' read port (see :class:`~.counters.LinkCounters`).
    trace_enable : In(1)
        The ``TRACE_ENABLE`` register (STATUS flags).
    prescaler : In(prescaler_bits)
        The ``PRESCALER`` register (INFO).
    status : In(status_layout)
        The sniffer's status.
    read_req, read_resp : the sniffer's read port (this block is its only user; the sniffer
        holds a response's payload until the next request, and the word's bytes are sent from
        it).
    ext_read_req, ext_read_resp : (with ``source`` only) the extension's read port.
    """

    def __init__(self, params, *, info, wire, clock_hz, source=None, ram_output_registers=True,
                 batches_in_bursts=True, row_strobe=False):
        self.params = params
        self.wire = wire
        self.info = dict(info)
        self.clock_hz = clock_hz
        self.source = source
        self.ram_output_registers = bool(ram_output_registers)
        self.batches_in_bursts = bool(batches_in_bursts)
        self.row_strobe = bool(row_strobe)
        ext = {}
        if source is not None:
            ext = {"send_ext": In(1),
                   "ext_read_req": Out(stream.Signature(source.request_layout)),
                   "ext_read_resp": In(stream.Signature(source.word_bits))}
        super().__init__({
            **ext,
            "body": Out(stream.Signature(FrameByte)),
            "send_response": In(1),
            "send_info": In(1),
            "send_snapshot": In(1),
            "send_histograms": In(1),
            "response_pending": Out(1),
            "resp_writing": In(1),
            "resp_byte": In(8),
            "resp_next": Out(1),
            "clear_pending": In(1),
            "frame_idle": Out(1),
            **({"row_sent": Out(1), "row_channel": Out(params.channel_bits)}
               if row_strobe else {}),
            "periodic": In(1),
            "hist_expired": In(1),
            "hist_on": In(1),
            "records": In(stream.Signature(TraceSignature(params).members["payload"].shape)),
            "lost_total": In(32),
            "counter_addr": Out(ceil_log2(params.channels + 2)),
            "counter_data": In(32),
            "counter_valid": In(1),
            "trace_enable": In(1),
            "prescaler": In(config_layout(params)["prescaler"].shape),
            "status": In(sniffer_status_layout(params)),
            "read_req": Out(stream.Signature(read_request_layout(params))),
            "read_resp": In(stream.Signature(params.counter_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        # The builder's signals, shared by the steps below (each adds its own).
        s = SimpleNamespace()
        self._requests(m, s)
        self._frames(m, s)
        self._programme(m, s)
        self._read_ports(m, s)
        self._choice(m, s)
        with m.FSM(init="IDLE", name="frames") as frames_fsm:
            self._frame_start(m, s)
            self._byte_steps(m, s)
            bursts = self._frame_end(m, s)
        self._between_frames(m, s, frames_fsm, bursts)
        return m

    def _requests(self, m, s):
        """The requests for frames: flip-flops set by the command unit and the timer, taken as
        their frames start."""
        s.resp_pending = Signal()
        s.info_pending = Signal()
        s.ext_request = Signal()
        s.snap_request = Signal()  # set by the timer or a command, taken by the frame builder
        s.snap_solicited = Signal()
        s.hist_request = Signal()
        m.d.comb += self.response_pending.eq(s.resp_pending)
        with m.If(self.send_response):
            m.d.sync += s.resp_pending.eq(1)
        with m.If(self.send_info):
            m.d.sync += s.info_pending.eq(1)
        with m.If(self.send_snapshot):
            m.d.sync += [s.snap_request.eq(1), s.snap_solicited.eq(1)]
        with m.If(self.send_histograms):
            m.d.sync += s.hist_request.eq(1)
        if self.source is not None:
            with m.If(self.send_ext):
                m.d.sync += s.ext_request.eq(1)
        # (The timer's, after the command unit's: ``hist_expired`` overrides a command's
        # histograms request with ``hist_on``.)
        with m.If(self.periodic):
            m.d.sync += s.snap_request.eq(1)
        with m.If(self.hist_expired):
            m.d.sync += s.hist_request.eq(self.hist_on)

    def _frames(self, m, s):
        """The frames' fields, bound to their values (``s.frames``), and the state of the
        bursts (channels, units, numbers)."""
        p = self.params
        n = p.channels
        source = self.source
        status = self.status
        s.seq = Signal(16)
        s.snapshot_no = Signal(16)
        s.snap_channel = Signal(p.channel_bits)
        s.hist_channel = Signal(p.channel_bits)
        s.hist_first = Signal(range(p.hist_bins + protocol.HIST_CHUNK))
        s.unit = None  # the extension's unit (its frame's)
        if source is not None:
            s.unit = Signal(range(max(2, source.units)))
        # Time of the frame being built, latched as it starts (see _between_frames).
        s.frame_timestamp = Signal(p.timestamp_bits)
        # The counter RAM's address for frames (see the end of this step).
        s.read_addr = Signal(len(self.counter_addr))
        m.d.comb += self.counter_addr.eq(s.read_addr)
        s.tl_frame = Signal(32)

        # (The sniffer's quiescence is a comparison it does not register: registered here, so
        # that the snapshot latch's enable and data do not wait for its carry chain; it is then
        # a cycle older than the rest of the snapshot.)
        quiescent = Signal()
        m.d.sync += quiescent.eq(status.quiescent)
        # (The latch is loaded the cycle after the snapshot starts, from a flip-flop
        # (``snap_load``): the start's decision reaches no enable of its 96 flip-flops. Whether
        # the snapshot was asked for is noted as it starts, when the request is taken.)
        s.snap_load = Signal()
        s.hist_load = Signal()
        s.ext_load = Signal()
        s.solicited = Signal()
        m.d.sync += [s.snap_load.eq(0), s.hist_load.eq(0), s.ext_load.eq(0)]
        if self.row_strobe:
            m.d.comb += self.row_channel.eq(s.snap_channel)
        snap_flag_bits = Cat(quiescent, status.clear_busy, self.trace_enable, s.solicited)
        # A snapshot's header describes the sniffer at one instant. Its time and epoch are the
        # frame's (latched as every frame starts, in _between_frames) and the snapshot number
        # does not change until the last COUNTERS frame; the sniffer's quiet_since, the flags
        # and the total of lost trace records (which the host checks against the pulses up to
        # that time) are latched into the snapshot latch when the snapshot starts (one source
        # and the shift per flip-flop). The link's receive counters are each copied whole into
        # the COUNTERS frames' loss count register (free in STATUS) as their first byte goes
        # out (Latch):
        # never torn between bytes, at most a frame time later than the timestamp.
        #
        # The multi-byte values a frame latches are shifters (see Shifter): the frame's time,
        # the snapshot latch, the loss count; the response is one in a RAM. The sequence and
        # snapshot numbers, counters of 16 bits, are bytes of the variable-byte multiplexer (a
        # rotating shifter would cost a multiplexer in front of each of their flip-flops).
        s.snap_now = [status.quiet_since, snap_flag_bits, self.lost_total]
        s.snap_latch = snap_latch = Shifter.of("snap_latch", s.snap_now)
        epoch = status.epoch  # (constant during a frame: see clear_pending)
        # (Rotating: a TRACE_BATCH frame sends its base from it first, and the batcher then
        # compares the records' times with it whole again; see TraceBatcher.)
        time_shift = Shifter("frame_timestamp", [p.timestamp_bits], reg=s.frame_timestamp,
                             rotate=True)
        resp = protocol.RESPONSE
        resp_shift = RamShifter("resp", [field.width for _, field in resp], data=self.resp_byte)
        m.d.comb += self.resp_next.eq(resp_shift.shift)
        tl_shift = Shifter("tl_frame", [32], reg=s.tl_frame)
        # The trace records' batcher (TRACE_BATCH's read port). A batch's base is the frame's
        # time register, loaded with the FIFO head's time instead of the sniffer's when the
        # frame is a batch (see _between_frames).
        m.submodules.batcher = s.batcher = TraceBatcher(p)
        wiring.connect(m, wiring.flipped(self.records), s.batcher.records)
        m.d.comb += s.batcher.base.eq(s.frame_timestamp)
        rx_base = n  # the link counter RAM's entries of rx_frames, rx_errors
        snap_fields = {"snapshot": s.snapshot_no, "timestamp": time_shift[0],
                       "epoch": epoch, "quiet_since": snap_latch[0],
                       "flags": snap_latch[1], "trace_lost": snap_latch[2],
                       "rx_frames": Latch(rx_base, 32, tl_shift),
                       "rx_errors": Latch(rx_base + 1, 32, tl_shift)}

        s.frames = {
            FT.RESPONSE: {name: resp_shift[i] for i, (name, _) in enumerate(resp)},
            FT.INFO: self._info_fields(m),
            FT.STATUS: snap_fields,
            FT.COUNTERS: {
                "snapshot": s.snapshot_no, "channel": s.snap_channel,
                "epoch": epoch, "timestamp": time_shift[0], "trace_lost": tl_shift[0],
                "counters": READ_WORDS,
            },
            FT.HISTOGRAM: {
                "channel": s.hist_channel, "first": s.hist_first, "epoch": epoch,
                "timestamp": time_shift[0], "bins": READ_WORDS,
            },
            FT.TRACE_BATCH: {"base": time_shift[0], "records": READ_WORDS},
        }
        if source is not None:
            fields = {source.unit_field: s.unit, "timestamp": time_shift[0]}
            for name, _ in self.wire.payload_layout(p, source.frame_type):
                fields.setdefault(name, READ_WORDS)
            s.frames[source.frame_type] = fields
        # The counter RAM's address for frames: the snapshot's channel (a cycle late, which no
        # COUNTERS frame sees: it reads it from BEGIN on), or a latch's counter, set and held
        # while EXEC reads it (see the walker). A register: no state decode reaches the
        # RAM's address or the loss counters' collision check.
        m.d.sync += s.read_addr.eq(s.snap_channel)

    def _programme(self, m, s):
        """The frame programme's ROM, and the walker's registers that decode its entries."""
        p = self.params
        source = self.source
        # Compile the frames into the programme ROM (one entry per byte) and the table of
        # variable bytes.
        program = FrameProgram(p, s.seq, self.wire)
        for ftype, values in s.frames.items():
            program.add_frame(ftype, values)
        program.finish()
        s.program = self._program = program  # (inspection)
        entry_layout = program.entry_layout
        m.submodules.program = rom = Memory(shape=entry_layout.size, depth=len(program.rom),
                                            init=program.rom)
        rom_rd = rom.read_port()
        s.pc = Signal(range(len(program.rom)))
        m.d.comb += rom_rd.addr.eq(s.pc)
        # The ROM's output is registered before anything decodes it (on the ECP5 a block RAM's
        # clock to output is most of a cycle; on the iCE40 the entry's bits go to many
        # decoders): an entry is then decoded (PICK) two cycles after its address (the walker
        # spends a cycle in NEXT after each byte; the UART needs >= 40). (The read port keeps
        # its data while ``pc`` stays: the iCE40's first variable-byte stage reads it in NEXT.)
        s.entry = Signal(entry_layout)
        m.d.sync += s.entry.eq(rom_rd.data)
        s.rom_entry = entry_layout(rom_rd.data)
        s.ftype = Signal(range(max(FT) + 1), init=FT.RESPONSE)  # (the type's value)
        # The variable byte of the entry, and its shifter's strobe (one-hot), picked in PICK.
        s.var_byte = Signal(8)
        s.shifter_bit = {k: i for i, k in enumerate(program.shifters)}
        s.var_shift = Signal(max(1, len(program.shifters)))
        s.shift_q = Signal.like(s.var_shift)  # the shifters' strobes, a cycle after EXEC sent
        m.d.sync += s.shift_q.eq(0)
        # The entry's decode (PICK), one flag per kind of step: a constant byte, the variable
        # byte, the next byte of a word, a latch's read, a word's first byte; whether it is a
        # word's last entry, whether the walker then jumps back for another word, and which
        # latch (one-hot).
        s.x_vc, s.x_var, s.x_byte, s.x_latch, s.x_word = (Signal(name=f"x_{name}") for name in (
            "vc", "var", "byte", "latch", "word"))
        s.x_word_last = Signal()
        s.x_olast = Signal()
        s.x_more = Signal()
        s.x_latch_sel = Signal(max(1, len(program.latches)))
        s.latch_bits = len(program.latches).bit_length()  # (of a latch entry's ``arg``)
        s.latch_targets = {}  # shifter → (width, the latches read into it)
        for k, latch in enumerate(program.latches):
            width, ks = s.latch_targets.setdefault(latch.into, (latch.width, []))
            if width != latch.width:
                raise ValueError("Latches into one shifter must have one width")
            ks.append(k)
        s.pc_next = Signal.like(s.pc)
        # The variable bytes, one multiplexer input each. Where the ROM's output is not
        # registered (the iCE40), the entry is there in NEXT already, and the multiplexer is
        # split in two stages: NEXT picks one byte of each group of eight (``var_pre``), PICK
        # one of the groups; a RAM shifter's byte (read as its pointer moves, so not yet there
        # in NEXT) goes to PICK's stage directly.
        s.var_table = Cat(*(Cat(byte, Const(0, 8 - len(byte))) for byte in program.var_bytes))
        s.sel_bits = sel_bits = max(1, (len(program.var_bytes) - 1).bit_length())
        s.two_stage = not self.ram_output_registers and sel_bits > 3
        if s.two_stage:
            s.low_bits = low_bits = 3
            groups = 1 << (sel_bits - low_bits)
            s.ram_inputs = [k for k, shifter in program.shifters.items()
                            if isinstance(shifter, RamShifter)]
            s.var_pre = Signal(8 * groups)
            stage_one = [Const(0, 8) if k in s.ram_inputs else byte
                         for k, byte in enumerate(program.var_bytes)]
            stage_one += [Const(0, 8)] * (8 * groups - len(stage_one))
            s.group_tables = [Cat(*(Cat(byte, Const(0, 8 - len(byte)))
                                    for byte in stage_one[8 * g:8 * g + 8]))
                              for g in range(groups)]
            s.var_group = Signal(sel_bits - low_bits)
            s.var_ram = Signal(max(1, len(s.ram_inputs)))
        s.obyte = Signal(8)
        s.olast = Signal()
        # A word read from a read port is sent from the port's payload, which its source holds
        # from the transfer until the next request: byte ``word_byte`` of it.
        s.word = self.read_resp.payload
        if source is not None:
            s.word = Mux(s.ftype == source.frame_type, self.ext_read_resp.payload, s.word)
        s.word_byte = Signal(range(8))
        s.latch_wait = Signal(2)
        s.word_index = Signal(range(max(p.counters_per_channel, protocol.HIST_CHUNK,
                                        protocol.TRACE_BATCH_RECORDS,
                                        source.words if source is not None else 0) + 1))
        s.got = Signal()  # the word's response has arrived (its first byte is sent next)
        # A batch record's byte was sent: the batcher shifts the next in (the cycle after, from
        # this flip-flop; the walker picks the next byte three cycles later or more).
        s.batch_shift = Signal()
        m.d.sync += s.batch_shift.eq(0)
        m.d.comb += s.batcher.shift.eq(s.batch_shift)

    def _read_ports(self, m, s):
        """The read ports: the sniffer's (counters, histogram bins) and the extension's.

        A word's request is registered in PICK (its payload, and ``valid`` in a flip-flop of the
        port, ``pending``), held until the port takes it, and the port's response awaited with a
        flip-flop (``waiting``: the port's ``ready``); no state decode reaches a port.
        """
        source = self.source
        is_hist = s.ftype == FT.HISTOGRAM
        s.requests = [
            self.read_req.payload.space.eq(Mux(is_hist, Space.HISTOGRAM, Space.COUNTERS)),
            self.read_req.payload.channel.eq(Mux(is_hist, s.hist_channel, s.snap_channel)),
            self.read_req.payload.index.eq(Mux(is_hist, s.hist_first + s.word_index,
                                               s.word_index)),
        ]
        s.ports = [((FT.COUNTERS, FT.HISTOGRAM), self.read_req, self.read_resp),
                   ((FT.TRACE_BATCH,), s.batcher.req, s.batcher.resp)]
        if source is not None:
            s.requests += [self.ext_read_req.payload.unit.eq(s.unit),
                           self.ext_read_req.payload.index.eq(s.word_index)]
            s.ports.append(((source.frame_type,), self.ext_read_req, self.ext_read_resp))
        s.pending = [Signal(name=f"pending_{k}") for k in range(len(s.ports))]
        waiting = [Signal(name=f"waiting_{k}") for k in range(len(s.ports))]
        for k, (_, req, resp) in enumerate(s.ports):
            m.d.comb += [req.valid.eq(s.pending[k]), resp.ready.eq(waiting[k])]
            with m.If(s.pending[k] & req.ready):
                m.d.sync += [s.pending[k].eq(0), waiting[k].eq(1)]
            with m.If(waiting[k] & resp.valid):
                m.d.sync += [waiting[k].eq(0), s.got.eq(1)]

    def _choice(self, m, s):
        """The next frame, chosen in every cycle and registered, and where a burst stands."""
        p = self.params
        n = p.channels
        source = self.source
        # A frame starts from one place: its type is chosen and registered (``starting``), and
        # its first programme address comes from the registered type (BEGIN).
        s.starting = Signal()
        s.next_ftype = Signal(range(max(FT) + 1))
        # The bursts' states (the next frame of a snapshot, of the histograms, of the
        # extension's frames) and the frame each resumes with; a flag each: a frame sent
        # between two of its frames returns there (see _frame_end).
        s.bursts = {"SNAP_NEXT": FT.COUNTERS, "HIST_NEXT": FT.HISTOGRAM}
        if source is not None:
            s.bursts["EXT_NEXT"] = source.frame_type
        s.back = {state: Signal(name=f"back_{state.lower()}") for state in s.bursts}
        # A TRACE_BATCH frame between two frames of a burst: every other gap, while the FIFO
        # has records (from flip-flops: ``records.valid`` is the FIFO's).
        s.batch_turn = Signal()
        s.batch_between = Signal()
        if self.batches_in_bursts:
            m.d.comb += s.batch_between.eq(s.batch_turn & self.records.valid)
        s.is_batch = Signal()  # the frame is a TRACE_BATCH (its words' bytes: the batcher's)
        with m.If(s.starting):
            m.d.sync += [s.ftype.eq(s.next_ftype),
                         s.is_batch.eq(s.next_ftype == FT.TRACE_BATCH)]

        # The next frame, chosen in every cycle and registered (the choice reaches no frame
        # start's logic in the cycle it is made). Priority at a frame boundary: RESPONSE (once
        # written), INFO, a snapshot, histograms, the extension's frames, TRACE_BATCH.
        s.pick = pick = Signal(range(max(FT) + 1))
        s.pick_any = pick_any = Signal()
        # (The choices that start a burst, one flag each.)
        s.pick_snap = Signal()
        s.pick_hist = Signal()
        s.pick_ext = Signal()
        s.pick_batch = Signal()
        s.idle_seen = Signal()  # the frame builder was idle in the previous cycle
        m.d.sync += [pick_any.eq(1), s.idle_seen.eq(0), s.pick_snap.eq(0), s.pick_hist.eq(0),
                     s.pick_ext.eq(0), s.pick_batch.eq(0)]
        with m.If(s.resp_pending):
            m.d.sync += [pick.eq(FT.RESPONSE), pick_any.eq(~self.resp_writing)]
        with m.Elif(s.info_pending):
            m.d.sync += pick.eq(FT.INFO)
        with m.Elif(s.snap_request):
            m.d.sync += [pick.eq(FT.STATUS), s.pick_snap.eq(1)]
        with m.Elif(s.hist_request):
            m.d.sync += [pick.eq(FT.HISTOGRAM), s.pick_hist.eq(1)]
        if source is not None:
            with m.Elif(s.ext_request):
                m.d.sync += [pick.eq(source.frame_type), s.pick_ext.eq(1)]
        with m.Elif(self.records.valid):
            m.d.sync += [pick.eq(FT.TRACE_BATCH), s.pick_batch.eq(1)]
        with m.Else():
            m.d.sync += pick_any.eq(0)

        # Where a burst stands, registered as its counters change (DONE, at least a frame after
        # the change, decides from flip-flops).
        s.snap_last = Signal()
        s.hist_chunk_last = Signal()
        s.unit_last = Signal()
        s.hist_channel_last = Signal()
        m.d.sync += [s.snap_last.eq(s.snap_channel == n - 1),
                     s.hist_chunk_last.eq(s.hist_first + protocol.HIST_CHUNK >= p.hist_bins),
                     s.hist_channel_last.eq(s.hist_channel == n - 1)]
        if source is not None:
            m.d.sync += s.unit_last.eq(s.unit == source.units - 1)

    def _start(self, m, s, frame):
        """Start frame ``frame`` (its type registered; its first entry fetched from BEGIN)."""
        m.d.comb += [s.starting.eq(1), s.next_ftype.eq(frame)]
        m.next = "BEGIN"

    def _frame_start(self, m, s):
        """The walker's states BEGIN and IDLE: a frame starts."""
        with m.State("BEGIN"):
            with m.Switch(s.ftype):
                for frame, address in s.program.start.items():
                    with m.Case(frame):
                        m.d.sync += s.pc.eq(address)
            m.next = "FETCH"
        with m.State("IDLE"):
            # The frame chosen a cycle ago (``pick``, from a cycle spent here: after a
            # TRACE_BATCH frame the FIFO's state is the new one), unless a clear is pending.
            m.d.sync += s.idle_seen.eq(1)
            with m.If(s.idle_seen & s.pick_any & ~self.clear_pending):
                self._start(m, s, s.pick)
                with m.If(s.pick_snap):
                    m.d.sync += [s.snap_request.eq(0), s.snap_solicited.eq(0),
                                 s.solicited.eq(s.snap_solicited), s.snap_load.eq(1)]
                with m.If(s.pick_hist):
                    m.d.sync += [s.hist_request.eq(0), s.hist_load.eq(1)]
                if self.source is not None:
                    with m.If(s.pick_ext):
                        m.d.sync += [s.ext_request.eq(0), s.ext_load.eq(1)]

    def _byte_steps(self, m, s):
        """The walker's states FETCH to SEND: one byte of the frame each round."""
        program = s.program
        with m.State("FETCH"):
            # The ROM's read port answers one cycle after the address. The loss counter of
            # the snapshot's channel is latched here too, once the read port has read it
            # (not a dropped record's channel) in a cycle where that counter was not being
            # written (a channel drops at most one record per scan round, so this comes).
            with m.If(self.counter_valid):
                with m.If(s.ftype == FT.COUNTERS):
                    m.d.sync += s.tl_frame.eq(self.counter_data)
                m.next = "NEXT"
        with m.State("SKIP"):
            # (No byte sent: as SEND, a cycle for the ROM to read the new ``pc``.)
            m.next = "NEXT"
        with m.State("NEXT"):
            # The registered entry of ``pc`` arrives (on the iCE40 the variable byte's first
            # stage reads the ROM's output directly).
            if s.two_stage:
                arg = s.rom_entry.arg
                m.d.sync += [s.var_pre.eq(Cat(table.word_select(arg[:s.low_bits], 8)
                                              for table in s.group_tables)),
                             s.var_group.eq(arg[s.low_bits:s.sel_bits]),
                             s.var_ram.eq(Cat(arg == k for k in s.ram_inputs))]
            m.next = "PICK"
        with m.State("PICK"):
            self._pick(m, s)
            m.next = "EXEC"
        with m.State("EXEC"):
            # Every byte but a word's first is sent at once; the walker then moves on (one
            # place for it: ``advance``). One word's bytes are programmed once: after the
            # word's last byte the walker jumps back for the next word of the array (a READ
            # entry's ``arg`` holds the word count less one and the address of its first
            # entry): ``pc_next``, set in PICK. A word's bytes are its port's payload, byte
            # ``word_byte`` (0 for the first, sent once the response is there: ``got``).
            advance = Signal()
            m.d.comb += advance.eq(s.x_vc | s.x_byte | (s.x_word & s.got))
            m.d.sync += s.olast.eq(s.x_olast)
            with m.If(advance):
                m.d.sync += [s.pc.eq(s.pc_next),
                             s.obyte.eq(Mux(s.x_vc, s.var_byte,
                                            Mux(s.is_batch, s.batcher.resp.payload,
                                                s.word.word_select(s.word_byte, 8))))]
                with m.If(~s.x_vc & s.is_batch):
                    m.d.sync += s.batch_shift.eq(1)  # (the batcher's next byte)
                with m.If(s.x_word_last):
                    # (Back to 0 after an array's last word: every array starts there.)
                    m.d.sync += [s.word_index.eq(Mux(s.x_more, s.word_index + 1, 0)),
                                 s.word_byte.eq(0)]
                with m.Elif(~s.x_vc):
                    m.d.sync += s.word_byte.eq(s.word_byte + 1)
                m.next = "SEND"
            with m.If(s.x_var):
                # (The shifter moves on the cycle after, from a registered strobe: its
                # byte was picked in PICK, and its next is picked cycles later.)
                m.d.sync += s.shift_q.eq(s.var_shift)
            with m.If(s.x_word & s.got):
                m.d.sync += s.got.eq(0)
            with m.If(s.x_latch):
                # A latched counter: read it (its address is set in the first cycle here,
                # from flip-flops, and held; from the third the port's data is the
                # counter's once ``counter_valid``) and copy it whole into its shifter, which
                # sends it (the next entries); this entry sends no byte.
                m.d.sync += s.latch_wait.eq(Cat(1, s.latch_wait[0]))
                for k, latch in enumerate(program.latches):
                    with m.If(s.x_latch_sel[k]):
                        m.d.sync += s.read_addr.eq(latch.address)
                with m.If(s.latch_wait[1] & self.counter_valid):
                    m.d.sync += [s.latch_wait.eq(0), s.pc.eq(s.pc_next)]
                    m.next = "SKIP"
                    # (Into each latch's shifter; where every latch has the same one, no
                    # choice among them reaches its enable.)
                    for into, (width, ks) in s.latch_targets.items():
                        chosen = (Cat(s.x_latch_sel[k] for k in ks).any()
                                  if len(s.latch_targets) > 1 else 1)
                        with m.If(chosen):
                            m.d.sync += into.reg.eq(self.counter_data[:width])
        with m.State("SEND"):
            m.d.comb += [self.body.valid.eq(1), self.body.payload.data.eq(s.obyte),
                         self.body.payload.last.eq(s.olast)]
            with m.If(self.body.ready):
                with m.If(s.olast):
                    m.next = "DONE"
                with m.Else():
                    m.next = "NEXT"

    def _pick(self, m, s):
        """PICK: the entry's byte and its decode, registered for EXEC."""
        program = s.program
        entry = s.entry
        # The variable byte the entry names (or its constant) is picked into a register
        # of its own, with its shifter's strobe: EXEC then only chooses between this byte
        # and a word's byte (few logic levels to ``obyte``).
        m.d.sync += s.var_shift.eq(0)
        if s.two_stage:
            picked = s.var_pre.word_select(s.var_group, 8)
            for k, index in enumerate(s.ram_inputs):
                picked = Mux(s.var_ram[k], program.var_bytes[index], picked)
        else:
            # (A binary tree of multiplexers on the index, not a decoded one.)
            picked = s.var_table.word_select(entry.arg[:s.sel_bits], 8)
        m.d.sync += s.var_byte.eq(Mux(entry.kind == Source.CONST, entry.arg[:8], picked))
        with m.Switch(entry.arg):
            for k in program.shifters:
                with m.Case(k):
                    m.d.sync += s.var_shift.eq(1 << s.shifter_bit[k])
        # The entry is decoded here too, into flags (EXEC starts from flip-flops), and
        # its next programme address, its word's request and its latch's address are
        # registered.
        read = entry.kind == Source.READ
        more = read & entry.word_last & (s.word_index != entry.arg[:COUNT_BITS])
        is_word = read & entry.word_first & ~entry.latch
        is_latch = entry.latch
        m.d.sync += [
            s.x_vc.eq((entry.kind == Source.CONST) | (entry.kind == Source.VAR)),
            s.x_byte.eq(read & ~entry.word_first),
            s.x_var.eq(entry.kind == Source.VAR),
            s.x_latch.eq(is_latch),
            s.x_word.eq(is_word),
            s.x_word_last.eq(read & entry.word_last),
            s.x_olast.eq(entry.last & ~more),
            s.x_more.eq(more),
            s.x_latch_sel.eq(Cat(entry.arg[:s.latch_bits] == k
                                 for k in range(1, len(program.latches) + 1))),
            s.pc_next.eq(Mux(more, entry.arg[COUNT_BITS:], s.pc + 1)),
            *s.requests,
        ]
        for k, (frames_of_port, _, _) in enumerate(s.ports):
            m.d.sync += s.pending[k].eq(is_word & Cat(s.ftype == f
                                                      for f in frames_of_port).any())

    def _frame_end(self, m, s):
        """The walker's states DONE and the bursts' NEXT states: a frame ends, and the next of
        its burst starts. Returns the bursts' states."""
        source = self.source
        with m.State("DONE"):
            m.d.sync += s.seq.eq(s.seq + 1)
            m.next = "IDLE"
            with m.Switch(s.ftype):
                with m.Case(FT.RESPONSE):
                    m.d.sync += s.resp_pending.eq(0)
                    self._back_to_burst(m, s)
                with m.Case(FT.TRACE_BATCH):
                    self._back_to_burst(m, s)
                with m.Case(FT.INFO):
                    m.d.sync += s.info_pending.eq(0)
                with m.Case(FT.STATUS):
                    m.next = "SNAP_NEXT"
                with m.Case(FT.COUNTERS):
                    if self.row_strobe:
                        m.d.comb += self.row_sent.eq(1)
                    m.d.sync += s.snap_channel.eq(s.snap_channel + 1)
                    with m.If(s.snap_last):
                        m.d.sync += s.snapshot_no.eq(s.snapshot_no + 1)
                    with m.Else():
                        m.next = "SNAP_NEXT"
                with m.Case(FT.HISTOGRAM):
                    m.next = "HIST_NEXT"
                    with m.If(s.hist_chunk_last):
                        m.d.sync += [s.hist_first.eq(0), s.hist_channel.eq(s.hist_channel + 1)]
                        with m.If(s.hist_channel_last):
                            m.next = "IDLE"
                    with m.Else():
                        m.d.sync += s.hist_first.eq(s.hist_first + protocol.HIST_CHUNK)
                if source is not None:
                    with m.Case(source.frame_type):
                        with m.If(~s.unit_last):
                            m.d.sync += s.unit.eq(s.unit + 1)
                            m.next = "EXT_NEXT"
        # Between the frames of a burst (snapshot, histograms, an extension's frames), a
        # pending response goes first, so the host never waits long for a command's answer,
        # and a TRACE_BATCH frame goes between every two of the burst's frames while the trace
        # FIFO has records, so that a burst (a 64-channel snapshot holds the link for 20 ms at
        # 3 Mbaud) does not fill the FIFO; after either the burst goes on where it was
        # (``s.back``, one flag per burst state). Nothing starts while a clear is pending.
        for state, resume in s.bursts.items():
            with m.State(state):
                with m.If(self.clear_pending):
                    pass
                with m.Elif(s.resp_pending):
                    with m.If(~self.resp_writing):
                        self._start(m, s, FT.RESPONSE)
                        m.d.sync += s.back[state].eq(1)
                with m.Elif(s.batch_between):
                    self._start(m, s, FT.TRACE_BATCH)
                    m.d.sync += [s.back[state].eq(1), s.batch_turn.eq(0)]
                with m.Else():
                    self._start(m, s, resume)
                    m.d.sync += s.batch_turn.eq(1)
        return s.bursts

    def _back_to_burst(self, m, s):
        """At the end of a frame sent between a burst's frames: back to the burst's state."""
        for state, flag in s.back.items():
            with m.If(flag):
                m.next = state
        m.d.sync += [flag.eq(0) for flag in s.back.values()]

    def _between_frames(self, m, s, frames_fsm, bursts):
        """The shifters' moves, the loads as a burst starts, and the frame time."""
        program = s.program
        m.d.comb += Cat(shifter.shift for shifter in program.shifters.values()).eq(s.shift_q)
        for shifter in program.shifters.values():
            with m.If(shifter.shift):
                m.d.sync += shifter.advance()
        # A burst's first frame starts from its first channel (or unit), set in the cycle
        # after the start from the registered strobes (BEGIN: no read uses them before PICK).
        with m.If(s.snap_load):
            m.d.sync += [s.snap_latch.load(s.snap_now), s.snap_channel.eq(0)]
        with m.If(s.hist_load):
            m.d.sync += [s.hist_channel.eq(0), s.hist_first.eq(0)]
        if self.source is not None:
            with m.If(s.ext_load):
                m.d.sync += s.unit.eq(0)
        # Between frames, keep the frame time current; it freezes when a frame starts (its first
        # byte is fetched in the cycle after leaving these states).
        between = ["IDLE", *bursts]
        m.d.comb += self.frame_idle.eq(Cat(frames_fsm.ongoing(state) for state in between).any())
        # A TRACE_BATCH frame's time is its base: the time of the FIFO's head (the batch's
        # first record), when the batch is the frame chosen in IDLE or between a burst's frames.
        head_time = Signal()
        m.d.comb += head_time.eq(Mux(frames_fsm.ongoing("IDLE"), s.pick_batch,
                                     s.batch_between & ~s.resp_pending))
        with m.If(self.frame_idle):
            m.d.sync += s.frame_timestamp.eq(Mux(head_time, self.records.payload.timestamp,
                                                 self.status.timestamp))

    def _info_fields(self, m):
        """INFO's fields: the constants, the prescaler and the tick period live."""
        layout = self.wire.info_layout(self.params)
        fields = {name: Const(value if name != "board" else
                              int.from_bytes(bytes(value), "little"),
                              data.Layout.cast(layout[name].shape).size
                              if isinstance(layout[name].shape, data.Layout)
                              else layout[name].shape)
                  for name, value in self.info.items()}
        fields["prescaler"] = self.prescaler
        fields["tick_period_ps"] = self._tick_period(m, self.prescaler)
        return fields

    def _tick_period(self, m, prescaler):
        """INFO's ``tick_period_ps`` (:func:`protocol.tick_period_ps`) of the live prescaler.

        A constant times the register, registered: one multiplier with registered input and
        output, which the board builds map to a DSP block (``synth_ice40 -dsp``; the ECP5's
        are used by default). The product follows the register two cycles later, long before
        an INFO frame that a write is followed by could send it. Returns the product.
        """
        period = protocol.clock_period_ps(self.clock_hz)
        # The multiplier's input is registered too (a DSP block's input register).
        # (Neither register is reset, so that ``synth_ice40 -dsp`` packs both into the DSP
        # block's own input and output registers: no logic cells.)
        multiplier = Signal(len(prescaler), reset_less=True)
        m.d.sync += multiplier.eq(Cat(prescaler[0] | (prescaler == 0), prescaler[1:]))  # 0 as 1
        # As wide as the largest product (INFO's field is 48 bits; its high bytes are zero).
        product = Signal(min(48, len(prescaler) + period.bit_length()), reset_less=True)
        m.d.sync += product.eq(multiplier * period)
        return product

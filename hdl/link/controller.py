"""The link controller: register file, command execution and frame serialisation.

Frames are serialised field by field from the layouts of ``protocol.py``: every field of a
payload layout is bound here to a value (a constant, a register, a live status signal, or a word
read from the sniffer's read port) and sent least significant byte first. A layout change in
``protocol.py`` therefore changes the gateware and the host decoder together; a field left
unbound is an elaboration error.
"""

import hashlib

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import config_layout, read_request_layout
from ..rb_sniffer.layouts import status_layout as sniffer_status_layout
from ..rb_sniffer.params import SnifferParams, Space
from ..rb_sniffer.sniffer import TraceSignature
from . import protocol
from .framing import FrameByte, decoded_command_layout

__all__ = ["LinkController", "build_id"]


def build_id(params, clock_hz, uart_divisor, board):
    """A 32-bit identifier of the build (parameters, clock, protocol), for the INFO frame."""
    text = repr((params, clock_hz, uart_divisor, board, protocol.PROTOCOL_VERSION,
                 protocol.GATEWARE_VERSION))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


class _Read:
    """A field whose value is read word by word: from the sniffer (``space`` a :class:`Space`)
    or, with ``space=None``, from the emulator's ground-truth port (``channel`` is the die)."""

    def __init__(self, space, channel, index):
        self.space, self.channel, self.index = space, channel, index


class LinkController(wiring.Component):
    """Execute host commands and send INFO, snapshots, histograms, traces and responses.

    Parameters
    ----------
    params : SnifferParams
    clock_hz : int
        System clock frequency (reported in INFO; sets the default snapshot period).
    uart_divisor : int
        Reported in INFO.
    board : str
        Board name (up to 16 ASCII characters), reported in INFO.
    snapshot_ms : int
        Default period of unsolicited snapshots.
    config : SnifferConfig, optional
        The sniffer configuration the device boots with (reset values of its registers).
    emu : EmuParams, optional
        A NAND emulator on the same chip: adds its registers, the traffic generator's, the
        READ_TRUTH command and the ports below.
    emu_config, traffic : EmuConfig, TrafficConfig, optional
        Their boot configuration.

    Members
    -------
    command : In(stream.Signature(decoded_command_layout()))
        Commands from the :class:`~.framing.CommandDecoder`.
    body : Out(stream.Signature(FrameByte))
        Frame bodies for the :class:`~.framing.FrameEncoder`.
    rx_good, rx_bad : In(1)
        Strobes counting received frames and receive errors (bad frames, UART errors).
    cfg : Out(config_layout)
        The sniffer's configuration registers.
    clear : Out(1)
        Strobe to the sniffer.
    sniffer_status : In(status_layout)
    read_req, read_resp : the sniffer's read port (this controller is its only user).
    trace : In(TraceSignature)
        The sniffer's trace strobe.
    emu_cfg, traffic_cfg, traffic_start, traffic_stop, traffic_status, emu_read_req,
    emu_read_resp : (with ``emu`` only) the emulator's and traffic generator's ports.
    """

    def __init__(self, params, *, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None, emu=None, emu_config=None, traffic=None):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if not isinstance(clock_hz, int) or clock_hz <= 0:
            raise ValueError(f"Clock frequency must be a positive integer (Hz), not {clock_hz!r}")
        board_bytes = board.encode("ascii") if isinstance(board, str) else None
        if board_bytes is None or len(board_bytes) > protocol.BOARD_NAME_BYTES:
            raise ValueError(f"Board name must be an ASCII string of at most "
                             f"{protocol.BOARD_NAME_BYTES} characters, not {board!r}")
        self.params = params
        self.clock_hz = clock_hz
        self.uart_divisor = uart_divisor
        self.board = board
        self.snapshot_period = clock_hz * snapshot_ms // 1000
        if self.snapshot_period >= 1 << 32:
            raise ValueError(f"Snapshot period of {snapshot_ms} ms does not fit 32 bits of "
                             f"clock cycles at {clock_hz} Hz")
        self.emu = emu
        self.emu_link = (protocol.EmuLink.from_params(emu, emu_config, traffic)
                         if emu is not None else None)
        self.registers = protocol.register_map(params, snapshot_period=self.snapshot_period,
                                               config=config, emu=self.emu_link)
        ports = {}
        if emu is not None:
            from ..nand_emu import layouts as emu_layouts
            ports = {
                "emu_cfg": Out(emu_layouts.config_layout(emu)),
                "traffic_cfg": Out(emu_layouts.traffic_layout(emu)),
                "traffic_start": Out(1),
                "traffic_stop": Out(1),
                "traffic_status": In(emu_layouts.traffic_status_layout(emu)),
                "emu_read_req": Out(stream.Signature(emu_layouts.read_request_layout(emu))),
                "emu_read_resp": In(stream.Signature(emu.counter_bits)),
            }
        super().__init__({
            **ports,
            "command": In(stream.Signature(decoded_command_layout())),
            "body": Out(stream.Signature(FrameByte)),
            "rx_good": In(1),
            "rx_bad": In(1),
            "cfg": Out(config_layout(params)),
            "clear": Out(1),
            "sniffer_status": In(sniffer_status_layout(params)),
            "read_req": Out(stream.Signature(read_request_layout(params))),
            "read_resp": In(stream.Signature(params.counter_bits)),
            "trace": In(TraceSignature(params)),
        })

    # ---- register file ------------------------------------------------------------------------

    def _register_target(self, reg, cfg, link):
        """The signal slice a register reads and writes."""
        if reg.field.startswith(("link.", "emu.")):
            target = link[reg.field]
            return target[reg.shift:reg.shift + 32] if reg.field in ("emu.cfg", "emu.traffic") \
                else target
        value = cfg
        for part in reg.field.split("."):
            value = value[int(part)] if part.isdigit() else getattr(value, part)
        value = value.as_value() if hasattr(value, "as_value") else value
        return value[reg.shift:reg.shift + 32]

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels

        # Link-level registers (and the emulator's, when there is one).
        link = {
            "link.id": Const(protocol.ID_MAGIC, 32),
            "link.snapshot_period": Signal(32, init=self.snapshot_period),
            "link.hist_period": Signal(16),
            "link.trace_enable": Signal(),
        }
        if self.emu is not None:
            emu_link = self.emu_link
            link.update({
                "emu.cfg": Signal(emu_link.cfg_bits, init=emu_link.cfg_reset),
                "emu.traffic": Signal(emu_link.traffic_bits, init=emu_link.traffic_reset),
                "emu.control": Signal(2),
                "emu.busy": self.traffic_status.busy,
                "emu.steps": self.traffic_status.steps,
            })
            # TRAFFIC_CONTROL is a pair of strobes: a write sets it for one cycle (the write
            # statement below, in the command FSM, overrides this clear).
            m.d.sync += link["emu.control"].eq(0)
            m.d.comb += [
                self.emu_cfg.as_value().eq(link["emu.cfg"]),
                self.traffic_cfg.as_value().eq(link["emu.traffic"]),
                self.traffic_start.eq(link["emu.control"][0]),
                self.traffic_stop.eq(link["emu.control"][1]),
            ]
        # The sniffer's configuration registers, initialised from the register map's resets.
        layout = config_layout(p)
        init_value = 0
        for reg in self.registers:
            if not reg.field.startswith(("link.", "emu.")):
                width = min(32, self._field_width(reg) - reg.shift)
                init_value |= (reg.reset & ((1 << width) - 1)) << self._cfg_offset(reg)
        cfg_reg = layout(Signal(layout.size, init=init_value, name="cfg_reg"))
        m.d.comb += self.cfg.eq(cfg_reg)
        targets = {reg.address: (reg, self._register_target(reg, cfg_reg, link))
                   for reg in self.registers}

        # ---- counters of the link itself ----------------------------------------------------
        rx_frames = Signal(32)
        rx_errors = Signal(32)
        with m.If(self.rx_good):
            m.d.sync += rx_frames.eq(rx_frames + 1)
        with m.If(self.rx_bad):
            m.d.sync += rx_errors.eq(rx_errors + 1)

        # ---- trace FIFO and per-channel loss counters ---------------------------------------
        trace_shape = data.Layout.cast(self.trace.payload.shape())
        m.submodules.trace_fifo = trace_fifo = fifo.SyncFIFOBuffered(width=trace_shape.size,
                                                                    depth=16)
        trace_lost_total = Signal(32)
        m.submodules.trace_lost = trace_lost = Memory(shape=32, depth=max(2, n), init=[])
        tl_wr = trace_lost.write_port()
        tl_rmw = trace_lost.read_port()
        tl_frame = trace_lost.read_port()
        lost_pending = Signal()
        lost_channel = Signal(p.channel_bits)
        push = self.trace.valid & link["link.trace_enable"]
        m.d.comb += [trace_fifo.w_data.eq(self.trace.payload.as_value()),
                     trace_fifo.w_en.eq(push)]
        m.d.sync += lost_pending.eq(push & ~trace_fifo.w_rdy)
        with m.If(push & ~trace_fifo.w_rdy):
            m.d.sync += [trace_lost_total.eq(trace_lost_total + 1),
                         lost_channel.eq(self.trace.payload.channel)]
        # Read-modify-write of the channel's loss counter: read now, write next cycle. Trace
        # strobes are at least two cycles apart, so no two updates overlap.
        m.d.comb += [
            tl_rmw.addr.eq(self.trace.payload.channel),
            tl_wr.addr.eq(lost_channel),
            tl_wr.data.eq(tl_rmw.data + 1),
            tl_wr.en.eq(lost_pending),
        ]

        # ---- command execution --------------------------------------------------------------
        # Time and epoch of the frame being built, latched as it starts. A clear takes effect
        # only between frames, and no frame starts while it is pending, so that no frame mixes
        # counts of two epochs.
        frame_epoch = Signal(16)
        frame_timestamp = Signal(p.timestamp_bits)
        frame_idle = Signal()
        clear_pending = Signal()
        resp = protocol.RESPONSE
        resp_pending = Signal()
        resp_data = Signal(resp)
        info_pending = Signal()
        truth_request = Signal()
        snap_request = Signal()  # set by the timer or a command, taken by the frame builder
        snap_solicited = Signal()
        hist_request = Signal()
        clear_epoch = Signal(16)

        cmd = self.command.payload.command
        read_value = Signal(32)
        address_ok = Signal()
        writable = Signal()
        with m.Switch(cmd.address):
            for address, (reg, target) in targets.items():
                with m.Case(address):
                    m.d.comb += [read_value.eq(target), address_ok.eq(1),
                                 writable.eq(reg.access is protocol.Access.RW)]

        def respond(status, value=0):
            m.d.sync += [
                resp_pending.eq(1),
                resp_data.tag.eq(Mux(status == protocol.ResponseStatus.BAD_FRAME, 0xFFFF, cmd.tag)),
                resp_data.opcode.eq(cmd.opcode),
                resp_data.status.eq(status),
                resp_data.address.eq(cmd.address),
                resp_data.value.eq(value),
            ]

        with m.FSM(name="command"):
            with m.State("WAIT"):
                with m.If(self.command.valid & ~resp_pending):
                    m.d.comb += self.command.ready.eq(1)
                    with m.If(self.command.payload.status != protocol.ResponseStatus.OK):
                        respond(protocol.ResponseStatus.BAD_FRAME)
                    with m.Else():
                        with m.Switch(cmd.opcode):
                            with m.Case(protocol.Opcode.PING):
                                respond(protocol.ResponseStatus.OK, cmd.value)
                            with m.Case(protocol.Opcode.READ_INFO):
                                respond(protocol.ResponseStatus.OK)
                                m.d.sync += info_pending.eq(1)
                            with m.Case(protocol.Opcode.READ_REG):
                                respond(Mux(address_ok, protocol.ResponseStatus.OK,
                                            protocol.ResponseStatus.BAD_ADDRESS), read_value)
                            with m.Case(protocol.Opcode.WRITE_REG):
                                with m.If(~address_ok):
                                    respond(protocol.ResponseStatus.BAD_ADDRESS)
                                with m.Elif(~writable):
                                    respond(protocol.ResponseStatus.READ_ONLY, read_value)
                                with m.Else():
                                    with m.Switch(cmd.address):
                                        for address, (reg, target) in targets.items():
                                            if reg.access is protocol.Access.RW:
                                                with m.Case(address):
                                                    m.d.sync += target.eq(cmd.value)
                                    m.next = "WRITTEN"
                            with m.Case(protocol.Opcode.SNAPSHOT):
                                respond(protocol.ResponseStatus.OK)
                                m.d.sync += [snap_request.eq(1), snap_solicited.eq(1)]
                            with m.Case(protocol.Opcode.READ_HISTOGRAMS):
                                respond(protocol.ResponseStatus.OK)
                                m.d.sync += hist_request.eq(1)
                            if self.emu is not None:
                                with m.Case(protocol.Opcode.READ_TRUTH):
                                    respond(protocol.ResponseStatus.OK)
                                    m.d.sync += truth_request.eq(1)
                            with m.Case(protocol.Opcode.CLEAR):
                                m.next = "CLEAR_WAIT"
                            with m.Default():
                                respond(protocol.ResponseStatus.UNKNOWN_OPCODE)
            with m.State("WRITTEN"):
                # Answer with the value as read back (a field narrower than 32 bits truncates).
                m.d.sync += [
                    resp_pending.eq(1),
                    resp_data.tag.eq(cmd.tag),
                    resp_data.opcode.eq(cmd.opcode),
                    resp_data.status.eq(protocol.ResponseStatus.OK),
                    resp_data.address.eq(cmd.address),
                    resp_data.value.eq(read_value),
                ]
                m.next = "WAIT"
            with m.State("CLEAR_WAIT"):
                # Only between frames, so that no frame mixes counts of two epochs.
                with m.If(frame_idle):
                    m.d.comb += self.clear.eq(1)
                    m.d.sync += clear_epoch.eq(self.sniffer_status.epoch)
                    m.next = "CLEARING"
            with m.State("CLEARING"):
                m.d.comb += clear_pending.eq(1)
                with m.If(self.sniffer_status.epoch != clear_epoch):
                    m.d.sync += [
                        resp_pending.eq(1),
                        resp_data.tag.eq(cmd.tag),
                        resp_data.opcode.eq(cmd.opcode),
                        resp_data.status.eq(protocol.ResponseStatus.OK),
                        resp_data.address.eq(0),
                        resp_data.value.eq(self.sniffer_status.epoch),
                    ]
                    m.next = "WAIT"
        # The command register must hold its value through WRITTEN and CLEARING: the decoder's
        # payload is stable until the next frame completes, and the host sends one at a time.

        # ---- periodic snapshots and histograms ---------------------------------------------
        period_count = Signal(32)
        hist_count = Signal(16)
        periodic = Signal()
        with m.If((link["link.snapshot_period"] != 0) &
                  (period_count + 1 >= link["link.snapshot_period"])):
            m.d.sync += period_count.eq(0)
            m.d.comb += periodic.eq(1)
        with m.Else():
            m.d.sync += period_count.eq(period_count + 1)
        with m.If(periodic):
            m.d.sync += snap_request.eq(1)
            with m.If(link["link.hist_period"] != 0):
                with m.If(hist_count + 1 >= link["link.hist_period"]):
                    m.d.sync += [hist_count.eq(0), hist_request.eq(1)]
                with m.Else():
                    m.d.sync += hist_count.eq(hist_count + 1)

        # ---- frame builder ------------------------------------------------------------------
        seq = Signal(16)
        snapshot_no = Signal(16)
        snap_channel = Signal(p.channel_bits)
        hist_channel = Signal(p.channel_bits)
        hist_first = Signal(16)
        truth_die = Signal(8)
        word = Signal(range(max(p.counters_per_channel, protocol.HIST_CHUNK) + 1))
        shift = Signal(64)
        left = Signal(range(9))
        loaded = Signal()
        trace_head = Signal(trace_shape)
        m.d.comb += trace_head.as_value().eq(trace_fifo.r_data)

        status = self.sniffer_status
        snap_flag_bits = Cat(status.quiescent, status.clear_busy, link["link.trace_enable"],
                             snap_solicited)
        # A snapshot's header describes one instant: its fields are latched together when the
        # snapshot starts, not sampled one by one as the bytes go out.
        status_layout = protocol.status_layout(p)
        snap_latch = {name: Signal(field.shape, name=f"snap_{name}")
                      for name, field in status_layout}
        snap_now = {
            "snapshot": snapshot_no, "timestamp": status.timestamp,
            "quiet_since": status.quiet_since, "epoch": status.epoch,
            "flags": snap_flag_bits, "rx_frames": rx_frames, "rx_errors": rx_errors,
            "trace_lost": trace_lost_total,
        }

        frames = {
            protocol.FrameType.RESPONSE: {name: resp_data[name] for name in
                                          ("tag", "opcode", "status", "address", "value")},
            protocol.FrameType.INFO: self._info_fields(link),
            protocol.FrameType.STATUS: snap_latch,
            protocol.FrameType.COUNTERS: {
                "snapshot": snapshot_no, "channel": snap_channel, "epoch": frame_epoch,
                "timestamp": frame_timestamp, "trace_lost": tl_frame.data,
                "counters": _Read(Space.COUNTERS, snap_channel, None),
            },
            protocol.FrameType.HISTOGRAM: {
                "channel": hist_channel, "first": hist_first, "epoch": frame_epoch,
                "timestamp": frame_timestamp,
                "bins": _Read(Space.HISTOGRAM, hist_channel, hist_first),
            },
            protocol.FrameType.TRUTH: {
                "die": truth_die, "timestamp": frame_timestamp,
                "counters": _Read(None, truth_die, None),
            },
            protocol.FrameType.TRACE: {
                "channel": trace_head.channel, "kind": trace_head.kind,
                "index": trace_head.index, "width": trace_head.width,
                "timestamp": trace_head.timestamp,
            },
        }
        m.d.comb += tl_frame.addr.eq(snap_channel)

        def steps_of(ftype):
            layout = protocol.payload_layout(p, ftype)
            values = frames[ftype]
            bound = set(values)
            fields = [name for name, _ in layout]
            if bound != set(fields):
                raise ValueError(f"{ftype.name}: fields {sorted(set(fields) - bound)} unbound, "
                                 f"{sorted(bound - set(fields))} unknown")
            length = protocol.layout_bytes(layout)
            header = [
                (Const(int(ftype), 8), 1), (Const(protocol.PROTOCOL_VERSION, 8), 1),
                (seq, 2), (Const(length, 16), 2),
            ]
            steps = list(header)
            for name, field in layout:
                value = values[name]
                if isinstance(value, _Read):
                    elem_bytes = (data.Shape.cast(field.shape.elem_shape).width + 7) // 8
                    steps.append((value, elem_bytes, field.shape.length))
                    continue
                nbytes = data.Layout.cast(field.shape).size // 8 if isinstance(
                    field.shape, data.Layout) else data.Shape.cast(field.shape).width // 8
                value = value.as_value() if hasattr(value, "as_value") else value
                for offset in range(0, nbytes, 8):
                    steps.append((value[8 * offset:8 * min(nbytes, offset + 8)],
                                  min(8, nbytes - offset)))
            return steps

        with m.FSM(name="frames") as frames_fsm:
            with m.State("IDLE"):
                with m.If(clear_pending):
                    pass
                with m.Elif(resp_pending):
                    m.next = "RESPONSE_0"
                with m.Elif(info_pending):
                    m.next = "INFO_0"
                with m.Elif(snap_request):
                    m.d.sync += [snap_request.eq(0), snap_channel.eq(0), snap_solicited.eq(0)]
                    m.d.sync += [snap_latch[name].eq(value) for name, value in snap_now.items()]
                    m.next = "STATUS_0"
                with m.Elif(hist_request):
                    m.d.sync += [hist_request.eq(0), hist_channel.eq(0), hist_first.eq(0)]
                    m.next = "HISTOGRAM_0"
                if self.emu is not None:
                    with m.Elif(truth_request):
                        m.d.sync += [truth_request.eq(0), truth_die.eq(0)]
                        m.next = "TRUTH_0"
                with m.Elif(trace_fifo.r_rdy):
                    m.next = "TRACE_0"

            if self.emu is None:
                del frames[protocol.FrameType.TRUTH]
            for ftype in frames:
                steps = steps_of(ftype)
                for i, step in enumerate(steps):
                    last_step = i == len(steps) - 1
                    nxt = f"{ftype.name}_{i + 1}" if not last_step else f"{ftype.name}_DONE"
                    with m.State(f"{ftype.name}_{i}"):
                        if isinstance(step[0], _Read):
                            self._read_step(m, step, shift, left, loaded, word, nxt, last_step)
                        else:
                            self._value_step(m, step, shift, left, loaded, nxt, last_step)
                with m.State(f"{ftype.name}_DONE"):
                    m.d.sync += seq.eq(seq + 1)
                    m.next = "IDLE"
                    if ftype == protocol.FrameType.RESPONSE:
                        m.d.sync += resp_pending.eq(0)
                    elif ftype == protocol.FrameType.INFO:
                        m.d.sync += info_pending.eq(0)
                    elif ftype == protocol.FrameType.TRACE:
                        m.d.comb += trace_fifo.r_en.eq(1)
                    elif ftype == protocol.FrameType.STATUS:
                        m.next = "SNAP_NEXT"
                    elif ftype == protocol.FrameType.COUNTERS:
                        m.d.sync += snap_channel.eq(snap_channel + 1)
                        with m.If(snap_channel == n - 1):
                            m.d.sync += snapshot_no.eq(snapshot_no + 1)
                        with m.Else():
                            m.next = "SNAP_NEXT"
                    elif ftype == protocol.FrameType.TRUTH:
                        with m.If(truth_die != self.emu.dies - 1):
                            m.d.sync += truth_die.eq(truth_die + 1)
                            m.next = "TRUTH_NEXT"
                    elif ftype == protocol.FrameType.HISTOGRAM:
                        m.next = "HIST_NEXT"
                        with m.If(hist_first + protocol.HIST_CHUNK >= p.hist_bins):
                            m.d.sync += [hist_first.eq(0), hist_channel.eq(hist_channel + 1)]
                            with m.If(hist_channel == n - 1):
                                m.next = "IDLE"
                        with m.Else():
                            m.d.sync += hist_first.eq(hist_first + protocol.HIST_CHUNK)
            # Between the frames of a burst (snapshot, histograms, ground truth), a pending
            # response goes first, so the host never waits long for a command's answer; nothing
            # starts while a clear is pending.
            bursts = {"SNAP_NEXT": "COUNTERS_0", "HIST_NEXT": "HISTOGRAM_0"}
            if self.emu is not None:
                bursts["TRUTH_NEXT"] = "TRUTH_0"
            for state, resume in bursts.items():
                with m.State(state):
                    with m.If(clear_pending):
                        pass
                    with m.Elif(resp_pending):
                        m.next = "RESPONSE_0"
                    with m.Else():
                        m.next = resume
        # Between frames, keep the frame time and epoch current; they freeze when a frame starts
        # (its first byte is loaded in the cycle after leaving these states).
        between = ["IDLE", *bursts]
        m.d.comb += frame_idle.eq(Cat(frames_fsm.ongoing(state) for state in between).any())
        with m.If(frame_idle):
            m.d.sync += [frame_epoch.eq(status.epoch), frame_timestamp.eq(status.timestamp)]
        return m

    # ---- helpers --------------------------------------------------------------------------------

    def _field_width(self, reg):
        shape = config_layout(self.params)
        for part in reg.field.split("."):
            shape = shape.elem_shape if part.isdigit() else shape[part].shape
        return data.Layout.cast(shape).size if isinstance(shape, data.Layout) else \
            data.Shape.cast(shape).width

    def _cfg_offset(self, reg):
        layout = config_layout(self.params)
        offset = 0
        shape = layout
        for part in reg.field.split("."):
            if part.isdigit():
                offset += int(part) * data.Layout.cast(shape.elem_shape).size
                shape = shape.elem_shape
            else:
                field = shape[part]
                offset += field.offset
                shape = field.shape
        return offset + reg.shift

    def _info_fields(self, link):
        p = self.params
        prescaler = self.cfg.prescaler
        period_ps = round(1e12 / self.clock_hz)
        board = self.board.encode("ascii").ljust(protocol.BOARD_NAME_BYTES, b"\0")
        return {
            "protocol_version": Const(protocol.PROTOCOL_VERSION, 8),
            "gateware_version": Const(protocol.GATEWARE_VERSION[0] << 8 |
                                      protocol.GATEWARE_VERSION[1], 16),
            "channels": Const(p.channels, 16),
            "classes": Const(p.classes, 8),
            "row": Const(p.row, 8),
            "width_bits": Const(p.width_bits, 8),
            "counter_bits": Const(p.counter_bits, 8),
            "hist_sub_bits": Const(p.hist_sub_bits, 8),
            "hist_bins": Const(p.hist_bins, 16),
            "hist_bits": Const(p.hist_bits, 8),
            "timestamp_bits": Const(p.timestamp_bits, 8),
            "glitch_bits": Const(p.glitch_bits, 8),
            "prescaler_bits": Const(p.prescaler_bits, 8),
            "clock_hz": Const(self.clock_hz, 32),
            "prescaler": prescaler,
            # Informational (rounded clock period); the exact tick is prescaler / clock_hz.
            "tick_period_ps": (Mux(prescaler == 0, 1, prescaler) * period_ps)[:48],
            "uart_divisor": Const(self.uart_divisor, 16),
            "build_id": Const(build_id(p, self.clock_hz, self.uart_divisor, self.board), 32),
            "board": Const(int.from_bytes(board, "little"), 8 * protocol.BOARD_NAME_BYTES),
            "emu_dies": Const(self.emu_link.dies if self.emu_link else 0, 8),
            "emu_cfg_bits": Const(self.emu_link.cfg_bits if self.emu_link else 0, 16),
            "emu_traffic_bits": Const(self.emu_link.traffic_bits if self.emu_link else 0, 16),
        }

    def _emit(self, m, shift, left, loaded, last, done):
        """Send the loaded value's bytes, least significant first; ``last`` marks the frame's
        final byte; ``done()`` adds the statements for when the value's last byte is taken."""
        m.d.comb += [
            self.body.valid.eq(1),
            self.body.payload.data.eq(shift[:8]),
            self.body.payload.last.eq((left == 1) & last),
        ]
        with m.If(self.body.ready):
            m.d.sync += [shift.eq(shift >> 8), left.eq(left - 1)]
            with m.If(left == 1):
                m.d.sync += loaded.eq(0)
                done()

    def _value_step(self, m, step, shift, left, loaded, nxt, last_step):
        value, nbytes = step
        with m.If(~loaded):
            m.d.sync += [shift.eq(value), left.eq(nbytes), loaded.eq(1)]
        with m.Else():
            def done():
                m.next = nxt
            self._emit(m, shift, left, loaded, Const(last_step), done)

    def _read_step(self, m, step, shift, left, loaded, word, nxt, last_step):
        read, nbytes, count = step
        requested = Signal(name="requested_" + (read.space.name.lower() if read.space is not None
                                                else "truth"))
        index = word if read.index is None else read.index + word
        if read.space is None:  # the emulator's ground truth
            req, resp = self.emu_read_req, self.emu_read_resp
            fields = [req.payload.die.eq(read.channel), req.payload.index.eq(index)]
        else:
            req, resp = self.read_req, self.read_resp
            fields = [req.payload.space.eq(read.space), req.payload.channel.eq(read.channel),
                      req.payload.index.eq(index)]
        with m.If(~loaded):
            with m.If(~requested):
                m.d.comb += [req.valid.eq(1), *fields]
                with m.If(req.ready):
                    m.d.sync += requested.eq(1)
            with m.Else():
                m.d.comb += resp.ready.eq(1)
                with m.If(resp.valid):
                    m.d.sync += [shift.eq(resp.payload), left.eq(nbytes),
                                 loaded.eq(1), requested.eq(0)]
        with m.Else():
            # Emit this word; then read the next word of the array, or go to the next step.
            def done():
                with m.If(word == count - 1):
                    m.d.sync += word.eq(0)
                    m.next = nxt
                with m.Else():
                    m.d.sync += word.eq(word + 1)
            self._emit(m, shift, left, loaded, (word == count - 1) & last_step, done)

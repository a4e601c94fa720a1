"""The link controller: register file, command execution and frame serialisation.

Frames are serialised byte by byte from the layouts of ``protocol.py``. At elaboration, every
field of every payload layout is bound to a value (a constant, a register, a latched status
value, or a word read from the sniffer's read port or an extension's) and the frames are
compiled into a *frame programme*: one ROM entry per byte, saying where the byte comes from
(a constant, byte ``k`` of the table of variable bytes, or the next byte of a word read from a
read port). A small walker steps through the ROM, one byte per entry, so the logic does not
grow with the number of frame fields: the only wide multiplexer left is the registered one that
picks a variable byte. A layout change in ``protocol.py`` therefore changes the gateware and the
host decoder together; a field left unbound is an elaboration error.
"""

import hashlib

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import config_layout, read_request_layout
from ..rb_sniffer.layouts import status_layout as sniffer_status_layout
from ..rb_sniffer.params import SnifferParams, Space
from ..rb_sniffer.sniffer import TraceSignature
from ..synthesis import COLLISION_FREE
from . import protocol
from .extension import LinkExtension
from .framing import FrameByte, decoded_command_layout

__all__ = ["LinkController", "build_id", "link_registers"]


def build_id(params, clock_hz, uart_divisor, board):
    """A 32-bit identifier of the build (parameters, clock, protocol), for the INFO frame."""
    text = repr((params, clock_hz, uart_divisor, board, protocol.PROTOCOL_VERSION,
                 protocol.GATEWARE_VERSION))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def link_registers(params, *, snapshot_period=0, config=None, extension=None):
    """The registers of a link: :func:`protocol.register_map`'s and the extension's.

    Raises ``ValueError`` when an extension register takes an address already in use.
    """
    registers = protocol.register_map(params, snapshot_period=snapshot_period, config=config)
    if extension is not None:
        registers += list(extension.registers)
    addresses = [reg.address for reg in registers]
    if len(set(addresses)) != len(addresses):
        taken = sorted({a for a in addresses if addresses.count(a) > 1})
        raise ValueError(f"Extension registers collide with the link's addresses "
                         f"{', '.join(f'0x{a:04X}' for a in taken)}")
    return registers


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
    extension : LinkExtension, optional
        Registers, ports, INFO fields and a read source of another block on the chip (the NAND
        emulator plugs in this way: ``rbscope.gateware.device.emulator_extension``).
    ram_output_registers : bool
        Register the output of the response scratch RAM, the loss counter RAM and the periods
        RAM before any logic (default): the ECP5's block RAM spends most of a cycle in its
        clock to output. ``False`` (the iCE40, whose block RAM output is fast) leaves these
        registers out, which saves their logic cells, and splits the variable-byte multiplexer
        in two stages, the first of which reads the programme ROM's output directly (the
        entry is registered on both); the frames are the same.

    Members
    -------
    command : In(stream.Signature(decoded_command_layout()))
        Commands from the :class:`~.framing.CommandDecoder`, held until taken.
    command_rotate : Out(1)
        Asks the decoder to rotate the held command by a byte (its ``rotate``): the response is
        written from the command's bytes, ten rotations before the command is taken.
    command_load, command_zero, command_value : Out(1), Out(1), Out(32)
        Replace the held command's value (the decoder's ``load``, ``value``): a register's value,
        which the response then carries (``command_zero``, the decoder's ``zero``: 0, for a bad
        address).
    body : Out(stream.Signature(FrameByte))
        Frame bodies for the :class:`~.framing.FrameEncoder`.
    rx_good, rx_bad : In(1)
        Strobes counting received frames and receive errors (bad frames, UART errors).
    cfg : Out(config_layout)
        The sniffer's configuration registers.
    win_load : Out(2 * classes)
        A strobe per class-window register (``WINDOW_k_LO`` at bit ``2k``, ``WINDOW_k_HI`` at
        ``2k + 1``) in the cycle it is written: for a sniffer that holds its bounds itself
        (``RBSniffer(dsp_bounds=…)``).
    win_data : Out(width_bits)
        The value written, beside ``win_load``.
    clear : Out(1)
        Strobe to the sniffer.
    sniffer_status : In(status_layout)
    read_req, read_resp : the sniffer's read port (this controller is its only user; the
        sniffer holds a response's payload until the next request, and the word's bytes are
        sent from it).
    trace : In(TraceSignature)
        The sniffer's trace strobe.
    <port>, ext_read_req, ext_read_resp : (with ``extension`` only) one port per
        :class:`~.extension.ExtPort`, and the read source's port.
    """

    def __init__(self, params, *, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None, extension=None, ram_output_registers=True):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if not isinstance(clock_hz, int) or clock_hz <= 0:
            raise ValueError(f"Clock frequency must be a positive integer (Hz), not {clock_hz!r}")
        board_bytes = board.encode("ascii") if isinstance(board, str) else None
        if board_bytes is None or len(board_bytes) > protocol.BOARD_NAME_BYTES:
            raise ValueError(f"Board name must be an ASCII string of at most "
                             f"{protocol.BOARD_NAME_BYTES} characters, not {board!r}")
        if extension is not None and not isinstance(extension, LinkExtension):
            raise TypeError(f"Link extension must be a LinkExtension, not {extension!r}")
        self.params = params
        self.ram_output_registers = bool(ram_output_registers)
        self.clock_hz = clock_hz
        self.uart_divisor = uart_divisor
        self.board = board
        self.snapshot_period = clock_hz * snapshot_ms // 1000
        if self.snapshot_period >= 1 << 32:
            raise ValueError(f"Snapshot period of {snapshot_ms} ms does not fit 32 bits of "
                             f"clock cycles at {clock_hz} Hz")
        self.extension = extension if extension is not None else LinkExtension()
        ext = self.extension
        self.registers = link_registers(params, snapshot_period=self.snapshot_period,
                                        config=config, extension=ext)
        ports = {}
        for port in ext.ports:
            ports[port.port_name] = (Out(port.width, init=port.reset)
                                     if port.access is protocol.Access.RW else In(port.width))
        if ext.source is not None:
            ports["ext_read_req"] = Out(stream.Signature(ext.source.request_layout))
            ports["ext_read_resp"] = In(stream.Signature(ext.source.word_bits))
        super().__init__({
            **ports,
            "command": In(stream.Signature(decoded_command_layout())),
            "command_rotate": Out(1),
            "command_load": Out(1),
            "command_zero": Out(1),
            "command_value": Out(32),
            "body": Out(stream.Signature(FrameByte)),
            "rx_good": In(1),
            "rx_bad": In(1),
            "cfg": Out(config_layout(params)),
            "win_load": Out(2 * params.classes),
            "win_data": Out(params.width_bits),
            "clear": Out(1),
            "sniffer_status": In(sniffer_status_layout(params)),
            "read_req": Out(stream.Signature(read_request_layout(params))),
            "read_resp": In(stream.Signature(params.counter_bits)),
            "trace": In(TraceSignature(params)),
        })

    # ---- register file ------------------------------------------------------------------------

    def _register_target(self, reg, cfg, link):
        """The signal slice a register reads and writes."""
        if reg.field in link:
            target = link[reg.field]
            return target[reg.shift:reg.shift + 32] if len(target) > 32 else target
        value = cfg
        for part in reg.field.split("."):
            value = value[int(part)] if part.isdigit() else getattr(value, part)
        value = value.as_value() if hasattr(value, "as_value") else value
        return value[reg.shift:reg.shift + 32]

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        ext = self.extension

        # Link-level registers, and the extension's (bound to its ports). Registers keep their
        # values through a logic reset (like the counters): the register file RAM that reads
        # them back is not reset either, so the two always agree.
        # The two periods are kept in a block RAM (one entry, both side by side, always read):
        # no flip-flops hold them (``period_targets``: the signals their writes address).
        periods = Memory(shape=48, depth=1, init=[self.snapshot_period],
                         attrs={"ram_style": "block"})
        m.submodules["periods" + COLLISION_FREE] = periods
        periods_rd = periods.read_port()
        periods_wr = periods.write_port(granularity=16)
        period_targets = {"link.snapshot_period": Signal(32, name="snapshot_period_write"),
                          "link.hist_period": Signal(16, name="hist_period_write")}
        link = {
            "link.id": Const(protocol.ID_MAGIC, 32),
            **period_targets,
            "link.trace_enable": Signal(reset_less=True),
        }
        strobes = []
        for port in ext.ports:
            signal = getattr(self, port.port_name)
            if port.access is protocol.Access.RW:
                held = Signal(port.width, init=port.reset, name=f"reg_{port.port_name}",
                              reset_less=not port.strobe)
                m.d.comb += signal.eq(held)
                link[port.field] = held
                if port.strobe:
                    # A pair of strobes: a write sets it for one cycle (the write statement in
                    # the command FSM below overrides this clear).
                    strobes.append(held)
            else:
                link[port.field] = signal
        m.d.sync += [held.eq(0) for held in strobes]
        # The sniffer's configuration registers, initialised from the register map's resets.
        layout = config_layout(p)
        init_value = 0
        for reg in self.registers:
            if reg.field not in link:
                width = min(32, self._field_width(reg) - reg.shift)
                init_value |= (reg.reset & ((1 << width) - 1)) << self._cfg_offset(reg)
        cfg_reg = layout(Signal(layout.size, init=init_value, name="cfg_reg", reset_less=True))
        m.d.comb += self.cfg.eq(cfg_reg)
        targets = {reg.address: (reg, self._register_target(reg, cfg_reg, link))
                   for reg in self.registers}

        # ---- the link's counters: trace records lost, frames received --------------------
        # One RAM holds them all (entry i < n: channel i's trace records lost; n: frames
        # received, n + 1: receive errors), updated by read-modify-write through one read port:
        # read, the count registered the next cycle (a block RAM's output goes to no adder: its
        # clock to output is most of a cycle on the ECP5), written the cycle after. A record
        # dropped is counted the cycle after (``lost_now``); a received frame or error waits
        # (one flag each) for a cycle where no record is counted (trace strobes are at least
        # two cycles apart, frames and errors at least a byte time). Two updates of one counter
        # never overlap (a channel drops at most one record per scan round of 4 cycles or
        # more). The total of dropped records (STATUS) is a counter of its own.
        trace_shape = data.Layout.cast(self.trace.payload.shape())
        m.submodules.trace_fifo = trace_fifo = _RecordFifo(trace_shape.size, depth=16)
        trace_lost_total = Signal(32)
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
        tl_frame = Signal(32)
        read_addr = Signal(addr_bits)
        push = self.trace.valid & link["link.trace_enable"]
        m.d.comb += [trace_fifo.w_data.eq(self.trace.payload.as_value()),
                     trace_fifo.w_en.eq(push)]
        # A dropped record is noted in flip-flops first (its channel too) and counted from
        # there, a cycle later: the FIFO's fullness does not reach the counter RAM's address.
        lost_now = Signal()
        lost_channel = Signal.like(self.trace.payload.channel)
        m.d.sync += [lost_now.eq(push & ~trace_fifo.w_rdy),
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
        s1_valid, s2_valid = Signal(), Signal()
        s1_addr, s2_addr = Signal(addr_bits), Signal(addr_bits)
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
        busy = s1_valid & (s1_addr == read_addr)
        if self.ram_output_registers:
            busy |= s2_valid & (s2_addr == read_addr)
        m.d.sync += tl_valid.eq(~update & ~busy)

        # ---- command execution --------------------------------------------------------------
        # Time of the frame being built, latched as it starts. A clear takes effect only between
        # frames, and no frame starts while one is pending (CLEAR_WAIT, CLEARING), so that no
        # frame mixes counts of two epochs: the sniffer's epoch does not change during a frame,
        # and frames send it as it is.
        frame_timestamp = Signal(p.timestamp_bits)
        frame_idle = Signal()
        # A clear is pending (CLEAR_WAIT, CLEARING): a flip-flop set and cleared with those
        # states, so that no state decode reaches the frame start's logic.
        clear_pending = Signal()
        resp = protocol.RESPONSE
        resp_pending = Signal()
        info_pending = Signal()
        ext_request = Signal()
        snap_request = Signal()  # set by the timer or a command, taken by the frame builder
        snap_solicited = Signal()
        hist_request = Signal()
        clear_epoch = Signal()  # bit 0 of the epoch (it counts clears)

        cmd = self.command.payload.command
        # A command's register index is registered as it arrives (WAIT), looked up in the
        # register file RAM (_RegisterFile) in the next cycle (INDEX), its address checked
        # against the entry in the two after (LOOKUP, CHECK), and it is executed in the next
        # (EXECUTE). The RAM keeps a copy of every register as written; only the read-only
        # registers bound to a port of an extension are read live (a registered multiplexer,
        # empty without an extension). Writing a period restarts its counter (below).
        # The decoder holds the command until its response is written (RESPOND, below).
        reg_write = Signal()
        period_written = Signal()
        hist_written = Signal()
        reloads = {"link.snapshot_period": period_written, "link.hist_period": hist_written}
        regfile = _RegisterFile(targets, ext)
        # (A write is read back two cycles later: what the read port returns in the cycle of the
        # write is never used.)
        m.submodules["regfile" + COLLISION_FREE] = regfile_mem = regfile.memory()
        rf_rd = regfile_mem.read_port()
        rf_wr = regfile_mem.write_port(granularity=1)
        rf_index = Signal(len(regfile.index(cmd.address)))
        m.d.comb += [rf_rd.addr.eq(rf_index), rf_wr.addr.eq(rf_index), rf_wr.data.eq(cmd.value)]
        rf_entry = regfile.layout(rf_rd.data)
        address_ok = Signal()
        address_lo_ok = Signal()
        address_hi_ok = Signal()
        entry_valid = Signal()
        writable = Signal()
        # The command's opcode, decoded as it is registered (LOOKUP): one flag per opcode.
        OP = protocol.Opcode
        opcodes = [OP.PING, OP.READ_INFO, OP.READ_REG, OP.WRITE_REG, OP.SNAPSHOT,
                   OP.READ_HISTOGRAMS, OP.CLEAR]
        if ext.source is not None:
            opcodes.append(ext.source.opcode)
        is_op = {int(op): Signal(name=f"is_op_{int(op):02x}") for op in opcodes}
        frame_bad = Signal()
        live_value = Signal(32)
        live = Signal()
        # (A bad address's value, 0, is loaded as the decoder's ``zero``: its flip-flops'
        # synchronous reset, no multiplexer on the RAM's output.)
        m.d.comb += self.command_value.eq(Mux(live, live_value, rf_entry.value))

        # The response is written byte by byte into a scratch RAM that the RESPONSE frame then
        # reads (_RamShifter): the command's bytes come from the decoder's register, rotated a
        # byte per cycle (RESPONSE has COMMAND's layout, its reserved byte the status), with the
        # tag, address and value replaced where the response says so. No flip-flops hold it.
        resp_status = Signal(protocol.ResponseStatus)
        resp_source = Signal(_Value)
        # The command's outcome (DECIDE): respond (``d_load``: with the register's value) and
        # one flag per action. (The response's status and value source are set there too: only
        # RESPOND reads them, and no response is pending then.)
        d_respond, d_load = Signal(), Signal()
        d_info, d_snap, d_hist, d_ext, d_write, d_clear = (Signal(name=f"d_{name}") for name in (
            "info", "snap", "hist", "ext", "write", "clear"))
        d_flags = [d_info, d_snap, d_hist, d_ext, d_write, d_clear]
        resp_k = Signal(range(protocol.layout_bytes(resp)))
        # (The RESPONSE frame reads the scratch only after it is written; what the read port
        # returns while it is written is never used.)
        m.submodules["scratch" + COLLISION_FREE] = scratch = Memory(shape=8, depth=16, init=[])
        sc_wr = scratch.write_port()
        sc_rd = scratch.read_port()
        resp_ptr = Signal(4)
        m.d.comb += sc_rd.addr.eq(resp_ptr)
        if self.ram_output_registers:
            resp_byte = Signal(8)  # the byte at resp_ptr, registered (no RAM output into logic)
            m.d.sync += resp_byte.eq(sc_rd.data)
        else:
            resp_byte = sc_rd.data
        rot = self.command.payload.command.as_value()[:8]  # byte ``resp_k`` of the command
        value_index = resp_k[:2] ^ 0b10  # byte of the value (bytes 6 … 9 of the response)
        value_byte = Signal(8)
        with m.Switch(resp_source):
            with m.Case(_Value.COMMAND, _Value.REGISTER):
                # (A register's value was loaded into the command's value field: see
                # ``load_value``.)
                m.d.comb += value_byte.eq(rot)
            with m.Case(_Value.EPOCH):
                m.d.comb += value_byte.eq(Mux(value_index[1], 0, self.sniffer_status.epoch
                                              .word_select(value_index[0], 8)))
        offsets = {name: resp[name].offset // 8 for name in ("tag", "status", "address")}
        with m.Switch(resp_k):
            with m.Case(offsets["tag"], offsets["tag"] + 1):
                # A command that could not be read is answered with tag 0xFFFF.
                m.d.comb += sc_wr.data.eq(
                    rot | Mux(resp_status == protocol.ResponseStatus.BAD_FRAME, 0xFF, 0))
            with m.Case(offsets["status"]):
                m.d.comb += sc_wr.data.eq(resp_status)
            with m.Case(offsets["address"], offsets["address"] + 1):
                # CLEAR answers with address 0 (and the epoch).
                m.d.comb += sc_wr.data.eq(Mux(resp_source == _Value.EPOCH, 0, rot))
            with m.Case(*range(resp["value"].offset // 8, protocol.layout_bytes(resp))):
                m.d.comb += sc_wr.data.eq(value_byte)
            with m.Default():
                m.d.comb += sc_wr.data.eq(rot)
        m.d.comb += sc_wr.addr.eq(resp_k)

        # (The RESPONSE frame waits until its bytes are written: ``resp_writing``, from the
        # cycle after the command is executed.)
        resp_writing = Signal()

        def respond(status, source=_Value.ZERO):
            m.d.sync += [resp_pending.eq(1), resp_status.eq(status), resp_source.eq(source),
                         resp_k.eq(0)]
            # A register's value first replaces the command's in the decoder's register (LOAD),
            # where RESPOND reads it with the other bytes (no multiplexer after the RAM's output).
            m.next = "LOAD" if source is _Value.REGISTER else "RESPOND"

        with m.FSM(name="command"):
            with m.State("WAIT"):
                m.d.sync += rf_index.eq(regfile.index(cmd.address))
                with m.If(self.command.valid & ~resp_pending):
                    m.next = "INDEX"
            with m.State("INDEX"):
                m.d.sync += [live_value.eq(0), live.eq(0)]
                with m.Switch(cmd.address):
                    for address, (reg, target) in targets.items():
                        if regfile.is_live(reg):
                            with m.Case(address):
                                m.d.sync += [live_value.eq(target), live.eq(1)]
                m.next = "LOOKUP"
            with m.State("LOOKUP"):
                # The address is checked in two halves, registered, and joined in CHECK (the
                # register file RAM's output goes through few logic levels).
                m.d.sync += [address_lo_ok.eq(rf_entry.address[:8] == cmd.address[:8]),
                             address_hi_ok.eq(rf_entry.address[8:] == cmd.address[8:]),
                             entry_valid.eq(rf_entry.valid),
                             writable.eq(rf_entry.writable),
                             *(flag.eq(cmd.opcode == op) for op, flag in is_op.items()),
                             frame_bad.eq(self.command.payload.status !=
                                          protocol.ResponseStatus.OK)]
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += address_ok.eq(entry_valid & address_lo_ok & address_hi_ok)
                m.next = "DECIDE"
            with m.State("DECIDE"):
                # The command's outcome, decided into flip-flops (EXECUTE then acts on them with
                # few logic levels): the response's status and value, and one flag per action.
                m.d.sync += [d_respond.eq(1), resp_status.eq(protocol.ResponseStatus.OK),
                             resp_source.eq(_Value.ZERO), d_load.eq(0),
                             *(flag.eq(0) for flag in d_flags)]

                def decide(status, source=_Value.ZERO):
                    m.d.sync += [resp_status.eq(status), resp_source.eq(source),
                                 d_load.eq(source is _Value.REGISTER)]

                with m.If(frame_bad):
                    decide(protocol.ResponseStatus.BAD_FRAME)
                with m.Elif(is_op[OP.PING]):
                    decide(protocol.ResponseStatus.OK, _Value.COMMAND)
                with m.Elif(is_op[OP.READ_INFO]):
                    m.d.sync += d_info.eq(1)
                with m.Elif(is_op[OP.READ_REG]):
                    decide(Mux(address_ok, protocol.ResponseStatus.OK,
                               protocol.ResponseStatus.BAD_ADDRESS), _Value.REGISTER)
                with m.Elif(is_op[OP.WRITE_REG]):
                    with m.If(~address_ok):
                        decide(protocol.ResponseStatus.BAD_ADDRESS)
                    with m.Elif(~writable):
                        decide(protocol.ResponseStatus.READ_ONLY, _Value.REGISTER)
                    with m.Else():
                        m.d.sync += [d_respond.eq(0), d_write.eq(1)]
                with m.Elif(is_op[OP.SNAPSHOT]):
                    m.d.sync += d_snap.eq(1)
                with m.Elif(is_op[OP.READ_HISTOGRAMS]):
                    m.d.sync += d_hist.eq(1)
                if ext.source is not None:
                    with m.Elif(is_op[int(ext.source.opcode)]):
                        m.d.sync += d_ext.eq(1)
                with m.Elif(is_op[OP.CLEAR]):
                    m.d.sync += [d_respond.eq(0), d_clear.eq(1)]
                with m.Else():
                    decide(protocol.ResponseStatus.UNKNOWN_OPCODE)
                m.next = "EXECUTE"
            with m.State("EXECUTE"):
                with m.If(d_respond):
                    m.d.sync += [resp_pending.eq(1), resp_k.eq(0)]
                    # A register's value first replaces the command's in the decoder's register
                    # (LOAD), where RESPOND reads it with the other bytes.
                    with m.If(d_load):
                        m.next = "LOAD"
                    with m.Else():
                        m.next = "RESPOND"
                with m.If(d_info):
                    m.d.sync += info_pending.eq(1)
                with m.If(d_snap):
                    m.d.sync += [snap_request.eq(1), snap_solicited.eq(1)]
                with m.If(d_hist):
                    m.d.sync += hist_request.eq(1)
                if ext.source is not None:
                    with m.If(d_ext):
                        m.d.sync += ext_request.eq(1)
                with m.If(d_write):
                    m.d.comb += reg_write.eq(1)
                    m.next = "WRITTEN"
                with m.If(d_clear):
                    m.d.sync += clear_pending.eq(1)
                    m.next = "CLEAR_WAIT"
            with m.State("WRITTEN"):
                # The write goes to the register file: the register's bits only (enabled by
                # ``reg_write_q``, below, which is set in exactly this state).
                m.next = "SETTLE"
            with m.State("SETTLE"):
                # (The register file's read port catches up with the write.)
                m.next = "READ_BACK"
            with m.State("READ_BACK"):
                # Answer with the value as read back (a field narrower than 32 bits truncates).
                respond(protocol.ResponseStatus.OK, _Value.REGISTER)
            with m.State("CLEAR_WAIT"):
                # Only between frames, so that no frame mixes counts of two epochs (and no frame
                # starts from now until the sniffer's epoch has changed).
                with m.If(frame_idle):
                    m.d.comb += self.clear.eq(1)
                    m.d.sync += clear_epoch.eq(self.sniffer_status.epoch[0])
                    m.next = "CLEARING"
            with m.State("CLEARING"):
                with m.If(self.sniffer_status.epoch[0] != clear_epoch):
                    m.d.sync += clear_pending.eq(0)
                    respond(protocol.ResponseStatus.OK, _Value.EPOCH)
            with m.State("LOAD"):
                m.d.comb += [resp_writing.eq(1), self.command_load.eq(address_ok),
                             self.command_zero.eq(~address_ok)]
                m.next = "RESPOND"
            with m.State("RESPOND"):
                # One byte per cycle, the decoder's command rotated a byte each; after the last
                # the command is back in place and taken.
                m.d.comb += [sc_wr.en.eq(1), self.command_rotate.eq(1), resp_writing.eq(1)]
                m.d.sync += resp_k.eq(resp_k + 1)
                with m.If(resp_k == protocol.layout_bytes(resp) - 1):
                    m.d.comb += self.command.ready.eq(1)
                    m.d.sync += resp_ptr.eq(0)
                    m.next = "WAIT"
        # A register's flip-flops are written with the register file (in WRITTEN, from a
        # registered strobe: no long path from the command to their enables), with one enable
        # each: the address is known good, so its index is enough to tell the register.
        reg_write_q = Signal()
        m.d.sync += reg_write_q.eq(reg_write)
        m.d.comb += rf_wr.en.eq(Mux(reg_write_q, rf_entry.mask, 0))
        for address, (reg, target) in targets.items():
            if reg.access is protocol.Access.RW:
                write = Signal(name=f"write_{reg.name.lower()}")
                m.d.comb += write.eq(reg_write_q & (rf_index == regfile.entry(address)))
                if reg.field.startswith("windows."):
                    _, k, edge = reg.field.split(".")
                    m.d.comb += self.win_load[2 * int(k) + (edge == "hi")].eq(write)
                if reg.field == "link.snapshot_period":
                    m.d.comb += periods_wr.en[:2].eq(Mux(write, 0b11, 0))
                elif reg.field == "link.hist_period":
                    m.d.comb += periods_wr.en[2].eq(write)
                else:
                    with m.If(write):
                        m.d.sync += target.eq(cmd.value)
                if reg.field in reloads:
                    m.d.comb += reloads[reg.field].eq(write)
        m.d.comb += periods_wr.data.eq(Cat(cmd.value, cmd.value[:16]))

        m.d.comb += self.win_data.eq(cmd.value[:p.width_bits])

        # ---- periodic snapshots and histograms ---------------------------------------------
        # Up-counters from 1, compared with the period (their flip-flops, no adder before the
        # comparison) and set back to 1 (a flip-flop's synchronous set or reset: no
        # multiplexer) as they reach it and when it is written: a snapshot every
        # SNAPSHOT_PERIOD cycles, histograms every HIST_PERIOD-th of them.
        # (The periods RAM's output is registered first where block RAM is slow.)
        if self.ram_output_registers:
            period_value = Signal(48)
            m.d.sync += period_value.eq(periods_rd.data)
        else:
            period_value = periods_rd.data
        snapshot_period = period_value[:32]
        hist_period = period_value[32:]
        # This period's cycle, from 1, is ``count_ahead - 1``: the counter runs a cycle ahead,
        # so that "the count is at the period" is compared for the next cycle and registered
        # (``at_period``; the period's RAM output goes into no logic before ``expired``).
        count_ahead = Signal(32, init=2)
        at_period = Signal(init=self.snapshot_period == 1)
        hist_count = Signal(16, init=1)  # this histogram period's snapshot, from 1
        # (Once the new period can be compared, two cycles after the write (three with the
        # register): what the read port returns the cycle after the RAM is written is stale.
        # Nothing expires from the write until then, and a write of either period restarts the
        # snapshot counter (a period whose last cycle fell in those cycles would otherwise be
        # passed over, and the counter run on to its wrap); a write of HIST_PERIOD restarts
        # the histogram count too. Whether a period is 0, off, is registered as it is written.)
        delay = 3 if self.ram_output_registers else 2
        # (From power-up and a logic reset too, the read port's first words are not the
        # periods: the snapshot counter starts as after a write, once they are.)
        reload_period = Signal(delay, init=(1 << delay) - 1)
        reload_hist = Signal(delay)
        m.d.sync += [reload_period.eq(Cat(period_written, reload_period)),
                     reload_hist.eq(Cat(hist_written, reload_hist))]
        stale = (reload_period | reload_hist).any()
        period_on = Signal(init=self.snapshot_period != 0, reset_less=True)
        hist_on = Signal(reset_less=True)
        with m.If(period_written):
            m.d.sync += period_on.eq(cmd.value != 0)
        with m.If(hist_written):
            m.d.sync += hist_on.eq(cmd.value[:len(hist_period)] != 0)
        expired = Signal()  # the period's last cycle (a period of 0 is off: see period_on)
        periodic = Signal()
        m.d.comb += expired.eq(at_period & ~stale)
        # (Registered: the histogram period's count and the requests follow a cycle later. At
        # least a cycle apart, so that ``hist_last`` has seen the count's last change: a period
        # of 1 gives a request every other cycle, which is as many as a snapshot can take.)
        m.d.sync += periodic.eq(expired & period_on & ~periodic)
        self._timer = {"periodic": periodic, "period_written": period_written,
                       "hist_written": hist_written}  # (inspection, by the tests)
        with m.If(expired | reload_period[-1] | reload_hist[-1]):
            m.d.sync += [count_ahead.eq(2), at_period.eq(snapshot_period == 1)]
        with m.Else():
            m.d.sync += [count_ahead.eq(count_ahead + 1),
                         at_period.eq(count_ahead == snapshot_period)]
        hist_expired = Signal()
        hist_last = Signal()  # the count is at the period (registered)
        m.d.sync += hist_last.eq(hist_count == hist_period)
        m.d.comb += hist_expired.eq(periodic & hist_last)
        with m.If(periodic):
            m.d.sync += snap_request.eq(1)
        with m.If(hist_expired):
            m.d.sync += hist_request.eq(hist_on)
        with m.If(hist_expired | reload_hist[-1]):
            m.d.sync += hist_count.eq(1)
        with m.Elif(periodic):
            m.d.sync += hist_count.eq(hist_count + 1)

        # ---- frame builder ------------------------------------------------------------------
        seq = Signal(16)
        snapshot_no = Signal(16)
        snap_channel = Signal(p.channel_bits)
        hist_channel = Signal(p.channel_bits)
        hist_first = Signal(range(p.hist_bins + protocol.HIST_CHUNK))
        source = ext.source
        unit = Signal(range(max(2, source.units))) if source is not None else None
        trace_head = Signal(trace_shape)
        m.d.comb += trace_head.as_value().eq(trace_fifo.r_data)

        status = self.sniffer_status
        # (The sniffer's quiescence is a comparison it does not register: registered here, so
        # that the snapshot latch's enable and data do not wait for its carry chain; it is then
        # a cycle older than the rest of the snapshot.)
        quiescent = Signal()
        m.d.sync += quiescent.eq(status.quiescent)
        # (The latch is loaded the cycle after the snapshot starts, from a flip-flop
        # (``snap_load``): the start's decision reaches no enable of its 96 flip-flops. Whether
        # the snapshot was asked for is noted as it starts, when the request is taken.)
        snap_load, hist_load, ext_load = Signal(), Signal(), Signal()
        solicited = Signal()
        m.d.sync += [snap_load.eq(0), hist_load.eq(0), ext_load.eq(0)]
        snap_flag_bits = Cat(quiescent, status.clear_busy, link["link.trace_enable"],
                             solicited)
        # A snapshot's header describes the sniffer at one instant. Its time and epoch are the
        # frame's (latched as every frame starts, below) and the snapshot number does not change
        # until the last COUNTERS frame; the sniffer's quiet_since, the flags and the total of
        # lost trace records (which the host checks against the pulses up to that time) are
        # latched into the snapshot latch when the snapshot starts (one source and the shift
        # per flip-flop). The link's receive counters are each copied whole into the COUNTERS
        # frames' loss count register (free in STATUS) as their first byte goes out (_Latch):
        # never torn between bytes, at most a frame time later than the timestamp.
        #
        # The multi-byte values a frame latches are shifters (see _Shifter): the frame's time,
        # the snapshot latch, the loss count; the response is one in a RAM. The sequence and
        # snapshot numbers, counters of 16 bits, are bytes of the variable-byte multiplexer (a
        # rotating shifter would cost a multiplexer in front of each of their flip-flops).
        snap_now = [status.quiet_since, snap_flag_bits, trace_lost_total]
        snap_latch = _Shifter.of("snap_latch", snap_now)
        epoch = status.epoch  # (constant during a frame: see clear_pending)
        time_shift = _Shifter("frame_timestamp", [p.timestamp_bits], reg=frame_timestamp)
        resp_shift = _RamShifter("resp", [field.width for _, field in resp], data=resp_byte,
                                 pointer=resp_ptr)
        tl_shift = _Shifter("tl_frame", [32], reg=tl_frame)
        snap_fields = {"snapshot": snapshot_no, "timestamp": time_shift[0],
                       "epoch": epoch, "quiet_since": snap_latch[0],
                       "flags": snap_latch[1], "trace_lost": snap_latch[2],
                       "rx_frames": _Latch(rx_base, 32, tl_shift),
                       "rx_errors": _Latch(rx_base + 1, 32, tl_shift)}

        FT = protocol.FrameType
        info_fields = self._info_fields(m, cfg_reg.prescaler)
        frames = {
            FT.RESPONSE: {name: resp_shift[i] for i, (name, _) in enumerate(resp)},
            FT.INFO: info_fields,
            FT.STATUS: snap_fields,
            FT.COUNTERS: {
                "snapshot": snapshot_no, "channel": snap_channel,
                "epoch": epoch, "timestamp": time_shift[0], "trace_lost": tl_shift[0],
                "counters": _READ,
            },
            FT.HISTOGRAM: {
                "channel": hist_channel, "first": hist_first, "epoch": epoch,
                "timestamp": time_shift[0], "bins": _READ,
            },
            FT.TRACE: {
                "channel": trace_head.channel, "kind": trace_head.kind,
                "index": trace_head.index, "width": trace_head.width,
                "timestamp": trace_head.timestamp,
            },
        }
        if source is not None:
            fields = {source.unit_field: unit, "timestamp": time_shift[0]}
            for name, _ in protocol.payload_layout(p, source.frame_type):
                fields.setdefault(name, _READ)
            frames[source.frame_type] = fields
        # The counter RAM's address for frames: the snapshot's channel (a cycle late, which no
        # COUNTERS frame sees: it reads it from BEGIN on), or a latch's counter, set and held
        # while EXEC reads it (see the walker). A register: no state decode reaches the
        # RAM's address or the loss counters' collision check.
        m.d.sync += read_addr.eq(snap_channel)

        # Compile the frames into the programme ROM (one entry per byte) and the table of
        # variable bytes.
        program = _FrameProgram(p)
        program._seq = seq
        for ftype, values in frames.items():
            program.add_frame(ftype, values)
        program.finish()
        self._program = program  # (inspection)
        entry_layout = program.entry_layout
        m.submodules.program = rom = Memory(shape=entry_layout.size, depth=len(program.rom),
                                            init=program.rom)
        rom_rd = rom.read_port()
        pc = Signal(range(len(program.rom)))
        m.d.comb += rom_rd.addr.eq(pc)
        # The ROM's output is registered before anything decodes it (on the ECP5 a block RAM's
        # clock to output is most of a cycle; on the iCE40 the entry's bits go to many
        # decoders): an entry is then decoded (PICK) two cycles after its address (the walker
        # spends a cycle in NEXT after each byte; the UART needs >= 40). (The read port keeps
        # its data while ``pc`` stays: the iCE40's first variable-byte stage reads it in NEXT.)
        entry = Signal(entry_layout)
        m.d.sync += entry.eq(rom_rd.data)
        rom_entry = entry_layout(rom_rd.data)
        ftype = Signal(range(max(FT) + 1), init=FT.RESPONSE)  # (the type's value)
        # The variable byte of the entry, and its shifter's strobe (one-hot), picked in PICK.
        var_byte = Signal(8)
        shifter_bit = {k: i for i, k in enumerate(program.shifters)}
        var_shift = Signal(max(1, len(program.shifters)))
        shift_q = Signal.like(var_shift)  # the shifters' strobes, a cycle after EXEC sent
        m.d.sync += shift_q.eq(0)
        # The entry's decode (PICK), one flag per kind of step: a constant byte, the variable
        # byte, the next byte of a word, a latch's read, a word's first byte; whether it is a
        # word's last entry, whether the walker then jumps back for another word, and which
        # latch (one-hot).
        x_vc, x_var, x_byte, x_latch, x_word = (Signal(name=f"x_{name}") for name in (
            "vc", "var", "byte", "latch", "word"))
        x_word_last, x_olast, x_more = Signal(), Signal(), Signal()
        x_latch_sel = Signal(max(1, len(program.latches)))
        latch_bits = len(program.latches).bit_length()  # (of a latch entry's ``arg``)
        latch_targets = {}  # shifter → (width, the latches read into it)
        for k, latch in enumerate(program.latches):
            width, ks = latch_targets.setdefault(latch.into, (latch.width, []))
            if width != latch.width:
                raise ValueError("Latches into one shifter must have one width")
            ks.append(k)
        pc_next = Signal.like(pc)
        # The variable bytes, one multiplexer input each. Where the ROM's output is not
        # registered (the iCE40), the entry is there in NEXT already, and the multiplexer is
        # split in two stages: NEXT picks one byte of each group of eight (``var_pre``), PICK
        # one of the groups; a RAM shifter's byte (read as its pointer moves, so not yet there
        # in NEXT) goes to PICK's stage directly.
        var_table = Cat(*(Cat(byte, Const(0, 8 - len(byte))) for byte in program.var_bytes))
        sel_bits = max(1, (len(program.var_bytes) - 1).bit_length())
        two_stage = not self.ram_output_registers and sel_bits > 3
        if two_stage:
            low_bits = 3
            groups = 1 << (sel_bits - low_bits)
            ram_inputs = [k for k, shifter in program.shifters.items()
                          if isinstance(shifter, _RamShifter)]
            var_pre = Signal(8 * groups)
            stage_one = [Const(0, 8) if k in ram_inputs else byte
                         for k, byte in enumerate(program.var_bytes)]
            stage_one += [Const(0, 8)] * (8 * groups - len(stage_one))
            group_tables = [Cat(*(Cat(byte, Const(0, 8 - len(byte)))
                                  for byte in stage_one[8 * g:8 * g + 8]))
                            for g in range(groups)]
            var_group = Signal(sel_bits - low_bits)
            var_ram = Signal(max(1, len(ram_inputs)))
        obyte = Signal(8)
        olast = Signal()
        # A word read from a read port is sent from the port's payload, which its source holds
        # from the transfer until the next request: byte ``word_byte`` of it.
        word = self.read_resp.payload
        if source is not None:
            word = Mux(ftype == source.frame_type, self.ext_read_resp.payload, word)
        word_byte = Signal(range(8))
        latch_wait = Signal(2)
        word_index = Signal(range(max(p.counters_per_channel, protocol.HIST_CHUNK,
                                      source.words if source is not None else 0) + 1))
        got = Signal()  # the word's response has arrived (its first byte is sent next)

        # Read ports: the sniffer's (counters, histogram bins) and the extension's. A word's
        # request is registered in PICK (its payload, and ``valid`` in a flip-flop of the port,
        # ``pending``), held until the port takes it, and the port's response awaited with a
        # flip-flop (``waiting``: the port's ``ready``); no state decode reaches a port.
        is_hist = ftype == FT.HISTOGRAM
        requests = [
            self.read_req.payload.space.eq(Mux(is_hist, Space.HISTOGRAM, Space.COUNTERS)),
            self.read_req.payload.channel.eq(Mux(is_hist, hist_channel, snap_channel)),
            self.read_req.payload.index.eq(Mux(is_hist, hist_first + word_index, word_index)),
        ]
        ports = [((FT.COUNTERS, FT.HISTOGRAM), self.read_req, self.read_resp)]
        if source is not None:
            requests += [self.ext_read_req.payload.unit.eq(unit),
                         self.ext_read_req.payload.index.eq(word_index)]
            ports.append(((source.frame_type,), self.ext_read_req, self.ext_read_resp))
        pending = [Signal(name=f"pending_{k}") for k in range(len(ports))]
        waiting = [Signal(name=f"waiting_{k}") for k in range(len(ports))]
        for k, (_, req, resp) in enumerate(ports):
            m.d.comb += [req.valid.eq(pending[k]), resp.ready.eq(waiting[k])]
            with m.If(pending[k] & req.ready):
                m.d.sync += [pending[k].eq(0), waiting[k].eq(1)]
            with m.If(waiting[k] & resp.valid):
                m.d.sync += [waiting[k].eq(0), got.eq(1)]

        # A frame starts from one place: its type is chosen and registered (``start``), and its
        # first programme address comes from the registered type (BEGIN).
        starting = Signal()
        next_ftype = Signal(range(max(FT) + 1))

        def start(frame):
            m.d.comb += [starting.eq(1), next_ftype.eq(frame)]
            m.next = "BEGIN"

        with m.If(starting):
            m.d.sync += ftype.eq(next_ftype)

        # The next frame, chosen in every cycle and registered (the choice reaches no frame
        # start's logic in the cycle it is made). Priority at a frame boundary: RESPONSE (once
        # written), INFO, a snapshot, histograms, the extension's frames, TRACE.
        pick = Signal(range(max(FT) + 1))
        pick_any = Signal()
        # (The choices that start a burst, one flag each.)
        pick_snap, pick_hist, pick_ext = Signal(), Signal(), Signal()
        idle_seen = Signal()  # the frame builder was idle in the previous cycle
        m.d.sync += [pick_any.eq(1), idle_seen.eq(0), pick_snap.eq(0), pick_hist.eq(0),
                     pick_ext.eq(0)]
        with m.If(resp_pending):
            m.d.sync += [pick.eq(FT.RESPONSE), pick_any.eq(~resp_writing)]
        with m.Elif(info_pending):
            m.d.sync += pick.eq(FT.INFO)
        with m.Elif(snap_request):
            m.d.sync += [pick.eq(FT.STATUS), pick_snap.eq(1)]
        with m.Elif(hist_request):
            m.d.sync += [pick.eq(FT.HISTOGRAM), pick_hist.eq(1)]
        if source is not None:
            with m.Elif(ext_request):
                m.d.sync += [pick.eq(source.frame_type), pick_ext.eq(1)]
        with m.Elif(trace_fifo.r_rdy):
            m.d.sync += pick.eq(FT.TRACE)
        with m.Else():
            m.d.sync += pick_any.eq(0)

        # Where a burst stands, registered as its counters change (DONE, at least a frame after
        # the change, decides from flip-flops).
        snap_last, hist_chunk_last, unit_last = Signal(), Signal(), Signal()
        hist_channel_last = Signal()
        m.d.sync += [snap_last.eq(snap_channel == n - 1),
                     hist_chunk_last.eq(hist_first + protocol.HIST_CHUNK >= p.hist_bins),
                     hist_channel_last.eq(hist_channel == n - 1)]
        if source is not None:
            m.d.sync += unit_last.eq(unit == source.units - 1)

        with m.FSM(init="IDLE", name="frames") as frames_fsm:
            with m.State("BEGIN"):
                with m.Switch(ftype):
                    for frame, address in program.start.items():
                        with m.Case(frame):
                            m.d.sync += pc.eq(address)
                m.next = "FETCH"
            with m.State("IDLE"):
                # The frame chosen a cycle ago (``pick``, from a cycle spent here: after a
                # TRACE frame the FIFO's state is the new one), unless a clear is pending.
                m.d.sync += idle_seen.eq(1)
                with m.If(idle_seen & pick_any & ~clear_pending):
                    m.d.comb += [starting.eq(1), next_ftype.eq(pick)]
                    m.next = "BEGIN"
                    with m.If(pick_snap):
                        m.d.sync += [snap_request.eq(0), snap_solicited.eq(0),
                                     solicited.eq(snap_solicited), snap_load.eq(1)]
                    with m.If(pick_hist):
                        m.d.sync += [hist_request.eq(0), hist_load.eq(1)]
                    if source is not None:
                        with m.If(pick_ext):
                            m.d.sync += [ext_request.eq(0), ext_load.eq(1)]
            with m.State("FETCH"):
                # The ROM's read port answers one cycle after the address. The loss counter of
                # the snapshot's channel is latched here too, once the read port has read it
                # (not a dropped record's channel) in a cycle where that counter was not being
                # written (a channel drops at most one record per scan round, so this comes).
                with m.If(tl_valid):
                    with m.If(ftype == FT.COUNTERS):
                        m.d.sync += tl_frame.eq(tl_rd.data)
                    m.next = "NEXT"
            with m.State("SKIP"):
                # (No byte sent: as SEND, a cycle for the ROM to read the new ``pc``.)
                m.next = "NEXT"
            with m.State("NEXT"):
                # The registered entry of ``pc`` arrives (on the iCE40 the variable byte's first
                # stage reads the ROM's output directly).
                if two_stage:
                    arg = rom_entry.arg
                    m.d.sync += [var_pre.eq(Cat(table.word_select(arg[:low_bits], 8)
                                                for table in group_tables)),
                                 var_group.eq(arg[low_bits:sel_bits]),
                                 var_ram.eq(Cat(arg == k for k in ram_inputs))]
                m.next = "PICK"
            with m.State("PICK"):
                # The variable byte the entry names (or its constant) is picked into a register
                # of its own, with its shifter's strobe: EXEC then only chooses between this byte
                # and a word's byte (few logic levels to ``obyte``).
                m.d.sync += var_shift.eq(0)
                if two_stage:
                    picked = var_pre.word_select(var_group, 8)
                    for k, index in enumerate(ram_inputs):
                        picked = Mux(var_ram[k], program.var_bytes[index], picked)
                else:
                    # (A binary tree of multiplexers on the index, not a decoded one.)
                    picked = var_table.word_select(entry.arg[:sel_bits], 8)
                m.d.sync += var_byte.eq(Mux(entry.kind == _Source.CONST, entry.arg[:8], picked))
                with m.Switch(entry.arg):
                    for k in program.shifters:
                        with m.Case(k):
                            m.d.sync += var_shift.eq(1 << shifter_bit[k])
                # The entry is decoded here too, into flags (EXEC starts from flip-flops), and
                # its next programme address, its word's request and its latch's address are
                # registered.
                read = entry.kind == _Source.READ
                more = read & entry.word_last & (word_index != entry.arg[:_COUNT_BITS])
                is_word = read & entry.word_first & ~entry.latch
                is_latch = entry.latch
                m.d.sync += [
                    x_vc.eq((entry.kind == _Source.CONST) | (entry.kind == _Source.VAR)),
                    x_byte.eq(read & ~entry.word_first),
                    x_var.eq(entry.kind == _Source.VAR),
                    x_latch.eq(is_latch),
                    x_word.eq(is_word),
                    x_word_last.eq(read & entry.word_last),
                    x_olast.eq(entry.last & ~more),
                    x_more.eq(more),
                    x_latch_sel.eq(Cat(entry.arg[:latch_bits] == k
                                       for k in range(1, len(program.latches) + 1))),
                    pc_next.eq(Mux(more, entry.arg[_COUNT_BITS:], pc + 1)),
                    *requests,
                ]
                for k, (frames_of_port, _, _) in enumerate(ports):
                    m.d.sync += pending[k].eq(is_word & Cat(ftype == f
                                                            for f in frames_of_port).any())
                m.next = "EXEC"
            with m.State("EXEC"):
                # Every byte but a word's first is sent at once; the walker then moves on (one
                # place for it: ``advance``). One word's bytes are programmed once: after the
                # word's last byte the walker jumps back for the next word of the array (a READ
                # entry's ``arg`` holds the word count less one and the address of its first
                # entry): ``pc_next``, set in PICK. A word's bytes are its port's payload, byte
                # ``word_byte`` (0 for the first, sent once the response is there: ``got``).
                advance = Signal()
                m.d.comb += advance.eq(x_vc | x_byte | (x_word & got))
                m.d.sync += olast.eq(x_olast)
                with m.If(advance):
                    m.d.sync += [pc.eq(pc_next),
                                 obyte.eq(Mux(x_vc, var_byte, word.word_select(word_byte, 8)))]
                    with m.If(x_word_last):
                        # (Back to 0 after an array's last word: every array starts there.)
                        m.d.sync += [word_index.eq(Mux(x_more, word_index + 1, 0)),
                                     word_byte.eq(0)]
                    with m.Elif(~x_vc):
                        m.d.sync += word_byte.eq(word_byte + 1)
                    m.next = "SEND"
                with m.If(x_var):
                    # (The shifter moves on the cycle after, from a registered strobe: its
                    # byte was picked in PICK, and its next is picked cycles later.)
                    m.d.sync += shift_q.eq(var_shift)
                with m.If(x_word & got):
                    m.d.sync += got.eq(0)
                with m.If(x_latch):
                    # A latched counter: read it (its address is set in the first cycle here,
                    # from flip-flops, and held; from the third the port's data is the
                    # counter's once ``tl_valid``) and copy it whole into its shifter, which
                    # sends it (the next entries); this entry sends no byte.
                    m.d.sync += latch_wait.eq(Cat(1, latch_wait[0]))
                    for k, latch in enumerate(program.latches):
                        with m.If(x_latch_sel[k]):
                            m.d.sync += read_addr.eq(latch.address)
                    with m.If(latch_wait[1] & tl_valid):
                        m.d.sync += [latch_wait.eq(0), pc.eq(pc_next)]
                        m.next = "SKIP"
                        # (Into each latch's shifter; where every latch has the same one, no
                        # choice among them reaches its enable.)
                        for into, (width, ks) in latch_targets.items():
                            chosen = (Cat(x_latch_sel[k] for k in ks).any()
                                      if len(latch_targets) > 1 else 1)
                            with m.If(chosen):
                                m.d.sync += into.reg.eq(tl_rd.data[:width])
            with m.State("SEND"):
                m.d.comb += [self.body.valid.eq(1), self.body.payload.data.eq(obyte),
                             self.body.payload.last.eq(olast)]
                with m.If(self.body.ready):
                    with m.If(olast):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "NEXT"
            with m.State("DONE"):
                m.d.sync += seq.eq(seq + 1)
                m.next = "IDLE"
                with m.Switch(ftype):
                    with m.Case(FT.RESPONSE):
                        m.d.sync += resp_pending.eq(0)
                    with m.Case(FT.INFO):
                        m.d.sync += info_pending.eq(0)
                    with m.Case(FT.TRACE):
                        m.d.comb += trace_fifo.r_en.eq(1)
                    with m.Case(FT.STATUS):
                        m.next = "SNAP_NEXT"
                    with m.Case(FT.COUNTERS):
                        m.d.sync += snap_channel.eq(snap_channel + 1)
                        with m.If(snap_last):
                            m.d.sync += snapshot_no.eq(snapshot_no + 1)
                        with m.Else():
                            m.next = "SNAP_NEXT"
                    with m.Case(FT.HISTOGRAM):
                        m.next = "HIST_NEXT"
                        with m.If(hist_chunk_last):
                            m.d.sync += [hist_first.eq(0), hist_channel.eq(hist_channel + 1)]
                            with m.If(hist_channel_last):
                                m.next = "IDLE"
                        with m.Else():
                            m.d.sync += hist_first.eq(hist_first + protocol.HIST_CHUNK)
                    if source is not None:
                        with m.Case(source.frame_type):
                            with m.If(~unit_last):
                                m.d.sync += unit.eq(unit + 1)
                                m.next = "EXT_NEXT"
            # Between the frames of a burst (snapshot, histograms, an extension's frames), a
            # pending response goes first, so the host never waits long for a command's answer;
            # nothing starts while a clear is pending.
            bursts = {"SNAP_NEXT": FT.COUNTERS, "HIST_NEXT": FT.HISTOGRAM}
            if source is not None:
                bursts["EXT_NEXT"] = source.frame_type
            for state, resume in bursts.items():
                with m.State(state):
                    with m.If(clear_pending):
                        pass
                    with m.Elif(resp_pending):
                        with m.If(~resp_writing):
                            start(FT.RESPONSE)
                    with m.Else():
                        start(resume)
        m.d.comb += Cat(shifter.shift for shifter in program.shifters.values()).eq(shift_q)
        for shifter in program.shifters.values():
            with m.If(shifter.shift):
                m.d.sync += shifter.advance()
        # A burst's first frame starts from its first channel (or unit), set in the cycle
        # after the start from the registered strobes (BEGIN: no read uses them before PICK).
        with m.If(snap_load):
            m.d.sync += [snap_latch.load(snap_now), snap_channel.eq(0)]
        with m.If(hist_load):
            m.d.sync += [hist_channel.eq(0), hist_first.eq(0)]
        if source is not None:
            with m.If(ext_load):
                m.d.sync += unit.eq(0)
        # Between frames, keep the frame time current; it freezes when a frame starts (its first
        # byte is fetched in the cycle after leaving these states).
        between = ["IDLE", *bursts]
        m.d.comb += frame_idle.eq(Cat(frames_fsm.ongoing(state) for state in between).any())
        with m.If(frame_idle):
            m.d.sync += frame_timestamp.eq(status.timestamp)
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

    def _info_fields(self, m, prescaler):
        """INFO's fields (:func:`protocol.info_values`, the prescaler and tick live)."""
        ext = self.extension
        info = protocol.info_values(
            self.params, clock_hz=self.clock_hz, prescaler=0, uart_divisor=self.uart_divisor,
            build_id=build_id(self.params, self.clock_hz, self.uart_divisor, self.board),
            board=self.board, emu=ext.emu)
        info.update(ext.info)
        layout = protocol.info_layout(self.params)
        fields = {name: Const(value if name != "board" else
                              int.from_bytes(bytes(value), "little"),
                              data.Layout.cast(layout[name].shape).size
                              if isinstance(layout[name].shape, data.Layout)
                              else layout[name].shape)
                  for name, value in info.items()}
        fields["prescaler"] = prescaler
        fields["tick_period_ps"] = self._tick_period(m, prescaler)
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
    """

    def __init__(self, width, depth):
        if depth & (depth - 1):
            raise ValueError(f"FIFO depth must be a power of two, not {depth}")
        self.width = width
        self.depth = depth
        super().__init__({
            "w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
            "r_data": Out(width), "r_rdy": Out(1), "r_en": In(1),
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
        return m


class _RegisterFile:
    """The register file RAM: what register reads come from.

    One entry per register, at an index made of the address bits that tell the registers apart
    (``index``), holding the register's value as written, its address (a bad address that shares
    a register's index reads as bad), whether it is writable, and the mask of its bits, which is
    the RAM's bit write enable (so a register narrower than 32 bits reads back truncated, and a
    strobe reads back 0). The register's flip-flops (the sniffer's ``cfg``, the link settings,
    an extension's ports) are written at the same time; a read costs no multiplexer over them.

    Parameters
    ----------
    targets : dict
        ``{address: (Register, target value)}`` as the controller binds them.
    ext : LinkExtension
    """

    layout = data.StructLayout({"value": 32, "mask": 32, "address": 16, "valid": 1,
                                "writable": 1})

    def __init__(self, targets, ext):
        self.targets = targets
        self._strobes = {port.field for port in ext.ports if port.strobe}
        self._live = {port.field for port in ext.ports if port.access is protocol.Access.RO}
        addresses = list(targets)
        bits = [b for b in range(16) if len({(a >> b) & 1 for a in addresses}) > 1]
        for bit in list(reversed(bits)):  # keep only the bits needed to tell them apart
            trial = [b for b in bits if b != bit]
            if len({self._pick(a, trial) for a in addresses}) == len(addresses):
                bits = trial
        self.bits = bits
        self.depth = 1 << max(1, len(bits))

    @staticmethod
    def _pick(address, bits):
        return sum(((address >> b) & 1) << i for i, b in enumerate(bits))

    def entry(self, address):
        """The entry of register ``address`` (an integer)."""
        return self._pick(address, self.bits)

    def index(self, address):
        """The entry of ``address`` (a 16-bit value)."""
        return Cat(*(address[b] for b in self.bits)) if self.bits else Const(0, 1)

    def is_live(self, reg):
        """Whether register ``reg`` is read live from a port rather than from the RAM."""
        return reg.field in self._live

    def memory(self):
        init = [0] * self.depth
        for address, (reg, target) in self.targets.items():
            writable = reg.access is protocol.Access.RW
            width = len(target)
            if isinstance(target, Const):
                value = target.value
            elif reg.field in self._strobes or self.is_live(reg):
                value = 0
            else:
                value = reg.reset & ((1 << width) - 1)
            mask = (1 << width) - 1 if writable and reg.field not in self._strobes else 0
            init[self._pick(address, self.bits)] = self.layout.const({
                "value": value, "mask": mask, "address": address, "valid": 1,
                "writable": writable}).as_value().value
        return Memory(shape=self.layout.size, depth=self.depth, init=init)


class _Value(enum.Enum, shape=2):
    """What a RESPONSE's value is (the command FSM's choice)."""

    ZERO = 0
    COMMAND = 1  # the command's value (PING)
    REGISTER = 2  # the register read (or read back)
    EPOCH = 3  # the sniffer's epoch (CLEAR)


class _Source(enum.Enum, shape=2):
    """Where a byte of a frame comes from (a frame-programme ROM entry's ``kind``)."""

    CONST = 0  # ``arg`` is the byte
    VAR = 1  # byte ``arg`` of the table of variable bytes
    READ = 2  # the next byte of a word read from the frame's read port (or, ``arg != 0`` on
    # a first byte, no byte: latch ``arg`` is read whole into its shifter)


#: Bits of a READ entry's ``arg`` that hold the word count less one (the rest: the address of
#: the word's first entry, where the walker jumps back for the next word).
_COUNT_BITS = 5

class _Latch:
    """A field read from entry ``address`` of the link's counter RAM just before its first byte
    goes out, copied whole into the register of shifter ``into`` and sent from there (never
    torn). Its programme is one entry more than its bytes: the read, which sends nothing."""

    def __init__(self, address, width, into):
        if width > len(into.reg):
            raise ValueError(f"A latch of {width} bits does not fit a shifter of "
                             f"{len(into.reg)}")
        self.address = address
        self.width = width
        self.into = into


#: Marks a field read word by word from the frame's read port.
_READ = object()


class _Shifter:
    """A register whose bytes frames send least significant first, shifting it as they go.

    Its fields (``segments``, each a whole number of bytes) lie in it in the order a frame sends
    them. The walker sends the register's low byte and shifts it right by a byte (or, with
    ``rotate``, rotates it, so that a counter is whole again once its frame has sent it): the
    shift packs with the register's own flip-flops, so a shifter costs one input of the
    variable-byte multiplexer instead of one per byte. Whoever owns the register loads it (or
    updates it) only between the frames that send it.

    Parameters
    ----------
    name : str
    widths : list of int
        Width in bits of each segment (rounded up to whole bytes).
    reg : Value, optional
        The register (default: a new signal as wide as the segments).
    rotate : bool
    """

    def __init__(self, name, widths, *, reg=None, rotate=False):
        self.seg_bytes = [(w + 7) // 8 for w in widths]
        total = 8 * sum(self.seg_bytes)
        self.reg = Signal(total, name=name) if reg is None else reg
        if rotate and len(self.reg) != total:
            raise ValueError(f"A rotating shifter of {len(self.reg)} bits has {total} bits of "
                             f"segments")
        self.rotate = rotate
        self.shift = Signal(name=f"{name}_shift")

    @classmethod
    def of(cls, name, values, **kwargs):
        """A shifter holding ``values`` (see :meth:`load`)."""
        return cls(name, [len(Value.cast(v)) for v in values], **kwargs)

    def __getitem__(self, index):
        return _Segment(self, index)

    def load(self, values):
        """The statement loading ``values`` (one per segment) into the register."""
        parts = []
        for value, nbytes in zip(values, self.seg_bytes, strict=True):
            value = Value.cast(value)
            parts.append(value)
            if len(value) < 8 * nbytes:
                parts.append(Const(0, 8 * nbytes - len(value)))
        return self.reg.eq(Cat(*parts))

    def low(self):
        """The byte a frame sends next."""
        return self.reg[:8]

    def advance(self):
        """The statement moving on to the next byte (once the low byte is sent)."""
        if self.rotate:
            return self.reg.eq(Cat(self.reg[8:], self.reg[:8]))
        return self.reg.eq(self.reg >> 8)


class _RamShifter(_Shifter):
    """A :class:`_Shifter` whose bytes are in a RAM, read in order through a read port.

    ``data`` is the read port's data (registered or not: ``ram_output_registers``) and
    ``pointer`` its address: the walker sends ``data`` and increments the pointer, and the next
    byte is there before the walker comes back for it (at least three cycles later: SEND, NEXT,
    PICK). Whoever writes the bytes resets the pointer.
    """

    def __init__(self, name, widths, *, data, pointer):
        super().__init__(name, widths, reg=Const(0, 1))
        self.data = data
        self.pointer = pointer

    def low(self):
        return self.data

    def advance(self):
        return self.pointer.eq(self.pointer + 1)

    def load(self, values):
        raise TypeError("A RAM shifter is written through its RAM's write port")


class _Segment:
    """Field ``index`` of a :class:`_Shifter`."""

    def __init__(self, shifter, index):
        self.shifter = shifter
        self.index = index


class _FrameProgram:
    """The frame programme: one ROM entry per byte of every frame, from the protocol layouts.

    ``var_bytes`` are the inputs of the walker's variable-byte multiplexer: bytes of values, and
    the low byte of every :class:`_Shifter` (``shifters`` maps such an input to its shifter).
    """

    def __init__(self, params):
        self.params = params
        self.rom = []
        self.start = {}
        self.var_bytes = []
        self.shifters = {}
        self.latches = []
        self._var_keys = {}
        self._entries = []

    def _var(self, value, byte):
        key = (id(value), byte)
        if key not in self._var_keys:
            self._var_keys[key] = len(self.var_bytes)
            self.var_bytes.append(value[8 * byte:8 * byte + 8])
        return self._var_keys[key]

    def _shift_input(self, shifter):
        key = (id(shifter), None)
        if key not in self._var_keys:
            self._var_keys[key] = len(self.var_bytes)
            self.shifters[len(self.var_bytes)] = shifter
            self.var_bytes.append(shifter.low())
        return self._var_keys[key]

    def _value_bytes(self, value, nbytes, used):
        if isinstance(value, _Segment):
            shifter = value.shifter
            have = shifter.seg_bytes[value.index]
            if have > nbytes:
                raise ValueError(f"A segment of {have} bytes does not fit a {nbytes}-byte field")
            used.setdefault(id(shifter), (shifter, []))[1].append(value.index)
            return ([(_Source.VAR, self._shift_input(shifter))] * have
                    + [(_Source.CONST, 0)] * (nbytes - have))
        if isinstance(value, int):
            value = Const(value, 8 * nbytes)
        value = value.as_value() if hasattr(value, "as_value") else value
        if isinstance(value, Const):
            return [(_Source.CONST, (value.value >> 8 * b) & 0xFF) for b in range(nbytes)]
        out = []
        for b in range(nbytes):
            if 8 * b >= len(value):  # a narrow value: its high bytes are zero
                out.append((_Source.CONST, 0))
            else:
                out.append((_Source.VAR, self._var(value, b)))
        return out

    def add_frame(self, ftype, values):
        """Append the programme of frame ``ftype`` whose payload fields are bound to
        ``values`` (a value, a :class:`_Segment` of a shifter, a :class:`_Latch`, or ``_READ``
        for an array read word by word)."""
        layout = protocol.payload_layout(self.params, ftype)
        bound = set(values)
        fields = [name for name, _ in layout]
        if bound != set(fields):
            raise ValueError(f"{ftype.name}: fields {sorted(set(fields) - bound)} unbound, "
                             f"{sorted(bound - set(fields))} unknown")
        steps = []  # (kind, arg, word_first, word_last)
        used = {}  # shifter id → (shifter, segments in the order sent)
        length = protocol.layout_bytes(layout)
        header = {"type": int(ftype), "version": protocol.PROTOCOL_VERSION, "seq": self._seq,
                  "length": length}
        for name, field in protocol.HEADER:
            nbytes = data.Shape.cast(field.shape).width // 8
            steps += [(k, a, 0, 0) for k, a in self._value_bytes(header[name], nbytes, used)]
        for name, field in layout:
            value = values[name]
            if isinstance(value, _Latch):
                self.latches.append(value)
                nbytes = data.Shape.cast(field.shape).width // 8
                steps += [(_Source.READ, len(self.latches), 1, 0)]
                steps += [(_Source.VAR, self._shift_input(value.into), 0, 0)] * nbytes
                continue
            if value is _READ:
                elem_bytes = data.Shape.cast(field.shape.elem_shape).width // 8
                count = field.shape.length
                if count > 1 << _COUNT_BITS or not 2 <= elem_bytes <= 8:
                    raise ValueError(f"{ftype.name}.{name}: {count} words of {elem_bytes} bytes "
                                     f"do not fit the frame programme's loop")
                # One word, repeated by the walker (see the READ case of the walker): the entry
                # of its last byte holds the address of its first (absolute, so that the walker
                # needs no subtractor).
                loop = (count - 1) | (len(self._entries) + len(steps)) << _COUNT_BITS
                steps += [(_Source.READ, loop if b == elem_bytes - 1 else 0, int(b == 0),
                           int(b == elem_bytes - 1)) for b in range(elem_bytes)]
                continue
            size = (data.Layout.cast(field.shape).size if isinstance(field.shape, data.Layout)
                    else data.Shape.cast(field.shape).width)
            steps += [(k, a, 0, 0) for k, a in self._value_bytes(value, size // 8, used)]
        # A frame sends a shifter's segments in order from the first (and a rotating one whole,
        # so that it is back in place afterwards).
        for shifter, segments in used.values():
            whole = list(range(len(shifter.seg_bytes)))
            if segments != whole[:len(segments)] or (shifter.rotate and segments != whole):
                raise ValueError(f"{ftype.name}: segments {segments} of a shifter sent out of "
                                 f"order")
        self.start[ftype] = len(self._entries)
        for i, step in enumerate(steps):
            self._entries.append((*step, int(i == len(steps) - 1)))

    _seq = None  # set by the controller: the frame sequence number

    @property
    def entry_layout(self):
        arg_bits = max(8, (len(self.var_bytes) - 1).bit_length(),
                       _COUNT_BITS + max(1, len(self._entries) - 1).bit_length())
        # (``latch`` marks a latch's entry, a READ's first with ``arg != 0``: decoded here, not
        # by the walker.)
        return data.StructLayout({"kind": _Source, "arg": arg_bits, "word_first": 1,
                                  "word_last": 1, "last": 1, "latch": 1})

    def finish(self):
        """Pack the entries into ROM words."""
        layout = self.entry_layout
        self.rom = [layout.const({"kind": kind, "arg": arg, "word_first": first,
                                  "word_last": wlast, "last": last,
                                  "latch": int(kind is _Source.READ and first and arg != 0)})
                    .as_value().value
                    for kind, arg, first, wlast, last in self._entries]

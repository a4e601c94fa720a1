"""The link's command unit: it executes a host command and writes its response.

Part of the :class:`~.controller.LinkController`.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import EPOCH_BITS
from ..synthesis import COLLISION_FREE
from . import protocol
from .framing import decoded_command_layout
from .registers import entry_layout

__all__ = ["CommandUnit"]


class _Value(enum.Enum, shape=2):
    """What a RESPONSE's value is (the command FSM's choice)."""

    ZERO = 0
    COMMAND = 1  # the command's value (PING)
    REGISTER = 2  # the register read (or read back)
    EPOCH = 3  # the sniffer's epoch (CLEAR)


class CommandUnit(wiring.Component):
    """Execute the host's commands one at a time, and write each one's RESPONSE.

    A command's register index is registered as it arrives (WAIT: the register file's
    ``select``), looked up in the register file RAM in the next cycle (INDEX), its address
    checked against the entry in the two after (LOOKUP, CHECK), its outcome decided into
    flip-flops (DECIDE), and it is executed in the next (EXECUTE): a register written through
    the register file (WRITTEN, SETTLE, READ_BACK), the sniffer cleared between frames
    (CLEAR_WAIT, CLEARING), or frames asked of the frame builder (``send_*``). The decoder holds
    the command until its response is written (RESPOND).

    The response is written byte by byte into a scratch RAM that the RESPONSE frame then reads
    (``resp_byte``, ``resp_next``): the command's bytes come from the decoder's register,
    rotated a byte per cycle (RESPONSE has COMMAND's layout, its reserved byte the status), with
    the tag, address and value replaced where the response says so. No flip-flops hold it.

    Parameters
    ----------
    source : ReadSource, optional
        The extension's read source (its opcode asks for its frames: ``send_ext``).
    ram_output_registers : bool
        Register the scratch RAM's output (``resp_byte``; see
        :class:`~.controller.LinkController`).

    Members
    -------
    command : In(stream.Signature(decoded_command_layout()))
        Commands from the :class:`~.framing.CommandDecoder`, held until taken.
    command_rotate, command_load, command_zero : Out(1)
        The decoder's ``rotate``, ``load`` and ``zero`` (see
        :class:`~.controller.LinkController`); the value loaded is the register file's
        ``read_value``.
    reg_select, reg_lookup, reg_write : Out(1)
        The register file's ``select``, ``lookup`` and ``write``.
    reg_entry : In(entry_layout)
        The register file's ``entry``.
    epoch : In(EPOCH_BITS)
        The sniffer's epoch (CLEAR answers with it; bit 0 tells when a clear is done).
    clear : Out(1)
        Strobe to the sniffer.
    clear_pending : Out(1)
        A clear is pending (no frame starts: the frame builder waits).
    frame_idle : In(1)
        The frame builder is between frames (a clear takes effect only then).
    send_response, send_info, send_snapshot, send_histograms : Out(1)
        Strobes: ask the frame builder for the RESPONSE (once written: ``resp_writing``),
        INFO, a (solicited) snapshot, histograms.
    send_ext : Out(1)
        (With ``source`` only.) Strobe: ask for the extension's frames.
    response_pending : In(1)
        The frame builder has a RESPONSE to send: no command is started until it is sent.
    resp_writing : Out(1)
        The response is being written (its frame must not start yet).
    resp_byte : Out(8)
        The scratch RAM's byte at the RESPONSE frame's pointer.
    resp_next : In(1)
        Strobe: move the pointer to the next byte (reset to the first when a response is
        written).
    """

    def __init__(self, *, source=None, ram_output_registers=True):
        self.source = source
        self.ram_output_registers = bool(ram_output_registers)
        super().__init__({
            **({"send_ext": Out(1)} if source is not None else {}),
            "command": In(stream.Signature(decoded_command_layout())),
            "command_rotate": Out(1),
            "command_load": Out(1),
            "command_zero": Out(1),
            "reg_select": Out(1),
            "reg_lookup": Out(1),
            "reg_write": Out(1),
            "reg_entry": In(entry_layout),
            "epoch": In(EPOCH_BITS),
            "clear": Out(1),
            "clear_pending": Out(1),
            "frame_idle": In(1),
            "send_response": Out(1),
            "send_info": Out(1),
            "send_snapshot": Out(1),
            "send_histograms": Out(1),
            "response_pending": In(1),
            "resp_writing": Out(1),
            "resp_byte": Out(8),
            "resp_next": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        # The response's status and value source, and the byte being written (RESPOND).
        resp_status = Signal(protocol.ResponseStatus)
        resp_source = Signal(_Value)
        resp_k = Signal(range(protocol.layout_bytes(protocol.RESPONSE)))
        self._response_scratch(m, resp_status, resp_source, resp_k)
        self._command_fsm(m, resp_status, resp_source, resp_k)
        return m

    def _response_scratch(self, m, resp_status, resp_source, resp_k):
        """The scratch RAM the response is written to (byte ``resp_k``, while ``command_rotate``)
        and read from (``resp_byte``, ``resp_next``)."""
        resp = protocol.RESPONSE
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
        m.d.comb += self.resp_byte.eq(resp_byte)
        rot = self.command.payload.command.as_value()[:8]  # byte ``resp_k`` of the command
        value_index = resp_k[:2] ^ 0b10  # byte of the value (bytes 6 … 9 of the response)
        value_byte = Signal(8)
        with m.Switch(resp_source):
            with m.Case(_Value.COMMAND, _Value.REGISTER):
                # (A register's value was loaded into the command's value field: see
                # ``command_load``.)
                m.d.comb += value_byte.eq(rot)
            with m.Case(_Value.EPOCH):
                m.d.comb += value_byte.eq(Mux(value_index[1], 0,
                                              self.epoch.word_select(value_index[0], 8)))
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
        m.d.comb += [sc_wr.addr.eq(resp_k), sc_wr.en.eq(self.command_rotate)]
        # The pointer is reset when the last byte is written (RESPOND), and moved on by the
        # RESPONSE frame.
        with m.If(self.command.ready):
            m.d.sync += resp_ptr.eq(0)
        with m.If(self.resp_next):
            m.d.sync += resp_ptr.eq(resp_ptr + 1)

    def _command_fsm(self, m, resp_status, resp_source, resp_k):
        """The command's steps, WAIT to RESPOND."""
        source = self.source
        cmd = self.command.payload.command
        address_ok = Signal()
        address_lo_ok = Signal()
        address_hi_ok = Signal()
        entry_valid = Signal()
        writable = Signal()
        # The command's opcode, decoded as it is registered (LOOKUP): one flag per opcode.
        OP = protocol.Opcode
        opcodes = [OP.PING, OP.READ_INFO, OP.READ_REG, OP.WRITE_REG, OP.SNAPSHOT,
                   OP.READ_HISTOGRAMS, OP.CLEAR]
        if source is not None:
            opcodes.append(source.opcode)
        is_op = {int(op): Signal(name=f"is_op_{int(op):02x}") for op in opcodes}
        frame_bad = Signal()
        # (A bad address's value, 0, is loaded as the decoder's ``zero``: its flip-flops'
        # synchronous reset, no multiplexer on the RAM's output.)
        rf_entry = self.reg_entry
        # The command's outcome (DECIDE): respond (``d_load``: with the register's value) and
        # one flag per action. (The response's status and value source are set there too: only
        # RESPOND reads them, and no response is pending then.)
        d_respond = Signal()
        d_load = Signal()
        d_info, d_snap, d_hist, d_ext, d_write, d_clear = (Signal(name=f"d_{name}") for name in (
            "info", "snap", "hist", "ext", "write", "clear"))
        d_flags = [d_info, d_snap, d_hist, d_ext, d_write, d_clear]
        # A clear is pending (CLEAR_WAIT, CLEARING): a flip-flop set and cleared with those
        # states, so that no state decode reaches the frame start's logic.
        clear_pending = Signal()
        m.d.comb += self.clear_pending.eq(clear_pending)
        clear_epoch = Signal()  # bit 0 of the epoch (it counts clears)

        def respond(status, source=_Value.ZERO):
            m.d.comb += self.send_response.eq(1)
            m.d.sync += [resp_status.eq(status), resp_source.eq(source), resp_k.eq(0)]
            # A register's value first replaces the command's in the decoder's register (LOAD),
            # where RESPOND reads it with the other bytes (no multiplexer after the RAM's output).
            m.next = "LOAD" if source is _Value.REGISTER else "RESPOND"

        with m.FSM(name="command"):
            with m.State("WAIT"):
                m.d.comb += self.reg_select.eq(1)
                with m.If(self.command.valid & ~self.response_pending):
                    m.next = "INDEX"
            with m.State("INDEX"):
                m.d.comb += self.reg_lookup.eq(1)
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
                if source is not None:
                    with m.Elif(is_op[int(source.opcode)]):
                        m.d.sync += d_ext.eq(1)
                with m.Elif(is_op[OP.CLEAR]):
                    m.d.sync += [d_respond.eq(0), d_clear.eq(1)]
                with m.Else():
                    decide(protocol.ResponseStatus.UNKNOWN_OPCODE)
                m.next = "EXECUTE"
            with m.State("EXECUTE"):
                with m.If(d_respond):
                    m.d.comb += self.send_response.eq(1)
                    m.d.sync += resp_k.eq(0)
                    # A register's value first replaces the command's in the decoder's register
                    # (LOAD), where RESPOND reads it with the other bytes.
                    with m.If(d_load):
                        m.next = "LOAD"
                    with m.Else():
                        m.next = "RESPOND"
                m.d.comb += [self.send_info.eq(d_info), self.send_snapshot.eq(d_snap),
                             self.send_histograms.eq(d_hist)]
                if source is not None:
                    m.d.comb += self.send_ext.eq(d_ext)
                with m.If(d_write):
                    m.d.comb += self.reg_write.eq(1)
                    m.next = "WRITTEN"
                with m.If(d_clear):
                    m.d.sync += clear_pending.eq(1)
                    m.next = "CLEAR_WAIT"
            with m.State("WRITTEN"):
                # The write goes to the register file: the register's bits only (the register
                # file's write strobe, registered, is set in exactly this state).
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
                with m.If(self.frame_idle):
                    m.d.comb += self.clear.eq(1)
                    m.d.sync += clear_epoch.eq(self.epoch[0])
                    m.next = "CLEARING"
            with m.State("CLEARING"):
                with m.If(self.epoch[0] != clear_epoch):
                    m.d.sync += clear_pending.eq(0)
                    respond(protocol.ResponseStatus.OK, _Value.EPOCH)
            with m.State("LOAD"):
                m.d.comb += [self.resp_writing.eq(1), self.command_load.eq(address_ok),
                             self.command_zero.eq(~address_ok)]
                m.next = "RESPOND"
            with m.State("RESPOND"):
                # One byte per cycle, the decoder's command rotated a byte each; after the last
                # the command is back in place and taken.
                m.d.comb += [self.command_rotate.eq(1), self.resp_writing.eq(1)]
                m.d.sync += resp_k.eq(resp_k + 1)
                with m.If(resp_k == protocol.layout_bytes(protocol.RESPONSE) - 1):
                    m.d.comb += self.command.ready.eq(1)
                    m.next = "WAIT"

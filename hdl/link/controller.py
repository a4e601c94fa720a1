"""The link controller: register file, command execution and frame serialisation.

:class:`LinkController` joins five blocks, each in its own module:

* :class:`~.registers.RegisterFile` (``registers.py``): the register file RAM that reads answer
  from, and the flip-flops that writes set (the sniffer's configuration, the link's settings,
  an extension's ports);
* :class:`~.commands.CommandUnit` (``commands.py``): executes a host command, one at a time,
  through the register file, and writes its RESPONSE into a scratch RAM;
* :class:`~.timer.SnapshotTimer` (``timer.py``): the periods (in a block RAM), and the
  periodic snapshot and histogram requests;
* :class:`~.counters.LinkCounters` (``counters.py``): the trace FIFO, and the counters of
  trace records lost and of frames received;
* :class:`~.frame_builder.FrameBuilder` (``frame_builder.py``): chooses the next frame and
  sends its bytes, walking the *frame programme* (``frame_program.py``) that the frames' layouts
  (``protocol.py``) are compiled into: one ROM entry per byte, saying where the byte comes from
  (a constant, byte ``k`` of the table of variable bytes, or the next byte of a word read from a
  read port). The logic does not grow with the number of frame fields; a layout change in
  ``protocol.py`` changes the gateware and the host decoder together, and a field left unbound
  is an elaboration error.
"""

import hashlib

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import config_layout, read_request_layout
from ..rb_sniffer.layouts import status_layout as sniffer_status_layout
from ..rb_sniffer.params import SnifferParams
from ..rb_sniffer.sniffer import TraceSignature
from . import protocol
from .commands import CommandUnit
from .counters import TRACE_FIFO_DEPTH, LinkCounters
from .extension import LinkExtension
from .frame_builder import FrameBuilder
from .framing import FrameByte, decoded_command_layout
from .registers import RegisterFile
from .timer import SnapshotTimer

__all__ = ["LinkController", "build_id", "link_registers"]


def build_id(params, clock_hz, uart_divisor, board):
    """A 32-bit identifier of the build (parameters, clock, protocol), for the INFO frame."""
    text = repr((params, clock_hz, uart_divisor, board, protocol.PROTOCOL_VERSION,
                 protocol.GATEWARE_VERSION))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def link_registers(params, *, snapshot_period=0, config=None, extension=None,
                   trace_summary=False):
    """The registers of a link: :func:`protocol.register_map`'s and the extension's.

    Without ``trace_summary`` (a build without the summariser) the build has no
    ``TRACE_SUMMARY``: a read or write of it answers ``BAD_ADDRESS``, which is how a host tells
    the builds apart (and the register file is as it was before the register existed).

    Raises ``ValueError`` when an extension register takes an address already in use.
    """
    registers = protocol.register_map(params, snapshot_period=snapshot_period, config=config)
    if not trace_summary:
        registers = [r for r in registers if r.field != "link.trace_summary"]
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
    wire : LinkProtocol
        The wire protocol the link speaks: the link's own and its extension kinds'
        (``rbscope.gateware.extensions.PROTOCOL``; INFO carries every kind's fields, zero for
        the blocks this build lacks).
    extension : LinkExtension, optional
        Registers, ports, INFO values and a read source of other blocks on the chip (each
        block's ``hdl/<block>/link.py`` makes its own; several are joined with
        :meth:`~.extension.LinkExtension.joined`).
    ram_output_registers : bool
        Register the output of the response scratch RAM, the loss counter RAM and the periods
        RAM before any logic (default): the ECP5's block RAM spends most of a cycle in its
        clock to output. ``False`` (the iCE40, whose block RAM output is fast) leaves these
        registers out, which saves their logic cells, and splits the variable-byte multiplexer
        in two stages, the first of which reads the programme ROM's output directly (the
        entry is registered on both); the frames are the same.
    trace_depth : int
        Trace records the FIFO holds (a power of two; default
        :data:`~.counters.TRACE_FIFO_DEPTH`, 16: every board build's).
    batches_in_bursts : bool
        A TRACE_BATCH frame between every two frames of a snapshot or histogram burst while
        the FIFO has records (``FrameBuilder``'s; the default). ``False`` sends them after
        the burst (the iCEBreaker's build until 2026-12-03, a few logic cells fewer).
    trace_summary : bool
        Build the trace summariser (:class:`~.summary.TraceSummariser`) in front of the trace
        FIFO, set by the ``TRACE_SUMMARY`` register (the ECP5 boards'); without it the
        register is absent.

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

    def __init__(self, params, *, wire, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None, extension=None, ram_output_registers=True,
                 trace_depth=TRACE_FIFO_DEPTH, batches_in_bursts=True, trace_summary=False):
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
        if not isinstance(wire, protocol.LinkProtocol):
            raise TypeError(f"Wire protocol must be a LinkProtocol, not {wire!r}")
        self.wire = wire
        self.params = params
        self.ram_output_registers = bool(ram_output_registers)
        self.trace_depth = trace_depth
        self.batches_in_bursts = bool(batches_in_bursts)
        self.trace_summary = bool(trace_summary)
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
                                        config=config, extension=ext,
                                        trace_summary=self.trace_summary)
        if ext.source is not None:
            frame = wire.frames.get(int(ext.source.frame_type))
            if frame is None or int(ext.source.opcode) not in {
                    int(op) for kind in wire.kinds for op in kind.opcodes}:
                raise ValueError(f"The extension's frame type {ext.source.frame_type!r} or "
                                 f"opcode {ext.source.opcode!r} is not in the wire protocol "
                                 f"{wire!r}")
        self._info = self._info_values()
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

    def elaborate(self, platform):
        m = Module()
        p = self.params
        ext = self.extension
        source = ext.source
        m.submodules.registers = registers = RegisterFile(p, self.registers, extension=ext)
        m.submodules.counters = counters = LinkCounters(
            p, ram_output_registers=self.ram_output_registers, trace_depth=self.trace_depth,
            trace_summary=self.trace_summary)
        m.submodules.commands = commands = CommandUnit(
            source=source, ram_output_registers=self.ram_output_registers)
        m.submodules.timer = timer = SnapshotTimer(
            snapshot_period=self.snapshot_period, ram_output_registers=self.ram_output_registers)
        m.submodules.frames = frames = FrameBuilder(
            p, info=self._info, wire=self.wire, clock_hz=self.clock_hz, source=source,
            ram_output_registers=self.ram_output_registers,
            batches_in_bursts=self.batches_in_bursts, row_strobe=self.trace_summary)
        self._timer = {"periodic": timer.periodic,  # (inspection, by the tests)
                       "period_written": registers.snapshot_period_write,
                       "hist_written": registers.hist_period_write}

        # The commands, executed by the command unit through the register file.
        command = self.command.payload.command
        wiring.connect(m, wiring.flipped(self.command), commands.command)
        m.d.comb += [
            self.command_rotate.eq(commands.command_rotate),
            self.command_load.eq(commands.command_load),
            self.command_zero.eq(commands.command_zero),
            self.command_value.eq(registers.read_value),
            registers.address.eq(command.address),
            registers.value.eq(command.value),
            registers.select.eq(commands.reg_select),
            registers.lookup.eq(commands.reg_lookup),
            registers.write.eq(commands.reg_write),
            commands.reg_entry.eq(registers.entry),
            commands.epoch.eq(self.sniffer_status.epoch),
            self.clear.eq(commands.clear),
        ]
        # The registers: the sniffer's, the extension's ports, the periods (in the timer).
        m.d.comb += [
            self.cfg.eq(registers.cfg),
            self.win_load.eq(registers.win_load),
            self.win_data.eq(registers.win_data),
            timer.value.eq(command.value),
            timer.snapshot_period_write.eq(registers.snapshot_period_write),
            timer.hist_period_write.eq(registers.hist_period_write),
        ]
        for port in ext.ports:
            ours, theirs = getattr(self, port.port_name), getattr(registers, port.port_name)
            m.d.comb += (ours.eq(theirs) if port.access is protocol.Access.RW
                         else theirs.eq(ours))
        # The link's counters and the trace FIFO.
        wiring.connect(m, wiring.flipped(self.trace), counters.trace)
        m.d.comb += [
            counters.trace_enable.eq(registers.trace_enable),
            counters.rx_good.eq(self.rx_good),
            counters.rx_bad.eq(self.rx_bad),
        ]
        if self.trace_summary:
            # A channel's run is closed as its counters have been read (each pulse they count
            # then has its record), and every run at a clear.
            m.d.comb += [
                counters.summary_mask.eq(registers.trace_summary),
                counters.summary_flush.eq(commands.clear),
                counters.summary_flush_one.eq(frames.row_sent),
                counters.summary_channel.eq(frames.row_channel),
                counters.timestamp.eq(self.sniffer_status.timestamp),
            ]
        # The frames: asked for by the command unit and the timer, built from the registers,
        # the counters and the sniffer's (and the extension's) read ports.
        m.d.comb += [
            frames.send_response.eq(commands.send_response),
            frames.send_info.eq(commands.send_info),
            frames.send_snapshot.eq(commands.send_snapshot),
            frames.send_histograms.eq(commands.send_histograms),
            commands.response_pending.eq(frames.response_pending),
            frames.resp_writing.eq(commands.resp_writing),
            frames.resp_byte.eq(commands.resp_byte),
            commands.resp_next.eq(frames.resp_next),
            frames.clear_pending.eq(commands.clear_pending),
            commands.frame_idle.eq(frames.frame_idle),
            frames.periodic.eq(timer.periodic),
            frames.hist_expired.eq(timer.hist_expired),
            frames.hist_on.eq(timer.hist_on),
            frames.lost_total.eq(counters.lost_total),
            counters.read_addr.eq(frames.counter_addr),
            frames.counter_data.eq(counters.read_data),
            frames.counter_valid.eq(counters.read_valid),
            frames.trace_enable.eq(registers.trace_enable),
            frames.prescaler.eq(registers.cfg.prescaler),
            frames.status.eq(self.sniffer_status),
        ]
        wiring.connect(m, counters.records, frames.records)
        wiring.connect(m, frames.body, wiring.flipped(self.body))
        wiring.connect(m, frames.read_req, wiring.flipped(self.read_req))
        wiring.connect(m, wiring.flipped(self.read_resp), frames.read_resp)
        if source is not None:
            m.d.comb += frames.send_ext.eq(commands.send_ext)
            wiring.connect(m, frames.ext_read_req, wiring.flipped(self.ext_read_req))
            wiring.connect(m, wiring.flipped(self.ext_read_resp), frames.ext_read_resp)
        return m

    def _info_values(self):
        """INFO's fields as this build sends them (:meth:`protocol.LinkProtocol.info_values`,
        with the extension's; the prescaler and the tick period are sent live)."""
        return self.wire.info_values(
            self.params, clock_hz=self.clock_hz, prescaler=0, uart_divisor=self.uart_divisor,
            build_id=build_id(self.params, self.clock_hz, self.uart_divisor, self.board),
            board=self.board, extension=self.extension)

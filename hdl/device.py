"""The rbscope device: the sniffer joined to the telemetry link, with the blocks it is given.

The link speaks :data:`~.extensions.PROTOCOL`; each block given (the NAND emulator, the bus tap)
adds its part of the link (``hdl/<block>/link.py``) and is wired here to the sniffer and to its
ports of the link.

:class:`DeviceCore` works on bytes (fast to simulate, and the place to attach another transport);
:class:`RBScopeDevice` adds the UART and is the top level for boards and the simulated device.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .extensions import PROTOCOL
from .link import protocol
from .link.controller import LinkController
from .link.counters import TRACE_FIFO_DEPTH
from .link.extension import LinkExtension
from .link.framing import CommandDecoder, FrameEncoder
from .link.uart import UartRx, UartTx
from .nand_emu.layouts import bus_signature_members
from .nand_emu.link import emulator_extension
from .nand_emu.loopback import Loopback
from .onfi_tap import OnfiTap
from .onfi_tap.link import TAP_DATA_DONE, TAP_READ_GO, TAP_SPACE_SHIFT, tap_extension
from .onfi_tap.params import TapParams, TapSpace
from .rb_sniffer import RBSniffer, SnifferParams

__all__ = ["DeviceCore", "RBScopeDevice"]


def _tap_members(tap, emulator):
    """The bus tap's pins, prefixed ``tap_`` (none without a tap or in loopback)."""
    if tap is None or emulator is not None:
        return {}
    return {"tap_ce_n": In(tap.targets, init=(1 << tap.targets) - 1), "tap_cle": In(1),
            "tap_ale": In(1), "tap_we_n": In(1, init=1), "tap_re_n": In(1, init=1),
            "tap_io": In(8)}


def _emu_bus_members(emulator):
    """The emulator's ONFI bus ports, prefixed ``emu_`` (none without an emulator)."""
    if emulator is None:
        return {}
    return {f"emu_{name}": member for name, member in bus_signature_members(emulator).items()}


def _connect_emu_bus(m, outer, inner, *, strip):
    """Join ``outer``'s ``emu_*`` bus ports to ``inner``'s of the same name (``strip``: without
    the ``emu_`` prefix, as the loopback names them)."""
    for name, member in outer.signature.members.items():
        if name not in _BUS_NAMES:
            continue
        theirs = getattr(inner, name[len("emu_"):] if strip else name)
        ours = getattr(outer, name)
        m.d.comb += theirs.eq(ours) if member.flow is wiring.In else ours.eq(theirs)


_BUS_NAMES = {f"emu_{name}" for name in ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n", "io_i",
                                         "io_o", "io_oe", "rb")}


class DeviceCore(wiring.Component):
    """Sniffer, command decoder, link controller and frame encoder on byte streams.

    Parameters
    ----------
    params : SnifferParams
    clock_hz : int
    uart_divisor : int
        Reported in INFO (the UART itself is outside the core).
    board : str
    snapshot_ms : int
    config : SnifferConfig, optional
        Boot configuration of the sniffer (register reset values).
    emulator : EmuParams, optional
        Build the NAND die emulator and its traffic generator in, with sniffer channel ``i``
        watching emulated die ``i`` (loopback; ``channels`` must equal the emulator's dies). The
        link then carries their registers and the ground truth (READ_TRUTH).
    emu_config, traffic : EmuConfig, TrafficConfig, optional
        The emulator's and traffic generator's boot configuration.
    tap : TapParams, optional
        Build the opcode-aware bus tap (:class:`~.onfi_tap.OnfiTap`) in: its dies are sniffer
        channels ``0 … dies - 1`` (``first_channel`` must be 0), its ``sniffer_tag`` feeds the
        sniffer's tag input (``params.tag_bits`` must be 4) and its counters are read through
        the link (``TAP_READ``). In loopback it listens to the emulated bus (``targets`` must
        equal the emulated dies, one LUN each); else to the ``tap_*`` pins.
    tap_config : TapConfig, optional
        The tap's boot configuration.
    dsp_bounds : int
        How many class-window bounds the sniffer holds and compares in iCE40UP DSP blocks
        (``RBSniffer(dsp_bounds=…)``; the link writes them, and the register file's reset
        values are their power-up values). 0 (the default) for none; not with an emulator
        (its loopback builds its own sniffer).
    ram_output_registers : bool
        The link's registers after its block RAMs' outputs (``LinkController``'s; ``False`` for
        the iCE40, whose block RAM output is fast).
    trace_depth : int
        Trace records the link's FIFO holds (``LinkController``'s; a power of two).
    batches_in_bursts : bool
        TRACE_BATCH frames between a burst's frames (``LinkController``'s).
    trace_summary : bool
        The trace summariser in front of the trace FIFO (``LinkController``'s; the ECP5
        boards' builds).

    Members
    -------
    emu_ce_n, emu_cle, emu_ale, emu_we_n, emu_re_n, emu_wp_n, emu_io_i, emu_io_o, emu_io_oe,
    emu_rb : (with ``emulator`` only) the emulated dies' ONFI bus, for a real NAND host
        controller (``rbscope.gateware.nand_emu.layouts.bus_signature_members``).
    tap_ce_n, tap_cle, tap_ale, tap_we_n, tap_re_n, tap_io : (with ``tap`` and no emulator
        only) the tapped NAND channel's bus (inputs only: the tap never drives it).
    rb : In(channels)
        The R/B# pins (unused in loopback).
    rx : In(stream.Signature(8))
        Bytes received from the host (taken at most every ten cycles: the command decoder's CRC
        is bit-serial; a UART delivers a byte every ten bit times of at least four cycles).
    tx : Out(stream.Signature(8))
        Bytes to send to the host.
    rx_error : In(1)
        Strobe: a receive error below the byte level (UART framing error, overrun).
    """

    def __init__(self, params, *, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None, emulator=None, emu_config=None, traffic=None, tap=None,
                 tap_config=None, dsp_bounds=0, ram_output_registers=True,
                 trace_depth=TRACE_FIFO_DEPTH, batches_in_bursts=True, trace_summary=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if dsp_bounds and emulator is not None:
            raise ValueError("dsp_bounds applies to a sniffer of R/B# pins, not to an emulator "
                             "build")
        self.dsp_bounds = dsp_bounds
        self.params = params
        self.emulator = emulator
        self.tap = tap
        if tap is not None:
            if not isinstance(tap, TapParams):
                raise TypeError(f"Tap parameters must be a TapParams, not {tap!r}")
            if tap.sniffer != params or tap.first_channel != 0 or params.tag_bits != 4:
                raise ValueError("the tap must label this sniffer's channels from 0 "
                                 "(TapParams(sniffer=params)), and the sniffer needs tag_bits=4")
            if emulator is not None and (tap.luns != 1 or tap.targets != emulator.dies):
                raise ValueError(f"in loopback the tap has one target per emulated die "
                                 f"({emulator.dies}), one LUN each")
        if emulator is None:
            # The DSP-held bounds power up with the register file's reset values.
            resets = {reg.field: reg.reset
                      for reg in protocol.register_map(params, config=config)}
            boot_windows = [(resets[f"windows.{k}.lo"], resets[f"windows.{k}.hi"])
                            for k in range(params.classes)]
            self.sniffer = RBSniffer(params, dsp_bounds=dsp_bounds, boot_windows=boot_windows)
        else:
            self.loopback = Loopback(emulator, params)  # checks channels == dies
        extension = LinkExtension.joined(
            emulator_extension(emulator, emu_config, traffic) if emulator is not None else None,
            tap_extension(tap, tap_config) if tap is not None else None)
        self.controller = LinkController(params, wire=PROTOCOL, clock_hz=clock_hz,
                                         uart_divisor=uart_divisor,
                                         board=board, snapshot_ms=snapshot_ms, config=config,
                                         extension=extension,
                                         ram_output_registers=ram_output_registers,
                                         trace_depth=trace_depth,
                                         batches_in_bursts=batches_in_bursts,
                                         trace_summary=trace_summary)
        super().__init__({
            **_emu_bus_members(emulator),
            **_tap_members(tap, emulator),
            "rb": In(params.channels, init=(1 << params.channels) - 1),
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "rx_error": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.controller = controller = self.controller
        m.submodules.decoder = decoder = CommandDecoder()
        m.submodules.encoder = encoder = FrameEncoder()

        wiring.connect(m, wiring.flipped(self.rx), decoder.wire)
        wiring.connect(m, decoder.command, controller.command)
        m.d.comb += [decoder.rotate.eq(controller.command_rotate),
                     decoder.load.eq(controller.command_load),
                     decoder.zero.eq(controller.command_zero),
                     decoder.value.eq(controller.command_value)]
        wiring.connect(m, controller.body, encoder.body)
        wiring.connect(m, encoder.wire, wiring.flipped(self.tx))
        m.d.comb += [
            controller.rx_good.eq(decoder.good),
            controller.rx_bad.eq(decoder.bad | decoder.dropped | self.rx_error),
        ]
        if self.emulator is None:
            m.submodules.sniffer = sniffer = self.sniffer
            wiring.connect(m, controller.read_req, sniffer.read_req)
            wiring.connect(m, sniffer.read_resp, controller.read_resp)
            wiring.connect(m, sniffer.trace, controller.trace)
            if self.dsp_bounds:
                m.d.comb += [sniffer.win_load.eq(controller.win_load[:self.dsp_bounds]),
                             sniffer.win_data.eq(controller.win_data)]
            m.d.comb += [
                sniffer.rb.eq(self.rb),
                sniffer.cfg.eq(controller.cfg),
                sniffer.clear.eq(controller.clear),
                controller.sniffer_status.eq(sniffer.status),
            ]
        else:
            # Loopback: the sniffer inside watches the emulated dies, driven by the on-chip
            # traffic generator while it runs and by the external ONFI bus (emu_*) otherwise.
            m.submodules.loopback = loop = self.loopback
            _connect_emu_bus(m, self, loop, strip=True)
            wiring.connect(m, controller.read_req, loop.snf_read_req)
            wiring.connect(m, loop.snf_read_resp, controller.read_resp)
            wiring.connect(m, loop.snf_trace, controller.trace)
            # The ground truth, read through the link's extension port.
            req, resp = controller.ext_read_req, controller.ext_read_resp
            m.d.comb += [
                loop.emu_read_req.valid.eq(req.valid),
                loop.emu_read_req.payload.die.eq(req.payload.unit),
                loop.emu_read_req.payload.index.eq(req.payload.index),
                req.ready.eq(loop.emu_read_req.ready),
                resp.valid.eq(loop.emu_read_resp.valid),
                resp.payload.eq(loop.emu_read_resp.payload),
                loop.emu_read_resp.ready.eq(resp.ready),
            ]
            m.d.comb += [
                loop.snf_cfg.eq(controller.cfg),
                loop.snf_clear.eq(controller.clear),
                controller.sniffer_status.eq(loop.snf_status),
                loop.emu_cfg.as_value().eq(controller.emu_cfg),
                loop.traffic_cfg.as_value().eq(controller.emu_traffic),
                loop.traffic_start.eq(controller.emu_control[0]),
                loop.traffic_stop.eq(controller.emu_control[1]),
                controller.emu_busy.eq(loop.traffic_status.busy),
                controller.emu_steps.eq(loop.traffic_status.steps),
            ]
        if self.tap is not None:
            self._add_tap(m, controller)
        return m

    def _add_tap(self, m, controller):
        """The bus tap: its bus, R/B# and trace, its tags into the sniffer, its counters and
        configuration through the link."""
        tap = self.tap
        m.submodules.tap = onfi = OnfiTap(tap)
        if self.emulator is None:
            sniffer = self.sniffer
            bus = {name: getattr(self, f"tap_{name}") for name in ("ce_n", "cle", "ale", "we_n",
                                                                   "re_n", "io")}
            m.d.comb += onfi.rb.eq(self.rb[:tap.dies])
            trace, tag = sniffer.trace, sniffer.tag
        else:
            loop = self.loopback
            bus = {name: getattr(loop, f"seen_{name}") for name in ("ce_n", "cle", "ale", "we_n",
                                                                    "re_n", "io")}
            m.d.comb += onfi.rb.eq(loop.seen_rb)
            trace, tag = loop.snf_trace, loop.snf_tag
        m.d.comb += [getattr(onfi, name).eq(value) for name, value in bus.items()]
        m.d.comb += [
            onfi.trace.valid.eq(trace.valid), onfi.trace.payload.eq(trace.payload),
            tag.eq(onfi.sniffer_tag.as_value()),
            onfi.cfg.as_value().eq(controller.tap_cfg), onfi.record.eq(controller.tap_record),
        ]
        # One counter word per TAP_READ write: requested, answered a few cycles later, kept in
        # TAP_DATA with its "done" bit until the next request.
        pending = Signal()
        space = Signal(TapSpace)
        index = Signal(len(onfi.read_req.payload.index))
        word = Signal(64)
        go = controller.tap_read
        shift = TAP_SPACE_SHIFT
        with m.If(go[TAP_READ_GO.bit_length() - 1]):
            m.d.sync += [pending.eq(1), space.eq(go[shift:shift + len(space)]),
                         index.eq(go[:shift]), word.eq(0)]
        m.d.comb += [
            onfi.read_req.valid.eq(pending),
            onfi.read_req.payload.space.eq(space),
            onfi.read_req.payload.index.eq(index),
            onfi.read_resp.ready.eq(1),
            controller.tap_data.eq(word),
        ]
        with m.If(onfi.read_req.ready):
            m.d.sync += pending.eq(0)
        with m.If(onfi.read_resp.valid):
            m.d.sync += word.eq(Cat(onfi.read_resp.payload,
                                    Const(0, TAP_DATA_DONE - tap.counter_bits),
                                    Const(1, 1)))


class RBScopeDevice(wiring.Component):
    """The whole device behind a UART: the top level of boards and of the simulated device.

    Parameters
    ----------
    params : SnifferParams
    uart_divisor : int
        Clock cycles per UART bit (at least 4).
    **options
        ``clock_hz``, ``board``, ``snapshot_ms``, ``config``: as for :class:`DeviceCore`. A
        simulation may declare any clock; the device reports it and the host converts ticks
        with it.

    Members
    -------
    emu_* : (with an emulator) its ONFI bus, as for :class:`DeviceCore`.
    tap_* : (with a tap and no emulator) the tapped bus, as for :class:`DeviceCore`.
    rb : In(channels)
        The R/B# pins.
    uart_rx : In(1)
        Serial data from the host (asynchronous).
    uart_tx : Out(1)
        Serial data to the host.
    """

    def __init__(self, params, *, uart_divisor, **options):
        self.core = DeviceCore(params, uart_divisor=uart_divisor, **options)
        self.params = params
        self.uart_divisor = uart_divisor
        super().__init__({
            **_emu_bus_members(options.get("emulator")),
            **_tap_members(options.get("tap"), options.get("emulator")),
            "rb": In(params.channels, init=(1 << params.channels) - 1),
            "uart_rx": In(1, init=1),
            "uart_tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.uart_rx = rx = UartRx(self.uart_divisor)
        m.submodules.uart_tx = tx = UartTx(self.uart_divisor)
        wiring.connect(m, rx.data, core.rx)
        wiring.connect(m, core.tx, tx.data)
        m.d.comb += [
            core.rb.eq(self.rb),
            rx.rx.eq(self.uart_rx),
            self.uart_tx.eq(tx.tx),
            core.rx_error.eq(rx.error | rx.overrun),
        ]
        _connect_emu_bus(m, self, core, strip=False)
        for name in _tap_members(self.core.tap, self.core.emulator):
            m.d.comb += getattr(core, name).eq(getattr(self, name))
        return m

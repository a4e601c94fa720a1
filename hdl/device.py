"""The rbscope device: the sniffer joined to the telemetry link.

:class:`DeviceCore` works on bytes (fast to simulate, and the place to attach another transport);
:class:`RBScopeDevice` adds the UART and is the top level for boards and the simulated device.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .link import protocol
from .link.controller import LinkController
from .link.extension import ExtPort, LinkExtension, ReadSource
from .link.framing import CommandDecoder, FrameEncoder
from .link.uart import UartRx, UartTx
from .rb_sniffer import RBSniffer, SnifferParams

__all__ = ["DeviceCore", "RBScopeDevice", "emulator_extension"]


def emulator_extension(emu, config=None, traffic=None):
    """The NAND emulator's and traffic generator's part of the link (a :class:`LinkExtension`).

    Parameters
    ----------
    emu : EmuParams
    config : EmuConfig, optional
        The emulator's boot configuration (default: its defaults).
    traffic : TrafficConfig, optional
        The traffic generator's boot programme (default: all zero).
    """
    from .nand_emu import layouts as emu_layouts
    from .nand_emu.params import EmuConfig
    if emu.counter_bits != protocol.EMU_COUNTER_BITS:
        raise ValueError(f"The link carries {protocol.EMU_COUNTER_BITS}-bit ground-truth "
                         f"counters; the emulator has {emu.counter_bits}")
    config = EmuConfig() if config is None else config
    cfg_layout = emu_layouts.config_layout(emu)
    traffic_layout = emu_layouts.traffic_layout(emu)
    status = emu_layouts.traffic_status_layout(emu)
    link = protocol.EmuLink(
        emu.dies, cfg_layout.size, traffic_layout.size, emu_layouts.config_const(emu, config),
        0 if traffic is None else emu_layouts.traffic_const(emu, traffic))
    rw, ro = protocol.Access.RW, protocol.Access.RO
    ports = (
        ExtPort("emu.cfg", link.cfg_bits, rw, link.cfg_reset),
        ExtPort("emu.traffic", link.traffic_bits, rw, link.traffic_reset),
        ExtPort("emu.control", 2, rw, strobe=True),
        ExtPort("emu.busy", data.Layout.cast(status["busy"].shape).size
                if isinstance(status["busy"].shape, data.Layout)
                else data.Shape.cast(status["busy"].shape).width, ro),
        ExtPort("emu.steps", data.Shape.cast(status["steps"].shape).width, ro),
    )
    truth = ReadSource(protocol.FrameType.TRUTH, protocol.Opcode.READ_TRUTH, units=emu.dies,
                       unit_field="die", words=protocol.EMU_COUNTERS,
                       word_bits=protocol.EMU_COUNTER_BITS)
    return LinkExtension(registers=tuple(protocol.emu_registers(link)), ports=ports, emu=link,
                         source=truth)


def _emu_bus_members(emulator):
    """The emulator's ONFI bus ports, prefixed ``emu_`` (none without an emulator)."""
    if emulator is None:
        return {}
    from .nand_emu.layouts import bus_signature_members
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

    Members
    -------
    emu_ce_n, emu_cle, emu_ale, emu_we_n, emu_re_n, emu_wp_n, emu_io_i, emu_io_o, emu_io_oe,
    emu_rb : (with ``emulator`` only) the emulated dies' ONFI bus, for a real NAND host
        controller (``rbscope.gateware.nand_emu.layouts.bus_signature_members``).
    rb : In(channels)
        The R/B# pins (unused in loopback).
    rx : In(stream.Signature(8))
        Bytes received from the host.
    tx : Out(stream.Signature(8))
        Bytes to send to the host.
    rx_error : In(1)
        Strobe: a receive error below the byte level (UART framing error, overrun).
    """

    def __init__(self, params, *, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None, emulator=None, emu_config=None, traffic=None):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.emulator = emulator
        if emulator is None:
            self.sniffer = RBSniffer(params)
        else:
            from .nand_emu.loopback import Loopback
            self.loopback = Loopback(emulator, params)  # checks channels == dies
        extension = (emulator_extension(emulator, emu_config, traffic)
                     if emulator is not None else None)
        self.controller = LinkController(params, clock_hz=clock_hz, uart_divisor=uart_divisor,
                                         board=board, snapshot_ms=snapshot_ms, config=config,
                                         extension=extension)
        super().__init__({
            **_emu_bus_members(emulator),
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
        return m


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
        return m

"""The rbscope device: the sniffer joined to the telemetry link.

:class:`DeviceCore` works on bytes (fast to simulate, and the place to attach another transport);
:class:`RBScopeDevice` adds the UART and is the top level for boards and the simulated device.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .link.controller import LinkController
from .link.framing import CommandDecoder, FrameEncoder
from .link.uart import UartRx, UartTx
from .rb_sniffer import RBSniffer, SnifferParams

__all__ = ["DeviceCore", "RBScopeDevice"]


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
        self.controller = LinkController(params, clock_hz=clock_hz, uart_divisor=uart_divisor,
                                         board=board, snapshot_ms=snapshot_ms, config=config,
                                         emu=emulator, emu_config=emu_config, traffic=traffic)
        super().__init__({
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
            # Loopback: the sniffer inside watches the emulated dies; the emulator's external
            # bus pins stay idle (the on-chip traffic generator drives the dies).
            m.submodules.loopback = loop = self.loopback
            wiring.connect(m, controller.read_req, loop.snf_read_req)
            wiring.connect(m, loop.snf_read_resp, controller.read_resp)
            wiring.connect(m, loop.snf_trace, controller.trace)
            wiring.connect(m, controller.emu_read_req, loop.emu_read_req)
            wiring.connect(m, loop.emu_read_resp, controller.emu_read_resp)
            m.d.comb += [
                loop.snf_cfg.eq(controller.cfg),
                loop.snf_clear.eq(controller.clear),
                controller.sniffer_status.eq(loop.snf_status),
                loop.emu_cfg.eq(controller.emu_cfg),
                loop.traffic_cfg.eq(controller.traffic_cfg),
                loop.traffic_start.eq(controller.traffic_start),
                loop.traffic_stop.eq(controller.traffic_stop),
                controller.traffic_status.eq(loop.traffic_status),
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
        return m

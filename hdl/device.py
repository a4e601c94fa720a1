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

    Members
    -------
    rb : In(channels)
        The R/B# pins.
    rx : In(stream.Signature(8))
        Bytes received from the host.
    tx : Out(stream.Signature(8))
        Bytes to send to the host.
    rx_error : In(1)
        Strobe: a receive error below the byte level (UART framing error, overrun).
    """

    def __init__(self, params, *, clock_hz, uart_divisor, board="sim", snapshot_ms=100,
                 config=None):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.sniffer = RBSniffer(params)
        self.controller = LinkController(params, clock_hz=clock_hz, uart_divisor=uart_divisor,
                                         board=board, snapshot_ms=snapshot_ms, config=config)
        super().__init__({
            "rb": In(params.channels, init=(1 << params.channels) - 1),
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "rx_error": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sniffer = sniffer = self.sniffer
        m.submodules.controller = controller = self.controller
        m.submodules.decoder = decoder = CommandDecoder()
        m.submodules.encoder = encoder = FrameEncoder()

        wiring.connect(m, wiring.flipped(self.rx), decoder.wire)
        wiring.connect(m, decoder.command, controller.command)
        wiring.connect(m, controller.body, encoder.body)
        wiring.connect(m, encoder.wire, wiring.flipped(self.tx))
        wiring.connect(m, controller.read_req, sniffer.read_req)
        wiring.connect(m, sniffer.read_resp, controller.read_resp)
        wiring.connect(m, sniffer.trace, controller.trace)
        m.d.comb += [
            sniffer.rb.eq(self.rb),
            sniffer.cfg.eq(controller.cfg),
            sniffer.clear.eq(controller.clear),
            controller.sniffer_status.eq(sniffer.status),
            controller.rx_good.eq(decoder.good),
            controller.rx_bad.eq(decoder.bad | decoder.dropped | self.rx_error),
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

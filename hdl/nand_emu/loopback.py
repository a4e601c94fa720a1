"""Loopback: emulated dies' R/B# into sniffer channels, on one chip, with no link.

A board with no SSD attached measures its own emulated dies: channel ``i`` of the sniffer watches
die ``i``. The bus comes from the external pins, or from the on-chip traffic generator while it
runs.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rb_sniffer import RBSniffer, SnifferParams
from ..rb_sniffer.sniffer import SnifferSignature
from .emulator import NandEmulator
from .layouts import (
    bus_signature_members,
    config_layout,
    read_request_layout,
    traffic_layout,
    traffic_status_layout,
)
from .params import EmuParams
from .traffic import TrafficGenerator

__all__ = ["Loopback"]


class Loopback(wiring.Component):
    """An emulator, a traffic generator and a sniffer watching the emulated dies.

    Parameters
    ----------
    params : EmuParams
    sniffer : SnifferParams, optional
        Defaults to one channel per die.

    Members
    -------
    ce_n, cle, ale, we_n, re_n, wp_n, io_i, io_o, io_oe, rb :
        The emulator's bus (see :class:`NandEmulator`); the traffic generator overrides the
        inputs while ``traffic_status.busy``.
    emu_cfg, emu_read_req, emu_read_resp :
        The emulator's configuration and ground-truth read port.
    traffic_cfg, traffic_start, traffic_stop, traffic_status :
        The traffic generator's.
    snf_cfg, snf_clear, snf_read_req, snf_read_resp, snf_status, snf_trace :
        The sniffer's (see :class:`RBSniffer`).
    snf_tag : In(channels * tag_bits)
        Only with a sniffer of ``tag_bits > 0``: its per-channel tag input (a bus tap's).
    seen_ce_n, seen_cle, seen_ale, seen_we_n, seen_re_n, seen_io, seen_rb : Out
        The bus as the emulator sees it (the traffic generator's or the pins'; ``seen_io`` the
        dies' output while they drive it), and each die's own R/B#: what a passive bus tap in
        loopback listens to.
    """

    def __init__(self, params, sniffer=None):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        sniffer = SnifferParams(channels=params.dies) if sniffer is None else sniffer
        if not isinstance(sniffer, SnifferParams) or sniffer.channels != params.dies:
            raise ValueError(f"the sniffer needs one channel per die ({params.dies}), "
                             f"not {sniffer!r}")
        self.params = params
        self.sniffer_params = sniffer
        super().__init__({
            **bus_signature_members(params),
            "emu_cfg": In(config_layout(params)),
            "emu_read_req": In(stream.Signature(read_request_layout(params))),
            "emu_read_resp": Out(stream.Signature(params.counter_bits)),
            "traffic_cfg": In(traffic_layout(params)),
            "traffic_start": In(1), "traffic_stop": In(1),
            "traffic_status": Out(traffic_status_layout(params)),
            # The sniffer's ports, prefixed: one definition (SnifferSignature) for both tops.
            **{f"snf_{name}": member
               for name, member in SnifferSignature(sniffer).members.items()},
            **({"snf_tag": In(sniffer.channels * sniffer.tag_bits)} if sniffer.tag_bits else {}),
            "seen_ce_n": Out(params.dies), "seen_cle": Out(1), "seen_ale": Out(1),
            "seen_we_n": Out(1), "seen_re_n": Out(1), "seen_io": Out(8),
            "seen_rb": Out(params.dies),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.emu = emu = NandEmulator(self.params)
        m.submodules.traffic = gen = TrafficGenerator(self.params)
        m.submodules.sniffer = snf = RBSniffer(self.sniffer_params)

        pins = ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n")
        with m.If(gen.status.busy):
            m.d.comb += [getattr(emu, name).eq(getattr(gen, name)) for name in pins]
            m.d.comb += emu.io_i.eq(gen.io)
        with m.Else():
            m.d.comb += [getattr(emu, name).eq(getattr(self, name)) for name in pins]
            m.d.comb += emu.io_i.eq(self.io_i)
        m.d.comb += [
            self.io_o.eq(emu.io_o), self.io_oe.eq(emu.io_oe), self.rb.eq(emu.rb),
            emu.cfg.eq(self.emu_cfg),
            gen.cfg.eq(self.traffic_cfg), gen.start.eq(self.traffic_start),
            gen.stop.eq(self.traffic_stop), gen.rb.eq(emu.die_rb),
            self.traffic_status.eq(gen.status),
            snf.rb.eq(emu.die_rb), snf.cfg.eq(self.snf_cfg), snf.clear.eq(self.snf_clear),
            self.snf_status.eq(snf.status),
        ]
        if self.sniffer_params.tag_bits:
            m.d.comb += snf.tag.eq(self.snf_tag)
        m.d.comb += [
            self.seen_ce_n.eq(emu.ce_n), self.seen_cle.eq(emu.cle), self.seen_ale.eq(emu.ale),
            self.seen_we_n.eq(emu.we_n), self.seen_re_n.eq(emu.re_n),
            self.seen_io.eq(Mux(emu.io_oe, emu.io_o, emu.io_i)), self.seen_rb.eq(emu.die_rb),
        ]
        wiring.connect(m, wiring.flipped(self.emu_read_req), emu.read_req)
        wiring.connect(m, emu.read_resp, wiring.flipped(self.emu_read_resp))
        wiring.connect(m, wiring.flipped(self.snf_read_req), snf.read_req)
        wiring.connect(m, snf.read_resp, wiring.flipped(self.snf_read_resp))
        wiring.connect(m, snf.trace, wiring.flipped(self.snf_trace))
        return m

"""Drive and read out the ``onfi_tap`` Verilog top (the listen-only ONFI bus tap) from cocotb.

The tap decodes the bus a NAND host drives (here typically :class:`~rbscope.cocotb.onfi.
OnfiDriver`), keeps each die's *tag* (the class of the last busy-starting command sent to it)
and counts confirm commands per die and class, final confirms per plane count and, from a
sniffer's trace, measured pulses. :class:`Tap` resets it, gives the driver the bus handles,
and reads every counter back as a :class:`~rbscope.gateware.onfi_tap.model.TapCounts`, the
class the bit-exact model and ``rbscope label`` use::

    tap = Tap(dut, params, period_ns=10)          # params: the TapParams of the build
    nand = OnfiDriver(tap.pins())                 # the tap listens to what the driver sends
    await tap.reset(TapConfig(lun_shift=16))
    await nand.program_page(row=0x10000, data=b"..", wait=False)
    await tap.settle()
    counts = await tap.counts()
    assert counts.ops[1][OpClass.PROGRAM] == 1    # die 1: LUN 1 of target 0
    assert tap.tags()[1] is OpClass.PROGRAM

The power-up recorder (a build with ``record_cells`` > 0) keeps each target's bus cycles from
its first Reset; :meth:`Tap.record` reads them back as
:class:`~rbscope.gateware.onfi_tap.params.RecordCell` s, :func:`rbscope.device.tap.record_cycles`
turns them into the bus cycles ``rbscope identify`` decodes. The driver reads data out only when
the bench serves it: the tap drives nothing, so a die's bytes must be put on ``io`` while RE# is
low (see ``cocotb_tests/tap_bench.py``).

Port names, the counter spaces and the timing rules are in ``docs/ports.md`` (section ``tap``)
and the decoding in ``docs/opcode_tap.md``.
"""

from __future__ import annotations

from cocotb.triggers import FallingEdge, RisingEdge, Timer

from rbscope.gateware.onfi_tap.model import STROBE_LATENCY, TapCounts
from rbscope.gateware.onfi_tap.params import (
    CLASS_SLOTS,
    OpClass,
    TapConfig,
    TapParams,
    TapSpace,
    decode_record_word,
)
from rbscope.gateware.onfi_tap.tap import config_const, read_request_layout

from .onfi import OnfiPins
from .readport import ReadPort, ReadTimeout

__all__ = ["RESET_CYCLES", "SETTLE_CYCLES", "ReadTimeout", "Tap"]

#: Rising edges with ``rst`` high in :meth:`Tap.reset` (the synchronisers fill with the idle
#: levels in 2).
RESET_CYCLES = 3
#: Cycles from a WE# rising edge on the pins until the tap's tags and counters hold its command:
#: the synchroniser and front end (:data:`~rbscope.gateware.onfi_tap.model.STROBE_LATENCY`), the
#: decoder's register stage, the tag register, and the counter banks' four-stage update.
SETTLE_CYCLES = STROBE_LATENCY + 2 + 4


class Tap:
    """Control an ``onfi_tap`` top from a cocotb test.

    Parameters
    ----------
    dut : cocotb handle
        The top: ports ``clk``, ``rst``, ``ce_n``, ``cle``, ``ale``, ``we_n``, ``io``, ``rb``,
        ``cfg``, ``trace__*``, ``tag``, ``pulse_tag``, ``read_req__*``, ``read_resp__*``.
        ``clk`` must be running (cocotb's ``Clock`` or the clock wrapper).
    params : TapParams
        The parameters the Verilog was built with.
    period_ns : float
        The clock period.
    timeout_cycles : int
        Cycles to wait for each side of a counter read.
    """

    def __init__(self, dut, params, *, period_ns, timeout_cycles=1000):
        if not isinstance(params, TapParams):
            raise TypeError(f"params must be a TapParams, not {params!r}")
        self.dut = dut
        self.params = params
        self.period_ns = period_ns
        self.port = ReadPort(dut, "read", timeout_cycles=timeout_cycles)
        self._request = read_request_layout(params)

    def pins(self):
        """The :class:`~rbscope.cocotb.onfi.OnfiPins` of the tapped bus, for an
        :class:`~rbscope.cocotb.onfi.OnfiDriver`: the tap's bus inputs (it has no WP# or data
        output; a driver's reads see on ``io`` what the bench puts there while RE# is low)."""
        d = self.dut
        return OnfiPins(ce_n=d.ce_n, cle=d.cle, ale=d.ale, we_n=d.we_n, re_n=d.re_n, io_in=d.io,
                        rb=d.rb)

    async def reset(self, config=None, rb=None, cycles=RESET_CYCLES):
        """Load ``config`` (a :class:`TapConfig`; default ``TapConfig()``), put the bus and
        ``rb`` (default all ready) at their idle levels, the trace and read port idle, hold
        ``rst`` for ``cycles`` rising edges and release it on a falling edge, where this
        returns."""
        dut, p = self.dut, self.params
        config = TapConfig() if config is None else config
        if not isinstance(config, TapConfig):
            raise TypeError(f"config must be a TapConfig, not {config!r}")
        dut.cfg.value = config_const(p, config)
        dut.ce_n.value = (1 << p.targets) - 1
        dut.we_n.value = 1
        dut.re_n.value = 1
        dut.record.value = 0
        dut.cle.value = 0
        dut.ale.value = 0
        dut.io.value = 0
        dut.rb.value = (1 << p.dies) - 1 if rb is None else rb
        dut.trace__valid.value = 0
        dut.trace__payload.value = 0
        self.port.idle()
        dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0

    async def settle(self):
        """Wait until the last bus cycle driven so far is in the tags and counters
        (:data:`SETTLE_CYCLES`), and return at a falling edge."""
        await Timer(SETTLE_CYCLES * self.period_ns, unit="ns")
        await FallingEdge(self.dut.clk)

    def tags(self, port="tag"):
        """Return each die's tag (``port`` ``"tag"``) or pulse tag (``"pulse_tag"``) as
        :class:`OpClass` members."""
        word = int(getattr(self.dut, port).value)
        return [OpClass(word >> 4 * d & 0xF) for d in range(self.params.dies)]

    async def read(self, space, index):
        """Read one counter word: ``space`` a :class:`TapSpace`, ``index`` as in
        ``docs/ports.md`` (``OPS``/``PULSES``: ``die * 16 + class``; ``PLANES``:
        ``die * 16 + kind * 4 + planes - 1``; ``HIST``: ``class << bin_bits | bin``)."""
        space = TapSpace(space)
        limit = self.params.depth(space)
        if not isinstance(index, int) or not 0 <= index < limit:
            raise ValueError(f"index must be from 0 to {limit - 1} in {space.name}, not {index!r}")
        request = self._request.const({"space": space, "index": index}).as_value().value
        return await self.port.read(request, f"{space.name} word {index}")

    async def counts(self, histogram=False):
        """Read every per-die counter (and with ``histogram`` every width histogram bin) and
        return them as a :class:`TapCounts` (``ops``, ``planes``, ``pulses``, ``hist``)."""
        p = self.params
        counts = TapCounts.zeros(p)
        for die in range(p.dies):
            for c in OpClass:
                i = p.class_index(die, c)
                counts.ops[die][c] = await self.read(TapSpace.OPS, i)
                counts.pulses[die][c] = await self.read(TapSpace.PULSES, i)
            for slot in TapCounts.planes_slots():
                counts.planes[die][slot] = await self.read(TapSpace.PLANES,
                                                           die * CLASS_SLOTS + slot)
        if histogram:
            for c in OpClass:
                for b in range(p.sniffer.hist_bins):
                    counts.hist[c][b] = await self.read(TapSpace.HIST, p.hist_index(c, b))
        return counts

    async def record_strobe(self, bits):
        """Strobe the power-up recorder for one cycle: ``RECORD_ARM`` or ``RECORD_START``
        (:mod:`rbscope.gateware.onfi_tap.params`). Returns at a falling edge."""
        await FallingEdge(self.dut.clk)
        self.dut.record.value = bits
        await FallingEdge(self.dut.clk)
        self.dut.record.value = 0

    async def record(self):
        """Read the power-up recorder: ``{target: [RecordCell, …]}``, each target's cells up to
        its fill (the first cell's ``armed``, ``recording`` and ``fill`` give its state)."""
        p = self.params
        if not p.record_cells:
            raise ValueError("this build has no power-up recorder (record_cells = 0)")
        out = {}
        for t in range(p.targets):
            head = decode_record_word(await self.read(TapSpace.RECORD, p.record_index(t, 0)))
            cells = [head]
            for i in range(1, min(head.fill, p.record_cells)):
                cells.append(decode_record_word(
                    await self.read(TapSpace.RECORD, p.record_index(t, i))))
            out[t] = cells
        return out

"""The sniffer's histogram RAM on the iCE40UP's SPRAM, checked against a behavioural SPRAM model.

The model stands in for ``SB_SPRAM256KA`` in the Amaranth simulator. It powers up with random
contents, returns garbage after a write cycle (the sniffer must never use it) and raises a sticky
``violation`` flag on any port use the sniffer's wrapper must not make (powered down, asleep,
partial write masks, deselected). The sniffer built on it must scrub the RAM at boot and then
count exactly as the reference model says.
"""

import gc
import random
import warnings

import pytest
from amaranth.hdl import Module, Signal, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from rbscope.device.stimulus import merge_trains
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train
from rbscope.gateware.rb_sniffer.ram import (
    BANK_DEPTH,
    SPRAM_DEPTH,
    SPRAM_WIDTH,
    SinglePortRAM,
    SPRAMSignature,
    pick_ram_kind,
)
from rbscope.gateware.rb_sniffer.sniffer import RBSniffer

from .sniffer_harness import SnifferBench


class SPRAMModel(wiring.Component):
    """Behavioural model of one ``SB_SPRAM256KA`` with a port-usage checker."""

    def __init__(self, seed):
        self.seed = seed
        super().__init__(SPRAMSignature().flip())
        self.violation = Signal()
        self.writes = Signal(32)

    def elaborate(self, platform):
        m = Module()
        rng = random.Random(self.seed)
        init = [rng.getrandbits(SPRAM_WIDTH) for _ in range(SPRAM_DEPTH)]
        m.submodules.mem = mem = Memory(shape=SPRAM_WIDTH, depth=SPRAM_DEPTH, init=init)
        rd = mem.read_port(transparent_for=())
        wr = mem.write_port()
        wrote = Signal()
        m.d.comb += [
            rd.addr.eq(self.address), rd.en.eq(~self.wren),
            wr.addr.eq(self.address), wr.data.eq(self.datain),
            wr.en.eq(self.wren & self.chipselect),
        ]
        m.d.sync += wrote.eq(self.wren)
        # After a write cycle DATAOUT is not a read result: give garbage.
        m.d.comb += self.dataout.eq(rd.data ^ (wrote * 0xA5C3))
        bad = (~self.poweroff | self.sleep | self.standby | ~self.chipselect
               | (self.wren & (self.maskwren != 0b1111)))
        with m.If(bad):
            m.d.sync += self.violation.eq(1)
        with m.If(self.wren):
            m.d.sync += self.writes.eq(self.writes + 1)
        return m


def test_single_port_ram_rejects_bad_builds():
    # The rejected objects exist (Amaranth tracks them from their creation) but are never
    # elaborated: collect them here, where their "never used" warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="RAM kind"):
            SinglePortRAM(8, 16, kind="bram")
        with pytest.raises(ValueError, match="at most 16384"):
            SinglePortRAM(8, SPRAM_DEPTH + 1, kind="spram")
        with pytest.raises(ValueError, match="hist_ram"):
            RBSniffer(SnifferParams(channels=1), hist_ram="ebr")
        gc.collect()


@pytest.mark.parametrize("kind", ["memory", "spram"])
def test_single_port_ram_reads_what_was_written(kind):
    models = []

    def block():
        models.append(SPRAMModel(len(models)))
        return models[-1]

    # Three banks (the last one short) of the generic RAM; one SPRAM deep.
    depth = 2 * BANK_DEPTH + 100 if kind == "memory" else 64
    dut = SinglePortRAM(20, depth, kind=kind, spram_block=block)
    if kind == "memory":
        assert dut.banks == 3
    addrs = sorted({a % depth for a in (0, 1, depth // 2, BANK_DEPTH - 1, BANK_DEPTH, depth - 2,
                                        depth - 1, 5)})

    def word(a):
        return (0x9ABCD ^ (a * 0x1111)) & 0xFFFFF

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = {}

    async def bench(ctx):
        for a in addrs:
            ctx.set(dut.addr, a)
            ctx.set(dut.we, 1)
            ctx.set(dut.wdata, word(a))
            await ctx.tick()
        # The sniffer's pattern: a read, then a write to another word, then the read's data
        # (two cycles after its address) while the next read is presented.
        for a in reversed(addrs):
            ctx.set(dut.addr, a)
            ctx.set(dut.we, 0)
            await ctx.tick()
            ctx.set(dut.addr, 3)
            ctx.set(dut.we, 1)
            ctx.set(dut.wdata, 0x55555)
            await ctx.tick()
            got[a] = ctx.get(dut.rdata)
        ctx.set(dut.we, 0)
        got["violation"] = [ctx.get(b.violation) for b in models]

    sim.add_testbench(bench)
    sim.run()
    assert {a: got[a] for a in addrs} == {a: word(a) for a in addrs}
    assert got["violation"] == ([0, 0] if kind == "spram" else [])


def test_histogram_ram_follows_the_platform():
    class FakePlatform:
        def __init__(self, device):
            self.device = device

    up5k, ecp5 = FakePlatform("iCE40UP5K"), FakePlatform("LFE5U-85F")
    assert pick_ram_kind("auto", up5k, 176 * 16) == "spram"
    assert pick_ram_kind("auto", up5k, SPRAM_DEPTH + 1) == "memory"
    assert pick_ram_kind("auto", ecp5, 176 * 16) == "memory"
    assert pick_ram_kind("auto", None, 176 * 16) == "memory"
    assert pick_ram_kind("spram", None, 100) == "spram"


def test_sniffer_on_spram_scrubs_at_boot_and_counts_like_the_model():
    p = SnifferParams(channels=2, width_bits=16)
    config = SnifferConfig(prescaler=1, glitch_ticks=2, windows=((4, 30), (30, 300)),
                           idle_ticks=20)
    models = []

    def block():
        models.append(SPRAMModel(100 + len(models)))
        return models[-1]

    bench = SnifferBench(p, hist_ram="spram", spram_block=block)

    start = 3000  # pulses begin after the boot scrub
    trains = [
        Train(1, [(start + 40 * k, 0) if i % 2 == 0 else (start + 40 * k + 10 + 4 * (k % 7), 1)
                  for k in range(60) for i in range(2)]),
        Train(1, [(start + 7, 0), (start + 907, 1), (start + 950, 0), (start + 951, 1)]),
    ]
    cycles = start + 60 * 40 + 100
    model = SnifferModel(p, config).run(trains, cycles)
    got = {}

    async def tb(ctx):
        initial, schedule = merge_trains(trains)
        await bench.reset(ctx, config, initial)
        got["busy_at_start"] = ctx.get(bench.dut.status.clear_busy)
        boot = 0
        while ctx.get(bench.dut.status.clear_busy):
            await ctx.tick()
            boot += 1
        bench.cycle += boot
        got["boot"] = boot
        await bench.play(ctx, schedule, cycles)
        await bench.drain(ctx)
        got["rows"] = [await bench.read_row(ctx, ch) for ch in range(p.channels)]
        got["hists"] = [await bench.read_histogram(ctx, ch) for ch in range(p.channels)]
        got["violation"] = [ctx.get(b.violation) for b in models]
        got["writes"] = [ctx.get(b.writes) for b in models]

    sim = bench.simulator()
    sim.add_testbench(tb)
    sim.run()
    assert len(models) == 3  # 32-bit bins and a tag bit: three 16-bit blocks
    assert got["violation"] == [0, 0, 0]
    assert got["busy_at_start"] == 1
    # One word per slot (2 cycles) over the histogram, a few slots more.
    h_depth = p.hist_bins * p.channels_pow2
    assert 2 * h_depth <= got["boot"] < 2 * h_depth + 40 < start
    assert got["writes"][0] >= h_depth
    assert got["rows"] == [c.row(p) for c in model.channels]
    assert got["hists"] == [c.histogram for c in model.channels]
    assert sum(got["hists"][0]) == 60 and got["rows"][1][p.counter_index(Counter.GLITCH)] == 1

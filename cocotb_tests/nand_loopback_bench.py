"""Cocotb loopback benches: emulated dies' R/B# → sniffer channels inside one design.

The sniffer's per-class counts must equal the emulator's ground truth exactly. The pytest side
is ``tests/test_nand_emu_cocotb.py``; ``benchmarks/nand_emu.py`` uses the ``report`` parameter.

Parameters (:func:`cocotb_tests.runner.bench_params`):

``params``
    Keyword arguments of :class:`EmuParams` (must match the design that was built).
``config``
    Keyword arguments of :class:`EmuConfig`.
``windows``
    Sniffer class windows in ticks, in the order ``dbsy, read, program, erase``.
``traffic``
    A list of keyword arguments of :class:`TrafficConfig`, run one after the other by
    ``traffic_generator_counts_match`` (each compared on its own).
``workload``
    ``{"seed": s, "ops": n}`` for ``driver_workload_counts_match`` (ONFI driver on the pins).
``report``
    If given, a path where the traffic test writes its timing (emulated ns, wall seconds).
"""

import json
import random
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from cocotb_tests.runner import bench_params
from rbscope.cocotb.onfi import MODE0, OnfiDriver, OnfiPins
from rbscope.gateware.nand_emu import EmuConfig, EmuCounter, EmuParams, TrafficConfig
from rbscope.gateware.nand_emu.layouts import (
    config_const,
    read_request_layout,
    traffic_const,
    traffic_status_layout,
)
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams, Space
from rbscope.gateware.rb_sniffer import layouts as snf_layouts

CLOCK_PS = 20834  # 48 MHz
DBSY, READ, PROGRAM, ERASE = range(4)


def load():
    prm = bench_params(params={}, config={}, windows=[], traffic=[], workload={}, report=None)
    params = EmuParams(**prm["params"])
    config = EmuConfig(**{k: tuple(v) if isinstance(v, list) else v
                          for k, v in prm["config"].items()}).validate(params)
    return prm, params, config


class LoopbackBench:
    def __init__(self, dut, prm, params, config):
        self.dut = dut
        self.params = params
        self.config = config
        self.snf = SnifferParams(channels=params.dies)
        self.snf_config = SnifferConfig(prescaler=config.prescaler, glitch_ticks=1,
                                        windows=tuple(map(tuple, prm["windows"])),
                                        idle_ticks=100).validate(self.snf)
        pins = OnfiPins(ce_n=dut.ce_n, cle=dut.cle, ale=dut.ale, we_n=dut.we_n, re_n=dut.re_n,
                        wp_n=dut.wp_n, io_in=dut.io_i, io_out=dut.io_o, io_oe=dut.io_oe,
                        rb=dut.rb)
        self.nand = OnfiDriver(pins, MODE0, ready_timeout_ns=1_000_000)

    async def start(self):
        dut = self.dut
        dut.clk.value = 0
        await Timer(1, unit="ns")  # start low and late: see sniffer_bench
        Clock(dut.clk, CLOCK_PS, unit="ps").start(start_high=False)
        dut.emu_cfg.value = config_const(self.params, self.config)
        dut.snf_cfg.value = snf_layouts.config_const(self.snf, self.snf_config)
        dut.traffic_cfg.value = 0
        for name in ("traffic_start", "traffic_stop", "snf_clear", "emu_read_req__valid",
                     "emu_read_req__payload", "emu_read_resp__ready", "snf_read_req__valid",
                     "snf_read_req__payload", "snf_read_resp__ready"):
            getattr(dut, name).value = 0
        await self.nand.idle()
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        await Timer(100, unit="ns")

    async def _read(self, prefix, payload):
        dut = self.dut
        getattr(dut, f"{prefix}_read_req__payload").value = payload
        getattr(dut, f"{prefix}_read_req__valid").value = 1
        while True:  # sample ready before the edge that transfers the request
            await ReadOnly()
            ready = int(getattr(dut, f"{prefix}_read_req__ready").value)
            await RisingEdge(dut.clk)
            if ready:
                break
        await FallingEdge(dut.clk)
        getattr(dut, f"{prefix}_read_req__valid").value = 0
        getattr(dut, f"{prefix}_read_resp__ready").value = 1
        while True:
            await ReadOnly()
            valid = int(getattr(dut, f"{prefix}_read_resp__valid").value)
            value = int(getattr(dut, f"{prefix}_read_resp__payload").value)
            await RisingEdge(dut.clk)
            if valid:
                break
        await FallingEdge(dut.clk)
        getattr(dut, f"{prefix}_read_resp__ready").value = 0
        return value

    async def truth(self, die):
        layout = read_request_layout(self.params)
        return {c: await self._read("emu", layout.const({"die": die, "index": c})
                                    .as_value().value) for c in EmuCounter}

    async def measured(self, channel):
        layout = snf_layouts.read_request_layout(self.snf)
        row = []
        for index in range(self.snf.counters_per_channel):
            row.append(await self._read("snf", layout.const(
                {"space": Space.COUNTERS, "channel": channel, "index": index})
                .as_value().value))
        return row

    async def settle(self):
        """Wait until every die is ready, then one sniffer scanner round."""
        while int(self.dut.rb.value) != (1 << self.params.rb_count) - 1:
            await RisingEdge(self.dut.clk)
        await Timer((2 * (self.snf.channels + 1) + 10) * CLOCK_PS, unit="ps")

    async def snapshot(self):
        return [(await self.measured(d), await self.truth(d)) for d in range(self.params.dies)]

    async def compare(self, before, mp=1):
        """Assert that what the sniffer counted since ``before`` equals the ground truth on
        every die; return the differences ``(row, truth)`` per die."""
        await self.settle()
        after = await self.snapshot()
        k = self.snf.classes
        out = []
        for die, ((row0, truth0), (row1, truth1)) in enumerate(zip(before, after, strict=True)):
            row = [b - a for a, b in zip(row0, row1, strict=True)]
            truth = {c: truth1[c] - truth0[c] for c in EmuCounter}
            assert row[k + Counter.DROPPED] == 0 and row[k + Counter.OVERLONG] == 0, row
            assert row[k + Counter.UNCLASSIFIED] == 0, f"die {die}: unclassified {row}"
            assert row[k + Counter.PARTIAL] == 0, row
            # N_Tprogram × Mp = N_page (RB-Explorer eq. 6), exactly.
            assert row[PROGRAM] * mp == truth[EmuCounter.PAGE_PROGRAMS], (die, row, truth)
            assert row[PROGRAM] == truth[EmuCounter.PROGRAM_OPS], (die, row, truth)
            assert row[READ] == truth[EmuCounter.PAGE_READS], (die, row, truth)
            assert row[ERASE] == truth[EmuCounter.ERASE_OPS], (die, row, truth)
            assert row[ERASE] * mp == truth[EmuCounter.BLOCK_ERASES], (die, row, truth)
            out.append((row, truth))
        return out


@cocotb.test()
async def traffic_generator_counts_match(dut):
    """The on-chip traffic generator drives the dies; the sniffer counts equal the truth."""
    prm, params, config = load()
    bench = LoopbackBench(dut, prm, params, config)
    await bench.start()
    report = []
    for traffic in prm["traffic"]:
        report.append(await run_traffic(dut, bench, params, TrafficConfig(**traffic)))
    if prm["report"]:
        with open(prm["report"], "w") as f:
            json.dump(report, f)


async def run_traffic(dut, bench, params, traffic):
    mp = params.planes if traffic.multi_plane else 1
    dut.traffic_cfg.value = traffic_const(params, traffic)
    await FallingEdge(dut.clk)
    status = traffic_status_layout(params)
    before = await bench.snapshot()
    t0, w0 = get_sim_time("ns"), time.perf_counter()
    dut.traffic_start.value = 1
    await FallingEdge(dut.clk)
    dut.traffic_start.value = 0
    await RisingEdge(dut.clk)
    while status.from_bits(int(dut.traffic_status.value)).busy:
        await Timer(2000, unit="ns")
    emulated_ns, wall = get_sim_time("ns") - t0, time.perf_counter() - w0
    out = await bench.compare(before, mp)
    dies = bin(traffic.dies).count("1")
    groups = traffic.blocks * traffic.loops
    for die in range(params.dies):
        row, truth = out[die]
        on = traffic.dies >> die & 1
        assert truth[EmuCounter.PAGE_PROGRAMS] == on * groups * traffic.pages * mp
        assert truth[EmuCounter.PAGE_READS] == on * groups * traffic.pages * traffic.reads
        assert truth[EmuCounter.BLOCK_ERASES] == on * groups * mp * traffic.erase
        assert truth[EmuCounter.FAILED] == 0 and truth[EmuCounter.ILLEGAL] == 0, truth
        if mp > 1:
            assert row[DBSY] == on * groups * (traffic.pages + traffic.erase) * (mp - 1), row
    steps = status.from_bits(int(dut.traffic_status.value)).steps
    dut._log.info("traffic: %d steps on %d dies, %.0f ns emulated in %.2f s (%.0f ns/s)",
                  steps, dies, emulated_ns, wall, emulated_ns / wall)
    return {"emulated_ns": emulated_ns, "wall_seconds": wall, "steps": steps, "mp": mp,
            "truth": [{c.name: v for c, v in t.items()} for _, t in out],
            "measured": [r for r, _ in out]}


@cocotb.test()
async def driver_workload_counts_match(dut):
    """A random workload through the pins (ONFI driver): sniffer counts equal the truth."""
    prm, params, config = load()
    if not prm["workload"]:
        return
    bench = LoopbackBench(dut, prm, params, config)
    await bench.start()
    nand = bench.nand
    rng = random.Random(prm["workload"]["seed"])
    before = await bench.snapshot()
    next_page = {}
    for _ in range(prm["workload"]["ops"]):
        nand.select(rng.randrange(params.dies))
        block = rng.randrange(params.blocks // 2, params.blocks)
        key = (nand.target, block)
        choice = rng.random()
        if choice < 0.6 and next_page.get(key, 0) < params.pages_per_block:
            page = next_page.get(key, 0)
            await nand.program_page(params.row(block, page), b"\x5a", wait=False)
            next_page[key] = page + 1
        elif choice < 0.85:
            await nand.read_page(params.row(block, rng.randrange(params.pages_per_block)), 1)
        else:
            await nand.erase_block(params.row(block, 0), wait=False)
            next_page[key] = 0
        await nand.wait_ready()
    out = await bench.compare(before, 1)
    assert sum(t[EmuCounter.PAGE_PROGRAMS] for _, t in out) > 0

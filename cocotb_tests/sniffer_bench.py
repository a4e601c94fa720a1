"""Cocotb bench for the R/B# sniffer on its generated Verilog (Icarus and Verilator).

The bench drives the pins from pulse trains, reads every counter and histogram bin back through
the read port, and checks them against the bit-exact reference model
(:mod:`rbscope.gateware.rb_sniffer.model`). The pytest side is ``tests/test_sniffer_cocotb.py``.

Parameters (:func:`cocotb_tests.runner.bench_params`):

``params``
    Keyword arguments of :class:`SnifferParams` (must match the design that was built).
``config``
    Keyword arguments of :class:`SnifferConfig`.
``scenario``
    ``{"kind": "random", "seed": …, "spec": {TrainSpec keyword arguments}}``,
    ``{"kind": "worst_case", "low": cycles, "high": cycles, "pulses": n}`` (every channel pulses in
    phase) or ``{"kind": "explicit", "trains": [[initial, [[cycle, level], …]], …]}``.
``cycles``
    Length of the run (for ``worst_case``, computed from the pulses when 0).
``check_trace``
    Also record the trace port every cycle and compare it with the model's pulse list.
``expect_pulses``
    If given, the number of classified pulses per channel the scenario must produce (a check
    that the bench really exercised what it claims).
``report``
    If given, a path where the bench writes what it read back and what the model expected, as
    JSON (used by ``make demo``).
"""

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from cocotb_tests.runner import bench_params
from rbscope.cocotb.rb import RbDriver
from rbscope.cocotb.sniffer import Sniffer
from rbscope.device.stimulus import TrainSpec, merge_trains, random_trains
from rbscope.gateware.rb_sniffer import Counter, EventKind, SnifferConfig, SnifferParams, Space
from rbscope.gateware.rb_sniffer.layouts import trace_layout
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import PIPELINE_DEPTH

CLOCK_NS = 10
RESET_CYCLES = 3


def build_trains(params, scenario, cycles):
    kind = scenario["kind"]
    if kind == "random":
        spec = dict(scenario["spec"])
        for key in ("low_at_reset",):
            spec[key] = frozenset(spec.get(key, ()))
        spec["stuck"] = {int(k): v for k, v in spec.get("stuck", {}).items()}
        for key in ("gap", "glitch_len"):
            if key in spec:
                spec[key] = tuple(spec[key])
        return random_trains(TrainSpec(channels=params.channels, cycles=cycles, **spec),
                             scenario["seed"]), cycles
    if kind == "worst_case":
        low, high, n = scenario["low"], scenario["high"], scenario["pulses"]
        start = 10
        edges = []
        for i in range(n):
            t = start + i * (low + high)
            edges += [(t, 0), (t + low, 1)]
        cycles = cycles or start + n * (low + high) + 50
        return [Train(1, list(edges)) for _ in range(params.channels)], cycles
    if kind == "explicit":
        return [Train(init, [tuple(e) for e in edges]) for init, edges in scenario["trains"]], \
            cycles
    raise ValueError(f"Unknown scenario kind {kind!r}")


async def start(dut, params, config, initial):
    """Start the clock and reset the sniffer with ``initial`` on the pins; return its driver."""
    # Start the clock low, first rising edge half a period later (at t = 0 nothing has settled).
    dut.clk.value = 0
    Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
    sniffer = Sniffer(dut, params, period_ns=CLOCK_NS)
    await sniffer.reset(config, rb=initial, cycles=RESET_CYCLES)
    return sniffer


async def watch_trace(dut, params, records):
    layout = trace_layout(params)
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.trace__valid.value):
            rec = layout.from_bits(int(dut.trace__payload.value))
            records.append((rec.channel, EventKind(rec.kind), rec.index, rec.width))


@cocotb.test()
async def counts_match_reference_model(dut):
    """Every counter and histogram bin equals the reference model's, bit for bit."""
    prm = bench_params(params={}, config={}, scenario={}, cycles=0, check_trace=False,
                       expect_pulses=None, report=None)
    params = SnifferParams(**prm["params"])
    config = SnifferConfig(**{k: tuple(map(tuple, v)) if k == "windows" else v
                              for k, v in prm["config"].items()}).validate(params)
    trains, cycles = build_trains(params, prm["scenario"], prm["cycles"])
    model = SnifferModel(params, config).run(trains, cycles)
    assert not model.may_drop, "scenario can make the gateware drop events: fix the scenario"
    if prm["expect_pulses"] is not None:
        for ch, counts in enumerate(model.channels):
            measured = sum(counts.classes) + counts.unclassified
            assert measured == prm["expect_pulses"], f"channel {ch}: {measured} pulses"

    initial, schedule = merge_trains(trains)
    trace = []
    if prm["check_trace"]:
        cocotb.start_soon(watch_trace(dut, params, trace))
    drv = await start(dut, params, config, initial)
    play_start = time.perf_counter()
    await RbDriver(dut.rb, CLOCK_NS).play_schedule(schedule, cycles)
    play_seconds = time.perf_counter() - play_start

    status = drv.status()
    assert status.timestamp == model.timestamp_at(cycles)
    assert status.quiescent == model.quiescent_at(cycles)
    assert status.quiet_since == model.quiet_since_at(cycles)
    assert status.epoch == 0 and status.clear_busy == 0

    # Every event emitted before `cycles` has reached the RAMs after one scanner round.
    await Timer((drv.scanner_round + PIPELINE_DEPTH + 2) * CLOCK_NS, unit="ns")
    dropped_index = params.counter_index(Counter.DROPPED)
    rows, hists = [], []
    for ch in range(params.channels):
        rows.append([await drv.read(Space.COUNTERS, ch, i) for i in range(params.row)])
        hists.append([await drv.read(Space.HISTOGRAM, ch, b) for b in range(params.hist_bins)])
    if prm["report"]:
        with open(prm["report"], "w") as f:
            json.dump({
                "cycles": cycles, "clock_ns": CLOCK_NS, "timestamp": status.timestamp,
                "play_seconds": play_seconds, "pulses": len(model.pulses),
                "quiescent": status.quiescent, "rows": rows, "histograms": hists,
                "model_rows": [c.row(params) for c in model.channels],
                "model_histograms": [c.histogram for c in model.channels],
            }, f)
    for ch, counts in enumerate(model.channels):
        row, expected = rows[ch], counts.row(params)
        assert row[dropped_index] == 0, f"channel {ch} dropped {row[dropped_index]} events"
        assert row == expected, f"channel {ch} counters\n got      {row}\n expected {expected}"
        assert hists[ch] == counts.histogram, f"channel {ch} histogram differs"
    if prm["check_trace"]:
        glitch = params.counter_index(Counter.GLITCH)
        expected = [(q.channel, q.kind, q.index, q.width) for q in model.pulses
                    if q.index != glitch]
        for ch in range(params.channels):
            got = [r for r in trace if r[0] == ch]
            want = [r for r in expected if r[0] == ch]
            assert got == want, f"channel {ch} trace differs"
    dut._log.info("checked %d channels, %d pulses, %d cycles",
                  params.channels, len(model.pulses), cycles)

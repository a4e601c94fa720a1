"""Cocotb side of benchmarks/cocotb_speed.py: replay random NAND trains into rb_sniffer, time it,
check the read-out against the model. Settings come in RBSCOPE_SPEED (JSON)."""

import json
import os
import time

import cocotb
from cocotb.clock import Clock

from rbscope.cocotb.rb import RbDriver, RbRecording
from rbscope.cocotb.sniffer import Sniffer
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams

PERIOD_NS = 10


@cocotb.test()
async def replay_speed(dut):
    s = json.loads(os.environ["RBSCOPE_SPEED"])
    params = SnifferParams(channels=s["channels"])
    config = SnifferConfig(prescaler=1, glitch_ticks=3,
                           windows=((3, 12), (12, 120), (120, 2400), (2400, 5000)),
                           idle_ticks=50)
    trains = random_trains(TrainSpec(channels=params.channels, cycles=s["cycles"],
                                     glitch_rate=0.15, gap=(40, 400)), 3)
    rec = RbRecording.from_trains(trains, s["cycles"], params, config,
                                  clock_seconds=PERIOD_NS * 1e-9)
    if not s["wrapped"]:
        Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    snf = Sniffer(dut, params, period_ns=PERIOD_NS)
    await snf.reset(config, rb=rec.initial_word)
    start = time.perf_counter()
    await RbDriver(dut.rb, PERIOD_NS).play(rec)
    seconds = time.perf_counter() - start
    got = await snf.measurement(config)
    assert got.counts == rec.expected.counts
    with open(s["report"], "w") as f:
        json.dump({"cycles": s["cycles"], "seconds": seconds,
                   "pulses": sum(sum(c.classes) for c in got.counts)}, f)

"""Cocotb bench for the small up-counter that proves the bench runner (see
``tests/test_cocotb_runner.py``).

The device under test counts the clock cycles on which ``en`` is high, modulo ``2**width``, on
``count``, and raises ``overflow`` for exactly one cycle, the cycle on which ``count`` reads 0
again after a wrap.

Parameters (:func:`cocotb_tests.runner.bench_params`):

``width``
    Counter width in bits (default 8).
``fault``
    ``None`` for a correct bench, ``"wrong_count"`` to expect one count too many (the bench must
    then fail), ``"hang"`` to wait forever (the runner's timeout must stop it).
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, FallingEdge, ReadOnly, RisingEdge

from cocotb_tests.runner import bench_params

CLOCK_NS = 10


async def start(dut):
    """Start the clock, reset the counter for two cycles and leave ``en`` low."""
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    dut.en.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.count.value) == 0, f"count is {int(dut.count.value)} after reset, not 0"
    assert int(dut.overflow.value) == 0, "overflow is high after reset"


@cocotb.test()
async def counts_enabled_cycles(dut):
    """After each edge, ``count`` equals the number of enabled cycles so far, modulo 2**width."""
    params = bench_params(width=8, fault=None)
    modulus = 1 << params["width"]
    expected_offset = 1 if params["fault"] == "wrong_count" else 0
    if params["fault"] == "hang":
        Clock(dut.clk, CLOCK_NS, unit="ns").start()
        await Event().wait()  # never set, and the clock keeps the simulation going forever

    await start(dut)
    rng = random.Random(1)
    enabled = 0
    for cycle in range(3 * modulus):
        en = rng.random() < 0.7
        await FallingEdge(dut.clk)  # drive away from the sampling edge
        dut.en.value = int(en)
        await RisingEdge(dut.clk)
        await ReadOnly()
        enabled += en
        want = (enabled + expected_offset) % modulus
        got = int(dut.count.value)
        assert got == want, f"cycle {cycle}: count is {got}, expected {want}"
    assert enabled > modulus, "the random enable pattern never wrapped the counter"


@cocotb.test()
async def overflow_strobes_once_per_wrap(dut):
    """With ``en`` held high, ``overflow`` is high exactly on cycles 2**width, 2*2**width, ..."""
    params = bench_params(width=8, fault=None)
    modulus = 1 << params["width"]

    await start(dut)
    await FallingEdge(dut.clk)
    dut.en.value = 1
    strobes = []
    for cycle in range(1, 2 * modulus + 6):  # cycle n: the n-th edge with en high
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.overflow.value):
            strobes.append(cycle)
            assert int(dut.count.value) == 0, f"overflow at cycle {cycle} but count is not 0"
    assert strobes == [modulus, 2 * modulus], f"overflow strobed on cycles {strobes}"

"""Prove `cocotb_tests.runner` on both simulators with a small Amaranth up-counter.

The bench is `cocotb_tests/smoke_bench.py`; it checks the count after random enable patterns and
the cycle of every overflow strobe.
"""

import re

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from cocotb_tests.runner import SIMULATORS, BenchFailure, run_bench


class UpCounter(wiring.Component):
    """Count the cycles on which ``en`` is high, modulo ``2**width``.

    Parameters
    ----------
    width : int
        Counter width in bits.

    Members
    -------
    en : In(1)
        Count this cycle.
    count : Out(width)
        Number of enabled cycles so far, modulo ``2**width``.
    overflow : Out(1)
        High for the one cycle on which ``count`` returns to 0 after a wrap.
    """

    def __init__(self, width: int = 8):
        if not isinstance(width, int) or width < 1:
            raise TypeError(f"Counter width must be a positive integer, not {width!r}")
        self.width = width
        super().__init__({"en": In(1), "count": Out(width), "overflow": Out(1)})

    def elaborate(self, platform):
        m = Module()
        counter = Signal(self.width)
        with m.If(self.en):
            m.d.sync += counter.eq(counter + 1)
        m.d.sync += self.overflow.eq(self.en & (counter == (1 << self.width) - 1))
        m.d.comb += self.count.eq(counter)
        return m


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_counter_bench_passes(simulator, cocotb_build_dir):
    result = run_bench(
        UpCounter, "up_counter", "smoke_bench", simulator, cocotb_build_dir, params={"width": 8}
    )
    assert result.passed == ("counts_enabled_cycles", "overflow_strobes_once_per_wrap")


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_failing_bench_raises(simulator, cocotb_build_dir):
    with pytest.raises(BenchFailure) as info:
        run_bench(
            UpCounter(8),
            "up_counter",
            "smoke_bench",
            simulator,
            cocotb_build_dir,
            params={"width": 8, "fault": "wrong_count"},
        )
    message = str(info.value)
    assert "1 of 2 cocotb test(s) failed" in message
    assert "counts_enabled_cycles [failed]" in message
    got, want = map(int, re.search(r"count is (\d+), expected (\d+)", message).groups())
    assert want == got + 1
    assert [case.name for case in info.value.result.failed] == ["counts_enabled_cycles"]


def test_no_test_run_raises(cocotb_build_dir):
    with pytest.raises(BenchFailure, match="no cocotb test ran"):
        run_bench(
            UpCounter,
            "up_counter",
            "smoke_bench",
            "icarus",
            cocotb_build_dir,
            test_filter="no_such_test",
        )


def test_hung_bench_times_out(cocotb_build_dir):
    with pytest.raises(BenchFailure, match="timed out"):
        run_bench(
            UpCounter,
            "up_counter",
            "smoke_bench",
            "icarus",
            cocotb_build_dir,
            test_filter="counts_enabled_cycles",
            params={"fault": "hang"},
            timeout=3,
        )


def test_unknown_bench_parameter_fails(cocotb_build_dir):
    with pytest.raises(BenchFailure, match="Unknown bench parameter"):
        run_bench(
            UpCounter,
            "up_counter",
            "smoke_bench",
            "icarus",
            cocotb_build_dir,
            params={"widht": 8},
        )


@pytest.mark.parametrize("simulator", [pytest.param(s, marks=pytest.mark.heavy) if s == "verilator"
                                       else s for s in SIMULATORS])
def test_build_is_reused_until_design_changes(simulator, cocotb_build_dir):
    def run(width):
        return run_bench(
            lambda: UpCounter(width),
            "up_counter",
            "smoke_bench",
            simulator,
            cocotb_build_dir,
            params={"width": width},
            test_filter="overflow_strobes_once_per_wrap",
        )

    run(4)  # may or may not build, depending on what an earlier run left behind
    assert not run(4).rebuilt
    changed = run(5)
    assert changed.rebuilt
    assert changed.passed == ("overflow_strobes_once_per_wrap",)


def test_waves_are_recorded(cocotb_build_dir):
    result = run_bench(
        UpCounter,
        "up_counter",
        "smoke_bench",
        "icarus",
        cocotb_build_dir,
        test_filter="overflow_strobes_once_per_wrap",
        waves=True,
    )
    assert (result.log.parent / "up_counter.fst").stat().st_size > 0


def test_rejects_unknown_simulator(cocotb_build_dir):
    with pytest.raises(ValueError, match="'modelsim'"):
        run_bench(UpCounter, "up_counter", "smoke_bench", "modelsim", cocotb_build_dir)

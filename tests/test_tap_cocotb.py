"""The tap in the cocotb toolkit (issue 25, item 20): its exported Verilog top, driven by the
toolkit's OnfiDriver and read out with ``rbscope.cocotb.tap.Tap``, on Icarus and Verilator
(``cocotb_tests/tap_bench.py``)."""

import pytest

from cocotb_tests.runner import run_bench
from rbscope.gateware.export import design_of
from rbscope.gateware.onfi_tap import TapParams


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_tap_decodes_the_drivers_commands(simulator, cocotb_build_dir):
    result = run_bench(lambda: design_of("tap", tap=TapParams(targets=2, luns=2)), "onfi_tap",
                       "tap_bench", simulator, cocotb_build_dir,
                       params={"targets": 2, "luns": 2, "lun_shift": 16})
    assert sorted(result.passed) == ["decoded_commands_and_tags",
                                     "power_up_recorder_keeps_what_each_target_said",
                                     "read_gives_up_instead_of_hanging"], result.cases

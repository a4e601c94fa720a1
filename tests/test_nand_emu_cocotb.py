"""Cocotb protocol benches of the NAND emulator (``cocotb_tests/nand_emu_bench.py``) on Icarus
and Verilator, in both storage modes, and the loopback benches
(``cocotb_tests/nand_loopback_bench.py``)."""

import pytest

from cocotb_tests.runner import run_bench
from rbscope.gateware.nand_emu import EmuParams, NandEmulator

#: (The Verilator builds of these benches take about 2 minutes each: `make test-heavy`, which CI
#: runs; `make test` keeps Icarus, and the sniffer's benches keep Verilator there.)
SIMULATORS = ["icarus", pytest.param("verilator", marks=pytest.mark.heavy)]

#: A small die: 2 dies × 2 planes × 8 blocks × 8 pages of 64 + 8 bytes.
GEOMETRY = {"dies": 2, "page_bytes": 64, "spare_bytes": 8, "pages_per_block": 8,
            "blocks_per_plane": 8, "planes": 2}

#: Busy times in ticks of 2 cycles (48 MHz): tPROG 4–6 µs, tBERS 6 µs (time-scaled NAND).
CONFIG = {"prescaler": 2, "t_wb": 2,
          "times": {"R": 10, "PROG0": 100, "PROG1": 140, "PROG2": 60, "PROG3": 20, "BERS": 150,
                    "CBSY": 6, "DBSY": 3, "RCBSY": 4, "RST": 8, "FEAT": 3},
          "page_types": [0, 1, 2, 1], "seed": 7}


def run_emu(simulator, build_dir, storage, fuzz=None, test_filter=None):
    params = {**GEOMETRY, "storage": storage}
    return run_bench(lambda: NandEmulator(EmuParams(**params)), "nand_emu", "nand_emu_bench",
                     simulator, build_dir, test_filter=test_filter,
                     params={"params": params, "config": CONFIG,
                             "fuzz": fuzz or {"seed": 1, "sequences": 250, "ops": 6}})


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("storage", [0, 1], ids=["timing", "array"])
def test_protocol(simulator, storage, cocotb_build_dir):
    """Every command, the parameter page, data, status bits, NAND rules, busy widths, fuzz."""
    result = run_emu(simulator, cocotb_build_dir, storage)
    assert len(result.passed) == 9, result.passed


@pytest.mark.slow
def test_fuzz_long(cocotb_build_dir):
    """A longer seeded fuzz run: 2000 sequences of up to 10 operations (Verilator, array)."""
    run_emu("verilator", cocotb_build_dir, 1, fuzz={"seed": 100, "sequences": 2000, "ops": 10},
            test_filter="fuzz_random_sequences")


#: Loopback timings (ticks of 2 cycles) and the sniffer windows that separate them:
#: tDBSY 3, tR 10, tPROG 60/90 (lower/upper), tBERS 200.
LOOP_CONFIG = {"prescaler": 2, "t_wb": 2,
               "times": {"R": 10, "PROG0": 60, "PROG1": 90, "BERS": 200, "CBSY": 6, "DBSY": 3,
                         "RCBSY": 4, "RST": 8, "FEAT": 3},
               "page_types": [0, 1]}
LOOP_WINDOWS = [[2, 6], [8, 20], [40, 120], [150, 300]]  # dbsy, read, program, erase
LOOP_TRAFFIC = [
    # Single-plane (Mp = 1): 2 blocks × 8 pages, a read after each program, erase, twice.
    {"dies": 3, "first_block": 0, "blocks": 2, "pages": 8, "reads": 1, "loops": 2},
    # Two-plane (Mp = 2): one tPROG pulse programs two pages.
    {"dies": 3, "first_block": 4, "blocks": 2, "pages": 4, "reads": 0, "loops": 1,
     "multi_plane": True},
    # Only die 1, no erase.
    {"dies": 2, "first_block": 2, "blocks": 1, "pages": 3, "reads": 2, "loops": 1,
     "erase": False},
]


def run_loopback(simulator, build_dir, traffic=LOOP_TRAFFIC, workload=None, report=None,
                 test_filter=None):
    from rbscope.gateware.nand_emu.loopback import Loopback

    params = {**GEOMETRY, "storage": 0}
    return run_bench(lambda: Loopback(EmuParams(**params)), "nand_loopback", "nand_loopback_bench",
                     simulator, build_dir, test_filter=test_filter,
                     params={"params": params, "config": LOOP_CONFIG, "windows": LOOP_WINDOWS,
                             "traffic": traffic, "report": report,
                             "workload": workload or {"seed": 3, "ops": 40}})


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_loopback_counts_equal_ground_truth(simulator, cocotb_build_dir):
    """Sniffer counts of the emulated dies' R/B# equal the emulator's ground truth exactly,
    with the on-chip traffic generator (Mp = 1 and Mp = 2) and with an external ONFI host."""
    result = run_loopback(simulator, cocotb_build_dir)
    assert len(result.passed) == 2, result.passed

"""The reference SSD's two back ends agree: the same FTL command stream through the model
(timing model → bit-exact sniffer model) and through RTL (cocotb ONFI driver → ``nand_emu`` dies
→ sniffer gateware, Verilator) gives identical pulse counts per class on every die."""

import json

import numpy as np
import pytest

from cocotb_tests.runner import run_bench
from rbscope import refssd
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.rb_sniffer import Counter
from rbscope.presets import Preset

#: The emulated dies: 2 dies (one per channel) x 2 planes x 8 blocks x 8 pages.
GEOMETRY = {"dies": 2, "page_bytes": 64, "spare_bytes": 8, "pages_per_block": 8,
            "blocks_per_plane": 8, "planes": 2, "storage": 0}
#: Busy times in ticks (2 cycles at 48 MHz), no jitter: tDBSY 3, tR 10, tPROG 60 / 90
#: (lower / upper pages), tBERS 200.
CONFIG = {"prescaler": 2, "t_wb": 2,
          "times": {"R": 10, "PROG0": 60, "PROG1": 90, "BERS": 200, "CBSY": 6, "DBSY": 3,
                    "RCBSY": 4, "RST": 8, "FEAT": 3},
          "page_types": [0, 1]}
WINDOWS = [[2, 6], [8, 20], [40, 120], [150, 300]]  # dbsy, read, program, erase (ticks)
NAMES = ("cache", "read", "program", "erase")  # "cache": the short tDBSY pulses here


def tiny_drive():
    """The reference drive on the emulated dies; its timing, in µs, is the emulator's ticks."""
    return refssd.Drive(
        name="rtl-tiny", channels=2, planes_per_die=2, blocks_per_plane=8, pages_per_block=8,
        page_size=4096, cell="mlc", over_provisioning=1.0, multi_plane=True, gc_free_units=2,
        open_streams=1, power_on=False,
        timing={"read_lower": 10, "read_upper": 10, "program_lower": 60, "program_upper": 90,
                "erase": 200, "plane_busy": 3})


@pytest.mark.slow  # a Verilator build and ~2000 ONFI command sequences through cocotb
def test_model_and_rtl_back_ends_count_the_same(cocotb_build_dir, tmp_path):
    from rbscope.gateware.nand_emu.loopback import Loopback

    drive = tiny_drive()
    w = refssd.micro("4K-RD-50%-W-4KiB-align", drive.logical_bytes, 3 * drive.logical_bytes,
                     seed=4)
    run = refssd.simulate(drive, w, seed=4)
    assert run.truth.erases["gc"] > 0 and run.truth.reads["gc"] > 0  # GC happened
    emu = EmuParams(**GEOMETRY)
    c = run.commands
    rows = [emu.row(int(b) * emu.planes + int(p), max(int(pg), 0))
            for b, p, pg in zip(c["block"], c["plane"], c["page"], strict=True)]
    commands = [[int(d), int(f), int(k), r]
                for d, f, k, r in zip(c["die"], c["first"], c["confirm"], rows, strict=True)]
    result = tmp_path / "rtl.json"
    bench = run_bench(lambda: Loopback(emu), "nand_loopback", "refssd_bench", "verilator",
                      cocotb_build_dir,
                      params={"params": GEOMETRY, "config": CONFIG, "windows": WINDOWS,
                              "commands": commands, "result": str(result)})
    assert len(bench.passed) == 1, bench
    rtl = json.loads(result.read_text())

    # Model back end: a tick of 1 µs makes the drive's µs timing the emulator's ticks.
    preset = Preset(tuple((n, lo, hi) for n, (lo, hi) in zip(NAMES, WINDOWS, strict=True)))
    m = refssd.to_measurement(run, preset=preset, clock_ns=1000)
    k = len(NAMES)
    for die in range(drive.dies):
        got = rtl[die]["counts"]
        model = m.counts[die]
        assert got[:k] == model.classes[:k], (die, got, model.classes)
        assert got[5 + Counter.UNCLASSIFIED] == model.unclassified == 0
        truth = rtl[die]["truth"]
        assert truth["FAILED"] == 0 and truth["ILLEGAL"] == 0, truth
        ftl = run.truth.per_die[die]
        assert truth["PROGRAM_OPS"] == ftl["program_operations"]
        assert truth["PAGE_PROGRAMS"] == ftl["pages_programmed"]["total"]
        assert truth["ERASE_OPS"] == ftl["erases"]["total"]
        assert truth["PAGE_READS"] == ftl["reads"]["total"]
        ops = run.pulses[die]["op"]
        assert got[2] == int(np.sum(ops == refssd.NandOp.PROGRAM))

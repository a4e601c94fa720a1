"""The reference SSD's two back ends agree: the same FTL command stream through the model
(timing model → bit-exact sniffer model) and through RTL (``nand_emu`` dies → sniffer gateware,
Verilator) gives identical pulse counts per class on every die.

Two RTL paths: the simulated device (``rbscope.refssd.rtl``: the C++ harness replays the commands
as ONFI cycles, cache programs and cache reads included, and the host reads the counts over the
simulated UART), and the cocotb ONFI driver on the loopback design (slow, no cache operations).
"""

import json
import struct

import numpy as np
import pytest

from cocotb_tests.runner import run_bench
from rbscope import refssd
from rbscope.analysis.presets import Preset
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.rb_sniffer import Counter
from rbscope.refssd import rtl

from .conftest import REPO_ROOT

SIM_BUILDS = REPO_ROOT / "build" / "sim-tests"

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


# ---- The RTL back end in the simulated device (rbscope.refssd.rtl) ----------------------------


def cache_drive(**changes):
    """A tiny two-plane MLC drive with cache programs, cache reads and two dies per channel."""
    spec = dict(
        name="rtl-tiny-cache", channels=2, dies_per_chip=2, planes_per_die=2,
        blocks_per_plane=16, pages_per_block=16, page_size=4096, cell="mlc",
        over_provisioning=0.6, multi_plane=True, cache_program=True, cache_read=True,
        write_buffer=16384, gc_free_units=2, open_streams=2, bus_mb_s=100.0,
        timing={"read_lower": (8, 12), "read_upper": (9, 13), "program_lower": (50, 70),
                "program_upper": (80, 100), "erase": (180, 220), "cache_busy": (4, 6),
                "read_cache_busy": (2, 2), "plane_busy": (1, 1), "overhead": (1, 5)})
    spec.update(changes)
    return refssd.Drive(**spec)


#: Windows (µs) of the tiny drives: queueing, cache busy and cache reads, reads, programs (and
#: the 15h pulses that wait for an array program), erases.
TINY_WINDOWS = Preset((("cache", 1, 8), ("read", 8, 16), ("program", 16, 150),
                       ("erase", 150, 400)))


def test_rtl_drive_fixes_every_busy_time_at_its_middle():
    d = rtl.rtl_drive(cache_drive())
    assert d.timing["program_lower"] == (60.0, 60.0)
    assert d.timing["erase"] == (200.0, 200.0)
    # One tR for every page type (the emulator has one): the middle of the whole read range.
    assert d.timing["read_lower"] == d.timing["read_upper"] == (10.0, 10.0)
    assert d.timing["overhead"] == (1.0, 5.0)  # the controller's gaps keep their spread
    emu, cfg = rtl.emulator_setup(d, 8)
    assert (emu.dies, emu.planes, emu.pages_per_block) == (4, 2, 16)
    assert cfg.prescaler == 8
    assert cfg.times[1] == 60 and cfg.times[2] == 90  # PROG0 lower, PROG1 upper
    # The page-type map is the drive's staircase: L L U L U … U.
    assert list(cfg.page_types[:16]) == [0, 0] + [1, 0] * 6 + [1, 1]
    # Blocks per plane and pages per block round up to powers of two (the FTL uses the first).
    emu, cfg = rtl.emulator_setup(rtl.rtl_drive(cache_drive(blocks_per_plane=24,
                                                            pages_per_block=12)))
    assert (emu.blocks_per_plane, emu.pages_per_block) == (32, 16)
    assert list(cfg.page_types[:12]) == [0, 0] + [1, 0] * 4 + [1, 1]


def test_rtl_back_end_refuses_drives_the_emulator_cannot_hold():
    with pytest.raises(refssd.RefSSDError, match="at most 512 pages"):
        rtl.rtl_drive(refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=1024))
    with pytest.raises(refssd.RefSSDError, match="at most 8 dies"):
        rtl.rtl_drive(refssd.preset("slc", blocks_per_plane=64))


@pytest.mark.parametrize("name, cell, pages, emulated, changes", [
    # The accuracy table's SSD-v (128-page MLC blocks) and TLC drive (96-page blocks, not a
    # power of two; benchmarks/accuracy.py's changes), and the TLC preset's own 192 pages.
    ("ssd-v", "mlc", 128, 128, {}),
    ("tlc-gc", "tlc", 96, 128, {"channels": 2, "dies_per_chip": 2, "page_size": 8192}),
    ("tlc-gc", "tlc", 192, 256, {"channels": 2, "dies_per_chip": 2}),
])
def test_long_and_odd_blocks_get_every_page_type(name, cell, pages, emulated, changes):
    """The emulator's map has an entry per page of the emulated block: every page the FTL
    programs gets its own type's tPROG (no periodic map, no refusal)."""
    d = rtl.rtl_drive(refssd.preset(name, blocks_per_plane=48, pages_per_block=pages,
                                    **changes))
    emu, cfg = rtl.emulator_setup(d)
    assert emu.pages_per_block == emu.page_type_slots == emulated
    slots = {"mlc": {refssd.PageType.LOWER: 0, refssd.PageType.UPPER: 1},
             "tlc": {refssd.PageType.LOWER: 0, refssd.PageType.MIDDLE: 1,
                     refssd.PageType.UPPER: 2}}[cell]
    types = refssd.page_types(cell, pages)
    assert len(set(types.tolist())) == len(slots)
    for page, t in enumerate(types):
        key = d.type_key(int(t))
        assert cfg.page_type(page) == slots[refssd.PageType(int(t))], page
        assert cfg.prog_time(page) == round(d.timing[f"program_{key}"][0]), page
    # Pages the FTL never programs (beyond a 96-page block) repeat the last type.
    assert set(cfg.page_types[pages:]) <= {slots[refssd.PageType(int(types[-1]))]}


def test_command_sequences_and_file():
    d = rtl.rtl_drive(cache_drive())
    w = refssd.micro("32K-SQ-50%-W-4KiB-align", d.logical_bytes, 1 << 20, seed=2)
    run = refssd.simulate(d, w, seed=2, precondition="steady")
    emu, _ = rtl.emulator_setup(d)
    c = run.commands
    ops = {refssd.NandOp(int(o)) for o in c["op"]}
    assert {refssd.NandOp.CACHE_PROGRAM, refssd.NandOp.CACHE_READ,
            refssd.NandOp.MULTIPLANE_QUEUE} <= ops
    for row in c:
        bus = rtl.bus_cycles(row, emu)
        assert bus[-1] in ((rtl.CMD, int(row["confirm"])), (rtl.DATA, 0))
        if row["first"] in (0x00, 0x80):
            block, page = emu.split_row(bus[3][1] | bus[4][1] << 8 | bus[5][1] << 16)
            assert block == row["block"] * emu.planes + row["plane"]
            assert page == row["page"]
    first = c[c["first"] == 0x80][0]
    assert rtl.bus_cycles(first, emu)[0] == (rtl.CMD, 0x80)
    assert rtl.bus_cycles(c[c["op"] == refssd.NandOp.CACHE_READ][0], emu)[0][1] in (0x31, 0x3F)
    # The preamble programs the open blocks up to where the workload continues them.
    pre = rtl.preamble(run, emu)
    assert pre and all(p > 0 for _, _, p in pre)
    path = SIM_BUILDS / "commands-test.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    n_pre, n = rtl.write_commands(path, run, emu, 8)
    assert n_pre == sum(p for _, _, p in pre) and n == len(c)
    blob = path.read_bytes()
    assert blob[:8] == b"RBCMD001"
    dies, _, count = struct.unpack_from("<IIQ", blob, 8)
    assert (dies, count) == (4, n_pre + 1 + n)


@pytest.fixture(scope="module")
def tiny_rtl_run():
    """A tiny workload with GC, multi-plane cache programs and cache reads through both back
    ends (one Verilator build, cached)."""
    d = rtl.rtl_drive(cache_drive())
    w = refssd.micro("32K-SQ-50%-W-4KiB-align", d.logical_bytes, 1 << 20, seed=2)
    run = refssd.simulate(d, w, seed=2, precondition="steady")
    result = rtl.run_rtl(run, preset=TINY_WINDOWS, build_root=SIM_BUILDS)
    return run, result


def test_rtl_and_model_back_ends_agree_with_cache_operations(tiny_rtl_run):
    run, result = tiny_rtl_run
    t = run.truth
    assert t.erases["gc"] > 0 and t.pulses["CACHE_PROGRAM"] > 0 and t.pulses["CACHE_READ"] > 0
    cmp = rtl.compare(run, result, TINY_WINDOWS)
    for die in range(run.drive.dies):
        assert cmp["rtl"][die] == cmp["model"][die], die
        truth = result.truth[die]
        assert truth["FAILED"] == truth["ILLEGAL"] == truth["ABORTED"] == 0, truth
        ftl = t.per_die[die]
        assert truth["PROGRAM_OPS"] == ftl["program_operations"]
        assert truth["PAGE_PROGRAMS"] == ftl["pages_programmed"]["total"]
        assert truth["ERASE_OPS"] == ftl["erases"]["total"]
        assert truth["PAGE_READS"] == ftl["reads"]["total"]
        ops = run.pulses[die]["op"]
        assert truth["CACHE_OPS"] == int(np.sum((ops == refssd.NandOp.CACHE_PROGRAM)
                                                | (ops == refssd.NandOp.CACHE_READ)))
    assert cmp["counts_equal"] and cmp["truth_equal"]
    assert cmp["wa_rtl"] == cmp["wa_model"]
    assert result.commands == len(run.commands)


def _rtl_rows():
    import importlib
    import sys
    path = str(REPO_ROOT / "benchmarks")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("rtl_rows")


@pytest.mark.slow  # accuracy-table drives and volumes: minutes of simulation per row
@pytest.mark.parametrize("spec", ["mlc-2plane:32K-SQ-100%-W-4KiB-align:initial",
                                  "cache-prog:32K-SQ-50%-W-4KiB-align:steady",
                                  "ssd-v:32K-SQ-100%-W-4KiB-align:initial",
                                  "tlc-gc:32K-SQ-100%-W-4KiB-align:initial"])
def test_accuracy_rows_reproduced_through_the_rtl(spec):
    rows = _rtl_rows()
    row = rows.run_row(rows.job_of(spec), rtl.CYCLES_PER_US, SIM_BUILDS, log=lambda _: None)
    assert row["counts_equal"] and row["truth_equal"], row
    assert row["wa_rtl"] == row["wa_model"]
    if row["drive"] == "mlc-2plane":  # separated classes: the table's row itself, exactly
        assert row["wa_rtl"] == row["wa_table"] == row["wa_true"]
    elif row["drive"] in ("ssd-v", "tlc-gc"):
        # 128-page MLC and 96-page TLC blocks, every page with its own tPROG. At the fixed
        # middles the upper pages stay inside the program window (drawn from their ranges,
        # some fall beyond it: the table's 9 % and 33 % low), so the WA is exact here.
        assert row["wa_rtl"] == row["wa_true"] == 1.0
        assert row["wa_table"] < row["wa_true"]
    else:
        assert row["cache_pulses"]["CACHE_PROGRAM"] > 0 and row["cache_pulses"]["CACHE_READ"] > 0

"""The reference SSD: FTL invariants, true counts against hand-computed cases, RMW, timing."""

import numpy as np
import pytest

from rbscope import refssd
from rbscope.refssd import Cause, NandOp, PageFTL, PageType, RefSSDError
from rbscope.refssd.workload import READ, WRITE, Workload

from .conftest import REPO_ROOT


def small(**changes):
    """A tiny SLC/MLC drive: 1 channel, 1 die, 2 planes x 8 blocks x 8 pages of 4 KiB."""
    base = dict(name="tiny", channels=1, planes_per_die=2, blocks_per_plane=8,
                pages_per_block=8, page_size=4096, cell="mlc", over_provisioning=1.0,
                gc_free_units=2, open_streams=2, power_on=False)
    base.update(changes)
    return refssd.Drive(**base)


def wl(*requests, name="t"):
    ops, offs, sizes = zip(*requests, strict=True)
    return Workload(name, np.array(ops), np.array(offs), np.array(sizes))


# Page order ------------------------------------------------------------------------------------


def test_mlc_page_order_is_the_one_wordline_lag_staircase():
    t = refssd.page_types("mlc", 8)
    L, U = PageType.LOWER, PageType.UPPER
    assert t.tolist() == [L, L, U, L, U, L, U, U]


def test_tlc_page_order():
    t = refssd.page_types("tlc", 9)
    L, M, U = PageType.LOWER, PageType.MIDDLE, PageType.UPPER
    assert t.tolist() == [L, L, M, L, M, U, M, U, U]


def test_page_order_rejects_a_block_that_is_not_whole_wordlines():
    with pytest.raises(RefSSDError, match="multiple of the 3 bits"):
        refssd.page_types("tlc", 8)


# True counts by hand --------------------------------------------------------------------------


def test_full_block_overwrite_cycles_have_wa_one_and_one_erase_per_block():
    # 1 die, single plane units of 8 pages. Write 8 pages (one block) 10 times at the same
    # place: every overwrite invalidates a whole block, so GC finds empty victims, never
    # relocates, and erases exactly as blocks are reused.
    d = small(cell="slc", gc_free_units=2)
    ftl = PageFTL(d)
    for _ in range(10):
        ftl.write(0, 8 * 4096)
    ftl.flush()
    ftl.check()
    assert ftl.pages_programmed[0, Cause.HOST] == 80
    assert ftl.pages_programmed.sum() == 80
    assert ftl.reads.sum() == 0
    # 16 units, 2 open streams: the 10 blocks of host data fit without reuse until the free
    # list drops below 2: units used = 10; no erase is needed.
    assert ftl.erases.sum() == 0
    for _ in range(20):
        ftl.write(0, 8 * 4096)
    ftl.check()
    # 30 blocks written into 16 units. Opening a unit first collects until 2 are free: the
    # first 15 openings take 16 -> 1 free units without GC, each of the other 15 erases one
    # block with 0 valid pages (nothing is relocated).
    assert ftl.pages_programmed[0, Cause.GC] == 0
    assert ftl.reads.sum() == 0
    assert ftl.erases[0, Cause.GC] == 15


def test_gc_victim_by_hand():
    # 8 single-plane units of 8 pages, 32 logical pages, one open stream, GC below 1 free unit.
    d = small(cell="slc", blocks_per_plane=4, gc_free_units=1, open_streams=1)
    ftl = PageFTL(d)
    ftl.write(0, 32 * 4096)  # units 0-3 full
    ftl.write(0, 4 * 4096)  # unit 4: lpn 0-3
    ftl.write(8 * 4096, 6 * 4096)  # unit 4: lpn 8-11, unit 5: lpn 12-13
    assert ftl.valid == [4, 2, 8, 8, 8, 2, 0, 0]
    ftl.write(16 * 4096, 16 * 4096)  # unit 5 fills, units 6 and 7 open; units 2, 3 invalid
    assert ftl.valid == [4, 2, 0, 0, 8, 8, 8, 2]
    assert ftl.erases.sum() == 0
    ftl.write(0, 8 * 4096)  # unit 7 fills at lpn 5; lpn 6 needs a unit: GC
    # Greedy takes unit 2 (0 valid pages): one erase, nothing relocated, and one free unit.
    log = refssd.ftl.unpack(ftl.log[0])
    erases = np.flatnonzero(log["kind"] == 2)
    assert log["unit"][erases].tolist() == [2]
    assert ftl.reads.sum() == 0 and ftl.pages_programmed[0, Cause.GC] == 0
    ftl.check()


@pytest.mark.parametrize("gc", ["greedy", "cost-benefit"])
def test_gc_victim_rule(gc, monkeypatch):
    d = small(gc=gc, over_provisioning=0.5, open_streams=2)
    ftl = PageFTL(d)
    choices = []
    victim = PageFTL._victim

    def spy(self, die):
        closed = [u for u in range(self.units) if self.state[u] == 2]
        u = victim(self, die)
        choices.append((u, {c: self.valid[c] for c in closed},
                        {c: self.clock - self.stamp[c] + 1 for c in closed}))
        return u

    monkeypatch.setattr(PageFTL, "_victim", spy)
    rng = np.random.default_rng(5)
    for off in rng.integers(0, ftl.logical_pages, 2000).tolist():
        ftl.write(off * 4096, 4096)
    assert len(choices) > 20
    for u, valid, age in choices:
        if gc == "greedy":
            assert valid[u] == min(valid.values())
        else:
            def score(c, valid=valid, age=age):
                util = valid[c] / ftl.slots
                return float("inf") if util == 0 else (1 - util) / (2 * util) * age[c]
            assert score(u) == max(score(c) for c in valid)
    ftl.check()


def test_rmw_512_byte_writes_without_a_buffer():
    d = small()
    ftl = PageFTL(d)
    ftl.write(0, 4096)  # one full page
    ftl.write(512, 512)  # sub-page write to a mapped page: read + program
    ftl.write(8192, 512)  # sub-page write to an unmapped page: program, no read
    ftl.flush()
    assert ftl.reads[0, Cause.RMW] == 1
    assert ftl.pages_programmed[0, Cause.RMW] == 1
    assert ftl.pages_programmed[0, Cause.HOST] == 2
    ftl.check()


def test_rmw_unaligned_4k_write_touches_two_pages():
    d = small()
    ftl = PageFTL(d)
    ftl.write(0, 4 * 4096)
    ftl.write(512, 4096)  # straddles pages 0 and 1, both mapped
    assert ftl.reads[0, Cause.RMW] == 2
    assert ftl.pages_programmed[0, Cause.RMW] == 2


def test_write_buffer_merges_sequential_512_byte_writes_into_full_pages():
    d = small(write_buffer=4 * 4096)
    ftl = PageFTL(d)
    ftl.write(0, 8 * 4096)
    for off in range(0, 8 * 4096, 512):
        ftl.write(off, 512)
    ftl.flush()
    assert ftl.reads.sum() == 0
    assert ftl.pages_programmed[0, Cause.RMW] == 0
    assert ftl.pages_programmed.sum() == 16


def test_trim_unmaps_whole_pages_only():
    d = small()
    ftl = PageFTL(d)
    ftl.write(0, 4 * 4096)
    ftl.trim(512, 2 * 4096)  # whole page 1 only
    assert [ftl.l2p[i] >= 0 for i in range(4)] == [True, False, True, True]
    ftl.check()


def test_multi_plane_rows_and_padding():
    d = small(multi_plane=True, blocks_per_plane=16)
    ftl = PageFTL(d)
    ftl.write(0, 3 * 4096)  # a full two-plane row + one page pending
    assert ftl.programs[0].sum() == 1
    ftl.flush()  # the pending row is padded
    assert ftl.programs[0].sum() == 2
    assert ftl.pages_programmed[0, Cause.PAD] == 2
    ftl.check()


def test_out_of_range_and_unaligned_requests_are_clear_errors():
    ftl = PageFTL(small())
    with pytest.raises(RefSSDError, match="outside the logical space"):
        ftl.write(ftl.logical_pages * 4096, 4096)
    with pytest.raises(RefSSDError, match="512-byte sectors"):
        ftl.write(100, 4096)


def test_too_little_over_provisioning_is_refused():
    with pytest.raises(RefSSDError, match="spare blocks per die"):
        small(over_provisioning=0.05)


# Invariants under random workloads -------------------------------------------------------------


@pytest.mark.parametrize("gc", ["greedy", "cost-benefit"])
@pytest.mark.parametrize("multi", [False, True])
def test_random_workload_keeps_the_mapping_consistent(gc, multi):
    d = small(gc=gc, multi_plane=multi, over_provisioning=0.5, wear_levelling=4,
              blocks_per_plane=32 if multi else 8,
              write_buffer=8192)
    ftl = PageFTL(d)
    rng = np.random.default_rng(3)
    space = ftl.logical_pages * 4096
    shadow = set()
    for _ in range(3000):
        off = int(rng.integers(0, space // 512 - 16)) * 512
        size = int(rng.choice([512, 4096, 8192]))
        kind = rng.random()
        if kind < 0.8:
            ftl.write(off, size)
            shadow.update(range(off // 4096, (off + size - 1) // 4096 + 1))
        elif kind < 0.9:
            ftl.read(off, size)
        else:
            ftl.trim(off, size)
            for lpn in range(off // 4096, (off + size - 1) // 4096 + 1):
                if lpn * 4096 >= off and (lpn + 1) * 4096 <= off + size:
                    shadow.discard(lpn)
    ftl.flush()
    ftl.check()
    mapped = {lpn for lpn, g in enumerate(ftl.l2p) if g >= 0}
    assert mapped == shadow  # no lost and no invented logical page
    # Every program and erase the counters saw is in the log, and vice versa.
    log = refssd.ftl.unpack(ftl.log[0])
    assert (log["kind"] == 1).sum() == ftl.programs.sum()
    assert (log["kind"] == 2).sum() == ftl.erases.sum()
    assert ftl.erases[0, Cause.GC] > 0
    assert ftl.pages_programmed[0, Cause.GC] > 0


# simulate, timing and measurement -------------------------------------------------------------


def test_simulate_sequential_write_has_wa_one_and_pulses_match_counts():
    d = refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=32)
    w = refssd.micro("4K-SQ-100%-W-4KiB-align", d.logical_bytes, 4 << 20, seed=1)
    run = refssd.simulate(d, w, seed=1)
    assert run.truth.wa_true == pytest.approx(1.0)
    assert run.logical_bytes == 4 << 20
    progs = sum(int((p["op"] == NandOp.PROGRAM).sum()) for p in run.pulses)
    assert progs == run.truth.program_operations == (4 << 20) // 4096
    for p in run.pulses:
        assert np.all(np.diff(p["start_ns"]) > 0)
        assert np.all(p["start_ns"][1:] >= p["start_ns"][:-1] + p["width_ns"][:-1])
    # Widths follow the page type: lower pages fast, upper pages slow.
    p = np.concatenate(run.pulses)
    prog = p[p["op"] == NandOp.PROGRAM]
    lower = prog[prog["page_type"] == PageType.LOWER]["width_ns"]
    upper = prog[prog["page_type"] == PageType.UPPER]["width_ns"]
    assert lower.max() <= 500_000 and upper.min() >= 1_300_000
    # Through the bit-exact model with SSD-v's bundled windows (program [150, 1950) µs at a
    # 10 ns tick): upper pages slower than 1950 µs count as erases, as on the real drive.
    m = refssd.measure_wa(run)
    ticks = (p["start_ns"] + p["width_ns"]) // 10 - p["start_ns"] // 10
    in_window = int(((ticks >= 15_000) & (ticks < 195_000)).sum())
    assert m["class_totals"]["program"] == in_window
    assert m["wa"] == pytest.approx(in_window * 4096 / run.logical_bytes)
    assert 0.85 < m["wa"] < 1.0


def test_commands_match_pulses_one_to_one():
    d = refssd.preset("cache-prog", channels=2, dies_per_chip=2, blocks_per_plane=64,
                      pages_per_block=32)
    w = refssd.micro("32K-SQ-100%-W-4KiB-align", d.logical_bytes, 2 << 20, seed=2)
    # Then read the first MiB back, 32 KiB at a time (past the write buffer's 256 KiB).
    w = Workload("w+r", np.concatenate([w.ops, np.full(32, READ)]),
                 np.concatenate([w.offsets, np.arange(32) * 32768]),
                 np.concatenate([w.sizes, np.full(32, 32768)]))
    run = refssd.simulate(d, w, seed=2)
    c = run.commands
    assert len(c) == sum(len(p) for p in run.pulses)
    assert np.all(np.diff(c["time_ns"]) >= 0)
    for die, p in enumerate(run.pulses):
        mine = c[c["die"] == die]
        assert np.array_equal(mine["op"], p["op"][mine["pulse"]])
        assert np.array_equal(mine["confirm_ns"] + 100, p["start_ns"][mine["pulse"]])
    # Commands on one channel never overlap on the bus.
    for ch in range(d.channels):
        cc = c[c["channel"] == ch]
        assert np.all(cc["time_ns"][1:] >= cc["confirm_ns"][:-1])
    ops = np.concatenate([p["op"] for p in run.pulses])
    assert (ops == NandOp.CACHE_PROGRAM).sum() > 0
    assert (ops == NandOp.MULTIPLANE_QUEUE).sum() > 0
    assert (ops == NandOp.CACHE_READ).sum() > 0
    # Cache programs show only tCBSY when the array is idle or plus the wait otherwise; a
    # chain's 15h pulses are never longer than the previous array program plus tCBSY.
    cp = np.concatenate([p[p["op"] == NandOp.CACHE_PROGRAM]["width_ns"] for p in run.pulses])
    assert cp.min() <= 35_000
    # True pages programmed = program operations x 2 planes.
    assert run.truth.pages_programmed["total"] == 2 * run.truth.program_operations


def test_trace_readers(tmp_path):
    spc = tmp_path / "t.spc"
    spc.write_text("0,0,4096,w,0.0\n0,8,512,r,0.1\n1,0,8192,W,0.2\n")
    w = refssd.read_spc(spc)
    assert w.ops.tolist() == [WRITE, READ, WRITE]
    assert w.logical_bytes == 4096 + 8192
    blk = tmp_path / "t.txt"
    blk.write_text("  8,0    1        1     0.000000000  123  Q   W 2048 + 8 [fio]\n"
                   "  8,0    1        2     0.000100000  123  C   W 2048 + 8 [0]\n"
                   "  8,0    1        3     0.000200000  123  C   R 16 + 16 [0]\n"
                   "  8,0    1        4     0.000300000  123  C   D 0 + 8 [0]\n")
    w = refssd.read_blkparse(blk)
    assert w.ops.tolist() == [WRITE, READ, 2]
    assert w.offsets.tolist() == [2048 * 512, 16 * 512, 0]
    bad = tmp_path / "bad.spc"
    bad.write_text("0,0,4096,x,0\n")
    with pytest.raises(RefSSDError, match="line 1: opcode"):
        refssd.read_spc(bad)


def test_micro_benchmark_names_and_shapes():
    assert len(refssd.MICRO_BENCHMARKS) == 40
    assert "4K-SQ-50%-W-4KiB-align" in refssd.MICRO_BENCHMARKS
    w = refssd.micro("512B-RD-50%-W-4KiB-no-align", 1 << 24, 1 << 20, seed=1)
    assert w.logical_bytes >= 1 << 20 and w.logical_bytes < (1 << 20) + 512
    assert np.all(w.offsets % 512 == 0) and np.any(w.offsets % 4096 != 0)
    share = (w.ops == WRITE).mean()
    assert 0.45 < share < 0.55
    w = refssd.micro("8K-SQ-100%-W-4KiB-no-align", 1 << 24, 1 << 20)
    assert w.offsets[0] == 512 and np.all(np.diff(w.offsets) == 8192)
    with pytest.raises(RefSSDError, match="not a micro-benchmark name"):
        refssd.micro("4K-XX-100%-W-4KiB-align", 1 << 24, 1 << 20)
    # A read-heavy run: the paper's generator with another write share (not one of its 40).
    w = refssd.micro("4K-RD-10%-W-4KiB-align", 1 << 24, 1 << 20, seed=2)
    assert "4K-RD-10%-W-4KiB-align" not in refssd.MICRO_BENCHMARKS
    assert 0.07 < (w.ops == WRITE).mean() < 0.13 and w.logical_bytes >= 1 << 20
    for bad in ("4K-RD-0%-W-4KiB-align", "4K-RD-101%-W-4KiB-align", "4K-RD-05%-W-4KiB-align"):
        with pytest.raises(RefSSDError, match="write share of 1% to 100%"):
            refssd.micro(bad, 1 << 24, 1 << 20)


def test_drive_spec_toml(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text('preset = "ssd-v"\nname = "mine"\n[array]\nblocks_per_plane = 40\n'
                 '[timing]\nerase = [2500, 3000]\n')
    d = refssd.load_drive(p)
    assert d.name == "mine" and d.blocks_per_plane == 40 and d.timing["erase"] == (2500, 3000)
    p.write_text('[array]\nbogus = 1\n')
    with pytest.raises(RefSSDError, match="unknown key"):
        refssd.load_drive(p)
    with pytest.raises(RefSSDError, match="no preset"):
        refssd.load_drive("no-such-drive")


def test_measure_wa_equals_rbscope_analyze_of_the_vcd(tmp_path):
    import json
    import subprocess
    import sys

    d = refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=32)
    w = refssd.micro("8K-RD-50%-W-4KiB-no-align", d.logical_bytes, 1 << 20, seed=3)
    run = refssd.simulate(d, w, seed=3, precondition="steady")
    m = refssd.measure_wa(run)
    vcd = tmp_path / "run.vcd"
    refssd.write_vcd(run, vcd)
    out = subprocess.run([sys.executable, "-m", "rbscope.cli", "analyze", str(vcd),
                          "--geometry", "ssd-v", "--logical", str(run.logical_bytes),
                          "--classifier", "windows", "--json"],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["wa"]["value"] == pytest.approx(m["wa"], rel=1e-12)
    assert m["wa"] < run.truth.wa_true  # slow upper pages fall in SSD-v's erase window
    # The sequence-aware classifier of analyze, on the same measurement; it reads the block
    # size from the geometry, so the CLI gets SSD-v with this drive's 32 pages per block.
    from rbscope.analysis.geometry import BUNDLED, load_geometry

    s = refssd.measure.measure_wa(run, classifier="sequence")
    geo = tmp_path / "ssd-v-32.toml"
    text = (BUNDLED / "ssd-v.toml").read_text()
    assert load_geometry("ssd-v").pages_per_block == 128 and "\n[geometry]\n" in text
    # A key of the file overrides the part's.
    geo.write_text(text.replace("\n[geometry]\n", "\n[geometry]\npages_per_block = 32\n"))
    assert load_geometry(geo).pages_per_block == 32
    out = subprocess.run([sys.executable, "-m", "rbscope.cli", "analyze", str(vcd),
                          "--geometry", str(geo), "--logical", str(run.logical_bytes),
                          "--classifier", "sequence", "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["wa"]["value"] == pytest.approx(s["wa"], rel=1e-9)


def test_shipped_traces_replay(tmp_path):
    traces = REPO_ROOT / "examples" / "traces"
    d = refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=32)
    for w in (refssd.read_spc(traces / "synthetic.spc", space=d.logical_bytes),
              refssd.read_blkparse(traces / "synthetic.blkparse.txt", space=d.logical_bytes)):
        assert np.all(w.offsets + w.sizes <= d.logical_bytes)
        run = refssd.simulate(d, w, seed=1, precondition="steady")
        assert run.logical_bytes == w.logical_bytes > 0
        # Sub-page writes (the SPC trace has 512 B - 2 KiB requests) cost read-modify-write.
        assert run.truth.wa_true > 1
        run.ftl.check()


def test_continuing_runs_keep_the_drive_state():
    d = refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=32, write_buffer=0)
    w = refssd.micro("4K-RD-100%-W-4KiB-align", d.logical_bytes, d.logical_bytes // 2, seed=1)
    first = refssd.simulate(d, w, seed=1)
    assert first.truth.wa_true == pytest.approx(1.0)  # the first half of the space: no GC
    later = first
    for i in range(3):
        later = refssd.simulate(d, refssd.micro("4K-RD-100%-W-4KiB-align", d.logical_bytes,
                                                d.logical_bytes // 2, seed=2 + i),
                                seed=2 + i, ftl=later.ftl)
    assert later.truth.wa_true > 1.5  # a full drive under random writes collects garbage
    later.ftl.check()


def test_slc_cache_in_front_of_tlc():
    d = refssd.Drive(name="slc-cache", channels=1, planes_per_die=1, blocks_per_plane=24,
                     pages_per_block=12, cell="tlc", over_provisioning=1.0, slc_cache=4,
                     gc_free_units=2, open_streams=2, power_on=False)
    ftl = PageFTL(d)
    ftl.write(0, 8 * 4096)  # 8 pages: two SLC-mode units of 4 pages
    ftl.check()
    log = refssd.ftl.unpack(ftl.log[0])
    assert (log["page_type"][log["kind"] == 1] == PageType.SLC).all()
    assert ftl.pages_programmed[0, Cause.SLC] == 0
    ftl.write(8 * 4096, 24 * 4096)  # 32 pages: the 4 SLC units (16 pages) overflow
    ftl.flush()
    ftl.check()
    # 32 pages fill 8 SLC units of 4 pages; the cache has 4, so opening units 5 to 8 each
    # migrates the oldest (4 valid pages) into TLC and erases it: 16 pages migrated.
    migrated = ftl.pages_programmed[0, Cause.SLC]
    assert migrated == 16
    assert ftl.reads[0, Cause.SLC] == migrated
    log = refssd.ftl.unpack(ftl.log[0])
    prog = log["kind"] == 1
    assert set(log["page_type"][prog & (log["cause"] == Cause.SLC)]) <= {
        PageType.LOWER, PageType.MIDDLE, PageType.UPPER}
    assert (log["page_type"][prog & (log["cause"] == Cause.HOST)] == PageType.SLC).all()
    assert ftl.erases[0, Cause.SLC] == 4


def test_hybrid_ftl_random_updates_cost_l_plus_d_over_l():
    from rbscope.refssd import HybridFTL

    # d = 100 data pages, l = 26 log pages per block (the hUBI example): WA -> 126 / 26.
    d = refssd.Drive(name="hubi-small", channels=1, planes_per_die=1, blocks_per_plane=12,
                     pages_per_block=126, cell="slc", ftl="hybrid", hybrid_log_pages=26,
                     power_on=False)
    ftl = HybridFTL(d)
    assert ftl.logical_pages == 10 * 100
    ftl.write(0, ftl.logical_pages * 4096)  # fill every data area
    ftl.check()
    assert ftl.pages_programmed.sum() == 1000 and ftl.erases.sum() == 0
    ftl.reset_counts()
    rng = np.random.default_rng(1)
    n = 26_000
    for lpn in rng.integers(0, ftl.logical_pages, n).tolist():
        ftl.write(lpn * 4096, 4096)
    ftl.check()
    wa = ftl.pages_programmed.sum() / n
    assert wa == pytest.approx(126 / 26, rel=0.03)
    # Every merge copies exactly the d pages of its logical block and erases one block.
    assert ftl.pages_programmed[0, Cause.GC] == 100 * ftl.erases[0, Cause.GC]
    assert ftl.reads[0, Cause.GC] == ftl.pages_programmed[0, Cause.GC]


def test_hybrid_preset_runs_through_simulate():
    d = refssd.preset("hubi", channels=2, blocks_per_plane=16)
    w = refssd.micro("4K-RD-100%-W-4KiB-align", d.logical_bytes, 2 << 20, seed=2)
    run = refssd.simulate(d, w, seed=2, precondition="steady")
    # 4 KiB writes on 2 KiB pages: two pages per request, then merges.
    assert run.truth.wa_true > 2
    run.ftl.check()


def exact_measure(run):
    """A stand-in for a better classifier: reports the truth (for the swap test below)."""
    t = run.truth.wa_true
    return {"wa": t, "lo": t * 0.99, "hi": t * 1.01}


def test_accuracy_benchmark_measurement_is_swappable(monkeypatch):
    import importlib.util

    path = REPO_ROOT / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("accuracy_bench", path)
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    for name in acc.DRIVES:
        assert acc.drive(name).dies >= 4
    assert len(acc.jobs()) == 4 * 40 * 2
    monkeypatch.setitem(acc.DRIVES, "tiny", ("ssd-v", {"blocks_per_plane": 32,
                                                       "pages_per_block": 32}))
    job = {"drive": "tiny", "workload": "4K-SQ-100%-W-4KiB-align", "state": "initial", "seed": 1}
    row = acc.run_job(job, "tests.test_refssd:exact_measure")
    assert row["re"] == 0 and row["covered"]
    row = acc.run_job(job)  # the default: rbscope analyze's path, SSD-v windows
    assert row["wa_true"] == pytest.approx(1.0) and 0.85 < row["wa_measured"] < 1.0
    s = acc.summary([row])
    assert s["all"]["rows"] == 1 and s["100% writes"]["below_10pct"] == 1

"""The reference SSD's 2026 physics: pulse and command patterns, and exact true counts.

One-shot and two-pass programs, QLC, the SLC-mode prefix, independent plane reads, program and
erase suspend, read retry, the two cache-program regimes, wired-OR LUNs, width shapes, die
spread and wear drift (``host/refssd``; ``docs/accuracy.md``, "Drive zoo").
"""

import numpy as np
import pytest

from rbscope import refssd
from rbscope.refssd import Cause, NandOp, PageType, RefSSDError
from rbscope.refssd.measure import die_edges, rb_lines, to_measurement
from rbscope.refssd.workload import READ, WRITE, Workload


def small(**changes):
    """One channel, one die, 2 planes x 16 blocks x 12 pages of 4 KiB, no power-on pulses."""
    base = dict(name="tiny", channels=1, planes_per_die=2, blocks_per_plane=16,
                pages_per_block=12, page_size=4096, cell="tlc", over_provisioning=1.0,
                gc_free_units=2, open_streams=2, power_on=False)
    base.update(changes)
    return refssd.Drive(**base)


def writes(pages, start=0):
    return Workload("w", np.full(1, WRITE), np.array([start * 4096]), np.array([pages * 4096]))


def mixed(drive, n, seed=0, span=None):
    """``n`` 4 KiB requests over the first ``span`` pages, alternating write and read."""
    rng = np.random.default_rng(seed)
    span = span or drive.logical_pages
    ops = np.where(np.arange(n) % 2 == 0, WRITE, READ)
    return Workload("mixed", ops, rng.integers(0, span, n) * 4096, np.full(n, 4096))


def names(pulses):
    return [NandOp(o).name for o in pulses["op"]]


# Page order and validation ---------------------------------------------------------------------


def test_word_line_order_of_one_shot_and_two_pass():
    L, M, U, T = PageType.LOWER, PageType.MIDDLE, PageType.UPPER, PageType.TOP
    assert refssd.page_types("tlc", 6, "one-shot").tolist() == [L, M, U, L, M, U]
    assert refssd.page_types("qlc", 8, "two-pass").tolist() == [L, M, U, T, L, M, U, T]
    # QLC page by page keeps the staircase of the other cells.
    assert refssd.page_types("qlc", 16).tolist()[:6] == [L, L, M, L, M, U]


@pytest.mark.parametrize("change, field", [
    ({"cell": "mlc", "pages_per_block": 8, "program_scheme": "one-shot"}, "program_scheme"),
    ({"program_scheme": "three-pass"}, "program_scheme"),
    ({"cache_regime": "lazy"}, "cache_regime"),
    ({"timing_shape": "cauchy"}, "timing_shape"),
    ({"erase_suspend": 1.5}, "erase_suspend"),
    ({"read_retry": -0.1}, "read_retry"),
    ({"slc_prefix": 0x80}, "slc_prefix"),
    ({"program_scheme": "one-shot", "cache_program": True}, "cache_program"),
])
def test_bad_options_name_the_field(change, field):
    with pytest.raises(RefSSDError, match=field):
        small(**change)


def test_the_presets_take_the_original_path():
    # Without a 2026 option the timing model is the original, draw for draw.
    assert not any(d.modern for d in refssd.PRESETS.values())
    assert small(cell="qlc").modern and small(plane_reads=True).modern


def test_drive_spec_takes_the_new_options():
    d = refssd.parse_drive('name = "x"\n[array]\ncell = "qlc"\npages_per_block = 64\n'
                           '[firmware]\nprogram_scheme = "two-pass"\nwired_or = true\n'
                           'erase_suspend = 0.3\n[timing]\nprogram_fine = [3000, 5000]\n')
    assert (d.program_scheme, d.wired_or, d.erase_suspend) == ("two-pass", True, 0.3)
    assert d.timing["program_fine"] == (3000.0, 5000.0)


# Program schemes -------------------------------------------------------------------------------


def test_one_shot_tlc_loads_two_pages_then_programs_the_word_line():
    d = small(program_scheme="one-shot", timing={"program_upper": (2000, 3000)})
    run = refssd.simulate(d, writes(12), seed=1)
    p = run.pulses[0]
    assert names(p) == ["DATA_LOAD", "DATA_LOAD", "PROGRAM"] * 4
    cmds = run.commands
    assert cmds["confirm"].tolist() == [0x1A, 0x1A, 0x10] * 4
    assert (cmds["first"] == 0x80).all()
    loads = p["width_ns"][p["op"] == NandOp.DATA_LOAD]
    progs = p["width_ns"][p["op"] == NandOp.PROGRAM]
    assert loads.min() >= 1000 and loads.max() <= 5000
    assert progs.min() >= 2_000_000 and progs.max() <= 3_000_000
    # The truth counts pages: 12 pages, 4 word-line programs.
    assert run.truth.pages_programmed["total"] == 12 and run.truth.wa_true == 1.0
    assert run.truth.pulses["PROGRAM"] == 4 and run.truth.pulses["DATA_LOAD"] == 8


def test_one_shot_on_four_planes_queues_each_level():
    d = small(program_scheme="one-shot", planes_per_die=4, multi_plane=True,
              blocks_per_plane=12, pages_per_block=6)
    run = refssd.simulate(d, writes(4 * 6), seed=2)
    q = ["MULTIPLANE_QUEUE"] * 3
    assert names(run.pulses[0]) == (q + ["DATA_LOAD"] + q + ["DATA_LOAD"] + q + ["PROGRAM"]) * 2
    assert run.commands["confirm"].tolist()[:8] == [0x11] * 3 + [0x1A] + [0x11] * 3 + [0x1A]
    assert run.truth.pages_programmed["total"] == 24
    assert run.truth.program_operations == 24 // 4  # one per page row of the 4 planes


def test_two_pass_qlc_programs_each_word_line_twice_from_loads():
    d = small(cell="qlc", program_scheme="two-pass", pages_per_block=8,
              timing={"program_foggy": (1000, 1500), "program_fine": (3000, 4000)})
    run = refssd.simulate(d, writes(8), seed=3)
    p = run.pulses[0]
    word_line = ["DATA_LOAD"] * 3 + ["PROGRAM"] + ["DATA_LOAD"] * 3 + ["PROGRAM"]
    assert names(p) == word_line * 2
    long = p["width_ns"][p["op"] == NandOp.PROGRAM]
    # Foggy then fine: two long busies for four pages.
    assert (long[0::2] <= 1_500_000).all() and (long[1::2] >= 3_000_000).all()
    assert run.truth.pages_programmed["total"] == 8
    # The fine pass loads the same pages again: 4 pages of data in per program pulse.
    cmds = run.commands
    assert int(cmds["data_bytes"].sum()) == 2 * 8 * 4096
    assert cmds["page"].tolist()[:8] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_flush_pads_a_one_shot_word_line_whole():
    d = small(program_scheme="one-shot")
    run = refssd.simulate(d, writes(1), seed=1)
    assert run.truth.pages_programmed["host"] == 1
    assert run.truth.pages_programmed["pad"] == 2
    assert names(run.pulses[0]) == ["DATA_LOAD", "DATA_LOAD", "PROGRAM"]


def test_one_shot_counts_stay_exact_under_garbage_collection():
    d = small(program_scheme="one-shot", over_provisioning=0.5)
    run = refssd.simulate(d, mixed(d, 600, seed=4), seed=4, precondition="steady")
    t = run.truth
    assert t.pages_programmed["gc"] > 0 and t.erases["total"] > 0
    # Every third page program is the word line's long busy; the others are loads.
    assert t.pulses["PROGRAM"] * 3 == t.pages_programmed["total"]
    assert t.pulses["DATA_LOAD"] * 3 == 2 * t.pages_programmed["total"]
    assert t.pulses["ERASE"] == t.erases["total"]
    run.ftl.check()


# SLC cache ------------------------------------------------------------------------------------


def test_slc_cache_programs_carry_the_vendor_prefix_and_fold_into_tlc():
    d = small(slc_cache=4, slc_prefix=0xA2, blocks_per_plane=24,
              timing={"program_slc": (150, 250)})
    run = refssd.simulate(d, writes(150), seed=5)
    t = run.truth
    assert t.pages_programmed["host"] == 150 and t.pages_programmed["slc"] > 0
    p = run.pulses[0]
    cmds = run.commands
    slc = p["page_type"] == PageType.SLC
    progs = np.isin(p["op"], (NandOp.PROGRAM, NandOp.CACHE_PROGRAM))
    assert (cmds["prefix"][slc & progs] == 0xA2).all()
    assert (cmds["prefix"][~slc] == 0).all()
    # The folded (migrated) pages are TLC programs of cause SLC.
    fold = progs & (p["cause"] == Cause.SLC)
    assert fold.sum() == t.pages_programmed["slc"]
    assert not (p["page_type"][fold] == PageType.SLC).any()
    assert p["width_ns"][slc & progs].max() <= 250_000


# Independent plane reads -----------------------------------------------------------------------


def test_plane_reads_overlap_and_merge_on_the_pin():
    d = small(cell="mlc", pages_per_block=8, planes_per_die=4, multi_plane=True,
              blocks_per_plane=16)
    wl = refssd.micro("16K-SQ-50%-W-4KiB-align", d.logical_bytes, 400 * 4096, seed=1)
    base = refssd.simulate(d, wl, seed=6, precondition="steady")
    run = refssd.simulate(d.with_(plane_reads=True), wl, seed=6, precondition="steady")
    # Same firmware, same true counts.
    assert run.truth.reads == base.truth.reads
    assert run.truth.pages_programmed == base.truth.pages_programmed
    p = run.pulses[0]
    ends = p["start_ns"] + p["width_ns"]
    overlapping = int((p["start_ns"][1:] < ends[:-1]).sum())
    assert overlapping > 0
    assert not (base.pulses[0]["start_ns"][1:]
                < (base.pulses[0]["start_ns"] + base.pulses[0]["width_ns"])[:-1]).any()
    # The pin shows the merged busies: fewer low periods than pulses, by the overlaps.
    cycles, _ = die_edges(p)
    assert len(cycles) // 2 <= len(p) - overlapping
    assert run.truth.pulses["READ"] == run.truth.reads["total"]


def test_die_edges_merges_a_pulse_ending_inside_an_earlier_one():
    p = np.zeros(3, dtype=refssd.PULSE_DTYPE)
    p["start_ns"] = [1000, 1500, 9000]
    p["width_ns"] = [5000, 1000, 100]
    cycles, levels = die_edges(p, clock_ns=10)
    assert cycles.tolist() == [100, 600, 900, 910]
    assert levels.tolist() == [0, 1, 0, 1]


# Suspend and retry -----------------------------------------------------------------------------


def test_erase_suspend_splits_the_busy_and_serves_reads_between():
    d = small(cell="mlc", pages_per_block=8, erase_suspend=1.0,
              timing={"erase": (3000, 3000), "suspend": (10, 10)})
    wl = mixed(d, 600, seed=7, span=40)
    plain = refssd.simulate(d.with_(erase_suspend=0.0), wl, seed=7, precondition="steady")
    run = refssd.simulate(d, wl, seed=7, precondition="steady")
    t = run.truth
    assert t.erases == plain.truth.erases and t.reads == plain.truth.reads
    assert 0 < t.suspensions <= t.erases["total"]
    p = run.pulses[0]
    ops = p["op"].tolist()
    cmds = run.commands
    susp = cmds[cmds["first"] == 0x61]
    assert len(susp) == t.pulses["ERASE_RESUME"] >= t.suspensions
    for i, op in enumerate(ops):
        if op != NandOp.ERASE or i + 1 == len(ops) or ops[i + 1] != NandOp.READ:
            continue
        # ERASE (READ…) ERASE_RESUME [(READ…) ERASE_RESUME]: the pieces add up to tBERS plus
        # tSPD for each suspend.
        j, total, pieces = i, 0, 0
        while j < len(ops) and ops[j] in (NandOp.ERASE, NandOp.ERASE_RESUME, NandOp.READ):
            if ops[j] != NandOp.READ:
                if pieces and ops[j] == NandOp.ERASE:
                    break
                total += int(p["width_ns"][j])
                pieces += 1
            j += 1
        assert 2 <= pieces <= 3
        assert total == 3_000_000 + (pieces - 1) * 10_000
        # Each suspend command comes tSPD before the end of its piece.
        end = int(p["start_ns"][i] + p["width_ns"][i])
        assert end - 10_000 in susp["time_ns"].tolist()
    assert t.pulses["ERASE"] == t.erases["total"]


def test_program_suspend_resumes_with_13h():
    d = small(cell="mlc", pages_per_block=8, program_suspend=1.0)
    run = refssd.simulate(d, mixed(d, 400, seed=8, span=40), seed=8, precondition="steady")
    assert run.truth.suspensions > 0
    cmds = run.commands
    assert (cmds["first"] == 0x84).sum() == run.truth.pulses["PROGRAM_RESUME"]
    assert (cmds["confirm"][cmds["op"] == NandOp.PROGRAM_RESUME] == 0x13).all()
    assert run.truth.pulses["PROGRAM"] == run.truth.program_operations


def test_read_retry_repeats_tr_of_the_same_page():
    d = small(cell="mlc", pages_per_block=8, read_retry=0.5)
    run = refssd.simulate(d, mixed(d, 400, seed=9), seed=9, precondition="steady")
    t = run.truth
    assert t.read_retries > 0
    assert t.pulses["SET_FEATURES"] == t.read_retries
    assert t.pulses["READ"] == t.reads["total"] + t.read_retries
    p = run.pulses[0]
    k = np.flatnonzero(p["op"] == NandOp.SET_FEATURES)
    # A retry re-reads the page just read: same block and page as the read before it.
    first = k[0]
    assert p["op"][first + 1] == NandOp.READ
    assert (p["block"][first + 1], p["page"][first + 1]) == (p["block"][first - 1],
                                                             p["page"][first - 1])


# Cache-program regimes -------------------------------------------------------------------------


@pytest.mark.parametrize("regime", ["back-to-back", "host-paced"])
def test_cache_program_regimes(regime):
    d = small(cell="mlc", pages_per_block=8, cache_program=True, cache_regime=regime,
              timing={"cache_busy": (8, 30), "program_lower": (300, 500),
                      "program_upper": (1500, 2000)})
    run = refssd.simulate(d, writes(64), seed=10)
    p = run.pulses[0]
    cp = p["width_ns"][p["op"] == NandOp.CACHE_PROGRAM]
    assert len(cp) == 63 and run.truth.pulses["PROGRAM"] == 1
    if regime == "host-paced":
        # Only tCBSY shows: the array program ended before the next page arrived.
        assert cp.max() <= 30_000
    else:
        # The 15h busy waits for the previous array program: most are hundreds of µs.
        assert np.median(cp) > 250_000
    assert run.truth.pages_programmed["total"] == 64


# Wired-OR LUNs ---------------------------------------------------------------------------------


def test_wired_or_luns_share_one_line_low_while_any_is_busy():
    d = small(cell="mlc", pages_per_block=8, dies_per_chip=2, wired_or=True)
    run = refssd.simulate(d, writes(64), seed=11)
    lines = rb_lines(d)
    assert [m for _, m in lines] == [[0, 1]]
    # Parallel load: the two LUNs are busy at the same time.
    a, b = run.pulses[0], run.pulses[1]
    a_end = a["start_ns"] + a["width_ns"]
    both = ((b["start_ns"][:, None] < a_end[None, :])
            & (b["start_ns"][:, None] + b["width_ns"][:, None] > a["start_ns"][None, :]))
    assert both.any()
    m = to_measurement(run)
    assert len(m.probes) == 1 and len(m.probes[0].dies) == 2
    # The line's busy time is the union of the LUNs' (10 ns grid).
    grid = np.zeros(int(max(a_end.max(), (b["start_ns"] + b["width_ns"]).max())) // 10 + 2,
                    bool)
    for p in (a, b):
        for s, w in zip(p["start_ns"] // 10, (p["start_ns"] + p["width_ns"]) // 10,
                        strict=True):
            grid[s:w] = True
    cycles, _ = die_edges(np.concatenate([a, b]))
    assert int((cycles[1::2] - cycles[0::2]).sum()) == int(grid.sum())
    assert sum(m.counts[0].classes) + m.counts[0].unclassified < len(a) + len(b)


# Timing shapes, spread, drift -----------------------------------------------------------------


def test_width_shapes_have_tails_beyond_the_range():
    rng = np.random.default_rng(1)
    normal = refssd.drive.draw(rng, (1000, 2000), 20000)
    logn = refssd.drive.draw(rng, (1000, 2000), 20000, "lognormal")
    heavy = refssd.drive.draw(rng, (1000, 2000), 20000, "heavy-tail")
    assert normal.max() <= 2_000_000
    assert 0.01 < (logn > 2_000_000).mean() < 0.04
    assert (heavy > 2_000_000).mean() > 0.05
    assert np.percentile(heavy, 99.5) > 2_400_000


def test_die_spread_and_wear_drift():
    d = small(cell="mlc", pages_per_block=8, channels=2, die_spread=0.15, wear_drift=0.5,
              timing={"erase": (2000, 2000), "program_upper": (1500, 1500)})
    run = refssd.simulate(d, mixed(d, 1500, seed=12), seed=12, precondition="steady")
    means = []
    for die in range(2):
        p = run.pulses[die]
        e = p["width_ns"][p["op"] == NandOp.ERASE]
        assert len(e) > 4
        # Drift: the die's erases lengthen over the run (a constant tBERS otherwise).
        assert e[-1] > e[0]
        means.append(e[0])
    # Spread: each die has its own scale of the same nominal tBERS.
    assert means[0] != means[1]


def test_drawn_maxima_cover_every_pulse():
    # What a datasheet maximum must cover (the zoo's L1 maxima are drawn above these).
    d = small(cell="mlc", pages_per_block=8, timing_shape="heavy-tail", erase_suspend=0.5)
    run = refssd.simulate(d, mixed(d, 600, seed=13), seed=13, precondition="steady")
    mx = run.stats["drawn_max_ns"]
    p = run.pulses[0]
    for op, key in ((NandOp.PROGRAM, "program"), (NandOp.ERASE, "erase"),
                    (NandOp.READ, "read")):
        w = p["width_ns"][p["op"] == op]
        assert len(w) and w.max() <= mx[key]
    # Heavy tails: the longest draws lie beyond the nominal ranges.
    assert mx["program"] > 1000 * d.timing["program_upper"][1]

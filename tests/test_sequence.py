"""Sequence-aware classification: labelled pulse sequences built here, and the checks around it.

The sequences follow the rules a real die obeys, built by hand from a block's page order
(MLC L0 L1 U0 L2 U1 … U(n-1); TLC with three levels), one or two open blocks per die, an erase
opening each block, reads in between — with the widths drawn from uniform ranges where upper
pages and erases overlap, the case no width window can count.
"""

import json
import math

import numpy as np
import pytest

from rbscope.analysis.calibrate import calibrate, erase_plausible
from rbscope.analysis.geometry import Geometry
from rbscope.analysis.logical import LogicalVolume, from_bytes
from rbscope.analysis.measurement import Measurement, Probe
from rbscope.analysis.sequence import SequenceError, classify, classify_measurement
from rbscope.analysis.wa import WAError, compute_wa, decide_mp, measured_mp
from rbscope.cli import commands as cli
from rbscope.gateware.rb_sniffer.model import ChannelCounts
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

TICK = 1e-7  # 0.1 µs
PPB = 64


def page_order(levels, ppb):
    """Page types (0 lower, 1 middle, 2 upper) of a block in program order (one-line lag)."""
    lines = ppb // levels
    return [s for _, s, _ in sorted((w + s, s, -w) for w in range(lines) for s in range(levels))]


def die_sequence(rng, blocks, *, levels=2, streams=2, reads=0.3, dbsy=False, cache_heads=0.0,
                 program=((200, 500), (1300, 2200)), erase=(1900, 2300)):
    """Widths (µs) and labels of one die: blocks opened by an erase, filled in page order."""
    order = page_order(levels, PPB)
    widths, labels = [], []
    pos = [None] * streams
    left = blocks
    while True:
        open_ = [i for i, p in enumerate(pos) if p is not None]
        if left == 0 and not open_:
            break
        s = int(rng.integers(streams))
        if pos[s] is None:
            if left == 0:
                continue
            if dbsy:
                widths.append(rng.uniform(0.5, 1.0))
                labels.append("dbsy")
            widths.append(rng.uniform(*erase))
            labels.append("erase")
            pos[s] = 0
            left -= 1
        if rng.random() < reads:
            widths.append(rng.uniform(25, 60))
            labels.append("read")
        if dbsy:
            widths.append(rng.uniform(0.5, 1.0))
            labels.append("dbsy")
        if rng.random() < cache_heads:
            widths.append(rng.uniform(3, 35))  # tCBSY: a cache program heading a chain
            labels.append("cache_program")
        else:
            widths.append(rng.uniform(*program[order[pos[s]]]))
            labels.append(f"program{order[pos[s]]}")
        pos[s] += 1
        if pos[s] == len(order):
            pos[s] = None
    return np.array(widths), labels


def ticks(widths):
    return np.maximum(1, np.round(np.asarray(widths) * 1e-6 / TICK)).astype(np.int64)


def programs_of(labels):
    return sum(1 for x in labels if x.startswith("program") or x == "cache_program")


def make(seed=1, dies=4, blocks=40, **kw):
    rng = np.random.default_rng(seed)
    pulses, labels = {}, {}
    for d in range(dies):
        w, lab = die_sequence(rng, blocks, **kw)
        pulses[d], labels[d] = ticks(w), lab
    return pulses, labels


def test_mlc_upper_pages_overlapping_erases_counted_exactly():
    pulses, labels = make()
    r = classify(pulses, TICK, pages_per_block=PPB,
                 hints={"program": (150, 2300), "erase": (1800, 2400)})
    assert r.balanced and r.page_types == 2
    for d, lab in labels.items():
        true = programs_of(lab)
        got = r.dies[d].program_pulses
        assert abs(got - true) / true < 0.002
        assert r.dies[d].erase_pulses == pytest.approx(lab.count("erase"), abs=6)
        # The bundled kind of window, its edge in the overlap, errs by far more.
        us = pulses[d] * TICK * 1e6
        assert abs(int(((us >= 150) & (us < 1950)).sum()) - true) / true > 0.05


def test_tlc_three_page_types_balanced():
    prog = ((400, 700), (1200, 1800), (2500, 4000))
    pulses, labels = make(seed=2, levels=3, program=prog, erase=(3000, 4500), blocks=30)
    r = classify(pulses, TICK, pages_per_block=PPB,
                 hints={"program": (300, 4000), "erase": (3000, 4500)})
    assert r.page_types == 3 and r.balanced
    for d, lab in labels.items():
        assert r.dies[d].program_pulses == pytest.approx(programs_of(lab), rel=0.003)


def test_erase_cap_stops_an_erase_state_swallowing_slow_programs():
    # No erase at all: upper pages fill the whole hinted erase range.
    pulses, labels = make(seed=3, erase=(1900, 2300), program=((200, 500), (1500, 2300)),
                          streams=1)
    for d in labels:  # drop the erases from the sequences
        keep = np.array([x != "erase" for x in labels[d]])
        pulses[d] = pulses[d][keep]
        labels[d] = [x for x in labels[d] if x != "erase"]
    hints = {"program": (150, 1900), "erase": (1900, 2400)}
    free = classify(pulses, TICK, hints=hints, balance=False)
    capped = classify(pulses, TICK, pages_per_block=PPB, hints=hints, balance=False)
    for d, lab in labels.items():
        cap = capped.dies[d].erase_cap
        assert capped.dies[d].erase_pulses <= cap + 1
        assert capped.dies[d].erase_pulses < free.dies[d].erase_pulses
        assert capped.dies[d].program_pulses == pytest.approx(programs_of(lab), rel=0.03)


def test_tdbsy_pulses_give_pages_and_announce_cache_program_heads():
    pulses, labels = make(seed=4, dbsy=True, cache_heads=0.05, blocks=30)
    r = classify(pulses, TICK, pages_per_block=PPB)
    for d, lab in labels.items():
        die = r.dies[d]
        heads = lab.count("cache_program")
        assert die.announced == pytest.approx(heads, rel=0.05)
        assert die.program_pulses == pytest.approx(programs_of(lab), rel=0.003)
        # Each program pulse follows one tDBSY: two pages per program pulse.
        assert die.pages == pytest.approx(2 * programs_of(lab), rel=0.003)
    ratio, mp = measured_mp(r)
    assert mp == 2 and ratio == pytest.approx(2, abs=0.01)


def test_a_point_erase_hint_still_claims_every_erase():
    # A datasheet's single typical tBERS (3.8 ms) while the erases spread over 3.5-4.1 ms.
    prog = ((250, 600), (1400, 2400))
    pulses, labels = make(seed=10, dbsy=True, program=prog, erase=(3500, 4100), blocks=20)
    for d in labels:  # some erases right at the ends of their range
        i = [k for k, x in enumerate(labels[d]) if x == "erase"]
        pulses[d][i[0]], pulses[d][i[1]] = ticks([3500.0, 4099.9])
    r = classify(pulses, TICK, pages_per_block=PPB,
                 hints={"program": (200, 2200), "erase": (3800, 3800)})
    for d, lab in labels.items():
        assert r.dies[d].erase_pulses == pytest.approx(lab.count("erase"), abs=0.01)
        assert r.dies[d].announced < 0.01  # no erase read as a short pulse after a tDBSY
        assert r.dies[d].pages == pytest.approx(2 * programs_of(lab), abs=0.01)


def test_power_on_reset_and_set_features_announce_nothing():
    # A capture from power-on: reset (tRST, 4 µs), set features (1 µs, as short as a tDBSY),
    # then a read and the die's work.
    pulses, labels = make(seed=11, dbsy=True, blocks=20, erase=(3000, 4000))
    plain = classify(pulses, TICK, pages_per_block=PPB)
    for d in labels:
        pulses[d] = np.concatenate([ticks([4.0, 1.0, 56.0]), pulses[d]])
    r = classify(pulses, TICK, pages_per_block=PPB)
    for d, lab in labels.items():
        assert r.dies[d].announced < 0.01
        assert r.dies[d].pages == pytest.approx(2 * programs_of(lab), abs=0.01)
        assert r.dies[d].pages == pytest.approx(plain.dies[d].pages, abs=0.01)


def test_too_few_pulses_and_bad_input_are_clear_errors():
    with pytest.raises(SequenceError, match="no per-pulse widths"):
        classify({0: []}, TICK)
    with pytest.raises(SequenceError, match="too few"):
        classify({0: [100] * 10}, TICK)
    with pytest.raises(SequenceError, match="positive"):
        classify({0: [0] * 100}, TICK)


# The WA engine with the sequence classifier -------------------------------------------------

GEOM = Geometry(name="t", channels=2, chips_per_channel=1, dies_per_chip=2, planes_per_die=2,
                page_size=4096, pages_per_block=PPB, timing={"program": (150, 2300),
                                                              "erase": (1800, 2400)})
NAMES = ("cache", "read", "program", "erase")
WIN_US = ((1.5, 12), (12, 150), (150, 1950), (1950, 12000))


def to_measurement(pulses, keep_pulses=True):
    params = SnifferParams(channels=len(pulses))
    windows = tuple((round(lo * 1e-6 / TICK), round(hi * 1e-6 / TICK)) for lo, hi in WIN_US)
    config = SnifferConfig(prescaler=1, glitch_ticks=1, windows=windows, idle_ticks=100)
    counts = []
    for ch in range(len(pulses)):
        c = ChannelCounts.zeros(params)
        w = pulses[ch]
        for k, (lo, hi) in enumerate(windows):
            c.classes[k] = int(((w >= lo) & (w < hi)).sum())
        for x in w:
            c.histogram[params.hist_bin(int(x))] += 1
        counts.append(c)
    probes = [Probe(f"d{i}", (loc,)) for i, loc in enumerate(GEOM.die_locations())]
    return Measurement(params, config, TICK, counts, NAMES, probes=probes[:len(pulses)],
                       quiet_ticks=10**6,
                       pulses={ch: list(map(int, w)) for ch, w in pulses.items()}
                       if keep_pulses else {})


def test_compute_wa_with_sequence_interval_holds_truth_and_says_what_it_includes():
    pulses, labels = make(seed=5)
    m = to_measurement(pulses)
    true_pages = sum(programs_of(lab) for lab in labels.values())
    logical = from_bytes(true_pages * GEOM.page_size)  # true WA = 1
    seq = classify_measurement(m, GEOM)
    assert seq.mode == "sequence"
    r = compute_wa(m, GEOM, logical, sequence=seq, write_only=True)
    assert r.classifier == "sequence"
    assert abs(r.wa.value - 1) < 0.002
    assert r.wa_confidence.lo <= 1 <= r.wa_confidence.hi
    assert "classification posterior" in r.interval_includes
    assert not r.interval_excludes
    d = json.loads(json.dumps(r.to_dict()))
    assert d["classifier"] == "sequence" and d["interval_includes"]
    assert d["classification"]["balanced"] is True
    windows = compute_wa(m, GEOM, logical)
    assert abs(windows.wa.value - 1) > 0.01  # the windows cut the upper pages
    assert any("classification" in x for x in windows.interval_excludes)
    # Half the dies probed: the die sampling joins the interval.
    half = compute_wa(m, GEOM, logical, sequence=seq, channels=[0, 1])
    assert "die sampling (Student t)" in half.interval_includes


def test_histograms_only_fall_back_to_the_constrained_mixture():
    pulses, labels = make(seed=6)
    m = to_measurement(pulses, keep_pulses=False)
    seq = classify_measurement(m, GEOM)
    assert seq.mode == "mixture" and seq.balanced
    true = sum(programs_of(lab) for lab in labels.values())
    got = sum(d.program_pulses for d in seq.dies.values())
    assert got == pytest.approx(true, rel=0.01)


# Plausibility checks ------------------------------------------------------------------------


def checks(r):
    return {c["check"] for c in r.checks}


def test_checks_erase_count_edge_pileup_and_wa_below_one():
    pulses, labels = make(seed=7)
    m = to_measurement(pulses)
    true_pages = sum(programs_of(lab) for lab in labels.values())
    r = compute_wa(m, GEOM, from_bytes(true_pages * GEOM.page_size))
    # The erase window [1950, …) holds the upper pages' tail: far too many "erases".
    assert {"erase_count", "window_edge", "wa_below_1"} <= checks(r)
    assert all(c["message"] in r.warnings for c in r.checks)
    ok = compute_wa(m, GEOM, from_bytes(true_pages * GEOM.page_size),
                    sequence=classify_measurement(m, GEOM))
    assert not checks(ok)


def test_checks_cache_programs_and_reads_in_a_write_run():
    pulses, labels = make(seed=8, dbsy=True, cache_heads=0.05, reads=0.0)
    m = to_measurement(pulses)
    true_pages = 2 * sum(programs_of(lab) for lab in labels.values())
    lv = from_bytes(true_pages * GEOM.page_size)
    seq = classify_measurement(m, GEOM)
    r = compute_wa(m, GEOM, lv, sequence=seq, write_only=True)
    assert "cache_programs" in checks(r)
    assert r.wa.value == pytest.approx(1, abs=0.005)
    assert r.wa_confidence.lo <= 1 <= r.wa_confidence.hi
    # Windows: the tCBSY heads count as reads in a write-only run.
    w = compute_wa(m, GEOM, lv, write_only=True)
    assert "reads_in_write_run" in checks(w)


def test_histograms_only_cache_programs_widen_the_interval_and_point_to_the_tap():
    # Without the pulse order a tCBSY is a read; the tDBSY surplus shows the hidden programs.
    pulses, labels = make(seed=12, dbsy=True, cache_heads=0.2, reads=0.3)
    m = to_measurement(pulses, keep_pulses=False)
    true_pages = 2 * sum(programs_of(lab) for lab in labels.values())
    lv = from_bytes(true_pages * GEOM.page_size)  # true WA = 1
    seq = classify_measurement(m, GEOM)
    assert seq.mode == "mixture"
    r = compute_wa(m, GEOM, lv, sequence=seq, mp=2)
    assert r.wa.value < 0.9  # the heads are counted as reads ...
    assert r.wa_confidence.lo <= 1 <= r.wa_confidence.hi  # ... and the interval says so
    assert r.wa_confidence.hi < 1.2  # by about the hidden programs, not without bound
    assert "cache_programs" in checks(r)
    msg = next(c["message"] for c in r.checks if c["check"] == "cache_programs")
    assert "tap the bus" in msg and "per-pulse widths" in msg
    hidden = sum(row.hidden for row in r.channels)
    heads = sum(lab.count("cache_program") for lab in labels.values())
    assert hidden == pytest.approx(heads, rel=0.1)
    # Without cache programs the same drive's histograms raise no such warning.
    pulses, labels = make(seed=12, dbsy=True, reads=0.3)
    m = to_measurement(pulses, keep_pulses=False)
    lv = from_bytes(2 * sum(programs_of(lab) for lab in labels.values()) * GEOM.page_size)
    r = compute_wa(m, GEOM, lv, sequence=classify_measurement(m, GEOM), mp=2)
    assert "cache_programs" not in checks(r)
    assert r.wa.value == pytest.approx(1, abs=0.01)


def test_mp_beyond_planes_is_refused_and_never_proposed():
    pulses, _ = make(seed=9, blocks=10)
    m = to_measurement(pulses)
    with pytest.raises(WAError, match="contradicts"):
        compute_wa(m, GEOM, from_bytes(10**8), mp=4)
    d = decide_mp(0.26, candidates=(1, 2, 4), planes=2)
    assert d.mp is None and 4 not in d.candidates
    with pytest.raises(WAError, match="no Mp candidate"):
        decide_mp(0.5, candidates=(4,), planes=2)


def test_calibrate_never_proposes_an_erase_cluster_the_structure_rules_out():
    rng = np.random.default_rng(10)
    # Two program clusters and a third, frequent one at erase times: slow programs, not erases.
    widths = np.concatenate([rng.uniform(200, 500, 5000), rng.uniform(1300, 1600, 3000),
                             rng.normal(2050, 40, 2000)])
    params = SnifferParams(channels=1)
    hist = [0] * params.hist_bins
    for w in ticks(widths):
        hist[params.hist_bin(int(w))] += 1
    hints = {"read": (10, 150), "program": (150, 1700), "erase": (1900, 2300)}
    loose = calibrate(hist, params, TICK, hints=hints)
    assert "erase" in [n for n, _, _ in loose.preset.windows]
    strict = calibrate(hist, params, TICK, hints=hints, pages_per_block=PPB)
    assert "erase" not in [n for n, _, _ in strict.preset.windows]
    assert any("cannot be erases" in n for n in strict.notes)
    assert erase_plausible(100, 64 * 100, 64) and not erase_plausible(2000, 8000, 64)


def test_analyze_cli_sequence_default_and_mp_refusal(tmp_path, capsys):
    pulses, labels = make(seed=11, blocks=20)
    m = to_measurement(pulses)
    path = tmp_path / "m.json"
    m.save(path)
    geo = tmp_path / "g.toml"
    geo.write_text('name = "t"\n[geometry]\nchannels = 2\nchips_per_channel = 1\n'
                   'dies_per_chip = 2\nplanes_per_die = 2\npage_size = 4096\n'
                   'pages_per_block = 64\nprogram_model = "single-plane"\n'
                   '[timing]\nprogram = [150, 2300]\nerase = [1800, 2400]\n', encoding="utf-8")
    true_pages = sum(programs_of(lab) for lab in labels.values())
    args = ["analyze", str(path), "--geometry", str(geo), "--logical",
            str(true_pages * 4096)]
    assert cli.main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["classifier"] == "sequence"
    assert math.isclose(out["wa"]["value"], 1, abs_tol=0.003)
    assert out["wa_confidence_95"]["lo"] <= 1 <= out["wa_confidence_95"]["hi"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "sequence classifier" in text and "it includes:" in text
    assert cli.main(args + ["--mp", "4"]) == 1
    assert "contradicts" in capsys.readouterr().err
    assert isinstance(LogicalVolume(1, 1, "none").value, (int, float))


def test_rounding_below_zero_in_the_posterior_variance_is_no_error():
    # Posteriors that are all 0 or 1 can sum a hair past 1: a variance of -1e-18 must not
    # stop the WA (math domain error in the interval), it is zero.
    pulses, labels = make(seed=13, blocks=10)
    m = to_measurement(pulses)
    seq = classify_measurement(m, GEOM)
    for die in seq.dies.values():
        die.program_var = -1e-18
    lv = from_bytes(sum(programs_of(lab) for lab in labels.values()) * GEOM.page_size)
    r = compute_wa(m, GEOM, lv, sequence=seq)
    assert r.wa_confidence.lo <= r.wa.value <= r.wa_confidence.hi
    json.dumps(r.to_dict())
    assert all(d["program_sd"] == 0 for d in seq.to_dict()["dies"].values())


def test_chain_heads_by_the_gap_after_short_pulses_before_programs():
    from rbscope.analysis.sequence import _chain_head_gaps

    rng = np.random.default_rng(7)
    n = 400
    pshort = np.ones(n)
    nxt = np.ones(n)
    # 60 heads one transfer (~32 µs) before their program, 340 reads two (~60 µs).
    gap = np.r_[rng.normal(5.0, 0.06, 60), rng.normal(5.9, 0.06, 340)]
    p = _chain_head_gaps(pshort, nxt, gap)
    assert p[:60].min() > 0.99 and p[60:].max() < 0.01
    # A pulse not before a program is no candidate: it does not move the groups.
    assert _chain_head_gaps(pshort, np.r_[np.zeros(60), np.ones(340)], gap) is None
    # One group (all reads, or all heads): the gaps do not decide.
    assert _chain_head_gaps(pshort, nxt, rng.normal(5.9, 0.06, n)) is None
    # Groups five octaves apart are a silence (a host-paced program), not a transfer.
    far = np.r_[rng.normal(5.0, 0.06, 60), rng.normal(10.0, 0.3, 340)]
    assert _chain_head_gaps(pshort, nxt, far) is None
    # Reads one transfer before a resumed operation (suspend: data out, 13h or D2h) are as
    # long as the reads before new programs: no heads.
    reads = rng.normal(np.log2(30), 0.2, n)
    assert _chain_head_gaps(pshort, nxt, gap, reads) is None
    heads_w = np.r_[rng.normal(np.log2(8), 0.4, 60), reads[60:]]
    assert _chain_head_gaps(pshort, nxt, gap, heads_w)[:60].min() > 0.99
    # Overlapping groups (commands as long as the transfer): undecided.
    near = np.r_[rng.normal(5.0, 0.25, 60), rng.normal(5.5, 0.25, 340)]
    assert _chain_head_gaps(pshort, nxt, near) is None


def test_a_few_heads_gaps_are_set_apart_from_many_reads_spread_wide():
    from rbscope.analysis.sequence import _chain_head_gaps, _two_groups

    # 12 heads' gaps of 24-38 µs below 1 100 reads' spread evenly over 42-61 µs. The split of
    # least within-group variance halves the reads (a uniform group gains most from it): no
    # groups. Looking for a small shorter group sets the heads apart, where the widths confirm
    # them (tCBSY of 2-12 µs against reads of 22 µs).
    rng = np.random.default_rng(56)
    heads = np.log2(rng.uniform(24, 38, 12))
    reads = np.log2(rng.uniform(42, 61, 1100))
    gap = np.r_[heads, reads]
    assert _two_groups(gap) is None
    cut, (m1, _), (m2, _) = _two_groups(gap, small_low=True)
    assert (heads < cut).sum() >= 10 and cut < reads.min()
    assert abs(m1 - np.median(heads)) < 0.1 and m2 == pytest.approx(np.median(reads), abs=0.01)
    ones = np.ones(len(gap))
    width = np.r_[np.log2(rng.uniform(2, 12, 12)), rng.normal(np.log2(22), 0.2, 1100)]
    p = _chain_head_gaps(ones, ones, gap, width)
    assert p[:12].sum() >= 9 and p[12:].max() < 0.05
    # Without the widths, or with heads as wide as the reads: no decision by the gaps.
    assert _chain_head_gaps(ones, ones, gap) is None
    assert _chain_head_gaps(ones, ones, gap, np.r_[width[12:24], width[12:]]) is None
    # A normal group's lower tail is no group of its own once the widths are alike.
    one = rng.normal(5.7, 0.3, 1100)
    assert _chain_head_gaps(ones[:1100], ones[:1100], one, width[12:]) is None


def test_heads_narrower_than_the_reads_count_as_programs_by_their_excess():
    from rbscope.analysis.sequence import _heads_below_reads

    # 950 reads no program follows and 500 reads before programs (pages moved), all of
    # 22 µs ± 0.25 octave, and 12 chain heads of 2-12 µs before programs.
    rng = np.random.default_rng(38)
    x = np.r_[rng.normal(np.log2(22), 0.25, 1450), np.log2(rng.uniform(2, 12, 12))]
    nxt = np.r_[np.zeros(950), np.ones(512)]
    pshort = np.ones(len(x))
    got = _heads_below_reads(x, pshort, nxt, np.zeros(len(x)))
    assert 11 <= got.sum() <= 12 and got[:1450].sum() < 0.5
    # Heads the gaps already counted are not counted again.
    counted = np.r_[np.zeros(1450), np.ones(12)]
    assert _heads_below_reads(x, pshort, nxt, counted).sum() == 0
    # Without heads, the reads' own tail before programs is no excess.
    assert _heads_below_reads(x[:1450], pshort[:1450], nxt[:1450], np.zeros(1450)).sum() == 0
    # Fast reads before programs as often as elsewhere (a second read type): no excess.
    fast = np.r_[rng.normal(np.log2(22), 0.25, 1300), rng.normal(np.log2(5), 0.2, 150)]
    nxt2 = np.r_[np.zeros(850), np.ones(450), np.zeros(100), np.ones(50)]
    assert _heads_below_reads(fast, pshort[:1450], nxt2, np.zeros(1450)).sum() == 0


def test_after_a_tdbsy_the_gap_tells_programs_from_erases():
    from rbscope.analysis.sequence import _programs_by_data_in

    # States: 0 tDBSY, 1 program, 2 erase. Pairs (tDBSY, long pulse): 40 programs after a
    # page's data in (~90 µs), 3 erases after a command alone (~8 µs); the widths put two of
    # the programs (a chain's last, two programs' time) in the erase state and an erase half in
    # a program.
    rng = np.random.default_rng(3)
    kinds = [1] * 40 + [2] * 3
    rng.shuffle(kinds)
    g, gaps = [], []
    for kd in kinds:
        g.append([1.0, 0.0, 0.0])
        gaps.append(np.log2(rng.uniform(83, 100) if kd == 1 else rng.uniform(5, 18)))
        g.append([0.0, 1.0, 0.0] if kd == 1 else [0.0, 0.0, 1.0])
        gaps.append(np.log2(60.0))  # the gap after the long pulse: whatever comes next
    g = np.array(g)
    long_ = np.arange(1, len(g), 2)
    progs = long_[np.array(kinds) == 1]
    erases = long_[np.array(kinds) == 2]
    g[progs[:2]] = [0.0, 0.0, 1.0]
    g[erases[0]] = [0.0, 0.5, 0.5]
    # gap_after[i] is the idle time after pulse i: the gap before pulse i + 1.
    out = _programs_by_data_in(g, [1], 2, [0], np.array(gaps))
    assert out[progs, 1].sum() == pytest.approx(40) and out[progs, 2].sum() == 0
    assert out[erases, 2].sum() == pytest.approx(3) and out[erases, 1].sum() == 0
    # No empty octave between the gaps (no erase in the capture): nothing moves.
    flat = np.array(gaps)
    flat[long_ - 1] = np.log2(rng.uniform(83, 100, len(long_)))
    assert np.array_equal(_programs_by_data_in(g, [1], 2, [0], flat), g)


def test_of_several_empty_stretches_the_gap_split_the_widths_contradict_least():
    from rbscope.analysis.sequence import _programs_by_data_in

    # A publishing draw of tlc-plane-reads-4p (1570): the erases' gaps spread over 1-20 µs,
    # two of them at 1.3 µs, the programs' 83-102 µs. The widest empty stretch (1.3 to 6.2 µs,
    # 2.3 octaves) is inside the erases; the split between erases and programs (20 to 83 µs,
    # 2.0 octaves) is the one the widths agree with.
    rng = np.random.default_rng(5)
    erase_gaps = [1.3, 1.3, 6.2, 7.0, 8.4, 9.0, 12.5, 13.3, 13.8, 17.7, 18.2, 20.3]
    kinds = [1] * 60 + [2] * len(erase_gaps)
    rng.shuffle(kinds)
    left = list(erase_gaps)
    g, gaps = [], []
    for kd in kinds:
        g.append([1.0, 0.0, 0.0])
        gaps.append(np.log2(rng.uniform(83, 102) if kd == 1 else left.pop()))
        g.append([0.0, 1.0, 0.0] if kd == 1 else [0.0, 0.0, 1.0])
        gaps.append(np.log2(60.0))
    g = np.array(g)
    long_ = np.arange(1, len(g), 2)
    progs = long_[np.array(kinds) == 1]
    erases = long_[np.array(kinds) == 2]
    g[erases[:4]] = [0.0, 1.0, 0.0]  # erases as wide as the slowest programs
    out = _programs_by_data_in(g, [1], 2, [0], np.array(gaps))
    assert out[erases, 2].sum() == pytest.approx(len(erase_gaps))
    assert out[progs, 1].sum() == pytest.approx(60)


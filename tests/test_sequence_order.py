"""Order rules of the sequence classifier that need the time between pulses: host-paced cache
programs (:func:`rbscope.analysis.sequence._host_paced`), resumes told by the gap before them
(:func:`rbscope.analysis.sequence._resume_gaps`), and the pulse starts a measurement carries for
them."""

import math

import numpy as np
import pytest

from rbscope.analysis.measurement import Measurement, MeasurementError
from rbscope.analysis.sequence import (
    ERASE_WIDTHS_APART,
    State,
    _erases_by_data_in,
    _Grid,
    _host_paced,
    _modes_alone,
    _programs_past_max,
    _reads_by_data_in,
    _resumable,
    _resume_gaps,
)

#: Program modes: the fast page type from 150 µs, the slow one's lower edge 1 ms, up to 6 ms.
RANGE = (math.log2(150.0), math.log2(1000.0), math.log2(6000.0))
CBSY_HI = math.log2(40.0)


def _pulses(spec):
    """``spec``: (kind, width µs, silence after µs) with kind ``s`` short, ``P`` program."""
    x = np.log2([w for _, w, _ in spec])
    gap = np.log2([g for _, _, g in spec])
    gap[-1] = np.nan
    pshort = np.array([1.0 if k == "s" else 0.0 for k, _, _ in spec])
    pprog = 1.0 - pshort
    return x, pprog, pshort, gap


def test_a_chain_with_a_slow_silence_is_cache_programs():
    # Read, then a chain of three tCBSY each followed by its page's program time (a fast page,
    # a slow page, a fast page), then the 10h program: the three are cache programs.
    x, pprog, pshort, gap = _pulses([("s", 40, 10), ("s", 20, 300), ("s", 15, 1500),
                                     ("s", 18, 320), ("P", 1400, 30), ("s", 30, 12)])
    out = _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI)
    assert out.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]


def test_a_slow_tcbsy_continues_a_chain_but_starts_none():
    # A tCBSY of 55 µs (a slow one's tail, above the 40 µs bound) inside a chain used to end
    # it, and every cache program before it went with it (a tuning draw: -8.5 %). It continues
    # a chain; it starts none (after a long pulse and its silence, a 55 µs pulse is a read).
    x, pprog, pshort, gap = _pulses([("s", 40, 10), ("s", 20, 300), ("s", 55, 1500),
                                     ("s", 18, 320), ("P", 1400, 30), ("s", 30, 12)])
    out = _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI)
    assert out.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    x, pprog, pshort, gap = _pulses([("P", 1400, 30), ("s", 55, 1500), ("P", 300, 20),
                                     ("s", 30, 12)])
    assert not _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI).any()
    # Wider still (63 µs, more than 0.6 octave above the bound, and 70 µs): the tail of the
    # die's tCBSY, not of the datasheet's bound. With a page's program time before and after
    # it, it continues the chain (a tuning draw lost the 16 cache programs before one: −2.2 →
    # −1.1 %); after a long pulse it still starts none.
    for wide in (63, 70):
        x, pprog, pshort, gap = _pulses([("s", 20, 300), ("s", wide, 1500), ("s", 18, 1500),
                                         ("P", 1400, 30)])
        assert _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI).tolist() == \
            [1.0, 1.0, 1.0, 0.0]
        x, pprog, pshort, gap = _pulses([("P", 1400, 30), ("s", wide, 1500), ("P", 300, 20)])
        assert not _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI).any()
    # A program-width pulse is no link: the chain before it ends there (and counts, ending in
    # a program).
    x, pprog, pshort, gap = _pulses([("s", 20, 1500), ("P", 400, 1500), ("s", 18, 1500),
                                     ("P", 1400, 30)])
    assert _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI).tolist() == [1.0, 0.0, 1.0, 0.0]


def test_a_chain_ending_in_a_program_as_slow_as_an_erase_counts_whole():
    # The 10h program that ends a host-paced chain is 2 ms: the widths give it 0.93 program,
    # 0.07 erase. The chain's slow silences say it is a chain; its end being a program or an
    # erase is the end's doubt, not the chain's (a tuning draw, mlc-hostpaced-cache-50r seed
    # 35: every chain ending so counted 0.93 per cache program, 18 of 414 lost, -1.14 %).
    x, pprog, pshort, gap = _pulses([("s", 40, 10), ("s", 20, 300), ("s", 15, 1500),
                                     ("s", 18, 320), ("P", 2000, 30), ("s", 30, 12)])
    pprog[4] = 0.93
    perase = np.where(pprog > 0, 1 - pprog, 0.0)
    plain = _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI)
    assert plain.tolist() == pytest.approx([0.0, 0.93, 0.93, 0.93, 0.0, 0.0])
    out = _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI, plong=pprog + perase)
    assert out.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    # A long pulse that is surely no program or erase ends nothing, as before.
    out = _host_paced(x, pprog * 0, pshort, gap, RANGE, CBSY_HI, plong=pprog * 0)
    assert not out.any()


def test_a_read_moved_to_a_program_is_no_cache_program():
    # Garbage collection: a read, the page's transfer (200 µs, as long as a fast program), then
    # the program. No silence of the chain is a slow page's program: no cache program.
    x, pprog, pshort, gap = _pulses([("s", 40, 200), ("P", 300, 20), ("s", 35, 220),
                                     ("P", 1500, 15), ("s", 30, 5)])
    assert not _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI).any()


def test_a_silence_before_a_read_is_no_chain():
    # A read, the host idle for 2 ms, another read: the chain must end in a program.
    x, pprog, pshort, gap = _pulses([("s", 40, 2000), ("s", 35, 2000), ("s", 30, 10),
                                     ("P", 1500, 10), ("s", 30, 5)])
    out = _host_paced(x, pprog, pshort, gap, RANGE, CBSY_HI)
    assert out[0] == 0.0 and out[1] == 0.0
    # The probabilities carry: a chain whose last pulse is half a program counts half.
    pprog[3] = 0.5
    x2, _, _, _ = _pulses([("s", 40, 1500), ("P", 1500, 10), ("s", 30, 5)])
    out = _host_paced(x2, np.array([0.0, 0.5, 0.0]), np.array([1.0, 0.0, 1.0]),
                      np.array([math.log2(1500), math.log2(10), np.nan]), RANGE, CBSY_HI)
    assert out[0] == pytest.approx(0.5)


def test_resumable_counts_programs_after_an_erase_and_reads():
    # States: read, program, erase. erase, 2 reads, program: one possible resumed erase;
    # program, read, program: none (the first is no erase).
    class S:
        def __init__(self, kind):
            self.kind = kind
    states = [S("read"), S("program"), S("erase")]
    rows = {"r": [1, 0, 0], "P": [0, 1, 0], "E": [0, 0, 1]}
    g = np.array([rows[c] for c in "ErrPrPrrrrP"], dtype=float)
    assert _resumable(g, states) == pytest.approx(1.0)


def _measurement(pulses, starts):
    from rbscope.gateware.rb_sniffer.model import ChannelCounts
    from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

    params = SnifferParams(channels=1)
    return Measurement(params, SnifferConfig(), 1e-6, [ChannelCounts.zeros(params)],
                       pulses=pulses, pulse_starts=starts)


def test_pulse_starts_round_trip_and_are_checked(tmp_path):
    from array import array

    m = _measurement({0: array("Q", [5, 7, 9])}, {0: array("Q", [0, 10, 30])})
    back = Measurement.from_dict(m.to_dict())
    assert list(back.pulse_starts[0]) == [0, 10, 30]
    with pytest.raises(MeasurementError, match=r"pulse_starts\[0\] must give one start"):
        _measurement({0: array("Q", [5, 7, 9])}, {0: array("Q", [0, 10])})
    with pytest.raises(MeasurementError, match=r"pulse_starts\[0\] must not decrease"):
        _measurement({0: array("Q", [5, 7, 9])}, {0: array("Q", [0, 30, 10])})
    d = m.to_dict()
    d["pulse_starts"] = {"0": [0, "x", 3]}
    with pytest.raises(MeasurementError, match=r"pulse_starts\[0\]\[1\]"):
        Measurement.from_dict(d)
    # A measurement written before the field existed reads without it.
    d = m.to_dict()
    del d["pulse_starts"]
    assert Measurement.from_dict(d).pulse_starts == {}


def test_open_gaps_round_trip_and_are_checked():
    from array import array

    m = _measurement({0: array("Q", [5, 7, 9, 4])}, {0: array("Q", [0, 10, 30, 50])})
    m.pulse_gaps_open = {0: array("Q", [2])}
    back = Measurement.from_dict(m.to_dict())
    assert list(back.pulse_gaps_open[0]) == [2]
    for bad in ([0], [3, 2], [2, 2], [4]):
        d = m.to_dict()
        d["pulse_gaps_open"] = {"0": bad}
        with pytest.raises(MeasurementError, match=r"pulse_gaps_open\[0\] must be increasing "
                                                   r"indices of pulses 1 … 3"):
            Measurement.from_dict(d)
    d = m.to_dict()
    d["pulse_gaps_open"] = {"1": [1]}
    with pytest.raises(MeasurementError, match="pulse_gaps_open key 1 is not a channel"):
        Measurement.from_dict(d)
    # Without open gaps the key is not written; older measurements read without it.
    m.pulse_gaps_open = {}
    assert "pulse_gaps_open" not in m.to_dict()
    assert Measurement.from_dict(m.to_dict()).pulse_gaps_open == {}


def test_recordings_keep_each_pulse_s_start():
    from rbscope import refssd
    from rbscope.refssd.measure import to_measurement

    drive = refssd.preset("ssd-v", channels=2, blocks_per_plane=32, pages_per_block=32)
    wl = refssd.micro("4K-SQ-50%-W-4KiB-align", drive.logical_bytes, 1 << 19, seed=2)
    run = refssd.simulate(drive, wl, seed=2, precondition="steady")
    m = to_measurement(run, max_pulses=10**9)
    tick_ns = m.tick_seconds * 1e9
    for ch, widths in m.pulses.items():
        st = np.asarray(m.pulse_starts[ch], dtype=np.int64)
        w = np.asarray(widths, dtype=np.int64)
        assert len(st) == len(w) > 100
        assert (st[1:] >= st[:-1] + w[:-1]).all()  # each pulse ends before the next starts
        # The silences between pulses are the die's own, to the tick.
        die = run.pulses[ch]
        assert len(die) == len(w)
        truth = np.diff(die["start_ns"]) / tick_ns
        assert np.abs(np.diff(st) - truth).max() <= 1


def test_reads_that_reach_tr_max_are_not_split_from_their_cluster():
    # A part whose reads fill 50-75 µs evenly, tR max 75 µs (L1): there is no valley below the
    # maximum, and a split there made a program mode of the slower reads (+90 % on the
    # accuracy table's two-plane MLC drive).
    from rbscope.analysis.sequence import classify

    rng = np.random.default_rng(4)
    seq = []
    for _ in range(3000):
        seq += list(rng.uniform(50, 75, 2))  # two reads, then a lower or upper page program
        seq.append(rng.uniform(250, 600) if rng.random() < 0.5 else rng.uniform(1400, 2400))
    widths = {0: np.round(np.array(seq) * 1000).astype(np.int64)}  # 1 ns ticks
    r = classify(widths, 1e-9, read_max=75.0, hints={"read": (75.0, 75.0)})
    assert abs(r.dies[0].program_pulses - 3000) < 30


def _cands(gaps_us, back_to_back_us, command_us=3.0, before_us=30.0):
    """One line's suspend candidates as :func:`_resume_gaps` reads them: the gap before each
    second pulse, the gaps between back-to-back programs and the gap after each first pulse (a
    read's command; log2 µs), and the width of the pulse before each second pulse (µs)."""
    n = len(gaps_us)
    return (np.zeros((n, 2), dtype=int), np.ones(n), np.ones(n), np.ones((n, 1)),
            np.log2(np.asarray(gaps_us, dtype=float)),
            np.log2(np.asarray(back_to_back_us, dtype=float)),
            np.log2(np.full(n, command_us)),
            np.log2(np.broadcast_to(np.asarray(before_us, dtype=float), (n,))))


@pytest.mark.parametrize("n_resumes", [60, 12])
def test_resumes_are_the_group_one_transfer_shorter(n_resumes):
    # A page moves in 20 µs, a command takes 2-5 µs: resumes wait for the reads' data out
    # (22-25 µs, as long as a back-to-back program's data in), new programs for data in too;
    # a few resumes among many new programs (suspended erases) are found too.
    rng = np.random.default_rng(5)
    resumes = 20 + rng.uniform(2, 5, n_resumes)
    fresh = 40 + rng.uniform(2, 5, 2000 if n_resumes < 20 else 240)
    gaps = np.concatenate([resumes, fresh])
    r, what = _resume_gaps([_cands(gaps, 20 + rng.uniform(2, 5, 100))])
    assert r is not None, what
    assert (r[0][:n_resumes] > 0.99).all() and (r[0][n_resumes:] < 0.01).all()
    assert "back-to-back programs" in what


@pytest.mark.parametrize("gaps, b2b, why", [
    # One group only (a drive that does not suspend).
    (lambda rng: 40 + rng.uniform(2, 5, 300), lambda rng: 20 + rng.uniform(2, 5, 100),
     "no resume group"),
    # Resumes and new operations less than a transfer apart: no telling them.
    (lambda rng: np.concatenate([22 + rng.uniform(0, 3, 60), 26 + rng.uniform(0, 3, 240)]),
     lambda rng: 20 + rng.uniform(2, 5, 100), "not two groups"),
    # Two groups, but the short one is the usual read-to-program gap and the long one host
    # pacing (hundreds of µs): no gap sits where a back-to-back program's does.
    (lambda rng: np.concatenate([92 + rng.uniform(0, 5, 280), 600 + rng.uniform(0, 400, 20)]),
     lambda rng: 20 + rng.uniform(2, 5, 100), "no resume group"),
    # A few gaps there (a command's jitter), fewer than a group.
    (lambda rng: np.concatenate([40 + rng.uniform(2, 5, 300), 20 + rng.uniform(2, 5, 3)]),
     lambda rng: 20 + rng.uniform(2, 5, 100), "no resume group"),
    # No back-to-back programs to measure a transfer by.
    (lambda rng: np.concatenate([22 + rng.uniform(0, 3, 60), 42 + rng.uniform(0, 3, 240)]),
     lambda rng: 20 + rng.uniform(2, 5, 5), "too few gaps"),
])
def test_gaps_that_show_no_resume_group_decide_nothing(gaps, b2b, why):
    rng = np.random.default_rng(6)
    r, what = _resume_gaps([_cands(gaps(rng), b2b(rng))])
    assert r is None and why in what, what


def test_back_to_back_programs_without_a_transfer_tell_nothing():
    # Cache programs load their data while the array is busy: back-to-back programs are then a
    # command apart (12 µs, a read's command 10 µs), and a group of gaps there is no resume's.
    rng = np.random.default_rng(7)
    gaps = np.concatenate([12 + rng.uniform(0, 1, 60), 90 + rng.uniform(0, 5, 240)])
    r, what = _resume_gaps([_cands(gaps, 12 + rng.uniform(0, 1, 100), command_us=10.0)])
    assert r is None and "no transfer between them" in what, what


def test_resumes_anchor_on_their_own_gap_groups_when_back_to_back_programs_hold_no_transfer():
    # Back-to-back programs a command apart (their data loaded while the array was busy), but
    # the gaps before the second pieces split a transfer apart: resumes (one command after the
    # reads' data out, 30 µs) and new operations (data out and data in, 55 µs); the pulses
    # before both are reads (30 µs wide): the shorter group are resumes.
    rng = np.random.default_rng(11)
    gaps = np.concatenate([28 + rng.uniform(0, 4, 40), 53 + rng.uniform(0, 4, 300)])
    r, what = _resume_gaps([_cands(gaps, 12 + rng.uniform(0, 1, 100), command_us=10.0)])
    assert r is not None, what
    assert r[0][:40].min() > 0.9 and r[0][40:].max() < 0.1
    # The same gaps behind pulses shorter than the reads (8 µs against 30): cache-chain heads
    # (80h…15h with the array idle), not resumes.
    before = np.r_[np.full(40, 8.0), np.full(300, 30.0)]
    r, what = _resume_gaps([_cands(gaps, 12 + rng.uniform(0, 1, 100), command_us=10.0,
                                   before_us=before)])
    assert r is None and "cache-chain heads" in what, what


def _suspending_line(seed, n=4000, p_suspend=0.2, transfer=40.0, command=3.0):
    """One MLC line that suspends programs for reads: ``(widths µs, starts µs, programs)``.

    Reads 25-60 µs, lower pages 200-500, upper 1300-2200, an erase every 64 programs. A page
    moves in ``transfer`` µs: a read waits for the previous read's data out, a program for its
    data in (and a read's data out before it), a resume for the reads' data out only. A
    suspended program is cut at 15-85 % (its first piece runs tSPD on), so a lower page's
    pieces can be as short as reads."""
    rng = np.random.default_rng(seed)
    widths, gaps = [], []
    prev = "read"

    def emit(width, gap):
        widths.append(width)
        gaps.append(gap)

    def out():  # the data out of a read just before
        return transfer if prev == "read" else 0.0
    for i in range(n):
        for _ in range(int(rng.integers(1, 3))):
            emit(rng.uniform(25, 60), command + out())
            prev = "read"
        if i % 64 == 0:
            emit(rng.uniform(1900, 3000), command + out())
            prev = "long"
        total = rng.uniform(200, 500) if i % 2 == 0 else rng.uniform(1300, 2200)
        gap = command + transfer + out()
        if rng.random() < p_suspend:
            cut = rng.uniform(0.15, 0.85)
            emit(total * cut + rng.uniform(5, 20), gap)
            prev = "long"
            for _ in range(int(rng.integers(1, 3))):
                emit(rng.uniform(25, 60), command + out())
                prev = "read"
            emit(total * (1 - cut), command + transfer)
        else:
            emit(total, gap)
        prev = "long"
    starts = np.cumsum(gaps) + np.concatenate(([0.0], np.cumsum(widths)[:-1]))
    return np.array(widths), starts, n


@pytest.mark.parametrize("seed", [0, 1])
def test_a_program_after_a_short_resume_is_no_resume(seed):
    # One transfer before a long pulse after reads: a resume (the reads' data out), a new erase,
    # or a new program's data in after a rest too short to tell from a read. Weighing a resume
    # against any two operations (a new program too, which that gap rules out) left about a
    # third of the resumes apart, each counted as a program: +2.3 to +4.4 % on these lines.
    from rbscope.analysis.sequence import classify

    widths, starts, programs = _suspending_line(seed)
    r = classify({0: np.round(widths * 1000).astype(np.int64)}, 1e-9, pages_per_block=64,
                 starts={0: np.round(starts * 1000).astype(np.int64)})
    assert any("idle gap" in n for n in r.notes), r.notes
    assert abs(r.dies[0].program_pulses / programs - 1) < 0.015


class _State:
    def __init__(self, kind, centre_us, sigma=0.15):
        self.kind, self.mu, self.sigma = kind, math.log2(centre_us), sigma


@pytest.mark.parametrize("tail, transfer", [(0.03, 25.0), (0.0, 25.0), (0.03, 14.0)])
def test_reads_as_wide_as_the_fastest_programs_are_told_by_their_data_in(tail, transfer):
    # A read before two programs in three: reads about 55 µs (a tail of them 110-180), SLC
    # programs about 200, TLC pages 1600. The widths call the tail programs; the gap before each
    # pulse tells: commands 1-20 µs, a page's transfer 25 µs (a read's data out before the next
    # command, a program's data in before its busy). A 14 µs transfer is 2 pooled spreads of
    # the commands' gaps (uniform, 1-20 µs, read as normal): the rule still acts, its fitted
    # share finding part of the tail (a 3-spread minimum left small pages' reads, on the zoo's
    # SLC-cached drives, wholly to the widths).
    rng = np.random.default_rng(1)
    states = [_State("read", 55), _State("program", 200), _State("program", 1600),
              _State("erase", 4000)]
    kinds = []
    for i in range(4000):
        kinds += ([0] if rng.random() < 2 / 3 else []) + [1 if i % 2 else 2]
    kinds = np.array(kinds)
    is_read = kinds == 0
    n = int((~is_read).sum())
    widths = np.array([55.0, 200.0, 1600.0])[kinds] * 2.0 ** rng.normal(0, 0.15, len(kinds))
    tail_at = is_read & (rng.random(len(kinds)) < tail)
    widths[tail_at] = rng.uniform(110, 180, int(tail_at.sum()))
    x = np.log2(widths)
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), np.argmin(np.abs(x[:, None] - [st.mu for st in states]), axis=1)] = 1.0
    before = rng.uniform(1, 20, len(x)) + np.where(is_read, 0.0, transfer) \
        + np.concatenate(([0.0], np.where(is_read[:-1], transfer, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    out, moved, _, _ = _reads_by_data_in(x, g, states, gap_after)
    # (A gap at the commands' edge leaves some doubt: the groups are fitted as normal.)
    least = 0.85 if transfer > 20 else 0.3
    assert least * tail_at.sum() - 1 <= moved <= 1.05 * tail_at.sum() + 1
    assert out[~is_read][:, 1:3].sum() == pytest.approx(n, rel=0.002)
    # A line with cache states is left alone (a cache program's data in overlaps a busy).
    cache = states + [_State("cache", 10)]
    same, none, _, _ = _reads_by_data_in(x, np.hstack([g, np.zeros((len(x), 1))]), cache, gap_after)
    assert none == 0.0 and same[tail_at, 1].sum() == pytest.approx(tail_at.sum())


def test_reads_told_by_data_in_where_the_fastest_programs_rarely_follow_a_long_pulse():
    # Folding a write cache: each TLC page program (1600 µs) is followed by a read, the SLC
    # programs (200 µs) follow reads, and only 40 of them an erase. After the long pulses the
    # window of the SLC widths holds mostly the reads' tail (110-180 µs, 6 % of them): judged
    # by that window's gaps, the SLC programs seemed to wait for no data in, and the tail stayed
    # programs. Their own gaps (the pulses above the SLC centre) show the data in.
    rng = np.random.default_rng(3)
    states = [_State("read", 55), _State("program", 200), _State("program", 1600),
              _State("erase", 4000)]
    kinds = []
    for i in range(3000):
        kinds += [2, 0] + ([0] if rng.random() < 0.5 else []) + [1, 0]
        if i % 75 == 0:
            kinds += [3, 1, 0]  # an erase, an SLC program after it
    kinds = np.array(kinds)
    is_read = kinds == 0
    widths = np.array([55.0, 200.0, 1600.0, 4000.0])[kinds] * 2.0 ** rng.normal(0, 0.15,
                                                                               len(kinds))
    tail_at = is_read & (rng.random(len(kinds)) < 0.06)
    widths[tail_at] = rng.uniform(110, 180, int(tail_at.sum()))
    x = np.log2(widths)
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), np.argmin(np.abs(x[:, None] - [st.mu for st in states]), axis=1)] = 1.0
    before = rng.uniform(1, 20, len(x)) + np.where(is_read, 0.0, 25.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 25.0, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    after_long = np.concatenate(([False], kinds[:-1] >= 2))
    assert (tail_at & after_long).sum() > 3 * ((kinds == 1) & after_long).sum()
    out, moved, _, _ = _reads_by_data_in(x, g, states, gap_after)
    assert 0.85 * tail_at.sum() <= moved <= 1.05 * tail_at.sum() + 1
    assert out[tail_at & after_long, 0].sum() >= 0.85 * (tail_at & after_long).sum()


def test_reads_told_by_data_in_where_a_read_tail_is_as_many_as_the_slc_programs():
    # After each TLC page program (1600 µs) comes a read whose busy is long (a retry: 180-260
    # µs, as wide as the SLC programs about 200) as often as an SLC program: above the SLC
    # centre, after long pulses, the read tail and the programs are about as many. Judged by
    # their median gap, the SLC programs seemed to wait for no data in there (cache programs)
    # and the tail stayed programs; DATA_IN_CORE (30 %) of them waiting shows the programs.
    rng = np.random.default_rng(9)
    states = [_State("read", 55), _State("program", 200), _State("program", 1600),
              _State("erase", 4000)]
    kinds, tail = [], []
    for i in range(4000):
        kinds += [2]
        tail += [False]
        r = rng.random()
        kinds += [0 if r < 0.47 else 1]
        tail += [r < 0.47]
        kinds += [0, 0]
        tail += [False, False]
        if i % 75 == 0:
            kinds += [3]
            tail += [False]
    kinds, tail = np.array(kinds), np.array(tail)
    is_read = kinds == 0
    widths = np.array([55.0, 200.0, 1600.0, 4000.0])[kinds] * 2.0 ** rng.normal(0, 0.15,
                                                                               len(kinds))
    widths[tail] = rng.uniform(180, 260, int(tail.sum()))
    x = np.log2(widths)
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), np.argmin(np.abs(x[:, None] - [st.mu for st in states]), axis=1)] = 1.0
    before = rng.uniform(4, 16, len(x)) + np.where(is_read, 0.0, 25.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 25.0, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    core = (x >= states[1].mu) & (g[:, 1] > 0.5)
    assert 0.4 < (core & tail).sum() / core.sum() < 0.6
    out, moved, _, _ = _reads_by_data_in(x, g, states, gap_after)
    assert out[tail, 0].sum() >= 0.9 * tail.sum()
    # (The reads after a tail read wait for its data out, as programs after a long pulse wait
    # for their data in: the fit's groups blur, and some of the fastest SLC programs go too.)
    assert out[kinds == 1][:, 1:3].sum() >= 0.8 * (kinds == 1).sum()


@pytest.mark.parametrize("slc, host, mixed", [(True, False, 0.0), (False, False, 0.0),
                                              (False, True, 0.0), (True, False, 0.4)])
def test_a_read_width_mode_that_waits_for_its_data_in_is_programs(slc, host, mixed):
    # TLC behind an SLC cache: reads of four page types (40-95 µs), SLC-mode programs about
    # 160 µs, TLC pages 500/1300/3300. The SLC programs form a width mode of their own below
    # the TLC programs, which the widths take for a fourth read type; the gap before each of
    # its pulses shows a page's data in (a read waits for none). Without an SLC cache the same
    # slow read type (the upper pages, 160 µs) stays reads, also where half of those after a
    # program wait for the host as long as a page's transfer (and none after a read). Where
    # the mode holds reads too (``mixed``: 40 % of it, a read tail), most of it still waits but
    # too few to call it programs: its pulses are left open (reads in the value).
    rng = np.random.default_rng(7)
    centres = [40.0, 65.0, 95.0, 160.0, 500.0, 1300.0, 3300.0, 4200.0]
    states = [_State("read", c) for c in centres[:4]] + \
        [_State("program", c) for c in centres[4:7]] + [_State("erase", centres[7])]
    kinds = []
    for i in range(3000):
        kinds += [int(rng.integers(0, 4))] + ([int(rng.integers(0, 3))] if rng.random() < 0.5
                                              else [])
        kinds += [3] if rng.random() < 0.4 else [4 + i % 3]
        if i % 100 == 0:
            kinds += [7]
    kinds = np.array(kinds)
    programs_at = kinds >= 4
    if slc:
        programs_at |= (kinds == 3) & (rng.random(len(kinds)) >= mixed)
    is_read = ~programs_at & (kinds < 7)
    widths = np.array(centres)[kinds] * 2.0 ** rng.normal(0, 0.12, len(kinds))
    x = np.log2(widths)
    g = np.zeros((len(x), len(states)))
    g[np.arange(len(x)), kinds] = 1.0
    # Gaps: a command (1-20 µs), a read's data out before the next command, a program's data
    # in before its busy (a 8 KiB page at 100 MB/s: 82 µs).
    before = rng.uniform(1, 20, len(x)) + np.where(programs_at, 82.0, 0.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 82.0, 0.0)))
    if host:
        after_long = np.concatenate(([False], kinds[:-1] >= 4))
        before += np.where((kinds == 3) & after_long & (rng.random(len(x)) < 0.5), 82.0, 0.0)
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    out, _, to_programs, left_open = _reads_by_data_in(x, g, states, gap_after)
    n3 = int((kinds == 3).sum())
    if mixed:
        assert to_programs == 0.0 and left_open == pytest.approx(n3)
        assert out[kinds == 3, 3].sum() == pytest.approx(n3, rel=0.01)
        return
    assert left_open == 0.0
    if slc:
        assert to_programs == pytest.approx(n3, rel=0.03)
        assert out[kinds == 3][:, 4:7].sum() == pytest.approx(n3, rel=0.03)
        # The true reads stay reads (the slowest read type too).
        assert out[is_read][:, :4].sum() == pytest.approx(is_read.sum(), rel=0.01)
    else:
        assert to_programs == 0.0
        assert out[kinds == 3, 3].sum() == pytest.approx(n3, rel=0.01)


def _slc_among_reads(seed, tail_after_long, host_pause=0.0, slc_mode=True,
                     mode_after_long=None):
    """Pulses of a TLC drive behind an SLC cache (the tests below): reads of three page types
    (40-95 µs), a fourth width mode at 160 µs, TLC programs 500/1300/3300, erases 4200. After
    each read, 40 % of the time a pulse of the 160 µs mode; after each TLC program, a pulse of
    that mode ``tail_after_long`` of the time as a read tail (a read), up to
    ``mode_after_long`` (default: 0.1 more) the mode, else a read. With ``slc_mode`` the mode's
    other pulses are SLC programs (they wait for a page's data in), else reads of a slow page
    type. ``host_pause``: µs the host waits before every read after a read. Returns
    ``(x, g, states, gap_after, kinds, programs_at, tail)``."""
    rng = np.random.default_rng(seed)
    centres = [40.0, 65.0, 95.0, 160.0, 500.0, 1300.0, 3300.0, 4200.0]
    states = [_State("read", c) for c in centres[:4]] + \
        [_State("program", c) for c in centres[4:7]] + [_State("erase", centres[7])]
    kinds, tail = [], []
    for i in range(3000):
        kinds += [int(rng.integers(0, 3))]
        tail += [False]
        if rng.random() < 0.4:
            kinds += [3]
            tail += [False]
        kinds += [4 + i % 3]
        tail += [False]
        r = rng.random()
        mode = tail_after_long + 0.1 if mode_after_long is None else mode_after_long
        kinds += [3] if r < mode else [int(rng.integers(0, 3))]
        tail += [r < tail_after_long]
        if i % 100 == 0:
            kinds += [7]
            tail += [False]
    kinds, tail = np.array(kinds), np.array(tail)
    programs_at = (kinds >= 4) & (kinds < 7) | ((kinds == 3) & ~tail & slc_mode)
    is_read = ~programs_at & (kinds < 7)
    widths = np.array(centres)[kinds] * 2.0 ** rng.normal(0, 0.12, len(kinds))
    x = np.log2(widths)
    g = np.zeros((len(x), len(states)))
    g[np.arange(len(x)), kinds] = 1.0
    after_read = np.concatenate(([False], is_read[:-1]))
    before = rng.uniform(1, 20, len(x)) + np.where(programs_at, 82.0, 0.0) \
        + np.where(after_read, 82.0, 0.0) + np.where(after_read & is_read, host_pause, 0.0)
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    return x, g, states, gap_after, kinds, programs_at, tail


def test_a_read_width_slc_mode_diluted_by_a_read_tail_after_long_pulses_is_programs():
    # The SLC programs' width mode among the reads (160 µs) of the test above, but after the
    # long pulses a read tail as wide comes as often as they do there (retries after a
    # program): 99 % of the mode's gaps after reads wait for a page's data in, about 60 % after
    # long pulses. A read waits for the host, if ever, after a program, never after a read:
    # with both kinds seen, a majority after long pulses suffices. The mode is programs, and
    # the tail, judged one by one, goes back to the reads.
    x, g, states, gap_after, kinds, programs_at, tail = _slc_among_reads(
        8, 0.2, mode_after_long=0.5)
    slc = (kinds == 3) & ~tail
    after_long = np.concatenate(([False], (kinds[:-1] >= 4)))
    assert 0.5 < slc[(kinds == 3) & after_long].mean() < 0.7
    out, _, to_programs, left_open = _reads_by_data_in(x, g, states, gap_after)
    assert left_open == 0.0 and to_programs == pytest.approx(slc.sum(), rel=0.03)
    assert out[slc][:, 4:7].sum() == pytest.approx(slc.sum(), rel=0.01)
    assert out[tail][:, :4].sum() >= 0.95 * tail.sum()


def test_a_read_width_mode_that_waits_after_reads_where_the_reads_do_not_is_programs():
    # The SLC programs' mode among the reads, its pulses after long pulses mostly a read tail
    # (a publishing draw of tlc-slc-cache: 39 % of them waiting there, against 98 % after
    # reads, where the other reads wait 0 %). Short of DATA_IN_OPEN after long pulses, the
    # mode was left as reads and the SLC programs went uncounted (-28 %). The host paces every
    # read alike: a mode that waits after reads where the other reads do not is programs. The
    # tail, judged one by one, goes back to the reads.
    x, g, states, gap_after, kinds, programs_at, tail = _slc_among_reads(9, 0.3)
    slc = (kinds == 3) & ~tail
    after_long = np.concatenate(([False], (kinds[:-1] >= 4) & (kinds[:-1] < 7)))
    assert 0.2 < slc[(kinds == 3) & after_long].mean() < 0.45
    out, _, to_programs, left_open = _reads_by_data_in(x, g, states, gap_after)
    assert left_open == 0.0 and to_programs == pytest.approx(slc.sum(), rel=0.03)
    assert out[slc][:, 4:7].sum() == pytest.approx(slc.sum(), rel=0.01)
    assert out[tail][:, :4].sum() >= 0.95 * tail.sum()


@pytest.mark.parametrize("host_pause", [0.0, 120.0])
def test_a_slow_read_type_stays_reads_also_where_the_host_paces_every_read(host_pause):
    # The same pulses with the 160 µs mode a slow read page type: it waits after reads only
    # where the host pauses before every read after a read (``host_pause``: the other reads
    # wait too, so no contrast), and the rule leaves it reads.
    x, g, states, gap_after, kinds, programs_at, tail = _slc_among_reads(9, 0.3, host_pause,
                                                                         slc_mode=False)
    out, _, to_programs, left_open = _reads_by_data_in(x, g, states, gap_after)
    n3 = int((kinds == 3).sum())
    assert to_programs == 0.0 and left_open == 0.0
    assert out[kinds == 3, 3].sum() == pytest.approx(n3, rel=0.01)


@pytest.mark.parametrize("case", ["reads", "programs", "cache", "mixed"])
def test_a_program_width_mode_that_waits_for_no_data_in_is_reads(case):
    # The mirror: TLC behind an SLC cache, with a datasheet tR max (180 µs) above the SLC
    # programs' widths, so the widths split the reads below their two slower types (82 and
    # 104 µs, one cluster about 95) and call that cluster a program mode, beside the SLC
    # programs (155 µs) and the TLC pages (480/1300/3000). The gap before each of its pulses
    # shows no data in, while the SLC programs' do: reads. Where that cluster's pulses do wait
    # (programs), or where the next slower mode waits for none either (cache programs, whose
    # data in overlaps the busy before), nothing moves. Nor where a quarter of the cluster's
    # pulses wait (SLC programs among slow reads: a trained SLC state on a slower die), more
    # than 82 µs transfers against 1-20 µs of command time can explain.
    rng = np.random.default_rng(5)
    centres = [35.0, 56.0, 95.0, 155.0, 480.0, 1300.0, 3000.0, 4200.0]
    states = [_State("read", c) for c in centres[:2]] + \
        [_State("program_slc", c) for c in centres[2:4]] + \
        [_State("program", c) for c in centres[4:7]] + [_State("erase", centres[7])]
    kinds = []
    for i in range(3000):
        kinds += [int(rng.integers(0, 3))] + ([int(rng.integers(0, 3))] if rng.random() < 0.5
                                              else [])
        kinds += [3] if rng.random() < 0.4 else [4 + i % 3]
        if i % 100 == 0:
            kinds += [7]
    kinds = np.array(kinds)
    waits = (kinds >= 3) & (kinds < 7)
    if case == "programs":
        waits |= kinds == 2
    mixed = (kinds == 2) & (rng.random(len(kinds)) < 0.25) if case == "mixed" else kinds < 0
    waits |= mixed
    if case == "cache":
        waits &= kinds != 3
    is_read = (kinds < 2) | ((kinds == 2) & (case != "programs") & ~mixed)
    widths = np.array(centres)[kinds] * 2.0 ** rng.normal(0, 0.12, len(kinds))
    x = np.log2(widths)
    g = np.zeros((len(x), len(states)))
    g[np.arange(len(x)), kinds] = 1.0
    # Gaps: a command (1-20 µs), a read's data out before the next command, a program's data
    # in before its busy (82 µs).
    before = rng.uniform(1, 20, len(x)) + np.where(waits, 82.0, 0.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 82.0, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    out, alone, moved = _modes_alone(x, g, states, gap_after)
    n2, n3 = int((kinds == 2).sum()), int((kinds == 3).sum())
    assert alone == ([2] if case == "reads" else [])
    if case == "reads":
        assert moved == pytest.approx(n2, rel=0.02)
        assert out[kinds == 2][:, :2].sum() == pytest.approx(n2, rel=0.02)
        assert out[kinds == 3][:, 3:7].sum() == pytest.approx(n3, rel=0.01)
    else:
        assert abs(moved) <= 0.01 * n2
        assert out[kinds == 2][:, 2:7].sum() == pytest.approx(n2, rel=0.01)
    if case == "mixed":
        return  # (its reads stay a program mode: the per-pulse rules are the next tests')
    # The data-in rule then judges the SLC programs' window with that mode left out: no
    # program goes back to the reads.
    out2, back, _, _ = _reads_by_data_in(x, out, states, gap_after, skip=alone)
    assert out2[waits][:, 2:7].sum() == pytest.approx(waits.sum(), rel=0.01)


@pytest.mark.parametrize("case", ["transfers", "no transfers", "one side"])
def test_upper_pages_as_slow_as_erases_are_told_by_their_data_in(case):
    # MLC with a heavy upper-page tail: reads about 40 µs, lower pages 300, upper pages 1300
    # with a tenth of them 1900-2600 µs, erases 2100-3100. The widths give the tail to the
    # erases. An erase is a command alone, a program waits for its page's data in (a 4 KiB
    # page at 100 MB/s: 41 µs): the gap before each tells (after a read and after a long
    # pulse, each judged by the line's own reads and programs there). Where no transfer shows
    # in the gaps (data moved while the array is busy, cache reads and programs) the rule
    # stands down; so it does where the erases (after a program) cannot be judged (no program
    # follows a long pulse to learn that gap from): the upper pages' tail alone (after reads)
    # would go back to the programs, and the erase cap's count had cancelled both.
    rng = np.random.default_rng(11)
    states = [_State("read", 40), _State("program", 300), _State("program", 1300, 0.2),
              _State("erase", 2600)]
    kinds = []
    for i in range(3000):
        kinds += [0] + ([0] if rng.random() < 0.5 else []) + [1 if i % 2 else 2]
        if case != "one side" and rng.random() < 0.3:
            kinds += [2 if i % 2 else 1]  # a host page after a GC copy
        if i % 40 == 39:
            kinds += [3]  # a block's GC ends with its erase, right after a program
    kinds = np.array(kinds)
    widths = np.array([40.0, 300.0, 1300.0, 2600.0])[kinds] * 2.0 ** rng.normal(0, 0.12,
                                                                              len(kinds))
    tail = (kinds == 2) & (rng.random(len(kinds)) < 0.1)
    widths[tail] = rng.uniform(1900, 2600, int(tail.sum()))
    widths[kinds == 3] = rng.uniform(2100, 3100, int((kinds == 3).sum()))
    x = np.log2(widths)
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), np.argmin(np.abs(x[:, None] - [st.mu for st in states]), axis=1)] = 1.0
    is_read, is_program = kinds == 0, (kinds == 1) | (kinds == 2)
    page = 0.0 if case == "no transfers" else 41.0
    before = rng.uniform(1, 20, len(x)) + np.where(is_program, page, 0.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], page, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    erases = int((kinds == 3).sum())
    assert g[:, 3].sum() > erases + 0.5 * tail.sum()  # the widths' reading
    out, moved = _erases_by_data_in(x, g, states, gap_after)
    if case != "transfers":
        assert moved == 0.0 and out[:, 3].sum() == g[:, 3].sum()
    else:
        assert out[:, 3].sum() == pytest.approx(erases, rel=0.03)
        assert out[is_program][:, 1:3].sum() == pytest.approx(is_program.sum(), rel=0.002)
        assert moved == pytest.approx(g[:, 3].sum() - erases, rel=0.05)


@pytest.mark.parametrize("apart", [True, False])
def test_a_chain_s_last_program_keeps_its_width_where_programs_and_erases_lie_apart(apart):
    # An SLC die (a tuning draw, -3.5 %): programs about 280 µs, a back-to-back cache chain's
    # last program two programs long (550 µs), erases 1 650 µs, 1.6 octaves above. After a
    # cache program the last one waits only for its page's data in (10 µs at 400 MB/s), so
    # its gap is as short as an erase's command alone after a long pulse (1-20 µs of
    # firmware): judged by the gap alone, a third of the chains' ends became erases. Where the
    # two states' widths lie apart the widths keep their say: the gap only multiplies their
    # odds. Where they overlap (upper pages as slow as erases), the gap alone still judges.
    rng = np.random.default_rng(7)
    centres = [22.0, 280.0, 550.0, 1650.0 if apart else 700.0]
    kinds = []
    for i in range(2400):
        kinds += [0, 1]  # a garbage-collection copy: read, program
        if i % 6 == 5:
            kinds += [1, 1, 2]  # a cache chain: its programs, then the last one
        if i % 60 == 59:
            kinds += [3]  # a block's erase
    kinds = np.array(kinds)
    sd = np.array([0.15, 0.12, 0.1, 0.12])[kinds]
    x = np.log2(np.array(centres)[kinds]) + rng.normal(0, 1, len(kinds)) * sd
    grid = _Grid(float(x.min()) - 1, float(x.max()) + 1)
    states = [State(n, k, math.log2(c), s_, support=(math.log2(c) - 1.5, math.log2(c) + 1.5))
              for n, k, c, s_ in zip(("read", "program_1", "program_2", "erase"),
                                     ("read", "program", "program", "erase"), centres,
                                     (0.15, 0.12, 0.1, 0.12), strict=True)]
    for st in states:
        st.seed(grid)
    overlap = float(np.sqrt(states[2].dens * states[3].dens).sum())
    assert (overlap < ERASE_WIDTHS_APART) == apart
    # The widths' posteriors (each pulse to its nearest state: the states lie apart).
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), np.argmin(np.abs(x[:, None] - [st.mu for st in states]), axis=1)] = 1
    if not apart:
        g = np.zeros((len(x), 4))
        g[np.arange(len(x)), kinds] = 1.0
        g[kinds == 2] = [0, 0, 0.5, 0.5]  # overlapping widths: the widths cannot tell
        g[kinds == 3] = [0, 0, 0.5, 0.5]
    # The gap before each pulse: a command (8 ± 3 µs of firmware), plus a page's data in
    # (10 µs) before a program, plus a page's data out after a read.
    is_read = kinds == 0
    before = np.clip(rng.normal(8, 3, len(x)), 1, None) \
        + np.where((kinds == 1) | (kinds == 2), 10.0, 0.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 10.0, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    erases, ends = int((kinds == 3).sum()), int((kinds == 2).sum())
    out, moved = _erases_by_data_in(x, g, states, gap_after)
    if apart:
        # (By the gap alone, about 3 of the 400 ends became erases here: 7 % too many.)
        assert out[:, 3].sum() == pytest.approx(erases, abs=0.5)
        assert out[kinds == 2][:, 1:3].sum() == pytest.approx(ends, abs=0.5)
        assert abs(moved) < 0.5
    else:
        # The gap alone: most ends go back to the programs, most erases stay erases.
        assert out[kinds == 2][:, 1:3].sum() > 0.7 * ends
        assert out[kinds == 3][:, 3].sum() > 0.6 * erases


def _widths(rng, spec):
    """log2 µs widths: ``spec`` of (centre µs, spread octaves, count)."""
    return np.concatenate([rng.normal(math.log2(c), sd, n) for c, sd, n in spec])


def test_erases_of_dies_that_differ_are_one_erase_cluster_not_a_program_mode():
    # A two-pass QLC drive at L0 (a tuning draw, -34 %, its interval missing the truth): the
    # foggy and fine programs (1.6 and 2.8 ms, ~350 each) and 15 erases whose tBERS differs
    # between dies (8 near 5.7 ms, 7 near 8.1 ms: two small peaks an octave apart). Only the
    # slowest was the erase; the other took a program mode's place, and the foggy programs
    # became SLC-mode programs (one page each). Both small peaks are the erases the programs
    # imply (2 × 700 × 2 pages ÷ 96 pages per block = 29): the erase state, two page modes.
    from rbscope.analysis.sequence import SEQUENCE_HINTS, _initial_states
    rng = np.random.default_rng(3)
    x = _widths(rng, [(0.8, 0.2, 2500), (95, 0.25, 4000), (1650, 0.15, 340),
                      (2770, 0.15, 360), (5680, 0.08, 8), (8120, 0.08, 7)])
    hints = {k: v for k, v in SEQUENCE_HINTS.items() if k not in ("program", "erase")}
    states = _initial_states(x, hints, None, scheme="two-pass", bits=4, pages_per_block=96)
    progs = [s for s in states if s.kind in ("program", "program_slc")]
    assert [s.kind for s in progs] == ["program", "program"]
    assert [s.pages for s in progs] == [2, 2]
    assert [s.mu for s in progs] == pytest.approx(np.log2([1650, 2770]), abs=0.15)
    erase = next(s for s in states if s.kind == "erase")
    assert erase.support[0] <= math.log2(5000) and erase.support[1] >= math.log2(9000)
    # Without pages_per_block the programs imply no erase count: a small peak an octave below
    # the erases is left a mode (the rule does not guess).
    states = _initial_states(x, hints, None, scheme="two-pass", bits=4)
    assert sum(s.kind in ("program", "program_slc") for s in states) == 3


def test_a_rare_fast_cluster_does_not_make_the_erases_a_program_mode():
    # Another tuning draw (-22 %, interval missing): 15 pulses near 230 µs (a read tail) beside
    # ~650 foggy and fine programs and 30 erases near 6.9 ms. The erases were judged small
    # only beside the smallest mode (the 15): they became a program mode. Beside the median
    # mode they are small: the erase state.
    from rbscope.analysis.sequence import SEQUENCE_HINTS, _initial_states
    rng = np.random.default_rng(4)
    x = _widths(rng, [(0.8, 0.3, 4000), (90, 0.25, 8000), (234, 0.05, 15), (1640, 0.15, 620),
                      (3560, 0.15, 670), (6870, 0.12, 30)])
    hints = {k: v for k, v in SEQUENCE_HINTS.items() if k not in ("program", "erase")}
    states = _initial_states(x, hints, None, scheme="two-pass", bits=4, pages_per_block=96)
    main = [s for s in states if s.kind == "program"]
    assert [s.mu for s in main] == pytest.approx(np.log2([1640, 3560]), abs=0.15)
    assert all(s.pages == 2 for s in main)
    erase = next(s for s in states if s.kind == "erase")
    assert erase.support[0] <= math.log2(6870) <= erase.support[1]


def test_at_l1_the_split_keeps_a_read_tail_that_ends_below_tr_max():
    # QLC, tR max 220 µs (L1): the upper-page reads end near 160 µs on a slow die, a thin tail
    # beyond, nothing else between them and tR max. The emptiest place below tR max is at tR
    # max itself; it was refused as "an edge" and the split fell back to 100-150 µs, cutting
    # the reads' tail off as a 155 µs SLC-mode program mode (a tuning draw: +4.9 %). The split
    # is at tR max now.
    from rbscope.analysis.sequence import SEQUENCE_HINTS, _initial_states, timing_hints
    rng = np.random.default_rng(5)
    reads = np.log2(np.concatenate([rng.uniform(60, 115, 4000), rng.uniform(95, 158, 1200),
                                    158 * 2 ** rng.exponential(0.1, 60)]))
    x = np.concatenate([reads, _widths(rng, [(0.8, 0.3, 6000), (1680, 0.2, 340),
                                             (3070, 0.2, 360), (6000, 0.1, 15)])])
    hints = {k: v for k, v in SEQUENCE_HINTS.items() if k not in ("program", "erase")}
    hints.update(timing_hints({"read": (220.0, 220.0), "program": (7000.0, 7000.0),
                               "erase": (16000.0, 16000.0)}))
    states = _initial_states(x, hints, None, scheme="two-pass", bits=4, pages_per_block=96,
                             read_max=220.0)
    assert not any(s.kind == "program_slc" for s in states)
    progs = [s for s in states if s.kind == "program"]
    assert [s.mu for s in progs] == pytest.approx(np.log2([1680, 3070]), abs=0.15)
    assert min(s.support[0] for s in progs) > math.log2(158)


def test_at_l1_the_split_stays_off_tr_max_where_slc_programs_reach_it():
    # A TLC drive behind an SLC cache, tR max 320 µs (L1): the SLC-mode programs (~185 µs) have
    # a tail that reaches tR max, flat below it. The emptiest place below tR max is its edge
    # again, but more than 2 % of the widths there reach it: not the reads' end. The split falls
    # back below the SLC programs (a tuning draw: at tR max, +0.22 % decided became +1.01 %
    # undetermined).
    from rbscope.analysis.sequence import SEQUENCE_HINTS, _initial_states, timing_hints
    rng = np.random.default_rng(6)
    slc = np.concatenate([rng.normal(math.log2(185), 0.2, 2400),
                          np.log2(rng.uniform(210, 330, 150))])
    x = np.concatenate([slc, _widths(rng, [(0.8, 0.3, 3000), (39, 0.2, 3000), (74, 0.2, 3000),
                                           (120, 0.15, 2500), (610, 0.2, 700),
                                           (1450, 0.15, 700), (2870, 0.15, 700),
                                           (3900, 0.1, 40)])])
    hints = {k: v for k, v in SEQUENCE_HINTS.items() if k not in ("program", "erase")}
    hints.update(timing_hints({"read": (320.0, 320.0), "program": (4000.0, 4000.0),
                               "erase": (6000.0, 6000.0)}))
    states = _initial_states(x, hints, None, scheme="page", bits=3, pages_per_block=96,
                             read_max=320.0)
    progs = [s for s in states if s.kind in ("program", "program_slc")]
    assert min(s.support[0] for s in progs) < math.log2(180)
    assert any(s.kind == "program_slc" and s.mu < math.log2(320) for s in states)



class _Kind:
    def __init__(self, kind):
        self.kind = kind


#: States of the order tests below: tDBSY, read, SLC-mode program, two page types; and the
#: posterior row of each letter of a pulse text (m, r, s, P, Q).
_STATES = [_Kind("multiplane"), _Kind("read"), _Kind("program_slc"), _Kind("program"),
           _Kind("program")]
_ROWS = {"m": [1, 0, 0, 0, 0], "r": [0, 1, 0, 0, 0], "s": [0, 0, 1, 0, 0],
         "P": [0, 0, 0, 1, 0], "Q": [0, 0, 0, 0, 1]}


def test_modes_no_tdbsy_announces_on_a_multi_plane_drive():
    from rbscope.analysis.sequence import _modes_unannounced

    states, rows = _STATES, _ROWS

    def g(text):
        return np.array([rows[c] for c in text], dtype=float)
    # Every program after a tDBSY, the "SLC" mode after reads: none of its 60 announced.
    seq = "rrsmPrrsmQ" * 30
    assert _modes_unannounced(g(seq), states, [0]) == [(2, 60.0, 0.0)]
    # SLC-mode programs queued like the others: every one announced.
    assert _modes_unannounced(g("rrmsmPrrmsmQ" * 30), states, [0]) == [(2, 60.0, 60.0)]
    # A single-plane drive (no program follows a tDBSY): nothing to judge by.
    assert _modes_unannounced(g("rrsPrrsQ" * 30), states, [0]) == []


def test_a_read_tail_is_judged_over_every_line_together():
    # A two-pass QLC tuning draw (qlc-two-pass seed 212): 33 pulses of the reads' tail at
    # 240 µs, 16 and 17 on its two dies, made an SLC-mode program state on a drive without an
    # SLC cache (+1.9 %). Line by line neither die held the 20 pulses a judgement needs.
    from rbscope.analysis.sequence import _reads_cut

    states, rows = _STATES, _ROWS

    def lines(*texts):
        seqs = [np.array([rows[c] for c in t], dtype=float) for t in texts]
        return list(range(len(seqs))), seqs, lambda g: g

    tail = lines("rrmPrrmQ" * 30 + "rs" * 16, "rrmPrrmQ" * 30 + "rs" * 17)
    assert _reads_cut(*tail, states, [0]) == [2]
    # Three pulses, none announced: a queued mode shows that with a chance of 0.8 %, too
    # likely to call them reads; on two lines, six (a chance of 6e-5): the reads' tail.
    few = "rrmPrrmQ" * 30 + "rs" * 3
    assert _reads_cut(*lines(few), states, [0]) == []
    assert _reads_cut(*lines(few, few), states, [0]) == [2]
    # Queued SLC-mode programs on one line and the tail on the other: 16 of 33 announced.
    mixed = lines("rrmPrrmQ" * 30 + "rms" * 16, "rrmPrrmQ" * 30 + "rs" * 17)
    assert _reads_cut(*mixed, states, [0]) == []
    # The tail on a line whose programs follow no tDBSY (single-plane) is not judged there.
    assert _reads_cut(*lines("rrPrrQ" * 30 + "rs" * 16, few), states, [0]) == []


def test_binomial_tail():
    from rbscope.analysis.sequence import _binomial_tail

    assert _binomial_tail(0, 8, 0.8) == pytest.approx(0.2 ** 8)
    assert _binomial_tail(1, 2, 0.5) == pytest.approx(0.75)
    assert _binomial_tail(2.7, 3.4, 0.8) == pytest.approx(1 - 0.8 ** 3)  # (floored, rounded)
    assert _binomial_tail(5, 5, 0.3) == pytest.approx(1.0)


def test_the_gaps_do_not_judge_more_erases_than_the_programs_leave_room_for():
    # An MLC draw at L0 (publishing seed 1173 of mlc-easy, -1.67 %): 4 KiB pages at 400 MB/s
    # (10 µs of data in) and command times of 1-20 µs. After a long pulse a read and an erase
    # wait 1-20 µs, a program 11-30: the groups passed the separation test, a read's tail
    # reached into the programs' gaps, and the gaps gave a die 41 erases for its 21 where the
    # programs leave room for 28 (the structural cap). A reading of the gaps above the cap,
    # where the widths' was below it, is not applied: the widths' reading stands. Here the
    # widths undercount the erases (a tenth of each erase's posterior), the gaps find them all,
    # and a cap between the two readings stops the gaps' (the rule cannot know which is
    # right: the cap is a bound on what the pulses can mean).
    rng = np.random.default_rng(5)
    states = [_State("read", 40), _State("program", 300), _State("program", 1700, 0.2),
              _State("erase", 2400)]
    kinds = []
    for i in range(1500):
        kinds += [0] + ([0] if i % 3 == 0 else []) + [1 if i % 2 else 2]  # host reads, GC copies
        if i % 5 == 4:
            kinds += [1 if i % 2 else 2]  # a program after a program: its gap is data in only
        if i % 50 == 49:
            kinds += [3]
    kinds = np.array(kinds)
    widths = np.array([40.0, 300.0, 1700.0, 2400.0])[kinds] * 2.0 ** rng.normal(0, 0.15,
                                                                              len(kinds))
    x = np.log2(widths)
    g = np.zeros((len(x), 4))
    g[np.arange(len(x)), kinds] = 1.0
    g[kinds == 2] = [0, 0, 0.99, 0.01]
    g[kinds == 3] = [0, 0, 0.9, 0.1]
    is_read = kinds == 0
    before = np.clip(rng.normal(10, 3.5, len(x)), 1, 20) \
        + np.where((kinds == 1) | (kinds == 2), 10.0, 0.0) \
        + np.concatenate(([0.0], np.where(is_read[:-1], 10.0, 0.0)))
    gap_after = np.log2(np.concatenate((before[1:], [np.nan])))
    erases = int((kinds == 3).sum())
    widths_erases = float(g[:, 3].sum())
    free, _ = _erases_by_data_in(x, g, states, gap_after)
    judged = float(free[:, 3].sum())
    assert widths_erases < 0.5 * erases and judged == pytest.approx(erases, rel=0.15)
    # A cap between the widths' reading and the gaps': the widths' stands, nothing moved.
    out, moved = _erases_by_data_in(x, g, states, gap_after,
                                    cap=0.5 * (widths_erases + judged))
    assert moved == 0.0 and np.array_equal(out, g)
    # A cap the gaps' reading keeps under: it stands.
    out, moved = _erases_by_data_in(x, g, states, gap_after, cap=judged + 1)
    assert out[:, 3].sum() == pytest.approx(judged) and moved < 0


def test_programs_past_the_tprog_maximum_reach_the_empty_stretch_before_the_erases():
    # Pulses of an SLC drive with cache chains: programs 220-440 µs, 2 % of them chain ends
    # up to 730 µs, erases 1 500-3 000 µs; tPROG max 500 µs given (the bound with its spare:
    # 0.2 octaves above). The bound moves into the empty stretch, an octave past it at most;
    # where the programs' tail runs into the erases, or the pulses past the bound lie more
    # than an octave above it, it stays.
    rng = np.random.default_rng(3)
    progs = rng.uniform(np.log2(220), np.log2(440), 3000)
    ends = rng.uniform(np.log2(605), np.log2(730), 60)
    erases = rng.uniform(np.log2(1500), np.log2(3000), 200)
    phi = np.log2(500) + 0.2
    peaks = [(float(np.median(erases)), 0.2, erases.size)]
    x = np.concatenate([progs, ends, erases])
    bound = _programs_past_max(x, phi, peaks)
    assert np.log2(730) < bound < np.log2(1500) and bound <= phi + 1.0
    # No chain ends: nothing past the bound below the erases.
    assert _programs_past_max(np.concatenate([progs, erases]), phi, peaks) == phi
    # A tail that runs into the erases: no empty stretch.
    tail = rng.uniform(np.log2(575), np.log2(1500), 400)
    assert _programs_past_max(np.concatenate([x, tail]), phi, peaks) == phi
    # Pulses past the bound by more than an octave (1 300-1 400 µs against a bound of 574):
    # not a program waiting for the one before it.
    far = rng.uniform(np.log2(1300), np.log2(1400), 60)
    erases_hi = rng.uniform(np.log2(3000), np.log2(5000), 200)
    assert _programs_past_max(np.concatenate([progs, far, erases_hi]), phi,
                              [(float(np.median(erases_hi)), 0.2, 200)]) == phi
    # No erase cluster above: nothing to part them from.
    assert _programs_past_max(x, phi, []) == phi


def test_an_open_gap_is_read_by_no_rule():
    """The idle time before a summarised run's last pulse spans the pulses summarised: with
    the gap marked open (``open_gaps``) nothing the classifier finds depends on it; read as a
    gap, a long one after a short pulse is a host-paced cache program's silence (a tuning
    capture of the ULX3S at 56 lines counted 16 programs so, +1.1 %)."""
    from rbscope.analysis.sequence import classify

    from . import wa_drives as W

    d = W.generate(W.family("mlc-hostpaced-50r", blocks=8, transfer_us=20.0, starts=True), 3)
    m = d.measurement
    pulses = {ch: np.asarray(w, dtype=np.int64) for ch, w in m.pulses.items()}
    starts = {ch: np.asarray(s, dtype=np.int64) for ch, s in m.pulse_starts.items()}
    # Every 20th pulse after a pulse under 40 µs waits 1.5 ms longer, as if reads between had
    # been summarised.
    us = round(1e-6 / m.tick_seconds)
    later, opened = {}, {}
    for ch, w in pulses.items():
        at = np.flatnonzero(w[:-1] < 40 * us)[::20] + 1
        shift = np.zeros(len(w), dtype=np.int64)
        shift[at] = 1500 * us
        later[ch] = starts[ch] + np.cumsum(shift)
        opened[ch] = at
    assert sum(len(a) for a in opened.values()) > 100

    def units(**kw):
        r = classify(pulses, m.tick_seconds, pages_per_block=128, **kw)
        return {k: round(die.units, 6) for k, die in r.dies.items()}

    plain = units(starts=starts, open_gaps=opened)
    assert units(starts=later, open_gaps=opened) == plain
    # Read as gaps, the silences are programs.
    moved = units(starts=later)
    assert sum(moved.values()) > sum(plain.values()) + 20

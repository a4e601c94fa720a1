"""The WA engine: hand-computed cases on the paper's drives, Mp, intervals vs brute force."""

import itertools
import json

import pytest

from rbscope.analysis.geometry import Geometry, load_geometry
from rbscope.analysis.logical import LogicalVolume, from_bytes
from rbscope.analysis.measurement import Measurement, MeasurementError, Probe, SeriesPoint
from rbscope.analysis.wa import Interval, WAError, compute_wa, decide_mp, wa_series
from rbscope.gateware.rb_sniffer.model import ChannelCounts, SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

NAMES = ("cache", "read", "program", "erase")
WINDOWS = ((3, 12), (12, 120), (120, 2400), (2400, 5000))
GiB = 1 << 30


def measurement(programs, partial=None, dropped=None, probes=None, reads=None, **kw):
    n = len(programs)
    params = SnifferParams(channels=n)
    counts = []
    for i, p in enumerate(programs):
        c = ChannelCounts.zeros(params)
        c.classes[2] = p
        c.classes[1] = reads[i] if reads else 0
        c.partial = partial[i] if partial else 0
        c.dropped = dropped[i] if dropped else 0
        counts.append(c)
    config = SnifferConfig(prescaler=1, glitch_ticks=2, windows=WINDOWS, idle_ticks=100)
    return Measurement(params, config, 1e-6, counts, NAMES,
                       probes=probes or [], quiet_ticks=kw.pop("quiet_ticks", 10**6), **kw)


def test_ssd_v_one_die_sequential_2gib_is_wa_1():
    # Paper eq. 5-7: 2 GiB in 4 KiB pages over 4 dies (Mp = 1) = 131072 programs per die.
    g = load_geometry("ssd-v")
    r = compute_wa(measurement([131072]), g, from_bytes(2 * GiB))
    assert r.wa.value == r.wa.lo == r.wa.hi == 1.0
    assert r.physical_bytes.value == 2 * GiB
    assert r.dies == 4 and r.dies_probed == 1 and r.mp == 1
    assert any("1 of 4 dies probed" in w for w in r.warnings)


def test_ssd_m_multi_plane_mp2_and_mp_decision():
    g = load_geometry("ssd-m")  # 16 dies, Mp 2
    m = measurement([16384, 16384 + 1638])  # two dies probed
    r = compute_wa(m, g, from_bytes(2 * GiB))
    # N = (16384 + 18022) × 16 / 2 = 275248 pulses × 2 pages × 4096 B.
    assert r.program_pulses.value == 275248
    assert r.wa.value == pytest.approx(275248 * 2 * 4096 / (2 * GiB))
    assert dict(r.per_die) == pytest.approx({"ch0": 1.0, "ch1": 18022 * 16 * 8192 / (2 * GiB)})
    # The paper's calibration: with Mp = 1 the sequential write shows WA ≈ 0.5 -> Mp = 2.
    r1 = compute_wa(measurement([16384] * 2), g, from_bytes(2 * GiB), mp=1)
    assert r1.wa.value == 0.5
    d = decide_mp(r1.wa, candidates=(1, 2))
    assert (d.mp, d.status, d.implied) == (2, "decided", 2.0)


def test_ssd_s_and_ssd_i_by_hand():
    s = load_geometry("ssd-s")  # 4×2×2 = 16 dies, Mp 2, 4 KiB
    r = compute_wa(measurement([1000] * 16, probes=[Probe(f"d{i}", (loc,)) for i, loc in
                                                   enumerate(s.die_locations())]),
                   s, from_bytes(100 * 10**6))
    assert r.wa.value == pytest.approx(16 * 1000 * 2 * 4096 / 1e8)
    assert not any("probed" in w for w in r.warnings)  # every die is probed
    i = load_geometry("ssd-i")  # 10 dies, Mp 1
    r = compute_wa(measurement([5000, 7000]), i, from_bytes(10**8))
    assert r.wa.value == pytest.approx((5000 + 7000) / 2 * 10 * 4096 / 1e8)
    assert r.spread == pytest.approx((5000 * 10 * 4096 / 1e8, 7000 * 10 * 4096 / 1e8))


def test_wired_or_line_counts_its_dies():
    g = load_geometry("ssd-s")
    m = measurement([800], probes=[Probe("ce0", ((0, 0, 0), (0, 0, 1)))])
    r = compute_wa(m, g, from_bytes(10**7))
    assert r.dies_probed == 2
    assert r.program_pulses.value == 800 * 16 / 2
    assert any("wired-OR" in w for w in r.warnings)


@pytest.mark.parametrize("programs, partial, dropped, lv", [
    ([10, 12], [1, 0], [0, 2], LogicalVolume(40_000, 41_000)),
    ([7], [2], [1], LogicalVolume(1, 90_000)),
    ([3, 4, 5], [0, 1, 1], [1, 0, 0], LogicalVolume(50_000, 50_000)),
])
def test_interval_equals_brute_force(programs, partial, dropped, lv):
    # Every pulse of unknown width (partial, dropped) may or may not be a program, and the
    # logical volume may be anywhere in its interval: the engine's bounds must be the extreme
    # WA over every such resolution.
    g = Geometry("t", channels=2, chips_per_channel=2, dies_per_chip=1, planes_per_die=2,
                 page_size=2048, program_model="multi-plane")
    r = compute_wa(measurement(programs, partial, dropped), g, lv)
    unknowns = [(ch, k) for ch in range(len(programs))
                for k in range(partial[ch] + dropped[ch])]
    values = []
    for choice in itertools.product((0, 1), repeat=len(unknowns)):
        extra = [0] * len(programs)
        for (ch, _), bit in zip(unknowns, choice, strict=True):
            extra[ch] += bit
        total = sum(p + e for p, e in zip(programs, extra, strict=True))
        phys = total * g.dies / len(programs) * 2 * 2048
        values += [phys / lv.lo, phys / lv.hi]
    assert r.wa.lo == pytest.approx(min(values))
    assert r.wa.hi == pytest.approx(max(values))
    assert r.wa.lo <= r.wa.value <= r.wa.hi


def test_interval_holds_truth_on_a_simulated_train():
    # Programs of 1000 cycles; channel 0 is already programming at reset, so its first program
    # is partial. The model counts; the true number of programs must lie in the interval.
    trains = []
    true = 0
    for ch in range(2):
        edges = []
        t = 500 if ch == 0 else 100
        initial = 0 if ch == 0 else 1
        if ch == 0:
            edges.append((t, 1))
            true += 1
        for _ in range(20):
            t += 300
            edges += [(t, 0), (t + 1000, 1)]
            t += 1000
            true += 1
        trains.append(Train(initial, edges))
    params = SnifferParams(channels=2)
    config = SnifferConfig(prescaler=1, glitch_ticks=2, windows=WINDOWS, idle_ticks=100)
    result = SnifferModel(params, config).run(trains, t + 500)
    m = Measurement(params, config, 1e-6, result.channels, NAMES)
    g = Geometry("t", 2, 1, 1, 1, 4096)
    r = compute_wa(m, g, from_bytes(true * 4096))
    assert r.program_pulses.lo <= true <= r.program_pulses.hi
    assert r.program_pulses.value == true - 1 and r.program_pulses.hi == true
    assert r.wa.lo <= 1.0 <= r.wa.hi


@pytest.mark.parametrize("wa1, expected", [
    (1.03, 1), (0.98, 1), (0.51, 2), (0.26, 4), (Interval(0.5, 0.45, 0.56), 2)])
def test_decide_mp_decided(wa1, expected):
    d = decide_mp(wa1)
    assert d.status == "decided" and d.mp == expected


@pytest.mark.parametrize("wa1, reason", [
    (0.75, "within 20% of no 1/Mp"),
    (1.6, "within 20% of no 1/Mp"),
    (Interval(0.55, 0.4, 0.9), "also meets Mp = \\[1\\]"),
])
def test_decide_mp_ambiguous(wa1, reason):
    d = decide_mp(wa1)
    assert d.mp is None and d.status == "ambiguous"
    assert pytest.approx(1 / (wa1 if isinstance(wa1, float) else wa1.value)) == d.implied
    import re
    assert re.search(reason, d.reason)


def test_errors_name_the_problem():
    g = load_geometry("ssd-v")
    with pytest.raises(WAError, match="logical volume is 0 bytes"):
        compute_wa(measurement([1]), g, from_bytes(0))
    with pytest.raises(WAError, match="no class window is named 'prog'"):
        compute_wa(measurement([1]), g, from_bytes(1), program_class="prog")
    with pytest.raises(WAError, match="5 dies are probed but SSD-v has only 4"):
        compute_wa(measurement([1] * 5), g, from_bytes(1))
    with pytest.raises(WAError, match=r"die \(0, 0, 0\) is watched by two probes"):
        compute_wa(measurement([1, 1], probes=[Probe("a", ((0, 0, 0),)),
                                               Probe("b", ((0, 0, 0),))]), g, from_bytes(1))
    with pytest.raises(WAError, match=r"probe 'a': die \(9, 0, 0\) is not in SSD-v"):
        compute_wa(measurement([1], probes=[Probe("a", ((9, 0, 0),))]), g, from_bytes(1))
    with pytest.raises(WAError, match="mp must be a positive integer"):
        compute_wa(measurement([1]), g, from_bytes(1), mp=0)


def test_warnings_for_unfinished_and_overlapping():
    g = load_geometry("ssd-v")  # erase 2000 µs; program window here [120, 2400) µs
    m = measurement([10], partial=[1], dropped=[2], quiet_ticks=5, may_drop=True)
    text = "\n".join(compute_wa(m, g, from_bytes(4096)).warnings)
    for needle in ("ready for only", "partial", "dropped by the device", "could have dropped",
                   "overlaps the erase time"):
        assert needle in text


def test_overlap_correction_widens_interval():
    g = Geometry("t", 1, 1, 1, 1, 4096)
    r = compute_wa(measurement([100]), g, from_bytes(4096 * 100), correction={0: 95.0})
    assert r.wa.value == pytest.approx(0.95)
    assert (r.wa.lo, r.wa.hi) == (pytest.approx(0.95), pytest.approx(1.0))


def test_series_and_json():
    m = measurement([300])
    params = m.params

    def snap(ts, n):
        c = ChannelCounts.zeros(params)
        c.classes[2] = n
        c.histogram = []
        return SeriesPoint(ts, [c])

    m.snapshots = [snap(1_000_000, 100), snap(2_000_000, 250)]
    m.duration_ticks = 3_000_000
    g = Geometry("t", 2, 1, 1, 1, 4096)
    rows = wa_series(m, g, logical_series=[(0, 0), (3.0, 3 * 409600)])
    assert [r.programs for r in rows] == [100, 150, 50]
    assert [r.physical_bytes for r in rows] == [100 * 2 * 4096, 150 * 2 * 4096, 50 * 2 * 4096]
    assert [round(r.wa, 6) for r in rows] == [2.0, 3.0, 1.0]
    assert rows[-1].cumulative_wa == pytest.approx(2.0)
    r = compute_wa(m, g, from_bytes(10**6))
    json.dumps(r.to_dict())  # serialisable
    back = Measurement.from_json(m.to_json())
    assert back.counts == m.counts and back.snapshots[1].counts[0].classes[2] == 250


def test_measurement_json_errors_name_the_field():
    obj = measurement([5]).to_dict()
    obj["counts"][0]["partial"] = -1
    with pytest.raises(MeasurementError, match=r"measurement.counts\[0\].partial must be at"):
        Measurement.from_dict(obj)
    obj = measurement([5]).to_dict()
    obj["params"]["channels"] = 0
    with pytest.raises(MeasurementError, match="measurement.params: channels must be"):
        Measurement.from_dict(obj)
    obj = measurement([5]).to_dict()
    del obj["config"]["windows"]
    with pytest.raises(MeasurementError, match="measurement.config.windows is missing"):
        Measurement.from_dict(obj)
    obj = measurement([5]).to_dict()
    obj["counts"][0]["histogram"] = {"999": 1}
    with pytest.raises(MeasurementError, match="histogram bin 999 is outside"):
        Measurement.from_dict(obj)
    with pytest.raises(MeasurementError, match=r"not valid JSON: .* \(offset 1\)"):
        Measurement.from_json("{x")


def test_endurance_figures_by_hand():
    # SSD-v: 4 dies, 4 KiB pages, 128 pages per block, 16 GB raw, 14 GB user, 5000 P/E, 3 years.
    g = load_geometry("ssd-v")
    m = measurement([131072] * 4)
    m.counts[0].classes[3] = m.counts[1].classes[3] = 100  # erases on two of the four dies
    r = compute_wa(m, g, from_bytes(4 * GiB))  # WA = 4 × 131072 × 4096 / 4 GiB = 0.5
    e = r.endurance
    assert r.wa.value == 0.5
    assert e.nand_bytes == 4 * 131072 * 4096
    assert e.blocks_erased == 200
    blocks = 16e9 / (4096 * 128)
    assert e.erases_per_block == pytest.approx(200 / blocks)
    assert e.life_used == pytest.approx(200 / blocks / 5000)
    assert e.tbw_bytes == pytest.approx(5000 * 16e9 / 0.5)
    assert e.dwpd == pytest.approx(5000 * 16e9 / 0.5 / (14e9 * 365 * 3))
    assert e.missing == ()
    # Without a rating, the figures that need it are absent and the reason is given.
    g2 = Geometry("x", 4, 1, 1, 2, 4096)
    e2 = compute_wa(m, g2, from_bytes(4 * GiB)).endurance
    assert e2.tbw_bytes is None and e2.erases_per_block is None
    assert any("pe_cycles" in reason for reason in e2.missing)


def test_confidence_interval_covers_the_truth_when_dies_are_sampled():
    """Brute force: 16 dies with different program counts, 4 of them probed at random; the 95 %
    interval (die sampling) must contain the true WA in about 95 % of the trials."""
    import random

    rng = random.Random(11)
    g = Geometry("sampled", 16, 1, 1, 1, 4096)
    hits = trials = 0
    for _ in range(600):
        per_die = [max(0, round(rng.gauss(10_000, 1_500))) for _ in range(16)]
        logical = 4096 * sum(per_die)  # true WA = 1
        probed = rng.sample(range(16), 4)
        r = compute_wa(measurement([per_die[d] for d in probed]), g, from_bytes(logical))
        ci = r.wa_confidence
        assert ci.lo <= r.wa.lo <= r.wa.hi <= ci.hi
        hits += ci.lo <= 1.0 <= ci.hi
        trials += 1
    assert 0.90 <= hits / trials <= 0.99, hits / trials


def test_confidence_interval_equals_the_bounds_when_every_die_is_probed():
    g = load_geometry("ssd-v")
    r = compute_wa(measurement([100, 120, 90, 110]), g, from_bytes(4096 * 420))
    assert r.wa_confidence == r.wa
    # One probed line of four dies: the other three dies' programs are not in the pulses, and
    # one line cannot measure the spread. Undetermined: the value keeps full parallelism, the
    # interval spans the unprobed dies idle (WA >= 1 as the floor: the host's 400 pages were
    # programmed) up to busy with programs the whole capture at the program window's edge.
    one = compute_wa(measurement([100], duration_ticks=60_000), g, from_bytes(4096 * 400))
    assert one.wa.value == 1.0 and one.undetermined
    assert one.wa_confidence.lo == 1.0
    room = 3 * 60_000 / 120  # three dies, 60 ms each, a program per 120 µs (window edge)
    assert one.wa_confidence.hi == pytest.approx((100 + room) / 400)
    assert any("probe two or more lines" in d for d in one.decide)
    assert [a["wa"] for a in one.alternatives] == [pytest.approx(0.25)]
    # Without the capture's duration nothing bounds them from above.
    assert compute_wa(measurement([100]), g, from_bytes(4096 * 400)).wa_confidence.hi == \
        float("inf")
    # Two lines measure the spread: the Student-t die sampling, decided.
    two = compute_wa(measurement([100, 104], duration_ticks=60_000), g, from_bytes(4096 * 408))
    assert not two.undetermined and two.wa_confidence.hi < one.wa_confidence.hi


def test_opcode_wa_counts_the_pages_the_bus_confirms():
    from rbscope import refssd
    from rbscope.analysis.labelled import from_refssd
    from rbscope.analysis.logical import from_bytes
    from rbscope.analysis.wa import opcode_wa

    d = refssd.preset("cache-prog", channels=2, dies_per_chip=1, pages_per_block=32,
                      blocks_per_plane=64)
    space = d.logical_bytes
    run = refssd.simulate(d, refssd.micro("4K-RD-100%-W-4KiB-align", space, space // 4, seed=5),
                          seed=5, precondition="steady")
    lv = from_bytes(run.logical_bytes)
    labels = [from_refssd(run, ch, max_pulses=0) for ch in range(d.channels)]
    r = opcode_wa(labels, run.geometry, lv)
    # Cache programs (15h, R/B# shows only tCBSY) and two-plane programs included: exact.
    assert r.pages == run.truth.pages_programmed["total"]
    assert r.wa.value == pytest.approx(run.truth.wa_true, rel=1e-12)
    assert r.edge_pages == 2 * d.dies * run.geometry.planes_per_die
    assert r.wa.lo < r.wa.value < r.wa.hi
    assert r.wa.hi / r.wa.value - 1 == pytest.approx(r.edge_pages / r.pages, rel=1e-9)
    assert not r.warnings and r.to_dict()["pages"] == r.pages
    # One of two channels tapped: its dies stand for all, and it says so.
    half = opcode_wa(labels[:1], run.geometry, lv)
    assert half.dies_tapped == d.dies // 2 and "full-parallelism" in half.warnings[0]
    assert half.wa.value == pytest.approx(r.wa.value, rel=0.1)
    with pytest.raises(WAError, match="no tapped die"):
        opcode_wa([], run.geometry, lv)
    with pytest.raises(WAError, match="0 bytes"):
        opcode_wa(labels, run.geometry, from_bytes(0))


def test_tap_model_ignores_address_cycles_with_one_lun():
    """Why labelled.from_refssd replays no address cycles for one-LUN targets: they change
    nothing the tap counts or tags (they only select the LUN)."""
    import random

    from rbscope.gateware.onfi_tap.model import ADDR, CMD, Strobe, TapModel
    from rbscope.gateware.onfi_tap.params import TapParams
    from rbscope.gateware.rb_sniffer.params import SnifferParams

    params = TapParams(targets=2, luns=1, sniffer=SnifferParams(channels=2))
    rng = random.Random(4)
    cmds = [0x80, 0x10, 0x11, 0x15, 0x60, 0xD0, 0xD1, 0x00, 0x30, 0x31, 0x3F, 0xFF, 0xEF]
    strobes = []
    for t in range(0, 4000, 4):
        kind = CMD if rng.random() < 0.5 else ADDR
        strobes.append(Strobe(t, kind, rng.choice([1, 2, 3]),
                              rng.choice(cmds) if kind == CMD else rng.randrange(256)))
    full, bare = TapModel(params), TapModel(params)
    for s in strobes:
        full.strobe(s)
        if s.kind != ADDR:
            bare.strobe(s)
        assert full.tag == bare.tag
    assert full.counts.ops == bare.counts.ops and full.counts.planes == bare.counts.planes


def test_the_erases_allow_fewer_programs_where_slc_mode_programs_fill_small_blocks():
    # The interval's "programs the erases allow": every erased block filled. A block of
    # SLC-mode programs holds pages_per_block ÷ bits of them (16 of a 48-page TLC block), so
    # 146 erases of a die that programmed 1 043 SLC pages and 3 879 TLC pages allow about what
    # it programmed, not 146 × 48.
    from rbscope.analysis.sequence import DieResult
    from rbscope.analysis.wa import _erased_room

    def die(slc):
        d = DieResult(10_000, {}, 4922.0, 0.0, 146.0, 0.0, None)
        d.slc_programs = slc
        return d

    tlc = Geometry(name="t", channels=1, chips_per_channel=1, dies_per_chip=1, planes_per_die=1,
                   page_size=8192, pages_per_block=48, cell="tlc")
    assert _erased_room(die(1043.0), tlc) == pytest.approx(1043 + (146 - 1043 * 3 / 48) * 48)
    assert _erased_room(die(1043.0), tlc) < 1.01 * 4922
    # Without SLC programs, or without the cell's bits, every block is a full one.
    assert _erased_room(die(0.0), tlc) == 146 * 48
    unknown = Geometry(name="u", channels=1, chips_per_channel=1, dies_per_chip=1,
                       planes_per_die=1, page_size=8192, pages_per_block=48)
    assert _erased_room(die(1043.0), unknown) == 146 * 48


def test_pulses_the_gaps_moved_between_programs_and_erases_stay_in_the_interval():
    # The idle gaps judged 40 pulses between the slowest programs and the erases: the widths'
    # reading of them stays inside the interval (the classification slack grows by them).
    from types import SimpleNamespace

    from rbscope.analysis.sequence import DieResult
    from rbscope.analysis.wa import _sequence_row

    def slack(moved):
        d = DieResult(10_000, {}, 4000.0, 0.0, 125.0, 0.0, 127.0)
        d.gap_moved = moved
        row = SimpleNamespace()
        _sequence_row(row, d, 1, True, 2)
        return row.class_slack

    assert slack(40.0) == pytest.approx(slack(0.0) + 40.0)

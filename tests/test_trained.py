"""A classifier trained on labelled pulses (the opcode tap's), used on R/B#-only captures."""

import json
import math

import numpy as np
import pytest

from rbscope.analysis.labelled import LabelledPulses
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.sequence import classify_measurement
from rbscope.analysis.trained import TrainedClassifier, TrainedError, _page_types, train
from rbscope.analysis.wa import compute_wa
from rbscope.cli import commands as cli
from rbscope.gateware.onfi_tap.params import OpClass

from .test_sequence import GEOM, PPB, TICK, die_sequence, make, programs_of, ticks, to_measurement

CLASS = {"dbsy": OpClass.MP_QUEUE, "erase": OpClass.ERASE, "read": OpClass.READ,
         "program0": OpClass.PROGRAM, "program1": OpClass.PROGRAM,
         "cache_program": OpClass.CACHE_PROGRAM}


def geometry_file(tmp_path):
    """``GEOM`` as a geometry file (2 channels × 2 dies, two planes, multi-plane programs)."""
    geo = tmp_path / "g.toml"
    geo.write_text('name = "t"\n[geometry]\nchannels = 2\nchips_per_channel = 1\n'
                   'dies_per_chip = 2\nplanes_per_die = 2\npage_size = 4096\n'
                   f'pages_per_block = {PPB}\nprogram_model = "multi-plane"\n', encoding="utf-8")
    return geo


def labelled(pulses, labels):
    """What the tap reports for these dies: every pulse with its command's class."""
    die, width, cls = [], [], []
    for d in sorted(pulses):
        die += [d] * len(pulses[d])
        width += list(pulses[d])
        cls += [int(CLASS[x]) for x in labels[d]]
    n = len(pulses)
    return LabelledPulses(
        tick_seconds=TICK, clock_seconds=TICK, hist_sub_bits=3, dies=[f"d{d}" for d in range(n)],
        ops=[{} for _ in range(n)],
        planes=[{"PROGRAM": [0, programs_of(labels[d]), 0, 0], "CACHE_PROGRAM": [0, 0, 0, 0],
                 "ERASE": [0, labels[d].count("erase"), 0, 0]} for d in range(n)],
        histograms={}, die=np.array(die), start=np.arange(len(die)), width=np.array(width),
        op_class=np.array(cls))


def test_training_on_tapped_dies_beats_untrained_on_histograms_with_cache_programs():
    # Cache-program heads (tCBSY, 3-35 µs) among reads (25-60 µs): by width histograms alone
    # the untrained classifier counts them as reads; the trained one knows both shapes.
    kw = dict(dbsy=True, cache_heads=0.2, reads=0.3)
    tapped = labelled(*make(seed=21, dies=2, blocks=20, **kw))
    trained = train(tapped, source="two tapped dies")
    # Lower and upper pages form two program states (held to equal counts, like untrained).
    assert {s.name for s in trained.states} == {"multiplane", "read", "cache_program",
                                                "program_1", "program_2", "erase"}
    assert trained.mp == 2.0
    pulses, labels = make(seed=22, **kw)
    m = to_measurement(pulses, keep_pulses=False)
    lv = from_bytes(2 * sum(programs_of(lab) for lab in labels.values()) * GEOM.page_size)
    plain = compute_wa(m, GEOM, lv, sequence=classify_measurement(m, GEOM), mp=2)
    seq = classify_measurement(m, GEOM, trained=trained)
    assert any("trained" in n for n in seq.notes)
    good = compute_wa(m, GEOM, lv, sequence=seq, mp=2)
    assert abs(plain.wa.value - 1) > 0.1
    assert abs(good.wa.value - 1) < 0.03
    assert good.wa_confidence.lo <= 1 <= good.wa_confidence.hi
    # With the pulse order too, trained stays right.
    m = to_measurement(pulses)
    r = compute_wa(m, GEOM, lv, sequence=classify_measurement(m, GEOM, trained=trained))
    assert r.wa.value == pytest.approx(1, abs=0.01)


def test_trained_file_round_trip_and_errors(tmp_path):
    trained = train(labelled(*make(seed=23, dies=1, blocks=5, dbsy=True)))
    path = tmp_path / "t.json"
    trained.save(path)
    back = TrainedClassifier.load(path)
    assert [(s.name, s.kind, s.first_bin, s.pulses) for s in back.states] == \
        [(s.name, s.kind, s.first_bin, s.pulses) for s in trained.states]
    assert all((a.counts == b.counts).all() for a, b in zip(back.states, trained.states,
                                                             strict=True))
    # No suspension on these dies: no rest, every program pulse counted (a rate of 0).
    assert (back.rests, back.program_pulses) == (trained.rests, trained.program_pulses)
    assert trained.rests == 0 and trained.program_pulses > 0 and trained.rest_rate == 0
    obj = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in obj.items()
                                if k not in ("rests", "program_pulses")}))
    assert TrainedClassifier.load(path).rest_rate is None  # (a file written before them)
    for change, match in (({"format": "x"}, "not a trained classifier"),
                          ({"version": 9}, "version"),
                          ({"states": [{"name": "p"}]}, r"states\[0\]"),
                          ({"states": []}, "no program state"),
                          ({"mp": 0}, "mp must be"),
                          ({"resumes": -1}, "resumes must be"),
                          ({"resumes": 1.5}, "resumes must be"),
                          ({"rests": -1, "program_pulses": 5}, "rests must be"),
                          ({"rests": 1, "program_pulses": "5"}, "program_pulses must be"),
                          ({"rests": 3, "program_pulses": None}, "both or neither")):
        path.write_text(json.dumps({**obj, **change}))
        with pytest.raises(TrainedError, match=match):
            TrainedClassifier.load(path)
    path.write_text("{")
    with pytest.raises(TrainedError, match="not JSON"):
        TrainedClassifier.load(path)
    with pytest.raises(TrainedError, match="cannot read"):
        TrainedClassifier.load(tmp_path / "missing.json")
    # Labels without a program pulse train nothing.
    pulses, labels = make(seed=24, dies=1, blocks=2)
    keep = [i for i, x in enumerate(labels[0]) if not x.startswith("program")]
    with pytest.raises(TrainedError, match="no program pulses"):
        train(labelled({0: pulses[0][keep]}, {0: [labels[0][i] for i in keep]}))


def test_calibrate_labelled_then_analyze_trained(tmp_path, capsys):
    kw = dict(dbsy=True, cache_heads=0.2, reads=0.3)
    labels_path = tmp_path / "tapped.labels.json"
    labelled(*make(seed=25, dies=2, blocks=20, **kw)).save(labels_path)
    out = tmp_path / "trained.json"
    assert cli.main(["calibrate", "--labelled", str(labels_path), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cache_program" in text and "Mp measured: 2" in text and str(out) in text
    assert "suspension: none on the tapped channel" in text
    assert json.loads(out.read_text())["resumes"] == 0
    pulses, labels = make(seed=26, **kw)
    m = to_measurement(pulses, keep_pulses=False)
    mpath = tmp_path / "m.json"
    m.save(mpath)
    geo = geometry_file(tmp_path)
    pages = 2 * sum(programs_of(lab) for lab in labels.values())
    args = ["analyze", str(mpath), "--geometry", str(geo), "--logical", str(pages * 4096),
            "--json"]
    assert cli.main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli.main(args + ["--trained", str(out)]) == 0
    good = json.loads(capsys.readouterr().out)
    assert abs(good["wa"]["value"] - 1) < 0.03 < abs(plain["wa"]["value"] - 1)
    # Errors: a bad file, --trained with windows, source and --labelled together.
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(args + ["--trained", str(bad)]) == 1
    assert "not a trained classifier" in capsys.readouterr().err
    assert cli.main(args + ["--trained", str(out), "--classifier", "windows"]) == 2
    assert "--trained needs the sequence classifier" in capsys.readouterr().err
    assert cli.main(["calibrate", str(mpath), "--labelled", str(labels_path)]) == 2
    assert "not both" in capsys.readouterr().err
    assert cli.main(["calibrate", "--labelled", str(bad)]) == 1
    assert math.isfinite(good["wa_confidence_95"]["hi"])


@pytest.mark.slow
def test_reference_ssd_train_on_one_tapped_channel_measure_every_die_by_rb():
    # The documented path on the reference SSD's cache-program drive: tap channel 0 during
    # one workload, train, then measure another workload on every die by R/B# alone.
    from rbscope import refssd
    from rbscope.analysis.labelled import from_refssd
    from rbscope.analysis.measurement import Measurement
    from rbscope.refssd.measure import to_measurement as rb_measurement

    drive = refssd.preset("cache-prog", channels=2, dies_per_chip=2, pages_per_block=64,
                          blocks_per_plane=64)
    volume = drive.logical_bytes // 8
    tapped = refssd.simulate(drive, refssd.micro("8K-RD-50%-W-4KiB-align", drive.logical_bytes,
                                                 volume, seed=99), seed=99, precondition="steady")
    trained = train(from_refssd(tapped, 0, tick_seconds=1e-8))
    run = refssd.simulate(drive, refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes,
                                              volume, seed=1), seed=1, precondition="initial")
    m = rb_measurement(run, max_pulses=10**9)
    hist = Measurement(m.params, m.config, m.tick_seconds, m.counts, m.class_names,
                       probes=m.probes, quiet_ticks=m.quiet_ticks)  # histograms only
    lv = from_bytes(run.logical_bytes)
    true = run.truth.wa_true
    err = {}
    for mode, meas in (("sequence", m), ("histograms", hist)):
        for name, t in (("untrained", None), ("trained", trained)):
            seq = classify_measurement(meas, run.geometry, trained=t)
            r = compute_wa(meas, run.geometry, lv, sequence=seq)
            err[mode, name] = abs(r.wa.value - true) / true
            assert r.wa_confidence.lo <= true <= r.wa_confidence.hi, (mode, name)
    # Histograms alone: untrained, the chains' first pages hide among the reads (≈ 7 % low
    # since the erase floor, 19 % before); trained, the shapes are known.
    assert err["histograms", "untrained"] > 0.05
    assert err["histograms", "trained"] < min(0.03, err["histograms", "untrained"] / 2)
    assert err["sequence", "trained"] < 0.015


def test_analyze_reports_wa_by_the_bus_tap(tmp_path, capsys):
    """A capture that holds the bus tap's counts: analyze adds the opcode-aware WA."""
    pulses, labels = make(seed=27, blocks=5)
    m = to_measurement(pulses)
    pages = 2 * sum(programs_of(lab) for lab in labels.values())
    m.provenance["tap"] = {"program_ops": pages // 2, "cache_programs": 0,
                           "pages_programmed": pages, "mp": 2.0, "erase_ops": 0,
                           "blocks_erased": 0, "reads": 0, "dies": [{}] * len(pulses)}
    path = tmp_path / "m.json"
    m.save(path)
    geo = geometry_file(tmp_path)
    args = ["analyze", str(path), "--geometry", str(geo), "--logical", str(pages * 4096 // 2)]
    assert cli.main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 4 dies, all 4 tapped: WA = pages × 4 KiB ÷ logical = 2.
    assert out["opcode_wa"]["wa"]["value"] == pytest.approx(2.0)
    assert out["opcode_wa"]["wa"]["lo"] < 2.0 < out["opcode_wa"]["wa"]["hi"]
    assert out["opcode_wa"]["edge_pages"] == 2 * 4 * 2
    assert cli.main(args) == 0
    assert "WA by the bus tap              2.0000" in capsys.readouterr().out


def test_a_wide_lower_page_cluster_trains_one_page_type_not_two():
    # Issue 25, item 9: the dies' lower pages differ (200-330 µs on one die, 500-800 µs on the
    # other), so the lower pages form one wide two-humped cluster holding half the programs,
    # the upper pages the other half. Two humps of a quarter each are no page types (a block
    # programs each type equally often): training keeps two program states, split where the
    # labels split into equal halves, and the classifier trained so measures its own training
    # recording with the truth inside its interval.
    rng = np.random.default_rng(31)
    pulses, labels = {}, {}
    for d, lower in enumerate(((200, 330), (500, 800))):
        w, lab = die_sequence(rng, 20, program=(lower, (1300, 2200)))
        pulses[d], labels[d] = ticks(w), lab
    tapped = labelled(pulses, labels)
    trained = train(tapped)
    progs = [s for s in trained.states if s.kind == "program"]
    assert [s.pulses for s in progs] == [sum(lab.count("program0") for lab in labels.values()),
                                         sum(lab.count("program1") for lab in labels.values())]
    lower_hi = 2 ** progs[0].range_log2[1]
    assert 800 <= lower_hi < 1300 / 2 ** (-1 / 16)
    lv = from_bytes(sum(programs_of(lab) for lab in labels.values()) * GEOM.page_size)
    for keep in (True, False):
        m = to_measurement(pulses, keep_pulses=keep)
        r = compute_wa(m, GEOM, lv, sequence=classify_measurement(m, GEOM, trained=trained),
                       mp=1)
        true = GEOM.dies / len(pulses)  # the two measured dies stand for GEOM's four
        assert r.wa_confidence.lo <= true <= r.wa_confidence.hi
        assert r.wa.value == pytest.approx(true, rel=0.02)
        assert r.wa_confidence.hi - r.wa_confidence.lo > 0


def test_page_types_need_equal_shares_and_a_valley():
    rng = np.random.default_rng(5)
    lower = np.log2(rng.uniform(200, 500, 600))
    upper = np.log2(rng.uniform(1300, 2200, 600))

    def sizes(x):
        parts, n_slc = _page_types(x)
        return [len(p) for p in parts], n_slc

    assert sizes(np.concatenate([lower, upper])) == ([600, 600], 0)
    middle = np.log2(rng.uniform(700, 1000, 600))
    assert sizes(np.concatenate([lower, middle, upper])) == ([600] * 3, 0)
    # One wide cluster (a uniform spread over two octaves) is one type, however it ripples.
    wide = np.log2(rng.uniform(150, 900, 1200))
    assert sizes(wide) == ([1200], 0)
    # Two clusters of a fifth and four fifths: no page order programs that.
    assert sizes(np.concatenate([lower[:150], upper])) == ([750], 0)


def test_an_slc_cache_s_programs_are_a_class_of_their_own_beside_the_page_types():
    # A TLC drive behind an SLC cache (a tuning draw of the zoo's tlc-slc-cache: SLC-mode
    # programs 110-220 µs, 31 % of the programs; the three TLC page types 23 % each): split
    # as two equal halves, the SLC and lower pages made one "page type", and the classifier saw
    # two program modes on TLC cells, which only two-pass programming explains (undetermined,
    # +0.1 to +5.8 % on every tuning draw at L2).
    rng = np.random.default_rng(6)
    slc = np.log2(rng.uniform(110, 220, 1000))
    lower = np.log2(rng.uniform(330, 650, 760))
    middle = np.log2(rng.uniform(950, 1800, 760))
    upper = np.log2(rng.uniform(2400, 3900, 760))
    parts, n_slc = _page_types(np.concatenate([slc, lower, middle, upper]))
    assert ([len(p) for p in parts], n_slc) == ([1000, 760, 760, 760], 1)
    # MLC behind an SLC cache taking 48 % of the programs (three clusters of equal shares
    # would be three page types: the simpler reading wins a tie).
    more = np.concatenate([slc, np.log2(rng.uniform(110, 220, 400))])
    parts, n_slc = _page_types(np.concatenate([more, lower, upper]))
    assert ([len(p) for p in parts], n_slc) == ([1400, 760, 760], 1)


def test_held_equal_page_types_widen_the_interval_by_what_they_moved():
    # Issue 25, item 9: with trained densities, equal page types are the one assumption left;
    # where the capture does not keep the page order (here some lower pages, whose widths
    # reach into the reads, are missing), holding them equal moved reads into programs and the
    # interval ([1.044, 1.447]) missed the truth. It now spans the free classification too.
    rng = np.random.default_rng(7)
    pulses, labels = {}, {}
    for d in range(4):
        w, lab = die_sequence(rng, 20, program=((45, 200), (1300, 2200)), reads=0.6)
        pulses[d], labels[d] = ticks(w), lab
    trained = train(labelled(pulses, labels))
    assert [s.name for s in trained.states if s.kind == "program"] == ["program_1", "program_2"]
    for d in pulses:
        keep = np.array([not (x == "program0" and rng.random() < 0.15) for x in labels[d]])
        pulses[d] = pulses[d][keep]
        labels[d] = [x for x, k in zip(labels[d], keep, strict=True) if k]
    lv = from_bytes(sum(programs_of(lab) for lab in labels.values()) * GEOM.page_size)
    m = to_measurement(pulses)
    seq = classify_measurement(m, GEOM, trained=trained)
    assert seq.balanced
    assert max(d.balance_shift for d in seq.dies.values()) > 10
    r = compute_wa(m, GEOM, lv, sequence=seq, mp=1)
    assert r.wa.value > 1.03  # the held-equal estimate itself stays biased
    assert r.wa_confidence.lo <= 1.0 <= r.wa_confidence.hi

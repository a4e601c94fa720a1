"""The sequence classifier streaming over a capture (``rbscope.analysis.streaming``): the
streamed rules' sums do not depend on the chunks, and a streamed capture's WA is the in-memory
one's."""

import json

import numpy as np
import pytest

from rbscope.analysis import streaming
from rbscope.analysis.geometry import load_geometry
from rbscope.analysis.pipeline import AnalysisRequest, analyse
from rbscope.analysis.sequence import classify
from rbscope.analysis.streaming import StreamModel, _affine_scan, apply_model
from tests.conftest import load_benchmark

day = load_benchmark("analyze_day")


@pytest.fixture
def small_windows(monkeypatch):
    """Fit windows and chunks small enough that a test capture has several of each."""
    monkeypatch.setattr(streaming, "FIT_PULSES", 1200)
    monkeypatch.setattr(streaming, "CHUNK_RECORDS", 3000)


def test_the_affine_scan_is_the_recurrence():
    rng = np.random.default_rng(0)
    a = np.where(rng.random(5000) < 0.2, rng.random(5000), rng.random(5000) * 1e-6)
    c = rng.random(5000)
    r, acc = np.empty(5000), 0.7
    for i in range(5000):
        acc = a[i] * acc + c[i]
        r[i] = acc
    assert np.allclose(_affine_scan(a, c, 0.7), r, rtol=1e-12, atol=1e-12)


def test_chunks_give_the_sums_of_one_pass():
    """The tDBSY rules' state carried over chunk boundaries: any chunking gives the one-pass
    sums (to rounding), on two-plane trains where every program follows a tDBSY."""
    p, s = day.day_trains(range(3), 20, 400.0, seed=5)
    r = classify(p, 1e-6, pages_per_block=256, starts=s, planes=2)
    model = StreamModel(r, 1.0, 256, 0.25)
    whole, dec = apply_model(model, p)
    for chunk in (1, 2, 7, 1000):
        parts, _ = apply_model(model, p, dec, chunk=chunk)
        for k, d in whole.items():
            e = parts[k]
            assert d.multiplane_pages > 100 and d.announced >= 0
            for name in ("units", "pages", "program_pulses", "program_var", "unit_var",
                         "erase_pulses", "announced", "ambiguous_short", "erase_cap"):
                assert getattr(e, name) == pytest.approx(getattr(d, name), rel=1e-9), name


def test_the_streamed_rules_are_the_classifiers_where_no_other_rule_moves_pulses():
    p, s = day.day_trains(range(2), 20, 400.0, seed=6)
    r = classify(p, 1e-6, pages_per_block=256, planes=2)  # (no starts: no idle-gap rule)
    core, _ = apply_model(StreamModel(r, 1.0, 256, 0.25), p)
    for k, d in r.dies.items():
        assert core[k].pages == pytest.approx(d.pages, rel=1e-9)
        assert core[k].unit_var == pytest.approx(d.unit_var, rel=1e-9)
        assert core[k].erase_pulses == pytest.approx(d.erase_pulses, rel=1e-9)


def _both(path, geo, **kw):
    g = load_geometry(str(geo))
    return (analyse(AnalysisRequest(str(path), g, stream="never", **kw)),
            analyse(AnalysisRequest(str(path), g, stream="always", **kw)))


def test_a_streamed_capture_gives_the_in_memory_wa(tmp_path, small_windows):
    """16 two-plane MLC lines, a minute at ~280 pulses/s each (67 000 pulses, 3 000-record
    chunks, windows of 150 pulses per line): the streamed program pages are the in-memory
    classification's to 0.5 % on every line and in all."""
    p, s = day.day_trains(range(16), 60, 300.0, seed=3)
    path, geo = tmp_path / "c.rbcap", tmp_path / "g.toml"
    geo.write_text(day.GEOMETRY)
    day.write_trace_capture(path, p, s)
    mem, st = _both(path, geo)
    assert mem.streaming is None and st.streaming is not None
    assert mem.result.classifier == st.result.classifier == "sequence"
    assert st.streaming["pulses"] == sum(len(v) for v in p.values())
    assert st.streaming["fit_pulses"] < st.streaming["pulses"] / 3
    a, b = mem.result.program_pulses, st.result.program_pulses
    assert b.value == pytest.approx(a.value, rel=0.005)
    for x, y in zip(mem.result.channels, st.result.channels, strict=True):
        assert y.estimate == pytest.approx(x.estimate, rel=0.005, abs=1.0)
    assert any(n.startswith("streamed: ") for n in st.notes)


def test_the_reference_ssd_streamed_matches_in_memory_and_holds_the_truth(tmp_path,
                                                                          small_windows):
    """The reference SSD's pulse trains (SSD-v, random writes, GC in steady state) through a
    TRACE_BATCH capture: streamed WA within 1 % of the in-memory WA, interval holding the
    truth."""
    from rbscope import refssd
    from rbscope.analysis.logical import from_bytes

    drive = refssd.preset("ssd-v", blocks_per_plane=64, pages_per_block=64)
    work = refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, 12 << 20, seed=2)
    run = refssd.simulate(drive, work, seed=2, precondition="steady")
    m = refssd.to_measurement(run, clock_ns=1000, max_pulses=10**7)
    path = tmp_path / "r.rbcap"
    p = {ch: np.asarray(m.pulses[ch], dtype=np.int64) for ch in m.pulses}
    s = {ch: np.asarray(m.pulse_starts[ch], dtype=np.int64) for ch in m.pulses}
    day.write_trace_capture(path, p, s)
    g = run.geometry
    logical = from_bytes(run.logical_bytes)
    mem = analyse(AnalysisRequest(str(path), g, logical, stream="never", write_only=True))
    st = analyse(AnalysisRequest(str(path), g, logical, stream="always", write_only=True))
    assert st.streaming is not None and st.streaming["pulses"] > 3 * st.streaming["fit_pulses"]
    assert st.result.wa.value == pytest.approx(mem.result.wa.value, rel=0.01)
    iv = st.result.wa_confidence
    assert iv.lo <= run.truth.wa_true <= iv.hi


def test_a_capture_that_lost_records_streams_its_complete_stretches(tmp_path, small_windows):
    """A line that lost the records of a tenth of a second: the streamed path leaves out the
    same stretch as the in-memory one and bounds the same missing pulses."""
    p, s = day.day_trains(range(16), 30, 300.0, seed=4)
    path, geo = tmp_path / "c.rbcap", tmp_path / "g.toml"
    geo.write_text(day.GEOMETRY)
    day.write_trace_capture(path, p, s, lose={3: (10_000_000, 10_050_000)})
    mem, st = _both(path, geo)
    assert mem.measurement.pulses_lost == st.measurement.pulses_lost
    assert set(st.measurement.pulses_lost) == {3}
    assert sum(c.lost for c in st.result.channels) == sum(c.lost for c in mem.result.channels)
    assert st.result.program_pulses.value == pytest.approx(mem.result.program_pulses.value,
                                                           rel=0.005)


def test_analyze_json_says_it_streamed(tmp_path, small_windows, capsys):
    from rbscope.cli import main

    p, s = day.day_trains(range(16), 20, 300.0, seed=7)
    path, geo = tmp_path / "c.rbcap", tmp_path / "g.toml"
    geo.write_text(day.GEOMETRY)
    day.write_trace_capture(path, p, s)
    assert main(["analyze", str(path), "--geometry", str(geo), "--logical", "1GiB", "--json",
                 "--stream", "always"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["streaming"]["windows"] == streaming.FIT_WINDOWS
    assert "relative" in out["streaming"]["drift"]
    assert {"value", "lo", "hi"} <= set(out["wa"]) and {"lo", "hi"} <= set(
        out["wa_confidence_95"])
    assert main(["analyze", str(path), "--geometry", str(geo), "--stream", "always"]) == 0
    text = capsys.readouterr().out
    assert "streamed " in text and "drift check: refitted on the last 2 windows" in text


def test_a_capture_written_a_span_at_a_time_holds_the_same_pulses(tmp_path):
    """``analyze_day.write_trace_spans`` (a day's capture in bounded memory: a span of pulses
    at a time, a pulse of one span ending after the next began) gives each line the pulses,
    counts and snapshots of the capture written at once."""
    from rbscope.device.capture import capture_to_measurement

    spans, whole_p, whole_s = [], {}, {}
    for k in range(3):
        p, s = day.day_trains(range(4), 3, 300.0, seed=20 + k)
        s = {c: v + k * 3_000_000 for c, v in s.items()}
        # (A program running past the span's end, into the next span's first pulses.)
        p[1] = np.r_[p[1], 2500]
        s[1] = np.r_[s[1], k * 3_000_000 + 2_999_000]
        spans.append((k * 3_000_000, p, s))
        for c in p:
            whole_p.setdefault(c, []).append(p[c])
            whole_s.setdefault(c, []).append(s[c])
    whole_p = {c: np.concatenate(v) for c, v in whole_p.items()}
    whole_s = {c: np.concatenate(v) for c, v in whole_s.items()}
    a, b = tmp_path / "a.rbcap", tmp_path / "b.rbcap"
    assert day.write_trace_spans(a, iter(spans)) == day.write_trace_capture(b, whole_p, whole_s)
    ma, mb = capture_to_measurement(a), capture_to_measurement(b)
    assert ma.provenance["sequence"]["complete"] and mb.provenance["sequence"]["complete"]
    for c in range(4):
        order = np.argsort(whole_s[c] + whole_p[c], kind="stable")
        assert list(ma.pulses[c]) == list(mb.pulses[c]) == whole_p[c][order].tolist()
    assert ma.counts == mb.counts and ma.duration_ticks == mb.duration_ticks
    assert len(ma.snapshots) == len(mb.snapshots) > 90
    assert repr(ma.snapshots) == repr(mb.snapshots)


def test_a_day_capture_written_before_is_analysed_again_alone(tmp_path):
    """``analyze_day --generate-only`` leaves ``day.json`` (what the capture holds and the
    truth of its WA) beside the capture; ``--analyze DIR`` times the analysis alone and finds
    the same pulses and the WA the generation put in; a directory without it is refused."""
    from rbscope.device.capture import capture_to_measurement

    d = day.generate(0.1, rate=300.0, lines=4, directory=tmp_path)
    truth = json.loads((d / "day.json").read_text())
    m = capture_to_measurement(d / "day.rbcap")
    assert sum(len(v) for v in m.pulses.values()) == truth["pulses"] > 0
    assert truth["file_bytes"] == (d / "day.rbcap").stat().st_size
    row = day.analyze(d)
    assert row["pulses"] == truth["pulses"] and row["wa_truth"] == pytest.approx(day.WA_TRUE)
    assert abs(row["wa_error"]) < 0.01
    ci = row["wa_confidence_95"]
    assert ci["lo"] <= row["wa_truth"] <= ci["hi"]
    with pytest.raises(SystemExit, match="no readable day.json"):
        day.analyze(tmp_path)


def test_held_memory_is_reused_without_page_faults():
    """``hold_freed_memory`` (``rbscope analyze`` calls it): arrays freed and allocated again,
    chunk after chunk, come back from the heap instead of the kernel (no page fault each
    time). In a subprocess: the setting is process-wide."""
    import subprocess
    import sys

    script = """
import resource, sys
import numpy as np
from rbscope.analysis.streaming import hold_freed_memory
if sys.argv[1] == "hold":
    assert hold_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    a = [np.ones(20 << 17) for _ in range(4)]; del a
f0 = faults()
for _ in range(20):
    a = [np.ones(20 << 17) for _ in range(4)]  # a chunk's arrays: four of 20 MiB
    del a
print(faults() - f0)
"""
    def faults(mode):
        out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                             text=True, check=True).stdout
        return int(out.split()[-1])

    plain, held = faults("plain"), faults("hold")
    # 80 MiB a round, returned to the kernel each time unless held (a fault per page, or per
    # fault-around block: about 2 000 a round here).
    assert plain > 20 * 500
    assert held * 20 < plain

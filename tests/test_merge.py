"""Merging several boards' captures by a shared sync line (``rbscope.device.merge``,
``rbscope merge``).

End to end: two fake devices (the bit-exact model behind a pty) whose clocks differ in offset and
rate (+80 ppm) record the same sync train (the gateware generator's model) and disjoint drive
lines; each is captured with ``rbscope capture --trace``, the captures are merged, and the merged
lines are the boards' lines on the reference's time line (within the skew bound, against the
true map), the WA of the merged capture is that of one capture of all the lines. Then the
matching's robustness and its refusals, on synthetic captures.
"""

import json

import numpy as np
import pytest

from rbscope.analysis import load_geometry
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Measurement
from rbscope.analysis.pipeline import AnalysisRequest, analyse, wa_of
from rbscope.analysis.presets import PRESETS
from rbscope.cli import commands as cli
from rbscope.device.capture import CaptureWriter
from rbscope.device.fake import FakeDevice
from rbscope.device.merge import (
    MergeError,
    MergeInput,
    MergeRequest,
    merge_captures,
)
from rbscope.device.protocol import encode_payload, frame_bytes, info_values
from rbscope.device.stimulus import Operation, TrainSpec, random_trains
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.gateware.rb_sniffer.params import Counter, EventKind, SnifferParams
from rbscope.gateware.sync_out import SyncTrainParams, sync_train
from rbscope.recordings.sources import open_measurement

CYCLES = 1_500_000  # 1.5 s of a 1 MHz fake device
PPM = 80  # board B's clock runs this much faster than A's
OFFSET = 123_457  # B's trains start this many of A's cycles after A's
#: A sync train scaled to the test (gaps 20-45 ms: about 30 pulses a second), 1 µs units.
SYNC = SyncTrainParams(1, seed=0xC0FFEE, gap_min=20_000, gap_step=100)
#: The windows of a built-in preset (a capture recognises and names them), 100 ms to quiescence
#: (longer than the sync train's gaps).
CONFIG = PRESETS["mlc34nm"].to_config(SnifferParams(channels=4), 1e-6, idle_ticks=100_000)[0]
#: Drive-line pulses away from the mlc34nm preset's window edges (at 1 µs ticks), so that a
#: board's tick differing by a few ppm classifies each the same.
MIX = (Operation("read", 5, ((1, 25, 120),)), Operation("program", 3, ((1, 300, 1700),)),
       Operation("erase", 0.2, ((1, 2500, 3500),)), Operation("cache_busy", 1, ((1, 3, 8),)))


def to_b(cycle):
    """Board B's cycle of the moment that is ``cycle`` on board A."""
    return round((cycle - OFFSET) * (1 + PPM * 1e-6))


def train_of(pulses, convert=lambda c: c, cycles=CYCLES):
    edges = []
    for start, width in pulses:
        a, b = convert(start), convert(start + width)
        if a >= 1 and b < cycles - 10_000:
            edges += [(a, 0), (b, 1)]
    return Train(1, edges)


def drive_pulses(seed):
    """The pulses of two drive lines, in A's cycles (generated there)."""
    trains = random_trains(TrainSpec(channels=2, cycles=CYCLES - 300_000, mix=MIX,
                                     gap=(200, 3000)), seed=seed)
    out = []
    for t in trains:
        edges = t.edges
        out.append([(edges[k][0], edges[k + 1][0] - edges[k][0])
                    for k in range(0, len(edges) - 1, 2) if edges[k][1] == 0])
    return out


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    """Captures of board A (sync on channel 2), board B (sync on channel 0) and of one device
    with all four drive lines on A's clock (the union)."""
    tmp = tmp_path_factory.mktemp("merge")
    sync = sync_train(SYNC, 200)
    a_lines = drive_pulses(1)
    # B's lines, from the start of its trains on (OFFSET of A's cycles after A's start).
    b_lines = [[(s + OFFSET + 50, w) for s, w in line] for line in drive_pulses(2)]
    boards = {
        # (channels' trains, sync channel)
        "A": ([train_of(a_lines[0]), train_of(a_lines[1]), train_of(sync)], 2),
        "B": ([train_of(sync, to_b), train_of(b_lines[0], to_b), train_of(b_lines[1], to_b)],
              0),
        "U": ([train_of(x) for x in (*a_lines, *b_lines)], None),
    }
    out = {}
    for name, (trains, sync_ch) in boards.items():
        params = SnifferParams(channels=len(trains))
        path = tmp / f"{name}.rbcap"
        with FakeDevice(params, trains, CYCLES, config=CONFIG, snapshot_period=30_000,
                        board=f"fake{name}", trace_budget=4096) as dev:
            # For a fixed time, not --until-quiescent: a device idle since its start is
            # quiescent in the snapshot before the capture's clear, which would stop it there.
            assert cli.main(["capture", dev.path, "-o", str(path), "--trace", "--clear",
                             "--duration", "2.5", "--json"]) == 0
            out[name] = (path, sync_ch, dev._stim_start)
    return out


def test_two_boards_merge_into_one_time_aligned_capture(rig, tmp_path, capsys):
    (pa, sa, stim_a), (pb, sb, stim_b) = rig["A"], rig["B"]
    out = tmp_path / "merged.json"
    assert cli.main(["merge", str(pa), str(pb), "--sync-channel", f"A:{sa}",
                     "--sync-channel", f"B:{sb}", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = Measurement.load(out)
    fit = report["boards"][1]["sync"]
    # The fit finds B's clock 80 ppm fast, and maps it within the quantisation of two clocks.
    assert fit["paired"] >= 40 and fit["unpaired"] == 0
    assert fit["rate_ppm"] == pytest.approx(PPM, abs=5)
    assert fit["skew_max_ticks"] <= 2.5 and 0 < fit["skew_rms_ticks"] <= 1.5
    assert report["boards"][1]["sync"]["skew_max_ns"] == pytest.approx(
        1000 * fit["skew_max_ticks"])
    # Four lines: A's two, then B's two (each board's sync channel left out).
    assert m.params.channels == 4 and m.provenance["merge"]["lines"] == [
        ["A", 0], ["A", 1], ["B", 1], ["B", 2]]
    assert [p.name for p in m.probes] == ["A:ch0", "A:ch1", "B:ch1", "B:ch2"]
    assert m.provenance["source"] == "merge" and m.provenance["complete"], m.provenance
    assert m.quiet_ticks is not None and m.quiet_ticks >= 100_000
    ma = Measurement.load(_saved(pa, tmp_path / "a.json"))
    mb = Measurement.load(_saved(pb, tmp_path / "b.json"))
    shift = m.provenance["merge"]["start_shift_ticks"]
    for merged, (board, ch) in enumerate(m.provenance["merge"]["lines"]):
        own = ma if board == "A" else mb
        # Counts, histograms and widths are the board's own.
        assert m.counts[merged] == own.counts[ch]
        assert list(m.pulses[merged]) == list(own.pulses[ch])
        starts = np.asarray(m.pulse_starts[merged], dtype=np.int64) - shift
        own_starts = np.asarray(own.pulse_starts[ch], dtype=np.int64)
        if board == "A":
            assert (starts == own_starts).all()
        else:
            # B's starts on A's time line: the true map of the two fake clocks.
            truth = stim_a + (own_starts - stim_b) / (1 + PPM * 1e-6) + OFFSET
            assert np.abs(starts - truth).max() <= 3
    # The snapshot series holds every line, on one time line.
    assert len(m.snapshots) > 40
    assert [c.classes for c in m.snapshots[-1].counts] == [c.classes for c in m.counts]


def _saved(capture, path):
    assert cli.main(["analyze", str(capture), "--geometry", "ssd-v", "--save-measurement",
                     str(path), "--json"]) in (0, 1)
    return path


def test_the_merged_wa_is_the_union_recordings(rig, tmp_path, capsys):
    (pa, sa, _), (pb, sb, _), (pu, _, _) = rig["A"], rig["B"], rig["U"]
    merged = merge_captures(MergeRequest((MergeInput(str(pa), sa), MergeInput(str(pb), sb))))
    m = merged.measurement
    union = Measurement.load(_saved(pu, tmp_path / "u.json"))
    g = load_geometry("ssd-v")
    logical = from_bytes(200 << 20)
    assert [c.classes for c in m.counts] == [c.classes for c in union.counts]
    # The same pulses in every class; B's widths are its own clock's (80 ppm fast, so a width
    # may differ by a tick from the union device's), which moves the WA by parts in 10^8.
    for classifier in ("windows", "auto"):
        got = wa_of(m, g, logical, classifier=classifier).wa
        want = wa_of(union, g, logical, classifier=classifier).wa
        assert got.value == pytest.approx(want.value, rel=1e-6)
        assert (got.lo, got.hi) == pytest.approx((want.lo, want.hi), rel=1e-6)
    # And `rbscope analyze` reads the merged file as one four-line capture.
    out = tmp_path / "m.json"
    m.save(out)
    a = analyse(AnalysisRequest(str(out), g, logical))
    assert len(a.measurement.enabled) == 4 and a.result.wa.value == pytest.approx(
        wa_of(union, g, logical).wa.value, rel=1e-6)
    assert cli.main(["analyze", str(out), "--geometry", "ssd-v", "--logical", "200MiB"]) == 0
    text = capsys.readouterr().out
    assert "(merge): 4 line(s)" in text and "B:ch2" in text


# ---- synthetic captures: the matching and its refusals ------------------------------------------

P = SnifferParams(channels=2)


def synthetic(path, sync, *, clock_hz=1_000_000, prescaler=1, windows=(150, 2300), epoch=1,
              drive=((1000, 300),)):
    """A capture of a 2-channel device: channel 1 recorded ``sync`` ([(start, width)] in
    ticks), channel 0 the ``drive`` pulses; a snapshot before and after."""
    records = sorted([(s + w, 1, w) for s, w in sync] + [(s + w, 0, w) for s, w in drive])
    end = (records[-1][0] if records else 0) + 1000

    def row(n):
        r = [0] * P.counters_per_channel
        r[P.classes + Counter.UNCLASSIFIED] = n
        return r

    path.unlink(missing_ok=True)  # (a writer appends to an existing capture)
    with CaptureWriter(path, meta={"port": "synthetic"}) as w:
        w.raw_frame(frame_bytes(FrameType.INFO, encode_payload(
            None, FrameType.INFO, info_values(P, clock_hz=clock_hz, prescaler=prescaler))),
            time_ns=1)
        w.config({"PRESCALER": prescaler, "WINDOW_1_LO": windows[0], "WINDOW_1_HI": windows[1],
                  "CHANNEL_ENABLE": 3, "TRACE_ENABLE": 1}, time_ns=2)
        for n, (ts, counts) in enumerate(((0, (0, 0)), (end, (len(drive), len(sync))))):
            w.raw_frame(frame_bytes(FrameType.STATUS, encode_payload(P, FrameType.STATUS, {
                "snapshot": n, "timestamp": ts, "epoch": epoch,
                "flags": int(StatusFlags.QUIESCENT | StatusFlags.TRACE_ON)}), n), time_ns=10)
            for ch in range(2):
                w.raw_frame(frame_bytes(FrameType.COUNTERS, encode_payload(
                    P, FrameType.COUNTERS, {
                        "snapshot": n, "channel": ch, "timestamp": ts, "epoch": epoch,
                        "counters": row(counts[ch])})), time_ns=10)
            if n == 0:
                for ts_end, ch, width in records:
                    w.raw_frame(frame_bytes(FrameType.TRACE, encode_payload(
                        P, FrameType.TRACE, {"channel": ch, "kind": int(EventKind.END),
                                             "index": 0, "width": width,
                                             "timestamp": ts_end})), time_ns=20)
        w.event("stop", reason="quiescent", time_ns=30)


#: 60 pulses of the default (full-size) train, in 1 µs ticks.
TRAIN = sync_train(SyncTrainParams(1), 60)


def on_b(pulses, offset=5_000_000, ppm=-30.0, jitter=0, seed=1):
    rng = np.random.default_rng(seed)
    f = 1 + ppm * 1e-6
    return [(round((s + offset) * f + rng.integers(-jitter, jitter + 1)), round(w * f))
            for s, w in pulses]


def merge_two(tmp_path, a, b, **request):
    synthetic(tmp_path / "a.rbcap", a)
    synthetic(tmp_path / "b.rbcap", b)
    return merge_captures(MergeRequest((MergeInput(str(tmp_path / "a.rbcap"), 1),
                                        MergeInput(str(tmp_path / "b.rbcap"), 1)), **request))


def test_a_lost_or_extra_pulse_at_the_ends_and_a_record_gap_cost_only_their_pulses(tmp_path):
    # A lost the first two pulses (its capture started late); B lost its last and ten in a row
    # in the middle (a gap in its records) and saw a glitch on the line.
    a = TRAIN[2:]
    b = on_b(TRAIN[:-1])
    b = b[:20] + b[30:]
    b.insert(5, (b[5][0] - 3000, 60))
    fit = merge_two(tmp_path, a, b).fits[1]
    assert fit.paired == 60 - 2 - 1 - 10
    assert fit.unpaired == 1 and fit.reference_unpaired == 10
    assert fit.rate_ppm == pytest.approx(-30, abs=1)
    assert fit.skew_max_ticks <= 2.5


def test_the_skew_limit_refuses_a_noisy_sync_line(tmp_path):
    with pytest.raises(MergeError, match=r"b: residual skew [\d.]+ ticks .* above the limit of "
                                         r"4 ticks"):
        merge_two(tmp_path, TRAIN, on_b(TRAIN, jitter=40))
    fit = merge_two(tmp_path, TRAIN, on_b(TRAIN, jitter=40), max_skew_ticks=200).fits[1]
    assert 4 < fit.skew_max_ticks <= 160 and fit.skew_rms_ticks < fit.skew_max_ticks


def test_no_sync_pulses_is_refused(tmp_path):
    with pytest.raises(MergeError, match=r"b: 0 sync pulse\(s\) in b's capture, fewer than "
                                         r"the 8"):
        merge_two(tmp_path, TRAIN, [])


def test_a_sync_train_that_does_not_match_is_refused(tmp_path):
    other = sync_train(SyncTrainParams(1, seed=0x1234567), 60)
    with pytest.raises(MergeError, match="b: the sync pulses do not match the reference's"):
        merge_two(tmp_path, TRAIN, on_b(other))


def test_a_train_that_matches_in_two_places_is_refused(tmp_path):
    # B's generator was reset half-way: its train starts again from the seed, later in time,
    # while A recorded the first run only; each window of B matches A at two alignments.
    restart = TRAIN[-1][0] + 200_000
    b = on_b(TRAIN[:30]) + on_b([(s + restart, w) for s, w in TRAIN[:30]])
    with pytest.raises(MergeError, match="b: the sync train is ambiguous: it matches the "
                                         "reference at two alignments"):
        merge_two(tmp_path, TRAIN, b)


def test_a_rate_beyond_the_limit_is_refused(tmp_path):
    with pytest.raises(MergeError, match=r"b: its clock runs \+3,000\.\d ppm against a's, "
                                         r"more than the 2000 ppm allowed"):
        merge_two(tmp_path, TRAIN, on_b(TRAIN, ppm=3000), max_ppm=2000, max_skew_ticks=1e9)


def test_different_ticks_or_windows_are_refused(tmp_path):
    synthetic(tmp_path / "a.rbcap", TRAIN)
    synthetic(tmp_path / "b.rbcap", on_b(TRAIN), clock_hz=2_000_000)
    inputs = (MergeInput(str(tmp_path / "a.rbcap"), 1), MergeInput(str(tmp_path / "b.rbcap"), 1))
    with pytest.raises(MergeError, match="b counts in ticks of 500 ns and a in ticks of 1000 ns"):
        merge_captures(MergeRequest(inputs))
    synthetic(tmp_path / "b.rbcap", on_b(TRAIN), windows=(100, 2300))
    with pytest.raises(MergeError, match="b's class windows or glitch filter differ from a's"):
        merge_captures(MergeRequest(inputs))


def test_corrupt_and_damaged_captures(tmp_path, capsys):
    synthetic(tmp_path / "a.rbcap", TRAIN)
    (tmp_path / "b.rbcap").write_bytes(b"not a capture at all")
    argv = ["merge", str(tmp_path / "a.rbcap"), str(tmp_path / "b.rbcap"), "--sync-channel", "1",
            "-o", str(tmp_path / "m.json")]
    assert cli.main(argv) == cli.EXIT_FAILURE
    assert "b: " in capsys.readouterr().err and not (tmp_path / "m.json").exists()
    # A corrupt record in the middle: skipped, and the merge says the result is incomplete.
    synthetic(tmp_path / "b.rbcap", on_b(TRAIN))
    data = bytearray((tmp_path / "b.rbcap").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "b.rbcap").write_bytes(bytes(data))
    assert cli.main(argv) == 0
    m = Measurement.load(tmp_path / "m.json")
    assert not m.provenance["complete"]
    assert any(x.startswith("b: ") and "corrupt" in x for x in m.provenance["missing"])
    assert "b: incomplete capture" in capsys.readouterr().out
    # `analyze` tells them too.
    _, notes = open_measurement(str(tmp_path / "m.json"))
    assert any(n.startswith("b: incomplete capture") for n in notes)


def test_usage_errors(tmp_path, capsys):
    synthetic(tmp_path / "a.rbcap", TRAIN)
    synthetic(tmp_path / "b.rbcap", on_b(TRAIN))
    base = ["merge", str(tmp_path / "a.rbcap"), str(tmp_path / "b.rbcap"), "-o",
            str(tmp_path / "m.json")]
    assert cli.main(base) == cli.EXIT_USAGE  # no --sync-channel
    assert "--sync-channel" in capsys.readouterr().err
    assert cli.main([*base, "--sync-channel", "c:1"]) == cli.EXIT_USAGE
    assert "no capture is called 'c'" in capsys.readouterr().err
    assert cli.main([*base, "--sync-channel", "9"]) == cli.EXIT_FAILURE
    assert "sync channel 9 is not one of its channels 0 … 1" in capsys.readouterr().err
    # Two captures of one name (in two folders) are named by their position.
    (tmp_path / "other").mkdir()
    synthetic(tmp_path / "other" / "a.rbcap", on_b(TRAIN))
    assert cli.main(["merge", str(tmp_path / "a.rbcap"), str(tmp_path / "other" / "a.rbcap"),
                     "--sync-channel", "1:1", "--sync-channel", "2:1", "-o",
                     str(tmp_path / "m.json")]) == 0
    assert Measurement.load(tmp_path / "m.json").provenance["merge"]["lines"] == [["1", 0],
                                                                                   ["2", 0]]

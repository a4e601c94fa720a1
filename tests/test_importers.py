"""VCD and sigrok importers: through the bit-exact model, against files made by sigrok-cli."""

import io
import json
import random
import shutil
import subprocess
import zipfile

import pytest

from rbscope.analysis.measurement import Measurement
from rbscope.cli import commands as cli
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY, SnifferModel, Train
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams
from rbscope.recordings.sigrok import import_sr
from rbscope.recordings.stream import RecordingError, parse_time
from rbscope.recordings.vcd import default_clock, import_vcd, write_vcd

NAMES = ("cache", "read", "program", "erase")
WINDOWS = ((1, 3), (3, 20), (20, 400), (400, 800))

sigrok = pytest.mark.skipif(shutil.which("sigrok-cli") is None,
                            reason="sigrok-cli not installed (make bootstrap installs it)")


def setup(channels, windows=WINDOWS, glitch=2):
    params = SnifferParams(channels=channels)
    seen = {}

    def params_for(n):
        assert n == channels
        return params

    def preset_config(p, tick, prescaler):
        seen["tick"], seen["prescaler"] = tick, prescaler
        cfg = SnifferConfig(prescaler=prescaler, glitch_ticks=glitch, windows=windows,
                            idle_ticks=50)
        return cfg, NAMES

    return params, dict(params_for=params_for, preset_config=preset_config), seen


def resample(trains, n):
    """What a sampler with period ``n`` sees: the level at the end of [c·n, (c+1)·n)."""
    out = []
    for t in trains:
        edges = {}
        for cycle, level in t.edges:
            edges[cycle // n] = level
        initial = edges.pop(0, t.initial)  # the level of cycle 0 is the level before it
        out.append(Train(initial, sorted(edges.items())))
    return out


def model_counts(trains, params, prescaler, cycles):
    cfg = SnifferConfig(prescaler=prescaler, glitch_ticks=2, windows=WINDOWS, idle_ticks=50)
    return SnifferModel(params, cfg).run(trains, cycles + SYNC_LATENCY).channels


@pytest.fixture(scope="module")
def trains():
    spec = TrainSpec(channels=4, cycles=120_000, low_at_reset=frozenset({2}), glitch_rate=0.2,
                     gap=(1, 400))
    return random_trains(spec, seed=11)


@pytest.mark.parametrize("clock, tick, one_line", [(1, None, False), (7, None, True),
                                                   (5, 15, False)])
def test_vcd_import_equals_model(tmp_path, trains, clock, tick, one_line):
    path = tmp_path / "t.vcd"
    with open(path, "w") as f:
        write_vcd(f, trains, end=120_000, one_line=one_line)
    params, kw, seen = setup(4)
    m = import_vcd(path, clock=clock * 1e-9, tick=tick and tick * 1e-9, **kw)
    prescaler = (tick or clock) // clock
    expected = model_counts(resample(trains, clock), params, prescaler, 120_000 // clock)
    assert m.counts == expected
    assert seen["prescaler"] == prescaler
    assert m.tick_seconds == pytest.approx((tick or clock) * 1e-9)
    if clock == 1:
        assert m.counts[2].partial == 1  # busy at reset
        assert sum(c.glitch for c in m.counts) > 0  # 1-cycle ringing
    # Per-pulse widths are the END events' widths, so the program class can be recounted.
    lo, hi = WINDOWS[2]
    assert sum(lo <= w < hi for w in m.pulses[0]) == m.counts[0].classes[2]


def test_vcd_snapshots_equal_truncated_runs(tmp_path, trains):
    path = tmp_path / "t.vcd"
    with open(path, "w") as f:
        write_vcd(f, trains, end=120_000)
    params, kw, _ = setup(4)
    m = import_vcd(path, clock=1e-9, snapshot_seconds=25e-6, **kw)
    assert [s.timestamp for s in m.snapshots] == [25_000, 50_000, 75_000, 100_000]
    cfg = SnifferConfig(prescaler=1, glitch_ticks=2, windows=WINDOWS, idle_ticks=50)
    for snap in m.snapshots:
        ref = SnifferModel(params, cfg).run(trains, snap.timestamp).channels
        for got, want in zip(snap.counts, ref, strict=True):
            assert (got.classes, got.partial, got.glitch, got.busy_ticks) == \
                (want.classes, want.partial, want.glitch, want.busy_ticks)


@sigrok
@pytest.mark.parametrize("downsample", [1, 13])
def test_sigrok_cli_session_equals_model_and_vcd(tmp_path, trains, downsample):
    vcd = tmp_path / "t.vcd"
    with open(vcd, "w") as f:
        write_vcd(f, trains, end=120_000)
    sr = tmp_path / "t.sr"
    subprocess.run(["sigrok-cli", "-I", f"vcd:downsample={downsample}", "-i", str(vcd),
                    "-o", str(sr)], check=True, capture_output=True, timeout=60)
    with zipfile.ZipFile(sr) as z:
        assert "metadata" in z.namelist()
    params, kw, _ = setup(4)
    s = import_sr(sr, **kw)
    cycles = s.provenance["cycles"]
    assert cycles == 120_000 // downsample
    assert s.tick_seconds == pytest.approx(downsample * 1e-9, rel=1e-6)
    expected = model_counts(resample(trains, downsample), params, 1, cycles)
    assert s.counts == expected
    v = import_vcd(vcd, clock=downsample * 1e-9, **setup(4)[1])
    assert v.counts == s.counts
    assert s.provenance["signals"] == ["rb0", "rb1", "rb2", "rb3"]


@sigrok
def test_sigrok_written_vcd_imports_like_the_session(tmp_path, trains):
    vcd = tmp_path / "t.vcd"
    with open(vcd, "w") as f:
        write_vcd(f, trains, end=120_000)
    sr = tmp_path / "t.sr"
    subprocess.run(["sigrok-cli", "-I", "vcd:downsample=10", "-i", str(vcd), "-o", str(sr)],
                   check=True, capture_output=True, timeout=60)
    back = tmp_path / "back.vcd"
    subprocess.run(["sigrok-cli", "-i", str(sr), "-O", "vcd", "-o", str(back)], check=True,
                   capture_output=True, timeout=60)
    text = back.read_text()
    assert "$timescale 10 ns $end" in text or "$timescale 10ns $end" in text
    s = import_sr(sr, **setup(4)[1])
    v = import_vcd(back, clock=10e-9, **setup(4)[1])  # one sample per clock
    assert v.counts == s.counts


def test_sr_tick_prescaler_and_selection(tmp_path):
    # A hand-made session: 2 probes, unitsize 1, 1 MHz; probe 2 pulses low for 50 samples.
    samples = bytes([3] * 10 + [1] * 50 + [3] * 40)
    sr = tmp_path / "h.sr"
    with zipfile.ZipFile(sr, "w") as z:
        z.writestr("version", "2")
        z.writestr("metadata", "[device 1]\ncapturefile=logic-1\ntotal probes=2\n"
                               "samplerate=1 MHz\nprobe1=A\nprobe2=B\nunitsize=1\n")
        z.writestr("logic-1-1", samples[:33])
        z.writestr("logic-1-2", samples[33:])
    params, kw, seen = setup(1, windows=((5, 30),))
    m = import_sr(sr, signals=["B"], tick=2e-6, **kw)
    assert seen["prescaler"] == 2
    # 50 cycles low from cycle 10 (+2 sync): ticks fall on odd cycles -> 25 ticks.
    assert m.counts[0].classes[0] == 1 and m.counts[0].busy_ticks == 25
    assert list(m.pulses[0]) == [25]
    with pytest.raises(RecordingError, match="no probe 'C' \\(probes: A, B\\)"):
        import_sr(sr, signals=["C"], **setup(1)[1])
    with pytest.raises(RecordingError, match="not a whole multiple of the sample period"):
        import_sr(sr, signals=["B"], tick=1.5e-6, **setup(1)[1])


@pytest.mark.parametrize("members, message", [
    ({"version": "2"}, "no 'metadata' member"),
    ({"metadata": "[device 1]\ncapturefile=logic-1\ntotal probes=1\nsamplerate=fast\n"
                  "unitsize=1\n", "logic-1-1": b"\x00"}, "samplerate 'fast' is not a freq"),
    ({"metadata": "[device 1]\ncapturefile=logic-1\ntotal probes=9\nsamplerate=1 MHz\n"
                  "unitsize=1\n"}, "unitsize 1 and total probes 9 are inconsistent"),
    ({"metadata": "[device 1]\ncapturefile=logic-1\ntotal probes=9\nsamplerate=1 MHz\n"
                  "probe1=a\nunitsize=2\n", "logic-1-1": b"\x00\x00\x00"},
     "3 bytes, not a whole number of 2-byte samples \\(offset 2 is partial\\)"),
])
def test_malformed_sessions(tmp_path, members, message):
    sr = tmp_path / "bad.sr"
    with zipfile.ZipFile(sr, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(RecordingError, match=message):
        import_sr(sr, **setup(1)[1])
    (tmp_path / "nozip.sr").write_text("hello")
    with pytest.raises(RecordingError, match="not a zip archive"):
        import_sr(tmp_path / "nozip.sr", **setup(1)[1])


# sigrok sessions made by sigrok-cli: chunk boundaries, wide samples, no edges, damage ----------


def _session(tmp_path, trains, end, name="s"):
    """The session ``sigrok-cli`` makes of ``trains`` (1 ns cycles, one sample per cycle)."""
    vcd = tmp_path / f"{name}.vcd"
    with open(vcd, "w") as f:
        write_vcd(f, trains, end=end)
    sr = tmp_path / f"{name}.sr"
    subprocess.run(["sigrok-cli", "-I", "vcd:downsample=1", "-i", str(vcd), "-o", str(sr)],
                   check=True, capture_output=True, timeout=60)
    return vcd, sr


def _import_chunked(monkeypatch, sr, chunk, **kw):
    """Import ``sr`` reading ``chunk`` bytes at a time; also return every edge fed."""
    from rbscope.recordings import sigrok as sr_mod

    monkeypatch.setattr(sr_mod, "CHUNK", chunk)
    edges = []
    m = import_sr(sr, on_edge=lambda *e: edges.append(e), **kw)
    return m, edges


@sigrok
def test_sr_edges_at_chunk_boundaries(tmp_path, monkeypatch):
    # Reading 256 samples at a time: edges on the first and the last sample of a chunk, on two
    # consecutive chunk starts, a one-sample pulse across a boundary, every line at once on a
    # boundary; then the random trains besides, read 1, 7, 256 and 4 MiB samples at a time.
    b = 256
    made = [Train(1, [(b, 0), (2 * b - 1, 1), (2 * b, 0), (3 * b, 1), (5 * b, 0), (5 * b + 1, 1)]),
            Train(1, [(b - 1, 0), (b, 1), (4 * b, 0), (4 * b + 40, 1), (6 * b, 0)]),
            Train(0, [(b, 1), (3 * b - 1, 0), (3 * b, 1), (6 * b, 0), (6 * b + 100, 1)]),
            Train(1, [(6 * b, 0), (7 * b - 1, 1)])]
    end = 8 * b
    _, sr = _session(tmp_path, made, end)
    params, kw, _ = setup(4)
    want_edges = sorted((c, ch, lv) for ch, t in enumerate(made) for c, lv in t.edges)
    runs = [_import_chunked(monkeypatch, sr, chunk, **kw) for chunk in (1 << 22, b, b + 1, 7, 1)]
    for m, edges in runs:
        assert sorted(edges) == want_edges
        assert m.counts == model_counts(made, params, 1, end)
        assert m.provenance["edges"] == len(want_edges) and m.provenance["cycles"] == end
        assert m.pulses == runs[0][0].pulses
        assert (m.quiet_ticks, m.may_drop) == (runs[0][0].quiet_ticks, runs[0][0].may_drop)
    trains = random_trains(TrainSpec(channels=4, cycles=30_000, low_at_reset=frozenset({1}),
                                     glitch_rate=0.2, gap=(1, 300)), seed=5)
    _, sr = _session(tmp_path, trains, 30_000, "random")
    ref = model_counts(resample(trains, 1), params, 1, 30_000)
    runs = [_import_chunked(monkeypatch, sr, chunk, snapshot_seconds=7e-6, **kw)
            for chunk in (1 << 22, b, 7)]
    for m, edges in runs:
        assert m.counts == ref
        assert edges == runs[0][1]
        assert m.pulses == runs[0][0].pulses
        assert [(p.timestamp, p.counts) for p in m.snapshots] == \
            [(p.timestamp, p.counts) for p in runs[0][0].snapshots]


@sigrok
@pytest.mark.parametrize("lines, unitsize, picked", [(12, 2, [9, 11, 2, 8]),
                                                     (20, 3, [17, 9, 19, 0])])
def test_sr_wide_samples_lines_beyond_the_first_byte(tmp_path, monkeypatch, lines, unitsize,
                                                     picked):
    # More than eight lines make sigrok-cli write wider samples: import lines of the later bytes
    # (and one of the first), at chunk sizes that are and are not whole samples.
    trains = random_trains(TrainSpec(channels=lines, cycles=20_000, glitch_rate=0.1,
                                     low_at_reset=frozenset({picked[0]}), gap=(1, 300)), seed=3)
    vcd, sr = _session(tmp_path, trains, 20_000)
    with zipfile.ZipFile(sr) as z:
        assert f"unitsize={unitsize}" in z.read("metadata").decode()
    chosen = [trains[i] for i in picked]
    params, kw, _ = setup(4)
    ref = model_counts(resample(chosen, 1), params, 1, 20_000)
    names = [f"rb{i}" for i in picked]
    for chunk in (1 << 22, 255, 64):
        m, edges = _import_chunked(monkeypatch, sr, chunk, signals=names, **kw)
        assert m.provenance["unitsize"] == unitsize and m.provenance["signals"] == names
        assert m.counts == ref
        assert sorted(edges) == sorted((c, ch, lv) for ch, t in enumerate(resample(chosen, 1))
                                       for c, lv in t.edges)
    v = import_vcd(vcd, signals=names, clock=1e-9, **setup(4)[1])
    assert v.counts == m.counts


@sigrok
def test_sr_recording_without_edges(tmp_path, monkeypatch):
    # One line high throughout, one low throughout (never a pulse: its end is not seen).
    lines = [Train(1, []), Train(0, [])]
    _, sr = _session(tmp_path, lines, 3000)
    params, kw, _ = setup(2)
    for chunk in (1 << 22, 100):
        m, edges = _import_chunked(monkeypatch, sr, chunk, **kw)
        assert edges == [] and m.provenance["edges"] == 0 and m.provenance["cycles"] == 3000
        assert m.counts == model_counts(lines, params, 1, 3000)
        assert sum(m.counts[0].classes) == sum(m.counts[1].classes) == 0
        assert m.provenance["initial"] == [1, 0]
        assert m.quiet_ticks == 0  # a line is low
    _, sr = _session(tmp_path, [Train(1, [])], 3000, "high")
    m = import_sr(sr, **setup(1)[1])
    assert m.quiet_ticks == m.duration_ticks == 3000 + SYNC_LATENCY


def _member_data(path, member):
    """(offset, size) of the compressed bytes of ``member`` in the zip file ``path``."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    raw = path.read_bytes()
    h = info.header_offset
    name_len = int.from_bytes(raw[h + 26:h + 28], "little")
    extra_len = int.from_bytes(raw[h + 28:h + 30], "little")
    return h + 30 + name_len + extra_len, info.compress_size


@sigrok
@pytest.mark.parametrize("member, damage, message", [
    ("logic-1-1", "block", "member logic-1-1 is corrupt \\(reading its bytes 0 to 120000 of "
                           "120000\\): Error -3 while decompressing data: invalid block type"),
    ("logic-1-1", "flip", "member logic-1-1 is corrupt \\(reading its bytes 0 to 120000 of "
                          "120000\\): (Bad CRC-32|Error -3)"),
    ("logic-1-1", "zeros", "member logic-1-1 is corrupt \\(reading its bytes 0 to 120000 of "
                           "120000\\): Bad CRC-32"),
    ("logic-1-1", "cut", "not a zip archive"),
    ("metadata", "zeros", "member metadata is corrupt: (Bad CRC-32|Error -3)"),
])
def test_sr_damaged_member_is_a_recording_error(tmp_path, trains, member, damage, message):
    _, sr = _session(tmp_path, trains, 120_000)
    start, size = _member_data(sr, member)
    raw = bytearray(sr.read_bytes())
    assert size > 16
    if damage == "block":  # the first deflate block of a reserved type (BTYPE 11)
        raw[start] |= 0b110
    elif damage == "flip":  # bytes in the middle of the deflate stream
        raw[start + size // 2:start + size // 2 + 8] = b"\xff" * 8
    elif damage == "zeros":  # the second half lost (zeros where it was)
        raw[start + size // 2:start + size] = bytes(size - size // 2)
    else:  # the file cut short inside the member
        raw = raw[:start + size // 2]
    sr.write_bytes(bytes(raw))
    with pytest.raises(RecordingError, match=message):
        import_sr(sr, **setup(4)[1])


VARIANTS = """$date today $end
$version hand-written $end
$timescale {ts} $end
$scope module top $end
$scope module die0 $end
$var wire 1 ! rb $end
$upscope $end
$scope module die1 $end
$var wire 1 " rb $end
$var wire 4 # bus [3:0] $end
$var real 64 % vref $end
$upscope $end
$upscope $end
$enddefinitions $end
$comment a comment
spanning lines $end
#0
$dumpvars
1!
z"
b1111 #
r3.3 %
$end
#100 0! b1101 #
#150
x"
#200
0"
#400 1! r1.0 %
b1111
#
#1000
1"
#1200
"""


def test_vcd_variants_scopes_xz_vectors(tmp_path):
    path = tmp_path / "v.vcd"
    path.write_text(VARIANTS.format(ts="100 ps"))
    # Lines: die0.rb low [100, 400); die1.rb z=1, x held, low [200, 1000); bus[1] low [100, 400).
    params, kw, _ = setup(3, windows=((1, 100), (100, 1000)))
    m = import_vcd(path, signals=["die0.rb", "top.die1.rb", "bus[1]"], clock=1e-10, **kw)
    assert m.provenance["signals"] == ["top.die0.rb", "top.die1.rb", "top.die1.bus[1]"]
    assert [c.busy_ticks for c in m.counts] == [300, 800, 300]
    assert [c.classes[:2] for c in m.counts] == [[0, 1], [0, 1], [0, 1]]
    assert any("1 unknown (x)" in w for w in m.provenance["warnings"])
    # The same file in microseconds with x read as low: die1 is low from 150.
    path.write_text(VARIANTS.format(ts="1us"))
    m = import_vcd(path, signals=["die1.rb"], unknown="low", clock=1e-6, **setup(1)[1])
    assert m.counts[0].busy_ticks == 850
    # Default clock: the smallest multiple of the timescale >= 10 ns.
    assert default_clock(1e-10) == pytest.approx(1e-8) and default_clock(1e-6) == 1e-6
    # Default selection: every 1-bit variable.
    m = import_vcd(path, clock=1e-6, **setup(2)[1])
    assert m.provenance["signals"] == ["top.die0.rb", "top.die1.rb"]


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.replace("{ts}", "3 ns"), "line 3: \\$timescale '3ns' is not"),
    (lambda s: s.replace("#1000", "#10"), "line 32: timestamp #10 goes back in time"),
    (lambda s: s.replace("$enddefinitions $end", ""), "line 17: unexpected '#0' in the VCD h"),
    (lambda s: s.replace("b1111\n#\n", "b12 #\n"), "line 30: bad vector value 'b12'"),
    (lambda s: s.replace("#1200", "?what"), "line 34: unexpected '\\?what'"),
])
def test_malformed_vcd_names_the_line(tmp_path, mutate, message):
    path = tmp_path / "bad.vcd"
    path.write_text(mutate(VARIANTS).replace("{ts}", "1 ns"))
    with pytest.raises(RecordingError, match=message):
        import_vcd(path, signals=["die0.rb"], clock=1e-9, **setup(1)[1])


def test_vcd_selection_errors(tmp_path):
    path = tmp_path / "v.vcd"
    path.write_text(VARIANTS.format(ts="1 ns"))
    with pytest.raises(RecordingError, match="no signal 'nope'"):
        import_vcd(path, signals=["nope"], **setup(1)[1])
    with pytest.raises(RecordingError, match="is a 4-bit vector; select one bit as bus\\[i\\]"):
        import_vcd(path, signals=["bus"], **setup(1)[1])
    with pytest.raises(RecordingError, match="bit 9 is outside"):
        import_vcd(path, signals=["bus[9]"], **setup(1)[1])
    # A suffix that is not a bit range of the variable's size (an array index, as Amaranth
    # writes) stays part of the name.
    path.write_text(VARIANTS.format(ts="1 ns").replace("bus [3:0]", "mem [0]"))
    with pytest.raises(RecordingError, match=r"no signal 'bus\[1\]' .*top.die1.mem\[0\]"):
        import_vcd(path, signals=["bus[1]"], **setup(1)[1])
    with pytest.raises(RecordingError, match="not a whole multiple of"):
        import_vcd(path, signals=["die0.rb"], clock=1.5e-9, **setup(1)[1])


def test_parse_time():
    assert parse_time("10ns") == pytest.approx(1e-8)
    assert parse_time("2.5 ms") == pytest.approx(2.5e-3)
    with pytest.raises(ValueError, match="needs a unit"):
        parse_time("10")


# CLI ------------------------------------------------------------------------------------------


def test_cli_analyze_vcd_json_and_saved_measurement(tmp_path, trains, capsys):
    vcd = tmp_path / "t.vcd"
    with open(vcd, "w") as f:  # one cycle of the trains = 1 µs, so the windows below apply
        write_vcd(f, trains, timescale="1 us", end=120_000)
    saved = tmp_path / "m.json"
    args = ["analyze", str(vcd), "--geometry", "ssd-v", "--clock", "1us",
            "--window", "cache=1:3", "--window", "read=3:20", "--window", "program=20:400",
            "--window", "erase=400:800", "--glitch", "1", "--logical", "1MB", "--json",
            "--save-measurement", str(saved), "-q", "--classifier", "windows"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    m = Measurement.load(saved)
    programs = sum(c.classes[m.class_index("program")] for c in m.counts)
    assert programs > 0
    assert out["program_pulses"]["value"] == pytest.approx(programs * 4 / 4)
    assert out["wa"]["value"] == pytest.approx(programs * 4096 / 1e6)
    assert cli.main(["analyze", str(saved), "--geometry", "ssd-v", "--logical", "1MB",
                     "--json", "--classifier", "windows"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["wa"] == out["wa"]
    # Human output carries the figures.
    assert cli.main(["analyze", str(saved), "--geometry", "ssd-v", "--logical", "1MB",
                     "--classifier", "windows"]) == 0
    text = capsys.readouterr().out
    assert "WRITE AMPLIFICATION" in text and f"{out['wa']['value']:.4f}" in text


def test_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.vcd"
    bad.write_text("$timescale 7 ns $end\n")
    assert cli.main(["analyze", str(bad), "--geometry", "ssd-v"]) == 1
    assert "$timescale" in capsys.readouterr().err
    assert cli.main(["analyze", str(bad)]) == 2  # no geometry
    assert "--geometry is required" in capsys.readouterr().err
    assert cli.main(["analyze", str(bad), "--geometry", "ssd-x"]) == 2
    assert cli.main(["analyze", str(bad), "--geometry", "ssd-v", "--window", "x"]) == 2
    assert "expected NAME=LO:HI" in capsys.readouterr().err


def test_write_vcd_round_trip_text():
    f = io.StringIO()
    write_vcd(f, [Train(1, [(5, 0), (9, 1)])], timescale="10 ns", one_line=True)
    assert f.getvalue().splitlines()[-3:] == ["#5 0!", "#9 1!", "#10"]


def test_cli_analyze_reads_capture_files(tmp_path, capsys):
    # A capture file as issue 3's device session writes it (their test helper), analysed through
    # capture_to_measurement: program class by name from the capture's config event.
    from .test_capture import _write_session

    path = tmp_path / "a.rbcap"
    _write_session(path)
    assert cli.main(["analyze", str(path), "--geometry", "ssd-v", "--logical", "32KiB",
                     "--json", "--classifier", "windows"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"]["source"] == "capture"
    # Two probed lines stand for SSD-v's 4 dies.
    programs = out["class_totals"]["program"]
    assert programs > 0
    assert out["program_pulses"]["value"] == pytest.approx(programs * 4 / 2)
    assert out["wa"]["value"] == pytest.approx(programs * 2 * 4096 / 32768)
    path.write_bytes(path.read_bytes()[:20])
    assert cli.main(["analyze", str(path), "--geometry", "ssd-v", "--format", "capture"]) == 1


@pytest.mark.parametrize("clock, tick, one_line, unknown", [
    (1, None, False, "hold"), (7, None, True, "hold"), (5, 15, False, "high"),
    (3, None, True, "low")])
def test_vcd_fast_path_equals_word_loop(tmp_path, trains, monkeypatch, clock, tick, one_line,
                                        unknown):
    """Small chunks send most of the file through the numpy path; big ones through the loop."""
    from rbscope.recordings import vcd as vcd_mod

    path = tmp_path / "t.vcd"
    with open(path, "w") as f:
        write_vcd(f, trains, end=120_000, one_line=one_line)
    text = path.read_text()
    # Unknown values and a comment in the middle exercise the fallbacks.
    lines = text.splitlines()
    body = next(i for i, line in enumerate(lines) if "$enddefinitions" in line) + 8
    lines.insert(body + 500, "x!")
    lines.insert(body + 900, "$comment mid-file $end")
    lines.insert(body + 5000, "X\"")
    path.write_text("\n".join(lines) + "\n")
    _, kw, _ = setup(4)
    scanned = []
    scan = vcd_mod._scan_scalars
    monkeypatch.setattr(vcd_mod, "_scan_scalars",
                        lambda text: scanned.append(scan(text) is not None) or scan(text))
    runs = []
    for chunk in (1 << 30, 500, 1024 + 7):
        monkeypatch.setattr(vcd_mod, "CHUNK", chunk)
        runs.append(import_vcd(path, clock=clock * 1e-9, tick=tick and tick * 1e-9,
                               unknown=unknown, snapshot_seconds=20e-6, **kw))
    assert sum(scanned) > 40 and not all(scanned)  # both paths ran
    ref = runs[0]
    for m in runs[1:]:
        assert m.counts == ref.counts
        assert m.pulses == ref.pulses
        assert [(s.timestamp, s.counts) for s in m.snapshots] == \
            [(s.timestamp, s.counts) for s in ref.snapshots]
        for key in ("edges", "cycles", "last_time", "warnings"):
            assert m.provenance[key] == ref.provenance[key], key
        assert (m.duration_ticks, m.quiet_ticks, m.may_drop) == \
            (ref.duration_ticks, ref.quiet_ticks, ref.may_drop)


def _scan_reference(data):
    """The VCD scanner's result computed word by word (the definition it must equal)."""
    ts, before, chars, keys = [], [], [], []
    for word in data.split():
        if word[:1] == b"#":
            if not word[1:].isdigit():
                return None
            ts.append(int(word[1:]))
        elif word[:1] in (b"0", b"1", b"x", b"X", b"z", b"Z") and 2 <= len(word) <= 8:
            before.append(len(ts) - 1)
            chars.append(word[0])
            keys.append(int.from_bytes(word[1:], "little"))
        else:
            return None
    return ts, before, chars, keys


@pytest.mark.parametrize("seed", range(6))
def test_vcd_scanner_equals_word_by_word(seed):
    """Line layout (LF), other whitespace (CRLF, tabs, spaces) and identifiers of 1-7 bytes,
    timestamps of 1-18 digits: the numpy scanner gives exactly the words' values, and gives up
    (None) on anything else."""
    import numpy as np

    from rbscope.recordings.vcd import _scan_scalars

    rng = np.random.default_rng(seed)
    idents = [bytes(rng.integers(33, 127, size=n).tolist()).replace(b"#", b"a")
              for n in rng.integers(1, 8, size=12)]
    words, t = [], int(rng.integers(0, 10 ** int(rng.integers(1, 17))))
    for _ in range(3000):
        if rng.random() < 0.4:
            t += int(rng.integers(0, 10 ** int(rng.integers(0, 4))))
            words.append(b"#%d" % t)
        else:
            words.append(bytes([b"01xXzZ"[int(rng.integers(6))]]) + idents[rng.integers(12)])
    seps = [b"\n", b"\r\n", b"\t", b" \n", b"\n\n"]
    sep = seps[seed % len(seps)]
    data = sep.join(words) + b"\n"
    got = _scan_scalars(data)
    ref = _scan_reference(data)
    assert got is not None
    assert [x.tolist() for x in got[:4]] == [ref[0], ref[1], ref[2], ref[3]]
    assert got[4] == data.count(b"\n")
    # Anything that is not a plain change or timestamp: the word loop decides.
    for bad in (b"#12a", b"#1_0", b"#0x10", b"b101 !", b"$comment", b"1", b"#", b"r1.5 !"):
        assert _scan_scalars(data + bad + b"\n") is None


def test_vcd_scanner_timestamps_of_every_length():
    """Timestamps of 1 to 18 digits (8 at a time up to 16, numpy's number reader beyond), with
    leading zeros, at the start of the data and anywhere in it; a byte next to the digits in
    ASCII (/ :), a byte above 0x7f or (up to 16 digits) a sign in one makes the scanner give
    up."""
    from rbscope.recordings.vcd import _scan_scalars

    # A chunk of changes without a timestamp (all at the time before it).
    got = _scan_scalars(b"1!\n0\"\nz!\n")
    assert [x.tolist() for x in got[:4]] == [[], [-1, -1, -1], [ord("1"), ord("0"), ord("z")],
                                             [ord("!"), ord('"'), ord("!")]]
    rng = random.Random(4)
    for top in (8, 16, 18):
        words = []
        for _ in range(400):
            n = rng.randint(1, top)
            digits = "".join(rng.choice("0123456789") for _ in range(n))
            words += [b"#" + digits.encode(), b"1!"]
        data = b"\n".join(words) + b"\n"
        got = _scan_scalars(data)
        assert got is not None
        assert got[0].tolist() == [int(w[1:]) for w in words[::2]]
        assert got[0].tolist() == _scan_reference(data)[0]
        # (numpy's number reader, for the longer timestamps, takes a sign: as int() does.)
        signs = (b"#-5", b"#+5") if top <= 16 else ()
        for bad in (b"#12/4", b"#12:4", b"#/", b"#:", b"#?", b"#1\xb05", *signs,
                    b"#" + b"1" * (top - 1) + b";"):
            assert _scan_scalars(bad + b"\n" + data) is None, bad
            assert _scan_scalars(data + bad + b"\n") is None, bad


def test_vcd_error_line_after_fast_chunks(tmp_path, trains, monkeypatch):
    """Errors name their line also after chunks the numpy scanner took."""
    from rbscope.recordings import vcd as vcd_mod

    path = tmp_path / "t.vcd"
    with open(path, "w") as f:
        write_vcd(f, trains, end=120_000)
    lines = path.read_text().splitlines()
    bad = len(lines) - 40
    lines.insert(bad, "#oops")
    path.write_text("\n".join(lines) + "\n")
    _, kw, _ = setup(4)
    for chunk in (1 << 30, 4096):
        monkeypatch.setattr(vcd_mod, "CHUNK", chunk)
        with pytest.raises(RecordingError, match=f"line {bad + 1}: bad timestamp"):
            import_vcd(path, clock=1e-9, **kw)

"""Classified-pulse VCD export: what GTKWave and PulseView show equals what the model counts, and
the export imports again to the same counts (directly, and through sigrok-cli)."""

import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from rbscope.analysis.presets import Preset
from rbscope.cli.commands import main
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.recordings.classified import export_classified_vcd, gtkwave_filter, timescale_for
from rbscope.recordings.sources import open_measurement
from rbscope.recordings.vcd import write_vcd
from tests.test_importers import VARIANTS

# One cycle of the recording is 1 µs so that the windows read in µs.
PRESET = Preset((("cache", 2.0, 12.0), ("read", 12.0, 150.0), ("program", 150.0, 1950.0),
                 ("erase", 1950.0, 12000.0)), glitch_us=2.0, name="test")


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    d = tmp_path_factory.mktemp("classified")
    trains = random_trains(TrainSpec(channels=3, cycles=300_000, gap=(1, 60), glitch_rate=0.1,
                                     low_at_reset=frozenset({1})), seed=5)
    path = d / "run.vcd"
    with open(path, "w") as f:
        write_vcd(f, trains, timescale="1 us", end=300_000)
    return path


def parse_vcd(path):
    """Return ({name: [(time, value)]}, timescale) of a simple VCD (ours)."""
    text = path.read_text()
    idents = dict(re.findall(r"\$var wire \d+ (\S+) (\S+) \$end", text))
    changes = {name: [] for name in idents.values()}
    t = 0
    body = text.split("$enddefinitions $end", 1)[1]
    for line in body.splitlines():
        if line.startswith("#"):
            t = int(line[1:])
        elif line.startswith("b"):
            value, ident = line[1:].split()
            changes[idents[ident]].append((t, int(value, 2)))
        elif line and line[0] in "01":
            changes[idents[line[1:]]].append((t, int(line[0])))
    scale = re.search(r"\$timescale (\S+) \$end", text).group(1)
    return changes, scale


def pulses_of(changes, value=None):
    """Count the rises to a non-zero value (of ``value`` if given)."""
    n, prev = 0, 0
    for _, v in changes:
        if v and not prev and (value is None or v == value):
            n += 1
        prev = v
    return n


@pytest.mark.parametrize("onehot", [False, True])
def test_export_codes_equal_the_model_counts_and_reimport(recording, tmp_path, onehot):
    m, _ = open_measurement(recording, preset=PRESET)
    out = tmp_path / "classes.vcd"
    result = export_classified_vcd(recording, out, preset=PRESET, onehot=onehot)
    changes, scale = parse_vcd(out)
    assert scale == "1us"
    k = m.params.classes
    for ch in range(3):
        c = m.counts[ch]
        expect = {n: c.classes[j] for j, n in enumerate(m.class_names) if n and c.classes[j]}
        if c.unclassified:
            expect["unclassified"] = c.unclassified
        assert result.counts[ch] == expect
        for code, name in result.codes.items():
            if onehot:
                assert pulses_of(changes[f"rb{ch}_{name}"]) == expect.get(name, 0), (ch, name)
                assert f"rb{ch}_class" not in changes
            else:
                assert pulses_of(changes[f"rb{ch}_class"], code) == expect.get(name, 0)
        # Partial pulses (line 1 starts busy) and glitches get no class.
        assert sum(expect.values()) == sum(c.classes) + c.unclassified
        assert k + 1 in result.codes
    # The recorded pins in the export import again to exactly the same counts.
    again, _ = open_measurement(out, preset=PRESET, signals=["rb0", "rb1", "rb2"])
    assert [c.classes for c in again.counts] == [c.classes for c in m.counts]
    assert [c.partial for c in again.counts] == [c.partial for c in m.counts]
    assert [c.glitch for c in again.counts] == [c.glitch for c in m.counts]
    assert [c.histogram for c in again.counts] == [c.histogram for c in m.counts]


def test_onehot_export_opens_in_sigrok(recording, tmp_path):
    assert shutil.which("sigrok-cli"), "sigrok-cli is not installed (make bootstrap installs it)"
    out = tmp_path / "classes.vcd"
    result = export_classified_vcd(recording, out, preset=PRESET, onehot=True)
    sr = tmp_path / "classes.sr"
    subprocess.run(["sigrok-cli", "-I", "vcd", "-i", str(out), "-o", str(sr)], check=True,
                   timeout=300, capture_output=True)
    # sigrok keeps every 1-bit signal as a logic channel: the pins and one per class.
    via_sigrok, _ = open_measurement(sr, preset=PRESET, signals=["rb0", "rb1", "rb2"])
    direct, _ = open_measurement(recording, preset=PRESET)
    assert [c.classes for c in via_sigrok.counts] == [c.classes for c in direct.counts]
    # A class channel read as an R/B# line (inverted: high = busy) has one pulse per pulse of
    # that class: count its rises in the sigrok session through our importer.
    name = "program"
    onehot, _ = open_measurement(sr, signals=[f"rb0_{name}"],
                                 preset=Preset((("read", 0.0, 1e9),), 0.0, name="any"))
    # Importer pulses are lows; a one-hot line is low between its pulses, so its measured lows
    # are the N - 1 gaps between this class's N pulses, plus the leading low (partial: the line
    # starts low); the trailing low lasts to the end and is never ended.
    c = onehot.counts[0]
    assert c.partial == 1 and c.unclassified == 0
    assert c.classes[0] + c.partial == result.counts[0][name]


def test_export_cli_and_gtkwave_filter(recording, tmp_path, capsys):
    out = tmp_path / "x.vcd"
    flt = tmp_path / "classes.txt"
    windows = [f"--window={n}={lo}:{hi}" for n, lo, hi in PRESET.windows]
    assert main(["export-vcd", str(recording), "-o", str(out), "--gtkwave-filter", str(flt),
                 "--glitch", "2", *windows]) == 0
    text = capsys.readouterr().out
    assert "rb0:" in text and "program" in text and f"written {out}" in text
    assert flt.read_text().splitlines()[:2] == ["0 -", "1 cache"]
    # Sources without single pulses are refused with a clear message.
    m, _ = open_measurement(recording, preset=PRESET)
    saved = tmp_path / "m.json"
    m.save(saved)
    assert main(["export-vcd", str(saved), "-o", str(tmp_path / "y.vcd")]) == 2
    assert "single pulses need a recording" in capsys.readouterr().err
    assert main(["export-vcd", str(recording), "-o", str(tmp_path / "no" / "y.vcd")]) == 1
    assert "cannot write" in capsys.readouterr().err


def test_timescale_for():
    assert timescale_for(1e-6) == ("1us", 1)
    assert timescale_for(10e-9) == ("10ns", 1)
    assert timescale_for(20e-9) == ("10ns", 2)
    assert timescale_for(1 / 24e6) == ("1fs", 41666667)
    with pytest.raises(ValueError):
        timescale_for(0)


def test_gtkwave_filter_names_codes():
    assert gtkwave_filter({1: "read", 6: "unclassified"}) == "0 -\n1 read\n6 unclassified\n"


def test_sigrok_protocol_decoder_counts_like_the_model(tmp_path):
    # The decoder runs inside the real sigrok-cli (libsigrokdecode) on a session made by sigrok
    # itself; with a 1 MHz sample rate and whole-µs windows its classes equal the model's.
    assert shutil.which("sigrok-cli"), "sigrok-cli is not installed (make bootstrap installs it)"
    trains = random_trains(TrainSpec(channels=1, cycles=200_000, gap=(1, 60), glitch_rate=0.1,
                                     low_at_reset=frozenset({0})), seed=9)
    vcd, sr = tmp_path / "r.vcd", tmp_path / "r.sr"
    with open(vcd, "w") as f:
        write_vcd(f, trains, timescale="1 us", end=200_000)
    subprocess.run(["sigrok-cli", "-I", "vcd", "-i", str(vcd), "-o", str(sr)], check=True,
                   timeout=300, capture_output=True)
    decoder_dir = subprocess.run([sys.executable, "-m", "rbscope.cli", "sigrok-decoder"],
                                 check=True, text=True, capture_output=True).stdout.strip()
    windows = "/".join(f"{n}={lo:g}-{hi:g}" for n, lo, hi in PRESET.windows)
    proc = subprocess.run(
        ["sigrok-cli", "-i", str(sr), "-P", f"rbscope_rb:rb=rb0:windows={windows}:glitch_us=2",
         "-A", "rbscope_rb"], check=True, text=True, capture_output=True, timeout=300,
        env={**os.environ, "SIGROKDECODE_DIR": decoder_dir})
    seen = Counter(line.split()[1] for line in proc.stdout.splitlines() if line.strip())
    m, _ = open_measurement(sr, preset=PRESET)
    c = m.counts[0]
    expect = {n: c.classes[j] for j, n in enumerate(m.class_names) if n and c.classes[j]}
    expect.update({k: v for k, v in (("unclassified", c.unclassified), ("glitch", c.glitch),
                                     ("partial", c.partial)) if v})
    assert c.partial == 1 and c.glitch > 0
    assert dict(seen) == expect


def test_export_round_trip_of_scopes_xz_and_other_timescales(tmp_path):
    # Nested scopes, a vector bit, x and z values and a 100 ps timescale in; the export names
    # the lines by their leaves and imports again to the same counts.
    src = tmp_path / "v.vcd"
    src.write_text(VARIANTS.format(ts="100 ps"))
    preset = Preset((("read", 0.001, 0.01), ("program", 0.01, 0.1)), glitch_us=0.0, name="t")
    opts = dict(preset=preset, signals=["die0.rb", "top.die1.rb", "bus[1]"], clock=1e-10)
    m, _ = open_measurement(src, **opts)
    out = tmp_path / "e.vcd"
    result = export_classified_vcd(src, out, **opts)
    changes, scale = parse_vcd(out)
    assert scale == "100ps"
    assert {"rb", "rb_1", "bus_1_", "rb_class", "rb_1_class", "bus_1__class"} <= set(changes)
    again, _ = open_measurement(out, preset=preset, signals=["rb", "rb_1", "bus_1_"],
                                clock=1e-10)
    assert [c.classes for c in again.counts] == [c.classes for c in m.counts]
    assert [c.busy_ticks for c in again.counts] == [c.busy_ticks for c in m.counts] == \
        [300, 800, 300]
    assert [sum(n.values()) for n in result.counts] == [1, 1, 1]

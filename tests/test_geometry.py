"""Geometry and classifier-preset files: the paper's drives, validation, tick conversion."""

import pytest

from rbscope.analysis.geometry import (
    GeometryError,
    example_geometries,
    geometry_toml,
    load_geometry,
    parse_geometry,
)
from rbscope.analysis.presets import DEFAULT_PRESET, Preset, format_preset, parse_toml
from rbscope.gateware.rb_sniffer.params import SnifferParams
from rbscope.refssd import PRESETS, preset

GOOD = """
name = "T"
[geometry]
channels = 2
chips_per_channel = 2
dies_per_chip = 2
planes_per_die = 4
page_size = 16384
program_model = "multi-plane"
[timing]
program = [500, 1500]
erase = 3000
[classifier.windows]
read = [10, 150]
program = [150, 2500]
"""


@pytest.mark.parametrize("name, dies, mp, op", [
    ("ssd-v", 4, 1, 0.143), ("ssd-i", 10, 1, 0.075), ("ssd-m", 16, 2, 0.074),
    ("ssd-s", 16, 2, 0.139)])
def test_paper_drives(name, dies, mp, op):
    # Table 2 of the RB-Explorer paper.
    g = load_geometry(name)
    assert g.dies == dies
    assert g.pages_per_pulse == mp
    assert g.over_provisioning == pytest.approx(op, abs=1e-3)
    assert g.page_size == 4096
    assert g.classifier.names[:4] == ("cache", "read", "program", "erase")
    assert set(example_geometries()) == {"ssd-v", "ssd-i", "ssd-m", "ssd-s"}


def test_parse_good_and_mp_from_model():
    g = parse_geometry(GOOD, "t.toml")
    assert (g.dies, g.pages_per_pulse, g.timing["erase"]) == (8, 4, (3000.0, 3000.0))
    assert g.classifier.windows == (("read", 10.0, 150.0), ("program", 150.0, 2500.0))
    assert g.die_locations()[-1] == (1, 1, 1)
    with pytest.raises(GeometryError, match=r"die \(2, 0, 0\) is not in T"):
        g.check_location((2, 0, 0))


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.replace("channels = 2", "channels = 0"), r"t.toml: geometry.channels must be"),
    (lambda s: s.replace("page_size = 16384\n", ""), r"geometry.page_size is missing"),
    (lambda s: s.replace('"multi-plane"', '"tri-plane"'), r"geometry.program_model must be"),
    (lambda s: s.replace("erase = 3000", "erase = [3, 1]"), r"timing.erase must have lo <= hi"),
    (lambda s: s.replace("read = [10, 150]", "read = [10, 5]"), r"classifier.windows.read"),
    (lambda s: s.replace('name = "T"', "name = 3"), r"t.toml: name must be a non-empty"),
    (lambda s: s + "\n[bogus]\n", r"top level has unknown key\(s\) bogus"),
    (lambda s: s.replace("[geometry]", "[geometry]\nplanes = 2"), r"\[geometry\] has unknown"),
    (lambda s: s.replace("channels = 2", "channels = "), r"t.toml: invalid TOML"),
])
def test_malformed_geometry_names_the_key(mutate, message):
    with pytest.raises(GeometryError, match=message):
        parse_geometry(mutate(GOOD), "t.toml")


def test_unknown_file_lists_bundled():
    with pytest.raises(GeometryError, match="bundled: ssd-i, ssd-m, ssd-s, ssd-v"):
        load_geometry("/nonexistent/drive.toml")


def test_preset_to_config_rounds_and_clamps():
    params = SnifferParams(channels=2, width_bits=16)  # MAX = 65535 ticks
    preset = Preset((("read", 10, 150), ("erase", 2000, 1e6)), glitch_us=0.5)
    config, names, notes = preset.to_config(params, 1e-7, prescaler=10)  # 0.1 µs ticks
    assert names == ("read", "erase")
    assert config.windows[:2] == ((100, 1500), (20000, 65535))
    assert config.windows[2:] == ((0, 0),) * 3
    assert config.glitch_ticks == 5 and config.prescaler == 10
    assert any("clamped" in n for n in notes)


def test_format_preset_round_trip():
    text = format_preset(DEFAULT_PRESET, ["made by a test"])
    assert text.startswith("# made by a test")
    back = parse_toml(text)["classifier"]
    assert (back.windows, back.glitch_us) == (DEFAULT_PRESET.windows, DEFAULT_PRESET.glitch_us)


def test_geometry_toml_reads_back_to_the_same_geometry():
    for name in PRESETS:
        g = preset(name).user_geometry()
        text = geometry_toml(g, ("a header", ""))
        assert text.startswith("# a header\n#\n")
        h = parse_geometry(text, name)
        assert h.to_dict() == g.to_dict(), name
        assert (h.timing, h.raw_bytes, h.user_bytes, h.description) == \
            (g.timing, g.raw_bytes, g.user_bytes, g.description), name
        if g.classifier is None:
            assert h.classifier is None
        else:
            assert [tuple(w) for w in h.classifier.windows] == \
                [tuple(w) for w in g.classifier.windows], name

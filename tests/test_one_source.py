"""One definition of each fact: registers <-> configuration, fixed counters, presets."""

import pytest
from amaranth.lib import data

from rbscope.analysis.presets import DEFAULT_PRESET, PRESETS, format_preset, load_toml, us_to_ticks
from rbscope.cli import commands as cli
from rbscope.gateware.link.protocol import (
    config_from_registers,
    register_map,
    register_values,
)
from rbscope.gateware.rb_sniffer.layouts import config_layout
from rbscope.gateware.rb_sniffer.model import FIXED_COUNTERS, ChannelCounts
from rbscope.gateware.rb_sniffer.params import Counter, SnifferConfig, SnifferParams


def _field_width(params, field):
    shape = config_layout(params)
    for part in field.split("."):
        shape = shape.elem_shape if part.isdigit() else shape[part].shape
    return data.Layout.cast(shape).size if isinstance(shape, data.Layout) else \
        data.Shape.cast(shape).width


@pytest.mark.parametrize("params", [SnifferParams(channels=1), SnifferParams(channels=40),
                                    SnifferParams(channels=64, classes=7, width_bits=20,
                                                  timestamp_bits=56)])
def test_register_widths_are_the_gateware_field_widths(params):
    for reg in register_map(params):
        if not reg.field.startswith(("link.", "emu.")):
            assert reg.bits == min(32, _field_width(params, reg.field) - reg.shift), reg.name


@pytest.mark.parametrize("channels", [1, 33, 64])
def test_config_register_round_trip(channels):
    params = SnifferParams(channels=channels)
    config = SnifferConfig(prescaler=65535, glitch_ticks=255,
                           windows=((1, 2), (3, (1 << 24) - 1)), idle_ticks=(1 << 48) - 1,
                           enable=(1 << channels) - 2).validate(params)
    values = register_values(params, config)
    assert config_from_registers(params, values) == config
    # The register map's reset values come from the same translation.
    resets = {r.name: r.reset for r in register_map(params, config=config)}
    assert all(resets[name] == value for name, value in values.items())


@pytest.mark.parametrize("registers, message", [
    ({"WINDOW_1_HI": 20_000_000}, r"WINDOW_1_HI holds 24 bit\(s\): 0 … 16777215, not 20000000"),
    ({"PRESCALER": 70000}, r"PRESCALER holds 16 bit"),
    ({"GLITCH_TICKS": None}, r"GLITCH_TICKS: a register value is an integer, not None"),
    ({"IDLE_TICKS_LO": [1]}, r"IDLE_TICKS_LO: a register value is an integer"),
    ({"CHANNEL_ENABLE_0": -1}, r"CHANNEL_ENABLE_0 holds"),
    ([("PRESCALER", 1)], r"must be a \{name: value\} object"),
])
def test_config_from_registers_refuses_what_does_not_fit(registers, message):
    with pytest.raises(ValueError, match=message):
        config_from_registers(SnifferParams(channels=2), registers)


def test_fixed_counters_follow_the_counter_enum():
    assert FIXED_COUNTERS == tuple(c.name.lower() for c in Counter)
    params = SnifferParams(channels=1)
    words = list(range(100, 100 + params.counters_per_channel))
    counts = ChannelCounts.from_row(params, words)
    assert counts.row(params)[:params.counters_per_channel] == words
    for c in Counter:
        assert counts.counter(c) == words[params.counter_index(c)]
    with pytest.raises(ValueError, match="has 11 words, not 3"):
        ChannelCounts.from_row(params, [1, 2, 3])


def test_one_us_to_ticks():
    assert us_to_ticks(150, 1e-7) == 1500
    assert us_to_ticks(0.01, 1e-6) == 0 and us_to_ticks(0.01, 1e-6, nonzero=True) == 1
    for bad in (-1, float("inf"), float("nan"), 10 ** 400, 1e308):
        with pytest.raises(ValueError, match="µs"):
            us_to_ticks(bad, 1e-7)


def test_the_file_calibrate_writes_configures_a_device(tmp_path, capsys):
    from rbscope.device.fake import FakeDevice
    path = tmp_path / "calibrated.toml"
    path.write_text(format_preset(DEFAULT_PRESET, ["rbscope calibrate run.sr"]))
    (preset,) = load_toml(path).values()
    assert preset.names == DEFAULT_PRESET.names
    params = SnifferParams(channels=2)
    with FakeDevice(params) as dev:
        assert cli.main(["configure", dev.path, "--from-toml", str(path)]) == 0
        config = dev.config
    tick = config.prescaler / 1_000_000
    assert config.windows[:4] == tuple(
        (us_to_ticks(lo, tick), us_to_ticks(hi, tick)) for _, lo, hi in DEFAULT_PRESET.windows)
    assert "preset calibrated" in capsys.readouterr().out


def test_builtin_presets_use_the_class_names():
    from rbscope.analysis.presets import CLASS_NAMES
    for preset in PRESETS.values():
        assert set(preset.names) <= set(CLASS_NAMES)
    assert set(DEFAULT_PRESET.names) <= set(CLASS_NAMES)


def test_measurement_open_reads_every_source(tmp_path):
    from rbscope.analysis.measurement import Measurement
    from rbscope.recordings.sources import SourceOptionError, open_source
    params = SnifferParams(channels=2)
    counts = [ChannelCounts.zeros(params) for _ in range(2)]
    counts[1].classes[1] = 42
    config = SnifferConfig(windows=((10, 100), (100, 3000)))
    saved = tmp_path / "m.json"
    Measurement(params, config, 1e-6, counts, ("read", "program")).save(saved)
    m = open_source(saved)
    assert m.counts[1].classes[1] == 42 and m.provenance["notes"] == []
    # A name without a suffix is recognised by its content.
    plain = tmp_path / "measurement"
    plain.write_bytes(saved.read_bytes())
    assert open_source(plain).counts[1].classes[1] == 42
    with pytest.raises(SourceOptionError, match="--tick is for VCD and sigrok recordings"):
        open_source(saved, tick=1e-6)
    vcd = tmp_path / "r.vcd"
    vcd.write_text("$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                   "#0\n1!\n#1000\n0!\n#300000\n1!\n#400000\n")
    m = open_source(vcd, probes=[(0, ((0, 0, 0),))])
    assert m.counts[0].classes[m.class_index("program")] == 1
    assert m.probes[0].dies == ((0, 0, 0),)

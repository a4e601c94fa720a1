"""Timing presets: conversion to registers, TOML user presets, overrides, validation."""

import pytest

from rbscope.analysis.presets import (
    PRESETS,
    Preset,
    PresetError,
    apply_overrides,
    get_preset,
    load_toml,
)
from rbscope.gateware.rb_sniffer.params import SnifferParams

P16 = SnifferParams(channels=16)


def test_builtin_families_present():
    assert {"mlc34nm", "micron25nm", "slc34nm", "agrawal_slc", "hubi_mlc", "samsung_k9",
            "tlc_mqsim"} <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("clock_hz", [12_000_000, 48_000_000, 100_000_000])
def test_presets_convert_for_real_clocks(name, clock_hz):
    preset = PRESETS[name]
    regs = preset.registers(P16, clock_hz)
    tick = regs["PRESCALER"] / clock_hz
    assert abs(tick - preset.tick_us * 1e-6) <= 0.5 / clock_hz
    program = preset.names.index("program")
    lo, hi = preset.window("program")
    assert regs[f"WINDOW_{program}_LO"] == round(lo * 1e-6 / tick)
    assert regs[f"WINDOW_{program}_HI"] == round(hi * 1e-6 / tick)
    config = preset.config(P16, clock_hz)
    # A typical program of the family is classified as a program.
    typical = (lo + hi) / 2 * 1e-6 / tick
    assert config.classify(int(typical)) == program
    assert regs["IDLE_TICKS_LO"] | regs["IDLE_TICKS_HI"] << 32 == round(300 / tick)


def test_window_too_long_for_the_width_counter():
    small = SnifferParams(channels=1, width_bits=16)
    with pytest.raises(PresetError, match=r"windows.erase\[1\] = 12000 µs .* choose a longer "
                                          r"tick_us"):
        PRESETS["mlc34nm"].registers(small, 100_000_000)


def test_prescaler_too_wide():
    p = SnifferParams(channels=1, prescaler_bits=8)
    with pytest.raises(PresetError, match="prescaler of 1000"):
        Preset(name="slow", tick_us=10).registers(p, 100_000_000)


def test_fewer_classes_than_the_preset_sets():
    with pytest.raises(PresetError, match="only 2 classes"):
        PRESETS["mlc34nm"].registers(SnifferParams(channels=1, classes=2), 48_000_000)


def test_toml_user_presets(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("""
[preset.tlc3d]
description = "3D TLC"
tick_us = 0.5
[preset.tlc3d.windows]
read = [40, 120]
program = [400, 3000]

[preset.derived]
base = "tlc3d"
idle_s = 60
[preset.derived.windows]
erase = [3000, 12000]
""")
    user = load_toml(f)
    assert user["tlc3d"].windows == (("read", 40, 120), ("program", 400, 3000))
    assert user["derived"].window("erase") == (3000, 12000)
    assert user["derived"].tick_us == 0.5 and user["derived"].idle_s == 60
    assert get_preset("derived", user) is user["derived"]


@pytest.mark.parametrize("text, message", [
    ('[preset.x]\ntick = 1\n', r"preset.x.tick is not a preset field; allowed: base, "),
    ('[preset.x.windows]\nprog = [1, 2]\n', r"preset.x.windows.prog is not a class; allowed: "
                                            r"read, program, erase, cache, reset"),
    ('[preset.x.windows]\nread = [5]\n', r"windows.read must be \[lo, hi\] in µs"),
    ('[preset.x.windows]\nread = [50, 5]\n', r"preset.x.windows.read lo 50 is not below hi 5"),
    ('[preset.x]\ntick_us = -1\n', r"tick_us must be a positive number"),
    ('[preset.x]\nbase = "zzz"\n', r"preset.x.base = 'zzz' is not a preset"),
    ('[presets.x]\n', r"unknown top-level key 'presets'"),
    ('[preset.x\n', r"p.toml: "),
])
def test_toml_validation_names_the_field(tmp_path, text, message):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(PresetError, match=message):
        load_toml(f)


def test_overrides():
    preset, regs = apply_overrides(PRESETS["slc34nm"], [
        "program=120:800", "tick_us=0.05", "WINDOW_4_LO=0x10"])
    assert preset.window("program") == (120, 800) and preset.tick_us == 0.05
    assert regs == {"WINDOW_4_LO": 16}
    for bad, msg in [("program", "NAME=VALUE"), ("program=1", "LO:HI"),
                     ("tick_us=fast", "number"), ("PRESCALER=x", "integers"),
                     ("colour=red", "allowed")]:
        with pytest.raises(PresetError, match=msg):
            apply_overrides(PRESETS["slc34nm"], [bad])


def test_unknown_preset_lists_the_names():
    with pytest.raises(PresetError, match="presets: agrawal_slc, hubi_mlc"):
        get_preset("nope")


def test_identify_recognises_a_preset_from_the_device_registers():
    from rbscope.analysis.presets import PRESETS, identify
    from rbscope.gateware.rb_sniffer import SnifferParams

    params = SnifferParams(channels=4)
    for preset in PRESETS.values():
        regs = preset.registers(params, 48_000_000)
        found = identify(params, 48_000_000, regs)
        # Two presets with identical registers are indistinguishable; either is right then.
        assert found is not None
        assert found.registers(params, 48_000_000) == regs
    regs = PRESETS["mlc34nm"].registers(params, 48_000_000)
    regs["WINDOW_1_HI"] += 1
    assert identify(params, 48_000_000, regs) is None
    assert identify(params, 48_000_000, {"PRESCALER": 1}) is None

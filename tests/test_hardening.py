"""Wrong results with no warning, device state, bad input: each defect of the hardening issue."""

import contextlib
import io
import json
import os
import subprocess
import sys
import time

import pytest

from rbscope.analysis.geometry import GeometryError, parse_geometry
from rbscope.cli import commands as cli
from rbscope.device.capture import CaptureReader, CaptureWriter, capture_to_measurement
from rbscope.device.device import CommandError, ConfigError, Device, DeviceError, PortError
from rbscope.device.fake import FakeDevice, LinkFaults
from rbscope.device.protocol import encode_payload, frame_bytes, info_values
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

PARAMS = SnifferParams(channels=4)
CONFIG = SnifferConfig(prescaler=1, glitch_ticks=3,
                       windows=((20, 100), (150, 2300), (2300, 4000)), idle_ticks=1000)


def run(argv):
    """Run ``rbscope argv`` in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def busy():
    """A fake device whose workload runs from its start (as the simulated device's does)."""
    cycles = 2_000_000
    trains = random_trains(TrainSpec(channels=4, cycles=cycles), seed=5)
    with FakeDevice(PARAMS, trains, cycles, config=CONFIG, start="now",
                    snapshot_period=50_000) as dev:
        yield dev


# Wrong results with no warning ----------------------------------------------------------------


def test_configure_clears_the_counters_unless_told(busy):
    time.sleep(0.2)  # counts accumulate under the boot windows
    with Device(busy.path) as dev:
        before = dev.snapshot()
        assert sum(sum(c.counters) for c in before.counters) > 0
    rc, out, _ = run(["configure", busy.path, "--preset", "mlc34nm", "--prescaler", "1",
                      "--set", "idle_s=0.001"])
    assert rc == 0 and "counters cleared (epoch 1)" in out
    with Device(busy.path) as dev:
        after = dev.snapshot()
    assert after.epoch == before.epoch + 1
    # Everything counted now was counted under the new windows: the epoch began at configure.
    assert after.timestamp - before.timestamp > 0
    rc, out, _ = run(["configure", busy.path, "--preset", "mlc34nm", "--prescaler", "1",
                      "--no-clear"])
    assert rc == 0 and "NOT cleared" in out
    with Device(busy.path) as dev:
        assert dev.snapshot().epoch == after.epoch


def test_readme_sequence_analyses(busy, tmp_path):
    """configure (clears), capture until quiescent, analyze with the README's geometry."""
    assert run(["configure", busy.path, "--preset", "mlc34nm", "--prescaler", "1",
                "--set", "idle_s=0.01"])[0] == 0
    path = tmp_path / "run.rbcap"
    rc, _, err = run(["capture", busy.path, "-o", str(path), "--until-quiescent",
                      "--duration", "30"])
    assert rc == 0 and "quiescent" in err
    rc, out, err = run(["analyze", str(path), "--geometry", "ssd-v", "--logical", "2GiB",
                        "--json"])
    assert rc == 0, err
    data = json.loads(out)
    assert data["complete"] is True and data["missing"] == []
    assert data["program_pulses"]["value"] > 0


def _capture(device, path, *extra):
    rc, _, err = run(["capture", device.path, "-o", str(path), *extra])
    assert rc == 0, err


def test_truncated_killed_and_live_captures_are_reported(busy, tmp_path):
    path = tmp_path / "run.rbcap"
    _capture(busy, path, "--duration", "1", "--snapshot-ms", "40")
    data = path.read_bytes()
    full = capture_to_measurement(path)
    cut = tmp_path / "cut.rbcap"
    cut.write_bytes(data[:len(data) // 3])
    os.utime(cut, (time.time() - 60, time.time() - 60))
    rc, out, err = run(["analyze", str(cut), "--geometry", "ssd-v", "--logical", "1GiB",
                        "--program-class", "1", "--json"])
    assert rc == 0, err
    result = json.loads(out)
    assert result["complete"] is False
    assert any("no stop record" in m and "killed" in m for m in result["missing"])
    assert any("incomplete capture" in n for n in result["notes"])
    m = capture_to_measurement(cut)
    assert m.duration_ticks < full.duration_ticks
    # The text output says so beside the WA.
    rc, out, _ = run(["analyze", str(cut), "--geometry", "ssd-v", "--logical", "1GiB",
                      "--program-class", "1"])
    assert "INCOMPLETE CAPTURE" in out and "no stop record" in out
    # A file modified a moment ago without a stop record is still being written.
    live = tmp_path / "live.rbcap"
    live.write_bytes(data[:len(data) // 2])
    assert any("still being written" in x for x in CaptureReader(live).missing())
    # A capture stopped by a signal is said to have stopped early.
    with CaptureWriter(live) as w:
        w.event("stop", reason="terminated")
    assert any("stopped early (terminated)" in x for x in CaptureReader(live).missing())


def _frame(ftype, params, values, seq):
    return frame_bytes(ftype, encode_payload(params, ftype, values), seq)


def test_another_devices_capture_is_kept_apart(tmp_path):
    """A 1-channel session followed by a 3-channel device's INFO once crashed counts_of."""
    path = tmp_path / "two.rbcap"
    one, three = SnifferParams(channels=1), SnifferParams(channels=3)
    with CaptureWriter(path) as w:
        for params, n, build in ((one, 7, 1), (three, 9, 2)):
            w.raw_frame(_frame(FrameType.INFO, None, info_values(
                params, clock_hz=1_000_000, build_id=build), 0))
            w.config({"PRESCALER": 1})
            w.raw_frame(_frame(FrameType.STATUS, params, {
                "snapshot": 1, "timestamp": 100, "epoch": 1,
                "flags": int(StatusFlags.QUIESCENT)}, 1))
            for ch in range(params.channels):
                w.raw_frame(_frame(FrameType.COUNTERS, params, {
                    "snapshot": 1, "channel": ch, "timestamp": 100,
                    "counters": [n] * params.counters_per_channel}, 2 + ch))
            w.event("stop", reason="quiescent")
    reader = CaptureReader(path)
    assert reader.devices == 2
    m = capture_to_measurement(path)
    assert m.params == three and [c.classes[0] for c in m.counts] == [9, 9, 9]
    assert any("2 devices" in x for x in m.provenance["missing"])


def test_capture_refuses_another_devices_file_and_non_captures(busy, tmp_path):
    path = tmp_path / "run.rbcap"
    _capture(busy, path, "--duration", "0.2")
    with FakeDevice(SnifferParams(channels=2), board="other") as other:
        rc, _, err = run(["capture", other.path, "-o", str(path), "--duration", "0.2"])
    assert rc == 1 and "another device" in err and "Traceback" not in err
    text = tmp_path / "notes.txt"
    text.write_text("my notes\n")
    rc, _, err = run(["capture", busy.path, "-o", str(text), "--duration", "0.2"])
    assert rc == 1 and "not a capture file" in err
    assert text.read_text() == "my notes\n"  # untouched


def test_geometry_defaults_that_scale_wa_are_explicit():
    text = ('name = "T"\n[geometry]\nchannels = 1\nchips_per_channel = 1\n'
            'dies_per_chip = 1\nplanes_per_die = 2\npage_size = 4096\n')
    with pytest.raises(GeometryError, match="program_model is missing"):
        parse_geometry(text, "t.toml")
    assert parse_geometry(text + "mp = 2\n", "t.toml").pages_per_pulse == 2
    assert parse_geometry(text + 'program_model = "multi-plane"\n').pages_per_pulse == 2


def test_ambiguous_logical_units_and_bad_probes_are_usage_errors(tmp_path):
    from rbscope.analysis.measurement import Measurement
    from rbscope.gateware.rb_sniffer.model import ChannelCounts
    params = SnifferParams(channels=2)
    counts = [ChannelCounts.zeros(params) for _ in range(2)]
    counts[0].classes[1] = 1000
    m = Measurement(params, CONFIG, 1e-6, counts, ("read", "program", "erase"))
    src = tmp_path / "m.json"
    m.save(src)
    base = ["analyze", str(src), "--geometry", "ssd-v"]
    for extra, message in ((["--logical", "2Gb"], "ambiguous"),
                           (["--logical", "163 840 000"], "not a number"),
                           (["--probe", "5=0:0:0"], "has lines 0 … 1"),
                           (["--probe", "0=9:0:0"], "not in SSD-v"),
                           (["--probe", "0=0:0:0", "--probe", "0=1:0:0"], "given twice"),
                           (["--signal", "rb0"], "for VCD and sigrok")):
        rc, _, err = run(base + extra)
        assert rc == 2 and message in err, (extra, err)
    rc, out, _ = run(base + ["--logical", "2GB", "--probe", "1=1:0:0", "--json"])
    assert rc == 0
    assert json.loads(out)["logical_bytes"]["lo"] == 2 * 10**9


# Device state -------------------------------------------------------------------------------


def test_configure_validates_everything_before_writing(busy):
    with Device(busy.path) as dev:
        before = dev.read_registers()
    for extra, message in ((["--set", "WINDOW_1_HI=20000000"], "WINDOW_1_HI holds 24 bit"),
                           (["--prescaler", "70000"], "prescaler"),
                           (["--set", "WINDOW_4_LO=4294967296"], "WINDOW_4_LO holds 24 bit"),
                           (["--set", "read=100:200"], "overlap"),
                           (["--set", "NOPE=1"], "no register named 'NOPE'")):
        rc, _, err = run(["configure", busy.path, "--preset", "mlc34nm", *extra])
        assert rc == 2 and message in err, (extra, err)
    with Device(busy.path) as dev:
        assert dev.read_registers() == before  # nothing written
    rc, _, _ = run(["configure", busy.path, "--preset", "mlc34nm", "--prescaler", "1",
                    "--set", "read=100:200", "--allow-overlap"])
    assert rc == 0


def test_a_failed_configuration_is_rolled_back(busy, monkeypatch):
    with Device(busy.path) as dev:
        before = dev.read_registers()
        real = Device.write_reg
        calls = []

        def flaky(self, name, value):
            calls.append(name)
            if len(calls) == 4:
                raise CommandError(0x03, 0x05, 0x0102, name)
            return real(self, name, value)
        monkeypatch.setattr(Device, "write_reg", flaky)
        values = {"WINDOW_0_LO": 1, "WINDOW_0_HI": 2, "WINDOW_1_LO": 3, "WINDOW_1_HI": 4,
                  "WINDOW_2_LO": 5, "WINDOW_2_HI": 6}
        with pytest.raises(DeviceError, match="configuration not applied .the previous "
                                              "values were restored"):
            dev.configure(values)
        monkeypatch.setattr(Device, "write_reg", real)
        assert dev.read_registers() == before


def test_snapshot_period_too_short_is_refused_and_capture_settings_are_restored(busy, tmp_path):
    with Device(busy.path) as dev:
        period = dev.read_reg("SNAPSHOT_PERIOD")
    rc, _, err = run(["capture", busy.path, "-o", str(tmp_path / "a.rbcap"),
                      "--snapshot-ms", "1", "--duration", "0.2"])
    assert rc == 2 and "one snapshot takes" in err
    assert not (tmp_path / "a.rbcap").exists()  # refused before anything was written
    _capture(busy, tmp_path / "b.rbcap", "--snapshot-ms", "40", "--hist-every", "3",
             "--duration", "0.2")
    assert CaptureReader(tmp_path / "b.rbcap").registers["SNAPSHOT_PERIOD"] == 40_000
    with Device(busy.path) as dev:
        assert dev.read_reg("SNAPSHOT_PERIOD") == period
        assert dev.read_reg("HIST_PERIOD") == 0


def test_the_port_is_locked(busy):
    with Device(busy.path):
        with pytest.raises(PortError, match="in use by another program"):
            Device(busy.path)
        rc, _, err = run(["info", busy.path])
        assert rc == 3 and "in use by another program" in err
    with Device(busy.path):  # released on close
        pass


def test_histogram_readback_survives_lost_chunks():
    """Chunks lost on the way are asked for again until every one arrived."""
    cycles = 200_000
    trains = random_trains(TrainSpec(channels=4, cycles=cycles), seed=9)
    with FakeDevice(PARAMS, trains, cycles, config=CONFIG, start="now", snapshot_period=0,
                    faults=LinkFaults(drop=0.2, seed=3)) as fake:
        with Device(fake.path, timeout=0.2, retries=3) as dev:
            while not fake.finished:
                dev.poll()
            hist = dev.read_histograms()
            exp = fake.expected()
            assert hist == {ch: exp.channels[ch].histogram for ch in range(4)}
            assert dev.stats.errors > 0  # frames were lost, and recovered


def test_write_reg_refuses_values_wider_than_the_register(busy):
    with Device(busy.path) as dev:
        with pytest.raises(ConfigError, match="PRESCALER holds 16 bit"):
            dev.write_reg("PRESCALER", 70000)
        with pytest.raises(ConfigError, match="not 'x'"):
            dev.write_reg("PRESCALER", "x")


# Tracebacks -> clear errors -----------------------------------------------------------------


def _bad_argument_cases(port, tmp):
    notcap = tmp / "notcap.bin"
    notcap.write_bytes(b"not a capture")
    deep = tmp / "deep.toml"
    deep.write_text("x = " + "[" * 1000 + "]" * 1000 + "\n")
    vcd = tmp / "a.vcd"
    vcd.write_text("$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                   "#0\n1!\n#100\n0!\n#5000\n1!\n#9000\n")
    usage, failure, device = 2, 1, 3
    return [
        (["info", port, "--baud", "99999999999"], usage),
        (["info", port, "--baud", "0"], usage),
        (["info", str(tmp / "no-port")], device),
        (["configure", port, "--preset", "mlc34nm", "--prescaler", "0"], usage),
        (["configure", port, "--preset", "mlc34nm", "--set", "WINDOW_1_LO=99999999999"], usage),
        (["configure", port, "--preset", "mlc34nm", "--set", "program"], usage),
        (["configure", port, "--preset", "nope"], usage),
        (["configure", port, "--from-toml", str(deep)], usage),
        (["configure", port, "--from-toml", str(tmp / "missing.toml")], usage),
        (["configure"], usage),
        (["capture", port, "-o", str(notcap), "--duration", "0.1"], failure),
        (["capture", port, "-o", str(tmp / "no" / "dir.rbcap"), "--duration", "0.1"], failure),
        (["capture", port, "-o", str(tmp / "c.rbcap"), "--duration", "-1"], usage),
        (["dump", str(notcap)], failure),
        (["dump", str(tmp / "missing.rbcap")], failure),
        (["analyze", str(tmp / "missing.json"), "--geometry", "ssd-v"], failure),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--tick", "1s"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--tick", "1e400s"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--tick", "fast"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--logical", "163 840 000"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--max-pulses", "-5"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--glitch", "1e308"], usage),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--window", "bogus=1:2"], usage),
        (["analyze", str(vcd), "--geometry", str(deep)], failure),
        (["analyze", str(vcd), "--geometry", "ssd-v", "--preset", str(deep)], usage),
        (["analyze", str(vcd), "--geometry", "nope"], usage),
        (["analyze", str(vcd)], usage),
        (["analyze", str(notcap), "--geometry", "ssd-v"], usage),
        (["calibrate", str(vcd), "--tolerance", "5"], usage),
        (["calibrate", str(vcd), "--mp-candidates", "x"], usage),
        (["sample-sysfs", "nosuchdev", "-o", str(tmp / "s.csv"), "--duration", "0.1"],
         failure),
        (["sample-sysfs", "sda", "-o", str(tmp / "s.csv"), "--interval", "-1"], usage),
        (["sim", "--channels", "0"], usage),
        (["sim", "--link", str(tmp / "no" / "dir" / "port")], usage),
        (["verilog", "--channels", "0", str(tmp / "v")], usage),
        (["report", str(tmp / "missing.rbcap"), "-o", str(tmp / "r.html"), "--geometry",
          "ssd-v"], failure),
        (["selftest", port], device),
        (["nosuchcommand"], usage),
        ([], usage),
    ]


def test_every_subcommand_with_bad_arguments_gives_a_clear_error(tmp_path):
    with FakeDevice(SnifferParams(channels=2)) as dev:
        for argv, want in _bad_argument_cases(dev.path, tmp_path):
            try:
                rc, _, err = run(argv)
            except SystemExit as exc:  # argparse inside a handler would be a bug too
                pytest.fail(f"{argv}: SystemExit({exc.code})")
            except Exception as exc:  # a traceback
                pytest.fail(f"{argv}: {type(exc).__name__}: {exc}")
            assert rc == want, (argv, rc, err)
            assert "Traceback" not in err and err.strip(), (argv, err)


def test_analyze_series_into_a_closed_pipe(tmp_path):
    from rbscope.analysis.measurement import Measurement, SeriesPoint
    from rbscope.gateware.rb_sniffer.model import ChannelCounts
    params = SnifferParams(channels=1)
    snaps = []
    for i in range(1, 400):
        c = ChannelCounts.zeros(params)
        c.classes[1] = 10 * i
        snaps.append(SeriesPoint(i * 1000, [c]))
    final = snaps[-1].counts[0].copy()
    m = Measurement(params, CONFIG, 1e-6, [final], ("read", "program", "erase"),
                    duration_ticks=400_000, snapshots=snaps)
    src = tmp_path / "m.json"
    m.save(src)
    cmd = (f"{sys.executable} -m rbscope.cli analyze {src} --geometry ssd-v --logical 1GiB "
           f"--series | head -3")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert len(proc.stdout.splitlines()) == 3

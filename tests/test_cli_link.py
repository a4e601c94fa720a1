"""`rbscope info / configure / capture / dump` against the fake device on a pty."""

import json
import signal
import subprocess
import sys
import time

import pytest

from rbscope.analysis.presets import PRESETS
from rbscope.cli import commands as cli
from rbscope.device.capture import CaptureReader
from rbscope.device.fake import FakeDevice
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

PARAMS = SnifferParams(channels=2)


def _fake(start):
    """Two lines of random trains, starting at once (``"now"``) or at the first clear."""
    cycles = 400_000
    trains = random_trains(TrainSpec(channels=2, cycles=cycles), seed=11)
    config = SnifferConfig(windows=((20, 100), (150, 2300), (2300, 4000)), glitch_ticks=3,
                           idle_ticks=1000)
    return FakeDevice(PARAMS, trains, cycles, config=config, snapshot_period=20_000,
                      start=start)


@pytest.fixture
def fake():
    with _fake("now") as dev:
        yield dev


def test_info_json(fake, capsys):
    assert cli.main(["info", fake.path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["info"]["board"] == "fake" and out["params"]["channels"] == 2
    assert out["registers"]["ID"] == 0x43534252


def test_info_text(fake, capsys):
    assert cli.main(["info", fake.path]) == 0
    out = capsys.readouterr().out
    assert "board       fake" in out and "WINDOW_1_HI" in out


def test_configure_preset_with_overrides(fake, capsys, tmp_path):
    argv = ["configure", fake.path, "--preset", "slc34nm", "--set", "program=130:900",
            "--set", "GLITCH_TICKS=7", "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    tick = out["tick_seconds"]
    assert out["registers"]["GLITCH_TICKS"] == 7 == fake.regs["GLITCH_TICKS"]
    program = list(out["preset"]["windows"]).index("program")
    assert fake.regs[f"WINDOW_{program}_LO"] == round(130e-6 / tick)
    toml = tmp_path / "p.toml"
    toml.write_text('[preset.mine]\nbase = "mlc34nm"\n[preset.mine.windows]\n'
                    'erase = [3000, 9000]\n')
    assert cli.main(["configure", fake.path, "--from-toml", str(toml)]) == 0
    assert "preset mine" in capsys.readouterr().out
    erase = PRESETS["mlc34nm"].names.index("erase")
    assert fake.regs[f"WINDOW_{erase}_LO"] == round(3000e-6 / tick)


def test_configure_usage_errors(fake, capsys):
    assert cli.main(["configure", fake.path, "--preset", "nope"]) == cli.EXIT_USAGE
    assert "no preset named 'nope'" in capsys.readouterr().err
    assert cli.main(["configure", fake.path, "--preset", "mlc34nm", "--set", "bogus=1"]) == 2
    assert "allowed:" in capsys.readouterr().err
    assert cli.main(["configure", "--list"]) == 0
    assert "mlc34nm" in capsys.readouterr().out


def test_port_error_exit_code(capsys, tmp_path):
    assert cli.main(["info", str(tmp_path / "ttyNONE")]) == cli.EXIT_DEVICE == 3
    assert "cannot open" in capsys.readouterr().err


def test_timeout_exit_code(fake, capsys):
    fake.faults.flip = 1.0
    assert cli.main(["info", fake.path, "--timeout", "0.05"]) == cli.EXIT_TIMEOUT == 4


@pytest.fixture
def long_fake():
    """As ``fake``, with pulses for 6 s of wall-clock time (3 s of device time at half speed),
    so that a capture started late on a loaded machine still sees pulses to trace."""
    cycles = 3_000_000
    trains = random_trains(TrainSpec(channels=2, cycles=cycles), seed=11)
    config = SnifferConfig(windows=((20, 100), (150, 2300), (2300, 4000)), glitch_ticks=3,
                           idle_ticks=1000)
    with FakeDevice(PARAMS, trains, cycles, config=config, snapshot_period=20_000,
                    start="now", time_scale=0.5) as dev:
        yield dev


def test_capture_summarise_needs_a_build_with_the_summariser(fake, capsys, tmp_path):
    """--summarise on a build without the trace summariser (the fake device, as the
    iCEBreaker's: no TRACE_SUMMARY register) stops before the capture starts, saying so; an
    unknown class and --summarise without --trace are usage errors."""
    out = tmp_path / "s.rbcap"
    assert cli.main(["capture", fake.path, "-o", str(out), "--duration", "0.1", "--trace",
                     "--summarise", "0"]) == 1
    assert "this device's build has no trace summariser (it has no TRACE_SUMMARY register)" \
        in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(["capture", fake.path, "-o", str(out), "--duration", "0.1", "--trace",
                     "--summarise", "nosuch"]) == 2
    assert "--summarise: no class 'nosuch'" in capsys.readouterr().err
    assert cli.main(["capture", fake.path, "-o", str(out), "--duration", "0.1",
                     "--summarise", "0"]) == 2
    assert "--summarise needs --trace" in capsys.readouterr().err


def test_capture_duration_then_dump(long_fake, capsys, tmp_path):
    fake = long_fake
    out = tmp_path / "c.rbcap"
    assert cli.main(["capture", fake.path, "-o", str(out), "--duration", "1.0",
                     "--snapshot-ms", "30", "--trace", "--hist-every", "5"]) == 0
    err = capsys.readouterr().err
    assert "duration" in err and "link:" in err  # plain lines: stderr is not a TTY here
    assert "--trace without --clear: the records will not cover the counters' epoch" in err
    assert "--hist-every with --trace: each histogram burst takes about 30 % of the link" in err
    r = CaptureReader(out)
    assert r.truncated == 0 and r.info is not None and r.registers["SNAPSHOT_PERIOD"] == 30_000
    assert len(r.snapshots) >= 10 and r.traces
    assert r.events[-1][1]["event"] == "stop"
    assert cli.main(["dump", str(out), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["record"] == "header" and lines[1]["type"] == "info"
    assert any(x.get("type") == "counters" for x in lines)
    assert cli.main(["dump", str(out)]) == 0
    assert " status " in capsys.readouterr().out
    assert cli.main(["dump", str(out), "--summary", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["channels"] == 2


def test_capture_json_lines_until_quiescent(fake, capsys, tmp_path):
    out = tmp_path / "q.rbcap"
    assert cli.main(["capture", fake.path, "-o", str(out), "--until-quiescent", "--json",
                     "--snapshot-ms", "30", "--duration", "20"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["quiescent"] is True
    exp = fake.expected()
    assert lines[-1]["counts"] == [c.classes for c in exp.channels]


def _idle_device(seed=11):
    """A 2-line fake device whose trains start at the capture's clear: before it the device is
    idle, and its snapshots (the one the clear takes among them) say quiescent."""
    cycles = 400_000
    trains = random_trains(TrainSpec(channels=2, cycles=cycles), seed=seed)
    config = SnifferConfig(windows=((20, 100), (150, 2300), (2300, 4000)), glitch_ticks=3,
                           idle_ticks=1000)
    return FakeDevice(PARAMS, trains, cycles, config=config, snapshot_period=20_000,
                      start="clear")


def _stops(path):
    return [e["reason"] for _, e in CaptureReader(path).events if e.get("event") == "stop"]


def test_until_quiescent_on_a_device_idle_before_the_capture_stops_at_once_and_says_so(
        capsys, tmp_path):
    with _idle_device() as dev:
        time.sleep(0.1)  # (idle beyond IDLE_TICKS: quiescent before the capture)
        out = tmp_path / "idle.rbcap"
        assert cli.main(["capture", dev.path, "-o", str(out), "--clear", "--until-quiescent",
                         "--snapshot-ms", "30", "--duration", "20"]) == 0
    err = capsys.readouterr().err
    assert "note: no line was busy during the capture" in err and "--wait-for-activity" in err
    assert _stops(out) == ["quiescent"]


def test_wait_for_activity_captures_a_workload_that_starts_after_the_capture(capsys, tmp_path):
    with _idle_device() as dev:
        time.sleep(0.1)
        out = tmp_path / "wait.rbcap"
        assert cli.main(["capture", dev.path, "-o", str(out), "--clear", "--until-quiescent",
                         "--wait-for-activity", "20", "--json", "--snapshot-ms", "30",
                         "--duration", "20"]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        exp = dev.expected()
    assert lines[-1]["quiescent"] is True
    assert lines[-1]["counts"] == [c.classes for c in exp.channels]
    assert sum(map(sum, lines[-1]["counts"])) > 0
    assert _stops(out) == ["quiescent"]


def test_wait_for_activity_is_bounded(capsys, tmp_path):
    # No --clear: the trains never start, and no line is ever busy.
    with _idle_device() as dev:
        time.sleep(0.1)
        out = tmp_path / "never.rbcap"
        t = time.monotonic()
        assert cli.main(["capture", dev.path, "-o", str(out), "--until-quiescent",
                         "--wait-for-activity", "0.6", "--snapshot-ms", "30",
                         "--duration", "20"]) == 0
        took = time.monotonic() - t
    err = capsys.readouterr().err
    assert 0.6 <= took < 10
    assert "no activity" in err and "note: no line was busy during the capture" in err
    assert _stops(out) == ["no activity"]
    assert cli.main(["capture", dev.path, "-o", str(out), "--wait-for-activity", "1"]) == 2
    assert "--wait-for-activity needs --until-quiescent" in capsys.readouterr().err


def test_dump_rejects_non_capture(tmp_path, capsys):
    p = tmp_path / "x.bin"
    p.write_bytes(b"nope")
    assert cli.main(["dump", str(p)]) == cli.EXIT_FAILURE
    assert "too short" in capsys.readouterr().err


def test_ctrl_c_leaves_a_complete_file(fake, tmp_path):
    out = tmp_path / "int.rbcap"
    proc = subprocess.Popen([sys.executable, "-m", "rbscope.cli", "capture", fake.path, "-o",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The capture may exist and still be empty for an instant (created, preamble not
            # yet written): poll again then.
            if out.exists() and out.stat().st_size > 64 and \
                    len(CaptureReader(out).snapshots) >= 2:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "interrupted" in err
    r = CaptureReader(out)
    assert r.truncated == 0 and r.events[-1][1]["reason"] == "interrupted"
    assert any(s.status.solicited for s in r.snapshots)  # the final one (periodic ones may follow)


def test_live_view_redraws_on_a_tty_and_prints_lines_otherwise():
    import io

    from rbscope.device.live import LiveView
    from rbscope.device.protocol import Counters, LinkStats, Snapshot, Status, StatusFlags

    def snap(ts, n, quiet_since=0, quiescent=False):
        row = tuple([n] * PARAMS.counters_per_channel)
        return Snapshot(Status(0, b"", timestamp=ts, quiet_since=quiet_since,
                               flags=StatusFlags.QUIESCENT if quiescent else 0),
                        [Counters(0, b"", channel=ch, counters=row)
                         for ch in range(PARAMS.channels)])
    tty = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read", "program"), stream=tty, tty=True, interval=0,
                    idle_seconds=0.01, width=140)
    view.update(snap(1000, 0), LinkStats())
    first = len(tty.getvalue())
    view.update(snap(2000, 5), LinkStats())
    redraw = tty.getvalue()[first:]
    assert "\x1b[" in redraw  # redrawn in place over the first drawing
    assert "5.0k/s" in redraw and "program" in redraw and "read" in redraw
    assert "busy" in redraw  # the counts moved: no countdown
    # Counts still, every line ready since t = 1500 µs: 3.5 ms of the 10 ms idle time left.
    view.update(snap(8000, 5, quiet_since=1500), LinkStats())
    assert "idle 6.5 ms of 10.0 ms: quiescent in 3.5 ms unless a line goes busy" in \
        tty.getvalue()
    before = len(tty.getvalue())
    view.update(snap(9000, 5, quiet_since=1500, quiescent=True), LinkStats())
    view.close()
    last = tty.getvalue()[before:]
    assert "quiescent" in last and "unless a line goes busy" not in last and "idle " not in last
    plain = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=plain, tty=False, interval=0)
    view.update(snap(1000, 3), LinkStats(crc_errors=2))
    assert "\x1b" not in plain.getvalue()
    assert "2 errors" in plain.getvalue() and "read=6" in plain.getvalue()


def test_live_view_says_whether_the_pulse_sequence_is_still_complete():
    import io

    from rbscope.device.live import LiveView
    from rbscope.device.protocol import Counters, LinkStats, Snapshot, Status, StatusFlags

    def snap(ts, lost, trace=True):
        row = tuple([1] * PARAMS.counters_per_channel)
        return Snapshot(Status(0, b"", timestamp=ts, trace_lost=lost,
                               flags=StatusFlags.TRACE_ON if trace else 0),
                        [Counters(0, b"", channel=ch, counters=row)
                         for ch in range(PARAMS.channels)])
    plain = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=plain, tty=False, interval=0)
    view.update(snap(1000, 0, trace=False), LinkStats())
    assert "pulse records" not in plain.getvalue()  # TRACE off: nothing to say
    view.update(snap(2000, 7), LinkStats())  # 7 lost before the view started: not its own
    assert "pulse records: none lost (sequence complete)" in plain.getvalue()
    view.update(snap(3000, 10), LinkStats())
    assert "pulse records: 3 LOST (sequence incomplete)" in plain.getvalue()
    out = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=out, json=True)
    view.update(snap(1000, 4), LinkStats())
    view.update(snap(2000, 9), LinkStats())
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["trace_records_lost"] for x in lines] == [0, 5]


def test_live_view_counts_the_pulses_the_device_summarised():
    """With the trace summariser on, the pulses its SUMMARY records stand for are counted per
    line as the records arrive, and every form of the view says how many, beside the loss
    count: the sequence is complete but for those."""
    import io

    from rbscope.device.live import LiveView
    from rbscope.device.protocol import (
        Counters,
        LinkStats,
        Snapshot,
        Status,
        StatusFlags,
        Trace,
        TraceBatch,
    )
    from rbscope.gateware.link import protocol as wire
    from rbscope.gateware.link.summary import COUNT_BITS, LATE_KIND, SUMMARY_KIND

    layout = wire.trace_record_layout(PARAMS)
    records = tuple(layout.const(r).as_value().value for r in (
        {"kind": 0, "index": 1, "channel": 1, "width": 40, "time": 0},
        {"kind": SUMMARY_KIND, "index": 1, "channel": 1, "width": 5 << COUNT_BITS | 200,
         "time": 70},
        {"kind": LATE_KIND, "index": 1, "channel": 1, "width": 44, "time": 70},
        *[{"kind": wire.TRACE_EMPTY_KIND}] * (wire.TRACE_BATCH_RECORDS - 3)))
    row = tuple([1] * PARAMS.counters_per_channel)
    snap = Snapshot(Status(0, b"", timestamp=5000, trace_lost=0, flags=StatusFlags.TRACE_ON),
                    [Counters(0, b"", channel=ch, counters=row)
                     for ch in range(PARAMS.channels)])

    def feed(view):
        view.trace(TraceBatch(0, b"", base=0, records=records))
        # a single TRACE frame (builds that send them) and a frame of another kind
        view.trace(Trace(1, b"", channel=0, kind=SUMMARY_KIND, width=9 << COUNT_BITS | 3))
        view.trace(Trace(2, b"", channel=0, kind=0, width=300))
        view.trace(snap)
        view.update(snap, LinkStats())

    plain = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=plain, tty=False, interval=0)
    feed(view)
    assert view.summarised == [3, 200]
    assert ("pulse records: none lost (sequence complete); 203 pulses summarised on the device"
            in plain.getvalue())
    tty = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=tty, tty=True, interval=0, width=160)
    feed(view)
    view.close()
    assert "summarised" in tty.getvalue() and "200" in tty.getvalue()
    out = io.StringIO()
    feed(LiveView(PARAMS, 1e-6, ("read",), stream=out, json=True))
    assert json.loads(out.getvalue())["trace_pulses_summarised"] == [3, 200]
    # Nothing summarised: no column, no words about it.
    quiet = io.StringIO()
    view = LiveView(PARAMS, 1e-6, ("read",), stream=quiet, tty=True, interval=0, width=160)
    view.update(snap, LinkStats())
    view.close()
    assert "summarised" not in quiet.getvalue()


def test_quiescence_countdown():
    from types import SimpleNamespace as S

    from rbscope.device.live import quiescence
    st = S(timestamp=10_000_000, quiet_since=4_000_000, quiescent=False)
    # 6 s idle of the 300 s RB-Explorer waits: 294 s (4 min 54 s) left.
    text, left = quiescence(st, 300.0, 1e-6, moving=False)
    assert left == pytest.approx(294.0) and "4 min 54 s" in text
    assert quiescence(st, 300.0, 1e-6, moving=True) == ("busy", None)
    assert quiescence(S(timestamp=1, quiet_since=0, quiescent=True), 300.0, 1e-6,
                      moving=False) == ("quiescent", 0.0)
    text, left = quiescence(st, None, 1e-6, moving=False)
    assert left is None and text == "idle 6.0 s"


def test_configure_says_idle_and_glitch_and_calibrate_keeps_the_idle(long_fake, capsys,
                                                                     tmp_path):
    # Issue 25, item 15: the README's `configure --set idle_s=1`, a capture, `calibrate -o`,
    # then `configure --from-toml` silently restored a 300 s quiescence.
    fake = long_fake
    assert cli.main(["configure", fake.path, "--preset", "mlc34nm", "--set", "idle_s=1",
                     "--set", "glitch_us=2"]) == 0
    out = capsys.readouterr().out
    tick = float(out.split("tick ", 1)[1].split(" µs")[0])
    assert f"quiescent after 1 s ({round(1e6 / tick)} ticks); was" in out  # (from 1000 ticks)
    assert f"glitch filter {round(2 / tick) * tick:g} µs ({round(2 / tick)} ticks)" in out
    cap = tmp_path / "c.rbcap"
    assert cli.main(["capture", fake.path, "-o", str(cap), "--duration", "1.0"]) == 0
    capsys.readouterr()
    toml = tmp_path / "p.toml"
    assert cli.main(["calibrate", str(cap), "-o", str(toml)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert "idle_s = 1  " in toml.read_text(encoding="utf-8")
    assert cli.main(["configure", fake.path, "--from-toml", str(toml)]) == 0
    out = capsys.readouterr().out
    assert f"quiescent after 1 s ({round(1e6 / tick)} ticks)\n" in out  # unchanged, so said
    assert fake.regs["IDLE_TICKS_LO"] == round(1e6 / tick)
    # A preset without idle_s sets the 300 s default, and says what it replaced.
    assert cli.main(["configure", fake.path, "--preset", "mlc34nm"]) == 0
    out = capsys.readouterr().out
    assert "quiescent after 300 s" in out and "was 1 s: changed" in out


def test_baud_auto_tries_each_boards_rate_in_turn(monkeypatch):
    """``--baud auto`` (the default): the first rate at which the device answers INFO (the
    iCEBreaker's 12 Mbaud after the 3 Mbaud of the others); a timeout at every rate names them
    all; an explicit ``--baud`` is tried alone."""
    from types import SimpleNamespace

    from rbscope.cli import common
    from rbscope.device import device as device_module
    from rbscope.device.device import DeviceTimeout

    tried = []

    def device(port, *, baudrate, timeout, **kw):
        tried.append(baudrate)
        if baudrate != answers:
            raise DeviceTimeout("no answer to READ_INFO")
        return ("device", baudrate)

    monkeypatch.setattr(device_module, "Device", device)
    parser = cli.build_parser()
    args = parser.parse_args(["info", "PORT"])
    assert args.baud is None
    answers = 12_000_000
    assert common.open_device(args) == ("device", 12_000_000)
    assert tried == [3_000_000, 12_000_000]
    tried.clear()
    answers = 0
    with pytest.raises(DeviceTimeout, match=r"tried 3,000,000, 12,000,000 baud: give the rate"):
        common.open_device(args)
    tried.clear()
    with pytest.raises(DeviceTimeout, match="tried 115,200 baud"):
        common.open_device(SimpleNamespace(port="PORT", baud=115_200, timeout=0.1))
    assert tried == [115_200]
    assert parser.parse_args(["info", "PORT", "--baud", "12000000"]).baud == 12_000_000

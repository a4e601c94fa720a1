"""Captures of windows no session named: the simulator's defaults are recognised (issue 25,
item 16), so that ``analyze`` needs no ``--program-class``."""

import json

from rbscope.cli import commands as cli
from rbscope.cli.sim import DEFAULT_WINDOWS_US, emulator_setup
from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.protocol import encode_payload, frame_bytes, info_values
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.nand_emu import boot
from rbscope.gateware.rb_sniffer import SnifferParams


def write_capture(path, params, windows, *, clock_hz=1_000_000, programs=40, before=0,
                  tap_pages=None, prescaler=1, program_class=2):
    """A capture configured with ``windows`` (ticks) and no class names: INFO, the registers,
    two quiescent snapshots with ``before`` then ``programs`` pulses in class 2 of every
    channel, a stop; with ``tap_pages``, the bus tap's reads at the start and the stop, that
    many one-plane 10h confirms apart on every die."""
    regs = {"PRESCALER": prescaler}
    for k, (lo, hi) in enumerate(windows):
        regs[f"WINDOW_{k}_LO"], regs[f"WINDOW_{k}_HI"] = lo, hi
    with CaptureWriter(path, meta={"port": "test"}) as w:
        w.raw_frame(frame_bytes(FrameType.INFO, encode_payload(
            None, FrameType.INFO, info_values(params, clock_hz=clock_hz))), time_ns=1)
        w.config(regs, time_ns=2)
        tap = {k: [[0] * 16 for _ in range(params.channels)] for k in ("ops", "planes", "pulses")}
        if tap_pages is not None:
            w.event("tap", 3, phase="start", **tap)
        for n in range(2):
            w.raw_frame(frame_bytes(FrameType.STATUS, encode_payload(params, FrameType.STATUS, {
                "snapshot": n, "timestamp": 10**6 * (n + 1), "epoch": 1,
                "flags": int(StatusFlags.QUIESCENT)}), n), time_ns=10 + n)
            for ch in range(params.channels):
                row = [0] * params.counters_per_channel
                row[program_class] = before if n == 0 else programs
                w.raw_frame(frame_bytes(FrameType.COUNTERS, encode_payload(
                    params, FrameType.COUNTERS, {
                        "snapshot": n, "channel": ch, "timestamp": 10**6 * (n + 1),
                        "counters": row})), time_ns=10 + n)
        if tap_pages is not None:
            for row in tap["planes"]:
                row[0] = tap_pages
            w.event("tap", 29, phase="stop", **tap)
        w.event("stop", reason="quiescent", time_ns=30)


def test_a_capture_with_the_simulators_default_windows_is_named(tmp_path, capsys):
    for params in (SnifferParams(channels=4), emulator_setup(4)[0]):
        path = tmp_path / "sim.rbcap"
        path.unlink(missing_ok=True)
        write_capture(path, params, DEFAULT_WINDOWS_US)
        m = capture_to_measurement(path)
        assert m.class_names[:4] == ("cache", "read", "program", "erase")
        args = ["analyze", str(path), "--geometry", "ssd-v", "--logical", str(4 * 40 * 4096),
                "--json"]
        assert cli.main(args) == 0, capsys.readouterr().err
        out = json.loads(capsys.readouterr().out)
        assert out["wa"]["value"] == 1.0
    # An emulator build's power-up windows (a board's, at its clock; `rbscope sim --emulator`'s):
    # named by the tick they were set in, at any clock.
    for clock_hz in (1_000_000, 100_000_000):
        path.unlink()
        write_capture(path, params, tuple(boot.WINDOWS.values()), clock_hz=clock_hz,
                      prescaler=boot.prescaler(params.channels), program_class=3)
        m = capture_to_measurement(path)
        assert m.class_names[:5] == ("multiplane", "cache", "read", "program", "erase")
        assert cli.main(args) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["wa"]["value"] == 1.0
    # ... but not at another tick.
    path.unlink()
    write_capture(path, params, tuple(boot.WINDOWS.values()), program_class=3)
    assert not any(capture_to_measurement(path).class_names)
    # Windows nobody named still need --program-class (and say so).
    path.unlink()
    write_capture(path, params, ((5, 50), (50, 500), (500, 5000)))
    assert not any(capture_to_measurement(path).class_names)
    assert cli.main(args) != 0
    err = capsys.readouterr().err
    assert "--program-class" in err and "2: [500, 5000) µs" in err
    assert cli.main([*args[:-1], "--program-class", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["wa"]["value"] == 1.0
    # A build's power-up state (an emulator build never configured): nothing to name, and the
    # error says to configure the device, not to name a window.
    path.unlink()
    write_capture(path, params, ())
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "no class window set" in err and "rbscope configure PORT --preset" in err

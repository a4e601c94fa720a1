"""Device API end to end over a pty with the fake device (bit-exact model behind it)."""

import threading
import time

import pytest

from rbscope.analysis.presets import get_preset
from rbscope.device.capture import CaptureReader, CaptureWriter, capture_to_measurement
from rbscope.device.device import (
    CommandError,
    ConfigError,
    Device,
    DeviceChanged,
    DeviceTimeout,
    PortError,
)
from rbscope.device.fake import FakeDevice, LinkFaults
from rbscope.device.protocol import trace_records
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.link.protocol import Opcode
from rbscope.gateware.rb_sniffer.params import SnifferConfig, SnifferParams

PARAMS = SnifferParams(channels=4)
CONFIG = SnifferConfig(prescaler=1, glitch_ticks=3,
                       windows=((20, 100), (150, 2300), (2300, 4000), (3, 20)),
                       idle_ticks=1000)


def trains(cycles, seed=1, channels=4):
    return random_trains(TrainSpec(channels=channels, cycles=cycles), seed=seed)


def run_to_end(dev, fake, timeout=20.0, during=None):
    end = time.monotonic() + timeout
    while not fake.finished:
        assert time.monotonic() < end, "the fake device did not finish its trains"
        dev.poll()
        if during is not None:
            during()


def assert_exact(dev, fake, params=PARAMS):
    snap = dev.snapshot()
    hist = dev.read_histograms()
    exp = fake.expected()
    for ch in range(params.channels):
        want = exp.channels[ch].row(params)[:params.counters_per_channel]
        assert list(snap.counters[ch].counters) == want, f"channel {ch}"
        assert hist[ch] == [(b + fake_preload(fake)) for b in exp.channels[ch].histogram]
    return snap


def fake_preload(fake):
    return getattr(fake, "_test_preload", 0)


def test_info_registers_and_errors():
    with FakeDevice(PARAMS, board="unit-test") as fake, Device(fake.path, timeout=0.3) as dev:
        assert dev.info.board_name == "unit-test"
        assert dev.params == PARAMS
        dev.check_id()
        assert dev.write_reg("window_1_lo", 1234) == 1234
        assert dev.read_reg("WINDOW_1_LO") == 1234
        regs = dev.read_registers()
        assert regs["SNAPSHOT_PERIOD"] == fake.clock_hz // 10
        with pytest.raises(CommandError, match=r"WRITE_REG on register ID \(0x0000\) failed: "
                                               r"READ_ONLY"):
            dev.write_reg("ID", 1)
        # Values that do not fit are refused before anything is sent ...
        with pytest.raises(ConfigError, match=r"GLITCH_TICKS holds 8 bit\(s\)"):
            dev.write_reg("GLITCH_TICKS", 1 << 20)
        # ... and a device refuses them too.
        reg = dev._register("GLITCH_TICKS")
        with pytest.raises(CommandError, match="WRITE_REG on address 0x0002 failed: BAD_VALUE"):
            dev.command(Opcode.WRITE_REG, reg.address, 1 << 20)
        with pytest.raises(CommandError, match="READ_REG on address 0x7777 failed: BAD_ADDRESS"):
            dev.command(Opcode.READ_REG, 0x7777)
        with pytest.raises(KeyError, match="no register named 'NOPE'"):
            dev.read_reg("NOPE")
        assert dev.ping() < 1


def test_known_stimulus_gives_exact_counts_and_capture(tmp_path):
    cycles = 300_000
    path = tmp_path / "run.rbcap"
    with (FakeDevice(PARAMS, trains(cycles), cycles, config=CONFIG,
                     snapshot_period=20_000) as fake,
          CaptureWriter(path) as cap,
          Device(fake.path, timeout=0.3, capture=cap) as dev):
        dev.write_reg("HIST_PERIOD", 3)
        dev.record_header()
        assert dev.clear() == 1
        run_to_end(dev, fake)
        snap = assert_exact(dev, fake)
        assert dev.stats.errors == 0 and dev.stats.lost_frames == 0
    r = CaptureReader(path)
    assert r.truncated == 0 and r.errors == []
    assert [c.counters for c in r.snapshots[-1].counters] == [
        c.counters for c in snap.counters]
    m = capture_to_measurement(path)
    exp = fake.expected()
    for ch in range(PARAMS.channels):
        assert m.counts[ch].classes == exp.channels[ch].classes
        assert m.counts[ch].histogram == exp.channels[ch].histogram


def test_exact_counts_through_a_corrupted_link():
    cycles = 300_000
    faults = LinkFaults(flip=0.05, drop=0.05, garbage=0.05, rx_flip=0.1, seed=7)
    with (FakeDevice(PARAMS, trains(cycles, seed=2), cycles, config=CONFIG,
                     snapshot_period=10_000, faults=faults) as fake,
          Device(fake.path, timeout=0.2, retries=20) as dev):
        dev.clear()
        run_to_end(dev, fake)
        assert_exact(dev, fake)
        s = dev.stats
        assert s.crc_errors + s.runts + s.bad_escapes > 0
        assert s.lost_frames > 0 and s.seq_gaps > 0


def test_histogram_totals_survive_32_bit_wraps():
    from rbscope.gateware.rb_sniffer.model import Train
    cycles = 200_000
    # One second of ready lines first, so that the clear and the first read of the preloaded
    # bins happen before any pulse, however busy the machine is.
    idle = 1_000_000
    shifted = [Train(1, [(c + idle, level) for c, level in t.edges])
               for t in trains(cycles, seed=3)]
    with FakeDevice(PARAMS, shifted, cycles + idle, config=CONFIG, snapshot_period=0,
                    start="now") as fake, Device(fake.path, timeout=0.3) as dev:
        dev.clear()
        fake.hist_preload = fake._test_preload = (1 << 32) - 3  # just below the wrap
        dev.read_histograms()
        assert fake._cycle - fake._stim_start < idle, "the first read came after a pulse"
        assert all(v == (1 << 32) - 3 for v in dev.hist.raw[0])
        run_to_end(dev, fake)
        assert_exact(dev, fake)
        # Some bins did wrap on the device (the raw values restarted from 0).
        raw = dev.hist.raw[0]
        assert any(v < (1 << 32) - 3 for v in raw)


def test_unplug_and_replug_mid_capture(tmp_path):
    cycles = 600_000
    link = str(tmp_path / "ttyRBSCOPE")
    path = tmp_path / "unplug.rbcap"
    with (FakeDevice(PARAMS, trains(cycles, seed=4), cycles, config=CONFIG,
                     snapshot_period=10_000, symlink=link) as fake,
          CaptureWriter(path) as cap,
          Device(link, timeout=0.2, reconnect_timeout=5, capture=cap) as dev):
        dev.record_header()
        dev.clear()
        state = {"done": False}
        t0 = time.monotonic()

        def unplug():
            if not state["done"] and time.monotonic() - t0 > 0.15:
                state["done"] = True
                fake.vanish()
                threading.Timer(0.25, fake.reappear).start()
        run_to_end(dev, fake, during=unplug)
        assert_exact(dev, fake)
        assert dev.stats.reconnects == 1
    r = CaptureReader(path)
    assert r.truncated == 0
    events = [d["event"] for _, d in r.events]
    assert "reconnect" in events and "clear" in events


def test_replug_at_a_new_path_through_a_callable():
    cycles = 200_000
    with FakeDevice(PARAMS, trains(cycles, seed=5), cycles, config=CONFIG,
                    snapshot_period=10_000) as fake:
        with Device(lambda: fake.path, timeout=0.2, reconnect_timeout=5) as dev:
            dev.clear()
            fake.vanish()
            fake.reappear()
            run_to_end(dev, fake)
            assert_exact(dev, fake)
            assert dev.stats.reconnects == 1


def test_a_different_device_after_replug_is_refused():
    with FakeDevice(PARAMS, snapshot_period=0) as a:
        with Device(lambda: a.path, timeout=0.2, reconnect_timeout=2) as dev:
            b = FakeDevice(PARAMS, snapshot_period=0, build_id=0x1234).start()
            try:
                a.vanish()
                with pytest.raises(DeviceChanged, match="build 0x00001234"):
                    dev._port = lambda: b.path
                    dev.ping()
            finally:
                b.stop()


def test_port_errors():
    with pytest.raises(PortError, match="cannot open /nonexistent/tty"):
        Device("/nonexistent/tty")
    with FakeDevice(PARAMS, snapshot_period=0) as fake:
        dev = Device(fake.path, timeout=0.2, reconnect_timeout=0)
        try:
            fake.vanish()
            with pytest.raises(PortError):
                for _ in range(50):
                    dev.ping()
        finally:
            dev.close()


def test_silent_device_times_out():
    with FakeDevice(PARAMS, snapshot_period=0) as fake:
        dev = Device(fake.path, timeout=0.1, retries=1)
        try:
            fake.faults.flip = 1.0  # every answer corrupted
            with pytest.raises(DeviceTimeout, match="PING: no valid answer .* 2 attempts"):
                dev.ping()
        finally:
            dev.close()


def test_device_reset_is_detected_and_counts_survive():
    cycles = 200_000
    with FakeDevice(PARAMS, trains(cycles, seed=6), cycles, config=CONFIG,
                    snapshot_period=10_000) as fake, Device(fake.path, timeout=0.2) as dev:
        dev.clear()
        dev.wait_snapshot()
        time.sleep(0.05)
        fake.reset()
        run_to_end(dev, fake)
        assert_exact(dev, fake)
        assert dev.stats.resets >= 1
        assert any(getattr(e, "kind", None) == "reset" for _, e in dev.events)


def test_preset_configuration_and_trace_stream():
    cycles = 100_000
    preset = get_preset("mlc34nm")
    with FakeDevice(PARAMS, trains(cycles, seed=8), cycles, snapshot_period=0,
                    clock_hz=1_000_000) as fake, Device(fake.path, timeout=0.3) as dev:
        # 1 µs ticks, so the scaled trains classify; the stimulus starts at the clear below.
        dev.apply_preset(preset, prescaler=1, clear=False)
        assert dev.config == preset.config(PARAMS, 1_000_000, prescaler=1)
        dev.enable_trace()
        dev.clear()
        traces = []
        end = time.monotonic() + 10
        batches = 0
        for _, frame in dev.frames():
            if frame is not None:
                traces += trace_records(frame, PARAMS)
                batches += frame.TYPE.name == "TRACE_BATCH"
            if fake.finished or time.monotonic() > end:
                break
        for _, frame in dev.frames(duration=0.3):  # what was still on its way
            if frame is not None:
                traces += trace_records(frame, PARAMS)
                batches += frame.TYPE.name == "TRACE_BATCH"
        # (The fake device sends the gateware's TRACE_BATCH frames, several records each.)
        assert 0 < batches < len(traces)
        dev.enable_trace(False)
        exp = fake.expected()
        measured = [p for p in exp.pulses if p.index != PARAMS.classes + 1]
        lost = sum(fake.trace_lost)
        assert len(traces) + lost == len(measured)
        assert {(t.channel, t.width) for t in traces} <= {(p.channel, p.width)
                                                         for p in measured}

"""End to end through the simulated device: the real gateware in Verilator, its UART bridged to a
pty, the host's Device and capture code. Known stimulus → captured counts equal the reference
model's exactly; also with a corrupted link and with an unplug in the middle of a capture."""

import time
from fractions import Fraction

import numpy as np
import pytest

from rbscope.device.capture import CaptureReader, CaptureWriter
from rbscope.device.device import Device
from rbscope.device.simdevice import SimDevice
from rbscope.device.stimulus import NAND_MIX_SCALED, Operation, TrainSpec, random_trains
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams

from .conftest import REPO_ROOT

BUILD_ROOT = REPO_ROOT / "build" / "sim-tests"
PARAMS = SnifferParams(channels=4)
CONFIG = SnifferConfig(prescaler=1, glitch_ticks=3, idle_ticks=200_000,
                       windows=((3, 12), (12, 120), (120, 2400), (2400, 5000)))
CYCLES = 600_000  # 0.6 s of device time at the declared 1 MHz


def trains(seed):
    spec = TrainSpec(PARAMS.channels, CYCLES, gap=(20, 400), glitch_rate=0.1,
                     low_at_reset=frozenset({2}))
    return random_trains(spec, seed)


def wait_quiescent(dev, limit_s=120):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        snap = dev.wait_snapshot(timeout=2)
        if snap is not None and dev.is_quiescent() and snap.timestamp > CYCLES:
            return snap
    raise AssertionError("the simulated device never became quiescent")


def traced_capture(sim, path, summarise=None):
    """A capture with TRACE from a clear to quiescence, a final snapshot and the histograms,
    then the FIFO's last records (they follow the final snapshot); ``summarise``: the
    TRACE_SUMMARY mask written first."""
    writer = CaptureWriter(path)
    dev = Device(str(sim.link), timeout=0.5, retries=8)
    try:
        dev.attach_capture(writer)
        if summarise is not None:
            assert dev.summarise_trace(summarise) == summarise
        dev.enable_trace(True)
        dev.clear()
        wait_quiescent(dev)
        dev.snapshot()
        dev.read_histograms()
        for _ in dev.frames(duration=0.5):
            pass
    finally:
        dev.close()
        writer.close()


def check_exact(sim, snap, hist):
    truth = sim.truth(CYCLES)
    assert not truth.may_drop
    n = PARAMS.counters_per_channel
    for ch, counts in enumerate(truth.channels):
        assert list(snap.counters[ch].counters) == counts.row(PARAMS)[:n], f"channel {ch}"
        assert hist[ch] == counts.histogram, f"channel {ch} histogram"
    assert sum(sum(c.classes) for c in truth.channels) > 500  # the workload did something


@pytest.mark.parametrize("corrupt, divisor", [(False, 4), (True, 4), (False, Fraction(25, 3))],
                         ids=["clean", "corrupted", "fractional-divisor"])
def test_counts_exact_through_the_simulated_device(corrupt, divisor, tmp_path):
    # 0.1 % of the bytes corrupted: about ten damaged frames over the run, every one detected.
    # 25/3 clocks a bit: the ECPIX-5's 12 Mbaud from 100 MHz (the fractional UART both ways;
    # the harness's side of the wire at the exact rate).
    rates = dict(flip_rate=0.0005, drop_rate=0.0005) if corrupt else {}
    with SimDevice(PARAMS, CONFIG, trains(7), build_root=BUILD_ROOT, uart_divisor=divisor,
                   **rates) as sim:
        dev = Device(str(sim.link), timeout=0.5, retries=8)
        try:
            wait_quiescent(dev)
            snap = dev.snapshot()
            hist = dev.read_histograms()
            errors = dev.stats
        finally:
            dev.close()
        check_exact(sim, snap, hist)
    if corrupt:  # the corruption really happened, and was recovered from
        assert errors.errors > 0 and errors.lost_frames > 0
    else:
        assert errors.errors == 0 and errors.lost_frames == 0


def test_unplug_mid_capture_loses_nothing(tmp_path):
    path = tmp_path / "capture.rbc"
    # The port vanishes at 0.3 s of device time (mid-workload) for 0.2 s, then reappears.
    with SimDevice(PARAMS, CONFIG, trains(8), build_root=BUILD_ROOT, vanish_at=300_000,
                   vanish_for=200_000) as sim:
        writer = CaptureWriter(path)
        dev = Device(str(sim.link), timeout=0.5, retries=8, reconnect_timeout=60)
        try:
            dev.attach_capture(writer)
            snap = wait_quiescent(dev)
            snap = dev.snapshot()
            hist = dev.read_histograms()
        finally:
            dev.close()
            writer.close()
        assert any(line.startswith("VANISHED") for line in sim.lines)
        check_exact(sim, snap, hist)
    # The capture file is complete: its last counters are the exact ones.
    reader = CaptureReader(path)
    latest = reader.latest_counters()
    truth = SimDevice(PARAMS, CONFIG, trains(8)).truth(CYCLES)
    for ch, counts in enumerate(truth.channels):
        assert list(latest[ch].counters) == counts.row(PARAMS)[:PARAMS.counters_per_channel]


@pytest.mark.parametrize("summary", [False, True], ids=["whole", "summarised"])
def test_trace_records_in_order_and_every_loss_counted(summary):
    """TRACE at link saturation: 250 kbaud carries far fewer records than the workload makes.
    Every record that arrives is one of the model's pulses, in order per channel, and the
    per-channel and total loss counters account for every other one. With the summariser
    (class 1 summarised) too: a SUMMARY counts as its pulses, a LATE record is its pulse."""
    from rbscope.device.protocol import trace_records
    from rbscope.gateware.link.summary import COUNT_BITS, COUNT_MAX, LATE_KIND, SUMMARY_KIND
    from rbscope.gateware.rb_sniffer import Counter

    with SimDevice(PARAMS, CONFIG, trains(9), build_root=BUILD_ROOT,
                   trace_summary=summary) as sim:
        dev = Device(str(sim.link), timeout=0.5, retries=8)
        records = []
        try:
            if summary:
                dev.summarise_trace(0b0010)
            dev.enable_trace(True)
            start = dev.snapshot()  # tracing is on from here
            for _, frame in dev.frames(duration=None):
                records += trace_records(frame, PARAMS)
                snap = dev.latest_snapshot
                if snap is not None and dev.is_quiescent() and snap.timestamp > CYCLES:
                    break
            end = dev.snapshot()
            dev.enable_trace(False)
            # Records queued while the commands ran, and the FIFO's last ones.
            records += [t for _, f in dev.frames(duration=0.5) for t in trace_records(f, PARAMS)]
        finally:
            dev.close()
    truth = sim.truth(CYCLES)
    glitch = PARAMS.counter_index(Counter.GLITCH)
    latency = 2 * (PARAMS.channels + 1) + 8  # pulse end → classification, in cycles (ticks)
    t0, t1 = start.status.timestamp, end.status.timestamp
    received = expected = 0
    for ch in range(PARAMS.channels):
        model = [q for q in truth.pulses if q.channel == ch and q.index != glitch]
        recs = [r for r in records if r.channel == ch]
        # Every record is one of the model's pulses, classified within the pipeline latency,
        # and records come in the order of the pulses.
        last, age, weight = -1, None, []
        for r in recs:
            if r.kind == SUMMARY_KIND:
                age = r.width >> COUNT_BITS
                weight.append(r.width & COUNT_MAX)
                continue
            ended = r.timestamp - (age if r.kind == LATE_KIND else 0)
            age = None
            weight.append(1)
            matches = [i for i, q in enumerate(model) if (q.index, q.width) == (r.index, r.width)
                       and 0 <= ended - q.end_cycle <= latency]
            assert len(matches) == 1, f"channel {ch}: record {r} matches {len(matches)} pulses"
            assert matches[0] > last, f"channel {ch}: record {r} out of order"
            last = matches[0]
        received += sum(w for r, w in zip(recs, weight, strict=True) if t0 < r.timestamp <= t1)
        expected += sum(t0 < q.end_cycle <= t1 for q in model)
        assert recs and end.counters[ch].trace_lost > start.counters[ch].trace_lost
    lost = end.status.trace_lost - start.status.trace_lost
    # Records + losses account for every pulse between the two snapshots (a pulse or two per
    # channel may straddle a snapshot boundary).
    assert abs(received + lost - expected) <= 2 * PARAMS.channels, (received, lost, expected)
    assert received > 100 and lost > 100
    if summary:
        assert any(r.kind == SUMMARY_KIND for r in records)


def test_a_traced_capture_gives_each_lines_pulse_sequence(tmp_path):
    """TRACE records within the link's capacity (the FIFO rides out the bursts): the capture's
    measurement holds every line's whole pulses of the epoch, in order, exactly the model's,
    and says its sequence is complete. (A pulse per line every 6-18 ms of device time: at half
    that, one run of the full suite on a busy machine lost two records to a full FIFO.)"""
    from rbscope.device.capture import capture_to_measurement
    from rbscope.gateware.rb_sniffer.params import EventKind

    path = tmp_path / "traced.rbcap"
    spec = TrainSpec(PARAMS.channels, CYCLES, gap=(6000, 18000), glitch_rate=0.1)
    stim = random_trains(spec, 11)
    with SimDevice(PARAMS, CONFIG, stim, build_root=BUILD_ROOT) as sim:
        traced_capture(sim, path)
    truth = sim.truth(CYCLES)
    m = capture_to_measurement(path)
    seq = m.provenance["sequence"]
    assert seq["complete"], seq
    glitch = PARAMS.counter_index(Counter.GLITCH)
    for ch in range(PARAMS.channels):
        whole = [q.width for q in truth.pulses
                 if q.channel == ch and q.index != glitch and q.kind == EventKind.END]
        got = list(m.pulses[ch])
        counted = sum(m.counts[ch].classes) + m.counts[ch].unclassified
        assert len(got) == counted > 20
        assert got == whole[len(whole) - counted:], f"channel {ch}"
        assert seq["lines"][str(ch)]["lost"] == 0


def test_a_summarised_capture_keeps_every_pulse_it_does_not_summarise(tmp_path):
    """The trace summariser in the Verilator device (``trace_summary``, the ECP5 boards'): with
    class 1 summarised, each line's sequence is the model's whole pulses less some pulses of
    class 1, each of which lies between two class-1 pulses that are in it (the middle of a
    run), exactly as many as its SUMMARY records count; the pulses in it have the model's
    widths and starts (a run's last pulse too, rebuilt from its LATE record's age), and the
    records with the summarised pulses are the pulses counted."""
    from rbscope.analysis.streaming import TraceScanner
    from rbscope.device.capture import capture_to_measurement
    from rbscope.gateware.rb_sniffer.params import EventKind

    path = tmp_path / "summarised.rbcap"
    # Reads (class 1) in the majority, as in a read-heavy stretch.
    mix = (Operation("read", 15, ((1, 25, 60),)),) + NAND_MIX_SCALED[1:]
    spec = TrainSpec(PARAMS.channels, CYCLES, mix=mix, gap=(600, 3000), glitch_rate=0.05)
    stim = random_trains(spec, 12)
    with SimDevice(PARAMS, CONFIG, stim, build_root=BUILD_ROOT, trace_summary=True) as sim:
        # (class 1, at any fill of the FIFO: this load never crowds it)
        traced_capture(sim, path, summarise=0b0010 | 1 << PARAMS.classes)
    truth = sim.truth(CYCLES)
    m = capture_to_measurement(path)
    seq = m.provenance["sequence"]
    assert seq["complete"], seq
    assert seq["summarised"] > 100
    # The capture's warning says so, and that the idle time across a run is no gap.
    warning = next(w for w in m.provenance["warnings"] if "the device summarised" in w)
    assert f"summarised {seq['summarised']:,} pulse(s)" in warning
    assert "the idle time between them, which spans the others, is read as no gap" in warning
    glitch = PARAMS.counter_index(Counter.GLITCH)
    # The streaming scanner, chunk by chunk: each line's widths and open gaps.
    epoch = capture_to_measurement(path, sequence=False).provenance["sequence"]
    widths, opened = {}, {}
    for _, chunk in TraceScanner(path, m.params, from_tick=epoch["from_tick"],
                                 to_tick=epoch["to_tick"], chunk=97):
        for ch, (w, _st, g) in chunk.items():
            widths.setdefault(ch, []).extend(w.tolist())
            opened.setdefault(ch, []).extend(g.tolist())
    streamed = {}
    for ch, w in widths.items():
        # (The scanner's line may begin with a few records before the epoch's first: its
        # classifier allows for them, ``stream_classify``'s ``edge``.)
        skip = len(w) - len(m.pulses[ch])
        assert 0 <= skip <= 8 and w[skip:] == list(m.pulses[ch]), f"channel {ch}"
        streamed[ch] = {j - skip for j in np.flatnonzero(opened[ch]).tolist() if j > skip}
    for ch in range(PARAMS.channels):
        model = [q for q in truth.pulses
                 if q.channel == ch and q.index != glitch and q.kind == EventKind.END]
        counted = sum(m.counts[ch].classes) + m.counts[ch].unclassified
        model = model[len(model) - counted:]
        got = list(zip(m.pulses[ch], m.pulse_starts[ch], strict=True))
        summarised = seq["lines"][str(ch)].get("summarised", 0)
        assert len(got) + summarised == counted > 20
        # Walk the model: each pulse is the next one of the sequence, or a summarised one.
        j, left_out, after = 0, [], set()
        latency = 4 * (PARAMS.channels + 1) + 2  # a pulse's end to its record's time (cycles)
        for k, q in enumerate(model):
            start = q.end_cycle - q.width  # (prescaler 1: a tick a cycle)
            if j < len(got) and got[j][0] == q.width and 0 <= got[j][1] - start <= latency:
                if left_out and left_out[-1] == k - 1 and j:
                    after.add(j)  # (its idle time before it spans the pulses left out)
                j += 1
            else:
                left_out.append(k)
        # The pulses after summarised ones, and only they, have their gap marked open, by the
        # whole reader and by the streaming scanner (chunk by chunk) alike.
        assert set(m.pulse_gaps_open.get(ch, ())) == after and len(after) > 5, f"channel {ch}"
        assert streamed.get(ch, set()) == after, f"channel {ch}"
        assert j == len(got), (f"channel {ch}: pulse {j} of the sequence is not the model's: "
                               f"{got[max(0, j - 3):j + 3]}, model "
                               f"{[(q.width, q.end_cycle - q.width, q.index) for q in model][:40]}")
        assert len(left_out) == summarised, f"channel {ch}"
        for k in left_out:
            assert model[k].index == 1, f"channel {ch}: a class-{model[k].index} pulse left out"
            # (the middle of a run: class-1 pulses on both sides)
            assert 0 < k < len(model) - 1 and model[k - 1].index == model[k + 1].index == 1

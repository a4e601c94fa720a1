"""The full-load benchmark's arithmetic (benchmarks/full_load.py): the pulse spacing that makes a
rate on average, and the wire bytes a pulse record costs in TRACE_BATCH frames."""

import numpy as np
import pytest

from rbscope.device import protocol as hp
from rbscope.device.simdevice import SimDevice
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def full_load():
    return load_benchmark("full_load")


def test_the_spacing_makes_the_rate_on_average(full_load):
    rng = np.random.default_rng(3)
    widths = np.concatenate([rng.uniform(20, 90, 700), rng.uniform(800, 2500, 300)])
    for rate in (200, 800, 1500):
        gap = full_load.spacing_us(rate, widths)
        assert gap > 0
        assert np.maximum(gap, widths + 2).mean() == pytest.approx(1e6 / rate, rel=1e-6)
    # More than back-to-back pulses allow: no spacing, the widths' own rate.
    assert full_load.spacing_us(1e6 / (widths + 2).mean() * 1.01, widths) == 0.0


def test_the_trains_offer_the_rate(full_load):
    widths = np.full(10_000, 50.0)
    trains = full_load.trains_at(4, 1_000_000, 2000, 0.5, widths)
    pulses = [len(t.edges) // 2 for t in trains]
    assert all(abs(n / 0.5 - 2000) < 10 for n in pulses)


def test_a_record_costs_what_the_frame_says(full_load):
    params = SnifferParams(channels=64)
    frame = hp.encode_frame(wire.FrameType.TRACE_BATCH, bytes(
        wire.layout_bytes(wire.trace_batch_layout(params))))
    # (All-zero payload: no byte stuffed; the benchmark adds the typical 2/256.)
    assert full_load.batch_wire_bytes(params) == pytest.approx(
        (len(frame) - 1) * (1 + 2 / 256) / wire.TRACE_BATCH_RECORDS)
    assert 7.5 < full_load.batch_wire_bytes(params) < 7.7


def test_the_simulated_device_is_each_board_s_build(full_load):
    # The rows say "as shipped": the device gets the board's trace FIFO and its scheduling of
    # TRACE_BATCH frames (a board class may send them after a burst: the iCEBreaker did until
    # 2026-12-03, while the benchmark built every board with them between).
    assert full_load.device_options("icebreaker") == {"trace_depth": 256,
                                                      "batches_in_bursts": True,
                                                      "trace_summary": False}
    assert full_load.BOARDS["icebreaker"][2] == 4  # 12 Mbaud at 48 MHz
    assert full_load.device_options("ecpix5") == {"trace_depth": 4096, "batches_in_bursts": True,
                                                  "trace_summary": True}
    assert full_load.device_options("ulx3s") == {"trace_depth": 1024, "batches_in_bursts": True,
                                                 "trace_summary": True}


def test_the_simulated_device_takes_the_batch_scheduling():
    params, config, trains = SnifferParams(channels=2), SnifferConfig(), [(1, []), (1, [])]
    between = SimDevice(params, config, trains).verilog()
    after = SimDevice(params, config, trains, batches_in_bursts=False).verilog()
    assert between != after
    assert SimDevice(params, config, trains, batches_in_bursts=True).verilog() == between


def test_a_peak_rate_is_each_die_s_pace_where_its_widths_allow(full_load):
    # Short pulses start 1/R apart; a long one delays the next by its width and 2 µs; so the
    # average falls below R, where the averaged trains run their short stretches faster.
    widths = np.tile([40.0, 40.0, 40.0, 1000.0], 2000)
    peak = full_load.trains_at(1, 1_000_000, 8000, 0.2, widths, peak=True)[0].edges
    starts = np.array([t for t, level in peak if level == 0])
    gaps = np.diff(starts)[:12]
    assert list(gaps) == [125, 125, 125, 1002] * 3
    average = full_load.trains_at(1, 1_000_000, 2000, 0.2, widths)[0].edges
    assert len(peak) // 2 == pytest.approx(0.2 * 1e6 / (3 * 125 + 1002) * 4, abs=4)
    assert np.diff([t for t, level in average if level == 0]).min() < 1e6 / 2000

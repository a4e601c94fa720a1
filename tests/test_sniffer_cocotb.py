"""Cocotb benches of the sniffer on its generated Verilog, on Icarus and on Verilator.

Each case drives pulse trains into the pins and checks every counter and histogram bin against
the bit-exact reference model (``cocotb_tests/sniffer_bench.py``). The long cases (marked
``slow``) run under ``make test-all``.
"""

import pytest

from cocotb_tests.runner import run_bench
from rbscope.gateware.rb_sniffer import RBSniffer, SnifferParams

SIMULATORS = ["icarus", "verilator"]

#: Windows in ticks for the scaled NAND mix of rbscope.device.stimulus: cache busy, read, program
#: (both MLC clusters), erase.
WINDOWS = [[3, 12], [12, 120], [120, 2400], [2400, 5000]]


def run_sniffer(simulator, build_dir, params, config, scenario, cycles=0, build_args=(),
                **extra):
    design = SnifferParams(**params)
    return run_bench(lambda: RBSniffer(design), "rb_sniffer", "sniffer_bench", simulator,
                     build_dir, build_args=build_args,
                     params={"params": params, "config": config, "scenario": scenario,
                             "cycles": cycles, **extra})


def pulses(start, spec):
    edges, t = [], start
    for low, high in spec:
        edges += [[t, 0], [t + low, 1]]
        t += low + high
    return edges


@pytest.mark.parametrize("simulator, build_args", [
    ("icarus", ()), ("icarus", ("-g2005",)), ("icarus", ("-g2005-sv",)), ("verilator", ())],
    ids=["icarus-2012", "icarus-2005", "icarus-2005sv", "verilator"])
def test_edge_cases(simulator, build_args, cocotb_build_dir):
    """Window edges, glitches and ringing, one-cycle gaps, a pulse in progress at reset,
    a disabled channel, prescaler phase. Icarus in every language mode: the Verilog must not
    depend on events at time 0."""
    lo, hi = 12, 120
    trains = [
        # Widths at lo-1, lo, hi-1, hi of the read window; prescaler 2 → 2 cycles per tick.
        [1, pulses(20, [(2 * (lo - 1), 1), (2 * lo, 1), (2 * (hi - 1), 1), (2 * hi, 1)])],
        # Back-to-back pulses separated by a single high cycle, then ringing after a pulse.
        [1, pulses(7, [(30, 1)] * 6 + [(40, 2), (1, 1), (2, 1), (1, 30)])],
        # In progress at reset, then a normal pulse.
        [0, [[50, 1]] + pulses(60, [(100, 5)])],
        # Disabled channel with activity.
        [1, pulses(5, [(40, 10)] * 5)],
    ]
    run_sniffer(simulator, cocotb_build_dir,
                params={"channels": 4},
                config={"prescaler": 2, "glitch_ticks": 2, "windows": WINDOWS,
                        "idle_ticks": 20, "enable": 0b0111},
                scenario={"kind": "explicit", "trains": trains}, cycles=900, check_trace=True,
                build_args=build_args)


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=pytest.mark.heavy),
                                       "verilator"])
def test_random_trains_16_channels(simulator, cocotb_build_dir):
    """Seeded random NAND mixes with glitches on 16 channels, two busy at reset."""
    run_sniffer(simulator, cocotb_build_dir,
                params={"channels": 16},
                config={"prescaler": 1, "glitch_ticks": 3, "windows": WINDOWS,
                        "idle_ticks": 60},
                scenario={"kind": "random", "seed": 2,
                          "spec": {"low_at_reset": [3, 9], "glitch_rate": 0.2,
                                   "gap": [40, 300]}},
                cycles=40_000)


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=pytest.mark.heavy),
                                       "verilator"])
def test_stuck_low_line_saturates(simulator, cocotb_build_dir):
    """A line stuck busy for 2.5 × MAX ticks is overlong once; its busy time stays exact."""
    params = {"channels": 4, "width_bits": 16}
    run_sniffer(simulator, cocotb_build_dir, params=params,
                config={"prescaler": 1, "glitch_ticks": 3, "windows": WINDOWS,
                        "idle_ticks": 100},
                scenario={"kind": "random", "seed": 5,
                          "spec": {"stuck": {"1": 5 * ((1 << 16) - 1) // 2},
                                   "gap": [40, 400]}},
                cycles=180_000)


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=pytest.mark.heavy),
                                       "verilator"])
def test_saturation_boundaries(simulator, cocotb_build_dir):
    """Pulses around MAX and 2 MAX ticks: one tick short of overlong, exactly MAX (overlong, no
    remainder), ending a tick or a few after saturating (before the scanner sees the
    saturation: its overlong count and busy time come in one job), exactly 2 MAX (a second
    saturation, no remainder) and 2 MAX + 10, each followed by a short pulse."""
    mx = (1 << 16) - 1
    widths = [mx - 1, mx, mx + 1, mx + 3, 2 * mx, 2 * mx + 10]
    trains = [[1, pulses(20 + 7 * ch, [(w, 50), (30, 10)])] for ch, w in enumerate(widths)]
    run_sniffer(simulator, cocotb_build_dir, params={"channels": 6, "width_bits": 16},
                config={"prescaler": 1, "glitch_ticks": 3, "windows": WINDOWS,
                        "idle_ticks": 100},
                scenario={"kind": "explicit", "trains": trains},
                cycles=2 * mx + 200)


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=pytest.mark.heavy),
                                       "verilator"])
def test_worst_case_all_channels_at_once_48mhz(simulator, cocotb_build_dir):
    """16 channels at 48 MHz, all 1 µs low / 1 µs high in phase: no event may be lost."""
    run_sniffer(simulator, cocotb_build_dir, params={"channels": 16},
                config={"prescaler": 1, "glitch_ticks": 1, "windows": [[40, 60]],
                        "idle_ticks": 1000},
                scenario={"kind": "worst_case", "low": 48, "high": 48, "pulses": 150},
                expect_pulses=150)


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["verilator"])
def test_worst_case_all_channels_at_once_64ch_100mhz(simulator, cocotb_build_dir):
    """64 channels at 100 MHz, all 1 µs low / 1 µs high in phase: no event may be lost."""
    run_sniffer(simulator, cocotb_build_dir, params={"channels": 64},
                config={"prescaler": 1, "glitch_ticks": 1, "windows": [[90, 110]],
                        "idle_ticks": 1000},
                scenario={"kind": "worst_case", "low": 100, "high": 100, "pulses": 100},
                expect_pulses=100)

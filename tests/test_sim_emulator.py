"""Loopback through the link: emulated dies → sniffer → UART → host, in the simulated device.

The device is built with the NAND emulator in loopback (sniffer channel i watches die i). The host
programs the on-chip traffic generator over the link (registers generated from the emulator's
layouts), runs single-plane and two-plane workloads, and compares the sniffer's counts, read over
the link, with the emulator's ground truth, also read over the link (READ_TRUTH): the RB-Explorer
relation N_page = N_Tprogram × Mp holds exactly.
"""

import time

from rbscope.device.device import Device
from rbscope.device.emulator import read_truth
from rbscope.device.simdevice import SimDevice
from rbscope.gateware.nand_emu.layouts import traffic_const
from rbscope.gateware.nand_emu.params import EmuConfig, EmuCounter, EmuParams, TrafficConfig
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import Train

from .conftest import REPO_ROOT
from .test_nand_emu_cocotb import GEOMETRY, LOOP_CONFIG, LOOP_TRAFFIC, LOOP_WINDOWS

DBSY, READ, PROGRAM, ERASE = range(4)


def run_traffic(dev, emu, traffic):
    value = traffic_const(emu, traffic)
    for i in range((dev.info.emu_traffic_bits + 31) // 32):
        dev.write_reg(f"TRAFFIC_CFG_{i}", (value >> 32 * i) & 0xFFFF_FFFF)
    dev.write_reg("TRAFFIC_CONTROL", 1)
    end = time.monotonic() + 60
    while dev.read_reg("TRAFFIC_BUSY"):
        assert time.monotonic() < end, "the traffic generator never finished"
    return dev.read_reg("TRAFFIC_STEPS")


def loop_setup(**sniffer):
    """The loopback benches' emulator, sniffer parameters (``sniffer`` added), sniffer and
    emulator configurations, and an idle train per die."""
    emu = EmuParams(**GEOMETRY, storage=0)
    params = SnifferParams(channels=emu.dies, **sniffer)
    config = SnifferConfig(prescaler=LOOP_CONFIG["prescaler"], glitch_ticks=1,
                           windows=tuple(map(tuple, LOOP_WINDOWS)), idle_ticks=1000)
    emu_config = EmuConfig(**{k: tuple(v) if isinstance(v, list) else v
                              for k, v in LOOP_CONFIG.items()})
    return emu, params, config, emu_config, [Train(1, []) for _ in range(emu.dies)]


def test_emulated_dies_counted_over_the_link_equal_their_ground_truth():
    emu, params, config, emu_config, idle = loop_setup()
    with SimDevice(params, config, idle, build_root=REPO_ROOT / "build" / "sim-tests",
                   emulator=emu, emu_config=emu_config) as sim:
        dev = Device(str(sim.link), timeout=0.5, retries=8)
        try:
            assert dev.info.emu_dies == emu.dies
            assert dev.read_reg("EMU_CFG_0") & 0xFFFF == LOOP_CONFIG["prescaler"]
            runs = []
            before = (dev.snapshot(), read_truth(dev))
            for spec in LOOP_TRAFFIC:
                traffic = TrafficConfig(**spec)
                steps = run_traffic(dev, emu, traffic)
                after = (dev.snapshot(), read_truth(dev))
                runs.append((traffic, steps, before, after))
                before = after
        finally:
            dev.close()

    k = params.classes
    for traffic, steps, (snap0, truth0), (snap1, truth1) in runs:
        mp = 2 if traffic.multi_plane else 1
        assert steps > 0
        for die in range(emu.dies):
            row = [b - a for a, b in zip(snap0.counters[die].counters,
                                          snap1.counters[die].counters, strict=True)]
            truth = [b - a for a, b in zip(truth0[die], truth1[die], strict=True)]
            on = (traffic.dies >> die) & 1
            assert row[k + Counter.UNCLASSIFIED] == row[k + Counter.DROPPED] == 0, row
            assert row[k + Counter.PARTIAL] == row[k + Counter.OVERLONG] == 0, row
            # One tPROG pulse per program operation; Mp pages per pulse.
            assert row[PROGRAM] == truth[EmuCounter.PROGRAM_OPS]
            assert row[PROGRAM] * mp == truth[EmuCounter.PAGE_PROGRAMS]
            assert row[ERASE] == truth[EmuCounter.ERASE_OPS]
            assert row[READ] == truth[EmuCounter.PAGE_READS]
            groups = traffic.blocks * traffic.loops
            assert truth[EmuCounter.PAGE_PROGRAMS] == on * groups * traffic.pages * mp
            assert truth[EmuCounter.FAILED] == truth[EmuCounter.ILLEGAL] == 0
            # Two-plane operations queue the first plane with a short tDBSY pulse.
            assert row[DBSY] == on * groups * (traffic.pages + traffic.erase) * (mp - 1)

"""The opcode tap in the device, over the link: its counts equal the emulator's ground truth.

The simulated device is built with the NAND emulator in loopback and the bus tap listening to the
emulated bus (``DeviceCore(tap=…)``). The host programs the traffic generator, then reads, over
the link, the tap's counters (``TAP_READ``), the sniffer's class counters (whose classes follow
the tap's tags) and the emulator's ground truth (READ_TRUTH): program, cache-program, multi-plane
program and erase, and read operations agree exactly, and the measured Mp is the build's.
"""

import json

import pytest

from rbscope.cli import commands as cli
from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.device import Device
from rbscope.device.emulator import read_truth
from rbscope.device.simdevice import SimDevice
from rbscope.device.tap import read_tap
from rbscope.gateware.nand_emu.params import EmuCounter, TrafficConfig
from rbscope.gateware.onfi_tap.params import OpClass, PlaneKind, TapConfig, TapParams
from rbscope.gateware.rb_sniffer import Counter

from .conftest import REPO_ROOT
from .test_sim_emulator import loop_setup, run_traffic

#: The sniffer's classes, each fed by the tap's tag of one opcode class (tag = class + 1).
DBSY, READ, PROGRAM, ERASE, CACHE = range(5)
TAGS = {OpClass.MP_QUEUE: DBSY + 1, OpClass.ERASE_QUEUE: DBSY + 1, OpClass.READ: READ + 1,
        OpClass.PROGRAM: PROGRAM + 1, OpClass.ERASE: ERASE + 1,
        OpClass.CACHE_PROGRAM: CACHE + 1}
TRAFFIC = [
    # Single-plane programs with a read after each, erases.
    {"dies": 3, "first_block": 0, "blocks": 2, "pages": 4, "reads": 1, "loops": 1},
    # Two-plane programs and erases (11h / D1h queue the first plane).
    {"dies": 3, "first_block": 4, "blocks": 1, "pages": 4, "loops": 1, "multi_plane": True},
    # Cache programs (15h for all pages of a block but the last), die 1 only.
    {"dies": 2, "first_block": 2, "blocks": 1, "pages": 6, "loops": 1, "cache": True},
]


def delta(after, before):
    return [b - a for a, b in zip(before, after, strict=True)]


@pytest.mark.heavy  # (tests/test_onfi_tap.py's loopback checks the tap on the emulator's bus)
def test_tap_counts_over_the_link_equal_the_emulators_ground_truth(tmp_path, capsys):
    emu, params, config, emu_config, idle = loop_setup(tag_bits=4)
    tap = TapParams(targets=emu.dies, sniffer=params)
    with SimDevice(params, config, idle, build_root=REPO_ROOT / "build" / "sim-tests",
                   emulator=emu, emu_config=emu_config, tap=tap,
                   tap_config=TapConfig(sniffer_tags=TAGS)) as sim:
        dev = Device(str(sim.link), timeout=0.5, retries=8)
        capture = tmp_path / "tap.rbcap"
        try:
            info = dev.info
            assert (info.tag_bits, info.tap_targets, info.tap_luns) == (4, emu.dies, 1)
            # A capture as `rbscope capture` records it: the tap's counters at start and stop.
            with CaptureWriter(capture) as writer:
                dev.attach_capture(writer)
                runs = []
                before = (dev.snapshot(), read_truth(dev), read_tap(dev))
                writer.tap(before[2], "start")
                first_truth = before[1]
                for spec in TRAFFIC:
                    traffic = TrafficConfig(**spec)
                    assert run_traffic(dev, emu, traffic) > 0
                    after = (dev.snapshot(), read_truth(dev), read_tap(dev))
                    runs.append((traffic, before, after))
                    before = after
                writer.tap(before[2], "stop")
                dev.snapshot()
        finally:
            dev.close()

    # capture → analyze: the opcode counts of the whole run equal the ground truth's.
    truth = [sum(delta(before[1][d], first_truth[d])[c] for d in range(emu.dies))
             for c in range(len(EmuCounter))]
    summary = capture_to_measurement(capture).provenance["tap"]
    assert summary["program_ops"] == truth[EmuCounter.PROGRAM_OPS] > 0
    assert summary["pages_programmed"] == truth[EmuCounter.PAGE_PROGRAMS]
    assert summary["cache_programs"] == truth[EmuCounter.CACHE_OPS] > 0
    assert summary["erase_ops"] == truth[EmuCounter.ERASE_OPS] > 0
    assert summary["blocks_erased"] == truth[EmuCounter.BLOCK_ERASES]
    assert summary["reads"] == truth[EmuCounter.PAGE_READS] > 0
    assert summary["mp"] == truth[EmuCounter.PAGE_PROGRAMS] / truth[EmuCounter.PROGRAM_OPS]
    analyze = ["analyze", str(capture), "--geometry", "ssd-v", "--logical", "32KiB",
               "--classifier", "windows", "--program-class", str(PROGRAM)]
    assert cli.main([*analyze, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"]["tap"] == summary
    assert cli.main(analyze) == 0
    text = capsys.readouterr().out
    assert (f"{summary['program_ops']:,} program operations "
            f"({summary['cache_programs']:,} cache programs)") in text

    k = params.classes
    for traffic, (snap0, truth0, tap0), (snap1, truth1, tap1) in runs:
        mp = emu.planes if traffic.multi_plane else 1
        for die in range(emu.dies):
            on = traffic.dies >> die & 1
            truth = delta(truth1[die], truth0[die])
            row = delta(snap1.counters[die].counters, snap0.counters[die].counters)
            ops = dict(zip(OpClass, delta(tap1.ops[die], tap0.ops[die]), strict=False))
            pulses = dict(zip(OpClass, delta(tap1.pulses[die], tap0.pulses[die]), strict=False))
            planes = delta(tap1.planes[die], tap0.planes[die])
            assert truth[EmuCounter.FAILED] == truth[EmuCounter.ILLEGAL] == 0, truth

            def pages(kind, planes=planes):
                base = int(kind) * 4
                return sum((n + 1) * planes[base + n] for n in range(4))

            def finals(kind, planes=planes):
                return sum(planes[int(kind) * 4:int(kind) * 4 + 4])

            # The tap's counts (by confirm command) against the emulator's ground truth.
            assert ops[OpClass.PROGRAM] + ops[OpClass.CACHE_PROGRAM] \
                == truth[EmuCounter.PROGRAM_OPS]
            assert pages(PlaneKind.PROGRAM) + pages(PlaneKind.CACHE_PROGRAM) \
                == truth[EmuCounter.PAGE_PROGRAMS]
            assert ops[OpClass.CACHE_PROGRAM] == truth[EmuCounter.CACHE_OPS]
            assert ops[OpClass.ERASE] == truth[EmuCounter.ERASE_OPS]
            assert pages(PlaneKind.ERASE) == truth[EmuCounter.BLOCK_ERASES]
            assert ops[OpClass.READ] == truth[EmuCounter.PAGE_READS]
            assert ops[OpClass.MP_QUEUE] == truth[EmuCounter.PAGE_PROGRAMS] \
                - truth[EmuCounter.PROGRAM_OPS]
            # Measured Mp: every final program confirm of this workload covers `mp` planes.
            assert finals(PlaneKind.PROGRAM) + finals(PlaneKind.CACHE_PROGRAM) \
                == ops[OpClass.PROGRAM] + ops[OpClass.CACHE_PROGRAM]
            if on and traffic.pages:
                assert pages(PlaneKind.PROGRAM) == mp * finals(PlaneKind.PROGRAM)
            # Every busy-starting command showed one pulse, labelled with its class.
            for c in (OpClass.PROGRAM, OpClass.CACHE_PROGRAM, OpClass.MP_QUEUE, OpClass.ERASE,
                      OpClass.ERASE_QUEUE, OpClass.READ):
                assert pulses[c] == ops[c], (c, pulses, ops)
            # The sniffer's classes follow the tags: counts by opcode, not by width.
            assert row[PROGRAM] == ops[OpClass.PROGRAM]
            assert row[CACHE] == ops[OpClass.CACHE_PROGRAM]
            assert row[ERASE] == ops[OpClass.ERASE]
            assert row[READ] == ops[OpClass.READ]
            assert row[DBSY] == ops[OpClass.MP_QUEUE] + ops[OpClass.ERASE_QUEUE]
            assert row[k + Counter.UNCLASSIFIED] == row[k + Counter.DROPPED] == 0, row
            # The workload itself (so that none of the above holds vacuously).
            groups = traffic.blocks * traffic.loops
            assert truth[EmuCounter.PAGE_PROGRAMS] == on * groups * traffic.pages * mp
            if traffic.cache:
                assert ops[OpClass.CACHE_PROGRAM] == on * groups * (traffic.pages - 1)
            if traffic.reads:
                assert ops[OpClass.READ] == on * groups * traffic.pages * traffic.reads


def test_sim_tap_needs_the_emulator(capsys):
    assert cli.main(["sim", "--tap"]) == 2
    assert "--tap needs --emulator" in capsys.readouterr().err


def test_capture_reports_the_tap_difference_and_a_lone_read(tmp_path):
    """The tap's counters at start and stop of a capture: analyze takes their difference
    (counters wrap at 48 bits); a capture with only the start read says so."""
    from rbscope.gateware.onfi_tap.model import TapCounts

    from .test_capture import _write_session

    tap = TapParams(targets=2)
    start, stop = TapCounts.zeros(tap), TapCounts.zeros(tap)
    start.ops[0][OpClass.PROGRAM] = (1 << 48) - 2  # wraps
    stop.ops[0][OpClass.PROGRAM] = 3
    stop.ops[1][OpClass.CACHE_PROGRAM] = 4
    stop.ops[1][OpClass.READ] = 7
    stop.planes[0][TapParams.planes_index(0, PlaneKind.PROGRAM, 2) % 16] = 5
    stop.planes[1][TapParams.planes_index(1, PlaneKind.CACHE_PROGRAM, 1) % 16] = 4
    stop.planes[1][TapParams.planes_index(1, PlaneKind.ERASE, 2) % 16] = 1
    path = tmp_path / "a.rbcap"
    _write_session(path)
    with CaptureWriter(path) as w:
        w.tap(start, "start")
    m = capture_to_measurement(path)
    assert "tap" not in m.provenance
    assert any("only one read of the bus tap" in w for w in m.provenance["warnings"])
    with CaptureWriter(path) as w:
        w.tap(stop, "stop")
    summary = capture_to_measurement(path).provenance["tap"]
    assert summary["program_ops"] == 5 + 4 and summary["cache_programs"] == 4
    assert summary["pages_programmed"] == 2 * 5 + 4
    assert summary["mp"] == 14 / 9
    assert (summary["erase_ops"], summary["blocks_erased"], summary["reads"]) == (1, 2, 7)
    assert summary["dies"][0]["ops"] == {"PROGRAM": 5}

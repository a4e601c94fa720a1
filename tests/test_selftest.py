"""``rbscope selftest`` against the simulated emulator build (the gateware in Verilator).

The device is exactly what ``rbscope sim --emulator 2`` runs; the command line is called as a
user would, on the device's pty.
"""

import json

import pytest

from rbscope.analysis.presets import identify
from rbscope.cli.commands import main
from rbscope.cli.selftest import _geometry
from rbscope.cli.sim import emulator_setup
from rbscope.device import selftest as st
from rbscope.device.device import Device
from rbscope.device.emulator import read_truth
from rbscope.device.fake import FakeDevice
from rbscope.device.simdevice import SimDevice
from rbscope.gateware.nand_emu import boot
from rbscope.gateware.nand_emu.params import SMALL_GEOMETRY, EmuCounter, EmuParams
from rbscope.gateware.rb_sniffer import Counter, SnifferParams

from .conftest import REPO_ROOT


def emulator_build():
    """A SimDevice as ``rbscope sim --emulator 2`` builds it: a board's emulator build."""
    params, config, trains, emu = emulator_setup(2)
    return SimDevice(params, config, trains, build_root=REPO_ROOT / "build" / "sim-tests",
                     emulator=emu, emu_config=boot.emu_config(emu))


@pytest.fixture(scope="module")
def sim_port():
    with emulator_build() as sim:
        yield str(sim.link)


def test_an_emulator_build_classifies_and_names_its_pulses_from_power_up():
    """Issue 25, item 16: nothing configured since power-up, the emulated dies are busy for the
    self-test's times, every pulse falls in its window, and the host names the windows."""
    with emulator_build() as sim:
        dev = Device(str(sim.link), timeout=0.5, retries=8)
        try:
            emu = st.identify_emulator(dev.info)
            preset = identify(dev.params, dev.info.clock_hz, dev.read_registers())
            assert preset is not None and preset.name == "emulator"
            assert preset.names == ("multiplane", "cache", "read", "program", "erase")
            before = (dev.snapshot(), read_truth(dev))
            runs = [t for _, t in st.selftest_programme(emu)[1:3]]  # 1- and 2-plane programmes
            for traffic in runs:
                st._run_traffic(dev, emu, boot.emu_config(emu), traffic, None)
            after = (dev.snapshot(), read_truth(dev))
        finally:
            dev.close()
    k = dev.params.classes
    for die in range(emu.dies):
        row = [b - a for a, b in zip(before[0].counters[die].counters,
                                      after[0].counters[die].counters, strict=True)]
        truth = [b - a for a, b in zip(before[1][die], after[1][die], strict=True)]
        want = [st.expected_counts(emu, t, die)["pulses"] for t in runs]
        assert truth[EmuCounter.PROGRAM_OPS] > 0 and truth[EmuCounter.PAGE_READS] > 0
        assert row[3] == truth[EmuCounter.PROGRAM_OPS] == sum(w["program"] for w in want)
        assert row[4] == truth[EmuCounter.ERASE_OPS] == sum(w["erase"] for w in want)
        assert row[2] == truth[EmuCounter.PAGE_READS]
        assert row[0] == sum(w["dbsy"] for w in want) > 0
        assert row[1] == 0
        assert row[k + Counter.UNCLASSIFIED] == row[k + Counter.PARTIAL] == 0


def test_selftest_passes_on_the_simulated_emulator(sim_port, capsys):
    assert main(["selftest", sim_port, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["result"] == "PASS"
    assert result["dies"] == 2
    checks = {(c["die"], c["what"]): c for c in result["checks"]}
    assert all(c["ok"] for c in checks.values())
    # The mix really ran: programs single- and two-plane, reads, erases, tDBSY pulses.
    for die in range(2):
        assert checks[die, "program pulses = PROGRAM_OPS"]["sniffer"] > 0
        pages = checks[die, "program pulses x Mp = PAGE_PROGRAMS"]
        assert pages["truth"] > checks[die, "program pulses = PROGRAM_OPS"]["truth"]
        assert checks[die, "read pulses = PAGE_READS"]["sniffer"] > 0
        assert checks[die, "multi-plane tDBSY pulses"]["sniffer"] > 0
        assert checks[die, "erase pulses x Mp = BLOCK_ERASES"]["truth"] > \
            checks[die, "erase pulses = ERASE_OPS"]["truth"]
    # Die 1 ran one more programme than die 0.
    assert checks[1, "read pulses = PAGE_READS"]["truth"] > \
        checks[0, "read pulses = PAGE_READS"]["truth"]
    assert [r["steps"] for r in result["runs"]] == [r["expected_steps"] for r in result["runs"]]

    # A second run on the same device passes too (the erase pass starts from a clean state),
    # and the human table names every die and says PASS.
    assert main(["selftest", sim_port]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS")
    assert "program pulses x Mp = PAGE_PROGRAMS" in out and "\n  1  " in out


def test_selftest_fails_when_the_sniffer_misclassifies(sim_port, capsys, monkeypatch):
    # Windows that put the slow (upper-page) programs outside the program class: the sniffer's
    # counts no longer equal the ground truth, and the self-test must say so.
    monkeypatch.setitem(st.WINDOWS, "program", (40, 80))
    assert main(["selftest", sim_port]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out.splitlines()[-1]
    failing = [line for line in out.splitlines() if line.endswith("FAIL")
               and "program pulses = PROGRAM_OPS" in line]
    assert len(failing) == 2  # both dies


def test_selftest_refuses_a_device_without_emulator(capsys):
    with FakeDevice(SnifferParams(channels=2), board="no-emulator") as fake:
        assert main(["selftest", fake.path, "--timeout", "0.3"]) == 3
    err = capsys.readouterr().err
    assert "not an emulator build" in err


def test_programme_expectations_are_consistent():
    emu = EmuParams(dies=2, **SMALL_GEOMETRY)
    runs = st.selftest_programme(emu)
    names = [n for n, _ in runs]
    assert any("two-plane" in n for n in names)
    # The erase pass covers every block the other runs program.
    erase = runs[0][1]
    for _, t in runs[1:]:
        span = t.blocks * (emu.planes if t.multi_plane else 1)
        assert erase.first_block <= t.first_block
        assert t.first_block + span <= erase.first_block + erase.blocks
    e = st.expected_counts(emu, runs[2][1], 0)
    assert e["truth"][EmuCounter.PAGE_PROGRAMS] == 2 * e["truth"][EmuCounter.PROGRAM_OPS]


def test_geometry_option_is_checked(capsys):
    assert main(["selftest", "/dev/null", "--geometry", "planes"]) == 2
    assert "KEY=N" in capsys.readouterr().err


def test_geometry_option_names_a_page_type_map_size():
    """A board built with ``--page-type-slots 256`` is told apart by its configuration size."""
    from rbscope.device.protocol import Info
    from rbscope.gateware.nand_emu.link import emulator_link

    emu = EmuParams(dies=2, page_type_slots=256)
    link = emulator_link(emu)
    info = Info(0, b"", emu_dies=2, emu_cfg_bits=link.cfg_bits,
                emu_traffic_bits=link.traffic_bits)
    with pytest.raises(st.SelftestError, match="matches no known geometry"):
        st.identify_emulator(info)
    assert st.identify_emulator(info, _geometry("page_type_slots=256")) == emu

"""``analyze`` of a tap build's capture: which period each WA covers, and no denormal dust
(issue 25, item 10)."""

import json

from rbscope.analysis.geometry import load_geometry
from rbscope.analysis.wa import _endurance
from rbscope.cli import analyze as analyze_cli
from rbscope.cli import commands as cli
from rbscope.cli.sim import DEFAULT_WINDOWS_US
from rbscope.gateware.rb_sniffer import SnifferParams

from .test_named_windows import write_capture


def test_tap_and_rb_wa_say_which_period_each_covers(tmp_path, capsys):
    params = SnifferParams(channels=4)
    logical = str(4 * 40 * 4096)
    # The workload ran before the capture (no --clear): R/B# counts it, the tap does not.
    path = tmp_path / "before.rbcap"
    write_capture(path, params, DEFAULT_WINDOWS_US, before=40, programs=40, tap_pages=0)
    args = ["analyze", str(path), "--geometry", "ssd-v", "--logical", logical]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "WRITE AMPLIFICATION            1.0000" in out
    assert "WA by the bus tap              0.0000" in out
    assert "it covers the capture, from its start to its stop" in out
    assert "covers the counters' last epoch, from their last clear to the last snapshot" in out
    assert ("the two WA figures cover different periods: the R/B# counts include 160 of their "
            "160 pulses (100%) counted before the capture's first snapshot") in out
    assert cli.main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["opcode_wa"]["period"] == "the capture, from its start to its stop"
    assert any("different periods" in w for w in data["opcode_wa"]["warnings"])
    # The same run captured from its start: both cover it, and nothing says they differ.
    path = tmp_path / "during.rbcap"
    write_capture(path, params, DEFAULT_WINDOWS_US, before=0, programs=40, tap_pages=40)
    assert cli.main(["analyze", str(path), "--geometry", "ssd-v", "--logical", logical]) == 0
    out = capsys.readouterr().out
    assert "WA by the bus tap              1.0000" in out
    assert "different periods" not in out


def test_erases_per_block_never_prints_posterior_dust():
    geometry = load_geometry("ssd-v")
    e = _endurance(geometry, 1e9, 1.014e-230, 1, 1.0)
    assert e.blocks_erased == 0 and e.erases_per_block == 0
    assert _endurance(geometry, 1e9, 3.0, 1, 1.0).blocks_erased == 3.0
    assert analyze_cli._small(1.014e-230) == "0"
    assert analyze_cli._small(2e-7) == "< 0.0001"
    assert analyze_cli._small(0.01234567) == "0.01235"

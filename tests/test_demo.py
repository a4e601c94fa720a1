"""``make demo`` on a tiny configuration: the reference FTL's commands replayed into emulated dies
in the real gateware in Verilator, measured over the simulated UART, ending in a WA beside the
true WA."""

import re
import shlex

import pytest

from rbscope import demo, refssd
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.pipeline import wa_of
from rbscope.cli import commands as cli
from rbscope.refssd import rtl

ARGS = ["--volume", "65536", "--state", "initial", "--workload", "4K-SQ-100%-W-4KiB-align"]


def _numbers(out):
    measured = float(re.search(r"WA measured by rbscope \(R/B# only[^)]*\): ([\d.]+)",
                               out).group(1))
    true = float(re.search(r"WA true \(the FTL's own count\): +([\d.]+)", out).group(1))
    return measured, true


def _expected(drive):
    """The run the demo makes, and the WA `analyze` gives for the model back end's counts."""
    w = refssd.micro("4K-SQ-100%-W-4KiB-align", drive.logical_bytes, 65536, seed=1)
    run = refssd.simulate(drive, w, seed=1, precondition="initial")
    # Classified as `rbscope analyze` classifies the demo's capture (from each die's pulse
    # sequence: the demo turns TRACE records on), at the device's 1 µs tick.
    m = refssd.to_measurement(run, clock_ns=1000, max_pulses=1_000_000)
    return run, wa_of(m, run.geometry, from_bytes(run.logical_bytes), write_only=True)


def test_demo_tiny(capsys, tmp_path):
    assert demo.main([*ARGS, "--capture", str(tmp_path / "demo.rbcap")]) == 0
    out = capsys.readouterr().out
    assert "emulated dies (nand_emu)" in out
    assert ("every class count equals the model back end's (per die), and the dies' ground "
            "truth the FTL's: yes") in out
    assert re.search(r"open blocks "
                     r"programmed first \(then the counters cleared\), then \d+ "
                     r"commands", out)
    assert re.search(r"pulse records \(TRACE\): ([\d,]+) of \1 pulses counted, 0 lost: each "
                     r"die's pulse sequence is complete", out)
    measured, true = _numbers(out)
    drive = rtl.rtl_drive(refssd.preset("ssd-v", blocks_per_plane=64, pages_per_block=64))
    run, expect = _expected(drive)
    assert true == pytest.approx(run.truth.wa_true, abs=5e-4)
    assert measured == pytest.approx(expect.wa.value, abs=5e-4)
    # The classifier `analyze` picks for the same pulses (here too few for the sequence one).
    assert f"(R/B# only, {expect.classifier} classifier)" in out
    assert (tmp_path / "demo.rbcap").stat().st_size > 0
    html = (tmp_path / "demo.html").read_text()
    assert "true WA" in html
    assert "emulated dies (nand_emu)" in html
    # The command the demo prints last works exactly as printed (issue 25, item 16): the
    # capture names its windows, so no --program-class is needed.
    line = next(x for x in out.splitlines() if x.strip().startswith("next: rbscope analyze"))
    argv = shlex.split(line.split("next: rbscope ", 1)[1])
    assert argv[:2] == ["analyze", str(tmp_path / "demo.rbcap")]
    assert cli.main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "WRITE AMPLIFICATION" in text
    assert float(re.search(r"WRITE AMPLIFICATION +([\d.]+)", text).group(1)) == \
        pytest.approx(measured, abs=5e-4)
    # With the drive's own geometry (its 64-page blocks, not the bundled ssd-v's 128): the
    # structure the pulses show agrees, and the interval is the demo's own.
    assert argv[argv.index("--geometry") + 1] == str(tmp_path / "demo-drive.toml")
    assert "DISAGREES" not in text


@pytest.mark.slow  # its own Verilator build
def test_demo_tiny_pulse_trains(capsys, tmp_path):
    assert demo.main([*ARGS, "--pulses", "--capture", str(tmp_path / "demo.rbcap")]) == 0
    out = capsys.readouterr().out
    assert "every class counter equals the gateware's bit-exact model: yes" in out
    measured, true = _numbers(out)
    run, expect = _expected(refssd.preset("ssd-v", blocks_per_plane=32))
    assert true == pytest.approx(run.truth.wa_true, abs=5e-4)
    assert measured == pytest.approx(expect.wa.value, abs=5e-4)


def test_demo_rejects_a_bad_workload_name(capsys):
    assert demo.main(["--workload", "4K-XX"]) == 2
    assert "not a micro-benchmark name" in capsys.readouterr().err

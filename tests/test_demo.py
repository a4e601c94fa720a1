"""``make demo`` on a tiny configuration: the reference SSD measured by the real gateware in
Verilator, over the simulated UART, ending in a WA beside the true WA."""

import re

import pytest

from rbscope import demo, refssd
from rbscope.analyze_cli import wa_of
from rbscope.logical import from_bytes


def test_demo_tiny(capsys, tmp_path):
    args = ["--volume", "65536", "--state", "initial", "--workload", "4K-SQ-100%-W-4KiB-align",
            "--capture", str(tmp_path / "demo.rbcap")]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    assert "every class counter equals the gateware's bit-exact model: yes" in out
    measured = float(re.search(r"WA measured by rbscope \(R/B# only[^)]*\): ([\d.]+)",
                               out).group(1))
    true = float(re.search(r"WA true \(the FTL's own count\): +([\d.]+)", out).group(1))
    drive = refssd.preset("ssd-v", blocks_per_plane=32)
    w = refssd.micro("4K-SQ-100%-W-4KiB-align", drive.logical_bytes, 65536, seed=1)
    run = refssd.simulate(drive, w, seed=1, precondition="initial")
    assert true == pytest.approx(run.truth.wa_true, abs=5e-4)
    # The WA the device measured is the model path's at the device's 1 µs tick, classified as
    # `rbscope analyze` classifies a capture (from its histograms: a capture keeps no widths).
    m = refssd.to_measurement(run, clock_ns=1000)
    m.pulses = {}
    expect = wa_of(m, run.geometry, from_bytes(run.logical_bytes), write_only=True)
    assert measured == pytest.approx(expect.wa.value, abs=5e-4)
    assert (tmp_path / "demo.rbcap").stat().st_size > 0
    html = (tmp_path / "demo.html").read_text()
    assert "true WA" in html


def test_demo_rejects_a_bad_workload_name(capsys):
    assert demo.main(["--workload", "4K-XX"]) == 2
    assert "not a micro-benchmark name" in capsys.readouterr().err

"""``rbscope label`` on small tapped buses: the measured Mp and the bus's plausibility."""

import json

import pytest

from rbscope.analysis.labelled import LabelledPulses
from rbscope.cli import commands as cli

from .tap_bus import LABEL_ARGS, erase, program, read, write_bus


def label(capsys, path, *extra):
    rc = cli.main(["label", str(path), *LABEL_ARGS, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_label_mp_counts_15h_final_confirms(tmp_path, capsys):
    # Issue 25, item 13: Mp = pages ÷ final confirms, 15h included (docs/opcode_tap.md).
    # Two two-plane 10h programs, two one-plane 15h cache programs: 6 pages, 4 final confirms
    # (three times over).
    steps = erase() + 3 * (program(2) + program(1, 0x15, busy_ns=20_000)
                           + program(1, 0x15, busy_ns=20_000) + program(2) + read())
    path = tmp_path / "bus.vcd"
    write_bus(path, steps)
    out = tmp_path / "bus.labels.json"
    rc, text, err = label(capsys, path, "-o", str(out))
    assert rc == 0, err
    assert "Mp (pages ÷ final 10h/15h confirms, measured): 1.5" in text
    assert "pages programmed: 18" in text
    lab = LabelledPulses.load(out)
    assert lab.program_mp() == 1.5 and lab.program_pages() == 18 and lab.program_finals() == 12
    rc, text, err = label(capsys, path, "--json")
    assert rc == 0, err
    summary = json.loads(text)
    assert summary["mp"] == pytest.approx(1.5)
    assert summary["mp_by_confirm"]["PROGRAM"] == 2.0  # the 10h alone: not Mp
    # The trained classifier records the same Mp.
    from rbscope.analysis.trained import train
    assert train(lab).mp == 1.5


def traffic():
    return erase() + [s for i in range(4) for s in program(2, page=0x40 + 2 * i) + read()
                      + program(1, page=0x41 + 2 * i)] + read()


def test_label_refuses_a_miswired_bus(tmp_path, capsys):
    # Issue 25, item 11: CLE and ALE swapped, or WE# given as R/B#: refused, not labelled.
    path = tmp_path / "bus.vcd"
    write_bus(path, traffic())
    out = tmp_path / "l.json"
    rc, text, err = label(capsys, path, "-o", str(out))
    assert rc == 0 and "bus check" not in text, err
    out.unlink()
    swapped = [*LABEL_ARGS]
    i, j = swapped.index("CLE"), swapped.index("ALE")
    swapped[i], swapped[j] = "ALE", "CLE"
    rc = cli.main(["label", str(path), *swapped, "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "does not look wired as named" in err, err
    assert "carry no ONFI opcode" in err and "follow no confirm" in err
    assert not out.exists()
    we = [*LABEL_ARGS]
    we[we.index("RB0")] = "WE"
    rc = cli.main(["label", str(path), *we, "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "busy pulses for" in err, err
    assert not out.exists()
    # Asked for, it labels anyway and says what it found.
    rc = cli.main(["label", str(path), *swapped, "--no-bus-check", "-o", str(out)])
    assert rc == 0 and "bus check (--no-bus-check)" in capsys.readouterr().out


@pytest.mark.parametrize("line", ["WE", "CE0", "CLE", "ALE"])
def test_label_refuses_a_bus_line_named_as_r_b_on_the_readme_sample(tmp_path, capsys, line):
    # Issue 25, item 11, found again on the shipped examples/readme/tapped.vcd: WE# named as
    # R/B# labelled nothing with rc 0; CE#, CLE or ALE labelled garbage with rc 0 (and trained
    # a classifier). A busy pulse starts tWB after a busy-starting confirm on its target; a
    # recording whose confirms bring no busy at all is no R/B# either.
    from pathlib import Path

    sample = Path(__file__).parents[1] / "examples" / "readme" / "tapped.vcd"
    bus = ["--bus-ce", "CE0", "--bus-cle", "CLE", "--bus-ale", "ALE", "--bus-we", "WE",
           "--bus-dq", "DQ[7:0]"]
    out = tmp_path / "l.json"
    assert cli.main(["label", str(sample), "--signal", "RB0", *bus, "-o", str(out)]) == 0
    assert "bus check" not in capsys.readouterr().out
    out.unlink()
    rc = cli.main(["label", str(sample), "--signal", line, *bus, "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "does not look wired as named" in err, err
    if line == "WE":
        assert "busy-starting confirm commands and no busy pulse" in err
    else:
        assert "do not start right after a busy-starting confirm" in err
    assert not out.exists()

"""Outputs never destroy inputs (issue 25, item 1): the guard, the atomic writer, and the seven
commands that overwrote their own input with exit code 0."""

import json
import os
import shutil
from pathlib import Path

import pytest

from rbscope import files
from rbscope.cli import commands as cli
from rbscope.device import capture as cap

from .test_capture import _write_session
from .test_report import make_measurement
from .test_sequence import make
from .test_trained import labelled

VCD = """$timescale 1us $end
$scope module t $end
$var wire 1 ! rb0 $end
$upscope $end
$enddefinitions $end
#0
1!
"""


def _vcd(path, pulses=40):
    lines = [VCD]
    t = 10
    for i in range(pulses):
        width = 50 if i % 3 else 1500
        lines.append(f"#{t}\n0!\n#{t + width}\n1!\n")
        t += width + 30
    lines.append(f"#{t + 10}\n")
    path.write_text("".join(lines), encoding="ascii")
    return path


@pytest.fixture
def inputs(tmp_path):
    """A capture, a saved measurement, a VCD, a labelled-pulse file and a study."""
    rbcap = tmp_path / "run.rbcap"
    _write_session(rbcap)
    meas = tmp_path / "m.json"
    make_measurement(1, cycles=40_000).save(meas)
    vcd = _vcd(tmp_path / "ref.vcd")
    lab = tmp_path / "L.json"
    labelled(*make(seed=25, dies=1, blocks=4, dbsy=True)).save(lab)
    study = tmp_path / "s.toml"
    study.write_text('title = "t"\n[[run]]\nsource = "m.json"\ngeometry = "ssd-v"\n'
                     'logical = "1GiB"\n', encoding="utf-8")
    powerup = tmp_path / "powerup.sr"
    shutil.copyfile(Path(__file__).parents[1] / "examples" / "readme" / "powerup.sr", powerup)
    return {"rbcap": rbcap, "meas": meas, "vcd": vcd, "lab": lab, "study": study,
            "powerup": powerup}


def _same(path, before):
    return path.read_bytes() == before


# The seven commands of the issue, each naming its own input as its output.
CASES = {
    "report -o capture": lambda p: ["report", str(p["rbcap"]), "--geometry", "ssd-v",
                                    "-o", str(p["rbcap"])],
    "report --pdf capture": lambda p: ["report", str(p["rbcap"]), "--geometry", "ssd-v",
                                       "-o", str(p["rbcap"].with_suffix(".html")),
                                       "--pdf", str(p["rbcap"])],
    "report --study -o study": lambda p: ["report", "--study", str(p["study"]),
                                          "-o", str(p["study"])],
    "export-vcd -o source": lambda p: ["export-vcd", str(p["vcd"]), "-o", str(p["vcd"])],
    "calibrate -o capture": lambda p: ["calibrate", str(p["rbcap"]), "-o", str(p["rbcap"])],
    "analyze --save-measurement capture": lambda p: [
        "analyze", str(p["rbcap"]), "--geometry", "ssd-v", "--save-measurement",
        str(p["rbcap"])],
    "label -o source": lambda p: ["label", str(p["vcd"]), "--signal", "rb0", "--bus-ce", "rb0",
                                  "--bus-cle", "rb0", "--bus-ale", "rb0", "--bus-we", "rb0",
                                  *[x for _ in range(8) for x in ("--bus-dq", "rb0")],
                                  "-o", str(p["vcd"])],
    "calibrate --labelled -o labels": lambda p: ["calibrate", "--labelled", str(p["lab"]),
                                                 "-o", str(p["lab"])],
    # (Found after the seven: identify wrote its geometry over the power-up recording.)
    "identify -o source": lambda p: ["identify", str(p["powerup"]), "--bus-ce", "CE0",
                                     "--channels", "1", "--chips-per-channel", "1",
                                     "-o", str(p["powerup"])],
}


@pytest.mark.parametrize("case", CASES)
def test_a_command_never_writes_over_its_input(inputs, case, capsys):
    argv = CASES[case](inputs)
    before = {k: v.read_bytes() for k, v in inputs.items()}
    assert cli.main(argv) == 2, case
    err = capsys.readouterr().err
    assert "is the input" in err and "destroy" in err, err
    for k, v in inputs.items():
        assert _same(v, before[k]), (case, k)
    # --force replaces files of another kind, never an input.
    assert cli.main([*argv, "--force"]) == 2
    assert "is the input" in capsys.readouterr().err
    for k, v in inputs.items():
        assert _same(v, before[k]), (case, k)


def test_the_same_file_under_another_name_is_an_input(inputs, tmp_path, capsys):
    link = tmp_path / "alias.rbcap"
    os.link(inputs["rbcap"], link)
    before = inputs["rbcap"].read_bytes()
    assert cli.main(["calibrate", str(inputs["rbcap"]), "-o", str(link)]) == 2
    assert "is the input" in capsys.readouterr().err
    assert inputs["rbcap"].read_bytes() == before


def test_another_kind_is_replaced_only_with_force(inputs, tmp_path, capsys):
    out = tmp_path / "out.json"
    # A capture that is not an input of this command is still not a JSON output.
    out.write_bytes(inputs["rbcap"].read_bytes())
    argv = ["calibrate", "--labelled", str(inputs["lab"]), "-o", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "is a capture file" in err and "--force" in err
    assert out.read_bytes() == inputs["rbcap"].read_bytes()
    assert cli.main([*argv, "--force"]) == 0
    capsys.readouterr()
    assert json.loads(out.read_text())["format"]
    # The command's own kind is replaced without --force (a second run).
    assert cli.main(argv) == 0


def test_export_vcd_replaces_a_vcd_but_not_a_capture(inputs, tmp_path, capsys):
    out = tmp_path / "classes.vcd"
    argv = ["export-vcd", str(inputs["vcd"]), "-o", str(out), "--window", "read=10:200",
            "--window", "program=200:3000"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0  # a VCD over a VCD
    capsys.readouterr()
    victim = tmp_path / "victim.rbcap"
    victim.write_bytes(inputs["rbcap"].read_bytes())
    assert cli.main([*argv[:3], str(victim), *argv[4:]]) == 2
    assert victim.read_bytes() == inputs["rbcap"].read_bytes()


def test_sniffed_kinds(tmp_path):
    cases = {
        "capture": cap.MAGIC + b"\0\1",
        "pdf": b"%PDF-1.7\n",
        "json": b'  {"a": 1}',
        "toml": b"# rbscope calibrate\n\n[classifier]\nglitch_us = 0.2\n",
        "vcd": b"$timescale 1ns $end\n",
        "html": b"<!DOCTYPE html>\n<html>",
        "csv": b"# start_unix_ns=1 device=sdb\nseconds,bytes\n0.0,0\n",
        "empty": b"",
        "binary": b"\xff\xfe\x00\x01garbage",
        "text": b"hello world\n",
    }
    assert files.CAPTURE_MAGIC == cap.MAGIC
    for kind, data in cases.items():
        path = tmp_path / f"{kind}.x"
        path.write_bytes(data)
        assert files.sniff_kind(path) == kind, kind


def test_atomic_output_leaves_the_old_file_on_failure(tmp_path):
    path = tmp_path / "out.json"
    path.write_text('{"old": 1}\n')
    os.chmod(path, 0o640)
    with pytest.raises(RuntimeError), files.atomic_output(path, kind="json") as f:
        f.write('{"new": ')
        raise RuntimeError("half-way")
    assert path.read_text() == '{"old": 1}\n'
    assert os.listdir(tmp_path) == ["out.json"]  # no temporary file left
    files.write_text(path, '{"new": 2}\n', kind="json")
    assert path.read_text() == '{"new": 2}\n'
    assert os.stat(path).st_mode & 0o777 == 0o640  # the replaced file's permissions kept
    with pytest.raises(files.OutputError, match="is a directory"):
        files.check_output(tmp_path, kind="json")

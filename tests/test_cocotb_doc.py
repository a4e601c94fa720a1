"""docs/cocotb.md, followed to the letter from a directory outside the repository.

The code blocks preceded by ``<!-- file: NAME -->`` are written to NAME, the ``sh`` blocks
preceded by ``<!-- run -->`` are run line by line (``<!-- run slow -->`` only in the slow
variant), with the virtual environment's ``bin/`` first on PATH and nothing of the repository
importable but the installed ``rbscope``. The commands build a 4-channel, 16-bit sniffer and a
small emulated die, and run their testbenches on Icarus -g2012 and -g2005 and on Verilator with
no simulator flag beyond what the document says; the sniffer's counts must equal the model's.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "cocotb.md"
_BLOCK = re.compile(
    r"<!-- (file: (?P<name>[\w.]+)|run(?P<slow> slow)?) -->\n```\w*\n(?P<body>.*?)```", re.S)


def doc_steps():
    """Return ``[(kind, name or None, body, slow)]`` in document order."""
    return [("file" if m["name"] else "run", m["name"], m["body"], bool(m["slow"]))
            for m in _BLOCK.finditer(DOC.read_text())]


def follow(tmp_path, slow):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MAKEFLAGS")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    outputs = []
    for kind, name, body, is_slow in doc_steps():
        if kind == "file":
            (tmp_path / name).write_text(body)
            continue
        if is_slow and not slow:
            continue
        for line in body.strip().splitlines():
            proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, timeout=900,
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout[-3000:]}\n" \
                                         f"{proc.stderr[-3000:]}"
            outputs.append((line, proc.stdout + proc.stderr))
    return outputs


def test_doc_has_what_the_test_runs():
    steps = doc_steps()
    files = {name for kind, name, _, _ in steps if kind == "file"}
    assert {"tb_sniffer.py", "tb_emulator.py", "tb_tap.py", "run.py", "make_recording.py"} <= files
    runs = "\n".join(body for kind, _, body, _ in steps if kind == "run")
    for command in ("rbscope verilog --top sniffer --channels 4", "rbscope verilog --top emulator",
                    "run.py sniffer icarus 2012", "run.py sniffer icarus 2005",
                    "run.py sniffer verilator", "run.py emulator icarus 2012",
                    "run.py emulator icarus 2005", "run.py emulator verilator",
                    "rbscope verilog --top tap", "run.py tap icarus 2012", "run.py tap verilator"):
        assert command in runs, command
    assert "-Wno" not in runs
    text = DOC.read_text()
    # What a reader needs to know (issue 25, item 21): what a train is, where the names of the
    # emulator come from, and the helpers that read the counters.
    for phrase in ("A *train* is one R/B# line", "Train(initial, edges)`", "`EmuCounter`",
                   "`Storage`", "are all in\n`rbscope.gateware.nand_emu`",
                   "EmuCounters(dut, params)",
                   "await nand.write_protect(True)", "rbscope.cocotb.tap.Tap"):
        assert phrase in text, phrase


def _check(outputs, tmp_path):
    passed = [line for line, out in outputs if line.startswith("python run.py")]
    for line, out in outputs:
        if line.startswith("python run.py"):
            assert re.search(r": passed$", out, re.M), out[-2000:]
    assert passed
    # What the simulators were given: Icarus both language options, Verilator no warning
    # option; and Verilator printed no warning.
    records = {}
    for path in tmp_path.glob("build/*/rbscope-build.json"):
        records[path.parent.name] = json.loads(path.read_text())
    for std in ("2012", "2005"):
        for design in ("sniffer", "emulator"):
            assert records[f"{design}-icarus-{std}"]["build_args"] == [f"-g{std}"]
    for name, record in records.items():
        assert not any(a.startswith("-W") for a in record["build_args"]), (name, record)
        assert record["build_seconds"] > 0, (name, record)
    for line, out in outputs:
        if "verilator" in line:
            assert "%Warning" not in out, out[-3000:]


@pytest.mark.heavy  # (the guide's every step, both simulators: about 3 minutes; make test-heavy)
def test_follow_docs_cocotb_md(tmp_path):
    outputs = follow(tmp_path, slow=False)
    _check(outputs, tmp_path)
    sniffer_v = (tmp_path / "hdl" / "rb_sniffer.v").read_text()
    assert "input [3:0] rb;" in sniffer_v  # the non-default size was built


@pytest.mark.slow
def test_follow_docs_cocotb_md_with_slow_steps(tmp_path):
    _check(follow(tmp_path, slow=True), tmp_path)


def test_the_toolkit_speaks_cocotb_2_only():
    """Issue 25, item 21: a docstring still named cocotb 1.x's ``BinaryValue`` (gone in cocotb
    2.0, which the toolkit requires). No 1.x-only name in the toolkit, its benches or the doc."""
    root = Path(__file__).resolve().parent.parent
    gone = re.compile(r"\b(BinaryValue|BinaryRepresentation|cocotb\.fork|cocotb\.result\."
                      r"TestFailure|cocotb\.decorators|\.integer\b(?!s))")
    files = [*sorted((root / "host" / "cocotb").glob("*.py")),
             *sorted((root / "cocotb_tests").rglob("*.py")), root / "docs" / "cocotb.md"]
    assert len(files) > 5
    found = [f"{f.relative_to(root)}:{n}: {line.strip()}"
             for f in files for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(),
                                                      1) if gone.search(line)]
    assert not found, "\n".join(found)

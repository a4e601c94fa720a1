"""The `rbscope` command line: version, help, exit codes and the `verilog` subcommand."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rbscope
from rbscope.cli import commands as cli
from rbscope.cli import verilog as verilog_cli


def rbscope_cmd(*args, **kwargs):
    """Run `python -m rbscope.cli ARGS` as a user would run `rbscope ARGS`."""
    return subprocess.run(
        [sys.executable, "-m", "rbscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def test_version():
    proc = rbscope_cmd("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"rbscope {rbscope.__version__}"


def test_help_teaches():
    proc = rbscope_cmd("--help")
    assert proc.returncode == 0
    assert "Ready/Busy#" in proc.stdout
    assert "verilog" in proc.stdout
    assert "report" in proc.stdout and "analyze" in proc.stdout
    assert "exit codes" in proc.stdout


def test_unknown_subcommand_is_usage_error():
    proc = rbscope_cmd("frobnicate")
    assert proc.returncode == cli.EXIT_USAGE == 2
    assert "invalid choice: 'frobnicate'" in proc.stderr


def test_no_subcommand_is_usage_error(capsys):
    assert cli.main([]) == cli.EXIT_USAGE
    assert "usage: rbscope" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_verilog_rejects_bad_channel_count(value, capsys):
    assert cli.main(["verilog", "--channels", value, "out"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--channels" in err and "expected an integer" in err


def test_verilog_passes_options_to_write_top(monkeypatch, capsys, tmp_path):
    calls = []

    def write_top(top, outdir, **options):
        calls.append((top, outdir, options))
        return [tmp_path / f"{top}.v"]

    monkeypatch.setattr(verilog_cli, "write_top", write_top)
    argv = ["verilog", "--top", "sniffer", "--channels", "3", "--windows", "7", "--width-bits",
            "16", "--timescale", "none", "--json", "out"]
    assert cli.main(argv) == 0
    ((top, outdir, options),) = calls
    assert (top, outdir, options["timescale"], options["name"]) == ("sniffer", "out", None, None)
    assert options["wrapper_ns"] is None
    params = options["sniffer"]
    assert (params.channels, params.classes, params.width_bits) == (3, 7, 16)
    out = json.loads(capsys.readouterr().out)
    assert out["written"] == [str(tmp_path / "sniffer.v")]
    assert out["tops"]["sniffer"]["sniffer"]["classes"] == 7

    calls.clear()
    assert cli.main(["verilog", "--windows", "2", "--top", "sniffer", "out"]) == 0
    assert calls[0][2]["sniffer"].classes == 5  # max(5, windows), as rbscope analyze builds
    calls.clear()
    assert cli.main(["verilog", "out"]) == 0
    assert [c[0] for c in calls] == ["sniffer", "emulator", "loopback", "tap", "device"]
    assert calls[2][2]["sniffer"].channels == calls[2][2]["emulator"].dies == 2
    tap = calls[3][2]["tap"]
    assert (tap.targets, tap.luns, tap.first_channel, tap.sniffer.channels) == (2, 2, 0, 4)

    calls.clear()
    argv = ["verilog", "--top", "tap", "--targets", "3", "--luns", "1", "--first-channel", "2",
            "--hist-sub-bits", "4", "out"]
    assert cli.main(argv) == 0
    tap = calls[0][2]["tap"]
    assert (tap.targets, tap.luns, tap.first_channel) == (3, 1, 2)
    assert (tap.sniffer.channels, tap.sniffer.hist_sub_bits) == (5, 4)  # up to its last die


@pytest.mark.parametrize("argv, message", [
    (["--top", "sniffer", "--width-bits", "12"], "width_bits must be an integer from 16"),
    (["--top", "loopback", "--channels", "3", "--dies", "2"], "one channel per die"),
    (["--name", "x"], "--name needs exactly one --top"),
    (["--top", "emulator", "--page-bytes", "100"], "page_bytes"),
    (["--top", "tap", "--luns", "3"], "luns must be 1, 2 or 4"),
    (["--top", "tap", "--targets", "2", "--luns", "2", "--channels", "3"], "do not fit"),
])
def test_verilog_bad_parameters_are_usage_errors(argv, message, capsys, tmp_path):
    assert cli.main(["verilog", *argv, str(tmp_path / "out")]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_verilog_help_creates_nothing(tmp_path):
    # (The gateware has no command line of its own: `rbscope verilog` is it.)
    for argv in (["verilog", "--help"], ["-m", "rbscope.cli.ports", "--help"]):
        cmd = ["-m", "rbscope.cli", *argv] if argv[0] == "verilog" else argv
        proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "max(5, N)" in proc.stdout and "--width-bits" in proc.stdout
        assert list(tmp_path.iterdir()) == []


def test_verilog_writes_real_design(tmp_path):
    proc = rbscope_cmd("verilog", "--top", "sniffer", "--channels", "2", "--clock-wrapper", "8",
                       str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(tmp_path / "rb_sniffer.v"),
                                        str(tmp_path / "rb_sniffer_clocked.v")]
    assert "always #4 clk = ~clk;" in (tmp_path / "rb_sniffer_clocked.v").read_text()
    text = (tmp_path / "rb_sniffer.v").read_text()
    assert "`timescale 1ns/1ps" in text and "module rb_sniffer(" in text
    assert "input [1:0] rb;" in text


def test_verilog_refuses_the_package_source_directories(monkeypatch, capsys, tmp_path):
    # Issue 25, item 18: the README's `rbscope verilog ... hdl/` wrote into the source tree.
    import rbscope.gateware

    calls = []
    monkeypatch.setattr(verilog_cli, "write_top",
                        lambda top, outdir, **kw: calls.append(outdir) or [tmp_path / "x.v"])
    gateware = Path(rbscope.gateware.__file__).parent
    for outdir in (gateware, gateware / "rb_sniffer", Path(rbscope.__file__).parent / "sub"):
        assert cli.main(["verilog", "--top", "sniffer", str(outdir)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert "inside rbscope's own source directory" in err and "--force" in err, err
    assert calls == []
    assert cli.main(["verilog", "--top", "sniffer", "--force", str(gateware)]) == 0
    assert cli.main(["verilog", "--top", "sniffer", str(tmp_path / "build")]) == 0
    assert calls == [str(gateware), str(tmp_path / "build")]
    # The README names a build/ directory.
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("rbscope verilog "))
    assert line.split("#")[0].split()[-1].startswith("build/")


def test_verilog_writes_the_tap(tmp_path):
    """`rbscope verilog --top tap` (issue 25, item 19): the listen-only bus tap."""
    proc = rbscope_cmd("verilog", "--top", "tap", "--targets", "4", "--luns", "1", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(tmp_path / "onfi_tap.v")]
    text = (tmp_path / "onfi_tap.v").read_text()
    assert "module onfi_tap(" in text
    for decl in ("input [3:0] ce_n;", "input [7:0] io;", "input [3:0] rb;", "output [15:0] tag;",
                 "output [47:0] read_resp__payload;"):
        assert decl in text, decl
    assert "output [7:0] io" not in text  # it never drives the bus


def _every_help_text():
    import argparse

    parser = cli.build_parser()
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            texts += [sub.format_help() for sub in action.choices.values()]
    return "\n".join(texts)


def test_every_document_a_help_text_names_is_installed():
    """A help text's docs/NAME.md is package data that `rbscope docs NAME` prints (issue 25,
    item 21): the help no longer points at files only a checkout has."""
    import importlib.resources

    from rbscope.cli.docs import document_names, read_document

    named = set(re.findall(r"docs/([a-z_]+)\.md", _every_help_text()))
    assert {"ports", "cocotb", "wa"} <= named, named
    assert named <= set(document_names())
    repo_docs = Path(__file__).resolve().parent.parent / "docs"
    for name in named:
        resource = importlib.resources.files("rbscope.docs").joinpath(f"{name}.md")
        assert resource.read_text(encoding="utf-8") == (repo_docs / f"{name}.md").read_text()
        assert read_document(f"docs/{name}.md") == read_document(name)
    proc = rbscope_cmd("docs", "ports")
    assert proc.returncode == 0 and proc.stdout == (repo_docs / "ports.md").read_text()
    proc = rbscope_cmd("docs", "docs/nothing.md")
    assert proc.returncode == cli.EXIT_USAGE and "there are: accuracy" in proc.stderr

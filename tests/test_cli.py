"""The `rbscope` command line: version, help, exit codes and the `verilog` subcommand."""

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import rbscope
from rbscope import cli


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
    assert "expected a positive integer" in capsys.readouterr().err


def test_verilog_reports_missing_export(monkeypatch, capsys, tmp_path):
    # A None entry in sys.modules makes the import fail, as if the module were not written yet.
    monkeypatch.setitem(sys.modules, "rbscope.gateware.export", None)
    assert cli.main(["verilog", str(tmp_path)]) == cli.EXIT_USAGE
    assert "gateware export is not available" in capsys.readouterr().err


def test_verilog_passes_options_to_write_all(monkeypatch, capsys, tmp_path):
    calls = []

    def write_all(outdir, **options):
        calls.append((outdir, options))
        return [tmp_path / "design.v"]

    fake = types.ModuleType("rbscope.gateware.export")
    fake.write_all = write_all
    monkeypatch.setitem(sys.modules, "rbscope.gateware.export", fake)
    assert cli.main(["verilog", "--channels", "3", "--classes", "2", "--json", "out"]) == 0
    assert calls == [("out", {"channels": 3, "classes": 2})]
    assert json.loads(capsys.readouterr().out) == {"written": [str(tmp_path / "design.v")]}

    assert cli.main(["verilog", "out"]) == 0
    assert calls[-1] == ("out", {})  # the export module owns the defaults


def test_verilog_writes_real_design(tmp_path):
    proc = rbscope_cmd("verilog", "--channels", "2", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    written = [line for line in proc.stdout.splitlines() if line]
    assert written, "no path printed"
    for path in written:
        assert "module" in Path(path).read_text()

"""Every top `rbscope verilog` writes passes Verilator's *default* lint (no -Wno option).

The files carry their own few waivers (``rbscope.gateware.export.LINT_WAIVERS``); anything else
Verilator warns about by default is fatal in a user's build (issue 25, item 19: the tap's
``channel >= 0`` stopped Verilator with ``UNSIGNED``).
"""

import os
import subprocess
import sys

import pytest

from rbscope.device.verilator_tool import verilator_env
from rbscope.gateware.export import TOPS, write_top
from rbscope.gateware.onfi_tap import TapParams
from rbscope.gateware.rb_sniffer import SnifferParams


def lint(paths, top):
    """Run ``verilator --lint-only`` with its defaults on ``paths``; return (rc, output)."""
    env = {**os.environ, **verilator_env()}
    proc = subprocess.run(["verilator", "--lint-only", "--top-module", top, *map(str, paths)],
                          capture_output=True, text=True, env=env, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def every_top(tmp_path_factory):
    """``rbscope verilog OUTDIR --clock-wrapper 10``: every top at its default size."""
    out = tmp_path_factory.mktemp("verilog")
    proc = subprocess.run([sys.executable, "-m", "rbscope.cli", "verilog", str(out),
                           "--clock-wrapper", "10"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return out


def test_every_top_is_written(every_top):
    assert sorted(p.name for p in every_top.glob("*.v")) == sorted(
        [f"{t.module}.v" for t in TOPS.values()] + [f"{t.module}_clocked.v" for t in TOPS.values()])
    assert "tap" in TOPS


@pytest.mark.parametrize("key", list(TOPS))
def test_default_lint_is_clean(every_top, key):
    module = TOPS[key].module
    for top, paths in ((module, [every_top / f"{module}.v"]),
                       (f"{module}_clocked", [every_top / f"{module}.v",
                                              every_top / f"{module}_clocked.v"])):
        rc, out = lint(paths, top)
        assert rc == 0 and "%Warning" not in out and "%Error" not in out, out


@pytest.mark.parametrize("tap", [
    TapParams(),  # one die: the trace's channel is 1 bit wide
    TapParams(targets=2, sniffer=SnifferParams(channels=4), first_channel=1),
    TapParams(targets=2, sniffer=SnifferParams(channels=4), first_channel=2),  # to the top end
    TapParams(targets=1, luns=4, sniffer=SnifferParams(channels=8, tag_bits=4)),
], ids=["1die", "from1", "to-end", "4luns"])
def test_tap_lint_is_clean_at_any_channel_range(tmp_path, tap):
    """The trace's channel range check leaves out the bounds its width implies, at either end."""
    path, = write_top("tap", tmp_path, tap=tap)
    rc, out = lint([path], "onfi_tap")
    assert rc == 0 and "%Warning" not in out, out

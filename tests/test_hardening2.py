"""Issue 25 ("Hardening round 2"): `rbscope verilog`'s --name and --timescale, the browser of
``report --pdf`` stopped at its limit, huge --logical digits, absurd inputs accepted silently."""

import os
import signal
import stat
import time

import pytest

from rbscope.cli import commands as cli
from rbscope.gateware.export import check_module_name, check_timescale
from rbscope.report import ReportError, browser

# rbscope verilog ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a b", "../../escape", "/tmp/x", "9lives", "", "a$b", "module",
                                  "x" * 201, "a\nb", "é"])
def test_verilog_name_must_be_an_identifier(tmp_path, capsys, name):
    out = tmp_path / "out"
    assert cli.main(["verilog", "--top", "sniffer", "--name", name, str(out)]) == 2
    err = capsys.readouterr().err
    assert "--name" in err and ("identifier" in err or "reserved" in err or "longer" in err)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("ts", ["garbage", "1ns", "2ns/1ps", "1ns/1ms", "1 ns / 1 xs", "1ns/"])
def test_verilog_timescale_is_checked(tmp_path, capsys, ts):
    assert cli.main(["verilog", "--top", "sniffer", "--timescale", ts, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--timescale" in err and "timescale" in err
    assert os.listdir(tmp_path) == []


def test_good_names_and_timescales_pass():
    assert check_module_name("rb_sniffer_k7") == "rb_sniffer_k7"
    assert check_timescale("1ns/1ps") == "1ns/1ps"
    assert check_timescale(" 10 us / 100 ns ") == "10us/100ns"
    assert check_timescale("1s/1s") == "1s/1s"
    assert check_timescale(None) is None
    with pytest.raises(ValueError, match="coarser"):
        check_timescale("1ps/1ns")


def test_verilog_writes_inside_the_directory_with_a_checked_timescale(tmp_path):
    import shutil
    import subprocess

    assert cli.main(["verilog", "--top", "sniffer", "--channels", "1", "--name", "snf_a",
                     "--timescale", "10ns/1ps", str(tmp_path)]) == 0
    assert os.listdir(tmp_path) == ["snf_a.v"]
    text = (tmp_path / "snf_a.v").read_text()
    assert "`timescale 10ns/1ps" in text and "module snf_a" in text
    iverilog = shutil.which("iverilog")
    assert iverilog, "iverilog is not installed (make bootstrap installs it)"
    subprocess.run([iverilog, "-g2005", "-o", str(tmp_path / "a.out"), str(tmp_path / "snf_a.v")],
                   check=True, capture_output=True, timeout=300)


# report --pdf: the browser is stopped at the limit -------------------------------------------


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_browser_that_never_returns_is_killed_with_its_children(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    fake = tmp_path / "fake-browser"
    # The "browser" starts a helper (as Chromium starts its zygote and renderers), then hangs.
    fake.write_text(f"#!/bin/sh\nsleep 1000 &\necho $$ $! > {pids}\nexec sleep 1000\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    html = tmp_path / "r.html"
    html.write_text("<!DOCTYPE html><html></html>")
    monkeypatch.setattr(browser, "TIMEOUT", 1.5)
    t0 = time.monotonic()
    with pytest.raises(ReportError, match="did not finish within"):
        browser.html_to_pdf(html, tmp_path / "r.pdf", browser=str(fake))
    assert time.monotonic() - t0 < 30
    parent, child = (int(x) for x in pids.read_text().split())
    try:
        deadline = time.monotonic() + 10
        while (_pid_alive(parent) or _pid_alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _pid_alive(parent), "the browser is still running"
        assert not _pid_alive(child), "a process the browser started is still running"
    finally:
        for pid in (parent, child):  # never leave them behind, even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not (tmp_path / "r.pdf").exists()
    assert sorted(os.listdir(tmp_path)) == ["fake-browser", "pids", "r.html"]


# --logical with hundreds of digits, in every volume parser -------------------------------------


@pytest.fixture(scope="module")
def measurement(tmp_path_factory):
    from .test_report import make_measurement

    path = tmp_path_factory.mktemp("m") / "m.json"
    make_measurement(1, cycles=40_000).save(path)
    return path


@pytest.mark.parametrize("value", ["9" * 310, "1" * 5000, "1" + "0" * 400 + "GiB",
                                   "1." + "0" * 5000 + "1", "18446744073709551617"])
def test_huge_logical_volumes_are_refused_clearly(measurement, capsys, value):
    from rbscope.analysis import logical as lg

    with pytest.raises(lg.LogicalSourceError, match="larger than|decimals"):
        lg.parse_size(value)
    assert cli.main(["analyze", str(measurement), "--geometry", "ssd-v", "--logical",
                     value]) == 2
    err = capsys.readouterr().err
    assert "--logical" in err and ("larger than" in err or "decimals" in err)
    assert len(err.splitlines()[-1]) < 300  # the value is not echoed whole


def test_every_volume_parser_bounds_its_numbers(tmp_path):
    from rbscope.analysis import logical as lg

    assert lg.parse_size("16EiB" if False else "2GiB") == 2 << 30
    assert lg.parse_size("1.5kB") == 1500
    with pytest.raises(lg.LogicalSourceError, match="larger than"):
        lg.from_bytes(10 ** 400)
    big = "7" * 5000
    fio = ('{"jobs": [{"write": {"io_bytes": ' + big + '}}]}', "fio.json")
    with pytest.raises(lg.LogicalSourceError, match="fio.json"):
        lg.read_fio_json(fio)
    fio = ('{"jobs": [{"write": {"io_bytes": ' + "7" * 400 + '}}]}', "fio.json")
    with pytest.raises(lg.LogicalSourceError, match="larger than"):
        lg.read_fio_json(fio)
    deep = ("{" + '"a": [' * 100_000 + "]" * 100_000 + "}", "deep.json")
    with pytest.raises(lg.LogicalSourceError, match="deep.json"):
        lg.read_fio_json(deep)
    stat_ok = ("1 2 3 4 5 6 100 8 9 10 11\n", "before")
    stat_big = (f"1 2 3 4 5 6 {big} 8 9 10 11\n", "after")
    with pytest.raises(lg.LogicalSourceError, match="after.*digit"):
        lg.read_sysfs_stat(stat_ok, stat_big)
    smart = (f"Data Units Written: {big}\n", "nvme-after")
    with pytest.raises(lg.LogicalSourceError, match="nvme-after.*digit"):
        lg.read_smartctl(("Data Units Written: 1\n", "b"), smart)
    smart_json = ('{"data_units_written": ' + big + "}", "nvme.json")
    with pytest.raises(lg.LogicalSourceError, match="nvme.json"):
        lg.read_smartctl(smart_json, smart_json)
    series = tmp_path / "s.csv"
    series.write_text("seconds,bytes\n0,0\n1,1e400\n")
    with pytest.raises(lg.LogicalSourceError, match="line 3"):
        lg.read_series_csv(series)
    bw = tmp_path / "bw.log"
    bw.write_text(f"{big}, 100, 1, 4096, 0\n")
    with pytest.raises(lg.LogicalSourceError, match="line 1"):
        lg.read_fio_bw_log(bw)


def _study(tmp_path, measurement, run):
    import shutil

    shutil.copy(measurement, tmp_path / "m.json")
    path = tmp_path / "s.toml"
    path.write_text('[[run]]\nsource = "m.json"\ngeometry = "ssd-v"\n' + run, encoding="utf-8")
    return path


@pytest.mark.parametrize("run, code, message", [
    ('logical = "' + "9" * 310 + '"\n', 1, "larger than"),
    ("logical = " + "9" * 300 + "\n", 1, "larger than"),
    ('logical = "2GiB"\noptions = ["--logical", "1"]\n', 1, "options change logical"),
    ('logical = "2GiB"\noptions = ["--logical=1"]\n', 1, "options change logical"),
    ('logical = "2GiB"\nmp = 1\noptions = ["--mp", "2"]\n', 1, "options change mp"),
])
def test_study_volumes_and_options_that_override_keys(tmp_path, measurement, capsys, run, code,
                                                      message):
    study = _study(tmp_path, measurement, run)
    assert cli.main(["report", "--study", str(study), "-o", str(tmp_path / "r.html")]) == code
    err = capsys.readouterr().err
    assert message in err and "run 1" in err, err
    assert not (tmp_path / "r.html").exists()


def test_study_options_that_add_to_the_keys_are_fine(tmp_path, measurement, capsys):
    study = _study(tmp_path, measurement, 'logical = "2GiB"\noptions = ["--write-only"]\n')
    assert cli.main(["report", "--study", str(study), "-o", str(tmp_path / "r.html")]) == 0

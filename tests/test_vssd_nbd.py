"""``rbscope vssd`` under real tools: fio's nbd engine writes through nbdkit, ``rbscope
analyze`` reads the recording with fio's JSON as the logical volume, against the FTL's truth."""

import json
import shutil
import subprocess
import sys

import pytest

from rbscope.vssd.serve import ServeError, check_python_plugin


def _tools():
    missing = [t for t in ("nbdkit", "fio") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (Debian: nbdkit "
                    f"nbdkit-plugin-python fio; `make` installs them)")
    try:
        check_python_plugin()
    except ServeError as exc:
        pytest.skip(str(exc))


DRIVE = """\
name = "{name}-small"
preset = "{name}"
[array]
channels = 2
blocks_per_plane = 32
pages_per_block = 32
[firmware]
over_provisioning = 0.25
"""

#: The paper's micro-benchmarks as fio jobs: (name, fio options).
MICRO = {
    "4K-SQ-100%-W-4KiB-align": ["--rw=write", "--bs=4k", "--size=2m"],
    "4K-RD-100%-W-4KiB-align": ["--rw=randwrite", "--bs=4k", "--size=2m"],
    "512B-RD-100%-W-4KiB-no-align": ["--rw=randwrite", "--bs=512", "--size=256k",
                                     "--blockalign=512"],
}


def rbscope(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rbscope.cli", *map(str, args)],
                          capture_output=True, text=True, **kw)


def serve_fio(tmp_path, drive, job, *, iodepth=4, slowdown=1.0, extra=()):
    """Serve ``drive`` and run one fio job against it; return (fio JSON, truth, paths)."""
    sock, vcd, truth, out, geo = (tmp_path / "s.sock", tmp_path / "r.vcd",
                                  tmp_path / "t.json", tmp_path / "fio.json", tmp_path / "g.toml")
    fio = " ".join(["fio", "--name=job", "--ioengine=nbd", '--uri="$uri"',
                    f"--iodepth={iodepth}", "--output-format=json", f"--output={out}",
                    "--randseed=7", *job])
    r = rbscope("vssd", drive, "--socket", sock, "--slowdown", slowdown, "--record", vcd,
                "--truth", truth, "--geometry-out", geo, "--precondition", "steady", "--json",
                "--run", fio, *extra, timeout=300, cwd=tmp_path)  # fio's verify state there
    assert r.returncode == 0, r.stderr
    assert not sock.exists()  # removed on exit
    return json.loads(out.read_text()), json.loads(truth.read_text()), json.loads(r.stdout), \
        vcd, out


@pytest.mark.parametrize("name", ["mlc-2plane", "slc"])
@pytest.mark.parametrize("bench", [
    "4K-RD-100%-W-4KiB-align",
    pytest.param("4K-SQ-100%-W-4KiB-align", marks=pytest.mark.slow),
    pytest.param("512B-RD-100%-W-4KiB-no-align", marks=pytest.mark.slow)])
def test_fio_through_vssd_and_wa_against_truth(tmp_path, name, bench):
    _tools()
    drive = tmp_path / "drive.toml"
    drive.write_text(DRIVE.format(name=name))
    fio, truth, summary, vcd, out = serve_fio(tmp_path, drive, MICRO[bench])
    written = sum(j["write"]["io_bytes"] for j in fio["jobs"])
    assert written == truth["host_bytes_written"] > 0
    bs = 4096 if "--bs=4k" in MICRO[bench] else 512
    assert summary["service"]["requests"] >= written // bs
    # Both classifiers: plain class windows (RB-Explorer's method) and the default (the
    # sequence classifier, which once read these small steady-state mlc-2plane runs 1.7 x high).
    assert truth["wa_true"] > 1.0
    for classifier in ("windows", "auto"):
        r = rbscope("analyze", vcd, "--geometry", tmp_path / "g.toml", "--fio", out, "--json",
                    "--quiet", "--classifier", classifier)
        assert r.returncode == 0, r.stderr
        wa = json.loads(r.stdout)["wa"]
        assert abs(wa["value"] / truth["wa_true"] - 1) < 0.01, (classifier, wa, truth["wa_true"])


def test_vssd_refuses_bad_arguments(tmp_path):
    r = rbscope("vssd", "no-such-drive", "--socket", tmp_path / "s.sock")
    assert r.returncode == 2 and "no-such-drive" in r.stderr
    taken = tmp_path / "taken"
    taken.write_text("x")
    r = rbscope("vssd", "ssd-v", "--socket", taken)
    assert r.returncode == 2 and "exists" in r.stderr
    r = rbscope("vssd", "ssd-v", "--socket", tmp_path / "s.sock", "--slowdown", "0")
    assert r.returncode == 2 and "--slowdown" in r.stderr


def test_data_round_trip_through_nbd(tmp_path):
    _tools()
    # fio writes a verifiable pattern, then reads it back and checks it (verify=crc32c).
    drive = tmp_path / "drive.toml"
    drive.write_text(DRIVE.format(name="ssd-v"))
    fio, truth, summary, _, _ = serve_fio(
        tmp_path, drive, ["--rw=randwrite", "--bs=4k", "--size=1m", "--verify=crc32c",
                            "--do_verify=1"], slowdown=0.2)
    assert fio["jobs"][0]["error"] == 0
    assert truth["host_bytes_read"] >= 1 << 20

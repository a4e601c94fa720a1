"""A non-editable install carries the package data: ``pip install .`` into a fresh environment,
then ``rbscope analyze … --geometry ssd-v`` and ``rbscope docs ports`` from it, far from the
checkout.

The wheel is built offline with this environment's build backend (``--no-build-isolation``) from
a copy of the distribution's sources (so the build writes nothing into the checkout); the fresh
environment sees this one's site-packages through a ``.pth`` line *after* its own, so it takes
Amaranth, numpy and the rest from here but ``rbscope`` only from what was installed into it.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

from .conftest import REPO_ROOT

#: Four R/B# lines (SSD-v's four dies), 1 µs per VCD unit: per die ten 1000 µs programs (in
#: SSD-v's program window [150, 1950) µs) and one 3000 µs erase, 100 µs apart.
PROGRAMS, PROGRAM_US, ERASE_US, GAP_US = 10, 1000, 3000, 100


def _vcd():
    ids = "!\"#$"
    lines = ["$timescale 1 us $end", "$scope module drive $end"]
    lines += [f"$var wire 1 {c} rb{i} $end" for i, c in enumerate(ids)]
    lines += ["$upscope $end", "$enddefinitions $end", "#0", "$dumpvars"]
    lines += [f"1{c}" for c in ids] + ["$end"]
    events = {}
    for i, c in enumerate(ids):
        t = GAP_US + 7 * i
        for width in [PROGRAM_US] * PROGRAMS + [ERASE_US]:
            events.setdefault(t, []).append(f"0{c}")
            events.setdefault(t + width, []).append(f"1{c}")
            t += width + GAP_US
    for t in sorted(events):
        lines += [f"#{t}", *events[t]]
    lines.append(f"#{max(events) + 1000}")
    return "\n".join(lines) + "\n"


def test_non_editable_install_analyses_with_a_bundled_geometry(tmp_path):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("host", "hdl", "boards", "docs"):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    outer = sysconfig.get_paths()["purelib"]
    with open(os.path.join(site, "zz_outer_environment.pth"), "w", encoding="utf-8") as f:
        f.write(outer + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_NO_INDEX"] = "1"  # offline: everything comes from here
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-cache-dir", str(src)],
                   check=True, cwd=tmp_path, env=env, capture_output=True)

    # The package is the installed copy, its geometries are package data.
    where = subprocess.run([python, "-c", "import rbscope.nand as n; print(n.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path,
                           env=env).stdout.strip()
    assert where.startswith(site) and "__editable__" not in where
    assert os.path.isfile(os.path.join(os.path.dirname(where), "geometries", "ssd-v.toml"))

    (tmp_path / "run.vcd").write_text(_vcd(), encoding="ascii")
    pages = 4 * PROGRAMS  # every die probed, Mp 1
    logical = pages * 4096 // 2
    out = subprocess.run([venv / "bin" / "rbscope", "analyze", "run.vcd", "--geometry", "ssd-v",
                          "--logical", str(logical), "--classifier", "windows", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["wa"]["value"] == 2.0
    assert result["program_pulses"]["value"] == pages

    # The documents the help texts name are package data too (issue 25, item 21).
    out = subprocess.run([venv / "bin" / "rbscope", "docs", "ports"], capture_output=True,
                         text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (REPO_ROOT / "docs" / "ports.md").read_text(encoding="utf-8")
    where = subprocess.run([python, "-c", "import importlib.resources as r; "
                            "print(r.files('rbscope.docs').joinpath('cocotb.md'))"],
                           capture_output=True, text=True, check=True, cwd=tmp_path,
                           env=env).stdout.strip()
    assert where.startswith(site) and os.path.isfile(where), where

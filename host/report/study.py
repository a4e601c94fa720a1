"""Study files: every run of a comparison named in one TOML file, rebuilt with one command.

A study is a title and a list of runs; each run is what one ``rbscope analyze`` invocation takes
(a source, a geometry, the host's logical volume, probes, ...), plus the label, drive and
workload names the report shows::

    title = "Datacenter SSD candidates, 4 KiB random writes"

    [defaults]                          # optional: keys every run inherits
    logical = "64GiB"

    [[run]]
    drive = "Vendor A 960 GB"           # default: the geometry's name
    workload = "4K-RD-100%-W-4KiB-align"
    source = "captures/a-4k.rbcap"      # capture, measurement (.json), VCD or sigrok session
    geometry = "geometry/a.toml"        # a file, or a bundled name (ssd-v, ssd-i, ssd-m, ssd-s)
    probe = ["0=0:0:0", "1=1:0:0"]      # sniffer line = channel:chip:die
    logical_series = "a-4k-host.csv"    # optional: host bytes over time, for WA over time

    [[run]]
    drive = "Vendor B 960 GB"
    source = "captures/b-4k.rbcap"
    geometry = "geometry/b.toml"
    fio = "b-4k-fio.json"               # or: logical, sysfs/smartctl/nvme = [before, after]
    options = ["--mp", "2"]             # any other `rbscope analyze` option

Relative paths are relative to the study file. Every run is parsed by ``rbscope analyze``'s own
argument parser (``rbscope report --study``), so a run means exactly what the same ``analyze``
command line means, and bad values get the same messages (prefixed with the run they are in).
This module reads and checks the file; it knows no command line.
"""

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ReportError

__all__ = ["Study", "StudyRun", "load_study", "RUN_KEYS"]

#: Keys of a ``[[run]]`` table (and of ``[defaults]``).
RUN_KEYS = ("label", "drive", "workload", "source", "geometry", "logical", "fio", "sysfs",
            "smartctl", "nvme", "probe", "mp", "preset", "logical_series", "options")
_PAIR = ("sysfs", "smartctl", "nvme")
_PATHS = ("source", "fio", "preset", "logical_series") + _PAIR
#: Most runs a study may name.
MAX_RUNS = 500


@dataclass(frozen=True)
class StudyRun:
    """One run of a study: its names and the ``rbscope analyze`` arguments it stands for."""

    label: str | None
    drive: str | None
    workload: str
    argv: tuple
    logical_series: str | None
    #: The run's ``options`` (the last ``len(options)`` items of ``argv``): they may not change
    #: what the run's keys set (``rbscope report`` checks).
    options: tuple = ()


@dataclass(frozen=True)
class Study:
    title: str
    runs: tuple
    path: str
    probe_findings: tuple = ()


def _fail(path, where, message):
    raise ReportError(f"{path}: {where}: {message}")


def _resolve(base, value):
    p = Path(value)
    return str(p if p.is_absolute() else base / p)


def _text(path, where, key, value):
    if not isinstance(value, str) or not value.strip() or len(value) > 4096:
        _fail(path, where, f"{key} must be a non-empty string, not {value!r}"[:300])
    return value


def _run_argv(path, base, where, run):
    unknown = sorted(set(run) - set(RUN_KEYS))
    if unknown:
        _fail(path, where, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(RUN_KEYS)})")
    if "source" not in run:
        _fail(path, where, "source is missing")
    argv = [_resolve(base, _text(path, where, "source", run["source"]))]
    if "geometry" in run:
        g = _text(path, where, "geometry", run["geometry"])
        # A bundled name stays a name; anything else is a file next to the study.
        argv += ["--geometry", g if "/" not in g and not g.endswith(".toml") else
                 _resolve(base, g)]
    given = [k for k in ("logical", "fio") + _PAIR if k in run]
    if len(given) > 1:
        _fail(path, where, f"give one logical volume, not {' and '.join(given)}")
    if "logical" in run:
        value = run["logical"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            _fail(path, where, f"logical must be a byte count or a size string, not {value!r}")
        argv += ["--logical", str(value)]
    if "fio" in run:
        argv += ["--fio", _resolve(base, _text(path, where, "fio", run["fio"]))]
    for key in _PAIR:
        if key in run:
            pair = run[key]
            if not (isinstance(pair, list) and len(pair) == 2):
                _fail(path, where, f"{key} must be a list [before, after] of two files")
            argv += [f"--{key}", *(_resolve(base, _text(path, where, key, p)) for p in pair)]
    if "probe" in run:
        probes = run["probe"]
        if not isinstance(probes, list):
            _fail(path, where, "probe must be a list of 'LINE=CH:CHIP:DIE' strings")
        for p in probes:
            argv += ["--probe", _text(path, where, "probe", p)]
    if "mp" in run:
        mp = run["mp"]
        if isinstance(mp, bool) or not isinstance(mp, int):
            _fail(path, where, f"mp must be an integer, not {mp!r}")
        argv += ["--mp", str(mp)]
    if "preset" in run:
        argv += ["--preset", _resolve(base, _text(path, where, "preset", run["preset"]))]
    options = run.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        _fail(path, where, "options must be a list of strings (rbscope analyze options)")
    argv += options
    return tuple(argv)


def load_study(path):
    """Read a study file; return a :class:`Study`. Errors name the file and the run."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReportError(f"{path}: not valid TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # absurd nesting, absurd numbers
        raise ReportError(f"{path}: cannot be read as TOML: {type(exc).__name__}") from None
    unknown = sorted(set(doc) - {"title", "defaults", "run", "probe_findings"})
    if unknown:
        _fail(path, "top level", f"unknown key(s) {', '.join(unknown)} (title, defaults, run, "
                                 f"probe_findings)")
    title = doc.get("title", "rbscope write-amplification study")
    if not isinstance(title, str):
        _fail(path, "title", "must be a string")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        _fail(path, "defaults", "must be a table")
    runs = doc.get("run")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        _fail(path, "run", "a study needs one or more [[run]] tables")
    if len(runs) > MAX_RUNS:
        _fail(path, "run", f"at most {MAX_RUNS} runs, not {len(runs)}")
    base = path.parent
    out = []
    for i, table in enumerate(runs):
        run = {**defaults, **table}
        where = f"run {i + 1}" + (f" ({run['label']})" if isinstance(run.get("label"), str)
                                  else "")
        argv = _run_argv(path, base, where, run)
        names = {}
        for key in ("label", "drive", "workload"):
            if key in run:
                names[key] = _text(path, where, key, run[key])
        series = run.get("logical_series")
        if series is not None:
            series = _resolve(base, _text(path, where, "logical_series", series))
        out.append(StudyRun(names.get("label"), names.get("drive"), names.get("workload", ""),
                            argv, series, tuple(run.get("options", ()))))
    probes = doc.get("probe_findings", [])
    if not isinstance(probes, list) or len(probes) > MAX_RUNS:
        _fail(path, "probe_findings", f"must be a list of at most {MAX_RUNS} file names")
    probes = tuple(_resolve(base, _text(path, "probe_findings", "probe_findings", p))
                   for p in probes)
    return Study(title, tuple(out), str(path), probes)

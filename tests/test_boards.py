"""Board builds: header plans, PLL settings, elaboration of every board configuration, the seed
sweep (with one seed's place and route stubbed), and (slow, ``make test-boards``) place and
route with the timing checked."""

import importlib.util
import json
import random
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from amaranth.hdl import Fragment

from rbscope.analysis.presets import identify
from rbscope.boards import build as build_module
from rbscope.boards.build import (
    SEEDS,
    BuildResult,
    PlaceError,
    SeedTry,
    _top,
    board_class,
    build,
    log_utilisation,
    main,
    parse_report,
)
from rbscope.boards.top import (
    BoardError,
    ecp5_pll_params,
    ice40_pll_params,
    plan_header,
    uart_divisor,
)
from rbscope.gateware.link.counters import TRACE_FIFO_DEPTH
from rbscope.gateware.link.protocol import config_from_registers, decode_uart_divisor
from rbscope.gateware.nand_emu import boot
from rbscope.gateware.nand_emu.layouts import config_const

# ---- header plans --------------------------------------------------------------------------------


def test_plan_hands_out_pins_in_order():
    header = [f"P{i}" for i in range(40)]
    plan = plan_header(header, 8, emu_dies=2, tap_targets=4)
    assert plan.rb == tuple(header[:8])
    # Emulator bus: CE# per die, R/B#, CLE, ALE, WE#, RE#, WP#, DQ[7:0] = 2 + 1 + 5 + 8 pins.
    assert plan.emu_bus["ce_n"] == ("P8", "P9")
    assert plan.emu_bus["rb_n"] == ("P10",)
    assert plan.emu_bus["io"] == tuple(header[16:24])
    # Tap: CE# per target, CLE, ALE, WE#, RE#, DQ[7:0] = 4 + 4 + 8 pins.
    assert plan.tap["ce_n"] == tuple(header[24:28])
    assert plan.tap["re_n"] == ("P31",)
    assert plan.tap["io"] == tuple(header[32:40])
    assert plan.spare == ()
    used = [p for pins in (plan.rb, *plan.emu_bus.values(), *plan.tap.values()) for p in pins]
    assert len(used) == len(set(used)) == 40


def test_plan_refuses_too_many_pins():
    with pytest.raises(BoardError, match="needs 57 header pins .* header has 56"):
        plan_header([str(i) for i in range(56)], 57)
    with pytest.raises(BoardError, match="non-negative"):
        plan_header(["A"], -1)


@pytest.mark.parametrize("board, pins", [("icebreaker", 24), ("ulx3s", 56), ("ecpix5", 64)])
def test_header_sizes_and_default_channels_fit(board, pins):
    cls = board_class(board)
    assert len(cls.header) == pins
    assert len(set(cls.header.values())) == pins  # no package pin twice
    assert cls.default_channels <= pins
    # ULX3S: every header pin can be an R/B# input, one more is refused.
    with pytest.raises(BoardError):
        plan_header(list(cls.header.values()), pins + 1)


def test_unknown_board_is_a_board_error():
    with pytest.raises(BoardError, match="Unknown board 'de0'"):
        board_class("de0")


# ---- PLLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("f_in, f_out", [(12e6, 48e6), (12e6, 60e6), (12e6, 36e6)])
def test_ice40_pll_reaches_target_within_limits(f_in, f_out):
    pll = ice40_pll_params(f_in, f_out)
    pfd = f_in / (pll["divr"] + 1)
    vco = pfd * (pll["divf"] + 1)
    assert 10e6 <= pfd <= 133e6 and 533e6 <= vco <= 1066e6
    assert pll["freq"] == vco / 2 ** pll["divq"]
    assert abs(pll["freq"] - f_out) / f_out < 0.01


@pytest.mark.parametrize("f_in, f_out", [(25e6, 100e6), (100e6, 100e6), (25e6, 125e6)])
def test_ecp5_pll_reaches_target_within_limits(f_in, f_out):
    pll = ecp5_pll_params(f_in, f_out)
    assert pll["freq"] == f_in * pll["clkfb_div"] / pll["clki_div"]
    assert 400e6 <= pll["freq"] * pll["clkop_div"] <= 800e6
    assert pll["freq"] == f_out


def test_unreachable_pll_is_a_board_error():
    with pytest.raises(BoardError, match="No iCE40 PLL"):
        ice40_pll_params(12e6, 2e9)


# ---- nextpnr report ------------------------------------------------------------------------------


def test_parse_report_takes_the_clock_with_least_margin():
    report = {
        "utilization": {"ICESTORM_LC": {"used": 4000, "available": 5280},
                        "ICESTORM_RAM": {"used": 12, "available": 30},
                        "SB_WARMBOOT": {"used": 0, "available": 1}},
        "fmax": {"$glbnet$clk": {"achieved": 51.5, "constraint": 48.0},
                 "other": {"achieved": 11.0, "constraint": 12.0}},
    }
    util, fmax, target = parse_report(report)
    assert util == {"LC": (4000, 5280), "BRAM": (12, 30)}
    assert (fmax, target) == (11.0e6, 12.0e6)
    with pytest.raises(BoardError):
        parse_report({"utilization": {}, "fmax": {}})


# ---- seed sweep (one seed's place and route stubbed) ---------------------------------------------


def stub_seeds(monkeypatch, fmax_mhz, target_mhz=48.0, fail=None):
    """Replace synthesis by nothing and one seed's place and route by a stub: seed ``s`` reaches
    ``fmax_mhz[s]`` MHz, or raises ``fail[s]`` (a :class:`PlaceError`). Returns the seeds placed,
    in the order they started (``"yosys"`` for each synthesis)."""
    calls = []

    def synthesise(*args):
        calls.append("yosys")
        return "rtlil"

    def place_seed(board, channels, emulator, tap, emu_bus, page_type_slots, sync_out, name, out,
                   seed, rtlil):
        assert rtlil == "rtlil" and out.is_dir()
        calls.append(seed)
        if fail and seed in fail:
            (out / f"seed{seed}").mkdir()
            (out / f"seed{seed}" / f"{name}.tim").write_text(f"{fail[seed]}\n")
            raise fail[seed]
        return BuildResult(board, "iCE40UP5K", 16, 0, target_mhz * 1e6, fmax_mhz[seed] * 1e6,
                           {"LC": (4702 + seed, 5280)}, 10.0 + seed,
                           f"build/x/seed{seed}.bin", seed=seed)

    monkeypatch.setattr(build_module, "_synthesise_netlist", synthesise)
    monkeypatch.setattr(build_module, "_place_seed", place_seed)
    return calls


def test_sweep_keeps_the_first_seed_that_meets_timing(monkeypatch, tmp_path):
    calls = stub_seeds(monkeypatch, {1: 47.5, 2: 48.0, 3: 52.0})
    result = build("icebreaker", build_dir=str(tmp_path))
    # Seed 2 meets 48 MHz exactly; seed 3, better, is never tried. Yosys runs once.
    assert calls == ["yosys", 1, 2]
    assert result.timing_met and result.seed == 2
    assert (result.fmax_hz, result.utilisation) == (48.0e6, {"LC": (4704, 5280)})
    assert result.seeds == list(SEEDS)
    assert result.seeds_tried == [SeedTry(1, 47.5e6, False, 11.0), SeedTry(2, 48.0e6, True, 12.0)]
    text = result.summary()
    assert f"placer seed 2 (seeds allowed, in order: {', '.join(map(str, SEEDS))})" in text
    assert "seed 1: 47.50 MHz, not met" in text and "seed 2: 48.00 MHz, met" in text
    # The build directory records the result.
    record = json.loads((tmp_path / "rbscope_icebreaker_16ch" /
                         "rbscope_icebreaker_16ch.sweep.json").read_text())
    assert record["seed"] == 2 and [t["seed"] for t in record["seeds_tried"]] == [1, 2]


def test_seeds_side_by_side_keep_the_seed_one_at_a_time_keeps(monkeypatch, tmp_path):
    # Whatever the Fmax of each seed, the seed kept does not depend on how many run at once.
    rng = random.Random(20)
    for _ in range(40):
        fmax = {s: rng.choice((46.0, 47.9, 48.0, 49.5)) for s in SEEDS}
        kept = set()
        for jobs in (1, 2, 3, 8):
            calls = stub_seeds(monkeypatch, fmax)
            result = build("icebreaker", jobs=jobs, build_dir=str(tmp_path))
            kept.add((result.seed, result.fmax_hz, result.timing_met))
            # Seeds are tried in rounds of `jobs`, in the list's order, and stop after the round
            # that met.
            met = next((i for i, s in enumerate(SEEDS) if fmax[s] >= 48.0), len(SEEDS) - 1)
            placed = list(SEEDS[:(met // jobs + 1) * jobs])
            assert calls[0] == "yosys" and sorted(calls[1:]) == placed
            assert [t.seed for t in result.seeds_tried] == placed  # reported in the list's order
        assert len(kept) == 1, (fmax, kept)
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        build("icebreaker", jobs=0, build_dir=str(tmp_path))


def test_sweep_that_no_seed_meets_tries_them_all_and_fails_with_each_fmax(monkeypatch, capsys,
                                                                           tmp_path):
    fmax = {s: 46.0 + s / 10 for s in SEEDS}
    fmax[3] = 47.9
    calls = stub_seeds(monkeypatch, fmax)
    result = build("icebreaker", build_dir=str(tmp_path))
    assert calls == ["yosys", *SEEDS]
    assert not result.timing_met
    # The figures kept are the best seed's, but there is no bitstream that meets timing.
    assert (result.seed, result.fmax_hz, result.bitstream) == (3, 47.9e6, "")
    assert [(t.seed, t.fmax_hz, t.met) for t in result.seeds_tried] == [
        (s, fmax[s] * 1e6, False) for s in SEEDS]
    assert "no placer seed met it" in result.summary()
    assert main(["icebreaker", "--build-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error: timing not met at any seed tried" in err
    for seed in SEEDS:  # each seed's Fmax, as it finished and in the final error
        assert f"seed {seed}: {fmax[seed]:.2f} MHz" in err.splitlines()[-1]
        assert f"  seed {seed}: {fmax[seed]:.2f} MHz, not met" in err


def test_pinned_seed_is_the_only_one_tried(monkeypatch, capsys, tmp_path):
    calls = stub_seeds(monkeypatch, {5: 47.0})
    result = build("icebreaker", seed=5, build_dir=str(tmp_path))
    assert calls == ["yosys", 5] and result.seeds == [5] and not result.timing_met
    assert main(["icebreaker", "--seed", "5", "--json", "--build-dir", str(tmp_path)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["seed"], out["seeds"]) == (5, [5])
    assert out["seeds_tried"] == [{"seed": 5, "fmax_hz": 47.0e6, "met": False, "seconds": 15.0,
                                   "error": ""}]


def test_cli_names_the_seed_it_kept(monkeypatch, capsys, tmp_path):
    stub_seeds(monkeypatch, {1: 40.0, 2: 49.0})
    assert main(["icebreaker", "--json", "--build-dir", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed"] == 2 and out["seeds"] == list(SEEDS)
    assert [t["fmax_hz"] for t in out["seeds_tried"]] == [40.0e6, 49.0e6]
    assert main(["icebreaker", "--build-dir", str(tmp_path)]) == 0
    assert "placer seed 2" in capsys.readouterr().out


def test_margin_raises_what_a_seed_must_reach(monkeypatch, tmp_path):
    calls = stub_seeds(monkeypatch, {1: 101.0, 2: 104.9, 3: 105.0}, target_mhz=100.0)
    result = build("ulx3s", margin=0.05, build_dir=str(tmp_path))
    assert calls == ["yosys", 1, 2, 3] and result.seed == 3
    assert result.required_hz == pytest.approx(105e6)
    assert "5 % margin required" in result.summary()
    with pytest.raises(ValueError, match="non-negative"):
        build("ulx3s", margin=-0.01, build_dir=str(tmp_path))
    with pytest.raises(ValueError, match="at least one seed"):
        build("ulx3s", seeds=(), build_dir=str(tmp_path))


def test_sweep_goes_past_a_seed_without_placement_but_not_past_a_design_too_big(monkeypatch,
                                                                                  tmp_path):
    no_placement = PlaceError("ERROR: failed to find a legal placement", {"LC": (4840, 5280)})
    calls = stub_seeds(monkeypatch, {2: 48.5}, fail={1: no_placement})
    result = build("icebreaker", build_dir=str(tmp_path))
    assert calls == ["yosys", 1, 2] and result.seed == 2
    assert result.seeds_tried[0].error.startswith("ERROR: failed to find a legal placement")
    assert "seed 1: no placement (ERROR" in result.summary()

    too_big = PlaceError("ERROR: Failed to expand region", {"LC": (5436, 5280)})
    calls = stub_seeds(monkeypatch, {}, fail={1: too_big})
    with pytest.raises(PlaceError, match="expand region"):
        build("icebreaker", build_dir=str(tmp_path))
    assert calls == ["yosys", 1]  # more cells than the part has: no other seed is tried
    # nextpnr's log of the failure is kept beside the netlist (capacity.py's --collect reads it).
    log = tmp_path / "rbscope_icebreaker_16ch" / "rbscope_icebreaker_16ch.tim"
    assert log.read_text() == "ERROR: Failed to expand region\n"

    killed = BoardError("place and route stopped without a report or an error of nextpnr's")
    calls = stub_seeds(monkeypatch, {2: 48.5}, fail={1: killed})
    with pytest.raises(BoardError, match="without a report"):
        build("icebreaker", build_dir=str(tmp_path))
    assert calls == ["yosys", 1]  # not a verdict on seed 1: the sweep stops

    calls = stub_seeds(monkeypatch, {}, fail={s: no_placement for s in (1, 2, 3)})
    with pytest.raises(BoardError, match="no placement at any seed: seed 1: .*; seed 3: "):
        build("icebreaker", seeds=(1, 2, 3), build_dir=str(tmp_path))
    assert calls == ["yosys", 1, 2, 3]


@pytest.mark.parametrize("log, raises", [
    ("Info: \t         ICESTORM_LC:    4840/   5280    91%\n"
     "ERROR: failed to find a legal placement\n", PlaceError),
    (None, BoardError),  # the script stopped without nextpnr's verdict: killed, say
])
def test_a_seed_without_report_is_a_placement_failure_only_when_nextpnr_says_so(
        monkeypatch, tmp_path, log, raises):
    class Plan:
        files = {"x.il": "rtlil"}

        def execute_local(self, root, env):
            assert env["YOSYS"] != "yosys" and Path(root, "x.json").exists()
            if log is not None:
                Path(root, "x.tim").write_text(log)
            raise subprocess.CalledProcessError(1 if log else 143, ["sh", "build_x.sh"])

    monkeypatch.setattr(build_module, "_plan", lambda *args: (None, None, "x", Plan()))
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(raises) as info:
        build_module._place_seed("icebreaker", 16, 0, 0, True, None, False, "x", tmp_path, 3,
                                 "rtlil")
    if raises is PlaceError:
        assert info.type is PlaceError and info.value.fits
        assert info.value.utilisation == {"LC": (4840, 5280)}
        assert "ERROR: failed to find a legal placement; logs in" in str(info.value)
    else:
        assert info.type is BoardError and "without a report or an error of nextpnr's" in str(
            info.value)


def test_nextpnr_log_utilisation():
    log = ("Info: Device utilisation:\n"
           "Info: \t         ICESTORM_LC:    5436/   5280   102%\n"
           "Info: \t        ICESTORM_RAM:      24/     30    80%\n"
           "Info: \t         SB_WARMBOOT:       0/      1     0%\n"
           "Info: constrained 'rb_0__io[0]' to bel 'X9/Y0/io0'\n")
    util = log_utilisation(log)
    assert util == {"LC": (5436, 5280), "BRAM": (24, 30)}
    assert not PlaceError("", util).fits and PlaceError("", {"BRAM": (24, 30)}).fits


def test_capacity_table_sweeps_seeds_and_names_the_one_kept(monkeypatch, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "capacity", Path(__file__).resolve().parent.parent / "benchmarks" / "capacity.py")
    capacity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capacity)
    too_big = PlaceError("ERROR: Failed to expand region", {"LC": (5436, 5280)})
    calls = stub_seeds(monkeypatch, {1: 47.0, 2: 48.2}, fail={7: too_big})
    rows = capacity.run([("icebreaker", 16, 0)], None, str(tmp_path))
    assert calls == ["yosys", 1, 2]
    assert (rows[0]["seed"], rows[0]["met"], rows[0]["fmax_mhz"]) == (2, True, 48.2)
    assert [t["fmax_mhz"] for t in rows[0]["seeds_tried"]] == [47.0, 48.2]
    rows += capacity.run([("icebreaker", 24, 0)], 7, str(tmp_path))  # a pinned seed
    assert calls[-1] == 7 and rows[1]["utilisation"] == {"LC": (5436, 5280)}
    text = capacity.table(rows, {}, "capacity.py")
    assert "| 48.2 MHz | 2 | 48 MHz | meets timing |" in text
    assert "| – | – | 48 MHz | **does not fit** (LC 103 %) |" in text
    assert "seed 1: 47.00 MHz, not met" in capsys.readouterr().out
    # --collect: the seed from the sweep's record, beside the kept seed's report.
    out = tmp_path / "rbscope_icebreaker_16ch"
    (out / "rbscope_icebreaker_16ch.report.json").write_text(json.dumps(
        {"utilization": {"ICESTORM_LC": {"used": 4702, "available": 5280}},
         "fmax": {"clk": {"achieved": 48.2, "constraint": 48.0}}}))
    kept, too_big = capacity.collect([tmp_path])
    assert (kept["seed"], kept["fmax_mhz"], kept["met"]) == (2, 48.2, True)
    assert (too_big["channels"], too_big["error"]) == (24, "ERROR: Failed to expand region")


# ---- elaboration of every board configuration ----------------------------------------------------

CONFIGS = [
    # (board, channels, emulated dies, tap targets, emulator bus on the header)
    ("icebreaker", None, 0, 0, False),
    ("icebreaker", 8, 0, 1, False),
    ("icebreaker", None, 2, 0, True),
    ("ulx3s", None, 0, 0, False),
    ("ulx3s", 40, 0, 4, False),
    ("ulx3s", None, 2, 0, True),
    ("ulx3s", None, 2, 0, False),
    ("ulx3s", None, 2, 2, True),  # the tap on the emulated bus (no tap pins)
    ("ecpix5", None, 0, 0, False),
    ("ecpix5", 32, 0, 4, False),
    ("ecpix5", None, 2, 0, True),
]


@pytest.mark.parametrize("board, channels, emulator, tap, emu_bus", CONFIGS)
def test_board_configuration_elaborates(board, channels, emulator, tap, emu_bus):
    cls, top = _top(board, channels, emulator, tap, emu_bus)
    platform = cls()
    # Requesting a package pin twice raises, so elaborating checks that no pin has two uses.
    Fragment.get(top, platform).prepare()
    plan = top.plan(platform)
    if plan.rb:
        assert tuple(platform.lookup("rb", 0).ios[0].names) == plan.rb
    else:
        assert emulator  # a loopback build watches its emulated dies, not pins
    for name, group in (("tap", plan.tap), ("emu_bus", plan.emu_bus)):
        if group:
            subsignals = {sub.name: tuple(sub.ios[0].names)
                          for sub in platform.lookup(name, 0).ios}
            assert subsignals == group
    assert platform.pll_hz == cls.target_hz
    # The link's rate: the FT2232H's 12 Mbaud on the iCEBreaker (4 clocks a bit) and the ECPIX-5
    # (25/3 clocks a bit, a fractional divisor); the ULX3S's FT231X 3 Mbaud (3.03 at 100 MHz).
    want = {"icebreaker": (4, 12_000_000),
            "ecpix5": (Fraction(25, 3), 12_000_000)}.get(board, (33, 3_000_000))
    assert (top.device.uart_divisor, cls.uart_baud) == want
    assert top.device.core.controller.uart_divisor == want[0]  # (INFO tells the host)
    info = top.device.core.controller._info_values()
    assert decode_uart_divisor(info["uart_divisor"]) == pytest.approx(float(want[0]), rel=1e-3)
    assert top.device.core.params.channels == (emulator or channels or cls.default_channels)
    # With TAP the tap is built in: its tags feed the sniffer, INFO says so.
    core = top.device.core
    assert (core.tap is not None) == bool(tap)
    assert core.params.tag_bits == (4 if tap else 0)
    if tap:
        assert core.tap.dies == (emulator or tap)
        assert core.controller.extension.info["tap_targets"] == core.tap.targets
        assert bool(plan.tap) == (not emulator)


@pytest.mark.parametrize("board", ["icebreaker", "ulx3s", "ecpix5"])
def test_an_emulator_build_powers_up_with_the_selftests_configuration(board):
    """Issue 25, item 16: the registers' reset values of an emulator build are the self-test's
    configuration (dies busy for real times, windows the host names); an R/B# build's windows
    are left to ``configure``, and on the ECP5 boards it holds the deep trace FIFO."""
    for emulator in (2, 0):
        cls, top = _top(board, None, emulator, 0, bool(emulator))
        platform = cls()
        Fragment.get(top, platform).prepare()
        core = top.device.core
        resets = {r.name: r.reset for r in core.controller.registers}
        config = config_from_registers(core.params, resets)
        # The trace FIFO: the boards' deep one for R/B# pins (the iCEBreaker's 256 records fill
        # the block RAMs 16 would), the link's default in loopback.
        deep = {"icebreaker": 256, "ulx3s": 1024, "ecpix5": 4096}[board]
        assert core.controller.trace_depth == (TRACE_FIFO_DEPTH if emulator else deep)
        if not emulator:
            assert not any(lo < hi for lo, hi in config.windows)
            assert identify(core.params, platform.pll_hz, resets) is None
            continue
        assert config == boot.sniffer_config(core.params)
        preset = identify(core.params, platform.pll_hz, resets)
        assert preset.names == ("multiplane", "cache", "read", "program", "erase")
        # The emulator's configuration registers hold the boot configuration, packed.
        packed = sum(resets[f"EMU_CFG_{i}"] << 32 * i
                     for i in range(sum(n.startswith("EMU_CFG_") for n in resets)))
        assert packed == config_const(top.emulator, boot.emu_config(top.emulator))


def test_a_clock_that_cannot_make_the_boards_rate_is_a_board_error(monkeypatch):
    cls, top = _top("icebreaker", None, 0, 0, False)
    monkeypatch.setattr(cls, "uart_baud", 13_000_000)  # 48 MHz / 13 MHz: under 4 clocks a bit
    with pytest.raises(BoardError, match=r"a 48 MHz clock cannot make 13 Mbaud \(divisor 4"):
        Fragment.get(top, cls()).prepare()
    # 5 Mbaud: 10 whole clocks a bit are 4 % off; 48/5 clocks are exact, as a fraction.
    monkeypatch.setattr(cls, "uart_baud", 5_000_000)
    assert uart_divisor(cls(), 48_000_000) == Fraction(48, 5)


def test_cli_reports_bad_options_without_traceback(capsys):
    assert main(["ulx3s", "--channels", "57", "--pins"]) == 2
    assert "needs 57 header pins" in capsys.readouterr().err
    assert main(["icebreaker", "--pins"]) == 0
    out = capsys.readouterr().out
    assert "R/B# ch0: pmod0.1 (4)" in out and "R/B# ch15: pmod1.10 (28)" in out


# ---- place and route (slow; `make test-boards`) --------------------------------------------------

#: (board, channels, emulated dies, seeds placed side by side). ``make test-boards`` runs two
#: pytest workers (``--dist loadgroup``): the iCEBreaker, whose seeds most often miss, sweeps on
#: one, two seeds at a time; the ECP5 builds, which meet their clock with room, share the other.
PNR = [
    pytest.param("icebreaker", 16, 0, 2, marks=pytest.mark.xdist_group("ice40")),
    pytest.param("ulx3s", 56, 0, 1, marks=pytest.mark.xdist_group("ecp5")),
    pytest.param("ecpix5", 64, 0, 1, marks=pytest.mark.xdist_group("ecp5")),
]


@pytest.mark.slow
@pytest.mark.parametrize("board, channels, emulator, jobs", PNR)
def test_board_meets_timing_after_place_and_route(board, channels, emulator, jobs, tmp_path):
    result = build(board, channels=channels, emulator=emulator, jobs=jobs,
                   build_dir=str(tmp_path))
    print(result.summary())  # `make test-boards` shows it (-rA): the seed kept, every seed's Fmax
    for kind, (used, avail) in result.utilisation.items():
        assert used <= avail, kind
    assert result.timing_met, result.summary()
    # The seed sweep: the seed kept is the first of SEEDS, in order, that met the clock.
    assert result.seeds == list(SEEDS)
    assert [t.seed for t in result.seeds_tried] == list(SEEDS[:len(result.seeds_tried)])
    assert result.seed == next(t.seed for t in result.seeds_tried if t.met)
    assert Path(result.bitstream).stat().st_size > 0


def test_board_build_takes_the_emulators_page_type_map_size(capsys):
    for slots, want in ((256, 256), (None, 64)):  # the default: one per page of the block
        cls, top = _top("ecpix5", None, 2, 0, True, page_type_slots=slots)
        Fragment.get(top, cls()).prepare()
        assert top.device.core.emulator.page_type_slots == want
    assert main(["ecpix5", "--emulator", "2", "--page-type-slots", "96"]) == 2
    assert "page_type_slots must be a power of two, not 96" in capsys.readouterr().err

"""Board builds: header plans, PLL settings, elaboration of every board configuration, and (slow,
``make test-boards``) place and route with the timing checked."""

import pytest
from amaranth.hdl import Fragment

from rbscope.boards.build import BOARDS, _top, board_class, build, main, parse_report
from rbscope.boards.top import BoardError, ecp5_pll_params, ice40_pll_params, plan_header

# ---- header plans --------------------------------------------------------------------------------


def test_plan_hands_out_pins_in_order():
    header = [f"P{i}" for i in range(40)]
    plan = plan_header(header, 8, emu_dies=2, tap_targets=4)
    assert plan.rb == tuple(header[:8])
    # Emulator bus: CE# per die, R/B#, CLE, ALE, WE#, RE#, WP#, DQ[7:0] = 2 + 1 + 5 + 8 pins.
    assert plan.emu_bus["ce_n"] == ("P8", "P9")
    assert plan.emu_bus["rb_n"] == ("P10",)
    assert plan.emu_bus["io"] == tuple(header[16:24])
    assert plan.tap["ce_n"] == tuple(header[24:28])
    assert plan.tap["io"] == tuple(header[31:39])
    assert plan.spare == ("P39",)
    used = [p for pins in (plan.rb, *plan.emu_bus.values(), *plan.tap.values()) for p in pins]
    assert len(used) == len(set(used)) == 39


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


# ---- elaboration of every board configuration ----------------------------------------------------

CONFIGS = [
    # (board, channels, emulated dies, tap targets, emulator bus on the header)
    ("icebreaker", None, 0, 0, False),
    ("icebreaker", 8, 0, 1, False),
    ("icebreaker", None, 2, 0, True),
    ("ulx3s", None, 0, 0, False),
    ("ulx3s", 41, 0, 4, False),
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
    assert top.device.core.params.channels == (emulator or channels or cls.default_channels)
    # With TAP the tap is built in: its tags feed the sniffer, INFO says so.
    core = top.device.core
    assert (core.tap is not None) == bool(tap)
    assert core.params.tag_bits == (4 if tap else 0)
    if tap:
        assert core.tap.dies == (emulator or tap)
        assert core.controller.extension.info["tap_targets"] == core.tap.targets
        assert bool(plan.tap) == (not emulator)


def test_cli_reports_bad_options_without_traceback(capsys):
    assert main(["ulx3s", "--channels", "57", "--pins"]) == 2
    assert "needs 57 header pins" in capsys.readouterr().err
    assert main(["icebreaker", "--pins"]) == 0
    out = capsys.readouterr().out
    assert "R/B# ch0: pmod0.1 (4)" in out and "R/B# ch15: pmod1.10 (28)" in out


# ---- place and route (slow; `make test-boards`) --------------------------------------------------

PNR = [
    ("icebreaker", 16, 0),
    ("ulx3s", 56, 0),
    ("ecpix5", 64, 0),
]


@pytest.mark.slow
@pytest.mark.parametrize("board, channels, emulator", PNR)
def test_board_meets_timing_after_place_and_route(board, channels, emulator, tmp_path):
    assert board in BOARDS
    result = build(board, channels=channels, emulator=emulator, build_dir=str(tmp_path))
    print(result.summary())
    for kind, (used, avail) in result.utilisation.items():
        assert used <= avail, kind
    assert result.timing_met, result.summary()


def test_board_build_takes_the_emulators_page_type_map_size(capsys):
    for slots, want in ((256, 256), (None, 64)):  # the default: one per page of the block
        cls, top = _top("ecpix5", None, 2, 0, True, page_type_slots=slots)
        Fragment.get(top, cls()).prepare()
        assert top.device.core.emulator.page_type_slots == want
    assert main(["ecpix5", "--emulator", "2", "--page-type-slots", "96"]) == 2
    assert "page_type_slots must be a power of two, not 96" in capsys.readouterr().err

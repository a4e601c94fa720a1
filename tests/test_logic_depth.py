"""benchmarks/logic_depth.py: the arrival estimate and the path it names, on small netlists
written by hand in the shape Yosys writes for nextpnr."""

import json
import math

import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def depth():
    return load_benchmark("logic_depth")


def _cell(kind, **ports):
    directions = {"Q": "output", "O": "output", "CO": "output", "RDATA": "output"}
    return {"type": kind, "connections": {p: list(b) for p, b in ports.items()},
            "port_directions": {p: directions.get(p, "input") for p in ports}}


def _netlist(tmp_path, cells, names):
    top = {"attributes": {"top": 1}, "cells": cells,
           "netnames": {name: {"bits": [bit], "attributes": {"src": f"x.py:{bit}"}}
                        for name, bit in names.items()}}
    path = tmp_path / "netlist.json"
    path.write_text(json.dumps({"modules": {"top": top}}))
    return path


def test_two_luts_between_flip_flops(depth, tmp_path):
    # a (FF) → LUT → LUT → d (FF's D), and a 1-LUT side path into the second LUT.
    cells = {
        "ff_a": _cell("SB_DFF", C=[1], D=[9], Q=[2]),
        "lut1": _cell("SB_LUT4", I0=[2], I1=["0"], I2=["0"], I3=["0"], O=[3]),
        "lut2": _cell("SB_LUT4", I0=[3], I1=[2], I2=["0"], I3=["0"], O=[4]),
        "ff_d": _cell("SB_DFF", C=[1], D=[4], Q=[9]),
    }
    net = depth.Netlist(_netlist(tmp_path, cells, {"a": 2, "mid": 3, "d": 4, "q": 9}))
    arrival, via = net.arrival(4)
    want = depth.CLK_TO_Q["ff"] + 2 * (depth.ROUTE + depth.LUT)
    assert arrival == pytest.approx(want) and via == 3
    assert net.path(4) == ["a", "mid", "d"]
    ends = net.endpoints(fanout_ce=64)
    slowest = ends[0]
    assert slowest[1] == "ff_d" and slowest[2] == "D"
    assert slowest[0] == pytest.approx(want + depth.SETUP + depth.ROUTE)


def test_wide_enable_pays_a_global_buffer_and_carry_chains_are_cheap(depth, tmp_path):
    cells = {"ff_a": _cell("SB_DFF", C=[1], D=[2], Q=[2])}
    # A carry chain of three steps from the flip-flop's output.
    cells["c0"] = _cell("SB_CARRY", I0=[2], I1=["0"], CI=["0"], CO=[10])
    cells["c1"] = _cell("SB_CARRY", I0=[2], I1=["0"], CI=[10], CO=[11])
    cells["c2"] = _cell("SB_CARRY", I0=[2], I1=["0"], CI=[11], CO=[12])
    # Its end enables 70 flip-flops (more than --fanout-ce): a global buffer.
    for k in range(70):
        cells[f"e{k}"] = _cell("SB_DFFE", C=[1], D=[2], E=[12], Q=[100 + k])
    net = depth.Netlist(_netlist(tmp_path, cells, {"a": 2, "carry": 12}))
    chain = depth.CARRY_IN + net.route(2) + 2 * depth.CARRY
    assert net.arrival(12)[0] == pytest.approx(depth.CLK_TO_Q["ff"] + chain)
    enable = [e for e in net.endpoints(fanout_ce=64) if e[2] == "E"]
    assert len(enable) == 70
    assert enable[0][0] == pytest.approx(depth.CLK_TO_Q["ff"] + chain + depth.SETUP
                                         + depth.GLOBAL_BUFFER)
    # Below the threshold the enable is routed like any net of its fanout (70: 2 ns plus half
    # a nanosecond per doubling beyond 4).
    local = [e for e in net.endpoints(fanout_ce=100) if e[2] == "E"]
    assert net.route(12) == pytest.approx(depth.ROUTE + 0.5 * math.log2(70 / 4))
    assert local[0][0] == pytest.approx(depth.CLK_TO_Q["ff"] + chain + depth.SETUP
                                        + net.route(12))

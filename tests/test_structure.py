"""What the pulses show of the drive's structure beside the geometry file
(:mod:`rbscope.analysis.structure`): pages per block, planes per operation, program scheme, LUNs
per line, each agreeing with a right geometry and disagreeing with a wrong one."""

import dataclasses
import json

from rbscope.analysis.pipeline import wa_of
from rbscope.analysis.structure import infer
from rbscope.cli import commands as cli

from . import wa_drives as W


def _findings(name, seed=2, tell=("cell", "scheme", "ppb"), **geometry_changes):
    d = W.generate(W.family(name), seed)
    g = W.geometry_for(d, "L0", tell=tell)
    if geometry_changes:
        g = dataclasses.replace(g, **geometry_changes)
    r = wa_of(d.measurement, g, d.logical)
    return d, {f.quantity: f for f in infer(r, d.measurement, g)}


def test_a_right_geometry_agrees():
    d, f = _findings("mlc-2plane", tell=("cell", "scheme"))
    assert f["planes_per_operation"].shown == 2 and f["planes_per_operation"].agrees
    # The cell told: the modes were fitted to it, no independent reading.
    assert f["program_scheme"].shown is None and f["program_scheme"].agrees is None
    # Pages per block not told: programs ÷ erases show it (this family fills every block).
    ppb = f["pages_per_block"]
    assert ppb.geometry is None and ppb.agrees is None
    assert abs(ppb.shown / d.spec.ppb - 1) < 0.1
    assert all(x.warning is None for x in f.values())


def test_wrong_planes_and_cell_disagree_with_a_warning():
    _, f = _findings("mlc-2plane", tell=("cell", "scheme"), planes_per_die=4)
    assert f["planes_per_operation"].agrees is False
    assert "planes per operation 2" in f["planes_per_operation"].warning
    # The cell not told: two program modes in the widths, MLC pages or a two-pass scheme.
    _, f = _findings("mlc-2plane", tell=())
    assert f["program_scheme"].shown.startswith("MLC page") and f["program_scheme"].agrees is None
    # A one-shot TLC drive given as MLC (scheme not said): the two data loads before each
    # program say three pages per plane, which no MLC writes.
    _, f = _findings("tlc-oneshot-4p", tell=("ppb",), cell="mlc")
    assert f["program_scheme"].agrees is False
    assert "program scheme one-shot, 3 pages per plane" in f["program_scheme"].warning


def test_one_shot_loads_show_the_scheme():
    _, f = _findings("tlc-oneshot-4p", tell=("cell", "ppb"))
    s = f["program_scheme"]
    assert s.shown.startswith("one-shot, 3") and s.agrees and "(scheme not given)" in s.geometry
    assert f["planes_per_operation"].shown == 4


def test_pages_per_block_under_the_geometry_s_cap_is_no_reading():
    _, f = _findings("tlc-gc-overlap", tell=("cell", "ppb"))
    # TLC upper pages overlap the erases: the cap is what told them apart, so the ratio
    # is reported, not compared.
    p = f["pages_per_block"]
    assert "no independent reading" in p.evidence and p.agrees is None and p.warning is None


def test_analyze_prints_and_writes_the_structure(tmp_path, capsys):
    d = W.generate(W.family("mlc-2plane"), 2)
    src = tmp_path / "m.json"
    d.measurement.save(src)
    geo = tmp_path / "g.toml"
    geo.write_text('name = "wrong planes"\n[geometry]\nchannels = 4\nchips_per_channel = 1\n'
                   'dies_per_chip = 1\nplanes_per_die = 4\npage_size = 4096\n'
                   'program_model = "multi-plane"\n')
    args = ["analyze", str(src), "--geometry", str(geo), "--logical",
            str(int(d.logical.value)), "--classifier", "sequence"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "structure (what the pulses show" in out
    assert "DISAGREES" in out and "WARNING: the pulses show planes per operation 2" in out
    assert cli.main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    planes = next(x for x in data["structure"] if x["quantity"] == "planes_per_operation")
    assert planes["shown"] == 2 and planes["geometry"] == 4 and planes["agrees"] is False


def test_pages_per_block_read_only_where_the_geometry_did_not_bound_the_erases():
    # A drive of 32-page blocks. Not told: programs ÷ erases show the block.
    d = W.generate(W.family("mlc-easy", ppb=32, blocks=40), 2)
    g = W.geometry_for(d, "L0", tell=("cell",))
    r = wa_of(d.measurement, g, d.logical)
    p = {f.quantity: f for f in infer(r, d.measurement, g)}["pages_per_block"]
    assert abs(p.shown / 32 - 1) < 0.15 and p.agrees is None
    # Told 128: the erase state was fitted under the cap 128 implies, which held it: reported,
    # not compared (a limit: the cap hides a block given too large).
    g = dataclasses.replace(g, pages_per_block=128)
    r = wa_of(d.measurement, g, d.logical)
    p = {f.quantity: f for f in infer(r, d.measurement, g)}["pages_per_block"]
    assert p.agrees is None and "no independent reading" in p.evidence

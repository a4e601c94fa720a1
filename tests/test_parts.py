"""The parts catalogue (``rbscope.nand.parts``) and everything derived from it: the timing
presets, the bundled geometries, the emulator's families and the reference SSD's drives."""

import ast
import math

import pytest

from rbscope import refssd
from rbscope.analysis.geometry import (
    BUNDLED,
    GeometryError,
    example_geometries,
    load_geometry,
    parse_geometry,
)
from rbscope.analysis.presets import PRESETS
from rbscope.gateware.nand_emu import families
from rbscope.nand.ops import WINDOW_CLASSES
from rbscope.nand.parts import (
    BUSY_KEYS,
    CELL_BITS,
    GENERIC_BUSY,
    PAGE_LEVELS,
    PARTS,
    Part,
    PartError,
    part,
)

from .conftest import REPO_ROOT

#: The bundled geometry of each RB-Explorer drive and its part.
DRIVE_PARTS = {"ssd-v": "mlc34nm", "ssd-i": "mlc34nm", "ssd-m": "micron25nm",
               "ssd-s": "slc34nm"}

#: SSD-v's bundled geometry as it was written out in full before the catalogue (a user's file
#: of the same form must read the same).
SSD_V_IN_FULL = """
name = "SSD-v"
description = "RB-Explorer validation SSD: 34 nm MLC, 4 channels x 1 chip x 1 die, single-plane"

[geometry]
channels = 4
chips_per_channel = 1
dies_per_chip = 1
planes_per_die = 2
page_size = 4096
spare_size = 128
program_model = "single-plane"
pages_per_block = 128

[capacity]
raw_gb = 16
user_gb = 14.0

[endurance]
pe_cycles = 5000
warranty_years = 3

[timing]
read = [0.02, 50]
program = [200, 2200]
erase = 2000

[classifier]
glitch_us = 0.2

[classifier.windows]
cache = [1.5, 12]
read = [12, 150]
program = [150, 1950]
erase = [1950, 12000]
"""


@pytest.mark.parametrize("name", sorted(PARTS))
def test_every_part_is_complete(name):
    p = PARTS[name]
    assert p.cell in CELL_BITS and p.bits_per_cell == CELL_BITS[p.cell]
    assert set(p.busy) == set(GENERIC_BUSY) | {k for k in p.busy if k in BUSY_KEYS}
    for level in PAGE_LEVELS[p.cell]:
        assert p.busy[f"read_{level}"][0] <= p.busy[f"read_{level}"][1]
    assert set(p.timing) == {"read", "program", "erase"}
    # A part's reads are shorter than its programs, its slowest program no longer than its
    # slowest erase (in its model).
    assert p.timing["read"][1] < p.timing["program"][0]
    assert p.busy_range("program")[1] <= p.busy_range("erase")[1]
    if p.windows:
        lo, hi = dict((k, (a, b)) for k, a, b in p.windows)["program"]
        # Every window set keeps the part's published erase time out of its program window
        # (the overlap `rbscope analyze` warns about), and holds a typical program.
        assert hi <= p.timing["erase"][0]
        assert lo <= p.typical_us("program_lower" if p.cell != "slc" else "program_slc") < hi


def test_ssd_v_program_window_is_150_to_1950_us():
    """The decision (rbscope.nand.parts): SSD-v's dies are mlc34nm, whose program window ends at
    1950 µs, below the ~2 ms erases; the device preset and the bundled geometries agree."""
    assert dict((k, (lo, hi)) for k, lo, hi in PARTS["mlc34nm"].windows)["program"] == \
        (150.0, 1950.0)
    for name in ("ssd-v", "ssd-i"):
        assert load_geometry(name).classifier.window("program") == (150.0, 1950.0)
    assert PRESETS["mlc34nm"].window("program") == (150.0, 1950.0)
    # The paper's programs reach 2200 µs: the slowest upper pages fall in the erase window.
    assert PARTS["mlc34nm"].timing["program"] == (200.0, 2200.0)


def test_presets_are_the_parts_windows():
    assert set(PRESETS) == {n for n, p in PARTS.items() if p.windows}
    for name, preset in PRESETS.items():
        p = PARTS[name]
        assert preset.windows == p.windows and preset.glitch_us == p.glitch_us
        assert preset.description == p.description and p.source in p.description


@pytest.mark.parametrize("name", sorted(DRIVE_PARTS))
def test_bundled_geometries_take_the_part(name):
    g = load_geometry(name)
    p = PARTS[DRIVE_PARTS[name]]
    assert g.part == p.name and g.cell == p.cell
    assert (g.planes_per_die, g.page_size, g.spare_size, g.pages_per_block) == \
        (p.planes_per_die, p.page_size, p.spare_size, p.pages_per_block)
    assert g.timing == p.timing
    assert g.classifier.windows == p.windows and g.classifier.glitch_us == p.glitch_us
    assert g.classifier.name == g.name
    assert example_geometries()[name] == BUNDLED / f"{name}.toml"


def test_a_file_in_full_reads_as_the_part_based_one():
    full = parse_geometry(SSD_V_IN_FULL, "full.toml")
    bundled = load_geometry("ssd-v")
    assert full.part is None and full.cell is None
    for key in ("name", "channels", "chips_per_channel", "dies_per_chip", "planes_per_die",
                "page_size", "spare_size", "pages_per_block", "program_model", "raw_bytes",
                "user_bytes", "pe_cycles", "warranty_years", "timing", "classifier",
                "description"):
        assert getattr(full, key) == getattr(bundled, key), key


def test_a_file_overrides_its_part_key_by_key():
    text = ('name = "mine"\npart = "micron25nm"\n[geometry]\nchannels = 2\n'
            'chips_per_channel = 1\ndies_per_chip = 1\nprogram_model = "multi-plane"\n'
            'pages_per_block = 512\ncell = "tlc"\n[timing]\nerase = [3000, 5000]\n')
    g = parse_geometry(text, "mine.toml")
    p = PARTS["micron25nm"]
    assert (g.pages_per_block, g.cell, g.page_size) == (512, "tlc", p.page_size)
    assert g.timing == {**p.timing, "erase": (3000.0, 5000.0)}
    assert g.classifier.windows == p.windows
    # A [classifier] of the file replaces the part's windows.
    g = parse_geometry(text + '[classifier.windows]\nprogram = [100, 4000]\n', "mine.toml")
    assert g.classifier.windows == (("program", 100.0, 4000.0),)


@pytest.mark.parametrize("text, message", [
    ('part = "nope"\n', r"x.toml: part: no part named 'nope'; parts: mlc34nm, micron25nm"),
    ('part = 3\n', r"x.toml: part: no part named 3"),
    ('[geometry]\ncell = "plc"\n', r"x.toml: geometry.cell must be one of slc, mlc, tlc, qlc"),
])
def test_part_and_cell_errors_name_the_key(text, message):
    base = ('name = "x"\n[geometry]\nchannels = 1\nchips_per_channel = 1\ndies_per_chip = 1\n'
            'planes_per_die = 1\npage_size = 4096\nprogram_model = "single-plane"\n')
    if text.startswith("[geometry]"):
        doc = base + text.split("\n", 1)[1]
    else:
        doc = text + base
    with pytest.raises(GeometryError, match=message):
        parse_geometry(doc, "x.toml")


def test_part_validation_names_the_field():
    kw = dict(name="x", source="s", cell="mlc", page_size=4096, spare_size=0,
              pages_per_block=64, blocks_per_plane=64, planes_per_die=1)
    assert Part(**kw).busy == GENERIC_BUSY
    for change, message in [({"cell": "plc"}, "cell must be one of"),
                            ({"page_size": 0}, "page_size must be an integer >= 1"),
                            ({"busy": {"program_top": 9}}, r"busy.read_top is missing"),
                            ({"busy": {"erase": (5, 1)}}, r"busy.erase must be"),
                            ({"busy": {"tprog": 1}}, r"busy.tprog is not a busy time"),
                            ({"timing": {"write": 1}}, r"timing.write is not an operation"),
                            ({"windows": (("prog", 1, 2),)}, r"a window is \(class, lo, hi\)")]:
        if change.get("busy") == {"program_top": 9}:
            change = {**change, "cell": "qlc"}
        with pytest.raises(PartError, match=message):
            Part(**{**kw, **change})
    with pytest.raises(PartError, match="parts: mlc34nm"):
        part("nope")


@pytest.mark.parametrize("name", sorted(PARTS))
def test_emulator_families_are_the_parts(name):
    family = families.preset(name)
    p = PARTS[name]
    params = family.params()
    assert (params.page_bytes, params.spare_bytes, params.planes, params.bits_per_cell) == \
        (p.page_size, p.spare_size, p.planes_per_die, p.bits_per_cell)
    assert params.pages_per_block >= p.pages_per_block
    assert params.blocks_per_plane >= p.blocks_per_plane
    assert family.t_prog_us == tuple((lo + hi) / 2 for lo, hi in
                                     (p.busy[f"program_{lv}"] for lv in p.levels))
    assert family.t_bers_us == sum(p.busy["erase"]) / 2
    assert params.t_prog_max_us == round(max(family.t_prog_us))


def test_reference_drives_are_made_of_parts():
    used = {"ssd-v": "mlc34nm", "ssd-i": "mlc34nm", "mlc-2plane": "micron25nm",
            "tlc-gc": "tlc16k", "tlc-slc": "tlc16k", "hubi": "hubi_mlc",
            "cache-prog": "mlc8k", "slc": "slc34nm"}
    assert set(used) == set(refssd.PRESETS)
    for name, drive in refssd.PRESETS.items():
        p = PARTS[used[name]]
        assert (drive.planes_per_die, drive.pages_per_block, drive.page_size, drive.cell) == \
            (p.planes_per_die, p.pages_per_block, p.page_size, p.cell), name
        assert drive.blocks_per_plane <= p.blocks_per_plane, name
        # The part's busy times and the controller overhead; the keys the part does not have
        # (the 2026 physics: loads, foggy/fine, suspend) keep the drive defaults, unused unless
        # the drive turns that physics on.
        defaults = refssd.drive.DEFAULT_TIMING
        assert drive.timing == {**{k: v for k, v in defaults.items() if k not in p.busy},
                                **p.busy, "overhead": defaults["overhead"]}, name
        if drive.user_geometry_name:
            # The drive is the one its user geometry describes.
            g = load_geometry(drive.user_geometry_name)
            assert g.part == p.name
            assert (drive.channels, drive.chips_per_channel, drive.dies_per_chip) == \
                (g.channels, g.chips_per_channel, g.dies_per_chip), name
            assert drive.mp == g.pages_per_pulse, name
            assert math.isclose(drive.over_provisioning, g.over_provisioning, rel_tol=1e-12)
    # The classic busy times are the catalogue's generic die; the 2026 keys are the drive's own.
    assert {k: v for k, v in refssd.drive.DEFAULT_TIMING.items() if k in GENERIC_BUSY} == \
        GENERIC_BUSY
    assert refssd.drive.DEFAULT_TIMING["overhead"] == (1.0, 20.0)


def test_sigrok_decoder_copies_agree():
    """The libsigrokdecode decoder cannot import rbscope: its default windows are SSD-v's part's
    and its first classes the window classes, checked here on its source."""
    path = REPO_ROOT / "host" / "recordings" / "sigrok_decoders" / "rbscope_rb" / "pd.py"
    values = {node.targets[0].id: ast.literal_eval(node.value)
              for node in ast.parse(path.read_text(encoding="utf-8")).body
              if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("DEFAULT_WINDOWS", "CLASSES")}
    windows = tuple((name, float(lo), float(hi)) for name, _, span in
                    (w.partition("=") for w in values["DEFAULT_WINDOWS"].split("/"))
                    for lo, hi in [span.split("-")])
    assert windows == PARTS["mlc34nm"].windows
    assert values["CLASSES"][:len(WINDOW_CLASSES)] == WINDOW_CLASSES

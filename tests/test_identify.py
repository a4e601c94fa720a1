"""rbscope identify: the emulator's power-up (Read ID, parameter page) recorded on its bus, as a
VCD and as a sigrok session, decoded into commands and into a geometry file that analyze takes.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rbscope.analysis.geometry import GeometryError, load_geometry, parse_geometry
from rbscope.analysis.identify import IdentifyError, drive_fields, geometry_toml
from rbscope.cli import commands as cli
from rbscope.gateware.nand_emu import EmuParams
from rbscope.gateware.nand_emu.onfi_rom import id_bytes, parameter_page
from rbscope.gateware.onfi_tap.model import BusSignals
from rbscope.nand.ident import parse_parameter_page
from rbscope.nand.onfi import Opcode
from rbscope.recordings.onfi_bus import (
    ADDR,
    CMD,
    DIN,
    DOUT,
    BusCycle,
    decode_cycles,
    group_commands,
    read_bus,
)

from .powerup_harness import (
    CLOCK_NS,
    READ_CYCLES,
    RESET_CYCLES,
    record_powerup,
    write_powerup_vcd,
)

#: Two targets of a 4-plane TLC die with a page, pages per block and times of its own.
PARAMS = EmuParams(dies=2, page_bytes=4096, spare_bytes=224, pages_per_block=256,
                   blocks_per_plane=512, planes=4, bits_per_cell=3, t_prog_max_us=2600,
                   t_bers_max_us=5000, t_r_max_us=60, maker="RBSCOPE", model="EMU-TLC",
                   maker_id=0x2C, device_id=0xA4)
BUS = BusSignals(ce=("CE0", "CE1"), cle="CLE", ale="ALE", we="WE",
                 dq=tuple(f"DQ{i}" for i in range(8)))


@pytest.fixture(scope="module")
def powerup(tmp_path_factory):
    """``{format: path}`` of the power-up recording, and what the testbench read."""
    tmp = tmp_path_factory.mktemp("powerup")
    record, seen = record_powerup(PARAMS)
    vcd = tmp / "powerup.vcd"
    with open(vcd, "w") as f:
        write_powerup_vcd(f, record, PARAMS.dies)
    paths = {"vcd": vcd}
    if shutil.which("sigrok-cli"):
        sr = tmp / "powerup.sr"
        subprocess.run(["sigrok-cli", "-i", str(vcd), "-o", str(sr)], check=True,
                       capture_output=True, timeout=120)
        paths["sr"] = sr
    return paths, seen


def test_testbench_read_what_the_emulator_serves(powerup):
    _paths, seen = powerup
    for die in range(PARAMS.dies):
        at00, at20, page, status = seen[die]
        assert at00 == id_bytes(PARAMS)[:8] and at20 == b"ONFI" and status == 0xE0
        assert page == parameter_page(PARAMS) * 3


@pytest.mark.parametrize("fmt", ["vcd", "sr"])
def test_bus_decode_of_the_recording(powerup, fmt):
    paths, _seen = powerup
    if fmt not in paths:
        pytest.fail("sigrok-cli is missing: make bootstrap installs it")
    decoded = read_bus(paths[fmt], BUS, "RE", rb=("RB0", "RB1"))
    names = [(c.name(), c.targets()) for c in decoded.commands]
    assert names == [(n, [t]) for t in range(2) for n in ("FFh", "70h", "90h-00h", "90h-20h",
                                                          "ECh-00h")]
    for cmd in decoded.commands:
        if cmd.opcodes[0] == 0x90:
            want = id_bytes(PARAMS)[:8] if cmd.address[0] == 0 else b"ONFI"
            assert bytes(cmd.data_out) == want
        if cmd.opcodes[0] == 0xEC:
            assert bytes(cmd.data_out) == parameter_page(PARAMS) * 3
            assert cmd.busy == pytest.approx(READ_CYCLES * CLOCK_NS * 1e-9)
        if cmd.opcodes[0] == 0xFF:
            assert cmd.busy == pytest.approx(RESET_CYCLES * CLOCK_NS * 1e-9)
        if cmd.opcodes[0] == 0x70:
            assert bytes(cmd.data_out) == b"\xe0" and cmd.busy is None
    for ident in decoded.targets:
        assert ident.errors == [] and ident.resets == 1
        rid, page = ident.read_id, ident.page
        assert (rid.manufacturer_id, rid.device_id, rid.manufacturer, rid.onfi) == \
            (0x2C, 0xA4, "Micron", True)
        assert (page.page_bytes, page.spare_bytes, page.pages_per_block, page.planes) == \
            (PARAMS.page_bytes, PARAMS.spare_bytes, PARAMS.pages_per_block, PARAMS.planes)
        assert page.blocks_per_lun == PARAMS.blocks and page.bits_per_cell == 3
        assert (page.t_prog_us, page.t_bers_us, page.t_r_us) == (2600, 5000, 60)
        assert (page.manufacturer, page.model, page.copy) == ("RBSCOPE", "EMU-TLC", 0)


def _identify(path, tmp_path, *extra):
    out = tmp_path / "drive.toml"
    argv = ["identify", str(path), "--bus-ce", "CE0", "--bus-ce", "CE1", "-o", str(out),
            *extra]
    return cli.main(argv), out


def test_identify_writes_a_geometry_analyze_accepts(powerup, tmp_path, capsys):
    paths, _seen = powerup
    for path in paths.values():
        rc, out = _identify(path, tmp_path, "--channels", "1", "--chips-per-channel", "2",
                            "--program-model", "multi-plane")
        assert rc == 0
        text = capsys.readouterr().out
        assert "from the drive:" in text and "you must still give" not in text
        g = load_geometry(out)
        assert (g.channels, g.chips_per_channel, g.dies_per_chip) == (1, 2, 1)
        assert (g.planes_per_die, g.page_size, g.spare_size, g.pages_per_block) == \
            (PARAMS.planes, PARAMS.page_bytes, PARAMS.spare_bytes, PARAMS.pages_per_block)
        assert (g.cell, g.program_model, g.name) == ("tlc", "multi-plane", "RBSCOPE EMU-TLC")
        assert g.timing == {"program": (2600.0, 2600.0), "erase": (5000.0, 5000.0),
                            "read": (60.0, 60.0)}
    # analyze takes it: the same recording's R/B# lines against the identified geometry.
    argv = ["analyze", str(paths["vcd"]), "--signal", "RB0", "--signal", "RB1", "--geometry",
            str(out), "--logical", "1MiB", "--json"]
    assert cli.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["geometry"]["planes_per_die"] == 4 and result["geometry"]["dies"] == 2
    assert result["geometry"]["pages_per_block"] == 256 and result["geometry"]["cell"] == "tlc"


def test_identify_leaves_placeholders_analyze_refuses(powerup, tmp_path, capsys):
    paths, _seen = powerup
    rc, out = _identify(paths["vcd"], tmp_path, "--json")
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["missing"] == ["channels", "chips_per_channel", "program_model"]
    assert "NOT KNOWN" in summary["origin"]["channels"]
    assert "byte 113" in summary["origin"]["planes_per_die"]
    argv = ["analyze", str(paths["vcd"]), "--signal", "RB0", "--signal", "RB1", "--geometry",
            str(out), "--logical", "1MiB"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "geometry.channels is still the placeholder rbscope identify wrote" in err
    # Edited, the file loads.
    text = re.sub(r"^channels = .*$", "channels = 2", out.read_text(), flags=re.M)
    with pytest.raises(GeometryError, match="chips_per_channel is still the placeholder"):
        parse_geometry(text)


def test_identify_without_a_page_fails_naming_what_it_saw(tmp_path, capsys):
    # A recording with the Read ID only (no ECh): exit 1, the ID named.
    cycles = [BusCycle(0.0, CMD, 1, 0x90), BusCycle(1e-7, ADDR, 1, 0x00),
              BusCycle(2e-7, DOUT, 1, 0x98), BusCycle(3e-7, DOUT, 1, 0x3A)]
    commands = group_commands(cycles)
    from rbscope.recordings.onfi_bus import identities
    idents = identities(commands, 1)
    with pytest.raises(IdentifyError, match=r"no target returned a valid parameter page.*"
                                             r"ID 98h 3Ah \(Toshiba/Kioxia\)"):
        drive_fields(idents)
    # And through the command, on a recording with no bus traffic at all.
    vcd = tmp_path / "quiet.vcd"
    names = ["WE", "CLE", "ALE", "RE"] + [f"DQ{i}" for i in range(8)] + ["CE0"]
    vcd.write_text("$timescale 1 ns $end\n$scope module t $end\n"
                   + "".join(f"$var wire 1 {chr(33 + i)} {n} $end\n"
                             for i, n in enumerate(names))
                   + "$upscope $end\n$enddefinitions $end\n#0\n"
                   + "".join(f"1{chr(33 + i)}\n" for i in range(len(names))) + "#1000\n")
    assert cli.main(["identify", str(vcd)]) == 1
    assert "no target returned a valid parameter page" in capsys.readouterr().err
    assert cli.main(["identify", str(vcd), "--bus-rb", "RB0", "--bus-rb", "RB1"]) == 2
    assert "one R/B# line per target" in capsys.readouterr().err


def test_decode_cycles_latches_on_the_rising_edges():
    # Channels: WE, CLE, ALE, RE, DQ0-7, CE0. A command 90h, an address 20h, data out 4Fh.
    idle = [1, 0, 0, 1] + [0] * 8 + [1]
    edges = []

    def put(cycle, ch, v):
        edges.append((cycle, ch, v))

    put(1, 12, 0)  # CE0 low
    put(2, 1, 1)  # CLE
    for i in range(8):
        put(2, 4 + i, 0x90 >> i & 1)
    put(3, 0, 0)
    put(5, 0, 1)  # WE# rises: command 90h
    put(6, 1, 0)
    put(6, 2, 1)  # ALE
    for i in range(8):
        put(6, 4 + i, 0x20 >> i & 1)
    put(7, 0, 0)
    put(8, 0, 1)  # WE# rises: address 20h
    put(9, 2, 0)
    put(10, 3, 0)  # RE# low, the die drives 4Fh
    for i in range(8):
        put(11, 4 + i, 0x4F >> i & 1)
    put(12, 3, 1)  # RE# rises: data out 4Fh
    put(12, 4, 1)  # the bus changes on the edge itself: the level before it counts
    put(13, 0, 0)
    put(14, 0, 1)  # WE# rises with CLE and ALE low: data in
    put(15, 12, 1)
    put(16, 0, 0)
    put(17, 0, 1)  # CE# high: no bus cycle
    cycles = decode_cycles(idle, edges, 1e-8, 1)
    assert [(c.kind, c.byte) for c in cycles] == [(CMD, 0x90), (ADDR, 0x20), (DOUT, 0x4F),
                                                 (DIN, 0x4F | 1)]
    assert cycles[0].time == pytest.approx(5e-8)


def test_group_commands_joins_confirms():
    c = [BusCycle(0, CMD, 1, 0x00), *[BusCycle(0, ADDR, 1, b) for b in (0, 0, 5, 0, 0)],
         BusCycle(0, CMD, 1, 0x30), BusCycle(0, DOUT, 1, 0xAA), BusCycle(0, CMD, 1, 0x70),
         BusCycle(0, DOUT, 1, 0xE0), BusCycle(0, CMD, 1, 0x30)]
    cmds = group_commands(c)
    assert [(m.opcodes, len(m.address), bytes(m.data_out)) for m in cmds] == \
        [([0x00, 0x30], 5, b"\xaa"), ([0x70], 0, b"\xe0"), ([0x30], 0, b"")]


def test_geometry_toml_checks_the_drive_values():
    class Ident:
        target, read_id, errors = 0, None, []

    ident = Ident()
    ident.page = parse_parameter_page(parameter_page(PARAMS))
    fields = drive_fields([ident], channels=2, chips_per_channel=1, program_model="single-plane")
    g = parse_geometry(geometry_toml(fields))
    assert g.dies == 2 and g.pages_per_block == 256
    with pytest.raises(IdentifyError, match="channels must be a positive integer"):
        drive_fields([ident], channels=0)
    with pytest.raises(IdentifyError, match="program_model must be one of"):
        drive_fields([ident], program_model="both")


def _decoder_dir():
    return subprocess.run([sys.executable, "-m", "rbscope.cli", "sigrok-decoder"], check=True,
                          text=True, capture_output=True).stdout.strip()


@pytest.mark.parametrize("target", [0, 1])
def test_sigrok_onfi_decoder_on_the_powerup(powerup, target):
    # The decoder runs inside the real sigrok-cli (libsigrokdecode) on the session sigrok made
    # of the recording; its commands, status and page fields are the emulator's.
    paths, _seen = powerup
    assert "sr" in paths, "sigrok-cli is not installed (make bootstrap installs it)"
    pins = ":".join([f"ce=CE{target}", "cle=CLE", "ale=ALE", "we=WE", "re=RE"]
                    + [f"dq{i}=DQ{i}" for i in range(8)])
    proc = subprocess.run(
        ["sigrok-cli", "-i", str(paths["sr"]), "-P", f"rbscope_onfi:{pins}", "-A",
         "rbscope_onfi=commands:fields:warnings"], check=True, text=True, capture_output=True,
        timeout=300, env={**os.environ, "SIGROKDECODE_DIR": _decoder_dir()})
    lines = [line.split(": ", 1)[1] for line in proc.stdout.splitlines() if ": " in line]
    page = parse_parameter_page(parameter_page(PARAMS))
    ident = id_bytes(PARAMS)[:8]
    assert lines == [
        "Reset", "Read status", "status E0h: WP# RDY ARDY",
        "Read ID 00h: " + " ".join(f"{b:02X}" for b in ident), "Read ID 20h: 4F 4E 46 49",
        "Read parameter page 00h", "signature: ONFI", f"revision: {page.revision:04X}h",
        f"features: {page.features:04X}h", "manufacturer: RBSCOPE", "model: EMU-TLC",
        "JEDEC id: 2Ch", "bytes per page: 4096", "spare bytes per page: 224",
        "pages per block: 256", f"blocks per LUN: {PARAMS.blocks}", "LUNs per target: 1",
        "address cycles: 23h", "bits per cell: 3", "plane address bits: 2 (4 planes)",
        "tPROG max us: 2600", "tBERS max us: 5000", "tR max us: 60", "tCCS min ns: 500",
        f"CRC: {parameter_page(PARAMS)[254] | parameter_page(PARAMS)[255] << 8:04X}h (ok)"]


def test_sigrok_onfi_decoder_tables_agree_with_rbscope():
    """The decoder cannot import rbscope: its command table is the Opcode table, and its field
    offsets read what rbscope's decoder reads, on hand-built ONFI and JEDEC pages."""
    path = Path(_decoder_dir()) / "rbscope_onfi" / "pd.py"
    values = {node.targets[0].id: ast.literal_eval(node.value)
              for node in ast.parse(path.read_text(encoding="utf-8")).body
              if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("COMMANDS", "ONFI_FIELDS", "JEDEC_FIELDS")}
    assert set(values["COMMANDS"]) == {int(op) for op in Opcode}
    from .test_nand_ident import jedec_page, onfi_page

    for raw, table in ((onfi_page("4.0"), "ONFI_FIELDS"), (jedec_page(), "JEDEC_FIELDS")):
        page = parse_parameter_page(raw)
        want = {"bytes per page": page.page_bytes, "spare bytes per page": page.spare_bytes,
                "pages per block": page.pages_per_block, "blocks per LUN": page.blocks_per_lun,
                "LUNs per target": page.luns, "bits per cell": page.bits_per_cell,
                "plane address bits": page.plane_address_bits, "tPROG max us": page.t_prog_us,
                "tBERS max us": page.t_bers_us, "tR max us": page.t_r_us,
                "tCCS min ns": page.t_ccs_ns, "revision": page.revision,
                "JEDEC id": page.jedec_id}
        got = {name: int.from_bytes(raw[off:off + size], "little")
               for name, off, size, _kind in values[table] if name in want}
        assert got == want, table
        crc = [f for f in values[table] if f[0] == "CRC"][0]
        assert crc[1] + crc[2] == len(raw)

"""benchmarks/third_party_onfi.py: an independent ONFI controller identifies the emulator while
the tap's power-up recorder listens (issue 23).

The controller (Alexey Lyashko's ``nand_master``, VHDL) is never in this repository: the run
with it needs a local checkout named by ``RBSCOPE_ONFI_MASTER`` and GHDL, and its figures are in
``docs/benchmarks.md`` ("Opcode tap"). Without them, the checker itself is still tested here on
this project's own power-up bench standing in for the controller: it must pass on a faithful
view and fail on each kind of disagreement.
"""

import copy
import importlib.util
import os
import shutil
import sys

import pytest

from rbscope.gateware.nand_emu import EmuParams
from rbscope.nand.onfi import Opcode

from .conftest import REPO_ROOT
from .powerup_harness import record_powerup


def _load():
    name = "third_party_onfi"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def faithful():
    """A controller's view as the third-party bench writes it, made by this project's bench:
    the page, ID and parse a controller that read the bus right would hold."""
    bench = _load()
    emu = EmuParams(**bench.EMU)
    record, seen = record_powerup(emu)
    ident, _id20, page, _status = seen[0]
    view = {"record": [list(r) for r in record], "page": list(page[:256]),
            "id": list(ident[:5]), "status": 0b1101,
            "parsed": {"data_bytes_per_page": emu.page_bytes,
                       "oob_bytes_per_page": emu.spare_bytes, "addr_cycles": 5}}
    return bench, view


def _failed(bench, view):
    checks, _ = bench.check(view)
    return {name for name, ok, _ in checks if not ok}


def test_the_checker_passes_a_faithful_view(faithful):
    bench, view = faithful
    assert _failed(bench, view) == set()


def _page_data_cycle(record):
    """Index of the record cycle in which the die drives the parameter page's byte 80 (the
    low byte of bytes per page): the 81st RE# rising edge after the ECh command."""
    ech = next(i for i, r in enumerate(record) if r[1] and r[4] == Opcode.READ_PARAM)
    rises = [i for i in range(ech + 1, len(record))
             if record[i][3] == 1 and record[i - 1][3] == 0]
    return rises[80] - 1


def test_the_checker_fails_when_the_bus_and_the_controller_disagree(faithful):
    bench, view = faithful
    # One DQ bit flipped on the bus while the die drives byte 80: the recorder's page differs
    # from what the controller stored, and its CRC fails.
    flipped = copy.deepcopy(view)
    i = _page_data_cycle(flipped["record"])
    for j in range(i - 3, i + 1):
        flipped["record"][j][4] ^= 0x01
    failed = _failed(bench, flipped)
    assert "the recorder's page bytes = the 256 bytes the controller stored" in failed
    # A controller that parsed another page size.
    wrong = copy.deepcopy(view)
    wrong["parsed"]["data_bytes_per_page"] = 4096
    assert _failed(bench, wrong) == {
        "the controller's parse (page, spare bytes, address cycles) = the recorder's"}
    # A controller that did not find "ONFI", or kept other ID bytes.
    wrong = copy.deepcopy(view)
    wrong["status"] = 0b1100
    wrong["id"][1] ^= 0xFF
    assert _failed(bench, wrong) == {
        "the controller's status: ONFI compliant, x8 bus",
        "the controller's ID bytes = the recorder's Read ID = the emulator's"}


def test_a_missing_checkout_is_refused_by_name(tmp_path):
    bench = _load()
    with pytest.raises(SystemExit, match="no onfi_package.vhd under"):
        bench.find_sources(tmp_path)


CHECKOUT = os.environ.get("RBSCOPE_ONFI_MASTER")


@pytest.mark.skipif(not CHECKOUT or not shutil.which("ghdl"),
                    reason="the third-party controller is not part of this repository: set "
                           "RBSCOPE_ONFI_MASTER to a local nand_master checkout (and install "
                           "GHDL) to run it")
def test_the_third_party_controller_identifies_the_emulator_with_the_recorder_listening(
        tmp_path, capsys):
    bench = _load()
    assert bench.main(["--checkout", CHECKOUT, "--build-dir", str(tmp_path)]) == 0
    assert "PASS" in capsys.readouterr().out

"""An independent ONFI controller identifies the emulator; the tap's power-up recorder listens.

Issue 23's cross-check: a controller written outside this project (Alexey Lyashko's
``nand_master``, VHDL, LGPL, published on OpenCores as "nand_controller") drives rbscope's NAND
emulator through the power-up a drive's controller performs: Reset (FFh), Read ID (90h-00h),
Read Parameter Page (ECh-00h). The controller is simulated by GHDL (cocotb), the emulator by the
Amaranth simulator in lock step (``third_party/onfi_master_bench.py``). Every bus cycle is then
driven into the bus tap, whose power-up recorder keeps it, and the recorder's cells are decoded
by rbscope's host decoders (the ones ``rbscope identify`` uses). Checked:

* the recorder's cycles are exactly the cycles the software decoder reads from the same pins
  (the path of a VCD or ``.sr`` recording);
* the parameter page decoded from the recorder is byte for byte the 256 bytes the controller
  stored, its CRC holds, and its fields are the emulator's configuration;
* the controller's own parse agrees: its page size, spare size and address cycles registers
  hold what the recorder's page says, and its status register says "ONFI compliant" and x8;
* the ID bytes the controller stored are the recorder's Read ID.

The controller's sources are never copied into this repository: give the directory of a local
checkout (it must hold ``nand_master.vhd``, ``latch_unit.vhd``, ``io_unit.vhd`` and
``onfi_package.vhd``; the OpenCores tarball's ``trunk/VHDL``, or a mirror such as
github.com/nbstrong/nand_avalon's ``orig/nand_controller/trunk/VHDL``). Needs GHDL (Debian
``ghdl``).

Usage: ``python benchmarks/third_party_onfi.py --checkout DIR [--build-dir DIR] [--json]``;
exit status 0 when every check holds, 1 otherwise.
"""

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HERE = Path(__file__).resolve().parent / "third_party"
SOURCES = ("onfi_package.vhd", "latch_unit.vhd", "io_unit.vhd", "nand_master.vhd")

#: The emulated die: one target (the controller drives one CE#), fields that differ from every
#: default, a page size the controller's own parse reads back.
EMU = {"dies": 1, "page_bytes": 8192, "spare_bytes": 744, "pages_per_block": 512,
       "blocks_per_plane": 512, "planes": 2, "bits_per_cell": 3, "t_prog_max_us": 2400,
       "t_bers_max_us": 7000, "t_r_max_us": 70, "maker": "RBSCOPE", "model": "EMU-TLC",
       "maker_id": 0x98, "device_id": 0xD7}
RESET_CYCLES, READ_CYCLES = 30, 50
#: Emulator clocks (10 ns) per controller clock. The controller's delays are clock counts
#: written for 400 MHz; at 50 MHz they are 8 times longer in nanoseconds, so every bus cycle
#: lasts at least the asynchronous interface's timing mode 0 minimum (tWP, tRP >= 50 ns), and
#: it samples data out 100 ns after RE# falls (tREA <= 40 ns on a mode-0 die; the emulator at
#: 100 MHz answers within 40-50 ns, behind its input synchronisers).
RATIO = 2


def find_sources(checkout):
    """The controller's four files under ``checkout`` (the first match of each name)."""
    found = {}
    for name in SOURCES:
        hits = sorted(Path(checkout).rglob(name))
        if not hits:
            raise SystemExit(f"third_party_onfi: no {name} under {checkout}: give the directory "
                             "of a nand_master checkout (OpenCores nand_controller, trunk/VHDL)")
        found[name] = hits[0]
    return [found[n] for n in SOURCES]


def simulate(checkout, build_dir):
    """Run the bench; return what it wrote (the controller's view and the bus record)."""
    from cocotb_tools.runner import get_runner

    from cocotb_tests.runner import PARAMS_ENV

    if not shutil.which("ghdl"):
        raise SystemExit("third_party_onfi: GHDL not found (Debian package ghdl)")
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    out = build_dir / "controller.json"
    out.unlink(missing_ok=True)
    runner = get_runner("ghdl")
    runner.build(sources=[*find_sources(checkout), HERE / "onfi_master_wrap.vhd"],
                 hdl_toplevel="onfi_master_wrap", build_dir=build_dir, build_args=["--std=08"],
                 always=True)
    params = {"emu": EMU, "reset_cycles": RESET_CYCLES, "read_cycles": READ_CYCLES,
              "ratio": RATIO, "out": str(out)}
    # The cocotb runner hands the simulator PYTHONPATH = sys.path: the bench's directory there.
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    results = runner.test(test_module="onfi_master_bench", hdl_toplevel="onfi_master_wrap",
                          build_dir=build_dir, test_dir=build_dir, test_args=["--std=08"],
                          extra_env={PARAMS_ENV: json.dumps(params)})
    from cocotb_tools.check_results import get_results
    _, failed = get_results(results)
    if failed or not out.exists():
        raise SystemExit(f"third_party_onfi: the cocotb bench failed (log under {build_dir})")
    return json.loads(out.read_text())


def check(view):
    """Replay the bus into the tap, decode its recorder and compare; a list of
    ``(check, ok, detail)``."""
    from rbscope.device.tap import record_cycles
    from rbscope.gateware.nand_emu import EmuParams
    from rbscope.gateware.nand_emu.onfi_rom import id_bytes, parameter_page
    from rbscope.gateware.onfi_tap import RecordKind, TapParams
    from rbscope.gateware.rb_sniffer.params import SnifferParams
    from rbscope.nand.onfi import Opcode, onfi_crc16
    from rbscope.recordings.onfi_bus import group_commands, identities
    from tests.powerup_harness import replay, software_cycles

    emu = EmuParams(**EMU)
    record = [tuple(r) for r in view["record"]]
    tap = TapParams(targets=1, sniffer=SnifferParams(channels=1), record_cells=1024)
    words = replay(tap, record)[0]
    head, kept = words[0], [w for w in words if w.valid]
    out = []

    def claim(name, ok, detail=""):
        out.append((name, bool(ok), detail))

    claim("the recorder started at the Reset and did not fill",
          not head.armed and head.recording and len(kept) == head.fill,
          f"{head.fill} cells of {tap.record_cells}")
    soft = [(c.kind, c.byte) for c in software_cycles(record, 1)]
    claim("recorder cycles = the software decoder's cycles of the same pins",
          [(RecordKind[k.upper()], b) for k, b in soft] == [(c.kind, c.byte) for c in kept],
          f"{len(kept)} cycles")
    commands = group_commands(record_cycles({0: words}))
    ident = identities(commands, 1)[0]
    claim("the recorder's commands decode without error", not ident.errors and ident.resets == 1,
          "; ".join(ident.errors) or f"{ident.resets} reset")
    controller_page = bytes(view["page"])
    reads = [bytes(c.data_out) for c in commands if c.opcodes[0] == Opcode.READ_PARAM]
    claim("the recorder's page bytes = the 256 bytes the controller stored",
          len(reads) == 1 and reads[0][:256] == controller_page,
          f"{len(reads)} parameter page read(s), {len(reads[0]) if reads else 0} bytes out")
    claim("the controller's stored page = the emulator's page",
          controller_page == parameter_page(emu)[:256])
    claim("the controller's stored page has a valid CRC",
          onfi_crc16(controller_page[:254]) == int.from_bytes(controller_page[254:256], "little"))
    page = ident.page
    claim("the recorder's decoded page exists", page is not None)
    if page is not None:
        fields = (page.page_bytes, page.spare_bytes, page.pages_per_block, page.planes,
                  page.blocks_per_lun, page.bits_per_cell, page.t_prog_us, page.t_bers_us,
                  page.t_r_us)
        want = (emu.page_bytes, emu.spare_bytes, emu.pages_per_block, emu.planes, emu.blocks,
                emu.bits_per_cell, emu.t_prog_max_us, emu.t_bers_max_us, emu.t_r_max_us)
        claim("the recorder's decoded fields = the emulator's configuration", fields == want,
              f"{fields}")
        # The controller's own parse: its registers after the page read.
        parsed = view["parsed"]
        theirs = (parsed["data_bytes_per_page"], parsed["oob_bytes_per_page"],
                  parsed["addr_cycles"])
        ours = (page.page_bytes, page.spare_bytes,
                page.row_address_cycles + page.column_address_cycles)
        claim("the controller's parse (page, spare bytes, address cycles) = the recorder's",
              theirs == ours, f"controller {theirs}, recorder {ours}")
    status = view["status"]
    claim("the controller's status: ONFI compliant, x8 bus", status & 0b11 == 0b01,
          f"status {status:08b}")
    rid = ident.read_id
    claim("the controller's ID bytes = the recorder's Read ID = the emulator's",
          rid is not None and bytes(view["id"]) == rid.id_bytes[:5] == id_bytes(emu)[:5],
          f"controller {bytes(view['id']).hex()}, recorder "
          f"{rid.id_bytes[:5].hex() if rid else None}")
    claim(*_identify_vcd(record, emu))
    return out, {"cycles": len(record), "recorder_cells": head.fill}


def _rbscope(*args):
    """Run the installed ``rbscope`` command (its console-script entry point, as a user does);
    its exit status and output."""
    import subprocess

    child = ("import sys\nfrom importlib.metadata import entry_points\n"
             "(ep,) = entry_points(group='console_scripts', name='rbscope')\n"
             "sys.exit(ep.load()(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", child, *args], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def _identify_vcd(record, emu):
    """The same bus as a logic analyser's VCD, through ``rbscope identify`` and ``analyze``."""
    from rbscope.analysis.geometry import load_geometry
    from tests.powerup_harness import write_powerup_vcd

    name = "rbscope identify on a VCD of the bus: the emulator's geometry, analyze accepts it"
    with tempfile.TemporaryDirectory() as tmp:
        vcd, toml = Path(tmp) / "powerup.vcd", Path(tmp) / "drive.toml"
        with open(vcd, "w") as f:
            write_powerup_vcd(f, record, 1)
        rc, text = _rbscope("identify", str(vcd), "--bus-ce", "CE0", "-o", str(toml),
                            "--channels", "1", "--chips-per-channel", "1",
                            "--program-model", "multi-plane")
        if rc:
            return name, False, f"identify exit {rc}: {text[-300:]}"
        g = load_geometry(toml)
        got = (g.page_size, g.spare_size, g.pages_per_block, g.planes_per_die, g.cell)
        want = (emu.page_bytes, emu.spare_bytes, emu.pages_per_block, emu.planes, "tlc")
        rc, text = _rbscope("analyze", str(vcd), "--signal", "RB0", "--geometry", str(toml),
                            "--logical", "1MiB", "--json")
    return name, got == want and rc == 0, f"{got}, analyze exit {rc}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", required=True,
                    help="directory of a local nand_master checkout (never copied here)")
    ap.add_argument("--build-dir", help="GHDL build directory (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        view = simulate(args.checkout, args.build_dir or tmp)
    checks, sizes = check(view)
    ok = all(c[1] for c in checks)
    result = {"date": date.today().isoformat(), "controller": "nand_master (A. Lyashko)",
              "simulators": "GHDL (controller) + Amaranth (emulator, tap)",
              "seconds": round(time.monotonic() - t0, 1), **sizes, "passed": ok,
              "checks": [{"check": n, "ok": o, "detail": d} for n, o, d in checks]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for name, good, detail in checks:
            print(f"{'ok  ' if good else 'FAIL'} {name}{': ' + detail if detail else ''}")
        print(f"{sizes['cycles']} bus cycles, {sizes['recorder_cells']} recorder cells, "
              f"{result['seconds']} s: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

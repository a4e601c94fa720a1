"""Write the sample inputs of the README's offline commands (``tests/test_readme.py`` runs them).

Everything comes from the project's own reference SSD (:mod:`rbscope.refssd`): SSD-v (four
dies, one per channel) with 32 blocks of 64 pages per plane, in steady state, running the
RB-Explorer micro-benchmark ``4K-RD-100%-W-4KiB-align``; and from ``sigrok-cli``, which turns
its VCDs into sigrok sessions.

* ``tapped.vcd``: channel 0 as a bus tap records it: the die's R/B# (``RB0``) and the channel's
  bus (``CE0``, ``CLE``, ``ALE``, ``WE``, ``DQ[7:0]``) carrying the reference SSD's commands
  (00h-30h reads, 80h-10h programs with one data byte standing for the page, 60h-D0h erases,
  FFh, EFh), each confirm's WE# rising edge at the model's confirm time; 10 ns resolution.
* ``all-dies.sr``: another run's four R/B# lines (``rb0`` ... ``rb3``), 1 µs samples: what
  ``analyze --trained`` measures and what ``calibrate`` / ``export-vcd`` take as
  ``recording.sr``.
* ``my.toml``: the drive's geometry file.
* ``drive-b.sr``: the tapped run's four R/B# lines, and ``drives.toml``, a study comparing the
  two runs.
* ``before.json`` and ``after.json``: ``smartctl -j`` of the drive (Micron-style attributes 241,
  247 and 248) before and after the measured run, its counts being the reference SSD's truth.
* ``powerup.sr``: the power-up identification (FFh, 70h, 90h-00h, 90h-20h, ECh-00h) of one
  emulated die (:mod:`rbscope.gateware.nand_emu` in the Amaranth simulator, through the test
  suite's ``tests.powerup_harness``), a 4-plane TLC part, as a logic analyser records it.

Run ``python examples/readme/make_samples.py`` (needs ``sigrok-cli``) to write them again.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rbscope import refssd
from rbscope.nand.onfi import Opcode, address_bytes
from rbscope.refssd.measure import write_vcd
from rbscope.refssd.timing import NandOp

HERE = Path(__file__).resolve().parent
#: Host bytes the workload writes (the same for both runs).
VOLUME = 1 << 20
#: Busy pulses of the tapped die the bus recording keeps (it stops after them: "for a while";
#: about 0.3 kB per command).
TAPPED_PULSES = 200
#: Bus timing in VCD units of 10 ns: WE# low, then high, per cycle.
WE_LOW, WE_HIGH = 3, 3
UNIT_NS = 10


def reference_run(seed):
    drive = refssd.preset("ssd-v", blocks_per_plane=32, pages_per_block=64)
    workload = refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, VOLUME, seed=seed)
    return refssd.simulate(drive, workload, seed=seed, precondition="steady")


def bus_sequence(row, ppb, planes):
    """``[(cle, ale, byte), ...]`` of one command row (as the tap sees it; data: one byte)."""
    first, confirm, op = int(row["first"]), int(row["confirm"]), int(row["op"])
    r = (max(int(row["block"]), 0) * planes + max(int(row["plane"]), 0)) * ppb
    r += max(int(row["page"]), 0)
    if op in (NandOp.CACHE_READ, NandOp.RESET):
        return [(1, 0, confirm)]
    if op == NandOp.SET_FEATURES:
        return [(1, 0, Opcode.SET_FEATURES), (0, 1, 0x01)] + [(0, 0, 0)] * 4
    seq = [(1, 0, first)] + [(0, 1, b) for b in address_bytes(first, r)]
    if first == Opcode.PROGRAM:
        seq.append((0, 0, 0x5A))
    return seq + [(1, 0, confirm)]


def write_tapped_vcd(run, path, die=0, pulses=TAPPED_PULSES):
    """The die's R/B# and its channel's bus, as described in the module docstring, up to the
    end of the die's first ``pulses`` busy pulses."""
    d = run.drive
    events = {}  # time (10 ns units) -> [(var, value)]
    kept = run.pulses[die][:pulses]
    stop_ns = int(kept["start_ns"][-1])

    def at(t, var, value):
        events.setdefault(t, []).append((var, value))

    for p in kept:
        start = int(p["start_ns"]) // UNIT_NS
        at(start, "r", "0")
        at(start + max(1, int(p["width_ns"]) // UNIT_NS), "r", "1")
    cycle = WE_LOW + WE_HIGH
    free = 0  # the first unit the bus is free again
    rows = run.commands[(run.commands["die"] == die) & (run.commands["confirm_ns"] <= stop_ns)]
    for row in rows:
        seq = bus_sequence(row, d.pages_per_block, d.planes_per_die)
        # The confirm's WE# rises at the model's confirm time; the cycles before it run back to
        # back from the model's first-cycle time (or from the confirm's, when they do not fit).
        rise = int(row["confirm_ns"]) // UNIT_NS
        start = max(free, min(int(row["time_ns"]) // UNIT_NS, rise - len(seq) * cycle + WE_HIGH))
        times = [start + k * cycle for k in range(len(seq))]
        times[-1] = max(times[-1], rise - WE_LOW)
        at(times[0] - 1, "c", "0")
        for t, (cle, ale, byte) in zip(times, seq, strict=True):
            at(t, "l", str(cle))
            at(t, "a", str(ale))
            at(t, "q", f"b{byte:b}")
            at(t, "w", "0")
            at(t + WE_LOW, "w", "1")
        end = times[-1] + cycle
        at(end - WE_HIGH + 1, "l", "0")
        at(end - WE_HIGH + 1, "a", "0")
        at(end, "c", "1")
        free = end + 1
    last = max(events) + 100_000  # a millisecond of quiet bus and ready die
    lines = [f"$timescale {UNIT_NS} ns $end", "$scope module tapped $end",
             "$var wire 1 r RB0 $end", "$var wire 1 c CE0 $end", "$var wire 1 l CLE $end",
             "$var wire 1 a ALE $end", "$var wire 1 w WE $end", "$var wire 8 q DQ [7:0] $end",
             "$upscope $end", "$enddefinitions $end", "#0", "$dumpvars", "1r", "1c", "0l", "0a",
             "1w", "b0 q", "$end"]
    level = {"r": "1", "c": "1", "l": "0", "a": "0", "w": "1", "q": "b0"}
    for t in sorted(events):
        if t <= 0:
            raise ValueError("a bus cycle before the recording's start")
        state = {}
        for var, value in events[t]:
            state[var] = value  # the last change of a variable at one time wins
        changes = {var: v for var, v in state.items() if level[var] != v}
        if not changes:
            continue
        level.update(changes)
        lines.append(f"#{t}")
        lines += [f"{v} {var}" if v.startswith("b") else f"{v}{var}" for var, v in changes.items()]
    lines.append(f"#{last}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="ascii")


MY_TOML = """\
# The README's sample drive (examples/readme/make_samples.py): the reference SSD's SSD-v, four
# 34 nm MLC dies (one per channel), here with 64-page blocks, single-plane programs.
name = "my drive"
description = "README sample: SSD-v's dies with 64-page blocks, 4 channels x 1 chip x 1 die"
part = "mlc34nm"

[geometry]
channels = 4
chips_per_channel = 1
dies_per_chip = 1
pages_per_block = 64
program_model = "single-plane"
"""

STUDY = """\
# The README's sample study (examples/readme/make_samples.py): two runs of the reference SSD.
title = "README sample: SSD-v with 64-page blocks, two seeds of 4K random writes"

[defaults]
workload = "4K-RD-100%-W-4KiB-align"
geometry = "my.toml"
logical = "1MiB"

[[run]]
drive = "reference SSD, seed 2"
source = "all-dies.sr"

[[run]]
drive = "reference SSD, seed 1"
source = "drive-b.sr"
"""


def smartctl(host_sectors, host_pages, background_pages):
    """``smartctl -j -x`` of a SATA drive with Micron's write counters."""
    attrs = [(241, "Total_LBAs_Written", host_sectors), (247, "Host_Program_Page_Count",
                                                          host_pages),
             (248, "Bckgnd_Program_Page_Cnt", background_pages)]
    return {"device": {"protocol": "ATA"}, "logical_block_size": 512,
            "ata_smart_attributes": {"revision": 1, "table": [
                {"id": i, "name": n, "value": 100, "raw": {"value": v, "string": str(v)}}
                for i, n, v in attrs]}}


def write_sr(run, path, tmp):
    vcd = Path(tmp) / "rb.vcd"
    write_vcd(run, vcd, timescale_ns=1000)
    subprocess.run(["sigrok-cli", "-i", str(vcd), "-o", str(path)], check=True,
                   capture_output=True, timeout=300)


def write_powerup(path, tmp):
    sys.path.insert(0, str(HERE.parent.parent))  # the checkout: tests.powerup_harness
    from rbscope.gateware.nand_emu import EmuParams
    from tests.powerup_harness import record_powerup, write_powerup_vcd

    # The recorded drive's own parts (the reference SSD's SSD-v with 64-page blocks, 32 blocks
    # per plane): 34 nm MLC, 4 KiB pages, 2 planes; datasheet maxima above its busy times
    # (programs to 2.2 ms, erases to 2.3 ms, reads to 60 µs), so that `identify` of this
    # power-up gives the geometry that `analyze` of all-dies.sr needs.
    params = EmuParams(dies=1, page_bytes=4096, spare_bytes=128, pages_per_block=64,
                       blocks_per_plane=32, planes=2, bits_per_cell=2, t_prog_max_us=2500,
                       t_bers_max_us=3000, t_r_max_us=75, maker="RBSCOPE", model="EMU-MLC",
                       maker_id=0x2C, device_id=0x68)
    record, _seen = record_powerup(params)
    vcd = Path(tmp) / "powerup.vcd"
    with open(vcd, "w") as f:
        write_powerup_vcd(f, record, params.dies)
    subprocess.run(["sigrok-cli", "-i", str(vcd), "-o", str(path)], check=True,
                   capture_output=True, timeout=300)


def main():
    if not shutil.which("sigrok-cli"):
        print("make_samples: sigrok-cli is needed (apt-get install sigrok-cli)", file=sys.stderr)
        return 1
    tapped, measured = reference_run(seed=1), reference_run(seed=2)
    write_tapped_vcd(tapped, HERE / "tapped.vcd")
    with tempfile.TemporaryDirectory() as tmp:
        write_sr(measured, HERE / "all-dies.sr", tmp)
        write_sr(tapped, HERE / "drive-b.sr", tmp)
        write_powerup(HERE / "powerup.sr", tmp)
    (HERE / "my.toml").write_text(MY_TOML, encoding="utf-8")
    (HERE / "drives.toml").write_text(STUDY, encoding="utf-8")
    t = measured.truth
    pages = t.pages_programmed
    start = (10_000_000, 400_000, 900_000)  # the drive's counts before the run: any
    (HERE / "before.json").write_text(json.dumps(smartctl(*start), indent=1) + "\n")
    (HERE / "after.json").write_text(json.dumps(smartctl(
        start[0] + measured.logical_bytes // 512, start[1] + pages["host"],
        start[2] + pages["total"] - pages["host"]), indent=1) + "\n")
    for name in sorted(p.name for p in HERE.iterdir() if p.name != Path(__file__).name):
        print(f"{name}: {(HERE / name).stat().st_size} bytes")
    print(f"tapped: {TAPPED_PULSES} pulses of die 0; measured: {measured.logical_bytes} "
          f"bytes written, true WA {t.wa_true:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The reference SSD's RTL back end: its NAND command stream replayed into emulated dies.

The model back end (:mod:`.timing`, :mod:`.measure`) turns the FTL's operations into R/B# pulse
trains. This one replays the FTL's *commands* (:attr:`Run.commands`: 00h-30h reads, 31h/3Fh
cache reads, 80h-10h programs, 80h-11h multi-plane queueing, 80h-15h cache-program chains,
60h-D1h/D0h erases, FFh, EFh) as ONFI bus cycles into ``nand_emu`` dies inside the simulated
device (:class:`rbscope.device.simdevice.SimDevice` built with the emulator in loopback): the dies
pull their own R/B# low, the sniffer gateware counts those pulses, and the host reads the counters
over the simulated UART into a capture, exactly as from a board. The replay runs in the C++
harness (``sim_harness.cpp``, ``--commands``), one WE# level per clock cycle, with no Python per
cycle.

Time
----
The simulated device declares ``cycles_per_us`` MHz and both the emulator and the sniffer use a
prescaler of ``cycles_per_us``, so a tick is 1 µs of NAND time, the widths the sniffer measures
are in µs, and the host converts them with the clock the device reports. Nothing is compressed:
a program of 1750 µs holds R/B# low for 1750 ticks. A command sequence takes two clock cycles
per bus cycle (16 cycles for a program: 80h, five address cycles, one data byte, the confirm),
and its confirm is placed at the model's confirm time (``Run.commands['confirm_ns']``) when the
bus and the die allow; the emulator has **one bus** for all its dies where the drive has one
per channel, so a command that collides with another die's is issued a few cycles late
(:func:`run_rtl` reports how many). The data of a program is not transferred (timing-only dies
take one byte): the bus is free for the time the model spends on data in and out.

Busy times
----------
The emulator has one busy time per operation kind and page type (and one tR for all page
types), with no per-pulse draw. :func:`rtl_drive` therefore fixes each of the drive's timing
ranges at its middle, rounded to whole µs (the read times at the middle of the drive's whole
read range); the controller overhead between commands keeps its range. The model back end
runs the same fixed drive (:func:`simulate` of ``rtl_drive(drive)``: the FTL, its commands and
its truth do not depend on timing), so the two back ends see the same widths: for every
operation but the cache operations the width is the busy time exactly, and a 15h/31h pulse's
wait for the previous array operation follows from the command times.
"""

import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Probe
from rbscope.analysis.wa import compute_wa
from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.device import Device
from rbscope.device.emulator import read_truth
from rbscope.device.simdevice import SimDevice, SimError
from rbscope.gateware.nand_emu import EmuConfig, EmuCounter, EmuParams
from rbscope.gateware.nand_emu.families import BUSY_TIME_KEYS
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.gateware.rb_sniffer.params import SnifferParams, classes_for_windows
from rbscope.nand.onfi import Opcode, address_bytes
from rbscope.nand.timebase import us_to_ticks

from .drive import CELL_BITS, TIMING_KEYS, PageType, RefSSDError
from .measure import to_measurement, user_preset
from .timing import NandOp

__all__ = ["rtl_drive", "emulator_setup", "bus_cycles", "preamble", "write_commands", "RtlResult",
           "run_rtl", "compare", "CYCLES_PER_US", "CMD", "ADDR", "DATA"]

#: Default clock cycles per µs (the declared clock in MHz, and both prescalers): a bus cycle of
#: two clock cycles then lasts 250 ns (ONFI timing mode 0: 100 ns).
CYCLES_PER_US = 8
#: Bus-cycle kinds of the command file (``sim_harness.cpp``).
CMD, ADDR, DATA = 0, 1, 2
#: The emulator's tPROG slot of each page type (``EmuConfig.page_types`` values).
_PROG_SLOT = {PageType.SLC: 0, PageType.LOWER: 0, PageType.MIDDLE: 1, PageType.UPPER: 2}
_MLC_SLOT = {PageType.LOWER: 0, PageType.UPPER: 1}


#: Pages per block (and page-type map entries) of the largest emulated block the simulated
#: device takes (a map of 1024 entries would not fit the link's 64 EMU_CFG registers).
_MAX_PAGES = 512


def _pow2_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


def rtl_drive(drive):
    """Return ``drive`` with every busy time fixed at the middle of its range (whole µs).

    The read times of all page types become one (the middle of the drive's read range): the
    emulator has one tR. ``overhead`` keeps its range. Raises :class:`RefSSDError` for a drive
    the emulator cannot hold (see :func:`emulator_setup`).
    """
    _check(drive)
    timing = {}
    for key in TIMING_KEYS:
        if key == "overhead" or key.startswith("read_") and key != "read_cache_busy":
            continue
        lo, hi = drive.timing[key]
        timing[key] = max(1, round((lo + hi) / 2))
    lo, hi = drive._range("read")
    read = max(1, round((lo + hi) / 2))
    for key in TIMING_KEYS:
        if key.startswith("read_") and key != "read_cache_busy":
            timing[key] = read
    return drive.with_(name=drive.name, timing=timing)


def _check(drive):
    where = f"drive {drive.name}: the RTL back end"
    if drive.dies > 8:
        raise RefSSDError(f"{where} emulates at most 8 dies, not {drive.dies}")
    if drive.planes_per_die not in (1, 2, 4):
        raise RefSSDError(f"{where} needs 1, 2 or 4 planes, not {drive.planes_per_die}")
    if drive.pages_per_block > _MAX_PAGES:
        raise RefSSDError(f"{where}: an emulated block holds at most {_MAX_PAGES} pages (and "
                          f"its page-type map as many), not {drive.pages_per_block}")
    if drive.slc_cache:
        raise RefSSDError(f"{where} cannot emulate an SLC cache (tPROG by block)")


def emulator_setup(drive, cycles_per_us=CYCLES_PER_US):
    """Return ``(EmuParams, EmuConfig)`` of the emulated dies of ``drive``.

    One emulated die per drive die, the drive's planes, and its blocks per plane and pages per
    block rounded up to powers of two (the FTL uses the first ones; timing-only storage, no
    jitter), a tick of ``cycles_per_us`` cycles (1 µs), and the busy times of ``drive``'s
    timing (use :func:`rtl_drive` first: a range becomes its lower end here).

    The page-type map has one entry per page of the emulated block (``page_type_slots`` =
    ``pages_per_block``), so page ``p`` of a block gets the drive's type of page ``p`` whatever
    the drive's pages per block (a 96-page TLC block uses the first 96 entries of a 128-entry
    map; the rest, pages the FTL never programs, repeat the last type).
    """

    _check(drive)
    types = drive.page_types()
    slot = _MLC_SLOT if drive.cell == "mlc" else _PROG_SLOT
    page_bytes = 1 << max(4, min(14, (drive.page_size - 1).bit_length()))
    pages = _pow2_at_least(max(2, drive.pages_per_block))
    emu = EmuParams(dies=drive.dies, page_bytes=page_bytes, spare_bytes=0,
                    pages_per_block=pages,
                    blocks_per_plane=_pow2_at_least(drive.blocks_per_plane),
                    planes=drive.planes_per_die, storage=0, jitter_bits=0, bad_block_slots=0,
                    page_type_slots=pages, bits_per_cell=CELL_BITS[drive.cell])
    t = drive.timing

    def ticks(key):  # a tick is a prescaler of cycles_per_us cycles: 1 µs
        return us_to_ticks(t[key][0], 1e-6, what=f"drive {drive.name}: timing.{key}",
                           nonzero=True, error=RefSSDError)

    times = {busy.name: ticks(key) for busy, key in BUSY_TIME_KEYS.items()}
    times["R"] = ticks(f"read_{drive.type_key(types[0])}")
    levels = sorted(set(types.tolist()))
    for level in levels:
        times[f"PROG{slot[PageType(level)]}"] = ticks(f"program_{drive.type_key(level)}")
    page_map = tuple(slot[PageType(int(x))] for x in types)
    page_map += (page_map[-1],) * (emu.page_type_slots - len(page_map))  # pages never used
    config = EmuConfig(prescaler=cycles_per_us, t_wb=3, times=times,
                       page_types=page_map).validate(emu)
    return emu, config


def _emu_block(row, emu):
    """The emulator's block of a command row: the plane is the block address's low bits."""
    return max(int(row["block"]), 0) * emu.planes + max(int(row["plane"]), 0)


def bus_cycles(row, emu):
    """The bus cycles ``[(kind, byte), …]`` of one :data:`~.timing.COMMAND_DTYPE` row."""
    first, confirm = int(row["first"]), int(row["confirm"])
    op = int(row["op"])
    r = emu.row(_emu_block(row, emu), max(int(row["page"]), 0))
    if op == NandOp.READ:
        return [(CMD, first), *((ADDR, b) for b in address_bytes(first, r)), (CMD, confirm)]
    if op == NandOp.CACHE_READ or op == NandOp.RESET:
        return [(CMD, confirm)]
    if first == Opcode.PROGRAM:
        return [(CMD, first), *((ADDR, b) for b in address_bytes(first, r)), (DATA, 0x5A),
                (CMD, confirm)]
    if first == Opcode.ERASE:
        return [(CMD, first), *((ADDR, b) for b in address_bytes(first, r)), (CMD, confirm)]
    if op == NandOp.SET_FEATURES:  # feature 01h (timing mode): mode 0
        return [(CMD, Opcode.SET_FEATURES), (ADDR, 0x01)] + [(DATA, 0)] * 4
    raise RefSSDError(f"command {first:#04x}…{confirm:#04x} cannot be replayed")


def preamble(run, emu):
    """The programs that bring fresh emulated dies into the state the FTL's blocks were in.

    A preconditioned FTL starts the workload with partly programmed open blocks; the emulator
    enforces the in-order rule, so each block whose first operation in ``run`` is a program of
    page ``p > 0`` gets pages ``0 … p-1`` programmed first. Returns ``[(die, emu_block,
    pages), …]``.
    """
    seen = set()
    out = []
    c = run.commands
    touch = (c["first"] == Opcode.PROGRAM) | (c["first"] == Opcode.ERASE)
    for row in c[touch]:
        key = (int(row["die"]), _emu_block(row, emu))
        if key in seen:
            continue
        seen.add(key)
        if row["first"] == Opcode.PROGRAM and row["page"] > 0:
            out.append((*key, int(row["page"])))
    return out


def _record(cycle, die, bus):
    return struct.pack("<QBB", cycle, die, len(bus)) + bytes(b for pair in bus for b in pair)


def write_commands(path, run, emu, cycles_per_us=CYCLES_PER_US):
    """Write the harness's command file for ``run``; return ``(preamble programs, commands)``.

    The file holds the :func:`preamble` (programs issued as soon as the dies are ready), a
    barrier, then ``run``'s command stream with each confirm at ``confirm_ns`` in clock cycles
    counted from the barrier.
    """
    records = []
    pre = preamble(run, emu)
    # Round robin over the dies, so that they program their preamble in parallel.
    queues = {}
    for die, block, pages in pre:
        queues.setdefault(die, []).extend(emu.row(block, p) for p in range(pages))
    while any(queues.values()):
        for die, rows in queues.items():
            if rows:
                r = rows.pop(0)
                records.append(_record(0, die, [
                    (CMD, Opcode.PROGRAM),
                    *((ADDR, b) for b in address_bytes(Opcode.PROGRAM, r)), (DATA, 0x5A),
                    (CMD, Opcode.PROGRAM_CONFIRM)]))
    n_pre = len(records)
    records.append(_record(0, 0, []))  # the barrier
    c = np.sort(run.commands, order="confirm_ns", kind="stable")
    cycles = c["confirm_ns"] * cycles_per_us // 1000
    for row, cyc in zip(c, cycles.tolist(), strict=True):
        records.append(_record(cyc, int(row["die"]), bus_cycles(row, emu)))
    Path(path).write_bytes(b"RBCMD001" + struct.pack("<IIQ", emu.dies, 0, len(records))
                           + b"".join(records))
    return n_pre, len(c)


@dataclass
class RtlResult:
    """What :func:`run_rtl` brings back.

    Members
    -------
    measurement : rbscope.analysis.measurement.Measurement
        From the capture received over the simulated UART (as ``rbscope analyze`` reads it).
    truth : dict of int to dict
        Per die, the emulator's ground-truth counters by ``EmuCounter`` name.
    replay : dict
        The harness's replay report: ``late`` workload commands whose confirm could not be at
        its cycle, ``late_cycles`` their total and ``max_late`` the largest delay (clock
        cycles), ``cycle`` when the last command was issued.
    class_names : tuple of str
    capture : Path
    cycles_per_us : int
    wall_s : float
        Wall-clock time of the simulation (build excluded).
    build_s : float
        Time to build (or find in the cache) the simulated device.
    preamble : int
        Page programs of the :func:`preamble` (before the counters were cleared).
    commands : int
        Command sequences of the workload replayed.
    notes : list of str
    """

    measurement: object
    truth: dict
    replay: dict
    class_names: tuple
    capture: Path
    cycles_per_us: int
    wall_s: float
    build_s: float = 0.0
    preamble: int = 0
    commands: int = 0
    notes: list = field(default_factory=list)


def run_rtl(run, *, preset=None, cycles_per_us=CYCLES_PER_US, idle_us=20_000, capture=None,
            build_root=None, progress=None, timeout=5.0, trace=False):
    """Replay ``run``'s commands into emulated dies in the simulated device; capture the result.

    Parameters
    ----------
    run : Run
        A run of a drive the emulator can hold, normally ``simulate(rtl_drive(drive), …)``.
    preset : rbscope.analysis.presets.Preset, optional
        The sniffer's class windows (default the user's, :func:`user_preset`).
    cycles_per_us : int
        Clock cycles per µs tick.
    idle_us : int
        Quiet time (µs of device time) after which the device is quiescent.
    capture : path, optional
        Capture file to write (default: a temporary one).
    build_root : path, optional
        Verilator build cache.
    progress : callable, optional
        Called with ``(device_us, target_us)`` about once a second.
    trace : bool
        Send a TRACE record per pulse (``TRACE_ENABLE``) from before the counters are cleared,
        so the capture holds each die's pulse sequence (complete unless the link lost records).

    The wait is on device time: the capture ends once the harness has issued every command,
    the device time has passed the last model pulse plus ``idle_us`` and the device reports
    quiescence.
    """

    emu, emu_config = emulator_setup(run.drive, cycles_per_us)
    preset = preset or user_preset(run)
    params = SnifferParams(channels=emu.dies, classes=classes_for_windows(len(preset.windows)))
    config, names, notes = preset.to_config(params, 1e-6, prescaler=cycles_per_us,
                                            idle_ticks=idle_us, strict=True)
    with tempfile.TemporaryDirectory(prefix="rbscope-rtl-") as tmp:
        cmd_file = Path(tmp) / "commands.bin"
        n_pre, n_cmd = write_commands(cmd_file, run, emu, cycles_per_us)
        capture = Path(capture) if capture else Path(tmp) / "rtl.rbcap"
        capture.parent.mkdir(parents=True, exist_ok=True)
        capture.unlink(missing_ok=True)
        idle = [Train(1, []) for _ in range(emu.dies)]
        device = SimDevice(params, config, idle, clock_hz=cycles_per_us * 1_000_000,
                           emulator=emu, emu_config=emu_config, commands=cmd_file,
                           snapshot_ms=20,
                           build_root=build_root)
        try:
            t0 = time.monotonic()
            device.build()
            build_s = time.monotonic() - t0
            port = device.start()
        except SimError as exc:
            device.close()
            raise RefSSDError(f"the simulated device did not start: {exc}") from None
        t0 = time.monotonic()

        def alive():
            if device.process.poll() is not None:
                raise RefSSDError("the simulated device exited: " + device.process.stderr.read())

        try:
            with Device(port, timeout=timeout, retries=20) as dev:
                # 1. The preamble: every die ready at the barrier. Its pulses are not the
                # workload's: the counters are cleared (a new epoch) before it starts.
                for _ in dev.frames():  # (a frame, or nothing for 20 ms)
                    alive()
                    if device.barrier() is not None:
                        break
                start_us = device.barrier() // cycles_per_us
                before = read_truth(dev)
                if trace:
                    dev.enable_trace()
                dev.clear()
                with CaptureWriter(capture) as writer:
                    dev.attach_capture(writer)
                    device.go()
                    target = start_us + run.end_ns // 1000 + idle_us
                    last = 0.0
                    # 2. The workload, until the last command is issued and the device has
                    # been quiet for idle_us after it (device time, not a wall-clock guess).
                    seen = None
                    for _ in dev.frames():
                        alive()
                        snap = dev.latest_snapshot
                        if snap is None or snap is seen:
                            continue
                        seen = snap
                        if progress is not None and time.monotonic() - last > 1.0:
                            progress(max(0, snap.timestamp - start_us), target - start_us)
                            last = time.monotonic()
                        done = device.replayed()
                        if (done is not None and dev.is_quiescent()
                                and snap.timestamp >= done["cycle"] // cycles_per_us + idle_us):
                            break
                    dev.snapshot()
                    dev.read_histograms()
                    after = read_truth(dev)
                    writer.event("stop", reason="quiescent", link=dev.stats.to_dict(),
                                 queue_overflow=dev.queue_overflow)
            wall = time.monotonic() - t0
            replay = device.replayed()
        finally:
            device.close()
        m = capture_to_measurement(capture, class_names=names)
    for d in range(emu.dies):
        m.probes[d] = Probe(f"die{d} R/B#", (run.die_location(d),))
    truth = {d: {c.name: int(after[d][c] - before[d][c]) for c in EmuCounter}
             for d in sorted(after)}
    return RtlResult(measurement=m, truth=truth, replay=replay, class_names=tuple(names),
                     capture=capture, cycles_per_us=cycles_per_us, wall_s=wall,
                     build_s=build_s, preamble=n_pre, commands=n_cmd, notes=list(notes))


def compare(run, result, preset=None):
    """Compare the RTL back end's ``result`` with the model back end on the same ``run``.

    The model back end is :func:`~.measure.to_measurement` at a 1 µs clock (the RTL's tick)
    with the same windows.

    Returns
    -------
    dict
        ``model``, ``rtl``: per die the class counts (``[classes…, unclassified]``);
        ``counts_equal``: every die's every class and unclassified count agree;
        ``histograms_equal``: the width histograms agree too; ``truth_equal``: the emulator's
        ground truth equals the FTL's (program operations, pages programmed, erase operations,
        page reads per die) with nothing refused, illegal or aborted; ``wa_model``, ``wa_rtl``:
        the WA as ``rbscope analyze --classifier windows`` computes it from each back end's
        counts; ``model_measurement``.
    """


    preset = preset or user_preset(run)
    model = to_measurement(run, preset=preset, clock_ns=1000)
    rtl = result.measurement
    dies = range(run.drive.dies)
    mc = {d: list(model.counts[d].classes) + [model.counts[d].unclassified] for d in dies}
    rc = {d: list(rtl.counts[d].classes) + [rtl.counts[d].unclassified] for d in dies}
    hist = all(list(model.counts[d].histogram) == list(rtl.counts[d].histogram) for d in dies)
    truth = True
    for d in dies:
        t, f = result.truth[d], run.truth.per_die[d]
        truth &= (t["PROGRAM_OPS"] == f["program_operations"]
                  and t["PAGE_PROGRAMS"] == f["pages_programmed"]["total"]
                  and t["ERASE_OPS"] == f["erases"]["total"]
                  and t["PAGE_READS"] == f["reads"]["total"]
                  and t["FAILED"] == t["ILLEGAL"] == t["ABORTED"] == 0)
    logical = from_bytes(run.logical_bytes)
    wa = [compute_wa(m, run.geometry, logical).wa.value for m in (model, rtl)]
    return {"model": mc, "rtl": rc, "counts_equal": mc == rc, "histograms_equal": hist,
            "truth_equal": bool(truth), "wa_model": wa[0], "wa_rtl": wa[1],
            "model_measurement": model}

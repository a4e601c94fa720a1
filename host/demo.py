"""``make demo``: a reference SSD, measured by the real gateware, ending in a write amplification.

1. The reference SSD (:mod:`rbscope.refssd`, SSD-v geometry: 4 channels × 1 die, MLC,
   single-plane, greedy GC; 64-page blocks, as the emulator's page-type map holds 64 pages) is
   brought to its steady (random-filled) state and runs one RB-Explorer micro-benchmark. Its FTL
   counts every page it programs: the true WA.
2. Its NAND command stream (reads 00h-30h, programs 80h-10h, erases 60h-D0h, reset and set
   features at power-on; multi-plane and cache operations on drives that use them) is replayed
   as ONFI bus cycles into four ``nand_emu`` dies inside the simulated device (Verilator, built
   once, then cached): the emulated dies pull their own R/B# low for their busy times, the
   sniffer gateware watches them, and the device streams its counters over the simulated UART
   (:mod:`rbscope.refssd.rtl`), and a TRACE record per pulse (each die's pulse sequence, which
   the sequence classifier needs; every record lost would be counted). The host connects to
   the pseudo-terminal exactly as to a hardware rbscope, records every frame into a capture
   file, and waits, in *device* time, until the replay is done and the lines have been quiet
   for the idle time (so machine load can slow the demo down but never cut it short). One
   tick is 1 µs of NAND time: nothing is compressed.
   The emulator has one busy time per operation and page type, so the drive's timing ranges are
   fixed at their middles (:func:`rbscope.refssd.rtl.rtl_drive`).
3. The capture becomes a Measurement (the pulse sequence checked complete against the counters)
   and ``rbscope analyze``'s WA computation runs on it (the sequence classifier when the
   sequence is complete, else the histograms'; the output names it); the WA with its interval
   is printed beside the FTL's true WA. The device's per-class counts are checked equal to the
   model back end's (the timing model → bit-exact sniffer model) and the emulated dies' ground
   truth equal to the FTL's counts.
4. The report (``rbscope report``'s HTML: WA, interval, per-die counts, histograms) is written
   next to the capture, with the true WA in its notes.

``--pulses`` runs the former demo instead: the timing model's R/B# pulse trains on the device's
R/B# pins (no emulator).

Usage: ``python -m rbscope.demo [--workload NAME] [--volume BYTES] [--blocks N] [--seed N]
[--capture FILE] [--pulses]``.
"""

import argparse
import sys
import time
from pathlib import Path

from rbscope.analysis.geometry import geometry_toml
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.measurement import Probe
from rbscope.analysis.pipeline import wa_of
from rbscope.device.capture import CaptureWriter, capture_to_measurement
from rbscope.device.device import Device
from rbscope.device.simdevice import SimDevice, SimError
from rbscope.files import write_text
from rbscope.gateware.rb_sniffer.model import Train

from . import refssd
from .gateware.rb_sniffer import SnifferParams
from .refssd import RefSSDError, rtl
from .refssd.measure import die_edges
from .report import ReportError, analyse_run, build_report, write_report

__all__ = ["main"]


def _bar(done, total, width=30):
    fill = round(width * min(1.0, done / total)) if total else width
    return "█" * fill + "·" * (width - fill)


#: Clock cycles per µs of the demo's simulated device: 12 MHz, whose UART (4 cycles a bit) runs
#: at 3 Mbaud, the boards' rate, so its TRACE records keep up with the drive as a board's do.
DEMO_CYCLES_PER_US = 12


def _progress(now_us, target_us):
    print(f"\r    device time {now_us / 1e6:6.2f} s {_bar(now_us, target_us)} "
          f"{100 * min(1, now_us / target_us):3.0f} %", end="", flush=True)


def _emulated(args, run, preset, windows, capture_path):
    """The FTL's commands into emulated dies (the default); returns ``(m, names, equal, what)``
    or an exit code."""

    drive = run.drive
    n_cmd = len(run.commands)
    ops = ", ".join(f"{k.lower().replace('_', ' ')} {v}" for k, v in run.truth.pulses.items()
                    if v)
    print(f"  NAND commands: {n_cmd} ({ops}) over {run.end_ns / 1e9:.2f} s of NAND time")
    print(f"  replayed as ONFI bus cycles into {drive.dies} emulated dies (nand_emu) in the "
          f"simulated device; the sniffer watches their R/B#.\n"
          f"  Time: 1 tick = 1 µs of NAND time at {args.cycles_per_us} clock cycles per µs "
          f"(nothing compressed); busy times fixed at the middle of the drive's ranges "
          f"(one per operation and page type, as the emulator has them).\n"
          f"  Windows (bundled SSD-v): {windows}")
    print("  building the device (Amaranth → Verilog → Verilator; cached after the first run) …",
          flush=True)
    try:
        result = rtl.run_rtl(run, preset=preset, cycles_per_us=args.cycles_per_us,
                             capture=capture_path, build_root=args.build_root,
                             progress=_progress, trace=True)
    except RefSSDError as exc:
        print(f"\nrbscope demo: {exc}", file=sys.stderr)
        return 1
    done_us = result.measurement.duration_ticks  # the workload's epoch, in 1 µs ticks
    _progress(done_us, done_us)
    rep = result.replay
    print(f" — quiescent ({result.wall_s:.0f} s; build {result.build_s:.0f} s)")
    print(f"  replay: {result.preamble} pages of the preconditioned FTL's open blocks "
          f"programmed first (then the counters cleared), then {result.commands} commands; "
          f"{rep['late']} confirms late by up to {rep['max_late'] / args.cycles_per_us:.1f} µs "
          f"(the emulator has one bus for its dies, the drive one per channel)")
    seq = result.measurement.provenance.get("sequence")
    if seq is not None:
        lines = seq["lines"].values()
        print(f"  pulse records (TRACE): {sum(v['records'] for v in lines):,} of "
              f"{sum(v['counted'] for v in lines):,} pulses counted, "
              f"{sum(v['lost'] for v in lines):,} lost: each die's pulse sequence "
              + ("is complete" if seq["complete"] else f"is incomplete ({seq['why']})"))
    cmp = rtl.compare(run, result, preset)
    truth = result.truth
    print("  emulated dies' ground truth (read over the link) equals the FTL's counts "
          "(programs, pages, erases, reads; nothing refused): "
          + ("yes" if cmp["truth_equal"] else "NO") + "  ["
          + "  ".join(f"die{d} {truth[d]['PAGE_PROGRAMS']} pages" for d in sorted(truth)) + "]")
    print(f"  model back end (timing model → bit-exact sniffer model): WA "
          f"{cmp['wa_model']:.3f} from window counts, RTL {cmp['wa_rtl']:.3f}")
    return (result.measurement, result.class_names,
            cmp["counts_equal"] and cmp["truth_equal"],
            "every class count equals the model back end's (per die), and the dies' ground "
            "truth the FTL's")


def _pulses(args, run, preset, windows, capture_path):
    """The former demo: the timing model's R/B# pulse trains on the device's pins."""

    drive = run.drive
    # One cycle of the simulated device is one µs: the pulse trains in µs are its stimulus.
    trains = []
    for d in range(drive.dies):
        cycles, levels = die_edges(run.pulses[d], 1000)
        trains.append(Train(1, list(zip(cycles.tolist(), levels.tolist(), strict=True))))
    end_cycles = run.end_ns // 1000 + 1
    params = SnifferParams(channels=drive.dies)
    idle_us = 50_000
    config, names, _ = preset.to_config(params, 1e-6, idle_ticks=idle_us)
    print(f"  R/B#: {sum(len(p) for p in run.pulses)} pulses over {end_cycles / 1e6:.2f} s of "
          f"NAND time; windows (bundled SSD-v): {windows}")
    print("  building the device (Amaranth → Verilog → Verilator; cached after the first run) …",
          flush=True)
    device = SimDevice(params, config, trains, build_root=args.build_root)
    try:
        t0 = time.monotonic()
        device.build()
        port = device.start()
    except SimError as exc:
        print(f"rbscope demo: {exc}", file=sys.stderr)
        device.close()
        return 1
    print(f"  device running at {port} ({time.monotonic() - t0:.1f} s)")
    target = end_cycles + idle_us  # device time (µs) by which every line has been quiet enough
    try:
        # Generous command timeouts: under load the simulation is slow, but every wait below is
        # for device time to pass, never a wall-clock guess at how long the work takes.
        with Device(port, timeout=5.0, retries=20) as dev, CaptureWriter(capture_path) as writer:
            dev.attach_capture(writer)
            last = 0.0
            for snap in dev.snapshots():
                if time.monotonic() - last > 1.0:
                    _progress(snap.timestamp, target)
                    last = time.monotonic()
                if snap.timestamp >= target and dev.is_quiescent():
                    break
            final = dev.snapshot()  # a final solicited snapshot into the capture
            dev.read_histograms()  # and the width histograms, which the classifier needs
            writer.event("stop", reason="quiescent", link=dev.stats.to_dict(),
                         queue_overflow=dev.queue_overflow)  # the capture is complete
            _progress(final.timestamp, final.timestamp)
            print(" — quiescent")
    finally:
        device.close()
    m = capture_to_measurement(capture_path, class_names=names)
    for d in range(drive.dies):
        m.probes[d] = Probe(f"die{d} R/B#", (run.die_location(d),))
    model = device.truth(m.duration_ticks + 1)
    equal = all(m.counts[d].classes == model.channels[d].classes for d in range(drive.dies))
    return m, names, equal, "every class counter equals the gateware's bit-exact model"


def main(argv=None):

    parser = argparse.ArgumentParser(
        prog="rbscope-demo", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="4K-RD-100%-W-4KiB-align",
                        help="RB-Explorer micro-benchmark (default 4K-RD-100%%-W-4KiB-align)")
    parser.add_argument("--volume", type=int, default=2 << 20,
                        help="bytes the host writes (default 2 MiB)")
    parser.add_argument("--blocks", type=int,
                        help="blocks per plane of the reference SSD (default 64 of 64 pages, "
                             "or with --pulses 32 of 128 pages: 128 MiB raw)")
    parser.add_argument("--state", default="steady", choices=refssd.PRECONDITIONS,
                        help="drive state before the workload (default steady)")
    parser.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    parser.add_argument("--capture", default="build/demo/demo.rbcap",
                        help="capture file to write (default build/demo/demo.rbcap)")
    parser.add_argument("--build-root", help="Verilator build cache (default ~/.cache/rbscope)")
    parser.add_argument("--cycles-per-us", type=int, default=DEMO_CYCLES_PER_US, metavar="N",
                        help=f"simulated clock cycles per µs tick (default {DEMO_CYCLES_PER_US}: "
                             f"its UART, 4 cycles a bit, then runs at 3 Mbaud like the boards'; "
                             f"a bus cycle takes two)")
    parser.add_argument("--pulses", action="store_true",
                        help="drive the R/B# pins with the timing model's pulse trains instead "
                             "of replaying the commands into emulated dies (the former demo)")
    args = parser.parse_args(argv)
    if args.blocks is None:
        args.blocks = 32 if args.pulses else 64
    if not 1 <= args.cycles_per_us <= 255:
        print("rbscope demo: --cycles-per-us must be from 1 to 255", file=sys.stderr)
        return 2

    try:
        drive = refssd.preset("ssd-v", blocks_per_plane=args.blocks,
                              pages_per_block=128 if args.pulses else 64)
        if not args.pulses:
            drive = rtl.rtl_drive(drive)
        workload = refssd.micro(args.workload, drive.logical_bytes, args.volume, seed=args.seed)
    except refssd.RefSSDError as exc:
        print(f"rbscope demo: {exc}", file=sys.stderr)
        return 2
    print(f"rbscope demo: reference SSD '{drive.name}' ({drive.channels} dies, MLC, "
          f"{drive.pages_per_block}-page blocks, {drive.logical_bytes >> 20} MiB user space), "
          f"{args.state} state, workload {args.workload}, {args.volume / 2**20:g} MiB written")
    started = time.monotonic()
    run = refssd.simulate(drive, workload, seed=args.seed, precondition=args.state)
    t = run.truth
    print(f"  FTL: {t.host_pages_written:.0f} host pages → {t.pages_programmed['total']} NAND "
          f"pages programmed (host {t.pages_programmed['host']}, GC {t.pages_programmed['gc']}, "
          f"RMW {t.pages_programmed['rmw']}), {t.erases['total']} erases, "
          f"{t.reads['total']} reads ({time.monotonic() - started:.1f} s)")
    capture_path = Path(args.capture)
    capture_path.parent.mkdir(parents=True, exist_ok=True)
    capture_path.unlink(missing_ok=True)
    preset = refssd.user_preset(run)
    windows = ", ".join(f"{n} [{lo:g}, {hi:g}) µs" for n, lo, hi in preset.windows)
    if args.pulses:
        outcome = _pulses(args, run, preset, windows, capture_path)
    else:
        outcome = _emulated(args, run, preset, windows, capture_path)
    if isinstance(outcome, int):
        return outcome
    m, names, equal, what = outcome
    notes = []
    # The WA exactly as `rbscope analyze` computes it (sequence-aware classifier included).
    r = wa_of(m, run.geometry, from_bytes(run.logical_bytes),
              write_only="-100%-W-" in args.workload, notes=notes)
    print("\n  program pulses counted per die (over the link):  "
          + "  ".join(f"die{d} {m.counts[d].classes[names.index('program')]}"
                      for d in range(drive.dies)))
    print(f"  {what}: {'yes' if equal else 'NO'}")
    err = (r.wa.value - t.wa_true) / t.wa_true
    iv = r.wa_confidence or r.wa
    print(f"\n  WA measured by rbscope (R/B# only, {r.classifier} classifier): {r.wa.value:.3f}  "
          f"95 % interval [{iv.lo:.3f}, {iv.hi:.3f}]")
    print(f"  WA true (the FTL's own count):      {t.wa_true:.3f}")
    print(f"  relative error: {100 * err:+.1f} %"
          + ("  (the interval holds the truth)" if iv.lo <= t.wa_true <= iv.hi else
             "  (the interval does NOT hold the truth)"))
    for w in notes + r.warnings:
        print(f"  warning: {w}")
    report_path = capture_path.with_suffix(".html")
    try:
        rr = analyse_run(m, run.geometry, from_bytes(run.logical_bytes), result=r,
                         drive=drive.name,
                         workload=args.workload,
                         notes=[f"reference SSD, {args.state} state: true WA {t.wa_true:.4f} "
                                f"(the FTL's own count of programmed pages)",
                                "R/B# from the timing model's pulse trains" if args.pulses else
                                "R/B# from emulated dies (nand_emu) replaying the FTL's NAND "
                                "commands in the simulated device; busy times fixed at the "
                                "middles of the drive's ranges, 1 µs ticks"])
        write_report(build_report([rr], title="rbscope demo: the reference SSD"), report_path)
        print(f"\n  report: {report_path}")
    except (ImportError, ReportError) as exc:
        print(f"\n  (no report: {exc})")
    # The drive's own geometry (its blocks are smaller than the bundled ssd-v's, so that a small
    # run reaches steady state), so that the printed command analyses what the demo did.
    geometry_path = capture_path.with_name(capture_path.stem + "-drive.toml")
    write_text(geometry_path, kind="toml", text=geometry_toml(run.geometry, header=[
        f"The demo's reference SSD ({drive.name}, {drive.pages_per_block}-page blocks), as "
        f"rbscope demo simulated it."]))
    write_only = " --write-only" if "-100%-W-" in args.workload else ""
    print(f"  next: rbscope analyze {capture_path} --geometry {geometry_path} --logical "
          f"{run.logical_bytes}{write_only}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())

"""``make demo``: a reference SSD, measured by the real gateware, ending in a write amplification.

1. The reference SSD (:mod:`rbscope.refssd`, SSD-v geometry: 4 channels × 1 die, MLC,
   single-plane, greedy GC) is brought to its steady (random-filled) state and runs one
   RB-Explorer micro-benchmark. Its FTL counts every page it programs: the true WA.
2. The timing model turns the FTL's operations into each die's R/B# pulse train (µs of NAND
   time; the simulated device's 1 MHz clock makes one cycle one µs).
3. The real device gateware (sniffer + UART link) runs in Verilator (built once, then cached)
   with those pulse trains on its R/B# pins; the host connects to its pseudo-terminal exactly as
   to a hardware rbscope, records every frame into a capture file, and waits, in *device* time,
   until the lines have been quiet for the idle time after the workload (so machine load can
   slow the demo down but never cut it short).
4. The capture becomes a Measurement and the WA engine computes WA with its interval, with the
   bundled SSD-v windows, which is printed beside the FTL's true WA. The device's counts are also
   checked against the bit-exact reference model of the gateware.
5. The report (``rbscope report``'s HTML: WA, interval, per-die counts, histograms) is written
   next to the capture, with the true WA in its notes.

Usage: ``python -m rbscope.demo [--workload NAME] [--volume BYTES] [--blocks N] [--seed N]
[--capture FILE]``.
"""

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _bar(done, total, width=30):
    fill = round(width * min(1.0, done / total)) if total else width
    return "█" * fill + "·" * (width - fill)


def main(argv=None):
    from . import refssd
    from .analyze_cli import wa_of
    from .capture import CaptureWriter, capture_to_measurement
    from .device import Device
    from .gateware.rb_sniffer import SnifferParams
    from .logical import from_bytes
    from .model import Train
    from .refssd.measure import die_edges
    from .simdevice import SimDevice, SimError

    parser = argparse.ArgumentParser(
        prog="rbscope-demo", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="4K-RD-100%-W-4KiB-align",
                        help="RB-Explorer micro-benchmark (default 4K-RD-100%%-W-4KiB-align)")
    parser.add_argument("--volume", type=int, default=2 << 20,
                        help="bytes the host writes (default 2 MiB)")
    parser.add_argument("--blocks", type=int, default=32,
                        help="blocks per plane of the reference SSD (default 32: 128 MiB raw)")
    parser.add_argument("--state", default="steady", choices=refssd.PRECONDITIONS,
                        help="drive state before the workload (default steady)")
    parser.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    parser.add_argument("--capture", default="build/demo/demo.rbcap",
                        help="capture file to write (default build/demo/demo.rbcap)")
    parser.add_argument("--build-root", help="Verilator build cache (default ~/.cache/rbscope)")
    args = parser.parse_args(argv)

    try:
        drive = refssd.preset("ssd-v", blocks_per_plane=args.blocks)
        workload = refssd.micro(args.workload, drive.logical_bytes, args.volume, seed=args.seed)
    except refssd.RefSSDError as exc:
        print(f"rbscope demo: {exc}", file=sys.stderr)
        return 2
    print(f"rbscope demo: reference SSD '{drive.name}' ({drive.channels} dies, MLC, "
          f"{drive.logical_bytes >> 20} MiB user space), {args.state} state, workload "
          f"{args.workload}, {args.volume / 2**20:g} MiB written")
    started = time.monotonic()
    run = refssd.simulate(drive, workload, seed=args.seed, precondition=args.state)
    t = run.truth
    print(f"  FTL: {t.host_pages_written:.0f} host pages → {t.pages_programmed['total']} NAND "
          f"pages programmed (host {t.pages_programmed['host']}, GC {t.pages_programmed['gc']}, "
          f"RMW {t.pages_programmed['rmw']}), {t.erases['total']} erases, "
          f"{t.reads['total']} reads ({time.monotonic() - started:.1f} s)")

    # One cycle of the simulated device is one µs: the pulse trains in µs are its stimulus.
    trains = []
    for d in range(drive.dies):
        cycles, levels = die_edges(run.pulses[d], 1000)
        trains.append(Train(1, list(zip(cycles.tolist(), levels.tolist(), strict=True))))
    end_cycles = run.end_ns // 1000 + 1
    params = SnifferParams(channels=drive.dies)
    preset = refssd.user_preset(run)
    idle_us = 50_000
    config, names, _ = preset.to_config(params, 1e-6, idle_ticks=idle_us)
    print(f"  R/B#: {sum(len(p) for p in run.pulses)} pulses over {end_cycles / 1e6:.2f} s of "
          f"NAND time; windows (bundled SSD-v): "
          + ", ".join(f"{n} [{lo:g}, {hi:g}) µs" for n, lo, hi in preset.windows))
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
    capture_path = Path(args.capture)
    capture_path.parent.mkdir(parents=True, exist_ok=True)
    capture_path.unlink(missing_ok=True)
    target = end_cycles + idle_us  # device time (µs) by which every line has been quiet enough
    try:
        # Generous command timeouts: under load the simulation is slow, but every wait below is
        # for device time to pass, never a wall-clock guess at how long the work takes.
        with Device(port, timeout=5.0, retries=20) as dev, CaptureWriter(capture_path) as writer:
            dev.attach_capture(writer)
            last = 0.0
            for snap in dev.snapshots():
                now = time.monotonic()
                if now - last > 1.0:
                    print(f"\r    device time {snap.timestamp / 1e6:6.2f} s "
                          f"{_bar(snap.timestamp, target)} "
                          f"{100 * min(1, snap.timestamp / target):3.0f} %", end="", flush=True)
                    last = now
                if snap.timestamp >= target and dev.is_quiescent():
                    break
            final = dev.snapshot()  # a final solicited snapshot into the capture
            dev.read_histograms()  # and the width histograms, which the classifier needs
            writer.event("stop", reason="quiescent", link=dev.stats.to_dict(),
                         queue_overflow=dev.queue_overflow)  # the capture is complete
            print(f"\r    device time {final.timestamp / 1e6:6.2f} s {_bar(1, 1)} 100 % — "
                  f"quiescent")
    finally:
        device.close()

    m = capture_to_measurement(capture_path, class_names=names)
    from .measurement import Probe
    for d in range(drive.dies):
        m.probes[d] = Probe(f"die{d} R/B#", (run.die_location(d),))
    model = device.truth(m.duration_ticks + 1)
    equal = all(m.counts[d].classes == model.channels[d].classes for d in range(drive.dies))
    notes = []
    # The WA exactly as `rbscope analyze` computes it (sequence-aware classifier included).
    r = wa_of(m, run.geometry, from_bytes(run.logical_bytes), write_only=True, notes=notes)
    print("\n  program pulses counted per die (over the link):  "
          + "  ".join(f"die{d} {m.counts[d].classes[names.index('program')]}"
                      for d in range(drive.dies)))
    print(f"  every class counter equals the gateware's bit-exact model: "
          f"{'yes' if equal else 'NO'}")
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
        from .report import ReportError, analyse_run, build_report, write_report
        rr = analyse_run(m, run.geometry, from_bytes(run.logical_bytes), result=r,
                         drive=drive.name,
                         workload=args.workload,
                         notes=[f"reference SSD, {args.state} state: true WA {t.wa_true:.4f} "
                                f"(the FTL's own count of programmed pages)"])
        write_report(build_report([rr], title="rbscope demo: the reference SSD"), report_path)
        print(f"\n  report: {report_path}")
    except (ImportError, ReportError) as exc:
        print(f"\n  (no report: {exc})")
    print(f"  next: rbscope analyze {capture_path} --geometry ssd-v --logical "
          f"{run.logical_bytes}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())

"""``make demo``: the simulated rig, end to end, with the counts checked against the truth.

1. Builds the real device gateware (sniffer + UART link) with Verilator (cached after the first
   build) and starts it behind a pseudo-terminal: the simulated device of ``rbscope sim``.
2. Its 16 R/B# inputs see a synthetic NAND workload: reads, MLC lower/upper-page programs,
   erases, cache-busy pulses, ringing glitches, one die already busy at power-up.
3. The host connects exactly as to ``/dev/ttyUSB0`` (``rbscope.device.Device``), records every
   frame into a capture file, and stops when the device reports quiescence.
4. It prints what arrived over the link beside the exact counts of the bit-exact reference model
   (``rbscope.model``) for the same workload, and the pulse-width histogram of one die.

Usage: ``python -m rbscope.demo [--channels N] [--duration S] [--seed N] [--capture FILE]``.
"""

import argparse
import sys
import time
from pathlib import Path

from .gateware.rb_sniffer import Counter

__all__ = ["main"]

NAMES = ("cache", "read", "program", "erase")


def _histogram_lines(params, hist, windows, width=44):
    """Octave-aggregated histogram with the class windows named."""
    octaves = {}
    for b, n in enumerate(hist):
        if n:
            lo = params.hist_bin_lo(b)
            octave = lo.bit_length() - 1 if lo else -1
            octaves[octave] = octaves.get(octave, 0) + n
    if not octaves:
        return ["    (no pulses)"]
    peak = max(octaves.values())
    lines = []
    for octave in sorted(octaves):
        lo, hi = (0, 1) if octave < 0 else (1 << octave, 1 << (octave + 1))
        names = [name for name, (wlo, whi) in zip(NAMES, windows, strict=False)
                 if wlo < hi and lo < whi]
        bar = "█" * max(1, round(width * octaves[octave] / peak))
        lines.append(f"    {lo:>6}–{hi - 1:<6} µs {octaves[octave]:>6}  {bar:<{width}} "
                     f"{'/'.join(names)}")
    return lines


def main(argv=None):
    from .capture import CaptureWriter
    from .device import Device
    from .sim_cli import default_setup
    from .simdevice import SimDevice, SimError

    parser = argparse.ArgumentParser(
        prog="rbscope-demo", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, default=16, help="R/B# channels (default 16)")
    parser.add_argument("--duration", type=float, default=2.0,
                        help="seconds of NAND activity, in device time (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument("--capture", default="build/demo/demo.rbcap",
                        help="capture file to write (default build/demo/demo.rbcap)")
    args = parser.parse_args(argv)

    params, config, trains = default_setup(args.channels, args.duration, args.seed)
    cycles = int(args.duration * 1_000_000)
    print(f"rbscope demo: the simulated rig — {args.channels}-channel device gateware in "
          f"Verilator, synthetic NAND workload (seed {args.seed}, {args.duration:g} s)")
    print("  building the device (Amaranth → Verilog → Verilator; cached after the first run) …",
          flush=True)
    device = SimDevice(params, config, trains)
    try:
        started = time.monotonic()
        device.build()
        port = device.start()
    except SimError as exc:
        print(f"rbscope demo: {exc}", file=sys.stderr)
        device.close()
        return 1
    print(f"  device running at {port} ({time.monotonic() - started:.1f} s)")
    capture_path = Path(args.capture)
    capture_path.parent.mkdir(parents=True, exist_ok=True)
    capture_path.unlink(missing_ok=True)
    try:
        with Device(port, timeout=1.0, retries=5) as dev, CaptureWriter(capture_path) as writer:
            info = dev.info
            print(f"  connected: board {bytes(info.board).rstrip(bytes(1)).decode()}, "
                  f"{info.channels} channels, clock {info.clock_hz} Hz, tick "
                  f"{info.tick_period_ps / 1e6:g} µs; capturing into {capture_path}")
            dev.attach_capture(writer)
            last = 0.0
            for snap in dev.snapshots(duration=300):
                now = time.monotonic()
                if now - last > 1.0:
                    total = sum(sum(c.counters[:params.classes]) for c in snap.counters)
                    print(f"    device time {snap.timestamp / 1e6:6.2f} s: {total:>7} pulses "
                          f"classified so far", flush=True)
                    last = now
                if dev.is_quiescent() and snap.timestamp > cycles:
                    break
            final = dev.snapshot()
            hist = dev.read_histograms()
            stats = dev.stats
    finally:
        device.close()
    truth = device.truth(cycles)

    idx = {c: params.counter_index(c) for c in Counter}
    header = (f"  {'ch':>3} " + "".join(f"{n:>9}" for n in NAMES)
              + f"{'unclass':>9}{'glitch':>8}{'partial':>8}{'dropped':>8}{'busy %':>8}  model")
    print(f"\n  quiescent at {final.status.quiet_since / 1e6:.3f} s of device time; counts as "
          "received over the link:\n")
    print(header)
    print("  " + "─" * (len(header) - 2))
    all_equal = True
    for ch, counts in enumerate(truth.channels):
        row = list(final.counters[ch].counters)
        equal = row == counts.row(params)[:len(row)] and hist[ch] == counts.histogram
        all_equal &= equal
        busy = 100 * row[idx[Counter.BUSY_TICKS]] / cycles
        print(f"  {ch:>3} " + "".join(f"{row[i]:>9}" for i in range(len(NAMES)))
              + f"{row[idx[Counter.UNCLASSIFIED]]:>9}{row[idx[Counter.GLITCH]]:>8}"
              + f"{row[idx[Counter.PARTIAL]]:>8}{row[idx[Counter.DROPPED]]:>8}{busy:>8.1f}"
              + f"  {'=' if equal else '≠'}")
    print("  " + "─" * (len(header) - 2))
    totals = [sum(c.counters[i] for c in final.counters) for i in range(len(NAMES))]
    print("  all " + "".join(f"{t:>9}" for t in totals))
    print()
    if all_equal:
        print(f"  every counter and all {params.hist_bins} histogram bins of every channel equal "
              "the reference model's exact counts, bit for bit.")
    else:
        print("  MISMATCH between the device and the reference model.")
    print(f"  link: {stats.frames} frames, {stats.errors} rejected, {stats.lost_frames} lost.")
    print("\n  channel 0 pulse-width histogram (by octave; windows "
          + ", ".join(f"{n} [{lo}, {hi}) µs" for n, (lo, hi) in zip(NAMES, config.windows,
                                                                      strict=False))
          + "):")
    for line in _histogram_lines(params, hist[0], config.windows):
        print(line)
    print(f"\n  next: rbscope dump {capture_path} | head; rbscope sim --help")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())

"""Latency from a pulse ending to its count being visible on the host, at the default period.

Runs the simulated device (the gateware in Verilator, 16 channels, default 100 ms snapshot
period) with isolated pulses at known cycles, receives the periodic snapshots with the host's
`Device`, and for every pulse finds the first COUNTERS frame of its channel that includes it:

* device latency (ticks = µs at the simulated 1 MHz): from the pulse's end to the time the
  COUNTERS frame starts (the frame's latched timestamp), plus that frame's transmission time.
  It is dominated by the wait for the next snapshot (uniform in 0 … period) and is the same on
  hardware, except for the transmission times, which are given for both the simulated link
  (250 kbaud) and the hardware link (3 Mbaud);
* host latency: wall-clock time the host needs to decode a frame once its bytes arrived
  (measured on the recorded byte stream).

Usage: ``python benchmarks/link_latency.py [--pulses N]``
"""

import argparse
import statistics
import sys
import time

from rbscope.device.device import Device
from rbscope.device.protocol import Counters, FrameDecoder, encode_frame
from rbscope.device.simdevice import SimDevice
from rbscope.gateware.link import protocol
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import Train

CHANNELS = 16


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pulses", type=int, default=12, help="pulses per channel")
    args = parser.parse_args(argv)
    params = SnifferParams(channels=CHANNELS)
    config = SnifferConfig(prescaler=1, glitch_ticks=3, windows=((100, 2000),),
                           idle_ticks=300_000)
    # Pulse k of channel c ends at 137 ms × k + 7 ms × c + 1 ms: unrelated to the 100 ms period.
    trains, ends = [], {}
    for c in range(CHANNELS):
        edges = []
        for k in range(args.pulses):
            end = 137_000 * (k + 1) + 7_000 * c + 1_000
            edges += [(end - 500, 0), (end, 1)]
            ends.setdefault(c, []).append(end)
        trains.append(Train(1, edges))
    horizon = 137_000 * (args.pulses + 2)
    frame_bytes = 6 + protocol.layout_bytes(protocol.counters_layout(params)) + 4 + 1
    latencies = []
    wire_bytes = bytearray()
    with SimDevice(params, config, trains, build_root=None) as sim:
        dev = Device(str(sim.link), timeout=1.0, retries=5)
        seen = {c: 0 for c in range(CHANNELS)}
        try:
            for _, frame in dev.frames(duration=None):
                if frame is None:
                    continue
                # The frame as it was on the wire, for the decode-time measurement below.
                wire_bytes += encode_frame(frame.TYPE, frame.raw[6:], frame.seq)
                if isinstance(frame, Counters):
                    c = frame.channel
                    total = frame.counters[0]
                    while seen[c] < total:
                        end = ends[c][seen[c]]
                        latencies.append(frame.timestamp - end)
                        seen[c] += 1
                    if frame.timestamp > horizon:
                        break
        finally:
            dev.close()
    idx_ok = sum(seen.values()) == CHANNELS * args.pulses
    # Host decode time per frame, on the bytes the host received (INFO first, as on the link).
    info = encode_frame(protocol.FrameType.INFO, dev.info.raw[6:], dev.info.seq)
    decoder = FrameDecoder()
    decoder.feed(info)
    start = time.perf_counter()
    n = len(decoder.feed(bytes(wire_bytes)))
    per_frame_us = (time.perf_counter() - start) / max(n, 1) * 1e6
    sim_tx = frame_bytes * 10 / 250_000 * 1e6
    visible = [lat + sim_tx for lat in latencies]
    print(f"{len(latencies)} pulses on {CHANNELS} channels (all found: {idx_ok}), "
          f"snapshot period 100 ms")
    print("pulse end → COUNTERS frame start (µs = ticks at 1 MHz): "
          f"min {min(latencies)}, median {statistics.median(latencies):.0f}, "
          f"max {max(latencies)} (negative: the counter word is read as it is sent, after the "
          "frame started)")
    print(f"pulse end → its COUNTERS frame fully received, simulated 250 kbaud link: "
          f"min {min(visible):.0f}, median {statistics.median(visible):.0f}, "
          f"mean {statistics.mean(visible):.0f}, max {max(visible):.0f} µs")
    snap_hw = (40 + CHANNELS * frame_bytes) * 10 / 3_000_000 * 1e6
    print(f"hardware (3 Mbaud): at most one period + one snapshot = 100 000 + {snap_hw:.0f} µs; "
          f"on average half a period + half a snapshot ≈ {50_000 + snap_hw / 2:.0f} µs")
    print(f"host decode per frame: {per_frame_us:.1f} µs (decoded {n} frames)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Host decode throughput vs the 3 Mbaud link.

Builds a realistic device byte stream — periodic snapshots (STATUS + one COUNTERS per channel)
with histogram bursts and trace records — for a 16-channel and a 64-channel device, then times
``FrameDecoder.feed`` on it (in 4 KiB reads, as from a serial port) and, separately, the capture
writer and reader. The link carries 300 000 bytes/s (3 Mbaud, 8N1: 10 bits per byte); the ratio
says how many such links one host core keeps up with.

    .venv/bin/python benchmarks/host_decode.py [--seconds S]
"""

import argparse
import os
import random
import tempfile
import time

from rbscope.device import protocol as hp
from rbscope.device.capture import CaptureReader, CaptureWriter
from rbscope.gateware.link.protocol import HIST_CHUNK, FrameType
from rbscope.gateware.rb_sniffer.params import SnifferParams

LINK_BYTES_PER_S = 3_000_000 // 10


def stream(params, snapshots, rng):
    out = []
    seq = 0

    def add(ftype, values):
        nonlocal seq
        out.append(hp.encode_frame(ftype, hp.encode_payload(params, ftype, values), seq))
        seq = (seq + 1) & 0xFFFF

    mask = (1 << params.counter_bits) - 1
    for n in range(snapshots):
        ts = 1000 * n
        add(FrameType.STATUS, {"snapshot": n & 0xFFFF, "timestamp": ts, "epoch": 1})
        for ch in range(params.channels):
            add(FrameType.COUNTERS, {"snapshot": n & 0xFFFF, "channel": ch, "timestamp": ts,
                                     "counters": [rng.getrandbits(40) & mask
                                                  for _ in range(params.counters_per_channel)]})
        for _ in range(4):
            add(FrameType.TRACE, {"channel": rng.randrange(params.channels), "kind": 0,
                                  "index": 1, "width": rng.randrange(1 << 20),
                                  "timestamp": ts})
        if n % 10 == 0:
            for ch in range(params.channels):
                for first in range(0, params.hist_bins, HIST_CHUNK):
                    add(FrameType.HISTOGRAM, {"channel": ch, "first": first, "epoch": 1,
                                              "timestamp": ts,
                                              "bins": [rng.getrandbits(32)
                                                       for _ in range(HIST_CHUNK)]})
    return b"".join(out), len(out)


def bench(params, seconds):
    rng = random.Random(1)
    data, nframes = stream(params, 200, rng)
    info = hp.encode_frame(FrameType.INFO, hp.encode_payload(None, FrameType.INFO, {
        "protocol_version": 1, "channels": params.channels, "classes": params.classes,
        "row": params.row, "width_bits": params.width_bits, "counter_bits": params.counter_bits,
        "hist_sub_bits": params.hist_sub_bits, "hist_bins": params.hist_bins,
        "hist_bits": params.hist_bits, "timestamp_bits": params.timestamp_bits,
        "glitch_bits": params.glitch_bits, "prescaler_bits": params.prescaler_bits,
        "clock_hz": 48_000_000}), 0)
    reps = 0
    frames = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        dec = hp.FrameDecoder()
        dec.feed(b"\xc0" + info)
        for i in range(0, len(data), 4096):
            frames += len(dec.feed(data[i:i + 4096]))
        reps += 1
    dt = time.perf_counter() - t0
    assert frames == reps * nframes and dec.stats.errors == 0
    nbytes = reps * len(data)
    # Capture write + read of the same frames.
    dec = hp.FrameDecoder()
    decoded = dec.feed(b"\xc0" + info + data)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.rbcap")
        t1 = time.perf_counter()
        with CaptureWriter(path) as w:
            for f in decoded:
                w.frame(f)
        tw = time.perf_counter() - t1
        size = os.path.getsize(path)
        t2 = time.perf_counter()
        r = CaptureReader(path)
        tr = time.perf_counter() - t2
        assert r.frame_count == len(decoded)
    return {
        "frames_per_s": frames / dt, "mb_per_s": nbytes / dt / 1e6,
        "ratio": nbytes / dt / LINK_BYTES_PER_S,
        "avg_frame_bytes": len(data) / nframes,
        "write_frames_per_s": len(decoded) / tw, "read_frames_per_s": len(decoded) / tr,
        "file_bytes_per_wire_byte": size / len(data),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    print("| device | frames/s | MB/s | × 3 Mbaud link | avg frame (B) | capture write "
          "frames/s | capture read frames/s | file B / wire B |")
    print("|---|---|---|---|---|---|---|---|")
    for params in (SnifferParams(channels=16), SnifferParams(channels=64)):
        r = bench(params, args.seconds)
        print(f"| {params.channels} ch | {r['frames_per_s']:,.0f} | {r['mb_per_s']:.2f} | "
              f"{r['ratio']:.1f} | {r['avg_frame_bytes']:.0f} | "
              f"{r['write_frames_per_s']:,.0f} | {r['read_frames_per_s']:,.0f} | "
              f"{r['file_bytes_per_wire_byte']:.2f} |")


if __name__ == "__main__":
    main()

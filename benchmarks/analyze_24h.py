"""Benchmark ``rbscope analyze`` on a long capture: a synthetic 24-hour, 16-die recording.

Writes the capture file ``rbscope capture --clear --hist-every 100`` would have written from a
16-channel device (``SnifferParams(channels=16)``, declared clock 48 MHz, prescaler 1, default
100 ms snapshot period) probing the 16 dies of an SSD-M-like drive under a day-long mixed
workload: HEADER, INFO, CONFIG (the SSD-M classifier windows), the ``config`` and ``clear``
events, then per snapshot one STATUS and 16 COUNTERS frames with cumulative counts, a histogram
burst (11 HISTOGRAM frames per channel) after every 100th snapshot, and at the end a solicited
snapshot, the histograms and a ``stop`` event.

Every frame payload is packed by the host's protocol encoder (``rbscope.device.protocol``, compiled
from the wire layouts), framed by ``frame_bytes`` and packed into records by the capture module's
own record packer, so the file is byte for byte what ``CaptureWriter`` writes (``--check``
compares a one-minute file written record by record through ``CaptureWriter.raw_frame``).
Records are written in batches of one 10-second period to keep generation fast.

Then ``rbscope analyze FILE --geometry ssd-m --logical N --json`` runs in a subprocess; its wall
time and peak RSS (its own ``VmHWM``) are reported. ``--limit-gb`` caps the subprocess's
address space so a reader that loads everything fails with MemoryError instead of pushing the
machine into the OOM killer.

Usage: ``python benchmarks/analyze_24h.py [--hours H ...] [--dir /tmp] [--keep] [--json]``
"""

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rbscope.analysis.geometry import load_geometry
from rbscope.device import capture as cap
from rbscope.device import protocol as hp
from rbscope.device.capture import CaptureWriter
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import (
    HIST_CHUNK,
    FrameType,
    StatusFlags,
    register_map,
)
from rbscope.gateware.rb_sniffer.params import SnifferParams

CLOCK_HZ = 48_000_000
PERIOD_S = 0.1
HIST_EVERY = 100
#: Bytes per frame on the 3 Mbaud link and its time, for plausible frame timestamps.
FRAME_S = 90 * 10 / 3_000_000

# Per-die mean rates (per second) at full load; the load follows a daily curve.
PROGRAMS_PER_S = 450.0
READS_PER_S = 1800.0
CACHE_PER_PROGRAM = 0.5
PROGRAMS_PER_ERASE = 256
GLITCHES_PER_S = 0.02


def load_profile(t):
    """Load factor 0.2 … 1.0 over the day (a quiet night, a busy afternoon) with bursts."""
    day = 0.6 - 0.4 * math.cos(2 * math.pi * (t / 86400.0))
    burst = 0.4 if int(t // 600) % 7 == 3 else 0.0  # ten busy minutes every 70
    return min(1.0, day + burst)


def width_pmfs(params, rng):
    """Histogram-bin probabilities of each class's pulse widths (SSD-M-like timing, µs)."""
    tick_us = 1e6 / CLOCK_HZ
    draws = {
        "cache": lambda: rng.uniform(3, 12),
        "read": lambda: rng.uniform(45, 95),
        "program": lambda: (rng.uniform(250, 500) if rng.random() < 0.5
                            else min(2700.0, max(600.0, rng.gauss(1300, 250)))),
        "erase": lambda: rng.gauss(3800, 114),
    }
    out = {}
    for name, draw in draws.items():
        counts = {}
        total_w = 0.0
        n = 20000
        for _ in range(n):
            w = max(1, round(draw() / tick_us))
            total_w += w
            b = params.hist_bin(w)
            counts[b] = counts.get(b, 0) + 1
        out[name] = ({b: c / n for b, c in sorted(counts.items())}, total_w / n)
    return out


def apportion(n, pmf):
    """Split ``n`` pulses over bins by ``pmf`` (largest remainder; exact total)."""
    shares = [(b, n * p) for b, p in pmf.items()]
    parts = {b: int(s) for b, s in shares}
    rest = n - sum(parts.values())
    for b, _ in sorted(shares, key=lambda x: x[1] - int(x[1]), reverse=True)[:rest]:
        parts[b] += 1
    return parts


class Synth:
    """Generates the frames of the capture and hands ``(raw, time_ns)`` to ``emit``."""

    def __init__(self, seed=1):
        self.params = p = SnifferParams(channels=16)
        self.rng = random.Random(seed)
        g = load_geometry("ssd-m")  # the bundled SSD-M geometry
        self.geometry = g
        self.config, self.class_names, _ = g.classifier.to_config(p, 1 / CLOCK_HZ)
        self.k = {name: i for i, name in enumerate(self.class_names)}
        self.pmf = width_pmfs(p, self.rng)
        self.enc = {t: hp._encoder(PROTOCOL.payload_layout(p, t)) for t in
                    (FrameType.STATUS, FrameType.COUNTERS, FrameType.HISTOGRAM)}
        self.size = {t: wire.layout_bytes(PROTOCOL.payload_layout(p, t)) for t in self.enc}
        # Frame headers differ only in seq: precompute them with frame_bytes.
        self.head = {t: [hp.frame_bytes(t, b"\0" * self.size[t], s)[:hp.HEADER_BYTES]
                         for s in range(1 << 16)] for t in self.enc}
        self.seq = 1
        self.snap = 0
        self.period_ticks = round(PERIOD_S * CLOCK_HZ)
        self.ts0 = 123 * CLOCK_HZ  # the device has been up two minutes
        self.host0 = 1_795_000_000 * 10**9  # 2026-11-18, host ns
        n = p.channels
        self.cum = [[0] * p.counters_per_channel for _ in range(n)]
        self.hist = [[0] * p.hist_bins for _ in range(n)]
        self.hist_seen = [dict.fromkeys(self.k, 0) for _ in range(n)]
        self.acc = [[0.0] * 6 for _ in range(n)]
        self.die_scale = [self.rng.uniform(0.85, 1.15) for _ in range(n)]
        self.rx_frames = 40

    # frames -----------------------------------------------------------------------------------

    def _frame(self, ftype, values):
        raw = self.head[ftype][self.seq] + self.enc[ftype](values).to_bytes(
            self.size[ftype], "little")
        self.seq = (self.seq + 1) & 0xFFFF
        return raw

    def info_raw(self):
        payload = hp.encode_payload(None, FrameType.INFO, hp.info_values(
            self.params, clock_hz=CLOCK_HZ, uart_divisor=16, build_id=0x24C0FFEE,
            board="icebreaker"))
        return hp.frame_bytes(FrameType.INFO, payload, 0)

    def registers(self):
        regs = register_map(self.params, snapshot_period=self.period_ticks, config=self.config)
        out = {r.name: r.reset for r in regs}
        out["HIST_PERIOD"] = HIST_EVERY
        return out

    def header(self, writer, t_ns):
        writer.raw_frame(self.info_raw(), t_ns)
        writer.config(self.registers(), t_ns + 1_000_000)
        writer.event("config", t_ns + 2_000_000, preset="ssd-m", class_names=list(
            self.class_names), written={"HIST_PERIOD": HIST_EVERY})
        writer.event("clear", t_ns + 3_000_000, epoch=1, previous=0)

    def _advance(self, t):
        """Add 100 ms of workload at time ``t`` (s) to the cumulative counts."""
        rng, k, p = self.rng, self.k, self.params
        load = load_profile(t)
        base = p.classes
        for d in range(p.channels):
            acc = self.acc[d]
            z = 1.0 + 0.15 * rng.gauss(0, 1)
            progs = PROGRAMS_PER_S * PERIOD_S * load * self.die_scale[d] * z
            rates = (progs, READS_PER_S * PERIOD_S * load * self.die_scale[d] * (2 - z),
                     progs / PROGRAMS_PER_ERASE, progs * CACHE_PER_PROGRAM,
                     GLITCHES_PER_S * PERIOD_S)
            got = []
            for i, r in enumerate(rates):
                acc[i] += max(0.0, r)
                n = int(acc[i])
                acc[i] -= n
                got.append(n)
            c = self.cum[d]
            nprog, nread, nerase, ncache, nglitch = got
            c[k["program"]] += nprog
            c[k["read"]] += nread
            c[k["erase"]] += nerase
            c[k["cache"]] += ncache
            c[base + 1] += nglitch
            c[base + 5] += (nprog * self.pmf["program"][1] + nread * self.pmf["read"][1]
                            + nerase * self.pmf["erase"][1]
                            + ncache * self.pmf["cache"][1]).__round__()

    def snapshot(self, solicited=False):
        """Return the ``(raw, host_ns)`` of one STATUS + 16 COUNTERS at the current counts."""
        n = self.snap
        ts = self.ts0 + n * self.period_ticks
        host = self.host0 + round(n * PERIOD_S * 1e9) + 180_000
        flags = StatusFlags.SOLICITED if solicited else 0
        out = [(self._frame(FrameType.STATUS, {
            "snapshot": n & 0xFFFF, "timestamp": ts, "quiet_since": ts - 2400, "epoch": 1,
            "flags": int(flags), "rx_frames": self.rx_frames, "rx_errors": 0,
            "trace_lost": 0}), host)]
        frame_ticks = round(FRAME_S * CLOCK_HZ)
        for ch in range(self.params.channels):
            out.append((self._frame(FrameType.COUNTERS, {
                "snapshot": n & 0xFFFF, "channel": ch, "epoch": 1,
                "timestamp": ts + (ch + 1) * frame_ticks, "trace_lost": 0,
                "counters": self.cum[ch]}), host + round((ch + 1) * FRAME_S * 1e9)))
        self.snap += 1
        return out

    def histograms(self, host):
        """Return the HISTOGRAM frames of every channel (bins rebuilt from the class counts)."""
        p = self.params
        ts = self.ts0 + (self.snap - 1) * self.period_ticks + round(0.006 * CLOCK_HZ)
        out = []
        for ch in range(p.channels):
            h, seen = self.hist[ch], self.hist_seen[ch]
            for name, idx in self.k.items():
                if name not in self.pmf:
                    continue
                new = self.cum[ch][idx] - seen[name]
                seen[name] = self.cum[ch][idx]
                for b, c in apportion(new, self.pmf[name][0]).items():
                    h[b] = (h[b] + c) & 0xFFFFFFFF
            for first in range(0, p.hist_bins, HIST_CHUNK):
                out.append((self._frame(FrameType.HISTOGRAM, {
                    "channel": ch, "first": first, "epoch": 1, "timestamp": ts,
                    "bins": h[first:first + HIST_CHUNK]}), host))
                host += round(FRAME_S * 1e9)
        return out

    def period(self):
        """Frames of one histogram period: 100 snapshots, then a histogram burst."""
        out = []
        for _ in range(HIST_EVERY):
            self._advance(self.snap * PERIOD_S)
            out += self.snapshot()
        return out + self.histograms(out[-1][1] + 1_000_000)

    def programs(self):
        return sum(c[self.k["program"]] for c in self.cum)


def write_capture(path, hours, *, exact=False, seed=1, progress=None):
    """Write the capture of ``hours`` of workload; return generation statistics."""
    s = Synth(seed)
    periods = round(hours * 3600 / (PERIOD_S * HIST_EVERY))
    frames = 0
    t = time.perf_counter()
    with CaptureWriter(path, meta={"port": "/dev/ttyUSB0", "argv": [
            "capture", "/dev/ttyUSB0", "-o", os.path.basename(path), "--clear",
            "--hist-every", str(HIST_EVERY)]}) as w:
        s.header(w, s.host0 - 50_000_000)
        for i in range(periods):
            batch = s.period()
            frames += len(batch)
            if exact:
                for raw, ns in batch:
                    w.raw_frame(raw, ns)
            else:  # the writer's own record packer, one write per 10 s of records
                w._file.write(b"".join(cap._pack(cap.RecordKind.FRAME, raw, ns)
                                       for raw, ns in batch))
                w.records += len(batch)
            if progress and i % 360 == 0:
                progress(i, periods)
        w._file.flush()
        last = s.snapshot(solicited=True)
        tail = last + s.histograms(last[-1][1] + 2_000_000)
        for raw, ns in tail:
            w.raw_frame(raw, ns)
        frames += len(tail)
        w.event("stop", tail[-1][1] + 1_000_000, reason="duration", link={"errors": 0},
                queue_overflow=0)
    dt = time.perf_counter() - t
    g = s.geometry
    physical = s.programs() * g.pages_per_pulse * g.page_size  # every die probed
    return {"hours": hours, "frames": frames, "snapshots": s.snap,
            "bytes": os.path.getsize(path), "generate_s": dt, "programs": s.programs(),
            "physical_bytes": physical, "logical_bytes": round(physical / 2.5)}


def check_exact(tmp):
    """A one-minute capture written record by record through ``CaptureWriter.raw_frame`` must
    equal the batched file byte for byte (after the HEADER record, which holds the time)."""
    a, b = Path(tmp) / "exact.rbcap", Path(tmp) / "batched.rbcap"
    write_capture(a, 1 / 60, exact=True)
    write_capture(b, 1 / 60, exact=False)
    da, db = a.read_bytes(), b.read_bytes()
    skip = cap.PREAMBLE.size
    skip += cap.RECORD.size + cap.RECORD.unpack_from(da, skip)[2] + cap.TRAILER.size
    skip_b = cap.PREAMBLE.size
    skip_b += cap.RECORD.size + cap.RECORD.unpack_from(db, skip_b)[2] + cap.TRAILER.size
    same = da[skip:] == db[skip_b:]
    # And every frame decodes to what was encoded.
    r = cap.CaptureReader(b)
    ok = same and not r.errors and r.truncated == 0 and r.stats.errors == 0
    return ok, r.frame_count


#: Runs the installed ``rbscope`` command (its console-script entry point, what a user runs),
#: then reports its own peak RSS (VmHWM) on stderr: ``ru_maxrss`` of a child would include the
#: parent's high-water mark inherited at fork/exec.
CHILD = """import sys
from importlib.metadata import entry_points
(ep,) = entry_points(group="console_scripts", name="rbscope")
try:
    rc = ep.load()(sys.argv[1:])
finally:
    hwm = [x for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
    print("PEAK_RSS_KIB", hwm.split()[1], file=sys.stderr)
sys.exit(rc)
"""


def run_command(args, limit_gb=None, pythonpath=None):
    """Run the installed ``rbscope ARGS`` in a subprocess; return its wall time, its own peak RSS
    (``VmHWM``), CPU times and exit code, and its stdout. ``pythonpath`` runs another copy of
    the package (e.g. the code before a change); ``limit_gb`` caps its address space."""
    cmd = [sys.executable, "-c", CHILD, *args]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath

    def limit():
        if limit_gb:
            b = int(limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (b, b))

    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, preexec_fn=limit, env=env,
                                cwd=Path(__file__).resolve().parent.parent)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read(), ferr.read()
    peak = [line for line in err.decode(errors="replace").splitlines()
            if line.startswith("PEAK_RSS_KIB")]
    res = {"cmd": "rbscope " + " ".join(args), "wall_s": wall, "returncode": proc.returncode,
           "peak_rss_mib": int(peak[-1].split()[1]) / 1024 if peak else None,
           "user_s": ru.ru_utime, "sys_s": ru.ru_stime}
    if proc.returncode != 0:
        res["stderr"] = err.decode(errors="replace")[-600:]
    return res, out


def run_analyze(path, logical, limit_gb=None, pythonpath=None):
    """Run ``rbscope analyze`` in a subprocess; return wall time, its own peak RSS
    (``VmHWM``) and its result."""
    args = ["analyze", str(path), "--geometry", "ssd-m",
            "--logical", str(logical), "--json", "--quiet"]
    res, out = run_command(args, limit_gb, pythonpath)
    if res["returncode"] == 0:
        data = json.loads(out)
        res["wa"] = data["wa"]
        res["snapshots_in_measurement"] = data["measurement"]["snapshots"]
        res["duration_s"] = data["measurement"]["duration_s"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, nargs="+", default=[24.0])
    ap.add_argument("--dir", default="/tmp", help="where to write the capture (deleted after)")
    ap.add_argument("--keep", action="store_true", help="keep the capture files")
    ap.add_argument("--limit-gb", type=float, default=12.0,
                    help="address-space cap of the analyze subprocess (GiB; 0: none)")
    ap.add_argument("--no-check", action="store_true", help="skip the byte-exactness check")
    ap.add_argument("--pythonpath", metavar="DIR",
                    help="run analyze with this PYTHONPATH (another copy of the package)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        if not args.no_check:
            ok, n = check_exact(tmp)
            print(f"byte-exact check (1 min, {n} frames): {'ok' if ok else 'FAILED'}",
                  file=sys.stderr)
            if not ok:
                return 1
        for hours in args.hours:
            path = Path(tmp) / f"run-{hours:g}h.rbcap"

            def progress(i, n, hours=hours):
                print(f"  {hours:g} h: {100 * i / n:.0f} %", file=sys.stderr)
            gen = write_capture(path, hours, progress=progress)
            print(f"{hours:g} h: {gen['frames']:,} frames, {gen['bytes'] / 1e9:.2f} GB in "
                  f"{gen['generate_s']:.0f} s", file=sys.stderr)
            res = run_analyze(path, gen["logical_bytes"], args.limit_gb or None,
                              args.pythonpath)
            res.update(gen)
            results.append(res)
            print(json.dumps(res), file=sys.stderr)
            if args.keep:
                keep = Path(args.dir) / path.name
                path.replace(keep)
                res["kept"] = str(keep)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("| capture | frames | file | generate | analyze wall | peak RSS | snapshots kept "
              "| WA |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            wa = f"{r['wa']['value']:.4f}" if r.get("wa") else f"failed ({r['returncode']})"
            rss = f"{r['peak_rss_mib']:,.0f} MiB"
            print(f"| {r['hours']:g} h | {r['frames']:,} | {r['bytes'] / 1e9:.2f} GB | "
                  f"{r['generate_s']:.0f} s | {r['wall_s']:.1f} s | {rss} | "
                  f"{r.get('snapshots_in_measurement', '–')} | {wa} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

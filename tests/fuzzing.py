"""A seeded mutation fuzzer for rbscope's parsers, and one target per parser.

Each target takes ``(rng, data)`` — a mutated input — and raises :class:`FuzzFailure` when the
parser misbehaves: an exception other than the project's own error type, a corrupted frame
accepted, a result that depends on how the input was cut into chunks, or too much work for the
input's size. ``tests/test_fuzz.py`` runs a few hundred inputs per target in the default suite
and many more in a ``slow`` test; a long run from the command line::

    .venv/bin/python tests/fuzzing.py --target all -n 1000000 --seed 1

prints, per target, how many inputs ran and every failure (with the seed that reproduces it).
"""

import argparse
import dataclasses
import io
import os
import random
import signal
import sys
import tempfile
import time
import zipfile
import zlib

from rbscope.analysis.geometry import GeometryError, parse_geometry
from rbscope.analysis.measurement import MeasurementError
from rbscope.analysis.presets import PresetError, parse_toml
from rbscope.device.capture import (
    CaptureError,
    CaptureReader,
    capture_to_measurement,
    write_sample,
)
from rbscope.device.protocol import (
    FrameDecoder,
    encode_frame,
    encode_payload,
    info_values,
    stuff,
)
from rbscope.gateware.link.protocol import FrameType
from rbscope.gateware.rb_sniffer.params import SnifferParams
from rbscope.recordings import vcd as vcd_module
from rbscope.recordings.sources import SourceOptionError, open_measurement
from rbscope.recordings.stream import RecordingError

__all__ = ["FuzzFailure", "TARGETS", "mutate", "case", "run"]


#: Where inputs are written (memory-backed when the system has one).
_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class FuzzFailure(AssertionError):
    """The parser misbehaved on one input."""


# Mutation ----------------------------------------------------------------------------------------

_INTERESTING = (b"\x00", b"\xff", b"\xc0", b"\xdb", b"\xa5", b"{", b"}", b"[", b"]", b"#", b"$",
                b"\n", b" ", b"=", b"\"", b"9" * 30, b"9" * 4301, b"[" * 1000, b"-1", b"1e308",
                b"1e400", b"nan", b"$end", b"$var", b"#99999999999", b"#" + b"9" * 20)


def mutate(rng, data, pool=()):
    """Return ``data`` changed by 1 … 4 random edits (bit flips, byte edits, insertions of
    interesting tokens, deletions, duplications, splices with ``pool`` inputs)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        n = len(out)
        if op == 0 and n:
            i = rng.randrange(n)
            out[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            out[rng.randrange(n)] = rng.randrange(256)
        elif op == 2:
            i = rng.randint(0, n)
            out[i:i] = rng.choice(_INTERESTING)
        elif op == 3 and n:
            i = rng.randrange(n)
            del out[i:i + rng.randint(1, 64)]
        elif op == 4 and n:
            i = rng.randrange(n)
            j = min(n, i + rng.randint(1, 256))
            out[j:j] = out[i:j] * rng.randint(1, 3)
        elif op == 5:
            i = rng.randint(0, n)
            out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
        elif op == 6 and pool:
            other = rng.choice(pool)
            if other:
                a = rng.randrange(len(other))
                i = rng.randint(0, n)
                out[i:i] = other[a:a + rng.randint(1, 400)]
        elif op == 7 and n:
            # A digit run replaced by a huge or odd number.
            i = rng.randrange(n)
            out[i:i + 1] = rng.choice((b"4" * 4301, b"99999999999", b"1e308", b"-5", b"0"))
    return bytes(out)


class _Deadline:
    """Raise :class:`FuzzFailure` if the body uses more than ``seconds`` of CPU time (a hang;
    CPU rather than wall-clock time, so that a loaded machine does not look like a hang)."""

    def __init__(self, seconds, what):
        self.seconds = seconds
        self.what = what

    def _alarm(self, signum, frame):
        raise FuzzFailure(f"{self.what}: still running after {self.seconds} s of CPU (a hang)")

    def __enter__(self):
        self.old = signal.signal(signal.SIGVTALRM, self._alarm)
        signal.setitimer(signal.ITIMER_VIRTUAL, self.seconds)
        return self

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, self.old)


# UART decoder ------------------------------------------------------------------------------------

_P = SnifferParams(channels=3)


def _uart_frames():
    info = encode_payload(None, FrameType.INFO, info_values(_P, clock_hz=48_000_000))
    status = encode_payload(_P, FrameType.STATUS, {
        "snapshot": 1, "timestamp": 0xC0DB, "epoch": 0xDBC0, "flags": 1})
    counters = encode_payload(_P, FrameType.COUNTERS, {
        "snapshot": 1, "channel": 2, "timestamp": 5,
        "counters": [0xC0C0DBDB] * _P.counters_per_channel})
    return [encode_frame(t, p, seq) for seq, (t, p) in enumerate(
        ((FrameType.INFO, info), (FrameType.STATUS, status), (FrameType.COUNTERS, counters)))]


_UART_FRAMES = _uart_frames()
_UART_SEED = b"".join(_UART_FRAMES)


def _decode(chunks):
    d = FrameDecoder()
    out = []
    for c in chunks:
        out += d.feed(c)
    return [f.raw for f in out], d.stats


def fuzz_uart(rng, data):
    """No exception; every frame returned stands, stuffed and with its CRC, in the input (no
    corrupted frame is accepted); the frames do not depend on how the bytes are cut."""
    whole, stats = _decode([data])
    for raw in whole:
        if stuff(raw + zlib.crc32(raw).to_bytes(4, "little")) not in data:
            raise FuzzFailure(f"a frame that is not in the input was accepted: {raw.hex()}")
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 8)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    split, _ = _decode(chunks)
    if split != whole:
        raise FuzzFailure(f"{len(whole)} frames in one call, {len(split)} in chunks {cuts}")
    if stats.bytes != len(data):
        raise FuzzFailure("the decoder lost count of the bytes fed")


# Capture reader ----------------------------------------------------------------------------------


def _capture_seed():
    path = tempfile.mktemp(suffix=".rbcap")
    try:
        write_sample(path, _P)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


_CAPTURE_SEED = _capture_seed()


def _read_all(path, chunk):
    r = CaptureReader(path, chunk_size=chunk)
    return ([(x.offset, x.kind, x.body) for x in r.records], r.errors, r.end, r.truncated)


def fuzz_capture(rng, data):
    """Only CaptureError (not a capture), the same records, errors and end offset at every chunk
    size, work linear in the size, and capture_to_measurement ending in the project's errors."""
    fd, path = tempfile.mkstemp(suffix=".rbcap", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        t = time.process_time()
        try:
            ref = _read_all(path, 1 << 22)
        except CaptureError:
            return
        spent = time.process_time() - t
        if spent > 0.5 + len(data) / 2e5:
            raise FuzzFailure(f"{len(data)} bytes took {spent:.2f} s to read")
        for chunk in ((1,) if rng.random() < 0.1 else ()) + (7, rng.randint(2, 300)):
            got = _read_all(path, chunk)
            if got != ref:
                raise FuzzFailure(f"chunk size {chunk}: {got[1:]} != {ref[1:]}")
        try:
            capture_to_measurement(path)
        except (CaptureError, MeasurementError):
            pass
    finally:
        os.unlink(path)


# VCD importer ------------------------------------------------------------------------------------

_VCD_SEED = b"""$date today $end
$timescale 1 ns $end
$scope module top $end
$var wire 1 ! rb0 $end
$var wire 2 " bus [1:0] $end
$var wire 1 # rb2 [3] $end
$upscope $end
$enddefinitions $end
#0
1!
b11 "
1#
#100
0!
#20000
1!
b01 "
#40000
0#
#900000
1#
x!
#1000000
"""


def _vcd_outcome(path, snapshot, max_pulses):
    """What importing the VCD at ``path`` gives: its counts, widths and snapshots, or the
    project error's message."""
    try:
        m, _ = open_measurement(path, fmt="vcd", snapshot_seconds=snapshot, max_pulses=max_pulses)
    except (RecordingError, MeasurementError, SourceOptionError, PresetError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ([dataclasses.astuple(c) for c in m.counts], m.pulses,
            [(p.timestamp, [dataclasses.astuple(c) for c in p.counts]) for p in m.snapshots],
            m.provenance["edges"], m.provenance["warnings"])


def fuzz_vcd(rng, data):
    """Only the importers' errors; bounded time (no tick-by-tick walk over time jumps); the same
    counts, widths and snapshots, or an error both times, whether the text is read in whole
    chunks or in chunks of a few bytes (the numpy scanner and the word loop then share the input
    differently)."""
    fd, path = tempfile.mkstemp(suffix=".vcd", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        snapshot = rng.choice((None, None, 1e-6, 1e-3))
        max_pulses = rng.choice((0, 100))
        with _Deadline(10, f"VCD of {len(data)} bytes (snapshot {snapshot})"):
            whole = _vcd_outcome(path, snapshot, max_pulses)
        chunk = rng.choice((7, 64, 333))
        default, vcd_module.CHUNK = vcd_module.CHUNK, chunk
        try:
            with _Deadline(10, f"VCD of {len(data)} bytes in {chunk}-byte chunks"):
                cut = _vcd_outcome(path, snapshot, max_pulses)
        finally:
            vcd_module.CHUNK = default
        # Two errors may differ: a stream reports the first problem it reaches, which can
        # depend on how much it read at once (a refused snapshot count before a later line
        # that goes back in time).
        if cut != whole and not (isinstance(cut, str) and isinstance(whole, str)):
            raise FuzzFailure(f"{chunk}-byte chunks: {str(cut)[:200]} != {str(whole)[:200]}")
    finally:
        os.unlink(path)


# sigrok session importer -------------------------------------------------------------------------

_SR_SEP = b"\0samples\0"
#: The metadata of a 2-probe session, then the samples (probe 2 low for a while, twice).
_SR_SEED = (b"[global]\nsigrok version=0.5.2\n[device 1]\ncapturefile=logic-1\n"
            b"total probes=2\nsamplerate=1 MHz\ntotal analog=0\nprobe1=rb0\nprobe2=rb1\n"
            b"unitsize=1\n" + _SR_SEP + bytes([3] * 40 + [1] * 300 + [3] * 90 + [2] * 5
                                            + [0] * 2000 + [3] * 60))


def fuzz_sr(rng, data):
    """Only the importers' errors, whether the session's contents (metadata, samples) or the
    zip around them (headers, deflate streams, CRCs) are damaged; bounded time."""
    metadata, _, samples = data.partition(_SR_SEP)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("version", "2")
        z.writestr("metadata", metadata)
        half = rng.randint(0, len(samples))  # one or two logic members
        z.writestr("logic-1-1", samples[:half])
        if half < len(samples):
            z.writestr("logic-1-2", samples[half:])
    raw = buf.getvalue()
    if rng.random() < 0.4:  # damage the container too
        raw = mutate(rng, raw)
    fd, path = tempfile.mkstemp(suffix=".sr", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        snapshot = rng.choice((None, None, 1e-6, 1e-3))
        with _Deadline(10, f"session of {len(raw)} bytes (snapshot {snapshot})"):
            try:
                open_measurement(path, fmt="sr", snapshot_seconds=snapshot,
                                 max_pulses=rng.choice((0, 100)))
            except (RecordingError, MeasurementError, SourceOptionError, PresetError):
                pass
    finally:
        os.unlink(path)


# TOML: geometry and presets ----------------------------------------------------------------------

_TOML_SEED = b"""name = "Fuzz"
description = "a drive"

[geometry]
channels = 2
chips_per_channel = 1
dies_per_chip = 2
planes_per_die = 2
page_size = 4096
pages_per_block = 128
program_model = "multi-plane"

[capacity]
raw_gb = 16
user_gb = 14.0

[timing]
read = [20, 50]
program = [200, 2200]
erase = 2000

[classifier]
glitch_us = 0.2
[classifier.windows]
read = [10, 150]
program = [150, 2300]
erase = [2300, 10000]

[preset.mine]
base = "mlc34nm"
tick_us = 0.1
idle_s = 300
[preset.mine.windows]
program = [300, 2500]
"""


def fuzz_toml(rng, data):
    """Only GeometryError / PresetError, from loading and from converting to ticks."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        g = parse_geometry(text.split("[preset.")[0], "fuzz.toml")
        presets = [g.classifier] if g.classifier is not None else []
    except GeometryError:
        presets = []
    try:
        presets += parse_toml(text, "fuzz.toml").values()
    except PresetError:
        pass
    params = SnifferParams(channels=1, width_bits=rng.choice((16, 24, 32)))
    for p in presets:
        for tick in (1e-9, 1e-7, 1e-3):
            try:
                p.to_config(params, tick, prescaler=rng.choice((1, 100)))
                p.registers(params, rng.choice((1_000_000, 48_000_000)))
            except PresetError:
                pass


TARGETS = {
    "uart": (fuzz_uart, _UART_SEED),
    "capture": (fuzz_capture, _CAPTURE_SEED),
    "vcd": (fuzz_vcd, _VCD_SEED),
    "sr": (fuzz_sr, _SR_SEED),
    "toml": (fuzz_toml, _TOML_SEED),
}


def case(target, s):
    """The input of seed ``s`` for ``target`` and the generator the target then uses."""
    rng = random.Random(s)
    base = TARGETS[target][1]
    return rng, mutate(rng, base, [base])


def run(target, n, seed, *, report=None):
    """Run ``n`` mutated inputs of ``target``; return the list of ``(seed, failure)``."""
    fn = TARGETS[target][0]
    failures = []
    for i in range(n):
        s = seed * 1_000_003 + i
        rng, data = case(target, s)
        try:
            fn(rng, data)
        except FuzzFailure as exc:
            failures.append((s, str(exc)))
        except Exception as exc:  # the parser raised something else: a traceback
            failures.append((s, f"{type(exc).__name__}: {exc}"[:500]))
        if report is not None and failures and failures[-1][0] == s:
            print(f"{target}: FAILURE seed {s}: {failures[-1][1][:300]}", flush=True)
        if report is not None and (i + 1) % report == 0:
            print(f"{target}: {i + 1} inputs, {len(failures)} failures", flush=True)
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="all", choices=["all", *TARGETS])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    targets = list(TARGETS) if args.target == "all" else [args.target]
    total = 0
    for t in targets:
        start = time.monotonic()
        failures = run(t, args.n, args.seed, report=max(1, min(args.n // 10, 10_000)))
        total += len(failures)
        print(f"{t}: {args.n} inputs in {time.monotonic() - start:.0f} s, "
              f"{len(failures)} failures", flush=True)
        seen = set()
        for s, msg in failures:
            key = msg.split(":")[0]
            if key not in seen:
                seen.add(key)
                print(f"  seed {s}: {msg}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())

"""A mutation fuzzer of the file formats rbscope reads: every input ends in the parser's own
error class or in a result, within a time limit.

Parsers (targets): ``labelled`` (labelled-pulse JSON, then training on it), ``trained``
(trained-classifier JSON, then classifying pulses with it), ``drive`` (reference-SSD drive-spec
TOML), ``study`` (report study TOML, each run then parsed by ``rbscope analyze``'s options) and
``capture`` (capture files, read and turned into a measurement), ``traced`` (the same with TRACE
records: each line's pulse sequence rebuilt and checked against the counters).

Each input is one valid seed changed by one to four mutations. Byte mutations: bit flips,
random bytes, truncation, deletion, duplication, splices of another seed, insertion of tokens
(huge digit runs, 4 301-digit integers, deep nesting, non-UTF-8 bytes). Tree mutations (JSON
and TOML, on the parsed document, written out again): a value swapped for one of another type,
a huge or negative or non-finite number, a deleted or added key, a list lengthened or made a
scalar, a value buried under deep nesting, a long string.

A *crash* is any exception that is not the target's documented error class; a *hang* is an
input that takes more than ``--limit`` seconds of CPU time. Both are reported by bucket (the
exception type and the innermost rbscope frame), with the input's seed, which reproduces it::

    nice .venv/bin/python benchmarks/fuzz.py --target all -n 100000 --seed 1
    nice .venv/bin/python benchmarks/fuzz.py --target labelled --replay 123456

The memory of the process is capped (``--memory``, GB) so that an input that would allocate
without bound fails with MemoryError, a crash, instead of taking the machine.
"""

import argparse
import atexit
import contextlib
import io
import json
import math
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import tomllib
import traceback
from importlib.metadata import entry_points

import numpy as np

from rbscope.analysis.labelled import LabelledError, LabelledPulses
from rbscope.analysis.measurement import MeasurementError
from rbscope.analysis.sequence import SequenceError, classify
from rbscope.analysis.trained import TrainedClassifier, TrainedError, train
from rbscope.device.capture import (
    CaptureError,
    CaptureReader,
    CaptureWriter,
    capture_to_measurement,
    write_sample,
)
from rbscope.device.protocol import encode_payload, frame_bytes, info_values
from rbscope.gateware.link.protocol import FrameType, StatusFlags
from rbscope.gateware.onfi_tap.params import OpClass
from rbscope.gateware.rb_sniffer.params import Counter, EventKind, SnifferParams
from rbscope.refssd.drive import RefSSDError, parse_drive
from rbscope.report import ReportError
from rbscope.report.study import load_study

__all__ = ["TARGETS", "Hang", "mutate_bytes", "mutate_tree", "run", "main"]


class Hang(Exception):
    """An input used more CPU time than the limit."""


# Seeds ---------------------------------------------------------------------------------------


def _labelled_seed():
    rng = np.random.default_rng(3)
    die, width, cls = [], [], []
    for d in range(2):
        for _ in range(40):
            c = rng.choice([OpClass.PROGRAM, OpClass.ERASE, OpClass.READ, OpClass.MP_QUEUE])
            w = {OpClass.PROGRAM: rng.choice([400, 1400]), OpClass.ERASE: 3000,
                 OpClass.READ: 50, OpClass.MP_QUEUE: 1}[c]
            die.append(d)
            width.append(int(w + rng.integers(0, 30)))
            cls.append(int(c))
    lab = LabelledPulses(
        tick_seconds=1e-6, clock_seconds=1e-8, hist_sub_bits=3, dies=["rb0", "rb1"],
        ops=[{"PROGRAM": 30, "ERASE": 3}, {"PROGRAM": 28}],
        planes=[{"PROGRAM": [10, 10, 0, 0], "CACHE_PROGRAM": [0, 0, 0, 0],
                 "ERASE": [3, 0, 0, 0]}, {"PROGRAM": [28, 0, 0, 0]}],
        histograms={"PROGRAM": {60: 12, 75: 9}, "READ": {40: 5}},
        die=np.array(die), start=np.arange(len(die)) * 5000, width=np.array(width),
        op_class=np.array(cls))
    return json.dumps(lab.to_dict()).encode()


def _trained_seed():
    lab = LabelledPulses.from_dict(json.loads(_labelled_seed()))
    return json.dumps(train(lab).to_dict()).encode()


_DRIVE_SEED = b"""name = "fuzz"
preset = "ssd-v"
description = "a drive for the fuzzer"

[array]
channels = 2
blocks_per_plane = 16
pages_per_block = 32
cell = "mlc"

[firmware]
over_provisioning = 0.25
gc = "greedy"
write_buffer = 4096
cache_program = false
timing_shape = "normal"

[timing]
program_lower = [300, 500]
erase = 3000

[user]
geometry = "ssd-v"
windows = "bundled"
"""

_STUDY_SEED = b"""title = "fuzz study"

[defaults]
logical = "2GiB"
geometry = "ssd-v"

[[run]]
label = "a"
drive = "Vendor A"
workload = "4K"
source = "a.rbcap"
probe = ["0=0:0:0", "1=1:0:0"]
mp = 1
options = ["--write-only"]

[[run]]
source = "b.json"
geometry = "ssd-m"
fio = "b-fio.json"
"""


def _capture_seed():
    fd, path = tempfile.mkstemp(suffix=".rbcap")
    os.close(fd)
    try:
        write_sample(path, SnifferParams(channels=2))
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def _traced_capture_seed():
    """A capture with TRACE records (``rbscope capture --trace --clear``'s): 2 lines of 80
    pulses (whole ones, a saturated one with its BUSY record, a partial one), a snapshot every
    5 pulses, and one record of line 1 lost (counted): a usable sequence short of a stretch."""
    params = SnifferParams(channels=2)
    k = params.classes
    fd, path = tempfile.mkstemp(suffix=".rbcap")
    os.close(fd)

    def frame(ftype, values, seq=0):
        return frame_bytes(ftype, encode_payload(params, ftype, values), seq)

    try:
        with CaptureWriter(path, meta={"port": "fuzz"}) as w:
            w.raw_frame(frame_bytes(FrameType.INFO, encode_payload(
                None, FrameType.INFO, info_values(params, clock_hz=1_000_000))), time_ns=1)
            w.config({"PRESCALER": 1, "WINDOW_0_LO": 1, "WINDOW_0_HI": 1 << 20,
                      "CHANNEL_ENABLE": 3}, time_ns=2)
            counts = [[0, 0, 0], [0, 0, 0]]  # per line: whole, saturated, partial
            lost = [0, 0]

            def snapshot(n, ts):
                w.raw_frame(frame(FrameType.STATUS, {
                    "snapshot": n, "timestamp": ts, "epoch": 1, "trace_lost": sum(lost),
                    "flags": int(StatusFlags.QUIESCENT | StatusFlags.TRACE_ON)}, n))
                for ch in range(2):
                    row = [0] * params.counters_per_channel
                    row[0] = counts[ch][0]
                    row[k + Counter.OVERLONG], row[k + Counter.PARTIAL] = counts[ch][1:]
                    w.raw_frame(frame(FrameType.COUNTERS, {
                        "snapshot": n, "channel": ch, "timestamp": ts, "epoch": 1,
                        "trace_lost": lost[ch], "counters": row}, n))

            snapshot(0, 10)
            t = 100
            for p in range(80):
                for ch in range(2):
                    t += 150
                    kind, width = EventKind.END, 20 + (13 * p + 7 * ch) % 90
                    if p == 17 and ch == 0:
                        kind, width = EventKind.OVERLONG, params.max_width
                    elif p == 31 and ch == 1:
                        kind, width = EventKind.PARTIAL, 0
                    counts[ch][{EventKind.END: 0, EventKind.OVERLONG: 1,
                                EventKind.PARTIAL: 2}[kind]] += 1
                    if p == 25 and ch == 1:
                        lost[1] += 1
                        continue
                    w.raw_frame(frame(FrameType.TRACE, {"channel": ch, "kind": int(kind),
                                                        "index": 0, "width": width,
                                                        "timestamp": t}))
                    if kind == EventKind.OVERLONG:
                        w.raw_frame(frame(FrameType.TRACE, {
                            "channel": ch, "kind": int(EventKind.BUSY), "index": 0,
                            "width": 77, "timestamp": t + 77}))
                if p % 5 == 4:
                    snapshot(p // 5 + 1, t + 60)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


# Mutations -------------------------------------------------------------------------------------

_TOKENS = (b"\x00", b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"{", b"}", b"[", b"]", b"\"", b"=",
           b"\n", b",", b":", b"#", b"-", b".", b"e", b"9" * 25, b"9" * 400, b"4" * 4301,
           b"[" * 2000, b"{\"a\":" * 1000, b"a = [" * 1000, b"1e308", b"1e400", b"-1",
           b"NaN", b"Infinity", b"inf", b"nan", b"true", b"null", b"\\u0000", b"\\ud800")


def mutate_bytes(rng, data, pool):
    """One byte-level mutation of ``data`` (see the module docstring)."""
    out = bytearray(data)
    n = len(out)
    op = rng.randrange(9)
    if op == 0 and n:
        out[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif op == 1 and n:
        out[rng.randrange(n)] = rng.randrange(256)
    elif op == 2:
        i = rng.randint(0, n)
        out[i:i] = rng.choice(_TOKENS)
    elif op == 3 and n:
        del out[rng.randrange(n):]
    elif op == 4 and n:
        i = rng.randrange(n)
        del out[i:i + rng.randint(1, 64)]
    elif op == 5 and n:
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, 200))
        out[j:j] = out[i:j] * rng.randint(1, 4)
    elif op == 6 and pool:
        other = rng.choice(pool)
        if other:
            a = rng.randrange(len(other))
            i = rng.randint(0, n)
            out[i:i] = other[a:a + rng.randint(1, 300)]
    elif op == 7 and n:
        # A digit replaced by a huge, negative or odd number.
        digits = [i for i, b in enumerate(out) if 48 <= b <= 57]
        if digits:
            i = rng.choice(digits)
            out[i:i + 1] = rng.choice((b"9" * 30, b"4" * 4301, b"-7", b"0", b"1e999", b"0.5",
                                       b"99999999999999999999"))
    elif op == 8:
        i = rng.randint(0, n)
        out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    return bytes(out)


def _random_value(rng, depth=0):
    kind = rng.randrange(14)
    if kind == 0:
        return rng.choice((0, 1, -1, 2, 3, 255, 256))
    if kind == 1:
        return rng.choice((2 ** 31, 2 ** 32, 2 ** 53 + 1, 2 ** 63, 2 ** 64, 10 ** 30, -(10 ** 30),
                           10 ** 300))
    if kind == 2:
        return rng.choice((0.0, -0.5, 1e-300, 1e300, 1e308, float("inf"), float("-inf"),
                           float("nan"), 5e-324))
    if kind == 3:
        return rng.choice(("", "x", "program", "ssd-v", "ssd-m", "PROGRAM", "../../etc/passwd",
                           "a" * 5000, "\u00e9\u2603", "1e-6", "--logical"))
    if kind == 4:
        return rng.choice((True, False))
    if kind == 5:
        return None
    if kind == 6:
        return [] if depth > 2 else [_random_value(rng, depth + 1)
                                     for _ in range(rng.randint(0, 4))]
    if kind == 7:
        return {} if depth > 2 else {rng.choice(("a", "name", "0", "PROGRAM", "kind")):
                                     _random_value(rng, depth + 1)}
    if kind == 8:
        v = 1
        for _ in range(rng.choice((50, 500, 5000))):
            v = [v]
        return v
    if kind == 9:
        return [rng.randint(0, 9)] * rng.choice((100, 10_000))
    if kind == 10:
        return rng.choice((10 ** 4000, -(10 ** 4000)))
    if kind == 11:
        return rng.randint(-(2 ** 40), 2 ** 40)
    if kind == 12:
        return rng.uniform(-1e6, 1e6)
    return {"name": "x", "kind": "program", "first_bin": rng.randint(-10 ** 6, 10 ** 6),
            "counts": [rng.randint(0, 5)] * rng.randint(0, 5), "pulses": rng.randint(-5, 5)}


def _nodes(tree, path=()):
    """Every ``(path, value)`` of a JSON / TOML document."""
    yield path, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _nodes(v, path + (i,))


def mutate_tree(rng, tree):
    """One structural mutation of a parsed document (changed in place; returns the tree)."""
    nodes = list(_nodes(tree))
    path, node = rng.choice(nodes)
    op = rng.randrange(6)
    if not path:
        if op == 0:
            return _random_value(rng)
        if isinstance(tree, dict):
            tree[rng.choice(("extra", "format", "states", "run", "preset", "name"))] = \
                _random_value(rng)
        return tree
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if op <= 2:
        parent[key] = _random_value(rng)
    elif op == 3:
        del parent[key]
    elif op == 4 and isinstance(node, list):
        parent[key] = node * rng.choice((2, 50, 1000))
    elif op == 4 and isinstance(node, (int, float)) and not isinstance(node, bool):
        parent[key] = rng.choice((node * 2 ** 31, -node, node + 1, node - 1, 0, node * 10 ** 300))
    elif op == 5 and isinstance(parent, list):
        parent.insert(rng.randint(0, len(parent)), _random_value(rng))
    else:
        parent[key] = _random_value(rng)
    return tree


def _toml_key(k):
    k = str(k)
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def _toml_value(v):
    """``v`` as a TOML value (an inline form; raises ValueError for what TOML cannot hold)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise ValueError(f"TOML has no {type(v).__name__}")


def to_toml(doc):
    """A TOML text of ``doc`` (tables of scalars as tables, arrays of tables as ``[[...]]``)."""
    if not isinstance(doc, dict):
        raise ValueError("a TOML document is a table")
    head, tables = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            tables.append(f"[{_toml_key(k)}]")
            tables += [f"{_toml_key(a)} = {_toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                tables.append(f"[[{_toml_key(k)}]]")
                tables += [f"{_toml_key(a)} = {_toml_value(b)}" for a, b in x.items()]
        else:
            head.append(f"{_toml_key(k)} = {_toml_value(v)}")
    return ("\n".join(head + tables) + "\n").encode()


def _mutate(rng, seed, kind, pool):
    data = seed
    for _ in range(rng.randint(1, 4)):
        if kind != "bytes" and rng.random() < 0.6:
            try:
                tree = json.loads(data) if kind == "json" else tomllib.loads(data.decode())
                tree = mutate_tree(rng, tree)
                data = (json.dumps(tree).encode() if kind == "json" else to_toml(tree))
                continue
            except (ValueError, RecursionError, TypeError, ArithmeticError):
                pass  # the input is no longer a document (or cannot be one): mutate its bytes
        data = mutate_bytes(rng, data, pool)
    return data


# Targets ---------------------------------------------------------------------------------------

_DIR = tempfile.mkdtemp(prefix="rbscope-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                        else None)
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


def _file(data, suffix):
    path = os.path.join(_DIR, "input" + suffix)
    with open(path, "wb") as f:
        f.write(data)
    return path


def target_labelled(rng, data):
    path = _file(data, ".json")
    try:
        lab = LabelledPulses.load(path)
    except LabelledError:
        return
    try:
        trained = train([lab])
    except TrainedError:
        return
    # A writer never produces what its reader refuses.
    TrainedClassifier.from_dict(json.loads(json.dumps(trained.to_dict())))


_PULSES = np.array([400, 1400, 410, 1390, 3000, 50, 420, 1410] * 8, dtype=float)


def target_trained(rng, data):
    path = _file(data, ".json")
    try:
        trained = TrainedClassifier.load(path)
    except TrainedError:
        return
    if rng.random() < 0.05:  # the classifier used (a slower step: one input in twenty)
        try:
            classify({0: _PULSES}, 1e-6, pages_per_block=8, trained=trained)
        except SequenceError:
            pass


def target_drive(rng, data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        drive = parse_drive(text, "fuzz.toml")
    except RefSSDError:
        return
    drive.page_types()
    try:
        drive.user_geometry()
    except RefSSDError:
        pass


def _rbscope_command():
    """The installed ``rbscope`` command's entry point (what a user runs)."""
    (ep,) = entry_points(group="console_scripts", name="rbscope")
    return ep.load()


def target_study(rng, data):
    path = _file(data, ".toml")
    try:
        study = load_study(path)
    except ReportError:
        return
    if rng.random() >= 0.25:  # each run's options parsed too (slower: one input in four)
        return
    # As a user checks a study before a long run: `rbscope report --study F --check` parses
    # every run's options with `rbscope analyze`'s parser. It answers with an exit code and a
    # one-line message, never a traceback (an exception here is a crash).
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _rbscope_command()(["report", "--study", path, "--check"])
    if code == 0 and len(study.runs) and "geometries valid" not in out.getvalue():
        raise AssertionError(f"report --check passed without saying so: {out.getvalue()!r}")
    if code not in (0, 1, 2):
        raise AssertionError(f"report --check exit code {code}: {err.getvalue()[-300:]!r}")


def target_capture(rng, data):
    path = _file(data, ".rbcap")
    try:
        CaptureReader(path, chunk_size=rng.choice((4096, 1 << 20)))
    except CaptureError:
        return
    try:
        capture_to_measurement(path)
    except (CaptureError, MeasurementError):
        pass


#: name → (function, seed factory, mutation kind, errors that are the parser's own)
TARGETS = {
    "labelled": (target_labelled, _labelled_seed, "json"),
    "trained": (target_trained, _trained_seed, "json"),
    "drive": (target_drive, lambda: _DRIVE_SEED, "toml"),
    "study": (target_study, lambda: _STUDY_SEED, "toml"),
    "capture": (target_capture, _capture_seed, "bytes"),
    "traced": (target_capture, _traced_capture_seed, "bytes"),
}


# Running ---------------------------------------------------------------------------------------


class _Limit:
    def __init__(self, seconds):
        self.seconds = seconds

    def _alarm(self, signum, frame):
        raise Hang(f"more than {self.seconds} s of CPU time")

    def __enter__(self):
        self.old = signal.signal(signal.SIGPROF, self._alarm)
        signal.setitimer(signal.ITIMER_PROF, self.seconds)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, self.old)


def _bucket(exc):
    """The exception's type and its innermost rbscope frame: one bucket per root cause."""
    where = "?"
    for fs in traceback.extract_tb(exc.__traceback__):
        if "rbscope" in fs.filename or "/host/" in fs.filename or "/hdl/" in fs.filename:
            where = f"{os.path.basename(fs.filename)}:{fs.lineno}"
    return f"{type(exc).__name__} at {where}"


def case(target, s):
    """The generator and input of seed ``s`` for ``target``."""
    fn, seed_of, kind = TARGETS[target]
    if target not in _SEEDS:
        _SEEDS[target] = seed_of()
    seed = _SEEDS[target]
    rng = random.Random(s)
    pool = list(_SEEDS.values())
    return rng, _mutate(rng, seed, kind, pool)


_SEEDS = {}


def _one(target, s, limit, crashes, hangs):
    rng, data = case(target, s)
    try:
        with _Limit(limit):
            TARGETS[target][0](rng, data)
    except Hang:
        hangs.setdefault("hang", []).append(s)
    except Exception as exc:  # not the parser's error class: a crash
        crashes.setdefault(_bucket(exc), []).append(s)


def run(target, n, seed=1, *, limit=2.0, report=None):
    """Run ``n`` inputs of ``target``; return ``(crashes, hangs)``: dicts bucket → list of
    seeds."""
    crashes, hangs = {}, {}
    for i in range(n):
        _one(target, seed * 10_000_019 + i, limit, crashes, hangs)
        if report and (i + 1) % report == 0:
            print(f"  {target}: {i + 1} inputs, {sum(map(len, crashes.values()))} crashes, "
                  f"{sum(map(len, hangs.values()))} hangs", file=sys.stderr, flush=True)
    return crashes, hangs


def run_interleaved(targets, n, seed=1, *, limit=2.0, report=1000):
    """Run ``n`` inputs of every target in turn (one of each, then the next of each), so that a
    run stopped early has fuzzed each parser alike; print a progress table every ``report``
    rounds (to stdout: the last one printed stands if the run is stopped)."""
    results = {t: ({}, {}) for t in targets}
    spent = dict.fromkeys(targets, 0.0)
    for i in range(n):
        for t in targets:
            start = time.process_time()
            _one(t, seed * 10_000_019 + i, limit, *results[t])
            spent[t] += time.process_time() - start
        if (i + 1) % report == 0 or i + 1 == n:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            print(f"after {i + 1} inputs per parser, {stamp}:", flush=True)
            for t, (crashes, hangs) in results.items():
                print(f"| {t} | {i + 1} | {sum(map(len, crashes.values()))} | "
                      f"{sum(map(len, hangs.values()))} | {spent[t]:.0f} |", flush=True)
                for bucket, seeds in {**crashes, **hangs}.items():
                    print(f"    {t}: {bucket}: {len(seeds)} input(s), e.g. seed {seeds[0]}",
                          flush=True)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="all", choices=["all", *TARGETS])
    ap.add_argument("-n", type=int, default=10_000, help="inputs per target")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=float, default=2.0, help="CPU seconds per input")
    ap.add_argument("--memory", type=float, default=3.0, help="address-space cap, GB")
    ap.add_argument("--replay", type=int, metavar="S", help="run the input of seed S, verbose")
    ap.add_argument("--every", type=int, metavar="N",
                    help="report progress every N inputs (default: n / 10)")
    ap.add_argument("--interleave", action="store_true",
                    help="one input of each target in turn, a table every --every rounds")
    args = ap.parse_args(argv)
    cap = int(args.memory * 2 ** 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    targets = list(TARGETS) if args.target == "all" else [args.target]
    if args.replay is not None:
        for t in targets:
            rng, data = case(t, args.replay)
            print(f"{t}: {len(data)} bytes: {data[:300]!r}")
            TARGETS[t][0](rng, data)
        return 0
    # A stopped run (SIGTERM) still removes its temporary directory.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    if args.interleave:
        results = run_interleaved(targets, args.n, args.seed, limit=args.limit,
                                  report=args.every or max(1, args.n // 10))
        return 1 if any(c or h for c, h in results.values()) else 0
    print("| parser | inputs | crashes | hangs | seconds |")
    print("|---|---:|---:|---:|---:|")
    bad = 0
    details = []
    for t in targets:
        start = time.monotonic()
        crashes, hangs = run(t, args.n, args.seed, limit=args.limit,
                             report=args.every or max(1, args.n // 10))
        took = time.monotonic() - start
        nc, nh = sum(map(len, crashes.values())), sum(map(len, hangs.values()))
        bad += nc + nh
        print(f"| {t} | {args.n} | {nc} | {nh} | {took:.0f} |", flush=True)
        for bucket, seeds in {**crashes, **hangs}.items():
            details.append(f"  {t}: {bucket}: {len(seeds)} input(s), e.g. seed {seeds[0]}")
    for line in details:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

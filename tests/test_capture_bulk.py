"""The bulk capture readers (``iter_record_blocks``, ``CaptureReader``'s blocks, the streaming
``TraceScanner``'s) against the record-by-record reference: the same records, errors, state and
results, on clean captures and on captures with corrupt records, CRC errors, garbage, truncated
tails, resynchronisations, TRACE frames, lost records and a second device."""

import json
import random

import numpy as np
import pytest

from rbscope.analysis.streaming import TraceScanner
from rbscope.device import capture as cap
from rbscope.device import protocol as hp
from rbscope.gateware.link.protocol import FrameType
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferParams
from tests.conftest import load_benchmark

day = load_benchmark("analyze_day")

PARAMS = SnifferParams(channels=16)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A 16-line sequence capture (TRACE_BATCH records, 100 ms snapshots) that lost the records
    of a stretch on line 3; a few TRACE frames and a batch of another size appended."""
    d = tmp_path_factory.mktemp("bulk")
    path = d / "c.rbcap"
    p, s = day.day_trains(range(16), 6, 300.0, seed=11)
    day.write_trace_capture(path, p, s, params=PARAMS, lose={3: (2_000_000, 2_100_000)})
    with cap.CaptureWriter(path) as w:
        for i in range(5):
            w.raw_frame(hp.frame_bytes(FrameType.TRACE, hp.encode_payload(
                PARAMS, FrameType.TRACE, {"channel": i, "kind": int(EventKind.END), "index": 1,
                                          "width": 80 + i, "timestamp": 9_000_000 + i}), i),
                time_ns=5)
        w.raw_frame(hp.frame_bytes(FrameType.TRACE_BATCH, bytes(40), 9), time_ns=6)
        w.event("stop", time_ns=7, reason="quiescent")
    return path.read_bytes()


def _offsets(data):
    """``[(offset, kind, body length)]`` of a capture's records (the reference reader)."""
    out = []
    for off, kind, _t, body in cap.CaptureReader.scan(data, cap.PREAMBLE.size):
        out.append((off, kind, len(body)))
    return out


def _corrupt(data, seed):
    """``data`` with a handful of the damage a disk or a crash does: flipped bytes (in record
    headers, bodies and CRCs), garbage holding SYNC bytes and plausible headers, cut bytes,
    a duplicated record and a truncated tail."""
    rng = random.Random(seed)
    recs = _offsets(data)
    b = bytearray(data)
    edits = []
    for _ in range(rng.randint(2, 6)):
        off, kind, n = rng.choice(recs[1:])
        what = rng.choice(("header", "body", "crc", "length", "garbage", "cut", "dup"))
        if what == "header":
            edits.append((off + rng.randrange(cap.RECORD.size), 1, bytes([rng.randrange(256)])))
        elif what == "body":
            edits.append((off + cap.RECORD.size + rng.randrange(n), 1,
                           bytes([rng.randrange(256)])))
        elif what == "crc":
            edits.append((off + cap.RECORD.size + n, 1, bytes([rng.randrange(256)])))
        elif what == "length":
            edits.append((off + 2, 4, rng.randrange(1 << 32).to_bytes(4, "little")))
        elif what == "garbage":
            junk = bytes(rng.choice((0xA5, 2, 0x7B, rng.randrange(256)))
                         for _ in range(rng.randint(1, 300)))
            edits.append((off, 0, junk))
        elif what == "cut":
            edits.append((off + rng.randrange(n), rng.randint(1, 400), b""))
        else:
            edits.append((off, 0, bytes(data[off:off + cap.RECORD.size + n + 4])))
    for at, n, new in sorted(edits, reverse=True):
        b[at:at + n] = new
    if rng.random() < 0.5:
        del b[len(b) - rng.randint(1, 3000):]
    return bytes(b)


def _blocks(path, **kw):
    errors = []
    gen = cap.iter_record_blocks(path, errors=errors, **kw)
    recs = []
    while True:
        try:
            recs.extend(next(gen).records())
        except StopIteration as stop:
            return recs, errors, stop.value


def _reference(path, **kw):
    errors = []
    gen = cap.iter_records(path, errors=errors, **kw)
    recs = []
    while True:
        try:
            recs.append(next(gen))
        except StopIteration as stop:
            return recs, errors, stop.value


@pytest.mark.parametrize(("seed", "chunk"), [(s, 1) for s in range(3)] + [
    (s, c) for s in range(12) for c in (97, 4096, cap.CHUNK_SIZE)])
def test_blocks_are_the_records_errors_and_end_of_iter_records(tmp_path, clean, seed, chunk):
    path = tmp_path / "c.rbcap"
    path.write_bytes(clean if seed == 0 else _corrupt(clean, seed))
    ref = _reference(path, chunk_size=chunk)
    assert _blocks(path, chunk_size=chunk) == ref
    if seed:
        assert ref[1] or ref[2][0] != ref[2][1] or len(ref[0]) != len(_offsets(clean))


@pytest.mark.parametrize("seed", range(4))
def test_blocks_read_ahead_by_another_process_are_the_same(tmp_path, clean, seed):
    path = tmp_path / "c.rbcap"
    path.write_bytes(clean if seed == 0 else _corrupt(clean, seed))
    assert _blocks(path, chunk_size=5000, ahead=True) == _reference(path, chunk_size=5000)
    path.write_bytes(b"not a capture at all")
    with pytest.raises(cap.CaptureError, match="not an rbscope capture"):
        _blocks(path, ahead=True)


@pytest.mark.parametrize("seed", range(6))
def test_blocks_from_an_offset_are_the_resynchronised_records(tmp_path, clean, seed):
    from rbscope.analysis.streaming import _records_from

    path = tmp_path / "c.rbcap"
    data = clean if seed == 0 else _corrupt(clean, seed)
    path.write_bytes(data)
    for at in random.Random(seed).sample(range(len(data)), 5):
        gen = cap.iter_record_blocks(path, start=at, chunk_size=5000)
        got = [r for b in gen for r in b.records()]
        assert got == list(_records_from(path, at, chunk_size=5000))


def test_a_file_that_is_not_a_capture_is_refused_alike(tmp_path):
    path = tmp_path / "x.rbcap"
    for data in (b"", b"\x89RBSCAP", b"not a capture at all", cap.MAGIC + b"\x09" + bytes(4)):
        path.write_bytes(data)
        with pytest.raises(cap.CaptureError) as ref:
            _reference(path)
        with pytest.raises(cap.CaptureError) as got:
            _blocks(path)
        assert str(got.value) == str(ref.value)


def _state(r):
    out = {k: v for k, v in vars(r).items()
           if k not in ("on_snapshot", "on_device", "on_trace", "bulk", "pulse_records",
                        "hist", "latest")}
    if r.pulse_records is not None:
        out["pulse_records"] = vars(r.pulse_records)
    out["hist"] = None if r.hist is None else vars(r.hist)
    # (Frames compare without their raw bytes: compare those too.)
    out["latest"] = {k: (v, v.raw) for k, v in r.latest.items()}
    if r.last_snapshot is not None:
        out["last_raw"] = [c.raw for c in r.last_snapshot.counters]
    return out


def _second_device(data):
    """``data`` with the records of another device (an INFO of 4 channels and a snapshot of
    it) spliced in after its first third."""
    other = SnifferParams(channels=4)
    cut = [o for o, _, _ in _offsets(data)][len(_offsets(data)) // 3]
    recs = [hp.frame_bytes(FrameType.INFO, hp.encode_payload(None, FrameType.INFO, hp.info_values(
        other, clock_hz=100_000_000)), 1)]
    recs.append(hp.frame_bytes(FrameType.STATUS, hp.encode_payload(other, FrameType.STATUS, {
        "snapshot": 1, "timestamp": 5, "epoch": 1}), 2))
    for ch in range(4):
        recs.append(hp.frame_bytes(FrameType.COUNTERS, hp.encode_payload(
            other, FrameType.COUNTERS, {"snapshot": 1, "channel": ch, "timestamp": 5,
                                        "epoch": 1, "counters": [ch] * 11}), 3 + ch))
    return data[:cut] + b"".join(cap._pack(cap.RecordKind.FRAME, r, 9) for r in recs) + \
        data[cut:]


def _odd_snapshots(data):
    """``data`` with snapshots the bulk reader must leave to the reference: a COUNTERS frame
    moved after the next one, a pulse-record frame inside a snapshot, a COUNTERS frame of the
    wrong version, one of another snapshot number, a missing one."""
    recs = _offsets(data)
    frames = [(o, n) for o, k, n in recs if k == cap.RecordKind.FRAME]
    counters = [(o, n) for o, n in frames
                if data[o + cap.RECORD.size] == FrameType.COUNTERS]
    trace = next((o, n) for o, n in frames if data[o + cap.RECORD.size] == FrameType.TRACE_BATCH)

    def rec(o, n):
        return data[o:o + cap.RECORD.size + n + 4]

    def redo(o, n, change):
        body = bytearray(data[o + cap.RECORD.size:o + cap.RECORD.size + n])
        change(body)
        return cap._pack(cap.RecordKind.FRAME, bytes(body), 1)

    a, b = counters[40], counters[41]
    swaps = {a[0]: rec(*b), b[0]: rec(*a)}
    swaps[counters[100][0]] = rec(*trace) + rec(*counters[100])
    swaps[counters[200][0]] = redo(*counters[200], lambda x: x.__setitem__(1, 9))  # version
    swaps[counters[300][0]] = redo(*counters[300], lambda x: x.__setitem__(6, x[6] ^ 1))
    swaps[counters[400][0]] = b""
    out = bytearray()
    last = 0
    for o, _, n in recs:
        end = o + cap.RECORD.size + n + 4
        out += data[last:o] + swaps.get(o, data[o:end])
        last = end
    return bytes(out + data[last:])


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("variant", ["clean", "second_device", "odd", "c1", "c2", "c3", "c4"])
@pytest.mark.parametrize("options", [
    dict(keep_records=False, keep_snapshots=False, keep_traces=False, pulse_records=True,
         skip_traces=True),
    dict(keep_records=False, keep_snapshots=True, keep_traces=True, pulse_records=True),
])
def test_the_bulk_reader_ends_in_the_reference_readers_state(tmp_path, clean, variant, options,
                                                            ahead, monkeypatch):
    monkeypatch.setattr(cap, "AHEAD_BYTES", 0 if ahead else None)
    data = {"clean": lambda: clean, "second_device": lambda: _second_device(clean),
            "odd": lambda: _odd_snapshots(clean)}.get(
        variant, lambda: _corrupt(clean, 100 + int(variant[1:])))()
    path = tmp_path / "c.rbcap"
    path.write_bytes(data)
    seen = {True: [], False: []}
    readers = {}
    for bulk in (False, True):
        readers[bulk] = cap.CaptureReader(
            path, bulk=bulk, chunk_size=50_000, **options,
            on_snapshot=lambda s, b=bulk: seen[b].append((s, [c.raw for c in s.counters])),
            on_device=lambda b=bulk: seen[b].append("device"))
    assert _state(readers[True]) == _state(readers[False])
    assert seen[True] == seen[False] and len(seen[True]) > 50


def _scan(path, seq, params, bulk, starts=True, **kw):
    s = TraceScanner(path, params, from_tick=seq["from_tick"], to_tick=seq["to_tick"],
                     losses=seq.get("losses", ()), bulk=bulk, starts=starts, **kw)
    out = [(end, {c: (w.tolist(), None if st is None else st.tolist(),
                      None if g is None else g.tolist())
                  for c, (w, st, g) in lines.items()}) for end, lines in s]
    return out, s.errors, s.excluded


@pytest.mark.parametrize("variant", ["clean", "c1", "c5", "c6"])
def test_the_bulk_trace_scanner_gives_the_reference_chunks(tmp_path, clean, variant):
    data = clean if variant == "clean" else _corrupt(clean, 200 + int(variant[1:]))
    path = tmp_path / "c.rbcap"
    path.write_bytes(data)
    m = cap.capture_to_measurement(path, sequence=False)
    seq = m.provenance["sequence"]
    assert variant != "clean" or seq["losses"]
    n = len(data)
    for kw in ({"chunk": 2000}, {"chunk": 777}, {"start": n // 3, "stop": n // 2, "chunk": 500},
               {"start": 1, "stop": n // 5, "chunk": 10**9}):
        ref = _scan(path, seq, m.params, False, **kw)
        assert _scan(path, seq, m.params, True, **kw) == ref
        # Without starts (pass 2): the same widths.
        widths = [(e, {c: w for c, (w, *_) in lines.items()}) for e, lines in ref[0]]
        got = _scan(path, seq, m.params, True, starts=False, **kw)
        assert [(e, {c: w for c, (w, *_) in lines.items()}) for e, lines in got[0]] == widths
        assert got[1:] == ref[1:]
        assert len(ref[0]) > (1 if kw["chunk"] < 10**9 else 0)


def test_a_trace_scanner_decodes_trace_frames_and_odd_batches_alike(tmp_path, clean):
    path = tmp_path / "c.rbcap"
    path.write_bytes(clean)
    seq = {"from_tick": -1, "to_tick": None}
    ref = _scan(path, seq, PARAMS, False, chunk=3000)
    assert _scan(path, seq, PARAMS, True, chunk=3000) == ref
    got = _scan(path, seq, PARAMS, True, starts=False, chunk=3000)
    assert [{c: w for c, (w, *_) in x.items()} for _, x in got[0]] == [
        {c: w for c, (w, *_) in x.items()} for _, x in ref[0]]
    last = ref[0][-1][1]
    assert all(81 in w or 80 in w or 82 in w or 83 in w or 84 in w
               for c, (w, *_) in last.items() if c < 5)


@pytest.mark.parametrize("variant", ["clean", "c7"])
def test_analyze_streamed_is_the_reference_to_the_last_bit(tmp_path, clean, variant,
                                                           monkeypatch, capsys):
    """``rbscope analyze --stream always --json`` in bulk, read ahead by second processes,
    and record by record: the same JSON (WA, intervals, warnings, per-line counts), bit for
    bit."""
    from rbscope.analysis import streaming
    from rbscope.cli import main

    monkeypatch.setattr(streaming, "FIT_PULSES", 1200)
    monkeypatch.setattr(streaming, "CHUNK_RECORDS", 3000)
    path, geo = tmp_path / "c.rbcap", tmp_path / "g.toml"
    path.write_bytes(clean if variant == "clean" else _corrupt(clean, 307))
    geo.write_text(day.GEOMETRY)
    out = {}
    for bulk, ahead in ((False, None), (True, None), (True, 0)):
        monkeypatch.setattr(cap, "BULK", bulk)
        monkeypatch.setattr(cap, "AHEAD_BYTES", ahead)
        assert main(["analyze", str(path), "--geometry", str(geo), "--logical", "1GiB",
                     "--json", "--stream", "always"]) == 0
        out[bulk, ahead] = capsys.readouterr().out
    assert out[True, None] == out[False, None] == out[True, 0]
    got = json.loads(out[True, 0])
    assert got["streaming"]["pulses"] > 5000 and got["wa"]["value"] > 0


def test_counters_decoded_in_bulk_are_the_protocols(tmp_path, clean):
    """Every COUNTERS frame of the last snapshot, decoded with numpy, is what
    ``decode_frame_bytes`` makes of its bytes (field by field, raw bytes included)."""
    path = tmp_path / "c.rbcap"
    path.write_bytes(clean)
    r = cap.CaptureReader(path, keep_records=False, keep_snapshots=True, keep_traces=False,
                          skip_traces=True)
    assert len(r.snapshots) > 50
    for snap in r.snapshots[::7]:
        for c in snap.counters:
            ref = hp.decode_frame_bytes(c.raw, r.params)
            assert ref == c and ref.seq == c.seq and ref.raw == c.raw
            assert np.array(c.counters).sum() > 0 or snap is r.snapshots[0]


def _batch(params, base, records):
    """A TRACE_BATCH payload: ``records`` ``(channel, width, time)`` (END pulses) packed into
    the slots in order, the rest empty."""
    from rbscope.gateware.link import protocol as wire
    layout = wire.trace_record_layout(params)
    tmask = (1 << layout["time"].width) - 1
    words = []
    for channel, width, time in records:
        fields = {"kind": int(EventKind.END), "index": 1, "channel": channel, "width": width,
                  "time": time & tmask}
        words.append(sum(v << layout[n].offset for n, v in fields.items()))
    words += [wire.TRACE_EMPTY_KIND << layout["kind"].offset] * (
        wire.TRACE_BATCH_RECORDS - len(words))
    return hp.encode_payload(params, FrameType.TRACE_BATCH, {"base": base, "records": words})


@pytest.mark.parametrize("bulk", [True, False])
def test_a_trace_scanner_refuses_the_batches_the_protocol_refuses(tmp_path, bulk):
    """A CRC-valid TRACE_BATCH whose first record is not at its base, whose times go
    backwards, or that names a channel the device lacks gives no record and an error at its
    offset, as the in-memory reader (``TraceBatch.traces``) does; the batches around it read."""
    params = SnifferParams(channels=10)  # (a 4-bit channel field: 10-15 name no line)
    path = tmp_path / "c.rbcap"
    good = [(1, 100, 1_000), (2, 200, 1_010)]
    batches = [
        (1_000, good),
        (2_000, [(3, 300, 2_005), (4, 400, 2_010)]),  # first record not at the base
        (3_000, [(5, 500, 3_000), (6, 600, 3_020), (7, 700, 3_010)]),  # backwards
        (4_000, [(8, 800, 4_000), (12, 900, 4_001)]),  # channel 12 of 10
        (5_000, [(9, 50, 5_000), (0, 60, 5_000), (1, 70, 5_002)]),  # equal times: fine
    ]
    with cap.CaptureWriter(path) as w:
        w.event("start", time_ns=1)
        for seq, (base, recs) in enumerate(batches):
            w.raw_frame(hp.frame_bytes(FrameType.TRACE_BATCH, _batch(params, base, recs), seq),
                        time_ns=10 + seq)
    s = TraceScanner(path, params, bulk=bulk, chunk=10**6)
    got = {c: (w.tolist(), st.tolist()) for _, lines in s for c, (w, st, _g) in lines.items()}
    assert got == {1: ([100, 70], [900, 4_932]), 2: ([200], [810]), 9: ([50], [4_950]),
                   0: ([60], [4_940])}
    assert len(s.errors) == 3, s.errors
    offsets = [off for off, kind, _t, body in cap.iter_records(path)
               if kind == cap.RecordKind.FRAME and body and body[0] == FrameType.TRACE_BATCH]
    for err, off, why in zip(s.errors, offsets[1:4], ("does not follow base 2000",
                                                      "does not follow base 3000 and 3020",
                                                      "names channel 12 of a 10-channel"),
                             strict=True):
        assert err.startswith(f"offset {off}: TRACE_BATCH seq ") and why in err, err

"""Fuzzing the parsers: every defect the mutation fuzzer found, and the fuzzers themselves.

The short runs (a few hundred inputs per parser) are part of the default suite; the long ones
are marked ``slow``. ``tests/fuzzing.py`` holds the fuzzer and the targets (and runs a million
inputs from the command line).
"""

import json
import os
import random
import struct
import time
import zipfile
import zlib

import pytest

from rbscope.analysis.geometry import GeometryError, parse_geometry
from rbscope.analysis.presets import Preset, PresetError, parse_toml
from rbscope.device import capture as cap
from rbscope.device.protocol import FrameDecoder, encode_frame, encode_payload, info_values
from rbscope.gateware.link.protocol import FrameType
from rbscope.gateware.rb_sniffer.params import SnifferParams
from rbscope.recordings.sources import open_measurement
from rbscope.recordings.stream import RecordingError
from tests import fuzzing


@pytest.mark.parametrize("target", sorted(fuzzing.TARGETS))
def test_fuzz_short(target):
    failures = fuzzing.run(target, 150, seed=7)
    assert failures == []


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(fuzzing.TARGETS))
def test_fuzz_long(target):
    failures = fuzzing.run(target, int(os.environ.get("RBSCOPE_FUZZ_N", 20_000)), seed=11)
    assert failures == []


# UART decoder -----------------------------------------------------------------------------------


def test_noise_then_a_frame_decodes_at_any_chunking():
    """149 bytes of noise without END, then an INFO frame: one frame, fed whole or in two."""
    params = SnifferParams(channels=2)
    info = encode_frame(FrameType.INFO, encode_payload(None, FrameType.INFO, info_values(
        params, clock_hz=1_000_000)))
    noise = bytes((i * 37 + 11) % 256 for i in range(149)).replace(b"\xc0", b"\x01")
    whole = FrameDecoder().feed(noise + info)
    d = FrameDecoder()
    split = d.feed(noise) + d.feed(info)
    assert len(whole) == len(split) == 1 and whole[0].raw == split[0].raw


def test_the_frame_layout_cache_is_bounded():
    from rbscope.device import protocol
    d = FrameDecoder()
    for channels in range(1, 120):
        info = encode_payload(None, FrameType.INFO, info_values(
            SnifferParams(channels=channels), clock_hz=1_000_000))
        d.feed(encode_frame(FrameType.INFO, info) * 2)
    assert d.stats.frames == 2 * 119
    assert len(protocol._TABLES) <= 16
    assert len(protocol._decoders) <= 128 and len(protocol._encoders) <= 128


# Capture reader ---------------------------------------------------------------------------------


def _record(kind, body, time_ns=0):
    head = struct.pack("<BBIq", cap.SYNC, kind, len(body), time_ns)
    return head + body + struct.pack("<I", zlib.crc32(body, zlib.crc32(head[1:])))


@pytest.mark.parametrize("body", [
    b'{"registers": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # RecursionError
    b"[" * 100_000 + b"]" * 100_000,
    b'{"registers": {"PRESCALER": null}}',
    b'{"registers": {"PRESCALER": [1, 2]}}',
    b'{"registers": {"WINDOW_0_HI": 99999999999}}',
    b'{"registers": [["PRESCALER", 1], ["x"]]}',  # dict(regs) raised ValueError
    b'{"registers": 5}',
    b"5",
], ids=["deep-in-object", "deep", "null", "list", "huge", "pairs", "int", "bare"])
def test_odd_json_with_a_good_crc_is_reported(tmp_path, body):
    path = tmp_path / "odd.rbcap"
    path.write_bytes(fuzzing._CAPTURE_SEED + _record(cap.RecordKind.CONFIG, body))
    r = cap.CaptureReader(path)
    assert r.errors and r.errors[-1].startswith(f"offset {len(fuzzing._CAPTURE_SEED)}: ")
    # The analysis goes on with the last good registers.
    m = cap.capture_to_measurement(path)
    assert m.config.windows[1] == (100, 3000)


def test_odd_event_json_does_not_crash_the_analysis(tmp_path):
    path = tmp_path / "odd.rbcap"
    event = json.dumps({"event": "config", "class_names": 5}).encode()
    path.write_bytes(fuzzing._CAPTURE_SEED + _record(cap.RecordKind.EVENT, event))
    assert cap.capture_to_measurement(path).class_names[:2] == ("read", "program")


def test_registers_a_device_cannot_hold_are_an_error_not_a_crash(tmp_path):
    # Registers that are well-formed but do not fit the device (a window of 2^31 ticks).
    path = tmp_path / "wide.rbcap"
    regs = json.dumps({"registers": {"WINDOW_0_HI": 1 << 31}}).encode()
    path.write_bytes(fuzzing._CAPTURE_SEED + _record(cap.RecordKind.CONFIG, regs))
    with pytest.raises(cap.CaptureError, match="WINDOW_0_HI holds 24 bit"):
        cap.capture_to_measurement(path)
    with pytest.raises(RecordingError, match="WINDOW_0_HI"):
        open_measurement(path)


def test_trailing_garbage_reads_the_same_at_every_chunk_size(tmp_path):
    path = tmp_path / "tail.rbcap"
    data = fuzzing._CAPTURE_SEED
    path.write_bytes(data[:-60] + bytes(range(1, 40)))  # the last records cut by garbage
    ref = fuzzing._read_all(path, 1 << 22)
    for chunk in (1, 2, 3, 5, 50):
        assert fuzzing._read_all(path, chunk) == ref


def test_plausible_headers_in_garbage_cost_linear_work(tmp_path):
    """A record header every 6 bytes claiming a 1 MiB body once cost 21 s for 1.4 MB."""
    unit = struct.pack("<BBI", cap.SYNC, cap.RecordKind.CONFIG, (1 << 20) - 1)
    path = tmp_path / "headers.rbcap"
    path.write_bytes(fuzzing._CAPTURE_SEED + unit * (1_400_000 // len(unit)))
    start = time.process_time()
    r = cap.CaptureReader(path)
    assert time.process_time() - start < 5
    assert r.record_count > 10 and r.errors
    frame = struct.pack("<BBI", cap.SYNC, cap.RecordKind.FRAME, 4000) + b"\x01\x01"
    path.write_bytes(fuzzing._CAPTURE_SEED + frame * (1_400_000 // len(frame)) + b"\x00" * 64)
    start = time.process_time()
    r = cap.CaptureReader(path)
    assert time.process_time() - start < 5 and r.errors


# VCD importer -----------------------------------------------------------------------------------


def _vcd(tmp_path, text):
    path = tmp_path / "f.vcd"
    path.write_text(text)
    return path


@pytest.mark.parametrize("var", ["$var wire " + "4" * 4301 + " ! rb $end",
                                 "$var wire 99999999999 ! rb $end",
                                 "$var wire 0 ! rb $end"])
def test_var_sizes_beyond_reason_are_refused(tmp_path, var):
    path = _vcd(tmp_path, f"$timescale 1ns $end\n{var}\n$enddefinitions $end\n#0\n1!\n")
    with pytest.raises(RecordingError, match="size .* is not an integer from 1 to"):
        open_measurement(path)


def test_a_huge_bit_index_is_a_name_not_a_crash(tmp_path):
    path = _vcd(tmp_path, "$timescale 1ns $end\n$var wire 1 ! rb [" + "7" * 4301 +
                "] $end\n$enddefinitions $end\n#0\n1!\n#100\n0!\n#300\n1!\n#1000\n")
    m, _ = open_measurement(path)
    assert m.params.channels == 1


def test_time_jumps_cost_no_time(tmp_path):
    path = _vcd(tmp_path, "$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                "#0\n1!\n#100\n0!\n#3000\n1!\n#100000000000000000000\n")
    start = time.process_time()
    m, _ = open_measurement(path)
    assert time.process_time() - start < 5
    assert m.counts[0].histogram and sum(m.counts[0].histogram) == 1
    with pytest.raises(RecordingError, match="more than 100000 snapshots"):
        open_measurement(path, snapshot_seconds=1e-6)
    path = _vcd(tmp_path, "$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                "#0\n1!\n#99999999999\n")
    start = time.process_time()
    with pytest.raises(RecordingError, match="give a longer --snapshot"):
        open_measurement(path, snapshot_seconds=1e-6)
    assert time.process_time() - start < 5



def test_an_edge_beyond_64_bit_cycles_is_an_error(tmp_path):
    # Found by the fuzzer (seed 211732742947): a change at #9e35 overflowed the int64 cycles.
    path = _vcd(tmp_path, "$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                "#0\n1!\n#100\n0!\n#" + "9" * 36 + "\n1!\n#" + "9" * 37 + "\n")
    with pytest.raises(RecordingError, match="beyond cycle"):
        open_measurement(path)
    # Just inside the range the pulse is measured: 2**62 ns low is one overlong pulse.
    path = _vcd(tmp_path, "$timescale 1ns $end\n$var wire 1 ! rb $end\n$enddefinitions $end\n"
                f"#0\n1!\n#100\n0!\n#{1 << 62}\n1!\n#{(1 << 62) + 100}\n")
    m, _ = open_measurement(path)
    assert m.counts[0].overlong == 1 and sum(m.counts[0].classes) == 0


# sigrok sessions --------------------------------------------------------------------------------


@pytest.mark.parametrize("damage, message", [
    # Found by the fuzzer (seed 1000321): zipfile's NotImplementedError escaped the importer.
    ("version", "not a zip archive .*zip file version 19.8"),
    # Seeds 4006003 and 4007985: the member's encryption flag, RuntimeError from zipfile.
    ("encrypted", "cannot read member logic-1-1: File 'logic-1-1' is encrypted"),
    # Seed 4007384: a local header flagging its name as UTF-8 that is not (UnicodeDecodeError).
    ("name", "member metadata is corrupt: 'utf-8' codec can't decode"),
])
def test_damaged_session_zips_are_recording_errors(tmp_path, damage, message):
    rng = random.Random(0)
    fuzzing.fuzz_sr(rng, fuzzing._SR_SEED)  # the seed itself imports
    metadata, _, samples = fuzzing._SR_SEED.partition(fuzzing._SR_SEP)
    path = tmp_path / "s.sr"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata", metadata)
        z.writestr("logic-1-1", samples)
    m, _ = open_measurement(path)
    assert m.counts[1].busy_ticks > 0
    raw = bytearray(path.read_bytes())
    directory = raw.index(b"PK\x01\x02")
    if damage == "version":
        raw[directory + 6:directory + 8] = (198).to_bytes(2, "little")  # needs version 19.8
    elif damage == "encrypted":
        entry = raw.index(b"logic-1-1", directory) - 46
        raw[entry + 8] |= 1  # general purpose flag bit 0: encrypted
    else:
        assert raw[30:38] == b"metadata"  # the first local header and its name
        raw[7] |= 0x08  # flags, high byte: bit 11, the name is UTF-8
        raw[31] = 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(RecordingError, match=message):
        open_measurement(path)


# TOML -------------------------------------------------------------------------------------------


GEOMETRY = fuzzing._TOML_SEED.decode().split("[preset.")[0]


@pytest.mark.parametrize("text, error", [
    ("x = " + "[" * 1000 + "]" * 1000, "invalid TOML"),
    ("x = " + "4" * 4301, "invalid TOML"),
])
def test_toml_parser_limits_are_errors(text, error):
    with pytest.raises(GeometryError, match=error):
        parse_geometry(text)
    with pytest.raises(PresetError, match=error):
        parse_toml(text)


@pytest.mark.parametrize("old, new", [
    ("glitch_us = 0.2", "glitch_us = 1e308"),
    ("glitch_us = 0.2", "glitch_us = 1" + "0" * 309),
    ("erase = [2300, 10000]", "erase = [2300, 1e308]"),
    ("erase = [2300, 10000]", "erase = [2300, 1" + "0" * 309 + "]"),
    ("raw_gb = 16", "raw_gb = 1" + "0" * 309),
    ("channels = 2", "channels = 1" + "0" * 309),
])
def test_huge_numbers_are_errors(old, new):
    text = GEOMETRY.replace(old, new)
    assert text != GEOMETRY
    with pytest.raises(GeometryError, match="must be"):
        parse_geometry(text, "g.toml")


def test_huge_windows_do_not_overflow_the_tick_conversion():
    params = SnifferParams(channels=1)
    preset = Preset((("erase", 2300, 1e15),), glitch_us=1e15)
    for strict in (False, True):
        with pytest.raises(PresetError, match="glitch_us|erase"):
            preset.to_config(params, 1e-12, strict=strict)
    config, _, notes = Preset((("erase", 2300, 1e15),)).to_config(params, 1e-7)
    assert config.windows[0][1] == params.max_width and notes


def test_a_line_stuck_low_across_a_time_jump_is_counted_in_bulk(monkeypatch):
    """A 10^15-cycle low pulse once walked its 6 × 10^7 saturations one by one."""
    from rbscope.gateware.rb_sniffer import model
    from rbscope.gateware.rb_sniffer.params import SnifferConfig
    params = SnifferParams(channels=1, width_bits=16)
    config = SnifferConfig(windows=((1, 100),))

    def run(stuck):
        t = model.ChannelTracker(params, config, 0, initial=1)
        events = t.change(10, 0) + t.advance(stuck // 2) + t.change(stuck, 1)
        return t.counts, events

    stuck = 3000 * params.max_width + 12_345  # 3000 saturations
    bulk_counts, bulk_events = run(stuck)
    monkeypatch.setattr(model, "_SATURATIONS_LISTED", 10**9)
    counts, events = run(stuck)
    assert bulk_counts == counts and bulk_counts.overlong == 1
    assert counts.busy_ticks == stuck - 10
    assert bulk_events[0] == events[0] and bulk_events[-1000:] == events[-1000:]
    monkeypatch.undo()
    start = time.process_time()
    huge, _ = run(10**15)
    assert huge.busy_ticks == 10**15 - 10 and time.process_time() - start < 2

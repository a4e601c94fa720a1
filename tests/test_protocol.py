"""Host framing and decoding of the wire protocol (rbscope.device.protocol)."""

import random
import zlib

import pytest
from amaranth.lib import crc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbscope.device import protocol as hp
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import FrameType, Opcode
from rbscope.gateware.rb_sniffer.params import SnifferParams

PARAMS = [SnifferParams(channels=4), SnifferParams(channels=16, classes=3),
          SnifferParams(channels=64, classes=10, counter_bits=64, hist_bits=40,
                        timestamp_bits=64, hist_sub_bits=5, width_bits=32)]
DEVICE_TYPES = [FrameType.INFO, FrameType.STATUS, FrameType.COUNTERS, FrameType.HISTOGRAM,
                FrameType.TRACE, FrameType.TRACE_BATCH, FrameType.RESPONSE]


def info_values(params, **extra):
    values = dict(protocol_version=1, gateware_version=0x0001, channels=params.channels,
                  classes=params.classes, row=params.row, width_bits=params.width_bits,
                  counter_bits=params.counter_bits, hist_sub_bits=params.hist_sub_bits,
                  hist_bins=params.hist_bins, hist_bits=params.hist_bits,
                  timestamp_bits=params.timestamp_bits, glitch_bits=params.glitch_bits,
                  prescaler_bits=params.prescaler_bits, clock_hz=48_000_000, prescaler=48,
                  tick_period_ps=1_000_000, uart_divisor=16, build_id=0xDEADBEEF,
                  board=list(b"icebreaker".ljust(16, b"\0")))
    values.update(extra)
    return values


def info_frame(params, seq=0, **extra):
    payload = hp.encode_payload(None, FrameType.INFO, info_values(params, **extra))
    return hp.encode_frame(FrameType.INFO, payload, seq)


def random_payload(rng, params, ftype):
    size = wire.layout_bytes(PROTOCOL.payload_layout(params, ftype))
    return bytes(rng.randrange(256) for _ in range(size))


def test_crc_is_the_protocols_crc():
    algo = getattr(crc.catalog, wire.CRC_ALGORITHM)(data_width=8)
    for data in (b"", b"123456789", bytes(range(256))):
        assert algo.compute(data) == zlib.crc32(data)


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("ftype", PROTOCOL.frame_types)
def test_compiled_decoder_matches_from_bits(params, ftype):
    layout = PROTOCOL.payload_layout(params, ftype)
    decode = hp.compile_layout(layout)
    encode = hp.compile_encoder(layout)
    rng = random.Random(int(ftype) * 1000 + params.channels)

    def view_to_py(shape, value):
        # Read a data.Const the slow way: field by field through Amaranth.
        from amaranth.lib import data
        if isinstance(shape, data.ArrayLayout):
            return tuple(view_to_py(shape.elem_shape, value[i]) for i in range(shape.length))
        if isinstance(shape, data.StructLayout):
            return {name: view_to_py(f.shape, value[name]) for name, f in shape}
        return value

    for _ in range(20):
        bits = rng.getrandbits(layout.size)
        ref = layout.from_bits(bits)
        got = decode(bits)
        try:
            want = view_to_py(layout, ref)
        except ValueError:
            continue  # an enum field with a non-member value: Amaranth cannot show it
        assert got == want
        assert encode(got) == bits
        const = layout.const(got).as_value().value
        assert const == bits


def test_unknown_enum_values_stay_ints():
    decode = hp.compile_layout(wire.RESPONSE)
    value = wire.RESPONSE.const({"status": 0}).as_value().value | (0x77 << 24)
    assert decode(value)["status"] == 0x77


@given(st.binary(max_size=300))
def test_stuff_round_trip(data):
    stuffed = hp.stuff(data)
    assert wire.FRAME_END not in stuffed
    assert hp.unstuff(stuffed) == data


def test_unstuff_rejects_bad_escapes():
    assert hp.unstuff(bytes([wire.FRAME_ESC, 0x00])) is None
    assert hp.unstuff(b"ab" + bytes([wire.FRAME_ESC])) is None


def frames_for(params, rng, n):
    """A device stream: INFO first, then n random frames of any device type."""
    wires = [info_frame(params, 0)]
    raws = [None]
    for seq in range(1, n + 1):
        ftype = rng.choice(DEVICE_TYPES[1:])
        payload = random_payload(rng, params, ftype)
        if ftype == FrameType.RESPONSE:  # keep the status a valid member (any value decodes)
            payload = payload[:3] + bytes([rng.randrange(6)]) + payload[4:]
        wires.append(hp.encode_frame(ftype, payload, seq))
        raws.append(hp.frame_bytes(ftype, payload, seq))
    raws[0] = hp.frame_bytes(FrameType.INFO, hp.encode_payload(
        None, FrameType.INFO, info_values(params)), 0)
    return wires, raws


@pytest.mark.parametrize("params", PARAMS)
def test_every_frame_type_round_trips(params):
    rng = random.Random(1)
    wires, raws = frames_for(params, rng, 60)
    dec = hp.FrameDecoder()
    frames = dec.feed(b"".join(wires))
    assert [f.raw for f in frames] == raws
    assert dec.params == params
    assert dec.stats.errors == 0 and dec.stats.frames == 61
    info = frames[0]
    assert isinstance(info, hp.Info) and info.board_name == "icebreaker"
    assert info.params == params
    for f in frames[1:]:
        again = hp.decode_frame_bytes(f.raw, params)
        assert again == f
        assert f.to_dict()["type"] == f.TYPE.name.lower()


def test_split_at_every_position():
    params = PARAMS[0]
    wires, raws = frames_for(params, random.Random(2), 5)
    stream = b"".join(wires)
    for cut in range(len(stream) + 1):
        dec = hp.FrameDecoder()
        frames = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert [f.raw for f in frames] == raws, cut
    dec = hp.FrameDecoder()
    frames = [f for b in stream for f in dec.feed(bytes([b]))]
    assert [f.raw for f in frames] == raws


def test_errors_are_counted_and_recovered_from():
    params = PARAMS[0]
    dec = hp.FrameDecoder(params)
    good = hp.encode_frame(FrameType.TRACE, random_payload(random.Random(3), params,
                                                           FrameType.TRACE), 7)
    bad_crc = bytearray(good)
    bad_crc[5] ^= 0x01
    short_payload = hp.encode_frame(FrameType.TRACE, b"\x00" * 3, 8)  # length != layout
    wrong_version = hp.encode_frame(FrameType.TRACE, b"\x00" * 14, 9, version=9)
    body = bytes([0x42, 1, 0, 0, 0, 0])
    unknown = b"\xc0" + hp.stuff(body + zlib.crc32(body).to_bytes(4, "little")) + b"\xc0"
    stream = (b"noise" + good + bytes(bad_crc) + b"\xc0\x01\x02\xc0" + short_payload
              + wrong_version + unknown + b"\xc0" + b"\x55" * 5000 + b"\xc0"
              + bytes([0xC0, wire.FRAME_ESC, 0x00, 0xC0]) + good)
    frames = dec.feed(stream)
    assert [f.seq for f in frames] == [7, 7]
    s = dec.stats
    assert s.leading_bytes == 5
    assert (s.crc_errors, s.runts, s.bad_length, s.bad_version, s.unknown_type, s.oversize,
            s.bad_escapes) == (1, 1, 1, 1, 1, 1, 1)


def test_frames_needing_params_wait_for_info():
    params = PARAMS[0]
    dec = hp.FrameDecoder()
    trace = hp.encode_frame(FrameType.TRACE, random_payload(random.Random(4), params,
                                                            FrameType.TRACE), 1)
    assert dec.feed(b"\xc0" + trace) == []
    assert dec.stats.no_params == 1
    assert len(dec.feed(info_frame(params) + trace)) == 2


def test_impossible_info_is_rejected():
    params = PARAMS[0]
    dec = hp.FrameDecoder()
    assert dec.feed(b"\xc0" + info_frame(params, channels=0)) == []
    assert dec.feed(info_frame(params, hist_bins=3)) == []
    assert dec.stats.bad_info == 2 and dec.params is None
    with pytest.raises(hp.ProtocolError, match="hist_bins"):
        hp.params_from_info(hp.Info(0, b"", **{k: v for k, v in info_values(
            params, hist_bins=3).items()}))


def test_commands_encode_as_the_device_expects():
    raw = hp.encode_command(0x1234, Opcode.WRITE_REG, 0x0101, 0xCAFEBABE, seq=5)
    dec = hp.FrameDecoder(learn_params=False)
    (cmd,) = dec.feed(raw)
    assert isinstance(cmd, hp.Command)
    assert (cmd.tag, cmd.opcode, cmd.address, cmd.value, cmd.seq) == (
        0x1234, Opcode.WRITE_REG, 0x0101, 0xCAFEBABE, 5)
    with pytest.raises(hp.ProtocolError, match="value"):
        hp.encode_command(1, Opcode.WRITE_REG, 0, 1 << 32)


# Fuzzing -----------------------------------------------------------------------------------------


def _mutate(data, rng, edits):
    b = bytearray(data)
    for _ in range(edits):
        op = rng.randrange(4)
        if not b:
            break
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            del b[i]
        elif op == 2:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del b[i:]
    return bytes(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), edits=st.integers(0, 30), chunk=st.integers(1, 200))
def test_fuzz_decoder_yields_only_sent_frames(seed, edits, chunk):
    rng = random.Random(seed)
    params = rng.choice(PARAMS)
    wires, raws = frames_for(params, rng, 30)
    stream = _mutate(b"".join(wires), rng, edits)
    dec = hp.FrameDecoder()
    frames = []
    for i in range(0, len(stream), chunk):
        frames += dec.feed(stream[i:i + chunk])
    sent = set(raws)
    for f in frames:
        assert f.raw in sent  # never a frame that was not sent (CRC-checked)
    # Every frame whose bytes were untouched is still decoded, in order.
    assert [f.raw for f in frames] == [r for r in raws if r in {f.raw for f in frames}]
    if edits == 0:
        assert len(frames) == len(raws)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from([None, *PARAMS]))
def test_fuzz_random_bytes_never_crash(data, params):
    dec = hp.FrameDecoder(params)
    frames = dec.feed(data) + dec.feed(data[::-1])
    assert frames == []  # random bytes pass a CRC-32 with probability 2**-32
    assert dec.stats.bytes == 2 * len(data)


# Link monitor ------------------------------------------------------------------------------------


def _status(seq, timestamp, epoch=0):
    return hp.Status(seq, b"", snapshot=seq, timestamp=timestamp, epoch=epoch)


def test_sequence_gaps_wrap_at_16_bits():
    mon = hp.LinkMonitor()
    seqs = [0xFFFD, 0xFFFE, 0x0001, 0x0002, 0x0010]
    events = [mon.observe(_status(s, i)) for i, s in enumerate(seqs)]
    assert [e[0].lost for e in events if e] == [2, 13]
    assert mon.stats.lost_frames == 15 and mon.stats.seq_gaps == 2
    mon.resync()
    assert mon.observe(_status(0x4000, 100)) == []


def test_reset_epoch_and_build_detection():
    params = PARAMS[0]
    info = hp.Info(0, b"", **info_values(params))
    mon = hp.LinkMonitor()
    mon.observe(info)
    mon.observe(_status(1, 1000))
    (ev,) = mon.observe(_status(2, 10))
    assert ev.kind == "reset" and "backwards" in ev.reason
    (ev,) = mon.observe(_status(3, 20, epoch=1))
    assert (ev.kind, ev.old, ev.new) == ("epoch", 0, 1)
    (ev,) = mon.observe(hp.Info(0, b"", **info_values(params)))
    assert ev.kind == "reset" and "sequence" in ev.reason
    (ev,) = mon.observe(hp.Info(1, b"", **info_values(params, build_id=1)))
    assert ev.kind == "build"
    assert mon.stats.resets == 2 and mon.stats.epoch_changes == 1


def test_tick_period_is_one_definition_for_gateware_and_host():
    # 48 MHz, prescaler 3: the rounded period (20 833 ps) times 3, on both sides.
    assert wire.clock_period_ps(48_000_000) == 20_833
    assert wire.tick_period_ps(3, 48_000_000) == 62_499
    assert wire.tick_period_ps(0, 48_000_000) == 20_833  # 0 acts as 1
    info = hp.info_values(SnifferParams(channels=4), clock_hz=48_000_000, prescaler=3)
    assert info["tick_period_ps"] == wire.tick_period_ps(3, 48_000_000)

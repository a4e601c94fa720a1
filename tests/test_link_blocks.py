"""Amaranth-simulator tests of the link blocks: UART, frame encoder, command decoder."""

import random
import zlib
from fractions import Fraction

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from rbscope.gateware.link import protocol
from rbscope.gateware.link.framing import CommandDecoder, FrameEncoder, _SerialCrc
from rbscope.gateware.link.uart import UartRx, UartTx, check_divisor, divisor_cycles

from .link_reference import command_body, frame, unframe


def run(dut, *benches, processes=(), background=()):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in benches:
        sim.add_testbench(bench)
    for bench in background:
        sim.add_testbench(bench, background=True)
    for process in processes:
        sim.add_process(process)
    sim.run()


async def feed_wire(ctx, dut, data):
    """Put ``data`` on the command decoder's wire, each byte until taken, then let it
    settle."""
    for b in data:
        ctx.set(dut.wire.payload, b)
        ctx.set(dut.wire.valid, 1)
        await ctx.tick().until(dut.wire.ready)
    ctx.set(dut.wire.valid, 0)
    await ctx.tick().repeat(3)


# ---- UART ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("divisor", [4, 7, 16, Fraction(25, 3), Fraction(9, 2), Fraction(17, 4),
                                     Fraction(101, 12)])
def test_uart_tx_waveform_is_bit_accurate(divisor):
    # Bit k of a frame starts at cycle floor(k d): k d exactly for an integer divisor; for a
    # fraction (25/3: the FT2232H's 12 Mbaud from 100 MHz) never more than one cycle early, and
    # the error does not grow over the frame.
    dut = UartTx(divisor)
    data = [0x55, 0x00, 0xFF, 0xC3, 0x5A]
    line = []
    frame = sum(divisor_cycles(divisor, 10))

    async def send(ctx):
        for byte in data:
            ctx.set(dut.data.payload, byte)
            ctx.set(dut.data.valid, 1)
            await ctx.tick().until(dut.data.ready)
        ctx.set(dut.data.valid, 0)

    async def sample(ctx):
        async for _, _, tx in ctx.tick().sample(dut.tx):
            line.append(tx)
            if len(line) > (len(data) + 1) * frame + 10:
                return

    run(dut, send, sample)
    assert frame == int(10 * divisor)
    expected = []
    for byte in data:  # back to back: each frame begins right after the last one's stop bit
        bits = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
        for bit, n in zip(bits, divisor_cycles(divisor, 10), strict=True):
            expected += [bit] * n
    start = line.index(0)
    assert all(line[:start]) and line[start:start + len(expected)] == expected
    assert all(line[start + len(expected):])
    edges = [sum(divisor_cycles(divisor, k)) for k in range(11)]
    assert all(0 <= k * divisor - e < 1 for k, e in enumerate(edges))


def receive_wave(divisor, wave):
    """Drive ``wave`` (one level a cycle) into a UartRx; its bytes, and the number of bytes
    received before each framing error."""
    dut = UartRx(divisor)
    received, errors = [], []

    async def drive(ctx):
        ctx.set(dut.data.ready, 1)
        for level in wave:
            ctx.set(dut.rx, level)
            if ctx.get(dut.data.valid):
                received.append(ctx.get(dut.data.payload))
            if ctx.get(dut.error):
                errors.append(len(received))
            await ctx.tick()

    run(dut, drive)
    return received, errors


def ideal_wave(data, divisor, phase=0.0, rate=1.0):
    """The line sampled once per cycle for ``data`` sent at exactly ``clock / divisor`` baud
    times ``rate``, its first start bit beginning ``phase`` cycles into the wave (after idle)."""
    bits = []
    for byte in data:
        bits += [0] + [(byte >> i) & 1 for i in range(8)] + [1]
    period = float(divisor) / rate
    n = int(len(bits) * period + phase) + 4 * int(divisor)
    wave = []
    for c in range(n):
        k = int((c - 8 - phase) // period) if c >= 8 + phase else -1
        wave.append(bits[k] if 0 <= k < len(bits) else 1)
    return wave


@pytest.mark.parametrize("divisor, cases", [
    # 12 Mbaud from 100 MHz: any phase, and a host 2 % fast or slow.
    (Fraction(25, 3), ((0.0, 1.0), (0.37, 1.0), (0.81, 1.02), (0.5, 0.98))),
    # 4.5 cycles a bit: any phase at the exact rate (a 2 % error is a cycle by the stop bit).
    (Fraction(9, 2), ((0.0, 1.0), (0.37, 1.0), (0.81, 1.0)))])
def test_uart_rx_fractional_divisor_receives_the_exact_rate_at_any_phase(divisor, cases):
    # A host's bytes at the rate, their edges anywhere between two clock edges: every byte
    # arrives, no framing error.
    rng = random.Random(int(divisor * 100))
    for phase, rate in cases:
        data = [rng.randrange(256) for _ in range(12)]
        received, errors = receive_wave(divisor, ideal_wave(data, divisor, phase, rate))
        assert received == data and errors == [], (phase, rate)


def uart_wave(byte, divisor, stop=1):
    bits = [0] + [(byte >> i) & 1 for i in range(8)] + [stop]
    return [b for bit in bits for b in [bit] * divisor]


@pytest.mark.parametrize("divisor", [4, 5, 16, 33])
def test_uart_rx_receives_and_rejects_framing_errors(divisor):
    wave = [1] * 5
    for byte in (0xA5, 0x00, 0xFF):
        wave += uart_wave(byte, divisor)
    wave += uart_wave(0x3C, divisor, stop=0) + [0] * (3 * divisor) + [1] * (2 * divisor)
    wave += [0] * max(1, divisor // 2 - 2) + [1] * (3 * divisor)  # a glitch, not a start bit
    wave += uart_wave(0x81, divisor) + [1] * (3 * divisor)
    received, errors = receive_wave(divisor, wave)
    assert received == [0xA5, 0x00, 0xFF, 0x81]
    assert errors == [3]


def test_uart_loopback_random_bytes_with_clock_mismatch():
    """Equal divisors, and TX 33 into RX 32 (3 % baud error, within 8N1 tolerance)."""
    for tx_div, rx_div in ((16, 16), (33, 32), (32, 33), (4, 4),
                           (Fraction(25, 3), Fraction(25, 3)), (Fraction(25, 3), 8)):
        m = Module()
        m.submodules.tx = tx = UartTx(tx_div)
        m.submodules.rx = rx = UartRx(rx_div)
        m.d.comb += rx.rx.eq(tx.tx)
        rng = random.Random(int(tx_div * 3))
        data = [rng.randrange(256) for _ in range(40)]
        got = []

        async def send(ctx, tx=tx, data=data, tx_div=tx_div):
            for byte in data:
                ctx.set(tx.data.payload, byte)
                ctx.set(tx.data.valid, 1)
                await ctx.tick().until(tx.data.ready)
            ctx.set(tx.data.valid, 0)
            await ctx.tick().repeat(20 * int(tx_div + 1))

        async def receive(ctx, rx=rx, got=got):
            ctx.set(rx.data.ready, 1)
            async for _, _, valid, payload, err in ctx.tick().sample(
                    rx.data.valid, rx.data.payload, rx.error):
                assert not err
                if valid:
                    got.append(payload)

        run(m, send, processes=[receive])
        assert got == data, (tx_div, rx_div)


# ---- FrameEncoder -------------------------------------------------------------------------------

def test_frame_encoder_matches_reference_framing():
    dut = FrameEncoder()
    rng = random.Random(3)
    bodies = [bytes([0xC0, 0xDB, 0x00, 0x7E]), bytes([0x01]), bytes([0xDB] * 5 + [0xC0])]
    bodies += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(30)]
    wire = bytearray()

    async def send(ctx):
        for body in bodies:
            for i, b in enumerate(body):
                ctx.set(dut.body.payload, {"data": b, "last": i == len(body) - 1})
                ctx.set(dut.body.valid, 1)
                await ctx.tick().until(dut.body.ready)
            ctx.set(dut.body.valid, 0)
            if rng.random() < 0.5:
                await ctx.tick().repeat(rng.randrange(1, 5))
        # (Time for the last frame's CRC, computed a bit per cycle, and its closing bytes.)
        await ctx.tick().repeat(60)

    # The consumer's ready toggles randomly; capture the bytes actually transferred.
    async def consumer(ctx):
        r = random.Random(9)
        while True:
            ready = r.random() < 0.7
            ctx.set(dut.wire.ready, ready)
            valid, payload = ctx.get(dut.wire.valid), ctx.get(dut.wire.payload)
            await ctx.tick()
            if valid and ready:
                wire.append(payload)

    run(dut, send, background=[consumer])
    assert bytes(wire) == b"".join(frame(b) for b in bodies)
    good, bad = unframe(bytes(wire))
    assert good == bodies and bad == 0


# ---- the serial CRC -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2])
def test_serial_crc_gives_the_frames_crc_a_byte_at_a_time_and_matches_its_own(seed):
    """Bit by bit, the register gives CRC-32/ISO-HDLC's bytes (zlib's) by shifting, and after
    the message and those bytes it matches (and not after a damaged one)."""
    rng = random.Random(seed)
    message = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    dut = _SerialCrc()
    out = {}

    async def feed(ctx, data):
        for byte in data:
            for k in range(8):
                ctx.set(dut.valid, 1)
                ctx.set(dut.data, (byte >> k) & 1)
                await ctx.tick()
        ctx.set(dut.valid, 0)

    async def bench(ctx):
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await feed(ctx, message)
        out["before"] = ctx.get(dut.match)
        crc = []
        for _ in range(4):
            crc.append(ctx.get(dut.byte))
            ctx.set(dut.shift, 1)
            await ctx.tick()
        ctx.set(dut.shift, 0)
        out["crc"] = bytes(crc)
        for tail, key in ((out["crc"], "whole"), (bytes([out["crc"][0] ^ 1]) + out["crc"][1:],
                                                  "damaged")):
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await feed(ctx, message + tail)
            out[key] = ctx.get(dut.match)

    run(dut, bench)
    assert out["crc"] == zlib.crc32(message).to_bytes(4, "little")
    assert out["whole"] == 1 and out["damaged"] == 0 and out["before"] == 0


# ---- CommandDecoder -----------------------------------------------------------------------------

def test_command_decoder_accepts_good_and_flags_bad_frames():
    dut = CommandDecoder()
    good_body = command_body(0x1234, protocol.Opcode.WRITE_REG, 0x0101, 0xC0DBC0DB)
    corrupted = bytearray(frame(good_body))
    corrupted[5] ^= 0x10
    stream_ = (
        b"\x00\x11garbage"  # line noise before the first delimiter: one bad frame
        + frame(good_body)
        + bytes([protocol.FRAME_END] * 3)  # empty frames: ignored
        + bytes(corrupted)
        + frame(command_body(1, protocol.Opcode.PING, 0, 0, length=9))
        + frame(command_body(2, protocol.Opcode.PING, 0, 0, ftype=protocol.FrameType.INFO))
        + frame(command_body(3, protocol.Opcode.PING, 0, 0)[:-1])  # one byte short
        + frame(command_body(4, protocol.Opcode.PING, 0, 0) + b"\x00")  # one byte long
        + bytes([protocol.FRAME_END, 0x41, protocol.FRAME_ESC, 0x41, protocol.FRAME_END])
        + frame(command_body(0xFFFE, protocol.Opcode.CLEAR, 7, 0xDB))
    )
    results = []

    async def feed(ctx):
        await feed_wire(ctx, dut, stream_)

    async def take(ctx):
        ctx.set(dut.command.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(dut.command.valid,
                                                            dut.command.payload):
            if valid:
                results.append((payload.status, payload.command.tag, payload.command.opcode,
                                payload.command.address, payload.command.value))

    run(dut, feed, processes=[take])
    ok, bad = protocol.ResponseStatus.OK, protocol.ResponseStatus.BAD_FRAME
    assert [r[0] for r in results] == [bad, ok, bad, bad, bad, bad, bad, bad, ok]
    assert results[1][1:] == (0x1234, protocol.Opcode.WRITE_REG, 0x0101, 0xC0DBC0DB)
    assert results[8][1:] == (0xFFFE, protocol.Opcode.CLEAR, 7, 0xDB)


def test_command_decoder_rotates_the_held_command_a_byte_at_a_time():
    """``rotate`` turns the held command by a byte (its bytes come out at the low byte, in
    order); ten rotations bring it back; ``load`` replaces its value field, ``zero`` clears it;
    and a new frame still replaces it once taken."""
    dut = CommandDecoder()
    first = command_body(0xA1B2, protocol.Opcode.WRITE_REG, 0x0C0D, 0x11223344)
    second = command_body(0x5566, protocol.Opcode.PING, 0x0001, 0xCAFEF00D)
    out = {}

    async def send(ctx, body):
        await feed_wire(ctx, dut, frame(body))

    async def bench(ctx):
        await send(ctx, first)
        assert ctx.get(dut.command.valid)
        before = ctx.get(dut.command.payload.command.as_value())
        low = []
        for _ in range(10):
            low.append(ctx.get(dut.command.payload.command.as_value()) & 0xFF)
            ctx.set(dut.rotate, 1)
            await ctx.tick()
        ctx.set(dut.rotate, 0)
        out["low"] = bytes(low)
        out["back"] = ctx.get(dut.command.payload.command.as_value()) == before
        ctx.set(dut.load, 1)
        ctx.set(dut.value, 0x89ABCDEF)
        await ctx.tick()
        ctx.set(dut.load, 0)
        cmd = ctx.get(dut.command.payload.command)
        out["loaded"] = (cmd.tag, cmd.opcode, cmd.address, cmd.value)
        ctx.set(dut.zero, 1)
        ctx.set(dut.load, 1)  # (zero wins)
        await ctx.tick()
        ctx.set(dut.zero, 0)
        ctx.set(dut.load, 0)
        cmd = ctx.get(dut.command.payload.command)
        out["zeroed"] = (cmd.tag, cmd.opcode, cmd.address, cmd.value)
        ctx.set(dut.command.ready, 1)
        await ctx.tick()
        ctx.set(dut.command.ready, 0)
        await send(ctx, second)
        cmd = ctx.get(dut.command.payload.command)
        out["second"] = (ctx.get(dut.command.valid), cmd.tag, cmd.opcode, cmd.address,
                         cmd.value)

    run(dut, bench)
    assert out["low"] == first[6:]  # the command's bytes, after the 6-byte header
    assert out["back"]
    assert out["loaded"] == (0xA1B2, protocol.Opcode.WRITE_REG, 0x0C0D, 0x89ABCDEF)
    assert out["zeroed"] == (0xA1B2, protocol.Opcode.WRITE_REG, 0x0C0D, 0)
    assert out["second"] == (1, 0x5566, protocol.Opcode.PING, 0x0001, 0xCAFEF00D)


def test_infos_divisor_field_holds_integers_as_they_are_and_fractions_in_64ths():
    from rbscope.gateware.link.protocol import decode_uart_divisor, encode_uart_divisor

    assert [encode_uart_divisor(d) for d in (4, 16, 33)] == [4, 16, 33]  # builds as before
    assert encode_uart_divisor(Fraction(25, 3)) == 0x8000 | 533
    assert decode_uart_divisor(0x8000 | 533) == pytest.approx(25 / 3, rel=1e-3)
    assert encode_uart_divisor(Fraction(32, 2)) == 16 and decode_uart_divisor(16) == 16
    with pytest.raises(ValueError, match="does not fit"):
        encode_uart_divisor(1 << 15)
    for bad in (Fraction(7, 2), Fraction(1000, 101), 3, 4.5, True):
        with pytest.raises(ValueError, match="UART divisor"):
            check_divisor(bad)
    assert check_divisor(Fraction(16, 1)) == 16  # a whole fraction: the integer UART

"""The device core in the Amaranth simulator: commands in, frames out, decoded with the shared
layouts (``protocol.py``) and checked against the reference model."""

import pytest
from amaranth.sim import Simulator

from rbscope.device import protocol as host_protocol
from rbscope.gateware.device import DeviceCore
from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link import protocol
from rbscope.gateware.link.controller import build_id
from rbscope.gateware.link.counters import TRACE_FIFO_DEPTH
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train

from .link_reference import command_body, frame, unframe

P = SnifferParams(channels=3)
CLOCK_HZ = 1_000_000
REGS = {r.name: r for r in protocol.register_map(P, snapshot_period=CLOCK_HZ // 10)}
OP = protocol.Opcode


def batch_records(bodies):
    """The pulse records of TRACE_BATCH frame bodies, unpacked by the host's decoder (which
    checks a batch's order and its empty slots), as ``(header, Trace)``."""
    out = []
    for body in bodies:
        header, _ = decode(body)
        assert header.type == protocol.FrameType.TRACE_BATCH
        batch = host_protocol.decode_frame_bytes(bytes(body), P)
        out += [(header, t) for t in batch.traces(P)]
    return out


def decode(body):
    header = protocol.HEADER.from_bits(int.from_bytes(body[:6], "little"))
    payload = body[6:]
    layout = PROTOCOL.payload_layout(P, header.type)
    assert header.length == len(payload) == protocol.layout_bytes(layout)
    return header, layout.from_bits(int.from_bytes(payload, "little"))


class CoreBench:
    def __init__(self, ram_output_registers=True, trace_depth=TRACE_FIFO_DEPTH, dut=None,
                 batches_in_bursts=True):
        self.dut = dut if dut is not None else DeviceCore(
            P, clock_hz=CLOCK_HZ, uart_divisor=4, board="unit-test",
            ram_output_registers=ram_output_registers, trace_depth=trace_depth,
            batches_in_bursts=batches_in_bursts)
        self.wire = bytearray()
        self.frames = []
        self.seen = 0

    async def collect(self, ctx):
        ctx.set(self.dut.tx.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(self.dut.tx.valid,
                                                            self.dut.tx.payload):
            if valid:
                self.wire.append(payload)

    async def send(self, ctx, body):
        await self.send_wire(ctx, frame(body))

    async def send_wire(self, ctx, wire):
        """Send these bytes as they are (a frame, or a deliberately damaged one)."""
        for b in wire:
            ctx.set(self.dut.rx.payload, b)
            ctx.set(self.dut.rx.valid, 1)
            await ctx.tick().until(self.dut.rx.ready)
        ctx.set(self.dut.rx.valid, 0)

    async def wait_frames(self, ctx, count, limit=200_000):
        """Wait until ``count`` more frames have arrived; return them decoded."""
        for _ in range(limit // 50):
            good, bad = unframe(bytes(self.wire))
            assert bad == 0, bytes(self.wire).hex()
            if len(good) >= self.seen + count:
                new = [decode(b) for b in good[self.seen:self.seen + count]]
                self.seen += count
                return new
            await ctx.tick().repeat(50)
        raise AssertionError(f"timed out waiting for {count} frames")

    async def wait_records(self, ctx, count, limit=200_000):
        """Wait until TRACE_BATCH frames have brought ``count`` more pulse records; return them
        (``(header, Trace)``; the frames must be TRACE_BATCH frames and bring no more)."""
        for _ in range(limit // 50):
            good, bad = unframe(bytes(self.wire))
            assert bad == 0, bytes(self.wire).hex()
            records = batch_records(good[self.seen:])
            if len(records) >= count:
                self.seen = len(good)
                assert len(records) == count
                return records
            await ctx.tick().repeat(50)
        raise AssertionError(f"timed out waiting for {count} records")

    async def configure(self, ctx, config, trace):
        """Write the registers a model run needs: no periodic snapshots, glitch threshold 2,
        ``config``'s class windows, the trace on or off."""
        await self.command(ctx, 1, OP.WRITE_REG, REGS["SNAPSHOT_PERIOD"].address, 0)
        await self.command(ctx, 2, OP.WRITE_REG, REGS["GLITCH_TICKS"].address, 2)
        for k, (lo, hi) in enumerate(config.windows):
            await self.command(ctx, 3, OP.WRITE_REG, REGS[f"WINDOW_{k}_LO"].address, lo)
            await self.command(ctx, 3, OP.WRITE_REG, REGS[f"WINDOW_{k}_HI"].address, hi)
        await self.command(ctx, 4, OP.WRITE_REG, REGS["TRACE_ENABLE"].address, int(trace))

    async def play(self, ctx, trains):
        """Drive the R/B# lines with ``trains`` (cycle numbers relative to now), all lines
        ready before their first edge."""
        schedule = sorted((c, ch, lvl) for ch, t in enumerate(trains) for c, lvl in t.edges)
        now = 0
        word = (1 << P.channels) - 1
        for cycle, ch, level in schedule:
            await ctx.tick().repeat(cycle - now)
            now = cycle
            word = (word & ~(1 << ch)) | (level << ch)
            ctx.set(self.dut.rb, word)

    async def command(self, ctx, tag, opcode, address=0, value=0, extra=0):
        await self.send(ctx, command_body(tag, opcode, address, value))
        frames = await self.wait_frames(ctx, 1 + extra)
        header, resp = frames[0]
        assert header.type == protocol.FrameType.RESPONSE and resp.tag == tag
        return resp, frames[1:]

    def run(self, bench, *processes):
        sim = Simulator(self.dut)
        sim.add_clock(1e-6)
        sim.add_process(self.collect)
        for process in processes:
            sim.add_process(process)
        sim.add_testbench(bench)
        sim.run()


@pytest.mark.parametrize("ram_output_registers", [True, False])
def test_info_registers_and_errors(ram_output_registers):
    b = CoreBench(ram_output_registers)
    out = {}

    async def bench(ctx):
        resp, _ = await b.command(ctx, 1, OP.PING, value=0xDEADBEEF)
        out["ping"] = (resp.status, resp.value)
        resp, [(header, info)] = await b.command(ctx, 2, OP.READ_INFO, extra=1)
        out["info"] = (header, info)
        for name, value in (("PRESCALER", 3), ("WINDOW_2_HI", 0xABCDEF), ("GLITCH_TICKS", 0x1FF),
                            ("CHANNEL_ENABLE_0", 0xFF), ("IDLE_TICKS_HI", 7)):
            resp, _ = await b.command(ctx, 10, OP.WRITE_REG, REGS[name].address, value)
            out[name] = (resp.status, resp.value)
        resp, [(_, info)] = await b.command(ctx, 3, OP.READ_INFO, extra=1)
        out["info_after"] = info
        resp, _ = await b.command(ctx, 11, OP.READ_REG, REGS["WINDOW_2_HI"].address)
        out["read_window"] = (resp.status, resp.value)
        resp, _ = await b.command(ctx, 12, OP.READ_REG, REGS["ID"].address)
        out["id"] = (resp.status, resp.value)
        resp, _ = await b.command(ctx, 13, OP.WRITE_REG, REGS["ID"].address, 5)
        out["write_id"] = resp.status
        resp, _ = await b.command(ctx, 14, OP.READ_REG, 0x7777)
        out["bad_address"] = resp.status
        resp, _ = await b.command(ctx, 15, 0x55)
        out["bad_opcode"] = resp.status
        # A corrupted command frame: BAD_FRAME, tag unknown.
        wire = bytearray(frame(command_body(16, OP.PING, 0, 0)))
        wire[4] ^= 0x01
        await b.send_wire(ctx, wire)
        [(_, resp)] = await b.wait_frames(ctx, 1)
        out["corrupt"] = (resp.status, resp.tag)
        out["cfg"] = ctx.get(b.dut.sniffer.cfg)

    b.run(bench)
    assert out["ping"] == (protocol.ResponseStatus.OK, 0xDEADBEEF)
    header, info = out["info"]
    assert header.type == protocol.FrameType.INFO
    assert (info.channels, info.classes, info.hist_bins, info.counter_bits) == (3, 5, 176, 48)
    assert info.clock_hz == CLOCK_HZ and info.prescaler == 1 and info.tick_period_ps == 1_000_000
    assert info.uart_divisor == 4
    assert info.build_id == build_id(P, CLOCK_HZ, 4, "unit-test")
    assert bytes(info.board).rstrip(b"\0") == b"unit-test"
    # INFO is exactly the shared definition (the one test devices use too).
    expected = PROTOCOL.info_values(P, clock_hz=CLOCK_HZ, prescaler=1, uart_divisor=4,
                                    build_id=build_id(P, CLOCK_HZ, 4, "unit-test"),
                                    board="unit-test")
    assert {name: ([int(x) for x in info[name]] if name == "board" else int(info[name]))
            for name, _ in PROTOCOL.info_layout(P)} == expected
    # After PRESCALER = 3, INFO follows it, with the tick computed as the host computes it.
    after = out["info_after"]
    assert after.prescaler == 3
    assert after.tick_period_ps == protocol.tick_period_ps(3, CLOCK_HZ) == 3_000_000
    ok = protocol.ResponseStatus.OK
    assert out["PRESCALER"] == (ok, 3)
    assert out["WINDOW_2_HI"] == (ok, 0xABCDEF)
    assert out["GLITCH_TICKS"] == (ok, 0xFF)  # 8-bit register: read back truncated
    assert out["CHANNEL_ENABLE_0"] == (ok, 0x7)  # 3 channels
    assert out["IDLE_TICKS_HI"] == (ok, 7)
    assert out["read_window"] == (ok, 0xABCDEF)
    assert out["id"] == (ok, protocol.ID_MAGIC)
    assert out["write_id"] == protocol.ResponseStatus.READ_ONLY
    assert out["bad_address"] == protocol.ResponseStatus.BAD_ADDRESS
    assert out["bad_opcode"] == protocol.ResponseStatus.UNKNOWN_OPCODE
    assert out["corrupt"] == (protocol.ResponseStatus.BAD_FRAME, 0xFFFF)
    cfg = out["cfg"]
    assert cfg.prescaler == 3 and cfg.windows[2].hi == 0xABCDEF and cfg.glitch_ticks == 0xFF
    assert cfg.idle_ticks == (7 << 32) | 1_000_000


@pytest.mark.parametrize(("trace", "ram_output_registers"), [
    (True, True), pytest.param(True, False, marks=pytest.mark.heavy),
    pytest.param(False, True, marks=pytest.mark.heavy),
    pytest.param(False, False, marks=pytest.mark.heavy)])
def test_snapshot_histograms_clear_and_trace_match_model(trace, ram_output_registers):
    b = CoreBench(ram_output_registers)
    config = SnifferConfig(prescaler=1, glitch_ticks=2, idle_ticks=1_000_000,
                           windows=((5, 20), (20, 60), (60, 200)))
    trains = [Train(1, [(100, 0), (110, 1), (150, 0), (180, 1), (300, 0), (301, 1)]),
              Train(1, [(50, 0), (90, 1), (400, 0), (520, 1)]),
              Train(1, [])]
    out = {}
    model = SnifferModel(P, config).run(trains, 600)
    glitch = P.counter_index(Counter.GLITCH)
    want_trace = [(q.channel, q.index, q.width) for q in model.pulses if q.index != glitch]

    async def bench(ctx):
        await b.configure(ctx, config, trace)
        # Play the trains from here (the model only needs the pulse widths, which do not
        # depend on the absolute start with prescaler 1). The device has been running since
        # reset with every line ready, as the model assumes.
        await b.play(ctx, trains)
        await ctx.tick().repeat(100)
        if trace:
            out["trace"] = await b.wait_records(ctx, len(want_trace))
            await ctx.tick().repeat(3000)  # (the batch's frame ends)
            good, _ = unframe(bytes(b.wire))
            out["batches"] = [decode(body) for body in good[b.seen:]]
            b.seen = len(good)
        resp, frames = await b.command(ctx, 5, OP.SNAPSHOT, extra=1 + P.channels)
        out["snapshot"] = frames
        chunks = -(-P.hist_bins // protocol.HIST_CHUNK)
        resp, frames = await b.command(ctx, 6, OP.READ_HISTOGRAMS, extra=P.channels * chunks)
        out["hist"] = frames
        resp, _ = await b.command(ctx, 7, OP.CLEAR)
        out["clear"] = (resp.status, resp.value)
        resp, frames = await b.command(ctx, 8, OP.SNAPSHOT, extra=1 + P.channels)
        out["after_clear"] = frames

    b.run(bench)
    (sh, status), *rows = out["snapshot"]
    assert sh.type == protocol.FrameType.STATUS
    assert status.flags & protocol.StatusFlags.SOLICITED
    assert status.flags & protocol.StatusFlags.TRACE_ON == (protocol.StatusFlags.TRACE_ON
                                                            if trace else 0)
    assert status.epoch == 0
    for ch, (header, counters) in enumerate(rows):
        assert header.type == protocol.FrameType.COUNTERS and counters.channel == ch
        assert counters.snapshot == status.snapshot
        expected = model.channels[ch].row(P)[:P.counters_per_channel]
        assert list(counters.counters) == expected
    hist = {ch: [0] * (P.hist_bins + protocol.HIST_CHUNK) for ch in range(P.channels)}
    for header, chunk in out["hist"]:
        assert header.type == protocol.FrameType.HISTOGRAM
        hist[chunk.channel][chunk.first:chunk.first + protocol.HIST_CHUNK] = list(chunk.bins)
    for ch in range(P.channels):
        assert hist[ch][:P.hist_bins] == model.channels[ch].histogram
        assert not any(hist[ch][P.hist_bins:])
    assert out["clear"] == (protocol.ResponseStatus.OK, 1)
    (_, status2), *rows2 = out["after_clear"]
    assert status2.epoch == 1
    assert all(not any(c.counters) for _, c in rows2)
    seqs = [h.seq for h, _ in out["snapshot"]]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    if trace:
        got = [(t.channel, t.index, t.width) for _, t in out["trace"]]
        assert len(got) == 4 and got == want_trace
        # A record's time is when its pulse was classified, at most 4(N+1)+1 cycles after
        # the pulse ended (1 µs ticks at prescaler 1): the pulses end at cycles 90, 110, 180
        # and 520 of the trains (the 1-cycle pulse at 300 is a glitch).
        times = [r.timestamp for _, r in out["trace"]]
        for time, end in zip(times[1:], (110, 180, 520), strict=True):
            assert abs((time - times[0]) - (end - 90)) <= 4 * (P.channels + 1) + 1
        assert not out["batches"]  # (no frame after the records' own)


def test_periodic_snapshots_and_histograms():
    b = CoreBench()
    out = {}

    async def bench(ctx):
        await b.command(ctx, 1, OP.WRITE_REG, REGS["HIST_PERIOD"].address, 2)
        await b.command(ctx, 2, OP.WRITE_REG, REGS["SNAPSHOT_PERIOD"].address, 3000)
        chunks = -(-P.hist_bins // protocol.HIST_CHUNK)
        # Two periodic snapshots, the second followed by all histograms.
        frames = await b.wait_frames(ctx, 2 * (1 + P.channels) + P.channels * chunks,
                                     limit=400_000)
        out["frames"] = frames

    b.run(bench)
    types = [h.type for h, _ in b.frames or out["frames"]]
    F = protocol.FrameType
    per = [F.STATUS] + [F.COUNTERS] * P.channels
    chunks = -(-P.hist_bins // protocol.HIST_CHUNK)
    assert types == per + per + [F.HISTOGRAM] * (P.channels * chunks)
    statuses = [s for h, s in out["frames"] if h.type == F.STATUS]
    assert statuses[1].snapshot == statuses[0].snapshot + 1
    assert not statuses[0].flags & protocol.StatusFlags.SOLICITED
    assert statuses[1].timestamp > statuses[0].timestamp


@pytest.mark.parametrize("ram_output_registers", [True, False])
def test_status_counts_frames_received_and_receive_errors(ram_output_registers):
    """STATUS's ``rx_frames`` and ``rx_errors`` count every good and every bad frame received
    (the command asking for the snapshot included), whole and cumulative."""
    b = CoreBench(ram_output_registers)
    out = []

    async def corrupt(ctx, tag):
        wire = bytearray(frame(command_body(tag, OP.PING, 0, 0)))
        wire[3] ^= 0x40
        await b.send_wire(ctx, wire)
        [(_, resp)] = await b.wait_frames(ctx, 1)
        assert resp.status == protocol.ResponseStatus.BAD_FRAME

    async def bench(ctx):
        await b.command(ctx, 1, OP.WRITE_REG, REGS["SNAPSHOT_PERIOD"].address, 0)
        for tag in range(2, 5):
            await b.command(ctx, tag, OP.PING, value=tag)
        await corrupt(ctx, 5)
        await corrupt(ctx, 6)
        for tag in (7, 8):
            _, [(header, status), *_] = await b.command(ctx, tag, OP.SNAPSHOT,
                                                        extra=1 + P.channels)
            assert header.type == protocol.FrameType.STATUS
            out.append((status.rx_frames, status.rx_errors))
        await corrupt(ctx, 9)
        _, [(_, status), *_] = await b.command(ctx, 10, OP.SNAPSHOT, extra=1 + P.channels)
        out.append((status.rx_frames, status.rx_errors))

    b.run(bench)
    # WRITE_REG, 3 PINGs and the SNAPSHOT: 5 good frames; 2 corrupted ones.
    assert out == [(5, 2), (6, 2), (7, 3)]


def test_window_register_writes_strobe_the_window_port():
    """A sniffer that holds its own window bounds (in DSP blocks) is told of each window write:
    one strobe per window register, with the value, and nothing for other registers."""
    b = CoreBench()
    strobes = []

    async def watch(ctx):
        ctrl = b.dut.controller
        async for _, _, load, value in ctx.tick().sample(ctrl.win_load, ctrl.win_data):
            for bit in range(2 * P.classes):
                if load >> bit & 1:
                    strobes.append((bit, value))

    async def bench(ctx):
        for tag, (name, value) in enumerate((("WINDOW_2_HI", 0xABCDE), ("PRESCALER", 3),
                                             ("WINDOW_0_LO", 5), ("WINDOW_4_HI", 0x12345))):
            resp, _ = await b.command(ctx, tag, OP.WRITE_REG, REGS[name].address, value)
            assert resp.status == protocol.ResponseStatus.OK

    b.run(bench, watch)
    assert strobes == [(5, 0xABCDE), (0, 5), (9, 0x12345)]


def _burst():
    """``(config, trains, records)``: twelve pulses on every line close together, more than the
    default trace FIFO holds while TRACE frames drain it, and the records they make."""
    config = SnifferConfig(prescaler=1, glitch_ticks=2, idle_ticks=1_000_000,
                           windows=((5, 20), (20, 60), (60, 200)))
    trains = [Train(1, [e for k in range(12) for e in ((100 + 70 * k + 9 * ch, 0),
                                                         (130 + 70 * k + 9 * ch, 1))])
              for ch in range(P.channels)]
    model = SnifferModel(P, config).run(trains, 1200)
    glitch = P.counter_index(Counter.GLITCH)
    return config, trains, [(q.channel, q.index, q.width) for q in model.pulses
                            if q.index != glitch]


@pytest.mark.parametrize("ram_output_registers", [pytest.param(True, marks=pytest.mark.heavy),
                                                  False])
def test_trace_records_lost_to_a_full_fifo_are_counted(ram_output_registers):
    """More pulses than the trace FIFO holds while TRACE frames drain it: every pulse is either
    sent or counted as lost, per channel (COUNTERS) and in total (STATUS), with either loss
    counter pipeline (``ram_output_registers``)."""
    b = CoreBench(ram_output_registers)
    config, trains, want_trace = _burst()
    out = {}

    async def bench(ctx):
        await b.configure(ctx, config, trace=True)
        await b.play(ctx, trains)
        # Long enough for the FIFO to drain.
        await ctx.tick().repeat(40_000)
        good, _ = unframe(bytes(b.wire))
        out["trace"] = batch_records(good[b.seen:])
        b.seen = len(good)
        _, frames = await b.command(ctx, 5, OP.SNAPSHOT, extra=1 + P.channels)
        out["snapshot"] = frames

    b.run(bench)
    sent = [(t.channel, t.index, t.width) for _, t in out["trace"]]
    (_, status), *rows = out["snapshot"]
    per_channel = [counters.trace_lost for _, counters in rows]
    assert status.trace_lost > 0 and len(sent) > 0
    assert len(sent) + status.trace_lost == len(want_trace)
    assert sum(per_channel) == status.trace_lost
    for ch in range(P.channels):
        mine = [t for t in want_trace if t[0] == ch]
        assert len([t for t in sent if t[0] == ch]) + per_channel[ch] == len(mine)
    left = iter(want_trace)
    assert all(any(t == w for w in left) for t in sent)  # in order, a subsequence


@pytest.mark.heavy
def test_a_deep_trace_fifo_holds_what_the_default_one_loses():
    """The ECP5 boards' deep trace FIFO (``trace_depth`` above 16, ``counters._deep_fifo``) in
    the whole device: the burst that overflows the default FIFO above is sent whole, in order,
    with nothing counted lost. (Heavy: 15 s of simulation; ``tests/test_trace_fifo.py``
    checks the FIFO itself against a queue in the default suite.)"""
    b = CoreBench(ram_output_registers=True, trace_depth=64)
    config, trains, want_trace = _burst()
    assert len(want_trace) > 2 * TRACE_FIFO_DEPTH
    out = {}

    async def bench(ctx):
        await b.configure(ctx, config, trace=True)
        await b.play(ctx, trains)
        out["trace"] = await b.wait_records(ctx, len(want_trace))
        _, frames = await b.command(ctx, 5, OP.SNAPSHOT, extra=1 + P.channels)
        out["snapshot"] = frames

    b.run(bench)
    assert [(t.channel, t.index, t.width) for _, t in out["trace"]] == want_trace
    (_, status), *rows = out["snapshot"]
    assert status.trace_lost == 0 and not any(c.trace_lost for _, c in rows)


async def _after_status(b, ctx):
    """Wait until the STATUS frame of a snapshot has gone out."""
    for _ in range(20_000):
        good, _ = unframe(bytes(b.wire))
        if any(decode(body)[0].type == protocol.FrameType.STATUS for body in good[b.seen:]):
            return
        await ctx.tick().repeat(10)
    raise AssertionError("no STATUS frame")


def test_a_response_between_a_snapshots_frames_does_not_end_it():
    """A command answered between two frames of a snapshot: the snapshot goes on where it was
    (before, its remaining COUNTERS frames were never sent)."""
    b = CoreBench()
    out = {}

    async def bench(ctx):
        await b.send(ctx, command_body(1, OP.SNAPSHOT, 0, 0))
        await _after_status(b, ctx)
        await b.send(ctx, command_body(2, OP.PING, 0, 7))
        await ctx.tick().repeat(30_000)
        good, _ = unframe(bytes(b.wire))
        out["frames"] = [decode(body) for body in good]

    b.run(bench)
    F = protocol.FrameType
    types = [h.type for h, _ in out["frames"]]
    assert types.count(F.RESPONSE) == 2 and types.count(F.STATUS) == 1
    # The PING's response went between the snapshot's frames, and every channel's row came.
    assert types.index(F.STATUS) < types.index(F.RESPONSE, 1) < len(types) - 1
    rows = [f for h, f in out["frames"] if h.type == F.COUNTERS]
    assert [r.channel for r in rows] == list(range(P.channels))
    assert len({r.snapshot for r in rows}) == 1


@pytest.mark.parametrize("between", [True, False])
def test_trace_batches_go_between_a_snapshots_frames(between):
    """Pulses classified while a snapshot is sent: TRACE_BATCH frames go between its COUNTERS
    frames (the FIFO does not wait the whole snapshot), and the snapshot is whole; or, in a
    build without (``batches_in_bursts=False``, the iCEBreaker's), after it."""
    b = CoreBench(batches_in_bursts=between)
    config, trains, want_trace = _burst()
    out = {}

    async def bench(ctx):
        await b.configure(ctx, config, trace=True)
        await b.send(ctx, command_body(5, OP.SNAPSHOT, 0, 0))
        await b.play(ctx, trains)
        await ctx.tick().repeat(40_000)
        good, _ = unframe(bytes(b.wire))
        out["frames"] = [decode(body) for body in good[b.seen:]]
        out["records"] = batch_records([body for body in good[b.seen:]
                                        if decode(body)[0].type == protocol.FrameType.TRACE_BATCH])

    b.run(bench)
    F = protocol.FrameType
    types = [h.type for h, _ in out["frames"]]
    first, last = types.index(F.COUNTERS), len(types) - 1 - types[::-1].index(F.COUNTERS)
    assert (F.TRACE_BATCH in types[first:last]) == between
    rows = [f for h, f in out["frames"] if h.type == F.COUNTERS]
    assert [r.channel for r in rows] == list(range(P.channels))
    sent = [(t.channel, t.index, t.width) for _, t in out["records"]]
    left = iter(want_trace)
    assert sent and all(any(t == w for w in left) for t in sent)  # in order, a subsequence

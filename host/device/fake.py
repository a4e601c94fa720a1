"""A pure-Python rbscope device on a pseudo-terminal, for tests and demos without gateware.

:class:`FakeDevice` speaks the protocol of :mod:`rbscope.gateware.link.protocol` exactly as the
gateware does (same framing, layouts, opcodes, statuses, register map and frame order) on the
master side of a pty; a host opens :attr:`FakeDevice.path` like ``/dev/ttyUSB0``. Its counts come
from the bit-exact reference model (:class:`rbscope.gateware.rb_sniffer.model.ChannelTracker`) run
on pulse trains
(e.g. from :func:`rbscope.device.stimulus.random_trains`) in step with a simulated clock, so after
the trains end its counters equal ``SnifferModel(params, config).run(trains, cycles)`` exactly.

Test-only extras: :class:`LinkFaults` (bit flips, dropped bytes, garbage between frames, flipped
command bytes), :meth:`FakeDevice.vanish` / :meth:`FakeDevice.reappear` (unplug: the pty is
closed and a new one opened, at a new path or behind the same symlink), :meth:`FakeDevice.reset`
(logic reset: sequence and timestamp restart; counters, which are reset-less, survive), and
``hist_preload`` (histogram bins start near 2^hist_bits so the host's wrap handling is exercised).

What is not modelled: the gateware's pipeline latency, mailbox drops, the UART's bit timing.
"""

import heapq
import math
import os
import random
import select
import threading
import time
import traceback
import tty
from dataclasses import dataclass

from rbscope.gateware.link import protocol as wire
from rbscope.gateware.link.protocol import (
    HIST_CHUNK,
    Access,
    FrameType,
    Opcode,
    ResponseStatus,
    StatusFlags,
    config_from_registers,
    register_map,
    register_values,
)
from rbscope.gateware.rb_sniffer.model import (
    SYNC_LATENCY,
    ChannelCounts,
    ChannelTracker,
    SnifferModel,
)
from rbscope.gateware.rb_sniffer.params import Counter

from .protocol import NO_TAG, Command, FrameDecoder, encode_frame, encode_payload, info_values

__all__ = ["FakeDevice", "LinkFaults"]


@dataclass
class LinkFaults:
    """Test-only link corruption, each a probability per frame (``rx_flip``: per command)."""

    flip: float = 0.0  #: flip one random bit of a frame sent
    drop: float = 0.0  #: drop one random byte of a frame sent
    garbage: float = 0.0  #: send 1–20 random bytes before a frame
    rx_flip: float = 0.0  #: flip one random bit of a command received
    seed: int = 0


class FakeDevice:
    """A simulated rbscope device behind a pseudo-terminal.

    Parameters
    ----------
    params : SnifferParams
    trains : list of Train, optional
        One per channel (default: every line ready forever).
    cycles : int, optional
        Length of the trains in cycles (default: the last edge + 1).
    clock_hz : int
        The simulated system clock (reported in INFO).
    time_scale : float
        Simulated seconds per wall-clock second.
    start : str
        ``"clear"``: the trains start at the first CLEAR command (with the configuration the
        registers hold then); ``"now"``: at once, with ``config``.
    config : SnifferConfig, optional
        Initial register values (default: the register map's reset values).
    snapshot_period : int, optional
        Reset value of SNAPSHOT_PERIOD in cycles (default: 100 ms of clock).
    faults : LinkFaults, optional
    hist_preload : int
        Initial value of every histogram bin (modulo 2^hist_bits).
    symlink : str, optional
        A path kept pointing at the current pty (as udev's ``/dev/serial/by-id`` links do).
    """

    def __init__(self, params, trains=None, cycles=None, *, clock_hz=1_000_000, time_scale=1.0,
                 start="clear", config=None, snapshot_period=None, faults=None, hist_preload=0,
                 symlink=None, board="fake", build_id=0x00FA4E01, trace_budget=64):
        self.params = params
        self.trains = trains
        if cycles is None:
            cycles = max((t.edges[-1][0] + 1 for t in trains or () if t.edges), default=1)
        self.cycles = cycles
        self.clock_hz = clock_hz
        self.time_scale = time_scale
        self.board = board
        self.build_id = build_id
        self.faults = faults or LinkFaults()
        self._rng = random.Random(self.faults.seed)
        self.hist_preload = hist_preload
        self.trace_budget = trace_budget
        self.symlink = symlink
        self.start_mode = start
        period = snapshot_period if snapshot_period is not None else clock_hz // 10
        # (A build without the trace summariser, as the iCEBreaker's: no TRACE_SUMMARY.)
        self.regmap = {r.address: r for r in register_map(params, snapshot_period=period)
                       if r.name != "TRACE_SUMMARY"}
        self.regs = {r.name: r.reset for r in self.regmap.values()}
        if config is not None:
            self.regs.update(register_values(params, config))
        self._lock = threading.RLock()
        self._master = self._slave = None
        self.path = None
        self.pty_path = None
        self._decoder = FrameDecoder(learn_params=False)
        self.seq = 0
        self.snapshot_no = 0
        self.epoch = 0
        self.rx_frames = 0
        self.rx_errors = 0
        self.trace_lost = [0] * params.channels
        self.tx_dropped = 0
        self.frames_sent = 0
        self._t0 = None
        self._cycle = 0
        self._ts = 0
        self._ts_cycle = 0
        self._next_snapshot = None
        self._periodic_count = 0
        self._trackers = None
        self._stim_start = None
        self._changes = None
        self._baseline = [ChannelCounts.zeros(params) for _ in range(params.channels)]
        self._lows = 0
        self._ready_since = 0
        self.config_at_start = None
        self._thread = None
        self._stop = threading.Event()
        self._open_pty()
        if start == "now":
            self._start_stimulus()

    # pty -----------------------------------------------------------------------------------------

    def _open_pty(self):
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline: a byte pipe like a USB UART
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.pty_path = os.ttyname(slave)
        if self.symlink:
            tmp = f"{self.symlink}.tmp{os.getpid()}"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(self.pty_path, tmp)
            os.replace(tmp, self.symlink)
            self.path = self.symlink
        else:
            self.path = self.pty_path
        self._decoder.reset()

    def _close_pty(self):
        for fd in (self._master, self._slave):
            if fd is not None:
                os.close(fd)
        self._master = self._slave = None

    def vanish(self):
        """Simulate an unplug: close the pty (the host's reads fail). Counting continues."""
        with self._lock:
            self._close_pty()
            if self.symlink and os.path.lexists(self.symlink):
                os.unlink(self.symlink)

    def reappear(self):
        """Plug back in: a new pty (new path; the symlink, if any, points at it)."""
        with self._lock:
            if self._master is None:
                self._open_pty()
        return self.path

    def reset(self):
        """Logic reset: the frame sequence and the timestamp restart; counters survive."""
        with self._lock:
            self.seq = 0
            self._ts = 0
            self._ts_cycle = self._cycle
            self.snapshot_no = 0

    # Running -------------------------------------------------------------------------------------

    def start(self):
        """Start the device's thread; return self."""
        self._t0 = time.monotonic()
        self._next_snapshot = self.regs["SNAPSHOT_PERIOD"] or None
        self._thread = threading.Thread(target=self._run, name="rbscope-fake-device",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop the thread and close the pty."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        with self._lock:
            self._close_pty()
            if self.symlink and os.path.lexists(self.symlink):
                os.unlink(self.symlink)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _run(self):
        try:
            while not self._stop.is_set():
                with self._lock:
                    master = self._master
                if master is None:
                    time.sleep(0.005)
                    self._step()
                    continue
                try:
                    ready, _, _ = select.select([master], [], [], 0.002)
                except (OSError, ValueError):
                    continue
                if ready:
                    with self._lock:
                        try:
                            data = os.read(master, 4096) if self._master == master else b""
                        except BlockingIOError:
                            data = b""
                        except OSError:
                            data = b""  # EIO: the host side is not open
                        if data:
                            self._receive(data)
                self._step()
        except Exception:  # pragma: no cover - a crash of the device thread is a test failure
            traceback.print_exc()
            raise

    def _now_cycle(self):
        return int((time.monotonic() - self._t0) * self.clock_hz * self.time_scale)

    def _step(self):
        with self._lock:
            now = self._now_cycle()
            self._advance(now)
            period = self.regs["SNAPSHOT_PERIOD"]
            if period and self._next_snapshot is None:
                self._next_snapshot = now + period
            if period and self._next_snapshot is not None and now >= self._next_snapshot:
                self._next_snapshot = now + period
                self._send_snapshot(solicited=False)
                self._periodic_count += 1
                hp = self.regs["HIST_PERIOD"]
                if hp and self._periodic_count % hp == 0:
                    self._send_histograms()
            elif not period:
                self._next_snapshot = None

    # Model ---------------------------------------------------------------------------------------

    @property
    def config(self):
        return config_from_registers(self.params, self.regs)

    def _start_stimulus(self):
        config = self.config
        self.config_at_start = config
        self._stim_start = self._cycle
        trains = self.trains or []
        self._trackers = [ChannelTracker(self.params, config, i,
                                         initial=trains[i].initial if trains else 1)
                          for i in range(self.params.channels)]

        def changes(train, ch):
            level = train.initial
            for cycle, new in train.edges:
                if new != level:
                    level = new
                    yield cycle + SYNC_LATENCY, ch, new
        self._changes = heapq.merge(*(changes(t, i) for i, t in enumerate(trains)))
        self._pending_change = next(self._changes, None)
        self._lows = sum(1 for i, t in enumerate(trains)
                         if t.initial == 0 and (config.enable >> i) & 1)

    def _advance(self, now):
        prescaler = max(self.regs["PRESCALER"], 1)
        self._ts += (now - self._ts_cycle) // prescaler
        self._ts_cycle = now - (now - self._ts_cycle) % prescaler
        self._cycle = now
        if self._trackers is None:
            return
        s_now = now - self._stim_start
        events = []
        pc = self._pending_change
        trackers = self._trackers
        while pc is not None and pc[0] < s_now:
            cycle, ch, level = pc
            tr = trackers[ch]
            if tr.enabled:
                was_low = tr.low
                events += tr.change(cycle, level)
                if tr.low != was_low:
                    self._lows += 1 if tr.low else -1
                    if self._lows == 0:
                        self._ready_since = self._timestamp_of(cycle + self._stim_start)
            pc = next(self._changes, None)
        self._pending_change = pc
        for tr in trackers:
            if tr.enabled and tr.low:
                events += tr.advance(s_now)
        if events and self.regs["TRACE_ENABLE"]:
            self._send_traces(events)

    def _timestamp_of(self, cycle):
        return max(0, self._ts - (self._cycle - cycle) // max(self.regs["PRESCALER"], 1))

    def expected(self):
        """Return the reference model's result for the whole trains (what the device ends at)."""
        return SnifferModel(self.params, self.config_at_start).run(self.trains, self.cycles)

    @property
    def finished(self):
        """True once the trains have ended (every count is final)."""
        with self._lock:
            return (self._trackers is not None
                    and self._cycle - self._stim_start > self.cycles + SYNC_LATENCY + 1)

    def counts(self, ch):
        """The channel's counts in the current epoch (exact), as a ChannelCounts."""
        p = self.params
        if self._trackers is None:
            c = ChannelCounts.zeros(p)
        else:
            c = self._trackers[ch].counts
        return c.minus(self._baseline[ch], p)

    # Frames out ----------------------------------------------------------------------------------

    def _send(self, ftype, values):
        payload = encode_payload(self.params, ftype, values)
        frame = encode_frame(ftype, payload, self.seq)
        self.seq = (self.seq + 1) & 0xFFFF
        self.frames_sent += 1
        f = self.faults
        rng = self._rng
        if f.garbage and rng.random() < f.garbage:
            frame = bytes(rng.randrange(256) for _ in range(rng.randint(1, 20))) + frame
        if f.flip and rng.random() < f.flip:
            b = bytearray(frame)
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
            frame = bytes(b)
        if f.drop and rng.random() < f.drop:
            i = rng.randrange(len(frame))
            frame = frame[:i] + frame[i + 1:]
        self._tx(frame)

    def _tx(self, data):
        master = self._master
        if master is None:
            self.tx_dropped += len(data)
            return
        deadline = time.monotonic() + 0.5
        view = memoryview(data)
        while view:
            try:
                n = os.write(master, view)
                view = view[n:]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.tx_dropped += len(view)
                    return
                select.select([], [master], [], 0.01)
            except OSError:
                self.tx_dropped += len(view)
                return

    def _status_values(self, solicited):
        flags = 0
        idle = self.config.idle_ticks
        if self._lows == 0 and self._ts - self._ready_since >= idle:
            flags |= StatusFlags.QUIESCENT
        if self.regs["TRACE_ENABLE"]:
            flags |= StatusFlags.TRACE_ON
        if solicited:
            flags |= StatusFlags.SOLICITED
        mask = (1 << self.params.timestamp_bits) - 1
        return {"snapshot": self.snapshot_no, "timestamp": self._ts & mask,
                "quiet_since": self._ready_since & mask, "epoch": self.epoch,
                "flags": int(flags), "rx_frames": self.rx_frames & 0xFFFFFFFF,
                "rx_errors": self.rx_errors & 0xFFFFFFFF,
                "trace_lost": sum(self.trace_lost) & 0xFFFFFFFF}

    def _send_snapshot(self, solicited):
        p = self.params
        self.snapshot_no = (self.snapshot_no + 1) & 0xFFFF
        self._send(FrameType.STATUS, self._status_values(solicited))
        mask = (1 << p.counter_bits) - 1
        for ch in range(p.channels):
            row = self.counts(ch).row(p)[:p.counters_per_channel]
            self._send(FrameType.COUNTERS, {
                "snapshot": self.snapshot_no, "channel": ch, "epoch": self.epoch & 0xFFFF,
                "timestamp": self._ts & ((1 << p.timestamp_bits) - 1),
                "trace_lost": self.trace_lost[ch] & 0xFFFFFFFF,
                "counters": [w & mask for w in row]})

    def _send_histograms(self):
        p = self.params
        mod = 1 << p.hist_bits
        for ch in range(p.channels):
            hist = self.counts(ch).histogram
            for c in range(math.ceil(p.hist_bins / HIST_CHUNK)):
                first = c * HIST_CHUNK
                bins = [(hist[b] + self.hist_preload) % mod if b < p.hist_bins else 0
                        for b in range(first, first + HIST_CHUNK)]
                self._send(FrameType.HISTOGRAM, {
                    "channel": ch, "first": first, "epoch": self.epoch,
                    "timestamp": self._ts & ((1 << p.timestamp_bits) - 1), "bins": bins})

    def _send_traces(self, events):
        p = self.params
        glitch = p.classes + Counter.GLITCH
        budget = self.trace_budget
        records = []
        for ev in events:
            if ev.index == glitch:
                continue  # glitches are side counts: never traced
            if budget <= 0:
                self.trace_lost[ev.channel] += 1
                continue
            budget -= 1
            records.append((ev, self._timestamp_of(ev.end_cycle + self._stim_start)))
        # In TRACE_BATCH frames, as the gateware sends them: up to 32 records of one aligned
        # window of the records' time bits, the rest of the slots empty.
        layout = wire.trace_record_layout(p)
        time_bits = layout["time"].width
        empty = layout.const({"kind": wire.TRACE_EMPTY_KIND}).as_value().value
        records.sort(key=lambda record: record[1])  # (classification order)
        while records:
            base = records[0][1]
            batch = []
            while (records and len(batch) < wire.TRACE_BATCH_RECORDS
                   and records[0][1] >> time_bits == base >> time_bits):
                ev, ts = records.pop(0)
                batch.append(layout.const({
                    "kind": int(ev.kind), "index": ev.index, "channel": ev.channel,
                    "width": ev.width, "time": ts & ((1 << time_bits) - 1)}).as_value().value)
            batch += [empty] * (wire.TRACE_BATCH_RECORDS - len(batch))
            self._send(FrameType.TRACE_BATCH, {"base": base, "records": batch})

    def _send_info(self):
        self._send(FrameType.INFO, info_values(
            self.params, clock_hz=self.clock_hz, prescaler=self.regs["PRESCALER"],
            build_id=self.build_id, board=self.board))

    def _respond(self, tag, opcode, status, address=0, value=0):
        self._send(FrameType.RESPONSE, {"tag": tag, "opcode": int(opcode), "status": status,
                                        "address": address, "value": value & 0xFFFFFFFF})

    # Commands ------------------------------------------------------------------------------------

    def _receive(self, data):
        f = self.faults
        if f.rx_flip and self._rng.random() < f.rx_flip:
            b = bytearray(data)
            i = self._rng.randrange(len(b))
            b[i] ^= 1 << self._rng.randrange(8)
            data = bytes(b)
        stats = self._decoder.stats
        before = stats.errors + stats.no_params
        frames = self._decoder.feed(data)
        bad = stats.errors + stats.no_params - before
        for _ in range(bad):
            self.rx_errors += 1
            self._respond(NO_TAG, 0, ResponseStatus.BAD_FRAME)
        for frame in frames:
            if not isinstance(frame, Command):
                self.rx_errors += 1
                self._respond(NO_TAG, 0, ResponseStatus.BAD_FRAME)
                continue
            self.rx_frames += 1
            self._command(frame)

    def _command(self, cmd):
        op, tag, addr, value = cmd.opcode, cmd.tag, cmd.address, cmd.value
        self._advance(self._now_cycle())
        if op == Opcode.PING:
            self._respond(tag, op, ResponseStatus.OK)
        elif op == Opcode.READ_INFO:
            self._respond(tag, op, ResponseStatus.OK)
            self._send_info()
        elif op == Opcode.READ_REG:
            reg = self.regmap.get(addr)
            if reg is None:
                self._respond(tag, op, ResponseStatus.BAD_ADDRESS, addr)
            else:
                self._respond(tag, op, ResponseStatus.OK, addr, self.regs[reg.name])
        elif op == Opcode.WRITE_REG:
            reg = self.regmap.get(addr)
            if reg is None:
                self._respond(tag, op, ResponseStatus.BAD_ADDRESS, addr)
            elif reg.access is not Access.RW:
                self._respond(tag, op, ResponseStatus.READ_ONLY, addr)
            elif value >= 1 << reg.bits:
                self._respond(tag, op, ResponseStatus.BAD_VALUE, addr)
            else:
                if reg.name == "PRESCALER":
                    self._advance(self._now_cycle())
                self.regs[reg.name] = value
                if reg.name == "SNAPSHOT_PERIOD":
                    self._next_snapshot = self._cycle + value if value else None
                self._respond(tag, op, ResponseStatus.OK, addr, value)
        elif op == Opcode.SNAPSHOT:
            self._respond(tag, op, ResponseStatus.OK)
            self._send_snapshot(solicited=True)
        elif op == Opcode.READ_HISTOGRAMS:
            self._respond(tag, op, ResponseStatus.OK)
            self._send_histograms()
        elif op == Opcode.CLEAR:
            self.epoch = (self.epoch + 1) & 0xFFFF
            if self._trackers is None and self.start_mode == "clear":
                self._start_stimulus()
            else:
                self._baseline = [self._trackers[ch].counts.copy() if self._trackers
                                  else ChannelCounts.zeros(self.params)
                                  for ch in range(self.params.channels)]
                self.hist_preload = 0
            self._respond(tag, op, ResponseStatus.OK, 0, self.epoch)
        else:
            self._respond(tag, op, ResponseStatus.UNKNOWN_OPCODE)

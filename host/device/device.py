"""Talk to an rbscope device (hardware, the Verilator simulation, or the fake device) over serial.

:class:`Device` knows nothing about what is behind the port: it speaks the protocol of
:mod:`rbscope.gateware.link.protocol` through :mod:`rbscope.device.protocol` and pyserial
(``serial.serial_for_url``, so a device path, a pty path or a pyserial URL all work).

Commands carry a 16-bit tag; each gets exactly one RESPONSE with the same tag. A command whose
response does not arrive within ``timeout`` is sent again (``retries`` times); an error RESPONSE
raises :class:`CommandError` naming the opcode and register. Frames the device sends on its own
(periodic snapshots, histograms, traces) are decoded as they arrive, written to the capture file
if one is attached, and queued for :meth:`Device.frames` / :meth:`Device.snapshots`.

When the port vanishes (USB unplug: ``OSError`` / ``SerialException``), the device reopens it
(the same path, or whatever ``port`` returns when it is a callable) for up to
``reconnect_timeout`` seconds, re-reads INFO, checks that the build and parameters are the
same (else :class:`DeviceChanged`), records a ``reconnect`` event and carries on. Counters are
cumulative on the device, so the next snapshot holds every count of the outage.
"""

import collections
import math
import termios
import time
from dataclasses import dataclass, field

import serial

from rbscope.gateware.extensions import PROTOCOL
from rbscope.gateware.link.protocol import (
    HIST_CHUNK,
    ID_MAGIC,
    Access,
    Opcode,
    StatusFlags,
    config_from_registers,
    decode_uart_divisor,
    histogram_layout,
    layout_bytes,
    register_values,
)
from rbscope.gateware.rb_sniffer.params import SnifferConfig

from .capture import HistogramAccumulator
from .protocol import (
    CRC_BYTES,
    HEADER_BYTES,
    NO_TAG,
    Command,
    Counters,
    FrameDecoder,
    Histogram,
    Info,
    LinkMonitor,
    LinkStats,
    Response,
    ResponseStatus,
    Snapshot,
    Status,
    encode_command,
)

__all__ = [
    "Device", "DeviceError", "CommandError", "DeviceTimeout", "PortError", "DeviceChanged",
    "ConfigError", "DEFAULT_BAUDRATE", "BOARD_BAUDRATES", "open_any_rate",
]

#: The link rate :class:`Device` opens a port at unless told another: the ULX3S's (its FT231X
#: stops at 3 Mbaud); the iCEBreaker and the ECPIX-5 run 12 Mbaud (``BOARD_BAUDRATES``).
DEFAULT_BAUDRATE = 3_000_000

#: The link rates :func:`open_any_rate` tries, in order: 3 Mbaud (3.03 at 100 MHz, the
#: ULX3S's); 12 Mbaud, the FT2232H's highest UART rate, the iCEBreaker's and the ECPIX-5's (a
#: board class's ``uart_baud``).
BOARD_BAUDRATES = (3_000_000, 12_000_000)


class DeviceError(Exception):
    """Base class of the errors of :class:`Device`."""


class PortError(DeviceError):
    """The port cannot be opened, or vanished and did not come back."""


class DeviceTimeout(DeviceError):
    """The device did not answer (after every retry)."""


class DeviceChanged(DeviceError):
    """After a reconnection the device is a different build or has other parameters."""


class ConfigError(DeviceError, ValueError):
    """A configuration that the device cannot hold (nothing was written): a usage error."""


#: Registers of the host's map that a build may lack: ``TRACE_SUMMARY`` (builds without the
#: trace summariser, the iCEBreaker's).
OPTIONAL_REGISTERS = frozenset({"TRACE_SUMMARY"})


class CommandError(DeviceError):
    """The device answered a command with an error status."""

    def __init__(self, opcode, status, address=None, register=None):
        self.opcode = opcode
        self.status = status
        self.address = address
        self.register = register
        try:
            op = Opcode(opcode).name
        except ValueError:
            op = f"opcode 0x{opcode:02x}"
        try:
            st = ResponseStatus(status).name
        except ValueError:
            st = f"status 0x{status:02x}"
        where = ""
        if register is not None:
            where = f" on register {register} (0x{address:04x})"
        elif address is not None and opcode in (Opcode.READ_REG, Opcode.WRITE_REG):
            where = f" on address 0x{address:04x}"
        super().__init__(f"{op}{where} failed: {st}")


@dataclass
class _Assembly:
    status: Status
    time_ns: int
    counters: dict = field(default_factory=dict)


class _Reconnected(Exception):
    pass


class Device:
    """An rbscope device behind a serial port.

    Parameters
    ----------
    port : str or callable
        Device path, pty path or pyserial URL; or a callable returning one (asked again on every
        reconnection, for devices that come back at another path).
    baudrate : int
        Link rate (3 Mbaud on real boards; ignored by ptys).
    timeout : float
        Seconds to wait for a RESPONSE (or the frames that follow it) before retrying.
    retries : int
        Extra attempts of a command after a timeout or a BAD_FRAME answer.
    reconnect_timeout : float
        Seconds to keep trying to reopen a vanished port (0: raise :class:`PortError` at once).
    capture : rbscope.device.capture.CaptureWriter, optional
        Receives every decoded frame and the host events.
    queue_limit : int
        Frames kept for :meth:`frames` at most; older ones are dropped (and counted in
        ``queue_overflow``) when nobody consumes them.

    The constructor opens the port and reads INFO (``info``, ``params``, ``registers``).
    """

    def __init__(self, port, *, baudrate=DEFAULT_BAUDRATE, timeout=0.5, retries=3,
                 reconnect_timeout=0.0, capture=None, queue_limit=100_000):
        self._port = port
        self.baudrate = baudrate
        self.timeout = timeout
        self.retries = retries
        self.reconnect_timeout = reconnect_timeout
        self.capture = capture
        self.stats = LinkStats()
        self.decoder = FrameDecoder(stats=self.stats)
        self.monitor = LinkMonitor(self.stats)
        self.queue = collections.deque()
        self.queue_limit = queue_limit
        self.queue_overflow = 0
        self.events = []  # (time_ns, LinkEvent or dict) — what happened on the link
        self.info = None
        self.params = None
        self.registers = {}
        self._by_name = {}
        self._by_address = {}
        self.hist = None
        self.latest_snapshot = None
        self.latest_counters = {}
        self._assembly = None
        self._completed = collections.deque(maxlen=64)
        self._responses = {}
        self._tag = 0
        self._seq = 0
        self._arrivals = 0  # frames received so far (to tell what came after a response)
        self._serial = None
        self._in_reconnect = False
        self._hooks = []
        self.port_name = None
        self._open()
        try:
            self.read_info()
        except BaseException:
            self.close()
            raise

    # Port handling -------------------------------------------------------------------------------

    def _resolve(self):
        return self._port() if callable(self._port) else self._port

    def _open(self):
        name = self._resolve()
        try:
            # exclusive: an flock on the port, as other serial tools take, so that a second
            # program on the same port fails at once instead of wrecking this one's frames.
            self._serial = serial.serial_for_url(name, baudrate=self.baudrate, timeout=0.02,
                                                 write_timeout=2.0, exclusive=True)
        except (OSError, serial.SerialException, ValueError, OverflowError) as exc:
            if "exclusively lock" in str(exc):
                raise PortError(f"{name} is in use by another program (it holds the port's "
                                f"lock); stop it first") from None
            raise PortError(f"cannot open {name}: {exc}") from None
        self.port_name = name
        self.decoder.reset()
        try:
            self._serial.reset_input_buffer()
        except (OSError, serial.SerialException):
            pass

    def close(self):
        """Close the port (the capture file, if any, belongs to the caller)."""
        if self._serial is not None:
            try:
                self._serial.close()
            except (OSError, serial.SerialException):
                pass
            self._serial = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _reconnect(self, exc):
        if self.reconnect_timeout <= 0 or self._in_reconnect:
            raise PortError(f"lost the port {self.port_name}: {exc}") from None
        self.close()
        lost_at = time.time_ns()
        deadline = time.monotonic() + self.reconnect_timeout
        self._in_reconnect = True
        try:
            while True:
                try:
                    self._open()
                    old = self.info
                    self.monitor.resync()
                    self.read_info()
                    if old is not None and (old.build_id != self.info.build_id
                                            or self.params != old.params):
                        raise DeviceChanged(
                            f"after reconnecting, {self.port_name} is build "
                            f"0x{self.info.build_id:08x} with {self.params}, not build "
                            f"0x{old.build_id:08x} with {old.params}")
                    break
                except (PortError, DeviceTimeout, OSError, serial.SerialException):
                    self.close()
                    if time.monotonic() > deadline:
                        raise PortError(f"the port {self._resolve()} vanished and did not come "
                                        f"back within {self.reconnect_timeout} s ({exc})"
                                        ) from None
                    time.sleep(0.05)
        finally:
            self._in_reconnect = False
        self.stats.reconnects += 1
        event = {"event": "reconnect", "port": self.port_name, "reason": str(exc),
                 "down_ms": (time.time_ns() - lost_at) // 1_000_000}
        self.events.append((time.time_ns(), event))
        if self.capture is not None:
            self.capture.event(**event)

    def _write(self, data):
        try:
            if self._serial is None:
                raise serial.SerialException("port is closed")
            self._serial.write(data)
            self._serial.flush()
        except (OSError, serial.SerialException, termios.error) as exc:
            # termios.error (not an OSError) comes from tcdrain on a port that vanished.
            self._reconnect(exc)
            raise _Reconnected() from None

    def _read(self):
        try:
            if self._serial is None:
                raise serial.SerialException("port is closed")
            n = self._serial.in_waiting
            return self._serial.read(max(1, min(n, 65536)))
        except (OSError, serial.SerialException, termios.error, TypeError) as exc:
            # pyserial raises TypeError from a read racing a close of the port by another thread
            self._reconnect(exc)
            raise _Reconnected() from None

    # Receiving -----------------------------------------------------------------------------------

    def poll(self):
        """Read what the port has (waiting at most ~20 ms) and process the frames it completes.

        Returns the number of frames processed. Raises :class:`PortError` if the port vanished
        and could not be reopened.
        """
        try:
            chunk = self._read()
        except _Reconnected:
            return 0
        if not chunk:
            return 0
        frames = self.decoder.feed(chunk)
        now = time.time_ns()
        for frame in frames:
            self._on_frame(frame, now)
        return len(frames)

    def _on_frame(self, frame, now):
        if isinstance(frame, Command):
            return  # not from a device (an echo?); ignore
        self._arrivals += 1
        for ev in self.monitor.observe(frame):
            if ev.kind != "gap":
                self.events.append((now, ev))
                if self.capture is not None:
                    self.capture.event("link", time_ns=now, kind=ev.kind, seq=ev.seq,
                                       reason=ev.reason, old=ev.old, new=ev.new)
        if self.capture is not None:
            self.capture.frame(frame, now)
        if isinstance(frame, Response):
            self._responses[frame.tag] = (self._arrivals, frame)
            return
        if isinstance(frame, Info):
            self.info = frame
        elif isinstance(frame, Status):
            self._assembly = _Assembly(frame, now)
            self._complete()
        elif isinstance(frame, Counters):
            self.latest_counters[frame.channel] = frame
            a = self._assembly
            if a is not None and frame.snapshot == a.status.snapshot:
                a.counters[frame.channel] = frame
                self._complete()
        elif isinstance(frame, Histogram) and self.hist is not None:
            self.hist.update(frame)
        for hook in self._hooks:
            hook(frame)
        if len(self.queue) >= self.queue_limit:
            self.queue.popleft()
            self.queue_overflow += 1
        self.queue.append((now, frame))

    def _complete(self):
        a = self._assembly
        if a is None or self.params is None or len(a.counters) != self.params.channels:
            return
        snap = Snapshot(a.status, [a.counters[ch] for ch in range(self.params.channels)],
                        a.time_ns, self._arrivals)
        self._assembly = None
        self.latest_snapshot = snap
        self._completed.append(snap)

    # Commands ------------------------------------------------------------------------------------

    def _next_tag(self):
        self._tag = (self._tag + 1) & 0xFFFF
        if self._tag == NO_TAG:
            self._tag = 0
        return self._tag

    def command(self, opcode, address=0, value=0, *, register=None, retries=None,
                after=None):
        """Send a command and return its RESPONSE (a :class:`Response`).

        Retries on timeout or on a BAD_FRAME answer; raises :class:`CommandError` on any other
        error status and :class:`DeviceTimeout` when every attempt timed out. ``after(n)``,
        when given, must return True once whatever follows the response (the ``n``-th frame
        received) has arrived (polled
        until ``timeout``; a False at the deadline retries the whole command).
        """
        retries = self.retries if retries is None else retries
        last = "no answer"
        for _attempt in range(retries + 1):
            tag = self._next_tag()
            self._responses.pop(tag, None)
            self._seq = (self._seq + 1) & 0xFFFF
            try:
                self._write(encode_command(tag, opcode, address, value, self._seq))
                deadline = time.monotonic() + self.timeout
                resp = None
                while time.monotonic() < deadline:
                    got = self._responses.pop(tag, None)
                    if got is None and NO_TAG in self._responses:
                        self._responses.pop(NO_TAG)
                        last = "the device could not read the command (BAD_FRAME)"
                        break
                    if got is not None:
                        arrival, resp = got
                        break
                    self.poll()
                if resp is None:
                    continue
                if resp.status == ResponseStatus.BAD_FRAME:
                    last = "the device could not read the command (BAD_FRAME)"
                    continue
                if resp.status != ResponseStatus.OK:
                    raise CommandError(opcode, resp.status, address, register)
                if after is not None:
                    while not after(arrival):
                        if time.monotonic() >= deadline + self.timeout:
                            break
                        self.poll()
                    else:
                        return resp
                    last = "the frames following the response did not all arrive"
                    continue
                return resp
            except _Reconnected:
                last = "the port was reconnected"
                continue
        try:
            op = Opcode(opcode).name
        except ValueError:
            op = f"opcode 0x{opcode:02x}"
        what = f" ({register})" if register else ""
        raise DeviceTimeout(f"{op}{what}: no valid answer from {self.port_name} after "
                            f"{retries + 1} attempts ({last})")

    def ping(self):
        """Check that the device answers; return the round trip in seconds."""
        t = time.monotonic()
        self.command(Opcode.PING)
        return time.monotonic() - t

    def read_info(self):
        """Ask for INFO; update ``info``, ``params`` and the register map; return the INFO."""
        self.info = None
        self.command(Opcode.READ_INFO,
                     after=lambda n: self.info is not None)
        info = self.info
        params = info.params
        if params != self.params:
            self.params = params
            self.hist = HistogramAccumulator(params)
            self._assembly = None
        # The link's registers and those of every extension INFO says the device has.
        regs = PROTOCOL.register_map(params, info=info)
        self._by_name = {r.name: r for r in regs}
        self._by_address = {r.address: r for r in regs}
        return info

    # Registers -----------------------------------------------------------------------------------

    @property
    def register_names(self):
        return list(self._by_name)

    def _register(self, name):
        try:
            return self._by_name[name.upper()]
        except KeyError:
            raise KeyError(f"no register named {name!r}; registers: "
                           f"{', '.join(self._by_name)}") from None

    def read_reg(self, name):
        """Return the value of the register ``name`` (see ``register_map``)."""
        reg = self._register(name)
        value = self.command(Opcode.READ_REG, reg.address, register=reg.name).value
        self.registers[reg.name] = value
        return value

    def write_reg(self, name, value):
        """Write ``value`` to the register ``name``; return the value read back."""
        reg = self._register(name)
        if reg.access is not Access.RW:
            raise CommandError(Opcode.WRITE_REG, ResponseStatus.READ_ONLY, reg.address, reg.name)
        try:
            value = reg.check(value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        back = self.command(Opcode.WRITE_REG, reg.address, value, register=reg.name).value
        self.registers[reg.name] = back
        return back

    def read_registers(self):
        """Read every register; return ``{name: value}``. A register that only some builds
        have (:data:`OPTIONAL_REGISTERS`) and this device lacks (``BAD_ADDRESS``) is left
        out."""
        out = {}
        for name in self._by_name:
            try:
                out[name] = self.read_reg(name)
            except CommandError as exc:
                if name not in OPTIONAL_REGISTERS or exc.status != ResponseStatus.BAD_ADDRESS:
                    raise
        return out

    def check_id(self):
        """Raise :class:`DeviceError` unless the ID register reads ``"RBSC"``."""
        value = self.read_reg("ID")
        if value != ID_MAGIC:
            raise DeviceError(f"ID register reads 0x{value:08x}, not 0x{ID_MAGIC:08x} (RBSC)")

    @property
    def config(self):
        """The :class:`SnifferConfig` of the registers last read or written."""
        return config_from_registers(self.params, self.registers)

    def check_configuration(self, registers, *, allow_overlap=False):
        """Return ``{register name: value}`` checked against the device, or raise
        :class:`ConfigError` naming the first problem (nothing is written).

        Every register must exist and be writable, every value must fit the register's bits
        (no silent truncation), and the resulting class windows must not overlap (the lowest
        window would silently take the overlap) unless ``allow_overlap``.
        """
        out = {}
        for name, value in registers.items():
            try:
                reg = self._register(name)
            except KeyError as exc:
                raise ConfigError(exc.args[0]) from None
            if reg.access is not Access.RW:
                raise ConfigError(f"{reg.name} is read-only")
            try:
                out[reg.name] = reg.check(value)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        # The windows already on the device count too (overlaps with the ones not written).
        for name in register_values(self.params, SnifferConfig()):
            if name not in self.registers and name not in out:
                self.read_reg(name)
        try:
            config = config_from_registers(self.params, {**self.registers, **out})
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not allow_overlap:
            live = [(k, lo, hi) for k, (lo, hi) in enumerate(config.windows) if lo < hi]
            for i, (a, alo, ahi) in enumerate(live):
                for b, blo, bhi in live[i + 1:]:
                    if alo < bhi and blo < ahi:
                        raise ConfigError(
                            f"windows {a} [{alo}, {ahi}) and {b} [{blo}, {bhi}) ticks overlap: "
                            f"window {a} would take every pulse of [{max(alo, blo)}, "
                            f"{min(ahi, bhi)}); change one, or allow overlapping windows")
        return out

    def configure(self, registers, *, event=None, clear=True, allow_overlap=False):
        """Write ``{name: value}`` to the registers, atomically; return the read-backs.

        Everything is checked first (:meth:`check_configuration`; :class:`ConfigError`, nothing
        written). The registers are then written and read back; if a write fails or a read-back
        differs, the registers written so far are restored to their previous values and the
        error is raised, so the device never keeps half a configuration. With ``clear`` (the
        default) the counters are then cleared, so that no count taken under the previous
        windows is labelled with the new ones. A CONFIG record (and a ``config`` event with
        ``event``'s members) goes into the capture.
        """
        values = self.check_configuration(registers, allow_overlap=allow_overlap)
        previous = {name: self.read_reg(name) for name in values}
        done = []
        try:
            for name, value in values.items():
                done.append(name)
                back = self.write_reg(name, value)
                if back != value:
                    raise DeviceError(f"{name} reads back {back} after writing {value}")
            for name, value in values.items():
                back = self.read_reg(name)
                if back != value:
                    raise DeviceError(f"{name} reads back {back} after writing {value}")
        except DeviceError as exc:
            failed = []
            for name in reversed(done):
                try:
                    self.write_reg(name, previous[name])
                except DeviceError:
                    failed.append(name)
            state = (f"could not restore {', '.join(failed)}" if failed
                     else "the previous values were restored")
            cls = next(c for c in (DeviceTimeout, PortError, DeviceError) if isinstance(exc, c))
            raise cls(f"{exc}; configuration not applied ({state})") from None
        if self.capture is not None:
            self.capture.config(self.read_registers())
            self.capture.event("config", **(event or {}), written=values)
        if clear:
            self.clear()
        return values

    def apply_preset(self, preset, *, prescaler=None, overrides=None, clear=True,
                     allow_overlap=False):
        """Configure the sniffer from a :class:`rbscope.analysis.presets.Preset` (plus
        overrides)."""
        regs = preset.registers(self.params, self.info.clock_hz, prescaler=prescaler)
        regs.update(overrides or {})
        return self.configure(regs, event={"preset": preset.name,
                                           "class_names": list(preset.names)},
                              clear=clear, allow_overlap=allow_overlap)

    # Snapshots, histograms, clear ----------------------------------------------------------------

    def snapshot(self):
        """Ask for a snapshot now and return it (a solicited :class:`Snapshot`)."""
        box = []

        def arrived(n):
            for snap in self._completed:
                if snap.solicited and snap.arrival > n:
                    box.append(snap)
                    return True
            return False
        self.command(Opcode.SNAPSHOT, after=arrived)
        return box[0]

    def transfer_seconds(self, nbytes):
        """Device time the link needs to send ``nbytes`` (8N1 at ``clock_hz / uart_divisor``)."""
        info = self.info
        if info is None or not info.clock_hz or not info.uart_divisor:
            return 0.0
        return nbytes * 10 * decode_uart_divisor(info.uart_divisor) / info.clock_hz

    def read_histograms(self):
        """Ask for every channel's histogram; return ``{channel: [exact bin totals]}``.

        The totals are rebuilt across 32-bit bin wraps from every HISTOGRAM frame received
        (periodic ones too), so call this (or enable ``HIST_PERIOD``) often enough that no bin
        grows by 2^hist_bits between two reads.

        Chunks lost on the way (link errors, a host too busy to read the port) are asked for
        again; what arrived is kept, so every request completes more of the histograms. A
        request is given up only when no new chunk has arrived for longer than the link needs
        to send them all in device time (and at least ``timeout``); the read fails only after
        ``retries + 1`` requests in a row that brought nothing new.
        """
        params = self.params
        chunks = math.ceil(params.hist_bins / HIST_CHUNK)
        want = {(ch, c * HIST_CHUNK) for ch in range(params.channels) for c in range(chunks)}
        got = set()
        frame_bytes = 2 * (HEADER_BYTES + CRC_BYTES + layout_bytes(
            histogram_layout(params))) + 2  # worst-case stuffing
        idle_limit = max(self.timeout, 2 * self.transfer_seconds(len(want) * frame_bytes))
        progress = [time.monotonic()]

        def hook(frame):
            if isinstance(frame, Histogram):
                key = (frame.channel, frame.first)
                if key in want and key not in got:
                    got.add(key)
                    progress[0] = time.monotonic()
        self._hooks.append(hook)
        try:
            fruitless = 0
            while fruitless <= self.retries:
                before = len(got)
                try:
                    self.command(Opcode.READ_HISTOGRAMS, retries=0)
                except DeviceTimeout:
                    fruitless += 1
                    continue
                progress[0] = time.monotonic()
                while not want <= got and time.monotonic() - progress[0] < idle_limit:
                    self.poll()
                if want <= got:
                    break
                fruitless = 0 if len(got) > before else fruitless + 1
            else:
                missing = sorted(want - got)
                raise DeviceTimeout(f"READ_HISTOGRAMS: {len(missing)} of {len(want)} chunks "
                                    f"never arrived after {self.retries + 1} requests in a row "
                                    f"brought nothing new (first missing: channel "
                                    f"{missing[0][0]} bin {missing[0][1]})")
        finally:
            self._hooks.remove(hook)
        return {ch: list(self.hist.totals[ch]) for ch in range(params.channels)}

    def read_burst(self, opcode, frame_type, units, key, what):
        """Send ``opcode`` and collect the burst it asks for: one frame of ``frame_type`` per
        unit ``0 … units - 1`` (an extension's read source, e.g. the emulator's READ_TRUTH).

        Returns ``{unit: frame}`` by unit (``key(frame)``); the whole burst is asked for again
        when a frame is missing (``retries`` times), else :class:`DeviceTimeout` names ``what``.
        """
        got = {}

        def hook(frame):
            if frame.TYPE == frame_type:
                got[key(frame)] = frame
        self._hooks.append(hook)
        try:
            for _ in range(self.retries + 1):
                got.clear()
                try:
                    self.command(opcode, after=lambda n: len(got) == units, retries=0)
                    break
                except DeviceTimeout:
                    continue
            else:
                raise DeviceTimeout(f"{what}: {units - len(got)} of {units} never answered")
        finally:
            self._hooks.remove(hook)
        return dict(sorted(got.items()))

    def extension(self, kind):
        """The description of the extension ``kind`` (a name of
        ``rbscope.gateware.extensions.KINDS``) that INFO reports, e.g. the emulator's
        ``EmuLink``; :class:`DeviceError` when the device has none."""
        description = PROTOCOL.kind(kind).describe(self.info) if self.info is not None else None
        if description is None:
            raise DeviceError(f"{self.port_name}: this device has no {kind} (INFO reports none)")
        return description

    def clear(self):
        """Clear every counter (new epoch); return the new epoch number.

        The clear is not blindly retried: before sending it again after a lost answer, the
        epoch is read back, so a clear is applied exactly once.
        """
        before = self.snapshot().epoch
        for _ in range(self.retries + 1):
            try:
                resp = self.command(Opcode.CLEAR, retries=0)
                epoch = resp.value & 0xFFFF
                break
            except DeviceTimeout:
                epoch = self.snapshot().epoch
                if epoch != before:
                    break
        else:
            raise DeviceTimeout(f"CLEAR: no answer from {self.port_name}")
        self.events.append((time.time_ns(), {"event": "clear", "epoch": epoch}))
        if self.capture is not None:
            self.capture.event("clear", epoch=epoch, previous=before)
        return epoch

    # Streams -------------------------------------------------------------------------------------

    def frames(self, duration=None):
        """Yield ``(host_time_ns, frame)`` of every frame the device sends (except responses).

        Runs for ``duration`` seconds (forever if None); a ``(time, None)`` item is yielded
        about every 20 ms with no frame, so a consumer can update a display or stop.
        """
        end = None if duration is None else time.monotonic() + duration
        while end is None or time.monotonic() < end:
            while self.queue:
                yield self.queue.popleft()
            if not self.poll() and not self.queue:
                yield time.time_ns(), None

    def snapshots(self, duration=None):
        """Yield every complete :class:`Snapshot` as it arrives (periodic and solicited)."""
        seen = self.latest_snapshot
        for _, _frame in self.frames(duration):
            snap = self.latest_snapshot
            if snap is not None and snap is not seen:
                seen = snap
                yield snap

    def wait_snapshot(self, timeout=None):
        """Return the next periodic snapshot (None after ``timeout`` seconds)."""
        seen = self.latest_snapshot
        end = time.monotonic() + (timeout if timeout is not None else 10 * self.timeout)
        while time.monotonic() < end:
            self.poll()
            if self.latest_snapshot is not seen:
                return self.latest_snapshot
        return None

    def is_quiescent(self):
        snap = self.latest_snapshot
        return snap is not None and bool(snap.status.flags & StatusFlags.QUIESCENT)

    def enable_trace(self, on=True):
        return self.write_reg("TRACE_ENABLE", int(bool(on)))

    def summarise_trace(self, mask):
        """Send the runs of pulses of the classes in ``mask`` (bit ``k``: class ``k``; 0: none)
        as their first pulse, a SUMMARY and a LATE record (``docs/link.md``, "Trace summary")
        while the device's trace FIFO is a quarter full or more (the link not keeping up), or at
        any fill with bit ``classes`` set; return the mask read back. Raises
        :class:`DeviceError` when the device's build has no summariser (no ``TRACE_SUMMARY``
        register)."""
        try:
            back = self.write_reg("TRACE_SUMMARY", mask)
        except CommandError as exc:
            if exc.status in (ResponseStatus.READ_ONLY, ResponseStatus.BAD_ADDRESS):
                raise DeviceError(
                    "this device's build has no trace summariser (it has no TRACE_SUMMARY "
                    "register): every pulse record is sent whole (the ECP5 boards' builds "
                    "have it)") from None
            raise
        if self.capture is not None:
            # (The capture says which classes its records summarise.)
            self.capture.config(dict(self.registers))
        return back

    def attach_capture(self, writer):
        """Record into ``writer`` from now on, starting with INFO and every register (the
        file's self-description); every frame received later follows."""
        self.capture = writer
        self.record_header()

    def record_header(self):
        """Write INFO and the current registers into the capture (its self-description)."""
        if self.capture is None:
            return
        self.capture.frame(self.info)
        self.capture.config(self.read_registers())


def open_any_rate(port, *, rates=BOARD_BAUDRATES, **kw):
    """Open ``port`` at the first of ``rates`` at which the device answers INFO (a board's rate
    is its build's: ``docs/boards.md``); other keyword arguments go to :class:`Device`. A
    simulated device (a pty) answers at any rate, so at the first. Raises the last
    :class:`DeviceTimeout`, naming every rate tried, when none answers."""
    for k, rate in enumerate(rates):
        try:
            return Device(port, baudrate=rate, **kw)
        except DeviceTimeout as exc:
            if k + 1 == len(rates):
                raise DeviceTimeout(f"{exc} (tried " + ", ".join(f"{b:,}" for b in rates)
                                    + " baud: give the rate with --baud)") from None
    raise ValueError("no rate to try")

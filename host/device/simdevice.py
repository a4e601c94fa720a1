"""The simulated rbscope device: the real gateware in Verilator, behind a pseudo-terminal.

:class:`SimDevice` builds :class:`~rbscope.gateware.device.RBScopeDevice` with Verilator and the C++
harness ``sim_harness.cpp``, feeds its R/B# pins from pulse trains (``rbscope.device.stimulus``) and
publishes its UART as a pty behind a stable symlink. The host talks to it with the same
:class:`~rbscope.device.Device` code it uses for ``/dev/ttyUSB0``.

Time: the simulated device declares a 1 MHz clock by default, so with prescaler 1 a tick is 1 µs
and the stimulus's cycle counts are microseconds of NAND time; the simulation itself runs as fast
as Verilator can (about a tenth of real time for 16 channels). The device reports its declared
clock in INFO, so everything the host computes is in honest device time.

The truth — what an exact instrument must count for the trains — comes from the bit-exact
reference model, :class:`~rbscope.gateware.rb_sniffer.model.SnifferModel`, run on the same trains
and configuration.
"""

import fcntl
import hashlib
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

from amaranth.back import verilog

from rbscope.gateware.device import RBScopeDevice
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel, Train

from .stimulus import merge_trains
from .verilator_tool import verilator_env

__all__ = ["SimDevice", "SimError", "write_stimulus", "DEFAULT_CLOCK_HZ", "DEFAULT_BUILD_ROOT"]

DEFAULT_CLOCK_HZ = 1_000_000
TOPLEVEL = "rbscope_device"
HARNESS = Path(__file__).with_name("sim_harness.cpp")
DEFAULT_BUILD_ROOT = Path(os.environ.get("RBSCOPE_SIM_CACHE",
                                         Path.home() / ".cache" / "rbscope" / "sim"))


class SimError(RuntimeError):
    """The simulated device could not be built or started."""


def write_stimulus(path, trains, channels):
    """Write ``trains`` in the harness's stimulus format (see ``sim_harness.cpp``)."""
    if channels > 64:
        raise ValueError(f"The simulated device drives at most 64 channels, not {channels}")
    initial, schedule = merge_trains(trains)
    with open(path, "wb") as f:
        f.write(b"RBSTIM01" + struct.pack("<IIQQ", channels, 0, initial, len(schedule)))
        f.write(b"".join(struct.pack("<QQ", cycle, word) for cycle, word in schedule))


class SimDevice:
    """A running simulated device. Use as a context manager.

    Parameters
    ----------
    params : SnifferParams
    config : SnifferConfig
        The configuration the device boots with (its register reset values).
    trains : list of Train
        One per channel, in cycles of the declared clock.
    clock_hz : int
        Declared system clock (reported in INFO).
    uart_divisor : int
        Clock cycles per UART bit (at least 4).
    snapshot_ms : int
        Default period of unsolicited snapshots, in device time.
    link : str or Path, optional
        Path of the symlink to publish the pty at (default: in a private temporary directory).
    flip_rate, drop_rate : float
        Test-only corruption of the device → host bytes: probability per byte of a flipped bit
        and of a dropped byte.
    vanish_at, vanish_for : int
        Test-only "unplug": at cycle ``vanish_at`` the port disappears; ``vanish_for`` cycles
        later a new pty appears behind the same symlink.
    build_root : Path
        Where builds are cached (keyed by the Verilog and harness text).
    emulator : EmuParams, optional
        Build the NAND emulator in, its dies in loopback on the sniffer's channels (which must
        number the dies; ``trains`` are then ignored by the gateware). ``emu_config`` and
        ``traffic`` are its boot configuration.
    commands : str or Path, optional
        With ``emulator``: a command file (:func:`rbscope.refssd.rtl.write_commands`) that the
        harness replays as ONFI bus cycles into the emulated dies from cycle 0 (see
        ``sim_harness.cpp``); :meth:`replayed` tells when it has issued the last one.
    tap, tap_config : TapParams, TapConfig, optional
        Build the opcode-aware bus tap in (``DeviceCore``'s ``tap``): with an emulator it
        listens to the emulated bus.
    trace_depth : int, optional
        Trace records the link's FIFO holds (``DeviceCore``'s; a board's build sets its own,
        e.g. the ECP5 boards' ``trace_depth``). Default: the link's.
    batches_in_bursts : bool
        TRACE_BATCH frames between a burst's frames (``DeviceCore``'s; the default). A board
        class's ``trace_batches_in_bursts = False`` sends them after the burst (no board's
        since 2026-12-03).
    trace_summary : bool
        Build the trace summariser (``DeviceCore``'s; a board class's ``trace_summary``: the
        ECP5 boards').
    """

    def __init__(self, params, config, trains, *, clock_hz=DEFAULT_CLOCK_HZ, uart_divisor=4,
                 snapshot_ms=100, link=None, flip_rate=0.0, drop_rate=0.0, vanish_at=0,
                 vanish_for=0, seed=1, build_root=None, max_cycles=0, emulator=None,
                 emu_config=None, traffic=None, commands=None, tap=None, tap_config=None,
                 trace_depth=None, batches_in_bursts=True, trace_summary=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if not isinstance(config, SnifferConfig):
            raise TypeError(f"Configuration must be a SnifferConfig, not {config!r}")
        if len(trains) != params.channels:
            raise ValueError(f"Need one train per channel ({params.channels}), "
                             f"got {len(trains)}")
        self.params = params
        self.config = config.validate(params)
        self.trains = [t if isinstance(t, Train) else Train(*t) for t in trains]
        self.clock_hz = clock_hz
        self.uart_divisor = uart_divisor
        self.snapshot_ms = snapshot_ms
        self.options = dict(flip_rate=flip_rate, drop_rate=drop_rate, vanish_at=vanish_at,
                            vanish_for=vanish_for, seed=seed, max_cycles=max_cycles)
        self.build_root = Path(build_root) if build_root else DEFAULT_BUILD_ROOT
        self.emulator = emulator
        self.emu_config = emu_config
        self.traffic = traffic
        if commands is not None and emulator is None:
            raise ValueError("a command file needs a device built with the NAND emulator")
        self.commands = None if commands is None else Path(commands)
        self.tap = tap
        self.tap_config = tap_config
        self.trace_depth = trace_depth
        self.batches_in_bursts = bool(batches_in_bursts)
        self.trace_summary = bool(trace_summary)
        self._tmp = None  # created by start(): the stimulus file, and the default link
        self.link = Path(link) if link else None
        self.process = None
        self.lines = []
        self._port_ready = threading.Event()
        self._reader = None

    # ---- truth --------------------------------------------------------------------------------

    def truth(self, cycles):
        """The reference model's result for the first ``cycles`` cycles of the stimulus."""
        return SnifferModel(self.params, self.config).run(self.trains, cycles)

    # ---- build --------------------------------------------------------------------------------

    def verilog(self):

        device = RBScopeDevice(self.params, clock_hz=self.clock_hz,
                               uart_divisor=self.uart_divisor, snapshot_ms=self.snapshot_ms,
                               board="verilator-sim", config=self.config,
                               emulator=self.emulator, emu_config=self.emu_config,
                               traffic=self.traffic, tap=self.tap, tap_config=self.tap_config,
                               **({} if self.trace_depth is None else
                                  {"trace_depth": self.trace_depth}),
                               batches_in_bursts=self.batches_in_bursts,
                               trace_summary=self.trace_summary)
        return verilog.convert(device, name=TOPLEVEL, emit_src=False)

    def build(self, log=None):
        """Build (or reuse) the simulator binary; return its path."""
        text = self.verilog()
        key = hashlib.sha256((text + HARNESS.read_text()).encode()).hexdigest()[:16]
        build_dir = self.build_root / key
        binary = build_dir / "obj" / "rbscope_sim"
        done = build_dir / "built.ok"  # written last: a binary still being linked is not done
        if done.exists():
            return binary
        build_dir.mkdir(parents=True, exist_ok=True)
        # Several processes (test workers, two `rbscope sim`) may want the same build: the first
        # builds, the others wait for it and reuse it.
        with open(build_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if done.exists():
                    return binary
                self._build_locked(text, build_dir, binary, log)
                done.write_text(str(binary))
                return binary
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _build_locked(self, text, build_dir, binary, log):
        (build_dir / f"{TOPLEVEL}.v").write_text(text)
        env = {**os.environ, **verilator_env()}
        cmd = ["verilator", "--cc", "--exe", "--build", "-O2", "-Wno-fatal", "-Wno-lint",
               "--top-module", TOPLEVEL, "--Mdir", str(build_dir / "obj"), "-o", "rbscope_sim",
               "-j", str(min(4, os.cpu_count() or 1)),
               "--x-initial", "fast", "--x-assign", "fast",
               str(build_dir / f"{TOPLEVEL}.v"), str(HARNESS)]
        if self.emulator is not None:  # the harness drives the emulator's bus pins
            cmd[-2:-2] = ["-CFLAGS", f"-DRBSCOPE_EMU={self.emulator.dies}"]
        result = subprocess.run(cmd, env=env, capture_output=True, text=True)
        (build_dir / "build.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0 or not binary.exists():
            shutil.rmtree(build_dir / "obj", ignore_errors=True)
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
            raise SimError(f"Verilator could not build the simulated device "
                           f"(see {build_dir / 'build.log'}):\n{tail}")
        if log:
            log(f"built {binary}")
        return binary

    # ---- run ----------------------------------------------------------------------------------

    def start(self, timeout=30):
        """Build if needed, start the simulation and return the port path."""
        if self.link is not None and not Path(self.link).absolute().parent.is_dir():
            raise SimError(f"cannot publish the port at {self.link}: the directory "
                           f"{Path(self.link).absolute().parent} does not exist")
        binary = self.build()
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rbscope-sim-")
        if self.link is None:
            self.link = Path(self._tmp.name) / "ttyRBS0"
        stimulus = Path(self._tmp.name) / "stimulus.bin"
        write_stimulus(stimulus, self.trains, self.params.channels)
        opts = self.options
        cmd = [str(binary), "--stimulus", str(stimulus), "--link", str(self.link),
               "--divisor", str(self.uart_divisor), "--seed", str(opts["seed"])]
        if self.commands is not None:
            cmd += ["--commands", str(self.commands)]
        for name in ("flip_rate", "drop_rate", "vanish_at", "vanish_for", "max_cycles"):
            if opts[name]:
                cmd += [f"--{name.replace('_', '-')}", str(opts[name])]
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        if not self._port_ready.wait(timeout):
            self.stop()
            raise SimError("The simulated device did not publish its port in time")
        if self.process.poll() is not None:
            raise SimError(f"The simulated device exited: {self.process.stderr.read()}")
        return str(self.link)

    def _read_stdout(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("PORT "):
                self._port_ready.set()

    def barrier(self):
        """The cycle at which the command replay reached its barrier and waits for
        :meth:`go` (None before that; see ``sim_harness.cpp``)."""
        for line in list(self.lines):
            if line.startswith("BARRIER cycle="):
                return int(line.split("=")[1])
        return None

    def go(self):
        """Let the command replay pass its barrier (the harness counts the following commands'
        cycles from now)."""
        if self.process is None or self.process.poll() is not None:
            raise SimError("the simulated device is not running")
        self.process.send_signal(signal.SIGUSR1)

    def replayed(self):
        """The harness's report once it has issued the last command of ``commands`` (a dict of
        ``commands``, ``cycle``, ``late``, ``late_cycles``, ``max_late``), else None.

        ``late`` commands could not have their confirm at the file's cycle (the emulator has
        one bus for all dies, or the die was still busy); ``late_cycles`` is their total delay.
        """
        for line in list(self.lines):
            if line.startswith("REPLAYED "):
                return {k: int(v) for k, v in (f.split("=") for f in line.split()[1:])}
        return None

    def stop(self):
        """Stop the simulation (the harness prints its final cycle count)."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process:
            if self._reader:
                self._reader.join(5)
            for stream_ in (self.process.stdout, self.process.stderr):
                if stream_:
                    stream_.close()
        self.process = None

    def close(self):
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

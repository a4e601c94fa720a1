"""``rbscope sim``: run the simulated device (the gateware in Verilator) behind a pty."""

import argparse
import json
import os
import signal
import sys
import threading
import time

from rbscope.analysis.presets import SIM_PRESET
from rbscope.device.simdevice import DEFAULT_CLOCK_HZ, SimDevice, SimError
from rbscope.device.stimulus import TrainSpec, load_mix, random_trains
from rbscope.files import OutputError, write_text
from rbscope.gateware.nand_emu import EmuParams, boot
from rbscope.gateware.onfi_tap.params import TapParams
from rbscope.gateware.rb_sniffer import Counter, SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import Train

from .common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    force_option,
    input_paths,
)

__all__ = ["add_sim_parser", "DEFAULT_WINDOWS_US"]

#: Class windows (µs) of the default stimulus mix: cache busy, read, program (both MLC page
#: types), erase. With the simulated 1 MHz clock and prescaler 1, one tick is one µs. They are
#: :data:`rbscope.analysis.presets.SIM_PRESET`'s, so that a capture of them is named.
DEFAULT_WINDOWS_US = tuple((int(lo), int(hi)) for _, lo, hi in SIM_PRESET.windows)



def add_sim_parser(commands):
    sim = commands.add_parser(
        "sim",
        help="run the simulated device: the real gateware in Verilator, behind a pty",
        description=(
            "Build the rbscope gateware with Verilator (cached), drive its R/B# inputs with a "
            "synthetic NAND workload (reads, MLC lower/upper-page programs, erases, cache-busy "
            "pulses, ringing glitches), and publish its UART as a pseudo-terminal. Connect to the "
            "printed port exactly as to a hardware device (rbscope info/capture PORT). The "
            "simulated clock is declared as 1 MHz, so a tick is 1 µs of NAND time; simulation "
            "runs as fast as Verilator can. Stop with Ctrl-C."
        ),
        epilog="example: rbscope sim --channels 8 --duration 3 --truth truth.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim.add_argument("--channels", type=int, default=16, metavar="N",
                     help="R/B# channels (1-64, default 16)")
    sim.add_argument("--duration", type=float, default=5.0, metavar="S",
                     help="seconds of device time with NAND activity (default 5); the lines "
                          "stay ready afterwards, so the device becomes quiescent")
    sim.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    sim.add_argument("--mix", metavar="FILE",
                     help="workload description (TOML: operations with duration clusters in µs, "
                          "gaps, glitches; see examples/workloads/mlc.toml); default: the "
                          "built-in MLC mix")
    sim.add_argument("--link", metavar="PATH",
                     help="publish the pty at this symlink (default: a temporary path, printed)")
    sim.add_argument("--snapshot-ms", type=int, default=100, metavar="MS",
                     help="default snapshot period in device time (default 100)")
    sim.add_argument("--truth", metavar="FILE",
                     help="write the exact counts the workload must produce (reference model) "
                          "as JSON")
    force_option(sim)
    sim.add_argument("--flip-rate", type=float, default=0.0, metavar="P",
                     help="test only: probability per byte sent of a flipped bit")
    sim.add_argument("--drop-rate", type=float, default=0.0, metavar="P",
                     help="test only: probability per byte sent of losing it")
    sim.add_argument("--vanish-at", type=float, default=0.0, metavar="S",
                     help="test only: unplug the port at this device time (s)")
    sim.add_argument("--vanish-for", type=float, default=0.5, metavar="S",
                     help="test only: how long the port stays away (device s, default 0.5)")
    sim.add_argument("--emulator", type=int, metavar="DIES",
                     help="build the NAND emulator in loopback instead: DIES emulated dies "
                          "(1-8), sniffer channel i watching die i, driven by the on-chip "
                          "traffic generator (for `rbscope selftest PORT`); --channels, "
                          "--mix, --truth and the workload options then do not apply")
    sim.add_argument("--tap", action="store_true",
                     help="with --emulator: build the opcode-aware bus tap in, listening to the "
                          "emulated bus (capture and analyze then report the opcode counts)")
    sim.add_argument("--json", action="store_true", help="print events as JSON lines")
    sim.set_defaults(handler=_cmd_sim)


def default_setup(channels, duration_s, seed, mix=None):
    """Return (params, config, trains) of the standard simulated workload.

    ``mix`` is a workload file for :func:`rbscope.device.stimulus.load_mix` (default: the built-in
    mix).
    """

    if not 1 <= channels <= 64:
        raise ValueError(f"--channels must be from 1 to 64, not {channels}")
    if duration_s <= 0:
        raise ValueError(f"--duration must be positive, not {duration_s}")
    params = SnifferParams(channels=channels)
    config = SnifferConfig(prescaler=1, glitch_ticks=3, windows=DEFAULT_WINDOWS_US,
                           idle_ticks=DEFAULT_CLOCK_HZ // 2)  # quiescent after 0.5 s idle
    cycles = int(duration_s * DEFAULT_CLOCK_HZ)
    workload = {"gap": (2 * (channels + 1) + 6, 400), "glitch_rate": 0.1}
    if mix is not None:
        workload = load_mix(mix)
    spec = TrainSpec(channels=channels, cycles=cycles, low_at_reset=frozenset({channels - 1}),
                     **workload)
    return params, config, random_trains(spec, seed)


def emulator_setup(dies, tap=False):
    """Return (params, config, trains, emulator) of the simulated emulator build.

    ``dies`` emulated dies of the default geometry in loopback, one sniffer channel per die;
    the R/B# pins are idle (the gateware ignores them). With ``tap`` the sniffer takes the bus
    tap's tags (``tag_bits=4``).
    """

    if not isinstance(dies, int) or not 1 <= dies <= 8:
        raise ValueError(f"--emulator must be from 1 to 8 dies, not {dies}")
    params = SnifferParams(channels=dies, tag_bits=4 if tap else 0)
    # A board's emulator build's power-up state (the self-test's timing, named windows).
    return (params, boot.sniffer_config(params), [Train(1, []) for _ in range(dies)],
            EmuParams(dies=dies))


def truth_json(result, params):
    return {
        "cycles": result.cycles,
        "channels": [{
            "classes": c.classes,
            **{name.lower(): c.counter(counter) for name, counter in Counter.__members__.items()},
            "histogram": c.histogram,
        } for c in result.channels],
        "row": [c.row(params) for c in result.channels],
    }


def _cmd_sim(args):

    def say(event, **fields):
        if args.json:
            print(json.dumps({"event": event, **fields}), flush=True)
        else:
            text = " ".join(f"{k}={v}" for k, v in fields.items())
            print(f"rbscope sim: {event} {text}".rstrip(), flush=True)

    emulator = None
    tap = None
    try:
        if args.link is not None:
            parent = os.path.dirname(os.path.abspath(args.link))
            if not os.path.isdir(parent):
                raise ValueError(f"--link {args.link}: the directory {parent} does not exist")
            if os.path.isdir(args.link):
                raise ValueError(f"--link {args.link} is a directory; give the path of the "
                                 f"link to create")
        if args.emulator is not None:
            if args.truth or args.mix:
                raise ValueError("--truth and --mix do not apply to an --emulator build")
            params, config, trains, emulator = emulator_setup(args.emulator, args.tap)
            if args.tap:
                tap = TapParams(targets=args.emulator, sniffer=params)
        elif args.tap:
            raise ValueError("--tap needs --emulator (the simulated bus is the emulator's)")
        else:
            params, config, trains = default_setup(args.channels, args.duration, args.seed,
                                                   args.mix)
    except ValueError as exc:
        print(f"rbscope sim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    device = SimDevice(
        params, config, trains, snapshot_ms=args.snapshot_ms, link=args.link,
        flip_rate=args.flip_rate, drop_rate=args.drop_rate,
        vanish_at=int(args.vanish_at * DEFAULT_CLOCK_HZ),
        vanish_for=int(args.vanish_for * DEFAULT_CLOCK_HZ), seed=args.seed, emulator=emulator,
        emu_config=None if emulator is None else boot.emu_config(emulator), tap=tap)
    if args.truth:
        end = int(args.duration * DEFAULT_CLOCK_HZ)
        try:
            write_text(args.truth, json.dumps(truth_json(device.truth(end), params)),
                       kind="json", inputs=input_paths(args), force=args.force,
                       option="--truth")
        except OutputError as exc:
            print(f"rbscope sim: {exc}", file=sys.stderr)
            return EXIT_USAGE
        say("truth", file=args.truth)
    say("building", note="Verilator, cached after the first build (about a minute)")
    try:
        started = time.monotonic()
        device.build()
        say("built", seconds=round(time.monotonic() - started, 1))
        port = device.start()
    except SimError as exc:
        print(f"rbscope sim: {exc}", file=sys.stderr)
        device.close()
        return EXIT_FAILURE
    except KeyboardInterrupt:
        device.close()
        say("interrupted")
        return EXIT_INTERRUPTED
    if emulator is not None:
        say("running", port=port, emulated_dies=emulator.dies, clock_hz=DEFAULT_CLOCK_HZ,
            hint="check it with: rbscope selftest " + port)
    else:
        say("running", port=port, channels=params.channels, clock_hz=DEFAULT_CLOCK_HZ,
            hint="connect with: rbscope info " + port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            if device.process is None or device.process.poll() is not None:
                break
    except KeyboardInterrupt:
        pass
    finally:
        device.close()
        say("stopped", log=" | ".join(line for line in device.lines[-1:]))
    return EXIT_OK

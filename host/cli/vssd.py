"""``rbscope vssd``: the reference SSD served as a network block device (nbdkit)."""

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading

from rbscope.analysis.geometry import geometry_toml
from rbscope.files import OutputError, check_output, write_text
from rbscope.refssd.drive import RefSSDError, load_drive
from rbscope.refssd.sim import PRECONDITIONS
from rbscope.vssd.engine import Engine
from rbscope.vssd.serve import (
    EngineServer,
    ServeError,
    Service,
    check_python_plugin,
    nbdkit_command,
)

from .argtypes import integer, number
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, err, force_option, input_paths

__all__ = ["add_vssd_parser"]


def add_vssd_parser(commands):
    p = commands.add_parser(
        "vssd",
        help="serve a reference SSD as a network block device (nbdkit), recording its R/B#",
        description=(
            "Serve the reference SSD DRIVE (a preset name or a TOML drive spec) on a Unix "
            "socket as an NBD export (through nbdkit and its Python plugin). Every request "
            "runs through the drive's FTL and timing model and is answered at its modelled "
            "completion time, in real time multiplied by --slowdown. On exit (Ctrl-C, SIGTERM, "
            "or the end of the --run command) the drive's write buffer is flushed, and the "
            "NAND operations' R/B# pulse trains (--record, a VCD for `rbscope analyze`) and "
            "the FTL's true counts (--truth, JSON) are written. Data is kept sparse: a drive of "
            "any size costs the memory of what was written."),
        epilog=(
            "examples:\n"
            "  rbscope vssd ssd-v --socket /tmp/ssd.sock --slowdown 4 --record r.vcd "
            "--truth t.json\n"
            "  fio --name=w --ioengine=nbd --uri='nbd+unix:///?socket=/tmp/ssd.sock' "
            "--rw=randwrite --bs=4k --size=8m --output-format=json --output=fio.json\n"
            "  rbscope analyze r.vcd --geometry ssd-v --fio fio.json\n"
            "  rbscope vssd ssd-v --socket /tmp/ssd.sock --run 'fio job.fio'   "
            "(serve while one command runs)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("drive", metavar="DRIVE", help="a reference-SSD preset name or TOML drive spec")
    p.add_argument("--socket", required=True, metavar="PATH",
                   help="Unix socket to serve on (URI nbd+unix:///?socket=PATH)")
    p.add_argument("--slowdown", type=number(1e-3), default=1.0, metavar="F",
                   help="wall seconds per modelled second (default 1: real time)")
    p.add_argument("--record", metavar="VCD", help="write the R/B# pulse trains here on exit")
    p.add_argument("--truth", metavar="JSON", help="write the FTL's true counts here on exit")
    p.add_argument("--geometry-out", metavar="TOML",
                   help="write the drive's geometry as a user gives it to `rbscope analyze` "
                        "(the array's layout, the bundled classifier windows)")
    p.add_argument("--precondition", choices=PRECONDITIONS, default="fresh",
                   help="the drive's state at the start (default fresh; not recorded)")
    p.add_argument("--seed", type=int, default=0, help="timing and preconditioning seed")
    p.add_argument("--threads", type=integer(1, 256), default=16, metavar="N",
                   help="nbdkit worker threads: requests in flight (default 16)")
    p.add_argument("--run", metavar="CMD",
                   help="run CMD once the export is ready (nbdkit --run: $uri and $unixsocket "
                        "are set), then stop; the exit code is CMD's")
    p.add_argument("--no-final-flush", action="store_true",
                   help="do not write the buffer back on exit (the truth then leaves it out)")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    force_option(p)
    p.set_defaults(handler=_cmd_vssd)


def _cmd_vssd(args):
    inputs = input_paths(args)
    try:
        for path, kind, opt in ((args.record, "vcd", "--record"),
                                (args.truth, "json", "--truth"),
                                (args.geometry_out, "toml", "--geometry-out")):
            if path is not None:
                check_output(path, kind=kind, inputs=inputs, force=args.force, option=opt)
    except OutputError as exc:
        err("vssd", str(exc))
        return EXIT_USAGE
    if os.path.exists(args.socket):
        err("vssd", f"--socket {args.socket}: exists (another server? remove it first)")
        return EXIT_USAGE
    try:
        drive = load_drive(args.drive)
        engine = Engine(drive, seed=args.seed, precondition=args.precondition)
        service = Service(engine, args.slowdown)
    except RefSSDError as exc:
        err("vssd", str(exc))
        return EXIT_USAGE
    if args.geometry_out:
        try:
            write_text(args.geometry_out, geometry_toml(drive.user_geometry(), (
                f"The reference SSD {drive.name} as rbscope vssd serves it: its geometry "
                f"as a user gives it to `rbscope analyze --geometry`.",)),
                       kind="toml", inputs=inputs, force=args.force, option="--geometry-out")
        except (OSError, OutputError) as exc:
            why = getattr(exc, "strerror", None) or exc
            err("vssd", f"--geometry-out {args.geometry_out}: {why}")
            return EXIT_FAILURE
    try:
        check_python_plugin()
    except ServeError as exc:
        err("vssd", str(exc))
        return EXIT_FAILURE
    tmp = tempfile.mkdtemp(prefix="rbscope-vssd-")
    engine_sock = os.path.join(tmp, "engine.sock")
    server = EngineServer(engine_sock, service)
    server.start()
    cmd = nbdkit_command(args.socket, engine_sock, engine.capacity, threads=args.threads,
                         run=args.run)
    stop = threading.Event()
    old = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if not args.json:
        print(f"rbscope vssd: {drive.name} ({engine.capacity} bytes) on "
              f"nbd+unix:///?socket={args.socket}, slowdown {args.slowdown:g}",
              file=sys.stderr, flush=True)
    code = EXIT_OK
    proc = subprocess.Popen(cmd)
    try:
        while proc.poll() is None and not stop.wait(0.1):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif args.run is not None:
            code = proc.returncode
        server.shutdown()
        server.server_close()
        for path in (engine_sock, args.socket):
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            except OSError:
                pass
        try:
            os.rmdir(tmp)
        except OSError:
            pass
    if not args.no_final_flush:
        engine.flush()
    try:
        if args.record:
            engine.write_recording(args.record)
        if args.truth:
            truth = engine.truth_dict()
            engine.write_truth(args.truth)
        else:
            truth = engine.truth_dict()
    except OSError as exc:
        err("vssd", f"cannot write the outputs: {exc}")
        return EXIT_FAILURE
    stats = service.stats()
    summary = {"drive": drive.name, "service": stats, "requests": engine.requests,
               "host_bytes_written": truth["host_bytes_written"],
               "pages_programmed": truth["pages_programmed"]["total"],
               "wa_true": truth["wa_true"], "nbdkit_exit": proc.returncode}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        rate = stats["requests"] / stats["wall_s"] if stats["wall_s"] > 0 else 0.0
        print(f"rbscope vssd: {stats['requests']} requests ({rate:.0f}/s, {stats['late']} "
              f"late), {truth['host_bytes_written']} bytes written, "
              f"{truth['pages_programmed']['total']} pages programmed, "
              f"WA {truth['wa_true']:.3f}", file=sys.stderr)
    return code

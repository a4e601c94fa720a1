"""``rbscope merge``: several boards' captures, aligned by a shared sync line, as one measurement.

Registered on the main parser by :func:`add_merge_parser`; the work is
:func:`rbscope.device.merge.merge_captures`.
"""

import argparse
import json

from rbscope.device.merge import MergeError, MergeInput, MergeRequest, merge_captures
from rbscope.files import OutputError

from .argtypes import integer, number
from .common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, err, force_option, input_paths

__all__ = ["add_merge_parser"]

_DESCRIPTION = """\
Merge the captures of several boards that probed one drive into one measurement, time-aligned
by a sync line that every board recorded on one of its channels (one board drives it: a build
with --sync-out; docs/boards.md). The first capture is the reference: the merged time line
counts its ticks. Each other board's sync pulses are paired with the reference's by their widths
and spacing, and its ticks are mapped onto the reference's (piecewise linear through the
paired pulses; offset and rate fitted). The residual skew printed is each paired pulse's error
when the map is made without it: the error of the time line between sync pulses.

The merged lines are the boards' lines one board after the other (each board's sync channel
left out), with their counts, histograms, pulse sequences and lost-record accounting as each
board measured them; `rbscope analyze MERGED.json` reads the result as one many-line capture
(--probe numbers the merged lines). Captures need --trace (the sync line's pulse records)
and the same tick and class windows on every board.
"""

_EPILOG = """\
example:
  rbscope merge a.rbcap b.rbcap --sync-channel a:62 --sync-channel b:63 -o drive.json
  rbscope analyze drive.json --geometry drive.toml --logical 1GiB

exit codes: 0 merged, 1 the captures cannot be merged (the message says why: too few or
unmatched sync pulses, an ambiguous train, skew above --max-skew, other ticks or windows, an
unreadable capture), 2 usage error
"""


def add_merge_parser(subparsers):
    """Register ``rbscope merge`` on ``subparsers``."""
    p = subparsers.add_parser(
        "merge", help="merge several boards' captures into one, aligned by a sync line",
        description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help="capture files (rbscope capture --trace), the reference first")
    p.add_argument("--sync-channel", action="append", default=[], metavar="[NAME:]CH",
                   help="the channel on which a capture recorded the sync line; NAME is the "
                        "capture's file name without its suffix (or its position, from 1), "
                        "and names its merged lines (NAME:ch5; by position when two captures "
                        "have the same name); once without NAME: the same channel on every "
                        "board")
    p.add_argument("-o", "--output", required=True, metavar="JSON",
                   help="the merged measurement (rbscope analyze reads it)")
    p.add_argument("--max-skew", type=number(0), default=4.0, metavar="TICKS",
                   help="refuse a board whose residual skew exceeds this many reference ticks "
                        "at its worst sync pulse (default 4)")
    p.add_argument("--min-pulses", type=integer(3), default=8, metavar="N",
                   help="fewest sync pulses each board must share with the reference "
                        "(default 8)")
    p.add_argument("--max-ppm", type=number(0), default=1000.0, metavar="PPM",
                   help="refuse a board whose clock differs from the reference's by more "
                        "(default 1000)")
    p.add_argument("--json", action="store_true", help="print the fits as JSON")
    force_option(p)
    p.set_defaults(handler=_cmd_merge)


def _sync_channels(args):
    """``{capture index: channel}`` from ``--sync-channel``; raises ValueError (usage)."""
    names = [MergeInput(path, 0).name for path in args.captures]
    if not args.sync_channel:
        raise ValueError("give --sync-channel: the channel each capture recorded the sync "
                         "line on")
    out = {}
    for text in args.sync_channel:
        who, _, ch = text.rpartition(":")
        try:
            channel = int(ch)
        except ValueError:
            raise ValueError(f"--sync-channel {text!r}: the channel must be a number") from None
        if not who:
            if len(args.sync_channel) > 1:
                raise ValueError("--sync-channel without a NAME is for one channel on every "
                                 "board; name each capture when they differ")
            return dict.fromkeys(range(len(names)), channel)
        if who.isdigit() and 1 <= int(who) <= len(names):
            index = int(who) - 1
        elif who in names:
            index = names.index(who)
        else:
            raise ValueError(f"--sync-channel {text!r}: no capture is called {who!r} (the "
                             f"captures: {', '.join(names)})")
        out[index] = channel
    missing = [names[i] for i in range(len(names)) if i not in out]
    if missing:
        raise ValueError(f"--sync-channel: no sync channel given for {', '.join(missing)}")
    return out


def _cmd_merge(args):
    try:
        channels = _sync_channels(args)
        names = [MergeInput(path, 0).name for path in args.captures]
        # Captures of the same name (run.rbcap in two folders) are labelled by position.
        labels = names if len(set(names)) == len(names) else \
            [str(k + 1) for k in range(len(names))]
        request = MergeRequest(tuple(MergeInput(path, channels[k], labels[k])
                                     for k, path in enumerate(args.captures)),
                               max_skew_ticks=args.max_skew, min_pulses=args.min_pulses,
                               max_ppm=args.max_ppm)
    except (MergeError, ValueError) as exc:
        err("merge", str(exc))
        return EXIT_USAGE
    try:
        result = merge_captures(request)
        result.measurement.save(args.output, inputs=input_paths(args), force=args.force)
    except (MergeError, OutputError) as exc:
        err("merge", str(exc))
        return EXIT_FAILURE
    m = result.measurement
    merge = m.provenance["merge"]
    if args.json:
        print(json.dumps({"output": args.output, "lines": m.params.channels,
                          "reference": merge["reference"], "boards": merge["boards"],
                          "complete": m.provenance["complete"],
                          "missing": m.provenance["missing"],
                          "warnings": m.provenance["warnings"]}))
        return EXIT_OK
    tick_ns = m.tick_seconds * 1e9
    print(f"reference {merge['reference']}: its ticks ({tick_ns:g} ns) are the merged time line")
    for board, fit in zip(merge["boards"], result.fits, strict=True):
        n = board["channels"] - 1
        first = board["first_line"]
        where = f"lines {first} … {first + n - 1}" if n > 1 else f"line {first}"
        print(f"  {board['label']:<12} {board['board'] or '?'}: {n} line(s) as merged {where}; "
              f"sync on channel {board['sync_channel']}, {board['sync_pulses']} pulse(s)")
        if fit.label == merge["reference"]:
            continue
        print(f"  {'':<12} paired {fit.paired} sync pulses with the reference's ({fit.anchors} "
              f"matching windows; unpaired: {fit.unpaired} of its own, "
              f"{fit.reference_unpaired} of the reference's)")
        print(f"  {'':<12} clock {fit.rate_ppm:+.2f} ppm against the reference's; straight "
              f"line's residuals max {fit.line_max_ticks:.2f}, RMS {fit.line_rms_ticks:.2f} "
              f"ticks")
        print(f"  {'':<12} residual skew max {fit.skew_max_ticks:.2f} ticks "
              f"({fit.skew_max_ns:,.0f} ns), RMS {fit.skew_rms_ticks:.2f} ticks "
              f"({fit.skew_rms_ns:,.0f} ns)")
    for w in m.provenance["warnings"]:
        print(f"warning: {w}")
    done = "complete" if m.provenance["complete"] else "INCOMPLETE (see the warnings)"
    print(f"merged {m.params.channels} lines of {len(merge['boards'])} boards into "
          f"{args.output}: {done}")
    return EXIT_OK

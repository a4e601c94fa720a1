"""The live view of ``rbscope capture``: per-channel counts and rates by class, link health, and
how long until the drive is quiescent.

On a terminal the view is a table redrawn in place (rich's ``Live``) at most every ``interval``
seconds; on anything else (a pipe, a log file) it prints one plain line per ``interval``; with
``json=True`` it prints one JSON object per snapshot (JSON lines) for machines.

Quiescence (RB-Explorer reads its counters once every R/B# line has been ready for minutes) is
shown as a countdown: the device reports since when every enabled line has been ready
(``quiet_since``), so the time left is the idle time the device waits for (``IDLE_TICKS``) less the
time it has already been idle. A pulse still in progress is only seen when it ends, so while the
counts still move the view says "busy" instead of counting down.
"""

import json
import sys
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rbscope.device.protocol import Trace, TraceBatch
from rbscope.gateware.link.protocol import StatusFlags
from rbscope.gateware.link.summary import COUNT_MAX, SUMMARY_KIND

__all__ = ["LiveView", "quiescence"]


def _rate(n):
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return f"{n:.0f}" if n >= 10 or n == 0 else f"{n:.1f}"


def _duration(s):
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.1f} s"


def quiescence(status, idle_seconds, tick_seconds, moving):
    """Describe how far the device is from quiescence.

    Parameters
    ----------
    status
        The snapshot's status (``timestamp``, ``quiet_since``, ``quiescent``).
    idle_seconds : float or None
        The idle time the device waits for (``IDLE_TICKS`` × tick), if known.
    tick_seconds : float
    moving : bool
        Whether any count changed since the previous snapshot (a line was busy).

    Returns
    -------
    (str, float or None)
        The words to show and the seconds left (None when not counting down).
    """
    if status.quiescent:
        return "quiescent", 0.0
    if moving:
        return "busy", None
    idle = max(0, status.timestamp - status.quiet_since) * tick_seconds
    if not idle_seconds:
        return f"idle {_duration(idle)}", None
    left = max(0.0, idle_seconds - idle)
    return (f"idle {_duration(idle)} of {_duration(idle_seconds)}: quiescent in "
            f"{_duration(left)} unless a line goes busy"), left


class LiveView:
    """Show a running capture.

    Parameters
    ----------
    params : SnifferParams
    tick_seconds : float
        For rates per second of device time.
    class_names : sequence of str
        Names of the K windows (short ones read best).
    stream : file
        Where to draw (default ``sys.stderr``, so stdout stays clean for ``--json``).
    tty : bool, optional
        Force redrawing (True) or plain lines (False); default: ``stream.isatty()``.
    json : bool
        Print a JSON line per snapshot to ``stream`` instead.
    interval : float
        Seconds between redraws / plain lines.
    idle_seconds : float, optional
        The idle time after which the device declares quiescence, for the countdown.
    width : int, optional
        Terminal width for the table (default: the terminal's).
    """

    def __init__(self, params, tick_seconds, class_names=(), *, stream=None, tty=None,
                 json=False, interval=0.5, idle_seconds=None, width=None):
        self.params = params
        self.tick_seconds = tick_seconds
        names = list(class_names)[:params.classes]
        self.names = [n or f"c{k}" for k, n in enumerate(
            names + [""] * (params.classes - len(names)))]
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.json = json
        self.interval = interval
        self.idle_seconds = idle_seconds
        self._last_draw = 0.0
        self._prev = None  # (timestamp, [counters rows]) for rates
        self._lost0 = None  # STATUS trace_lost when TRACE records were first seen on
        # Pulses the device's trace summariser counted in SUMMARY records instead of sending
        # them, per channel, since the view began (:meth:`trace`).
        self.summarised = [0] * params.channels
        self._rates = None
        self._moving = False
        self._live = None
        self._console = Console(file=self.stream, force_terminal=self.tty, width=width,
                                highlight=False) if self.tty else None
        self.started = time.monotonic()

    def trace(self, frame):
        """Take a TRACE or TRACE_BATCH frame as it arrives: the pulses its SUMMARY records
        stand for are added to their lines' ``summarised`` (other frames are ignored)."""
        if isinstance(frame, TraceBatch):
            for ch, n in frame.summaries(self.params):
                if ch < len(self.summarised):
                    self.summarised[ch] += n
        elif isinstance(frame, Trace) and frame.kind == SUMMARY_KIND:
            if frame.channel < len(self.summarised):
                self.summarised[frame.channel] += frame.width & COUNT_MAX

    def update(self, snapshot, stats, *, force=False, extra=""):
        """Take a new snapshot (``rbscope.device.protocol.Snapshot``) and the link's
        ``LinkStats``. While TRACE records are on, it also says whether the pulse sequence is
        still complete: the records the link lost since the first snapshot it was shown."""
        rows = [c.counters for c in snapshot.counters]
        lost = self._trace_lost(snapshot.status)
        if lost is not None:
            text = ("pulse records: none lost (sequence complete)" if not lost else
                    f"pulse records: {lost:,} LOST (sequence incomplete)")
            summarised = sum(self.summarised)
            if summarised:
                text += (f"; {summarised:,} pulses summarised on the device (counted, "
                         f"not sent one by one)")
            extra = f"{extra}  {text}" if extra else text
        ts = snapshot.status.timestamp
        if self._prev is not None and ts > self._prev[0]:
            dt = (ts - self._prev[0]) * self.tick_seconds
            self._rates = [[(a - b) / dt for a, b in zip(r, p, strict=True)]
                           for r, p in zip(rows, self._prev[1], strict=True)]
            self._moving = any(a != b for r, p in zip(rows, self._prev[1], strict=True)
                               for a, b in zip(r, p, strict=True))
        if self._prev is None or ts > self._prev[0]:
            self._prev = (ts, rows)
        state, left = quiescence(snapshot.status, self.idle_seconds, self.tick_seconds,
                                 self._moving)
        if self.json:
            self.stream.write(json.dumps({
                "timestamp": ts, "epoch": snapshot.status.epoch,
                "quiescent": snapshot.status.quiescent, "quiescent_in_s": left,
                "classes": self.names,
                "counts": [list(r[:self.params.classes]) for r in rows],
                "rates": [[round(x, 3) for x in r[:self.params.classes]]
                          for r in self._rates] if self._rates else None,
                "link_errors": stats.errors, "lost_frames": stats.lost_frames,
                "reconnects": stats.reconnects, "trace_records_lost": lost,
                "trace_pulses_summarised": list(self.summarised)}) + "\n")
            self.stream.flush()
            return
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        if self.tty:
            self._draw(snapshot, rows, stats, extra, state)
        else:
            self._line(snapshot, rows, stats, extra, state)

    def _trace_lost(self, status):
        """Records lost since the first snapshot shown with TRACE on (None while it is off)."""
        if not status.flags & StatusFlags.TRACE_ON:
            return None
        if self._lost0 is None:
            self._lost0 = status.trace_lost
        return (status.trace_lost - self._lost0) & 0xFFFFFFFF

    def close(self):
        """Leave the last drawing on the terminal (call once the capture ends)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _status(self, snapshot, stats, extra):
        st = snapshot.status
        t = st.timestamp * self.tick_seconds
        return (f"t={t:9.3f}s epoch={st.epoch}  link: {stats.frames} frames, "
                f"{stats.errors} errors, {stats.lost_frames} lost, "
                f"{stats.reconnects} reconnects{('  ' + extra) if extra else ''}")

    def _table(self, rows):
        k = self.params.classes
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("ch", justify="right")
        for name in self.names:
            table.add_column(name, justify="right")
        summarised = any(self.summarised)
        for name in ("glitch", "partial", "dropped", "busy") + (
                ("summarised",) if summarised else ()):
            table.add_column(name, justify="right")
        for ch, row in enumerate(rows):
            rates = self._rates[ch] if self._rates else None
            cells = []
            for i in range(k):
                cell = Text(f"{row[i]:,}")
                if rates:
                    cell.append(f" {_rate(rates[i])}/s", style="dim")
                cells.append(cell)
            busy = f"{100 * rates[k + 5] * self.tick_seconds:.1f} %" if rates else ""
            dropped = Text(f"{row[k + 4]:,}", style="bold red" if row[k + 4] else "")
            more = (f"{self.summarised[ch]:,}",) if summarised else ()
            table.add_row(str(ch), *cells, f"{row[k + 1]:,}", f"{row[k + 3]:,}", dropped, busy,
                          *more)
        return table

    def _draw(self, snapshot, rows, stats, extra, state):
        style = "green" if state == "quiescent" else ("yellow" if state == "busy" else "cyan")
        view = Group(Text(self._status(snapshot, stats, extra)), self._table(rows),
                     Text(state, style=style))
        if self._live is None:
            self._live = Live(view, console=self._console, auto_refresh=False,
                              redirect_stdout=False, redirect_stderr=False, transient=False)
            self._live.start()
        self._live.update(view, refresh=True)

    def _line(self, snapshot, rows, stats, extra, state):
        k = self.params.classes
        totals = [sum(r[i] for r in rows) for i in range(k)]
        counts = " ".join(f"{n}={v}" for n, v in zip(self.names, totals, strict=True))
        self.stream.write(f"{self._status(snapshot, stats, extra)}  {state}  all channels: "
                          f"{counts}\n")
        self.stream.flush()

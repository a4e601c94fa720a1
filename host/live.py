"""The live view of ``rbscope capture``: per-channel counts and rates, link errors.

On a terminal the view redraws in place (ANSI cursor movement) at most every ``interval``
seconds; on anything else (a pipe, a log file) it prints one plain line per ``interval``; with
``json=True`` it prints one JSON object per snapshot (JSON lines) for machines.
"""

import json
import sys
import time

__all__ = ["LiveView"]


def _rate(n):
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return f"{n:.0f}" if n >= 10 or n == 0 else f"{n:.1f}"


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
    """

    def __init__(self, params, tick_seconds, class_names=(), *, stream=None, tty=None,
                 json=False, interval=0.5):
        self.params = params
        self.tick_seconds = tick_seconds
        names = list(class_names)[:params.classes]
        self.names = [n or f"c{k}" for k, n in enumerate(
            names + [""] * (params.classes - len(names)))]
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.json = json
        self.interval = interval
        self._last_draw = 0.0
        self._drawn_lines = 0
        self._prev = None  # (timestamp, [counters rows]) for rates
        self._rates = None
        self.started = time.monotonic()

    def update(self, snapshot, stats, *, force=False, extra=""):
        """Take a new snapshot (``rbscope.device.Snapshot``) and the link's ``LinkStats``."""
        rows = [c.counters for c in snapshot.counters]
        ts = snapshot.status.timestamp
        if self._prev is not None and ts > self._prev[0]:
            dt = (ts - self._prev[0]) * self.tick_seconds
            self._rates = [[(a - b) / dt for a, b in zip(r, p, strict=True)]
                           for r, p in zip(rows, self._prev[1], strict=True)]
        if self._prev is None or ts > self._prev[0]:
            self._prev = (ts, rows)
        if self.json:
            self.stream.write(json.dumps({
                "timestamp": ts, "epoch": snapshot.status.epoch,
                "quiescent": snapshot.status.quiescent,
                "counts": [list(r[:self.params.classes]) for r in rows],
                "rates": [[round(x, 3) for x in r[:self.params.classes]]
                          for r in self._rates] if self._rates else None,
                "link_errors": stats.errors, "lost_frames": stats.lost_frames,
                "reconnects": stats.reconnects}) + "\n")
            self.stream.flush()
            return
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        if self.tty:
            self._draw(snapshot, rows, stats, extra)
        else:
            self._line(snapshot, rows, stats, extra)

    def _status_line(self, snapshot, stats, extra):
        st = snapshot.status
        t = st.timestamp * self.tick_seconds
        state = "quiescent" if st.quiescent else "busy"
        return (f"t={t:9.3f}s epoch={st.epoch} {state}  link: {stats.frames} frames, "
                f"{stats.errors} errors, {stats.lost_frames} lost, "
                f"{stats.reconnects} reconnects{('  ' + extra) if extra else ''}")

    def _draw(self, snapshot, rows, stats, extra):
        k = self.params.classes
        width = max(10, *(len(n) + 2 for n in self.names))
        lines = [self._status_line(snapshot, stats, extra),
                 "ch  " + "".join(f"{n:>{width}}" for n in self.names)
                 + f"{'glitch':>10}{'partial':>10}{'busy %':>8}"]
        for ch, row in enumerate(rows):
            rates = self._rates[ch] if self._rates else None
            cells = []
            for i in range(k):
                cell = f"{row[i]}"
                if rates:
                    cell += f" {_rate(rates[i])}/s"
                cells.append(f"{cell:>{width}}")
            busy = ""
            if rates:
                busy = f"{100 * rates[k + 5] * self.tick_seconds:7.1f}%"
            lines.append(f"{ch:<4}" + "".join(cells) + f"{row[k + 1]:>10}{row[k + 3]:>10}"
                         + f"{busy:>8}")
        out = []
        if self._drawn_lines:
            out.append(f"\x1b[{self._drawn_lines}F")  # back to the first line of the view
        out += [line + "\x1b[K\n" for line in lines]
        self.stream.write("".join(out))
        self.stream.flush()
        self._drawn_lines = len(lines)

    def _line(self, snapshot, rows, stats, extra):
        k = self.params.classes
        totals = [sum(r[i] for r in rows) for i in range(k)]
        counts = " ".join(f"{n}={v}" for n, v in zip(self.names, totals, strict=True))
        self.stream.write(self._status_line(snapshot, stats, extra) + f"  all channels: "
                          f"{counts}\n")
        self.stream.flush()

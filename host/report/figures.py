"""The figures of a report, drawn with matplotlib and embedded as inline SVG.

Figures are built on :class:`matplotlib.figure.Figure` directly (no ``pyplot`` state), so reports
can be made from any thread and nothing opens a window. Text stays text in the SVG
(``svg.fonttype = none``): the file is smaller and the labels can be searched and copied.
"""

import io
import itertools
import math
import re

import matplotlib
import matplotlib.patches
import matplotlib.ticker
from matplotlib.figure import Figure

__all__ = ["histogram_figures", "series_figure", "per_die_figure", "comparison_figure",
           "inline_svg", "CLASS_COLOURS"]

#: Colours of the usual class names (others take the palette in order).
CLASS_COLOURS = {"read": "#1f77b4", "cache": "#17becf", "program": "#d62728",
                 "erase": "#2ca02c", "reset": "#9467bd", "dbsy": "#8c564b"}
_PALETTE = ("#ff7f0e", "#e377c2", "#7f7f7f", "#bcbd22", "#8c564b", "#9467bd")
#: Small multiples per histogram figure.
PER_FIGURE = 16
#: Width of every figure (inches): the page scales them all alike, so their text matches.
WIDTH = 9.5
#: Points kept of a time series (longer ones are thinned evenly).
MAX_POINTS = 2000

_RC = {"svg.fonttype": "none", "font.size": 8.5, "axes.titlesize": 9, "axes.labelsize": 8.5,
       "legend.fontsize": 7.5, "xtick.labelsize": 7.5, "ytick.labelsize": 7.5,
       "svg.hashsalt": "rbscope"}


def class_colour(name, index):
    return CLASS_COLOURS.get(name, _PALETTE[index % len(_PALETTE)])


_figure_ids = itertools.count()


def _svg(fig):
    """Return the figure as an inline ``<svg>`` element (no XML prolog).

    matplotlib names the markers and clip paths inside an SVG by hashes of their content, so two
    figures on one page would repeat ids; every id gets a prefix unique to the figure.
    """
    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    svg = text[text.find("<svg"):]
    prefix = f"f{next(_figure_ids)}-"
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if ids:
        pattern = re.compile(r'(\bid="|#)(' + "|".join(map(re.escape, ids)) + r')(?=["\)])')
        svg = pattern.sub(lambda mo: mo.group(1) + prefix + mo.group(2), svg)
    return svg


def _figure(width, height, *, left=0.9, right=0.25, top=0.45, bottom=0.55, hspace=0.45,
            wspace=0.25):
    """A figure with fixed margins in inches (a layout engine costs seconds per figure)."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, hspace=hspace, wspace=wspace)
    return fig


def _quiet_log(axis):
    """Major ticks only on a log axis (minor ones cost time and say little here)."""
    axis.set_minor_locator(matplotlib.ticker.NullLocator())


def _thin(points):
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    out = [points[int(i * step)] for i in range(MAX_POINTS)]
    out[-1] = points[-1]
    return out


def histogram_figures(m, title_prefix=""):
    """Pulse-width histograms of every enabled channel with the class windows drawn.

    Returns a list of SVG strings, at most :data:`PER_FIGURE` channels each (plus, first, the
    sum over all channels when there are several).
    """
    tick_us = m.tick_seconds * 1e6
    edges = [e * tick_us for e in m.bin_edges()]
    windows = [(name, lo * 1e6, hi * 1e6) for name, (lo, hi) in m.windows_seconds().items()]
    panels = []
    if len(m.enabled) > 1:
        panels.append(("all lines", m.histogram_total()))
    for ch in m.enabled:
        panels.append((m.probes[ch].name or f"ch{ch}", m.counts[ch].histogram))
    # Common x range: from the first to the last non-empty bin of any panel (bin 0 holds width
    # 0, which a log axis cannot show, so bins start at 1).
    used = [b for _, h in panels for b, n in enumerate(h) if n and b > 0]
    if used:
        x0, x1 = edges[min(used)], edges[max(used) + 1]
    else:
        x0, x1 = edges[1], edges[-1]
    for _, lo, hi in windows:
        if lo > 0:
            x0 = min(x0, lo)
        x1 = max(x1, min(hi, edges[-1]))
    x0, x1 = x0 / 1.5, x1 * 1.5
    figures = []
    for start in range(0, len(panels), PER_FIGURE):
        chunk = panels[start:start + PER_FIGURE]
        cols = min(4, len(chunk))
        rows = math.ceil(len(chunk) / cols)
        fig = _figure(WIDTH * cols / 4 + 0.4, 2.0 * rows + 0.9, left=0.7, top=0.75,
                      hspace=0.5)
        axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
        for i, (name, hist) in enumerate(chunk):
            ax = axes[i // cols][i % cols]
            for k, (wname, lo, hi) in enumerate(windows):
                ax.axvspan(max(lo, x0), min(hi, x1), color=class_colour(wname, k), alpha=0.13,
                           lw=0)
            counts = [float(n) if n else math.nan for n in hist[1:]]
            if any(n == n for n in counts):
                ax.stairs([0.0 if n != n else n for n in counts], edges[1:], color="#222",
                          lw=0.9, baseline=None)
            ax.set_xscale("log")
            ax.set_yscale("log", nonpositive="mask")
            _quiet_log(ax.xaxis)
            _quiet_log(ax.yaxis)
            ax.set_xlim(x0, x1)
            ax.set_ylim(bottom=0.7)
            ax.set_title(f"{name}  ({sum(hist):,} pulses)", loc="left")
            ax.grid(True, which="major", lw=0.3, alpha=0.5)
            if i // cols == rows - 1 or i + cols >= len(chunk):
                ax.set_xlabel("pulse width (µs)")
            if i % cols == 0:
                ax.set_ylabel("pulses per bin")
        for j in range(len(chunk), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        handles = [matplotlib.patches.Patch(color=class_colour(n, k), alpha=0.35,
                                            label=f"{n} [{lo:g}, {hi:g}) µs")
                   for k, (n, lo, hi) in enumerate(windows)]
        if handles:
            fig.legend(handles=handles, loc="upper center", ncols=min(5, len(handles)),
                       frameon=False)
        figures.append(_svg(fig))
    return figures


def series_figure(m, series, class_names):
    """Operation rates per class over time, the NAND write rate and, when the host's bytes over
    time are known, the write amplification over time.

    ``series`` is the :func:`rbscope.analysis.wa.wa_series` output (or None). Returns SVG, or None
    when the measurement has no snapshots.
    """
    if not m.snapshots:
        return None
    tick = m.tick_seconds
    channels = m.enabled
    points = [(0.0, [0] * m.params.classes)]
    for snap in m.snapshots:
        points.append((snap.timestamp * tick,
                       [sum(snap.counts[ch].classes[k] for ch in channels)
                        for k in range(m.params.classes)]))
    points = _thin(points)
    rows = [r for r in (series or ()) if r.t1 > r.t0]
    with_wa = any(r.cumulative_wa is not None for r in rows)
    panels = 1 + bool(rows) + with_wa
    fig = _figure(WIDTH, 0.9 + 2.0 * panels)
    axes = [a[0] for a in fig.subplots(panels, 1, squeeze=False, sharex=True)]
    ax = axes[0]
    t = [p[0] for p in points[1:]]
    for k, name in enumerate(class_names):
        if not name or not m.config.windows[k][0] < m.config.windows[k][1]:
            continue
        rates = [(cb[k] - ca[k]) / (tb - ta) if tb > ta else 0.0
                 for (ta, ca), (tb, cb) in zip(points, points[1:], strict=False)]
        if any(rates):
            ax.plot(t, rates, lw=0.9, color=class_colour(name, k), label=name)
    ax.set_ylabel("pulses / s")
    ax.grid(True, lw=0.3, alpha=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", ncols=5, framealpha=0.85)
    ax.set_title("operations per second of device time (all probed lines)", loc="left")
    if rows:
        thin = _thin(rows)
        ax = axes[1]
        ax.plot([r.t1 for r in thin], [r.physical_bytes / (r.t1 - r.t0) / 1e6 for r in thin],
                color="#d62728", lw=0.9)
        ax.set_ylabel("MB/s")
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.set_title("NAND write rate (scaled to every die)", loc="left")
    if with_wa:
        thin = _thin([r for r in rows if r.cumulative_wa is not None])
        ax = axes[2]
        ax.plot([r.t1 for r in thin], [r.cumulative_wa for r in thin], color="#222", lw=1.2,
                label="cumulative")
        inst = [(r.t1, r.wa) for r in thin if r.wa is not None]
        if inst:
            ax.plot([p[0] for p in inst], [p[1] for p in inst], color="#d62728", lw=0.6,
                    alpha=0.5, label="per interval")
        ax.set_ylabel("WA")
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.legend(loc="upper right", ncols=2, framealpha=0.85)
        ax.set_title("write amplification over time", loc="left")
    axes[-1].set_xlabel("time since the start of the capture (s)")
    return _svg(fig)


def per_die_figure(m, result, class_names, with_wa=True):
    """Per-line class counts (grouped bars) and the WA each line alone implies."""
    channels = [c.channel for c in result.channels]
    names = [(k, n) for k, n in enumerate(class_names)
             if n and m.config.windows[k][0] < m.config.windows[k][1]]
    labels = [m.probes[ch].name or f"ch{ch}" for ch in channels]
    per_die_wa = [w for _, w in result.per_die]
    show_wa = with_wa and any(w is not None for w in per_die_wa)
    fig = _figure(WIDTH, 4.8 if show_wa else 2.8,
                  bottom=1.0 if len(channels) > 8 else 0.55)
    axes = fig.subplots(2 if show_wa else 1, 1, squeeze=False, sharex=True)
    ax = axes[0][0]
    width = 0.8 / max(1, len(names))
    for j, (k, name) in enumerate(names):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(channels))]
        ax.bar(xs, [m.counts[ch].classes[k] for ch in channels], width=width,
               color=class_colour(name, k), label=name)
    ax.set_ylabel("pulses")
    ax.grid(True, axis="y", lw=0.3, alpha=0.5)
    ax.legend(loc="upper right", ncols=len(names) or 1, framealpha=0.85)
    ax.set_title("operations per probed line", loc="left")
    if show_wa:
        ax2 = axes[1][0]
        xs = [i for i, w in enumerate(per_die_wa) if w is not None]
        ys = [per_die_wa[i] for i in xs]
        ax2.plot(xs, ys, "o", color="#d62728", ms=4, label="WA from this line alone")
        wa = result.wa
        ax2.axhline(wa.value, color="#222", lw=1, label=f"drive WA {wa.value:.4f}")
        ci = result.wa_confidence
        lo, hi = min(ys + [wa.value]), max(ys + [wa.value])
        if ci is not None and math.isfinite(ci.hi) and ci.hi > ci.lo:
            ax2.axhspan(ci.lo, ci.hi, color="#222", alpha=0.08, lw=0, label="95 % interval")
            lo, hi = min(lo, ci.lo), max(hi, ci.hi)
        pad = (hi - lo) * 0.15 or abs(hi) * 0.01 or 0.01
        ax2.set_ylim(lo - pad, hi + pad)
        ax2.set_ylabel("write amplification")
        ax2.grid(True, axis="y", lw=0.3, alpha=0.5)
        ax2.legend(loc="best", framealpha=0.85, ncols=3)
    axes[-1][0].set_xticks(range(len(channels)), labels, rotation=45 if len(channels) > 8 else 0,
                           ha="right" if len(channels) > 8 else "center")
    return _svg(fig)


def comparison_figure(entries):
    """The procurement view: WA with its interval, and projected endurance, per run.

    ``entries`` is a list of ``(label, wa, lo, hi, tbw_bytes or None)`` in display order.
    """
    n = len(entries)
    longest = max(len(e[0]) for e in entries)
    fig = _figure(WIDTH + 0.07 * longest, 0.38 * n + 1.2, left=0.3 + 0.08 * longest,
                  wspace=0.06)
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    ys = list(range(n))[::-1]
    labels = [e[0] for e in entries]
    was = [e[1] for e in entries]
    err_lo = [max(0.0, e[1] - e[2]) for e in entries]
    err_hi = [e[3] - e[1] if math.isfinite(e[3]) else 0.0 for e in entries]
    ax1.barh(ys, was, color="#d62728", alpha=0.75, height=0.6)
    ax1.errorbar(was, ys, xerr=[err_lo, err_hi], fmt="none", ecolor="#222", capsize=3, lw=1)
    ax1.set_yticks(ys, labels)
    ax1.set_xlabel("write amplification (lower is better)")
    ax1.axvline(1.0, color="#888", lw=0.8, ls="--")
    ax1.grid(True, axis="x", lw=0.3, alpha=0.5)
    tbw = [e[4] / 1e12 if e[4] is not None else 0.0 for e in entries]
    ax2.barh(ys, tbw, color="#2ca02c", alpha=0.75, height=0.6)
    for y, e in zip(ys, entries, strict=True):
        if e[4] is None:
            ax2.text(0, y, "  no rating", va="center", fontsize=7, color="#666")
    ax2.set_xlabel("projected endurance at this WA (TBW, higher is better)")
    ax2.grid(True, axis="x", lw=0.3, alpha=0.5)
    return _svg(fig)


#: :func:`_svg` for other pages of figures (``rbscope probe-geometry --plots``).
inline_svg = _svg

"""The detectors' series as figures: what each decision rule looked at, with its decision drawn.

:func:`finding_figures` draws one :class:`matplotlib.figure.Figure` per finding that carries a
series (no ``pyplot`` state: nothing opens a window); :func:`write_plots` writes them as SVG
files and one self-contained HTML page (``probe.html``: the findings' summaries and every
figure inline), as ``rbscope probe-geometry --plots DIR`` does.

* page size: the mean time of a pair of adjacent 512-byte updates against the candidate
  boundary, the boundary found marked;
* parallel units: the speed-up of ``q`` concurrent writers against ``q``;
* write buffer: each trial's write latencies against the bytes written since the flush, the
  slow/fast bound and the buffer found;
* garbage-collection onset: the throughput per window against the bytes written, the onset
  and the two levels;
* erase unit: the write latencies of the first periods, the erase phases marked, and the
  series folded at the period (each phase's lower quartile over the periods).
"""

import html
import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from rbscope.files import OutputError
from rbscope.report.figures import inline_svg

from .erase_unit import QUANTILE, SCORE, SLOW

__all__ = ["finding_figures", "write_plots"]

_DECISION = "#d62728"
_SERIES = "#1f77b4"
_MIB = float(1 << 20)


def _fig(rows=1, height=3.2):
    fig = Figure(figsize=(8.0, height * rows))
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    return fig, axes


def _page(f):
    ev = f["evidence"]
    means = ev.get("mean_pair_s")
    if not means:
        return None
    x = [int(c) for c in means]
    fig, (ax,) = _fig()
    ax.plot(x, [means[str(c)] * 1e3 for c in x], "o-", color=_SERIES,
            label="trimmed mean pair (10 % each end)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("candidate boundary (bytes)")
    ax.set_ylabel("pair of updates (ms)")
    if f["value"]:
        ax.axvline(f["value"], color=_DECISION, ls="--", label=f"page {f['value']} B")
    ax.set_title("Effective page size: adjacent 512-byte updates at each boundary")
    ax.legend()
    return fig


def _stripe(f):
    ev = f["evidence"]
    ratio = ev.get("ratio")
    if not ratio:
        return None
    bits = sorted(int(k) for k in ratio)
    striping = set(f["value"] or ())
    shift = round(math.log2(ev["page"])) if ev.get("page") else 0
    fig, (ax,) = _fig()
    ax.bar(bits, [ratio[str(b)] for b in bits],
           color=[_DECISION if b + shift in striping else _SERIES for b in bits])
    ax.axhline(0.5, color="grey", ls=":", label="overlapped (another unit)")
    ax.axhline(1.0, color="grey", ls="--", label="queued (one unit)")
    ax.set_xticks(bits, [f"{b}\n(byte {b + shift})" for b in bits])
    ax.set_xlabel("page-address bit the two writes differ in")
    ax.set_ylabel("concurrent ÷ sequential pair time")
    ax.set_title("Striping bits: two writes one address bit apart")
    ax.legend()
    return fig


def _alloc(f):
    ev = f["evidence"]
    ratio = ev.get("ratio")
    if not ratio:
        return None
    fig, (ax,) = _fig()
    ax.plot(np.arange(1, len(ratio) + 1), ratio, lw=0.6, color=_SERIES,
            label="pair at once ÷ median pair in turn")
    bounds = ev.get("boundaries") or []
    if f.get("value") and bounds:
        ax.plot(bounds, [ratio[b - 1] for b in bounds], "v", color=_DECISION, ms=4,
                label=f"unit boundaries: every {ev['pages_per_unit']} pages")
    ax.axhline(1.0, color="grey", ls="--", label="queued (one unit)")
    ax.set_xlabel(f"page boundary (pages of {ev.get('page')} bytes)")
    ax.set_ylabel("pair time ratio")
    ax.set_title("Allocation unit: neighbouring pages read at once")
    ax.legend(loc="lower left")
    return fig


def _units(f):
    ev = f["evidence"]
    speed = ev.get("speedup")
    if not speed:
        return None
    q = [int(k) for k in speed]
    fig, (ax,) = _fig()
    ax.plot(q, [speed[str(k)] for k in q], "o-", color=_SERIES, label="speed-up q·t(1)/t(q)")
    ax.plot(q, q, ":", color="grey", label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    if f["value"]:
        ax.axhline(f["value"], color=_DECISION, ls="--", label=f"{f['value']} units")
    ax.set_xlabel("concurrent writers q")
    ax.set_ylabel("speed-up")
    ax.set_title("Parallel units: concurrent one-page writers")
    ax.legend()
    return fig


def _buffer(f):
    ev = f["evidence"]
    series = ev.get("latency_s")
    if not series:
        return None
    size = ev["write_bytes"]
    fig, (ax,) = _fig()
    for i, lat in enumerate(series):
        x = (np.arange(len(lat)) + 1) * size / 1024
        ax.plot(x, np.asarray(lat) * 1e6, ".-", lw=0.6, ms=3, label=f"trial {i + 1}")
    fast = float(np.median(ev["fast_s"]))
    bound = math.sqrt(fast * ev["slow_s"]) * 1e6
    ax.axhline(bound, color="grey", ls=":", label="slow above sqrt(fast x written-through)")
    if f["value"]:
        ax.axvline(f["value"] / 1024, color=_DECISION, ls="--",
                   label=f"buffer {f['value'] // 1024} KiB")
    ax.set_yscale("log")
    ax.set_xlabel("KiB written since the flush (no FUA)")
    ax.set_ylabel("write latency (µs)")
    ax.set_title("Write buffer: buffered writes after a flush, until one waits for the flash")
    ax.legend()
    return fig


def _gc(f):
    ev = f["evidence"]
    thr = ev.get("throughput_MB_s")
    if not thr:
        return None
    per = ev["window_writes"] * ev["write_bytes"]
    x = (np.arange(len(thr)) + 0.5) * per / _MIB
    fig, (ax,) = _fig()
    ax.plot(x, thr, ".-", color=_SERIES, lw=0.8, label="throughput per window")
    if f["value"] is not None:
        ax.axvline(f["value"] / _MIB, color=_DECISION, ls="--",
                   label=f"onset {f['value'] / _MIB:.2f} MiB")
        ax.axhline(ev["base_MB_s"], color="grey", ls=":", label="before / after (medians)")
        ax.axhline(ev["post_MB_s"], color="grey", ls=":")
    ax.axvline(ev["logical_bytes"] / _MIB, color="black", lw=0.8,
               label=f"logical size {ev['logical_bytes'] / _MIB:.2f} MiB")
    op = ev.get("over_provisioning_at_least")
    title = "Garbage-collection onset: random one-page FUA writes"
    if op is not None:
        title += f" (over-provisioning ≥ {op:.1%})"
    ax.set_title(title)
    ax.set_xlabel("MiB written")
    ax.set_ylabel("MB/s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower left")
    return fig


def _erase(f):
    ev = f["evidence"]
    lat = ev.get("latency_s")
    if not lat:
        return None
    z = np.asarray(lat) * 1e3
    p = ev.get("period_writes")
    fig, (a1, a2) = _fig(2)
    shown = z[:6 * p] if p else z[:1024]
    a1.plot(np.arange(len(shown)), shown, lw=0.6, color=_SERIES)
    if p:
        units = ev["units"]
        k = len(z) // p
        phases = np.quantile((z[:k * p] / np.median(z)).reshape(k, p), QUANTILE, axis=0,
                             method="lower")
        slow = float(np.quantile(z / np.median(z), SLOW))
        spikes = np.flatnonzero(phases >= SCORE * slow)
        for s in spikes:
            a1.plot(np.arange(s, len(shown), p), shown[s::p], "v", color=_DECISION, ms=4)
        a1.set_title(f"Erase unit: an erase every {p} sequential writes (marked): "
                     f"{p // units} program units x {units} units")
        a2.bar(np.arange(p), phases, width=1.0, color=_SERIES)
        a2.axhline(SCORE * slow, color=_DECISION, ls="--",
                   label=f"{SCORE} x the 80th percentile of all writes")
        a2.set_xlabel(f"phase (write index mod {p})")
        a2.set_ylabel("lower quartile / median write")
        a2.legend()
    else:
        a1.set_title("Erase unit: sequential FUA writes (no period found)")
        a2.set_visible(False)
    a1.set_yscale("log")
    a1.set_xlabel("write")
    a1.set_ylabel("latency (ms)")
    return fig


_DRAW = {"page_size": _page, "parallel_units": _units, "stripe_bits": _stripe,
         "allocation_unit": _alloc,
         "write_buffer": _buffer, "gc_onset": _gc, "erase_unit": _erase}


def finding_figures(findings):
    """``[(name, Figure)]`` for the findings (``Finding`` or their dicts) that carry a series."""
    out = []
    for f in findings:
        d = f if isinstance(f, dict) else f.to_dict()
        draw = _DRAW.get(d["name"])
        fig = draw(d) if draw else None
        if fig is not None:
            fig.tight_layout()
            out.append((d["name"], fig))
    return out


def write_plots(findings, directory, *, title="rbscope probe-geometry"):
    """Write each figure as ``DIR/<finding>.svg`` and all of them, with the findings'
    summaries, in ``DIR/probe.html``; return the paths written."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise OutputError(f"--plots {directory}: exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title></head><body style='font-family:sans-serif;max-width:60em'>"
             f"<h1>{html.escape(title)}</h1>"]
    figs = dict(finding_figures(findings))
    for f in findings:
        f = f if isinstance(f, dict) else f.to_dict()
        parts.append(f"<h2>{html.escape(f['name'])}: {html.escape(str(f['value']))} "
                     f"(confidence {f['confidence']:.2f})</h2>")
        parts += [f"<p>{html.escape(line)}</p>" for line in f.get("summary", [])]
        parts.append(f"<p><small>rule: {html.escape(f.get('rule', ''))}</small></p>")
        parts += [f"<p><em>{html.escape(n)}</em></p>" for n in f.get("notes", [])]
        if f["name"] in figs:
            svg = inline_svg(figs[f["name"]])  # ids unique on the page
            path = d / f"{f['name']}.svg"
            path.write_text(svg, encoding="utf-8")
            paths.append(path)
            parts.append(svg)
    parts.append("</body></html>\n")
    page = d / "probe.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return paths + [page]

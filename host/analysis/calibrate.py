"""Calibration: propose class windows from a width histogram, and estimate window overlap.

A calibration run records a workload rich in every operation (e.g. a random write that triggers
garbage collection) with wide windows; :func:`calibrate` then looks at the width histogram:

1. **Clusters.** The log-linear histogram is turned into a density per unit of ``log2(width)``,
   smoothed (Gaussian kernel, ``smooth`` bins), and cut at its valleys; a valley splits two
   peaks only if it is lower than ``merge`` × the smaller peak. Peaks holding less than
   ``min_share`` of the pulses are noise.
2. **Mixture fit.** A mixture of log-normal components (one per cluster, plus one at the
   expected time of any operation the timing hints name but no cluster matched — an erase
   hidden in the tail of slow programs) is fitted to the binned counts by expectation-
   maximisation. Components that end with a negligible weight are dropped.
3. **Classes.** Each component is named by the timing hints (the geometry's ``[timing]``, in
   µs, or :data:`DEFAULT_HINTS`): the hint whose range is nearest in log scale. When program
   and erase ranges overlap, the longest component of the shared range is the erase (erases
   are the long, rare pulses) if another component is a program.
4. **Windows.** Between two neighbouring classes the boundary is where their weighted
   densities cross (the Bayes decision point), or the valley when they do not cross between
   their centres. The outer edges are 4 σ beyond the outer components.
5. **Overlap.** From the fit, the expected number of erases inside the program window and of
   programs outside it; :func:`overlap_correction` turns this into corrected program counts
   for the WA engine.

Everything is in ticks internally and reported in µs.
"""

import math
from dataclasses import dataclass

from .presets import Preset
from .wa import erase_plausible, program_class_index

__all__ = [
    "DEFAULT_HINTS", "Component", "Cluster", "Calibration", "CalibrationError", "find_clusters",
    "fit_mixture", "calibrate", "overlap_correction", "ascii_histogram", "hints_from_geometry",
    "erase_plausible",
]

#: Typical operation times (µs) used to name clusters when no geometry gives timings.
DEFAULT_HINTS = {"cache": (0.5, 10.0), "read": (10.0, 150.0), "program": (150.0, 2300.0),
                 "erase": (1500.0, 10000.0)}


class CalibrationError(ValueError):
    """The histogram cannot be calibrated (too few pulses, no structure)."""


@dataclass
class Cluster:
    """A peak of the smoothed histogram between two valleys (widths in ticks)."""

    peak: float
    lo: float
    hi: float
    count: int


@dataclass
class Component:
    """A log-normal mixture component: ``log2(width)`` ~ N(mu, sigma²), weight in pulses."""

    mu: float
    sigma: float
    weight: float
    name: str = ""
    bounds: tuple | None = None  # (mu_lo, mu_hi, sigma_max) for components seeded from hints

    @property
    def center(self):
        return 2 ** self.mu

    def cdf(self, width):
        if width <= 0:
            return 0.0
        return 0.5 * (1 + math.erf((math.log2(width) - self.mu) / (self.sigma * math.sqrt(2))))

    def mass(self, lo, hi):
        """Expected pulses with width in ``[lo, hi)``."""
        return self.weight * (self.cdf(hi) - self.cdf(lo))

    def density(self, x):
        """Weighted density at ``x = log2(width)``."""
        z = (x - self.mu) / self.sigma
        return self.weight * math.exp(-0.5 * z * z) / (self.sigma * math.sqrt(2 * math.pi))


def _bins(histogram, params):
    """Return ``[(lo, hi, log2 centre, log2 width, count)]`` of the non-empty bins."""
    out = []
    for b, n in enumerate(histogram):
        if not n:
            continue
        lo = params.hist_bin_lo(b)
        hi = params.hist_bin_lo(b + 1) if b + 1 < params.hist_bins else params.max_width
        lo_eff = max(lo, 0.5)
        out.append((lo, hi, 0.5 * (math.log2(lo_eff) + math.log2(hi)),
                    math.log2(hi) - math.log2(lo_eff), n))
    return out


def merged_peaks(s, merge):
    """Find the peaks of a smoothed density ``s`` (a sequence of bins) and merge those separated
    by a shallow valley (valley / lower peak above ``merge``), the least prominent first.

    Returns ``(peaks, bounds)``: the peak bins, left to right, and ``[0, valley bins…, len(s)]``,
    so that peak ``i`` owns bins ``bounds[i] … bounds[i + 1] - 1``.
    """
    nb = len(s)
    peaks = [b for b in range(nb) if s[b] > 0 and (b == 0 or s[b] > s[b - 1])
             and (b == nb - 1 or s[b] >= s[b + 1])]

    def valley(a, c):
        return min(range(a, c + 1), key=s.__getitem__)

    changed = True
    while changed and len(peaks) > 1:
        changed = False
        best = None
        for a, c in zip(peaks, peaks[1:], strict=False):
            ratio = s[valley(a, c)] / min(s[a], s[c])
            if ratio > merge and (best is None or ratio > best[0]):
                best = (ratio, a, c)
        if best:
            _, a, c = best
            peaks.remove(a if s[a] < s[c] else c)
            changed = True
    bounds = [0] + [valley(a, c) for a, c in zip(peaks, peaks[1:], strict=False)] + [nb]
    return peaks, bounds


def find_clusters(histogram, params, *, smooth=1.5, merge=0.6, min_share=0.002):
    """Return the clusters of a histogram (list of :class:`Cluster`), left to right."""
    nb = params.hist_bins
    total = sum(histogram)
    if total == 0:
        return []
    dens = []
    for b in range(nb):
        lo = max(params.hist_bin_lo(b), 0.5)
        hi = params.hist_bin_lo(b + 1) if b + 1 < nb else params.max_width
        dens.append(histogram[b] / (math.log2(hi) - math.log2(lo)))
    radius = max(1, int(3 * smooth))
    kernel = [math.exp(-0.5 * (j / smooth) ** 2) for j in range(-radius, radius + 1)]
    s = []
    for b in range(nb):
        acc = norm = 0.0
        for j, kv in enumerate(kernel):
            i = b + j - radius
            if 0 <= i < nb:
                acc += kv * dens[i]
                norm += kv
        s.append(acc / norm)
    peaks, bounds = merged_peaks(s, merge)
    clusters = []
    for p, lo_b, hi_b in zip(peaks, bounds, bounds[1:], strict=False):
        count = sum(histogram[lo_b:hi_b])
        if count < max(3, min_share * total):
            continue
        occupied = [b for b in range(lo_b, hi_b) if histogram[b]]
        lo = params.hist_bin_lo(occupied[0])
        last = occupied[-1]
        hi = params.hist_bin_lo(last + 1) if last + 1 < nb else params.max_width
        pk = params.hist_bin_lo(p)
        pk_hi = params.hist_bin_lo(p + 1) if p + 1 < nb else params.max_width
        clusters.append(Cluster(math.sqrt(max(pk, 0.5) * pk_hi), lo, hi, count))
    return clusters


def fit_mixture(histogram, params, components, *, iterations=300, min_weight_share=0.002):
    """Fit the weights, means and spreads of ``components`` to a histogram (binned EM).

    Returns the fitted components (negligible ones removed), sorted by centre.
    """
    bins = _bins(histogram, params)
    total = sum(b[4] for b in bins)
    if not bins or not components:
        return []
    comps = [Component(c.mu, c.sigma, c.weight, c.name, c.bounds) for c in components]
    floor = 0.03
    for _ in range(iterations):
        acc = [[0.0, 0.0, 0.0] for _ in comps]  # weight, sum x, sum x²
        for lo, hi, x, bw, n in bins:
            probs = [c.mass(lo, hi) for c in comps]
            z = sum(probs)
            if z <= 0:
                # Far from every component: give it to the nearest.
                j = min(range(len(comps)), key=lambda i: abs(comps[i].mu - x))
                probs = [0.0] * len(comps)
                probs[j] = 1.0
                z = 1.0
            for j, pj in enumerate(probs):
                r = n * pj / z
                a = acc[j]
                a[0] += r
                a[1] += r * x
                a[2] += r * (x * x + bw * bw / 12)  # Sheppard: spread within the bin
        shift = 0.0
        for c, (w, sx, sxx) in zip(comps, acc, strict=True):
            if w <= 1e-9:
                c.weight = 0.0
                continue
            mu = sx / w
            sigma = math.sqrt(max(sxx / w - mu * mu, floor * floor))
            if c.bounds is not None:
                mu = min(max(mu, c.bounds[0]), c.bounds[1])
                sigma = min(math.sqrt(max(sxx / w - mu * mu, floor * floor)), c.bounds[2])
            shift = max(shift, abs(mu - c.mu), abs(sigma - c.sigma))
            c.mu, c.sigma, c.weight = mu, sigma, w
        if shift < 1e-7:
            break
    kept = []
    for c in sorted(comps, key=lambda c: c.mu):
        if c.weight < max(1.0, min_weight_share * total):
            continue
        if kept and abs(c.mu - kept[-1].mu) < 0.02 and abs(c.sigma - kept[-1].sigma) < 0.02:
            kept[-1].weight += c.weight  # two seeds converged on one cluster
            continue
        kept.append(c)
    return kept


@dataclass
class Calibration:
    """What :func:`calibrate` found, and the windows it proposes (µs)."""

    clusters: list
    components: list
    preset: Preset
    boundaries: list  # (between, and, µs, how)
    overlap: dict  # expected erases in the program window, programs outside it
    tick_seconds: float
    total: int
    notes: list

    def to_dict(self):
        us = self.tick_seconds * 1e6
        return {
            "pulses": self.total,
            "clusters": [{"peak_us": c.peak * us, "lo_us": c.lo * us, "hi_us": c.hi * us,
                          "count": c.count} for c in self.clusters],
            "components": [{"name": c.name, "center_us": c.center * us,
                            "sigma_log2": c.sigma, "weight": c.weight}
                           for c in self.components],
            "windows_us": {n: [lo, hi] for n, lo, hi in self.preset.windows},
            "glitch_us": self.preset.glitch_us,
            "boundaries": [{"between": a, "and": b, "us": x, "how": how}
                           for a, b, x, how in self.boundaries],
            "overlap": self.overlap,
            "notes": self.notes,
        }


def _name(center_us, hints):
    def dist(rng):
        lo, hi = rng
        x = math.log(center_us)
        if math.log(lo) <= x <= math.log(hi):
            return 0.0
        return min(abs(x - math.log(lo)), abs(x - math.log(hi)))
    return sorted(hints, key=lambda name: dist(hints[name]))


def calibrate(histogram, params, tick_seconds, *, hints=None, glitch_us=0.2, smooth=1.5,
              merge=0.6, min_share=0.002, pages_per_block=None):
    """Propose class windows for a width histogram (ticks of ``tick_seconds``).

    Parameters
    ----------
    histogram : list of int
        ``params.hist_bins`` bin counts (e.g. :meth:`Measurement.histogram_total`).
    hints : dict of str to (float, float), optional
        Operation time ranges in µs (default :data:`DEFAULT_HINTS`).
    glitch_us : float
        Glitch filter of the proposed preset.
    pages_per_block : int, optional
        The structure check: an erase opens a block that this many page programs fill, so an
        "erase" component far more frequent than programs ÷ pages per block is not one (it is
        the slow tail of the programs) and is renamed a program.
    """
    hints = dict(DEFAULT_HINTS if not hints else hints)
    us = tick_seconds * 1e6
    notes = []
    histogram, glitches = _without_glitches(histogram, params)
    if glitches:
        # The proposed filter drops them on the device too.
        glitch_us = max(glitch_us, _round_us((GLITCH_TICKS + 1) * us))
        notes.append(f"{glitches:,} pulses of at most {GLITCH_TICKS} ticks "
                     f"({GLITCH_TICKS * us:.3g} µs) look like glitches (ringing), not "
                     f"operations: left out of the windows; the proposed glitch filter is "
                     f"{glitch_us:g} µs")
    total = sum(histogram)
    if total < 20:
        raise CalibrationError(f"only {total} measured pulses: record a longer, busier "
                               f"calibration workload")
    clusters = find_clusters(histogram, params, smooth=smooth, merge=merge, min_share=min_share)
    if not clusters:
        raise CalibrationError("no cluster found in the histogram")
    comps = []
    for cl in clusters:
        sigma = max(0.05, (math.log2(cl.hi) - math.log2(max(cl.lo, 0.5))) / 4)
        comps.append(Component(math.log2(cl.peak), sigma, float(cl.count)))
    comps = fit_mixture(histogram, params, comps)
    # Operations the hints expect but no cluster shows (an erase hidden in the tail of slow
    # programs): try a component at several places of the hint range that the data cover, and
    # keep the best if it improves the fit beyond the BIC penalty of three more parameters.
    bins = _bins(histogram, params)
    lo_all = min(c.lo for c in clusters)
    hi_all = max(c.hi for c in clusters)
    named = {_name(c.center * us, hints)[0] for c in comps}
    for name, (lo, hi) in hints.items():
        a, b = max(lo / us, lo_all), min(hi / us, hi_all)
        if name in named or not a < b:
            continue
        base = _loglik(bins, comps)
        best = None
        bounds = (math.log2(lo / us), math.log2(hi / us), max(0.05, math.log2(hi / lo) / 2))
        for j in range(6):
            x = math.log2(a) + (math.log2(b) - math.log2(a)) * (j + 0.5) / 6
            trial = fit_mixture(histogram, params, comps + [
                Component(x, 0.1, 0.02 * total, name, bounds)])
            gain = _loglik(bins, trial) - base
            if gain > 1.5 * math.log(total) * 3 / 2 and (best is None or gain > best[0]):
                if any(c.bounds is not None for c in trial):
                    best = (gain, trial)
        if best:
            comps = best[1]
            notes.append(f"no cluster peak looked like {name}; a mixture component fits one "
                         f"(log-likelihood gain {best[0]:.1f})")
    # Name the components.
    for c in comps:
        c.name = _name(c.center * us, hints)[0]
    if "program" in hints and "erase" in hints:
        plo, phi = hints["program"]
        elo, ehi = hints["erase"]
        shared = [c for c in comps if max(plo, elo) <= c.center * us <= min(phi, ehi)]
        if shared:
            longest = max(shared, key=lambda c: c.mu)
            for c in shared:
                c.name = "program"
            has_erase = any(c.name == "erase" for c in comps if c not in shared)
            if not has_erase and any(c is not longest and c.name == "program" for c in comps):
                longest.name = "erase"
    if pages_per_block:
        _structure_check(comps, pages_per_block, notes)
    prog = [c for c in comps if c.name == "program"]
    # Merge neighbouring components of one class into class groups, left to right.
    groups = []
    for c in comps:
        if groups and groups[-1][0] == c.name:
            groups[-1][1].append(c)
        else:
            groups.append((c.name, [c]))
    names = [g[0] for g in groups]
    if len(set(names)) != len(names):
        notes.append(f"classes interleave along the width axis ({' < '.join(names)}); windows "
                     f"follow the first occurrence")
        seen, merged = {}, []
        for name, cs in groups:
            if name in seen:
                seen[name][1].extend(cs)
            else:
                seen[name] = (name, list(cs))
                merged.append(seen[name])
        groups = merged
    boundaries = []
    edges = []
    for (na, ca), (nb_, cb) in zip(groups, groups[1:], strict=False):
        a_top = max(c.mu for c in ca)
        b_bot = min(c.mu for c in cb)
        x = _crossing(ca, cb, a_top, b_bot)
        how = "density crossing"
        if x is None:
            x = 0.5 * (a_top + b_bot)
            how = "midpoint"
        edges.append(2 ** x)
        boundaries.append((na, nb_, 2 ** x * us, how))
    first = groups[0][1]
    last = groups[-1][1]
    lo_edge = max(2 ** min(c.mu - 4 * c.sigma for c in first), glitch_us / us, 1)
    hi_edge = min(2 ** max(c.mu + 4 * c.sigma for c in last), params.max_width)
    cuts = [lo_edge] + edges + [hi_edge]
    windows = []
    for (name, _), a, b in zip(groups, cuts, cuts[1:], strict=False):
        windows.append((name, _round_us(a * us), _round_us(b * us)))
    preset = Preset(tuple(windows), glitch_us)
    overlap = {}
    wins = {n: (lo / us, hi / us) for n, lo, hi in windows}
    if "program" in wins:
        a, b = wins["program"]
        erases = [c for c in comps if c.name == "erase"]
        in_win = sum(c.mass(a, b) for c in erases)
        prog_mass = sum(c.weight for c in prog)
        prog_in = sum(c.mass(a, b) for c in prog)
        observed = sum(n for lo, hi, _, _, n in _bins(histogram, params) if a <= lo and hi <= b)
        overlap = {"erases_in_program_window": in_win,
                   "programs_outside_program_window": prog_mass - prog_in,
                   "program_pulses_fitted": prog_mass,
                   "program_window_pulses": observed}
    return Calibration(clusters, comps, preset, boundaries, overlap, tick_seconds, total, notes)


#: Pulses no wider than this many ticks are glitch-like: at one or two ticks a width is below
#: what the tick resolves, and no NAND operation of interest is that short at any tick the
#: sniffer runs (R/B# ringing is; the simulator's stimulus rings for 1-2 µs at 1 µs ticks).
GLITCH_TICKS = 2


def _without_glitches(histogram, params):
    """``(histogram, glitches)``: the histogram without its glitch-like bins (every width at
    most :data:`GLITCH_TICKS`), and how many pulses those held."""
    out = list(histogram)
    glitches = 0
    for b in range(len(out)):
        if b + 1 < params.hist_bins and params.hist_bin_lo(b + 1) <= GLITCH_TICKS + 1:
            glitches += out[b]
            out[b] = 0
    return out, glitches


def _structure_check(comps, pages_per_block, notes):
    """Rename "erase" components the structure rules out (far too frequent) as programs."""
    programs = sum(c.weight for c in comps if c.name == "program")
    for c in sorted((c for c in comps if c.name == "erase"), key=lambda c: c.mu):
        if programs and not erase_plausible(c.weight, programs, pages_per_block):
            notes.append(f"a component at {c.center:.4g} ticks holding {c.weight:,.0f} pulses "
                         f"cannot be erases: programs ÷ pages per block allows about "
                         f"{programs / pages_per_block:,.0f}; it is named a program")
            c.name = "program"
            programs += c.weight


def _loglik(bins, comps):
    """Binned multinomial log-likelihood of ``comps`` (up to a constant)."""
    total = sum(c.weight for c in comps)
    out = 0.0
    for lo, hi, _x, _bw, n in bins:
        p = sum(c.mass(lo, hi) for c in comps) / total
        out += n * math.log(max(p, 1e-300))
    return out


def _crossing(ca, cb, xa, xb):
    """``log2`` width between ``xa`` and ``xb`` where the densities of ``ca`` and ``cb`` cross."""
    def diff(x):
        return sum(c.density(x) for c in ca) - sum(c.density(x) for c in cb)
    if xb <= xa:
        return None
    n = 400
    prev_x, prev_d = xa, diff(xa)
    for i in range(1, n + 1):
        x = xa + (xb - xa) * i / n
        d = diff(x)
        if prev_d > 0 >= d:
            # Linear interpolation of the sign change.
            return prev_x + (x - prev_x) * prev_d / (prev_d - d) if prev_d != d else x
        prev_x, prev_d = x, d
    return None


def _round_us(x):
    if x <= 0:
        return 0.0
    digits = 3 - int(math.floor(math.log10(x)))
    return round(x, max(digits, 0))


def hints_from_geometry(geometry):
    """Timing hints (µs) from a geometry's ``[timing]``, completed with :data:`DEFAULT_HINTS`."""
    hints = dict(DEFAULT_HINTS)
    if geometry is not None:
        for name, (lo, hi) in geometry.timing.items():
            lo = max(lo, 1e-3)
            hints[name] = (lo, max(hi, lo * 1.01))
    return hints


def overlap_correction(measurement, program_class="program", erase_class="erase", *,
                       hints=None):
    """Return ``({channel: corrected program count}, evidence)`` from a mixture fit.

    The mixture is fitted to the measurement's total histogram with the program and erase
    windows as they were configured; the corrected count of each channel is its program count
    × (fitted programs) / (fitted pulses inside the program window), i.e. erases that fell in
    the window are removed and programs that fell outside it are added back, in the proportion
    the whole measurement shows.
    """

    k = program_class_index(measurement, program_class)
    hist = measurement.histogram_total()
    tick = measurement.tick_seconds
    us = tick * 1e6
    lo, hi = measurement.config.windows[k]
    hints = dict(DEFAULT_HINTS if not hints else hints)
    cal = calibrate(hist, measurement.params, tick, hints=hints)
    prog = [c for c in cal.components if c.name == "program"]
    erase = [c for c in cal.components if c.name == erase_class]
    in_window = sum(c.mass(lo, hi) for c in prog + erase)
    fitted_programs = sum(c.weight for c in prog)
    if in_window <= 0 or not prog:
        raise CalibrationError("the mixture fit found no program component in the program "
                               "window; cannot correct")
    factor = fitted_programs / in_window
    corrected = {ch: measurement.counts[ch].classes[k] * factor for ch in measurement.enabled}
    evidence = {"factor": factor,
                "erases_in_window": sum(c.mass(lo, hi) for c in erase),
                "programs_outside_window": fitted_programs - sum(c.mass(lo, hi) for c in prog),
                "window_us": [lo * us, hi * us],
                "components": cal.to_dict()["components"]}
    return corrected, evidence


def ascii_histogram(histogram, params, tick_seconds, windows=(), width=50, per_octave=2):
    """Return text lines of a histogram (``per_octave`` rows per octave) with windows marked.

    ``windows`` is a sequence of ``(name, lo_us, hi_us)``.
    """
    us = tick_seconds * 1e6
    rows = {}
    for b, n in enumerate(histogram):
        if not n:
            continue
        lo = params.hist_bin_lo(b)
        key = math.floor(math.log2(max(lo, 0.5)) * per_octave)
        rows[key] = rows.get(key, 0) + n
    if not rows:
        return ["  (no pulses)"]
    peak = max(rows.values())
    lines = []
    for key in range(min(rows), max(rows) + 1):
        n = rows.get(key, 0)
        a = 2 ** (key / per_octave) * us
        b = 2 ** ((key + 1) / per_octave) * us
        names = [name for name, lo, hi in windows if lo < b and a < hi]
        bar = "#" * (max(1, round(width * n / peak)) if n else 0)
        lines.append(f"  {a:>10.4g} – {b:<10.4g} µs {n:>9} |{bar:<{width}}| "
                     f"{'/'.join(names)}")
    return lines

"""Building a report: runs, tables, figures, the HTML and its PDF (:mod:`rbscope.report`)."""


import base64
import datetime
import html
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import jinja2

from rbscope import __version__
from rbscope.analysis.logical import LogicalVolume
from rbscope.analysis.wa import compute_wa, wa_series
from rbscope.files import OutputError, check_output, write_text

from . import figures
from .browser import html_to_pdf
from .errors import ReportError
from .tables import Column, Table, fmt_bytes

__all__ = ["ReportError", "ReportRun", "Report", "analyse_run", "build_report", "render_html",
           "write_report", "interval_note"]


@dataclass
class ReportRun:
    """One measurement of one drive under one workload, analysed.

    Parameters
    ----------
    label : str
        How the run is named in tables and plots (unique in a report).
    drive : str
        The drive (its geometry's name unless given).
    workload : str
        What the host ran (free text, e.g. a micro-benchmark name).
    measurement : Measurement
    geometry : Geometry
    result : WAResult
        The analysis; ``logical_given`` says whether its WA means anything.
    logical_given : bool
    series : list of SeriesRow or None
    notes : list of str
        Import notes and capture-integrity warnings.
    drive_claim : dict, optional
        What the drive's own NAND-write counters say (``rbscope analyze --drive-counters``):
        :meth:`rbscope.analysis.drive_counters.DriveClaim.to_dict` and ``disagrees``.
    structure : list of Finding
        What the pulses show of the drive's structure (:mod:`rbscope.analysis.structure`).
    """

    label: str
    drive: str
    workload: str
    measurement: object
    geometry: object
    result: object
    logical_given: bool = True
    series: list | None = None
    notes: list = field(default_factory=list)
    drive_claim: dict | None = None  # DriveClaim.to_dict() plus "disagrees"
    structure: list = field(default_factory=list)  # rbscope.analysis.structure.Finding

    @property
    def wa(self):
        return self.result.wa if self.logical_given else None

    @property
    def interval95(self):
        """The interval to rank and plot with: the 95 % one when there is one, else the
        worst-case bounds."""
        if not self.logical_given:
            return None
        return self.result.wa_confidence or self.result.wa

    @property
    def tbw(self):
        e = self.result.endurance
        return None if e is None or not self.logical_given else e.tbw_bytes


def analyse_run(measurement, geometry, logical, *, result=None, label=None, drive=None,
                workload="", mp=None, program_class="program", logical_series=None, notes=(),
                drive_claim=None, structure=()):
    """Return a :class:`ReportRun` of a measurement.

    ``logical`` is a :class:`rbscope.analysis.logical.LogicalVolume` or None (physical volume only).
    ``result`` is the run's :class:`~rbscope.analysis.wa.WAResult` as ``rbscope analyze`` computed
    it (:func:`rbscope.analysis.pipeline.analyse`); without it the width windows' counts are used.
    """
    given = logical is not None
    if result is None:
        result = compute_wa(measurement, geometry,
                            logical if given else LogicalVolume(1, 1, "none"), mp=mp,
                            program_class=program_class)
    series = None
    if measurement.snapshots:
        series = wa_series(measurement, geometry, mp=result.mp, program_class=program_class,
                           logical_series=logical_series)
    drive = drive or geometry.name
    label = label or (f"{drive} — {workload}" if workload else drive)
    return ReportRun(label=label, drive=drive, workload=workload, measurement=measurement,
                     geometry=geometry, result=result, logical_given=given, series=series,
                     notes=list(notes) + list(measurement.provenance.get("warnings", [])),
                     drive_claim=drive_claim, structure=list(structure))


def interval_note(run):
    """Say in words what the run's intervals hold (and what they do not)."""
    r = run.result
    parts = ["The bounds [lo, hi] hold every WA consistent with the counts: pulses of unknown "
             "width (cut at the capture's edges or dropped) counted as programs or not, and "
             "the resolution of the host's logical volume."]
    if r.wa_confidence is not None:
        parts.append(f"The 95 % interval ({r.dies_probed} of {r.dies} dies probed, classifier: "
                     f"{r.classifier}) includes: "
                     + ("; ".join(r.interval_includes) or "the bounds above") + ".")
        if r.interval_excludes:
            parts.append("It does not include: " + "; ".join(r.interval_excludes) + ".")
    else:
        parts.append("No 95 % interval: " + ("; ".join(r.interval_excludes) or
                                              "the die-to-die spread is unknown") + ".")
    return " ".join(parts)


# Tables ---------------------------------------------------------------------------------------


def _class_per_die(run, name):
    """Pulses of the class called ``name`` per die (over the probed dies), or None."""
    m, r = run.measurement, run.result
    try:
        k = m.class_index(name)
    except KeyError:
        return None
    if not m.config.windows[k][0] < m.config.windows[k][1]:
        return None
    total = sum(m.counts[c.channel].classes[k] for c in r.channels)
    return total / r.dies_probed if r.dies_probed else None


def summary_table(runs):
    t = Table("summary", "Summary", [
        Column("run", "run", "text"), Column("drive", "drive", "text", show=False),
        Column("workload", "workload", "text", show=False), Column("wa", "WA", "wa"),
        Column("interval", "interval", "interval", show=False),
        Column("wa_lo", "bounds lo", "wa", show=False),
        Column("wa_hi", "bounds hi", "wa", show=False),
        Column("wa95_lo", "95 % lo", "wa", show=False),
        Column("wa95_hi", "95 % hi", "wa", show=False),
        Column("logical_bytes", "host writes", "bytes"),
        Column("nand_bytes", "NAND writes", "bytes"),
        Column("programs_per_die", "programs / die"), Column("erases_per_die", "erases / die"),
        Column("reads_per_die", "reads / die"), Column("dies_probed", "dies probed", show=False),
        Column("tbw_bytes", "projected TBW", "bytes"), Column("dwpd", "DWPD"),
        Column("life_used", "rated life used", "percent"),
        Column("warnings", "warnings"),
    ], note="WA = NAND bytes programmed / bytes the host wrote; its interval is the 95 % one "
            "where dies were sampled, else the bounds (see each run's section). Programs, erases "
            "and reads are pulses per probed die; TBW and DWPD project the rated P/E cycles at "
            "this WA; rated life used is what this run alone consumed.")
    for run in runs:
        r, e = run.result, run.result.endurance
        given = run.logical_given
        ci = r.wa_confidence if given else None
        iv = run.interval95
        t.add(run.label, run.drive, run.workload,
              r.wa.value if given else None, (iv.lo, iv.hi) if iv else None,
              r.wa.lo if given else None, r.wa.hi if given else None,
              ci.lo if ci else None, ci.hi if ci else None,
              r.logical.value if given else None,
              r.physical_bytes.value,
              r.program_pulses.value / r.dies,
              _class_per_die(run, "erase"), _class_per_die(run, "read"), r.dies_probed,
              e.tbw_bytes if e and given else None,
              e.dwpd if e and given else None,
              e.life_used if e else None,
              len(run.notes) + len(r.warnings))
    return t


def per_die_table(run, index):
    m, r = run.measurement, run.result
    names = [(k, n or str(k)) for k, n in enumerate(m.class_names)
             if m.config.windows[k][0] < m.config.windows[k][1]]
    cols = [Column("line", "line", "text"), Column("dies", "dies")]
    cols += [Column(n, n) for _, n in names]
    cols += [Column("unclassified", "unclass."), Column("glitch", "glitch"),
             Column("partial", "partial"), Column("dropped", "dropped"),
             Column("busy", "busy time", "percent"), Column("wa", "WA (this line)", "wa")]
    t = Table(f"run{index}_per_die", "Per probed line", cols,
              note="Counts are cumulative over the capture; busy time is the share of it the "
                   "line was low; WA (this line) scales this line alone to the whole drive.")
    per_die = dict(r.per_die)
    duration = m.duration_ticks
    for row in r.channels:
        c = m.counts[row.channel]
        busy = c.busy_ticks / duration if duration else None
        t.add(row.name, row.dies, *[c.classes[k] for k, _ in names], c.unclassified, c.glitch,
              c.partial, c.dropped, busy, per_die.get(row.name) if run.logical_given else None)
    return t


def geometry_table(run, index):
    g = run.geometry
    t = Table(f"run{index}_geometry", "Geometry", [Column("key", "", "text"),
                                                    Column("value", "", "text")])
    rows = [("drive", g.name), ("description", g.description or "–"),
            ("channels × chips × dies", f"{g.channels} × {g.chips_per_channel} × "
                                        f"{g.dies_per_chip} = {g.dies} dies"),
            ("planes per die", g.planes_per_die), ("page size", f"{g.page_size} B"),
            ("program model", g.program_model),
            ("Mp (pages per program pulse)", run.result.mp),
            ("pages per block", g.pages_per_block or "–"),
            ("capacity raw / user", f"{_gb(g.raw_bytes)} / {_gb(g.user_bytes)}"),
            ("rated P/E cycles", g.pe_cycles or "–"),
            ("warranty", f"{g.warranty_years:g} years" if g.warranty_years else "–")]
    for key, value in rows:
        t.add(key, str(value))
    return t


def drive_claim_table(run, index):
    """The drive's own count (its NAND-write counters before and after) beside rbscope's."""
    c = run.drive_claim
    t = Table(f"run{index}_drive_says", "What the drive says (its own NAND-write counters)",
              [Column("key", "", "text"), Column("value", "", "text")],
              note="The drive's counters are its firmware's claim, in units that differ by "
                   "vendor and firmware; rbscope's interval and the drive's are compared, not "
                   "merged.")

    def span(x):
        return "–" if x is None else f"{fmt_bytes(x[0])} … {fmt_bytes(x[1])}"
    t.add("counters", c["method"])
    t.add("NAND writes", span(c.get("nand")))
    t.add("host writes", span(c.get("host")))
    if c["wa"] is None:
        t.add("the drive's WA", "cannot tell")
    else:
        hi = "∞" if c["hi"] is None or not math.isfinite(c["hi"]) else f"{c['hi']:.4f}"
        t.add("the drive's WA", f"{c['wa']:.4f}  [{c['lo']:.4f}, {hi}]")
    ours = run.interval95
    if ours is not None:
        t.add("rbscope's WA", f"{run.result.wa.value:.4f}  [{ours.lo:.4f}, {ours.hi:.4f}]")
    t.add("verdict", "DISAGREE: the two intervals do not overlap" if c.get("disagrees") else
          ("agree (the intervals overlap)" if c["wa"] is not None and ours is not None
           else "nothing to compare"))
    for x in c.get("caveats", []) + c.get("notes", []):
        t.add("note", x)
    return t


def structure_table(run, index):
    """What the pulses show of the drive's structure beside the geometry."""
    t = Table(f"run{index}_structure", "Structure the pulses show", [
        Column("quantity", "quantity", "text"), Column("shown", "the pulses show", "text"),
        Column("geometry", "the geometry says", "text"), Column("verdict", "", "text"),
        Column("evidence", "evidence", "text")],
        note="The geometry's values are the ones the WA uses; a disagreement is for the user to "
             "settle (the parameter page, rbscope identify, or the bus tap).")
    for f in run.structure:
        t.add(f.quantity.replace("_", " "), "cannot tell" if f.shown is None else str(f.shown),
              "not given" if f.geometry is None else str(f.geometry),
              {True: "agrees", False: "DISAGREES", None: ""}[f.agrees], f.evidence)
    return t


def _gb(x):
    return "–" if not x else f"{x / 1e9:g} GB"


def calibration_table(run, index):
    m = run.measurement
    t = Table(f"run{index}_windows", "Class windows", [
        Column("class", "class", "text"), Column("lo_us", "from (µs)"),
        Column("hi_us", "to (µs)"), Column("lo_ticks", "from (ticks)"),
        Column("hi_ticks", "to (ticks)")],
        note=f"Half-open windows [from, to); a width in several windows takes the first. Tick "
             f"{m.tick_seconds * 1e9:g} ns; " + (
                 f"pulses under {m.config.glitch_ticks} ticks "
                 f"({m.config.glitch_ticks * m.tick_seconds * 1e6:g} µs) are glitches."
                 if m.config.glitch_ticks else "no glitch filter."))
    for k, (lo, hi) in enumerate(m.config.windows):
        if lo < hi:
            t.add(m.class_names[k] or str(k), lo * m.tick_seconds * 1e6,
                  hi * m.tick_seconds * 1e6, lo, hi)
    return t


def provenance_table(run, index):
    m = run.measurement
    t = Table(f"run{index}_provenance", "Provenance", [Column("key", "", "text"),
                                                        Column("value", "", "text")])
    t.add("sniffer build", f"{m.params.channels} channels, {m.params.classes} classes, "
                           f"{m.params.width_bits}-bit widths, {m.params.counter_bits}-bit "
                           f"counters")
    t.add("duration", f"{m.duration_seconds:.6g} s")
    t.add("quiescent at the end", "unknown" if m.quiet_ticks is None else
          f"{m.quiet_ticks * m.tick_seconds:.6g} s")
    for key, value in sorted(m.provenance.items()):
        if key == "warnings":
            continue
        t.add(key, value if isinstance(value, str) else repr(value))
    return t


def ranking_tables(runs):
    """The procurement view: runs ranked by WA (low first) and by projected TBW (high first)."""
    with_wa = [r for r in runs if r.logical_given]
    by_wa = sorted(with_wa, key=lambda r: (r.result.wa.value, r.label))
    t1 = Table("ranking_wa", "Ranked by write amplification", [
        Column("rank", "rank"), Column("run", "run", "text"), Column("wa", "WA", "wa"),
        Column("lo", "lo", "wa"), Column("hi", "hi", "wa"),
        Column("distinct", "clearly better than the next", "text")],
        note="Lower WA means fewer NAND writes per host byte. 'Clearly better' means the two "
             "intervals do not overlap; otherwise the order is within the uncertainty.")
    for i, run in enumerate(by_wa):
        iv = run.interval95
        nxt = by_wa[i + 1].interval95 if i + 1 < len(by_wa) else None
        distinct = "–" if nxt is None else ("yes" if iv.hi < nxt.lo else "no (overlaps)")
        t1.add(i + 1, run.label, iv.value, iv.lo, iv.hi, distinct)
    rated = [r for r in with_wa if r.tbw is not None]
    unrated = [r for r in runs if r not in rated]
    t2 = Table("ranking_endurance", "Ranked by projected endurance", [
        Column("rank", "rank"), Column("run", "run", "text"),
        Column("tbw_bytes", "projected TBW", "bytes"), Column("dwpd", "DWPD"),
        Column("wa", "WA", "wa")],
        note="Projected host bytes written over the rated P/E cycles at the measured WA; runs "
             "whose geometry gives no rating (or no host volume) come last.")
    for i, run in enumerate(sorted(rated, key=lambda r: (-r.tbw, r.label))):
        e = run.result.endurance
        t2.add(i + 1, run.label, e.tbw_bytes, e.dwpd, run.result.wa.value)
    for run in unrated:
        t2.add(None, run.label, None, None, run.result.wa.value if run.logical_given else None)
    return t1, t2


# The report -----------------------------------------------------------------------------------


@dataclass
class Section:
    """What the report shows of one run."""

    run: ReportRun
    anchor: str
    tables: list
    histograms: list
    series: str | None
    per_die: str
    interval_note: str
    warnings: list
    wa_over_time: bool = False


@dataclass
class ProbeSection:
    """What the report shows of one ``rbscope probe-geometry`` run (``--probe-findings``): the
    drive's structure as its block device shows it, each finding's figure."""

    anchor: str
    target: str
    source: str
    table: Table
    figures: list  # [(finding name, SVG)]
    notes: list
    cross: Table | None = None  # the cross-check against the same run's R/B# pulses


def probe_section(target, findings, notes, index, source, figs=(), cross=None):
    """A :class:`ProbeSection` of ``findings`` (:class:`rbscope.probe.Finding`, as
    :func:`rbscope.probe.load_findings` reads them); ``source`` names the file, ``figs`` are
    the detectors' figures ``[(finding name, SVG)]`` (``rbscope.probe.plots`` draws them),
    ``cross`` the file's cross-check ``(recording, [Check])`` where it holds one
    (``rbscope.probe.pulses.load_cross_check``)."""
    t = Table(f"probe{index}", f"Probed through the block device: {target}", [
        Column("finding", "finding", "text"), Column("value", "value", "text"),
        Column("confidence", "confidence"), Column("summary", "what it means", "text"),
        Column("rule", "rule", "text")],
        note="Each detector times a pattern of writes through the drive's block device "
             "(rbscope probe-geometry); a value is what its rule decided from the series "
             "drawn below, with its confidence (0 … 1). The geometry the WA uses is the "
             "user's: these values are for checking it.")
    for f in findings:
        t.add(f.name.replace("_", " "), "not found" if f.value is None else str(f.value),
              float(f.confidence), " ".join(f.summary), f.rule)
    c = None
    if cross is not None:
        recording, checks = cross
        c = Table(f"probe{index}_pulses", "Cross-check against the R/B# pulses of the same run", [
            Column("quantity", "quantity", "text"), Column("guess", "the guess", "text"),
            Column("pulses", "the pulses", "text"), Column("agrees", "agrees", "text"),
            Column("evidence", "how", "text")],
            note=f"The detectors' guess (from response times) beside what the recording "
                 f"{recording} shows (each pulse classified by its width): the flash's own "
                 f"reading of the same run. '-': nothing to compare.")
        for k in checks:
            c.add(*k.cells(), k.evidence)
    return ProbeSection(anchor=f"probe{index}", target=target, source=str(source), table=t,
                        figures=list(figs), notes=list(notes), cross=c)


@dataclass
class Report:
    """Everything the template renders."""

    title: str
    generated: str
    version: str
    runs: list
    summary: Table
    rankings: tuple
    comparison: str | None
    sections: list
    probes: list = field(default_factory=list)

    def tables(self):
        """Every table of the report, in order."""
        out = [self.summary, *self.rankings]
        for p in self.probes:
            out += [p.table] + ([p.cross] if p.cross is not None else [])
        for s in self.sections:
            out.extend(s.tables)
        return out


def build_report(runs, *, title="rbscope write-amplification report", generated=None,
                 probes=()):
    """Build the tables and figures of a report of ``runs`` (a list of :class:`ReportRun`);
    ``probes``: ``(target, findings, notes, source, figures[, cross])`` of ``rbscope
    probe-geometry`` runs, each shown as a section of its own (:func:`probe_section`)."""
    if not runs:
        raise ReportError("a report needs at least one run")
    labels = [r.label for r in runs]
    dup = {x for x in labels if labels.count(x) > 1}
    if dup:
        raise ReportError(f"run labels must be unique; repeated: {', '.join(sorted(dup))}")
    generated = generated or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = []
    for i, run in enumerate(runs):
        m = run.measurement
        names = [n or str(k) for k, n in enumerate(m.class_names)]
        tables = [per_die_table(run, i), calibration_table(run, i), geometry_table(run, i),
                  provenance_table(run, i)]
        if run.structure:
            tables.insert(3, structure_table(run, i))
        if run.drive_claim is not None:
            tables.insert(1, drive_claim_table(run, i))
        claim_warning = []
        if run.drive_claim is not None and run.drive_claim.get("disagrees"):
            claim_warning.append("the drive's own counters and rbscope's WA disagree (their "
                                 "intervals do not overlap): counter units, missed pulses, or "
                                 "a drive that counts other writes")
        sections.append(Section(
            run=run, anchor=f"run{i}", tables=tables,
            histograms=figures.histogram_figures(m),
            series=figures.series_figure(m, run.series if run.logical_given else None, names),
            per_die=figures.per_die_figure(m, run.result, names),
            interval_note=interval_note(run),
            warnings=list(run.notes) + list(run.result.warnings) + claim_warning
            + [f.warning for f in run.structure if f.warning],
            wa_over_time=run.logical_given and any(
                row.cumulative_wa is not None for row in run.series or ())))
    rankings = ()
    comparison = None
    if len(runs) > 1:
        rankings = ranking_tables(runs)
        ranked = [r for r in sorted(runs, key=lambda r: (
            r.result.wa.value if r.logical_given else math.inf, r.label))]
        entries = [(r.label, r.interval95.value, r.interval95.lo, r.interval95.hi, r.tbw)
                   for r in ranked if r.logical_given]
        if entries:
            comparison = figures.comparison_figure(entries)
    return Report(title=title, generated=generated, version=__version__, runs=runs,
                  summary=summary_table(runs), rankings=rankings, comparison=comparison,
                  sections=sections,
                  probes=[probe_section(t, f, n, i, src, figs, *cross)
                          for i, (t, f, n, src, figs, *cross) in enumerate(probes)])


def _data_uri(text, mime):
    return f"data:{mime};charset=utf-8;base64," + base64.b64encode(text.encode()).decode()


def _environment():
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files(__package__).joinpath(name).read_text("utf-8")),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["csv_uri"] = lambda t: _data_uri(t.to_csv(), "text/csv")
    env.filters["json_uri"] = lambda t: _data_uri(t.to_json(), "application/json")
    env.filters["bytes"] = fmt_bytes
    env.filters["wa"] = lambda x: "–" if x is None else (
        "∞" if not math.isfinite(x) else f"{x:.4f}")
    return env


def render_html(report):
    """Return the report as one self-contained HTML document."""
    template = _environment().get_template("report.html.j2")
    return template.render(report=report, svg=lambda s: jinja2.utils.markupsafe.Markup(s),
                           esc=html.escape)


def write_report(report, html_path, *, pdf_path=None, browser=None, inputs=(), force=False):
    """Write the HTML report to ``html_path`` (and its PDF to ``pdf_path``); return the paths.

    Both are written atomically and checked first (:func:`rbscope.files.check_output`): neither
    may be one of ``inputs`` (the runs' sources and option files), nor the other output; an
    existing file of another kind is replaced only with ``force``. Raises
    :class:`~rbscope.files.OutputError` or :class:`ReportError`.
    """
    html_path = Path(html_path)
    check_output(html_path, kind="html", inputs=inputs, force=force, option="-o")
    if pdf_path is not None:
        check_output(pdf_path, kind="pdf", inputs=(*inputs, html_path), force=force,
                     option="--pdf")
        if Path(pdf_path).resolve() == html_path.resolve():
            raise OutputError(f"--pdf {pdf_path}: is the HTML output too")
    try:
        write_text(html_path, render_html(report), kind="html", inputs=inputs, force=force,
                   option="-o")
    except OSError as exc:
        raise ReportError(f"{html_path}: cannot write: {exc.strerror}") from None
    out = [html_path]
    if pdf_path is not None:
        html_to_pdf(html_path, pdf_path, browser=browser, inputs=(*inputs, html_path),
                    force=force)
        out.append(Path(pdf_path))
    return out

"""Reports: the HTML is complete and self-contained, renders in a real browser, prints to PDF,
and a comparison ranks its drives correctly; study files and bad input give clear errors."""

import base64
import csv
import heapq
import io
import json
import re
import shutil
import subprocess
from html import escape as html_escape
from html.parser import HTMLParser

import pytest
from matplotlib import image

from rbscope.analysis.geometry import load_geometry
from rbscope.analysis.logical import from_bytes
from rbscope.cli.commands import main
from rbscope.device.stimulus import TrainSpec, random_trains
from rbscope.gateware.rb_sniffer.params import SnifferParams
from rbscope.recordings.stream import StreamClassifier
from rbscope.report import ReportError, analyse_run, build_report, render_html
from rbscope.report.tables import Column, Table

CLOCK = 1e-6  # one model cycle stands for 1 µs, so the SSD-v windows apply as they are


def make_measurement(seed, *, channels=4, cycles=400_000, snapshot_cycles=50_000):
    """A measurement of synthetic MLC traffic through the bit-exact model, with snapshots."""
    g = load_geometry("ssd-v")
    params = SnifferParams(channels=channels)
    config, names, _ = g.classifier.to_config(params, CLOCK)
    trains = random_trains(TrainSpec(channels=channels, cycles=cycles, gap=(5, 40)), seed)
    sc = StreamClassifier(params, config, CLOCK, [t.initial for t in trains],
                          class_names=names, snapshot_cycles=snapshot_cycles)
    edges = heapq.merge(*([(c, ch, lvl) for c, lvl in t.edges] for ch, t in enumerate(trains)))
    for cycle, ch, level in edges:
        sc.edge(cycle, ch, level)
    return sc.finish(cycles, {"source": "simulation", "path": f"synthetic-{seed}"})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Two saved measurements: the second programs the same pages for a larger host volume."""
    d = tmp_path_factory.mktemp("report")
    m = make_measurement(1)
    path = d / "a.json"
    m.save(path)
    return d, path, m


class _Doc(HTMLParser):
    """Collect the tables, figures, links and resource references of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables, self.svgs, self.links, self.refs = [], 0, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append(a.get("data-table"))
        if tag == "svg":
            self.svgs += 1
        if tag == "a" and "href" in a:
            self.links.append(a)
        for key in ("src", "href", "xlink:href", "data", "action", "srcset"):
            if key in a and tag != "a":
                self.refs.append((tag, key, a[key]))
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            self.refs.append((tag, "tag", str(a)))


def parse(html):
    doc = _Doc()
    doc.feed(html)
    return doc


def export(doc, name, kind):
    """Decode the data: link of table ``name``'s CSV or JSON export."""
    for a in doc.links:
        if a.get("download") == f"{name}.{kind}":
            head, data = a["href"].split(",", 1)
            assert head.startswith("data:") and head.endswith(";base64")
            return base64.b64decode(data).decode()
    raise AssertionError(f"no {kind} export of table {name}")


def assert_self_contained(html, doc):
    # Nothing is loaded from elsewhere: no scripts, stylesheets or images by reference, no CSS
    # url() or @import, and every link is an in-page anchor or a data: export.
    external = [r for r in doc.refs if not (r[1] == "xlink:href" and r[2].startswith("#"))]
    assert external == [], external
    assert "@import" not in html and not re.search(r"url\((?!#)", html)
    for a in doc.links:
        assert a["href"].startswith(("#", "data:")), a


def test_single_run_report_is_complete_and_self_contained(saved, tmp_path, capsys):
    d, path, m = saved
    logical = 3_000_000_000
    # What `rbscope analyze` says of the same source and options: the report must say the same.
    assert main(["analyze", str(path), "--geometry", "ssd-v", "--logical", str(logical),
                 "--json"]) == 0
    analyzed = json.loads(capsys.readouterr().out)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--geometry", "ssd-v", "--logical", str(logical),
                 "--workload", "synthetic MLC", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    doc = parse(html)
    assert_self_contained(html, doc)
    # (The structure table: the synthetic trains are classified by their pulse sequence.)
    assert doc.tables == ["summary", "run0_per_die", "run0_windows", "run0_geometry",
                          "run0_structure", "run0_provenance"]
    assert [x["quantity"] for x in analyzed["structure"]] == [
        "planes_per_operation", "program_scheme", "pages_per_block", "luns_per_line"]
    # Figures: histograms (all lines + 4 lines in one figure), over time, per die.
    assert doc.svgs >= 3
    assert "pulse width (µs)" in html and "write amplification" in html
    # The summary's exported numbers are analyze's, not a re-computation.
    rows = list(csv.DictReader(io.StringIO(export(doc, "summary", "csv"))))
    assert len(rows) == 1
    assert float(rows[0]["wa"]) == pytest.approx(analyzed["wa"]["value"], rel=1e-12)
    assert float(rows[0]["wa95_lo"]) == pytest.approx(analyzed["wa_confidence_95"]["lo"])
    assert float(rows[0]["wa95_hi"]) == pytest.approx(analyzed["wa_confidence_95"]["hi"])
    assert float(rows[0]["nand_bytes"]) == pytest.approx(analyzed["physical_bytes"]["value"])
    assert rows[0]["workload"] == "synthetic MLC" and rows[0]["drive"] == "SSD-v"
    per_die = json.loads(export(doc, "run0_per_die", "json"))["rows"]
    k = m.class_index("program")
    assert [r["program"] for r in per_die] == [m.counts[ch].classes[k] for ch in m.enabled]
    windows = json.loads(export(doc, "run0_windows", "json"))["rows"]
    assert [w["class"] for w in windows] == [n for n in m.class_names if n]
    # The interval is explained as analyze explains it, the geometry and the source are named.
    for item in analyzed["interval_includes"] + analyzed["interval_excludes"]:
        assert html_escape(item) in html
    assert "RB-Explorer validation SSD" in html
    assert "synthetic-1" in html


def _two_runs(m):
    g = load_geometry("ssd-v")
    programs = sum(m.counts[ch].classes[m.class_index("program")] for ch in m.enabled)
    nand = programs * g.page_size
    # The same NAND work for two host volumes: WA 0.8 (drive B) and 1.6 (drive A).
    a = analyse_run(m, g, from_bytes(int(nand / 1.6)), drive="drive A", workload="w")
    b = analyse_run(m, g, from_bytes(int(nand / 0.8)), drive="drive B", workload="w")
    return a, b


def test_comparison_ranks_by_wa_and_endurance(saved):
    _, _, m = saved
    a, b = _two_runs(m)
    assert a.result.wa.value == pytest.approx(1.6, rel=1e-3)
    report = build_report([a, b])
    by_wa, by_life = report.rankings
    assert [r[1] for r in by_wa.rows] == [b.label, a.label]
    assert [r[0] for r in by_wa.rows] == [1, 2]
    # The same rating, so the drive with half the WA lasts twice as long.
    assert [r[1] for r in by_life.rows] == [b.label, a.label]
    assert by_life.rows[0][2] == pytest.approx(2 * by_life.rows[1][2], rel=1e-3)
    html = render_html(report)
    doc = parse(html)
    assert doc.tables[:3] == ["summary", "ranking_wa", "ranking_endurance"]
    assert doc.tables.count("run1_per_die") == 1
    assert_self_contained(html, doc)


def test_ranking_says_when_intervals_overlap(saved):
    _, _, m = saved
    g = load_geometry("ssd-v")
    programs = sum(m.counts[ch].classes[m.class_index("program")] for ch in m.enabled)
    nand = programs * g.page_size
    close = [analyse_run(m, g, from_bytes(int(nand / w)), drive=f"d{w}") for w in (1.0, 1.001)]
    far = analyse_run(m, g, from_bytes(int(nand / 3.0)), drive="far")
    # Widen the first two runs' intervals to overlap (as a coarse host counter would).
    from rbscope.analysis.logical import LogicalVolume
    close = [analyse_run(m, g, LogicalVolume(int(nand / w * 0.98), int(nand / w * 1.02)),
                         drive=f"d{w}") for w in (1.0, 1.001)]
    by_wa, _ = build_report([far, *close]).rankings
    assert [r[1] for r in by_wa.rows] == ["d1.0", "d1.001", "far"]
    assert [r[5] for r in by_wa.rows] == ["no (overlaps)", "yes", "–"]


def _browser_ok():
    return shutil.which("chromium") is not None


def _ink(png):
    """Share of pixels that are not (near) white, and the number of distinct grey levels."""
    px = image.imread(str(png))[..., :3]
    grey = px.mean(axis=2)
    return float((grey < 0.9).mean()), len(set((grey * 32).astype(int).ravel().tolist()))


def test_report_renders_in_chromium_and_prints_to_pdf(saved, tmp_path):
    # The bootstrap installs Debian's chromium and poppler-utils; without them this must fail.
    assert _browser_ok(), "chromium is not installed (make bootstrap installs it)"
    assert shutil.which("pdftoppm"), "pdftoppm is not installed (make bootstrap installs it)"
    _, path, m = saved
    a, b = _two_runs(m)
    from rbscope.report import write_report
    from rbscope.report.browser import html_to_png
    html, pdf = write_report(build_report([a, b]), tmp_path / "c.html", pdf_path=tmp_path / "c.pdf")
    png = html_to_png(html, tmp_path / "c.png", width=1200, height=1600)
    ink, levels = _ink(png)
    assert 0.02 < ink < 0.9 and levels > 8, (ink, levels)
    assert pdf.read_bytes().startswith(b"%PDF")
    subprocess.run(["pdftoppm", "-r", "40", "-png", "-f", "1", "-l", "2", str(pdf),
                    str(tmp_path / "page")], check=True, timeout=120)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == 2  # a summary page and at least one run page
    for page in pages:
        ink, levels = _ink(page)
        assert ink > 0.01 and levels > 4, (page.name, ink, levels)


def test_study_file_rebuilds_the_comparison(saved, tmp_path):
    d, path, m = saved
    g = load_geometry("ssd-v")
    programs = sum(m.counts[ch].classes[m.class_index("program")] for ch in m.enabled)
    nand = programs * g.page_size
    shutil.copy(path, tmp_path / "a.json")
    study = tmp_path / "study.toml"
    study.write_text(f"""
title = "Two candidates"
[defaults]
geometry = "ssd-v"
workload = "4K-RD-100%-W-4KiB-align"

[[run]]
drive = "Vendor A"
source = "a.json"
logical = {int(nand / 2)}

[[run]]
drive = "Vendor B"
source = "a.json"
logical = "{int(nand)}"
probe = ["0=0:0:0", "1=1:0:0", "2=2:0:0", "3=3:0:0"]
""", encoding="utf-8")
    out = tmp_path / "s.html"
    assert main(["report", "--study", str(study), "-o", str(out), "--json"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<title>Two candidates</title>" in html
    doc = parse(html)
    ranked = json.loads(export(doc, "ranking_wa", "json"))["rows"]
    assert [r["run"] for r in ranked] == ["Vendor B — 4K-RD-100%-W-4KiB-align",
                                          "Vendor A — 4K-RD-100%-W-4KiB-align"]
    # The same pulses for half the host volume: exactly twice the WA, whatever the classifier.
    assert ranked[1]["wa"] == pytest.approx(2 * ranked[0]["wa"], rel=1e-6)


@pytest.mark.parametrize("body, message", [
    ("[[run]]\nsource = 'a.json'\ncolour = 'red'\n", "unknown key(s) colour"),
    ("[[run]]\ngeometry = 'ssd-v'\n", "source is missing"),
    ("title = 3\n[[run]]\nsource = 'a.json'\n", "title"),
    ("[[run]]\nsource = 'a.json'\nlogical = 1\nfio = 'x.json'\n", "give one logical volume"),
    ("[[run]]\nsource = 'a.json'\nsysfs = ['x']\n", "sysfs must be a list [before, after]"),
    ("x = [[[[[[1]]]]]]\n", "unknown key(s) x"),
    ("[[run\n", "not valid TOML"),
    ("", "one or more [[run]]"),
])
def test_bad_study_files_give_clear_errors(tmp_path, capsys, body, message):
    study = tmp_path / "bad.toml"
    study.write_text(body, encoding="utf-8")
    assert main(["report", "--study", str(study), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.html").exists()


def test_bad_options_in_a_study_run_name_the_run(saved, tmp_path, capsys):
    d, path, _ = saved
    study = tmp_path / "s.toml"
    study.write_text(f"[[run]]\nsource = '{path}'\ngeometry = 'ssd-v'\n"
                     f"options = ['--no-such-option']\n", encoding="utf-8")
    assert main(["report", "--study", str(study), "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "run 1" in err and "--no-such-option" in err


def test_check_parses_a_study_without_analysing_it(saved, tmp_path, capsys):
    d, path, _ = saved
    study = tmp_path / "s.toml"
    study.write_text(f"[[run]]\nsource = '{path}'\ngeometry = 'ssd-v'\noptions = ['--mp', '2']\n"
                     f"[[run]]\nsource = 'missing-yet.json'\ngeometry = 'ssd-v'\n",
                     encoding="utf-8")
    # Nothing is read: the second run's source need not exist yet; no report is written.
    assert main(["report", "--study", str(study), "--check"]) == 0
    assert "2 run(s), options and geometries valid" in capsys.readouterr().out
    assert not list(tmp_path.glob("*.html"))
    study.write_text(f"[[run]]\nsource = '{path}'\noptions = ['--no-such-option']\n",
                     encoding="utf-8")
    assert main(["report", "--study", str(study), "--check"]) == 1
    err = capsys.readouterr().err
    assert "run 1" in err and "--no-such-option" in err
    # A geometry that is missing or wrong is found too (no source is read for it).
    study.write_text(f"[[run]]\nsource = '{path}'\n", encoding="utf-8")
    assert main(["report", "--study", str(study), "--check"]) == 2
    assert "a geometry is needed" in capsys.readouterr().err
    study.write_text(f"[[run]]\nsource = '{path}'\ngeometry = 'no-such-geometry'\n",
                     encoding="utf-8")
    assert main(["report", "--study", str(study), "--check"]) == 1
    err = capsys.readouterr().err
    assert "run 1" in err and "no-such-geometry" in err
    # Without --check the report's file is required.
    assert main(["report", "--study", str(study)]) == 2
    assert "-o HTML" in capsys.readouterr().err


@pytest.mark.parametrize("argv, code, message", [
    (["-o", "x.html"], 2, "give one or more SOURCEs"),
    (["{src}", "-o", "x.html"], 2, "a geometry is needed"),
    (["{src}", "{src}", "--label", "one", "--geometry", "ssd-v", "-o", "x.html"], 2,
     "give --label once per SOURCE (2)"),
    (["{src}", "--study", "s.toml", "-o", "x.html"], 2, "not both"),
    (["missing.json", "--geometry", "ssd-v", "-o", "x.html"], 1, "missing.json"),
    (["{src}", "--geometry", "ssd-v", "--logical", "2 GiB", "-o", "/no/such/dir/x.html"], 1,
     "cannot write"),
    (["{src}", "--geometry", "ssd-v", "--mp", "0", "-o", "x.html"], 2, "--mp"),
])
def test_report_usage_errors(saved, tmp_path, monkeypatch, capsys, argv, code, message):
    _, path, _ = saved
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{src}", str(path)) for a in argv]
    assert main(["report", *argv]) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_same_drive_twice_gets_distinct_labels(saved, tmp_path):
    _, path, _ = saved
    other = tmp_path / "b.json"
    shutil.copy(path, other)
    out = tmp_path / "r.html"
    assert main(["report", str(path), str(other), "--geometry", "ssd-v", "--logical", "1GB",
                 "-o", str(out)]) == 0
    doc = parse(out.read_text(encoding="utf-8"))
    rows = json.loads(export(doc, "summary", "json"))["rows"]
    assert [r["run"] for r in rows] == ["SSD-v (a.json)", "SSD-v (b.json)"]


def test_without_a_host_volume_the_report_gives_no_wa(saved, tmp_path):
    _, path, _ = saved
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--geometry", "ssd-v", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    rows = json.loads(export(parse(html), "summary", "json"))["rows"]
    assert rows[0]["wa"] is None and rows[0]["nand_bytes"] > 0
    assert "no host write volume given" in html


def test_table_exports_keep_exact_values():
    t = Table("t", "T", [Column("name", "name", "text"), Column("wa", "WA", "wa"),
                         Column("n", "n"), Column("hidden", "h", show=False)])
    t.add("a, \"quoted\"", 1.234567891, 10**12, float("inf"))
    assert t.formatted() == [["a, \"quoted\"", "1.2346", "1,000,000,000,000"]]
    assert list(csv.reader(io.StringIO(t.to_csv()))) == [
        ["name", "wa", "n", "hidden"], ["a, \"quoted\"", "1.234567891", "1000000000000", ""]]
    assert json.loads(t.to_json())["rows"] == [
        {"name": "a, \"quoted\"", "wa": 1.234567891, "n": 10**12, "hidden": None}]
    with pytest.raises(ValueError, match="2 cells for 4 columns"):
        t.add(1, 2)


def test_duplicate_labels_and_empty_reports_are_refused(saved):
    _, _, m = saved
    a, b = _two_runs(m)
    b.label = a.label
    with pytest.raises(ReportError, match="unique"):
        build_report([a, b])
    with pytest.raises(ReportError, match="at least one run"):
        build_report([])


def _findings_file(path, target="vssd:ssd-v"):
    """A probe-geometry --json output with two findings that carry series."""
    from rbscope.probe import Finding

    means = {str(512 << i): (2e-3 if i < 3 else 1e-3) for i in range(9)}
    page = Finding(name="page_size", value=4096, confidence=0.8, rule="pairs of updates",
                   evidence={"mean_pair_s": means}, summary=["effective page 4096 B"])
    units = Finding(name="parallel_units", value=4, confidence=0.5, rule="speed-up",
                    evidence={"speedup": {str(q): min(q, 3.5) for q in (1, 2, 4, 8)}},
                    summary=["4 units program at once"])
    path.write_text(json.dumps({"target": target, "findings": [page.to_dict(), units.to_dict()],
                                "notes": ["probed on a copy"], "seconds": 1.5}),
                    encoding="utf-8")
    return path


def _probe_report(path, probe, out):
    """The report of the capture ``path`` with the findings file ``probe``: its HTML, parsed."""
    assert main(["report", str(path), "--geometry", "ssd-v", "--logical", "3GB",
                 "--probe-findings", str(probe), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    return html, parse(html)


def test_probe_findings_are_a_section_with_their_figures(saved, tmp_path):
    # The drive's structure as its block device shows it (rbscope probe-geometry --json), beside
    # the WA: a table of the findings and each detector's figure; the study names them too.
    d, path, m = saved
    probe = _findings_file(tmp_path / "p.json")
    html, doc = _probe_report(path, probe, tmp_path / "r.html")
    assert "probe0" in doc.tables and "Probed through the block device: vssd:ssd-v" in html
    rows = json.loads(export(doc, "probe0", "json"))["rows"]
    assert [(r["finding"], r["value"]) for r in rows] == [("page size", "4096"),
                                                          ("parallel units", "4")]
    assert "Effective page size" in html and "probed on a copy" in html
    assert_self_contained(html, doc)
    plain = tmp_path / "plain.html"
    assert main(["report", str(path), "--geometry", "ssd-v", "--logical", "3GB",
                 "-o", str(plain)]) == 0
    assert doc.svgs == parse(plain.read_text(encoding="utf-8")).svgs + 2
    # A study: probe_findings at the top level, relative to the study file.
    shutil.copy(path, tmp_path / "a.json")
    study = tmp_path / "study.toml"
    study.write_text('probe_findings = ["p.json"]\n[[run]]\nsource = "a.json"\n'
                     'geometry = "ssd-v"\nlogical = "3GB"\n', encoding="utf-8")
    assert main(["report", "--study", str(study), "-o", str(tmp_path / "s.html")]) == 0
    assert "probe0" in parse((tmp_path / "s.html").read_text(encoding="utf-8")).tables


def test_probe_findings_with_their_cross_check_show_it_as_a_table(saved, tmp_path, capsys):
    # probe-geometry --findings F --pulses R --json keeps the cross-check beside the findings:
    # the report shows it under the findings, and refuses a malformed one by name.
    d, path, m = saved
    probe = _findings_file(tmp_path / "p.json")
    doc = json.loads(probe.read_text(encoding="utf-8"))
    doc["cross_check"] = {"recording": "r.vcd", "checks": [
        {"quantity": "parallel units", "guess": 4, "pulses": 4, "agrees": True,
         "evidence": "R/B# lines with program pulses: 4 of 4"},
        {"quantity": "striping bits: writes per unit", "guess": [36, 72, 396],
         "pulses": [36, 70, 396], "agrees": False, "evidence": "sorted"},
        {"quantity": "program pulses per host write", "guess": None, "pulses": 1.0,
         "agrees": None, "evidence": "shown only"}]}
    probe.write_text(json.dumps(doc), encoding="utf-8")
    html, page = _probe_report(path, probe, tmp_path / "r.html")
    assert "probe0_pulses" in page.tables and "the recording r.vcd shows" in html
    rows = json.loads(export(page, "probe0_pulses", "json"))["rows"]
    assert [(r["quantity"], r["guess"], r["pulses"], r["agrees"]) for r in rows] == [
        ("parallel units", "4", "4", "yes"),
        ("striping bits: writes per unit", "[36, 72, 396]", "[36, 70, 396]", "NO"),
        ("program pulses per host write", "-", "1.0", "-")]
    doc["cross_check"]["checks"][0]["agrees"] = "maybe"
    probe.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["report", str(path), "--geometry", "ssd-v", "--probe-findings", str(probe),
                 "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "cross_check row 1: malformed" in err and str(probe) in err


def test_bad_probe_findings_are_refused_and_never_overwritten(saved, tmp_path, capsys):
    d, path, m = saved
    bad = tmp_path / "bad.json"
    for body, message in (('{"x": 1}', "no findings list"), ("[1", "not JSON"),
                          ('{"findings": [{"name": 3, "value": 1, "confidence": 2}]}',
                           "malformed"),
                          ('{"findings": [{"nome": "x"}]}', "finding 1")):
        bad.write_text(body, encoding="utf-8")
        assert main(["report", str(path), "--geometry", "ssd-v", "--probe-findings", str(bad),
                     "-o", str(tmp_path / "x.html")]) == 1
        err = capsys.readouterr().err
        assert message in err and str(bad) in err, err
    # The findings are an input: -o may not name them.
    probe = _findings_file(tmp_path / "p.json")
    before = probe.read_bytes()
    assert main(["report", str(path), "--geometry", "ssd-v", "--probe-findings", str(probe),
                 "-o", str(probe)]) == 2
    assert probe.read_bytes() == before
    # A series edited by hand that cannot be drawn leaves the table and says so.
    doc = json.loads(before)
    doc["findings"][0]["evidence"]["mean_pair_s"] = {"x": "y"}
    probe.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--geometry", "ssd-v", "--probe-findings", str(probe),
                 "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "page_size: its series cannot be drawn" in html and "parallel units" in html

"""Reports for the lab and for procurement: one self-contained HTML file, and its PDF.

A report is made of one or more *runs*: one measurement of one drive under one workload, with
the geometry and host write volume that turn it into a write amplification — exactly what one
``rbscope analyze`` invocation computes. Several runs (several drives, or one drive under several
workloads) add the procurement view: a side-by-side table ranked by WA and by projected
endurance.

The layers:

* :class:`ReportRun` (:func:`analyse_run`) holds a run's measurement and analysis;
* :func:`build_report` turns runs into a :class:`Report`: tables (:mod:`.tables`, each exported as
  CSV and JSON) and figures (:mod:`.figures`, matplotlib as inline SVG);
* :func:`render_html` fills the Jinja2 template; :func:`write_report` writes the HTML file and,
  through a headless browser (:mod:`.browser`), the PDF;
* :mod:`.study` reads a study TOML that names every run, so a comparison is rebuilt with one
  command; ``rbscope report`` (:mod:`rbscope.cli.report`) is the command line.

Nothing in the HTML refers outside the file: styles are inline, figures are inline SVG and the
CSV/JSON exports are ``data:`` links.
"""

from .build import (
    Report,
    ReportRun,
    analyse_run,
    build_report,
    interval_note,
    render_html,
    write_report,
)
from .errors import ReportError

__all__ = ["ReportError", "ReportRun", "Report", "analyse_run", "build_report", "render_html",
           "write_report", "interval_note"]

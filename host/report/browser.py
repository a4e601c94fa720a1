"""Print a report to PDF (or render it to PNG) with a headless Chromium.

A browser lays the page out exactly as people see it on screen, so the PDF is the same report,
not a second rendering of it; Debian packages Chromium (``apt-get install chromium``), and it runs
without a display. It is started with everything that would reach the network switched off, a
throw-away profile, and a time limit.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import ReportError

__all__ = ["find_browser", "html_to_pdf", "html_to_png", "BROWSERS"]

#: Executable names tried in order (Debian's package installs ``chromium``).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Seconds a browser run may take.
TIMEOUT = 120


def find_browser(browser=None):
    """Return the path of the browser to use: ``browser``, ``$RBSCOPE_BROWSER`` or the first of
    :data:`BROWSERS` on ``PATH``; raise :class:`~rbscope.report.ReportError` if there is none."""
    name = browser or os.environ.get("RBSCOPE_BROWSER")
    candidates = [name] if name else list(BROWSERS)
    for c in candidates:
        path = shutil.which(c)
        if path:
            return path
    raise ReportError(
        f"no headless browser found (tried {', '.join(candidates)}); a PDF needs Chromium: "
        f"`apt-get install chromium`, or name one with --browser / RBSCOPE_BROWSER")


def _run(browser, html_path, flags):
    html_path = Path(html_path).resolve()
    if not html_path.is_file():
        raise ReportError(f"{html_path}: no such report file")
    with tempfile.TemporaryDirectory(prefix="rbscope-browser-") as profile:
        cmd = [find_browser(browser), "--headless", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--disable-extensions", "--disable-default-apps",
               "--no-default-browser-check", "--mute-audio", f"--user-data-dir={profile}",
               *flags, html_path.as_uri()]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.insert(2, "--no-sandbox")  # Chromium refuses to sandbox as root
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ReportError(f"{cmd[0]} did not finish within {TIMEOUT} s") from None
        except OSError as exc:
            raise ReportError(f"{cmd[0]}: cannot run: {exc.strerror}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ReportError(f"{cmd[0]} failed (exit {proc.returncode}): {' | '.join(tail)}")


def html_to_pdf(html_path, pdf_path, *, browser=None):
    """Print ``html_path`` to ``pdf_path`` (A4, no browser header or footer)."""
    pdf_path = Path(pdf_path).resolve()
    _run(browser, html_path, ["--no-pdf-header-footer", f"--print-to-pdf={pdf_path}"])
    if not pdf_path.is_file() or pdf_path.stat().st_size == 0:
        raise ReportError(f"{pdf_path}: the browser wrote no PDF")
    return pdf_path


def html_to_png(html_path, png_path, *, width=1200, height=900, browser=None):
    """Render the top ``width`` × ``height`` pixels of ``html_path`` to ``png_path``."""
    png_path = Path(png_path).resolve()
    _run(browser, html_path, [f"--window-size={width},{height}", "--hide-scrollbars",
                              f"--screenshot={png_path}"])
    if not png_path.is_file() or png_path.stat().st_size == 0:
        raise ReportError(f"{png_path}: the browser wrote no screenshot")
    return png_path

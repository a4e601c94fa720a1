"""Print a report to PDF (or render it to PNG) with a headless Chromium.

A browser lays the page out exactly as people see it on screen, so the PDF is the same report,
not a second rendering of it; Debian packages Chromium (``apt-get install chromium``), and it runs
without a display. It is started with everything that would reach the network switched off, a
throw-away profile, and a time limit: at the limit the browser's whole process group (Chromium
starts a zygote, renderers and a GPU process) is killed, so nothing it started is left running.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from rbscope.files import check_output, output_mode

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
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise ReportError(f"{cmd[0]}: cannot run: {exc.strerror}") from None
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ReportError(f"{cmd[0]} did not finish within {TIMEOUT} s (stopped)") from None
        except BaseException:  # Ctrl-C: leave no browser behind either
            _kill_group(proc)
            raise
        # The browser itself has exited: stop any helper it left in its group.
        _kill_group(proc)
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise ReportError(f"{cmd[0]} failed (exit {proc.returncode}): {' | '.join(tail)}")


def _kill_group(proc):
    """Kill the session ``proc`` leads (started with ``start_new_session``) and reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)


def html_to_pdf(html_path, pdf_path, *, browser=None, inputs=(), force=False):
    """Print ``html_path`` to ``pdf_path`` (A4, no browser header or footer).

    The browser prints to a temporary file beside ``pdf_path``, renamed over it when the PDF is
    complete; ``pdf_path`` may be neither ``html_path`` nor one of ``inputs``, and an existing
    file that is not a PDF is replaced only with ``force``
    (:class:`~rbscope.files.OutputError`).
    """
    pdf_path = Path(pdf_path).resolve()
    check_output(pdf_path, kind="pdf", inputs=(*inputs, html_path), force=force,
                 option="--pdf")
    fd, tmp = tempfile.mkstemp(prefix=".rbscope-", suffix=".pdf", dir=pdf_path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        _run(browser, html_path, ["--no-pdf-header-footer", f"--print-to-pdf={tmp}"])
        if tmp.stat().st_size == 0:
            raise ReportError(f"{pdf_path}: the browser wrote no PDF")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, output_mode(pdf_path))
        os.replace(tmp, pdf_path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return pdf_path


def html_to_png(html_path, png_path, *, width=1200, height=900, browser=None):
    """Render the top ``width`` × ``height`` pixels of ``html_path`` to ``png_path``."""
    png_path = Path(png_path).resolve()
    _run(browser, html_path, [f"--window-size={width},{height}", "--hide-scrollbars",
                              f"--screenshot={png_path}"])
    if not png_path.is_file() or png_path.stat().st_size == 0:
        raise ReportError(f"{png_path}: the browser wrote no screenshot")
    return png_path

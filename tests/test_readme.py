"""Every command of the README's "Command line" block runs, on the shipped sample inputs
(``examples/readme/``, made by ``examples/readme/make_samples.py``; issue 25, item 17).

The block is parsed from the README itself: a command added there without a sample fails here.
Commands that talk to a device (a ``PORT``, ``rbscope sim``) and those that read the capture the
device commands make (``run.rbcap``) form the device flow: this module checks that the set of
them is the known one, and runs them as the README writes them against ``rbscope sim``
(:func:`test_the_device_flow_of_the_readme`, a ``heavy`` test: ``make test-heavy`` and CI).
"""

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "readme"

#: README file name → shipped sample (the rest are outputs of earlier commands in the block).
SAMPLE_OF = {
    "recording.sr": "all-dies.sr",
    "all-dies.sr": "all-dies.sr",
    "run.sr": "all-dies.sr",
    "tapped.vcd": "tapped.vcd",
    "my.toml": "my.toml",
    "drives.toml": "drives.toml",
    "powerup.sr": "powerup.sr",
    "before.json": "before.json",
    "after.json": "after.json",
}

#: The device flow: the first words of its commands (see the module docstring).
DEVICE_FLOW = {
    ("sim", "--channels"), ("info", "PORT"), ("configure", "PORT"), ("capture", "PORT"),
    ("dump", "run.rbcap"), ("analyze", "run.rbcap"), ("sim", "--emulator"),
    ("selftest", "PORT"), ("report", "run.rbcap"),
}


def readme_commands():
    """The ``rbscope`` commands of the README's "Command line" block, continuation lines
    joined and comments dropped, as argument lists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands, pending = [], ""
    for line in block.splitlines():
        if pending:
            line = pending + " " + line.strip()
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1]
            continue
        pending = ""
        words = shlex.split(line, comments=True)
        if words:
            commands.append(words)
    return commands


def test_the_block_is_parsed_and_every_offline_command_has_its_sample():
    commands = readme_commands()
    assert all(c[0] == "rbscope" for c in commands), commands
    device = [c for c in commands if tuple(c[1:3]) in DEVICE_FLOW]
    assert {tuple(c[1:3]) for c in device} == DEVICE_FLOW
    offline = [c for c in commands if tuple(c[1:3]) not in DEVICE_FLOW]
    assert len(offline) >= 9
    for sample in set(SAMPLE_OF.values()):
        path = SAMPLES / sample
        assert path.is_file() and path.stat().st_size < 100_000, sample  # small: tens of kB


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Run the offline commands in order in a copy of the samples; ``[(argv, process)]``."""
    work = tmp_path_factory.mktemp("readme")
    for readme_name, sample in SAMPLE_OF.items():
        shutil.copy2(SAMPLES / sample, work / readme_name)
    shutil.copy2(SAMPLES / "drive-b.sr", work / "drive-b.sr")  # the study's second run
    out = []
    for words in readme_commands():
        if tuple(words[1:3]) in DEVICE_FLOW:
            continue
        argv = [sys.executable, "-m", "rbscope.cli", *words[1:]]
        proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=600)
        out.append((words, proc))
    return work, out


def test_every_offline_readme_command_succeeds(ran):
    work, out = ran
    for words, proc in out:
        assert proc.returncode == 0, f"{shlex.join(words)}:\n{proc.stdout[-2000:]}\n" \
                                     f"{proc.stderr[-2000:]}"
    # What the commands wrote, each read by the next where the README chains them.
    for name in ("preset.toml", "tapped.labels.json", "trained.json", "compare.html",
                 "classes.vcd", "drive.toml"):
        assert (work / name).is_file() and (work / name).stat().st_size > 0, name
    assert list(work.rglob("rb_sniffer.v"))  # `rbscope verilog`, wherever the README writes it


def test_the_trained_flow_measures_the_reference_ssd(ran):
    """The README's tap flow on its samples: the labels are the reference SSD's commands (106
    programs and 91 reads in the first 200 pulses of die 0) and `analyze --trained` uses the
    classifier trained on them."""
    _work, out = ran
    by = {shlex.join(w[1:3]): p.stdout for w, p in out}
    assert "PROGRAM                106" in by["label tapped.vcd"]
    assert "READ                    91" in by["label tapped.vcd"]
    analyze = next(p.stdout for w, p in out if "--trained" in w)
    assert "classes with the width distributions trained on labelled pulses" in analyze


def test_the_samples_chain_into_one_drive(ran):
    """The offline commands read one drive: the power-up's geometry and the recording's pulses
    give the WA the drive's own counters say (6.96, the reference SSD's truth), within the
    interval, and the trained classifier agrees."""
    import re

    _work, out = ran
    counters = next(p.stdout for w, p in out if "--drive-counters" in w)
    assert "DISAGREEMENT" not in counters, counters[-3000:]
    drive = float(re.search(r"the drive says WA\s+([0-9.]+)", counters).group(1))
    assert abs(drive - 6.9609) < 1e-3
    for text in (counters, next(p.stdout for w, p in out if "--trained" in w)):
        wa = float(re.search(r"WRITE AMPLIFICATION\s+([0-9.]+)", text).group(1))
        lo, hi = (float(x) for x in re.search(
            r"95 % interval\s+\[([0-9.]+), ([0-9.]+)\]", text).groups())
        assert abs(wa / drive - 1) < 0.02 and lo <= drive <= hi, (wa, lo, hi)


def _start_sim(words, work, name):
    """Start ``rbscope sim ...`` publishing its port at ``work/name`` (its output into
    ``work/name.log``, never a pipe it could fill); return (process, port)."""
    import time

    link = work / name
    with open(work / f"{name}.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rbscope.cli", *words[1:], "--link",
                                 str(link)], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900  # the first Verilator build of a configuration
    while not link.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise AssertionError(f"{shlex.join(words)} published no port:\n"
                                 f"{(work / f'{name}.log').read_text()[-3000:]}")
        time.sleep(0.5)
    return proc, str(link)


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.heavy  # 3.5 minutes of a Verilator device: CI runs it (`make test-heavy`)
def test_the_device_flow_of_the_readme(tmp_path):
    """The README's device commands in order against `rbscope sim` (PORT: its port), then the
    emulator build and its self-test: every one exits 0. (It was `slow`, which CI does not
    run: issue 25, item 17.)"""
    commands = [c for c in readme_commands() if tuple(c[1:3]) in DEVICE_FLOW]
    assert [c[2] for c in commands if c[1] == "sim"] == ["--channels", "--emulator"]
    # `configure --from-toml preset.toml` takes what the offline `calibrate` wrote.
    shutil.copy2(SAMPLES / SAMPLE_OF["recording.sr"], tmp_path / "recording.sr")
    subprocess.run([sys.executable, "-m", "rbscope.cli", "calibrate", "recording.sr", "-o",
                    "preset.toml"], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    sims, port = [], None
    try:
        for words in commands:  # in the README's order; PORT: the latest simulated device
            if words[1] == "sim":
                proc, port = _start_sim(words, tmp_path, f"port-{len(sims)}")
                sims.append(proc)
                continue
            argv = [port if w == "PORT" else w for w in words[1:]]
            run = subprocess.run([sys.executable, "-m", "rbscope.cli", *argv], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=900)
            assert run.returncode == 0, f"{shlex.join(words)}:\n{run.stdout[-2000:]}\n" \
                                        f"{run.stderr[-2000:]}"
    finally:
        for proc in sims:
            _stop(proc)
    for name in ("run.rbcap", "run.html", "run.pdf"):
        assert (tmp_path / name).stat().st_size > 0, name

"""The host-side detectors of issue 24 against the reference SSD's truth.

The detectors run on :class:`rbscope.vssd.EngineTarget` (the virtual SSD's engine in process, on
the model's clock: a loaded machine does not change what they measure), on small drives whose
garbage collection starts within a few MiB; each test compares the finding with what the FTL
really did (when it first collected, its buffer, its blocks). One test per detector runs the
same code through ``rbscope vssd`` and ``rbscope probe-geometry`` (NBD, the wall clock).
"""

import json
import shlex
import subprocess
import sys

import pytest

from rbscope.analysis.geometry import parse_geometry
from rbscope.probe import Finding, ProbeError, ProbeRequest, guess_toml, run_detectors
from rbscope.probe.erase_unit import detect_erase_unit, erase_period
from rbscope.probe.gc_onset import detect_gc_onset, gc_knee
from rbscope.probe.plots import write_plots
from rbscope.probe.pulses import classify_widths, cross_check, format_checks, read_pulses
from rbscope.probe.write_buffer import buffer_step, detect_write_buffer, settled_buffer
from rbscope.refssd import preset
from rbscope.refssd.ftl import Cause
from rbscope.vssd import Engine, EngineTarget
from rbscope.vssd.serve import ServeError, check_python_plugin

#: Small drives (garbage collection within 11-50 MiB): preset → field changes.
SMALL = {
    "ssd-v": dict(blocks_per_plane=16, pages_per_block=32, over_provisioning=0.25),
    "slc": dict(channels=2, chips_per_channel=1, dies_per_chip=1, blocks_per_plane=32,
                pages_per_block=32, over_provisioning=0.25),
    "mlc-2plane": dict(channels=2, dies_per_chip=1, blocks_per_plane=32, pages_per_block=32,
                       over_provisioning=0.25),
    "tlc-gc": dict(channels=2, dies_per_chip=1, blocks_per_plane=16, pages_per_block=48,
                   over_provisioning=0.25),
    "cache-prog": dict(channels=2, dies_per_chip=1, blocks_per_plane=32, pages_per_block=32,
                       over_provisioning=0.25),
}


def small(name, **changes):
    return preset(name, **{**SMALL[name], **changes})


class Watched(EngineTarget):
    """The engine target noting the host bytes written before the first garbage collection."""

    gc_at = None
    written = 0

    def _note(self, n):
        if self.gc_at is None and self.engine.ftl.erases[:, Cause.GC].sum():
            self.gc_at = self.written
        self.written += n

    def pwrite(self, offset, data):
        super().pwrite(offset, data)
        self._note(len(data))

    def pwrite_through(self, offset, data):
        super().pwrite_through(offset, data)
        self._note(len(data))


def unit_bytes(d):
    return d.pages_per_block * d.mp * d.page_size


def rbscope(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rbscope.cli", *map(str, args)],
                          capture_output=True, text=True, **kw)


def _tools():
    try:
        check_python_plugin()
    except ServeError as exc:
        pytest.skip(str(exc))


# Garbage-collection onset ------------------------------------------------------------------------


def test_gc_knee_passes_over_a_hiccup_and_finds_a_step():
    # 20 windows at 1 ms per write, one slow window (a host hiccup), then a lasting step to
    # 2 ms whose first write waited 10 ms.
    lat = [1e-3] * 32 * 20
    lat[5 * 32:6 * 32] = [3e-3] * 32
    lat += [10e-3] + [2e-3] * (32 * 8 - 1)
    k = gc_knee(lat, 32)
    assert k["knee"] == 20 and k["onset"] == 20 * 32
    assert k["post"] == pytest.approx(1 / 2e-3) and k["base"] == pytest.approx(1 / 1e-3)
    # Not yet confirmed: the candidate waits for its hold windows.
    assert gc_knee(lat[:21 * 32 + 5], 32)["pending"]
    assert gc_knee([1e-3] * 32 * 30, 32)["knee"] is None


@pytest.mark.parametrize("name", ["ssd-v", "slc", "mlc-2plane", "tlc-gc"])
def test_gc_onset_is_where_the_ftl_first_collects(name):
    d = small(name)
    t = Watched(Engine(d, seed=1))
    page = d.page_size * d.mp
    f = detect_gc_onset(t, page)
    assert t.gc_at is not None
    window = f.evidence["window_writes"]
    assert abs(f.value - t.gc_at) <= window * page, (f.value, t.gc_at)
    assert f.confidence > 0.1
    # The bound: the true over-provisioning less the blocks held free and open per die.
    reserve = d.dies * (d.gc_free_units + d.open_streams) * unit_bytes(d) / d.logical_bytes
    op = f.evidence["over_provisioning_at_least"]
    assert d.over_provisioning - reserve <= op <= d.over_provisioning, (op, reserve)
    assert any("over-provisioning at least" in s for s in f.summary)


def test_gc_onset_over_half_the_drive_and_on_a_drive_not_empty():
    d = small("ssd-v")
    e = Engine(d, seed=2)
    half = e.capacity // 2 // 4096 * 4096
    t = Watched(e, 0, half)
    # Over half the drive the onset is the same (the free space), the drop shallower.
    f = detect_gc_onset(t, 4096, max_bytes=5 * half, seed=3)
    assert abs(f.value - t.gc_at) <= f.evidence["window_writes"] * 4096
    assert f.evidence["over_provisioning_at_least"] <= d.over_provisioning
    # A drive in steady state collects from the first write: no knee, and it says why.
    steady = EngineTarget(Engine(d, seed=2, precondition="steady"))
    g = detect_gc_onset(steady, 4096, max_bytes=steady.size)
    assert g.value is None and g.confidence == 0 and "not empty" in g.notes[0]


@pytest.mark.heavy  # (35-42 s on the wall clock: make test-heavy)
@pytest.mark.timing
def test_gc_erase_and_the_pulses_through_vssd_and_probe_geometry(tmp_path):
    # The same detectors through nbdkit on the wall clock: a tiny SLC drive (2 dies, 4 MiB
    # raw, 8-row blocks) at slowdown 25 (a write of 0.2-0.5 ms modelled takes 5-13 ms, an erase
    # 50 ms: a loaded host's few ms per request make no knee), ~650 writes for gc and ~250 for
    # erase: ~30 s wall, ~10 s CPU. Then the findings against the run's own R/B# recording.
    _tools()
    spec = dict(blocks_per_plane=32, pages_per_block=8)
    d = small("slc", **spec)
    drive = tmp_path / "d.toml"
    drive.write_text('preset = "slc"\n[array]\nchannels = 2\nchips_per_channel = 1\n'
                     'dies_per_chip = 1\nblocks_per_plane = 32\npages_per_block = 8\n'
                     '[firmware]\nover_provisioning = 0.25\n')
    out, vcd, geo = tmp_path / "p.json", tmp_path / "r.vcd", tmp_path / "g.toml"
    size = d.logical_bytes // 4096 * 4096
    cmd = " ".join([shlex.quote(sys.executable), "-m", "rbscope.cli", "probe-geometry", '"$uri"',
                    "--destructive", "--range", f"0:{size}", "-q", "--json", "--detectors",
                    "gc,erase", "--page-size", "8192", "--units", "2", ">", str(out)])
    r = rbscope("vssd", drive, "--socket", tmp_path / "s.sock", "--slowdown", 25, "--run", cmd,
                "--record", vcd, "--geometry-out", geo, timeout=600)
    assert r.returncode == 0, r.stderr
    gc, erase = json.loads(out.read_text())["findings"]
    assert gc["name"] == "gc_onset" and gc["value"] is not None, gc["notes"]
    # The engine in process with the same drive and seed first collects here:
    t = Watched(Engine(d, seed=0))
    detect_gc_onset(t, 8192)
    assert abs(gc["value"] - t.gc_at) <= 2 * gc["evidence"]["window_writes"] * 8192
    assert erase["value"] == unit_bytes(d), erase["evidence"]["scores"]
    g = [Finding(name="page_size", value=8192, confidence=1.0), Finding(**gc), Finding(**erase)]
    text = guess_toml(g, "vssd", "now")
    assert "over-provisioning at least" in text
    assert parse_geometry(text, "guess").pages_per_block == d.pages_per_block
    # The cross-check: the recording of the same run, classified with the drive's windows.
    r = rbscope("probe-geometry", "--findings", out, "--pulses", vcd, "--geometry", geo,
                "--json")
    assert r.returncode == 0, r.stderr
    checks = {c["quantity"]: c for c in json.loads(r.stdout)["cross_check"]["checks"]}
    assert checks["parallel units"]["agrees"] and checks["parallel units"]["pulses"] == d.dies
    assert checks["pages per block"]["agrees"], checks["pages per block"]
    assert checks["garbage collection"]["agrees"]
    r = rbscope("probe-geometry", "--findings", out, "--pulses", vcd, "--geometry", geo,
                "--plots", tmp_path / "plots")
    assert r.returncode == 0 and "cross-check against the R/B# pulses" in r.stdout
    assert (tmp_path / "plots" / "gc_onset.svg").exists()


# Write buffer -----------------------------------------------------------------------------------


def test_buffer_step_passes_over_a_lone_slow_write():
    lat = [20e-6] * 10 + [500e-6] + [20e-6] * 10 + [500e-6, 20e-6] * 8
    assert buffer_step(lat, 20e-6, 500e-6) == (21, 21)
    assert buffer_step(lat[:25], 20e-6, 500e-6)[0] is None  # not confirmed yet


@pytest.mark.parametrize("name", ["ssd-v", "slc", "mlc-2plane", "cache-prog", "tlc-gc",
                                  "tlc-slc"])
def test_write_buffer_is_the_drives(name):
    # The presets' buffers: ssd-v 32 KiB, slc 64 KiB, mlc-2plane 1 MiB, cache-prog 256 KiB;
    # tlc-gc none, tlc-slc none (its SLC cache takes written-through writes as fast).
    d = preset(name)
    t = EngineTarget(Engine(d, seed=5), 0, 16 << 20)
    f = detect_write_buffer(t, d.page_size * d.mp)
    assert f.value == d.write_buffer, f.evidence["trial_bytes"]
    assert f.confidence > 0.5
    assert f.summary and ("no write buffer" in f.summary[0]) == (d.write_buffer == 0)


class _StallingHost(EngineTarget):
    """The engine behind a host that stalls: each buffered write, with probability ``p``, takes
    ``stall`` seconds more (another process holding the CPU)."""

    def __init__(self, engine, start, end, p, stall, seed):
        import random

        super().__init__(engine, start, end)
        self.rng, self.p, self.stall = random.Random(seed), p, stall

    def pwrite(self, offset, data):
        super().pwrite(offset, data)
        if self.rng.random() < self.p:
            self.now_ns += int(self.stall * 1e9)


def test_settled_buffer_is_the_largest_two_trials_reach():
    assert settled_buffer([32768, 8192, 12288], 4096) is None
    assert settled_buffer([32768, 8192, 32768], 4096) == 32768
    assert settled_buffer([32768, 8192, 8192, 32768], 4096) == 32768
    assert settled_buffer([0, 0, 8192], 4096) == 0
    assert settled_buffer([1 << 20, 1 << 20, None], 8192) == 1 << 20
    assert settled_buffer([1000 << 10, 1040 << 10], 8192) == 1040 << 10  # within 10 %


@pytest.mark.parametrize("seed", range(12))
def test_write_buffer_holds_on_a_host_that_stalls(seed):
    # One buffered write in eight stalls for as long as a program: trials end early at random,
    # never late. The largest that two trials reach is ssd-v's 32 KiB.
    d = preset("ssd-v")
    t = _StallingHost(Engine(d, seed=seed), 0, 16 << 20, p=0.125, stall=1e-3, seed=seed)
    f = detect_write_buffer(t, d.page_size)
    assert f.value == d.write_buffer, f.evidence["trial_bytes"]
    assert 3 <= len(f.evidence["trial_bytes"]) <= 9
    if len(f.evidence["trial_bytes"]) > 3:
        assert "did not agree" in f.notes[0]


def test_write_buffer_larger_than_the_range_is_not_claimed():
    d = preset("mlc-2plane")
    t = EngineTarget(Engine(d, seed=5), 0, 512 << 10)  # 512 KiB < the 1 MiB buffer
    f = detect_write_buffer(t, 8192)
    assert f.value is None and f.confidence == 0 and "larger" in f.notes[0]


@pytest.mark.timing
def test_write_buffer_through_probe_geometry(tmp_path):
    # ssd-v's 32 KiB buffer through nbdkit at slowdown 50: buffered writes take the host's
    # 1-3 ms, a program 10-110 ms.
    _tools()
    out = tmp_path / "p.json"
    cmd = " ".join([shlex.quote(sys.executable), "-m", "rbscope.cli", "probe-geometry", '"$uri"',
                    "--destructive", "--range", "0:8MiB", "-q", "--json", "--detectors",
                    "buffer", "--page-size", "4096", ">", str(out)])
    r = rbscope("vssd", "ssd-v", "--socket", tmp_path / "s.sock", "--slowdown", 50, "--run",
                cmd, timeout=600)
    assert r.returncode == 0, r.stderr
    (f,) = json.loads(out.read_text())["findings"]
    assert f["name"] == "write_buffer"
    assert f["value"] == preset("ssd-v").write_buffer, f["evidence"]["trial_bytes"]


# Erase unit -------------------------------------------------------------------------------------


def test_erase_period_takes_the_smallest_period_spiking_every_time():
    # Two units, period 40: unit 0's erase at phase 3, unit 1's at 22 (one period without it),
    # slow programs every other write, one noise spike.
    lat = [(1.8e-3 if i % 2 else 0.4e-3) for i in range(400)]
    for k in range(10):
        lat[40 * k + 3] = 9e-3
        if k != 4:
            lat[40 * k + 22] = 6e-3
    lat[117] = 30e-3
    p = erase_period(lat, 2)
    assert p["period"] == 40 and p["phase"] == 3
    assert p["scores"][80] >= 1.5 and p["scores"][20] < 1.5  # multiples pass, halves do not
    assert erase_period(lat[:180], 2)["period"] is None  # fewer than five periods
    # A period that spikes in half of its periods only (twice the true one's half) fails.
    half = [(9e-3 if i % 80 == 3 else 1e-3) for i in range(800)]
    assert erase_period(half, 2)["period"] == 80


@pytest.mark.parametrize("name", ["ssd-v", "slc", "mlc-2plane", "tlc-gc", "cache-prog"])
def test_erase_unit_after_gc_is_the_drives_block(name):
    d = small(name)
    page = d.page_size * d.mp  # the effective page (the program unit)
    t = EngineTarget(Engine(d, seed=6))
    req = ProbeRequest(detectors=("gc", "erase"), page_size=page, units=d.dies, seed=6)
    gc, erase = run_detectors(t, req)
    assert gc.value is not None
    assert erase.value == unit_bytes(d), erase.evidence["scores"]
    assert erase.evidence["pages_per_unit"] == d.pages_per_block
    assert 1 <= erase.evidence["erase_phases"] <= d.dies  # one per die erasing every period
    assert erase.confidence > 0.5
    page_finding = Finding(name="page_size", value=page, confidence=1.0)
    geometry = parse_geometry(guess_toml([page_finding, gc, erase], name, "now"), "guess")
    assert geometry.pages_per_block == d.pages_per_block
    assert geometry.dies == d.dies  # (the units the erase detector was given)


def test_erase_unit_on_a_drive_not_collecting_is_not_claimed():
    d = small("ssd-v")
    e = Engine(d, seed=7)
    quarter = e.capacity // 4 // 4096 * 4096
    f = detect_erase_unit(EngineTarget(e, 0, quarter), 4096, d.dies)
    assert f.value is None and "not collecting" in f.notes[0]
    assert e.ftl.erases.sum() == 0  # (the truth: nothing was erased)


# Cross-check against the R/B# pulses ------------------------------------------------------------


def test_read_pulses_and_classify_widths(tmp_path):
    vcd = tmp_path / "r.vcd"
    vcd.write_text("$timescale 1 ns $end\n$scope module refssd $end\n"
                   "$var wire 1 ! rb0 $end\n$var wire 1 \" rb1 $end\n$upscope $end\n"
                   "$enddefinitions $end\n#0\n$dumpvars\n1!\n1\"\n$end\n"
                   "#1000\n0!\n#301000\n1!\n0\"\n#2301000\n1\"\n#2400000\n0!\n#2430000\n1!\n")
    lines = read_pulses(vcd)
    starts, widths = lines["refssd.rb0"]
    assert starts.tolist() == pytest.approx([1e-6, 2.4e-3])
    assert widths.tolist() == pytest.approx([300e-6, 30e-6])
    assert lines["refssd.rb1"][1].tolist() == pytest.approx([2e-3])
    assert classify_widths([300e-6, 30e-6, 2e-3, 1e-7]).tolist() == \
        ["program", "read", "program", "other"]  # the generic windows: erases from 2.3 ms


@pytest.mark.parametrize("name", ["slc", "mlc-2plane"])
def test_cross_check_agrees_with_the_pulses_and_can_disagree(tmp_path, name):
    d = small(name)
    page = d.page_size * d.mp
    e = Engine(d, seed=8)
    findings = run_detectors(EngineTarget(e), ProbeRequest(
        detectors=("buffer", "gc", "erase"), page_size=page, units=d.dies, seed=8))
    e.flush()  # as rbscope vssd does on exit
    vcd = tmp_path / "r.vcd"
    e.write_recording(vcd)
    windows = d.user_geometry().classifier.windows  # the bundled geometry's (ssd-s, ssd-m)
    units = Finding(name="parallel_units", value=d.dies, confidence=1.0)
    pf = Finding(name="page_size", value=page, confidence=1.0)
    checks, per_line = cross_check([pf, units, *findings], vcd, windows=windows)
    by = {c.quantity: c for c in checks}
    assert by["parallel units"].agrees and by["pages per block"].agrees
    assert by["pages per block"].guess == d.pages_per_block
    assert abs(by["pages per block"].pulses / d.pages_per_block - 1) <= 0.05
    assert by["garbage collection"].agrees
    # The buffer detector wrote first: its bytes count towards the over-provisioning bound.
    gc = findings[1]
    assert gc.evidence["prior_bytes"] == findings[0].io["bytes_written"] > 0
    reserve = d.dies * (d.gc_free_units + d.open_streams) * unit_bytes(d) / d.logical_bytes
    op = gc.evidence["over_provisioning_at_least"]
    assert d.over_provisioning - reserve <= op <= d.over_provisioning, (op, reserve)
    assert len(per_line) == d.dies
    # The same truth from the FTL: program pulses per line = program operations per die.
    truth = e.truth()
    assert sum(c["programs"] for c in per_line.values()) == truth.program_operations
    assert sum(c["erases"] for c in per_line.values()) == truth.erases["total"]
    # A guess that is wrong is flagged.
    buffer, erase = findings[0], findings[2]
    wrong = Finding(**{**erase.to_dict(), "value": erase.value * 2})
    nogc = Finding(**{**gc.to_dict(), "value": None})
    two = Finding(name="parallel_units", value=2 * d.dies, confidence=1.0)
    checks, _ = cross_check([pf, two, buffer, nogc, wrong], vcd, windows=windows)
    assert [c.agrees for c in checks[:3]] == [False, False, False]
    assert "NO" in "\n".join(format_checks(checks))
    # The plots of the same findings: one SVG per detector and the page holding them.
    paths = write_plots(findings, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["erase_unit.svg", "gc_onset.svg", "probe.html",
                                            "write_buffer.svg"]
    page = (tmp_path / "plots" / "probe.html").read_text()
    assert page.count("<svg") == 3 and "over-provisioning at least" in page


def test_plots_of_the_page_and_units_findings(tmp_path):
    # The shapes the page-size and parallel-units detectors give their evidence.
    means = {str(512 << i): (2e-3 if i < 3 else 1e-3) for i in range(9)}
    page = Finding(name="page_size", value=4096, confidence=0.8,
                   evidence={"mean_pair_s": means}, rule="r")
    units = Finding(name="parallel_units", value=4, confidence=0.5, rule="r",
                    evidence={"speedup": {str(q): min(q, 3.5) for q in (1, 2, 4, 8)}})
    paths = write_plots([page, units], tmp_path)
    assert [p.name for p in paths] == ["page_size.svg", "parallel_units.svg", "probe.html"]
    assert "Effective page size" in paths[0].read_text()


def test_findings_mode_guards(tmp_path):
    r = rbscope("probe-geometry", "--findings", tmp_path / "none.json")
    assert r.returncode == 2 and "cannot read" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    r = rbscope("probe-geometry", "--findings", bad)
    assert r.returncode == 2 and "not the --json output" in r.stderr
    r = rbscope("probe-geometry", "disk.img", "--findings", bad)
    assert r.returncode == 2 and "give no TARGET" in r.stderr
    r = rbscope("probe-geometry")
    assert r.returncode == 2 and "give a TARGET" in r.stderr


def test_probe_request_checks_the_detectors():
    with pytest.raises(ProbeError, match="unknown nope"):
        ProbeRequest(detectors=("nope",))
    with pytest.raises(ProbeError, match="page size"):
        ProbeRequest(detectors=("units",))
    d = small("slc")
    t = EngineTarget(Engine(d, seed=4))
    (f,) = run_detectors(t, ProbeRequest(detectors=("gc",), page_size=8192))
    assert f.name == "gc_onset" and f.value
    # A range too small for the erase detector: it is not run, the others' findings stay.
    t = EngineTarget(Engine(d, seed=4), 0, 100 * 8192)
    gc, erase = run_detectors(t, ProbeRequest(detectors=("gc", "erase"), page_size=8192))
    assert gc.value is None and gc.io["writes"] == 9 * 32  # nine windows at least: no knee
    assert erase.value is None and erase.rule == "not run" and "128" in erase.notes[0]

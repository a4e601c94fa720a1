"""``rbscope probe-geometry``: the detectors against reference SSDs served by ``rbscope vssd``
(the same code path as a real device), and the block-device / plain-file plumbing and guards."""

import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from rbscope.analysis.geometry import parse_geometry
from rbscope.probe import Finding, ProbeError, guess_toml, open_target, parse_range
from rbscope.probe.target import FileTarget, device_is_mounted, mounted_devices
from rbscope.refssd import preset
from rbscope.vssd.serve import ServeError, check_python_plugin


def rbscope(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rbscope.cli", *map(str, args)],
                          capture_output=True, text=True, **kw)


# Guards and plumbing ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, match", [
    ("0-4096", "START:END"), ("4096:0", "below END"), ("0:1000", "multiples of 4096"),
    ("x:4096", "not a byte count"), ("0:4096:8192", "START:END")])
def test_range_errors_name_the_option(text, match):
    with pytest.raises(ProbeError, match=match):
        parse_range(text)
    assert parse_range("4KiB:64MiB") == (4096, 64 << 20)


def test_destructive_needs_a_range_and_writes_need_destructive(tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(1 << 20))
    with pytest.raises(ProbeError, match="--destructive needs an explicit --range"):
        open_target(str(f), destructive=True)
    with open_target(str(f)) as t:  # read-only
        assert t.pread(0, 4096) == bytes(4096)
        with pytest.raises(ProbeError, match="writing needs --destructive"):
            t.pwrite(0, b"x" * 4096)
    with open_target(str(f), destructive=True, byte_range=(4096, 8192)) as t:
        t.pwrite_through(4096, b"\x07" * 4096)
        assert t.pread(4096, 4096) == b"\x07" * 4096
        with pytest.raises(ProbeError, match="outside the range"):
            t.pwrite(0, b"x" * 4096)
        with pytest.raises(ProbeError, match="outside the range"):
            t.pread(8192, 512)
        assert t.notes and any("cache" in n for n in t.notes)
    assert f.read_bytes()[4096:8192] == b"\x07" * 4096
    assert f.read_bytes()[:4096] == bytes(4096)
    with pytest.raises(ProbeError, match="beyond its"):
        open_target(str(f), destructive=True, byte_range=(0, 2 << 20))


MOUNTINFO = ("22 27 0:21 / /proc rw,relatime - proc proc rw\n"
             "29 1 7:3 / /mnt/x rw,relatime - ext4 /dev/loop3 rw\n")


def test_mounted_devices_from_mountinfo(tmp_path):
    assert mounted_devices(MOUNTINFO) == {(0, 21), (7, 3)}
    assert device_is_mounted(os.makedev(7, 3), MOUNTINFO, sys_root=tmp_path)
    assert not device_is_mounted(os.makedev(7, 4), MOUNTINFO, sys_root=tmp_path)
    # A disk whose partition is mounted counts as mounted (sysfs lists the partitions).
    part = tmp_path / "dev" / "block" / "8:0" / "sda1"
    part.mkdir(parents=True)
    (part / "partition").write_text("1\n")
    (part / "dev").write_text("7:3\n")
    assert device_is_mounted(os.makedev(8, 0), MOUNTINFO, sys_root=tmp_path)


def test_a_mounted_block_device_is_refused(tmp_path):
    dev = next((f"/dev/loop{i}" for i in range(8) if os.path.exists(f"/dev/loop{i}")
                and stat.S_ISBLK(os.stat(f"/dev/loop{i}").st_mode)), None)
    if dev is None:
        pytest.skip("no /dev/loopN block device on this machine")
    rdev = os.stat(dev).st_rdev
    info = tmp_path / "mountinfo"
    info.write_text(f"29 1 {os.major(rdev)}:{os.minor(rdev)} / /mnt/x rw - ext4 {dev} rw\n")
    with pytest.raises(ProbeError, match="mounted"):
        FileTarget(dev, writable=True, mountinfo_path=str(info), sys_root=str(tmp_path))


def test_cli_guards(tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(1 << 20))
    r = rbscope("probe-geometry", f)
    assert r.returncode == 2 and "--destructive" in r.stderr
    r = rbscope("probe-geometry", f, "--destructive")
    assert r.returncode == 2 and "--range" in r.stderr
    r = rbscope("probe-geometry", f, "--destructive", "--range", "0:4KiB", "--detectors", "x")
    assert r.returncode == 2 and "unknown x" in r.stderr
    r = rbscope("probe-geometry", "nbd+unix:///?socket=" + str(tmp_path / "none.sock"),
                "--destructive", "--range", "0:4KiB")
    assert r.returncode == 2 and "cannot connect" in r.stderr
    assert f.read_bytes() == bytes(1 << 20)  # nothing was written


def test_cli_runs_on_a_plain_file_without_claiming_a_geometry(tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(8 << 20))
    r = rbscope("probe-geometry", f, "--destructive", "--range", "1MiB:8MiB", "--detectors",
                "units", "--page-size", "4096", "--json", "-q", timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (units,) = out["findings"]
    assert units["name"] == "parallel_units"
    assert units["io"]["writes"] == sum(q * max(4, 16 // q) for q in (1, 2, 4, 8, 16, 32, 64))
    assert out["geometry_toml"] is None  # no page size: no geometry claimed
    data = f.read_bytes()
    assert data[:1 << 20] == bytes(1 << 20)  # outside the range: untouched
    assert data[1 << 20:(1 << 20) + 4096] != bytes(4096)  # inside: written


# Against the virtual SSD -------------------------------------------------------------------------


def _tools():
    try:
        check_python_plugin()
    except ServeError as exc:
        pytest.skip(str(exc))


#: Preset → slowdowns of the page-size and the parallel-units runs: the host's per-request
#: cost (a few ms) must stay small against tPROG × F, and the host must keep up with every
#: parallel unit programming at once.
SLOWDOWN = {"ssd-v": (20, 30), "mlc-2plane": (40, 100), "slc": (40, 200), "tlc-gc": (20, 40)}


def _probe(tmp_path, name, detector, slowdown, *extra, vssd=(), size="64MiB"):
    _tools()
    out = tmp_path / f"{detector}.json"
    cmd = " ".join([shlex.quote(sys.executable), "-m", "rbscope.cli", "probe-geometry", '"$uri"',
                    "--destructive", "--range", f"0:{size}", "-q", "--json", "--detectors",
                    detector, *extra, ">", str(out)])
    sock = tmp_path / f"{detector}.sock"
    r = rbscope("vssd", name, "--socket", sock, "--slowdown", slowdown, "--run", cmd, *vssd,
                timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())["findings"]


@pytest.mark.parametrize("name", [
    "ssd-v", "mlc-2plane",
    pytest.param("slc", marks=pytest.mark.slow), pytest.param("tlc-gc", marks=pytest.mark.slow)])
@pytest.mark.timing
def test_page_size_detector_finds_the_program_unit_of_a_preset(tmp_path, name):
    d = preset(name)
    # TLC program times spread 0.4-4 ms by page type: more repetitions steady the means.
    reps = {"tlc-gc": "41"}.get(name, "21")
    (page,) = _probe(tmp_path, name, "page", SLOWDOWN[name][0], "--reps", reps)
    # The effective page: the program unit (page x planes with multi-plane programs).
    assert page["value"] == d.page_size * d.mp, page["evidence"]["mean_pair_s"]
    assert page["confidence"] > 0.3


@pytest.mark.timing
def test_parallel_units_detector_and_the_guess_on_ssd_v(tmp_path):
    # The units detector is checked on SSD-v only: on the fresh multi-plane and TLC presets
    # every die programs the same page type at the same time, and the batch times follow the
    # page-type phase more than the number of dies (docs/vssd.md, "Limits").
    d = preset("ssd-v")
    (page,) = _probe(tmp_path, "ssd-v", "page", SLOWDOWN["ssd-v"][0])
    # The units are probed with the page size given (as a user who knows it would): a page
    # detection that cannot decide on a loaded machine (its own test) does not stop this one.
    (units,) = _probe(tmp_path, "ssd-v", "units", SLOWDOWN["ssd-v"][1], "--page-size",
                      str(d.page_size))
    assert units["value"] == d.dies, units["evidence"]
    assert 0 < units["confidence"] <= 1
    assert units["evidence"]["speedup"]["1"] == 1.0
    findings = [Finding(**page), Finding(**units)]
    if page["value"] is None:  # (undecided on a loaded machine: no guess, and it says why)
        with pytest.raises(ProbeError, match="no page size was found"):
            guess_toml(findings, "ssd-v", "now")
        return
    geometry = parse_geometry(guess_toml(findings, "ssd-v", "now"), "guess")
    assert (geometry.page_size, geometry.dies) == (page["value"], d.dies)
    assert page["value"] == d.page_size


# Striping address bits (SSDcheck's one bit at a time) -----------------------------------------


class _Striped:
    """A target whose units are chosen by the page address: a write (or a read) holds its unit for
    ``t`` seconds (writes on one unit queue, writes on different units overlap). ``t`` may be
    a sequence: a unit's n-th write holds it for ``t[n % len(t)]`` (its page types)."""

    def __init__(self, page, select, t=0.02, size=64 << 20, load=None):
        import threading

        from rbscope.probe.target import Target

        self.page, self.select, self.load = page, select, load
        self.t = t if isinstance(t, (list, tuple)) else (t,)
        self.done = {}
        self.reads = []
        self.locks = {}
        self.guard = threading.Lock()
        self.writes = []
        outer = self

        class T(Target):
            def pread(self, offset, length):
                self._check(offset, length, False)
                outer.reads.append((offset, length))
                self._hold(offset)
                return bytes(length)

            def pwrite_through(self, offset, data):
                self._check(offset, len(data), True)
                outer.writes.append((offset, len(data)))
                self._hold(offset)

            def _hold(self, offset):
                unit = outer.select(offset // outer.page)
                with outer.guard:
                    lock = outer.locks.setdefault(unit, threading.Lock())
                with lock:
                    import time
                    n = outer.done.get(unit, 0)
                    outer.done[unit] = n + 1
                    # ``load(writes so far)``: the host's own extra seconds for this request.
                    extra = outer.load(len(outer.writes)) if outer.load else 0.0
                    time.sleep(outer.t[n % len(outer.t)] + extra)

            def clone(self):
                return T(self.name, self.size, self.start, self.end, True)

        self.target = T("striped", size, 0, size, True)


@pytest.mark.parametrize("name, select, bits", [
    ("4 dies by page bits 0-1", lambda p: p % 4, [12, 13]),
    ("8 units by page bits 0-2", lambda p: p % 8, [12, 13, 14]),
    ("1 unit", lambda p: 0, None),
])
@pytest.mark.timing
def test_stripe_bits_detector_finds_the_bits_that_select_the_units(name, select, bits):
    from rbscope.probe.stripe_bits import detect_stripe_bits

    s = _Striped(4096, select)
    f = detect_stripe_bits(s.target, 4096, bits=5, reps=4, cycle=1)
    assert f.name == "stripe_bits"
    assert f.value == bits, (name, f.evidence["ratio"])
    if bits is None:
        assert f.confidence == 0.0 and ("do not split" in f.notes[0]
                                        or "clearly overlapped" in f.notes[0])
    else:
        assert f.confidence > 0.5 and f.evidence["units_addressed"] == 2 ** len(bits)
        # Every write inside the range, one page each, and the pairs one bit apart.
    assert all(0 <= o and o + n <= 64 << 20 and n == 4096 for o, n in s.writes)
    assert f.io["writes"] == len(s.writes) == 4 * 5 * 4
    if bits:  # the writes each unit took, for the cross-check with the pulses
        units = [0] * 2 ** len(bits)
        for o, _n in s.writes:
            units[select(o // 4096)] += 1
        assert f.evidence["writes_per_unit"] == sorted(units)


@pytest.mark.timing
def test_stripe_bits_detector_says_what_lies_below_or_between_the_bits():
    from rbscope.probe.stripe_bits import detect_stripe_bits

    # Two planes' pages on one die (a multi-plane row), then 4 dies: page bits 1-2 stripe.
    s = _Striped(4096, lambda p: (p >> 1) % 4)
    f = detect_stripe_bits(s.target, 4096, bits=5, reps=4, cycle=1)
    assert f.value == [13, 14] and f.confidence > 0.5, f.evidence["ratio"]
    assert "2 pages of 4096 bytes share a unit" in f.notes[0] and "8192" in f.notes[0]
    # Bits 0 and 2 but not 1: no bit-select striping.
    s = _Striped(4096, lambda p: (p & 1) | ((p >> 1) & 2))
    f = detect_stripe_bits(s.target, 4096, bits=5, reps=4, cycle=1)
    assert f.value == [12, 14] and f.confidence == 0.0
    assert "not contiguous" in f.notes[0]


@pytest.mark.timing
def test_stripe_bits_detector_measures_whole_page_type_cycles():
    # TLC-like units: a unit's writes take 10, 30 and 60 ms in turn (its page types). Runs of
    # three pairs meet every page type once concurrently and once in turn, so the striping
    # bits (page bits 0-2: 8 units) stand clear of the queued ones.
    s = _Striped(4096, lambda p: p % 8, t=(0.01, 0.03, 0.06))
    from rbscope.probe.stripe_bits import detect_stripe_bits

    f = detect_stripe_bits(s.target, 4096, bits=5, reps=2, cycle=3)
    assert f.value == [12, 13, 14] and f.confidence > 0.3, f.evidence["ratio"]
    assert f.io["writes"] == len(s.writes) == 4 * 5 * 2 * 3
    # Each run is three pairs on fresh pages of the same units.
    assert len(set(o for o, _ in s.writes)) == len(s.writes)


# The page-size rule on pair times, and the detector under a host load that changes ------------


def _pairs(rng, levels, n=21, stalls=0.0):
    """Synthetic pair times: for each boundary its level (seconds) times MLC-like page types
    (0.7x or 1.3x, at random), and with probability ``stalls`` a host stall of 20-100 ms."""
    out = {}
    for c, level in levels.items():
        xs = [level * (0.7 if rng.random() < 0.5 else 1.3) * rng.uniform(0.9, 1.1)
              for _ in range(n)]
        out[c] = [x + (rng.uniform(0.02, 0.1) if rng.random() < stalls else 0.0) for x in xs]
    return out


@pytest.mark.parametrize("seed", range(8))
def test_page_step_finds_the_step_through_page_types_and_host_stalls(seed):
    import random

    from rbscope.probe.detect import CANDIDATES, page_step

    rng = random.Random(seed)
    # Two-plane drive, 4 KiB pages: the plane boundary (4 KiB) is barely faster than a shared
    # page; the program unit (8 KiB) takes half the pair's time.
    levels = {c: (0.060 if c < 4096 else 0.055 if c == 4096 else 0.030) for c in CANDIDATES}
    value, conf, splits = page_step(_pairs(rng, levels, stalls=0.03))
    assert value == 8192, splits
    # The plane boundary passes on its own too; the program unit splits the pairs better.
    assert conf > 0.3 and splits[8192]["p"] < splits[4096]["p"]


def test_page_step_is_the_first_boundary_of_the_fast_level():
    import random

    from rbscope.probe.detect import CANDIDATES, page_step

    # The page boundary's pairs 10 % slower than the larger boundaries' (every time): the split
    # above it separates the pairs the more cleanly, but the page is where the fast level
    # begins.
    rng = random.Random(7)
    levels = {c: (0.060 if c < 4096 else 0.033 if c == 4096 else 0.030) for c in CANDIDATES}
    series = {c: [lv * rng.uniform(0.98, 1.02) for _ in range(21)] for c, lv in levels.items()}
    value, conf, splits = page_step(series)
    assert splits[8192]["p"] < splits[4096]["p"]
    assert value == 4096 and conf > 0.5


@pytest.mark.parametrize("seed", range(4))
def test_page_step_says_none_without_a_step(seed):
    import random

    from rbscope.probe.detect import CANDIDATES, page_step

    rng = random.Random(100 + seed)
    value, conf, splits = page_step(_pairs(rng, {c: 0.04 for c in CANDIDATES}, stalls=0.03))
    assert (value, conf) == (None, 0.0), splits
    # A lone dip at one boundary (one fast candidate among slow ones) is no page either.
    levels = {c: (0.02 if c == 16384 else 0.04) for c in CANDIDATES}
    value, _, splits = page_step(_pairs(rng, levels))
    assert value is None, splits


@pytest.mark.timing
def test_page_size_detector_holds_under_a_load_that_changes():
    # 4 KiB pages on 4 units; from the middle of the run on, the host adds 25 ms to every
    # request (another process starts). Boundaries measured one after another would see the
    # larger ones slower than the smaller ones; rounds over all boundaries see the load alike.
    from rbscope.probe.detect import CANDIDATES, detect_page_size

    reps = 6
    half = reps * len(CANDIDATES)  # writes: two per pair
    s = _Striped(4096, lambda p: p % 4, t=0.01, load=lambda n: 0.025 if n > half else 0.0)
    f = detect_page_size(s.target, reps=reps)
    assert f.value == 4096, f.evidence["mean_pair_s"]
    assert f.io["writes"] == len(s.writes) == 2 * reps * len(CANDIDATES)
    # Every boundary was met in each half of the run.
    # (The detector's pairs meet at k·c past its base, the largest boundary; k odd.)
    meets = [o + n - CANDIDATES[-1] for o, n in s.writes[:half]]
    assert {c for c in CANDIDATES if any(x % (2 * c) == c for x in meets)} == set(CANDIDATES)


def test_stripe_bits_detector_refuses_a_range_too_small():
    from rbscope.probe.stripe_bits import detect_stripe_bits
    from rbscope.probe.target import RangeTooSmall

    s = _Striped(4096, lambda p: p % 4, size=1 << 20)
    with pytest.raises(RangeTooSmall, match="needs"):
        detect_stripe_bits(s.target, 4096, bits=8, reps=6)
    with pytest.raises(RangeTooSmall, match="6 pairs"):
        detect_stripe_bits(s.target, 4096, bits=7, reps=2)
    with pytest.raises(ProbeError, match="multiple of 512"):
        detect_stripe_bits(s.target, 1000)


@pytest.mark.parametrize("name, slowdown, bits", [
    # SSD-v stripes its 4 dies by page bits 0-1 (die = page mod 4): byte bits 12 and 13.
    ("ssd-v", 30, [12, 13]),
    # mlc-2plane: 16 dies by bits 0-3 of its 8 KiB two-plane rows: byte bits 13 to 16.
    pytest.param("mlc-2plane", 40, [13, 14, 15, 16], marks=pytest.mark.slow),
    # slc: 16 dies on 4 channels by bits 0-3 of its 8 KiB rows.
    pytest.param("slc", 200, [13, 14, 15, 16], marks=pytest.mark.slow),
    # tlc-gc: 8 dies by bits 0-2 of its 16 KiB pages; page types of 0.4-4 ms.
    pytest.param("tlc-gc", 40, [14, 15, 16], marks=pytest.mark.slow)])
@pytest.mark.timing
def test_stripe_bits_detector_through_nbd(tmp_path, name, slowdown, bits):
    d = preset(name)
    vcd, geo = tmp_path / "r.vcd", tmp_path / "g.toml"
    (f,) = _probe(tmp_path, name, "stripe", slowdown, "--page-size", str(d.page_size * d.mp),
                  vssd=("--record", vcd, "--geometry-out", geo),
                  size="128MiB" if d.page_size * d.mp > 8192 else "64MiB")
    assert f["value"] == bits, f["evidence"]["ratio"]
    assert f["evidence"]["units_addressed"] == d.dies and f["confidence"] > 0.3
    # The R/B# lines of the same run: each unit's writes as the bits found predict.
    r = rbscope("probe-geometry", "--findings", tmp_path / "stripe.json", "--pulses", vcd,
                "--geometry", geo, "--json")
    assert r.returncode == 0, r.stderr
    checks = {c["quantity"]: c for c in json.loads(r.stdout)["cross_check"]["checks"]}
    assert checks["striping bits: writes per unit"]["agrees"], checks
    assert checks["parallel units"]["agrees"], checks


def test_the_guess_takes_the_striping_bits_units_where_the_writers_fell_short():
    # mlc-2plane's figures (docs/benchmarks.md): the units detector found 8 of its 16 dies,
    # the striping bits 13-16 (16 units) at confidence 0.72.
    page = Finding("page_size", 8192, 0.78)
    units = Finding("parallel_units", 8, 0.34)
    stripe = Finding("stripe_bits", [13, 14, 15, 16], 0.72,
                     evidence={"units_addressed": 16, "page": 8192})
    from rbscope.probe.guess import guess_geometry

    assert guess_geometry([page, units, stripe]).channels == 16
    assert guess_geometry([page, units]).channels == 8
    # Not at a low confidence, nor measured at another page size.
    weak = Finding("stripe_bits", [13, 14, 15], 0.1, evidence={"units_addressed": 8,
                                                               "page": 8192})
    assert guess_geometry([page, Finding("parallel_units", 4, 0.3), weak]).channels == 4
    other = Finding("stripe_bits", [12, 13], 0.6, evidence={"units_addressed": 4, "page": 4096})
    assert guess_geometry([page, Finding("parallel_units", 2, 0.3), other]).channels == 2


def test_the_striping_cross_check_compares_each_units_writes_with_the_lines():
    from rbscope.probe.pulses import _striping_check

    stripe = {"name": "stripe_bits", "value": [14, 15, 16], "confidence": 0.7,
              "evidence": {"page": 16384, "units_addressed": 8,
                           "writes_per_unit": [0, 0, 0, 24, 24, 24, 48, 216]}}
    lines = {f"RB{i}": {"programs": p, "erases": e, "reads": 0, "pages_per_block": None}
             for i, (p, e) in enumerate([(17, 7), (17, 7), (16, 8), (33, 15), (150, 66),
                                         (0, 0), (0, 0), (0, 0)])}
    ok = _striping_check(stripe, {"stripe_bits": stripe}, lines)
    assert ok.agrees and ok.pulses == [24, 24, 24, 48, 216]
    # Other bits would spread the same writes otherwise: the lines disagree.
    lines["RB4"] = {"programs": 100, "erases": 16, "reads": 0, "pages_per_block": None}
    lines["RB5"] = {"programs": 100, "erases": 0, "reads": 0, "pages_per_block": None}
    assert _striping_check(stripe, {"stripe_bits": stripe}, lines).agrees is False
    # Another detector's writes fall on the lines too: not compared.
    both = {"stripe_bits": stripe, "page_size": {"name": "page_size", "io": {"writes": 40}}}
    c = _striping_check(stripe, both, lines)
    assert c.agrees is None and "other detectors wrote 40 pages" in c.evidence
    # No bits decided: nothing to predict.
    none = dict(stripe, value=None, evidence={"page": 16384, "writes_per_unit": None})
    assert _striping_check(none, {"stripe_bits": none}, lines).agrees is None


# Allocation unit from read pairs ----------------------------------------------------------------


@pytest.mark.parametrize("name, select, unit", [
    # A drive that maps blocks: 12 pages per logical block, block b on unit b mod 4.
    ("12-page blocks on 4 units", lambda p: (p // 12) % 4, 12),
    # Not a power of two and not aligned to the range: 10-page blocks from page 3 on.
    ("10-page blocks", lambda p: ((p + 7) // 10) % 3, 10),
])
@pytest.mark.timing
def test_read_unit_detector_finds_the_unit_a_drive_maps(name, select, unit):
    from rbscope.probe.read_unit import detect_read_unit

    s = _Striped(4096, select, t=0.02)
    f = detect_read_unit(s.target, 4096, pages=64, reps=1)
    assert f.name == "allocation_unit"
    assert f.value == unit * 4096 and f.evidence["pages_per_unit"] == unit, (name, f.summary)
    assert f.confidence > 0.3
    first = f.evidence["boundaries"][0]
    assert select(first) != select(first - 1)  # a boundary is where the unit changes
    # It wrote each page once, then read every neighbouring pair at once and in turn.
    assert len(s.writes) == 64 and len(s.reads) == f.io["reads"] == 4 * 63


@pytest.mark.parametrize("select, says", [
    (lambda p: p % 4, "page-mapped drive striping its pages"),
    (lambda p: 0, "one unit, or reads served one at a time"),
])
@pytest.mark.timing
def test_read_unit_detector_says_why_no_unit_shows(select, says):
    from rbscope.probe.read_unit import detect_read_unit

    s = _Striped(4096, select, t=0.02)
    f = detect_read_unit(s.target, 4096, pages=48, reps=1)
    assert f.value is None and f.confidence == 0.0
    assert says in f.notes[0]


def test_read_unit_period_takes_the_unit_not_its_multiples_nor_the_noise():
    import random

    from rbscope.probe.read_unit import read_unit_period

    rng = random.Random(1)
    # 100-page units (a hybrid FTL's data area), boundaries after pages 99, 199, ...: 0.55-0.7;
    # the other pairs 0.8-1.0, and a few fast pairs of noise.
    r = [rng.uniform(0.55, 0.7) if (j + 1) % 100 == 0 else rng.uniform(0.8, 1.0)
         for j in range(1023)]
    for j in (17, 333, 640):
        r[j] = 0.6
    period, boundaries, conf, note = read_unit_period(r)
    assert period == 100 and boundaries[:3] == [100, 200, 300] and note is None
    assert conf > 0.3


@pytest.mark.parametrize("slowed, period", [
    ((100, 300, 700), 100),  # three of ten boundaries slowed by a loaded host: still the unit
    ((100, 300, 500, 700, 900), 200),  # every odd boundary slow: the data say 200, not 100
])
def test_read_unit_period_keeps_the_unit_when_noise_slows_some_of_its_boundaries(slowed, period):
    import random

    from rbscope.probe.read_unit import read_unit_period

    rng = random.Random(2)
    r = [rng.uniform(0.55, 0.7) if (j + 1) % 100 == 0 else rng.uniform(0.8, 1.0)
         for j in range(1023)]
    for b in slowed:  # (the upper quartile of the 100-page boundaries is now a slow pair)
        r[b - 1] = rng.uniform(0.85, 0.95)
    for j in (17, 333, 640):
        r[j] = 0.6
    got, boundaries, _, note = read_unit_period(r)
    assert (got, boundaries[0], note) == (period, period, None)


def test_read_unit_period_does_not_halve_a_unit_for_one_fast_pair_of_noise():
    import random

    from rbscope.probe.read_unit import read_unit_period

    rng = random.Random(5)
    r = [rng.uniform(0.55, 0.7) if (j + 1) % 200 == 0 else rng.uniform(0.8, 1.0)
         for j in range(1023)]
    r[99] = 0.6  # one fast pair halfway between two boundaries: chance, not a unit of 100
    assert read_unit_period(r)[0] == 200


@pytest.mark.heavy  # (about 2 min on the wall clock: make test-heavy)
@pytest.mark.timing
def test_read_unit_detector_through_nbd_finds_the_hybrid_ftls_data_area(tmp_path):
    # hubi (hUBI-like hybrid FTL): logical block b's 100 data pages (128-page blocks less 28
    # log pages) on die b mod 4: neighbouring 2 KiB pages overlap every 100 pages.
    d = preset("hubi")
    # (Slowdown 80: the dies' time well above a loaded host's per request.)
    (f,) = _probe(tmp_path, "hubi", "alloc", 80, "--page-size", str(d.page_size))
    unit = (d.pages_per_block - d.hybrid_log_pages) * d.page_size
    assert f["value"] == unit, (f["summary"], f["notes"])
    assert f["confidence"] > 0.2

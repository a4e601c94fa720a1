"""The drive zoo: rbscope's WA against the truth on randomised drives, at three knowledge levels.

A yardstick that shares the instrument's assumptions measures nothing. The zoo draws drives from
families of 2026 NAND (cell, program scheme, planes, LUNs on one R/B#, cache regime, suspends,
read retry, timing spread and tails, over-provisioning, garbage collection) on the reference SSD
(:mod:`rbscope.refssd`), runs one of the paper's micro-benchmarks on each, and analyses the R/B#
lines exactly as ``rbscope analyze`` does (:func:`rbscope.analysis.pipeline.analyse` with an
:class:`~rbscope.analysis.pipeline.AnalysisRequest`, on the measurement saved as JSON), at three
knowledge levels:

* **L0**: a geometry only: channels, chips, dies, planes, page size, program model, and where
  the family says a user knows them ``pages_per_block``, ``cell`` and ``program_scheme``. No
  timing, no preset, no windows, no training.
* **L1**: L0 plus datasheet maxima (``[timing]`` of the geometry: ``read``, ``program``,
  ``erase``, each ONE number, the maximum a parameter page states): the longest tR, tPROG and
  tBERS the simulation drew (``Run.stats["drawn_max_ns"]``) times a random factor 1.0–1.6,
  rounded up as datasheets do. Never the ranges the pulses were drawn from.
* **L2**: L1 plus a tapped channel's labelled pulses: the opcode tap's model on channel 0
  (:func:`rbscope.analysis.labelled.from_refssd`) trained into a classifier
  (:func:`rbscope.analysis.trained.train`, ``analyze --trained``).

The classifier never sees the distributions the simulation drew from: the drive's ranges, shape,
spread and drift stay inside the job.

Seeds below 1000 are for tuning, 1000 and above for publishing (``--publish`` refuses others).
Every (family, seed) is one drive and one workload (drawn from the family's list); the job
simulates it once and analyses it at each level. Jobs run on Dask (``dask.distributed``): a
``LocalCluster`` of ``--workers`` processes (default 2), or ``--scheduler ADDRESS``; results are
appended to a JSONL file, one line per (family, workload, seed, level), so an interrupted run
resumes where it stopped. The summary per family and level: runs, worst and p50/p90/p99 of
``|WA_measured - WA_true| / WA_true``, coverage of the 95 % interval (the engine's interval when
it gives none), runs flagged undetermined (``WAResult.undetermined`` where the analysis has it)
and runs that failed.

Usage::

    python benchmarks/zoo.py --seeds 1000:1022 --out zoo.jsonl --markdown zoo.md
    python benchmarks/zoo.py --quick --families mlc-easy --seeds 0:2   # seconds
    python benchmarks/zoo.py --summary zoo.jsonl                       # table only
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rbscope import refssd
from rbscope.analysis.geometry import GeometryError, parse_geometry
from rbscope.analysis.labelled import from_refssd
from rbscope.analysis.logical import from_bytes
from rbscope.analysis.pipeline import AnalysisRequest, SourceOptions, analyse
from rbscope.analysis.presets import DEFAULT_PRESET
from rbscope.analysis.trained import train

LEVELS = ("L0", "L1", "L2")
#: Seeds from this one on are for publishing; below it for tuning.
PUBLISH_SEED = 1000
#: Micro-benchmarks by kind (host/refssd/workload.py).
ALL = refssd.MICRO_BENCHMARKS
SEQ = tuple(w for w in ALL if "-SQ-" in w)
RND = tuple(w for w in ALL if "-RD-" in w)
HALF = tuple(w for w in ALL if "-50%-" in w)
WRITE_ONLY = tuple(w for w in ALL if "-100%-" in w)
SEQ_W = tuple(w for w in SEQ if "-100%-" in w)


# Families --------------------------------------------------------------------------------------

#: Nominal timing (µs) by cell; each drive scales every range by its own random factors.
MLC_T = {"read_lower": (25, 40), "read_upper": (40, 60), "program_lower": (200, 500),
         "program_upper": (1300, 2200), "erase": (1900, 3000)}
TLC_T = {"read_lower": (50, 70), "read_middle": (60, 80), "read_upper": (70, 95),
         "program_lower": (400, 700), "program_middle": (1200, 1800),
         "program_upper": (2500, 3500), "erase": (3000, 5000)}
TLC3D_T = {"read_lower": (40, 60), "read_middle": (45, 70), "read_upper": (50, 80),
           "program_upper": (1500, 2600), "erase": (3000, 6000), "data_load": (1, 5)}
QLC_T = {"read_lower": (60, 90), "read_middle": (70, 100), "read_upper": (80, 110),
         "read_top": (90, 140), "program_foggy": (1200, 2000), "program_fine": (2800, 4500),
         "erase": (4000, 8000), "data_load": (1, 5), "read_slc": (30, 45),
         "program_slc": (150, 300)}
SLC_T = {"read_slc": (20, 30), "program_slc": (200, 400), "erase": (1500, 2500)}


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of drives: fixed structure, randomised details.

    Members
    -------
    name, description : str
    cell : str
    timing : dict
        Nominal ranges (µs); each drive scales them.
    workloads : tuple of str
        Micro-benchmarks a drive of the family runs (one drawn per drive).
    drive : dict
        Fixed :class:`~rbscope.refssd.Drive` fields (scheme, planes, LUNs, options).
    choices : dict
        Field -> tuple of values, one drawn per drive.
    op : (float, float)
        Over-provisioning range.
    knows : tuple of str
        What a user of the family knows beyond the array (``pages_per_block``, ``cell``,
        ``program_scheme``).
    probe : str
        ``"all"`` lines, or ``"one"`` (the first die's line only).
    precondition : str
        ``steady`` or ``initial`` (:data:`rbscope.refssd.PRECONDITIONS`).
    """

    name: str
    description: str
    cell: str
    timing: dict
    workloads: tuple = ALL
    drive: dict = dataclasses.field(default_factory=dict)
    choices: dict = dataclasses.field(default_factory=dict)
    op: tuple = (0.07, 0.3)
    knows: tuple = ("pages_per_block", "cell")
    probe: str = "all"
    precondition: str = "steady"


def _families():
    f = [
        Family("mlc-easy", "2D MLC, page programs, one R/B# per die: the easy case (the "
               "issue's 55 easy MLC draws)", "mlc", MLC_T,
               choices={"planes_per_die": (1, 2), "multi_plane": (False, True)}),
        Family("mlc-seq-100w", "2D MLC, sequential 100 % writes (WA near 1)", "mlc", MLC_T,
               workloads=SEQ_W, choices={"planes_per_die": (2,), "multi_plane": (False, True)}),
        Family("tlc-gc-overlap", "2D TLC, heavy GC (OP 7-12 %), upper-page tPROG 2.5-3.5 ms "
               "overlapping tBERS 3-5 ms", "tlc", TLC_T, workloads=RND, op=(0.07, 0.12),
               choices={"planes_per_die": (2,), "gc": ("greedy", "cost-benefit")}),
        Family("tlc-3d-oneshot-4p", "3D one-shot TLC, 4 planes: two 1Ah loads then one long "
               "busy per word line (scheme not known to the user)", "tlc", TLC3D_T,
               drive={"program_scheme": "one-shot", "planes_per_die": 4, "multi_plane": True},
               op=(0.12, 0.3)),
        Family("tlc-6plane", "3D one-shot TLC, 6 planes, independent plane reads (scheme "
               "known)", "tlc", TLC3D_T, workloads=HALF,
               drive={"program_scheme": "one-shot", "planes_per_die": 6, "multi_plane": True,
                      "plane_reads": True}, op=(0.15, 0.3),
               knows=("pages_per_block", "cell", "program_scheme")),
        Family("qlc-two-pass", "QLC, foggy-fine two-pass programs (scheme known)", "qlc",
               QLC_T, drive={"program_scheme": "two-pass"}, op=(0.12, 0.3),
               choices={"planes_per_die": (2, 4), "multi_plane": (True,)},
               knows=("pages_per_block", "cell", "program_scheme")),
        Family("tlc-slc-cache", "2D TLC behind an SLC-mode write cache (DAh/A2h prefix), "
               "folded by GC", "tlc", {**TLC_T, "read_slc": (30, 40), "program_slc": (150, 250)},
               choices={"planes_per_die": (2,), "slc_cache": (4, 6),
                        "slc_prefix": (0xDA, 0xA2)}, op=(0.15, 0.3)),
        Family("wired-or-2lun", "MLC, 2 LUNs per chip on one wired-OR R/B#, parallel load",
               "mlc", MLC_T, workloads=RND,
               drive={"dies_per_chip": 2, "wired_or": True}, choices={"planes_per_die": (2,)}),
        Family("wired-or-4lun", "MLC, 4 LUNs per chip on one wired-OR R/B#, parallel load",
               "mlc", MLC_T, workloads=RND,
               drive={"dies_per_chip": 4, "wired_or": True}, choices={"planes_per_die": (2,)}),
        Family("mlc-hostpaced-cache-50r", "MLC, host-paced cache programs (R/B# shows tCBSY "
               "8-30 µs) and 50 % reads (tR 20-60 µs)", "mlc",
               {**MLC_T, "read_lower": (20, 40), "read_upper": (35, 60), "cache_busy": (8, 30)},
               workloads=HALF, drive={"cache_program": True, "cache_regime": "host-paced"},
               choices={"planes_per_die": (2,)}),
        Family("slc-seq-cache", "SLC, back-to-back sequential cache programs, one probed die",
               "slc", {**SLC_T, "cache_busy": (3, 20)}, workloads=SEQ,
               drive={"cache_program": True}, choices={"planes_per_die": (2,)}, probe="one"),
        Family("mlc-erase-suspend", "MLC, a third of the erases suspended for reads (2-3 "
               "pieces)", "mlc", MLC_T, workloads=HALF,
               drive={"erase_suspend": 0.33}, choices={"planes_per_die": (2,)}),
        Family("mlc-read-retry", "MLC, read retry on 5-30 % of the reads, program suspend",
               "mlc", MLC_T, workloads=HALF, drive={"program_suspend": 0.2},
               choices={"planes_per_die": (2,), "read_retry": (0.05, 0.15, 0.3)}),
        Family("tlc-plane-reads-4p", "2D TLC, 4 planes, multi-plane programs, independent "
               "plane reads", "tlc", TLC_T, workloads=HALF,
               drive={"planes_per_die": 4, "multi_plane": True, "plane_reads": True},
               op=(0.15, 0.3)),
    ]
    return {x.name: x for x in f}


FAMILIES = _families()


# Drawing a drive ------------------------------------------------------------------------------


def _rng(family, seed, salt=0):
    code = sum((i + 1) * ord(c) for i, c in enumerate(family))
    return np.random.default_rng([code, seed, salt])


def _scaled(rng, timing):
    """Each nominal range moved by its own factor (±15 %) and widened or narrowed (±20 %)."""
    out = {}
    for key, (lo, hi) in timing.items():
        mid = math.sqrt(lo * hi) * math.exp(rng.normal(0, 0.08))
        half = math.sqrt(hi / lo) ** math.exp(rng.normal(0, 0.15))
        out[key] = (round(mid / half, 1), round(mid * half, 1))
    return out


def _blocks_per_plane(fields, op, spare_needed):
    """Fewest blocks per plane that leave ``spare_needed`` spare erase units per die."""
    planes = fields["planes_per_die"]
    mp = planes if fields.get("multi_plane") else 1
    for bpp in range(8, 4096, 4):
        units = planes * bpp // mp
        logical_units = math.ceil(units / (1 + op))
        if units - fields.get("slc_cache", 0) - logical_units >= spare_needed:
            return bpp
    raise ValueError("no block count fits")


def draw_drive(family, seed, *, quick=False):
    """Draw one drive of ``family`` (a name) with ``seed``.

    Returns
    -------
    drive : rbscope.refssd.Drive
    info : dict
        What the harness keeps about the draw (never handed to the classifier).
    """
    fam = FAMILIES[family]
    rng = _rng(family, seed)
    fields = dict(fam.drive)
    for key, values in fam.choices.items():
        fields[key] = values[int(rng.integers(len(values)))]
    fields.setdefault("planes_per_die", 2)
    if fields.get("multi_plane") and fields["planes_per_die"] == 1:
        fields["multi_plane"] = False
    bits = refssd.CELL_BITS[fam.cell]
    fields["channels"] = int(rng.choice((1, 2)))
    fields.setdefault("dies_per_chip", int(rng.choice((1, 2))))
    if fields["channels"] * fields["dies_per_chip"] > 8:
        fields["channels"] = max(1, 8 // fields["dies_per_chip"])
    fields["page_size"] = int(rng.choice((4096, 8192)))
    lines = int(rng.choice((16, 24)))
    fields["pages_per_block"] = lines * bits
    op = float(rng.uniform(*fam.op))
    gc_free = int(rng.integers(2, 4))
    streams = int(rng.integers(1, 3))
    fields.setdefault("gc", str(rng.choice(("greedy", "cost-benefit"))))
    fields["gc_free_units"] = gc_free
    fields["open_streams"] = streams
    fields["over_provisioning"] = op
    fields["blocks_per_plane"] = max(
        _blocks_per_plane(fields, op, gc_free + streams + 3),
        int(rng.integers(12, 24)) if not quick else 12)
    fields["write_buffer"] = int(rng.choice((0, 0, 64 * 1024)))
    fields["bus_mb_s"] = float(rng.choice((100.0, 200.0, 400.0)))
    fields["timing"] = _scaled(rng, fam.timing)
    fields["timing_shape"] = str(rng.choice(("normal", "lognormal", "heavy-tail"),
                                            p=(0.3, 0.4, 0.3)))
    fields["die_spread"] = round(float(rng.uniform(0, 0.08)), 3)
    fields["wear_drift"] = round(float(rng.uniform(0, 0.15)), 3)
    drive = refssd.Drive(name=f"{family}#{seed}", cell=fam.cell, description=fam.description,
                         power_on=True, **fields)
    workload = fam.workloads[int(rng.integers(len(fam.workloads)))]
    info = {"family": family, "seed": seed, "workload": workload,
            "fields": {k: v for k, v in fields.items() if k != "timing"},
            "timing": fields["timing"]}
    return drive, info


def volume_of(drive, quick=False):
    """Host bytes a job writes: a quarter of the logical space, 1 to 8 MiB (quick: 1 MiB)."""
    if quick:
        return min(1 << 20, drive.logical_bytes // 8)
    return int(min(8 << 20, max(1 << 20, drive.logical_bytes // 4)))


# What the user knows -------------------------------------------------------------------------


def _nice_up(us):
    """Round a maximum up as datasheets state it (2 significant figures, then 5s)."""
    if us <= 0:
        return 0
    step = 10 ** max(0, math.floor(math.log10(us)) - 1)
    if us / step > 50:
        step *= 5
    return int(math.ceil(us / step) * step)


def _tail_keys(drive):
    """The timing keys of each kind whose upper tail a datasheet maximum covers."""
    levels = {1: ("slc",), 2: ("lower", "upper"), 3: ("lower", "middle", "upper"),
              4: ("lower", "middle", "upper", "top")}[refssd.CELL_BITS[drive.cell]]
    program = [f"program_{x}" for x in levels]
    if drive.program_scheme == "two-pass":
        program = ["program_foggy", "program_fine"]
    return {"read": [f"read_{x}" for x in levels], "program": program, "erase": ["erase"]}


def datasheet_maxima(run, rng):
    """tR, tPROG and tBERS maxima (µs) a datasheet would state: the drive's true upper tail
    times 1.0–1.6, rounded up as datasheets do; never below what the drive drew.

    The true upper tail of a kind is the longest draw of the run, or, where the run drew few
    or none (no erase in a short sequential run), the longest of 2000 draws from the drive's
    own distributions with two standard deviations of its die spread. The classifier sees only
    the rounded maxima.
    """
    drive = run.drive
    drawn = run.stats["drawn_max_ns"]
    spread = math.exp(2 * drive.die_spread)
    sample = np.random.default_rng(run.seed + 4242)
    out = {}
    for kind, keys in _tail_keys(drive).items():
        tail = max(int(refssd.drive.draw(sample, drive.timing[k], 2000,
                                         drive.timing_shape).max()) for k in keys) * spread
        tail = max(tail, drawn.get(kind, 0))
        out[kind] = _nice_up(tail / 1000 * float(rng.uniform(1.0, 1.6)))
    return out


def geometry_toml(drive, family, *, maxima=None):
    """The geometry file a user would write (L0), with the datasheet maxima (L1)."""
    fam = FAMILIES[family] if isinstance(family, str) else family
    g = [f'name = "{drive.name} (user)"', "[geometry]",
         f"channels = {drive.channels}", f"chips_per_channel = {drive.chips_per_channel}",
         f"dies_per_chip = {drive.dies_per_chip}", f"planes_per_die = {drive.planes_per_die}",
         f"page_size = {drive.page_size}",
         f'program_model = "{"multi-plane" if drive.multi_plane else "single-plane"}"']
    if "pages_per_block" in fam.knows:
        g.append(f"pages_per_block = {drive.pages_per_block}")
    if "cell" in fam.knows:
        g.append(f'cell = "{drive.cell}"')
    if "program_scheme" in fam.knows:
        g.append(f'program_scheme = "{drive.program_scheme}"')
    if maxima:
        g.append("[timing]")
        g.extend(f"{k} = {v}" for k, v in maxima.items())
    return "\n".join(g) + "\n"


def user_geometry(drive, family, *, maxima=None):
    """Parse :func:`geometry_toml`; keys this rbscope does not know yet (``cell``,
    ``program_scheme`` before the WA model has them) are dropped and named.

    Returns ``(geometry, dropped_keys)``.
    """
    text = geometry_toml(drive, family, maxima=maxima)
    dropped = []
    while True:
        try:
            return parse_geometry(text, "zoo geometry"), dropped
        except GeometryError as exc:
            for key in ("cell", "program_scheme"):
                if f"{key} = " in text and key in str(exc) and key not in dropped:
                    text = "\n".join(x for x in text.splitlines()
                                     if not x.startswith(f"{key} = ")) + "\n"
                    dropped.append(key)
                    break
            else:
                raise


def build_request(level, source, geometry, logical, *, trained=None):
    """The :class:`AnalysisRequest` of one knowledge level (what ``rbscope analyze`` gets)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if level != "L2":
        trained = None
    return AnalysisRequest(source=str(source), geometry=geometry, logical=logical,
                           options=SourceOptions(), classifier="auto", trained=trained)


# One job ----------------------------------------------------------------------------------------


def _result_fields(analysis):
    r = analysis.result
    conf = r.wa_confidence
    und = getattr(r, "undetermined", None)
    if und is None:
        und = getattr(analysis, "undetermined", False)
    alts = getattr(r, "alternatives", None)
    if alts is None:
        alts = getattr(analysis, "alternatives", None)
    return {"wa": r.wa.value, "lo": r.wa.lo, "hi": r.wa.hi,
            "conf_lo": None if conf is None else conf.lo,
            "conf_hi": None if conf is None else conf.hi,
            "classifier": r.classifier, "undetermined": bool(und),
            "alternatives": _plain(alts) if alts else [],
            "knowledge_level": getattr(r, "knowledge_level", None)
            or getattr(analysis, "knowledge_level", None),
            "warnings": [str(w) for w in r.warnings][:8],
            "reasons": [str(t) for t in getattr(r, "decide", ())][:8]}


def _plain(x):
    """JSON-safe copy of alternatives (objects with to_dict, tuples, numbers)."""
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    return str(x)


def prepare(family, seed, *, quick=False):
    """Draw, simulate and measure one job; return everything the levels need."""
    drive, info = draw_drive(family, seed, quick=quick)
    fam = FAMILIES[family]
    wl = refssd.micro(info["workload"], drive.logical_bytes, volume_of(drive, quick),
                      seed=seed)
    run = refssd.simulate(drive, wl, seed=seed, precondition=fam.precondition)
    dies = [0] if fam.probe == "one" else None
    m = refssd.to_measurement(run, preset=DEFAULT_PRESET, dies=dies, max_pulses=50_000_000)
    rng = _rng(family, seed, salt=1)
    maxima = datasheet_maxima(run, rng)
    return drive, info, run, m, maxima


def run_job(job):
    """Run one (family, seed) at the levels asked; return one record per level."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    family, seed, quick = job["family"], job["seed"], job.get("quick", False)
    levels = job.get("levels", LEVELS)
    drive, info, run, m, maxima = prepare(family, seed, quick=quick)
    truth = run.truth.wa_true
    base = {"family": family, "seed": seed, "workload": info["workload"],
            "wa_true": truth, "drive": info["fields"], "maxima_us": maxima,
            "drawn_max_us": {k: v / 1000 for k, v in run.stats["drawn_max_ns"].items()},
            "pulses": run.stats["pulses"], "host_bytes": run.logical_bytes,
            "quick": quick}
    logical = from_bytes(run.logical_bytes)
    records = []
    with tempfile.TemporaryDirectory(prefix="rbscope-zoo-") as tmp:
        src = Path(tmp) / "measurement.json"
        m.save(src)
        trained = None
        for level in levels:
            t1 = time.perf_counter()
            rec = dict(base, level=level)
            try:
                geometry, dropped = user_geometry(drive, family,
                                                  maxima=maxima if level != "L0" else None)
                rec["geometry_dropped"] = dropped
                if level == "L2" and trained is None:
                    trained = train(from_refssd(run, 0), source=f"zoo {family}#{seed} ch0")
                req = build_request(level, src, geometry, logical, trained=trained)
                a = analyse(req)
                rec.update(_result_fields(a))
                rec["error"] = (rec["wa"] - truth) / truth
                lo, hi = ((rec["conf_lo"], rec["conf_hi"]) if rec["conf_lo"] is not None
                          else (rec["lo"], rec["hi"]))
                rec["covered"] = bool(lo <= truth <= hi)
            except Exception as exc:  # a failed analysis is a result of the benchmark
                rec["failed"] = f"{type(exc).__name__}: {exc}"[:300]
            rec["seconds"] = round(time.perf_counter() - t1, 3)
            records.append(rec)
    records[0]["job_seconds"] = round(time.perf_counter() - t0, 3)
    records[0]["cpu_seconds"] = round(time.process_time() - c0, 3)
    return records


# The 320-row accuracy table at L0 and L1 --------------------------------------------------------


def measure_at(run, level):
    """WA of a reference-SSD run at knowledge level ``level`` (``L0`` or ``L1``), for
    ``benchmarks/accuracy.py --measure zoo:measure_l0`` (or ``zoo:measure_l1``).

    The user knows the drive's array, ``pages_per_block`` and ``cell`` (the preset drives'
    datasheets say them); at L1 also the datasheet maxima (:func:`datasheet_maxima`, the factor
    drawn from the run's seed). Not the bundled windows, not the drive's ranges.
    """
    fam = Family("accuracy", "a preset drive of benchmarks/accuracy.py", run.drive.cell, {})
    m = refssd.to_measurement(run, preset=DEFAULT_PRESET, max_pulses=50_000_000)
    maxima = datasheet_maxima(run, np.random.default_rng([run.seed, 2026]))
    geometry, dropped = user_geometry(run.drive, fam, maxima=maxima if level == "L1" else None)
    with tempfile.TemporaryDirectory(prefix="rbscope-zoo-") as tmp:
        src = Path(tmp) / "measurement.json"
        m.save(src)
        a = analyse(build_request(level, src, geometry, from_bytes(run.logical_bytes)))
    out = _result_fields(a)
    out["geometry_dropped"] = dropped
    return out


def measure_levels(run):
    """L0 as the row's value and L1 as a comparison column, on one simulation of the run.

    ``benchmarks/accuracy.py --measure zoo:measure_levels`` regenerates the 320-row table at both
    levels at the cost of one. The column carries its 95 % interval (``lo``/``hi``) and whether
    the analysis flagged the value undetermined.
    """
    out = measure_at(run, "L0")
    l1 = measure_at(run, "L1")
    out["columns"] = {
        "L1": {"wa": l1["wa"], "lo": l1["conf_lo"] if l1["conf_lo"] is not None else l1["lo"],
               "hi": l1["conf_hi"] if l1["conf_hi"] is not None else l1["hi"],
               "undetermined": l1["undetermined"]},
    }
    return out


def measure_l0(run):
    """:func:`measure_at` L0."""
    return measure_at(run, "L0")


def measure_l1(run):
    """:func:`measure_at` L1."""
    return measure_at(run, "L1")


# Jobs, results, resume -------------------------------------------------------------------------


def key_of(rec):
    return (rec["family"], rec["workload"], int(rec["seed"]), rec["level"])


def load_results(path):
    """Records of a JSONL results file (a truncated last line is ignored)."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def pending_jobs(families, seeds, levels, done, *, quick=False):
    """Jobs still to run: (family, seed) whose every level is not in ``done`` (a set of
    :func:`key_of` keys). The workload is the drive's own draw."""
    jobs = []
    for fam in families:
        for seed in seeds:
            wl = draw_drive(fam, seed, quick=quick)[1]["workload"]
            todo = tuple(lv for lv in levels if (fam, wl, seed, lv) not in done)
            if todo:
                jobs.append({"family": fam, "seed": seed, "levels": todo, "quick": quick})
    return jobs


def run_all(jobs, out, *, scheduler=None, workers=2, local=False, progress=True):
    """Run ``jobs`` and append their records to ``out`` as they finish.

    ``local`` runs them in this process, one after the other (tests); otherwise on Dask.
    """
    out = Path(out)
    n = 0
    with out.open("a") as f:
        def write(records):
            nonlocal n
            for rec in records:
                f.write(json.dumps(rec) + "\n")
            f.flush()
            n += 1
            if progress:
                r = records[0]
                print(f"[{n}/{len(jobs)}] {r['family']}#{r['seed']} {r['workload']} "
                      f"{' '.join(_short(x) for x in records)}", file=sys.stderr)

        if local or not jobs:
            for job in jobs:
                write(run_job(job))
            return n
        # Dask: a LocalCluster of `workers` processes, or the scheduler given.
        # Dask only here: --local and --summary run without it (it is in the dev extra).
        from dask.distributed import Client, LocalCluster, as_completed
        cluster = None
        if scheduler:
            client = Client(scheduler)
        else:
            # On loopback, on free ports (the dashboard's too: another cluster may hold 8787).
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", scheduler_port=0,
                                   dashboard_address="127.0.0.1:0")
            client = Client(cluster)
        try:
            client.upload_file(__file__)  # the workers import this module by name
            import zoo as module  # this file, as the workers know it
            futures = client.map(module.run_job, jobs, pure=False)
            for fut in as_completed(futures):
                write(fut.result())
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return n


def _short(rec):
    if "failed" in rec:
        return f"{rec['level']}:FAIL"
    return f"{rec['level']}:{rec['error']:+.1%}{'' if rec['covered'] else '!'}"


# Summary ---------------------------------------------------------------------------------------


def summarise(records, *, publish_only=False):
    """Rows per (family, level): runs, failed, worst / p50 / p90 / p99 |error|, coverage,
    undetermined."""
    groups = {}
    for r in records:
        if publish_only and int(r["seed"]) < PUBLISH_SEED:
            continue
        groups.setdefault((r["family"], r["level"]), []).append(r)
    rows = []
    for (fam, level), rs in sorted(groups.items(), key=lambda kv: (
            list(FAMILIES).index(kv[0][0]) if kv[0][0] in FAMILIES else 99, kv[0][1])):
        ok = [r for r in rs if "failed" not in r]
        err = np.array([abs(r["error"]) for r in ok]) if ok else np.zeros(0)
        und = sum(bool(r.get("undetermined")) for r in ok)
        decided = np.array([abs(r["error"]) for r in ok if not r.get("undetermined")])
        rows.append({
            "family": fam, "level": level, "runs": len(rs), "failed": len(rs) - len(ok),
            "worst": float(err.max()) if len(err) else None,
            "p50": float(np.percentile(err, 50)) if len(err) else None,
            "p90": float(np.percentile(err, 90)) if len(err) else None,
            "p99": float(np.percentile(err, 99)) if len(err) else None,
            "coverage": sum(r["covered"] for r in ok) / len(ok) if ok else None,
            "undetermined": und,
            "decided_under_1pct": (int((decided < 0.01).sum()), len(decided)),
        })
    return rows


def markdown(rows):
    def pct(x):
        return "–" if x is None else f"{100 * x:.1f} %"

    lines = ["| family | level | runs | failed | worst | p50 | p90 | p99 | coverage 95 % | "
             "undetermined | decided < 1 % |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ok, n = r["decided_under_1pct"]
        lines.append(f"| {r['family']} | {r['level']} | {r['runs']} | {r['failed']} | "
                     f"{pct(r['worst'])} | {pct(r['p50'])} | {pct(r['p90'])} | "
                     f"{pct(r['p99'])} | {pct(r['coverage'])} | {r['undetermined']} | "
                     f"{ok}/{n} |")
    return "\n".join(lines) + "\n"


def totals(records, *, publish_only=False):
    """Per level over all families: runs, p50 |error|, share < 1 %, coverage."""
    out = {}
    for level in LEVELS:
        rs = [r for r in records if r["level"] == level and "failed" not in r
              and (not publish_only or int(r["seed"]) >= PUBLISH_SEED)]
        if not rs:
            continue
        err = np.array([abs(r["error"]) for r in rs])
        out[level] = {"runs": len(rs), "p50": float(np.median(err)),
                      "under_1pct": float((err < 0.01).mean()),
                      "coverage": float(np.mean([r["covered"] for r in rs]))}
    return out


# Command line ----------------------------------------------------------------------------------


def _seeds(text):
    if ":" in text:
        a, b = text.split(":", 1)
        return list(range(int(a), int(b)))
    return [int(s) for s in text.split(",") if s]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="all",
                    help=f"comma-separated, or all ({', '.join(FAMILIES)})")
    ap.add_argument("--seeds", default="1000:1022",
                    help="a:b (a to b-1) or a comma list; < 1000 tuning, >= 1000 publishing")
    ap.add_argument("--levels", default=",".join(LEVELS))
    ap.add_argument("--out", default="zoo.jsonl", help="JSONL results (appended; resumes)")
    ap.add_argument("--markdown", help="write the per-family table here")
    ap.add_argument("--json", help="write the summary rows here")
    ap.add_argument("--scheduler", help="Dask scheduler address (default: a LocalCluster)")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--local", action="store_true", help="run in this process (no Dask)")
    ap.add_argument("--quick", action="store_true", help="tiny drives and volumes (tests)")
    ap.add_argument("--publish", action="store_true",
                    help="refuse tuning seeds; summarise only seeds >= 1000")
    ap.add_argument("--summary", metavar="JSONL", help="only summarise this results file")
    args = ap.parse_args(argv)
    if args.summary:
        records = load_results(args.summary)
    else:
        fams = list(FAMILIES) if args.families == "all" else args.families.split(",")
        bad = [f for f in fams if f not in FAMILIES]
        if bad:
            ap.error(f"unknown famil{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)} "
                     f"(known: {', '.join(FAMILIES)})")
        levels = tuple(args.levels.split(","))
        if any(lv not in LEVELS for lv in levels):
            ap.error(f"--levels takes {', '.join(LEVELS)}")
        seeds = _seeds(args.seeds)
        if args.publish and min(seeds) < PUBLISH_SEED:
            ap.error(f"--publish takes seeds >= {PUBLISH_SEED} only (below are for tuning)")
        done = {key_of(r) for r in load_results(args.out)}
        jobs = pending_jobs(fams, seeds, levels, done, quick=args.quick)
        print(f"{len(jobs)} jobs to run ({len(done)} results already in {args.out})",
              file=sys.stderr)
        t0 = time.time()
        run_all(jobs, args.out, scheduler=args.scheduler, workers=args.workers,
                local=args.local)
        print(f"done in {time.time() - t0:.0f} s", file=sys.stderr)
        records = [r for r in load_results(args.out) if r["family"] in fams
                   and int(r["seed"]) in set(seeds)]
    rows = summarise(records, publish_only=args.publish)
    table = markdown(rows)
    print(table)
    print(json.dumps(totals(records, publish_only=args.publish), indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "totals": totals(
            records, publish_only=args.publish)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())

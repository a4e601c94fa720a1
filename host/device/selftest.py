"""``rbscope selftest``: check the rig against its own emulated NAND dies before probing a drive.

On a device built with the NAND emulator in loopback (sniffer channel ``i`` watches emulated die
``i``), the self-test

1. configures the emulator (busy times in ticks, jitter on the programs) and the sniffer (the
   same prescaler, one class window per kind of busy pulse) over the link;
2. runs a fixed mix on the on-chip traffic generator: an erase pass (so that a previous run
   leaves no trace), single-plane programs with reads, two-plane programs and erases (when the
   dies have planes), and a pass on part of the dies only;
3. waits for each run in *device* time: the generator's busy register, then the sniffer's
   quiescence flag, with a deadline computed from the run's worst-case duration in ticks and
   the device's own timestamps (never a wall-clock guess);
4. reads the sniffer's counts and the dies' ground truth (READ_TRUTH) before and after, and
   checks every class count of every die against the ground truth and against what the
   programme must produce.

The result is a table per die (or JSON) and the exit code of the README's convention.
"""

import time
from dataclasses import dataclass, field, replace

from rbscope.gateware.link.protocol import Access, register_map
from rbscope.gateware.nand_emu import boot
from rbscope.gateware.nand_emu.layouts import config_layout, traffic_const, traffic_layout
from rbscope.gateware.nand_emu.link import EmuLink, emulator_extension
from rbscope.gateware.nand_emu.params import (
    EmuCounter,
    EmuParams,
    TrafficConfig,
    standard_builds,
)
from rbscope.gateware.rb_sniffer import Counter

from .emulator import read_truth

__all__ = [
    "SelftestError", "Check", "SelftestResult", "CLASSES", "emulator_candidates",
    "identify_emulator", "selftest_programme", "run_selftest",
]

#: The sniffer classes the self-test configures, in window order, with the emulator's busy time
#: each one catches.
CLASSES = ("dbsy", "cbsy", "read", "program", "erase")

#: The emulated dies' busy times (ticks), their programs' jitter and the class windows (ticks,
#: [lo, hi)) that separate them: an emulator build's power-up configuration
#: (:mod:`rbscope.gateware.nand_emu.boot`), written again before the self-test runs.
BUSY_TICKS = boot.BUSY_TICKS
PROG_JITTER = boot.PROG_JITTER
WINDOWS = dict(zip(CLASSES, boot.WINDOWS.values(), strict=True))

#: Traffic generator WE# phase and post-confirm wait (cycles).
PHASE_CYCLES = 2
WB_WAIT = 24


class SelftestError(Exception):
    """The self-test cannot run on this device (not an emulator build, unknown geometry, …)."""


def emulator_candidates(dies):
    """The emulator builds the self-test knows, for ``dies`` emulated dies (board builds and
    ``rbscope sim --emulator`` use the default or the lean die, the test suite a small one; a
    build with another geometry is named on the command line, ``--geometry``)."""
    return standard_builds(dies)


def identify_emulator(info, geometry=None):
    """Return the :class:`EmuParams` of the device whose INFO is ``info``.

    The configuration and traffic layouts' sizes in INFO must match; ``geometry`` (a dict of
    ``EmuParams`` fields) names a build that is not among :func:`emulator_candidates`.
    """
    link = EmuLink.from_info(info)
    if link is None:
        raise SelftestError(
            "this device is not an emulator build (INFO reports no emulated dies); build the "
            "gateware with the NAND emulator (make bitstream … EMULATOR=…) or run "
            "`rbscope sim --emulator`")
    if geometry:
        try:
            candidates = [EmuParams(dies=link.dies, **geometry)]
        except (TypeError, ValueError) as exc:
            raise SelftestError(f"--geometry: {exc}") from None
    else:
        candidates = emulator_candidates(link.dies)
    for emu in candidates:
        if (config_layout(emu).size == link.cfg_bits
                and traffic_layout(emu).size == link.traffic_bits):
            return emu
    raise SelftestError(
        f"the device's emulator ({link.dies} dies, {link.cfg_bits} configuration bits, "
        f"{link.traffic_bits} traffic bits) matches no known geometry; name it with "
        "--geometry page_bytes=…,pages_per_block=…,blocks_per_plane=…,planes=…")


def selftest_configs(emu, sniffer_params):
    """Return ``(EmuConfig, SnifferConfig)`` of the self-test for these builds."""
    if sniffer_params.classes < len(CLASSES):
        raise SelftestError(f"the self-test needs {len(CLASSES)} classes; this sniffer has "
                            f"{sniffer_params.classes}")
    if sniffer_params.channels != emu.dies:
        raise SelftestError(f"a loopback build has one sniffer channel per die; this one has "
                            f"{sniffer_params.channels} channels for {emu.dies} dies")
    # The power-up configuration of an emulator build, with the self-test's own windows (the
    # same, unless a test changes them).
    config = replace(boot.sniffer_config(sniffer_params),
                     windows=tuple(WINDOWS[c] for c in CLASSES))
    return boot.emu_config(emu), config


def selftest_programme(emu):
    """The traffic generator runs of the self-test: a list of ``(name, TrafficConfig)``."""
    everyone = (1 << emu.dies) - 1
    pages = min(8, emu.pages_per_block)
    runs = []
    planes = emu.planes
    mp_first = 2 * planes  # two plane-aligned groups after the two single-plane blocks
    # Erase everything the programme touches: earlier runs must not leave programmed pages.
    runs.append(("erase pass", TrafficConfig(dies=everyone, first_block=0, blocks=4 * planes,
                                             pages=0, erase=True, loops=1,
                                             phase_cycles=PHASE_CYCLES, wb_wait=WB_WAIT)))
    runs.append(("single-plane programs, reads, erases",
                 TrafficConfig(dies=everyone, first_block=0, blocks=2, pages=pages, reads=1,
                               loops=1, erase=True, phase_cycles=PHASE_CYCLES,
                               wb_wait=WB_WAIT)))
    if planes > 1:
        runs.append(("two-plane programs and erases" if planes == 2 else
                     f"{planes}-plane programs and erases",
                     TrafficConfig(dies=everyone, first_block=mp_first, blocks=2,
                                   pages=max(1, pages // 2), reads=0, loops=1, multi_plane=True,
                                   erase=True, phase_cycles=PHASE_CYCLES, wb_wait=WB_WAIT)))
    runs.append(("cache programs (15h) and erases",
                 TrafficConfig(dies=everyone, first_block=0, blocks=2, pages=min(6, pages),
                               reads=0, loops=1, erase=True, cache=True,
                               phase_cycles=PHASE_CYCLES, wb_wait=WB_WAIT)))
    part = 0b10 if emu.dies > 1 else 0b1
    if emu.dies > 2:
        part = sum(1 << d for d in range(1, emu.dies, 2))
    runs.append(("reads on part of the dies",
                 TrafficConfig(dies=part, first_block=1, blocks=1, pages=min(3, pages), reads=2,
                               loops=2, erase=True, phase_cycles=PHASE_CYCLES,
                               wb_wait=WB_WAIT)))
    return runs


def expected_counts(emu, traffic, die):
    """What run ``traffic`` must produce on ``die``: pulses per class and ground-truth deltas."""
    on = (traffic.dies >> die) & 1
    mp = emu.planes if traffic.multi_plane else 1
    groups = traffic.blocks * traffic.loops * on
    programs = groups * traffic.pages
    erases = groups * int(traffic.erase)
    reads = programs * traffic.reads
    # A cache programme confirms every page of a block but its last with 15h. Only the first
    # 15h of a block shows a bare tCBSY pulse; the others wait for the previous page's array
    # program first, and the final 10h for it and its own tPROG: widths that depend on the
    # bus timing, so only the number of pulses is predicted, not their classes.
    cache_ops = groups * max(traffic.pages - 1, 0) if traffic.cache else 0
    return {
        "pulses": {"dbsy": (programs + erases) * (mp - 1),
                   "cbsy": groups if cache_ops else 0, "read": reads,
                   "program": programs, "erase": erases},
        "truth": {EmuCounter.PROGRAM_OPS: programs, EmuCounter.PAGE_PROGRAMS: programs * mp,
                  EmuCounter.ERASE_OPS: erases, EmuCounter.BLOCK_ERASES: erases * mp,
                  EmuCounter.PAGE_READS: reads, EmuCounter.CACHE_OPS: cache_ops},
        "mp": mp,
        "steps": programs * mp + reads + erases * mp,
        "all_pulses": (programs + erases) * mp + reads,
    }


def worst_case_ticks(emu, emu_config, traffic):
    """An upper bound of a run's duration in ticks (busy times, jitter and bus cycles)."""
    # Per enabled die (they work in parallel; every enabled die does the same).
    die = (traffic.dies & -traffic.dies).bit_length() - 1 if traffic.dies else 0
    e = expected_counts(emu, traffic, die)
    dies = bin(traffic.dies).count("1")
    t = emu_config.times
    pulses = e["pulses"]
    prog = (max(t["PROG0"], t["PROG1"]) + PROG_JITTER) * (2 if traffic.cache else 1)
    busy = (pulses["program"] * prog
            + pulses["erase"] * t["BERS"] + pulses["read"] * t["R"]
            + pulses["dbsy"] * t["DBSY"])
    bus_cycles = e["steps"] * dies * (7 * 2 * traffic.phase_cycles + 4) + e["steps"] * 300
    return busy + bus_cycles // max(emu_config.prescaler, 1) + 1


@dataclass
class Check:
    """One line of the table: a die's count as the sniffer saw it, the truth, the expectation."""

    die: int
    what: str
    sniffer: object
    truth: object
    expected: object

    @property
    def ok(self):
        values = [v for v in (self.sniffer, self.truth) if v is not None]
        return all(v == self.expected for v in values)

    def to_dict(self):
        return {"die": self.die, "what": self.what, "sniffer": self.sniffer,
                "truth": self.truth, "expected": self.expected, "ok": self.ok}


@dataclass
class SelftestResult:
    """The self-test's outcome: checks, the runs, and the build it ran on."""

    checks: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    dies: int = 0
    clock_hz: int = 0
    prescaler: int = 1
    errors: list = field(default_factory=list)

    @property
    def passed(self):
        return not self.errors and bool(self.checks) and all(c.ok for c in self.checks)

    def to_dict(self):
        return {"result": "PASS" if self.passed else "FAIL", "dies": self.dies,
                "clock_hz": self.clock_hz, "prescaler": self.prescaler, "runs": self.runs,
                "errors": self.errors, "checks": [c.to_dict() for c in self.checks]}

    def table(self):
        """The human-readable PASS/FAIL table."""
        def cell(v):
            return "-" if v is None else str(v)

        lines = [f"rbscope selftest: {self.dies} emulated dies, clock {self.clock_hz} Hz, "
                 f"tick {self.prescaler} cycles"]
        for run in self.runs:
            lines.append(f"  run {run['name']}: {run['steps']} operations, "
                         f"{run['ticks']} ticks of device time")
        header = f"{'die':>3}  {'count':<34}{'sniffer':>9}{'truth':>9}{'expected':>10}  result"
        for die in range(self.dies):
            lines += ["", header]
            for c in (c for c in self.checks if c.die == die):
                lines.append(f"{die:>3}  {c.what:<34}{cell(c.sniffer):>9}{cell(c.truth):>9}"
                             f"{cell(c.expected):>10}  {'ok' if c.ok else 'FAIL'}")
        lines += [""] + [f"error: {e}" for e in self.errors]
        failed = sum(not c.ok for c in self.checks)
        lines.append("PASS" if self.passed else
                     f"FAIL ({failed} of {len(self.checks)} checks failed)")
        return "\n".join(lines)


def _write_config(dev, emu, emu_config, config):
    # The sniffer's registers (not the link's) and the emulator's configuration.
    regs = register_map(dev.params, config=config)
    regs += [r for r in emulator_extension(emu, emu_config).registers if r.field == "emu.cfg"]
    names = set(dev.register_names)
    values = {r.name: r.reset for r in regs
              if r.access == Access.RW and r.name in names and not r.field.startswith("link.")}
    dev.configure(values, event={"selftest": "configuration"})


def _run_traffic(dev, emu, emu_config, traffic, log):
    """Run one programme and wait, in device time, until it is done and the dies are quiet."""
    value = traffic_const(emu, traffic)
    for i in range((traffic_layout(emu).size + 31) // 32):
        dev.write_reg(f"TRAFFIC_CFG_{i}", (value >> 32 * i) & 0xFFFF_FFFF)
    start = dev.snapshot().timestamp
    budget = 2 * worst_case_ticks(emu, emu_config, traffic) + 4 * 1000
    dev.write_reg("TRAFFIC_CONTROL", 1)
    wall_limit = time.monotonic() + 600  # only if the device's clock itself stops
    while True:
        busy = dev.read_reg("TRAFFIC_BUSY")
        snap = dev.snapshot()
        elapsed = snap.timestamp - start
        if not busy and snap.status.quiescent:
            return dev.read_reg("TRAFFIC_STEPS"), elapsed
        if elapsed > budget:
            raise SelftestError(f"the traffic generator was still {'busy' if busy else 'idle'} "
                                f"and the dies not quiescent after {elapsed} ticks of device "
                                f"time (the programme needs at most {budget // 2})")
        if time.monotonic() > wall_limit:
            raise SelftestError("the device's time stopped advancing")
        if log:
            log(f"waiting: {elapsed} ticks")


def run_selftest(dev, *, geometry=None, log=None):
    """Run the self-test on an open :class:`rbscope.device.Device`; return a SelftestResult."""
    emu = identify_emulator(dev.info, geometry)
    emu_config, config = selftest_configs(emu, dev.params)
    result = SelftestResult(dies=emu.dies, clock_hz=dev.info.clock_hz,
                            prescaler=config.prescaler)
    _write_config(dev, emu, emu_config, config)
    k = dev.params.classes
    sums = {}  # (die, what) -> [sniffer, truth, expected]

    def add(die, what, sniffer, truth, expected):
        row = sums.setdefault((die, what), [None if sniffer is None else 0,
                                            None if truth is None else 0, 0])
        if sniffer is not None:
            row[0] += sniffer
        if truth is not None:
            row[1] += truth
        row[2] += expected

    before = (dev.snapshot(), read_truth(dev))
    steps_total = 0
    for name, traffic in selftest_programme(emu):
        steps_before = dev.read_reg("TRAFFIC_STEPS")
        steps, ticks = _run_traffic(dev, emu, emu_config, traffic, log)
        after = (dev.snapshot(), read_truth(dev))
        if after[0].epoch != before[0].epoch:
            raise SelftestError("the sniffer's counters were cleared during the self-test")
        issued = (steps - steps_before) & 0xFFFF_FFFF
        expected_steps = sum(expected_counts(emu, traffic, d)["steps"] for d in range(emu.dies))
        result.runs.append({"name": name, "steps": issued, "expected_steps": expected_steps,
                            "ticks": ticks})
        if issued != expected_steps:
            result.errors.append(f"run {name!r}: the traffic generator issued {issued} "
                                 f"operations, the programme has {expected_steps}")
        steps_total += issued
        for die in range(emu.dies):
            e = expected_counts(emu, traffic, die)
            row = [b - a for a, b in zip(before[0].counters[die].counters,
                                         after[0].counters[die].counters, strict=True)]
            truth = {c: after[1][die][c] - before[1][die][c] for c in EmuCounter}
            pulses = {name_: row[i] for i, name_ in enumerate(CLASSES)}
            mp = e["mp"]
            if traffic.cache:
                everything = sum(row[:k]) + row[k + Counter.UNCLASSIFIED] + \
                    row[k + Counter.OVERLONG]
                add(die, "cache run: R/B# pulses = operations", everything, None,
                    e["all_pulses"])
                add(die, "cache run: bare tCBSY pulses", pulses["cbsy"], None,
                    e["pulses"]["cbsy"])
                add(die, "cache run: 15h = CACHE_OPS", None, truth[EmuCounter.CACHE_OPS],
                    e["truth"][EmuCounter.CACHE_OPS])
                add(die, "cache run: PAGE_PROGRAMS", None, truth[EmuCounter.PAGE_PROGRAMS],
                    e["truth"][EmuCounter.PAGE_PROGRAMS])
                add(die, "cache run: erase pulses = ERASE_OPS", pulses["erase"],
                    truth[EmuCounter.ERASE_OPS], e["truth"][EmuCounter.ERASE_OPS])
                for counter in (Counter.PARTIAL, Counter.DROPPED):
                    add(die, f"sniffer {counter.name.lower()}", row[k + counter], None, 0)
                for counter in (EmuCounter.FAILED, EmuCounter.ILLEGAL, EmuCounter.ABORTED):
                    add(die, f"die {counter.name.lower()}", None, truth[counter], 0)
                continue
            add(die, "program pulses = PROGRAM_OPS", pulses["program"],
                truth[EmuCounter.PROGRAM_OPS], e["truth"][EmuCounter.PROGRAM_OPS])
            add(die, "program pulses x Mp = PAGE_PROGRAMS", pulses["program"] * mp,
                truth[EmuCounter.PAGE_PROGRAMS], e["truth"][EmuCounter.PAGE_PROGRAMS])
            add(die, "erase pulses = ERASE_OPS", pulses["erase"], truth[EmuCounter.ERASE_OPS],
                e["truth"][EmuCounter.ERASE_OPS])
            add(die, "erase pulses x Mp = BLOCK_ERASES", pulses["erase"] * mp,
                truth[EmuCounter.BLOCK_ERASES], e["truth"][EmuCounter.BLOCK_ERASES])
            add(die, "read pulses = PAGE_READS", pulses["read"], truth[EmuCounter.PAGE_READS],
                e["truth"][EmuCounter.PAGE_READS])
            add(die, "multi-plane tDBSY pulses", pulses["dbsy"], None, e["pulses"]["dbsy"])
            add(die, "cache busy pulses = CACHE_OPS", pulses["cbsy"], truth[EmuCounter.CACHE_OPS],
                0)
            for counter in (Counter.UNCLASSIFIED, Counter.OVERLONG, Counter.PARTIAL,
                            Counter.DROPPED):
                add(die, f"sniffer {counter.name.lower()}", row[k + counter], None, 0)
            for counter in (EmuCounter.FAILED, EmuCounter.ILLEGAL, EmuCounter.ABORTED):
                add(die, f"die {counter.name.lower()}", None, truth[counter], 0)
        before = after
    for (die, what), (sniffer, truth, expected) in sums.items():
        result.checks.append(Check(die, what, sniffer, truth, expected))
    return result

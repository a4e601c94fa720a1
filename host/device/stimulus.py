"""Synthetic R/B# pulse trains: NAND operation mixes with realistic timing spreads.

The generator produces one :class:`~rbscope.gateware.rb_sniffer.model.Train` per channel in system
clock cycles (the
reference model's convention: cycle 0 is the first cycle after reset). Timings are given in
cycles so a simulation can scale NAND time down; ``ns_to_cycles`` helps build real-time mixes.
"""

import random
import tomllib
from dataclasses import dataclass, field

from rbscope.gateware.rb_sniffer.model import Train

__all__ = [
    "Operation", "TrainSpec", "random_trains", "merge_trains", "load_mix", "NAND_MIX_SCALED",
]


@dataclass(frozen=True)
class Operation:
    """One kind of busy pulse: a name, a relative frequency and a duration range in cycles.

    ``modes`` lets one operation have several duration clusters (MLC lower/upper page programs):
    a list of ``(weight, lo, hi)``; the duration is uniform in ``[lo, hi]`` of the chosen mode.
    """

    name: str
    weight: float
    modes: tuple

    def __post_init__(self):
        if not self.weight >= 0:
            raise ValueError(f"Operation {self.name!r}: weight must be >= 0, not {self.weight!r}")
        for mode in self.modes:
            if len(mode) != 3 or not 1 <= mode[1] <= mode[2]:
                raise ValueError(f"Operation {self.name!r}: mode must be (weight, lo, hi) with "
                                 f"1 <= lo <= hi, not {mode!r}")

    def duration(self, rng):
        weights = [w for w, _, _ in self.modes]
        _, lo, hi = rng.choices(self.modes, weights)[0]
        return rng.randint(lo, hi)


#: A NAND mix in cycles for fast simulation (1 cycle stands for ~1 µs of a 34 nm MLC die):
#: reads ~25–60, MLC programs in two clusters (lower ~200–500, upper ~1300–2200), erases
#: ~2500–3500, cache-busy ~3–8.
NAND_MIX_SCALED = (
    Operation("read", 5, ((1, 25, 60),)),
    Operation("program", 3, ((1, 200, 500), (1, 1300, 2200))),
    Operation("erase", 0.2, ((1, 2500, 3500),)),
    Operation("cache_busy", 1, ((1, 3, 8),)),
)


@dataclass(frozen=True)
class TrainSpec:
    """How to generate the trains of a set of channels.

    Parameters
    ----------
    channels : int
    cycles : int
        Length of the trains; every line is ready (high) from ``cycles - tail`` on.
    mix : tuple of Operation
    gap : (int, int)
        Ready time between pulses, uniform in cycles; ``1`` gives back-to-back pulses.
    glitch_rate : float
        Probability that a gap contains a glitch (a low of ``glitch_len`` cycles).
    glitch_len : (int, int)
    low_at_reset : frozenset of int
        Channels that are already busy when reset is released.
    stuck : dict
        Channel → number of cycles it is held low from the start (a stuck-busy line).
    tail : int
        Ready time at the end, so every pulse has ended before ``cycles``.
    """

    channels: int
    cycles: int
    mix: tuple = NAND_MIX_SCALED
    gap: tuple = (1, 300)
    glitch_rate: float = 0.05
    glitch_len: tuple = (1, 2)
    low_at_reset: frozenset = frozenset()
    stuck: dict = field(default_factory=dict)
    tail: int = 100

    def __post_init__(self):
        if not isinstance(self.channels, int) or self.channels < 1:
            raise ValueError(f"channels must be a positive integer, not {self.channels!r}")
        if not isinstance(self.cycles, int) or self.cycles <= self.tail:
            raise ValueError(f"cycles must be an integer above tail ({self.tail}), "
                             f"not {self.cycles!r}")
        if not 1 <= self.gap[0] <= self.gap[1]:
            raise ValueError(f"gap must be (lo, hi) with 1 <= lo <= hi, not {self.gap!r}")


def random_trains(spec, seed):
    """Return one :class:`Train` per channel, reproducible from ``seed``."""
    rng = random.Random(seed)
    end = spec.cycles - spec.tail
    trains = []
    for ch in range(spec.channels):
        edges = []
        t = 0
        initial = 1
        if ch in spec.stuck:
            initial = 0
            t = spec.stuck[ch]
            edges.append((t, 1))
            t += rng.randint(*spec.gap)
        elif ch in spec.low_at_reset:
            initial = 0
            t = rng.randint(1, 200)
            edges.append((t, 1))
            t += rng.randint(*spec.gap)
        else:
            t = rng.randint(1, spec.gap[1])
        while True:
            op = rng.choices(spec.mix, [o.weight for o in spec.mix])[0]
            low = op.duration(rng)
            if t + low >= end:
                break
            edges += [(t, 0), (t + low, 1)]
            t += low
            gap = rng.randint(*spec.gap)
            if spec.glitch_rate and rng.random() < spec.glitch_rate:
                glitch = rng.randint(*spec.glitch_len)
                at = t + rng.randint(1, max(1, gap - glitch - 1))
                if at + glitch < t + gap and at + glitch < end:
                    edges += [(at, 0), (at + glitch, 1)]
            t += gap
        trains.append(Train(initial, edges))
    return trains


def merge_trains(trains):
    """Merge per-channel trains into pin words: ``(initial_word, [(cycle, word), …])``."""
    initial = 0
    changes = {}
    for ch, train in enumerate(trains):
        initial |= (train.initial & 1) << ch
        for cycle, level in train.edges:
            changes.setdefault(cycle, []).append((ch, level & 1))
    word = initial
    schedule = []
    for cycle in sorted(changes):
        for ch, level in changes[cycle]:
            word = (word & ~(1 << ch)) | (level << ch)
        schedule.append((cycle, word))
    return initial, schedule


def load_mix(path):
    """Read a workload description (TOML) for :func:`random_trains`.

    Format (times in cycles; with the simulated device's 1 MHz clock, µs)::

        gap = [40, 400]          # ready time between pulses, uniform
        glitch_rate = 0.1        # share of gaps with a glitch
        glitch_len = [1, 2]
        [[operation]]
        name = "program"
        weight = 3
        modes = [[1, 200, 500], [1, 1300, 2200]]   # [weight, lo, hi]: MLC lower/upper pages

    Returns a dict of :class:`TrainSpec` keyword arguments (``mix``, ``gap``, ``glitch_rate``,
    ``glitch_len``). Raises ``ValueError`` naming the file and the offending field.
    """

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None

    def pair(name, default):
        value = doc.get(name, default)
        if (not isinstance(value, list) or len(value) != 2 or
                not all(isinstance(v, int) and not isinstance(v, bool) for v in value) or
                not 1 <= value[0] <= value[1]):
            raise ValueError(f"{path}: {name} must be [lo, hi] with integers 1 <= lo <= hi, "
                             f"not {value!r}")
        return tuple(value)

    known = {"gap", "glitch_rate", "glitch_len", "operation"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(known)}")
    rate = doc.get("glitch_rate", 0.0)
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 <= rate <= 1:
        raise ValueError(f"{path}: glitch_rate must be a number from 0 to 1, not {rate!r}")
    ops = doc.get("operation")
    if not isinstance(ops, list) or not ops:
        raise ValueError(f"{path}: needs at least one [[operation]] table")
    mix = []
    for i, op in enumerate(ops):
        where = f"{path}: operation[{i}]"
        if not isinstance(op, dict) or set(op) - {"name", "weight", "modes"}:
            raise ValueError(f"{where}: allowed keys are name, weight, modes")
        name, weight, modes = op.get("name"), op.get("weight", 1), op.get("modes")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name must be a non-empty string, not {name!r}")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
            raise ValueError(f"{where}.weight must be a number >= 0, not {weight!r}")
        if not isinstance(modes, list) or not modes:
            raise ValueError(f"{where}.modes must be a list of [weight, lo, hi]")
        for j, mode in enumerate(modes):
            if (not isinstance(mode, list) or len(mode) != 3 or
                    not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                            for v in mode) or
                    not all(isinstance(v, int) for v in mode[1:]) or mode[0] < 0 or
                    not 1 <= mode[1] <= mode[2]):
                raise ValueError(f"{where}.modes[{j}] must be [weight >= 0, lo, hi] with "
                                 f"integers 1 <= lo <= hi, not {mode!r}")
        mix.append(Operation(name, weight, tuple(tuple(m) for m in modes)))
    return {"mix": tuple(mix), "gap": pair("gap", [1, 300]), "glitch_rate": float(rate),
            "glitch_len": pair("glitch_len", [1, 2])}

"""Named timing presets: class windows for a NAND family, in microseconds, turned into registers.

A preset names the five class windows of the default sniffer build (``read``, ``program``,
``erase``, ``cache_busy``, ``reset``; see :data:`CLASS_NAMES`), the tick it wants, the glitch
filter and the quiescence time. :meth:`Preset.registers` converts them to ticks for a device's
clock and parameters. Windows are half-open ``[lo, hi)``; the lowest-numbered window containing a
width wins, so where program and erase times overlap (34 nm MLC: programs 200–2200 µs, erases
~2 ms) an erase inside the program window counts as a program — the RB-Explorer error source the
WA engine accounts for. ``(0, 0)`` disables a window.

Built-in presets follow ``domain.md`` §2 (RB-Explorer SSD-v/-M/-S, Agrawal et al., hUBI,
Samsung K9, MQSim TLC). User presets come from TOML::

    [preset.mydie]
    base = "mlc34nm"            # optional: start from another preset
    description = "our 3D TLC"
    tick_us = 0.1
    glitch_us = 0.2
    idle_s = 300
    [preset.mydie.windows]      # microseconds, [lo, hi)
    program = [300, 2500]

and ``--set NAME=VALUE`` overrides either a preset field (``tick_us=0.05``,
``program=150:2300``) or a register (``WINDOW_1_LO=1500``, ``PRESCALER=48``).
"""

import math
import tomllib
from dataclasses import dataclass, field, replace

from rbscope.gateware.rb_sniffer.params import SnifferConfig

__all__ = ["CLASS_NAMES", "Preset", "PresetError", "PRESETS", "get_preset", "load_toml",
           "apply_overrides"]

#: The class windows of a preset, in register order (window k = CLASS_NAMES[k]).
CLASS_NAMES = ("read", "program", "erase", "cache_busy", "reset")
_FIELDS = ("base", "description", "tick_us", "glitch_us", "idle_s", "windows")


class PresetError(ValueError):
    """A preset, a TOML file or an override is invalid; the message names the field."""


@dataclass(frozen=True)
class Preset:
    """Timing windows of one NAND family.

    Parameters
    ----------
    name, description : str
    windows : dict of str to (float, float)
        ``{class name: (lo_us, hi_us)}``; missing classes are disabled.
    tick_us : float
        Desired tick period (the prescaler is rounded to the nearest whole clock cycle).
    glitch_us : float
        Lows shorter than this are glitches (ringing), not pulses.
    idle_s : float
        Quiescence: how long every line must stay ready (RB-Explorer waits 5 minutes).
    """

    name: str
    description: str
    windows: dict = field(default_factory=dict)
    tick_us: float = 0.1
    glitch_us: float = 0.2
    idle_s: float = 300.0

    def __post_init__(self):
        where = f"preset {self.name!r}"
        for key in self.windows:
            if key not in CLASS_NAMES:
                raise PresetError(f"{where}: windows.{key} is not a class; allowed: "
                                  f"{', '.join(CLASS_NAMES)}")
        for key, w in self.windows.items():
            if (not isinstance(w, (tuple, list)) or len(w) != 2
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                               and math.isfinite(x) and x >= 0 for x in w)):
                raise PresetError(f"{where}: windows.{key} must be [lo, hi] in µs (two numbers "
                                  f">= 0), not {w!r}")
            if w[0] > w[1]:
                raise PresetError(f"{where}: windows.{key} lo {w[0]} is above hi {w[1]}")
        for name in ("tick_us", "glitch_us", "idle_s"):
            v = getattr(self, name)
            if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                    or v < 0 or (name == "tick_us" and v == 0)):
                raise PresetError(f"{where}: {name} must be a positive number, not {v!r}")

    @property
    def class_names(self):
        return CLASS_NAMES

    def prescaler(self, params, clock_hz):
        """Clock cycles per tick for ``clock_hz`` (at least 1, fitting the prescaler)."""
        p = max(1, round(self.tick_us * 1e-6 * clock_hz))
        if p >= 1 << params.prescaler_bits:
            raise PresetError(f"preset {self.name!r}: tick_us {self.tick_us} needs a prescaler "
                              f"of {p} at {clock_hz} Hz, above the device's "
                              f"{(1 << params.prescaler_bits) - 1}")
        return p

    def registers(self, params, clock_hz, *, prescaler=None):
        """Return ``{register name: value}`` for a device with ``params`` and ``clock_hz``."""
        if len(CLASS_NAMES) > params.classes and any(
                self.windows.get(n, (0, 0))[1] > 0 for n in CLASS_NAMES[params.classes:]):
            used = [n for n in CLASS_NAMES[params.classes:] if self.windows.get(n, (0, 0))[1]]
            raise PresetError(f"preset {self.name!r} sets windows {', '.join(used)} but the "
                              f"device has only {params.classes} classes")
        p = self.prescaler(params, clock_hz) if prescaler is None else prescaler
        tick_s = p / clock_hz

        def ticks(us, what, limit):
            t = round(us * 1e-6 / tick_s)
            if t > limit:
                raise PresetError(f"preset {self.name!r}: {what} = {us} µs is {t} ticks of "
                                  f"{tick_s * 1e6:g} µs, above the device's limit of {limit}; "
                                  f"choose a longer tick_us")
            return t

        regs = {"PRESCALER": p}
        glitch_max = (1 << params.glitch_bits) - 1
        regs["GLITCH_TICKS"] = min(max(1, ticks(self.glitch_us, "glitch_us", 1 << 62)),
                                   glitch_max)
        idle = ticks(self.idle_s * 1e6, "idle_s", (1 << params.timestamp_bits) - 1)
        regs["IDLE_TICKS_LO"] = idle & 0xFFFFFFFF
        regs["IDLE_TICKS_HI"] = idle >> 32
        for k in range(params.classes):
            name = CLASS_NAMES[k] if k < len(CLASS_NAMES) else f"spare{k}"
            lo, hi = self.windows.get(name, (0, 0))
            regs[f"WINDOW_{k}_LO"] = ticks(lo, f"windows.{name}[0]", params.max_width - 1)
            regs[f"WINDOW_{k}_HI"] = ticks(hi, f"windows.{name}[1]", params.max_width - 1)
        return regs

    def config(self, params, clock_hz, *, prescaler=None, enable=-1):
        """Return the :class:`SnifferConfig` of :meth:`registers` (for the model)."""
        r = self.registers(params, clock_hz, prescaler=prescaler)
        return SnifferConfig(
            prescaler=r["PRESCALER"], glitch_ticks=r["GLITCH_TICKS"],
            windows=tuple((r[f"WINDOW_{k}_LO"], r[f"WINDOW_{k}_HI"])
                          for k in range(params.classes)),
            idle_ticks=r["IDLE_TICKS_LO"] | r["IDLE_TICKS_HI"] << 32, enable=enable,
        ).validate(params)

    def to_dict(self):
        return {"name": self.name, "description": self.description, "tick_us": self.tick_us,
                "glitch_us": self.glitch_us, "idle_s": self.idle_s,
                "windows": {k: list(v) for k, v in self.windows.items()}}


def _p(name, description, read, program, erase, cache_busy=(0.5, 0.0), **kw):
    windows = {"read": read, "program": program, "erase": erase}
    if cache_busy[1] == 0:
        cache_busy = (cache_busy[0], read[0])  # below the read window
    windows["cache_busy"] = cache_busy
    return Preset(name, description, windows, **kw)


#: Built-in presets (domain.md §2). Windows in µs.
PRESETS = {p.name: p for p in (
    _p("mlc34nm", "RB-Explorer SSD-v: Intel MD332 34 nm MLC (tR <= 50 µs, tPROG 200–2200 µs "
       "measured, tBERS 2 ms)", read=(5, 120), program=(150, 2300), erase=(2300, 10000)),
    _p("micron25nm", "RB-Explorer SSD-M: Micron 25 nm MLC, Crucial m4 (tR 75 µs, tPROG "
       "200–2200 µs, tBERS 3.8 ms)", read=(20, 150), program=(150, 2300),
       erase=(2300, 10000)),
    _p("slc34nm", "RB-Explorer SSD-S: 34 nm SLC (tR 25 µs, tPROG 200–500 µs, tBERS 2 ms)",
       read=(10, 80), program=(150, 700), erase=(1000, 5000)),
    _p("agrawal_slc", "Agrawal et al. SLC (tR 25 µs, tPROG 200 µs, tBERS 1.5 ms)",
       read=(10, 80), program=(120, 500), erase=(800, 4000)),
    _p("hubi_mlc", "hUBI paper, Huawei MLC (tR 50 µs, tPROG 800 µs, tBERS 1.5 ms)",
       read=(20, 150), program=(300, 1200), erase=(1200, 4000)),
    _p("samsung_k9", "Samsung K9 (Kuo thesis; tR 20 µs, tPROG 200 µs, tBERS 1.5 ms)",
       read=(8, 60), program=(100, 500), erase=(800, 4000)),
    _p("tlc_mqsim", "Modern TLC, MQSim defaults (tR 75 µs, tPROG 750 µs, tBERS 3.8 ms)",
       read=(30, 200), program=(300, 2500), erase=(2500, 10000)),
)}


def get_preset(name, extra=None):
    """Return the preset ``name`` from ``extra`` (user presets) or the built-ins."""
    table = {**PRESETS, **(extra or {})}
    try:
        return table[name]
    except KeyError:
        raise PresetError(f"no preset named {name!r}; presets: {', '.join(sorted(table))}"
                          ) from None


def _from_table(name, table, known):
    where = f"preset.{name}"
    if not isinstance(table, dict):
        raise PresetError(f"{where} must be a table, not {type(table).__name__}")
    for key in table:
        if key not in _FIELDS:
            raise PresetError(f"{where}.{key} is not a preset field; allowed: "
                              f"{', '.join(_FIELDS)}")
    base = table.get("base")
    if base is not None:
        if base not in known:
            raise PresetError(f"{where}.base = {base!r} is not a preset; allowed: "
                              f"{', '.join(sorted(known))}")
        start = known[base]
    else:
        start = Preset(name, "", {})
    windows = dict(start.windows)
    w = table.get("windows", {})
    if not isinstance(w, dict):
        raise PresetError(f"{where}.windows must be a table of class = [lo, hi]")
    for key, value in w.items():
        if key not in CLASS_NAMES:
            raise PresetError(f"{where}.windows.{key} is not a class; allowed: "
                              f"{', '.join(CLASS_NAMES)}")
        windows[key] = tuple(value) if isinstance(value, list) else value
    kw = {k: table[k] for k in ("tick_us", "glitch_us", "idle_s") if k in table}
    desc = table.get("description", start.description)
    if not isinstance(desc, str):
        raise PresetError(f"{where}.description must be a string")
    try:
        return replace(start, name=name, description=desc, windows=windows, **kw)
    except PresetError as exc:
        raise PresetError(f"{where}: {str(exc).split(': ', 1)[-1]}") from None


def load_toml(path):
    """Return ``{name: Preset}`` from the ``[preset.NAME]`` tables of a TOML file."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{path}: {exc}") from None
    except OSError as exc:
        raise PresetError(f"cannot read {path}: {exc}") from None
    top = set(doc) - {"preset"}
    if top:
        raise PresetError(f"{path}: unknown top-level key {sorted(top)[0]!r}; presets go in "
                          f"[preset.NAME] tables")
    presets = doc.get("preset", {})
    if not isinstance(presets, dict):
        raise PresetError(f"{path}: 'preset' must be a table of [preset.NAME] tables")
    out = {}
    for name, table in presets.items():
        try:
            out[name] = _from_table(name, table, {**PRESETS, **out})
        except PresetError as exc:
            raise PresetError(f"{path}: {exc}") from None
    return out


def apply_overrides(preset, sets):
    """Apply ``NAME=VALUE`` strings; return ``(preset, {register: value})``.

    Upper-case names are registers (integer values, any base); ``tick_us``, ``glitch_us`` and
    ``idle_s`` take numbers; class names take ``lo:hi`` in µs.
    """
    regs = {}
    changes = {}
    windows = dict(preset.windows)
    for item in sets:
        if "=" not in item:
            raise PresetError(f"--set {item!r}: expected NAME=VALUE")
        name, value = (s.strip() for s in item.split("=", 1))
        if name.isupper():
            try:
                regs[name] = int(value, 0)
            except ValueError:
                raise PresetError(f"--set {name}: register values are integers, not "
                                  f"{value!r}") from None
        elif name in ("tick_us", "glitch_us", "idle_s"):
            try:
                changes[name] = float(value)
            except ValueError:
                raise PresetError(f"--set {name}: expected a number, not {value!r}") from None
        elif name in CLASS_NAMES:
            try:
                lo, hi = (float(x) for x in value.split(":"))
            except ValueError:
                raise PresetError(f"--set {name}: expected LO:HI in µs, not {value!r}") from None
            windows[name] = (lo, hi)
        else:
            raise PresetError(f"--set {name}: not a preset field or register; allowed: "
                              f"tick_us, glitch_us, idle_s, {', '.join(CLASS_NAMES)}, or a "
                              f"register name in upper case")
    return replace(preset, windows=windows, **changes), regs


def identify(params, clock_hz, registers):
    """Return the built-in preset whose windows the device's ``registers`` hold, or ``None``.

    A capture records every register but not the names of the windows; when the windows were
    set by ``rbscope configure --preset`` in another session, this recovers which preset (and so
    which window is the program window) they came from.
    """
    keys = [f"WINDOW_{k}_{edge}" for k in range(params.classes) for edge in ("LO", "HI")]
    if not all(k in registers for k in keys):
        return None
    prescaler = max(registers.get("PRESCALER", 1), 1)
    for preset in PRESETS.values():
        try:
            regs = preset.registers(params, clock_hz, prescaler=prescaler)
        except PresetError:
            continue
        if all(regs[k] == registers[k] for k in keys):
            return preset
    return None

"""Timing presets: named class windows in microseconds, for a device and for a recording.

One model, :class:`Preset`, serves every use: the built-in NAND families (:data:`PRESETS`),
``[preset.NAME]`` tables and ``[classifier]`` tables of TOML files (what ``rbscope calibrate``
writes, and what geometry files carry). ``rbscope configure`` turns a preset into registers for
a device's clock (:meth:`Preset.registers`); ``rbscope analyze`` into the configuration of the
reference model at a recording's tick (:meth:`Preset.to_config`). Both use the one conversion
:func:`us_to_ticks` and the one list of class names :data:`CLASS_NAMES`.

Windows are half-open ``[lo, hi)`` in priority order: window ``k`` of the sniffer is the preset's
``k``-th, and the lowest-numbered window containing a width wins, so where program and erase
times overlap (34 nm MLC: programs 200–2200 µs, erases ~2 ms) an erase inside the program window
counts as a program — the RB-Explorer error source the WA engine accounts for.

Built-in presets are the windows of the parts catalogue (:data:`rbscope.nand.parts.PARTS`:
RB-Explorer SSD-v/-I, -M, -S, Agrawal et al., hUBI, Samsung K9, MQSim TLC), each named after
its part; the bundled geometries carry the same windows. User presets come from TOML::

    [preset.mydie]
    base = "mlc34nm"            # optional: start from another preset
    description = "our 3D TLC"
    tick_us = 0.1
    glitch_us = 0.2
    idle_s = 300
    [preset.mydie.windows]      # microseconds, [lo, hi), in priority order
    program = [300, 2500]

or from a ``[classifier]`` table (``glitch_us`` and ``windows``), and ``--set NAME=VALUE``
overrides either a preset field (``tick_us=0.05``, ``program=150:2300``) or a register
(``WINDOW_1_LO=1500``, ``PRESCALER=48``).
"""

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from rbscope.gateware.link.protocol import config_from_registers, register_values
from rbscope.gateware.nand_emu import boot
from rbscope.gateware.rb_sniffer.params import SnifferConfig
from rbscope.nand.ops import WINDOW_CLASSES
from rbscope.nand.parts import PARTS
from rbscope.nand.timebase import us_to_ticks as _us_to_ticks

__all__ = ["CLASS_NAMES", "Preset", "PresetError", "PRESETS", "SIM_PRESET", "DEFAULT_PRESET",
           "get_preset",
           "load_toml", "parse_toml", "resolve_preset", "apply_overrides", "identify",
           "emulator_boot_preset", "format_preset", "us_to_ticks"]

#: Every name a class window may have: :data:`rbscope.nand.ops.WINDOW_CLASSES`.
CLASS_NAMES = WINDOW_CLASSES
_FIELDS = ("base", "description", "tick_us", "glitch_us", "idle_s", "windows")


class PresetError(ValueError):
    """A preset, a TOML file or an override is invalid; the message names the field."""


def us_to_ticks(us, tick_seconds, *, what="time", nonzero=False):
    """:func:`rbscope.nand.timebase.us_to_ticks`, raising :class:`PresetError`."""
    return _us_to_ticks(us, tick_seconds, what=what, nonzero=nonzero, error=PresetError)


def _number(where, name, v, positive=False):
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1e15
            or (positive and v == 0)):
        raise PresetError(f"{where}: {name} must be a {'positive' if positive else '>= 0'} "
                          f"number (at most 1e15), not {v!r}")
    return v


@dataclass(frozen=True)
class Preset:
    """Class windows of one NAND family, in microseconds, and the timing around them.

    The one preset model: built-in presets, ``[preset.NAME]`` and ``[classifier]`` TOML tables
    (what ``rbscope calibrate`` writes and geometry files carry) all become a :class:`Preset`;
    ``configure`` turns it into registers (:meth:`registers`), ``analyze`` into the
    configuration of the model at a recording's tick (:meth:`to_config`).

    Parameters
    ----------
    windows : tuple of (str, float, float)
        ``(class name, lo_us, hi_us)`` half-open windows in priority order (window ``k`` of the
        sniffer is the ``k``-th; the first match wins). Names come from :data:`CLASS_NAMES`. A
        ``{name: (lo, hi)}`` dict is accepted (in its order).
    glitch_us : float
        Lows shorter than this are glitches (ringing), not pulses.
    tick_us : float
        Desired tick period on a device (the prescaler is rounded to whole clock cycles).
    idle_s : float
        Quiescence on a device: how long every line must stay ready (RB-Explorer: 5 minutes).
    name, description : str
    """

    windows: tuple = ()
    glitch_us: float = 0.2
    tick_us: float = 0.1
    idle_s: float = 300.0
    name: str = ""
    description: str = ""

    def __post_init__(self):
        where = f"preset {self.name!r}" if self.name else "preset"
        windows = self.windows
        if isinstance(windows, dict):
            windows = tuple((k, *v) if isinstance(v, (tuple, list)) else (k, v)
                            for k, v in windows.items())
        out = []
        for w in windows:
            if not isinstance(w, (tuple, list)) or not w or not isinstance(w[0], str):
                raise PresetError(f"{where}: a window is (name, lo, hi), not {w!r}")
            key = w[0]
            if key not in CLASS_NAMES:
                raise PresetError(f"{where}: windows.{key} is not a class; allowed: "
                                  f"{', '.join(CLASS_NAMES)}")
            if (len(w) != 3 or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1e15
                    for x in w[1:])):
                raise PresetError(f"{where}: windows.{key} must be [lo, hi] in µs (two numbers "
                                  f"from 0 to 1e15), not {list(w[1:])!r}")
            if not w[1] < w[2]:
                raise PresetError(f"{where}: windows.{key} lo {w[1]} is not below hi {w[2]}")
            out.append((key, float(w[1]), float(w[2])))
        names = [w[0] for w in out]
        if len(set(names)) != len(names):
            raise PresetError(f"{where}: window names must be unique, not {names!r}")
        object.__setattr__(self, "windows", tuple(out))
        _number(where, "tick_us", self.tick_us, positive=True)
        _number(where, "glitch_us", self.glitch_us)
        _number(where, "idle_s", self.idle_s)

    @property
    def names(self):
        """The window names, in window order."""
        return tuple(w[0] for w in self.windows)

    def window(self, name):
        """Return ``(lo_us, hi_us)`` of the window ``name`` (``KeyError`` if there is none)."""
        for key, lo, hi in self.windows:
            if key == name:
                return lo, hi
        raise KeyError(name)

    def prescaler(self, params, clock_hz):
        """Clock cycles per tick for ``clock_hz`` (at least 1, fitting the prescaler)."""
        p = max(1, us_to_ticks(self.tick_us, 1 / clock_hz, what="tick_us"))
        if p >= 1 << params.prescaler_bits:
            raise PresetError(f"preset {self.name!r}: tick_us {self.tick_us} needs a prescaler "
                              f"of {p} at {clock_hz} Hz, above the device's "
                              f"{(1 << params.prescaler_bits) - 1}")
        return p

    def to_config(self, params, tick_seconds, *, prescaler=1, idle_ticks=None, enable=-1,
                  strict=False):
        """Return ``(SnifferConfig, class_names, notes)`` for ``params`` at ``tick_seconds``.

        A window edge ``x`` µs becomes :func:`us_to_ticks` ticks. Without ``strict`` (a
        recording) an upper edge beyond the width counter becomes ``2**width_bits - 1`` (every
        classifiable width), a glitch filter beyond its register is clamped, and ``notes``
        says so; with ``strict`` (a device) each of these raises :class:`PresetError`.
        ``idle_ticks`` defaults to ``idle_s`` of ticks.
        """
        where = f"preset {self.name!r}" if self.name else "the preset"
        if len(self.windows) > params.classes:
            raise PresetError(f"{where} sets {len(self.windows)} windows "
                              f"({', '.join(self.names)}) but the sniffer has only "
                              f"{params.classes} classes")
        pmax = (1 << params.prescaler_bits) - 1
        if isinstance(prescaler, bool) or not isinstance(prescaler, int) or \
                not 1 <= prescaler <= pmax:
            raise PresetError(f"a tick of {prescaler!r} clock cycles does not fit the "
                              f"sniffer's prescaler (1 … {pmax} cycles)")
        notes = []
        tick_us = tick_seconds * 1e6
        windows = []
        for name, lo, hi in self.windows:
            tlo = us_to_ticks(lo, tick_seconds, what=f"windows.{name}[0]")
            thi = us_to_ticks(hi, tick_seconds, what=f"windows.{name}[1]")
            if thi > params.max_width:
                if strict:
                    raise PresetError(f"{where}: windows.{name}[1] = {hi:g} µs is {thi} ticks of "
                                      f"{tick_us:g} µs, above the device's limit of "
                                      f"{params.max_width}; choose a longer tick_us")
                if tlo < params.max_width:
                    notes.append(f"window {name}: upper edge {hi:g} µs is beyond the width "
                                 f"counter ({params.max_width} ticks); clamped")
                thi = params.max_width
                tlo = min(tlo, params.max_width)
            if tlo == thi:
                notes.append(f"window {name} [{lo:g}, {hi:g}) µs is empty at a {tick_us:g} µs "
                             f"tick")
            windows.append((tlo, thi))
        glitch = us_to_ticks(self.glitch_us, tick_seconds, what="glitch_us")
        gmax = (1 << params.glitch_bits) - 1
        if glitch > gmax:
            if strict:
                raise PresetError(f"{where}: glitch_us = {self.glitch_us:g} µs is {glitch} ticks "
                                  f"of {tick_us:g} µs, above the device's limit of {gmax}")
            notes.append(f"glitch filter {self.glitch_us:g} µs is {glitch} ticks; clamped to "
                         f"{gmax}")
            glitch = gmax
        if idle_ticks is None:
            idle_ticks = us_to_ticks(self.idle_s * 1e6, tick_seconds, what="idle_s")
        imax = (1 << params.timestamp_bits) - 1
        if idle_ticks > imax:
            if strict:
                raise PresetError(f"{where}: idle_s = {self.idle_s:g} s is {idle_ticks} ticks, "
                                  f"above the device's limit of {imax}")
            idle_ticks = imax
        try:
            config = SnifferConfig(prescaler=prescaler, glitch_ticks=glitch,
                                   windows=tuple(windows), idle_ticks=idle_ticks,
                                   enable=enable).validate(params)
        except ValueError as exc:
            raise PresetError(f"{where}: {exc}") from None
        return config, self.names, notes

    def config(self, params, clock_hz, *, prescaler=None, enable=-1):
        """Return the device :class:`SnifferConfig` at ``clock_hz`` (raises if it does not
        fit the device)."""
        p = self.prescaler(params, clock_hz) if prescaler is None else prescaler
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise PresetError(f"the prescaler must be a positive integer, not {p!r}")
        return self.to_config(params, p / clock_hz, prescaler=p, enable=enable, strict=True)[0]

    def registers(self, params, clock_hz, *, prescaler=None):
        """Return ``{register name: value}`` for a device with ``params`` and ``clock_hz``."""
        return register_values(params, self.config(params, clock_hz, prescaler=prescaler))

    def to_dict(self):
        return {"name": self.name, "description": self.description, "tick_us": self.tick_us,
                "glitch_us": self.glitch_us, "idle_s": self.idle_s,
                "windows": {k: [lo, hi] for k, lo, hi in self.windows}}


#: Built-in presets: the class windows of every part of the catalogue that has them
#: (:data:`rbscope.nand.parts.PARTS`), named after the part. Windows in µs.
PRESETS = {p.name: Preset(p.windows, glitch_us=p.glitch_us, name=p.name,
                          description=p.description)
           for p in PARTS.values() if p.windows}

#: The simulated device's default windows (``rbscope sim``: its stimulus mix of cache busy,
#: reads, MLC lower and upper pages and erases, 1 µs ticks; ``rbscope sim --emulator`` boots as a
#: board's emulator build, :func:`emulator_boot_preset`). Not a part's preset, but a capture that
#: holds them is named by :func:`identify` like one.
SIM_PRESET = Preset(
    (("cache", 3.0, 12.0), ("read", 12.0, 120.0), ("program", 120.0, 2400.0),
     ("erase", 2400.0, 5000.0)),
    glitch_us=3.0, name="sim", description="the simulated device's default windows "
                                           "(rbscope sim)")

#: Windows used by ``analyze`` when neither a geometry nor a preset gives any: a generic MLC die.
DEFAULT_PRESET = Preset(
    (("cache", 1.5, 12.0), ("read", 12.0, 150.0), ("program", 150.0, 2300.0),
     ("erase", 2300.0, 20000.0)),
    glitch_us=0.2, name="generic_mlc", description="a generic MLC die (analysis default)")


def get_preset(name, extra=None):
    """Return the preset ``name`` from ``extra`` (user presets) or the built-ins."""
    table = {**PRESETS, **(extra or {})}
    try:
        return table[name]
    except KeyError:
        raise PresetError(f"no preset named {name!r}; presets: {', '.join(sorted(table))}"
                          ) from None


def _windows_table(where, w):
    if not isinstance(w, dict):
        raise PresetError(f"{where}.windows must be a table of class = [lo, hi]")
    out = {}
    for key, value in w.items():
        if key not in CLASS_NAMES:
            raise PresetError(f"{where}.windows.{key} is not a class; allowed: "
                              f"{', '.join(CLASS_NAMES)}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value, value]
        if not isinstance(value, list) or len(value) != 2:
            raise PresetError(f"{where}.windows.{key} must be [lo, hi] in µs, not {value!r}")
        out[key] = tuple(value)
    return out


def from_table(name, table, known=None, *, where=None):
    """Return the :class:`Preset` of one TOML table (``[preset.NAME]`` or ``[classifier]``).

    ``known`` maps names to presets a ``base`` key may start from; ``where`` names the table in
    error messages.
    """
    where = where or f"preset.{name}"
    known = PRESETS if known is None else known
    if not isinstance(table, dict):
        raise PresetError(f"{where} must be a table, not {type(table).__name__}")
    for key in table:
        if key not in _FIELDS:
            raise PresetError(f"{where}.{key} is not a preset field; allowed: "
                              f"{', '.join(_FIELDS)}")
    base = table.get("base")
    if base is not None:
        if not isinstance(base, str) or base not in known:
            raise PresetError(f"{where}.base = {base!r} is not a preset; allowed: "
                              f"{', '.join(sorted(known))}")
        start = known[base]
    else:
        start = Preset(name=name)
    windows = dict((k, (lo, hi)) for k, lo, hi in start.windows)
    windows.update(_windows_table(where, table.get("windows", {})))
    kw = {k: table[k] for k in ("tick_us", "glitch_us", "idle_s") if k in table}
    desc = table.get("description", start.description)
    if not isinstance(desc, str):
        raise PresetError(f"{where}.description must be a string")
    try:
        return replace(start, name=name, description=desc, windows=windows, **kw)
    except PresetError as exc:
        rest = str(exc).split(": ", 1)[-1]
        sep = "." if rest.split(" ", 1)[0].split(".")[0] in _FIELDS else ": "
        raise PresetError(f"{where}{sep}{rest}") from None


def parse_toml(text, source="TOML", *, default_name="classifier"):
    """Return ``{name: Preset}`` of a TOML document: its ``[preset.NAME]`` tables and its
    ``[classifier]`` table (named ``default_name``: what ``rbscope calibrate`` writes, and what
    a geometry file carries). Every error is a :class:`PresetError` naming ``source``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{source}: invalid TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # 1000-deep arrays, 4301-digit integers
        raise PresetError(f"{source}: invalid TOML: {str(exc) or type(exc).__name__}") from None
    allowed = {"preset", "classifier"}
    if "geometry" in doc:  # a geometry file: its [classifier] is the preset
        allowed |= set(doc)
    top = sorted(set(doc) - allowed)
    if top:
        raise PresetError(f"{source}: unknown top-level key {top[0]!r}; presets go in "
                          f"[preset.NAME] or [classifier] tables")
    presets = doc.get("preset", {})
    if not isinstance(presets, dict):
        raise PresetError(f"{source}: 'preset' must be a table of [preset.NAME] tables")
    out = {}
    try:
        if "classifier" in doc:
            out[default_name] = from_table(default_name, doc["classifier"],
                                           where="classifier")
        for name, table in presets.items():
            out[name] = from_table(name, table, {**PRESETS, **out})
    except PresetError as exc:
        raise PresetError(f"{source}: {exc}") from None
    return out


def load_toml(path):
    """Return ``{name: Preset}`` from a TOML file (see :func:`parse_toml`; the ``[classifier]``
    table is named after the file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PresetError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PresetError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
    return parse_toml(text, str(path), default_name=Path(path).stem)


def resolve_preset(spec, name=None):
    """Return the preset ``spec`` names: a built-in preset, or a TOML file (its preset
    ``name``, or its only one)."""
    if spec in PRESETS and not Path(spec).exists():
        return PRESETS[spec]
    if not Path(spec).exists():
        raise PresetError(f"{spec}: neither a preset file nor a built-in preset "
                          f"({', '.join(sorted(PRESETS))})")
    user = load_toml(spec)
    if name is not None:
        return get_preset(name, user)
    if len(user) != 1:
        raise PresetError(f"{spec} holds {len(user)} presets ({', '.join(sorted(user))}); "
                          f"name one")
    return next(iter(user.values()))


def apply_overrides(preset, sets):
    """Apply ``NAME=VALUE`` strings; return ``(preset, {register: value})``.

    Upper-case names are registers (integer values, any base); ``tick_us``, ``glitch_us`` and
    ``idle_s`` take numbers; class names take ``lo:hi`` in µs (a class the preset lacks is
    appended as the next window).
    """
    regs = {}
    changes = {}
    windows = {k: (lo, hi) for k, lo, hi in preset.windows}
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


def emulator_boot_preset(params, clock_hz):
    """Return the windows an emulator build with sniffer ``params`` holds from power-up (and
    ``rbscope selftest`` writes) as a :class:`Preset` at ``clock_hz``: named ``emulator``, its
    windows in µs of that clock (:mod:`rbscope.gateware.nand_emu.boot` gives them in ticks)."""
    tick_us = boot.prescaler(params.channels) / clock_hz * 1e6
    return Preset(tuple((name, lo * tick_us, hi * tick_us)
                        for name, (lo, hi) in boot.WINDOWS.items()),
                  glitch_us=tick_us, tick_us=tick_us, name="emulator",
                  description="an emulator build's power-up windows (the self-test's)")


def identify(params, clock_hz, registers):
    """Return the built-in preset (or :data:`SIM_PRESET`, the simulated device's defaults, or
    :func:`emulator_boot_preset`, an emulator build's) whose windows the device's ``registers``
    hold, or ``None``.

    A capture records every register but not the names of the windows; when the windows were
    set by ``rbscope configure --preset`` in another session, or never set since power-up, this
    recovers which preset (and so which window is the program window) they came from.
    """
    try:
        config = config_from_registers(params, registers)
    except ValueError:
        return None
    if not any(lo < hi for lo, hi in config.windows):
        return None
    # An emulator build's power-up windows are in ticks of its own prescaler, whatever the
    # clock: compared as ticks, not through µs.
    ticks = tuple(boot.WINDOWS.values())
    if (config.prescaler == boot.prescaler(params.channels)
            and config.windows[:len(ticks)] == ticks
            and not any(lo < hi for lo, hi in config.windows[len(ticks):])):
        return emulator_boot_preset(params, clock_hz)
    for preset in (*PRESETS.values(), SIM_PRESET):
        try:
            windows = preset.config(params, clock_hz, prescaler=max(config.prescaler, 1)).windows
        except PresetError:
            continue
        if windows == config.windows:
            return preset
    return None


def format_preset(preset, comments=()):
    """Return a preset as TOML text (a ``[classifier]`` table), with leading ``# comments``;
    :func:`load_toml` (``configure --from-toml``, ``analyze --preset``) reads it back."""
    lines = [f"# {c}" if c else "#" for c in comments]
    if lines:
        lines.append("")
    lines += ["[classifier]", f"glitch_us = {preset.glitch_us:.6g}",
              f"idle_s = {preset.idle_s:.6g}  # quiescence (configure sets it)", "",
              "[classifier.windows]  # half-open [lo, hi) in microseconds, first match wins"]
    for name, lo, hi in preset.windows:
        lines.append(f"{name} = [{lo:.6g}, {hi:.6g}]")
    return "\n".join(lines) + "\n"

"""SSD geometry and classifier presets, loaded from TOML files.

A geometry file describes the drive under test (how many dies, the page size, how many pages one
program pulse writes) and may carry a classifier preset (the class windows, in microseconds) for
its NAND. The four drives of the RB-Explorer paper are bundled with the package
(``rbscope/nand/geometries/``: ``--geometry ssd-v``, ``ssd-i``, ``ssd-m``, ``ssd-s``). The
format::

    name = "SSD-v"                      # required
    description = "..."                 # optional
    part = "mlc34nm"                    # optional: the NAND part (rbscope.nand.parts.PARTS);
                                        # its planes_per_die, page_size, spare_size,
                                        # pages_per_block, cell, [timing] and [classifier] are
                                        # the defaults of the keys below

    [geometry]                          # required
    channels = 4                        # flash channels
    chips_per_channel = 1               # packages (CE#) per channel
    dies_per_chip = 1                   # dies (LUNs) per package
    planes_per_die = 2                  # required unless the part gives it
    page_size = 4096                    # data bytes per page (spare area not counted); required
                                        # unless the part gives it
    spare_size = 128                    # optional, bytes
    pages_per_block = 128               # optional
    cell = "mlc"                        # optional: slc, mlc, tlc or qlc
    program_model = "single-plane"      # or "multi-plane"; required unless mp is given
    mp = 1                              # optional: planes per program operation (default
                                        # from the program model: 1, or planes_per_die)
    cell = "tlc"                        # optional: slc | mlc | tlc | qlc (bits per cell)
    program_scheme = "page"             # optional: page | one-shot | two-pass (default page)

A program operation writes ``page_size × planes in the operation × pages per plane`` bytes,
the pages per plane being 1 for page programs (and SLC-mode programs), the bits per cell for a
one-shot program (a word line's pages in one tPROG, as 3D TLC does after 1Ah data loads) and
half of them for each of a two-pass program's pulses (foggy, then fine).

    [capacity]                          # optional, decimal gigabytes
    raw_gb = 16
    user_gb = 14.0

    [endurance]                         # optional: for TBW / drive writes per day
    pe_cycles = 10000                   # rated program/erase cycles of the NAND
    warranty_years = 3

    [timing]                            # optional, microseconds: [lo, hi], or one value: the
    read = [0.02, 50]                   # datasheet's maximum (tR, tPROG, tBERS max, as a
    program = [200, 2200]               # parameter page states them)
    erase = 2000

    [classifier]                        # optional preset; `rbscope calibrate` writes one
    glitch_us = 0.2                     # pulses shorter than this are glitches (replaces
    [classifier.windows]                # the part's windows); half-open [lo, hi) in µs, in
    read = [10, 150]                    # priority order
    program = [150, 2300]
    erase = [2300, 10000]

Every loader error is a :class:`GeometryError` naming the file and the offending key.
"""

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from rbscope import nand
from rbscope.nand.parts import CELL_BITS as PART_CELL_BITS
from rbscope.nand.parts import PartError, part

from .presets import CLASS_NAMES, Preset, PresetError, from_table

__all__ = [
    "GeometryError", "Geometry", "load_geometry", "parse_geometry", "example_geometries",
    "BUNDLED", "CELL_BITS", "PROGRAM_SCHEMES", "check_cell_scheme", "with_parameter_page",
    "WORDLINE_US", "PLACEHOLDER", "geometry_toml",
]

PROGRAM_MODELS = ("single-plane", "multi-plane")
#: Cell types and their bits per cell.
CELL_BITS = dict(PART_CELL_BITS)
#: How a word line's pages are programmed.
PROGRAM_SCHEMES = ("page", "one-shot", "two-pass")
#: Centre (µs) of a program mode below which it is a page program (SLC, a lower page), above
#: which a word line's program (one-shot, a pass of two-pass): physics, not a datasheet.
WORDLINE_US = 1000.0
#: The erases a line's programs allow beyond the blocks they fill (``programs ÷ pages per
#: block``), as a share: the structural cap on erases (the sequence classifier's
#: ``erase_slack``, and the interval's expectation of erases).
ERASE_SLACK = 0.25
#: The erases a line's programs need at least, as a share of the blocks they fill (less the two
#: blocks open at the ends): the sequence classifier's erase floor, which holds erases as slow
#: as the slowest programs up where the widths cannot tell them apart (a capture may begin with
#: blocks already erased, hence below one).
ERASE_FLOOR = 0.8


def erase_floor_of(blocks, lines, share=ERASE_FLOOR):
    """The fewest erases the classifier holds ``lines`` lines to when their programs fill
    ``blocks`` blocks: ``share`` of them, less the two blocks open at the ends of each line."""
    return max(0.0, share * blocks - 2 * lines)


def erases_implied(erase_cap, erase_slack=ERASE_SLACK):
    """The erases a line's programs imply, a block erased for each block filled: its
    structural cap on erases (``(1 + erase_slack) × blocks filled + 2``) without the slack and
    the two blocks open at the ends."""
    return (erase_cap - 2) / (1 + erase_slack)

#: How ``rbscope identify`` marks a value the drive cannot tell (channels, targets per channel,
#: the program model): a string starting so, which the loader refuses by name.
PLACEHOLDER = "EDIT ME"

#: Directory of the bundled geometries (package data of ``rbscope.nand``).
BUNDLED = Path(nand.__file__).resolve().parent / "geometries"


class GeometryError(ValueError):
    """A geometry or preset file is invalid; the message names the file and the key."""


def _where(source, key):
    return f"{source}: {key}" if source else key


def _int(source, key, value, lo=1):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= 1 << 48:
        raise GeometryError(f"{_where(source, key)} must be an integer from {lo} to 2**48, "
                            f"not {value!r}")
    return value


def _num(source, key, value, lo=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not lo <= value <= 1e15:
        raise GeometryError(f"{_where(source, key)} must be a number from {lo} to 1e15, "
                            f"not {value!r}")
    return float(value)


def _range(source, key, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = _num(source, key, value)
        return (v, v)
    if not isinstance(value, list) or len(value) != 2:
        raise GeometryError(f"{_where(source, key)} must be a number or a [lo, hi] pair, "
                            f"not {value!r}")
    lo = _num(source, f"{key}[0]", value[0])
    hi = _num(source, f"{key}[1]", value[1])
    if lo > hi:
        raise GeometryError(f"{_where(source, key)} must have lo <= hi, not {value!r}")
    return (lo, hi)


def check_cell_scheme(cell, scheme, where="geometry."):
    """Validate ``cell`` (None or a key of :data:`CELL_BITS`) and ``scheme`` (None or one of
    :data:`PROGRAM_SCHEMES`); raise :class:`GeometryError` naming the key and the value."""
    if cell is not None and cell not in CELL_BITS:
        raise GeometryError(f"{where}cell must be one of {', '.join(CELL_BITS)}, not {cell!r}")
    if scheme is not None and scheme not in PROGRAM_SCHEMES:
        raise GeometryError(f"{where}program_scheme must be one of "
                            f"{', '.join(PROGRAM_SCHEMES)}, not {scheme!r}")
    if scheme in ("one-shot", "two-pass"):
        if cell is None:
            raise GeometryError(f"{where}cell is missing: program_scheme = {scheme!r} programs "
                                f"a word line's pages (bits per cell) together; say which "
                                f"cell (mlc, tlc or qlc)")
        if cell == "slc":
            raise GeometryError(f"{where}program_scheme = {scheme!r} does not fit cell = "
                                f"'slc' (one page per word line): use \"page\"")


def _table(source, obj, key, required=False):
    value = obj.get(key)
    if value is None:
        if required:
            raise GeometryError(f"{_where(source, f'[{key}]')} table is missing")
        return {}
    if not isinstance(value, dict):
        raise GeometryError(f"{_where(source, key)} must be a table, not {value!r}")
    return value


def _no_unknown(source, table, name, allowed):
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise GeometryError(f"{_where(source, name)} has unknown key(s) {', '.join(unknown)} "
                            f"(allowed: {', '.join(allowed)})")


@dataclass(frozen=True)
class Geometry:
    """The layout of an SSD's flash array, as the WA engine needs it.

    Parameters
    ----------
    name : str
    channels, chips_per_channel, dies_per_chip, planes_per_die : int
    page_size : int
        Data bytes per page.
    program_model : str
        ``"single-plane"`` or ``"multi-plane"``.
    mp : int or None
        Planes one program operation writes; ``None`` means "from the program model".
    cell : str or None
        ``"slc"``, ``"mlc"``, ``"tlc"``, ``"qlc"``, or None when not stated.
    program_scheme : str or None
        ``"page"``, ``"one-shot"``, ``"two-pass"``, or None when not stated (read as
        ``"page"``, :attr:`scheme`; the WA engine then says the scheme is undetermined where it
        matters).
    spare_size, pages_per_block : int or None
    cell : str or None
        ``"slc"``, ``"mlc"``, ``"tlc"`` or ``"qlc"``.
    part : str or None
        The NAND part of :data:`rbscope.nand.parts.PARTS` the file named.
    raw_bytes, user_bytes : float or None
    pe_cycles : int or None
        Rated program/erase cycles per block.
    warranty_years : float or None
    timing : dict of str to (float, float)
        Operation time ranges in µs.
    classifier : Preset or None
    description : str
    """

    name: str
    channels: int
    chips_per_channel: int
    dies_per_chip: int
    planes_per_die: int
    page_size: int
    program_model: str = "single-plane"
    mp: int | None = None
    spare_size: int | None = None
    pages_per_block: int | None = None
    cell: str | None = None
    part: str | None = None
    raw_bytes: float | None = None
    user_bytes: float | None = None
    pe_cycles: int | None = None
    warranty_years: float | None = None
    timing: dict = field(default_factory=dict)
    classifier: Preset | None = None
    description: str = ""
    cell: str | None = None
    program_scheme: str | None = None

    def __post_init__(self):
        for key in ("channels", "chips_per_channel", "dies_per_chip", "planes_per_die",
                    "page_size"):
            _int("", key, getattr(self, key))
        if self.program_model not in PROGRAM_MODELS:
            raise GeometryError(f"program_model must be one of {', '.join(PROGRAM_MODELS)}, "
                                f"not {self.program_model!r}")
        if self.mp is not None:
            _int("", "mp", self.mp)
        check_cell_scheme(self.cell, self.program_scheme, where="")
        if self.raw_bytes and self.user_bytes and self.user_bytes > self.raw_bytes:
            raise GeometryError(f"capacity: user_gb ({self.user_bytes / 1e9:g}) is larger than "
                                f"raw_gb ({self.raw_bytes / 1e9:g}): the user capacity is what "
                                f"remains of the raw flash after over-provisioning")

    @property
    def scheme(self):
        """The program scheme: the stated one, else ``"page"``."""
        return self.program_scheme or "page"

    @property
    def bits(self):
        """Bits per cell, or None when the cell is not stated."""
        return CELL_BITS.get(self.cell) if self.cell else None

    @property
    def pages_per_plane_op(self):
        """Pages one program pulse writes in each plane of its operation (1 for page programs,
        bits per cell for one-shot, bits / 2 for each pass of a two-pass program)."""
        return pages_per_plane_op(self.scheme, self.bits)

    @property
    def bytes_per_program(self):
        """Bytes one (full-width) program operation writes: page size × Mp × pages per plane."""
        return self.page_size * self.pages_per_pulse * self.pages_per_plane_op

    @property
    def dies(self):
        """Total number of dies: channels × chips per channel × dies per chip."""
        return self.channels * self.chips_per_channel * self.dies_per_chip

    @property
    def pages_per_pulse(self):
        """Mp: pages per program pulse (explicit, else 1 or planes per die by program model)."""
        if self.mp is not None:
            return self.mp
        return 1 if self.program_model == "single-plane" else self.planes_per_die

    @property
    def over_provisioning(self):
        """(raw - user) / user, or None when the capacities are unknown."""
        if not self.raw_bytes or not self.user_bytes:
            return None
        return (self.raw_bytes - self.user_bytes) / self.user_bytes

    def die_locations(self):
        """Every ``(channel, chip, die)`` of the drive, in order."""
        return [(c, p, d) for c in range(self.channels) for p in range(self.chips_per_channel)
                for d in range(self.dies_per_chip)]

    def check_location(self, loc):
        """Raise :class:`GeometryError` if ``loc`` is not a die of this drive."""
        c, p, d = loc
        if not (0 <= c < self.channels and 0 <= p < self.chips_per_channel
                and 0 <= d < self.dies_per_chip):
            raise GeometryError(f"die ({c}, {p}, {d}) is not in {self.name} "
                                f"({self.channels}×{self.chips_per_channel}×"
                                f"{self.dies_per_chip})")

    def to_dict(self):
        return {
            "name": self.name, "channels": self.channels,
            "chips_per_channel": self.chips_per_channel, "dies_per_chip": self.dies_per_chip,
            "planes_per_die": self.planes_per_die, "page_size": self.page_size,
            "program_model": self.program_model, "mp": self.pages_per_pulse, "dies": self.dies,
            "cell": self.cell, "program_scheme": self.program_scheme,
            "pages_per_plane_op": self.pages_per_plane_op,
            "pages_per_block": self.pages_per_block,
        }


def with_parameter_page(geometry, page):
    """``geometry`` completed by a parameter page (:class:`rbscope.nand.ident.ParameterPage`,
    read at power-up): tPROG, tBERS and tR maxima as ``[timing]`` maxima, and the pages per
    block and the cell where the geometry does not state them. What the geometry states wins."""
    timing = dict(geometry.timing)
    for key, value in (("program", page.t_prog_us), ("erase", page.t_bers_us),
                       ("read", page.t_r_us)):
        if value and key not in timing:
            timing[key] = (float(value), float(value))
    cell = geometry.cell
    if cell is None:
        cell = {1: "slc", 2: "mlc", 3: "tlc", 4: "qlc"}.get(page.bits_per_cell)
    return replace(geometry, timing=timing, cell=cell,
                   pages_per_block=geometry.pages_per_block or page.pages_per_block or None)


def pages_per_plane_op(scheme, bits):
    """Pages a program pulse of ``scheme`` writes per plane on ``bits``-bit cells."""
    if scheme == "one-shot":
        return bits
    if scheme == "two-pass":
        return bits / 2
    return 1


def _parse_classifier(source, table, name):
    try:
        return from_table(name, table, where="classifier")
    except PresetError as exc:
        raise GeometryError(f"{source}: {exc}") from None


def _load_toml(text_or_path, source):
    if isinstance(text_or_path, Path):
        source = source or str(text_or_path)
        try:
            text = text_or_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GeometryError(f"{source}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise GeometryError(f"{source}: not UTF-8 text (byte offset {exc.start})") from None
    else:
        text = text_or_path
    try:
        return tomllib.loads(text), source
    except tomllib.TOMLDecodeError as exc:
        raise GeometryError(f"{source or 'TOML'}: invalid TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # 1000-deep arrays, 4301-digit integers
        raise GeometryError(f"{source or 'TOML'}: invalid TOML: "
                            f"{str(exc) or type(exc).__name__}") from None


def parse_geometry(text, source=""):
    """Parse a geometry TOML document (``text``); ``source`` names it in errors."""
    doc, source = _load_toml(text, source)
    _no_unknown(source, doc, "top level",
                ("name", "description", "part", "geometry", "capacity", "endurance", "timing",
                 "classifier"))
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise GeometryError(f"{_where(source, 'name')} must be a non-empty string, not {name!r}")
    die = None
    if "part" in doc:
        try:
            die = part(doc["part"])
        except PartError as exc:
            raise GeometryError(f"{_where(source, 'part')}: {exc}") from None
    g = _table(source, doc, "geometry", required=True)
    keys = ("channels", "chips_per_channel", "dies_per_chip", "planes_per_die", "page_size",
            "spare_size", "pages_per_block", "program_model", "mp", "cell", "program_scheme")
    _no_unknown(source, g, "[geometry]", keys)
    for key in keys:
        value = g.get(key)
        if isinstance(value, str) and value.startswith(PLACEHOLDER):
            raise GeometryError(f"{_where(source, 'geometry.' + key)} is still the placeholder "
                                f"rbscope identify wrote ({value!r}): the drive cannot tell it; "
                                f"edit the file and give it")
    if die is not None:  # the part's die facts, unless the file gives them
        g = {"planes_per_die": die.planes_per_die, "page_size": die.page_size,
             "spare_size": die.spare_size, "pages_per_block": die.pages_per_block,
             "cell": die.cell, **g}
    values = {"part": die.name if die is not None else None}
    for key in keys[:5]:
        if key not in g:
            raise GeometryError(f"{_where(source, 'geometry.' + key)} is missing")
        values[key] = _int(source, f"geometry.{key}", g[key])
    for key in ("spare_size", "pages_per_block", "mp"):
        if key in g:
            values[key] = _int(source, f"geometry.{key}", g[key], lo=0 if key == "spare_size"
                               else 1)
    if "program_model" not in g and "mp" not in g:
        # Mp scales WA directly (a multi-plane drive read as single-plane halves it): no
        # default.
        raise GeometryError(f"{_where(source, 'geometry.program_model')} is missing: say "
                            f"\"single-plane\" (one page per program pulse) or \"multi-plane\" "
                            f"(planes_per_die pages per pulse), or give mp")
    model = g.get("program_model", "single-plane")
    if model not in PROGRAM_MODELS:
        raise GeometryError(f"{_where(source, 'geometry.program_model')} must be one of "
                            f"{', '.join(PROGRAM_MODELS)}, not {model!r}")
    values["program_model"] = model
    for key, allowed in (("cell", tuple(CELL_BITS)), ("program_scheme", PROGRAM_SCHEMES)):
        if key in g:
            if g[key] not in allowed:
                raise GeometryError(f"{_where(source, 'geometry.' + key)} must be one of "
                                    f"{', '.join(allowed)}, not {g[key]!r}")
            values[key] = g[key]
    try:
        check_cell_scheme(values.get("cell"), values.get("program_scheme"))
    except GeometryError as exc:
        raise GeometryError(f"{_where(source, str(exc))}") from None
    cap = _table(source, doc, "capacity")
    _no_unknown(source, cap, "[capacity]", ("raw_gb", "user_gb"))
    if "raw_gb" in cap:
        values["raw_bytes"] = _num(source, "capacity.raw_gb", cap["raw_gb"]) * 1e9
    if "user_gb" in cap:
        values["user_bytes"] = _num(source, "capacity.user_gb", cap["user_gb"]) * 1e9
    endurance = _table(source, doc, "endurance")
    _no_unknown(source, endurance, "[endurance]", ("pe_cycles", "warranty_years"))
    if "pe_cycles" in endurance:
        values["pe_cycles"] = _int(source, "endurance.pe_cycles", endurance["pe_cycles"], lo=1)
    if "warranty_years" in endurance:
        values["warranty_years"] = _num(source, "endurance.warranty_years",
                                        endurance["warranty_years"])
    timing = dict(die.timing) if die is not None else {}
    for key, value in _table(source, doc, "timing").items():
        if key not in CLASS_NAMES:
            raise GeometryError(f"{_where(source, 'timing.' + key)} is not a class; allowed: "
                                f"{', '.join(CLASS_NAMES)}")
        timing[key] = _range(source, f"timing.{key}", value)
    classifier = None
    if "classifier" in doc:
        classifier = _parse_classifier(source, _table(source, doc, "classifier"), name)
    elif die is not None and die.windows:
        classifier = Preset(die.windows, glitch_us=die.glitch_us, name=name)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise GeometryError(f"{_where(source, 'description')} must be a string")
    return Geometry(name=name, timing=timing, classifier=classifier, description=description,
                    **values)


def _toml_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def geometry_toml(geometry, header=()):
    """A geometry file (TOML) of ``geometry`` that :func:`parse_geometry` reads back to it.

    Parameters
    ----------
    geometry : Geometry
    header : sequence of str
        Comment lines put first (without ``#``).
    """
    g = geometry
    lines = [f"# {line}" if line else "#" for line in header]
    lines += [f"name = {_toml_str(g.name)}"]
    if g.description:
        lines.append(f"description = {_toml_str(g.description)}")
    lines += ["", "[geometry]"]
    def given(keys, fmt=str):
        lines.extend(f"{key} = {fmt(getattr(g, key))}" for key in keys
                     if getattr(g, key) is not None)

    given(("channels", "chips_per_channel", "dies_per_chip", "planes_per_die", "page_size",
           "spare_size", "pages_per_block"))
    lines.append(f"program_model = {_toml_str(g.program_model)}")
    given(("mp",))
    given(("cell", "program_scheme"), _toml_str)
    if g.raw_bytes or g.user_bytes:
        lines += ["", "[capacity]"]
        if g.raw_bytes:
            lines.append(f"raw_gb = {g.raw_bytes / 1e9!r}")
        if g.user_bytes:
            lines.append(f"user_gb = {g.user_bytes / 1e9!r}")
    if g.pe_cycles or g.warranty_years:
        lines += ["", "[endurance]"]
        if g.pe_cycles:
            lines.append(f"pe_cycles = {g.pe_cycles}")
        if g.warranty_years:
            lines.append(f"warranty_years = {g.warranty_years!r}")
    if g.timing:
        lines += ["", "[timing]  # µs"]
        for key, (lo, hi) in g.timing.items():
            lines.append(f"{key} = [{float(lo)!r}, {float(hi)!r}]")
    c = g.classifier
    if c is not None:
        lines += ["", "[classifier]", f"glitch_us = {float(c.glitch_us)!r}",
                  f"tick_us = {float(c.tick_us)!r}", f"idle_s = {float(c.idle_s)!r}",
                  "", "[classifier.windows]  # µs"]
        for name, lo, hi in c.windows:
            lines.append(f"{name} = [{float(lo)!r}, {float(hi)!r}]")
    return "\n".join(lines) + "\n"


def load_geometry(path):
    """Load a geometry file; ``path`` may also name a bundled geometry (``ssd-v``, ``SSD-M``…)."""
    p = Path(path)
    if not _exists(p):
        candidate = BUNDLED / f"{str(path).lower()}.toml"
        if _exists(candidate):
            p = candidate
        else:
            names = ", ".join(sorted(example_geometries())) or "none"
            shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:150]}… " \
                f"({len(str(path))} characters)"
            raise GeometryError(f"{shown}: no such file and no bundled geometry of that name "
                                f"(bundled: {names})")
    return parse_geometry(p, str(path))


def _exists(path):
    """``path.exists()``, False for a name no file can have (too long, a NUL byte)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def example_geometries():
    """Return ``{name: path}`` of the bundled geometries."""
    if not BUNDLED.is_dir():
        return {}
    return {p.stem: p for p in sorted(BUNDLED.glob("*.toml"))}

"""Turn what the drive said about its dies (Read ID, parameter page: :mod:`rbscope.nand.ident`)
into a geometry file (:mod:`rbscope.analysis.geometry`) and say which fields came from the drive
and which the user must still give.

The parameter page knows one die target: its page and spare size, pages per block (raw value),
planes (``1 << plane address bits``), LUNs per target (the geometry's ``dies_per_chip``), bits per
cell and the tPROG, tBERS and tR maxima. It cannot know how many channels the drive has, how many
targets (CE#) share a channel, nor whether the controller programs one plane or several at once:
those stay placeholders (:data:`rbscope.analysis.geometry.PLACEHOLDER`) that ``rbscope analyze``
refuses with a message saying what to give, unless the caller states them.
"""

from dataclasses import dataclass, field

from .geometry import PLACEHOLDER, PROGRAM_MODELS, GeometryError, parse_geometry

__all__ = ["IdentifyError", "DriveFields", "drive_fields", "geometry_toml"]


class IdentifyError(ValueError):
    """Nothing to identify (no parameter page), or the given values do not fit."""


@dataclass
class DriveFields:
    """The geometry fields, each with where it came from.

    Members
    -------
    values : dict
        ``{key: value}`` of the ``[geometry]`` table (placeholders as strings).
    timing : dict
        ``{class: µs}`` maxima of the ``[timing]`` table.
    origin : dict
        ``{key: text}``: where each ``[geometry]`` and ``timing.*`` value came from.
    missing : list of str
        The keys left as placeholders (the user must edit them).
    name, description : str
    warnings : list of str
        Targets whose pages disagree, reads that failed.
    """

    values: dict
    timing: dict
    origin: dict
    missing: list
    name: str
    description: str
    warnings: list = field(default_factory=list)


def _page_key(page):
    return (page.page_bytes, page.spare_bytes, page.pages_per_block, page.plane_address_bits,
            page.luns, page.bits_per_cell, page.t_prog_us, page.t_bers_us, page.t_r_us)


def drive_fields(identities, *, source="", channels=None, chips_per_channel=None,
                 program_model=None, name=None):
    """The geometry fields of the drive whose targets said ``identities``
    (:class:`rbscope.recordings.onfi_bus.TargetIdentity`, or anything with ``target``,
    ``read_id``, ``page`` and ``errors``).

    ``channels``, ``chips_per_channel`` and ``program_model`` are the user's (None: left as
    placeholders). Raises :class:`IdentifyError` when no target returned a valid parameter page.
    """
    warnings = [e for ident in identities for e in ident.errors]
    with_page = [i for i in identities if i.page is not None]
    if not with_page:
        seen = [f"target {i.target}: ID {i.read_id.manufacturer_id:02X}h "
                f"{i.read_id.device_id:02X}h ({i.read_id.manufacturer or 'unknown maker'})"
                for i in identities if i.read_id is not None]
        what = ("; Read ID seen: " + ", ".join(seen)) if seen else "; no Read ID either"
        raise IdentifyError("no target returned a valid parameter page (ECh-00h ONFI or "
                            "ECh-40h JEDEC): the geometry cannot be read from this recording"
                            + what + ("; " + "; ".join(warnings) if warnings else ""))
    first = with_page[0]
    page = first.page
    for other in with_page[1:]:
        if _page_key(other.page) != _page_key(page):
            warnings.append(f"target {other.target}'s parameter page differs from target "
                            f"{first.target}'s: the file uses target {first.target}'s")
    for key, value in (("channels", channels), ("chips_per_channel", chips_per_channel)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise IdentifyError(f"{key} must be a positive integer, not {value!r}")
    if program_model is not None and program_model not in PROGRAM_MODELS:
        raise IdentifyError(f"program_model must be one of {', '.join(PROGRAM_MODELS)}, not "
                            f"{program_model!r}")
    where = f"target {first.target}'s {page.standard} {page.version} parameter page"
    values, origin, missing = {}, {}, []

    def user(key, value, what):
        if value is None:
            values[key] = f"{PLACEHOLDER}: {what}"
            origin[key] = "NOT KNOWN: the user must give it"
            missing.append(key)
        else:
            values[key] = value
            origin[key] = "given by the user"

    user("channels", channels, "flash channels of the drive (count them on the board)")
    user("chips_per_channel", chips_per_channel,
         "targets (CE#) per channel (the parameter page describes one target)")
    values["dies_per_chip"] = page.luns
    origin["dies_per_chip"] = f"{where}, LUNs per target (byte 100)"
    values["planes_per_die"] = page.planes
    plane_byte = 113 if page.standard == "ONFI" else 104
    origin["planes_per_die"] = f"{where}, 1 << plane address bits (byte {plane_byte})"
    values["page_size"] = page.page_bytes
    origin["page_size"] = f"{where}, data bytes per page (bytes 80-83)"
    values["spare_size"] = page.spare_bytes
    origin["spare_size"] = f"{where}, spare bytes per page (bytes 84-85)"
    values["pages_per_block"] = page.pages_per_block
    origin["pages_per_block"] = f"{where}, pages per block (bytes 92-95)"
    if page.cell is not None:
        values["cell"] = page.cell
        origin["cell"] = f"{where}, bits per cell (byte 102) = {page.bits_per_cell}"
    else:
        warnings.append(f"bits per cell {page.bits_per_cell} (byte 102) is not a cell type "
                        f"rbscope knows: cell left out")
    multi = " (the die supports multi-plane operations)" if page.planes > 1 else ""
    user("program_model", program_model,
         f"\"single-plane\" or \"multi-plane\": how the controller programs{multi}")
    timing, offsets = {}, (133, 135, 137) if page.standard == "ONFI" else (153, 155, 157)
    for key, value, at in zip(("program", "erase", "read"),
                              (page.t_prog_us, page.t_bers_us, page.t_r_us), offsets,
                              strict=True):
        if value:
            timing[key] = value
            origin[f"timing.{key}"] = f"{where}, maximum (bytes {at}-{at + 1}), µs"
    ident = first.read_id
    ident_text = ""
    if ident is not None:
        ident_text = (f", ID {ident.manufacturer_id:02X}h {ident.device_id:02X}h "
                      f"({ident.manufacturer or 'unknown maker'})")
    model = " ".join(x for x in (page.manufacturer, page.model) if x)
    name = name or model or "identified drive"
    description = (f"rbscope identify{' of ' + source if source else ''}: {model or 'a die'}, "
                   f"{page.standard} {page.version} parameter page{ident_text}")
    return DriveFields(values=values, timing=timing, origin=origin, missing=missing, name=name,
                       description=description, warnings=warnings)


def _toml_value(value):
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def geometry_toml(fields):
    """The geometry file of :class:`DriveFields`, with a comment on each value's origin. A file
    without placeholders is checked by the geometry loader before it is returned."""
    lines = ["# Written by rbscope identify from the drive's own power-up traffic.",
             "# Each value says where it came from; values marked " + PLACEHOLDER
             + " must be edited", "# before rbscope analyze accepts the file.",
             f"name = {_toml_value(fields.name)}",
             f"description = {_toml_value(fields.description)}", "", "[geometry]"]
    for key, value in fields.values.items():
        lines.append(f"{key} = {_toml_value(value)}  # {fields.origin[key]}")
    if fields.timing:
        lines += ["", "[timing]  # maxima, µs"]
        for key, value in fields.timing.items():
            lines.append(f"{key} = {value}  # {fields.origin['timing.' + key]}")
    text = "\n".join(lines) + "\n"
    if not fields.missing:
        try:
            parse_geometry(text, "identified geometry")
        except GeometryError as exc:  # a value the drive gave that the loader refuses
            raise IdentifyError(str(exc)) from None
    return text

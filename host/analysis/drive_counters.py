"""The drive's own NAND-write counters, read before and after a run: what the drive says its
write amplification was, beside rbscope's.

Readings are the JSON of ``smartctl -j -x`` (``-A`` is enough for the attributes) and of
``nvme-cli`` (``nvme smart-log -o json``, ``nvme ocp smart-add-log -o json``); several readings
of one moment may be merged (give each file, or one JSON array of documents). Each counter has a
unit and a rounding, and so an interval; the drive's WA is NAND bytes over host bytes of the same
run, or, for Micron's page counters, (host + background program pages) / host program pages.

Counters and their units
------------------------
=====================================  ======  ===============  ================================
counter                                side    unit             source (JSON field)
=====================================  ======  ===============  ================================
OCP C0h Physical Media Units Written   NAND    1 byte           nvme ocp smart-add-log:
                                                                ``"Physical media units
                                                                written": {"hi", "lo"}`` (or
                                                                ``physical_media_units_written``)
ATA 249 ``NAND_Writes_1GiB`` (Intel)   NAND    1 GiB, floor     ``ata_smart_attributes.table``
ATA 243 ``NAND_Writes_32MiB`` (Intel)  NAND    32 MiB, floor    id 243, by that name only
ATA 247 ``Host_Program_Page_Count``    host    NAND pages       id 247 (Micron, Crucial)
ATA 248 ``Bckgnd_Program_Page_Cnt``    backgr. NAND pages       id 248 (Micron, Crucial)
NVMe Data Units Written                host    512 000 B, ceil  ``nvme_smart_health_information
                                                                _log.data_units_written`` /
                                                                ``data_units_written``
ATA 241 ``Total_LBAs_Written``         host    logical sector   id 241: unit by smartctl's name
ATA 241 ``Host_Writes_32MiB`` (Intel)  host    32 MiB, floor    (``Host_Writes_32MiB``,
ATA 241 ``Host_Writes_GiB``            host    1 GiB, floor     ``Host_Writes_GiB``, …)
Device Statistics Logical Sectors      host    logical sector   ``ata_device_statistics.pages[]``
Written (ATA log 04h, page 01h)                                 ``.table[]`` "Logical Sectors
                                                                Written"
=====================================  ======  ===============  ================================

Firmware caveats
----------------
* The unit of an ATA attribute is not in the attribute: smartctl's drive database names it
  (``Host_Writes_32MiB`` vs ``Total_LBAs_Written`` for the same id 241 on Intel drives of other
  firmware or with a database that does not know the model). The name in each reading decides;
  an unnamed or ``Unknown_Attribute`` id 241/249 is read in the common unit and the claim says
  it assumed so. Readings whose names differ for one id (a firmware update or a database update
  between them) are refused.
* The Micron/Crucial 247/248 counters count NAND pages; some firmware leaves 248 at zero (no
  background count): a counter that reads zero before and after says nothing, not "WA 1".
* The Device Statistics log counts host sectors only (its solid-state page holds the endurance
  percentage, not NAND writes): it is a host side, never a NAND side.
* NVMe Data Units Written is rounded up to thousands of 512-byte units; coarse counters (1 GiB)
  need runs of many GiB before their interval is narrow.
* OCP C0h is only on drives that follow the OCP Datacenter NVMe SSD specification; nvme-cli 1.x
  has no ``ocp`` plugin.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DriveCounterError", "Counter", "DriveClaim", "read_counters", "drive_wa",
           "disagrees", "load_reading"]

GiB, MiB = 1 << 30, 1 << 20
NVME_DATA_UNIT = 512_000

#: smartctl attribute names → (side, bytes per count or None for pages, rounding).
ATA_NAMES = {
    "NAND_Writes_1GiB": ("nand", GiB, "floor"),
    "NAND_Writes_GiB": ("nand", GiB, "floor"),
    "NAND_Writes_32MiB": ("nand", 32 * MiB, "floor"),
    "Host_Program_Page_Count": ("host_pages", None, "exact"),
    "Bckgnd_Program_Page_Cnt": ("background_pages", None, "exact"),
    "FTL_Program_Page_Count": ("background_pages", None, "exact"),
    "Total_LBAs_Written": ("host", "sector", "exact"),
    "Host_Writes_32MiB": ("host", 32 * MiB, "floor"),
    "Host_Writes_GiB": ("host", GiB, "floor"),
    "Lifetime_Writes_GiB": ("host", GiB, "floor"),
    "Host_Writes_MiB": ("host", MiB, "floor"),
}
#: Attribute ids read when smartctl gives no name it knows, with the unit assumed.
ATA_IDS = {
    241: ("host", "sector", "exact", "Total_LBAs_Written"),
    249: ("nand", GiB, "floor", "NAND_Writes_1GiB"),
    247: ("host_pages", None, "exact", "Host_Program_Page_Count"),
    248: ("background_pages", None, "exact", "Bckgnd_Program_Page_Cnt"),
}


class DriveCounterError(ValueError):
    """A counter reading is invalid or the readings do not fit; the message names the file and
    the field."""


@dataclass(frozen=True)
class Counter:
    """One counter of one reading.

    Members
    -------
    key : str
        ``"ocp.pmuw"``, ``"nvme.duw"``, ``"ata.<id>"``, ``"devstat.lsw"``.
    side : str
        ``"nand"`` or ``"host"`` (bytes), ``"host_pages"`` or ``"background_pages"``.
    value : int
    unit : int or None
        Bytes per count (None: NAND pages).
    rounding : str
        ``"exact"``, ``"floor"`` (a count of whole units) or ``"ceil"`` (rounded up).
    label : str
    assumed : str
        Non-empty when the unit was assumed (the reading did not name it).
    """

    key: str
    side: str
    value: int
    unit: int | None
    rounding: str
    label: str
    assumed: str = ""


@dataclass
class DriveClaim:
    """What the drive's counters say about one run.

    Members
    -------
    wa, lo, hi : float or None
        The drive's WA and the interval its counters' units allow; None when they cannot tell.
    method : str
    nand, host : tuple of (float, float) or None
        The NAND and host bytes (or pages) of the run as intervals.
    caveats, notes : list of str
    """

    wa: float | None
    lo: float | None
    hi: float | None
    method: str
    nand: tuple | None = None
    host: tuple | None = None
    caveats: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_dict(self):
        return {"wa": self.wa, "lo": self.lo, "hi": self.hi, "method": self.method,
                "nand": self.nand, "host": self.host, "caveats": self.caveats,
                "notes": self.notes}


def load_reading(source):
    """The JSON documents of a reading: a path (one document, or an array of documents), or a
    dict / list given directly. Returns ``(documents, name)``."""
    if isinstance(source, (dict, list)):
        docs, name = source, "reading"
    else:
        name = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise DriveCounterError(f"{name}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise DriveCounterError(f"{name}: not UTF-8 text (byte offset {exc.start})") \
                from None
        try:
            docs = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DriveCounterError(f"{name}: invalid JSON at line {exc.lineno} column "
                                    f"{exc.colno}: {exc.msg} (give smartctl -j or nvme-cli "
                                    f"-o json output)") from None
    docs = docs if isinstance(docs, list) else [docs]
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise DriveCounterError(f"{name}: document {i} must be a JSON object, not "
                                    f"{type(d).__name__}")
    return docs, name


def _uint(name, where, value):
    if isinstance(value, str) and value.strip().replace(",", "").isdigit():
        value = int(value.strip().replace(",", ""))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DriveCounterError(f"{name}: field '{where}' must be a non-negative integer, not "
                                f"{value!r}")
    return value


def _ocp(doc, name):
    for key in ("Physical media units written", "physical_media_units_written"):
        if key in doc:
            v = doc[key]
            if isinstance(v, dict):
                value = (_uint(name, f"{key}.hi", v.get("hi")) << 64) \
                    | _uint(name, f"{key}.lo", v.get("lo"))
            else:
                value = _uint(name, key, v)
            return Counter("ocp.pmuw", "nand", value, 1, "exact",
                           "OCP C0h Physical Media Units Written (bytes)")
    return None


def _nvme(doc, name):
    holder, where = doc.get("nvme_smart_health_information_log"), \
        "nvme_smart_health_information_log.data_units_written"
    if not isinstance(holder, dict):
        holder, where = doc, "data_units_written"
    if "data_units_written" not in holder:
        return None
    value = _uint(name, where, holder["data_units_written"])
    return Counter("nvme.duw", "host", value, NVME_DATA_UNIT, "ceil",
                   "NVMe Data Units Written (1000 × 512 B, rounded up)")


def _ata(doc, name):
    out = []
    table = doc.get("ata_smart_attributes")
    if table is None:
        return out
    table = table.get("table") if isinstance(table, dict) else None
    if not isinstance(table, list):
        raise DriveCounterError(f"{name}: field 'ata_smart_attributes.table' must be a list")
    sector = doc.get("logical_block_size", 512)
    sector = _uint(name, "logical_block_size", sector) or 512
    for i, attr in enumerate(table):
        if not isinstance(attr, dict):
            continue
        aid, aname = attr.get("id"), attr.get("name") or ""
        known = ATA_NAMES.get(aname)
        assumed = ""
        if known is None:
            if aid not in ATA_IDS or (aname and aname != "Unknown_Attribute"
                                      and aname != ATA_IDS[aid][3]):
                continue  # another vendor's meaning of this id
            side, unit, rounding, default = ATA_IDS[aid]
            assumed = (f"attribute {aid} is not named by smartctl's drive database "
                       f"({aname or 'no name'}): read as {default}")
        else:
            side, unit, rounding = known
        raw = attr.get("raw")
        value = _uint(name, f"ata_smart_attributes.table[{i}].raw.value",
                      raw.get("value") if isinstance(raw, dict) else None)
        if unit == "sector":
            unit = sector
        out.append(Counter(f"ata.{aid}", side, value, unit, rounding,
                           f"ATA attribute {aid} {aname or ATA_IDS.get(aid, ('',) * 4)[3]}",
                           assumed))
    return out


def _devstat(doc, name):
    stats = doc.get("ata_device_statistics")
    if not isinstance(stats, dict):
        return None
    sector = _uint(name, "logical_block_size", doc.get("logical_block_size", 512)) or 512
    for p, page in enumerate(stats.get("pages") or []):
        if not isinstance(page, dict):
            continue
        for i, entry in enumerate(page.get("table") or []):
            if isinstance(entry, dict) and entry.get("name") == "Logical Sectors Written":
                value = _uint(name, f"ata_device_statistics.pages[{p}].table[{i}].value",
                              entry.get("value"))
                return Counter("devstat.lsw", "host", value, sector, "exact",
                               f"Device Statistics Logical Sectors Written (× {sector} B)")
    return None


def read_counters(source):
    """``{key: Counter}`` of one reading (see :func:`load_reading` for ``source``)."""
    docs, name = load_reading(source)
    out = {}
    for doc in docs:
        found = [_ocp(doc, name), _nvme(doc, name), _devstat(doc, name), *_ata(doc, name)]
        for c in found:
            if c is None:
                continue
            if c.key in out and out[c.key] != c:
                raise DriveCounterError(f"{name}: {c.label} appears twice with different "
                                        f"values ({out[c.key].value} and {c.value})")
            out[c.key] = c
    if not out:
        raise DriveCounterError(f"{name}: no write counter found (looked for OCP C0h Physical "
                                f"media units written, NVMe data_units_written, ATA attributes "
                                f"241/243/247/248/249 and Device Statistics)")
    return out


def _delta(b, a, bname, aname):
    """(lo, hi) of the run's count, in the counter's unit (bytes, or pages)."""
    if (b.unit, b.label) != (a.unit, a.label):
        raise DriveCounterError(f"{b.key}: the readings disagree on the counter's unit ("
                                f"{bname}: {b.label}, {b.unit} B; {aname}: {a.label}, {a.unit} "
                                f"B): a firmware or drive-database change between them; take "
                                f"both readings with the same firmware and smartctl")
    if a.value < b.value:
        raise DriveCounterError(f"{aname}: {a.label} {a.value} is below the 'before' reading "
                                f"{b.value} in {bname} (a reset counter or swapped files)")
    d = a.value - b.value
    unit = a.unit or 1
    if a.rounding == "exact":
        return d * unit, d * unit
    return max(0, d - 1) * unit, (d + 1) * unit


def drive_wa(before, after):
    """The drive's :class:`DriveClaim` from two readings (``{key: Counter}`` each, or sources
    for :func:`read_counters`)."""
    bname = aname = ""
    if not isinstance(before, dict) or not all(isinstance(v, Counter) for v in before.values()):
        bname = str(before) if not isinstance(before, (dict, list)) else "before"
        before = read_counters(before)
    if not isinstance(after, dict) or not all(isinstance(v, Counter) for v in after.values()):
        aname = str(after) if not isinstance(after, (dict, list)) else "after"
        after = read_counters(after)
    bname, aname = bname or "before", aname or "after"
    common = {k for k in before if k in after}
    caveats = sorted({c.assumed for c in (*before.values(), *after.values()) if c.assumed})
    notes = []

    def pick(side):
        keys = [k for k in sorted(common) if before[k].side == side]
        order = {"ocp.pmuw": 0, "devstat.lsw": 0, "ata.249": 1, "ata.243": 2, "nvme.duw": 1,
                 "ata.241": 2}
        keys.sort(key=lambda k: order.get(k, 9))
        for k in keys:
            if before[k].value == 0 and after[k].value == 0:
                notes.append(f"{after[k].label} reads 0 before and after: this firmware does "
                             f"not count it")
                continue
            return k
        return None

    hp, bp = pick("host_pages"), pick("background_pages")
    if hp is not None:
        h = _delta(before[hp], after[hp], bname, aname)
        if bp is None:
            notes.append("Micron host program page count (247) without a background count "
                         "(248) in both readings: not a WA")
        else:
            g = _delta(before[bp], after[bp], bname, aname)
            if h[0] == 0:
                return DriveClaim(None, None, None, "Micron 247/248 page counters", caveats=
                                  caveats, notes=notes + ["the host program page count did "
                                                          "not move: no host writes counted"])
            wa = (h[0] + g[0]) / h[0]
            return DriveClaim(wa, wa, wa, "(host + background program pages) / host program "
                              "pages, Micron 247/248", nand=(h[0] + g[0], h[1] + g[1]), host=h,
                              caveats=caveats, notes=notes)
    nk, hk = pick("nand"), pick("host")
    if nk is None or hk is None:
        missing = "NAND" if nk is None else "host"
        return DriveClaim(None, None, None, "none", caveats=caveats,
                          notes=notes + [f"no {missing}-write counter in both readings: the "
                                         f"drive's WA cannot be computed"])
    n = _delta(before[nk], after[nk], bname, aname)
    h = _delta(before[hk], after[hk], bname, aname)
    method = f"{after[nk].label} / {after[hk].label}"
    if n[1] == 0 or (after[nk].value == before[nk].value and h[0] > 0):
        return DriveClaim(None, None, None, method, nand=n, host=h, caveats=caveats,
                          notes=notes + [f"{after[nk].label} did not move while the host wrote "
                                         f"{h[0]:.4g} B or more: the counter is not maintained "
                                         f"or the run was shorter than its unit"])
    if h[1] == 0:
        return DriveClaim(None, None, None, method, nand=n, host=h, caveats=caveats,
                          notes=notes + [f"{after[hk].label} did not move: no host writes"])
    mid_h = (h[0] + h[1]) / 2
    wa = ((n[0] + n[1]) / 2) / mid_h
    lo = n[0] / h[1]
    hi = n[1] / h[0] if h[0] else float("inf")
    return DriveClaim(wa, lo, hi, method, nand=n, host=h, caveats=caveats, notes=notes)


def disagrees(claim, lo, hi):
    """True when the drive's interval and rbscope's ``[lo, hi]`` do not overlap."""
    if claim is None or claim.wa is None or lo is None or hi is None:
        return False
    return claim.hi < lo or claim.lo > hi

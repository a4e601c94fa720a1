"""The geometry guess of a probe: a :class:`~rbscope.analysis.geometry.Geometry` and its TOML."""

from rbscope.analysis.geometry import Geometry, geometry_toml

from .target import ProbeError

__all__ = ["guess_geometry", "guess_toml", "stripe_units"]


#: The striping bits' units replace the units detector's when found at this confidence.
STRIPE_CONFIDENCE = 0.3


def stripe_units(stripe, page):
    """The units the striping bits address (``stripe``: the ``stripe_bits`` finding or its
    dict), where they were found at :data:`STRIPE_CONFIDENCE` or more with pages of ``page``
    bytes; else None."""
    if stripe is None:
        return None
    d = stripe if isinstance(stripe, dict) else stripe.to_dict()
    evidence = d.get("evidence") or {}
    if d.get("value") and d.get("confidence", 0) >= STRIPE_CONFIDENCE \
            and evidence.get("page") == page:
        return int(evidence.get("units_addressed") or 1)
    return None


def guess_geometry(findings, name="probed drive"):
    """The geometry the findings imply: ``parallel_units`` channels of one single-plane die
    each (without a units finding: the units the erase detector was given), pages of the
    effective page size (the program unit), and with an erase unit its pages per block (erase
    unit ÷ page).

    Where the striping bits (``stripe_bits``, at confidence :data:`STRIPE_CONFIDENCE` or more)
    address more units than the units detector found, theirs are taken: concurrent writers
    fall short of the dies where a batch waits for its slowest page type or the channels' buses
    (``docs/vssd.md``), while a pair one address bit apart needs only two units to overlap."""
    by = {f.name: f for f in findings}
    page = by.get("page_size")
    units = by.get("parallel_units")
    erase = by.get("erase_unit")
    stripe = by.get("stripe_bits")
    if page is None or page.value is None:
        raise ProbeError("no page size was found: no geometry to guess")
    n = units.value if units is not None and units.value else 1
    if (units is None or not units.value) and erase is not None:
        n = erase.evidence.get("units") or 1  # the units the erase detector was given
    n = max(n, stripe_units(stripe, page.value) or 1)
    ppb = None
    if erase is not None and erase.value and erase.value % page.value == 0:
        ppb = erase.value // page.value
    return Geometry(name=name, channels=n, chips_per_channel=1, dies_per_chip=1,
                    planes_per_die=1, page_size=page.value, program_model="single-plane",
                    pages_per_block=ppb,
                    description="guessed by rbscope probe-geometry from response times")


def guess_toml(findings, target_name, when, name="probed drive"):
    """The guess as a geometry file, each finding's value, confidence and evidence in comments."""
    g = guess_geometry(findings, name)
    header = [f"rbscope probe-geometry of {target_name}, {when}.",
              "A guess from response times: parallel units are written as channels of one "
              "single-plane die,", "and page_size is the effective page (the program unit: "
              "page x planes on a multi-plane drive).", ""]
    for f in findings:
        header.append(f"{f.name} = {f.value} (confidence {f.confidence:.2f}): {f.rule}")
        header.extend(f"  {line}" for line in f.summary)
        for key, v in f.evidence.items():
            if isinstance(v, dict) and len(v) <= 12 and not any(isinstance(x, list)
                                                                for x in v.values()):
                shown = ", ".join(f"{k}: {x:.4g}" for k, x in v.items())
                header.append(f"  {key}: {shown}")
    return geometry_toml(g, header)

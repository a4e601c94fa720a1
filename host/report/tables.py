"""The tables of a report, each also exported as CSV and JSON.

A :class:`Table` is a name, a caption, column headers and rows of plain values (numbers, strings,
``None``); the HTML shows it formatted, and its CSV and JSON exports carry the unformatted values
so that a spreadsheet or a script gets the exact numbers.
"""

import csv
import io
import json
import math
from dataclasses import dataclass, field

__all__ = ["Column", "Table", "fmt_bytes", "fmt_number"]


def fmt_bytes(n):
    """Return ``n`` bytes with a decimal unit (``1.5 GB``); ``–`` for None, ``∞`` for inf."""
    if n is None:
        return "–"
    if not math.isfinite(n):
        return "∞"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.0f} B"


def fmt_number(x, digits=4):
    """Return a number for a table cell: integers with separators, floats to ``digits``."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "∞" if x > 0 else ("−∞" if x < 0 else "–")
        if x != 0 and (abs(x) >= 1e7 or abs(x) < 1e-3):
            return f"{x:.{digits - 1}e}"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    return str(x)


@dataclass(frozen=True)
class Column:
    """A column: its key in the exports, its header, and how the HTML formats its cells.

    ``kind`` is ``"text"``, ``"number"``, ``"bytes"``, ``"percent"`` (a fraction shown in %),
    ``"wa"`` (four decimals) or ``"interval"`` (a ``(lo, hi)`` pair of WAs). A column with
    ``show=False`` is in the exports only.
    """

    key: str
    header: str
    kind: str = "number"
    show: bool = True

    def format(self, value):
        if value is None:
            return "–"
        if self.kind == "bytes":
            return fmt_bytes(value)
        if self.kind == "percent":
            return fmt_number(100 * value, 3) + " %"
        if self.kind == "wa":
            if isinstance(value, float) and not math.isfinite(value):
                return "∞"
            return f"{value:.4f}"
        if self.kind == "text":
            return str(value)
        if self.kind == "interval":
            lo, hi = value
            return f"[{Column('', '', 'wa').format(lo)}, {Column('', '', 'wa').format(hi)}]"
        return fmt_number(value)


@dataclass
class Table:
    """A report table.

    Parameters
    ----------
    name : str
        File-name stem of its exports (``summary`` gives ``summary.csv``); unique in a report.
    caption : str
    columns : list of Column
    rows : list of list
        One value per column.
    note : str
        A sentence under the table (what an interval holds, how a ranking was made, ...).
    """

    name: str
    caption: str
    columns: list
    rows: list = field(default_factory=list)
    note: str = ""

    def __post_init__(self):
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.name!r} row {i} has {len(row)} cells for "
                                 f"{len(self.columns)} columns")

    def add(self, *values):
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.name!r}: {len(values)} cells for "
                             f"{len(self.columns)} columns")
        self.rows.append(list(values))

    def visible(self):
        """The columns the HTML shows."""
        return [c for c in self.columns if c.show]

    def formatted(self):
        """The rows as display strings (shown columns only)."""
        return [[c.format(v) for c, v in zip(self.columns, row, strict=True) if c.show]
                for row in self.rows]

    def numeric(self):
        """One flag per shown column: right-align it."""
        return [c.kind not in ("text", "interval") for c in self.visible()]

    def records(self):
        """The rows as dicts keyed by column key, with non-finite floats as None."""
        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, tuple):
                return [clean(x) for x in v]
            return v
        return [{c.key: clean(v) for c, v in zip(self.columns, row, strict=True)}
                for row in self.rows]

    def to_csv(self):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([c.key for c in self.columns])
        for rec in self.records():
            w.writerow(["" if v is None else v for v in rec.values()])
        return buf.getvalue()

    def to_json(self):
        return json.dumps({"name": self.name, "caption": self.caption, "note": self.note,
                           "rows": self.records()}, indent=1)

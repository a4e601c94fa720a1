"""The reference SSD: a configurable SSD model whose NAND operations are known exactly.

RB-Explorer validated its method on SSD-v, an SSD whose firmware counted its own page
programs. This package is our equivalent in software: a drive (:mod:`.drive`) with a page-mapped
FTL (:mod:`.ftl`) runs a host workload (:mod:`.workload`); a timing model (:mod:`.timing`)
turns the FTL's operations into each die's R/B# pulse train and the bus command stream; the
FTL's own counters are the truth (``N_page_true``, ``WA_true``). :mod:`.measure` feeds the pulse
trains through the bit-exact sniffer model and the WA engine, exactly as ``rbscope analyze``
would, so measured and true WA can be compared.

>>> from rbscope import refssd
>>> drive = refssd.preset("ssd-v", blocks_per_plane=32)
>>> wl = refssd.micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, 8 << 20, seed=1)
>>> run = refssd.simulate(drive, wl, seed=1, precondition="steady")
>>> run.truth.wa_true, refssd.measure_wa(run)["wa"]   # doctest: +SKIP
"""

from .drive import (
    CELL_BITS,
    PRESETS,
    Drive,
    PageType,
    RefSSDError,
    load_drive,
    page_types,
    parse_drive,
    preset,
)
from .ftl import Cause, HybridFTL, PageFTL, make_ftl
from .measure import measure_wa, measure_wa_sequence, to_measurement, user_preset, write_vcd
from .sim import PRECONDITIONS, Run, Truth, simulate
from .timing import COMMAND_DTYPE, PULSE_DTYPE, NandOp
from .workload import (
    MICRO_BENCHMARKS,
    READ,
    TRIM,
    WRITE,
    Workload,
    micro,
    parse_micro_name,
    read_blkparse,
    read_spc,
)

__all__ = [
    "CELL_BITS", "PRESETS", "Drive", "PageType", "RefSSDError", "load_drive", "page_types",
    "parse_drive", "preset", "Cause", "PageFTL", "HybridFTL", "make_ftl", "measure_wa",
    "measure_wa_sequence", "to_measurement", "user_preset",
    "write_vcd", "PRECONDITIONS", "Run", "Truth", "simulate", "COMMAND_DTYPE", "PULSE_DTYPE",
    "NandOp", "MICRO_BENCHMARKS", "READ", "TRIM", "WRITE", "Workload", "micro",
    "parse_micro_name", "read_blkparse", "read_spc",
]

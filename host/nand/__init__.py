"""The one NAND vocabulary of rbscope (no Amaranth): the ONFI command table, status bits and
the parameter page's CRC (:mod:`.onfi`), the ID and ONFI/JEDEC parameter page decoders
(:mod:`.ident`), the operation classes (:mod:`.ops`), the parts catalogue and
the bundled geometries (:mod:`.parts`, ``geometries/``), and the µs → tick conversion
(:mod:`.timebase`). The gateware, its models, the cocotb driver, the reference SSD and the
analysis all import it."""

from .ident import (
    IdentError,
    ParameterPage,
    ParameterPageError,
    ReadId,
    decode_id,
    parse_parameter_page,
)
from .onfi import (
    COLUMN_COMMANDS,
    STATUS_ARDY,
    STATUS_FAIL,
    STATUS_FAILC,
    STATUS_RDY,
    STATUS_WP_N,
    Opcode,
    address_bytes,
    onfi_crc16,
)
from .ops import CONFIRM_CLASS, KINDS, OPS, WINDOW_CLASSES, OpClass
from .parts import CELLS, PARTS, Part, PartError, part
from .timebase import us_to_ticks

__all__ = [
    "COLUMN_COMMANDS", "STATUS_ARDY", "STATUS_FAIL", "STATUS_FAILC", "STATUS_RDY", "STATUS_WP_N",
    "Opcode", "ParameterPage", "ParameterPageError", "address_bytes", "onfi_crc16",
    "parse_parameter_page", "IdentError", "ReadId", "decode_id", "CONFIRM_CLASS", "KINDS",
    "OPS", "WINDOW_CLASSES", "OpClass",
    "CELLS", "PARTS", "Part", "PartError", "part", "us_to_ticks",
]

"""The one NAND vocabulary of rbscope (no Amaranth): ONFI commands, status bits and the parameter
page, and the µs → tick conversion. The gateware, its models, the cocotb driver and the
reference SSD all import it."""

from .onfi import (
    COLUMN_COMMANDS,
    STATUS_ARDY,
    STATUS_FAIL,
    STATUS_FAILC,
    STATUS_RDY,
    STATUS_WP_N,
    ParameterPage,
    ParameterPageError,
    address_bytes,
    onfi_crc16,
    parse_parameter_page,
)
from .timebase import us_to_ticks

__all__ = [
    "COLUMN_COMMANDS", "STATUS_ARDY", "STATUS_FAIL", "STATUS_FAILC", "STATUS_RDY", "STATUS_WP_N",
    "ParameterPage", "ParameterPageError", "address_bytes", "onfi_crc16", "parse_parameter_page",
    "us_to_ticks",
]

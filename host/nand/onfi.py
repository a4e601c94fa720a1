"""Host-side ONFI helpers: the parameter-page CRC and a parser of the parameter page.

Written independently of the emulator's page builder (``rbscope.gateware.nand_emu.onfi_rom``),
so that the tests can check one against the other; do not import from the gateware here.
Reference: ONFI 1.0, section 5.7.1 (Read Parameter Page definition).
"""

import struct
from dataclasses import dataclass

__all__ = ["onfi_crc16", "ParameterPage", "parse_parameter_page", "ParameterPageError",
           "STATUS_FAIL", "STATUS_FAILC", "STATUS_ARDY", "STATUS_RDY", "STATUS_WP_N",
           "COLUMN_COMMANDS", "address_bytes"]

STATUS_FAIL = 1 << 0
STATUS_FAILC = 1 << 1
STATUS_ARDY = 1 << 5
STATUS_RDY = 1 << 6
STATUS_WP_N = 1 << 7

#: First commands whose address carries two column cycles before the row (read 00h, program 80h,
#: copy-back program 81h); the others that take an address (erase 60h) give the row only.
COLUMN_COMMANDS = frozenset({0x00, 0x80, 0x81})


def address_bytes(first, row, column=0):
    """The address cycles after first command ``first``: the column's two bytes where the
    command takes them (:data:`COLUMN_COMMANDS`), then the row's three, least significant first.
    """
    cols = [column & 0xFF, column >> 8 & 0xFF] if first in COLUMN_COMMANDS else []
    return cols + [row & 0xFF, row >> 8 & 0xFF, row >> 16 & 0xFF]


_CRC_POLY = 0x8005
_CRC_INIT = 0x4F4E


def onfi_crc16(data, crc=_CRC_INIT):
    """Return the ONFI CRC-16 of ``data`` (polynomial 0x8005, initial 0x4F4E, MSB first)."""
    for byte in bytes(data):
        for bit in range(7, -1, -1):
            feedback = ((crc >> 15) & 1) ^ ((byte >> bit) & 1)
            crc = (crc << 1) & 0xFFFF
            if feedback:
                crc ^= _CRC_POLY
    return crc


class ParameterPageError(ValueError):
    """A parameter page is malformed; the message names the byte offset."""


@dataclass(frozen=True)
class ParameterPage:
    """The fields of an ONFI parameter page the rig uses.

    Members
    -------
    revision, features, optional_commands : int
    manufacturer, model : str
    jedec_id : int
    page_bytes, spare_bytes, pages_per_block, blocks_per_lun, luns : int
    row_address_cycles, column_address_cycles, bits_per_cell : int
    max_bad_blocks, plane_address_bits : int
    timing_modes : int
        Bit mask of the supported asynchronous timing modes.
    t_prog_us, t_bers_us, t_r_us, t_ccs_ns : int
        Maximum program, erase and read times (µs) and minimum tCCS (ns).
    copy : int
        Which of the redundant copies had a valid CRC (0-based).
    """

    revision: int
    features: int
    optional_commands: int
    manufacturer: str
    model: str
    jedec_id: int
    page_bytes: int
    spare_bytes: int
    pages_per_block: int
    blocks_per_lun: int
    luns: int
    row_address_cycles: int
    column_address_cycles: int
    bits_per_cell: int
    max_bad_blocks: int
    plane_address_bits: int
    timing_modes: int
    t_prog_us: int
    t_bers_us: int
    t_r_us: int
    t_ccs_ns: int
    copy: int

    @property
    def planes(self):
        return 1 << self.plane_address_bits


def _parse_one(page, copy):
    if page[0:4] != b"ONFI":
        raise ParameterPageError(f"copy {copy}: bytes 0-3 must be 'ONFI', not {page[0:4]!r}")
    stored = struct.unpack_from("<H", page, 254)[0]
    computed = onfi_crc16(page[:254])
    if stored != computed:
        raise ParameterPageError(f"copy {copy}: CRC at bytes 254-255 is {stored:#06x}, "
                                 f"computed {computed:#06x}")
    rev, feat, opt = struct.unpack_from("<HHH", page, 4)
    if rev == 0 or rev & 1:
        raise ParameterPageError(f"copy {copy}: byte 4 revision {rev:#06x} is not valid")
    page_bytes, spare, _, _, ppb, blocks = struct.unpack_from("<IHIHII", page, 80)
    cycles = page[101]
    timing_modes = struct.unpack_from("<H", page, 129)[0]
    t_prog, t_bers, t_r, t_ccs = struct.unpack_from("<HHHH", page, 133)
    return ParameterPage(
        revision=rev, features=feat, optional_commands=opt,
        manufacturer=page[32:44].decode("ascii", "replace").rstrip(),
        model=page[44:64].decode("ascii", "replace").rstrip(),
        jedec_id=page[64], page_bytes=page_bytes, spare_bytes=spare, pages_per_block=ppb,
        blocks_per_lun=blocks, luns=page[100], row_address_cycles=cycles & 0xF,
        column_address_cycles=cycles >> 4, bits_per_cell=page[102],
        max_bad_blocks=struct.unpack_from("<H", page, 103)[0], plane_address_bits=page[113],
        timing_modes=timing_modes, t_prog_us=t_prog, t_bers_us=t_bers, t_r_us=t_r,
        t_ccs_ns=t_ccs, copy=copy)


def parse_parameter_page(data):
    """Parse the first copy of a parameter page with a valid CRC.

    ``data`` holds one or more 256-byte copies back to back (a die returns at least three).
    Raises :class:`ParameterPageError` naming the offset when no copy is valid.
    """
    data = bytes(data)
    if len(data) < 256:
        raise ParameterPageError(f"a parameter page is 256 bytes, got {len(data)}")
    errors = []
    for copy in range(len(data) // 256):
        try:
            return _parse_one(data[copy * 256:(copy + 1) * 256], copy)
        except ParameterPageError as exc:
            errors.append(str(exc))
    raise ParameterPageError("no valid parameter page copy: " + "; ".join(errors))

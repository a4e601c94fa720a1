"""ONFI: the command bytes (:class:`Opcode`, the one table), status bits, address cycles, and
the parameter page's CRC and parser.

The parameter-page parser is written independently of the emulator's page builder
(``rbscope.gateware.nand_emu.onfi_rom``), so that the tests can check one against the other; do
not import from the gateware here. References: ONFI 1.0, sections 5.7.1 (Read Parameter Page
definition) and 5.14 (command set); vendor commands where named.
"""

import struct
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Opcode", "onfi_crc16", "ParameterPage", "parse_parameter_page",
           "ParameterPageError", "STATUS_FAIL", "STATUS_FAILC", "STATUS_ARDY", "STATUS_RDY",
           "STATUS_WP_N", "COLUMN_COMMANDS", "address_bytes"]


class Opcode(IntEnum):
    """Every ONFI command byte rbscope uses: the one table.

    The emulated die decodes these (``rbscope.gateware.nand_emu``), its traffic generator, the
    reference SSD, its RTL replay and the cocotb driver send them, and the opcode tap classifies
    busy pulses by them (:data:`rbscope.nand.ops.CONFIRM_CLASS`). The member names are the
    emulator's.
    """

    READ = 0x00  # read page, first cycle (also: back to data output after a status read)
    CHANGE_READ_COL = 0x05  # change read column, first cycle
    PROGRAM_CONFIRM = 0x10  # page program, confirm
    PROGRAM_MP_CONFIRM = 0x11  # multi-plane program, queue confirm (tDBSY)
    PROGRAM_RESUME = 0x13  # program resume (after 84h)
    PROGRAM_CACHE = 0x15  # cache program, confirm (tCBSY)
    PROGRAM_LOAD = 0x1A  # data load of a one-shot program's lower/middle page (a short busy)
    READ_CONFIRM = 0x30  # read page, confirm (tR)
    READ_CACHE_SEQ = 0x31  # sequential cache read (tRCBSY)
    READ_MP = 0x32  # multi-plane read, queue confirm (tDBSY)
    COPYBACK_READ = 0x35  # copy-back read, confirm (tR)
    READ_CACHE_END = 0x3F  # last cache read (tRCBSY)
    ERASE = 0x60  # block erase, first cycle
    ERASE_SUSPEND = 0x61  # erase suspend
    STATUS = 0x70  # read status
    STATUS_ENH = 0x78  # read status enhanced (selects a LUN)
    PROGRAM = 0x80  # page program, first cycle
    PROGRAM_MP = 0x81  # program of a further plane (multi-plane), first cycle
    PROGRAM_SUSPEND = 0x84  # program suspend
    CHANGE_WRITE_COL = 0x85  # change write column
    READ_ID = 0x90  # read ID
    ERASE_CONFIRM = 0xD0  # block erase, confirm (tBERS)
    ERASE_MP_CONFIRM = 0xD1  # multi-plane erase, queue confirm (tDBSY)
    ERASE_RESUME = 0xD2  # erase resume (after 61h)
    CHANGE_READ_COL_CONFIRM = 0xE0  # change read column, confirm
    READ_PARAM = 0xEC  # read parameter page
    GET_FEATURES = 0xEE  # get features
    SET_FEATURES = 0xEF  # set features
    SELECT_LUN0 = 0xF1  # vendor die select: LUN 0 (the tap follows it)
    SELECT_LUN1 = 0xF2  # vendor die select: LUN 1
    RESET_LUN = 0xFA  # reset LUN
    RESET_SYNC = 0xFC  # synchronous reset
    RESET = 0xFF  # reset

STATUS_FAIL = 1 << 0
STATUS_FAILC = 1 << 1
STATUS_ARDY = 1 << 5
STATUS_RDY = 1 << 6
STATUS_WP_N = 1 << 7

#: First commands whose address carries two column cycles before the row (read 00h, program 80h,
#: multi-plane program 81h); the others that take an address (erase 60h) give the row only.
COLUMN_COMMANDS = frozenset({Opcode.READ, Opcode.PROGRAM, Opcode.PROGRAM_MP})


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

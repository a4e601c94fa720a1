"""ONFI: the command bytes (:class:`Opcode`, the one table), status bits, address cycles, and
the parameter page's CRC (the parameter page decoder is :mod:`rbscope.nand.ident`).

Written independently of the emulator's page builder (``rbscope.gateware.nand_emu.onfi_rom``), so
that the tests can check one against the other; do not import from the gateware here. References:
ONFI 1.0, sections 5.7.1 (Read Parameter Page definition) and 5.14 (command set); vendor commands
where named.
"""

from enum import IntEnum

__all__ = ["Opcode", "onfi_crc16", "STATUS_FAIL", "STATUS_FAILC", "STATUS_ARDY", "STATUS_RDY",
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

"""What a NAND die says about itself: Read ID bytes (90h), and the ONFI and JEDEC parameter pages
(ECh), with the ONFI extended parameter page.

One decoder for the whole repository: ``rbscope analyze --param-page``, ``rbscope identify``
(bus recordings of a power-up) and the sigrok ONFI decoder use it. Written independently of the
emulator's page builder (``rbscope.gateware.nand_emu.onfi_rom``) so the tests can check one
against the other.

Byte offsets follow the ONFI specification and JEDEC JESD230, as laid out in Linux's
``include/linux/mtd/onfi.h`` (``struct nand_onfi_params``, ``struct onfi_ext_param_page``) and
``include/linux/mtd/jedec.h`` (``struct nand_jedec_params``):

========================  ===============  ===============
field                     ONFI (256 B)     JEDEC (512 B)
========================  ===============  ===============
signature                 0-3 "ONFI"       0-3 "JESD"
revision bitmap           4-5              4-5
features                  6-7              6-7
parameter page copies     14 (2.1 and up)  13
manufacturer, model       32-43, 44-63     32-43, 44-63
data, spare bytes / page  80-83, 84-85     80-83, 84-85
pages per block           92-95            92-95
blocks per LUN            96-99            96-99
LUNs per target           100              100
address cycles            101              101
bits per cell             102              102
plane address bits        113              104
tPROG, tBERS, tR max (µs) 133-138          153-158
tCCS (ns)                 139-140          161-162
CRC-16                    254-255 (0-253)  510-511 (0-509)
========================  ===============  ===============

The CRC is ONFI's (polynomial 8005h, initial value 4F4Eh, :func:`rbscope.nand.onfi.onfi_crc16`)
for both. A die returns its page in redundant copies back to back (three at least); the first copy
whose signature and CRC hold is used, and when none holds, a byte-wise majority over the copies is
taken and must then pass the CRC itself.

The revision bitmap decides where later fields sit: ONFI 1.0 has no copy count (byte 14 is
reserved: three copies) and no extended page; from ONFI 2.1 byte 14 gives the number of copies,
bytes 12-13 the extended page's length in 16-byte units, and feature bit 7 says an extended page
follows the copies (its ECC section then replaces byte 112 when that reads FFh); the source
synchronous (NV-DDR) timing modes at 141-142 exist from ONFI 2.0.
"""

import struct
from dataclasses import dataclass

from .onfi import onfi_crc16

__all__ = [
    "IdentError", "ParameterPageError", "ParameterPage", "ExtendedPage", "EccInfo", "ReadId",
    "MANUFACTURERS", "ONFI_VERSIONS", "parse_parameter_page", "parse_onfi_page",
    "parse_jedec_page", "parse_extended_page", "decode_id", "majority",
]

#: JEDEC JEP106 manufacturer codes (bank 1) of the NAND makers, as the first Read ID byte.
MANUFACTURERS = {
    0x01: "AMD/Spansion", 0x04: "Fujitsu", 0x07: "Renesas", 0x20: "STMicroelectronics",
    0x2C: "Micron", 0x45: "SanDisk", 0x89: "Intel", 0x8F: "National", 0x98: "Toshiba/Kioxia",
    0xAD: "SK hynix", 0xC2: "Macronix", 0xC8: "ESMT/GigaDevice", 0xEC: "Samsung",
    0xEF: "Winbond",
}

#: Bit of the ONFI revision bitmap (bytes 4-5) → the version it declares. Bits 1-9 (1.0 to
#: 4.0) as Linux's onfi.h names them; the bitmap continues one bit per release (4.1, 4.2, 5.0,
#: 5.1, 5.2).
ONFI_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.1", 4: "2.2", 5: "2.3", 6: "3.0", 7: "3.1",
                 8: "3.2", 9: "4.0", 10: "4.1", 11: "4.2", 12: "5.0", 13: "5.1", 14: "5.2"}
#: JEDEC revision bitmap: bit 1 a vendor-specific version, bit 2 JESD230 1.0.
JEDEC_VERSIONS = {1: "vendor", 2: "1.0"}

ONFI_FEATURE_EXT_PAGE = 1 << 7
_SIZES = {"ONFI": 256, "JEDEC": 512}
_SIGNATURES = {"ONFI": b"ONFI", "JEDEC": b"JESD"}


class IdentError(ValueError):
    """Identification data is malformed; the message names the byte offset or the field."""


class ParameterPageError(IdentError):
    """A parameter page is malformed; the message names the byte offset."""


@dataclass(frozen=True)
class EccInfo:
    """One ECC requirement: ``ecc_bits`` correctable bits per ``2**codeword_exp`` bytes (the
    codeword size byte is a power of two), with the bad blocks per LUN and the block endurance
    (``value × 10**exponent`` P/E cycles) that go with it."""

    ecc_bits: int
    codeword_exp: int
    max_bad_blocks: int
    block_endurance: int

    @property
    def codeword_bytes(self):
        return 1 << self.codeword_exp


@dataclass(frozen=True)
class ExtendedPage:
    """The ONFI extended parameter page ("EPPS"): its sections (type, length in 16-byte units)
    and the ECC requirements of its type-2 sections."""

    sections: tuple
    ecc: tuple
    copy: int


@dataclass(frozen=True)
class ParameterPage:
    """The fields of an ONFI or JEDEC parameter page.

    Members
    -------
    standard : str
        ``"ONFI"`` or ``"JEDEC"``.
    revision : int
        The revision bitmap (bytes 4-5).
    version : str
        The highest version the bitmap declares (``"4.0"``).
    features, optional_commands : int
    manufacturer, model : str
    jedec_id : int
        The manufacturer's JEDEC code (byte 64).
    page_bytes, spare_bytes, pages_per_block, blocks_per_lun, luns : int
        ``pages_per_block`` is the raw value, not rounded to a power of two.
    row_address_cycles, column_address_cycles, bits_per_cell : int
    max_bad_blocks : int or None
        Bad blocks per LUN at most (ONFI 103-104; JEDEC: its first ECC block).
    plane_address_bits : int
        Planes per LUN = ``1 << plane_address_bits`` (:attr:`planes`).
    timing_modes : int
        Bit mask of the asynchronous (SDR) timing modes / speed grades.
    t_prog_us, t_bers_us, t_r_us, t_ccs_ns : int
        Maximum program, erase and read times (µs) and minimum tCCS (ns).
    ecc_bits : int or None
        Correctable bits per codeword (ONFI byte 112, or the extended page's first ECC
        section when that byte is FFh; JEDEC: its first ECC block); None when unknown.
    param_pages : int
        How many copies the page says the die returns.
    copies : int
        How many copies the data held.
    copy : int or None
        The first copy whose signature and CRC held (0-based); None when the majority was taken.
    voted : bool
        No copy held: the byte-wise majority of the copies (which passed the CRC) was used.
    extended : ExtendedPage or None
    """

    standard: str
    revision: int
    version: str
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
    max_bad_blocks: int | None
    plane_address_bits: int
    timing_modes: int
    t_prog_us: int
    t_bers_us: int
    t_r_us: int
    t_ccs_ns: int
    ecc_bits: int | None
    param_pages: int
    copies: int
    copy: int | None
    voted: bool = False
    extended: ExtendedPage | None = None

    @property
    def planes(self):
        """Planes per LUN."""
        return 1 << self.plane_address_bits

    @property
    def cell(self):
        """``"slc"``, ``"mlc"``, ``"tlc"``, ``"qlc"`` from the bits per cell, else None."""
        return {1: "slc", 2: "mlc", 3: "tlc", 4: "qlc"}.get(self.bits_per_cell)


def _version(bitmap, table, where):
    if bitmap == 0 or bitmap & 1:
        raise ParameterPageError(f"{where}: revision bitmap {bitmap:#06x} at bytes 4-5 is not "
                                 f"valid (bit 0 is reserved, some version bit must be set)")
    top = bitmap.bit_length() - 1
    return table.get(top, f"bit {top}")


def _onfi_at_least(page, major_minor):
    bitmap = struct.unpack_from("<H", page, 4)[0]
    top = bitmap.bit_length() - 1
    wanted = [b for b, v in ONFI_VERSIONS.items() if v == major_minor][0]
    return top >= wanted


def _text(raw):
    return raw.decode("ascii", "replace").rstrip(" \x00")


def _check(page, standard, copy):
    size = _SIZES[standard]
    sig = _SIGNATURES[standard]
    if page[0:4] != sig:
        raise ParameterPageError(f"copy {copy}: bytes 0-3 must be {sig.decode()!r}, not "
                                 f"{bytes(page[0:4])!r}")
    stored = struct.unpack_from("<H", page, size - 2)[0]
    computed = onfi_crc16(page[:size - 2])
    if stored != computed:
        raise ParameterPageError(f"copy {copy}: CRC at bytes {size - 2}-{size - 1} is "
                                 f"{stored:#06x}, computed {computed:#06x}")


def majority(copies):
    """The byte-wise majority of equal-length ``copies``: at each offset the value more than
    half of the copies hold. Raises :class:`ParameterPageError` naming the first offset where no
    value has a majority."""
    copies = [bytes(c) for c in copies]
    if len({len(c) for c in copies}) > 1:
        raise ParameterPageError(f"copies differ in length: {[len(c) for c in copies]}")
    out = bytearray()
    for i, column in enumerate(zip(*copies, strict=True)):
        best = max(set(column), key=column.count)
        if column.count(best) * 2 <= len(copies):
            raise ParameterPageError(f"no majority at byte {i} over {len(copies)} copies "
                                     f"({', '.join(f'{v:#04x}' for v in column)})")
        out.append(best)
    return bytes(out)


def _copies(data, standard):
    size = _SIZES[standard]
    data = bytes(data)
    if len(data) < size:
        raise ParameterPageError(f"an {standard} parameter page is {size} bytes, got "
                                 f"{len(data)}")
    return [data[i * size:(i + 1) * size] for i in range(len(data) // size)]


def _select(data, standard):
    """(page bytes, copy index or None, voted, copies)."""
    copies = _copies(data, standard)
    errors = []
    for i, page in enumerate(copies):
        try:
            _check(page, standard, i)
            return page, i, False, len(copies)
        except ParameterPageError as exc:
            errors.append(str(exc))
    if len(copies) >= 3:
        try:
            voted = majority(copies)
            _check(voted, standard, "majority")
            return voted, None, True, len(copies)
        except ParameterPageError as exc:
            errors.append(str(exc))
    raise ParameterPageError(f"no valid {standard} parameter page copy: " + "; ".join(errors))


def parse_extended_page(data, copies=1):
    """Parse an ONFI extended parameter page (``copies`` copies of equal length back to back):
    CRC (bytes 0-1, over the rest), "EPPS" (2-5), eight sections (type, length in 16-byte
    units) at 16-31, their bodies from 32. Type 2 sections hold 8-byte ECC blocks."""
    data = bytes(data)
    if copies < 1 or len(data) < 32 * copies:
        raise ParameterPageError(f"an extended parameter page is 32 bytes at least, got "
                                 f"{len(data)} for {copies} copies")
    size = len(data) // copies
    errors = []
    for c in range(copies):
        page = data[c * size:(c + 1) * size]
        if page[2:6] != b"EPPS":
            errors.append(f"extended copy {c}: bytes 2-5 must be 'EPPS', not {page[2:6]!r}")
            continue
        stored = struct.unpack_from("<H", page, 0)[0]
        computed = onfi_crc16(page[2:])
        if stored != computed:
            errors.append(f"extended copy {c}: CRC at bytes 0-1 is {stored:#06x}, computed "
                          f"{computed:#06x}")
            continue
        sections, ecc, offset = [], [], 32
        for s in range(8):
            kind, length = page[16 + 2 * s], page[17 + 2 * s]
            if kind == 0 and length == 0:
                continue
            sections.append((kind, length))
            body = page[offset:offset + 16 * length]
            if len(body) < 16 * length:
                raise ParameterPageError(f"extended copy {c}: section {s} (bytes {offset}-"
                                         f"{offset + 16 * length - 1}) runs past the page's "
                                         f"{size} bytes")
            if kind == 2:
                for k in range(0, len(body) - 7, 8):
                    bits, cw, bb, endurance = struct.unpack_from("<BBHH", body, k)
                    if bits or cw:
                        ecc.append(EccInfo(bits, cw, bb, _endurance(endurance)))
            offset += 16 * length
        return ExtendedPage(sections=tuple(sections), ecc=tuple(ecc), copy=c)
    raise ParameterPageError("no valid extended parameter page copy: " + "; ".join(errors))


def _endurance(raw):
    """ONFI/JEDEC endurance: byte 0 a value, byte 1 a power of ten."""
    return (raw & 0xFF) * 10 ** (raw >> 8)


def parse_onfi_page(data):
    """Parse ONFI parameter page copies (256 bytes each, back to back), followed, where the page
    says so (ONFI 2.1 and up, feature bit 7), by the extended parameter page's copies."""
    page, copy, voted, ncopies = _select(data, "ONFI")
    where = "majority" if voted else f"copy {copy}"
    rev, feat, opt = struct.unpack_from("<HHH", page, 4)
    version = _version(rev, ONFI_VERSIONS, where)
    v21 = _onfi_at_least(page, "2.1")
    declared = (page[14] or 3) if v21 else 3
    page_bytes, spare, _, _, ppb, blocks = struct.unpack_from("<IHIHII", page, 80)
    cycles = page[101]
    timing_modes = struct.unpack_from("<H", page, 129)[0]
    t_prog, t_bers, t_r, t_ccs = struct.unpack_from("<HHHH", page, 133)
    ecc_bits = page[112]
    extended = None
    ext_len = struct.unpack_from("<H", page, 12)[0] * 16 if v21 else 0
    if v21 and feat & ONFI_FEATURE_EXT_PAGE and ext_len:
        start = declared * 256
        tail = bytes(data)[start:]
        n = len(tail) // ext_len
        if n:
            extended = parse_extended_page(tail[:n * ext_len], copies=n)
    if ecc_bits == 0xFF:
        ecc_bits = extended.ecc[0].ecc_bits if extended is not None and extended.ecc else None
    return ParameterPage(
        standard="ONFI", revision=rev, version=version, features=feat, optional_commands=opt,
        manufacturer=_text(page[32:44]), model=_text(page[44:64]), jedec_id=page[64],
        page_bytes=page_bytes, spare_bytes=spare, pages_per_block=ppb, blocks_per_lun=blocks,
        luns=page[100], row_address_cycles=cycles & 0xF, column_address_cycles=cycles >> 4,
        bits_per_cell=page[102], max_bad_blocks=struct.unpack_from("<H", page, 103)[0],
        plane_address_bits=page[113], timing_modes=timing_modes, t_prog_us=t_prog,
        t_bers_us=t_bers, t_r_us=t_r, t_ccs_ns=t_ccs, ecc_bits=ecc_bits,
        param_pages=declared, copies=ncopies, copy=copy, voted=voted, extended=extended)


def parse_jedec_page(data):
    """Parse JEDEC (JESD230) parameter page copies (512 bytes each, back to back)."""
    page, copy, voted, ncopies = _select(data, "JEDEC")
    where = "majority" if voted else f"copy {copy}"
    rev, feat = struct.unpack_from("<HH", page, 4)
    version = _version(rev, JEDEC_VERSIONS, where)
    opt = int.from_bytes(page[8:11], "little")
    page_bytes, spare = struct.unpack_from("<IH", page, 80)
    ppb, blocks = struct.unpack_from("<II", page, 92)
    cycles = page[101]
    timing_modes = struct.unpack_from("<H", page, 144)[0]
    t_prog, t_bers, t_r = struct.unpack_from("<HHH", page, 153)
    t_ccs = struct.unpack_from("<H", page, 161)[0]
    bits, _cw, bb, _end = struct.unpack_from("<BBHH", page, 211)
    return ParameterPage(
        standard="JEDEC", revision=rev, version=version, features=feat, optional_commands=opt,
        manufacturer=_text(page[32:44]), model=_text(page[44:64]), jedec_id=page[64],
        page_bytes=page_bytes, spare_bytes=spare, pages_per_block=ppb, blocks_per_lun=blocks,
        luns=page[100], row_address_cycles=cycles & 0xF, column_address_cycles=cycles >> 4,
        bits_per_cell=page[102], max_bad_blocks=bb or None,
        plane_address_bits=page[104], timing_modes=timing_modes, t_prog_us=t_prog,
        t_bers_us=t_bers, t_r_us=t_r, t_ccs_ns=t_ccs, ecc_bits=bits if bits else None,
        param_pages=page[13] or 3, copies=ncopies, copy=copy, voted=voted)


def parse_parameter_page(data, standard=None):
    """Parse a parameter page read (ECh): ONFI or JEDEC, told by the signature of the copies
    (or by ``standard``, ``"ONFI"`` or ``"JEDEC"``).

    Raises :class:`ParameterPageError` naming the offset when no copy is valid.
    """
    data = bytes(data)
    if standard is None:
        votes = {"ONFI": 0, "JEDEC": 0}
        for name, size in _SIZES.items():
            votes[name] = sum(data[i:i + 4] == _SIGNATURES[name]
                              for i in range(0, len(data) - size + 1, size))
        if not any(votes.values()):
            raise ParameterPageError(f"bytes 0-3 are {data[:4]!r}: neither 'ONFI' nor 'JESD' in "
                                     f"any copy (a parameter page is 256 bytes (ONFI) or 512 "
                                     f"(JEDEC), got {len(data)})")
        standard = max(votes, key=votes.get)
    if standard == "ONFI":
        return parse_onfi_page(data)
    if standard == "JEDEC":
        return parse_jedec_page(data)
    raise ValueError(f"standard must be 'ONFI' or 'JEDEC', not {standard!r}")


@dataclass(frozen=True)
class ReadId:
    """Read ID (90h) answers.

    Members
    -------
    manufacturer_id, device_id : int
        The first two bytes at address 00h.
    manufacturer : str or None
        The maker's name (:data:`MANUFACTURERS`), None when the code is not listed.
    id_bytes : bytes
        Every byte read at address 00h.
    onfi, jedec : bool or None
        Whether address 20h answered "ONFI", address 40h "JEDEC"; None when not read.
    """

    manufacturer_id: int
    device_id: int
    manufacturer: str | None
    id_bytes: bytes
    onfi: bool | None = None
    jedec: bool | None = None


def decode_id(at_00, at_20=None, at_40=None):
    """Decode the bytes a die returned to Read ID at address 00h (manufacturer, device, more),
    and, where read, at 20h ("ONFI") and 40h ("JEDEC")."""
    at_00 = bytes(at_00)
    if len(at_00) < 2:
        raise IdentError(f"Read ID 00h returns the manufacturer and device bytes at least, got "
                         f"{len(at_00)} byte(s)")
    return ReadId(
        manufacturer_id=at_00[0], device_id=at_00[1], manufacturer=MANUFACTURERS.get(at_00[0]),
        id_bytes=at_00,
        onfi=None if at_20 is None else bytes(at_20)[:4] == b"ONFI",
        jedec=None if at_40 is None else bytes(at_40)[:5] == b"JEDEC")

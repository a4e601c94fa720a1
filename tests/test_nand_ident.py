"""The ID and parameter page decoders (rbscope.nand.ident) on hand-built pages.

The pages are built here byte by byte at the offsets of Linux's ``struct nand_onfi_params``,
``struct onfi_ext_param_page`` and ``struct nand_jedec_params`` (include/linux/mtd/onfi.h and
jedec.h), independently of the decoder and of the emulator's page builder.
"""

import struct

import pytest

from rbscope.nand.ident import (
    IdentError,
    ParameterPageError,
    decode_id,
    majority,
    parse_extended_page,
    parse_parameter_page,
)
from rbscope.nand.onfi import onfi_crc16

# A revision bitmap declaring every version up to the one named (bit 1 = 1.0 … bit 12 = 5.0).
REVISIONS = {"1.0": 0b10, "2.1": 0b1110, "2.3": 0b111110, "3.0": 0x7E, "3.2": 0x1FE,
             "4.0": 0x3FE, "4.2": 0xFFE, "5.0": 0x1FFE}


def onfi_page(revision, *, page_bytes=16384, spare=1952, ppb=1152, blocks=1048, luns=2,
              bits=3, plane_bits=2, t_prog=1600, t_bers=10000, t_r=90, ecc=0xFF, copies=3,
              ext_len=0, features=0x1D):
    page = bytearray(256)
    page[0:4] = b"ONFI"
    struct.pack_into("<HHH", page, 4, REVISIONS[revision], features, 0x3FF)
    struct.pack_into("<H", page, 12, ext_len)
    page[14] = copies
    page[32:44] = b"MICRON      "
    page[44:64] = b"MT29F1T08EMHAF      "
    page[64] = 0x2C
    struct.pack_into("<I", page, 80, page_bytes)
    struct.pack_into("<H", page, 84, spare)
    struct.pack_into("<I", page, 92, ppb)
    struct.pack_into("<I", page, 96, blocks)
    page[100] = luns
    page[101] = 0x23
    page[102] = bits
    struct.pack_into("<H", page, 103, 30)
    page[112] = ecc
    page[113] = plane_bits
    struct.pack_into("<H", page, 129, 0x3F)
    struct.pack_into("<HHHH", page, 133, t_prog, t_bers, t_r, 400)
    struct.pack_into("<H", page, 254, onfi_crc16(page[:254]))
    return bytes(page)


def ext_page(ecc_bits=40, codeword=10):
    body = bytearray(48)  # header 32 bytes, one ECC section of one 16-byte unit
    body[2:6] = b"EPPS"
    body[16:18] = bytes([2, 1])  # section 0: ECC information, 1 × 16 bytes
    struct.pack_into("<BBHH", body, 32, ecc_bits, codeword, 60, 0x0403)  # 3 × 10**4 cycles
    struct.pack_into("<H", body, 0, onfi_crc16(body[2:]))
    return bytes(body)


def jedec_page(*, ppb=768, bits=3, plane_bits=1, t_prog=2400, t_bers=8000, t_r=75):
    page = bytearray(512)
    page[0:4] = b"JESD"
    struct.pack_into("<HH", page, 4, 1 << 2, 0)
    page[13] = 3
    page[32:44] = b"TOSHIBA     "
    page[44:64] = b"TH58TFT0DDLBA8H     "
    page[64] = 0x98
    struct.pack_into("<IH", page, 80, 16384, 1280)
    struct.pack_into("<II", page, 92, ppb, 2092)
    page[100] = 1
    page[101] = 0x23
    page[102] = bits
    page[104] = plane_bits
    struct.pack_into("<H", page, 144, 0x3F)
    struct.pack_into("<HHH", page, 153, t_prog, t_bers, t_r)
    struct.pack_into("<H", page, 161, 300)
    struct.pack_into("<BBHH", page, 211, 40, 10, 80, 0x0303)
    struct.pack_into("<H", page, 510, onfi_crc16(page[:510]))
    return bytes(page)


@pytest.mark.parametrize("revision,version", [("2.1", "2.1"), ("2.3", "2.3"), ("3.2", "3.2"),
                                              ("4.0", "4.0"), ("4.2", "4.2"), ("5.0", "5.0")])
def test_onfi_pages_of_every_generation(revision, version):
    p = parse_parameter_page(onfi_page(revision, ecc=8) * 3)
    assert (p.standard, p.version, p.revision) == ("ONFI", version, REVISIONS[revision])
    assert (p.page_bytes, p.spare_bytes, p.pages_per_block, p.blocks_per_lun) == \
        (16384, 1952, 1152, 1048)
    assert (p.luns, p.bits_per_cell, p.cell, p.plane_address_bits, p.planes) == \
        (2, 3, "tlc", 2, 4)
    assert (p.t_prog_us, p.t_bers_us, p.t_r_us, p.t_ccs_ns) == (1600, 10000, 90, 400)
    assert (p.row_address_cycles, p.column_address_cycles) == (3, 2)
    assert (p.manufacturer, p.model, p.jedec_id) == ("MICRON", "MT29F1T08EMHAF", 0x2C)
    assert (p.copy, p.voted, p.copies, p.param_pages, p.ecc_bits) == (0, False, 3, 3, 8)


def test_onfi_1_0_ignores_the_bytes_later_revisions_define():
    # Byte 14 (copies) and bytes 12-13 (extended page length) are reserved in ONFI 1.0.
    p = parse_parameter_page(onfi_page("1.0", copies=5, ext_len=3, features=0x80) * 3)
    assert (p.version, p.param_pages, p.extended) == ("1.0", 3, None)


def test_onfi_3_extended_page_gives_the_ecc():
    ext = ext_page()
    head = onfi_page("3.0", copies=3, ext_len=len(ext) // 16, features=0x80 | 0x1D, ecc=0xFF)
    p = parse_parameter_page(head * 3 + ext * 3)
    assert p.extended is not None and p.extended.sections == ((2, 1),)
    assert p.ecc_bits == 40 and p.extended.ecc[0].codeword_bytes == 1024
    assert p.extended.ecc[0].block_endurance == 30000 and p.extended.ecc[0].max_bad_blocks == 60
    # The extended page's first copy corrupted: its second copy is used.
    bad = bytearray(ext)
    bad[33] ^= 0xFF
    p = parse_parameter_page(head * 3 + bytes(bad) + ext)
    assert p.extended.copy == 1 and p.ecc_bits == 40
    with pytest.raises(ParameterPageError, match="extended copy 0: CRC at bytes 0-1"):
        parse_extended_page(bytes(bad))


def test_jedec_page():
    p = parse_parameter_page(jedec_page() * 3)
    assert (p.standard, p.version) == ("JEDEC", "1.0")
    assert (p.page_bytes, p.spare_bytes, p.pages_per_block, p.blocks_per_lun) == \
        (16384, 1280, 768, 2092)
    assert (p.bits_per_cell, p.planes, p.luns) == (3, 2, 1)
    assert (p.t_prog_us, p.t_bers_us, p.t_r_us, p.t_ccs_ns) == (2400, 8000, 75, 300)
    assert (p.ecc_bits, p.max_bad_blocks, p.timing_modes) == (40, 80, 0x3F)
    assert (p.manufacturer, p.jedec_id) == ("TOSHIBA", 0x98)
    # A JEDEC page is 512 bytes; its CRC covers bytes 0-509.
    bad = bytearray(jedec_page())
    bad[300] ^= 1
    with pytest.raises(ParameterPageError, match="CRC at bytes 510-511"):
        parse_parameter_page(bytes(bad))
    with pytest.raises(ParameterPageError, match="512 bytes"):
        parse_parameter_page(jedec_page()[:256], standard="JEDEC")


def test_wrong_crc_is_refused_naming_the_bytes():
    page = bytearray(onfi_page("4.0"))
    page[254] ^= 0x5A
    with pytest.raises(ParameterPageError, match=r"copy 0: CRC at bytes 254-255 is 0x[0-9a-f]+, "
                                                 r"computed"):
        parse_parameter_page(bytes(page))
    with pytest.raises(ParameterPageError, match="neither 'ONFI' nor 'JESD'"):
        parse_parameter_page(bytes(256))
    with pytest.raises(ParameterPageError, match="revision bitmap 0x0001 at bytes 4-5"):
        raw = bytearray(onfi_page("4.0"))
        struct.pack_into("<H", raw, 4, 1)
        struct.pack_into("<H", raw, 254, onfi_crc16(raw[:254]))
        parse_parameter_page(bytes(raw))


def test_pages_per_block_is_the_raw_value():
    for ppb in (1152, 2304, 1536, 576, 2112):
        assert parse_parameter_page(onfi_page("4.0", ppb=ppb)).pages_per_block == ppb
        assert parse_parameter_page(jedec_page(ppb=ppb)).pages_per_block == ppb


def test_a_corrupted_copy_is_skipped_and_a_majority_outvotes_corruption():
    good = onfi_page("4.0", ppb=2304)
    first = bytearray(good)
    first[92] ^= 0x40  # pages per block of copy 0
    p = parse_parameter_page(bytes(first) + good + good)
    assert (p.copy, p.voted, p.pages_per_block) == (1, False, 2304)
    # Every copy corrupted, each in a different byte: no CRC holds, the byte-wise majority does.
    copies = [bytearray(good) for _ in range(3)]
    copies[0][92] ^= 0x40
    copies[1][133] ^= 0x01
    copies[2][254] ^= 0xFF
    p = parse_parameter_page(b"".join(copies))
    assert (p.copy, p.voted, p.pages_per_block, p.t_prog_us) == (None, True, 2304, 1600)
    # The same byte corrupted the same way in two copies: the majority is wrong, its CRC says so.
    copies[1][92] ^= 0x40
    copies[1][133] ^= 0x01
    with pytest.raises(ParameterPageError, match="majority: CRC"):
        parse_parameter_page(b"".join(copies))


def test_majority_names_the_offset_without_one():
    with pytest.raises(ParameterPageError, match="no majority at byte 1 over 3 copies"):
        majority([b"\x00\x01", b"\x00\x02", b"\x00\x03"])
    assert majority([b"ab", b"xb", b"ay"]) == b"ab"


def test_read_id():
    ident = decode_id(bytes([0x2C, 0xA4, 0x64, 0x32, 0xAA]), b"ONFI", b"\x00" * 5)
    assert (ident.manufacturer_id, ident.device_id, ident.manufacturer) == (0x2C, 0xA4, "Micron")
    assert (ident.onfi, ident.jedec, len(ident.id_bytes)) == (True, False, 5)
    assert decode_id(b"\x98\x3a", at_40=b"JEDEC").jedec is True
    assert decode_id(b"\x77\x01").manufacturer is None and decode_id(b"\x77\x01").onfi is None
    with pytest.raises(IdentError, match="got 1 byte"):
        decode_id(b"\x2c")

"""Build the Read ID bytes and the ONFI parameter page of an emulated die at elaboration time.

The host's independent parser and CRC live in :mod:`rbscope.nand.onfi`; the tests check one against
the other, so this builder must not import from there.
"""

import struct

from amaranth.lib import crc

from .params import EmuParams

__all__ = ["parameter_page", "id_bytes", "PARAM_COPIES", "ONFI_CRC"]

#: CRC-16 of the parameter page: polynomial 0x8005, initial value 0x4F4E, no reflection,
#: no final XOR (ONFI 1.0 section 5.7.1.36).
ONFI_CRC = crc.Algorithm(crc_width=16, polynomial=0x8005, initial_crc=0x4F4E,
                         reflect_input=False, reflect_output=False, xor_output=0)(data_width=8)

#: Redundant copies of the parameter page the die returns, back to back.
PARAM_COPIES = 3


def id_bytes(params):
    """Return the 16 Read ID bytes: 8 for address 00h, then 8 for address 20h."""
    planes_code = (params.planes - 1).bit_length()
    jedec = [params.maker_id, params.device_id, 0x00,
             (planes_code << 2), 0x00, params.maker_id, params.device_id, 0x00]
    onfi = list(b"ONFI") + [0x00] * 4
    return bytes(jedec + onfi)


def parameter_page(params):
    """Return the 256-byte ONFI 1.0 parameter page of a die built with ``params``."""
    if not isinstance(params, EmuParams):
        raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
    page = bytearray(256)
    page[0:4] = b"ONFI"
    struct.pack_into("<H", page, 4, 1 << 1)  # revision: ONFI 1.0
    features = (1 << 3) if params.planes > 1 else 0  # interleaved (multi-plane) operations
    struct.pack_into("<H", page, 6, features)
    # optional commands: page cache program, read cache, get/set features, read status enhanced
    struct.pack_into("<H", page, 8, 0b1111)
    page[32:44] = params.maker.ljust(12).encode("ascii")
    page[44:64] = params.model.ljust(20).encode("ascii")
    page[64] = params.maker_id
    struct.pack_into("<IHIHII", page, 80, params.page_bytes, params.spare_bytes,
                     params.page_bytes, params.spare_bytes, params.pages_per_block,
                     params.blocks)
    page[100] = 1  # LUNs per target
    page[101] = (2 << 4) | 3  # 2 column and 3 row address cycles
    page[102] = params.bits_per_cell
    struct.pack_into("<HH", page, 103, max(params.bad_block_slots, 0), 3000)
    page[107] = 1  # guaranteed valid blocks at the beginning of the target
    page[110] = 1  # programs per page
    page[113] = params.plane_bits  # interleaved address bits
    page[128] = 10  # I/O pin capacitance (pF)
    struct.pack_into("<HH", page, 129, 1 << 0, 1 << 0)  # timing mode 0 (and cache mode 0)
    struct.pack_into("<HHHH", page, 133, params.t_prog_max_us, params.t_bers_max_us,
                     params.t_r_max_us, 500)  # tCCS 500 ns (timing mode 0)
    struct.pack_into("<H", page, 254, ONFI_CRC.compute(bytes(page[:254])))
    return bytes(page)

# rbscope: a libsigrokdecode protocol decoder for the ONFI SDR (asynchronous) NAND bus.
"""
Decodes one target's ONFI SDR bus (CE#, CLE, ALE, WE#, RE#, DQ0-7): every command, address,
data-in and data-out cycle, the commands they form (Read ID, Read Parameter Page, Read Status,
page program, read, erase, ...), the status bits, and the fields of an ONFI or JEDEC parameter
page (bytes per page, pages per block, planes, bits per cell, tPROG/tBERS/tR, the CRC).
"""

from .pd import Decoder  # noqa: F401

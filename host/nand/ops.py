"""Operation classes: what started a die's busy pulse, named once for every part of rbscope.

:class:`OpClass` is the one list of operation classes. Each class says which ONFI commands
(:class:`~rbscope.nand.onfi.Opcode`) start its busy pulse, which command opens its sequence, and
which *kind* of pulse the R/B#-only classifier knows it as (:data:`KINDS`). The opcode tap's
gateware encodes these classes (``rbscope.gateware.onfi_tap.OpClass``, the same members with an
Amaranth shape), the reference SSD tags its pulses with them, and the trained classifier maps
labelled pulses to its states through :func:`kind_of`.

:data:`WINDOW_CLASSES` is the one list of names a class *window* of the R/B# sniffer may have
(presets, geometry files, calibration, analysis): windows classify by width, so they know fewer
classes than the tap.
"""

from dataclasses import dataclass
from enum import IntEnum

from .onfi import Opcode

__all__ = ["OpClass", "OpInfo", "OPS", "CONFIRM_CLASS", "KINDS", "PROGRAM_KINDS",
           "WINDOW_CLASSES", "kind_of"]


class OpClass(IntEnum):
    """The class of operation a die's busy pulse belongs to: the command that started it."""

    NONE = 0  # no confirm command seen for this die yet
    PROGRAM = 1  # 10h
    CACHE_PROGRAM = 2  # 15h
    MP_QUEUE = 3  # 11h (multi-plane queue, tDBSY)
    ERASE = 4  # D0h
    ERASE_QUEUE = 5  # D1h (multi-plane erase queue, tDBSY)
    READ = 6  # 30h
    READ_CACHE = 7  # 31h (sequential or random cache read)
    READ_CACHE_END = 8  # 3Fh
    READ_MP = 9  # 32h (multi-plane read queue)
    COPYBACK_READ = 10  # 35h
    RESET = 11  # FFh, FCh (synchronous reset), FAh (reset LUN)
    SET_FEATURES = 12  # EFh
    GET_FEATURES = 13  # EEh
    PARAM_PAGE = 14  # ECh


#: Kinds of pulse the R/B#-only classifiers know (``rbscope.analysis.sequence`` states and
#: trained states), shortest first: tDBSY, target-wide commands, reads, cache busy (tCBSY,
#: tRCBSY), a cache program's pulse, programs, SLC-mode programs (the write cache in front of
#: TLC/QLC), erases.
KINDS = ("multiplane", "other", "read", "cache", "cache_program", "program", "program_slc",
         "erase")

#: Kinds whose pulses write pages (one page per plane per pulse for page and SLC-mode
#: programs, times Mp).
PROGRAM_KINDS = ("program", "cache_program", "program_slc")

#: Every name a class window may have (one list for presets, geometry files, calibration and
#: analysis). ``multiplane`` is tDBSY, the short busy of a multi-plane queue command (11h, D1h):
#: the window an emulator build holds from power-up has one (``rbscope.gateware.nand_emu.boot``).
WINDOW_CLASSES = ("read", "program", "erase", "cache", "reset", "multiplane")


@dataclass(frozen=True)
class OpInfo:
    """What rbscope knows of one operation class.

    Members
    -------
    confirms : tuple of Opcode
        The commands that start the class's busy pulse (the tap's confirm commands).
    first : Opcode
        The command that opens the class's sequence (the confirm itself for one-byte commands).
    kind : str
        The pulse kind (:data:`KINDS`) the R/B#-only classifiers know the class as.
    """

    confirms: tuple
    first: Opcode
    kind: str


_O = Opcode
#: Every operation class but ``NONE``: its commands and its pulse kind.
OPS = {
    OpClass.PROGRAM: OpInfo((_O.PROGRAM_CONFIRM,), _O.PROGRAM, "program"),
    OpClass.CACHE_PROGRAM: OpInfo((_O.PROGRAM_CACHE,), _O.PROGRAM, "cache_program"),
    OpClass.MP_QUEUE: OpInfo((_O.PROGRAM_MP_CONFIRM,), _O.PROGRAM, "multiplane"),
    OpClass.ERASE: OpInfo((_O.ERASE_CONFIRM,), _O.ERASE, "erase"),
    OpClass.ERASE_QUEUE: OpInfo((_O.ERASE_MP_CONFIRM,), _O.ERASE, "multiplane"),
    OpClass.READ: OpInfo((_O.READ_CONFIRM,), _O.READ, "read"),
    OpClass.READ_CACHE: OpInfo((_O.READ_CACHE_SEQ,), _O.READ_CACHE_SEQ, "read"),
    OpClass.READ_CACHE_END: OpInfo((_O.READ_CACHE_END,), _O.READ_CACHE_END, "read"),
    OpClass.READ_MP: OpInfo((_O.READ_MP,), _O.READ, "multiplane"),
    OpClass.COPYBACK_READ: OpInfo((_O.COPYBACK_READ,), _O.READ, "read"),
    OpClass.RESET: OpInfo((_O.RESET, _O.RESET_SYNC, _O.RESET_LUN), _O.RESET, "other"),
    OpClass.SET_FEATURES: OpInfo((_O.SET_FEATURES,), _O.SET_FEATURES, "other"),
    OpClass.GET_FEATURES: OpInfo((_O.GET_FEATURES,), _O.GET_FEATURES, "other"),
    OpClass.PARAM_PAGE: OpInfo((_O.READ_PARAM,), _O.READ_PARAM, "other"),
}
del _O

#: Which confirm (or busy-starting) command sets which class.
CONFIRM_CLASS = {op: cls for cls, info in OPS.items() for op in info.confirms}


def kind_of(op_class):
    """The pulse kind (:data:`KINDS`) of ``op_class`` (a class or its name); ``KeyError`` for
    ``NONE`` or a name that is no class."""
    cls = OpClass[op_class] if isinstance(op_class, str) else OpClass(op_class)
    return OPS[cls].kind

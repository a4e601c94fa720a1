"""Build-time parameters and the definitions shared by the ONFI bus tap and the host.

Nothing here elaborates gateware, so the host model, the importers and the register decoders use
these very definitions: the opcode classes, which confirm command sets which class, the counter
spaces and their index arithmetic. See ``docs/opcode_tap.md`` for the semantics.
"""

import types
from dataclasses import dataclass

from amaranth.lib import enum

from rbscope.nand import ops

from ..rb_sniffer.params import SnifferParams

__all__ = [
    "OpClass", "PlaneKind", "TapSpace", "TapParams", "TapConfig", "CONFIRM_CLASS",
    "TARGET_CLASSES", "CLASS_SLOTS", "MAX_PLANES", "RecordKind", "RecordCell",
    "decode_record_word", "RECORD_CELLS", "RECORD_ARM", "RECORD_START",
]


#: The class of operation a die's busy pulse belongs to: :class:`rbscope.nand.ops.OpClass` (the
#: one list, its members and values) as the 4-bit Amaranth enum the gateware stores and counts by.
def _op_classes(namespace):
    for op_class in ops.OpClass:
        namespace[op_class.name] = op_class.value
    namespace["__module__"] = __name__
    namespace["__doc__"] = ops.OpClass.__doc__


OpClass = types.new_class("OpClass", (enum.IntEnum,), {"shape": 4}, _op_classes)

#: Which confirm (or busy-starting) command (:class:`rbscope.nand.onfi.Opcode`) sets which class:
#: :data:`rbscope.nand.ops.CONFIRM_CLASS` in the gateware's encoding.
CONFIRM_CLASS = {opcode: OpClass(op_class) for opcode, op_class in ops.CONFIRM_CLASS.items()}

#: Classes whose command addresses the whole target (every LUN): they carry no row address.
TARGET_CLASSES = frozenset({OpClass.RESET, OpClass.SET_FEATURES, OpClass.GET_FEATURES,
                            OpClass.PARAM_PAGE})

#: Counter words per die in the per-class spaces (one per possible class value).
CLASS_SLOTS = 16

#: Most planes one multi-plane operation can count (three queued 11h/D1h, then the final one).
MAX_PLANES = 4


class PlaneKind(enum.IntEnum, shape=2):
    """Which final confirm a plane count belongs to (row of the ``PLANES`` space)."""

    PROGRAM = 0  # 10h
    CACHE_PROGRAM = 1  # 15h
    ERASE = 2  # D0h


class TapSpace(enum.IntEnum, shape=3):
    """Which counter space (or the power-up recorder) a read request addresses."""

    OPS = 0  # confirm commands per die and class: index die * 16 + class
    PLANES = 1  # final confirms per die, kind and plane count: die * 16 + kind * 4 + planes - 1
    PULSES = 2  # measured (END) busy pulses per die and class: die * 16 + class
    HIST = 3  # width histogram per class (all dies): class << bin_bits | bin
    RECORD = 4  # the power-up recorder's cells: target * record_cells + cell


class RecordKind(enum.IntEnum, shape=2):
    """The kind of bus cycle a power-up recorder cell holds."""

    CMD = 0  # WE# rising edge with CLE high
    ADDR = 1  # WE# rising edge with ALE high
    DIN = 2  # WE# rising edge with CLE and ALE low
    DOUT = 3  # RE# rising edge with CLE and ALE low (the byte the die drove)


#: Cells per target of the power-up recorder when none is given: the Read ID cycles and a
#: 512-byte JEDEC parameter page, or an ONFI page's three 256-byte copies, with room to spare.
RECORD_CELLS = 1024
#: ``record`` strobe bits (``TAP_RECORD``): re-arm every target (forget what was recorded, wait
#: for each target's next Reset), or start recording every target at once.
RECORD_ARM, RECORD_START = 1, 2

#: A recorder word's fields (a read of the ``RECORD`` space): the cell's byte (bits 0-7) and
#: kind (8-9); whether the cell holds a cycle (10: below the target's fill); the target's state,
#: recording (11) or armed (12: waiting for its first Reset); its fill, the cells it holds
#: (bits 16-28); the build's cells per target, as log2(cells) - 5 (bits 29-31; 0: no recorder,
#: whose words are all zero).
_RECORD_VALID, _RECORD_ON, _RECORD_ARMED, _RECORD_FILL, _RECORD_CELLS = 10, 11, 12, 16, 29


@dataclass(frozen=True)
class RecordCell:
    """One read of the power-up recorder (:func:`decode_record_word`).

    ``valid`` says whether ``kind`` and ``byte`` hold a recorded bus cycle; ``recording``,
    ``armed`` and ``fill`` are the target's state when it was read; ``cells`` the recorder's
    cells per target (0: the build has no recorder).
    """

    kind: RecordKind
    byte: int
    valid: bool
    recording: bool
    armed: bool
    fill: int
    cells: int = 0


def decode_record_word(word):
    """The :class:`RecordCell` of a ``RECORD`` space word."""
    code = word >> _RECORD_CELLS & 7
    return RecordCell(kind=RecordKind(word >> 8 & 3), byte=word & 0xFF,
                      valid=bool(word >> _RECORD_VALID & 1), recording=bool(word >> _RECORD_ON & 1),
                      armed=bool(word >> _RECORD_ARMED & 1),
                      fill=word >> _RECORD_FILL & 0x1FFF, cells=1 << code + 5 if code else 0)


@dataclass(frozen=True)
class TapParams:
    """Build-time parameters of the ONFI bus tap of one NAND channel.

    Parameters
    ----------
    targets : int
        CE# inputs of the channel (1 … 8).
    luns : int
        LUNs (dies) per target, 1, 2 or 4. Die ``d = target * luns + lun``.
    sniffer : SnifferParams
        Parameters of the R/B# sniffer whose trace the tap labels (histogram binning, width).
    first_channel : int
        Sniffer channel that watches die 0; die ``d`` is channel ``first_channel + d``.
    counter_bits : int
        Width of the operation and pulse counters (32 … 64; they wrap, the host diffs reads).
    hist_bits : int
        Width of a histogram bin (16 … 48; wraps).
    record_cells : int
        Bus cycles the power-up recorder keeps per target: 0 (no recorder) or a power of two
        from 64 to 4096 (default :data:`RECORD_CELLS`). See ``docs/opcode_tap.md``, "Power-up
        recorder".
    """

    targets: int = 1
    luns: int = 1
    sniffer: SnifferParams = None
    first_channel: int = 0
    counter_bits: int = 48
    hist_bits: int = 32
    record_cells: int = RECORD_CELLS

    def __post_init__(self):
        def check(name, lo, hi):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {value!r}")

        check("targets", 1, 8)
        if self.luns not in (1, 2, 4):
            raise ValueError(f"luns must be 1, 2 or 4, not {self.luns!r}")
        check("counter_bits", 32, 64)
        check("hist_bits", 16, 48)
        check("first_channel", 0, 255)
        c = self.record_cells
        if (not isinstance(c, int) or isinstance(c, bool)
                or not (c == 0 or 64 <= c <= 4096 and c & (c - 1) == 0)):
            raise ValueError(f"record_cells must be 0 or a power of two from 64 to 4096, not "
                             f"{c!r}")
        if self.sniffer is None:
            object.__setattr__(self, "sniffer", SnifferParams(channels=self.dies))
        if not isinstance(self.sniffer, SnifferParams):
            raise TypeError(f"sniffer must be a SnifferParams, not {self.sniffer!r}")
        if self.first_channel + self.dies > self.sniffer.channels:
            raise ValueError(f"the tap's {self.dies} dies from channel {self.first_channel} do "
                             f"not fit the sniffer's {self.sniffer.channels} channels")

    @property
    def dies(self):
        """Dies watched: ``targets * luns``."""
        return self.targets * self.luns

    @property
    def lun_bits(self):
        """Bits of a LUN number (0 for one LUN per target)."""
        return (self.luns - 1).bit_length()

    @property
    def die_bits(self):
        """Bits of a die number (at least 1)."""
        return max(1, (self.dies - 1).bit_length())

    @property
    def target_bits(self):
        """Bits of a target number (at least 1)."""
        return max(1, (self.targets - 1).bit_length())

    @property
    def bin_bits(self):
        """Bits of a histogram bin number."""
        return (self.sniffer.hist_bins - 1).bit_length()

    def depth(self, space):
        """Words in counter ``space`` (a power of two; the ``RECORD`` space has none without
        a recorder)."""
        if TapSpace(space) is TapSpace.HIST:
            return CLASS_SLOTS << self.bin_bits
        if TapSpace(space) is TapSpace.RECORD:
            return self.record_cells << self.target_bits
        return CLASS_SLOTS << self.die_bits

    @property
    def index_bits(self):
        """Bits of a read request's index (the largest space)."""
        return max(self.depth(s) for s in TapSpace).bit_length() - 1

    def die(self, target, lun=0):
        """Die number of ``lun`` on ``target``."""
        return target * self.luns + lun

    @staticmethod
    def class_index(die, op_class):
        """Index of (die, class) in the ``OPS`` and ``PULSES`` spaces."""
        return die * CLASS_SLOTS + int(op_class)

    @staticmethod
    def planes_index(die, kind, planes):
        """Index in the ``PLANES`` space of final confirms of ``kind`` with ``planes`` planes."""
        if not 1 <= planes <= MAX_PLANES:
            raise ValueError(f"planes must be from 1 to {MAX_PLANES}, not {planes!r}")
        return die * CLASS_SLOTS + int(PlaneKind(kind)) * MAX_PLANES + planes - 1

    def record_index(self, target, cell):
        """Index in the ``RECORD`` space of ``cell`` of ``target``."""
        if not 0 <= cell < self.record_cells:
            raise ValueError(f"cell must be from 0 to {self.record_cells - 1}, not {cell!r}")
        return target * self.record_cells + cell

    def hist_index(self, op_class, bin_):
        """Index in the ``HIST`` space of histogram ``bin_`` of ``op_class``."""
        return int(op_class) << self.bin_bits | bin_


@dataclass(frozen=True)
class TapConfig:
    """Run-time configuration of the tap.

    Parameters
    ----------
    lun_shift : int
        Bit position of the LUN number in the 24-bit row address (0 … 23); ignored with one LUN
        per target. From the parameter page: the row address holds page, block, then LUN bits.
    sniffer_tags : dict of OpClass to int
        The tag (0 … 15) the tap's ``sniffer_tag`` output gives the sniffer for each class: the
        sniffer's optional tag input counts a pulse with tag ``t`` in ``1 … K`` in its class
        ``t - 1`` whatever its width, and leaves tag 0 to its windows. Classes not given map to
        0.
    """

    lun_shift: int = 0
    sniffer_tags: dict = None

    def validate(self, params):
        """Return this configuration checked against ``params`` (``ValueError`` names the field)."""
        if not isinstance(params, TapParams):
            raise TypeError(f"params must be a TapParams, not {params!r}")
        v = self.lun_shift
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 23:
            raise ValueError(f"lun_shift must be an integer from 0 to 23, not {v!r}")
        for op_class, tag in (self.sniffer_tags or {}).items():
            try:
                OpClass(op_class)
            except ValueError:
                raise ValueError(f"sniffer_tags: {op_class!r} is not an OpClass") from None
            if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag <= 15:
                raise ValueError(f"sniffer_tags[{OpClass(op_class).name}] must be an integer "
                                 f"from 0 to 15, not {tag!r}")
        return self

    def tag_table(self):
        """The 16-entry class → sniffer tag table the gateware holds."""
        table = [0] * CLASS_SLOTS
        for op_class, tag in (self.sniffer_tags or {}).items():
            table[int(OpClass(op_class))] = tag
        return table

"""The opcode-aware bus tap's host interface: its counters and power-up recorder over the link.

The wire side is declared beside the gateware (``rbscope.gateware.onfi_tap.link``: the
``TAP_*`` registers and INFO's ``tap_targets``/``tap_luns``); this module reads the counters
through a :class:`~rbscope.device.Device`, one word per ``TAP_READ`` (``docs/opcode_tap.md``).
"""

from rbscope.gateware.onfi_tap.link import TAP, TAP_DATA_DONE, TAP_READ_GO, TAP_SPACE_SHIFT
from rbscope.gateware.onfi_tap.model import TapCounts
from rbscope.gateware.onfi_tap.params import (
    CLASS_SLOTS,
    OpClass,
    RecordKind,
    TapParams,
    TapSpace,
    decode_record_word,
)
from rbscope.recordings.onfi_bus import ADDR, CMD, DIN, DOUT, BusCycle

from .device import DeviceError, DeviceTimeout

__all__ = ["has_tap", "read_tap_word", "read_tap", "record_cycles", "record_control",
           "read_record"]


def has_tap(info):
    """Whether the device that sent INFO ``info`` has the bus tap."""
    return TAP.describe(info) is not None


def read_tap_word(dev, space, index):
    """Read one word of the bus tap's counter spaces (``TapSpace``, index as in
    ``docs/opcode_tap.md``) through ``TAP_READ``/``TAP_DATA`` (``DeviceError`` without a
    tap)."""
    dev.extension(TAP.name)
    dev.write_reg("TAP_READ", TAP_READ_GO | int(space) << TAP_SPACE_SHIFT | index)
    for _ in range(dev.retries + 1):
        hi = dev.read_reg("TAP_DATA_HI")
        if hi >> (TAP_DATA_DONE - 32) & 1:
            lo = dev.read_reg("TAP_DATA_LO")
            return (hi & ((1 << (TAP_DATA_DONE - 32)) - 1)) << 32 | lo
    raise DeviceTimeout(f"TAP_READ of space {int(space)} word {index} never completed")


def read_tap(dev):
    """Read the bus tap's per-die counters: a
    :class:`~rbscope.gateware.onfi_tap.model.TapCounts` with ``ops``, ``planes`` and ``pulses``
    (the width histogram is left at zero).

    Only for a device built with the tap (INFO ``tap_targets`` > 0; else ``DeviceError``).
    """
    link = dev.extension(TAP.name)
    tap = TapParams(targets=link.targets, luns=link.luns, sniffer=dev.params)
    counts = TapCounts.zeros(tap)
    planes = TapCounts.planes_slots()
    for die in range(tap.dies):
        for c in OpClass:
            i = die * CLASS_SLOTS + int(c)
            counts.ops[die][c] = read_tap_word(dev, TapSpace.OPS, i)
            counts.pulses[die][c] = read_tap_word(dev, TapSpace.PULSES, i)
        for slot in planes:
            counts.planes[die][slot] = read_tap_word(dev, TapSpace.PLANES,
                                                     die * CLASS_SLOTS + slot)
    return counts


def record_cycles(cells):
    """The bus cycles (:class:`rbscope.recordings.onfi_bus.BusCycle`, ``time`` None: the recorder
    keeps the order, not the time) of the power-up recorder's cells, ``{target: [RecordCell,
    …]}`` in cell order (the cells that hold no cycle are left out)."""
    kinds = {RecordKind.CMD: CMD, RecordKind.ADDR: ADDR, RecordKind.DIN: DIN,
             RecordKind.DOUT: DOUT}
    return [BusCycle(None, kinds[c.kind], 1 << t, c.byte)
            for t in sorted(cells) for c in cells[t] if c.valid]


def _recorder_cells(dev):
    """The recorder's cells per target, from its first word (``DeviceError`` without one)."""
    cells = decode_record_word(read_tap_word(dev, TapSpace.RECORD, 0)).cells
    if not cells:
        raise DeviceError("this build's bus tap has no power-up recorder (its RECORD words "
                          "read zero)")
    return cells


def record_control(dev, bits):
    """Strobe the power-up recorder: ``RECORD_ARM`` (forget the cells, wait for each target's
    next Reset) or ``RECORD_START`` (forget them, record every target now)."""
    dev.extension(TAP.name)
    _recorder_cells(dev)
    dev.write_reg("TAP_RECORD", bits)


def read_record(dev):
    """Read the power-up recorder of a device with the bus tap: ``{target: [RecordCell, …]}``,
    each target's cells up to its fill (its first cell's ``armed``, ``recording`` and ``fill``
    give its state). ``DeviceError`` for a build without a tap or without a recorder."""
    link = dev.extension(TAP.name)
    cells = _recorder_cells(dev)
    tap = TapParams(targets=link.targets, luns=link.luns, sniffer=dev.params,
                    record_cells=cells)
    out = {}
    for t in range(tap.targets):
        head = decode_record_word(read_tap_word(dev, TapSpace.RECORD, tap.record_index(t, 0)))
        cells = [head]
        for i in range(1, min(head.fill, tap.record_cells)):
            cells.append(decode_record_word(read_tap_word(dev, TapSpace.RECORD,
                                                          tap.record_index(t, i))))
        out[t] = cells
    return out

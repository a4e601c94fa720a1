"""The opcode-aware bus tap's host interface: its counters over the link.

The wire side is declared beside the gateware (``rbscope.gateware.onfi_tap.link``: the
``TAP_*`` registers and INFO's ``tap_targets``/``tap_luns``); this module reads the counters
through a :class:`~rbscope.device.Device`, one word per ``TAP_READ`` (``docs/opcode_tap.md``).
"""

from rbscope.gateware.onfi_tap.link import TAP, TAP_DATA_DONE, TAP_READ_GO, TAP_SPACE_SHIFT
from rbscope.gateware.onfi_tap.model import TapCounts
from rbscope.gateware.onfi_tap.params import CLASS_SLOTS, OpClass, TapParams, TapSpace

from .device import DeviceTimeout

__all__ = ["has_tap", "read_tap_word", "read_tap"]


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

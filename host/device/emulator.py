"""The NAND emulator's host interface: its ground truth over the link.

The wire side is declared beside the gateware (``rbscope.gateware.nand_emu.link``: the TRUTH
frame, READ_TRUTH, the registers, INFO's ``emu_*`` fields); this module reads it through a
:class:`~rbscope.device.Device`. The self-test (:mod:`rbscope.device.selftest`) is built on it.
"""

from rbscope.gateware.nand_emu.link import EMULATOR, EmuFrameType, EmuOpcode

from .protocol import frame_class

__all__ = ["Truth", "emulator_link", "read_truth"]

#: The decoded TRUTH frame: ``die``, ``timestamp`` and ``counters`` (``EmuCounter`` order).
Truth = frame_class(EmuFrameType.TRUTH)


def emulator_link(dev):
    """The device's :class:`~rbscope.gateware.nand_emu.link.EmuLink` (from its INFO);
    ``DeviceError`` when it has no emulator."""
    return dev.extension(EMULATOR.name)


def read_truth(dev):
    """Read the emulated dies' ground truth: ``{die: [counter, …]}`` in ``EmuCounter`` order.

    Only for a device built with the NAND emulator (INFO ``emu_dies`` > 0; else
    ``DeviceError``).
    """
    dies = emulator_link(dev).dies
    frames = dev.read_burst(EmuOpcode.READ_TRUTH, EmuFrameType.TRUTH, dies,
                            key=lambda frame: frame.die, what="READ_TRUTH (dies)")
    return {die: list(frame.counters) for die, frame in frames.items()}

"""The power-up configuration of an emulator build: the self-test's timing, named windows.

An emulator build (the NAND emulator in loopback, a board's ``EMULATOR=N`` or the simulated
``rbscope sim --emulator``) holds these values from power-up as the reset values of its
registers, so that its dies are busy for real times (a real NAND host controller on the
emulator's bus sees tR, tPROG and tBERS, not a ready line) and every busy pulse falls in a class
window with a name (``analyze`` needs no ``--program-class`` on a capture taken before any
``configure``). They are also what ``rbscope selftest`` writes before it runs, so a capture taken
after a self-test is named the same way.

Busy times are in ticks of :func:`prescaler` cycles: one tick spans at least one visit of the
sniffer's channel scanner to every channel, so the shortest pulse and gap are resolved exactly,
whatever the board's clock.
"""

from rbscope.nand.ops import WINDOW_CLASSES

from ..rb_sniffer.params import SnifferConfig
from .params import EmuConfig

__all__ = ["BUSY_TICKS", "PROG_JITTER", "WINDOWS", "WINDOW_NAMES", "prescaler", "emu_config",
           "sniffer_config"]

#: Busy times (ticks) of the emulated dies (:class:`~.params.BusyTime` names).
BUSY_TICKS = {"DBSY": 3, "CBSY": 6, "RCBSY": 4, "R": 12, "PROG0": 60, "PROG1": 90,
              "BERS": 220, "RST": 8, "FEAT": 3}

#: Ticks added at random (0 … 7, the jitter LFSR) to every program, lower and upper page.
PROG_JITTER = 7

#: The class windows (ticks, half-open ``[lo, hi)``), in sniffer window order, each separating
#: one kind of busy time from its neighbours with margin on both sides, jitter included; keyed by
#: the name of the class (:data:`rbscope.nand.ops.WINDOW_CLASSES`).
WINDOWS = {"multiplane": (2, 5), "cache": (5, 8), "read": (8, 24), "program": (40, 120),
           "erase": (160, 320)}

#: The windows' names, in window order.
WINDOW_NAMES = tuple(WINDOWS)

assert set(WINDOW_NAMES) <= set(WINDOW_CLASSES)

#: The jitter LFSR's seed.
SEED = 0x5E1F7E57


def prescaler(channels):
    """Return the tick (system clock cycles) of an emulator build with ``channels`` sniffer
    channels: two cycles per channel visit of the scanner, one channel more for margin."""
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ValueError(f"Channel count must be a positive integer, not {channels!r}")
    return 2 * (channels + 1)


def emu_config(emu):
    """Return the :class:`~.params.EmuConfig` of ``emu`` (an ``EmuParams``) at power-up: the busy
    times of :data:`BUSY_TICKS`, programs jittered when the build has the jitter bits, MLC page
    types (lower, upper) alternating over the block."""
    jitter = {"PROG0": PROG_JITTER, "PROG1": PROG_JITTER} if emu.jitter_bits >= 3 else {}
    config = EmuConfig(prescaler=prescaler(emu.dies), t_wb=2, times=dict(BUSY_TICKS),
                       jitter=jitter, page_types=(0, 1), seed=SEED)
    config.validate(emu)  # (raises naming the field; the times stay keyed by name)
    return config


def sniffer_config(params):
    """Return the sniffer's :class:`~rbscope.gateware.rb_sniffer.SnifferConfig` at power-up for
    a loopback build whose sniffer has ``params`` (one channel per emulated die): the emulator's
    tick, the windows of :data:`WINDOWS`, quiescent after four of the longest busy times."""
    if params.classes < len(WINDOWS):
        raise ValueError(f"an emulator build's windows need {len(WINDOWS)} classes; this "
                         f"sniffer has {params.classes}")
    longest = max(BUSY_TICKS.values()) + PROG_JITTER
    return SnifferConfig(prescaler=prescaler(params.channels), glitch_ticks=1,
                         windows=tuple(WINDOWS.values()), idle_ticks=4 * longest
                         ).validate(params)

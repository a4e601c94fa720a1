"""A board top that also drives the sync pulse train, for merging several boards' captures.

:class:`SyncOutTop` is :class:`~.top.RBScopeTop` plus a
:class:`~rbscope.gateware.sync_out.SyncPulseGenerator` on the first header pin the build leaves
spare (the pin after the R/B# ones, and after the emulator's bus or the bus tap's when they are
on the header). Every board of a multi-board capture, this one too by a wire back to one of its
inputs, records the line on an R/B# channel; ``rbscope merge`` aligns their captures by it
(``docs/capture.md``, "Several boards"; wiring: ``docs/boards.md``).

Only the ECP5 boards build it (``--sync-out``): the iCEBreaker's part is at 92 % of its logic cells
and closes 48 MHz by under a nanosecond, so it takes part by recording the line only. The default
builds have no spare pin (every header pin is an R/B# input): give one channel less
(ECPIX-5: ``--channels 63``; ULX3S: ``--channels 55``).

(A module of its own, so that the default tops' source, and so their netlists and placements,
stay as they are.)
"""

from amaranth.build import Pins, Resource
from amaranth.lib import io

from ..gateware.sync_out import SyncPulseGenerator, SyncTrainParams
from .top import BoardError, RBScopeTop

__all__ = ["SyncOutTop", "sync_pin", "sync_pin_line"]


def sync_pin(board, plan):
    """The package pin of the sync output in a build's header plan; :class:`BoardError` when
    the board cannot drive it or the plan leaves no pin spare."""
    device = getattr(board, "device", "")
    if device.startswith("iCE40"):
        raise BoardError(f"{board.board_name}: no sync output on this board (its iCE40 is at 92 % "
                         f"of its logic cells and barely meets its clock); record the sync line "
                         f"of another board on one of its R/B# inputs instead")
    if not plan.spare:
        used = len(board.header) - len(plan.spare)
        raise BoardError(f"{board.board_name}: the sync output needs a spare header pin, and the "
                         f"build uses all {used} (give --channels {len(plan.rb) - 1})")
    return plan.spare[0]


def sync_pin_line(board, plan, labels):
    """The ``--pins`` line of the sync output: ``sync out: label (package pin)``."""
    pin = sync_pin(board, plan)
    return f"sync out: {labels[pin]} ({pin})"


class SyncOutTop(RBScopeTop):
    """:class:`~.top.RBScopeTop` with the sync pulse train on the first spare header pin.

    Parameters are :class:`~.top.RBScopeTop`'s. The train's units are one clock MHz's cycles
    (1 µs at the ECP5 boards' 100 MHz), its seed :class:`SyncTrainParams`'s default.
    """

    def elaborate(self, platform):
        pin = sync_pin(platform, self.plan(platform))  # refused before anything is built
        m = super().elaborate(platform)
        platform.add_resources([Resource("sync_out", 0, Pins(pin, dir="o"),
                                         platform.io_attrs)])
        train = SyncTrainParams(max(1, round(platform.pll_hz / 1e6)))
        m.submodules.sync_out = generator = SyncPulseGenerator(train)
        # An output: the generator's flip-flop drives the pin's output buffer; the boards that
        # record it synchronise it on their R/B# inputs like any other line.
        m.submodules.sync_out_buf = buf = io.Buffer("o", platform.request("sync_out", 0,
                                                                          dir="-"))
        m.d.comb += buf.o.eq(generator.out)
        return m

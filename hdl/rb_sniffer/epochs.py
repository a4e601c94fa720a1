"""The sniffer's clear: epochs, the boot scrub and the clear scrubber.

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, sections
"The R/B# sniffer" and "Clear and epochs".
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .jobs import scrub_stop
from .layouts import EPOCH_BITS
from .params import SnifferParams

__all__ = ["Epochs"]


class Epochs(wiring.Component):
    """Start a new epoch on each clear, and scrub the RAMs behind it.

    Every counter and histogram word carries the epoch bit it was last written in; a word of
    another epoch reads as 0. A clear request waits for the slot of a job (one that is not a
    scrub job) after the last scrub has ended: that job's epoch flips (``next_epoch``), and the
    scrubber rewrites every word once, normalised, before the next flip. Every register is
    reset-less: a logic reset must not resurrect or lose counts; only ``clear`` erases them.

    Parameters
    ----------
    params : SnifferParams
    boot_scrub : bool
        The histogram powers up with random contents (the iCE40UP's SPRAM): scrub from
        power-up, writing zeros (``booting``).

    Members
    -------
    clear : In(1)
        Strobe: start a new epoch.
    slot : In(1)
        A job is arbitrated this cycle (c4).
    take_scrub : In(1)
        That job is a scrub step.
    scrub_step : In(1)
        A scrub job is in c5: the pointer advances.
    epoch : Out(EPOCH_BITS)
        The epoch number (increments on every flip, wraps).
    next_epoch : Out(1)
        The epoch bit a job arbitrated this cycle counts in (a flip applies to the job
        arbitrated with it).
    scrubbing : Out(1)
        A scrub is in progress.
    booting : Out(1)
        The boot scrub is in progress (its scrub jobs write zeros; the channels are disabled).
    scrub_ptr : Out(range(scrub_stop + 1))
        The word the next scrub job rewrites.
    clear_busy : Out(1)
        A clear is pending or its scrub in progress.
    """

    def __init__(self, params, *, boot_scrub=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.boot_scrub = bool(boot_scrub)
        super().__init__({
            "clear": In(1),
            "slot": In(1),
            "take_scrub": In(1),
            "scrub_step": In(1),
            "epoch": Out(EPOCH_BITS),
            "next_epoch": Out(1),
            "scrubbing": Out(1),
            "booting": Out(1),
            "scrub_ptr": Out(range(scrub_stop(params) + 1)),
            "clear_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        stop = scrub_stop(self.params)
        boot = self.boot_scrub
        epoch_bit = Signal(reset_less=True)
        epoch = Signal(EPOCH_BITS, reset_less=True)
        clear_pending = Signal(reset_less=True)
        scrubbing = Signal(reset_less=True, init=boot)
        booting = Signal(reset_less=True, init=boot)  # scrub writes zeros
        scrub_ptr = Signal(range(stop + 1), reset_less=True)
        m.d.comb += [
            self.epoch.eq(epoch), self.scrubbing.eq(scrubbing), self.booting.eq(booting),
            self.scrub_ptr.eq(scrub_ptr), self.clear_busy.eq(clear_pending | scrubbing),
        ]

        # The epoch a job counts in: the bit in force when it is arbitrated, carried with the
        # job to its normalisation and its writes. A flip applies to the job arbitrated with it.
        flip = Signal()
        m.d.comb += [
            flip.eq(self.slot & ~self.take_scrub & clear_pending & ~scrubbing),
            self.next_epoch.eq(epoch_bit ^ flip),
        ]
        with m.If(self.clear):
            m.d.sync += clear_pending.eq(1)
        with m.If(self.scrub_step):
            m.d.sync += scrub_ptr.eq(scrub_ptr + 1)
            with m.If(scrub_ptr == stop):
                m.d.sync += [scrubbing.eq(0), booting.eq(0)]
        with m.If(flip):
            m.d.sync += [
                clear_pending.eq(self.clear),
                epoch_bit.eq(~epoch_bit),
                epoch.eq(epoch + 1),
                scrubbing.eq(1),
                scrub_ptr.eq(0),
            ]
        return m

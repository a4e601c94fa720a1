"""What the blocks of an emulated die (:class:`~.fsm.Die`) share: enumerations, and the
collection of their ground-truth counter increments."""

import functools
import operator

from amaranth.hdl import Signal
from amaranth.lib import data, enum

from rbscope.nand.onfi import Opcode  # the ONFI opcodes the die understands: the one table

from .params import EmuCounter

__all__ = ["Opcode", "OutMode", "Phase", "Op", "Increments", "increments_layout"]


class OutMode(enum.Enum, shape=3):
    """What an RE# cycle reads."""

    NONE = 0
    STATUS = 1
    ID = 2
    PARAM = 3
    PAGE = 4
    FEAT = 5


class Phase(enum.Enum, shape=2):
    """State of the timing engine."""

    IDLE = 0  # RDY = 1
    WB = 1  # tWB: RDY = 0, R/B# still high
    WAIT = 2  # R/B# low, waiting for the array (a program after a cache program) or for reset
    BUSY = 3  # R/B# low, the busy timer runs


class Op(enum.Enum, shape=4):
    """The operation whose busy period the engine runs (what happens at its end)."""

    READ = 0
    PARAM = 1
    PROG = 2
    CACHE = 3  # 15h: at the end of tCBSY the array program starts in the background
    QUEUE = 4  # 11h / D1h: tDBSY
    RCACHE = 5
    ERASE = 6
    FEAT = 7
    RESET = 8


def increments_layout(params, counters):
    """How much each of ``counters`` grows in a cycle from one group of sources of a die (a
    field each, named after the counter, ``plane_bits + 1`` wide: at most ``planes`` pages)."""
    return data.StructLayout({c.name.lower(): params.plane_bits + 1 for c in counters})


class Increments:
    """A die block's increments of the ground-truth counters from one group of sources.

    A *group* is a set of mutually exclusive sources (the branches of one command strobe, of one
    completion, of the background program): a group's increments of a counter are OR-ed, and
    the die adds the groups' (:class:`~.fsm.Die`). Each increment is a signal named
    ``inc_<counter>_<group>``, driven with the amount in the branch that calls :meth:`count`.

    Parameters
    ----------
    m : Module
        The block's module.
    params : EmuParams
    group : str
        The group's name (``done``, ``array``, ``cmd``).
    """

    def __init__(self, m, params, group):
        self.m = m
        self.width = params.plane_bits + 1
        self.group = group
        self.incs = {}

    def count(self, counter, amount=1):
        """Add ``amount`` to ``counter`` in the cycle the enclosing branch is active."""
        sig = Signal(self.width, name=f"inc_{counter.name.lower()}_{self.group}")
        self.incs.setdefault(counter, []).append(sig)
        self.m.d.comb += sig.eq(amount)

    def drive(self, port):
        """Drive ``port`` (an :func:`increments_layout` view) with the group's increments.

        Raises ``ValueError`` unless the group counted exactly the port's counters.
        """
        counters = {c for c in EmuCounter if c.name.lower() in port.shape().members}
        if set(self.incs) != counters:
            raise ValueError(f"Group {self.group} counts {sorted(c.name for c in self.incs)}, "
                             f"its port {sorted(c.name for c in counters)}")
        for counter, sigs in self.incs.items():
            self.m.d.comb += port[counter.name.lower()].eq(functools.reduce(operator.or_, sigs))

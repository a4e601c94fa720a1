"""The ONFI pin front end: synchronise the bus inputs and turn WE#/RE# edges into strobes.

Every input passes the same two-flip-flop synchroniser, so all of them arrive with the same
delay. A command, address or data byte is latched on WE#'s rising edge; the front end takes
CLE, ALE, CE# and IO from the *last sample in which WE# was still low*. That sample lies at most
one clock period before the real edge, and the host holds the bus stable from tDS (setup)
before the edge to tDH (hold) after it, so the latched values are right whenever the clock
period is shorter than every setup time and every WE# level (timing mode 0: tDS = 40 ns,
tCLS = tALS = 50 ns, tWP = 50 ns, tWH = 30 ns; met at 48 MHz).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["BusFrontEnd"]


class BusFrontEnd(wiring.Component):
    """Synchronise the ONFI bus inputs and decode bus cycles.

    Parameters
    ----------
    dies : int
        Number of CE# inputs.

    Members
    -------
    ce_n, cle, ale, we_n, re_n, wp_n, io : In
        The bus pins, asynchronous to the clock.
    cmd, addr, din : Out(1)
        Strobes (one cycle, registered) of a command, address or data-in cycle (CLE/ALE
        decoded), one cycle after the synchronised WE# edge is seen.
    dout : Out(1)
        Strobe of an RE# rising edge (a data-out byte was taken by the host).
    sel : Out(dies)
        Dies selected (CE# low) at the strobe.
    byte : Out(8)
        IO at the strobe.
    wp : Out(1)
        WP# level, synchronised (1 = not protected).
    """

    def __init__(self, dies):
        self.dies = dies
        ones = (1 << dies) - 1
        super().__init__({
            "ce_n": In(dies, init=ones), "cle": In(1), "ale": In(1), "we_n": In(1, init=1),
            "re_n": In(1, init=1), "wp_n": In(1, init=1), "io": In(8),
            "cmd": Out(1), "addr": Out(1), "din": Out(1), "dout": Out(1),
            "sel": Out(dies), "byte": Out(8), "wp": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.dies
        pins = [
            # (pin, width, idle level)
            (self.ce_n, n, (1 << n) - 1), (self.cle, 1, 0), (self.ale, 1, 0),
            (self.we_n, 1, 1), (self.re_n, 1, 1), (self.wp_n, 1, 1), (self.io, 8, 0),
        ]
        now, last = {}, {}
        for pin, width, idle in pins:
            name = pin.name
            s = Signal(width, init=idle, name=f"{name}_s")
            p = Signal(width, init=idle, name=f"{name}_p")
            # Asynchronous pins: two flip-flops against metastability, all with the same delay
            # so that a bus cycle's CLE/ALE/IO line up with its WE# edge.
            m.submodules[f"sync_{name}"] = FFSynchronizer(pin, s, init=idle)
            m.d.sync += p.eq(s)
            now[name], last[name] = s, p

        we_rise = now["we_n"] & ~last["we_n"]
        re_rise = now["re_n"] & ~last["re_n"]
        cle, ale = last["cle"], last["ale"]
        # The strobes, byte and selects are registered (one more cycle of latency for all of
        # them alike), so that the dies' command decoders start from flip-flops.
        m.d.sync += [
            self.cmd.eq(we_rise & cle & ~ale),
            self.addr.eq(we_rise & ale & ~cle),
            self.din.eq(we_rise & ~cle & ~ale),
            self.dout.eq(re_rise & ~cle & ~ale),
            self.byte.eq(last["io"]),
        ]
        m.d.comb += self.wp.eq(now["wp_n"])
        # `sel` of a WE# strobe comes from the last low-WE# sample; for RE# that sample is as
        # good (CE# is held low through the whole bus cycle).
        m.d.sync += self.sel.eq(~last["ce_n"])
        return m

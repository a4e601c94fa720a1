"""Pin-level bus programs for the ONFI tap tests: one pin word per clock cycle.

A program is a list of pin words (bit layout ``rbscope.gateware.onfi_tap.model.PIN_*``) that a
testbench drives
cycle by cycle and that :class:`rbscope.gateware.onfi_tap.model.BusDecoder` decodes for the model.
"""

import random

from amaranth.hdl import Elaboratable

from rbscope.gateware.onfi_tap.model import PIN_ALE, PIN_CE, PIN_CLE, PIN_IO, PIN_WE


class BusProgram:
    """Build a bus waveform cycle by cycle.

    Parameters
    ----------
    targets : int
    rng : random.Random, optional
        When given, WE# levels last 1-3 cycles at random; otherwise ``hold`` cycles.
    """

    def __init__(self, targets, rng=None, hold=2):
        self.targets = targets
        self.rng = rng
        self.hold = hold
        self.ce = (1 << targets) - 1  # CE# levels (1 = deselected)
        self.words = []

    def _word(self, we, cle=0, ale=0, io=0):
        return (we << PIN_WE | cle << PIN_CLE | ale << PIN_ALE | (io & 0xFF) << PIN_IO
                | self.ce << PIN_CE)

    def _hold(self):
        return self.rng.randint(1, 3) if self.rng else self.hold

    def select(self, *targets):
        self.ce = (1 << self.targets) - 1
        for t in targets:
            self.ce &= ~(1 << t)
        self.words.append(self._word(1))

    def idle(self, n=1):
        self.words += [self._word(1)] * n

    def cycle(self, byte, cle=0, ale=0):
        self.words += [self._word(0, cle, ale, byte)] * self._hold()
        self.words += [self._word(1, cle, ale, byte)] * self._hold()

    def cmd(self, byte):
        self.cycle(byte, cle=1)

    def addr(self, *data):
        for b in data:
            self.cycle(b, ale=1)

    def din(self, n):
        for _ in range(n):
            self.cycle(self.rng.randrange(256) if self.rng else 0x5A)


def random_program(targets, luns, lun_shift, length, seed):
    """A random mix of ONFI command sequences (and noise) over ``length`` cycles at least."""
    rng = random.Random(seed)
    prog = BusProgram(targets, rng)
    prog.idle(3)

    def row(lun):
        r = rng.randrange(1 << 16) & ~(((luns - 1) or 0) << lun_shift)
        r |= lun << lun_shift
        return [r & 0xFF, r >> 8 & 0xFF, r >> 16 & 0xFF]

    while len(prog.words) < length:
        t = rng.randrange(targets)
        if rng.random() < 0.05 and targets > 1:
            prog.select(*rng.sample(range(targets), 2))
        else:
            prog.select(t)
        lun = rng.randrange(luns)
        kind = rng.randrange(12)
        if kind == 0:  # program, maybe multi-plane, maybe cache
            for _ in range(rng.randrange(3)):
                prog.cmd(0x80)
                prog.addr(0, 0, *row(lun))
                prog.din(rng.randrange(3))
                prog.cmd(0x11)
            prog.cmd(0x80)
            prog.addr(0, 0, *row(lun))
            prog.din(rng.randrange(4))
            prog.cmd(rng.choice((0x10, 0x15)))
        elif kind == 1:  # erase, maybe multi-plane
            for _ in range(rng.randrange(3)):
                prog.cmd(0x60)
                prog.addr(*row(lun))
                prog.cmd(0xD1)
            prog.cmd(0x60)
            prog.addr(*row(lun))
            prog.cmd(0xD0)
        elif kind == 2:
            prog.cmd(0x00)
            prog.addr(0, 0, *row(lun))
            prog.cmd(rng.choice((0x30, 0x31, 0x32, 0x35)))
        elif kind == 3:
            prog.cmd(rng.choice((0x31, 0x3F)))
        elif kind == 4:
            prog.cmd(0x78)
            prog.addr(*row(lun))
            prog.cmd(0x70)
        elif kind == 5:
            prog.cmd(rng.choice((0xFF, 0xFC)))
        elif kind == 6:
            prog.cmd(0xEF)
            prog.addr(0x01)
            prog.din(4)
        elif kind == 7:
            prog.cmd(rng.choice((0xEE, 0xEC, 0x90)))
            prog.addr(0x00)
        elif kind == 8:
            prog.cmd(rng.choice((0xF1, 0xF2)))
        elif kind == 9:
            prog.cmd(0x05)
            prog.addr(0, 0)
            prog.cmd(0xE0)
        elif kind == 10:  # noise: a random byte in a random cycle type
            prog.cycle(rng.randrange(256), cle=rng.randrange(2), ale=rng.randrange(2))
        else:
            prog.idle(rng.randrange(1, 5))
    prog.select()
    prog.idle(4)
    return prog.words


class TapRig(Elaboratable):
    """An emulator, a sniffer watching its dies and the tap watching its bus (loopback).

    The emulator's pins are exposed under their own names, so
    :class:`tests.nand_emu_harness.EmuBench` drives the rig as it drives a bare emulator.
    """

    def __init__(self, emu_params, windows):
        from amaranth.hdl import Module

        from rbscope.gateware.nand_emu import NandEmulator
        from rbscope.gateware.onfi_tap import OnfiTap, TapParams
        from rbscope.gateware.rb_sniffer import RBSniffer, SnifferParams

        self.params = emu_params
        self.emu = NandEmulator(emu_params)
        self.snf_params = SnifferParams(channels=emu_params.dies)
        self.snf = RBSniffer(self.snf_params)
        self.tap_params = TapParams(targets=emu_params.dies, sniffer=self.snf_params)
        self.tap = OnfiTap(self.tap_params)
        self.windows = windows
        for name in ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n", "io_i", "io_o", "io_oe",
                     "rb", "die_rb", "cfg", "read_req", "read_resp"):
            setattr(self, name, getattr(self.emu, name))
        m = self.module = Module()
        m.submodules.emu, m.submodules.snf, m.submodules.tap = self.emu, self.snf, self.tap
        tap = self.tap
        # The tap only listens: every connection goes from the bus into the tap.
        m.d.comb += [
            tap.ce_n.eq(self.emu.ce_n), tap.cle.eq(self.emu.cle), tap.ale.eq(self.emu.ale),
            tap.we_n.eq(self.emu.we_n), tap.io.eq(self.emu.io_i),
            tap.rb.eq(self.emu.die_rb), self.snf.rb.eq(self.emu.die_rb),
            tap.trace.valid.eq(self.snf.trace.valid),
            tap.trace.payload.eq(self.snf.trace.payload),
        ]

    def elaborate(self, platform):
        return self.module


def rig_bench(rig, hold=2, record=None):
    """An :class:`EmuBench` driving ``rig`` (a :class:`TapRig`) instead of a bare emulator.

    With ``record`` (a list), every clock edge appends ``(pin word, die R/B# bits)``: what a
    logic analyser sampling at the clock would record.
    """
    from .nand_emu_harness import EmuBench

    class RigBench(EmuBench):
        def __init__(self):  # no emulator of its own: the rig's is driven
            self.params, self.dut, self.hold, self.die = rig.params, rig, hold, 0

        def simulator(self):
            sim = super().simulator()
            if record is not None:
                emu = rig.emu

                async def monitor(ctx):
                    pins = (emu.we_n, emu.cle, emu.ale, emu.io_i, emu.ce_n, emu.die_rb)
                    async for _, _, we, cle, ale, io, ce, rb in ctx.tick().sample(*pins):
                        record.append((we << PIN_WE | cle << PIN_CLE | ale << PIN_ALE
                                       | io << PIN_IO | ce << PIN_CE, rb))

                sim.add_process(monitor)
            return sim

    return RigBench()


def write_recording(f, record, dies, targets):
    """Write a recording from :func:`rig_bench` as a VCD (1 ns per cycle) with named signals."""
    from rbscope.gateware.rb_sniffer.model import Train
    from rbscope.recordings.vcd import write_vcd

    names = [f"RB{d}" for d in range(dies)] + ["WE", "CLE", "ALE"]
    names += [f"DQ{i}" for i in range(8)] + [f"CE{t}" for t in range(targets)]
    sources = [(1, d) for d in range(dies)] + [(0, PIN_WE), (0, PIN_CLE), (0, PIN_ALE)]
    sources += [(0, PIN_IO + i) for i in range(8)] + [(0, PIN_CE + t) for t in range(targets)]
    trains = []
    for which, bit in sources:
        levels = [(r[which] >> bit) & 1 for r in record]
        edges = [(c, lv) for c, lv in enumerate(levels) if c and lv != levels[c - 1]]
        trains.append(Train(levels[0], edges))
    write_vcd(f, trains, names=names, end=len(record))
    return names

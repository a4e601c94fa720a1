"""Single-port RAM for the sniffer's histogram: a generic memory, or the iCE40UP's SPRAM.

The histogram needs one access per clock cycle: the pipeline reads a bin on one cycle and writes
it back three cycles later, and reads and writes fall on cycles of opposite parity, so one port is
enough. The read data is registered before anything uses it (two cycles of read latency): on the
ECP5 a block RAM's output is slow (5.6 ns clock-to-out on a -6 part), so a deep RAM is built of
banks of :data:`BANK_DEPTH` words, each with its own output register, and only the registered
words are joined by the multiplexer. One port lets the iCE40UP5K hold the histogram in its four
256-kbit single-port RAMs (``SB_SPRAM256KA``, 16 bits × 16 384 words each) rather than in 22 of
its 30 block RAMs.

Yosys does not infer SPRAM reliably, so :class:`SinglePortRAM` instantiates it explicitly when
built with ``kind="spram"``; ``kind="memory"`` (simulation, ECP5, other parts) uses
:class:`amaranth.lib.memory.Memory`. SPRAM powers up with random contents: the sniffer scrubs it
at boot (``docs/architecture.md``, "Clear and epochs").
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["RAM_KINDS", "SPRAM_WIDTH", "SPRAM_DEPTH", "BANK_DEPTH", "SPRAMSignature",
           "SinglePortRAM", "pick_ram_kind", "spram_instance", "scrambled_read"]

#: Implementations of :class:`SinglePortRAM`.
RAM_KINDS = ("memory", "spram")

#: Data width and depth of one ``SB_SPRAM256KA``.
SPRAM_WIDTH = 16
SPRAM_DEPTH = 16384

#: Words per bank of a ``kind="memory"`` RAM: one ECP5 DP16KD deep (1024 × 18). Each bank's read
#: data is registered on its own, next to its block RAM, before the banks are multiplexed.
BANK_DEPTH = 1024


def pick_ram_kind(kind, platform, depth):
    """Resolve ``kind="auto"`` for a platform: SPRAM on an iCE40UP when ``depth`` words fit it.

    Any other ``kind`` is returned as it is. ``platform`` is what ``elaborate`` receives (None in
    simulation and Verilog export); its ``device`` names the part.
    """
    if kind != "auto":
        return kind
    device = str(getattr(platform, "device", ""))
    return "spram" if device.startswith("iCE40UP") and depth <= SPRAM_DEPTH else "memory"


def scrambled_read(m, name, rd, wr):
    """The read data of the memory port ``rd``, complemented on the cycle after its read met a
    write of the port ``wr`` to its address.

    A simulation aid for a collision-free memory (named with
    :data:`~rbscope.gateware.synthesis.COLLISION_FREE`), whose reads that meet a write of their
    address may return anything on the iCE40: a simulation then shows such a read if it is used
    (see the sniffer's ``scramble_collisions``).
    """
    met = Signal(name=f"{name}_met")
    m.d.sync += met.eq(wr.en & (wr.addr == rd.addr))
    data_ = Signal(len(rd.data.as_value()), name=f"{name}_seen")
    m.d.comb += data_.eq(Mux(met, ~rd.data.as_value(), rd.data.as_value()))
    return data_


class SPRAMSignature(wiring.Signature):
    """The ports of one ``SB_SPRAM256KA`` (less its clock), as seen by the block.

    ``poweroff`` is active low (1 = powered), ``maskwren`` enables the four nibbles of a write.
    """

    def __init__(self):
        super().__init__({
            "address": In(14), "datain": In(SPRAM_WIDTH), "maskwren": In(4), "wren": In(1),
            "chipselect": In(1), "standby": In(1), "sleep": In(1), "poweroff": In(1),
            "dataout": Out(SPRAM_WIDTH),
        })


class _SPRAMPrimitive(wiring.Component):
    """One ``SB_SPRAM256KA`` instance on the ``sync`` clock."""

    def __init__(self):
        super().__init__(SPRAMSignature())

    def elaborate(self, platform):
        m = Module()
        m.submodules.spram = Instance(
            "SB_SPRAM256KA",
            i_ADDRESS=self.address, i_DATAIN=self.datain, i_MASKWREN=self.maskwren,
            i_WREN=self.wren, i_CHIPSELECT=self.chipselect, i_CLOCK=ClockSignal(),
            i_STANDBY=self.standby, i_SLEEP=self.sleep, i_POWEROFF=self.poweroff,
            o_DATAOUT=self.dataout,
        )
        return m


def spram_instance():
    """Return one ``SB_SPRAM256KA`` primitive (the default block of :class:`SinglePortRAM`)."""
    return _SPRAMPrimitive()


class SinglePortRAM(wiring.Component):
    """A RAM with one address: a read, or a write, per cycle; reads take two cycles.

    Parameters
    ----------
    width, depth : int
        Word width and number of words.
    kind : str
        ``"memory"`` for a generic :class:`Memory` (simulation, ECP5, …); ``"spram"`` for
        ``ceil(width / 16)`` iCE40UP ``SB_SPRAM256KA`` blocks side by side (``depth`` at most
        16 384).
    spram_block : callable, optional
        With ``kind="spram"``, makes one block with :class:`SPRAMSignature` (default
        :func:`spram_instance`); a simulation model can stand in for the primitive.

    Members
    -------
    addr : In(range(depth))
    we : In(1)
        Write ``wdata`` to ``addr`` this cycle (else read ``addr``).
    wdata : In(width)
    rdata : Out(width)
        The word whose address was presented (with ``we`` low) two cycles earlier. It is
        registered the cycle after the read, so that cycle may be a write.
    """

    def __init__(self, width, depth, *, kind="memory", spram_block=None):
        if kind not in RAM_KINDS:
            raise ValueError(f"RAM kind must be one of {', '.join(RAM_KINDS)}, not {kind!r}")
        if kind == "spram" and depth > SPRAM_DEPTH:
            raise ValueError(f"an SPRAM holds at most {SPRAM_DEPTH} words, not {depth}")
        self.width, self.depth, self.kind = width, depth, kind
        self.spram_block = spram_instance if spram_block is None else spram_block
        super().__init__({
            "addr": In(range(depth)), "we": In(1), "wdata": In(width), "rdata": Out(width),
        })

    @property
    def blocks(self):
        """Number of SPRAM blocks a ``kind="spram"`` build uses."""
        return -(-self.width // SPRAM_WIDTH)

    @property
    def banks(self):
        """Number of :data:`BANK_DEPTH`-word banks a ``kind="memory"`` build uses."""
        return -(-self.depth // BANK_DEPTH)

    def elaborate(self, platform):
        m = Module()
        if self.kind == "memory":
            bank_depth = min(self.depth, BANK_DEPTH)
            bank_bits = (bank_depth - 1).bit_length()
            held = []
            for b in range(self.banks):
                words = min(bank_depth, self.depth - b * bank_depth)
                m.submodules[f"bank_{b}"] = mem = Memory(shape=self.width, depth=words, init=[])
                rd = mem.read_port()
                wr = mem.write_port()
                mine = (self.addr >> bank_bits) == b if self.banks > 1 else 1
                m.d.comb += [
                    rd.addr.eq(self.addr[:bank_bits]), rd.en.eq(~self.we),
                    wr.addr.eq(self.addr[:bank_bits]), wr.en.eq(self.we & mine),
                    wr.data.eq(self.wdata),
                ]
                # The bank's read data, registered next to its RAM (the RAM's output is slow).
                q = Signal(self.width, name=f"bank_{b}_q", reset_less=True)
                m.d.sync += q.eq(rd.data)
                held.append(q)
            if len(held) == 1:
                m.d.comb += self.rdata.eq(held[0])
            else:
                # The bank of the read, two cycles late, picks among the registered words.
                sel = Signal(range(self.banks), reset_less=True)
                sel_next = Signal(range(self.banks), reset_less=True)
                m.d.sync += [sel_next.eq(self.addr >> bank_bits), sel.eq(sel_next)]
                with m.Switch(sel):
                    for b, q in enumerate(held):
                        with m.Case(b):
                            m.d.comb += self.rdata.eq(q)
            return m
        wdata = Cat(self.wdata, Const(0, self.blocks * SPRAM_WIDTH - self.width))
        outs = []
        for k in range(self.blocks):
            block = self.spram_block()
            m.submodules[f"spram_{k}"] = block
            m.d.comb += [
                block.address.eq(self.addr), block.datain.eq(wdata.word_select(k, SPRAM_WIDTH)),
                block.maskwren.eq(Mux(self.we, 0b1111, 0)), block.wren.eq(self.we),
                block.chipselect.eq(1), block.standby.eq(0), block.sleep.eq(0),
                block.poweroff.eq(1),
            ]
            outs.append(block.dataout)
        # DATAOUT is valid on the cycle after a read only: hold it.
        q = Signal(self.width, reset_less=True)
        m.d.sync += q.eq(Cat(*outs)[:self.width])
        m.d.comb += self.rdata.eq(q)
        return m

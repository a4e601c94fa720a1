"""What an emulated die drives when the host reads (RE# low).

Part of the :class:`~.fsm.Die`.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .die_common import OutMode
from .onfi_rom import id_bytes, parameter_page

__all__ = ["DataOutput"]


class DataOutput(wiring.Component):
    """The byte an RE# cycle reads: the status, an ID byte, the parameter page, a page byte or
    a feature, as the command decoder's ``out_mode`` says.

    The parameter page is a ROM read for the column and for the next one (two read ports);
    ``col_stepped`` picks the one that is current, so that no decoding sits in front of the
    ROM's address (see the command decoder).

    Parameters
    ----------
    params : EmuParams

    Members
    -------
    out_mode : In(OutMode)
        What RE# cycles read (``NONE``: the die drives nothing).
    status : In(8)
        The status register.
    col : In(col_bits)
        The column.
    col_stepped : In(1)
        The column moved to the next byte in the previous cycle.
    id_sel : In(1)
        READ ID's address was 20h (the ONFI signature), not 00h.
    feat_addr : In(8)
        The feature address of GET FEATURES.
    features : In(ArrayLayout(8, 4))
        Feature 01h's parameters.
    page_byte : In(8)
        The page byte at the column.
    out_bad, out_erased : In(1)
        The page's block is bad (reads 00h); the page is erased (reads FFh).
    data_out : Out(8)
        The byte the die drives when the host pulls RE# low.
    data_out_en : Out(1)
        The die has something to output.
    """

    def __init__(self, params):
        self.params = params
        super().__init__({
            "out_mode": In(OutMode),
            "status": In(8),
            "col": In(max(params.col_bits, 10)),
            "col_stepped": In(1),
            "id_sel": In(1),
            "feat_addr": In(8),
            "features": In(data.ArrayLayout(8, 4)),
            "page_byte": In(8),
            "out_bad": In(1),
            "out_erased": In(1),
            "data_out": Out(8),
            "data_out_en": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        col = self.col
        features = Array(self.features[i] for i in range(4))
        m.submodules.param_rom = prom = Memory(shape=8, depth=256,
                                               init=list(parameter_page(p)))
        prom_rd = prom.read_port()
        prom_next = prom.read_port()
        prom_byte = Signal(8)
        m.d.comb += [
            prom_rd.addr.eq(col[:8]),
            prom_next.addr.eq((col + 1)[:8]),
            prom_byte.eq(Mux(self.col_stepped, prom_next.data, prom_rd.data)),
        ]
        id_rom = Array(Const(b, 8) for b in id_bytes(p))
        m.d.comb += self.data_out_en.eq(self.out_mode != OutMode.NONE)
        with m.Switch(self.out_mode):
            with m.Case(OutMode.STATUS):
                m.d.comb += self.data_out.eq(self.status)
            with m.Case(OutMode.ID):
                m.d.comb += self.data_out.eq(id_rom[Cat(col[:3], self.id_sel)])
            with m.Case(OutMode.PARAM):
                m.d.comb += self.data_out.eq(prom_byte)
            with m.Case(OutMode.PAGE):
                m.d.comb += self.data_out.eq(Mux(self.out_bad, 0x00,
                                                 Mux(self.out_erased, 0xFF, self.page_byte)))
            with m.Case(OutMode.FEAT):
                m.d.comb += self.data_out.eq(
                    Mux((self.feat_addr == 0x01) & (col < 4), features[col[:2]], 0))
        return m

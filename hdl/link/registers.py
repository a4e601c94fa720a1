"""The link's register file: what register reads answer from, and the flip-flops writes set.

Part of the :class:`~.controller.LinkController`: the :class:`~.commands.CommandUnit` addresses
a register with the command's address, reads its entry and writes it through this block.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rb_sniffer.layouts import config_layout
from ..synthesis import COLLISION_FREE
from . import protocol

__all__ = ["RegisterFile", "entry_layout"]


#: An entry of the register file RAM: the register's value as written, the mask of its bits
#: (the RAM's bit write enable), its address, and whether it exists and is writable.
entry_layout = data.StructLayout({"value": 32, "mask": 32, "address": 16, "valid": 1,
                                  "writable": 1})


class RegisterFile(wiring.Component):
    """The registers of the link: a RAM that reads answer from, and the registers' flip-flops.

    Link-level registers, and the extension's (bound to its ports). Registers keep their values
    through a logic reset (like the counters): the register file RAM that reads them back is not
    reset either, so the two always agree.

    A command's register index (the address bits that tell the registers apart) is registered
    as it arrives (``select``), and the RAM's entry at that index is on ``entry`` from the next
    cycle on (``value``, ``mask``, ``address``, ``valid``, ``writable``: the command unit checks
    the command's address against it). The RAM keeps a copy of every register as written; only
    the read-only registers bound to a port of an extension are read live (a registered
    multiplexer, loaded by ``lookup``; empty without an extension). A write (``write``, a
    strobe) goes to the RAM and to the register's flip-flops the cycle after, from a registered
    strobe.

    The two periods (``SNAPSHOT_PERIOD``, ``HIST_PERIOD``) are not held here: they are kept in
    the :class:`~.timer.SnapshotTimer`'s block RAM, which their write strobes
    (``snapshot_period_write``, ``hist_period_write``) write.

    Parameters
    ----------
    params : SnifferParams
    registers : list of protocol.Register
        The link's registers (:func:`~.controller.link_registers`); their resets are the
        power-up values.
    extension : LinkExtension
        The ports its registers bind to.

    Members
    -------
    address : In(16)
        The command's register address.
    value : In(32)
        The command's value: what a write writes.
    select : In(1)
        Register the index of ``address`` (the RAM's address from the next cycle on).
    lookup : In(1)
        Register the live value of ``address`` (a read-only port of the extension), if it is
        one (``read_value`` then gives it).
    write : In(1)
        Strobe: write ``value`` to the register selected (its address known good). The RAM and
        the register's flip-flops are written in the next cycle; the RAM reads the new value
        back two cycles after that.
    entry : Out(entry_layout)
        The register file RAM's entry at the selected index.
    read_value : Out(32)
        The register's value: live (after ``lookup``) or the RAM's.
    cfg : Out(config_layout)
        The sniffer's configuration registers.
    trace_enable : Out(1)
        The ``TRACE_ENABLE`` register.
    win_load : Out(2 * classes)
        A strobe per class-window register (``WINDOW_k_LO`` at bit ``2k``, ``WINDOW_k_HI`` at
        ``2k + 1``) in the cycle it is written.
    win_data : Out(width_bits)
        The value written, beside ``win_load``.
    snapshot_period_write, hist_period_write : Out(1)
        Strobes: ``SNAPSHOT_PERIOD``, ``HIST_PERIOD`` written (``value``), in the cycle it is.
    <port> : one per :class:`~.extension.ExtPort` of the extension (an ``Out`` held here for a
        read-write register, an ``In`` for a read-only one).
    """

    def __init__(self, params, registers, *, extension):
        self.params = params
        self.registers = list(registers)
        self.extension = extension
        ports = {}
        for port in extension.ports:
            ports[port.port_name] = (Out(port.width, init=port.reset)
                                     if port.access is protocol.Access.RW else In(port.width))
        super().__init__({
            **ports,
            "address": In(16),
            "value": In(32),
            "select": In(1),
            "lookup": In(1),
            "write": In(1),
            "entry": Out(entry_layout),
            "read_value": Out(32),
            "cfg": Out(config_layout(params)),
            "trace_enable": Out(1),
            **({"trace_summary": Out(params.classes + 1)}
               if any(r.field == "link.trace_summary" for r in registers) else {}),
            "win_load": Out(2 * params.classes),
            "win_data": Out(params.width_bits),
            "snapshot_period_write": Out(1),
            "hist_period_write": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        ext = self.extension

        # The signals the registers read and write. The periods have none: they are kept in the
        # timer's block RAM (these two placeholders only give their registers' widths).
        link = {
            "link.id": Const(protocol.ID_MAGIC, 32),
            "link.snapshot_period": Signal(32, name="snapshot_period_target"),
            "link.hist_period": Signal(16, name="hist_period_target"),
            "link.trace_enable": Signal(reset_less=True, name="trace_enable"),
        }
        m.d.comb += self.trace_enable.eq(link["link.trace_enable"])
        if any(r.field == "link.trace_summary" for r in self.registers):
            # (Only in the trace summariser's builds.)
            link["link.trace_summary"] = Signal(p.classes + 1, reset_less=True,
                                                name="trace_summary")
            m.d.comb += self.trace_summary.eq(link["link.trace_summary"])
        strobes = []
        for port in ext.ports:
            signal = getattr(self, port.port_name)
            if port.access is protocol.Access.RW:
                held = Signal(port.width, init=port.reset, name=f"reg_{port.port_name}",
                              reset_less=not port.strobe)
                m.d.comb += signal.eq(held)
                link[port.field] = held
                if port.strobe:
                    # A pair of strobes: a write sets it for one cycle (the write statement
                    # below overrides this clear).
                    strobes.append(held)
            else:
                link[port.field] = signal
        m.d.sync += [held.eq(0) for held in strobes]
        # The sniffer's configuration registers, initialised from the register map's resets.
        layout = config_layout(p)
        init_value = 0
        for reg in self.registers:
            if reg.field not in link:
                width = min(32, _field_width(p, reg) - reg.shift)
                init_value |= (reg.reset & ((1 << width) - 1)) << _cfg_offset(p, reg)
        cfg_reg = layout(Signal(layout.size, init=init_value, name="cfg_reg", reset_less=True))
        m.d.comb += self.cfg.eq(cfg_reg)
        targets = {reg.address: (reg, _register_target(reg, cfg_reg, link))
                   for reg in self.registers}

        # The register file RAM. (A write is read back two cycles later: what the read port
        # returns in the cycle of the write is never used.)
        regfile = _RegisterFileRam(targets, ext)
        m.submodules["regfile" + COLLISION_FREE] = regfile_mem = regfile.memory()
        rf_rd = regfile_mem.read_port()
        rf_wr = regfile_mem.write_port(granularity=1)
        rf_index = Signal(len(regfile.index(self.address)))
        with m.If(self.select):
            m.d.sync += rf_index.eq(regfile.index(self.address))
        m.d.comb += [rf_rd.addr.eq(rf_index), rf_wr.addr.eq(rf_index),
                     rf_wr.data.eq(self.value)]
        rf_entry = entry_layout(rf_rd.data)
        m.d.comb += self.entry.eq(rf_entry)

        # The live registers (read-only ports of the extension), registered.
        live_value = Signal(32)
        live = Signal()
        with m.If(self.lookup):
            m.d.sync += [live_value.eq(0), live.eq(0)]
            with m.Switch(self.address):
                for address, (reg, target) in targets.items():
                    if regfile.is_live(reg):
                        with m.Case(address):
                            m.d.sync += [live_value.eq(target), live.eq(1)]
        m.d.comb += self.read_value.eq(Mux(live, live_value, rf_entry.value))

        # A register's flip-flops are written with the register file (in WRITTEN, from a
        # registered strobe: no long path from the command to their enables), with one enable
        # each: the address is known good, so its index is enough to tell the register.
        reg_write_q = Signal()
        m.d.sync += reg_write_q.eq(self.write)
        m.d.comb += rf_wr.en.eq(Mux(reg_write_q, rf_entry.mask, 0))
        for address, (reg, target) in targets.items():
            if reg.access is protocol.Access.RW:
                write = Signal(name=f"write_{reg.name.lower()}")
                m.d.comb += write.eq(reg_write_q & (rf_index == regfile.entry(address)))
                if reg.field.startswith("windows."):
                    _, k, edge = reg.field.split(".")
                    m.d.comb += self.win_load[2 * int(k) + (edge == "hi")].eq(write)
                if reg.field == "link.snapshot_period":
                    m.d.comb += self.snapshot_period_write.eq(write)
                elif reg.field == "link.hist_period":
                    m.d.comb += self.hist_period_write.eq(write)
                else:
                    with m.If(write):
                        m.d.sync += target.eq(self.value)
        m.d.comb += self.win_data.eq(self.value[:p.width_bits])
        return m


def _register_target(reg, cfg, link):
    """The signal slice a register reads and writes."""
    if reg.field in link:
        target = link[reg.field]
        return target[reg.shift:reg.shift + 32] if len(target) > 32 else target
    value = cfg
    for part in reg.field.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    value = value.as_value() if hasattr(value, "as_value") else value
    return value[reg.shift:reg.shift + 32]


def _field_width(params, reg):
    """The width of the sniffer configuration field that register ``reg`` is part of."""
    shape = config_layout(params)
    for part in reg.field.split("."):
        shape = shape.elem_shape if part.isdigit() else shape[part].shape
    return data.Layout.cast(shape).size if isinstance(shape, data.Layout) else \
        data.Shape.cast(shape).width


def _cfg_offset(params, reg):
    """The offset of register ``reg``'s bits in the sniffer's configuration."""
    layout = config_layout(params)
    offset = 0
    shape = layout
    for part in reg.field.split("."):
        if part.isdigit():
            offset += int(part) * data.Layout.cast(shape.elem_shape).size
            shape = shape.elem_shape
        else:
            field = shape[part]
            offset += field.offset
            shape = field.shape
    return offset + reg.shift


class _RegisterFileRam:
    """The register file RAM's contents: what register reads come from.

    One entry per register, at an index made of the address bits that tell the registers apart
    (``index``), holding the register's value as written, its address (a bad address that shares
    a register's index reads as bad), whether it is writable, and the mask of its bits, which is
    the RAM's bit write enable (so a register narrower than 32 bits reads back truncated, and a
    strobe reads back 0). The register's flip-flops (the sniffer's ``cfg``, the link settings,
    an extension's ports) are written at the same time; a read costs no multiplexer over them.

    Parameters
    ----------
    targets : dict
        ``{address: (Register, target value)}`` as the register file binds them.
    ext : LinkExtension
    """

    def __init__(self, targets, ext):
        self.targets = targets
        self._strobes = {port.field for port in ext.ports if port.strobe}
        self._live = {port.field for port in ext.ports if port.access is protocol.Access.RO}
        addresses = list(targets)
        bits = [b for b in range(16) if len({(a >> b) & 1 for a in addresses}) > 1]
        for bit in list(reversed(bits)):  # keep only the bits needed to tell them apart
            trial = [b for b in bits if b != bit]
            if len({self._pick(a, trial) for a in addresses}) == len(addresses):
                bits = trial
        self.bits = bits
        self.depth = 1 << max(1, len(bits))

    @staticmethod
    def _pick(address, bits):
        return sum(((address >> b) & 1) << i for i, b in enumerate(bits))

    def entry(self, address):
        """The entry of register ``address`` (an integer)."""
        return self._pick(address, self.bits)

    def index(self, address):
        """The entry of ``address`` (a 16-bit value)."""
        return Cat(*(address[b] for b in self.bits)) if self.bits else Const(0, 1)

    def is_live(self, reg):
        """Whether register ``reg`` is read live from a port rather than from the RAM."""
        return reg.field in self._live

    def memory(self):
        init = [0] * self.depth
        for address, (reg, target) in self.targets.items():
            writable = reg.access is protocol.Access.RW
            width = len(target)
            if isinstance(target, Const):
                value = target.value
            elif reg.field in self._strobes or self.is_live(reg):
                value = 0
            else:
                value = reg.reset & ((1 << width) - 1)
            mask = (1 << width) - 1 if writable and reg.field not in self._strobes else 0
            init[self._pick(address, self.bits)] = entry_layout.const({
                "value": value, "mask": mask, "address": address, "valid": 1,
                "writable": writable}).as_value().value
        return Memory(shape=entry_layout.size, depth=self.depth, init=init)

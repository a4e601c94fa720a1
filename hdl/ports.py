"""The Verilog ports of rbscope's top-level designs, read from their Amaranth signatures.

One source for the port reference (``docs/ports.md``, :func:`reference`), the Verilog clock
wrapper (:func:`rbscope.gateware.export.clock_wrapper`) and anything else that needs the
flattened names, widths, directions and bit maps of a top: the same ``wiring.Signature`` and
``data.Struct`` layouts that build the gateware.

``python -m rbscope.cli.ports [FILE]`` writes the reference (default: stdout);
``--check FILE`` exits 1 if FILE differs from what would be written.
"""

import dataclasses
import enum as py_enum
import inspect
import re

from amaranth.hdl import Shape
from amaranth.lib import data, wiring

__all__ = ["Port", "Field", "ports_of", "fields_of", "members_doc", "reference"]


@dataclasses.dataclass(frozen=True)
class Port:
    """One Verilog port of a top.

    Members
    -------
    name : str
        The flattened Verilog name (``read_req__payload``: members joined with ``__``).
    direction : str
        ``"input"`` or ``"output"``.
    width : int
    shape : object
        The Amaranth shape (an int width, a ``data.Layout`` or an enum).
    member : str
        The first member of the path (``read_req``), under which the component documents it.
    """

    name: str
    direction: str
    width: int
    shape: object
    member: str


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a packed port: ``name`` at bits ``[offset + width - 1 : offset]``.

    For an array, ``name`` holds ``[k]`` and the offset is that of element 0; element ``k`` is at
    ``offset + k * stride``.
    """

    name: str
    offset: int
    width: int
    stride: int = 0
    count: int = 1
    enum: object = None


def ports_of(design):
    """Return the :class:`Port` list of a component as its Verilog shows them, ``clk`` and
    ``rst`` (the ``sync`` domain) first."""
    out = [Port("clk", "input", 1, 1, "clk"), Port("rst", "input", 1, 1, "rst")]
    for path, member, value in design.signature.flatten(design):
        width = len(value.as_value()) if hasattr(value, "as_value") else len(value)
        out.append(Port("__".join(map(str, path)), "input" if member.flow == wiring.In
                        else "output", width, member.shape, str(path[0])))
    return out


def fields_of(shape, prefix="", base=0):
    """Return the :class:`Field` list of a ``data.Layout`` (nested structs flattened, arrays as
    one entry per element field with a stride)."""
    out = []
    if isinstance(shape, data.StructLayout):
        for name, field in shape:
            out += fields_of(field.shape, f"{prefix}.{name}" if prefix else name,
                             base + field.offset)
    elif isinstance(shape, data.ArrayLayout):
        stride = data.Layout.cast(shape.elem_shape).size if isinstance(
            shape.elem_shape, data.Layout) else _width(shape.elem_shape)
        for f in fields_of(shape.elem_shape, f"{prefix}[k]", 0):
            out.append(Field(f.name, base + f.offset, f.width, stride, shape.length, f.enum))
    elif isinstance(shape, type) and issubclass(shape, py_enum.Enum):
        out.append(Field(prefix, base, _width(shape), enum=shape))
    else:
        out.append(Field(prefix, base, _width(shape)))
    return out


def _width(shape):
    return Shape.cast(shape).width


def members_doc(component_class):
    """Return ``{member: description}`` from the ``Members`` section of a class docstring.

    A heading line lists one or more comma-separated names, then ``: type``; the indented
    lines below it describe them (the names after the first get "see `first`").
    """
    doc = inspect.getdoc(component_class) or ""
    match = re.search(r"^Members\n-+\n(.*?)(?:\n\S[^\n]*\n-+\n|\Z)", doc, re.S | re.M)
    if not match:
        return {}
    out, names, text = {}, [], []

    def flush():
        # A description shared by several members is given in full for the first only.
        for k, name in enumerate(names):
            out[name] = " ".join(text).strip() if k == 0 else f"see `{names[0]}`"

    for line in match.group(1).splitlines():
        if line and not line.startswith(" "):
            flush()
            head = line.split(" : ")[0] if " : " in line else line.rstrip(":")
            names = [n.strip() for n in head.split(",") if n.strip()]
            text = []
        elif line.strip():
            text.append(line.strip())
    flush()
    return out


def _port_table(design):
    doc = members_doc(type(design))
    doc.setdefault("clk", "Clock of the `sync` domain (all logic; rising edge).")
    doc.setdefault("rst", "Synchronous reset, active high (see the rules above).")
    lines = ["| port | dir | width | description |", "|---|---|---|---|"]
    for p in ports_of(design):
        text = doc.get(p.name) or doc.get(p.member, "")
        if p.name.endswith(("__valid", "__ready")):
            text = f"handshake of `{p.member}`"
        elif p.name != p.member and text.startswith("see `"):
            pass
        elif p.name != p.member:
            text = f"`{p.member}`: {text}" if text else f"`{p.member}`"
        lines.append(f"| `{p.name}` | {p.direction[:-3] if p.direction == 'output' else 'in'}"
                     f" | {p.width} | {text.replace('|', '/')} |")
    return lines


def _bit_maps(design):
    lines = []
    for p in ports_of(design):
        if not isinstance(p.shape, data.Layout):
            continue
        lines += ["", f"`{p.name}` ({p.width} bits):", "",
                  "| field | bits | width | values |", "|---|---|---|---|"]
        for f in fields_of(p.shape):
            hi = f.offset + f.width - 1
            bits = f"[{hi}:{f.offset}]" if f.width > 1 else f"[{f.offset}]"
            if f.count > 1:
                bits += f" + {f.stride}·k, k < {f.count}"
            values = ", ".join(f"{m.value} {m.name}" for m in f.enum) if f.enum else ""
            lines.append(f"| `{f.name}` | {bits} | {f.width} | {values} |")
    return lines


_INTRO = """\
# Port reference (generated)

<!-- Generated by `python -m rbscope.cli.ports docs/ports.md`; do not edit by hand.
     tests/test_ports_doc.py fails when this file is out of date. -->

The Verilog that `rbscope verilog` writes keeps Amaranth's port names: a member of an interface
is flattened with `__` (`read_req` → `read_req__payload`, `read_req__valid`,
`read_req__ready`), and a `data.Struct` port is **one packed vector**: field `f` of the tables
below is `port[hi:lo]`. The host uses the very same layouts to pack and unpack them
(`layout.const({...}).as_value().value`, `layout.from_bits(v)`; see `rbscope.cocotb.sniffer`).

Widths and bit positions below are those of the default sizes given under each top; they move
with the build parameters (`rbscope verilog --help`). For the exact map of your own build, run
`python -m rbscope.cli.ports --top sniffer --channels 4 ...` (same options as
`rbscope verilog`).

## Rules common to every top

**Clock and reset.** Every top has one clock `clk` (all logic on its rising edge) and `rst`:
*synchronous, active high*. Hold `rst` high for at least 3 clock edges after the clock starts.
The input synchronisers of pins (`rb`, the ONFI bus) are flip-flops *without* reset, so an
asynchronous pin must carry its idle level while `rst` is high: `rb` all ones (ready), and the
ONFI controls idle (CE#, WE#, RE# high). A pin left at 0 (Verilator's value for an undriven
input) reads as a busy line whose start was not seen, counted as `PARTIAL` after reset. Counters,
histograms and the epoch are *not* cleared by `rst` (only by `clear`): they start at zero from
the power-on values in the Verilog (register initialisers and memory `initial` blocks).

**Stream handshake** (`*__valid`, `*__ready`, `*__payload`; Amaranth `lib.stream`). A transfer
happens on a rising edge of `clk` at which `valid` and `ready` are both high. The source raises
`valid` without waiting for `ready` and then holds `valid` and `payload` unchanged until the
transfer; the sink may raise and lower `ready` at any time. Drive inputs away from the rising
edge (e.g. on the falling edge) and sample outputs just before it (cocotb `ReadOnly()`).

**Strobes** (`clear`, `traffic_start`, ...) act on every rising edge at which they are high:
hold them high for one cycle.

**Time 0.** The Verilog has no `always @*` and no reliance on events at time 0: it runs the
same under Icarus `-g2005`, `-g2012`/`-g2005-sv` and Verilator. It carries
`` `timescale 1ns/1ps `` (`rbscope verilog --timescale`), and waives four Verilator lint
warnings about the form of Yosys's output between `lint_off`/`lint_on` comments inside the file
(`rbscope.gateware.export.LINT_WAIVERS`): no `-Wno-...` option is needed.
"""

_SNIFFER_NOTES = """\
**Read-out timing.** An event is counted by the shared pipeline within one scanner round of
`2 * (channels + 1)` cycles after the front end emits it, and a pin change reaches the front end
`2` cycles after it is sampled (the synchroniser). The reference model
(`rbscope.gateware.rb_sniffer.model`) counts
the events emitted before cycle `N + 2` for pins recorded up to cycle `N` (cycle 0: the first
rising edge after `rst` falls): so after the last pin change of cycle `N`, keep the pins as they
are, run to cycle `N + 2`, then one scanner round more, then read. `rbscope.cocotb.sniffer`
does this (`Sniffer.settle`).

**Reading a counter.** Put `{space, channel, index}` on `read_req__payload` (space `COUNTERS`:
`index` is the word of the channel's row: class `k` at `k`, then `UNCLASSIFIED`, `GLITCH`,
`OVERLONG`, `PARTIAL`, `DROPPED`, `BUSY_TICKS` at `K + 0 ... K + 5`; space `HISTOGRAM`: `index`
is the bin). One request is served at a time; the value comes on `read_resp__payload` a few
cycles later (the next service slot of the scanner). A bad channel or bin reads 0.
"""


_TAP_NOTES = """\
**Listen only.** Every bus pin is an input (`ce_n`, `cle`, `ale`, `we_n`, `re_n`, `io`: DQ as
the bus carries it, the host's bytes and, while RE# is low, the die's): the tap never drives the
bus. They are asynchronous, with the same two-flip-flop synchronisers as the emulator's front
end; hold them at their idle levels (`ce_n` all ones, `we_n` and `re_n` high) while `rst` is
high. A bus cycle is taken on WE#'s rising edge (a data-out cycle, for the power-up recorder
only, on RE#'s, DQ as it was in the last cycle with RE# low); hold each level at least two
clock cycles (ONFI mode 0 at 100 MHz: 5 to 10 cycles). The exact decoding (LUN tracking,
multi-plane queues, which confirm sets which class) is in `docs/opcode_tap.md`.

**The trace input.** `trace__*` takes the trace stream of the R/B# sniffer that watches the
same dies (die `d` on channel `first_channel + d`); only its END records are used, to count
`PULSES` and `HIST`. The tap never stalls it (it has no ready). Without a sniffer, hold
`trace__valid` low: tags, `OPS` and `PLANES` do not need it.

**Tags.** `tag[d]` is the class of the last busy-starting command sent to die `d`, current two
cycles after the command's WE# rising edge is sampled plus one register stage; `pulse_tag[d]`
takes it when `rb[d]` (synchronised) falls.

**Reading a counter.** Put `{space, index}` on `read_req__payload` (space `OPS`: index
`die * 16 + class`, confirm commands; `PLANES`: `die * 16 + kind * 4 + planes - 1`, final
confirms of kind 0 program, 1 cache program, 2 erase; `PULSES`: `die * 16 + class`, END records;
`HIST`: `class << bin_bits | bin`). One request is served at a time, when no update is in
flight; the word comes on `read_resp__payload` three to four cycles later. Counters never clear
(not even by `rst`): they start at zero from the memories' `initial` blocks and wrap.
`rbscope.cocotb.tap` does this (`Tap.counts`).

**The power-up recorder.** Space `RECORD`, index `target * record_cells + cell`: the bus cycles
of each target from its first Reset (FFh) after `rst` (`record_cells` per target; 1024 in this
build). A word holds the cell's byte (bits 7:0), its kind (9:8: 0 command, 1 address, 2 data
in, 3 data out), whether the cell holds a cycle (10), and the target's state: recording (11),
armed, waiting for its Reset (12), the cells it holds (16-28), and log2 of `record_cells` less 5
(29-31). A one-cycle `record` strobe forgets them: bit 0 waits again for each target's next
Reset, bit 1 records every target from the next cycle. `Tap.record` reads them;
`docs/opcode_tap.md`, "Power-up recorder".
"""

#: Notes under the port table of a top, by top.
_NOTES = {"sniffer": _SNIFFER_NOTES, "tap": _TAP_NOTES}


def _section(key, design, module, params_text, notes=""):
    lines = [f"## `{key}`: module `{module}`", "", f"Built by {params_text}.", "",
             *_port_table(design)]
    maps = _bit_maps(design)
    if maps:
        lines += ["", "### Packed ports", *maps]
    if notes:
        lines += ["", notes.rstrip("\n")]
    return "\n".join(lines)


def reference(sections):
    """Return the text of a port reference of ``[(key, design, module, params_text)]``
    (``docs/ports.md`` is that of :func:`rbscope.gateware.export.reference_sections`)."""
    out = [_INTRO]
    for key, design, module, text in sections:
        out.append(_section(key, design, module, text, _NOTES.get(key, "")))
    return "\n\n".join(out).rstrip("\n") + "\n"

"""Decode an ONFI SDR (asynchronous) bus from a VCD or sigrok recording: the bus cycles
(command, address, data in, data out), the commands they form, and the Read ID and parameter page
reads among them (what a controller does at power-up: FFh, 90h-00h, 90h-20h, ECh-00h, or 90h-40h
and ECh-40h for a JEDEC part).

The recording is read by the importers every other command uses
(:func:`rbscope.recordings.sources.open_measurement`, its ``on_edge`` hook: the same signal
selection, clock grid and ``x`` handling), and the signals are named as ``rbscope label`` names
them (:class:`rbscope.gateware.onfi_tap.model.BusSignals`: CE# per target, CLE, ALE, WE#, DQ0-7),
plus RE# and, optionally, the R/B# lines.

Latching, as a die does in SDR mode: on a WE# rising edge a command (CLE high), an address (ALE
high) or a data-in byte (both low) with the levels of the cycle before the edge (as the opcode
tap's front end latches them); on an RE# rising edge (CLE and ALE low) a data-out byte, DQ as it
was in the cycle before the edge (the die drives it from tREA after RE# falls until tRHOH past
the rising edge). Cycles with every CE# high, or CLE and ALE both high, are no bus cycles.
"""

from array import array
from dataclasses import dataclass, field

import numpy as np

from rbscope.gateware.onfi_tap.model import ADDR, CMD, BusSignals, TapLabeller
from rbscope.gateware.onfi_tap.params import CONFIRM_CLASS
from rbscope.nand.ident import IdentError, decode_id, parse_parameter_page
from rbscope.nand.onfi import Opcode

from .sources import open_measurement
from .stream import RecordingError

__all__ = ["BusCycle", "Command", "TargetIdentity", "BusDecode", "expand_dq", "decode_cycles",
           "group_commands", "identities", "read_bus", "CMD", "ADDR", "DIN", "DOUT",
           "CheckedLabeller"]

#: Bus cycle kinds (those of the tap's strobes, and data out).
DIN, DOUT = "din", "dout"

#: Second command cycles that complete the command before them (when it had an address and
#: returned no data yet): confirms of read, program, erase, change read column, one-shot loads.
SECOND_CYCLES = frozenset({
    Opcode.PROGRAM_CONFIRM, Opcode.PROGRAM_MP_CONFIRM, Opcode.PROGRAM_CACHE,
    Opcode.PROGRAM_LOAD, Opcode.READ_CONFIRM, Opcode.READ_CACHE_SEQ, Opcode.READ_MP,
    Opcode.COPYBACK_READ, Opcode.ERASE_CONFIRM, Opcode.ERASE_MP_CONFIRM,
    Opcode.CHANGE_READ_COL_CONFIRM,
})

# Channel roles, in the order the signals are selected.
_WE, _CLE, _ALE, _RE = 0, 1, 2, 3
_DQ = 4  # … 11
_CE = 12


def expand_dq(names):
    """DQ signal names: eight names in bit order as given, or one ``NAME[7:0]`` vector as its
    eight bits ``NAME[0]`` … ``NAME[7]``."""
    names = tuple(names)
    if len(names) == 1 and names[0].endswith("[7:0]"):
        base = names[0][:-5]
        return tuple(f"{base}[{i}]" for i in range(8))
    return names


@dataclass(frozen=True, slots=True)
class BusCycle:
    """One bus cycle: ``kind`` (:data:`CMD`, :data:`ADDR`, :data:`DIN`, :data:`DOUT`) at
    ``time`` seconds from the recording's start, to the targets of bit mask ``sel``."""

    time: float
    kind: str
    sel: int
    byte: int


@dataclass
class Command:
    """A command as the bus shows it: its command bytes, then its address, data-in and data-out
    bytes, to the targets of ``sel``, from ``time`` seconds; ``busy`` the R/B# low time (s)
    after it on the targets' lines when those were recorded, else None."""

    time: float
    sel: int
    opcodes: list = field(default_factory=list)
    address: bytearray = field(default_factory=bytearray)
    data_in: bytearray = field(default_factory=bytearray)
    data_out: bytearray = field(default_factory=bytearray)
    busy: float | None = None

    def name(self):
        """The command bytes as ``"90h-20h"`` style text (command, first address byte)."""
        parts = [f"{self.opcodes[0]:02X}h"]
        if self.address:
            parts.append(f"{self.address[0]:02X}h")
        parts += [f"{op:02X}h" for op in self.opcodes[1:]]
        return "-".join(parts)

    def targets(self):
        return [t for t in range(self.sel.bit_length()) if self.sel >> t & 1]


def decode_cycles(initial, edges, clock, targets):
    """The bus cycles of pin changes.

    Parameters
    ----------
    initial : sequence of int
        The level of each channel before the first change (channel order: WE#, CLE, ALE, RE#,
        DQ0-7, CE# of each target, then any others, which are ignored).
    edges : iterable of (int, int, int)
        ``(cycle, channel, level)`` in cycle order.
    clock : float
        Seconds per cycle.
    targets : int
    """
    level = list(initial)
    out = []
    pending = {}
    now = None

    def commit():
        before = list(level)
        for ch, v in pending.items():
            level[ch] = v
        rise_we = not before[_WE] and level[_WE]
        rise_re = not before[_RE] and level[_RE]
        if not (rise_we or rise_re):
            return
        sel = sum((1 - before[_CE + t]) << t for t in range(targets))
        cle, ale = before[_CLE], before[_ALE]
        if not sel or (cle and ale):
            return
        t = now * clock
        if rise_we:
            byte = sum(before[_DQ + i] << i for i in range(8))
            out.append(BusCycle(t, CMD if cle else ADDR if ale else DIN, sel, byte))
        if rise_re and not cle and not ale:
            byte = sum(before[_DQ + i] << i for i in range(8))
            out.append(BusCycle(t, DOUT, sel, byte))

    for cycle, ch, v in edges:
        if cycle != now:
            if pending:
                commit()
            pending = {}
            now = cycle
        pending[ch] = v
    if pending:
        commit()
    return out


def group_commands(cycles):
    """Group bus cycles into :class:`Command` s: a command byte starts a command, except a
    second cycle (:data:`SECOND_CYCLES`) after an address with no data out yet; address and
    data bytes belong to the command before them (bytes before any command are dropped)."""
    out = []
    cur = None
    for c in cycles:
        if c.kind == CMD:
            if (cur is not None and c.byte in SECOND_CYCLES and cur.address and not cur.data_out
                    and cur.sel == c.sel):
                cur.opcodes.append(c.byte)
                continue
            cur = Command(c.time, c.sel, [c.byte])
            out.append(cur)
        elif cur is not None:
            {ADDR: cur.address, DIN: cur.data_in, DOUT: cur.data_out}[c.kind].append(c.byte)
    return out


@dataclass
class TargetIdentity:
    """What one target said about itself on the bus.

    Members
    -------
    target : int
    read_id : rbscope.nand.ident.ReadId or None
    page : rbscope.nand.ident.ParameterPage or None
    resets : int
        Reset (FFh) commands seen.
    errors : list of str
        Reads that could not be decoded (a parameter page whose copies all fail, …).
    """

    target: int
    read_id: object = None
    page: object = None
    resets: int = 0
    errors: list = field(default_factory=list)


def identities(commands, targets):
    """The :class:`TargetIdentity` of each target from its commands (a command to several
    targets at once counts for none: the data out would be theirs together)."""
    out = [TargetIdentity(t) for t in range(targets)]
    ids = [{} for _ in range(targets)]
    pages = [{} for _ in range(targets)]
    for cmd in commands:
        t = cmd.targets()
        if len(t) != 1:
            continue
        t = t[0]
        op = cmd.opcodes[0]
        if op == Opcode.RESET:
            out[t].resets += 1
        elif op == Opcode.READ_ID and cmd.address and cmd.data_out:
            ids[t].setdefault(cmd.address[0], bytes(cmd.data_out))
        elif op == Opcode.READ_PARAM and cmd.address and cmd.data_out:
            pages[t].setdefault(cmd.address[0], bytes(cmd.data_out))
    for t in range(targets):
        if 0x00 in ids[t]:
            try:
                out[t].read_id = decode_id(ids[t][0x00], ids[t].get(0x20), ids[t].get(0x40))
            except IdentError as exc:
                out[t].errors.append(f"target {t}: Read ID 90h-00h: {exc}")
        for address, standard in ((0x00, "ONFI"), (0x40, "JEDEC")):
            if address in pages[t] and out[t].page is None:
                try:
                    out[t].page = parse_parameter_page(pages[t][address], standard=standard)
                except IdentError as exc:
                    out[t].errors.append(f"target {t}: parameter page ECh-{address:02X}h: {exc}")
    return out


@dataclass
class BusDecode:
    """A decoded bus recording: its :class:`BusCycle` s, :class:`Command` s and the
    :class:`TargetIdentity` of each target; ``notes`` from the import."""

    cycles: list
    commands: list
    targets: list
    notes: list


def read_bus(path, bus, re, *, rb=(), fmt="auto", clock=None, unknown="hold"):
    """Decode the ONFI bus of a VCD or sigrok recording.

    Parameters
    ----------
    path : str or Path
    bus : rbscope.gateware.onfi_tap.model.BusSignals
        CE# (per target), CLE, ALE, WE# and DQ0-7, named as the recording names them.
    re : str
        RE#.
    rb : sequence of str
        R/B# of each target (optional): each command's following busy time.
    fmt, clock, unknown
        As :func:`rbscope.recordings.sources.open_measurement` takes them.

    Returns
    -------
    BusDecode
    """
    if not isinstance(bus, BusSignals):
        raise TypeError(f"bus must be a BusSignals, not {bus!r}")
    if not re:
        raise ValueError("the bus needs an RE# signal to read data out (ID, parameter page)")
    if rb and len(rb) != len(bus.ce):
        raise ValueError(f"give one R/B# line per target ({len(bus.ce)}), not {len(rb)}")
    signals = [bus.we, bus.cle, bus.ale, re, *bus.dq, *bus.ce, *rb]
    edges = []
    m, notes = open_measurement(path, fmt=fmt, signals=signals, clock=clock, unknown=unknown,
                                max_pulses=0,
                                on_edge=lambda cycle, ch, level: edges.append((cycle, ch, level)))
    initial = m.provenance.get("initial")
    clock_s = m.provenance.get("clock_s")
    if initial is None or clock_s is None:
        raise RecordingError(f"{path}: the import gave no initial levels or clock")
    targets = len(bus.ce)
    cycles = decode_cycles(initial, edges, clock_s, targets)
    commands = group_commands(cycles)
    if rb:
        _busy_times(commands, initial, edges, clock_s, _CE + targets, targets)
    return BusDecode(cycles, commands, identities(commands, targets), notes)


def _busy_times(commands, initial, edges, clock, first, targets):
    """Set each single-target command's ``busy``: the first R/B# low run of its target that
    starts after the command's last cycle and before the next command."""
    runs = [[] for _ in range(targets)]
    low_since = [None if initial[first + t] else 0 for t in range(targets)]
    for cycle, ch, level in edges:
        t = ch - first
        if not 0 <= t < targets:
            continue
        if level == 0 and low_since[t] is None:
            low_since[t] = cycle
        elif level == 1 and low_since[t] is not None:
            runs[t].append((low_since[t] * clock, cycle * clock))
            low_since[t] = None
    for i, cmd in enumerate(commands):
        t = cmd.targets()
        if len(t) != 1:
            continue
        end = commands[i + 1].time if i + 1 < len(commands) else float("inf")
        for start, stop in runs[t[0]]:
            if cmd.time <= start < end:
                cmd.busy = stop - start
                break


# Plausibility of a tapped bus (``rbscope label``) ----------------------------------------------

#: First commands an address follows (ONFI): read, change read or write column, erase, program,
#: read ID, parameter page, features, status enhanced.
ADDRESS_COMMANDS = frozenset({
    Opcode.READ, Opcode.CHANGE_READ_COL, Opcode.ERASE, Opcode.PROGRAM, Opcode.PROGRAM_MP,
    Opcode.CHANGE_WRITE_COL, Opcode.READ_ID, Opcode.READ_PARAM, Opcode.GET_FEATURES,
    Opcode.SET_FEATURES, Opcode.STATUS_ENH,
})
_OPCODES = frozenset(int(o) for o in Opcode)
#: Largest share of implausible cycles or pulses a bus may show before it is refused, and the
#: fewest cycles or pulses that make a share.
IMPLAUSIBLE_SHARE = 0.2
IMPLAUSIBLE_MIN = 5
#: A die's R/B# falls tWB (at most 100 ns) after the WE# edge of its busy-starting confirm; a
#: Set Features' busy waits for its four data cycles (about 0.5 µs at timing mode 0). A busy
#: pulse that starts later than this after the last command on its target, or after a command
#: that starts no busy, is not an R/B# pulse of that target (a CE#, CLE, ALE or DQ line named
#: as R/B#).
BUSY_AFTER_CONFIRM_S = 5e-6
#: Command cycles kept per target before the oldest a pulse can still need are dropped.
_KEEP_COMMANDS = 1 << 16


class CheckedLabeller(TapLabeller):
    """A :class:`~rbscope.gateware.onfi_tap.model.TapLabeller` that also checks the bus is wired
    as named: commands on CLE cycles are ONFI opcodes, address cycles follow a command that
    takes an address, and busy pulses follow busy-starting confirms (no more pulses than
    confirms, few before any confirm). :meth:`problems` says what does not hold.
    """

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.commands = self.unknown = self.addresses = self.orphans = self.confirms = 0
        self.untagged = self.labelled = 0
        self._after = None  # the last strobe's kind and byte
        # Per target: the cycle of each command and whether it starts a busy (a confirm); each
        # pulse's lag (cycles) after the confirm before it, and the pulses whose last command
        # before them is none or starts no busy.
        targets = self.params.targets
        self._cmd_cycles = [array("q") for _ in range(targets)]
        self._cmd_confirm = [bytearray() for _ in range(targets)]
        self._last_end = {}
        self.lags = array("q")
        self.not_after_confirm = 0

    def strobe(self, strobe):
        super().strobe(strobe)
        if strobe.kind == CMD:
            self.commands += 1
            self.unknown += strobe.byte not in _OPCODES
            confirm = strobe.byte in CONFIRM_CLASS
            self.confirms += confirm
            for t in range(self.params.targets):
                if strobe.sel >> t & 1:
                    self._cmd_cycles[t].append(strobe.cycle)
                    self._cmd_confirm[t].append(confirm)
        elif strobe.kind == ADDR:
            self.addresses += 1
            prev = self._after
            self.orphans += not (prev is not None and (prev[0] == ADDR or prev[0] == CMD
                                                       and prev[1] in ADDRESS_COMMANDS))
        self._after = (strobe.kind, strobe.byte)

    def label(self, die, starts, ends, widths):
        classes = super().label(die, starts, ends, widths)
        self.labelled += len(classes)
        self.untagged += int((classes == 0).sum())
        if len(starts):
            self._after_commands(die, np.asarray(starts, dtype=np.int64), int(ends[-1]))
        return classes

    def _after_commands(self, die, starts, last_end):
        """Count how each pulse of ``die`` follows the last command on its target."""
        t = die // self.params.luns
        cycles = np.frombuffer(self._cmd_cycles[t], dtype=np.int64) \
            if len(self._cmd_cycles[t]) else np.zeros(0, dtype=np.int64)
        confirm = np.frombuffer(bytes(self._cmd_confirm[t]), dtype=np.uint8)
        i = np.searchsorted(cycles, starts, side="left") - 1
        after = i >= 0
        after[after] = confirm[i[after]] == 1
        self.not_after_confirm += int((~after).sum())
        self.lags.frombytes((starts[after] - cycles[i[after]]).astype(np.int64).tobytes())
        self._last_end[die] = last_end
        if len(cycles) > _KEEP_COMMANDS:
            # Commands before every labelled die's last pulse on this target are needed no more
            # (but the last of them); a die not labelled yet keeps them all.
            dies = range(t * self.params.luns, (t + 1) * self.params.luns)
            if all(d in self._last_end for d in dies):
                k = int(np.searchsorted(cycles, min(self._last_end[d] for d in dies))) - 1
                if k > 0:
                    del self._cmd_cycles[t][:k]
                    del self._cmd_confirm[t][:k]

    def problems(self, clock_seconds=None):
        """What makes the bus implausible (a list of sentences; empty when it looks right).

        With ``clock_seconds`` (the recording's cycle), also the busy pulses that do not start
        within :data:`BUSY_AFTER_CONFIRM_S` of a busy-starting confirm on their target.
        """
        out = []
        if self.commands >= IMPLAUSIBLE_MIN and self.unknown > IMPLAUSIBLE_SHARE * self.commands:
            out.append(f"{self.unknown} of {self.commands} command (CLE) cycles carry no ONFI "
                       f"opcode")
        if (self.addresses >= IMPLAUSIBLE_MIN
                and self.orphans > IMPLAUSIBLE_SHARE * self.addresses):
            out.append(f"{self.orphans} of {self.addresses} address (ALE) cycles follow no "
                       f"command that takes an address")
        if self.labelled >= IMPLAUSIBLE_MIN:
            if self.untagged > IMPLAUSIBLE_SHARE * self.labelled:
                out.append(f"{self.untagged} of {self.labelled} busy pulses follow no confirm "
                           f"command")
            if self.labelled > 2 * self.confirms + IMPLAUSIBLE_MIN:
                out.append(f"{self.labelled} busy pulses for {self.confirms} busy-starting "
                           f"confirm commands")
        if not self.commands and self.labelled:
            out.append("no command cycle at all beside the busy pulses")
        if self.confirms >= IMPLAUSIBLE_MIN and not self.labelled:
            out.append(f"{self.confirms} busy-starting confirm commands and no busy pulse on "
                       f"the R/B# lines")
        if self.labelled >= IMPLAUSIBLE_MIN:
            late = self.not_after_confirm
            if clock_seconds and len(self.lags):
                lags = np.frombuffer(self.lags, dtype=np.int64)
                late += int((lags * clock_seconds > BUSY_AFTER_CONFIRM_S).sum())
            if late > IMPLAUSIBLE_SHARE * self.labelled:
                out.append(f"{late} of {self.labelled} busy pulses do not start right after a "
                           f"busy-starting confirm command on their target (R/B# falls tWB, "
                           f"at most 100 ns, after one"
                           + (f"; {BUSY_AFTER_CONFIRM_S * 1e6:g} µs allowed)" if clock_seconds
                              else ")"))
        return out

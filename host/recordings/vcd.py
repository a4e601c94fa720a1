"""Value Change Dump (IEEE 1364 §18) import and export of R/B# lines.

:func:`import_vcd` streams a VCD file in 2 MiB blocks (never loading it whole): plain
scalar changes are decoded with numpy, anything else word by word, and the selected signals are
classified through the bit-exact model; see :mod:`rbscope.recordings` for the time base.
:func:`write_vcd` writes pulse trains as a VCD (for GTKWave, sigrok and the tests).

Accepted VCD
------------
* any ``$timescale`` (1/10/100 × s … fs, number and unit together or apart);
* nested ``$scope`` / ``$upscope``; signals are named by their full dotted path
  (``top.probe.rb0``) and may be selected by any dot-suffix of it (``rb0``, ``probe.rb0``);
* scalar variables and vectors: a vector bit is selected as ``name[i]`` (``i`` in the declared
  index range, e.g. ``rb[3]`` of ``$var wire 8 # rb [7:0] $end``); a scalar declared with a
  bit-select (``$var wire 1 ! rb [3] $end``) is named ``rb[3]``;
* value changes one per line or several on a line (as sigrok writes them: ``#10 0! 1"``),
  ``$dumpvars`` / ``$dumpall`` / ``$dumpon`` / ``$dumpoff`` blocks, ``$comment`` anywhere,
  real (``r``) values (ignored);
* ``z`` reads as 1 (R/B# is open drain with a pull-up: a released line is ready); ``x`` holds
  the previous level (``unknown="hold"``, default) or reads as 1 or 0, and is counted in the
  provenance warnings.

The default selection is every 1-bit variable, in declaration order (aliases — the same
identifier declared twice — once).
"""

import math
import os
import re
import warnings

import numpy as np

from rbscope.analysis.measurement import Probe
from rbscope.gateware.onfi_tap.model import PIN_CE, PIN_WE, BusDecoder
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY

from .stream import TIME_UNITS, RecordingError, StreamClassifier, chain

__all__ = ["VcdHeader", "read_header", "import_vcd", "write_vcd", "default_clock"]

_TIMESCALE = re.compile(r"^(1|10|100)\s*(s|ms|us|ns|ps|fs)$")


class VcdVar:
    """One ``$var``: identifier, size, full name and declared index range."""

    __slots__ = ("ident", "size", "name", "msb", "lsb")

    def __init__(self, ident, size, name, msb, lsb):
        self.ident, self.size, self.name, self.msb, self.lsb = ident, size, name, msb, lsb


class VcdHeader:
    """What the declaration section says: timescale (seconds) and variables."""

    def __init__(self, timescale, variables, body_line):
        self.timescale = timescale
        self.variables = variables
        self.body_line = body_line  # first line of the value-change section


#: Widest ``$var`` accepted (bits): far beyond any bus a logic analyser records.
MAX_VAR_BITS = 1 << 20


def read_header(f, name="VCD"):
    """Parse the declaration section from the text stream ``f`` (left after it)."""
    timescale = None
    variables = []
    scope = []
    lineno = 0
    words = iter(_words_until_end(f, name))

    def command_body(cmd):
        body = []
        for word, _ln in words:
            if word == "$end":
                return body
            body.append(word)
        raise RecordingError(f"{name}: {cmd} at line {lineno} is not closed by $end before the "
                             f"end of the header")

    for word, lineno in words:
        if word == "$enddefinitions":
            command_body(word)
            break
        if word == "$timescale":
            text = "".join(command_body(word))
            m = _TIMESCALE.match(text)
            if not m:
                raise RecordingError(f"{name}: line {lineno}: $timescale {text!r} is not "
                                     f"1, 10 or 100 followed by s, ms, us, ns, ps or fs")
            timescale = int(m.group(1)) * TIME_UNITS[m.group(2)]
        elif word == "$scope":
            body = command_body(word)
            if len(body) < 2:
                raise RecordingError(f"{name}: line {lineno}: $scope needs a type and a name, "
                                     f"got {' '.join(body)!r}")
            scope.append(body[1])
        elif word == "$upscope":
            command_body(word)
            if not scope:
                raise RecordingError(f"{name}: line {lineno}: $upscope without $scope")
            scope.pop()
        elif word == "$var":
            body = command_body(word)
            if len(body) < 4:
                raise RecordingError(f"{name}: line {lineno}: $var needs type, size, identifier "
                                     f"and name, got {' '.join(body)!r}")
            _, size, ident, ref = body[:4]
            if not size.isdigit() or len(size) > 7 or not 1 <= int(size) <= MAX_VAR_BITS:
                raise RecordingError(f"{name}: line {lineno}: $var {ref}: size {size[:20]!r} "
                                     f"is not an integer from 1 to {MAX_VAR_BITS}")
            size = int(size)
            rest = "".join(body[4:])
            if "[" in ref:  # reference and bit-select written together: rb[3]
                ref, _, sel = ref.partition("[")
                rest = "[" + sel + rest
            msb, lsb = size - 1, 0
            full = ".".join(scope + [ref])
            # Bit indexes of at most 10 digits (longer ones are not a bit range: a name).
            m = re.fullmatch(r"\[(-?\d{1,10})(?::(-?\d{1,10}))?\]", rest) if rest else None
            if m and abs(int(m.group(1)) - int(m.group(2) or m.group(1))) + 1 == size:
                msb = int(m.group(1))
                lsb = int(m.group(2)) if m.group(2) is not None else msb
                if size == 1:
                    full += f"[{msb}]"
            elif rest:
                # Not a bit range of this size: an array index or part of an escaped name
                # (as Amaranth writes for memories); keep it in the name.
                full += rest
            variables.append(VcdVar(ident, size, full, msb, lsb))
        elif word.startswith("$"):
            command_body(word)  # $date, $version, $comment, …
        else:
            raise RecordingError(f"{name}: line {lineno}: unexpected {word!r} in the VCD header")
    else:
        raise RecordingError(f"{name}: no $enddefinitions: not a VCD file or truncated header")
    if timescale is None:
        timescale = 1e-9
    return VcdHeader(timescale, variables, lineno + 1)


def _words_until_end(f, name):
    # Reads the header line by line; after $enddefinitions ... $end, stops at that line's end
    # so the caller continues with the value-change section.
    seen_end = False
    for lineno, line in enumerate(f, 1):
        words = line.split()
        for k, word in enumerate(words):
            yield word, lineno
            if word == "$enddefinitions":
                seen_end = True
            if seen_end and word == "$end":
                if k + 1 < len(words):
                    raise RecordingError(f"{name}: line {lineno}: value changes on the "
                                         f"$enddefinitions "
                                         f"line are not supported")
                return


def _select(header, signals, name):
    """Return ``[(var, bit_position or None, label)]`` for the requested signals."""
    if not signals:
        seen, out = set(), []
        for var in header.variables:
            if var.size == 1 and var.ident not in seen:
                seen.add(var.ident)
                out.append((var, None, var.name))
        if not out:
            raise RecordingError(f"{name}: no 1-bit signal; name the R/B# lines with --signal "
                                 f"(a vector bit as name[i])")
        return out
    out = []
    for sig in signals:
        m = re.fullmatch(r"(.*?)\[(-?\d{1,10})\]", sig)
        base, index = (m.group(1), int(m.group(2))) if m else (sig, None)
        found = None
        for var in header.variables:
            for candidate, bit in ((sig, None), (base, index)):
                if var.name == candidate or var.name.endswith("." + candidate):
                    if bit is None and var.size == 1:
                        found = (var, None, var.name)
                    elif bit is not None and var.size > 1:
                        lo, hi = sorted((var.msb, var.lsb))
                        if not lo <= bit <= hi:
                            raise RecordingError(f"{name}: signal {sig!r}: bit {bit} is outside "
                                                 f"{var.name} [{var.msb}:{var.lsb}]")
                        pos = bit - var.lsb if var.msb >= var.lsb else var.lsb - bit
                        found = (var, pos, f"{var.name}[{bit}]")
                    elif bit is None and var.size > 1 and candidate == sig:
                        raise RecordingError(f"{name}: signal {sig!r} is a {var.size}-bit vector; "
                                             f"select one bit as {sig}[i]")
                if found:
                    break
            if found:
                break
        if not found:
            names = ", ".join(v.name for v in header.variables[:20])
            raise RecordingError(f"{name}: no signal {sig!r} (signals: {names})")
        out.append(found)
    return out


def default_clock(timescale):
    """The default clock period: the smallest multiple of the timescale of at least 10 ns."""
    k = max(1, math.ceil(10e-9 / timescale - 1e-9))
    return k * timescale


def _ratio(what, value, unit, name):
    k = round(value / unit)
    if k < 1 or abs(k * unit - value) > 1e-6 * unit:
        raise RecordingError(f"{name}: {what} {value:g} s is not a whole multiple of "
                             f"{unit:g} s")
    return k


def import_vcd(path, *, params_for, preset_config, signals=(), clock=None, tick=None,
               unknown="hold", probes=None, snapshot_seconds=None, max_pulses=1_000_000,
               progress=None, bus=None, tap_for=None, on_edge=None,
               on_pulses=None):
    """Classify the R/B# lines of a VCD file through the bit-exact model.

    Parameters
    ----------
    path : str or Path
    params_for : callable
        ``params_for(channels) -> SnifferParams`` for the number of selected signals.
    preset_config : callable
        ``preset_config(params, tick_seconds, prescaler) -> (SnifferConfig, class_names)``.
    signals : sequence of str
        Signals to import, in sniffer channel order (default: every 1-bit variable).
    clock : float, optional
        Clock period in seconds (a whole multiple of the timescale; default
        :func:`default_clock`).
    tick : float, optional
        Tick period in seconds (a whole multiple of ``clock``; default ``clock``).
    unknown : str
        What ``x`` means: ``"hold"``, ``"high"`` or ``"low"``.
    probes : list of tuple, optional
        Dies on each selected line (see :class:`~rbscope.analysis.measurement.Probe`).
    snapshot_seconds : float, optional
        Record cumulative snapshots at this period.
    max_pulses : int
        Per-pulse widths kept at most.
    progress : callable, optional
        Called as ``progress(bytes_read, total_bytes)`` now and then.
    on_edge : callable, optional
        Called as ``on_edge(cycle, channel, level)`` for every pin change on the cycle grid
        (see :class:`~rbscope.recordings.StreamClassifier`).
    bus : rbscope.gateware.onfi_tap.model.BusSignals, optional
        The bus signals of the channel whose dies ``signals`` are (die ``d`` = line ``d``): the
        opcode tap's model then labels every measured pulse (see ``docs/opcode_tap.md``).
    tap_for : callable
        With ``bus``: ``tap_for(params) -> TapLabeller`` for the sniffer parameters in use; the
        caller keeps the labeller to read its counts and labelled pulses.
    on_pulses : callable, optional
        Called as ``on_pulses(channel, starts, ends, widths)`` with every batch of measured
        pulses (see :class:`~rbscope.recordings.StreamClassifier`): e.g. to export them classified.

    Returns
    -------
    Measurement
    """
    name = str(path)
    if unknown not in ("hold", "high", "low"):
        raise ValueError(f"unknown must be 'hold', 'high' or 'low', not {unknown!r}")
    try:
        total = os.path.getsize(path)
        f = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise RecordingError(f"{name}: cannot open: {exc.strerror}") from None
    with f:
        # Bytes: the value changes are tokenised as bytes; text only where words are needed.
        header = read_header((line.decode("ascii", "replace") for line in f), name)
        if bus is not None and not signals:
            taken = {sig for sig, _ in bus.pins()}
            signals = [var.name for var in header.variables
                       if var.size == 1 and var.name.split(".")[-1] not in taken
                       and var.name not in taken]
        selected = _select(header, signals, name)
        clock = default_clock(header.timescale) if clock is None else clock
        k = _ratio("clock period", clock, header.timescale, name)
        clock = k * header.timescale
        prescaler = 1 if tick is None else _ratio("tick period", tick, clock, name)
        params = params_for(len(selected))
        config, class_names = preset_config(params, clock * prescaler, prescaler)
        by_ident = {}
        for ch, (var, pos, _label) in enumerate(selected):
            by_ident.setdefault(var.ident, []).append((ch, pos))
        tap = decoder = None
        bus_by_ident = {}
        bus_level = {}
        if bus is not None:
            try:
                tap = tap_for(params)
            except ValueError as exc:
                raise RecordingError(f"{name}: {exc}") from None
            for sig, pin in bus.pins():
                (var, pos, _label), = _select(header, [sig], name)
                bus_by_ident.setdefault(var.ident, []).append((pin, pos, var.size))
                # Idle bus until the recording says otherwise: WE# and CE# high.
                bus_level[pin] = 1 if pin == PIN_WE or pin >= PIN_CE else 0
        nch = len(selected)
        level = [None] * nch  # pin level (None: unknown so far)
        xcount = [0] * nch
        xval = {"hold": None, "high": 1, "low": 0}[unknown]

        def bit_of(value, pos, size):
            # value: a string of 0 1 x z (already lower-case); left-extended to size.
            if pos is None:
                c = value[-1] if value else "x"
            else:
                if len(value) < size:
                    pad = value[0] if value and value[0] in "xz" else "0"
                    value = pad * (size - len(value)) + value
                c = value[len(value) - 1 - pos]
            return c

        t0 = None
        now = None
        classifier = None
        lineno = header.body_line - 1
        pending_value = None  # vector value waiting for its identifier (split across lines)
        skipping = False  # inside $comment … $end
        read_bytes = 0
        next_progress = 1 << 24
        last_cycle = 0

        def start():
            nonlocal classifier, decoder
            initial = []
            for ch in range(nch):
                if level[ch] is None:
                    warnings.append(f"{selected[ch][2]}: no known level at the start; "
                                    f"assumed ready (1)")
                    level[ch] = 1
                initial.append(level[ch])
            snap = None
            if snapshot_seconds:
                snap = max(1, round(snapshot_seconds / clock))
            classifier = StreamClassifier(
                params, config, clock, initial, class_names=class_names,
                probes=_probes(selected, probes), snapshot_cycles=snap,
                max_pulses=max_pulses, on_pulses=chain(tap and tap.label, on_pulses),
                on_edge=on_edge)
            if tap is not None:
                decoder = BusDecoder(tap.params.targets,
                                     initial=sum(v << pin for pin, v in bus_level.items()))

        warnings = []

        def set_bus(targets, value):
            for pin, pos, size in targets:
                c = bit_of(value, pos, size)
                new = 0 if c == "0" else 1 if c in "1z" else bus_level[pin]
                if new == bus_level[pin]:
                    continue
                bus_level[pin] = new
                if decoder is not None:
                    strobe = decoder.change((now - t0) // k, pin, new)
                    if strobe is not None:
                        tap.strobe(strobe)

        def set_value(ident, value):
            nonlocal last_cycle
            if bus_by_ident:
                bus_targets = bus_by_ident.get(ident)
                if bus_targets is not None:
                    set_bus(bus_targets, value)
            targets = by_ident.get(ident)
            if targets is None:
                return
            for ch, pos in targets:
                c = bit_of(value, pos, selected[ch][0].size)
                if c == "1" or c == "z":
                    new = 1
                elif c == "0":
                    new = 0
                else:
                    xcount[ch] += 1
                    if xval is None:
                        continue
                    new = xval
                if classifier is None:
                    level[ch] = new
                elif new != level[ch]:
                    level[ch] = new
                    cycle = (now - t0) // k
                    classifier.edge(cycle, ch, new)
                    last_cycle = cycle

        # Fast path: a chunk of plain scalar changes ("#t", "0!", "1\"" …) is tokenised and
        # decoded with numpy and its edges go to the model in bulk; anything else (vectors,
        # $ commands, reals, long identifiers, errors) goes through the word loop below, which
        # defines the behaviour.
        fast = None
        keys = {}
        if bus is None and all(pos is None for _var, pos, _label in selected):
            for ch, (var, _pos, _label) in enumerate(selected):
                ident = var.ident.encode("ascii", "replace")
                if len(ident) > 7:
                    keys = None
                    break
                keys.setdefault(int.from_bytes(ident, "little"), []).append(ch)

        def fast_chunk(data):
            nonlocal now, last_cycle, lineno
            out = _scan_scalars(data)
            if out is None:
                return False
            ts_val, last_ts, vc_char, vc_key, lines = out
            if len(ts_val) and (ts_val[0] < now or np.any(np.diff(ts_val) < 0)):
                return False  # time goes back: the word loop reports where
            # Cycles of the timestamps, then of each change (that of the timestamp before it).
            ts_cyc = np.append((ts_val - t0) // k, (now - t0) // k)
            cycles = ts_cyc[last_ts]  # index -1: no timestamp in the chunk yet, the previous
            chunk_last = int((int(ts_val[-1]) if len(ts_val) else now) - t0) // k
            # Group the changes by identifier with one stable sort (order kept within each).
            if key_lut is not None and (not len(vc_key) or vc_key.max() < len(key_lut)):
                slot = key_lut[vc_key]  # short identifiers: a table
            else:
                slot = np.searchsorted(key_list, vc_key)
                np.minimum(slot, len(key_list) - 1, out=slot)
                slot[key_list[slot] != vc_key] = len(key_list)  # not a selected signal
                slot = slot.astype(np.uint8 if len(key_list) < 255 else np.int32)
            order = np.argsort(slot, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(np.bincount(slot,
                                                                minlength=len(key_list)))))
            per_channel = []
            any_unknown = bool((vc_char == ord("x")).any() or (vc_char == ord("X")).any())
            for i, chs in enumerate(key_chs):
                if bounds[i] == bounds[i + 1]:
                    continue
                take = order[bounds[i]:bounds[i + 1]]
                c = vc_char[take]
                cyc = cycles[take]
                lev = (c != ord("0")).view(np.int8)  # z reads as 1, x as decided below
                if not any_unknown:
                    for ch in chs:
                        per_channel.append((ch, cyc, lev))
                    continue
                unknown = (c == ord("x")) | (c == ord("X"))
                for ch in chs:
                    xcount[ch] += int(unknown.sum())
                if unknown.any():
                    if xval is None:
                        cyc, lev = cyc[~unknown], lev[~unknown]
                    else:
                        lev = np.where(unknown, xval, lev).astype(np.int8)
                for ch in chs:
                    per_channel.append((ch, cyc, lev))
            head_limit = classifier._last_cycle
            changes = [(np.zeros(0, np.int64), np.zeros(0, np.int8)) for _ in range(nch)]
            tails = []
            for ch, cyc, lev in per_channel:
                prev = np.empty_like(lev)
                if not len(lev):
                    continue
                prev[0] = level[ch]
                prev[1:] = lev[:-1]
                moved = lev != prev
                if not moved.all():
                    cyc, lev = cyc[moved], lev[moved]
                if not len(lev):
                    continue
                classifier.edges += len(lev)
                level[ch] = int(lev[-1])
                last_cycle = max(last_cycle, int(cyc[-1]))
                # The last of several changes in one cycle wins.
                keep = np.ones(len(cyc), dtype=bool)
                keep[:-1] = cyc[1:] != cyc[:-1]
                if not keep.all():
                    cyc, lev = cyc[keep], lev[keep]
                # Cycles the buffered edges may still reach, and the chunk's last cycle (the
                # next chunk may continue it), go through edge(); the rest in bulk.
                lo = int(np.searchsorted(cyc, head_limit, side="right"))
                hi = int(np.searchsorted(cyc, chunk_last, side="left"))
                for c_, l_ in zip(cyc[:lo].tolist(), lev[:lo].tolist(), strict=True):
                    classifier.edge(c_, ch, l_)
                    classifier.edges -= 1
                changes[ch] = (cyc[lo:hi], lev[lo:hi])
                tails.append((ch, cyc[hi:], lev[hi:]))
            if chunk_last > classifier._last_cycle:
                classifier.feed(chunk_last, changes)
            else:  # everything is at the buffered cycle
                for ch, (cyc, lev) in enumerate(changes):
                    for c_, l_ in zip(cyc.tolist(), lev.tolist(), strict=True):
                        classifier.edge(c_, ch, l_)
                        classifier.edges -= 1
            for ch, cyc, lev in tails:
                for c_, l_ in zip(cyc.tolist(), lev.tolist(), strict=True):
                    classifier.edge(c_, ch, l_)
                    classifier.edges -= 1
            if len(ts_val):
                now = int(ts_val[-1])
            lineno += lines
            return True

        if keys:
            fast = fast_chunk
            key_list = np.array(sorted(keys), dtype=np.int64)
            key_chs = [keys[x] for x in sorted(keys)]
            key_lut = None
            if len(key_list) < 255 and key_list[-1] < 1 << 16:
                # Slot of every identifier of up to two bytes (the others: no signal's).
                key_lut = np.full(1 << 16, len(key_list), dtype=np.uint8)
                key_lut[key_list] = np.arange(len(key_list))

        def words_of(data):
            nonlocal lineno
            for line in data.decode("ascii", "replace").splitlines():
                lineno += 1
                yield from line.split()

        while True:
            # Small reads until the model starts (the first cycle's levels), then whole chunks.
            data = f.read(CHUNK if classifier is not None else min(CHUNK, 1 << 12))
            if not data:
                break
            if not data.endswith(b"\n"):
                data += f.readline()
            read_bytes += len(data)
            if progress is not None and read_bytes >= next_progress:
                progress(read_bytes, total)
                next_progress += 1 << 24
            if (fast is not None and classifier is not None and not skipping
                    and pending_value is None and fast(data)):
                continue
            for word in words_of(data):
                if skipping:
                    if word == "$end":
                        skipping = False
                    continue
                if pending_value is not None:
                    if pending_value is not _SKIP:
                        set_value(word, pending_value)
                    pending_value = None
                    continue
                c = word[0]
                if c == "#":
                    try:
                        t = int(word[1:])
                    except ValueError:
                        raise RecordingError(f"{name}: line {lineno}: bad timestamp "
                                             f"{word!r}") from None
                    if t0 is None:
                        t0 = now = t
                        continue
                    if t < now:
                        raise RecordingError(f"{name}: line {lineno}: timestamp #{t} goes back "
                                             f"in time (after #{now})")
                    if classifier is None and (t - t0) // k >= 1:
                        start()  # the levels of cycle 0 are the levels before it
                    now = t
                    if decoder is not None:
                        # Strobes before a pulse's start label it: commit the bus's past cycles.
                        strobe = decoder.advance((t - t0) // k)
                        if strobe is not None:
                            tap.strobe(strobe)
                elif c in "01xXzZ":
                    if len(word) < 2:
                        raise RecordingError(f"{name}: line {lineno}: value {word!r} has no "
                                             f"identifier")
                    if t0 is None:
                        raise RecordingError(f"{name}: line {lineno}: value change before the "
                                             f"first timestamp")
                    set_value(word[1:], c.lower())
                elif c in "bB":
                    if t0 is None:
                        raise RecordingError(f"{name}: line {lineno}: value change before the "
                                             f"first timestamp")
                    value = word[1:].lower()
                    if not value or value.strip("01xz"):
                        raise RecordingError(f"{name}: line {lineno}: bad vector value "
                                             f"{word!r}")
                    pending_value = value
                elif c in "rRsS":
                    pending_value = _SKIP  # a real or string value: skip its identifier
                elif word == "$comment":
                    skipping = True
                elif word.startswith("$"):
                    continue  # $dumpvars, $dumpall, $dumpon, $dumpoff, $end
                else:
                    raise RecordingError(f"{name}: line {lineno}: unexpected {word!r} in the "
                                         f"value-change section")
        if pending_value is not None and pending_value is not _SKIP:
            raise RecordingError(f"{name}: line {lineno}: vector value without identifier at "
                                 f"the end of the file")
        if t0 is None:
            raise RecordingError(f"{name}: no timestamp in the value-change section")
        if classifier is None:
            start()
        if decoder is not None:
            strobe = decoder.finish()
            if strobe is not None:
                tap.strobe(strobe)
        cycles = max((now - t0) // k, last_cycle + 1)  # whole cycles, as sigrok counts
        for ch in range(nch):
            if xcount[ch]:
                how = "held the previous level" if xval is None else f"read as {xval}"
                warnings.append(f"{selected[ch][2]}: {xcount[ch]} unknown (x) value(s), {how}")
        provenance = {
            "source": "vcd", "path": name, "bytes": total, "timescale_s": header.timescale,
            "clock_s": clock, "prescaler": prescaler, "signals": [s[2] for s in selected],
            "first_time": t0, "last_time": now, "cycles": cycles,
            "model_cycles": cycles + SYNC_LATENCY, "edges": classifier.edges,
            "warnings": warnings,
        }
        if tap is not None:
            provenance["bus"] = {"signals": [sig for sig, _ in bus.pins()],
                                 "strobes": tap.strobes}
        if progress is not None:
            progress(total, total)
        return classifier.finish(cycles, provenance)


_SKIP = "\0skip"

#: Characters of VCD text read at a time (the import's memory bound, with the model's batches).
CHUNK = 1 << 21

_WS = np.zeros(256, dtype=bool)
_WS[[9, 10, 11, 12, 13, 32]] = True
#: Whitespace other than the newline (bytes, for the substring test of the line layout).
_OTHER_WS = (b" ", b"\t", b"\r", b"\x0b", b"\x0c")
#: The value characters of a scalar change.
_VALUES = tuple(ord(c) for c in "01xXzZ")


def _ident_keys(a, starts, lens):
    """Identifier key of each value-change token: its bytes after the value character (at
    most 7), packed little-endian."""
    key = np.zeros(len(starts), dtype=np.int64)
    present = np.flatnonzero(np.bincount(lens, minlength=9)[2:]) + 2
    if len(present) == 1 and present[0] == 2:
        return a[starts + 1].astype(np.int64)  # one-byte identifiers: the common case
    for n in present.tolist():
        sel = starts if len(present) == 1 else starts[lens == n]
        k = np.zeros(len(sel), dtype=np.int64)
        for j in range(1, n):
            k |= a[sel + j].astype(np.int64) << (8 * (j - 1))
        if len(present) == 1:
            return k
        key[lens == n] = k
    return key


def _tokens(a, data=None):
    """``(starts, lens, newlines)`` of the whitespace-separated tokens of ``a`` (the bytes
    ``data``).

    The common layout, one token per line (what sigrok, this project's writer and most dumpers
    write), is found from the newlines alone; anything else (spaces, tabs, CR) by the general
    rule.
    """
    nl = np.flatnonzero(a == 10)
    if (not any(c in data for c in _OTHER_WS) if data is not None
            else np.count_nonzero(_WS[a]) == len(nl)):
        ends = nl if len(nl) and nl[-1] == len(a) - 1 else np.append(nl, len(a))
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lens = ends - starts
        if np.count_nonzero(lens) != len(lens):
            keep = lens > 0
            starts, lens = starts[keep], lens[keep]
        return starts, lens, len(nl)
    ws = _WS[a]
    starts = np.flatnonzero(~ws & np.concatenate(([True], ws[:-1])))
    ends = np.flatnonzero(~ws & np.concatenate((ws[1:], [True]))) + 1
    return starts, ends - starts, len(nl)


#: Most digits of a timestamp read by :func:`_timestamps` (two 8-byte words).
_WORD_DIGITS = 16
_U64 = np.uint64
#: Per digit count n (0 to 8): the top n bytes of a 64-bit word, and '0' in each of them.
_TOP = np.array([0] + [(1 << 64) - (1 << 8 * (8 - n)) for n in range(1, 9)], dtype=np.uint64)
_ZEROS = _TOP & _U64(0x3030303030303030)
_LOW_NIBBLES = _U64(0x0F0F0F0F0F0F0F0F)
_HIGH_NIBBLES = _U64(0xF0F0F0F0F0F0F0F0)


def _digit_words(words, n):
    """The values of the decimal digits in the top ``n`` bytes (0 to 8) of little-endian words
    (the last digit in the top byte), and whether a byte there is not a digit."""
    v = words & _TOP[n]
    # A digit byte is 0x30-0x39: high nibble 3, and a low nibble that does not reach 16 with 6.
    bad = (v & _HIGH_NIBBLES) != _ZEROS[n]
    bad |= (((v & _LOW_NIBBLES) + _U64(0x0606060606060606)) & _HIGH_NIBBLES) != 0
    # The bytes below the digits are zeros, i.e. leading zeros. Pairs of digits, then pairs of
    # pairs, then the two halves: each step fits its lane (99, 9999, 99999999).
    d = v & _LOW_NIBBLES
    d = (d * _U64(10) + (d >> _U64(8))) & _U64(0x00FF00FF00FF00FF)
    d = (d * _U64(100) + (d >> _U64(16))) & _U64(0x0000FFFF0000FFFF)
    d = (d * _U64(10000) + (d >> _U64(32))) & _U64(0xFFFFFFFF)
    return d, bad


def _timestamps(a, starts, lens):
    """The values of the timestamp tokens of the bytes ``a`` (``#`` and 1 to
    :data:`_WORD_DIGITS` digits, at ``starts`` with ``lens``), or None when one of them has a
    byte that is not a digit.

    Each token's last eight digits, and the ones before them, are read as two 64-bit words
    ending at its last digit and converted eight digits at a time.
    """
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    pad = np.zeros(len(a) + 16, dtype=np.uint8)  # room for the words of the first tokens
    pad[16:] = a
    words = np.ndarray((len(pad) - 7,), dtype="<u8", buffer=pad, strides=(1,))
    end = starts + lens + 16  # one past the last digit, in pad
    digits = lens - 1
    low_n = np.minimum(digits, 8)
    value, bad = _digit_words(words[end - 8], low_n)
    if int(digits.max()) > 8:
        high, bad_high = _digit_words(words[end - 16], digits - low_n)
        value += high * _U64(100_000_000)
        bad |= bad_high
    if bad.any():
        return None
    return value.astype(np.int64)


def _scan_scalars(data):
    """Tokenise a chunk of plain scalar value changes with numpy.

    ``data`` is the chunk's bytes. Returns ``(timestamps, index of the timestamp before each
    change (-1: none in the chunk), value char of each change, identifier key of each
    change, newlines in the chunk)`` (identifiers of at most 7 bytes packed little-endian), or
    None when the chunk holds anything else.
    """
    if isinstance(data, str):
        data = data.encode("ascii", "replace")
    a = np.frombuffer(data, dtype=np.uint8)
    if not len(a):
        return None
    starts, lens, lines = _tokens(a, data)
    if not len(starts):
        return None
    first = a[starts]
    is_ts = first == ord("#")
    ts_i = np.flatnonzero(is_ts)
    is_value = first == _VALUES[0]
    for c in _VALUES[1:]:  # comparisons: faster than a table look-up per token
        is_value |= first == c
    vc_i = np.flatnonzero(is_value)
    if len(ts_i) + len(vc_i) != len(first) or lens.min() < 2:
        return None
    ts_s, ts_l = starts[ts_i], lens[ts_i]
    vc_s, vc_l = starts[vc_i], lens[vc_i]
    vc_max = int(vc_l.max()) if len(vc_l) else 0
    if (len(ts_l) and ts_l.max() > 19) or vc_max > 8:
        return None
    if not len(ts_l) or ts_l.max() <= 1 + _WORD_DIGITS:
        ts_val = _timestamps(a, ts_s, ts_l)
        if ts_val is None:
            return None  # a timestamp that is not a plain integer: the word loop decides
    else:
        # Longer timestamps: their digits, everything else blanked, parsed by numpy's C
        # number reader.
        b = a.copy()
        b[ts_s] = 32
        same = len(vc_l) and vc_l.min() == vc_max
        for j in range(vc_max):
            b[(vc_s if same else vc_s[vc_l > j]) + j] = 32
        try:
            with warnings.catch_warnings():
                # numpy < 2.3 only warns about unparsed text; later ones raise ValueError.
                warnings.simplefilter("error", DeprecationWarning)
                ts_val = np.fromstring(b.tobytes(), dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning):
            return None  # a timestamp that is not a plain integer: the word loop decides
        if len(ts_val) != len(ts_s):
            return None
    key = _ident_keys(a, vc_s, vc_l)
    before = np.cumsum(is_ts, dtype=np.int32)[vc_i] - 1
    return ts_val, before, first[vc_i], key, lines


def _probes(selected, probes):
    out = []
    for ch, (_var, _pos, label) in enumerate(selected):
        dies = probes[ch] if probes and ch < len(probes) else ()
        out.append(Probe(label, tuple(dies)))
    return out


def write_vcd(f, trains, *, timescale="1 ns", cycle_units=1, names=None, scope="rbscope",
              end=None, one_line=False):
    """Write pulse trains as a VCD to the text stream ``f``.

    Parameters
    ----------
    trains : sequence of rbscope.gateware.rb_sniffer.model.Train
        One per signal; edge cycles are multiplied by ``cycle_units`` to give VCD times.
    timescale : str
    names : sequence of str, optional
        Signal names (default ``rb0``, ``rb1``, …).
    end : int, optional
        Final timestamp (VCD time units; default one past the last edge).
    one_line : bool
        Write a timestamp and all its changes on one line (sigrok's style).
    """
    names = list(names) if names else [f"rb{i}" for i in range(len(trains))]
    idents = [_ident(i) for i in range(len(trains))]
    f.write(f"$timescale {timescale} $end\n$scope module {scope} $end\n")
    for ident, name in zip(idents, names, strict=True):
        f.write(f"$var wire 1 {ident} {name} $end\n")
    f.write("$upscope $end\n$enddefinitions $end\n")
    changes = {}
    for i, train in enumerate(trains):
        for cycle, level in train.edges:
            changes.setdefault(cycle * cycle_units, []).append(f"{level}{idents[i]}")
    first = [f"{t.initial}{idents[i]}" for i, t in enumerate(trains)]
    sep = " " if one_line else "\n"
    f.write("#0" + sep + "$dumpvars" + sep + sep.join(first) + sep + "$end\n")
    last = 0
    for t in sorted(changes):
        if t == 0:
            f.write(sep.join(changes[t]) + "\n")
            continue
        f.write(f"#{t}" + sep + sep.join(changes[t]) + "\n")
        last = t
    f.write(f"#{end if end is not None else last + cycle_units}\n")


def _ident(i):
    chars = [chr(c) for c in range(33, 127)]
    out = ""
    while True:
        i, r = divmod(i, len(chars))
        out += chars[r]
        if i == 0:
            return out
        i -= 1

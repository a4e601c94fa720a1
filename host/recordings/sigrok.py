"""sigrok session files (``.sr``) → Measurement, through the bit-exact model.

A session file is a zip archive (libsigrok's "srzip" format, version 2) with

* ``version``: ``2``;
* ``metadata``: an INI file; section ``[device 1]`` has ``capturefile`` (the logic member's
  base name, usually ``logic-1``), ``total probes``, ``samplerate`` (``24 MHz``, ``1 GHz``…),
  ``probe<n>`` (the name of probe ``n``, numbered from 1) and ``unitsize`` (bytes per sample);
* the samples, in members ``<capturefile>-1``, ``<capturefile>-2``, … (or one member
  ``<capturefile>`` in older files): little-endian words of ``unitsize`` bytes, probe ``n`` in bit
  ``n - 1``.

Samples are read member by member in chunks of :data:`CHUNK` bytes (never a whole member in
memory). In each chunk the samples that differ from their predecessor are found with one numpy
comparison per sample, packed eight to a byte so that the search for them runs over an eighth of
the samples (:func:`changed_samples`); only those samples are looked at again, to split their
changed bits into the probed channels' edges (:func:`pin_changes`). The cost is a fast scan of
the bytes plus work proportional to the number of level changes. Sample ``i`` is cycle ``i`` of
the model (see :mod:`rbscope.recordings`). A damaged member (bad CRC, broken deflate stream, cut
short) is a :class:`~rbscope.recordings.RecordingError` naming the member and the bytes read.
"""

import configparser
import os
import re
import zipfile
import zlib

import numpy as np

from rbscope.analysis.measurement import Probe
from rbscope.gateware.onfi_tap.model import PIN_WE, strobes_at

from .stream import RecordingError, StreamClassifier, chain

__all__ = ["read_metadata", "import_sr", "parse_samplerate", "samples", "pin_changes",
           "bus_strobes"]

CHUNK = 1 << 22  # bytes read from a zip member at a time (rounded down to whole samples)

_RATE_UNITS = {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def parse_samplerate(text, where="samplerate"):
    """Parse libsigrok's sample-rate string (``24 MHz``, ``1 GHz``, ``500000``) into hertz."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?[hH][zZ])?\s*", text)
    if not m:
        raise RecordingError(f"{where} {text!r} is not a frequency such as '24 MHz'")
    rate = float(m.group(1)) * _RATE_UNITS[(m.group(2) or "hz").lower()]
    if rate <= 0:
        raise RecordingError(f"{where} {text!r} must be positive")
    return rate


_DTYPES = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}


def samples(data, unitsize):
    """Return the samples of ``data`` (little-endian words of ``unitsize`` bytes) as unsigned
    integers (the narrowest numpy type that holds them)."""
    if unitsize in _DTYPES:
        return np.frombuffer(data, dtype=_DTYPES[unitsize])
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, unitsize).astype(np.uint64)
    out = np.zeros(len(raw), dtype=np.uint64)
    for k in range(unitsize):
        out |= raw[:, k] << np.uint64(8 * k)
    return out


def changed_samples(values):
    """Indices ``i >= 1`` where ``values[i] != values[i - 1]``, increasing (int64).

    The comparison is packed eight samples to a byte first, so that the search for the changes
    runs over an eighth of the samples and only the bytes with a change are unpacked again: on a
    recording with a change every few samples or fewer, the cost is one comparison per sample.
    """
    differ = values[1:] != values[:-1]
    packed = np.packbits(differ, bitorder="little")
    where = np.flatnonzero(packed != 0)  # bytes holding a change
    bit = np.flatnonzero(np.unpackbits(packed[where], bitorder="little").view(bool))
    return (where[bit >> 3] << 3) + (bit & 7) + 1


def pin_changes(values, prev, bits, base):
    """Per selected bit, the cycles and new levels where it changes within ``values``.

    Parameters
    ----------
    values : numpy.ndarray of unsigned integers
        Consecutive samples; sample ``i`` is cycle ``base + i``.
    prev : int
        The sample before ``values[0]``.
    bits : sequence of int
        Bit positions, one per channel.
    base : int
        The cycle of ``values[0]``.

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray)
        Per bit: the cycles (int64) and the levels (int8) from those cycles on.
    """
    # Only the samples that differ from their predecessor can change a bit: the runs of equal
    # samples are skipped in bulk.
    kind = values.dtype.type
    at = changed_samples(values)
    flips = values[at] ^ values[at - 1]  # the bits that change at each of them
    first = int(values[0]) ^ prev
    if first:
        at = np.concatenate(([0], at))
        flips = np.concatenate((np.array([first], dtype=values.dtype), flips))
    at += base
    scratch = np.empty_like(flips)
    moved = np.empty(len(flips), dtype=bool)
    out = []
    for b in bits:
        np.bitwise_and(flips, kind(1 << b), out=scratch)
        np.not_equal(scratch, 0, out=moved)
        cycles = at[np.flatnonzero(moved)]
        # A bit's changes alternate, starting from the level it had before ``values``.
        before = (prev >> b) & 1
        levels = np.empty(len(cycles), dtype=np.int8)
        levels[0::2] = 1 - before
        levels[1::2] = before
        out.append((cycles, levels))
    return out


def bus_strobes(values, prev, bus_pins, base, targets, last=None):
    """The bus strobes of the WE# rising edges within ``values`` (sample ``i`` = cycle base+i).

    ``bus_pins`` maps sample bits to the tap model's pin bits: ``[(sample_bit, pin_bit)]``.
    """
    we_bit = next(b for b, pin in bus_pins if pin == PIN_WE)
    we = (values >> values.dtype.type(we_bit)) & values.dtype.type(1)
    before = np.empty_like(values)
    before[0] = prev
    before[1:] = values[:-1]
    we_before = (before >> values.dtype.type(we_bit)) & values.dtype.type(1)
    at = np.flatnonzero((we == 1) & (we_before == 0))
    if not len(at):
        return []
    raw = before[at].astype(np.int64)
    words = np.zeros(len(at), dtype=np.int64)
    for bit, pin in bus_pins:
        words |= ((raw >> bit) & 1) << pin
    return strobes_at(at + base, words, targets, last)


class SrMetadata:
    """The parts of a session's ``metadata`` the importer needs."""

    def __init__(self, samplerate, probes, unitsize, members):
        self.samplerate = samplerate
        self.probes = probes  # {bit: name}
        self.unitsize = unitsize
        self.members = members  # logic member names in order


#: What zipfile raises on a damaged archive or member: a bad CRC or header, a broken deflate
#: stream, a member cut short, an unknown zip version or compression (NotImplementedError), an
#: encryption flag (RuntimeError: a password is required), a name that is not UTF-8.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
               RuntimeError, UnicodeDecodeError)


def _read_member(zf, member, name):
    """The bytes of the small member ``member`` (metadata, version), or RecordingError."""
    try:
        return zf.read(member)
    except _ZIP_ERRORS as exc:
        raise RecordingError(f"{name}: member {member} is corrupt: {exc}") from None


def read_metadata(zf, name="session"):
    """Read and validate the metadata of an open session zip ``zf``."""
    names = set(zf.namelist())
    if "metadata" not in names:
        raise RecordingError(f"{name}: no 'metadata' member: not a sigrok session file")
    if "version" in names:
        version = _read_member(zf, "version", name).decode("ascii", "replace").strip()
        if version not in ("1", "2"):
            raise RecordingError(f"{name}: member 'version' says {version!r}; only session "
                                 f"format 1 and 2 are known")
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(_read_member(zf, "metadata", name).decode("utf-8"),
                           source=f"{name}:metadata")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise RecordingError(f"{name}: metadata is not a valid INI file: {exc}") from None
    if not parser.has_section("device 1"):
        raise RecordingError(f"{name}: metadata has no [device 1] section")
    dev = parser["device 1"]
    where = f"{name}: metadata [device 1]"
    capture = dev.get("capturefile")
    if not capture:
        raise RecordingError(f"{where} capturefile is missing (no logic data)")
    try:
        total = int(dev.get("total probes", ""))
        unitsize = int(dev.get("unitsize", "1"))
    except ValueError:
        raise RecordingError(f"{where}: 'total probes' and 'unitsize' must be integers") from None
    if not 1 <= unitsize <= 8 or total < 1 or total > 8 * unitsize:
        raise RecordingError(f"{where}: unitsize {unitsize} and total probes {total} are "
                             f"inconsistent")
    if "samplerate" not in dev:
        raise RecordingError(f"{where} samplerate is missing")
    rate = parse_samplerate(dev["samplerate"], f"{where} samplerate")
    probes = {}
    for n in range(1, total + 1):
        key = f"probe{n}"
        if key in dev:
            probes[n - 1] = dev[key]
    chunks = []
    pattern = re.compile(re.escape(capture) + r"-(\d+)")
    for member in names:
        m = pattern.fullmatch(member)
        if m:
            chunks.append((int(m.group(1)), member))
    members = [mem for _, mem in sorted(chunks)]
    if not members and capture in names:
        members = [capture]
    if not members:
        raise RecordingError(f"{name}: no logic data member {capture}-1 (or {capture})")
    return SrMetadata(rate, probes, unitsize, members)


def _select(meta, signals, name):
    if not signals:
        if not meta.probes:
            raise RecordingError(f"{name}: no named probe; select lines with --signal")
        return sorted(meta.probes.items())
    out = []
    by_name = {v: k for k, v in meta.probes.items()}
    for sig in signals:
        if sig in by_name:
            out.append((by_name[sig], sig))
        elif sig.isdigit() and int(sig) in meta.probes:
            out.append((int(sig), meta.probes[int(sig)]))
        else:
            raise RecordingError(f"{name}: no probe {sig!r} (probes: "
                                 f"{', '.join(meta.probes.values())})")
    return out


def import_sr(path, *, params_for, preset_config, signals=(), tick=None, probes=None,
              snapshot_seconds=None, max_pulses=1_000_000, progress=None, bus=None,
              tap_for=None, on_edge=None, on_pulses=None):
    """Classify the R/B# lines of a sigrok session through the bit-exact model.

    Parameters are those of :func:`rbscope.recordings.vcd.import_vcd`, except that the clock is
    the sample rate; ``signals`` and the ``bus`` signals are probe names (or bit numbers from 0).
    """
    name = str(path)
    try:
        total_bytes = os.path.getsize(path)
        zf = zipfile.ZipFile(path)
    except OSError as exc:
        raise RecordingError(f"{name}: cannot open: {exc.strerror or exc}") from None
    except _ZIP_ERRORS as exc:
        raise RecordingError(f"{name}: not a zip archive (sigrok session): {exc}") from None
    with zf:
        meta = read_metadata(zf, name)
        if bus is not None and not signals:
            # Every named probe that is not a bus signal is an R/B# line.
            taken = {sig for sig, _ in bus.pins()}
            signals = [v for _, v in sorted(meta.probes.items()) if v not in taken]
        selected = _select(meta, signals, name)
        clock = 1.0 / meta.samplerate
        prescaler = 1
        if tick is not None:
            prescaler = round(tick / clock)
            if prescaler < 1 or abs(prescaler * clock - tick) > 1e-6 * clock:
                raise RecordingError(f"{name}: tick {tick:g} s is not a whole multiple of the "
                                     f"sample period {clock:g} s")
        params = params_for(len(selected))
        config, class_names = preset_config(params, clock * prescaler, prescaler)
        u = meta.unitsize
        bits = [bit for bit, _ in selected]
        mask = 0
        for bit in bits:
            mask |= 1 << bit
        tap = bus_pins = None
        if bus is not None:
            try:
                tap = tap_for(params)
            except ValueError as exc:
                raise RecordingError(f"{name}: {exc}") from None
            bus_pins = [(_select(meta, [sig], name)[0][0], pin) for sig, pin in bus.pins()]
            for bit, _ in bus_pins:
                mask |= 1 << bit
            last_strobe = None
        full = (1 << 8 * u) - 1  # a mask that keeps every bit of a sample
        total_samples = sum(zf.getinfo(m).file_size for m in meta.members) // u
        classifier = None
        prev = None  # the last sample of the previous chunk (masked)
        sample = 0  # index of the next sample
        done = 0
        for member in meta.members:
            info = zf.getinfo(member)
            if info.file_size % u:
                raise RecordingError(f"{name}: member {member} has {info.file_size} bytes, not a "
                                     f"whole number of {u}-byte samples (offset "
                                     f"{info.file_size - info.file_size % u} is partial)")
            try:
                stream = zf.open(member)
            except _ZIP_ERRORS as exc:
                raise RecordingError(f"{name}: cannot read member {member}: {exc}") from None
            with stream:
                offset = 0
                want = max(CHUNK - CHUNK % u, u)
                while True:
                    try:
                        data = stream.read(want)
                    except _ZIP_ERRORS as exc:
                        stop = min(offset + want, info.file_size)
                        raise RecordingError(
                            f"{name}: member {member} is corrupt (reading its bytes {offset} to "
                            f"{stop} of {info.file_size}): {exc}") from None
                    if not data:
                        break
                    offset += len(data)
                    values = samples(data, u)
                    if mask != full:
                        values = values & values.dtype.type(mask)
                    if classifier is None:
                        first = int(values[0])
                        prev = first
                        classifier = StreamClassifier(
                            params, config, clock, [(first >> b) & 1 for b in bits],
                            class_names=class_names, probes=_probes(selected, probes),
                            snapshot_cycles=(max(1, round(snapshot_seconds * meta.samplerate))
                                             if snapshot_seconds else None),
                            max_pulses=max_pulses,
                            on_pulses=chain(tap and tap.label, on_pulses),
                            on_edge=on_edge)
                    n = len(values)
                    if tap is not None:
                        # Bus cycles first: a pulse's label depends on the strobes before it.
                        for st in bus_strobes(values, prev, bus_pins, sample, tap.params.targets,
                                              last_strobe):
                            tap.strobe(st)
                            last_strobe = st
                    changes = pin_changes(values, prev, bits, sample)
                    classifier.feed(sample + n, changes)
                    classifier.edges += sum(len(c) for c, _ in changes)
                    prev = int(values[-1])
                    sample += n
                    done += len(data)
                    if progress is not None:
                        progress(done, total_samples * u)
        if classifier is None:
            raise RecordingError(f"{name}: the session holds no samples")
    provenance = {
        "source": "sigrok", "path": name, "bytes": total_bytes, "samplerate_hz": meta.samplerate,
        "clock_s": clock, "prescaler": prescaler, "unitsize": u,
        "signals": [label for _, label in selected], "cycles": sample,
        "edges": classifier.edges, "members": len(meta.members), "warnings": [],
    }
    if tap is not None:
        provenance["bus"] = {"signals": [sig for sig, _ in bus.pins()], "strobes": tap.strobes}
    return classifier.finish(sample, provenance)


def _probes(selected, probes):
    return [Probe(label, tuple(probes[ch]) if probes and ch < len(probes) else ())
            for ch, (_bit, label) in enumerate(selected)]

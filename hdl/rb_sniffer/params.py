"""Build-time parameters and the definitions shared by the sniffer gateware and the host.

Nothing here elaborates gateware, so the host can decode counter rows, histogram bins and trace
records cheaply; both sides use these very definitions, so a change here changes the gateware and
the decoder together. The enumerations are Amaranth enums with explicit shapes: they are used as
signal shapes in the gateware and as plain ``IntEnum`` members on the host.
"""

from dataclasses import dataclass

from amaranth.lib import enum

__all__ = [
    "Counter", "EventKind", "Space", "SnifferParams", "SnifferConfig", "hist_bin", "hist_bin_lo",
    "DEFAULT_CLASSES", "classes_for_windows", "READY_LAG", "QUIESCENT_LAG", "PIPELINE_DEPTH",
]

#: Class windows of the default build: read, program, erase, cache busy, reset.
DEFAULT_CLASSES = 5

#: Cycles by which the quiescence logic's ``all_ready`` lags the synchronised levels: the OR of
#: every channel's level is a registered tree (groups of channels, then the groups), as it spans
#: the die. ``all_ready(t)`` says that no enabled channel was low on cycle ``t - READY_LAG``.
READY_LAG = 2

#: Cycles by which ``status.quiescent`` lags ``all_ready`` and the idle count: the comparison
#: with ``idle_ticks`` is registered, and so is the flag (it leaves the sniffer from a
#: flip-flop), so on cycle ``t`` it says whether on cycle ``t - QUIESCENT_LAG`` ``all_ready`` held
#: and the idle count had reached ``idle_ticks``; on the first ``QUIESCENT_LAG`` cycles after
#: reset it is 0.
QUIESCENT_LAG = 2

#: Cycles from a channel's scanner slot (``c0``, when its front end hands over a pulse end) to
#: the last RAM write of the job (``c9``): an event reaches the counters at most
#: ``2 * (channels + 1) + PIPELINE_DEPTH`` cycles after its front end emits it.
PIPELINE_DEPTH = 10


def classes_for_windows(windows):
    """Return the class count K of a sniffer that holds ``windows`` class windows.

    ``max(DEFAULT_CLASSES, windows)``: the default build's five windows, more when a preset has
    more. ``rbscope analyze`` builds its model with this K, and K sets where the fixed counters
    sit in a row (``K + Counter``), so RTL built with the same K gives rows that compare
    directly with the model's.
    """
    if not isinstance(windows, int) or isinstance(windows, bool) or windows < 0:
        raise ValueError(f"windows must be a non-negative integer, not {windows!r}")
    return max(DEFAULT_CLASSES, windows)


class Space(enum.IntEnum, shape=1):
    """Which RAM a read request addresses."""

    COUNTERS = 0
    HISTOGRAM = 1


class EventKind(enum.IntEnum, shape=3):
    """What a channel front end reports to the shared pipeline (see docs/architecture.md)."""

    END = 0  # a pulse whose start and end were both observed; width measured
    PARTIAL = 1  # start or end not observed (in progress at reset/enable, cut by disable)
    OVERLONG = 2  # the width reached MAX ticks for the first time in this pulse
    BUSY = 3  # more busy ticks of a pulse that already saturated
    SIDE = 4  # delivery of a mailbox's side counts: lost events and glitches (pipeline only)


class Counter(enum.IntEnum, shape=3):
    """Index of the fixed counters in a channel's row, counted after the K class counters.

    The absolute index of counter ``c`` in a row is ``params.classes + c``.
    """

    UNCLASSIFIED = 0
    GLITCH = 1
    OVERLONG = 2
    PARTIAL = 3
    DROPPED = 4
    BUSY_TICKS = 5


def hist_bin(width, sub_bits):
    """Return the log-linear histogram bin of a pulse ``width`` in ticks.

    Widths below ``2**sub_bits`` get one bin each; above, each octave gets ``2**sub_bits`` bins.
    """
    if width < 0:
        raise ValueError(f"Pulse width must be non-negative, not {width!r}")
    if width < (1 << sub_bits):
        return width
    e = width.bit_length() - 1
    mantissa = (width >> (e - sub_bits)) & ((1 << sub_bits) - 1)
    return ((e - sub_bits + 1) << sub_bits) + mantissa


def hist_bin_lo(index, sub_bits):
    """Return the smallest width (ticks) that falls in histogram bin ``index``."""
    if index < 0:
        raise ValueError(f"Histogram bin must be non-negative, not {index!r}")
    if index < (1 << sub_bits):
        return index
    octave, mantissa = divmod(index, 1 << sub_bits)
    e = octave + sub_bits - 1
    return ((1 << sub_bits) + mantissa) << (e - sub_bits)


@dataclass(frozen=True)
class SnifferParams:
    """Build-time parameters of the R/B# sniffer.

    Parameters
    ----------
    channels : int
        Number of R/B# inputs (1 … 256).
    classes : int
        Number of programmable class windows K (1 … 10). The default 5 gives read, program,
        erase and two spare windows (cache busy, reset).
    width_bits : int
        Width counter size W. Pulses of ``2**W - 1`` ticks or more are overlong (16 … 32).
    counter_bits : int
        Width of every per-channel counter (48 … 64).
    hist_sub_bits : int
        Mantissa bits of the log histogram: ``2**hist_sub_bits`` bins per octave (3 … 5).
    hist_bits : int
        Width of a histogram bin (32 … 48). Bins wrap; the host rebuilds totals.
    timestamp_bits : int
        Width of the free-running tick timestamp (48 … 64).
    prescaler_bits : int
        Width of the tick prescaler register (8 … 24).
    glitch_bits : int
        Width of the glitch filter register: glitches are shorter than ``2**glitch_bits - 1``
        ticks at most (4 … 16). Narrow, because every channel compares against it.
    tag_bits : int
        Width of the per-channel tag input of an opcode-aware build (0 … 4; 0, the default,
        means no tag). A pulse's tag is sampled when it starts; a tag ``t`` with
        ``1 <= t <= classes`` counts the pulse in class ``t - 1`` whatever its width, tag 0 (or
        a larger one) leaves it to the windows. See docs/architecture.md.
    """

    channels: int
    classes: int = DEFAULT_CLASSES
    width_bits: int = 24
    counter_bits: int = 48
    hist_sub_bits: int = 3
    hist_bits: int = 32
    timestamp_bits: int = 48
    prescaler_bits: int = 16
    glitch_bits: int = 8
    tag_bits: int = 0

    def __post_init__(self):
        def check(name, lo, hi):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(
                    f"{name} must be an integer from {lo} to {hi}, not {value!r}")

        check("channels", 1, 256)
        check("classes", 1, 10)
        check("width_bits", 16, 32)
        check("counter_bits", 48, 64)
        check("hist_sub_bits", 3, 5)
        check("hist_bits", 32, 48)
        check("timestamp_bits", 48, 64)
        check("prescaler_bits", 8, 24)
        check("glitch_bits", 4, 16)
        check("tag_bits", 0, 4)
        # Counters, bins and timestamps travel as whole bytes in the link's frames.
        for name in ("counter_bits", "hist_bits", "timestamp_bits"):
            if getattr(self, name) % 8:
                raise ValueError(f"{name} must be a multiple of 8, not {getattr(self, name)!r}")

    # Derived quantities -------------------------------------------------------------------------

    @property
    def max_width(self):
        """Width (ticks) at which a pulse is overlong: ``2**width_bits - 1``."""
        return (1 << self.width_bits) - 1

    @property
    def row_bits(self):
        """log2 of the number of counter words per channel."""
        return (self.classes + len(Counter) - 1).bit_length()

    @property
    def row(self):
        """Counter words per channel (a power of two; the unused tail reads as zero)."""
        return 1 << self.row_bits

    @property
    def counters_per_channel(self):
        """Counter words per channel that carry a counter."""
        return self.classes + len(Counter)

    def counter_index(self, counter):
        """Index in a channel's row of a fixed :class:`Counter`."""
        return self.classes + Counter(counter)

    @property
    def hist_bins(self):
        """Number of histogram bins per channel."""
        return (self.width_bits - self.hist_sub_bits + 1) << self.hist_sub_bits

    @property
    def channel_bits(self):
        """Bits of a channel index (at least 1)."""
        return max(1, (self.channels - 1).bit_length())

    @property
    def channels_pow2(self):
        """Channel count rounded up to a power of two (histogram RAM stride)."""
        return 1 << self.channel_bits

    @property
    def stamp_bits(self):
        """Width of a front end's pulse age and its mailbox's time stamp.

        Both are taken by the scanner within two rotations (``4(N+1)`` cycles, at most as many
        ticks) of the moment they describe; ``2**stamp_bits`` exceeds twice that, so the shared
        pipeline can restore the full time from these low bits. At least ``glitch_bits``: the
        age also runs the glitch filter.
        """
        return max(self.glitch_bits, (8 * (self.channels + 1)).bit_length())

    @property
    def wide_bits(self):
        """Width of the pipeline's time arithmetic: a width of up to ``2 * MAX`` ticks."""
        return self.width_bits + 1

    @property
    def lost_bits(self):
        """Width of a mailbox's side counts (lost events, glitches); they never saturate."""
        return (self.channels + 1).bit_length() + 1

    def hist_bin(self, width):
        """Histogram bin of ``width`` with these parameters."""
        return hist_bin(width, self.hist_sub_bits)

    def hist_bin_lo(self, index):
        """Smallest width in histogram bin ``index`` with these parameters."""
        return hist_bin_lo(index, self.hist_sub_bits)


@dataclass(frozen=True)
class SnifferConfig:
    """Run-time configuration of the sniffer (what the register file holds).

    Parameters
    ----------
    prescaler : int
        System clock cycles per tick (``0`` behaves as ``1``).
    glitch_ticks : int
        A low pulse measuring fewer ticks than this is a glitch, not a pulse.
    windows : tuple of (int, int)
        The K half-open class windows ``[lo, hi)`` in ticks; ``lo >= hi`` disables a window.
    idle_ticks : int
        Ticks every enabled channel must stay ready before the device is quiescent.
    enable : int
        Bit mask of enabled channels.
    """

    prescaler: int = 1
    glitch_ticks: int = 1
    windows: tuple = ()
    idle_ticks: int = 1000
    enable: int = -1

    def validate(self, params):
        """Return a copy checked against ``params``, with ``windows`` padded and ``enable`` masked.

        Raises ``ValueError`` naming the offending field.
        """
        def field(name, value, bits):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must be an integer from 0 to {(1 << bits) - 1}, "
                                 f"not {value!r}")
            return value

        field("prescaler", self.prescaler, params.prescaler_bits)
        field("glitch_ticks", self.glitch_ticks, params.glitch_bits)
        field("idle_ticks", self.idle_ticks, params.timestamp_bits)
        windows = tuple(tuple(w) for w in self.windows)
        if len(windows) > params.classes:
            raise ValueError(f"windows has {len(windows)} entries but the sniffer was built with "
                             f"{params.classes} classes")
        for k, window in enumerate(windows):
            if len(window) != 2:
                raise ValueError(f"windows[{k}] must be a (lo, hi) pair, not {window!r}")
            field(f"windows[{k}].lo", window[0], params.width_bits)
            field(f"windows[{k}].hi", window[1], params.width_bits)
        windows += ((0, 0),) * (params.classes - len(windows))
        if not isinstance(self.enable, int) or isinstance(self.enable, bool):
            raise ValueError(f"enable must be an integer bit mask, not {self.enable!r}")
        enable = self.enable & ((1 << params.channels) - 1)
        return SnifferConfig(self.prescaler, self.glitch_ticks, windows, self.idle_ticks, enable)

    def classify(self, width):
        """Return the index of the first window containing ``width``, or ``None``."""
        for k, (lo, hi) in enumerate(self.windows):
            if lo <= width < hi:
                return k
        return None

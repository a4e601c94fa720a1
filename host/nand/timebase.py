"""Microseconds to ticks: the one conversion from NAND time to the gateware's time base."""

import math

__all__ = ["MAX_TICKS", "us_to_ticks"]

#: Largest tick count any conversion returns (far beyond every register; keeps ints finite).
MAX_TICKS = 1 << 64


def us_to_ticks(us, tick_seconds, *, what="time", nonzero=False, error=ValueError):
    """Return ``us`` microseconds in whole ticks of ``tick_seconds`` (the one conversion).

    Rounds to the nearest tick; with ``nonzero`` a time above 0 never becomes 0 ticks. Raises
    ``error`` (a :class:`ValueError` subclass the caller names, e.g. a preset's error) naming
    ``what`` for a negative or non-finite time, a tick that is not a positive time, or a time of
    more than 2**64 ticks.
    """
    if isinstance(us, bool) or not isinstance(us, (int, float)) or not 0 <= us <= 1e300:
        raise error(f"{what} must be a finite number of µs from 0 to 1e300, not {us!r}")
    if (isinstance(tick_seconds, bool) or not isinstance(tick_seconds, (int, float))
            or not tick_seconds > 0 or not math.isfinite(tick_seconds)):
        raise error(f"the tick must be a positive time, not {tick_seconds!r} s")
    ticks = us * 1e-6 / tick_seconds
    if not ticks < MAX_TICKS:
        raise error(f"{what} = {us} µs is more than 2**64 ticks of {tick_seconds:g} s")
    ticks = round(ticks)
    return max(ticks, 1) if nonzero and us > 0 else ticks

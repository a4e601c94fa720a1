"""Which logical address bits stripe the parallel units (SSDcheck's one bit at a time).

An SSD spreads consecutive logical pages over its channels and dies by a few bits of the page
address (static striping: ``die = page mod units``, so the lowest ``log2(units)`` page bits,
above the multi-plane row's bits). Two writes whose page addresses differ in one such bit go to
different units and program at the same time; two that differ in any other bit go to the same
unit and program one after the other.

Pattern
    For each page-address bit ``b`` (0 … ``bits − 1``, in units of the effective page), two
    writes of one page each (FUA: they complete when programmed) at pages ``p`` and
    ``p + 2**b`` (``p`` with bit ``b`` clear) on two connections at once: the concurrent pair;
    and, on fresh pages of the same units (the same pages plus ``2**(bits+1)``), the same two
    writes one after the other on one connection: the sequential pair. Each is measured as
    :data:`CYCLE` such pairs in a row on fresh pages of the same units, so that each unit
    programs a whole number of its page-type cycles in both (lower, middle and upper pages
    take 0.4 to 4 ms on a TLC die: single pairs met other page types concurrently than in turn,
    and a striping bit read as queueing). Fresh pages for every bit, repetition and pair
    (``2**(bits+2)`` pages of the range each). Every repetition takes the bits in a new random
    order and puts either run first at random (seeded), so that a drift of the drive (garbage
    collection starting) reaches no bit more than another.
Signal
    ``r(b)`` = mean concurrent run ÷ mean sequential run: about 0.5 to 0.8 where bit ``b``
    selects another unit (the pair waits for the slower of two programs, not for both), about
    1 where both writes queue on one unit. Each bit is its own reference: the same units, the
    same page types, the same host overhead per request. (A single write as the reference
    failed on the reference SSD's MLC dies: each bit's pairs met its dies at a fixed page-type
    phase, and one striping bit of two read as queueing.)
Decision rule
    Where the ratios split (largest ÷ smallest ≥ :data:`SPLIT`), a bit stripes the units when its
    ratio lies below the geometric mean of the smallest and the largest and below
    :data:`STRIPE_MAX` (its pairs clearly overlapped); the striping bits are
    reported as byte-address bits (``log2(page) + b``), and ``2**(number of them)`` is the units
    they address. Confidence: the gap between the largest striping ratio and the smallest
    other, against a factor 2 (1 at a clean split of 0.5 and 1), and 0 when the striping bits
    are not contiguous (a striping that a bit-select does not describe: a hash, a number of
    units that is not a power of two). Bits below the striping ones that do not stripe are the
    program unit's (a multi-plane row of ``2**k`` pages on one die): said in a note.
Limits
    Where the channel bus, not the dies, is the bottleneck, the bits of dies on one channel
    look like queueing. A drive whose FTL places writes dynamically (any free die) shows no
    striping bit: every ratio is about 0.5. The host must keep two writes in flight at once
    (``--slowdown`` on the virtual SSD). Bits above ``bits − 1`` are not probed.
"""

import math
import random
import statistics

from .detect import Finding, _pattern, _together
from .target import ProbeError, RangeTooSmall

__all__ = ["detect_stripe_bits", "repetitions_fitting", "CYCLE", "SPLIT"]

#: Pairs in a row per measurement: each unit programs ``cycle`` consecutive pages of its open
#: block in the concurrent run and ``cycle`` in the sequential one, a whole number of its
#: page-type cycles (MLC 2, TLC 3: 6), so that the two runs meet the same page types.
CYCLE = 6
#: The ratios split into striping and other bits only when the largest is at least this much
#: above the smallest (ideal: 2).
SPLIT = 1.3
#: ... and a bit stripes only where its pairs clearly overlapped: the concurrent pair took less
#: than this share of the sequential one (ideal 0.5; measured 0.34-0.68 on the virtual SSD's
#: striping bits, 0.73-1.39 on the others).
STRIPE_MAX = 0.85


def _block(page, bits):
    """Bytes one repetition's run at one cycle position spans: ``2**(bits+2)`` pages."""
    return page << (bits + 2)


def repetitions_fitting(target, page, *, bits=7, cycle=CYCLE):
    """How many repetitions of :func:`detect_stripe_bits` the target's range holds."""
    block = _block(page, bits)
    first = -(-target.start // block) * block
    return max(0, (target.end - first) // (cycle * block))


def detect_stripe_bits(target, page, *, bits=7, reps=3, cycle=CYCLE, seed=0, progress=None):
    """The page-address bits that stripe the parallel units (see the module's docstring)."""
    if not page or page % 512:
        raise ProbeError(f"stripe-bits detector: page must be a multiple of 512, not {page}")
    if not isinstance(bits, int) or not 1 <= bits <= 16:
        raise ProbeError(f"stripe-bits detector: bits must be 1 to 16, not {bits!r}")
    if not isinstance(reps, int) or reps < 2:
        raise ProbeError(f"stripe-bits detector: reps must be at least 2, not {reps!r}")
    if not isinstance(cycle, int) or not 1 <= cycle <= 24:
        raise ProbeError(f"stripe-bits detector: cycle must be 1 to 24, not {cycle!r}")
    # Each repetition and position in the cycle: one block of 2**(bits+2) pages, aligned to its
    # size. Bit b's concurrent pair is at the block's pages 2**(b+1) (bit b clear) and
    # 3 * 2**b; its sequential pair at the same pages plus 2**(bits+1) (the same units: the
    # bits above the probed ones stay clear below it). Every page written at most once.
    block = _block(page, bits)
    mirror = page << (bits + 1)
    first = -(-target.start // block) * block
    need = reps * cycle * block
    if first + need > target.end:
        raise RangeTooSmall(f"stripe-bits detector: the range holds "
                            f"{target.end - target.start} bytes, it needs {need} aligned to "
                            f"{block} ({reps} repetitions of {cycle} pairs for each of {bits} "
                            f"bits at {page}-byte pages)")
    other = target.clone()
    pairs = {b: [] for b in range(bits)}
    serial = {b: [] for b in range(bits)}
    writes = 0
    written = []  # every page written, for the writes each unit took (below)
    rng = random.Random(seed)
    try:
        for rep in range(reps):
            order = list(range(bits))
            rng.shuffle(order)
            for b in order:
                bases = [first + (rep * cycle + k) * block for k in range(cycle)]

                def together(b=b, bases=bases):
                    # ``cycle`` concurrent pairs, one after the other: each unit's page
                    # types, a whole cycle of them.
                    total = 0.0
                    for base in bases:
                        a, c = base + (page << (b + 1)), base + 3 * (page << b)
                        written.extend((a, c))

                        def left(a=a):
                            target.pwrite_through(a, _pattern(a, page))

                        def right(c=c):
                            other.pwrite_through(c, _pattern(c, page))

                        total += _together([left, right])
                    return total

                def in_turn(b=b, bases=bases):
                    total = 0.0
                    for base in bases:
                        a = base + (page << (b + 1)) + mirror
                        c = base + 3 * (page << b) + mirror
                        written.extend((a, c))

                        def both(a=a, c=c):
                            target.pwrite_through(a, _pattern(a, page))
                            target.pwrite_through(c, _pattern(c, page))

                        total += _together([both])
                    return total

                # (In turn, which of the two goes first: a drift inside a repetition reaches
                # both alike.)
                if rng.random() < 0.5:
                    pairs[b].append(together())
                    serial[b].append(in_turn())
                else:
                    serial[b].append(in_turn())
                    pairs[b].append(together())
                writes += 4 * cycle
            if progress:
                progress(f"stripe bits: repetition {rep + 1} of {reps}")
    finally:
        other.close()
    ratio = {b: statistics.fmean(pairs[b]) / statistics.fmean(serial[b]) for b in range(bits)}
    lo, hi = min(ratio.values()), max(ratio.values())
    shift = int(math.log2(page)) if page & (page - 1) == 0 else None
    notes = []
    value = None
    conf = 0.0
    striping = []
    if hi >= SPLIT * lo and lo < STRIPE_MAX:
        cut = min(math.sqrt(lo * hi), STRIPE_MAX)
        striping = [b for b in range(bits) if ratio[b] < cut]
        rest = [ratio[b] for b in range(bits) if ratio[b] >= cut]
        gap = math.log2(min(rest) / max(ratio[b] for b in striping))
        conf = max(0.0, min(1.0, gap))
        low = striping[0]
        if striping != list(range(low, low + len(striping))):
            notes.append(f"the striping bits ({', '.join(map(str, striping))} of the page "
                         f"address) are not contiguous: no bit-select striping (a hash, or a "
                         f"number of units that is not a power of two)")
            conf = 0.0
        elif low:
            notes.append(f"the lowest {low} page-address bit(s) do not stripe: {2 ** low} "
                         f"pages of {page} bytes share a unit (a multi-plane row: the "
                         f"effective page is {page << low} bytes)")
        value = [b + shift for b in striping] if shift is not None else striping
    elif hi < SPLIT * lo:
        notes.append(f"the pair ratios do not split (largest {hi:.2f} ÷ smallest {lo:.2f} "
                     f"< {SPLIT}): every bit looks alike (dynamic placement, or one unit)")
    else:
        notes.append(f"no bit's pairs clearly overlapped (the smallest ratio {lo:.2f} ≥ "
                     f"{STRIPE_MAX}): every pair queued (one unit, or the writes serialised "
                     f"before the flash)")
    units = 2 ** len(striping) if value is not None else None
    # The writes each unit took if the bits found select the units: what the R/B# lines of
    # the same run must show (``probe-geometry --pulses``), one program per write.
    per_unit = None
    if value is not None and conf > 0:
        low = striping[0]
        counts = [0] * units
        for offset in written:
            counts[(offset // page >> low) & (units - 1)] += 1
        per_unit = sorted(counts)
    summary = ["concurrent ÷ sequential pair time by page-address bit: "
               + ", ".join(f"{b}: {ratio[b]:.2f}" for b in range(bits))]
    if value is not None:
        summary.append(f"striping bits (byte address): {', '.join(map(str, value)) or 'none'}"
                       f"; {units} units addressed")
    return Finding(
        name="stripe_bits", value=value, confidence=round(conf, 3),
        evidence={"ratio": {str(b): ratio[b] for b in range(bits)},
                  "concurrent_s": {str(b): pairs[b] for b in range(bits)},
                  "sequential_s": {str(b): serial[b] for b in range(bits)},
                  "units_addressed": units, "page": page, "writes_per_unit": per_unit},
        rule="a page-address bit stripes the units when its concurrent ÷ sequential pair time "
             "lies below the geometric mean of the smallest and largest ratios (which must "
             "differ by 1.3 ×)",
        io={"writes": writes, "bytes_written": writes * page},
        notes=notes, summary=summary)

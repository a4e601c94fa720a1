"""The sniffer's channel side: the scanner's token, and the bank of channel front ends.

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from .blocks import FrontEnd
from .params import READY_LAG, SnifferParams

__all__ = ["Scanner", "ChannelBank", "offer_layout", "scan_groups", "tick_copies", "SCAN_GROUP",
           "TICK_GROUP"]


#: Channels whose mailboxes are merged by one first-level OR gate of the scanner.
SCAN_GROUP = 8

#: Channels served by one copy of the tick flip-flops (the tick enables every width counter; a
#: copy per group keeps its fan-out short).
TICK_GROUP = 8


def _check_params(params):
    if not isinstance(params, SnifferParams):
        raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
    return params


def scan_groups(params):
    """How many groups of :data:`SCAN_GROUP` channels the scanner merges first."""
    return -(-params.channels // SCAN_GROUP)


def tick_copies(params):
    """How many copies of the tick (one per :data:`TICK_GROUP` channels) the front ends take."""
    return -(-params.channels // TICK_GROUP)


def offer_layout(params):
    """What a channel offers the pipeline at its slot (zeros from every other channel).

    ``event``: its mailbox's pulse end is taken (with ``partial``, ``rec``, ``stamp`` and
    ``tag``); ``side``: its side counts are taken (``lost``, ``glitches``); ``fall``: the start
    of its pulse in progress is recorded (``age``: ticks since it); ``run``: its recorded pulse
    is still in progress (the pipeline checks its saturation).
    """
    kb = params.stamp_bits
    lb = params.lost_bits
    return data.StructLayout({
        "event": 1, "side": 1, "fall": 1, "run": 1, "partial": 1, "rec": 1,
        "stamp": kb, "age": kb, "lost": lb, "glitches": lb, "tag": params.tag_bits,
    })


class Scanner(wiring.Component):
    """The scanner: a one-hot token visits N channel slots and one service slot, two cycles each.

    Every register is reset-less: the rotation needs no reset.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    phase : Out(1)
        0 on a slot's first cycle, 1 on its second.
    mine : Out(channels)
        Bit ``i``: this is channel ``i``'s slot, on its first cycle. A flip-flop per channel, set
        the cycle before from the token's previous position, so that the global phase does not
        reach every channel's offer logic.
    scan_next : Out(range(channels + 1))
        The next slot's index (the start RAM reads its word from this flip-flop).
    scan_prev : Out(range(channels + 1))
        The previous slot's index: during a slot's two cycles, the slot of the job in c2 and c3.
    scan_prev2 : Out(range(channels + 1))
        The slot before the previous one: the slot of the job in c4 and c5.
    """

    def __init__(self, params):
        self.params = _check_params(params)
        n = params.channels
        super().__init__({
            "phase": Out(1),
            "mine": Out(n),
            "scan_next": Out(range(n + 1)),
            "scan_prev": Out(range(n + 1)),
            "scan_prev2": Out(range(n + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.params.channels
        # The phase toggles every cycle; the token moves at the end of each slot.
        phase = Signal(reset_less=True)
        m.d.sync += phase.eq(~phase)
        token = Signal(n + 1, init=1, reset_less=True)
        with m.If(phase):
            m.d.sync += token.eq(token.rotate_left(1))
        mine = []
        for i in range(n):
            slot = Signal(name=f"mine_{i}", init=(i == 0), reset_less=True)
            m.d.sync += slot.eq(phase & token[i - 1 if i else n])
            mine.append(slot)
        # The channel index follows the token: scan is the slot's channel during its c0 and c1;
        # scan_prev the previous slot's (during a slot's c2 and c3, the c0 one), scan_prev2 the
        # one before (during c4 and c5). They change only at the end of a slot.
        # scan_next, the next slot's, addresses the start RAM's read from a flip-flop.
        scan = Signal(range(n + 1), reset_less=True)
        scan_next = Signal(range(n + 1), init=1 % (n + 1), reset_less=True)
        scan_prev = Signal(range(n + 1), reset_less=True)
        scan_prev2 = Signal(range(n + 1), reset_less=True)
        with m.If(phase):
            m.d.sync += [scan.eq(scan_next), scan_next.eq(Mux(scan_next == n, 0, scan_next + 1)),
                         scan_prev.eq(scan), scan_prev2.eq(scan_prev)]
        m.d.comb += [
            self.phase.eq(phase), self.mine.eq(Cat(mine)),
            self.scan_next.eq(scan_next), self.scan_prev.eq(scan_prev),
            self.scan_prev2.eq(scan_prev2),
        ]
        return m


class ChannelBank(wiring.Component):
    """The channels: synchroniser, one :class:`~.blocks.FrontEnd` each, and their offers.

    Every channel decides at its own slot (``mine``) what the pipeline takes from its mailbox,
    and puts it on an OR tree (zeros elsewhere): groups of :data:`SCAN_GROUP` channels are
    merged and registered here (a slot's c0); the pipeline merges the groups (c1). Beside it,
    the levels are ORed into ``all_ready`` for the quiescence logic.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    rb : In(channels)
        The R/B# pins, asynchronous to the clock (1 = ready): two flip-flops bring each into the
        clock domain.
    enable : In(channels)
        The channel enables (``cfg.enable``), registered here: disabling and enabling take
        effect a cycle later.
    booting : In(1)
        The boot scrub is running: every channel is held disabled.
    glitch_ticks : In(glitch_bits)
        ``cfg.glitch_ticks``.
    ticks, ticks_next : In(tick_copies)
    stamps : In(tick_copies * stamp_bits)
        The time base's copies (:class:`~.blocks.TimeBase`), one per :data:`TICK_GROUP`
        channels.
    mine : In(channels)
        The scanner's slot flags (:class:`Scanner`).
    groups : Out(ArrayLayout(offer_layout.size, scan_groups))
        Per group, the OR of its channels' offers (:func:`offer_layout`), registered.
    all_ready : Out(1)
        No enabled channel was low :data:`~.params.READY_LAG` cycles ago (a registered OR tree,
        reset-less: after a reset it holds the levels seen during the reset).
    tag : In(channels * tag_bits)
        Only with ``tag_bits > 0``: per channel, the opcode class a bus tap latched.
    """

    def __init__(self, params):
        self.params = _check_params(params)
        n = params.channels
        copies = tick_copies(params)
        members = {
            "rb": In(n, init=(1 << n) - 1),
            "enable": In(n),
            "booting": In(1),
            "glitch_ticks": In(params.glitch_bits),
            "ticks": In(copies),
            "ticks_next": In(copies),
            "stamps": In(copies * params.stamp_bits),
            "mine": In(n),
            "groups": Out(data.ArrayLayout(offer_layout(params).size, scan_groups(params))),
            "all_ready": Out(1),
        }
        if params.tag_bits:
            members["tag"] = In(n * params.tag_bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        tb = p.tag_bits
        kb = p.stamp_bits
        offer = offer_layout(p)

        lvl = Signal(n, init=(1 << n) - 1)
        # The pins are asynchronous to our clock: two flip-flops bring each into the clock domain
        # (metastability); init=1 because a line idles ready.
        m.submodules.sync = FFSynchronizer(self.rb, lvl, init=(1 << n) - 1)

        # Per group of TICK_GROUP front ends (a short net each; reset-less, so valid from the
        # first cycle after reset): glitch_ticks == 0, and the threshold less the next cycle's
        # tick (see FrontEnd).
        glitch_off = []
        glitch_now = []
        for k in range(tick_copies(p)):
            off = Signal(name=f"glitch_off_{k}", reset_less=True)
            less = Signal(p.glitch_bits, name=f"glitch_less_{k}", reset_less=True)
            now = Signal(p.glitch_bits, name=f"glitch_now_{k}", reset_less=True)
            g = self.glitch_ticks
            # The threshold less the next cycle's tick, registered: one LUT after the tick's
            # comparison (the threshold less one is a register of its own).
            m.d.sync += [off.eq(g == 0), less.eq(Mux(g != 0, g - 1, 0)),
                         now.eq(Mux(self.ticks_next[k], less, g))]
            glitch_off.append(off)
            glitch_now.append(now)
        # Each channel's enable, registered (reset-less: it holds the configuration from the
        # reset cycles on), so that the boot scrub's flag does not reach every front end
        # through logic; disabling and enabling take effect a cycle later.
        enable = Signal(n, reset_less=True)
        m.d.sync += enable.eq(Mux(self.booting, 0, self.enable))
        front_ends = []
        for g in range(0, n, SCAN_GROUP):
            merged = 0
            for i in range(g, min(g + SCAN_GROUP, n)):
                fe = FrontEnd(p)
                m.submodules[f"front_end_{i}"] = fe
                copy = i // TICK_GROUP
                m.d.comb += [
                    fe.lvl.eq(lvl[i]),
                    fe.enable.eq(enable[i]),
                    fe.tick.eq(self.ticks[copy]),
                    fe.stamp.eq(self.stamps.word_select(copy, kb)),
                    fe.glitch_off.eq(glitch_off[copy]),
                    fe.glitch_now.eq(glitch_now[copy]),
                ]
                if tb:
                    m.d.comb += fe.tag.eq(self.tag.word_select(i, tb))
                front_ends.append(fe)
                box = fe.mailbox
                # Side counts are taken when there is no event, or before they reach half
                # their range (they grow by at most N+1 between two visits, and half the range
                # is at least N+2: no overflow). Counts of zero are taken too (no test per
                # channel): the pipeline drops such an empty SIDE job at c3, so that its slot
                # stays free for a service job. Urgent: either count's top bit (flip-flops).
                side_urgent = box.lost[-1] | box.glitches[-1]
                mine = self.mine[i]
                take_side = mine & (side_urgent | ~box.valid)
                take_event = mine & box.valid & ~take_side
                # A pulse's start is recorded unless an older pulse end stays in the mailbox
                # (that end may still need the RAM word the start would overwrite).
                take_fall = mine & fe.fall_req & ~(box.valid & take_side)
                m.d.comb += [fe.take_event.eq(take_event), fe.take_side.eq(take_side),
                             fe.take_fall.eq(take_fall)]
                item = Signal(offer, name=f"offer_{i}")
                m.d.comb += [
                    item.event.eq(take_event),
                    item.side.eq(take_side),
                    item.fall.eq(take_fall),
                    item.run.eq(mine & fe.run_rec),
                    item.partial.eq(take_event & box.partial),
                    item.rec.eq(take_event & box.rec),
                    item.stamp.eq(Mux(take_event, box.stamp, 0)),
                    item.age.eq(Mux(take_fall, fe.age, 0)),
                    item.lost.eq(Mux(take_side, box.lost, 0)),
                    item.glitches.eq(Mux(take_side, box.glitches, 0)),
                ]
                if tb:
                    m.d.comb += item.tag.eq(Mux(take_event, box.tag, 0))
                merged = merged | item.as_value()
            group = Signal(offer.size, name=f"group_{g // SCAN_GROUP}", reset_less=True)
            m.d.sync += group.eq(merged)
            m.d.comb += self.groups[g // SCAN_GROUP].eq(group)

        # all_ready is a registered OR tree (reset-less: after reset it holds the levels seen
        # during reset): the channels' levels span the die, and its result fans out to the
        # quiescence counters. Groups of SCAN_GROUP channels, then the groups: quiescence lags
        # the levels by READY_LAG cycles.
        lows = []
        for g in range(0, n, SCAN_GROUP):
            low = Signal(name=f"group_low_{g // SCAN_GROUP}", reset_less=True)
            m.d.sync += low.eq(Cat(fe.low for fe in front_ends[g:g + SCAN_GROUP]).any())
            lows.append(low)
        all_ready = Signal(reset_less=True)
        m.d.sync += all_ready.eq(~Cat(*lows).any())
        assert READY_LAG == 2  # the two registers above
        m.d.comb += self.all_ready.eq(all_ready)
        return m

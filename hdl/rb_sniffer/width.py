"""The sniffer's width measurement: the start RAM and the pipeline's stages c0 to c3.

Part of the :class:`~.sniffer.RBSniffer`. Exact semantics: ``docs/architecture.md``, section
"The R/B# sniffer".
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..synthesis import COLLISION_FREE
from .blocks import or_all
from .channels import offer_layout, scan_groups
from .params import EventKind, SnifferParams
from .ram import scrambled_read

__all__ = ["WidthStage", "slot_layout", "start_layout"]


def slot_layout(params):
    """What a slot's front-end job is after c3: an event (``kind``, ``width``), or side counts.

    ``width`` has ``wide_bits``: a recorded pulse that ended before its saturation was seen is
    one job of its whole width (OVERLONG or BUSY, then the rest as BUSY: both only add busy
    time), at most ``2 * MAX``. A SIDE job's lost count rides in it. ``groups``: the OR of each
    4-bit group of the width's low ``width_bits`` bits (for the leading one at c4).
    """
    return data.StructLayout({
        "event": 1, "side": 1, "kind": EventKind, "width": params.wide_bits,
        "groups": -(-params.width_bits // 4), "glitches": params.lost_bits,
        "tag": params.tag_bits,
    })


def start_layout(params):
    """A start RAM word: when the channel's pulse started, and whether it has saturated."""
    return data.StructLayout({"start": params.wide_bits, "sat": 1})


class WidthStage(wiring.Component):
    """Form the width of each slot's pulse from the start RAM: stages c0 to c3 of a slot.

    Per channel, the start RAM holds the (``wide_bits``-bit) timestamp at which the pulse in
    progress, or the last one recorded, started (advanced by MAX at each saturation), and
    whether it has saturated. A slot's word is read in the cycle before its c0 (from the
    scanner's next index), registered at c0, and written at c3. A channel's next read comes a
    rotation later, at least two slots after the write; with a single channel only one cycle
    before it, hence the bypass then. With two or more, a read never meets a write of its word
    (the write's index, ``scan_prev``, is two behind the read's, ``scan_next``, among at least
    three): the RAM is collision-free (no bypass that Yosys would add for the iCE40).

    Parameters
    ----------
    params : SnifferParams
    scramble_collisions : bool
        Simulation aid (see :class:`~.sniffer.RBSniffer`): with two channels or more, a read of
        the start RAM that meets a write of its word returns the complement of the old word.

    Members
    -------
    phase : In(1)
        The scanner's phase (0: a slot's first cycle).
    groups : In(ArrayLayout(offer_layout.size, scan_groups))
        The channel groups' offers (:class:`~.channels.ChannelBank`), registered at c0.
    timestamp : In(wide_bits)
        The low bits of the timestamp.
    scan_next : In(range(channels + 1))
        The next slot (its start word is read now).
    scan_prev : In(range(channels + 1))
        The slot in c2 and c3 (its start word is written at c3).
    slot : Out(slot_layout)
        The slot's job, registered at the end of c3 and held through c5.
    """

    def __init__(self, params, *, scramble_collisions=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        self.scramble_collisions = bool(scramble_collisions)
        n = params.channels
        super().__init__({
            "phase": In(1),
            "groups": In(data.ArrayLayout(offer_layout(params).size, scan_groups(params))),
            "timestamp": In(params.wide_bits),
            "scan_next": In(range(n + 1)),
            "scan_prev": In(range(n + 1)),
            "slot": Out(slot_layout(params)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        wb, kb, wide, mx = p.width_bits, p.stamp_bits, p.wide_bits, p.max_width
        phase = self.phase
        offer = offer_layout(p)

        # ---- The start RAM: read before c0, registered at c0 --------------------------------
        start_word = start_layout(p)
        starts = Memory(shape=start_word, depth=n, init=[])
        m.submodules["starts" + (COLLISION_FREE if n > 1 else "")] = starts
        st_wr = starts.write_port()
        st_rd = starts.read_port(transparent_for=(st_wr,) if n == 1 else ())
        m.d.comb += st_rd.addr.eq(self.scan_next)
        st_q = Signal(start_word, reset_less=True)
        ts_c0 = Signal(wide, reset_less=True)  # the timestamp at the slot's c0
        st_data_read = st_rd.data
        if n > 1 and self.scramble_collisions:
            st_data_read = scrambled_read(m, "starts", st_rd, st_wr)
        with m.If(~phase):
            m.d.sync += [ts_c0.eq(self.timestamp), st_q.eq(st_data_read)]

        # ---- c1: merge the groups; differences of times ----------------------------------------
        # elapsed: ticks from the recorded start to c0 (the running width of a recorded pulse);
        # back: ticks from a recorded pulse's end to c0 (its stamp's distance, < 2**stamp_bits);
        # new_start (c2): the start of a pulse whose age is offered. All are held through c3.
        s0 = Signal(offer, reset_less=True)
        elapsed = Signal(wide, reset_less=True)
        back = Signal(kb, reset_less=True)
        new_start = Signal(wide, reset_less=True)
        start_sat = Signal(reset_less=True)
        start_next = Signal(wide, reset_less=True)  # the start after a saturation
        with m.If(phase):
            merged = Signal(offer)
            m.d.comb += merged.eq(or_all(self.groups[k] for k in range(scan_groups(p))))
            m.d.sync += [
                s0.eq(merged),
                # An empty SIDE job (both counts zero: side counts are offered whenever a slot
                # has no event) is no job, and leaves the slot to a saturation check or a
                # service job.
                s0.side.eq(merged.side & ((merged.lost != 0) | (merged.glitches != 0))),
                elapsed.eq(ts_c0 - st_q.start),
                back.eq(ts_c0[:kb] - merged.stamp),
                start_sat.eq(st_q.sat),
                start_next.eq(st_q.start + mx),
            ]

        # ---- c2: the width of a recorded pulse; has the one in progress saturated? -----------
        total = Signal(wide, reset_less=True)
        elapsed_max = Signal(reset_less=True)

        def at_least_max(value):  # value >= MAX, for a wide_bits value (MAX = 2**W - 1)
            return value[-1] | value[:-1].all()

        with m.If(~phase):
            m.d.sync += [total.eq(elapsed - back), elapsed_max.eq(at_least_max(elapsed)),
                         new_start.eq(ts_c0 - s0.age)]

        # ---- c3: the job, and the start RAM's update -----------------------------------------
        # `sb` is what the old single-stage front ends offered: an event (kind, width), or side
        # counts (see slot_layout).
        sb = Signal(slot_layout(p), reset_less=True)
        m.d.comb += self.slot.eq(sb)
        st_we = Signal()
        st_data = Signal(start_word)
        m.d.comb += [st_wr.addr.eq(self.scan_prev), st_wr.en.eq(st_we), st_wr.data.eq(st_data)]
        # The width (a SIDE job's lost count rides in it: an event job has none), and beside it
        # the OR of each 4-bit group of it, for the leading one at c4.
        width_next = Signal(wide)
        groups_next = Signal(len(sb.groups))
        m.d.comb += width_next.eq(s0.lost)

        def group_ors(value):
            value = Const(value, wide) if isinstance(value, int) else value
            return Cat(value[g:min(g + 4, wb)].any() for g in range(0, wb, 4))

        m.d.comb += groups_next.eq(group_ors(s0.lost))
        with m.If(phase):
            m.d.sync += [sb.width.eq(width_next), sb.groups.eq(groups_next)]
        with m.If(phase):  # c3 of the slot
            with m.If(s0.fall):
                m.d.comb += [st_we.eq(1), st_data.start.eq(new_start), st_data.sat.eq(0)]
            m.d.sync += [
                sb.event.eq(0), sb.side.eq(s0.side),
                sb.glitches.eq(s0.glitches), sb.kind.eq(EventKind.END),
            ]
            if p.tag_bits:
                m.d.sync += sb.tag.eq(s0.tag)
            partial_or_end = Mux(s0.partial, EventKind.PARTIAL, EventKind.END)
            with m.If(s0.event & ~s0.rec):
                # Began and ended between two visits: the front end measured it.
                m.d.sync += [sb.event.eq(1), sb.kind.eq(partial_or_end)]
                m.d.comb += [width_next.eq(s0.stamp), groups_next.eq(group_ors(s0.stamp))]
            with m.Elif(s0.event & start_sat):
                # The end of a saturated pulse: its remaining busy time (none: no event).
                m.d.sync += [sb.event.eq(total != 0), sb.kind.eq(EventKind.BUSY)]
                m.d.comb += [width_next.eq(total), groups_next.eq(group_ors(total))]
            with m.Elif(s0.event):
                m.d.comb += [width_next.eq(total), groups_next.eq(group_ors(total))]
                m.d.sync += [sb.event.eq(1),
                             sb.kind.eq(Mux(at_least_max(total), EventKind.OVERLONG,
                                            partial_or_end))]
            with m.Elif(s0.run & ~s0.side & elapsed_max):
                # A pulse in progress has reached MAX ticks: report it, and time the rest of it
                # from MAX ticks after its start.
                m.d.sync += [
                    sb.event.eq(1),
                    sb.kind.eq(Mux(start_sat, EventKind.BUSY, EventKind.OVERLONG)),
                ]
                m.d.comb += [width_next.eq(mx), groups_next.eq(group_ors(mx))]
                m.d.comb += [st_we.eq(1), st_data.start.eq(start_next), st_data.sat.eq(1)]
        return m

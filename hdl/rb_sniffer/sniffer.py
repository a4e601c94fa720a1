"""The R/B# sniffer: many channels, one shared counter pipeline.

See ``docs/architecture.md`` ("The R/B# sniffer") for the exact semantics this implements and
the reasons for its structure.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..synthesis import COLLISION_FREE
from .blocks import (
    DSP_BOUNDS,
    Classifier,
    FrontEnd,
    Quiescence,
    TimeBase,
    first_window,
    leading_one_hot,
    log_bin,
    or_all,
)
from .layouts import (
    EPOCH_BITS,
    config_layout,
    index_bits,
    read_request_layout,
    status_layout,
    trace_layout,
)
from .params import READY_LAG, Counter, EventKind, SnifferConfig, SnifferParams, Space
from .ram import RAM_KINDS, SinglePortRAM, pick_ram_kind

__all__ = ["RBSniffer", "SnifferSignature", "TraceSignature", "SCAN_GROUP", "TICK_GROUP"]


#: Channels whose mailboxes are merged by one first-level OR gate of the scanner.
SCAN_GROUP = 8

#: Channels served by one copy of the tick flip-flops (the tick enables every width counter; a
#: copy per group keeps its fan-out short).
TICK_GROUP = 8


class _Job:
    """Job codes of the shared pipeline: the front-end event kinds, then service jobs."""

    END, PARTIAL, OVERLONG, BUSY, SIDE = (int(k) for k in EventKind)
    READ = 5
    SCRUB = 6
    NONE = 7
    SHAPE = 3


class TraceSignature(wiring.Signature):
    """A strobe with a record and no back-pressure (the consumer counts what it cannot take)."""

    def __init__(self, params):
        super().__init__({"valid": Out(1), "payload": Out(trace_layout(params))})


class SnifferSignature(wiring.Signature):
    """The sniffer's register-side ports, from the sniffer's point of view.

    One definition for every component that exposes a sniffer: :class:`RBSniffer` itself (with
    the ``rb`` pins beside it) and the emulator's loopback top (with each member prefixed).

    Members
    -------
    cfg : In(config_layout)
    clear : In(1)
    read_req : In(stream.Signature(read_request_layout))
    read_resp : Out(stream.Signature(counter_bits))
    status : Out(status_layout)
    trace : Out(TraceSignature)
    """

    def __init__(self, params):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        self.params = params
        super().__init__({
            "cfg": In(config_layout(params)),
            "clear": In(1),
            "read_req": In(stream.Signature(read_request_layout(params))),
            "read_resp": Out(stream.Signature(params.counter_bits)),
            "status": Out(status_layout(params)),
            "trace": Out(TraceSignature(params)),
        })


class RBSniffer(wiring.Component):
    """Measure, classify and count the busy pulses of ``channels`` R/B# lines.

    Parameters
    ----------
    params : SnifferParams
        Build-time parameters (channel count, class count, widths).
    hist_ram : str
        Where the histogram lives: ``"memory"`` (a generic :class:`Memory`: simulation, ECP5)
        or ``"spram"`` (the iCE40UP's ``SB_SPRAM256KA``; scrubbed at power-up, during which
        ``status.clear_busy`` is high and the channels are held disabled). The default,
        ``"auto"``, picks ``"spram"`` when elaborated for an iCE40UP platform whose SPRAM can
        hold the histogram, else ``"memory"``.
    spram_block : callable, optional
        Stand-in for the SPRAM primitive (a simulation model), see
        :class:`~.ram.SinglePortRAM`.
    dsp_bounds : int
        How many window bounds, in the order ``lo_0, hi_0, lo_1, …`` (at most
        :data:`~.blocks.DSP_BOUNDS`, the iCE40UP5K's DSP count), are held and compared in
        iCE40UP DSP blocks (:func:`~.blocks.dsp_at_least`) rather than in flip-flops and carry
        chains: about 40 logic cells less per bound. Those bounds are then written through
        ``win_load`` and ``win_data`` (``cfg.windows`` gives only the others; both are
        registered before the DSP blocks, so a bound written is compared from the second cycle
        after its strobe), and hold ``boot_windows`` from power-up. 0 (the default): none.
    boot_windows : sequence of (int, int)
        With ``dsp_bounds``: the windows the DSP bounds hold from power-up (the register
        file's reset values), loaded in the first cycles after configuration.
    normalise_late : bool or None
        Where a counter word read from the counter RAM is normalised (its epoch tag checked):
        ``False``, as it is registered (one LUT after the RAM's output); ``True``, after it is
        registered, in the write cycle and the read response (a flip-flop straight after the
        RAM, for the ECP5's slow block RAM output). The default, None, picks ``False`` on an
        iCE40 platform (about 25 logic cells less) and ``True`` elsewhere. The counts are the
        same either way.
    scramble_collisions : bool
        Simulation aid. The counter RAM and (with two channels or more) the start RAM are built
        as collision-free (:data:`~rbscope.gateware.synthesis.COLLISION_FREE`): the iCE40 build
        lets a read that meets a write of its address return anything, and the pipeline never
        uses such a read. With True, such a read returns the complement of the old word, so
        that a simulation shows it if one is used. False (the default): the old word.

    Members
    -------
    rb : In(channels)
        The R/B# pins, asynchronous to the clock (1 = ready).
    win_load : In(dsp_bounds)
        Only with ``dsp_bounds``: bit ``j`` writes ``win_data`` into DSP bound ``j`` (class
        ``j // 2``'s ``lo`` for even ``j``, its ``hi`` for odd ``j``).
    win_data : In(width_bits)
        Only with ``dsp_bounds``.
    tag : In(channels * tag_bits)
        Only with ``params.tag_bits > 0``: per channel (``tag_bits`` bits each, channel 0 in the
        low bits), the opcode class a bus tap latched, in the clock domain. Sampled on the first
        low cycle of a pulse (the synchronised level's), it selects the pulse's class: tag ``t``
        in ``1 … classes`` counts it in class ``t - 1``; other tags leave it to the windows.
    cfg, clear, read_req, read_resp, status, trace :
        The members of :class:`SnifferSignature`: run-time configuration; the clear strobe
        (start a new epoch); the read port of one counter or histogram bin per request; the
        status (timestamp, quiescence, epoch, clear in progress); one trace strobe per
        front-end event as the pipeline classifies it.
    """

    def __init__(self, params, *, hist_ram="auto", spram_block=None, dsp_bounds=0,
                 boot_windows=(), normalise_late=None, scramble_collisions=False):
        if not isinstance(params, SnifferParams):
            raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
        if hist_ram not in ("auto", *RAM_KINDS):
            raise ValueError(f"hist_ram must be one of auto, {', '.join(RAM_KINDS)}, "
                             f"not {hist_ram!r}")
        self.params = params
        self.hist_ram = hist_ram
        self.spram_block = spram_block
        limit = min(DSP_BOUNDS, 2 * params.classes)
        if not isinstance(dsp_bounds, int) or not 0 <= dsp_bounds <= limit:
            raise ValueError(f"dsp_bounds must be an integer from 0 to {limit}, "
                             f"not {dsp_bounds!r}")
        self.dsp_bounds = dsp_bounds
        if normalise_late not in (None, False, True):
            raise ValueError(f"normalise_late must be None, False or True, "
                             f"not {normalise_late!r}")
        self.normalise_late = normalise_late
        self.scramble_collisions = bool(scramble_collisions)
        windows = SnifferConfig(windows=tuple(boot_windows)).validate(params).windows
        self.boot_bounds = [b for window in windows for b in window][:self.dsp_bounds]
        members = {
            "rb": In(params.channels, init=(1 << params.channels) - 1),
            **SnifferSignature(params).members,
        }
        if self.dsp_bounds:
            members["win_load"] = In(self.dsp_bounds)
            members["win_data"] = In(params.width_bits)
        if params.tag_bits:
            members["tag"] = In(params.channels * params.tag_bits)
        super().__init__(members)

    @staticmethod
    def _scramble(m, name, rd, wr):
        """The read data of ``rd``, complemented on the cycle after its read met a write of
        ``wr`` to its address (see ``scramble_collisions``)."""
        met = Signal(name=f"{name}_met")
        m.d.sync += met.eq(wr.en & (wr.addr == rd.addr))
        data_ = Signal(len(rd.data.as_value()), name=f"{name}_seen")
        m.d.comb += data_.eq(Mux(met, ~rd.data.as_value(), rd.data.as_value()))
        return data_

    def elaborate(self, platform):
        m = Module()
        p = self.params
        n = p.channels
        cb, hb, wb, lb = p.counter_bits, p.hist_bits, p.width_bits, p.lost_bits
        a_depth = n << p.row_bits
        h_depth = p.hist_bins << p.channel_bits
        scrub_end = max(a_depth, h_depth)
        # Pointer values past the last word are no-op jobs: the next epoch flip waits until the
        # last real scrub write has landed (see "Clear" in docs/architecture.md).
        scrub_stop = scrub_end + 3
        hist_ram = pick_ram_kind(self.hist_ram, platform, h_depth)
        boot_scrub = hist_ram == "spram"

        # ---- Epochs, boot and the clear scrubber ---------------------------------------------
        # Reset-less: a logic reset must not resurrect or lose counts; only `clear` erases them.

        epoch_bit = Signal(reset_less=True)
        epoch = Signal(EPOCH_BITS, reset_less=True)
        clear_pending = Signal(reset_less=True)
        scrubbing = Signal(reset_less=True, init=boot_scrub)
        booting = Signal(reset_less=True, init=boot_scrub)  # scrub writes zeros
        scrub_ptr = Signal(range(scrub_stop + 1), reset_less=True)

        # ---- Time base, synchroniser, front ends, quiescence --------------------------------

        m.submodules.timebase = timebase = TimeBase(p, copies=-(-n // TICK_GROUP))
        m.d.comb += timebase.prescaler.eq(self.cfg.prescaler)

        lvl = Signal(n, init=(1 << n) - 1)
        # The pins are asynchronous to our clock: two flip-flops bring each into the clock domain
        # (metastability); init=1 because a line idles ready.
        m.submodules.sync = FFSynchronizer(self.rb, lvl, init=(1 << n) - 1)

        # The scanner: a one-hot token visits N channel slots and one service slot, two cycles
        # each; phase 0 is a slot's first cycle. Reset-less: the rotation needs no reset.
        phase = Signal(reset_less=True)
        m.d.sync += phase.eq(~phase)
        token = Signal(n + 1, init=1, reset_less=True)
        with m.If(phase):
            m.d.sync += token.eq(token.rotate_left(1))

        # Every channel decides at its own slot what the pipeline takes from its mailbox, and
        # puts it on an OR tree (zeros elsewhere): groups of SCAN_GROUP channels are merged and
        # registered (cycle c0), then the groups are merged (c1). The token is a flip-flop per
        # channel, so nothing shared fans out to every channel.
        tb = p.tag_bits
        kb = p.stamp_bits
        offer = data.StructLayout({
            "event": 1, "side": 1, "fall": 1, "run": 1, "partial": 1, "rec": 1,
            "stamp": kb, "age": kb, "lost": lb, "glitches": lb, "tag": tb,
        })
        # Per group of TICK_GROUP front ends (a short net each; reset-less, so valid from the
        # first cycle after reset): glitch_ticks == 0, and the threshold less the next cycle's
        # tick (see FrontEnd).
        glitch_off = []
        glitch_now = []
        for k in range(-(-n // TICK_GROUP)):
            off = Signal(name=f"glitch_off_{k}", reset_less=True)
            less = Signal(p.glitch_bits, name=f"glitch_less_{k}", reset_less=True)
            now = Signal(p.glitch_bits, name=f"glitch_now_{k}", reset_less=True)
            g = self.cfg.glitch_ticks
            # The threshold less the next cycle's tick, registered: one LUT after the tick's
            # comparison (the threshold less one is a register of its own).
            m.d.sync += [off.eq(g == 0), less.eq(Mux(g != 0, g - 1, 0)),
                         now.eq(Mux(timebase.ticks_next[k], less, g))]
            glitch_off.append(off)
            glitch_now.append(now)
        # Each channel's enable, registered (reset-less: it holds the configuration from the
        # reset cycles on), so that the boot scrub's flag does not reach every front end
        # through logic; disabling and enabling take effect a cycle later.
        enable = Signal(n, reset_less=True)
        m.d.sync += enable.eq(Mux(booting, 0, self.cfg.enable))
        front_ends = []
        groups = []
        for g in range(0, n, SCAN_GROUP):
            merged = 0
            for i in range(g, min(g + SCAN_GROUP, n)):
                fe = FrontEnd(p)
                m.submodules[f"front_end_{i}"] = fe
                copy = i // TICK_GROUP
                m.d.comb += [
                    fe.lvl.eq(lvl[i]),
                    fe.enable.eq(enable[i]),
                    fe.tick.eq(timebase.ticks[copy]),
                    fe.stamp.eq(timebase.stamps.word_select(copy, kb)),
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
                # This channel's slot (its token, first cycle): a flip-flop of its own, set the
                # cycle before from the token's previous position, so that the global phase
                # does not reach every channel's offer logic.
                mine = Signal(name=f"mine_{i}", init=(i == 0), reset_less=True)
                m.d.sync += mine.eq(phase & token[i - 1 if i else n])
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
            groups.append(group)

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
        m.submodules.quiescence = quiet = Quiescence(p)
        m.d.comb += [
            quiet.all_ready.eq(all_ready),
            quiet.tick.eq(timebase.tick),
            quiet.timestamp.eq(timebase.timestamp),
            quiet.idle_ticks.eq(self.cfg.idle_ticks),
        ]
        m.d.comb += [
            self.status.timestamp.eq(timebase.timestamp),
            self.status.quiet_since.eq(quiet.quiet_since),
            self.status.quiescent.eq(quiet.quiescent),
            self.status.epoch.eq(epoch),
            self.status.clear_busy.eq(clear_pending | scrubbing),
        ]

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

        # ---- The start RAM ------------------------------------------------------------------
        # Per channel, the (wide_bits-bit) timestamp at which the pulse in progress, or the last
        # one recorded, started (advanced by MAX at each saturation), and whether it has
        # saturated. A slot's word is read in the cycle before its c0 (from the scanner's next
        # index), registered at c0, and written at c3. A channel's next read comes a rotation
        # later, at least two slots after the write; with a single channel only one cycle
        # before it, hence the bypass then. With two or more, a read never meets a write of its
        # word (the write's index, scan_prev, is two behind the read's, scan_next, among at least
        # three): the RAM is collision-free (no bypass that Yosys would add for the iCE40).

        wide = p.wide_bits
        mx = p.max_width
        start_word = data.StructLayout({"start": wide, "sat": 1})
        starts = Memory(shape=start_word, depth=n, init=[])
        m.submodules["starts" + (COLLISION_FREE if n > 1 else "")] = starts
        st_wr = starts.write_port()
        st_rd = starts.read_port(transparent_for=(st_wr,) if n == 1 else ())
        m.d.comb += st_rd.addr.eq(scan_next)
        st_q = Signal(start_word, reset_less=True)
        ts_c0 = Signal(wide, reset_less=True)  # the timestamp at the slot's c0
        st_data_read = st_rd.data
        if n > 1 and self.scramble_collisions:
            st_data_read = self._scramble(m, "starts", st_rd, st_wr)
        with m.If(~phase):
            m.d.sync += [ts_c0.eq(timebase.timestamp[:wide]), st_q.eq(st_data_read)]

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
            m.d.comb += merged.eq(or_all(groups))
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
        # counts. Its width has wide_bits: a recorded pulse that ended before its saturation
        # was seen is one job of its whole width (OVERLONG or BUSY, then the rest as BUSY: both
        # only add busy time), at most 2 * MAX.
        sb_layout = data.StructLayout({
            "event": 1, "side": 1, "kind": EventKind, "width": wide, "groups": -(-wb // 4),
            "glitches": lb, "tag": tb,
        })
        sb = Signal(sb_layout, reset_less=True)
        st_we = Signal()
        st_data = Signal(start_word)
        m.d.comb += [st_wr.addr.eq(scan_prev), st_wr.en.eq(st_we), st_wr.data.eq(st_data)]
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
            if tb:
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

        # ---- c4 (phase 0): arbitration with the service jobs; window comparisons, leading one

        # A read request is first taken into a register (ready depends on that register only),
        # so that neither direction of the handshake passes combinationally through the
        # arbitration: the requester's logic and ours meet at flip-flops.
        read_busy = Signal()
        pending = Signal()
        pending_req = Signal(read_request_layout(p), reset_less=True)
        m.d.comb += self.read_req.ready.eq(~pending)
        with m.If(~pending):
            # Loaded whatever the requester offers; kept once `pending` says it was valid.
            m.d.sync += [pending.eq(self.read_req.valid), pending_req.eq(self.read_req.payload)]
        is_slot = ~phase  # c4 of some slot
        free = ~sb.event & ~sb.side
        take_read = is_slot & free & pending & ~read_busy & ~self.read_resp.valid
        with m.If(take_read):
            m.d.sync += pending.eq(0)
        take_scrub = is_slot & free & ~take_read & scrubbing

        s1_job = Signal(_Job.SHAPE, init=_Job.NONE, reset_less=True)
        s1_channel = Signal(p.channel_bits, reset_less=True)
        s1_width = Signal(wide, reset_less=True)
        s1_glitches = Signal(lb, reset_less=True)
        s1_space = Signal(Space, reset_less=True)
        s1_index = Signal(index_bits(p), reset_less=True)
        read_bad = Signal(reset_less=True)
        # The histogram address a read or a scrub job contributes (see c5), else 0.
        s1_h_service = Signal(range(h_depth), reset_less=True)
        s1_epoch = Signal(reset_less=True)
        s1_match = Signal(p.classes, reset_less=True)
        # The width's highest one (one-hot, from bit hist_sub_bits), for its log-bin.
        s1_lead = Signal(wb - p.hist_sub_bits, reset_less=True)
        s1_tag = Signal(tb, reset_less=True)
        m.submodules.classifier = classifier = Classifier(p, dsp_bounds=self.dsp_bounds)
        m.d.comb += [classifier.width.eq(sb.width[:wb]), classifier.windows.eq(self.cfg.windows)]
        if self.dsp_bounds:
            # The DSP bounds take the boot windows, one per cycle after configuration (a
            # reset-less step counter: a logic reset keeps them, as it keeps the registers),
            # then whatever the register file writes.
            nb = self.dsp_bounds
            boot_step = Signal(range(nb + 1), reset_less=True)
            booted = Signal()
            m.d.comb += booted.eq(boot_step == nb)
            with m.If(~booted):
                m.d.sync += boot_step.eq(boot_step + 1)
            # (Only read while boot_step < nb.)
            boot_value = Array(Const(b, wb) for b in self.boot_bounds)[boot_step]
            # (Registered on their way to the DSP blocks' hold inputs: the register file's
            # address decode and the boot choice reach no DSP in the cycle they are made. A
            # window written here is compared from the second cycle after its strobe.)
            load_q = Signal(nb, reset_less=True)  # (the boot runs during a reset too)
            data_q = Signal(wb, reset_less=True)
            m.d.sync += [load_q.eq(Mux(booted, self.win_load, Const(1, nb) << boot_step)),
                         data_q.eq(Mux(booted, self.win_data, boot_value))]
            m.d.comb += [classifier.load.eq(load_q), classifier.load_data.eq(data_q)]
        # The log bin is found beside the window comparisons (its priority chain on the leading
        # one is several LUT levels deep) and registered with them.
        # The log-bin is found in two steps: the leading one here (a balanced tree), beside the
        # window comparisons, and the bin from it at c5 (a fixed slice per octave).
        lead = leading_one_hot(sb.width[:wb], p.hist_sub_bits, groups=sb.groups)

        # The epoch a job counts in: the bit in force when it is arbitrated, carried with the
        # job to its normalisation and its writes. A flip applies to the job arbitrated with it.
        next_epoch = Signal()
        flip = Signal()
        m.d.comb += [
            flip.eq(is_slot & ~take_scrub & clear_pending & ~scrubbing),
            next_epoch.eq(epoch_bit ^ flip),
        ]

        with m.If(is_slot):
            m.d.sync += [
                s1_h_service.eq(0),
                s1_channel.eq(scan_prev2),
                s1_epoch.eq(next_epoch),
                s1_width.eq(sb.width),
                s1_glitches.eq(sb.glitches),
                s1_match.eq(classifier.match),
                s1_lead.eq(lead),
                s1_tag.eq(sb.tag),
            ]
            with m.If(sb.side):
                m.d.sync += s1_job.eq(_Job.SIDE)
            with m.Elif(sb.event):
                m.d.sync += s1_job.eq(sb.kind)
            with m.Elif(take_read):
                req = pending_req
                m.d.sync += [
                    s1_job.eq(_Job.READ),
                    s1_channel.eq(req.channel),
                    s1_space.eq(req.space),
                    s1_index.eq(req.index),
                    # A read outside the channels or the bins is answered with 0 (decided
                    # here, from the request's register).
                    read_bad.eq((req.channel >= n) | ((req.space == Space.HISTOGRAM) &
                                                      (req.index >= p.hist_bins))),
                    s1_h_service.eq(Mux(
                        (req.channel >= n) | (req.index >= p.hist_bins), 0,
                        Cat(Const(0, p.channel_bits),
                            req.index[:(p.hist_bins - 1).bit_length()]))),
                ]
            with m.Elif(take_scrub):
                # (Channel 0: the histogram address is formed by ORs, see c5.)
                m.d.sync += [s1_job.eq(_Job.SCRUB), s1_channel.eq(0),
                             s1_h_service.eq(scrub_ptr)]
            with m.Else():
                m.d.sync += s1_job.eq(_Job.NONE)

        with m.If(self.clear):
            m.d.sync += clear_pending.eq(1)
        # The scrub pointer advances at c5 of its job (the job's addresses are formed from it
        # then: no copy of it is registered); the next take is at the next c4.
        with m.If(phase & (s1_job == _Job.SCRUB)):
            m.d.sync += scrub_ptr.eq(scrub_ptr + 1)
            with m.If(scrub_ptr == scrub_stop):
                m.d.sync += [scrubbing.eq(0), booting.eq(0)]
        with m.If(flip):
            m.d.sync += [
                clear_pending.eq(self.clear),
                epoch_bit.eq(~epoch_bit),
                epoch.eq(epoch + 1),
                scrubbing.eq(1),
                scrub_ptr.eq(0),
            ]

        # ---- c5 (phase 1): first window, form addresses -----------------------------------

        class_index = Signal(p.row_bits)
        by_window = Signal(p.row_bits)
        first_window(m, s1_match, by_window, p)
        m.d.comb += class_index.eq(by_window)
        if tb:
            # A tag 1 … K names the class; the bus tap knows the operation.
            with m.If((s1_tag != 0) & (s1_tag <= p.classes)):
                m.d.comb += class_index.eq(s1_tag - 1)

        def counter_addr(channel, index):
            return Cat(Const(index, p.row_bits) if isinstance(index, int) else index[:p.row_bits],
                       channel[:p.channel_bits])

        def hist_addr(bin_, channel):
            return Cat(channel[:p.channel_bits], bin_)

        # The job is registered twice from the c4 registers (s1, which hold through c6): J, at
        # the end of c5, for what happens at c6 and c7 (the count word's read and write, the
        # histogram's read); K, at the end of c6, for c7 and c8 (the busy word's read, its
        # write loaded at c8, the read response). Nothing is copied from one to the other.
        job = data.StructLayout({
            "cnt_addr": range(a_depth), "cnt_inc": lb, "cnt_we": 1,
            "h_addr": range(h_depth), "h_inc": 1, "h_we": 1,
            "scrub": 1, "epoch": 1, "zero": 1,
        })
        late_job = data.StructLayout({
            "acc_addr": range(a_depth), "acc_add": wide, "acc_we": 1, "epoch": 1,
            "read": 1, "space": Space, "bad": 1,
        })
        j = Signal(job, reset_less=True)
        k = Signal(late_job, reset_less=True)
        is_event = s1_job <= _Job.BUSY
        s1_bin = Signal(range(p.hist_bins))
        log_bin(m, s1_bin, s1_width[:wb], s1_lead, p)
        with m.If(phase):  # c5
            m.d.sync += [
                j.cnt_we.eq(0), j.cnt_inc.eq(0),
                j.h_we.eq(0), j.h_inc.eq(0),
                j.scrub.eq(0), j.zero.eq(0),
                j.epoch.eq(s1_epoch),
                # A service job's slot has no width (its bin is 0) and a scrub's channel is 0,
                # so the addresses of reads and scrubs are ORed into the bin's address: no
                # multiplexer after the log-bin.
                j.h_addr.eq(hist_addr(s1_bin, s1_channel) | s1_h_service),
            ]
            with m.Switch(s1_job):
                with m.Case(_Job.END):
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, class_index)),
                        j.cnt_we.eq(1), j.cnt_inc.eq(1),
                        j.h_we.eq(1), j.h_inc.eq(1),
                    ]
                with m.Case(_Job.PARTIAL, _Job.OVERLONG):
                    index = Mux(s1_job == _Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                                p.counter_index(Counter.OVERLONG))
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, index)),
                        j.cnt_we.eq(1), j.cnt_inc.eq(1),
                    ]
                with m.Case(_Job.SIDE):
                    # Two counts in one job: DROPPED in the first read-modify-write (the lost
                    # count rides in the width), GLITCH in the second one that events use for
                    # busy time.
                    m.d.sync += [
                        j.cnt_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.DROPPED))),
                        j.cnt_we.eq(1), j.cnt_inc.eq(s1_width[:lb]),
                    ]
                with m.Case(_Job.READ):
                    m.d.sync += [
                        j.cnt_addr.eq(Mux(read_bad, 0, counter_addr(s1_channel, s1_index))),
                    ]
                with m.Case(_Job.SCRUB):
                    # Rewrite each word once with its normalised value (adding zero); at boot,
                    # with zero.
                    m.d.sync += [
                        j.scrub.eq(1), j.zero.eq(booting),
                        j.cnt_addr.eq(scrub_ptr), j.cnt_we.eq(scrub_ptr < a_depth),
                        j.h_we.eq(scrub_ptr < h_depth),
                    ]
        with m.Else():  # c6 (s1 still holds the job)
            m.d.sync += [
                k.acc_we.eq(0), k.acc_add.eq(0), k.read.eq(0), k.bad.eq(0),
                k.epoch.eq(s1_epoch), k.space.eq(s1_space),
                k.acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.BUSY_TICKS))),
            ]
            with m.Switch(s1_job):
                with m.Case(_Job.END, _Job.PARTIAL, _Job.OVERLONG, _Job.BUSY):
                    m.d.sync += [k.acc_we.eq(1), k.acc_add.eq(s1_width)]
                with m.Case(_Job.SIDE):
                    m.d.sync += [
                        k.acc_addr.eq(counter_addr(s1_channel, p.counter_index(Counter.GLITCH))),
                        k.acc_we.eq(1), k.acc_add.eq(s1_glitches),
                    ]
                with m.Case(_Job.READ):
                    # (Both of a read's counter-RAM reads address its word.)
                    m.d.sync += [k.read.eq(1), k.bad.eq(read_bad), k.acc_addr.eq(j.cnt_addr)]
                with m.Case(_Job.SCRUB):
                    # A scrub reads its word twice too: the second read is what the next job
                    # takes if its first read meets the scrub's write (see the counter RAM).
                    m.d.sync += k.acc_addr.eq(j.cnt_addr)

        # Trace: one record per front-end event, straight from the c5 registers (the consumer
        # registers what it keeps).
        m.d.comb += [
            self.trace.valid.eq(phase & is_event),
            self.trace.payload.channel.eq(s1_channel),
            self.trace.payload.kind.eq(s1_job),
            # A whole-width job (an overlong pulse's end seen with its saturation) can exceed MAX:
            # the record says MAX.
            self.trace.payload.width.eq(s1_width[:wb] | s1_width[wb:].replicate(wb)),
            self.trace.payload.timestamp.eq(timebase.timestamp),
        ]
        if tb:
            m.d.comb += self.trace.payload.tag.eq(s1_tag)
        m.d.comb += [
            self.trace.payload.index.eq(Mux(
                s1_job == _Job.END, class_index,
                Mux(s1_job == _Job.PARTIAL, p.counter_index(Counter.PARTIAL),
                    Mux(s1_job == _Job.OVERLONG, p.counter_index(Counter.OVERLONG),
                        p.counter_index(Counter.BUSY_TICKS))))),
        ]

        # ---- Counter RAM: {value, tag}; one read and one write per cycle ---------------------
        # A job reads its first word (count) at c6 and its second (busy time) at c7; each read
        # word is normalised and registered (q) the next cycle, and written back plus the
        # increment the cycle after: counts at c8, busy time at c9. No adder follows a RAM output
        # in the same cycle.

        # The RAM is collision-free: nothing uses a read that meets a write of its word (the
        # iCE40's block RAM may return anything then, and the read-during-write bypass Yosys
        # would add was the slowest path of the iCE40 build). Adjacent jobs are the only ones
        # whose reads and writes share cycles (a job's reads at c6 and c7 meet the previous
        # job's writes of its c8 and c9), and events in adjacent slots belong to different
        # channels, so a read meets a write of its word only when one of the two jobs is a
        # read or a scrub (whose two reads both address their word):
        # * a scrub's read meets the write of the job before: the scrub skips its write (a_hit);
        # * a read request's second read meets the previous job's busy-time write: the response
        #   takes its first read (held in q), which came before that write, as a read-first
        #   RAM would return it;
        # * a job's first read meets the previous scrub's write: q then holds the scrub's second
        #   read of the word, normalised, which is what the scrub writes; the job keeps it (or
        #   takes 0 if it counts in another epoch).
        # The two meetings are flip-flops at c7 (col_c6, col_c7), compared at c6 like a_hit.

        counter_word = data.StructLayout({"value": cb, "tag": 1})
        counters = Memory(shape=counter_word, depth=a_depth, init=[])
        m.submodules["counters" + COLLISION_FREE] = counters
        a_wr = counters.write_port()
        a_rd = counters.read_port()
        a_rd_data = a_rd.data
        if self.scramble_collisions:
            a_rd_data = counter_word(self._scramble(m, "counters", a_rd, a_wr))

        w_addr = Signal(range(a_depth), reset_less=True)
        w_en = Signal(reset_less=True)
        w_inc = Signal(max(wide, lb), reset_less=True)
        w_tag = Signal(reset_less=True)
        q = Signal(cb, reset_less=True)
        # The job whose read data arrives this cycle (its first word at c7, its second at c8) is
        # the one J held the cycle before: its epoch and zero flag come from flip-flops.
        q_epoch = Signal(reset_less=True)
        q_zero = Signal(reset_less=True)
        m.d.sync += [q_epoch.eq(j.epoch), q_zero.eq(j.zero)]
        m.d.comb += a_rd.addr.eq(Mux(phase, k.acc_addr, j.cnt_addr))
        # c7: this job's first read met the previous job's write (col_c6); keep_c6: q holds the
        # word that write wrote and the job counts in its epoch. c8: the second read met the
        # previous job's busy-time write (col_c7): q keeps the first read.
        col_c6 = Signal(reset_less=True)
        col_c7 = Signal(reset_less=True)
        same_c6 = Signal(reset_less=True)  # that write was in this job's epoch
        keep_c6 = Signal()
        m.d.comb += keep_c6.eq(col_c6 & same_c6 & ~q_zero)
        q_hold = Signal()
        q_clear = Signal()
        m.d.comb += [q_hold.eq(Mux(phase, keep_c6, col_c7)), q_clear.eq(phase & col_c6)]
        # Carry-select: the increment is at most `width_bits` wide, so the word's upper part
        # only ever gains the carry out of the lower part. The write cycle adds `width_bits`
        # bits and, in parallel, increments the upper part, and the carry picks one of the two.
        split = max(wide, lb)
        low_sum = Signal(split + 1)
        late = self.normalise_late
        if late is None:
            late = not str(getattr(platform, "device", "")).startswith("iCE40")
        if not late:
            # Normalised as it is registered: one LUT level between the RAM's output and q (as
            # q's synchronous reset). The iCE40's block RAM is quick enough for that.
            with m.If(~q_hold):
                m.d.sync += q.eq(Mux((a_rd_data.tag == q_epoch) & ~q_zero & ~q_clear,
                                     a_rd_data.value, 0))
            q_value = q
            m.d.comb += low_sum.eq(q[:split] + w_inc)
            write_value = Cat(low_sum[:split], Mux(low_sum[split], q[split:] + 1, q[split:]))
        else:
            # Registered as read (the ECP5's block RAM has 5.8 ns of clock-to-output and sits
            # far from the logic), its tag beside it, and normalised where it is used: the
            # write cycle's sum (the increment alone for a stale word) and the read response.
            q_tag = Signal(reset_less=True)
            q_epoch_late = Signal(reset_less=True)
            q_zero_late = Signal(reset_less=True)
            q_ok = Signal()
            m.d.comb += q_ok.eq((q_tag == q_epoch_late) & ~q_zero_late)
            m.d.sync += [q_epoch_late.eq(q_epoch), q_zero_late.eq(q_zero)]
            with m.If(q_clear):
                # The word the previous scrub wrote: q normalised, with the scrub's epoch.
                m.d.sync += [q.eq(Mux(q_ok, q, 0)), q_tag.eq(q_epoch_late)]
            with m.Elif(~q_hold):
                m.d.sync += [q.eq(a_rd_data.value), q_tag.eq(a_rd_data.tag)]
            q_value = Mux(q_ok, q, 0)
            m.d.comb += low_sum.eq(Mux(q_ok, q[:split] + w_inc, w_inc))
            write_value = Cat(low_sum[:split],
                              Mux(low_sum[split], q[split:] + 1, q[split:]) &
                              q_ok.replicate(cb - split))

        # A scrub job reads its word at c6 and writes it at c8; the job before it writes at c6
        # (count) and c7 (busy time), after the scrub's read. If that was the same word in the
        # same epoch, the scrub's value is stale and that write has scrubbed the word already:
        # the scrub skips its write. (Jobs of one channel are a scanner round apart, so events
        # never meet such a hazard; a read may return a value one job old.)
        # Both writes are known at c6 (the c7 one is K's, loaded at the end of c6), so the hit
        # is a flip-flop at c7.
        # (Addresses and epochs are compared into separate flip-flops, joined after them.)
        same_c7 = Signal(reset_less=True)
        with m.If(~phase):
            m.d.sync += [
                col_c6.eq(w_en & (w_addr == j.cnt_addr)),
                col_c7.eq(k.acc_we & (k.acc_addr == j.cnt_addr)),
                same_c6.eq(w_tag == j.epoch),
                same_c7.eq(k.epoch == j.epoch),
            ]
        a_hit = (col_c6 & same_c6) | (col_c7 & same_c7)
        with m.If(phase):  # load the c8 write: J's count update
            m.d.sync += [
                w_addr.eq(j.cnt_addr), w_inc.eq(j.cnt_inc), w_tag.eq(j.epoch),
                w_en.eq(j.cnt_we & ~(j.scrub & a_hit)),
            ]
        with m.Else():  # load the c9 write: K's busy-time update
            m.d.sync += [
                w_addr.eq(k.acc_addr), w_inc.eq(k.acc_add), w_tag.eq(k.epoch),
                w_en.eq(k.acc_we),
            ]
        m.d.comb += [
            a_wr.addr.eq(w_addr), a_wr.en.eq(w_en),
            a_wr.data.value.eq(write_value), a_wr.data.tag.eq(w_tag),
        ]

        # ---- Histogram RAM: {value, tag}, single port: read at c6, written at c9 -------------
        # The read data is registered in the RAM wrapper (c7), normalised and incremented at c8
        # (qh: the bin's new value; a read's increment is 0), and written at c9. The write of
        # the job before lands at c7, with the write registers (hw_*) still holding it; they
        # take this job's at the end of c7, from J.

        hist_word = data.StructLayout({"value": hb, "tag": 1})
        m.submodules.histogram = hist = SinglePortRAM(
            hist_word.size, h_depth, kind=hist_ram, spram_block=self.spram_block)
        h_rd = hist_word(hist.rdata)
        qh = Signal(hb, reset_less=True)
        hw_addr = Signal(range(h_depth), reset_less=True)
        hw_en = Signal(reset_less=True)
        hw_tag = Signal(reset_less=True)
        hw_zero = Signal(reset_less=True)
        hw_inc = Signal(reset_less=True)
        # A scrub skips its write when the job before writes the same bin in the same epoch (at
        # c7: that write scrubs it; the scrub's read came before it). Compared at c6, when both
        # are known already.
        h_hit = Signal(reset_less=True)
        with m.If(~phase):
            m.d.sync += h_hit.eq(hw_en & (hw_addr == j.h_addr) & (hw_tag == j.epoch))
        with m.If(phase):  # c7: the write of the job before lands now
            m.d.sync += [
                hw_addr.eq(j.h_addr), hw_tag.eq(j.epoch), hw_zero.eq(j.zero), hw_inc.eq(j.h_inc),
                hw_en.eq(j.h_we & ~(j.scrub & h_hit)),
            ]
        with m.Else():  # c8: the read data, normalised, for the write at c9
            # (The increment alone, or the word plus it: no multiplexer before the adder.)
            with m.If((h_rd.tag == hw_tag) & ~hw_zero):
                m.d.sync += qh.eq(h_rd.value + hw_inc)
            with m.Else():
                m.d.sync += qh.eq(hw_inc)
        h_write = phase & hw_en
        m.d.comb += [
            hist.addr.eq(Mux(h_write, hw_addr, j.h_addr)),
            hist.we.eq(h_write),
            hist.wdata.eq(Cat(qh, hw_tag)),
        ]

        # ---- Read responses (captured at c9) -------------------------------------------------
        # A counter read reads its word at c6 and again at c7 (both of its job's counter-RAM
        # reads address it); the second read is the one registered in q at c9. K's read flags
        # are kept for c9.

        resp_read = Signal(reset_less=True)
        resp_bad = Signal(reset_less=True)
        resp_space = Signal(Space, reset_less=True)
        with m.If(~phase):  # c8
            m.d.sync += [resp_read.eq(k.read), resp_bad.eq(k.bad), resp_space.eq(k.space)]
        with m.If(phase & resp_read):
            m.d.sync += [
                self.read_resp.valid.eq(1),
                self.read_resp.payload.eq(Mux(
                    resp_bad, 0, Mux(resp_space == Space.HISTOGRAM, qh, q_value))),
            ]
        with m.Elif(self.read_resp.ready):
            m.d.sync += self.read_resp.valid.eq(0)
        # A request is in flight from its acceptance (c4) to its response (end of c9).
        with m.If(take_read):
            m.d.sync += read_busy.eq(1)
        with m.Elif(phase & resp_read):
            m.d.sync += read_busy.eq(0)

        return m

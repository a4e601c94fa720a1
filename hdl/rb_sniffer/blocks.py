"""The sniffer's small blocks: time base, channel front end, classifier (and its DSP bounds'
loader), log binner, quiescence.

Each block is a :class:`wiring.Component` with a declared interface, tested on its own in the
Amaranth simulator. :class:`~.sniffer.RBSniffer` joins them around the shared counter pipeline.
Exact semantics: ``docs/architecture.md``, section "The R/B# sniffer".
"""

from amaranth.hdl import Array, Cat, ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import mailbox_layout, window_layout
from .params import Counter, SnifferParams

__all__ = ["TimeBase", "FrontEnd", "Classifier", "BoundLoader", "LogBinner", "Quiescence",
           "QUIESCENCE_SEGMENT",
           "first_window",
           "DSP_BOUNDS", "dsp_at_least", "leading_one_hot", "log_bin", "or_all"]


def _check_params(params):
    if not isinstance(params, SnifferParams):
        raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")
    return params


class TimeBase(wiring.Component):
    """Divide the system clock into ticks and count them.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    prescaler : In(prescaler_bits)
        Cycles per tick; 0 behaves as 1. A new value is seen two cycles later (the tick is a
        register computed a cycle ahead, from a comparison registered a cycle before) and
        takes effect at the next tick.
    tick : Out(1)
        High for one cycle every ``prescaler`` cycles, from flip-flops (it enables every
        channel's width counter, so it must not come out of a comparator).
    timestamp : Out(timestamp_bits)
        Ticks since reset.
    ticks : Out(copies)
        Copies of ``tick``, each from its own flip-flops, to split its fan-out.
    ticks_next : Out(copies)
        ``ticks`` one cycle ahead: the tick copy ``k`` will be high in the next cycle.
    stamps : Out(copies * stamp_bits)
        Copies of the low ``stamp_bits`` bits of ``timestamp`` (copy ``k`` in bits
        ``k * stamp_bits …``), each a counter of its own enabled by its ``ticks`` copy.
    """

    def __init__(self, params, copies=1):
        self.params = _check_params(params)
        self.copies = copies
        super().__init__({
            "prescaler": In(params.prescaler_bits),
            "tick": Out(1),
            "timestamp": Out(params.timestamp_bits),
            "ticks": Out(copies),
            "ticks_next": Out(copies),
            "stamps": Out(copies * params.stamp_bits),
        })
        half = params.timestamp_bits // 2
        #: The two registers the timestamp is counted in (lower, upper).
        self.timestamp_halves = (Signal(half, name="ts_lower"),
                                 Signal(params.timestamp_bits - half, name="ts_upper"))

    def elaborate(self, platform):
        m = Module()
        p = self.params
        # tick(t) = count(t) + 1 >= P(t - 2), with count returning to 0 on a tick. The decision
        # for cycle t + 1 is made on cycle t (`due`) and registered (`ahead`); it is one LUT
        # after flip-flops: the comparison with the prescaler is itself made a cycle earlier
        # (`ge`, `le1`), for the count the next cycle will have, so a new prescaler value is
        # seen two cycles after it is written.
        ahead = Signal()  # the registered decision; 0 during reset
        # Cycle 0 (the first after reset) ticks when P <= 1: `first` is 1 during reset and on
        # cycle 0, so `first_tick` holds P <= 1 on cycle 0 (and on cycle 1, harmlessly: with
        # P <= 1 every cycle ticks).
        first = Signal(init=1)
        first_tick = Signal(reset_less=True)
        m.d.sync += [first.eq(0), first_tick.eq(first & (self.prescaler <= 1))]
        m.d.comb += self.tick.eq(ahead | first_tick)
        # `after2` holds count + 3: on a cycle without a tick it is the next cycle's count + 2,
        # which that cycle compares with P (count + 1 >= P one cycle ahead).
        after2 = Signal(p.prescaler_bits + 1, init=3)
        m.d.sync += after2.eq(Mux(self.tick, 3, after2 + 1))
        ge = Signal()  # this cycle's count + 2 >= P (0 on cycle 0: see first_2)
        le1 = Signal(reset_less=True)  # P <= 1 (the tick every cycle)
        # On cycle 0 the count is 0: `first_2` holds 2 >= P then, the comparison that `ge`
        # would have made during reset.
        first_2 = Signal(reset_less=True)
        m.d.sync += [
            le1.eq(self.prescaler <= 1),
            first_2.eq(first & (self.prescaler <= 2)),
            # After a tick the next count is 0.
            ge.eq(Mux(self.tick, self.prescaler <= 2, after2 >= self.prescaler)),
        ]
        due = Mux(self.tick, le1, ge | first_2)
        m.d.sync += ahead.eq(due)
        for k in range(self.copies):
            ahead_k = Signal(name=f"ahead_{k}")
            first_k = Signal(name=f"first_tick_{k}", reset_less=True)
            m.d.sync += [ahead_k.eq(due), first_k.eq(first & (self.prescaler <= 1))]
            m.d.comb += [self.ticks[k].eq(ahead_k | first_k), self.ticks_next[k].eq(due)]
            # The timestamp's low bits, counted again beside each tick copy (same reset, same
            # enable: always equal to them) so that no net of the time base reaches every channel.
            stamp_k = Signal(p.stamp_bits, name=f"stamp_{k}")
            with m.If(self.ticks[k]):
                m.d.sync += stamp_k.eq(stamp_k + 1)
            m.d.comb += self.stamps.word_select(k, p.stamp_bits).eq(stamp_k)
        # The timestamp counts in two halves, so that no carry chain is longer than half of it
        # (on the iCE40 a 48-bit chain alone takes 13.4 ns of the 20.8 ns cycle): the upper
        # half takes the carry on the tick that wraps the lower half, in the same cycle.
        # "The lower half is all ones" is a flip-flop (set from a comparison with a constant),
        # so that the upper half's enable is one LUT after the tick.
        lower, upper = self.timestamp_halves
        lower_full = Signal()
        with m.If(self.tick):
            m.d.sync += [lower.eq(lower + 1), lower_full.eq(lower == (1 << len(lower)) - 2)]
            with m.If(lower_full):
                m.d.sync += upper.eq(upper + 1)
        m.d.comb += self.timestamp.eq(Cat(lower, upper))
        return m


class FrontEnd(wiring.Component):
    """Watch the low pulses of one synchronised R/B# line and post their ends to a mailbox.

    The front end keeps no width counter: it times a pulse with the low ``stamp_bits`` bits of
    the timestamp. The shared pipeline records each pulse's start in a RAM at its first visit
    (``take_fall``, from :attr:`age`) and forms the width of a pulse that ends later from the
    time stamp its mailbox holds; a pulse that begins and ends between two visits is measured
    here, by its age. Saturation (overlong pulses) is the pipeline's too. Exact semantics:
    ``docs/architecture.md``, "Channel front end".

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    lvl : In(1)
        The synchronised line (1 = ready).
    enable : In(1)
        Channel enable; a disabled channel looks ready and is disarmed.
    tick : In(1)
        Time base strobe.
    stamp : In(stamp_bits)
        The low bits of the timestamp (a copy from :class:`TimeBase`).
    glitch_off : In(1)
        ``glitch_ticks`` is 0: no pulse is a glitch. (From a flip-flop shared by a group of
        channels.) An observed pulse shorter than ``glitch_ticks`` is a glitch and only
        increments the side count.
    glitch_now : In(glitch_bits)
        ``glitch_ticks`` less this cycle's tick (not below 0), from flip-flops: the age after
        this cycle equals ``glitch_ticks`` exactly when the age now equals this.
    take_event : In(1)
        The pipeline takes the mailbox's pulse end this cycle.
    take_side : In(1)
        The pipeline takes the mailbox's side counts (``lost``, ``glitches``) this cycle.
    take_fall : In(1)
        The pipeline records the start of the pulse in progress this cycle (from :attr:`age`);
        only while :attr:`fall_req`.
    mailbox : Out(mailbox_layout)
        The pending pulse end (``valid``, ``partial``, ``rec``, ``stamp``) and the side counts.
        Glitches never occupy the event slot, so ringing after a pulse cannot cost the next pulse.
    low : Out(1)
        The channel is enabled and busy (for quiescence detection).
    age : Out(stamp_bits)
        Ticks since the pulse in progress started (modulo ``2**stamp_bits``).
    fall_req : Out(1)
        A pulse was in progress on the cycle before whose start the pipeline has not recorded
        (registered; cleared by ``take_fall``).
    run_rec : Out(1)
        A pulse was in progress on the cycle before whose start the pipeline has recorded (it
        checks saturation; registered).
    tag : In(tag_bits)
        Only with ``tag_bits > 0``: the opcode class a bus tap latched for this channel. It is
        sampled on the first low cycle of a pulse and rides with the pulse's end
        (``mailbox.tag``).
    """

    def __init__(self, params):
        self.params = _check_params(params)
        members = {
            "lvl": In(1, init=1),
            "enable": In(1),
            "tick": In(1),
            "stamp": In(params.stamp_bits),
            "glitch_off": In(1, init=1),
            "glitch_now": In(params.glitch_bits),
            "take_event": In(1),
            "take_side": In(1),
            "take_fall": In(1),
            "mailbox": Out(mailbox_layout(params)),
            "low": Out(1),
            "age": Out(params.stamp_bits),
            "fall_req": Out(1),
            "run_rec": Out(1),
        }
        if params.tag_bits:
            members["tag"] = In(params.tag_bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        p = self.params
        armed = Signal()
        low_prev = Signal()
        recorded = Signal()  # the pulse in progress has its start in the pipeline's RAM

        m.d.comb += self.low.eq(self.enable & ~self.lvl)
        m.d.sync += [
            low_prev.eq(self.low),
            armed.eq(self.enable & (armed | self.lvl)),
        ]

        # The age counts ticks while low and is 0 while not, so on the first low cycle of a
        # pulse it is 0 and on cycle t of it, ts(t) - ts(start): the pulse's width so far. It
        # wraps; the pipeline reads it within two rotations of the start, far below 2**bits.
        age = self.age
        age_next = Signal(p.stamp_bits)
        m.d.comb += age_next.eq(Mux(self.low, age + self.tick, 0))
        m.d.sync += age.eq(age_next)
        with m.If(~self.low):
            m.d.sync += recorded.eq(0)
        with m.Elif(self.take_fall):
            m.d.sync += recorded.eq(1)
        # fall_req is registered (the scanner's offer logic then starts at flip-flops): it says
        # what the cycle before said, and a take clears it at once. Seen a cycle late at a
        # pulse's start, it delays the start's recording by at most a rotation; still high on
        # the cycle a pulse ends (low is 0), a take records a start that nothing uses (the end
        # was posted unrecorded, with its width) and the front end stays unrecorded.
        # run_rec likewise: still high on the cycle a recorded pulse ends, it lets the pipeline
        # check the pulse's saturation once more, up to its end (the ticks it counts are the
        # pulse's; the end then settles the rest).
        fall_req = Signal()
        run_rec = Signal()
        m.d.sync += [fall_req.eq(self.low & ~recorded & ~self.take_fall),
                     run_rec.eq(self.low & recorded)]
        m.d.comb += [self.fall_req.eq(fall_req), self.run_rec.eq(run_rec)]

        # `short`, at the pulse's end: it measured fewer than glitch_ticks ticks. The age grows
        # by at most one a cycle from 0, so it reaches glitch_ticks (at most 2**stamp_bits - 1)
        # on its way to any larger value, wrapped or not: a flag that is set when the age's next
        # value equals glitch_ticks, and stays set, says "age >= glitch_ticks". An equality, not
        # a comparator (no carry chain), against glitch_now, which takes this cycle's tick off
        # the threshold (no adder either); at the end (age = the width) it is a flip-flop.
        reached = Signal()
        # (The equality as a balanced tree whose first level, one LUT per two bits, is kept
        # through synthesis: left to itself, Yosys' mapping chains it a bit per LUT, six levels
        # deep on the iCEBreaker, where the threshold comes from a flip-flop shared by eight
        # front ends.)
        pairs = []
        for i in range(0, p.glitch_bits, 2):
            pair = Signal(name=f"age_eq_{i}", attrs={"keep": 1})
            m.d.comb += pair.eq(age[i:i + 2] == self.glitch_now[i:i + 2])
            pairs.append(pair)
        if len(age) > p.glitch_bits:
            high = Signal(name="age_high_zero", attrs={"keep": 1})
            m.d.comb += high.eq(age[p.glitch_bits:] == 0)
            pairs.append(high)
        with m.If(~self.low):
            m.d.sync += reached.eq(self.glitch_off)
        with m.Elif(Cat(pairs).all()):
            m.d.sync += reached.eq(1)
        short = Signal()
        m.d.comb += short.eq(~reached)

        ends = low_prev & ~self.low
        complete = armed & self.enable
        emit = Signal()
        glitch_inc = Signal()
        m.d.comb += [
            glitch_inc.eq(ends & complete & short),
            emit.eq(ends & ~(complete & short)),
        ]

        box = self.mailbox
        # Only `valid` says whether the rest means anything: the rest needs no reset.
        box_partial = Signal(reset_less=True)
        box_rec = Signal(reset_less=True)
        box_stamp = Signal(p.stamp_bits, reset_less=True)
        m.d.comb += [box.partial.eq(box_partial), box.rec.eq(box_rec), box.stamp.eq(box_stamp)]
        if p.tag_bits:
            pulse_tag = Signal(p.tag_bits, reset_less=True)
            box_tag = Signal(p.tag_bits, reset_less=True)
            with m.If(self.low & ~low_prev):
                m.d.sync += pulse_tag.eq(self.tag)
            m.d.comb += box.tag.eq(box_tag)
        lost_inc = Signal()
        with m.If(emit):
            with m.If(~box.valid | self.take_event):
                m.d.sync += [
                    box.valid.eq(1),
                    box_partial.eq(~complete),
                    box_rec.eq(recorded),
                    # A recorded pulse's end time; an unrecorded one's width.
                    box_stamp.eq(Mux(recorded, self.stamp, age)),
                ]
                if p.tag_bits:
                    m.d.sync += box_tag.eq(pulse_tag)
            with m.Else():
                m.d.comb += lost_inc.eq(1)
        with m.Elif(self.take_event):
            m.d.sync += box.valid.eq(0)
        # The side counts add their increments a cycle late (registered), which keeps the
        # emit logic and the counters' carry chains in separate cycles. A count taken by the
        # pipeline in that cycle is not lost: it stays for the next SIDE job.
        # (Written as "the late increment alone, or the count plus it" rather than as a sum of a
        # multiplexer: the counts' upper bits then take `take_side` as a synchronous reset, and
        # no logic sits before their adders.)
        lost_late = Signal()
        glitch_late = Signal()
        m.d.sync += [lost_late.eq(lost_inc), glitch_late.eq(glitch_inc)]
        with m.If(self.take_side):
            m.d.sync += [box.lost.eq(lost_late), box.glitches.eq(glitch_late)]
        with m.Else():
            m.d.sync += [box.lost.eq(box.lost + lost_late),
                         box.glitches.eq(box.glitches + glitch_late)]
        return m


def first_window(m, match, index, params):
    """Drive ``index`` (combinationally) with the first set bit of ``match``.

    ``match[k]`` says the width is in window ``k``; with none set, ``index`` is the row index of
    ``UNCLASSIFIED``. The lowest-numbered window wins.
    """
    # An If/Elif chain is a priority encoder.
    for k in range(params.classes):
        with (m.If(match[k]) if k == 0 else m.Elif(match[k])):
            m.d.comb += index.eq(k)
    with m.Else():
        m.d.comb += index.eq(params.counter_index(Counter.UNCLASSIFIED))


#: Bits per segment of the quiescence comparison (see :class:`Quiescence`).
QUIESCENCE_SEGMENT = 8


#: Window bounds an iCE40UP's DSP blocks can hold and compare: its eight ``SB_MAC16``, one bound
#: each (the low and high bound of classes 0 … 3).
DSP_BOUNDS = 8


def dsp_at_least(m, name, value, bound, load):
    """Return a signal that is ``value >= bound`` (unsigned, up to 32 bits), computed by an iCE40
    ``SB_MAC16`` that holds ``bound`` in its input registers.

    The DSP is a 32-bit subtractor, ``{C, D} - {A, B}``: ``value`` enters combinationally on C
    and D, the bound is registered in A and B (loaded from ``bound`` on a cycle with ``load``,
    held otherwise, reset by nothing: it survives a logic reset like the register it mirrors).
    Its carry out says that no borrow occurred, i.e. ``value >= bound``. The adders' own
    configuration follows the iCE40 technology library's description of the block.
    """
    ge = Signal(name=f"{name}_ge")
    wide_value = Signal(32, name=f"{name}_value")
    wide_bound = Signal(32, name=f"{name}_bound")
    m.d.comb += [wide_value.eq(value), wide_bound.eq(bound)]

    def const(v, bits):
        return Const(v, bits)

    m.submodules[name] = Instance(
        "SB_MAC16",
        p_NEG_TRIGGER=const(0, 1),
        p_C_REG=const(0, 1), p_A_REG=const(1, 1), p_B_REG=const(1, 1), p_D_REG=const(0, 1),
        p_TOP_8x8_MULT_REG=const(0, 1), p_BOT_8x8_MULT_REG=const(0, 1),
        p_PIPELINE_16x16_MULT_REG1=const(0, 1), p_PIPELINE_16x16_MULT_REG2=const(0, 1),
        # Upper half: C - A with the lower half's carry; lower half: D - B; outputs unused.
        p_TOPOUTPUT_SELECT=const(0, 2), p_TOPADDSUB_LOWERINPUT=const(0, 2),
        p_TOPADDSUB_UPPERINPUT=const(1, 1), p_TOPADDSUB_CARRYSELECT=const(2, 2),
        p_BOTOUTPUT_SELECT=const(0, 2), p_BOTADDSUB_LOWERINPUT=const(0, 2),
        p_BOTADDSUB_UPPERINPUT=const(1, 1), p_BOTADDSUB_CARRYSELECT=const(0, 2),
        p_MODE_8x8=const(1, 1), p_A_SIGNED=const(0, 1), p_B_SIGNED=const(0, 1),
        i_CLK=ClockSignal(), i_CE=const(1, 1),
        i_C=wide_value[16:], i_D=wide_value[:16], i_A=wide_bound[16:], i_B=wide_bound[:16],
        i_AHOLD=~load, i_BHOLD=~load, i_CHOLD=const(1, 1), i_DHOLD=const(1, 1),
        i_IRSTTOP=const(0, 1), i_IRSTBOT=const(0, 1), i_ORSTTOP=const(0, 1),
        i_ORSTBOT=const(0, 1), i_OLOADTOP=const(0, 1), i_OLOADBOT=const(0, 1),
        i_ADDSUBTOP=const(1, 1), i_ADDSUBBOT=const(1, 1),
        i_OHOLDTOP=const(1, 1), i_OHOLDBOT=const(1, 1),
        i_CI=const(0, 1), i_ACCUMCI=const(0, 1), i_SIGNEXTIN=const(0, 1),
        # Every output connected (the unused ones to nothing that reads them): Yosys' DSP
        # packing pass (synth_ice40 -dsp) inspects each SB_MAC16's ports.
        o_CO=ge, o_O=Signal(32, name=f"{name}_o"), o_ACCUMCO=Signal(name=f"{name}_accumco"),
        o_SIGNEXTOUT=Signal(name=f"{name}_signextout"),
    )
    return ge


class Classifier(wiring.Component):
    """Map a measured width to the index of the counter it increments (combinational).

    Parameters
    ----------
    params : SnifferParams
    dsp_bounds : int
        How many window bounds (``lo_0, hi_0, lo_1, …``, at most :data:`DSP_BOUNDS`) are held and
        compared by iCE40UP DSP blocks (:func:`dsp_at_least`) instead of flip-flops and carry
        chains; 0 (the default) for none. Those bounds are loaded through ``load`` and
        ``load_data``; their entries of ``windows`` are not used.

    Members
    -------
    width : In(width_bits)
    windows : In(ArrayLayout(window_layout, classes))
    load : In(dsp_bounds)
        Only with ``dsp_bounds``: bit ``j`` loads ``load_data`` into DSP bound ``j`` (bound
        ``j`` is class ``j // 2``'s ``lo`` for even ``j``, its ``hi`` for odd ``j``).
    load_data : In(width_bits)
        Only with ``dsp_bounds``.
    match : Out(classes)
        Bit ``k``: ``lo_k <= width < hi_k``. (The sniffer registers these and finds the first
        one a cycle later, with :func:`first_window`.)
    index : Out(row_bits)
        The first window ``k`` with ``lo <= width < hi``; else ``K + UNCLASSIFIED``. (Glitches
        are filtered in the front ends and never reach the classifier.)
    """

    def __init__(self, params, dsp_bounds=0):
        self.params = _check_params(params)
        if not isinstance(dsp_bounds, int) or not 0 <= dsp_bounds <= min(DSP_BOUNDS,
                                                                         2 * params.classes):
            raise ValueError(f"dsp_bounds must be an integer from 0 to "
                             f"{min(DSP_BOUNDS, 2 * params.classes)}, not {dsp_bounds!r}")
        self.dsp_bounds = dsp_bounds
        members = {
            "width": In(params.width_bits),
            "windows": In(data.ArrayLayout(window_layout(params), params.classes)),
            "match": Out(params.classes),
            "index": Out(params.row_bits),
        }
        if dsp_bounds:
            members["load"] = In(dsp_bounds)
            members["load_data"] = In(params.width_bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        w = self.width
        matches = []
        for k, window in enumerate(self.windows):
            bounds = []
            for edge, bound in ((0, window.lo), (1, window.hi)):
                j = 2 * k + edge
                if j < self.dsp_bounds:
                    bounds.append(dsp_at_least(m, f"dsp_bound_{j}", w, self.load_data,
                                               self.load[j]))
                else:
                    bounds.append(w >= bound)
            matches.append(bounds[0] & ~bounds[1])
        m.d.comb += self.match.eq(Cat(matches))
        first_window(m, self.match, self.index, self.params)
        return m


class BoundLoader(wiring.Component):
    """Load the window bounds a :class:`Classifier` holds in DSP blocks: the boot windows first,
    then whatever the register file writes.

    The boot bounds are loaded one per cycle after configuration, from a reset-less step
    counter: a logic reset keeps them, as it keeps the registers (and the boot runs during a
    reset too). The loads are registered on their way to the DSP blocks' hold inputs: the
    register file's address decode and the boot choice reach no DSP in the cycle they are made,
    so a bound written is compared from the second cycle after its strobe.

    Parameters
    ----------
    params : SnifferParams
    boot_bounds : sequence of int
        The bounds held from power-up, in the order ``lo_0, hi_0, lo_1, …`` (one per DSP
        bound, at least one, at most :data:`DSP_BOUNDS`).

    Members
    -------
    win_load : In(len(boot_bounds))
        Bit ``j`` writes ``win_data`` into DSP bound ``j``.
    win_data : In(width_bits)
    load : Out(len(boot_bounds))
        The classifier's ``load`` (registered).
    load_data : Out(width_bits)
        The classifier's ``load_data`` (registered).
    """

    def __init__(self, params, boot_bounds):
        self.params = _check_params(params)
        self.boot_bounds = [int(b) for b in boot_bounds]
        nb = len(self.boot_bounds)
        if not 1 <= nb <= DSP_BOUNDS:
            raise ValueError(f"boot_bounds must hold 1 to {DSP_BOUNDS} bounds, not {nb}")
        limit = 1 << params.width_bits
        for j, b in enumerate(self.boot_bounds):
            if not 0 <= b < limit:
                raise ValueError(f"boot_bounds[{j}] must be from 0 to {limit - 1}, not {b}")
        super().__init__({
            "win_load": In(nb),
            "win_data": In(params.width_bits),
            "load": Out(nb),
            "load_data": Out(params.width_bits),
        })

    def elaborate(self, platform):
        m = Module()
        wb = self.params.width_bits
        nb = len(self.boot_bounds)
        boot_step = Signal(range(nb + 1), reset_less=True)
        booted = Signal()
        m.d.comb += booted.eq(boot_step == nb)
        with m.If(~booted):
            m.d.sync += boot_step.eq(boot_step + 1)
        # (Only read while boot_step < nb.)
        boot_value = Array(Const(b, wb) for b in self.boot_bounds)[boot_step]
        load_q = Signal(nb, reset_less=True)  # (the boot runs during a reset too)
        data_q = Signal(wb, reset_less=True)
        m.d.sync += [load_q.eq(Mux(booted, self.win_load, Const(1, nb) << boot_step)),
                     data_q.eq(Mux(booted, self.win_data, boot_value))]
        m.d.comb += [self.load.eq(load_q), self.load_data.eq(data_q)]
        return m


def leading_one_hot(value, lo, groups=None):
    """Return the one-hot position of ``value``'s highest set bit among bits ``lo`` and above:
    bit ``e - lo`` is set when bit ``e`` is the highest one (none when all those bits are 0).

    "Any bit above ``e``" is formed from ORs of 4-bit groups, so that each output is about four
    LUT levels deep whatever the width (a priority chain is as deep as the width). ``groups``,
    if given, holds those ORs (bit ``g`` for bits ``4g … 4g + 3``), e.g. from flip-flops
    registered beside ``value``: each output is then two or three LUT levels deep.
    """
    bits = len(value)
    if groups is None:
        groups = [value[g:min(g + 4, bits)].any() for g in range(0, bits, 4)]
    else:
        groups = [groups[g] for g in range(-(-bits // 4))]
    hot = []
    for e in range(lo, bits):
        g = e // 4
        above = Cat(*groups[g + 1:], value[e + 1:min(4 * g + 4, bits)]).any() \
            if e + 1 < bits else Const(0)
        hot.append(value[e] & ~above)
    return Cat(*hot)


def log_bin(m, bin_, width, hot, params):
    """Drive ``bin_`` (combinationally) with the log-linear bin of ``width``, given ``hot``, its
    :func:`leading_one_hot` from bit ``hist_sub_bits``: a fixed ``hist_sub_bits``-bit slice
    per octave, selected by AND-OR (a few LUT levels)."""
    s = params.hist_sub_bits
    terms = [Mux(hot[e - s], ((e - s + 1) << s) | width[e - s:e], 0)
             for e in range(s, params.width_bits)]
    low = Mux(hot.any(), 0, width[:s])
    m.d.comb += bin_.eq(or_all(terms + [low]))


def or_all(values):
    """The bitwise OR of ``values`` (a list of values or signals), as a balanced tree (the
    synthesis tools keep much of the netlist's shape: a chain of ORs becomes a chain of LUTs)."""
    values = list(values)
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


class LogBinner(wiring.Component):
    """Map a width to its log-linear histogram bin (combinational).

    Widths below ``2**S`` map to themselves; a width with its leading one at bit ``e >= S``
    maps to ``(e - S + 1) * 2**S`` plus the ``S`` bits below the leading one. The sniffer uses
    the two halves, :func:`leading_one_hot` and :func:`log_bin`, in consecutive pipeline stages.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    width : In(width_bits)
    bin : Out(range(hist_bins))
    """

    def __init__(self, params):
        self.params = _check_params(params)
        super().__init__({
            "width": In(params.width_bits),
            "bin": Out(range(params.hist_bins)),
        })

    def elaborate(self, platform):
        m = Module()
        hot = leading_one_hot(self.width, self.params.hist_sub_bits)
        log_bin(m, self.bin, self.width, hot, self.params)
        return m


class Quiescence(wiring.Component):
    """Detect that every enabled line has been ready for ``idle_ticks`` ticks.

    Parameters
    ----------
    params : SnifferParams

    Members
    -------
    all_ready : In(1)
        No enabled channel is low.
    tick : In(1)
    timestamp : In(timestamp_bits)
    idle_ticks : In(timestamp_bits)
    quiescent : Out(1)
        All lines ready for at least ``idle_ticks`` ticks, two cycles late (a registered
        comparison, then the registered flag): :data:`~.params.QUIESCENT_LAG`.
    quiet_since : Out(timestamp_bits)
        Timestamp at which all lines last became ready.
    """

    def __init__(self, params):
        self.params = _check_params(params)
        ts = params.timestamp_bits
        super().__init__({
            "all_ready": In(1),
            "tick": In(1),
            "timestamp": In(ts),
            "idle_ticks": In(ts),
            "quiescent": Out(1),
            "quiet_since": Out(ts),
        })

    def elaborate(self, platform):
        m = Module()
        # The idle counter counts in two halves like the timestamp (the upper takes the lower's
        # carry in the same cycle): no 48-bit carry chain anywhere. Instead of saturating, it
        # wraps and a flag remembers that it did (idle_ticks is below 2**timestamp_bits, so a
        # wrapped count is always enough). "The lower half is all ones" is a flip-flop, set
        # from a comparison with a constant (no carry chain before it).
        half = self.params.timestamp_bits // 2
        lower = Signal(half)
        upper = Signal(self.params.timestamp_bits - half)
        lower_full = Signal()
        # "The upper half is all ones", a cycle old: the upper half changes at most once per
        # 2**half ticks, and only on a tick with lower_full, never the cycle after a change.
        upper_full = Signal()
        over = Signal()
        ready_prev = Signal()
        m.d.sync += [ready_prev.eq(self.all_ready), upper_full.eq(upper.all())]
        with m.If(~self.all_ready):
            m.d.sync += [lower.eq(0), upper.eq(0), lower_full.eq(0), over.eq(0)]
        with m.Elif(self.tick):
            m.d.sync += [lower.eq(lower + 1), lower_full.eq(lower == (1 << half) - 2)]
            with m.If(lower_full):
                m.d.sync += upper.eq(upper + 1)
                with m.If(upper_full):
                    m.d.sync += over.eq(1)
        with m.If(self.all_ready & ~ready_prev):
            m.d.sync += self.quiet_since.eq(self.timestamp)
        # idle >= idle_ticks, in two registered steps (QUIESCENT_LAG = 2): segments are
        # compared side by side into flip-flops (a 48-bit carry chain alone is 13.4 ns on the
        # iCE40), then joined with all_ready and the wrap flag of the same cycle into
        # `quiescent`, which leaves the sniffer from a flip-flop. So on cycle t it says what
        # the levels and the count said on cycle t - 2.
        # The comparison is made in QUIESCENCE_SEGMENT-bit segments: per segment "at least"
        # and (above the lowest) "equal", registered, then joined from the top ("greater" is
        # "at least and not equal"). On the iCE40 a 16-bit segment's carry chain, with the LUTs
        # Yosys puts around it, missed the 20.8 ns cycle; so did a "greater" flip-flop, which
        # Yosys forms from the carry chain and the equality's LUT tree in series. "At least" is
        # the carry chain alone, beside the equality.
        idle = Cat(lower, upper)
        t = self.idle_ticks
        ready_q = Signal()
        over_q = Signal()
        m.d.sync += [ready_q.eq(self.all_ready), over_q.eq(over)]
        at_least = None
        for k, lo in enumerate(range(0, len(idle), QUIESCENCE_SEGMENT)):
            x, y = idle[lo:lo + QUIESCENCE_SEGMENT], t[lo:lo + QUIESCENCE_SEGMENT]
            ge = Signal(name=f"ge_{k}")
            m.d.sync += ge.eq(x >= y)
            if at_least is None:
                at_least = ge
            else:
                eq = Signal(name=f"eq_{k}")
                m.d.sync += eq.eq(x == y)
                at_least = ge & (~eq | at_least)
        m.d.sync += self.quiescent.eq(ready_q & (over_q | at_least))
        return m

"""The R/B# sniffer: many channels, one shared counter pipeline.

See ``docs/architecture.md`` ("The R/B# sniffer") for the exact semantics this implements and
the reasons for its structure.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .blocks import DSP_BOUNDS, BoundLoader, Quiescence, TimeBase
from .channels import SCAN_GROUP, TICK_GROUP, ChannelBank, Scanner, tick_copies
from .counter_ram import CounterRam
from .epochs import Epochs
from .histogram import HistogramRam
from .jobs import JobStage, hist_depth
from .params import SnifferConfig, SnifferParams
from .ram import RAM_KINDS, pick_ram_kind
from .readout import ReadPort
from .signatures import SnifferSignature, TraceSignature
from .width import WidthStage

__all__ = ["RBSniffer", "SnifferSignature", "TraceSignature", "SCAN_GROUP", "TICK_GROUP"]


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

    def elaborate(self, platform):
        m = Module()
        p = self.params
        hist_ram = pick_ram_kind(self.hist_ram, platform, hist_depth(p))

        # ---- Time base, scanner, channels, quiescence -----------------------------------------
        m.submodules.timebase = timebase = TimeBase(p, copies=tick_copies(p))
        m.submodules.scanner = scanner = Scanner(p)
        m.submodules.channels = channels = ChannelBank(p)
        m.submodules.quiescence = quiet = Quiescence(p)
        # ---- Width measurement (c0 … c3), jobs and classification (c4 … c6) -----------------
        m.submodules.width = width = WidthStage(p, scramble_collisions=self.scramble_collisions)
        m.submodules.jobs = jobs = JobStage(p, dsp_bounds=self.dsp_bounds)
        # ---- Clear: epochs and the scrubber -------------------------------------------------
        # (The iCE40UP's SPRAM powers up with random contents: it is scrubbed at boot.)
        m.submodules.epochs = epochs = Epochs(p, boot_scrub=hist_ram == "spram")
        # ---- The counter and histogram RAMs (c6 … c9), the read port ------------------------
        m.submodules.counters = counters = CounterRam(
            p, normalise_late=self.normalise_late, scramble_collisions=self.scramble_collisions)
        m.submodules.histogram = histogram = HistogramRam(
            p, kind=hist_ram, spram_block=self.spram_block)
        m.submodules.readout = readout = ReadPort(p)

        phase = scanner.phase
        m.d.comb += timebase.prescaler.eq(self.cfg.prescaler)
        m.d.comb += [
            channels.rb.eq(self.rb),
            channels.enable.eq(self.cfg.enable),
            channels.booting.eq(epochs.booting),
            channels.glitch_ticks.eq(self.cfg.glitch_ticks),
            channels.ticks.eq(timebase.ticks),
            channels.ticks_next.eq(timebase.ticks_next),
            channels.stamps.eq(timebase.stamps),
            channels.mine.eq(scanner.mine),
        ]
        if p.tag_bits:
            m.d.comb += channels.tag.eq(self.tag)
        m.d.comb += [
            quiet.all_ready.eq(channels.all_ready),
            quiet.tick.eq(timebase.tick),
            quiet.timestamp.eq(timebase.timestamp),
            quiet.idle_ticks.eq(self.cfg.idle_ticks),
        ]
        m.d.comb += [
            width.phase.eq(phase),
            width.groups.eq(channels.groups),
            width.timestamp.eq(timebase.timestamp[:p.wide_bits]),
            width.scan_next.eq(scanner.scan_next),
            width.scan_prev.eq(scanner.scan_prev),
        ]
        m.d.comb += [
            jobs.phase.eq(phase),
            jobs.slot.eq(width.slot),
            jobs.scan_prev2.eq(scanner.scan_prev2),
            jobs.windows.eq(self.cfg.windows),
            jobs.read_waiting.eq(readout.waiting),
            jobs.read_request.eq(readout.request),
            jobs.scrubbing.eq(epochs.scrubbing),
            jobs.booting.eq(epochs.booting),
            jobs.scrub_ptr.eq(epochs.scrub_ptr),
            jobs.next_epoch.eq(epochs.next_epoch),
            jobs.timestamp.eq(timebase.timestamp),
        ]
        if self.dsp_bounds:
            m.submodules.bounds = bounds = BoundLoader(p, self.boot_bounds)
            m.d.comb += [
                bounds.win_load.eq(self.win_load), bounds.win_data.eq(self.win_data),
                jobs.load.eq(bounds.load), jobs.load_data.eq(bounds.load_data),
            ]
        m.d.comb += [
            epochs.clear.eq(self.clear),
            epochs.slot.eq(~phase),
            epochs.take_scrub.eq(jobs.take_scrub),
            epochs.scrub_step.eq(jobs.scrub_step),
        ]
        m.d.comb += [
            counters.phase.eq(phase), counters.job.eq(jobs.job),
            counters.late_job.eq(jobs.late_job),
            histogram.phase.eq(phase), histogram.job.eq(jobs.job),
        ]
        m.d.comb += [
            readout.phase.eq(phase),
            readout.take.eq(jobs.take_read),
            readout.read.eq(jobs.late_job.read),
            readout.bad.eq(jobs.late_job.bad),
            readout.space.eq(jobs.late_job.space),
            readout.counter.eq(counters.value),
            readout.bin.eq(histogram.value),
        ]
        # The register-side ports.
        wiring.connect(m, wiring.flipped(self.read_req), readout.read_req)
        wiring.connect(m, readout.read_resp, wiring.flipped(self.read_resp))
        wiring.connect(m, jobs.trace, wiring.flipped(self.trace))
        m.d.comb += [
            self.status.timestamp.eq(timebase.timestamp),
            self.status.quiet_since.eq(quiet.quiet_since),
            self.status.quiescent.eq(quiet.quiescent),
            self.status.epoch.eq(epochs.epoch),
            self.status.clear_busy.eq(epochs.clear_busy),
        ]
        return m

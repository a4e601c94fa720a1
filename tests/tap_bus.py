"""A small tapped NAND channel written as a VCD: bus cycles (CE#, CLE, ALE, WE#, DQ) and R/B#.

Each command or address cycle drives CLE or ALE and DQ, pulses WE# low and latches on its rising
edge; a busy period pulls R/B# low 100 ns after the cycle that started it. One target, one die,
1 ns per VCD time unit. ``rbscope label`` reads it with :data:`LABEL_ARGS`.
"""

from rbscope.gateware.rb_sniffer.model import Train
from rbscope.recordings.vcd import write_vcd

NAMES = ["RB0", "WE", "CLE", "ALE", *[f"DQ{i}" for i in range(8)], "CE0"]
#: The ``rbscope label`` options naming this bus (after the VCD and before -o).
LABEL_ARGS = ["--clock", "1ns", "--signal", "RB0", "--bus-ce", "CE0", "--bus-cle", "CLE",
              "--bus-ale", "ALE", "--bus-we", "WE", *[x for i in range(8)
                                                     for x in ("--bus-dq", f"DQ{i}")],
              "--glitch", "0.001"]


def program(planes=1, confirm=0x10, busy_ns=300_000, dbsy_ns=1_000, page=0):
    """Bus steps of one program: ``planes - 1`` queued planes (80h … 11h, tDBSY) and the last
    (80h … ``confirm``)."""
    steps = []
    for p in range(planes):
        steps += [("cmd", 0x80), *[("addr", b) for b in (0, 0, page & 0xFF, p, 0)]]
        last = p == planes - 1
        steps += [("cmd", confirm if last else 0x11), ("busy", busy_ns if last else dbsy_ns)]
    return steps


def erase(busy_ns=3_000_000):
    return [("cmd", 0x60), ("addr", 0), ("addr", 1), ("addr", 0), ("cmd", 0xD0),
            ("busy", busy_ns)]


def read(busy_ns=50_000):
    return [("cmd", 0x00), *[("addr", b) for b in (0, 0, 1, 0, 0)], ("cmd", 0x30),
            ("busy", busy_ns)]


def write_bus(path, steps, *, names=NAMES):
    """Write ``steps`` (``("cmd", byte)``, ``("addr", byte)``, ``("busy", ns)``) as a VCD."""
    levels = {n: [] for n in NAMES}  # name -> [(ns, level)]
    state = {"RB0": 1, "WE": 1, "CLE": 0, "ALE": 0, "CE0": 0, **{f"DQ{i}": 0 for i in range(8)}}

    def set_(t, name, lv):
        if state[name] != lv:
            state[name] = lv
            levels[name].append((t, lv))

    t = 100
    for kind, value in steps:
        if kind == "busy":
            set_(t + 100, "RB0", 0)
            set_(t + 100 + value, "RB0", 1)
            t += 100 + value + 200
            continue
        set_(t, "CLE" if kind == "cmd" else "ALE", 1)
        for i in range(8):
            set_(t, f"DQ{i}", value >> i & 1)
        set_(t + 5, "WE", 0)
        set_(t + 20, "WE", 1)
        set_(t + 30, "CLE" if kind == "cmd" else "ALE", 0)
        t += 40
    trains = [Train(1 if n in ("RB0", "WE") else 0, levels[n]) for n in NAMES]
    with open(path, "w", encoding="ascii") as f:
        write_vcd(f, trains, names=names, end=t + 1000)
    return t

"""Hints to synthesis that Amaranth cannot express.

A read port of an ``amaranth.lib.memory.Memory`` that reads the address a write port writes in
the same cycle returns the old contents. The iCE40's block RAM does not guarantee that, so Yosys
adds a bypass (a copy of the write data and address, and a multiplexer on the read data: about
two logic cells per bit) to every such pair of ports. A memory that never uses what such a read
returns needs none of it: name it (its ``m.submodules`` key) with :data:`COLLISION_FREE` at the
end, and the board build (:func:`yosys_script`) tells Yosys that those reads may return anything.

Yosys re-encodes a state machine one-hot (a state is then one flip-flop, not a decode of the
state register's bits: a logic level less on every path that asks "in state X?") only if its
state register has no initial value. Every board build holds the ``sync`` domain in reset from
power-on until its PLL has locked (``rbscope.boards.top``), which sets every state machine's
register to its initial state; the initial values of the registers Amaranth's ``m.FSM`` makes
(named ``<name>_state``) are therefore dropped there (:data:`FSM_STATE_WIRES`).
"""

__all__ = ["COLLISION_FREE", "FSM_STATE_WIRES", "yosys_script"]

#: Name suffix of a memory (with one write port) whose read ports never use what they return in
#: a cycle where the write port writes the address they read.
COLLISION_FREE = "_anyrw"

#: Yosys selection of the state registers of Amaranth's state machines (``m.FSM``).
FSM_STATE_WIRES = "w:*_state"


def yosys_script():
    """Yosys commands, run after ``read_rtlil``, that apply the hints."""
    return (f"setparam -set COLLISION_X_MASK 1'1 t:$memrd_v2 r:MEMID=*{COLLISION_FREE} %i; "
            f"setattr -unset init {FSM_STATE_WIRES}")

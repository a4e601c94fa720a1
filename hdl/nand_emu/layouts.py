"""Record layouts of the emulator's ports, built from :class:`EmuParams`.

The same layouts serve the gateware, the benches and (through the link's register file) the
host: ``layout.const({...}).as_value().value`` packs a record, ``layout.from_bits(v)`` unpacks.
"""

from amaranth.lib import data
from amaranth.lib.wiring import In, Out

from .params import PAGE_TYPE_WORD, BusyTime, EmuConfig, EmuCounter, EmuParams, TrafficConfig

__all__ = [
    "config_layout", "config_const", "read_request_layout", "traffic_layout", "traffic_const",
    "traffic_status_layout", "bad_block_layout", "page_type_words", "page_type_write_layout",
]


def _check(params):
    if not isinstance(params, EmuParams):
        raise TypeError(f"Emulator parameters must be an EmuParams, not {params!r}")


def bad_block_layout(params):
    """One entry of the bad-block list."""
    _check(params)
    return data.StructLayout({"valid": 1, "block": params.block_bits})


def page_type_words(params):
    """Words of the dies' page-type RAM (:data:`PAGE_TYPE_WORD` map entries each); 0 when the
    map is small enough to be read straight from the configuration."""
    _check(params)
    if params.page_type_slots <= PAGE_TYPE_WORD:
        return 0
    return params.page_type_slots // PAGE_TYPE_WORD


def page_type_write_layout(params):
    """One write of the dies' page-type RAM: word ``addr`` gets ``data`` (map entries
    ``addr * PAGE_TYPE_WORD …`` of the configuration, 2 bits each)."""
    words = page_type_words(params)
    if not words:
        raise ValueError(f"an emulator with {params.page_type_slots} page-type slots has no "
                         f"page-type RAM")
    return data.StructLayout({"addr": range(words),
                              "data": data.ArrayLayout(2, PAGE_TYPE_WORD)})


def config_layout(params):
    """Run-time configuration (the register file's view of the emulator), shared by all dies."""
    _check(params)
    return data.StructLayout({
        "prescaler": params.prescaler_bits,
        "t_wb": 8,
        "times": data.ArrayLayout(params.ticks_bits, len(BusyTime)),
        "jitter": data.ArrayLayout(max(params.jitter_bits, 1), len(BusyTime)),
        "page_types": data.ArrayLayout(2, params.page_type_slots),
        "seed": 32,
        "bad_blocks": data.ArrayLayout(bad_block_layout(params), max(params.bad_block_slots, 1)),
    })


def config_const(params, config):
    """Pack an :class:`EmuConfig` into the integer value of :func:`config_layout`."""
    if not isinstance(config, EmuConfig):
        raise TypeError(f"Emulator configuration must be an EmuConfig, not {config!r}")
    config = config.validate(params)
    slots = max(params.bad_block_slots, 1)
    bad = [{"valid": 1, "block": b} for b in config.bad_blocks]
    bad += [{"valid": 0, "block": 0}] * (slots - len(bad))
    return config_layout(params).const({
        "prescaler": config.prescaler,
        "t_wb": config.t_wb,
        "times": [config.times[t] for t in BusyTime],
        "jitter": [config.jitter[t] for t in BusyTime],
        "page_types": list(config.page_types),
        "seed": config.seed,
        "bad_blocks": bad,
    }).as_value().value


def read_request_layout(params):
    """A read of one ground-truth counter of one die."""
    _check(params)
    return data.StructLayout({"die": params.die_bits, "index": EmuCounter})


def traffic_layout(params):
    """Run-time configuration of the traffic generator."""
    _check(params)
    return data.StructLayout({
        "dies": params.dies,
        "first_block": params.block_bits,
        "blocks": params.block_bits + 1,
        "pages": params.page_bits + 1,
        "reads": 8,
        "loops": 16,
        "multi_plane": 1,
        "erase": 1,
        "cache": 1,
        "phase_cycles": 4,
        "wb_wait": 8,
    })


def traffic_const(params, config):
    """Pack a :class:`TrafficConfig` into the integer value of :func:`traffic_layout`."""
    if not isinstance(config, TrafficConfig):
        raise TypeError(f"Traffic configuration must be a TrafficConfig, not {config!r}")
    c = config.validate(params)
    return traffic_layout(params).const({
        "dies": c.dies, "first_block": c.first_block, "blocks": c.blocks, "pages": c.pages,
        "reads": c.reads, "loops": c.loops, "multi_plane": int(c.multi_plane),
        "erase": int(c.erase), "cache": int(c.cache), "phase_cycles": c.phase_cycles,
        "wb_wait": c.wb_wait,
    }).as_value().value


def traffic_status_layout(params):
    """Traffic generator status: running, and steps (die operations) issued since reset."""
    _check(params)
    return data.StructLayout({"busy": 1, "steps": 32})


def bus_signature_members(params):
    """The emulator's ONFI bus ports (shared by the emulator and the loopback top).

    CE# one per die; CLE, ALE, WE#, RE#, WP#; IO split into in/out/output-enable; R/B# one per
    die or per target (wired-OR). Idle levels as initial values.
    """
    _check(params)
    n = params.dies
    return {
        "ce_n": In(n, init=(1 << n) - 1), "cle": In(1), "ale": In(1),
        "we_n": In(1, init=1), "re_n": In(1, init=1), "wp_n": In(1, init=1),
        "io_i": In(8), "io_o": Out(8), "io_oe": Out(1),
        "rb": Out(params.rb_count, init=(1 << params.rb_count) - 1),
    }

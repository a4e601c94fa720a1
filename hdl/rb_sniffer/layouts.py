"""Record layouts of the sniffer's ports, built from :class:`SnifferParams`.

The same layouts are used by the gateware and by anything that packs or unpacks these records
(cocotb benches, the host's register and frame codecs): ``layout.const({...}).as_value().value``
packs a record into an integer, ``layout.from_bits(value)`` unpacks one.
"""

from amaranth.lib import data

from .params import EventKind, SnifferConfig, SnifferParams, Space

__all__ = [
    "window_layout", "config_layout", "status_layout", "read_request_layout", "trace_layout",
    "mailbox_layout", "config_const", "EPOCH_BITS",
]

#: Width of the epoch number (increments on every clear, wraps).
EPOCH_BITS = 16


def _check(params):
    if not isinstance(params, SnifferParams):
        raise TypeError(f"Sniffer parameters must be a SnifferParams, not {params!r}")


def window_layout(params):
    """One class window ``[lo, hi)`` in ticks."""
    _check(params)
    return data.StructLayout({"lo": params.width_bits, "hi": params.width_bits})


def config_layout(params):
    """Run-time configuration (the register file's view of the sniffer)."""
    _check(params)
    return data.StructLayout({
        "prescaler": params.prescaler_bits,
        "glitch_ticks": params.glitch_bits,
        "windows": data.ArrayLayout(window_layout(params), params.classes),
        "idle_ticks": params.timestamp_bits,
        "enable": params.channels,
    })


def config_const(params, config):
    """Pack a :class:`SnifferConfig` into the integer value of :func:`config_layout`."""
    config = config.validate(params) if isinstance(config, SnifferConfig) else config
    if not isinstance(config, SnifferConfig):
        raise TypeError(f"Sniffer configuration must be a SnifferConfig, not {config!r}")
    layout = config_layout(params)
    return layout.const({
        "prescaler": config.prescaler,
        "glitch_ticks": config.glitch_ticks,
        "windows": [{"lo": lo, "hi": hi} for lo, hi in config.windows],
        "idle_ticks": config.idle_ticks,
        "enable": config.enable,
    }).as_value().value


def status_layout(params):
    """Device-wide status: time, epoch and quiescence."""
    _check(params)
    return data.StructLayout({
        "timestamp": params.timestamp_bits,
        "quiet_since": params.timestamp_bits,
        "epoch": EPOCH_BITS,
        "quiescent": 1,
        "clear_busy": 1,
    })


def index_bits(params):
    """Bits of a read request's index: a counter-row index or a histogram bin."""
    return max(params.row_bits, (params.hist_bins - 1).bit_length())


def read_request_layout(params):
    """A read of one counter (``index`` in the channel's row) or one histogram bin."""
    _check(params)
    return data.StructLayout({
        "space": Space,
        "channel": params.channel_bits,
        "index": index_bits(params),
    })


def trace_layout(params):
    """One record per front-end event (END, PARTIAL, OVERLONG, BUSY), as classified (with the
    pulse's tag in a ``tag_bits`` build)."""
    _check(params)
    fields = {
        "channel": params.channel_bits,
        "kind": EventKind,
        "index": params.row_bits,
        "width": params.width_bits,
        "timestamp": params.timestamp_bits,
    }
    if params.tag_bits:
        fields["tag"] = params.tag_bits
    return data.StructLayout(fields)


def mailbox_layout(params):
    """A channel's pending pulse end and its side counts: events lost to a full mailbox, glitches.

    ``stamp`` is the pulse's width in ticks when its start was never recorded by the pipeline
    (``rec = 0``: the pulse began and ended between two visits), else the low ``stamp_bits``
    bits of the timestamp at its end (the pipeline holds its start).
    """
    _check(params)
    fields = {
        "valid": 1,
        "partial": 1,
        "rec": 1,
        "stamp": params.stamp_bits,
        "lost": params.lost_bits,
        "glitches": params.lost_bits,
    }
    if params.tag_bits:
        fields["tag"] = params.tag_bits  # sampled when the pulse started
    return data.StructLayout(fields)

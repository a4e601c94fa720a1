"""The opcode-aware bus tap's part of the link: its registers and INFO fields.

Everything the link carries of the tap is declared here, for the gateware and the host alike:
:data:`TAP` (the :class:`~..link.extension.ExtensionKind`: INFO's ``tap_targets`` and
``tap_luns``, the registers rebuilt from INFO), :func:`tap_extension`
(what a build with a tap adds to the link), the counter read's words (``TAP_READ``,
``TAP_DATA``) and the power-up recorder's strobes (``TAP_RECORD``). The tap adds no
frame type. The wire format is documented in ``docs/link.md`` ("With the opcode-aware bus
tap") and ``docs/opcode_tap.md``.
"""

from dataclasses import dataclass

from ..link import protocol
from ..link.extension import ExtensionKind, ExtPort, InfoField, LinkExtension
from . import tap as tap_hdl
from .params import TapConfig, TapParams

__all__ = ["TapLink", "tap_registers", "TAP_READ_GO", "TAP_SPACE_SHIFT", "TAP_DATA_DONE",
           "TAP", "tap_extension", "tap_link_from_info"]

#: ``TAP_READ``: writing ``TAP_READ_GO | space << TAP_SPACE_SHIFT | index`` reads one word of the
#: tap's counter spaces (or of its power-up recorder) into ``TAP_DATA``, whose bit
#: ``TAP_DATA_DONE`` is set once it is there.
TAP_READ_GO = 1 << 19
TAP_SPACE_SHIFT = 16
TAP_DATA_DONE = 63


@dataclass(frozen=True)
class TapLink:
    """What the link needs to know of a build's opcode-aware bus tap (INFO carries the first
    two).

    The tap's configuration is exposed as 32-bit slices of its packed layout
    (:func:`.tap.config_layout`, ``cfg_bits`` wide); its counter words are read one at a time
    through ``TAP_READ`` and ``TAP_DATA_LO``/``_HI``.
    """

    targets: int
    luns: int
    cfg_bits: int
    cfg_reset: int = 0


def tap_registers(tap):
    """The registers of a build's bus tap (``tap`` a :class:`TapLink`)."""
    if not isinstance(tap, TapLink):
        raise TypeError(f"Tap description must be a TapLink, not {tap!r}")
    Access, Register = protocol.Access, protocol.Register
    regs = protocol.packed_registers("TAP_CFG", 0x1100, "tap.cfg", tap.cfg_bits, tap.cfg_reset,
                                     "bus tap configuration", 0x10)
    regs += [
        Register("TAP_READ", 0x1110, Access.RW, "tap.read", bits=20,
                 doc="write GO (bit 19) | space << 16 | index: read one tap counter word or "
                     "power-up recorder cell (reads back 0)"),
        Register("TAP_DATA_LO", 0x1111, Access.RO, "tap.data", 0,
                 doc="the word read (low 32 bits)"),
        Register("TAP_DATA_HI", 0x1112, Access.RO, "tap.data", 32,
                 doc="(high bits; bit 31: the word is there)"),
        Register("TAP_RECORD", 0x1113, Access.RW, "tap.record", bits=2,
                 doc="power-up recorder: write 1 to re-arm it (wait for each target's next "
                     "Reset), 2 to record every target now; both forget the cells (reads back "
                     "0)"),
    ]
    return regs


def tap_link_from_info(info):
    """The :class:`TapLink` of a device from its INFO (``None`` without a tap)."""
    if not getattr(info, "tap_targets", 0):
        return None
    params = TapParams(targets=info.tap_targets, luns=info.tap_luns)
    return TapLink(info.tap_targets, info.tap_luns, tap_hdl.config_layout(params).size)


#: The tap as the wire protocol carries it. Its INFO fields follow the sniffer's ``tag_bits``
#: (zero in a build without a tap).
TAP = ExtensionKind(
    name="tap",
    info=(InfoField("tap_targets", 8), InfoField("tap_luns", 8)),
    info_after="tag_bits",
    from_info=tap_link_from_info,
    registers=tap_registers,
)


def tap_extension(tap, config=None):
    """The opcode-aware bus tap's part of the link (a :class:`LinkExtension`).

    Its configuration registers (``TAP_CFG_i``), the counter read (``TAP_READ``, ``TAP_DATA``),
    the power-up recorder's strobes (``TAP_RECORD``) and INFO's ``tap_targets`` and
    ``tap_luns`` (the recorder's size is in its own words: ``decode_record_word``).

    Parameters
    ----------
    tap : TapParams
    config : TapConfig, optional
        The tap's boot configuration (default: no sniffer tags).
    """
    config = TapConfig() if config is None else config
    link = TapLink(tap.targets, tap.luns, tap_hdl.config_layout(tap).size,
                   tap_hdl.config_const(tap, config))
    rw, ro = protocol.Access.RW, protocol.Access.RO
    ports = (
        ExtPort("tap.cfg", link.cfg_bits, rw, link.cfg_reset),
        ExtPort("tap.read", TAP_READ_GO.bit_length(), rw, strobe=True),
        ExtPort("tap.data", TAP_DATA_DONE + 1, ro),
        ExtPort("tap.record", 2, rw, strobe=True),
    )
    return LinkExtension(registers=tuple(tap_registers(link)), ports=ports,
                         info={"tap_targets": tap.targets, "tap_luns": tap.luns})

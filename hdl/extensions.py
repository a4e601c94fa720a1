"""The blocks that talk through the link, in wire order: the one list of them.

Each block declares its part of the wire protocol in its own folder (``hdl/<block>/link.py``, an
:class:`~.link.extension.ExtensionKind`); :data:`PROTOCOL` is the link's protocol with all of
them, which the gateware sends (``rbscope.gateware.device``) and the host decodes
(``rbscope.device``). A kind's INFO fields are in INFO whether or not a build has the block; a
new kind goes at the end of the list with its fields after INFO's last (``info_after``), so that
no field of the kinds before it moves.
"""

from .link.protocol import LinkProtocol
from .nand_emu.link import EMULATOR
from .onfi_tap.link import TAP

__all__ = ["KINDS", "PROTOCOL"]

#: The extension kinds, in the order their INFO fields were placed.
KINDS = (EMULATOR, TAP)
#: The wire protocol of this gateware version.
PROTOCOL = LinkProtocol(KINDS)

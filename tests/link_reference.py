"""An independent reference of the link framing, written for the tests (not the host's code)."""

import zlib

from rbscope.gateware.link import protocol

__all__ = ["stuff", "frame", "unframe", "command_body"]


def stuff(body):
    out = bytearray()
    for b in body:
        if b == protocol.FRAME_END:
            out += bytes([protocol.FRAME_ESC, protocol.ESC_END])
        elif b == protocol.FRAME_ESC:
            out += bytes([protocol.FRAME_ESC, protocol.ESC_ESC])
        else:
            out.append(b)
    return bytes(out)


def frame(body):
    return bytes([protocol.FRAME_END]) + stuff(body + zlib.crc32(body).to_bytes(4, "little")) + \
        bytes([protocol.FRAME_END])


def unframe(wire):
    """Split a byte stream into frame bodies; return (bodies with good CRC, bad count)."""
    good, bad = [], 0
    # Whatever follows the last END is a frame still being received: not judged yet.
    for chunk in wire.split(bytes([protocol.FRAME_END]))[:-1]:
        if not chunk:
            continue
        body = chunk.replace(bytes([protocol.FRAME_ESC, protocol.ESC_END]), b"\xc0") \
                    .replace(bytes([protocol.FRAME_ESC, protocol.ESC_ESC]), b"\xdb")
        if len(body) >= 4 and zlib.crc32(body[:-4]) == int.from_bytes(body[-4:], "little"):
            good.append(body[:-4])
        else:
            bad += 1
    return good, bad


def command_body(tag, opcode, address, value, *, ftype=protocol.FrameType.COMMAND,
                 version=protocol.PROTOCOL_VERSION, length=None):
    """A command frame body, packed by hand (independently of the layouts) so that tests can
    also build invalid ones (unknown opcodes, wrong types, versions and lengths)."""
    payload = (tag.to_bytes(2, "little") + bytes([int(opcode), 0]) +
               address.to_bytes(2, "little") + value.to_bytes(4, "little"))
    length = len(payload) if length is None else length
    header = bytes([int(ftype), version]) + (0).to_bytes(2, "little") + \
        length.to_bytes(2, "little")
    return header + payload

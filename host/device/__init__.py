"""The host side of a running instrument: the wire protocol, :class:`Device`, capture files, the
live view, and the devices that stand in for hardware (the Verilator-backed :class:`SimDevice`,
the pure-Python :class:`FakeDevice`) and the rig's self-test."""

from .capture import (
    CaptureError,
    CaptureReader,
    CaptureWriter,
    RecordKind,
    capture_to_measurement,
    iter_records,
)
from .device import (
    CommandError,
    ConfigError,
    Device,
    DeviceChanged,
    DeviceError,
    DeviceTimeout,
    PortError,
)
from .fake import FakeDevice, LinkFaults
from .protocol import FrameDecoder, ProtocolError
from .selftest import SelftestError, SelftestResult, run_selftest
from .simdevice import SimDevice, SimError

__all__ = [
    "CaptureError", "CaptureReader", "CaptureWriter", "RecordKind", "capture_to_measurement",
    "iter_records",
    "CommandError", "ConfigError", "Device", "DeviceChanged", "DeviceError", "DeviceTimeout",
    "PortError",
    "FakeDevice", "LinkFaults", "FrameDecoder", "ProtocolError",
    "SelftestError", "SelftestResult", "run_selftest", "SimDevice", "SimError",
]

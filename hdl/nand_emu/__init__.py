"""The ONFI NAND die emulator: emulated dies with configurable timings and ground-truth counts."""

from .emulator import NandEmulator
from .params import (
    BusyTime,
    EmuConfig,
    EmuCounter,
    EmuParams,
    Storage,
    TrafficConfig,
    pattern_byte,
)

__all__ = [
    "BusyTime", "EmuConfig", "EmuCounter", "EmuParams", "NandEmulator", "Storage",
    "TrafficConfig", "pattern_byte",
]

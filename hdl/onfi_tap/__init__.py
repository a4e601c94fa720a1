"""The passive ONFI bus tap: opcode-labelled busy pulses and operation counts per die."""

from .params import (
    CONFIRM_CLASS,
    OpClass,
    PlaneKind,
    TapConfig,
    TapParams,
    TapSpace,
)
from .tap import CounterBank, OnfiTap

__all__ = [
    "CONFIRM_CLASS", "CounterBank", "OnfiTap", "OpClass", "PlaneKind", "TapConfig", "TapParams",
    "TapSpace",
]

"""The passive ONFI bus tap: opcode-labelled busy pulses and operation counts per die."""

from .params import (
    CONFIRM_CLASS,
    RECORD_ARM,
    RECORD_CELLS,
    RECORD_START,
    OpClass,
    PlaneKind,
    RecordCell,
    RecordKind,
    TapConfig,
    TapParams,
    TapSpace,
    decode_record_word,
)
from .tap import CounterBank, OnfiTap, config_const, config_layout, read_request_layout

__all__ = [
    "CONFIRM_CLASS", "CounterBank", "OnfiTap", "OpClass", "PlaneKind", "TapConfig", "TapParams",
    "TapSpace", "config_const", "config_layout", "read_request_layout", "RECORD_ARM",
    "RECORD_CELLS", "RECORD_START", "RecordCell", "RecordKind", "decode_record_word",
]

"""The R/B# sniffer gateware: measure, classify and count NAND busy pulses on many channels."""

from .params import Counter, EventKind, SnifferConfig, SnifferParams, Space
from .sniffer import RBSniffer

__all__ = ["Counter", "EventKind", "RBSniffer", "SnifferConfig", "SnifferParams", "Space"]

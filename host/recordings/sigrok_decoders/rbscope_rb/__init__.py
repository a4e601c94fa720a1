# rbscope: a libsigrokdecode protocol decoder that classifies NAND R/B# busy pulses by width.
"""
Classifies every busy (low) pulse of a NAND Ready/Busy# line by its width, as the rbscope
sniffer does: half-open windows [lo, hi) in microseconds, the first window containing the width
wins; shorter than the glitch filter is a glitch; a pulse whose start was not recorded is
partial. PulseView shows the class of each pulse beside the raw line.
"""

from .pd import Decoder  # noqa: F401

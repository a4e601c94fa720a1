"""The generated port reference (docs/ports.md) is up to date and says what the Verilog has."""

import re
import subprocess
import sys
from pathlib import Path

from amaranth.lib import data

from rbscope.gateware.export import convert, design_of
from rbscope.gateware.ports import fields_of, ports_of
from rbscope.gateware.rb_sniffer import SnifferParams
from rbscope.gateware.rb_sniffer.layouts import config_layout, status_layout

DOC = Path(__file__).resolve().parent.parent / "docs" / "ports.md"


def test_docs_ports_md_is_up_to_date():
    proc = subprocess.run([sys.executable, "-m", "rbscope.cli.ports", "--check", str(DOC)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_ports_match_the_verilog_module_header():
    design = design_of("sniffer", sniffer=SnifferParams(channels=3, width_bits=16))
    text = convert(design, "rb_sniffer")
    for port in ports_of(design):
        rng = f"[{port.width - 1}:0] " if port.width > 1 else ""
        assert f"  {port.direction} {rng}{port.name};" in text, port


def test_bit_map_agrees_with_the_layout():
    params = SnifferParams(channels=4, classes=3)
    fields = {f.name: f for f in fields_of(config_layout(params))}
    value = config_layout(params).const({"windows": [{"lo": 0, "hi": 0}, {"lo": 0, "hi": 0},
                                                     {"lo": 0, "hi": 0x5A5A}],
                                         "enable": 0b1010}).as_value().value
    hi = fields["windows[k].hi"]
    assert (value >> (hi.offset + 2 * hi.stride)) & ((1 << hi.width) - 1) == 0x5A5A
    assert (value >> fields["enable"].offset) & 0xF == 0b1010
    status = {f.name: f for f in fields_of(status_layout(params))}
    assert sum(f.width for f in status.values()) == data.Layout.cast(status_layout(params)).size


def test_doc_has_handshake_reset_and_timing_rules():
    text = DOC.read_text()
    for phrase in ("synchronous, active high", "`rb` all ones", "valid` and `ready` are both high",
                   "N + 2", "scanner round", "read_req__payload", "`timescale"):
        assert phrase in text, phrase
    assert re.search(r"\| `cfg` \| in \| 328 \|", text)

# rbscope: a libsigrokdecode protocol decoder for the ONFI SDR (asynchronous) NAND bus.
# Loaded by libsigrokdecode (PulseView, sigrok-cli) from SIGROKDECODE_DIR, never by rbscope
# itself: `rbscope sigrok-decoder` prints the directory. The latching rules are those of
# rbscope.recordings.onfi_bus (docs/identify.md): command, address and data in on WE# rising,
# data out on RE# rising, each with the levels just before the edge; the command table and the
# parameter page offsets are checked against rbscope.nand by rbscope's tests.

import sigrokdecode as srd

#: Command bytes and their names (rbscope.nand.onfi.Opcode, the one table).
COMMANDS = {
    0x00: "Read", 0x05: "Change read column", 0x10: "Program confirm",
    0x11: "Multi-plane program queue", 0x13: "Program resume", 0x15: "Cache program",
    0x1A: "One-shot data load", 0x30: "Read confirm", 0x31: "Cache read sequential",
    0x32: "Multi-plane read queue", 0x35: "Copy-back read", 0x3F: "Cache read end",
    0x60: "Erase", 0x61: "Erase suspend", 0x70: "Read status", 0x78: "Read status enhanced",
    0x80: "Program", 0x81: "Multi-plane program", 0x84: "Program suspend",
    0x85: "Change write column", 0x90: "Read ID", 0xD0: "Erase confirm",
    0xD1: "Multi-plane erase queue", 0xD2: "Erase resume", 0xE0: "Change read column confirm",
    0xEC: "Read parameter page", 0xEE: "Get features", 0xEF: "Set features",
    0xF1: "Select LUN 0", 0xF2: "Select LUN 1", 0xFA: "Reset LUN", 0xFC: "Synchronous reset",
    0xFF: "Reset",
}
STATUS_COMMANDS = (0x70, 0x78)

#: Parameter page fields: (name, offset, size, kind) per standard; little-endian integers.
ONFI_FIELDS = (
    ("signature", 0, 4, "text"), ("revision", 4, 2, "hex"), ("features", 6, 2, "hex"),
    ("manufacturer", 32, 12, "text"), ("model", 44, 20, "text"), ("JEDEC id", 64, 1, "hex"),
    ("bytes per page", 80, 4, "int"), ("spare bytes per page", 84, 2, "int"),
    ("pages per block", 92, 4, "int"), ("blocks per LUN", 96, 4, "int"),
    ("LUNs per target", 100, 1, "int"), ("address cycles", 101, 1, "hex"),
    ("bits per cell", 102, 1, "int"), ("plane address bits", 113, 1, "planes"),
    ("tPROG max us", 133, 2, "int"), ("tBERS max us", 135, 2, "int"),
    ("tR max us", 137, 2, "int"), ("tCCS min ns", 139, 2, "int"), ("CRC", 254, 2, "crc"),
)
JEDEC_FIELDS = (
    ("signature", 0, 4, "text"), ("revision", 4, 2, "hex"), ("features", 6, 2, "hex"),
    ("manufacturer", 32, 12, "text"), ("model", 44, 20, "text"), ("JEDEC id", 64, 1, "hex"),
    ("bytes per page", 80, 4, "int"), ("spare bytes per page", 84, 2, "int"),
    ("pages per block", 92, 4, "int"), ("blocks per LUN", 96, 4, "int"),
    ("LUNs per target", 100, 1, "int"), ("address cycles", 101, 1, "hex"),
    ("bits per cell", 102, 1, "int"), ("plane address bits", 104, 1, "planes"),
    ("tPROG max us", 153, 2, "int"), ("tBERS max us", 155, 2, "int"),
    ("tR max us", 157, 2, "int"), ("tCCS min ns", 161, 2, "int"), ("CRC", 510, 2, "crc"),
)
STATUS_BITS = ((7, "WP#"), (6, "RDY"), (5, "ARDY"), (1, "FAILC"), (0, "FAIL"))

# Annotation classes.
A_CMD, A_ADDR, A_DIN, A_DOUT, A_COMMAND, A_STATUS, A_FIELD, A_WARN = range(8)

# Channel indices.
CE, CLE, ALE, WE, RE = 0, 1, 2, 3, 4
DQ = 5  # … 12


def crc16(data):
    """ONFI CRC-16: polynomial 8005h, initial value 4F4Eh, most significant bit first."""
    crc = 0x4F4E
    for byte in data:
        for bit in range(7, -1, -1):
            top = (crc >> 15) & 1
            crc = (crc << 1) & 0xFFFF
            if top ^ ((byte >> bit) & 1):
                crc ^= 0x8005
    return crc


def field_text(name, raw, kind, page=None):
    """The text of one parameter page field."""
    value = int.from_bytes(bytes(raw), "little")
    if kind == "text":
        return f"{name}: {bytes(raw).decode('ascii', 'replace').strip()}"
    if kind == "hex":
        return f"{name}: {value:0{2 * len(raw)}X}h"
    if kind == "planes":
        return f"{name}: {value} ({1 << value} planes)"
    if kind == "crc":
        good = crc16(page[:-2]) == value
        return f"{name}: {value:04X}h ({'ok' if good else 'BAD'})"
    return f"{name}: {value}"


class Decoder(srd.Decoder):
    api_version = 3
    id = 'rbscope_onfi'
    name = 'ONFI SDR'
    longname = 'ONFI NAND asynchronous (SDR) bus (rbscope)'
    desc = 'NAND flash commands, addresses, data, status and parameter page fields.'
    license = 'bsd'
    inputs = ['logic']
    outputs = []
    tags = ['Memory']
    channels = (
        {'id': 'ce', 'name': 'CE#', 'desc': 'Chip enable of the target (low = selected)'},
        {'id': 'cle', 'name': 'CLE', 'desc': 'Command latch enable'},
        {'id': 'ale', 'name': 'ALE', 'desc': 'Address latch enable'},
        {'id': 'we', 'name': 'WE#', 'desc': 'Write enable (rising edge latches)'},
        {'id': 're', 'name': 'RE#', 'desc': 'Read enable (rising edge ends a data out)'},
    ) + tuple({'id': f'dq{i}', 'name': f'DQ{i}', 'desc': f'Data bit {i}'} for i in range(8))
    options = ()
    annotations = (
        ('cmd', 'Command cycle'), ('addr', 'Address cycle'), ('din', 'Data in'),
        ('dout', 'Data out'), ('command', 'Command'), ('status', 'Status'),
        ('field', 'Parameter page field'), ('warning', 'Warning'),
    )
    annotation_rows = (
        ('cycles', 'Cycles', (A_CMD, A_ADDR, A_DIN, A_DOUT)),
        ('commands', 'Commands', (A_COMMAND, A_STATUS)),
        ('fields', 'Parameter page', (A_FIELD,)),
        ('warnings', 'Warnings', (A_WARN,)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.command = None

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)

    def ann(self, ss, es, cls, texts):
        self.put(ss, es, self.out_ann, [cls, texts])

    def finish_command(self):
        """Annotate the command gathered so far (at its end: the next command or CE# high)."""
        c, self.command = self.command, None
        if c is None:
            return
        ops = c['ops']
        first = ops[0][0]
        name = COMMANDS.get(first, f'Command {first:02X}h')
        end = max(x[2] for x in ops + c['addr'] + c['din'] + c['dout'])
        detail = ''
        if c['addr'] and first in (0x90, 0xEC, 0xEE, 0xEF):
            detail = f' {c["addr"][0][0]:02X}h'
        elif c['addr']:
            detail = ' @' + ' '.join(f'{a:02X}' for a, _, _ in c['addr'])
        seconds = ''.join(f' {op:02X}h' for op, _, _ in ops[1:])
        if c['dout'] and first == 0x90:
            seconds += ': ' + ' '.join(f'{b:02X}' for b, _, _ in c['dout'][:8])
        self.ann(ops[0][1], end, A_COMMAND, [f'{name}{detail}{seconds}', f'{first:02X}h'])
        if first in STATUS_COMMANDS:
            for b, ss, es in c['dout']:
                bits = ' '.join(n for bit, n in STATUS_BITS if b >> bit & 1)
                self.ann(ss, es, A_STATUS, [f'status {b:02X}h: {bits or "busy"}',
                                            f'{b:02X}h'])
        if first == 0xEC and c['dout']:
            self.page_fields(c)

    def page_fields(self, c):
        data = [b for b, _, _ in c['dout']]
        address = c['addr'][0][0] if c['addr'] else 0
        sig = bytes(data[:4])
        if sig == b'ONFI' or (address == 0x00 and sig != b'JESD'):
            fields, size = ONFI_FIELDS, 256
        else:
            fields, size = JEDEC_FIELDS, 512
        if len(data) < size:
            self.ann(c['dout'][0][1], c['dout'][-1][2], A_WARN,
                     [f'parameter page cut short: {len(data)} of {size} bytes'])
            return
        page = data[:size]
        for name, offset, width, kind in fields:
            raw = page[offset:offset + width]
            ss = c['dout'][offset][1]
            es = c['dout'][offset + width - 1][2]
            self.ann(ss, es, A_FIELD, [field_text(name, raw, kind, page), name])

    def cycle(self, kind, byte, ss, es):
        cls = {'cmd': A_CMD, 'addr': A_ADDR, 'din': A_DIN, 'dout': A_DOUT}[kind]
        self.ann(ss, es, cls, [f'{kind} {byte:02X}h', f'{byte:02X}'])
        c = self.command
        if kind == 'cmd':
            second = c is not None and c['addr'] and not c['dout'] and byte in (
                0x10, 0x11, 0x15, 0x1A, 0x30, 0x31, 0x32, 0x35, 0xD0, 0xD1, 0xE0)
            if second:
                c['ops'].append((byte, ss, es))
                return
            self.finish_command()
            self.command = {'ops': [(byte, ss, es)], 'addr': [], 'din': [], 'dout': []}
        elif c is not None:
            c[kind].append((byte, ss, es))

    def decode(self):
        pins = self.wait()
        before = pins
        fell = {WE: self.samplenum, RE: self.samplenum}
        conditions = [{WE: 'r'}, {RE: 'r'}, {WE: 'f'}, {RE: 'f'}, {CE: 'r'}] + \
            [{DQ + i: 'e'} for i in range(8)] + [{CLE: 'e'}, {ALE: 'e'}, {CE: 'f'}]
        while True:
            pins = self.wait(conditions)
            now = self.samplenum
            m = self.matched
            selected = not before[CE]
            cle, ale = before[CLE], before[ALE]
            byte = sum(before[DQ + i] << i for i in range(8))
            if m[0] and selected and not (cle and ale):
                self.cycle('cmd' if cle else 'addr' if ale else 'din', byte, fell[WE], now)
            if m[1] and selected and not cle and not ale:
                self.cycle('dout', byte, fell[RE], now)
            if m[2]:
                fell[WE] = now
            if m[3]:
                fell[RE] = now
            if m[4]:
                self.finish_command()
            before = pins

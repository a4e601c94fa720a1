# rbscope: a libsigrokdecode protocol decoder that classifies NAND R/B# busy pulses by width.
# Loaded by libsigrokdecode (PulseView, sigrok-cli) from SIGROKDECODE_DIR, never by rbscope
# itself: `rbscope sigrok-decoder` prints the directory. The rules follow the sniffer's (see the
# rbscope documentation, docs/report.md): widths in whole samples, windows half-open.

import sigrokdecode as srd

#: Annotation classes; the first six are the class names rbscope's presets use.
CLASSES = ("read", "program", "erase", "cache", "reset", "multiplane", "unclassified", "glitch",
           "partial")
# sigrok-cli separates decoder options with ':' and stacked decoders with ',', so a window is
# name=lo-hi and windows are separated by '/' (',' and ';' are accepted too, e.g. in PulseView).
DEFAULT_WINDOWS = "cache=1.5-12/read=12-150/program=150-1950/erase=1950-12000"


def parse_windows(text):
    """'name=lo-hi/...' (µs) -> [(name, lo, hi)]; raise ValueError naming the bad part."""
    out = []
    for part in text.replace(",", "/").replace(";", "/").split("/"):
        part = part.strip()
        if not part:
            continue
        name, _, rng = part.partition("=")
        lo, _, hi = rng.partition("-")
        name = name.strip()
        if name not in CLASSES[:6]:
            raise ValueError(f"window {part!r}: the class must be one of {CLASSES[:6]}")
        lo, hi = float(lo), float(hi)
        if not 0 <= lo < hi:
            raise ValueError(f"window {part!r}: needs 0 <= lo < hi")
        out.append((name, lo, hi))
    return out


class Decoder(srd.Decoder):
    api_version = 3
    id = 'rbscope_rb'
    name = 'R/B# classes'
    longname = 'NAND Ready/Busy# pulse classes (rbscope)'
    desc = 'Classify NAND busy pulses (read, program, erase, ...) by their width.'
    license = 'bsd'
    inputs = ['logic']
    outputs = []
    tags = ['Memory']
    channels = (
        {'id': 'rb', 'name': 'R/B#', 'desc': 'Ready/Busy# line of a NAND die (low = busy)'},
    )
    options = (
        {'id': 'windows', 'desc': 'Class windows name=lo-hi in µs, first match wins',
         'default': DEFAULT_WINDOWS},
        {'id': 'glitch_us', 'desc': 'Pulses shorter than this (µs) are glitches',
         'default': 0.2},
    )
    annotations = tuple((c, c.capitalize()) for c in CLASSES)
    annotation_rows = (
        ('classes', 'Classes', tuple(range(len(CLASSES)))),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.samplerate = None

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.windows = parse_windows(self.options['windows'])
        self.glitch_us = float(self.options['glitch_us'])

    def classify(self, samples):
        us = samples * 1e6 / self.samplerate
        if us < self.glitch_us:
            return 'glitch'
        for name, lo, hi in self.windows:
            if lo <= us < hi:
                return name
        return 'unclassified'

    def emit(self, ss, es, cls):
        us = (es - ss) * 1e6 / self.samplerate
        text = f'{cls} {us:.6g} µs'
        self.put(ss, es, self.out_ann, [CLASSES.index(cls), [text, cls, cls[0].upper()]])

    def decode(self):
        if not self.samplerate:
            raise srd.SamplerateError('Cannot classify pulse widths without a samplerate.')
        (rb,) = self.wait()  # the level at the first sample
        if rb == 0:  # busy when the recording starts: the start is unknown
            ss = self.samplenum
            self.wait({0: 'r'})
            self.emit(ss, self.samplenum, 'partial')
        while True:
            self.wait({0: 'f'})
            ss = self.samplenum
            self.wait({0: 'r'})
            es = self.samplenum
            self.emit(ss, es, self.classify(es - ss))

"""The online reference SSD (rbscope.vssd.engine): truth as the batch simulator's, queueing,
sparse data, the recording ``analyze`` reads."""

import json

import numpy as np
import pytest

from rbscope.analysis.logical import from_bytes
from rbscope.analysis.pipeline import AnalysisRequest, analyse
from rbscope.refssd import preset, simulate
from rbscope.refssd.drive import RefSSDError
from rbscope.refssd.workload import READ, TRIM, WRITE, Workload, micro
from rbscope.vssd import Engine

_KIND = {WRITE: "write", READ: "read", TRIM: "trim"}


def _drive(name):
    small = {"ssd-v": dict(blocks_per_plane=32, pages_per_block=32),
             "mlc-2plane": dict(blocks_per_plane=32, pages_per_block=32, channels=2,
                           over_provisioning=0.25),
             "tlc-gc": dict(blocks_per_plane=24, pages_per_block=48, channels=2,
                       over_provisioning=0.25),
             "cache-prog": dict(blocks_per_plane=32, pages_per_block=32, channels=2,
                           over_provisioning=0.25)}[name]
    return preset(name, **small)


def _mixed(drive, n=1500, seed=3):
    """Writes (some unaligned, sub-page), reads and trims over the whole space: GC runs."""
    rng = np.random.default_rng(seed)
    space = drive.logical_bytes
    ops = rng.choice([WRITE, WRITE, WRITE, READ, TRIM], n, p=[.4, .2, .1, .25, .05])
    sizes = rng.choice([512, 4096, 8192, 65536], n)
    offs = rng.integers(0, (space - 65536) // 512, n) * 512
    offs[::3] = offs[::3] // 4096 * 4096
    return Workload("mixed", ops, offs, sizes)


def _feed(engine, workload):
    for op, off, size in zip(workload.ops.tolist(), workload.offsets.tolist(),
                             workload.sizes.tolist(), strict=True):
        engine.submit(_KIND[op], off, size)
    engine.flush()


@pytest.mark.parametrize("name", ["ssd-v", "mlc-2plane", "tlc-gc", "cache-prog"])
def test_truth_equals_the_batch_simulator(name):
    drive = _drive(name)
    wl = _mixed(drive)
    batch = simulate(drive, wl, precondition="steady", seed=5).truth
    eng = Engine(drive, precondition="steady", seed=5)
    _feed(eng, wl)
    online = eng.truth()
    assert online.pages_programmed["gc"] > 0  # the workload reaches garbage collection
    for key in ("host_bytes_written", "host_bytes_read", "pages_programmed",
                "program_operations", "erases", "reads", "per_die", "wa_true"):
        assert getattr(online, key) == getattr(batch, key), key
    if name == "cache-prog":
        # The documented difference: cache-program chains end with each request here.
        both = batch.pulses["PROGRAM"] + batch.pulses["CACHE_PROGRAM"]
        assert online.pulses["PROGRAM"] + online.pulses["CACHE_PROGRAM"] == both
        assert online.pulses["CACHE_PROGRAM"] < batch.pulses["CACHE_PROGRAM"]
    else:
        assert online.pulses == batch.pulses


def test_latency_grows_with_queueing():
    drive = _drive("ssd-v").with_(write_buffer=0)  # every write programs at once
    ps = drive.page_size
    # Alone: each write arrives after the previous completed.
    eng = Engine(drive, seed=1)
    alone = [eng.write(i * ps * drive.dies, ps, arrival_ns=eng.end_ns + 10**6).latency_ns
             for i in range(32)]
    # Queued: 32 writes to the same die arrive at once; each waits for those before it.
    eng = Engine(drive, seed=1)
    t0 = eng.end_ns + 10**6
    queued = [eng.write(i * ps * drive.dies, ps, arrival_ns=t0).latency_ns for i in range(32)]
    assert np.all(np.diff(queued) > 0)
    assert queued[-1] > 20 * np.median(alone)
    # Spread over the dies (consecutive pages), the same burst queues far less.
    eng = Engine(drive, seed=1)
    t0 = eng.end_ns + 10**6
    spread = [eng.write(i * ps, ps, arrival_ns=t0).latency_ns for i in range(32)]
    assert spread[-1] < queued[-1] / (drive.dies - 1)


def test_data_is_sparse_and_read_back():
    drive = preset("ssd-v")  # the full 16 GiB drive: only what is written is kept
    eng = Engine(drive)
    assert eng.read(0, 4096).data == bytes(4096)
    eng.write(8192, 1024, data=b"\x5a" * 1024)
    eng.write(1 << 30, 512, data=bytes(range(256)) * 2)
    assert eng.read(8192 - 512, 2048).data == bytes(512) + b"\x5a" * 1024 + bytes(512)
    assert eng.read(1 << 30, 512).data == bytes(range(256)) * 2
    assert len(eng.data) == 3
    eng.trim(8192, 512)
    assert eng.read(8192, 1024).data == bytes(512) + b"\x5a" * 512
    last = drive.logical_bytes - 512
    eng.write(last, 512, data=b"\x01" * 512)
    assert eng.read(last, 512).data == b"\x01" * 512


@pytest.mark.parametrize("call, match", [
    (lambda e: e.submit("erase", 0, 512), "request kind"),
    (lambda e: e.write(100, 512), "whole 512-byte"),
    (lambda e: e.read(0, 0), "whole 512-byte"),
    (lambda e: e.write(-512, 512), "offset must be"),
    (lambda e: e.read(e.capacity, 512), "beyond the drive"),
    (lambda e: e.write(0, 1024, data=b"x"), "data is 1 bytes"),
])
def test_bad_requests_name_the_field(call, match):
    with pytest.raises(RefSSDError, match=match):
        call(Engine(_drive("ssd-v")))


def test_recording_and_truth_files_agree_with_the_analyser(tmp_path):
    drive = _drive("ssd-v")
    eng = Engine(drive, precondition="steady", seed=2)
    wl = micro("4K-RD-100%-W-4KiB-align", drive.logical_bytes, 4 << 20, seed=2)
    for off, size in zip(wl.offsets.tolist(), wl.sizes.tolist(), strict=True):
        eng.write(off, size)
    eng.flush()
    vcd, js = tmp_path / "run.vcd", tmp_path / "truth.json"
    eng.write_recording(vcd)
    eng.write_truth(js)
    truth = json.loads(js.read_text())
    assert truth["host_bytes_written"] == 4 << 20
    assert truth["pages_programmed"]["total"] == eng.truth().pages_programmed["total"]
    a = analyse(AnalysisRequest(source=str(vcd), geometry=drive.user_geometry(),
                                logical=from_bytes(truth["host_bytes_written"])))
    wa = a.result.wa
    assert wa.lo <= truth["wa_true"] * 1.02 and wa.hi >= truth["wa_true"] * 0.98, \
        (wa, truth["wa_true"])

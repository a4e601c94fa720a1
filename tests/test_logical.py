"""Logical-volume sources: byte counts, fio JSON, sysfs, smartctl and nvme-cli readings."""

import json

import pytest

from rbscope.analysis.logical import (
    NVME_DATA_UNIT,
    LogicalSourceError,
    from_bytes,
    parse_size,
    read_fio_json,
    read_nvme_smart_log,
    read_smartctl,
    read_sysfs_stat,
)


def txt(text, name="t"):
    return (text, name)


@pytest.mark.parametrize("text, value", [
    ("2147483648", 2**31), ("2GiB", 2**31), ("2 GB", 2 * 10**9), ("4096s", 4096 * 512),
    ("1.5kB", 1500)])
def test_parse_size(text, value):
    assert parse_size(text) == value
    assert from_bytes(text).lo == from_bytes(text).hi == value


@pytest.mark.parametrize("text", ["", "2 parsecs", "1.0001kB", "-3"])
def test_parse_size_rejects(text):
    with pytest.raises(LogicalSourceError):
        parse_size(text)


@pytest.mark.parametrize("text", ["2Gb", "2gb", "2G", "2mb", "2MiB".lower(), "3k"])
def test_parse_size_refuses_ambiguous_units(text):
    # 2Gb once read as 2 GB: a unit that could mean bits, milli or 1000/1024 is refused.
    with pytest.raises(LogicalSourceError, match="ambiguous"):
        parse_size(text)


FIO = {"fio version": "fio-3.33", "jobs": [
    {"jobname": "a", "write": {"io_bytes": 1 << 30, "io_kbytes": 1 << 20}},
    {"jobname": "b", "write": {"io_kbytes": 1024}}]}


def test_fio_json_sums_jobs_and_skips_warnings():
    text = "fio: warning: something\n" + json.dumps(FIO)
    lv = read_fio_json(txt(text, "fio.json"))
    assert lv.lo == lv.hi == (1 << 30) + 1024 * 1024
    assert lv.source == "fio"


@pytest.mark.parametrize("doc, message", [
    ("not json at all", "no JSON object"),
    ('{"jobs": [', "invalid JSON at line 1 column"),
    ('{"jobs": []}', "field 'jobs' must be a non-empty list"),
    ('{"jobs": [{"read": {}}]}', r"field 'jobs\[0\].write' is missing"),
    ('{"jobs": [{"write": {"io_bytes": -1}}]}', r"'jobs\[0\].write.io_bytes' must be a non-neg"),
    ('{"jobs": [{"write": {"io_bytes": 1}}, {"write": {"io_kbytes": "x"}}]}',
     r"'jobs\[1\].write.io_kbytes'"),
    ('{"jobs": [{"write": {}}]}', r"'jobs\[0\].write.io_bytes' is missing"),
])
def test_fio_json_errors_name_the_field(doc, message):
    with pytest.raises(LogicalSourceError, match=message) as info:
        read_fio_json(txt(doc, "fio.json"))
    assert str(info.value).startswith("fio.json: ")


STAT = "{r} 0 {rs} 100 {w} 0 {ws} 300 0 400 500 0 0 0 0 0 0"


def test_sysfs_difference_in_sectors():
    before = txt(STAT.format(r=1, rs=8, w=10, ws=1000), "before")
    after = txt(STAT.format(r=1, rs=8, w=90, ws=1000 + 4194304), "after")
    lv = read_sysfs_stat(before, after)
    assert lv.lo == lv.hi == 4194304 * 512


@pytest.mark.parametrize("text, message", [
    ("1 2 3 4 5 6", "has 6 fields, needs at least 7"),
    ("1 2 x 4 5 6 7", "field 3 of /sys/block/<dev>/stat is not a non-negative integer: 'x'"),
    ("1 2 3 4 5 6 7\n1 2 3 4 5 6 7", "expected one line"),
])
def test_sysfs_errors(text, message):
    with pytest.raises(LogicalSourceError, match=message):
        read_sysfs_stat(txt(text, "b"), txt(STAT.format(r=1, rs=1, w=1, ws=1), "a"))


def test_sysfs_going_backwards():
    with pytest.raises(LogicalSourceError, match="field 7 .* is below the 'before'"):
        read_sysfs_stat(txt(STAT.format(r=1, rs=1, w=1, ws=50)),
                        txt(STAT.format(r=1, rs=1, w=1, ws=40)))


ATA = """smartctl 7.3 2022-02-28 r5338 [x86_64-linux-6.1.0] (local build)
ID# ATTRIBUTE_NAME          FLAG     VALUE WORST THRESH TYPE      UPDATED  WHEN_FAILED RAW_VALUE
  9 Power_On_Hours          0x0032   100   100   000    Old_age   Always       -       1234
241 Total_LBAs_Written      0x0032   100   100   000    Old_age   Always       -       {lbas}
"""


def test_smartctl_ata_text_and_json():
    lv = read_smartctl(txt(ATA.format(lbas=1000)), txt(ATA.format(lbas=1000 + 65536)))
    assert lv.lo == lv.hi == 65536 * 512
    j = {"ata_smart_attributes": {"table": [{"id": 9, "raw": {"value": 3}},
                                            {"id": 241, "raw": {"value": 70}}]}}
    j2 = json.loads(json.dumps(j))
    j2["ata_smart_attributes"]["table"][1]["raw"]["value"] = 100
    lv = read_smartctl(txt(json.dumps(j)), txt(json.dumps(j2)), lba_bytes=32 << 20)
    assert lv.lo == 30 * (32 << 20)


def test_smartctl_errors():
    bad = ATA.format(lbas="lots")
    with pytest.raises(LogicalSourceError, match="line 4: RAW_VALUE of attribute 241"):
        read_smartctl(txt(bad), txt(ATA.format(lbas=1)))
    with pytest.raises(LogicalSourceError, match="found neither attribute 241"):
        read_smartctl(txt("nothing here"), txt(ATA.format(lbas=1)))
    j = {"ata_smart_attributes": {"table": [{"id": 241, "raw": {"value": "7"}}]}}
    with pytest.raises(LogicalSourceError,
                       match=r"'ata_smart_attributes.table\[0\].raw.value' must be"):
        read_smartctl(txt(json.dumps(j)), txt(ATA.format(lbas=1)))


NVME_TEXT = """Smart Log for NVME device:nvme0 namespace-id:ffffffff
critical_warning                        : 0
data_units_read                         : 1,000
data_units_written                      : {n}
"""


def test_nvme_interval_from_rounded_up_units():
    # Readings b and a (thousands of 512-byte units, rounded up): written bytes are in
    # ((a-b-1), (a-b+1)) × 512000.
    lv = read_nvme_smart_log(txt(NVME_TEXT.format(n="2,000")), txt(NVME_TEXT.format(n="6,096")))
    assert (lv.lo, lv.hi) == (4095 * NVME_DATA_UNIT, 4097 * NVME_DATA_UNIT)
    assert lv.value == 4096 * NVME_DATA_UNIT
    # smartctl's NVMe JSON and text carry the same counter.
    j = lambda n: json.dumps({"nvme_smart_health_information_log": {"data_units_written": n}})  # noqa: E731
    assert read_smartctl(txt(j(2000)), txt(j(6096))) == \
        read_smartctl(txt("Data Units Written:                 2,000 [1.02 GB]"),
                      txt("Data Units Written:                 6,096 [3.12 GB]"))
    # From a fresh drive (before = 0) only the after-reading's rounding is unknown.
    lv = read_nvme_smart_log(txt('{"data_units_written": 0}'), txt('{"data_units_written": 3}'))
    assert (lv.lo, lv.hi) == (2 * NVME_DATA_UNIT, 3 * NVME_DATA_UNIT)


def test_nvme_errors():
    with pytest.raises(LogicalSourceError, match="field 'data_units_written' must be"):
        read_nvme_smart_log(txt('{"data_units_written": null}'), txt(NVME_TEXT.format(n=1)))
    with pytest.raises(LogicalSourceError, match="is below the 'before' reading"):
        read_nvme_smart_log(txt(NVME_TEXT.format(n=9)), txt(NVME_TEXT.format(n=8)))
    with pytest.raises(LogicalSourceError, match="not an NVMe smart log"):
        read_nvme_smart_log(txt(ATA.format(lbas=1)), txt(NVME_TEXT.format(n=8)))
    with pytest.raises(LogicalSourceError, match=r"invalid JSON at line 1 column \d+ \(offset"):
        read_nvme_smart_log(txt('{"data_units_written": 1,'), txt(NVME_TEXT.format(n=8)))


def test_unreadable_file_names_it(tmp_path):
    with pytest.raises(LogicalSourceError, match="missing.json: cannot read"):
        read_fio_json(tmp_path / "missing.json")
    bad = tmp_path / "bin.json"
    bad.write_bytes(b'{"jobs": "\xff"}')
    with pytest.raises(LogicalSourceError, match=r"not UTF-8 text \(byte offset 10\)"):
        read_fio_json(bad)


def test_fio_bw_log_integrates_the_write_bandwidth(tmp_path):
    from rbscope.analysis.logical import read_fio_bw_log

    a = tmp_path / "job_bw.1.log"
    b = tmp_path / "job_bw.2.log"
    # 500 ms averages: 1000 KiB/s then 2000 KiB/s; a read entry (direction 0) is ignored.
    a.write_text("500, 1000, 1, 4096, 0\n500, 77, 0, 4096, 0\n1000, 2000, 1, 4096, 0\n")
    b.write_text("500, 100, 1, 4096, 0, 0\n1000, 100, 1, 4096, 0, 0\n")
    series = read_fio_bw_log([a, b])
    assert series == [(0.5, (1000 + 100) * 1024 * 0.5),
                      (1.0, (1000 + 100) * 1024 * 0.5 + (2000 + 100) * 1024 * 0.5)]


@pytest.mark.parametrize("text, message", [
    ("500, 1000, 1\n", "line 1: expected"),
    ("500, 1000, 1, 4096, 0\n400, 10, 1, 4096, 0\n", "line 2: time goes backwards"),
    ("500, 1000, 1, 4096, 0\n500, 10, 1, 4096, 0\n", "per-I/O log"),
    ("500, 1000, 0, 4096, 0\n", "no write entries"),
])
def test_fio_bw_log_errors_name_the_line(tmp_path, text, message):
    from rbscope.analysis.logical import LogicalSourceError, read_fio_bw_log

    path = tmp_path / "bw.log"
    path.write_text(text)
    with pytest.raises(LogicalSourceError, match=message):
        read_fio_bw_log(path)


def test_sample_sysfs_records_bytes_written_since_the_first_sample(tmp_path):
    from rbscope.analysis.logical import sample_sysfs

    stat = tmp_path / "stat"
    readings = iter([100, 180, 1180])  # sectors written at each sample
    times = iter([0, 0, 500_000_000, 1_000_000_000])

    def clock():
        return next(times)

    def sleep(_):
        stat.write_text(stat_line(next(readings)))

    def stat_line(sectors):
        return f"1 0 8 0 4 0 {sectors} 0 0 0 0\n"

    stat.write_text(stat_line(next(readings)))
    out = tmp_path / "host.csv"
    n = sample_sysfs(str(stat), out, interval=0.5, duration=1.0, clock=clock, sleep=sleep)
    lines = out.read_text().splitlines()
    assert n == 3 and lines[0].startswith("# start_unix_ns=0")
    assert lines[2:] == ["0.000000,0", "0.500000,40960", "1.000000,552960"]

"""The drive's own NAND-write counters (rbscope.analysis.drive_counters) on hand-written
smartctl -j and nvme-cli -o json samples, and `analyze --drive-counters`."""

import json

import pytest

from rbscope.analysis.drive_counters import (
    DriveCounterError,
    GiB,
    MiB,
    disagrees,
    drive_wa,
    read_counters,
)
from rbscope.cli import commands as cli

from . import wa_drives as W


def ocp(pmuw, split=False):
    """nvme ocp smart-add-log -o json (nvme-cli 2.x: hi/lo; older: one number)."""
    if split:
        return {"Physical media units written": {"hi": pmuw >> 64, "lo": pmuw & (2**64 - 1)},
                "Physical media units read": {"hi": 0, "lo": 5}}
    return {"physical_media_units_written": pmuw}


def nvme_smart_log(duw):
    """nvme smart-log -o json."""
    return {"critical_warning": 0, "data_units_read": 10, "data_units_written": duw}


def smartctl_nvme(duw):
    """smartctl -j -x of an NVMe drive."""
    return {"device": {"protocol": "NVMe"},
            "nvme_smart_health_information_log": {"data_units_written": duw,
                                                  "host_writes": 1234}}


def smartctl_ata(attrs, lbs=512, devstat_lsw=None):
    """smartctl -j -x of a SATA drive: ``attrs`` is [(id, name, raw)]."""
    doc = {"device": {"protocol": "ATA"}, "logical_block_size": lbs,
           "ata_smart_attributes": {"revision": 1, "table": [
               {"id": i, "name": n, "value": 100, "raw": {"value": v, "string": str(v)}}
               for i, n, v in attrs]}}
    if devstat_lsw is not None:
        doc["ata_device_statistics"] = {"pages": [
            {"number": 1, "name": "General Statistics", "table": [
                {"offset": 8, "name": "Lifetime Power-On Resets", "value": 17},
                {"offset": 24, "name": "Logical Sectors Written", "value": devstat_lsw}]},
            {"number": 7, "name": "Solid State Device Statistics", "table": [
                {"offset": 8, "name": "Percentage Used Endurance Indicator", "value": 3}]}]}
    return doc


def test_ocp_over_nvme_data_units():
    # 10 GB from the host (rounded-up data units), 25.6 GB on the NAND: WA 2.5 with the data
    # units' rounding as the interval.
    before = [ocp(1_000_000, split=True), nvme_smart_log(100)]
    after = [ocp(1_000_000 + 25_600_000_000, split=True), nvme_smart_log(100 + 20_000)]
    claim = drive_wa(before, after)
    assert claim.wa == pytest.approx(2.5)
    assert claim.lo == pytest.approx(25.6e9 / (20_001 * 512_000))
    assert claim.hi == pytest.approx(25.6e9 / (19_999 * 512_000))
    assert "OCP C0h" in claim.method and "Data Units Written" in claim.method
    # The same counts from smartctl's NVMe output and the one-number OCP form.
    same = drive_wa([ocp(1_000_000), smartctl_nvme(100)],
                    [ocp(1_000_000 + 25_600_000_000), smartctl_nvme(20_100)])
    assert (same.wa, same.lo, same.hi) == (claim.wa, claim.lo, claim.hi)
    # 128-bit counters: the hi word counts.
    assert read_counters(ocp(3 << 64 | 7, split=True))["ocp.pmuw"].value == 3 << 64 | 7


def test_intel_sata_units_by_name():
    # Intel 520/530: 241 Host_Writes_32MiB, 249 NAND_Writes_1GiB.
    before = smartctl_ata([(241, "Host_Writes_32MiB", 1000), (249, "NAND_Writes_1GiB", 40)])
    after = smartctl_ata([(241, "Host_Writes_32MiB", 1000 + 3200),
                          (249, "NAND_Writes_1GiB", 40 + 150)])
    claim = drive_wa(before, after)
    host = 3200 * 32 * MiB  # 100 GiB
    assert claim.wa == pytest.approx(150 * GiB / host)
    assert claim.lo == pytest.approx(149 * GiB / (3201 * 32 * MiB))
    assert claim.hi == pytest.approx(151 * GiB / (3199 * 32 * MiB))
    # Intel DC: 243 NAND_Writes_32MiB with 241 Host_Writes_32MiB.
    dc = drive_wa(smartctl_ata([(241, "Host_Writes_32MiB", 0), (243, "NAND_Writes_32MiB", 0)]),
                  smartctl_ata([(241, "Host_Writes_32MiB", 1000),
                                (243, "NAND_Writes_32MiB", 1300)]))
    assert dc.wa == pytest.approx(1.3)


def test_units_that_changed_with_the_firmware_are_refused():
    # The same drive before and after a firmware (or drive database) update: 241 is named in
    # 512-byte sectors in one reading and in 32 MiB units in the other.
    before = smartctl_ata([(241, "Total_LBAs_Written", 1000), (249, "NAND_Writes_1GiB", 40)])
    after = smartctl_ata([(241, "Host_Writes_32MiB", 1100), (249, "NAND_Writes_1GiB", 50)])
    with pytest.raises(DriveCounterError, match="ata.241: the readings disagree on the "
                                                "counter's unit"):
        drive_wa(before, after)
    # A database that does not know the model: the unit is assumed, and the claim says so.
    claim = drive_wa(
        smartctl_ata([(241, "Total_LBAs_Written", 0), (249, "Unknown_Attribute", 0)]),
        smartctl_ata([(241, "Total_LBAs_Written", 2 * GiB // 512),
                      (249, "Unknown_Attribute", 4)]))
    assert claim.wa == pytest.approx(2.0)
    assert any("attribute 249 is not named" in c and "NAND_Writes_1GiB" in c
               for c in claim.caveats)
    # Another vendor's meaning of id 249 (not a NAND counter): ignored.
    counters = read_counters(smartctl_ata([(249, "Spare_Blocks_Left", 3)]) | {
        "data_units_written": 5})
    assert "ata.249" not in counters


def test_micron_page_counters():
    before = smartctl_ata([(247, "Host_Program_Page_Count", 5_000),
                           (248, "Bckgnd_Program_Page_Cnt", 9_000)])
    after = smartctl_ata([(247, "Host_Program_Page_Count", 5_000 + 40_000),
                          (248, "Bckgnd_Program_Page_Cnt", 9_000 + 12_000)])
    claim = drive_wa(before, after)
    assert claim.wa == claim.lo == claim.hi == pytest.approx(52_000 / 40_000)
    assert "247/248" in claim.method
    # Firmware that leaves 248 at zero: no claim (not "WA 1").
    zero = drive_wa(smartctl_ata([(247, "Host_Program_Page_Count", 5),
                                  (248, "Bckgnd_Program_Page_Cnt", 0)]),
                    smartctl_ata([(247, "Host_Program_Page_Count", 500),
                                  (248, "Bckgnd_Program_Page_Cnt", 0)]))
    assert zero.wa is None
    assert any("reads 0 before and after" in n for n in zero.notes)


def test_device_statistics_is_a_host_side():
    # 4 KiB logical sectors: 1 GiB of host writes in Device Statistics, 3 GiB on the NAND.
    before = smartctl_ata([(249, "NAND_Writes_1GiB", 10)], lbs=4096, devstat_lsw=100)
    after = smartctl_ata([(249, "NAND_Writes_1GiB", 13)], lbs=4096,
                         devstat_lsw=100 + GiB // 4096)
    counters = read_counters(after)
    assert counters["devstat.lsw"].unit == 4096 and counters["devstat.lsw"].side == "host"
    claim = drive_wa(before, after)
    assert claim.wa == pytest.approx(3.0) and "Device Statistics" in claim.method
    assert (claim.lo, claim.hi) == (pytest.approx(2.0), pytest.approx(4.0))


def test_counters_that_read_zero():
    # OCP PMUW at zero before and after (firmware that does not maintain it): no claim.
    claim = drive_wa([ocp(0), nvme_smart_log(10)], [ocp(0), nvme_smart_log(5000)])
    assert claim.wa is None
    assert any("reads 0 before and after" in n for n in claim.notes)
    assert any("no NAND-write counter" in n for n in claim.notes)
    # A NAND counter that does not move while the host writes: no claim, said why.
    stuck = drive_wa(smartctl_ata([(241, "Total_LBAs_Written", 0),
                                   (249, "NAND_Writes_1GiB", 7)]),
                     smartctl_ata([(241, "Total_LBAs_Written", 10 * GiB // 512),
                                   (249, "NAND_Writes_1GiB", 7)]))
    assert stuck.wa is None and "did not move" in stuck.notes[-1]


def test_bad_readings_name_the_file_and_field(tmp_path):
    with pytest.raises(DriveCounterError, match="below the 'before' reading"):
        drive_wa([ocp(500), nvme_smart_log(10)], [ocp(100), nvme_smart_log(20)])
    bad = tmp_path / "bad.json"
    bad.write_text('{"data_units_written": -4}')
    with pytest.raises(DriveCounterError, match="bad.json: field 'data_units_written' must be"):
        read_counters(bad)
    bad.write_text("Data Units Written: 5")
    with pytest.raises(DriveCounterError, match="bad.json: invalid JSON"):
        read_counters(bad)
    with pytest.raises(DriveCounterError, match="no write counter found"):
        read_counters({"device": {"protocol": "ATA"}})
    with pytest.raises(DriveCounterError, match="appears twice with different values"):
        read_counters([nvme_smart_log(5), smartctl_nvme(6)])


def test_disagreement_needs_both_intervals_apart():
    claim = drive_wa([ocp(0), nvme_smart_log(1)], [ocp(2 * 512_000_000), nvme_smart_log(1001)])
    assert claim.wa == pytest.approx(2.0)
    assert not disagrees(claim, 1.9, 2.1) and not disagrees(claim, 1.0, claim.lo)
    assert disagrees(claim, 1.0, 1.9) and disagrees(claim, 2.1, 3.0)
    assert not disagrees(claim, None, None)


def _claim_case(tmp_path, factor):
    """A one-shot TLC drive's measurement, its geometry, and OCP/NVMe counter readings before
    and after whose NAND writes are ``factor`` × the truth: ``(drive, source options)``."""
    d = W.generate(W.family("tlc-oneshot-4p", blocks=4, loads=False), 6)
    src = tmp_path / "m.json"
    d.measurement.save(src)
    geo = tmp_path / "g.toml"
    geo.write_text('name = "T"\n[geometry]\nchannels = 4\nchips_per_channel = 1\n'
                   'dies_per_chip = 1\nplanes_per_die = 4\npage_size = 4096\n'
                   'program_model = "multi-plane"\ncell = "tlc"\nprogram_scheme = "one-shot"\n'
                   "[timing]\nprogram = 3500\nerase = 6500\n")
    host = round(d.host_pages * 4096)
    nand = round(host * d.wa_true * factor)
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps([ocp(10**9, split=True), nvme_smart_log(0)]))
    after.write_text(json.dumps([ocp(10**9 + nand, split=True),
                                 nvme_smart_log(-(-host // 512_000))]))
    return d, [str(src), "--geometry", str(geo), "--logical", f"{host}B",
               "--drive-counters", str(before), str(after)]


@pytest.mark.parametrize("factor,flagged", [(1.0, False), (2.5, True)])
def test_analyze_shows_the_drive_claim(tmp_path, capsys, factor, flagged):
    d, opts = _claim_case(tmp_path, factor)
    after = opts[-1]
    args = ["analyze", *opts]
    assert cli.main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    drive = out["drive_says"]
    assert drive["disagrees"] is flagged
    assert drive["lo"] <= d.wa_true * factor <= drive["hi"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "the drive says WA" in text
    assert ("DISAGREEMENT" in text) is flagged
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert cli.main(args[:-2] + [str(bad), str(after)]) == 1
    assert "no write counter found" in capsys.readouterr().err


@pytest.mark.parametrize("factor,flagged", [(1.0, False), (2.5, True)])
def test_the_report_shows_the_drive_claim_and_the_structure(tmp_path, capsys, factor, flagged):
    # The procurement report carries what `analyze` prints: the drive's own count beside
    # rbscope's WA, a disagreement among the run's warnings, and the structure the pulses show.
    _, opts = _claim_case(tmp_path, factor)
    src = opts[0]
    out = tmp_path / "r.html"
    args = ["report", *opts, "-o", str(out)]
    assert cli.main(args) == 0
    html = out.read_text()
    assert "What the drive says (its own NAND-write counters)" in html
    assert ("DISAGREE: the two intervals do not overlap" in html) is flagged
    assert ("the drive&#39;s own counters and rbscope&#39;s WA disagree" in html
            or "the drive's own counters and rbscope's WA disagree" in html) is flagged
    assert "Structure the pulses show" in html and "planes per operation" in html
    # One run's counters: with two sources they are refused.
    assert cli.main(args[:2] + [src] + args[2:]) == 2
    assert "--drive-counters reads one run's counters" in capsys.readouterr().err

"""The accuracy table's sequence-classifier measurement, its comparison columns, --combine."""

import json

import pytest

from .conftest import REPO_ROOT, load_benchmark

BENCH = REPO_ROOT / "benchmarks"


def _load(name):
    return load_benchmark(name)


@pytest.mark.slow
def test_sequence_measurement_with_windows_and_opcode_columns(monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(BENCH))
    acc = _load("accuracy")
    _load("wa_classifier")
    monkeypatch.setitem(acc.DRIVES, "tiny", ("mlc-2plane", {
        "channels": 2, "dies_per_chip": 1, "pages_per_block": 32, "blocks_per_plane": 96}))
    job = {"drive": "tiny", "workload": "4K-RD-100%-W-4KiB-align", "state": "steady",
           "seed": 3}
    row = acc.run_job(job, "wa_classifier:measure")
    assert row["re"] < 0.01 and row["conf_covered"]
    assert set(row["columns"]) == {"windows", "opcode"}
    # The bus confirms name every page: opcode-aware WA is the truth.
    assert row["columns"]["opcode"]["re"] < 1e-12 and row["columns"]["opcode"]["covered"]
    s = acc.summary([row])
    assert s["all"]["opcode"]["max_re"] < 1e-12 and s["all"]["windows"]["rows"] == 1
    md = "\n".join(acc.summary_markdown(s) + acc.markdown([row]))
    assert "opcode: median" in md and "95 % interval" in md and "windows: \\|RE\\|" in md
    # Drives run separately join into one table.
    parts = []
    for i, state in enumerate(("initial", "steady")):
        r = dict(row, state=state)
        p = tmp_path / f"p{i}.json"
        p.write_text(json.dumps({"rows": [r]}))
        parts.append(str(p))
    out = tmp_path / "all.md"
    assert acc.main(["--combine", *parts, "--markdown", str(out)]) == 0
    text = out.read_text()
    assert "| all | 2 |" in text and text.count("| 4K-RD-100%-W-4KiB-align |") == 2
    capsys.readouterr()


@pytest.mark.parametrize("bad", [["--drives", "nope"], ["--workloads", "none-*"]])
def test_accuracy_bench_usage_errors(monkeypatch, bad):
    monkeypatch.syspath_prepend(str(BENCH))
    acc = _load("accuracy")
    with pytest.raises(SystemExit):
        acc.main(bad)

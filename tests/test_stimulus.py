"""The workload generator and its TOML workload files."""

import pytest

from rbscope.device.stimulus import TrainSpec, load_mix, random_trains
from rbscope.gateware.rb_sniffer import SnifferConfig, SnifferParams
from rbscope.gateware.rb_sniffer.model import SnifferModel

from .conftest import REPO_ROOT


def test_example_mix_loads_and_generates_its_clusters():
    mix = load_mix(REPO_ROOT / "examples" / "workloads" / "mlc.toml")
    assert [op.name for op in mix["mix"]] == ["read", "program", "erase", "cache_busy"]
    assert mix["gap"] == (40, 400) and mix["glitch_rate"] == 0.1
    trains = random_trains(TrainSpec(channels=2, cycles=400_000, **mix), seed=3)
    params = SnifferParams(channels=2)
    config = SnifferConfig(glitch_ticks=3, windows=((3, 12), (12, 120), (120, 1800),
                                                    (1800, 2300)))
    counts = SnifferModel(params, config).run(trains, 400_000).channels
    for c in counts:
        cache, read, program, erase, _ = c.classes
        # Weights 1 : 5 : 3 : 0.2 (erases share [1800, 2300) with slow upper-page programs).
        assert read > 2 * program > 0 and cache > 0 and erase > 0 and c.glitch > 0
        assert c.unclassified == 0


@pytest.mark.parametrize("text, message", [
    ("gap = [0, 5]\n[[operation]]\nname='r'\nmodes=[[1,2,3]]", "gap must be"),
    ("[[operation]]\nname='r'\nmodes=[[1,5,3]]", r"operation\[0\].modes\[0\]"),
    ("[[operation]]\nname=''\nmodes=[[1,2,3]]", r"operation\[0\].name"),
    ("glitch_rate = 2\n[[operation]]\nname='r'\nmodes=[[1,2,3]]", "glitch_rate"),
    ("speed = 1\n[[operation]]\nname='r'\nmodes=[[1,2,3]]", "unknown key"),
    ("gap = [1, 2]", "at least one"),
    ("gap = [1, 2", "not valid TOML"),
])
def test_bad_mix_files_are_named_precisely(tmp_path, text, message):
    path = tmp_path / "mix.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_mix(path)

"""The benchmark scripts run (tiny sizes; speed itself is only ever reported
by ``make bench``, never asserted) and report what they promise."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_adamwdl  # noqa: E402
import bench_ema  # noqa: E402

TINY = ["--layers", "1", "--hidden", "32", "--steps", "2"]


def test_adamwdl_benchmark_reports_ratios_and_no_extra_state(capsys):
    results = bench_adamwdl.main(TINY)
    for key in ("adamwdl_ratio", "adamwdl_general_path_ratio", "adamwdl_wd_schedule_ratio"):
        assert results[key] > 0
    # AdamWDL keeps exactly AdamW's accumulators: a property, not a timing
    assert results["adamwdl_state_tensors"] == results["adamw_state_tensors"]
    assert results["adamwdl_extra_state_bytes"] == 0
    assert "paddle.optimizer.AdamW" in capsys.readouterr().out


def test_ema_benchmark_reports_its_ratio_and_ignores_other_flags(capsys):
    results = bench_ema.main(TINY + ["--layerwise-decay", "0.5"])
    assert results["update_vs_adamw_ratio"] > 0 and results["target_ratio"] == 0.5
    assert "ignoring ['--layerwise-decay', '0.5']" in capsys.readouterr().out


def test_benchmarks_refuse_empty_sizes():
    with pytest.raises(SystemExit):
        bench_ema.main(["--layers", "0"])

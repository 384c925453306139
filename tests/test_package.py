"""Installation behaviour, the CLI dispatcher and the built-in model/data."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import paddle_llrd
from paddle_llrd.cli import COMMANDS, main as cli_main
from paddle_llrd.models.synthetic import make_majority_task
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_python(code: str, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, ROOT) if p)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120)


def test_import_without_paddle_says_which_pip_install():
    result = _run_python(
        """
        import sys
        class BlockPaddle:
            def find_spec(self, name, path=None, target=None):
                if name == "paddle" or name.startswith("paddle."):
                    raise ImportError("No module named 'paddle'")
        sys.meta_path.insert(0, BlockPaddle())
        try:
            import paddle_llrd
        except ImportError as exc:
            print("MESSAGE:", exc)
        """
    )
    assert "MESSAGE:" in result.stdout, result.stderr
    assert "pip install paddlepaddle>=3.0" in result.stdout
    # The GPU advice is Paddle's own index (PyPI stops at paddlepaddle-gpu 2.6.2), not an extra pip cannot resolve.
    assert ("python -m pip install paddlepaddle-gpu==3.3.1 "
            "-i https://www.paddlepaddle.org.cn/packages/stable/cu126/") in result.stdout
    assert "[gpu]" not in result.stdout


@pytest.mark.parametrize("old_version", ["2.5.2", "2.6.2"])
def test_import_with_old_paddle_says_3_0_needed(tmp_path, old_version):
    fake = tmp_path / "paddle"
    fake.mkdir()
    (fake / "__init__.py").write_text(f"__version__ = '{old_version}'\n")
    result = _run_python(
        """
        try:
            import paddle_llrd
        except ImportError as exc:
            print("MESSAGE:", exc)
        """,
        extra_path=str(tmp_path),
    )
    assert "MESSAGE:" in result.stdout, result.stderr
    assert f"found {old_version}" in result.stdout and ">= 3.0" in result.stdout


def test_public_api_is_complete():
    for name in paddle_llrd.__all__:
        assert getattr(paddle_llrd, name) is not None, name


def test_cli_help_lists_every_command(capsys):
    assert cli_main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


def test_cli_unknown_command_fails(capsys):
    assert cli_main(["nonsense"]) == 2
    assert "unknown command 'nonsense'" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    result = subprocess.run([sys.executable, "-m", "paddle_llrd", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "lr-table" in result.stdout


def test_tiny_bert_names_follow_paddlenlp_bert():
    model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=3))
    names = [n for n, _ in model.named_parameters()]
    assert names[0] == "bert.embeddings.word_embeddings.weight"
    assert {n.split(".")[3] for n in names if n.startswith("bert.encoder.layers.")} == {"0", "1", "2"}
    assert "bert.pooler.dense.weight" in names and names[-1] == "classifier.bias"


def test_majority_task_labels_match_definition():
    ids, labels = make_majority_task(500, seq_len=12, vocab_size=20, seed=3)
    assert (ids[:, 0] == 0).all() and ids[:, 1:].min() >= 1 and ids.max() < 20
    upper = (ids[:, 1:] >= 10).sum(axis=1)
    np.testing.assert_array_equal(labels, (upper >= 6).astype("int64"))
    assert 0.3 < labels.mean() < 0.7


def test_majority_task_middle_rule_matches_definition():
    ids, labels = make_majority_task(500, seq_len=10, vocab_size=40, seed=4, rule="middle")
    middle = ((ids[:, 1:] >= 10) & (ids[:, 1:] < 30)).sum(axis=1)
    np.testing.assert_array_equal(labels, (middle >= 5).astype("int64"))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"num_samples": 0}, "num_samples"), ({"seq_len": 7}, "seq_len"), ({"vocab_size": 3}, "vocab_size"), ({"rule": "lower"}, "rule")],
)
def test_majority_task_rejects_bad_arguments(kwargs, message):
    args = {"num_samples": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        make_majority_task(**args)


def test_all_says_exactly_what_is_public():
    """Every public attribute of a freshly imported package is in ``__all__``, or is one of its own
    sub-packages (which Python sets on import); nothing else leaks, e.g. ``annotations``."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(
            """
            import types, paddle_llrd
            for name in dir(paddle_llrd):
                if name.startswith("_") or name in paddle_llrd.__all__:
                    continue
                value = getattr(paddle_llrd, name)
                own = isinstance(value, types.ModuleType) and value.__name__ == "paddle_llrd." + name
                print(("SUBMODULE " if own else "LEAK ") + name)
            """
        )],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "LEAK" not in result.stdout, result.stdout
    required = {
        "AdamWDL", "AdamW", "layerwise_lr_decay", "ExponentialMovingAverage", "LinearDecayWithWarmup",
        "ConstScheduleWithWarmup", "CosineDecayWithWarmup", "PolyDecayWithWarmup",
        "CosineAnnealingWithWarmupDecay", "LinearAnnealingWithWarmupDecay", "InverseSquareRootSchedule",
        "get_scheduler", "register_scheduler", "SchedulerType", "WeightDecaySchedule", "LayerMap",
        "layer_decay_param_groups", "SequentialSchedule", "layer_grad_norms",
    }
    assert required <= set(paddle_llrd.__all__), required - set(paddle_llrd.__all__)

"""The READMEs' and quick-start pages' Chinese examples stay in step with the
English ones, and every place that tells how to install Paddle on a GPU gives
the same command. (The examples themselves run, each in its own process, in
tests/user_paths/test_doc_blocks.py.)"""
import ast
import re
import textwrap
from pathlib import Path

import pytest

import paddle_llrd

ROOT = Path(__file__).resolve().parents[1]
# (English, Chinese) pairs kept in step.
PAIRS = [("README.md", "README_cn.md"), ("docs/quickstart.rst", "docs/quickstart_cn.rst")]


def _read(source: str) -> str:
    return (ROOT / source).read_text(encoding="utf-8")


def _markdown_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _rst_blocks(text: str, language: str) -> list[str]:
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f".. code-block:: {language}":
            body = []
            for following in lines[i + 1:]:
                if following.strip() and not following.startswith("   "):
                    break
                body.append(following)
            blocks.append(textwrap.dedent("\n".join(body)))
    return blocks


def _blocks(source: str, language: str) -> list[str]:
    reader = _markdown_blocks if source.endswith(".md") else _rst_blocks
    return reader(_read(source), language)


def _code_only(block: str) -> str:
    """The program without comments or layout: what must match across languages."""
    return ast.dump(ast.parse(block))


@pytest.mark.parametrize("english, chinese", PAIRS)
def test_chinese_examples_are_the_english_code(english, chinese):
    english_code = [_code_only(block) for block in _blocks(english, "python")]
    chinese_code = [_code_only(block) for block in _blocks(chinese, "python")]
    assert chinese_code == english_code, f"{chinese}'s Python examples differ from {english}'s (comments aside)"


def _make_targets(text: str) -> set[str]:
    return set(re.findall(r"`make ([a-z][\w-]*)`", text)) | set(re.findall(r"^make ([a-z][\w-]*)", text, flags=re.M))


def test_both_readmes_name_the_same_make_targets():
    english, chinese = _make_targets(_read("README.md")), _make_targets(_read("README_cn.md"))
    assert {"demo", "test", "docs", "docs-check"} <= english
    assert chinese == english, f"only in README.md: {english - chinese}; only in README_cn.md: {chinese - english}"


@pytest.mark.parametrize("source", ["README.md", "README_cn.md"])
def test_the_readmes_name_every_example(source):
    examples = {f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py")}
    named = set(re.findall(r"examples/\w+\.py", _read(source)))
    assert examples <= named, f"{source} does not name {sorted(examples - named)}"


def _table_under(text: str, heading: str) -> list[str]:
    """The table rows of the section under ``heading``."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_both_readmes_list_what_is_in_it():
    english = _table_under(_read("README.md"), "What is in it")
    assert len(english) > 10
    assert _table_under(_read("README_cn.md"), "包含什么（What is in it）") == english


def test_readmes_link_to_each_other():
    assert "(README_cn.md)" in _read("README.md").split("\n## ")[0]
    assert "(README.md)" in _read("README_cn.md").split("\n## ")[0]


def _shell_commands(source: str) -> list[str]:
    """Each bash block's commands, with backslash-continued lines joined."""
    commands = []
    for block in _blocks(source, "bash"):
        joined = re.sub(r"\\\n\s*", "", block)
        commands += [" ".join(line.split("#")[0].split()) for line in joined.splitlines()]
    return commands


@pytest.mark.parametrize("source", [page for pair in PAIRS for page in pair] + ["docs/execution_modes.rst"])
def test_gpu_install_is_paddles_index_everywhere(source):
    command = paddle_llrd._GPU_INSTALL_COMMAND
    assert command in _shell_commands(source), f"{source} does not give `{command}`"
    assert "[gpu]" not in _read(source), f"{source} still offers the gpu extra, which PyPI cannot satisfy"


def test_gpu_check_installs_the_same_build():
    script = _read("scripts/gpu_check.sh")
    version = re.search(r'PADDLE_GPU_VERSION="\$\{PADDLE_GPU_VERSION:-([^}]+)\}"', script).group(1)
    cuda_tag = re.search(r'PADDLE_CUDA_TAG="\$\{PADDLE_CUDA_TAG:-([^}]+)\}"', script).group(1)
    index = re.search(r'PADDLE_INDEX="([^"]+)"', script).group(1).replace("${PADDLE_CUDA_TAG}", cuda_tag)
    assert paddle_llrd._GPU_INSTALL_COMMAND == f"python -m pip install paddlepaddle-gpu=={version} -i {index}"

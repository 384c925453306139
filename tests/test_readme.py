"""The README's and the quick-start page's Python examples run as written."""
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _markdown_python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _rst_python_blocks(path: Path) -> list[str]:
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.strip() == ".. code-block:: python":
            body = []
            for following in lines[i + 1:]:
                if following.strip() and not following.startswith("   "):
                    break
                body.append(following)
            blocks.append(textwrap.dedent("\n".join(body)))
    return blocks


@pytest.mark.parametrize(
    "source, blocks",
    [("README.md", _markdown_python_blocks(ROOT / "README.md")), ("docs/quickstart.rst", _rst_python_blocks(ROOT / "docs" / "quickstart.rst"))],
)
def test_python_examples_run(source, blocks):
    assert blocks, f"{source} has no Python example"
    for block in blocks:
        namespace = {"__name__": "readme_example"}
        exec(compile(block, source, "exec"), namespace)  # noqa: S102 - our own documentation
        # 100 steps of the "linear" schedule over 100 training steps: the lr has decayed to (100 - 100) / 90 = 0
        assert namespace["scheduler"].last_epoch == 100
        assert namespace["optimizer"].get_lr() == 0.0
        assert namespace["ema"].num_updates == 100, f"{source}: the example's loop did not run to the end"

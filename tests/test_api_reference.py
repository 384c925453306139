"""The API reference names only what the package has: every ``autofunction`` and
``autoclass`` target of the docs, and every name in an ``automodule``'s ``:members:`` list,
resolves (``sphinx -W`` refuses a missing one when the docs are built; this says which in
``make test``, without the docs toolchain)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any, Iterator


DOCS = Path(__file__).resolve().parents[1] / "docs"
_DIRECTIVE = re.compile(r"^\.\. auto(function|class|module):: ([\w.]+)\s*$")


def documented_names() -> Iterator[tuple[str, str]]:
    """``(page, dotted name)`` of each target and ``:members:`` entry on the docs' pages."""
    for page in sorted(DOCS.glob("*.rst")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            directive = _DIRECTIVE.match(line)
            if directive is None:
                continue
            kind, target = directive.groups()
            if kind != "module":
                yield page.name, target
                continue
            members, reading = [], False
            for option in lines[index + 1:]:
                if not option.startswith(" ") or not option.strip():
                    break
                stripped = option.strip()
                if stripped.startswith(":"):
                    reading = stripped.startswith(":members:")
                    stripped = stripped[len(":members:"):] if reading else ""
                if reading:
                    members += [name.strip() for name in stripped.split(",") if name.strip()]
            yield page.name, target
            for member in members:
                yield page.name, f"{target}.{member}"


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names: its longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


def test_every_name_the_reference_documents_exists():
    names = list(documented_names())
    assert len(names) > 100  # (the directives were found: api.rst alone has more)
    missing = []
    for page, dotted in names:
        try:
            resolve(dotted)
        except (ImportError, AttributeError) as error:
            missing.append(f"docs/{page}: {dotted} ({error})")
    assert not missing, "\n".join(missing)

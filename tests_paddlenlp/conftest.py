"""Fixtures for the PaddleNLP integration tests (run by scripts/test_paddlenlp.sh
in .venv-paddlenlp, never by the main `make test`). Helpers are in support.py."""
from __future__ import annotations

import pathlib
import sys

# tests_shared/: the seeding fixture and the Trainer-level checks both integrations' suites run
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests_shared"))

from seeding import seeded_dygraph  # noqa: E402,F401  (autouse)

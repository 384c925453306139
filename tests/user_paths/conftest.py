"""The user-path layer's processes run two at a time (or one per core).

Test modules register their scripts (``harness.register``) and each test names
the ones it reads with ``@pytest.mark.user_path(name, ...)``; when
the first of them asks for a result, every script of every selected test is
started on a pool of ``os.cpu_count()`` workers, each in its own process (the
pool only overlaps processes; nothing is shared between them). A test then
waits for its own scripts' results.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

_SELECTED: List[str] = []


def pytest_configure(config):
    config.addinivalue_line("markers", "user_path(*names): the user-path scripts a test reads")


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        marker = item.get_closest_marker("user_path")
        if marker is not None:
            _SELECTED.extend(name for name in marker.args if name not in _SELECTED)


class _Pool:
    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)))
        self._futures: Dict[str, Future] = {}

    def submit(self, name: str) -> Future:
        if name not in self._futures:
            self._futures[name] = self._executor.submit(harness.run, harness.REGISTRY[name])
        return self._futures[name]

    def result(self, name: str) -> harness.Result:
        for selected in _SELECTED:
            if selected in harness.REGISTRY:
                self.submit(selected)
        return self.submit(name).result()

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._executor.shutdown(wait=True)


@pytest.fixture(scope="session")
def _pool():
    pool = _Pool()
    yield pool
    pool.close()


@pytest.fixture
def user_path(_pool) -> Callable[[str], harness.Result]:
    """``user_path(name)``: the result of that script's own process."""
    return _pool.result

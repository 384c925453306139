"""The Trainer-level tests both integrations share (tests_shared/trainer_suite.py, resume_suite.py),
on PaddleNLP 2.8.1's Trainer with a tiny BERT classifier."""
from __future__ import annotations

import pytest
from support import KIT
from trainer_suite import *  # noqa: F401,F403  (the shared tests, collected here)
from resume_suite import *  # noqa: F401,F403  (what a resume takes and refuses)
from schedule_toolkit_suite import *  # noqa: F401,F403  (lr_warmup_init and "sequential" in a Trainer)


@pytest.fixture
def kit():
    return KIT

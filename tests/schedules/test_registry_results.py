"""get_scheduler refuses what a registered function returns when it is no
LRScheduler (docs/schedules.rst): only a call can tell, so the check is at
get_scheduler time and names the registered name. A non-callable is refused
at register time (test_registry.py::test_register_scheduler_validates)."""
from __future__ import annotations

import pytest
from paddle.optimizer.lr import LRScheduler

from schedule_formulas import restore_registry  # noqa: F401 (the fixture)

from paddle_llrd import TYPE_TO_SCHEDULER_FUNCTION, get_constant_schedule, get_scheduler, register_scheduler

pytestmark = pytest.mark.usefixtures("restore_registry")


def forgets_to_return(learning_rate, num_warmup_steps):
    get_constant_schedule(learning_rate)


@pytest.mark.parametrize(
    "fn, shown",
    [
        (forgets_to_return, "returned None of type NoneType"),
        (lambda learning_rate: learning_rate, "returned 0.25 of type float"),
        (lambda learning_rate: [get_constant_schedule(learning_rate)], "of type list"),
    ],
    ids=["none", "float", "list"],
)
def test_a_result_that_is_no_lr_scheduler_is_refused_naming_the_registered_name(fn, shown):
    register_scheduler("my-schedule", fn)
    with pytest.raises(TypeError, match="registered as 'my-schedule'") as info:
        get_scheduler("my-schedule", 0.25, num_warmup_steps=3)
    assert shown in str(info.value) and "LRScheduler" in str(info.value)
    assert TYPE_TO_SCHEDULER_FUNCTION["my-schedule"] is fn  # the name stays registered, the function can be fixed


def test_an_lr_scheduler_subclass_is_returned_as_it_is():
    built = []

    def constant(learning_rate):
        built.append(get_constant_schedule(learning_rate))
        return built[-1]

    register_scheduler("constant-again", constant)
    scheduler = get_scheduler("constant-again", 0.25)
    assert isinstance(scheduler, LRScheduler) and scheduler is built[0] and scheduler() == 0.25

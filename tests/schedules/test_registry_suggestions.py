"""The registry's refusal of an unknown schedule name or option ends with the
closest valid one (docs/schedules.rst): ``get_scheduler("cosin")`` suggests
``'cosine'``, a name in another framework's words the schedule it means
(``"cosine_warmup"``, ``"get_cosine_schedule_with_warmup"``: ``'cosine'``), and ``lr_scheduler_kwargs`` keys of the Trainer integrations are
suggested from the schedule's own options. Every caller reads the one message
(``get_scheduler``, ``LLRDTrainingArguments``, ``python -m paddle_llrd train``)."""
from __future__ import annotations

import re

import paddle
import pytest

import paddle_llrd
from paddle_llrd.integrations.training_arguments import check_fields, check_scheduler_kwargs
from paddle_llrd.schedules.registry import schedule_function


@pytest.mark.parametrize("name, closest", [
    ("cosin", "cosine"),
    ("Linear", "linear"),
    ("warmup_stable_decy", "warmup_stable_decay"),
    ("cosine_with_restart", "cosine_with_restarts"),
])
def test_an_unknown_name_is_refused_with_the_closest_registered_one(name, closest):
    with pytest.raises(ValueError) as info:
        paddle_llrd.get_scheduler(name, 0.1, num_warmup_steps=1, num_training_steps=4)
    message = str(info.value)
    assert message.startswith(f"Unknown scheduler name {name!r}; valid names are: linear, cosine, "), message
    assert message.endswith(f". Did you mean {closest!r}?"), message


@pytest.mark.parametrize("name, meant", [
    ("cosine_warmup", "cosine"),  # not cosine_annealing_with_warmup, the closest spelling
    ("warmup_linear", "linear"),
    ("linear_with_warmup", "linear"),
    ("constant_warmup", "constant_with_warmup"),
    ("get_cosine_schedule_with_warmup", "cosine"),  # Hugging Face's and PaddleNLP's function names
    ("get_polynomial_decay_schedule_with_warmup", "polynomial"),
    ("CosineDecayWithWarmup", "cosine"),  # PaddleNLP's class names
    ("PolyDecayWithWarmup", "polynomial"),
    ("ConstScheduleWithWarmup", "constant_with_warmup"),
    ("cosine_hard_restarts", "cosine_with_restarts"),
    ("wsd", "warmup_stable_decay"),
    ("reduce_on_plateau", "reduce_lr_on_plateau"),
    ("cosine_warmup_with_min_lr", "cosine_with_min_lr"),  # Hugging Face's name
])
def test_a_name_from_another_framework_is_refused_with_the_schedule_it_means(name, meant):
    with pytest.raises(ValueError) as info:
        paddle_llrd.get_scheduler(name, 0.1, num_warmup_steps=1, num_training_steps=4)
    assert str(info.value).endswith(f". Did you mean {meant!r}?"), info.value


def test_a_name_close_to_nothing_gets_no_suggestion():
    with pytest.raises(ValueError) as info:
        schedule_function("qqqq")
    assert "Did you mean" not in str(info.value) and str(info.value).endswith("reduce_lr_on_plateau."), info.value


def test_a_registered_name_is_suggested_too():
    def get_halving_schedule(learning_rate, num_warmup_steps, last_epoch=-1):
        return paddle.optimizer.lr.StepDecay(learning_rate, max(1, num_warmup_steps), 0.5, last_epoch)

    paddle_llrd.register_scheduler("halving-test", get_halving_schedule)
    try:
        with pytest.raises(ValueError, match=r"Did you mean 'halving-test'\?$"):
            paddle_llrd.get_scheduler("halvng-test", 0.1, num_warmup_steps=1)
    finally:
        del paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION["halving-test"]


@pytest.mark.parametrize("options, listed, closest", [
    ({"decay_styl": "linear"}, "decay_ratio, decay_style", "decay_style"),
    ({"lr_warmup_int": 0.01}, "lr_warmup_init", "lr_warmup_init"),  # get_scheduler's own option of warmups
])
def test_an_unknown_option_is_refused_with_the_closest_one_the_schedule_takes(options, listed, closest):
    with pytest.raises(TypeError) as info:
        paddle_llrd.get_scheduler("warmup_stable_decay", 0.1, num_warmup_steps=1, num_training_steps=8, **options)
    message = str(info.value)
    key = next(iter(options))
    assert message.startswith(f"Scheduler 'warmup_stable_decay' does not accept the argument(s) {key}; it takes: ")
    assert listed in message and message.endswith(f". Did you mean {closest!r}?"), message


def test_lr_scheduler_kwargs_keys_are_suggested_from_the_schedules_options():
    with pytest.raises(ValueError) as info:
        check_scheduler_kwargs("cosine_with_min_lr", {"min_lr_rat": 0.1})
    message = str(info.value)
    assert message == (
        "lr_scheduler_kwargs has the key 'min_lr_rat', which lr_scheduler_type='cosine_with_min_lr' does not take; "
        "valid keys: lr_warmup_init, min_lr, min_lr_rate, num_cycles. Did you mean 'min_lr_rate'?"
    ), message


def test_the_arguments_name_the_field_and_carry_the_registrys_suggestion():
    with pytest.raises(ValueError) as info:
        check_fields({"lr_scheduler_type": "cosin"})
    message = str(info.value)
    assert re.match(r"lr_scheduler_type must be one of paddle_llrd's registered schedules .*: "
                    r"Unknown scheduler name 'cosin'; valid names are: .*\. Did you mean 'cosine'\?$", message), message

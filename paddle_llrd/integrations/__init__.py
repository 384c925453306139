"""Integrations of paddle_llrd with training frameworks.

Each integration lives in its own module and imports its framework only when
that module is imported, so ``import paddle_llrd`` never needs them:

- :mod:`paddle_llrd.integrations.paddleformers`: ``LLRDTrainer`` and
  ``LLRDTrainingArguments`` for PaddleFormers' ``Trainer`` (needs
  ``paddleformers==1.2.0``; see ``requirements-paddleformers.txt``).
- :mod:`paddle_llrd.integrations.paddlenlp`: the same for PaddleNLP's
  ``Trainer`` (needs ``paddlenlp==2.8.1``; see ``requirements-paddlenlp.txt``).

Both train with :class:`paddle_llrd.AdamWDL` and schedules from
:func:`paddle_llrd.get_scheduler`, and take layer decay, the layer map, a
weight-decay schedule and an EMA of the weights from their
``TrainingArguments`` fields. They are two thin modules, each binding its
framework's classes, over one framework-free implementation:

- :mod:`~paddle_llrd.integrations.training_arguments`: the ``TrainingArguments`` fields and their checks;
- :mod:`~paddle_llrd.integrations.trainer`: the ``Trainer`` mixin, which overrides the Trainer's hooks
  and delegates to the modules below;
- :mod:`~paddle_llrd.integrations.builders`: the layer ratios, the optimizer
  and the lr schedule built from the arguments;
- callbacks, one concern each: :mod:`~paddle_llrd.integrations.averaging`
  (the EMA), :mod:`~paddle_llrd.integrations.plateau_callback`
  (``reduce_lr_on_plateau`` on the evaluation metric),
  :mod:`~paddle_llrd.integrations.layer_logging` (per-group lrs, weight
  decay and gradient norms in the logs), :mod:`~paddle_llrd.integrations.run_state`
  (what a checkpoint keeps beyond the framework's files, and its restore);
- saves and resumes: :mod:`~paddle_llrd.integrations.checkpoints` (saves that
  are complete or absent, and the newest complete checkpoint),
  :mod:`~paddle_llrd.integrations.saving` (the Trainer's checkpoints and final
  model written that way), :mod:`~paddle_llrd.integrations.resume` (which
  checkpoint a run may resume, refused in one line otherwise);
- :mod:`~paddle_llrd.integrations.visualdl` (VisualDL's record of bool
  arguments) and :mod:`~paddle_llrd.integrations.requirements` (what to
  install when a framework does not import).
"""

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
``TrainingArguments`` fields. They are two thin modules over one
implementation: ``_arguments`` (the fields and their checks, framework-free)
and ``_trainer`` (the ``Trainer`` mixin).
"""

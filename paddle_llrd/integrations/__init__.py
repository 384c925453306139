"""Integrations of paddle_llrd with training frameworks.

Each integration lives in its own module and imports its framework only when
that module is imported, so ``import paddle_llrd`` never needs them:

- :mod:`paddle_llrd.integrations.paddlenlp`: ``LLRDTrainer``, a PaddleNLP
  ``Trainer`` whose optimizer is :class:`paddle_llrd.AdamWDL` and whose
  schedule comes from :func:`paddle_llrd.get_scheduler` (needs
  ``paddlenlp==2.8.1``; see ``requirements-paddlenlp.txt``).
"""

"""The main job: ``python -m paddle_llrd demo`` (``make demo``), transfer learning on real data.

A small built-in ViT (:mod:`paddle_llrd.models.vit`, nothing downloaded) is
pretrained on scikit-learn's bundled 8x8 digits 0-4, then fine-tuned on
digits 5-9 from a few labelled images per class, from the same pretrained
weights, with ``paddle.optimizer.AdamW`` and with :class:`paddle_llrd.AdamWDL`
at one or more layer decays: same schedule, same data order, several seeds.
It prints how well each learns the new digits (target accuracy), how much of
the old task the fine-tuned backbone keeps (the frozen source head on the new
backbone) and how far each layer moved from its pretrained weights; it writes
figures and ``results.json`` into ``--output-dir``.

Modules: :mod:`~paddle_llrd.demo.data` (the two tasks),
:mod:`~paddle_llrd.demo.experiment` (pretraining and fine-tuning),
:mod:`~paddle_llrd.demo.metrics` (accuracy, layer change),
:mod:`~paddle_llrd.demo.report` (tables, results.json),
:mod:`~paddle_llrd.demo.plots` (figures); the command's flags and run
order are :mod:`paddle_llrd.cli.demo`.
"""

"""Learning-rate and weight-decay schedules.

One schedule is a factor function (:mod:`.factors`), a ``get_*`` function
(:mod:`.functions`; :mod:`.sequential`, :mod:`.plateau`) and one entry of the
registry (:mod:`.registry`: the names, their options and
``get_scheduler``). Beside them: the PaddleNLP scheduler classes
(:mod:`.warmup`), the rule of a warmup longer than training
(:mod:`.long_warmup`), reading a schedule's lr curve (:mod:`.curve`) and the
weight-decay schedule (:mod:`.weight_decay`).
"""

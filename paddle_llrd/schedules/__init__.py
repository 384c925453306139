"""Learning-rate and weight-decay schedules.

One schedule is a factor function (:mod:`.factors`), a ``get_*`` function
(:mod:`.functions`; :mod:`.wsd`, :mod:`.plateau`, the stages of
:mod:`.sequential`) and one entry of the registry (:mod:`.registry`: the
names, ``get_scheduler``, and what each function takes, :mod:`.schedule_info`;
the name an unknown one meant, :mod:`.name_suggestions`).
Beside them: the PaddleNLP scheduler classes (:mod:`.warmup`), a scheduler and
the optimizer that follows it (:mod:`.optimizer_link`), the rule of a warmup
longer than training (:mod:`.long_warmup`), reading a schedule's lr curve
(:mod:`.curve`) and the weight-decay schedule (:mod:`.weight_decay`).
"""

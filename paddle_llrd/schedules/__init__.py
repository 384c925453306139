"""Learning-rate and weight-decay schedules: the lr factors (:mod:`.factors`),
the warmup scheduler classes (:mod:`.warmup`), the schedule functions behind
the registry names (:mod:`.functions`), schedules run one after another
(:mod:`.sequential`), Paddle's ``ReduceOnPlateau`` with checked arguments
(:mod:`.plateau`), lookup by name (:mod:`.catalog`, declared in
:mod:`.registry`), the weight-decay schedule (:mod:`.weight_decay`) and the
curves and tables of every schedule (:mod:`.table`).
"""

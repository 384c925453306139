"""Learning-rate and weight-decay schedules: the warmup schedulers
(:mod:`.warmup`), schedules run one after another (:mod:`.sequential`),
Paddle's ``ReduceOnPlateau`` with checked arguments (:mod:`.plateau`), the
``lr_scheduler_type`` registry (:mod:`.registry`), the weight-decay schedule
(:mod:`.weight_decay`) and the schedule table and plots (:mod:`.table`,
``python -m paddle_llrd schedules``).
"""

"""STUB: replaced by the registry work (issue 2)."""
TYPE_TO_SCHEDULER_FUNCTION = SchedulerType = get_constant_schedule = None
get_constant_schedule_with_warmup = get_cosine_schedule_with_warmup = None
get_linear_schedule_with_warmup = get_polynomial_decay_schedule_with_warmup = None
get_scheduler = register_scheduler = None

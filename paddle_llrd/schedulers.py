"""STUB: replaced by the schedulers work (issue 2)."""
ConstScheduleWithWarmup = CosineAnnealingWithWarmupDecay = CosineDecayWithWarmup = None
InverseSquareRootSchedule = LinearAnnealingWithWarmupDecay = LinearDecayWithWarmup = None
PolyDecayWithWarmup = None

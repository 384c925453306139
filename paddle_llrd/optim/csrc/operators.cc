// The one translation unit the build compiles (fused_operator.py): Paddle's
// extension headers take most of a build (about 12 s of each file's 14-24 s
// here), so the operators are compiled together and the headers once.
#include "fused_adamw.cc"
#include "ema_update.cc"
#include "squared_norms.cc"
#include "zero_gradients.cc"

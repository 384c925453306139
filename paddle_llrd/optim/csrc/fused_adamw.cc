// The fused CPU update of paddle_llrd: one call runs a whole AdamWDL step
// (every flat bank of parameters, with its clip and layer ratios), one pass
// over memory on all the threads asked for (thread_pool.h; the EMA's update
// is ema_update.cc).
//
// Bit for bit with Paddle: every value is computed with the operations, in
// the order and precision, of Paddle's own CPU kernels (Paddle 3.x):
//   - paddle/phi/kernels/cpu/adamw_kernel.cc and adam_kernel.cc: the scalars
//     (learning_rate * sqrt(1 - beta2_pow) / (1 - beta1_pow), epsilon *
//     sqrt(1 - beta2_pow)) in the parameter's type, then per element the
//     phi::jit kernel: on a CPU with AVX-512F the generated code
//     (jit/gen/adamw.cc, adam.cc: three fused multiply-adds) for float32,
//     elsewhere the reference loop (jit/refer/refer.h), whose last line
//     Paddle's build evaluates in double (its `sqrt` is the C library's);
//   - the clip classes' kernels (ClipGradByGlobalNorm's multiply by the
//     scale cast to the gradient's type, ClipGradByValue's clip,
//     ClipGradByNorm's clip_by_norm scaling from the squared norm);
//   - cast (float32 master weight -> float16/bfloat16 parameter) through
//     phi's own types.
// It is built with -ffp-contract=off, so the compiler fuses nothing Paddle
// does not, and -fno-math-errno, so that sqrt vectorises.
// The Python side (paddle_llrd/optim/fused_operator.py) checks the result
// against Paddle's kernels when it loads the library and uses it only if
// every bit agrees.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "paddle/extension.h"
#include "attributes.h"
#include "thread_pool.h"

namespace {

using bfloat16 = phi::dtype::bfloat16;
using float16 = phi::dtype::float16;
using paddle_llrd::as_double;
using paddle_llrd::kPiece;
using paddle_llrd::Pool;
using paddle_llrd::threads_for;

// ---------------------------------------------------------------- the layout
// `layout` (int64 attribute): a header, then one record per bank, then one
// per segment. A bank is one set of flat buffers (parameters, gradients,
// moments, master weights, beta powers); a segment is a contiguous range of
// a bank whose elements share their lr factor, ratio, decay and clipping.
constexpr int64_t kHeader = 5;       // banks, segments, amsgrad, arithmetic, threads
constexpr int64_t kBankInts = 4;     // clip mode, has master, parameter count, index of its first gradient
constexpr int64_t kSegmentInts = 4;  // bank, start, stop, flags
// `scalars` (int64 attribute holding IEEE doubles bit for bit).
constexpr int64_t kBankScalars = 6;     // beta1, beta2, epsilon, clip a, clip b, weight decay
constexpr int64_t kSegmentScalars = 3;  // update scale, fused coefficient, separate decay scale

enum ClipMode : int64_t { kNoClip = 0, kScale = 1, kValue = 2, kNorm = 3 };
enum SegmentFlag : int64_t {
  kFusedDecay = 1,     // the decay inside the kernel (adamw with_decay)
  kClipped = 2,        // need_clip: the bank's clip applies
  kWritesGrad = 4,     // the clipped gradient is written back (ClipGradByGlobalNorm, not 0-D)
  kSeparateDecay = 8,  // the decay as its own multiply before an adam update
};
enum Arithmetic : int64_t { kAuto = 0, kReference = 1, kGenerated = 2 };

// phi::jit picks its generated kernels where Xbyak finds AVX-512F (with the
// OS saving its registers); GCC's check asks the same of CPUID and XGETBV.
bool generated_kernels_in_use() { return __builtin_cpu_supports("avx512f"); }

// -------------------------------------------------- one element of the update
// The scalars of one segment at this step, in the parameter's type T.
template <typename T>
struct StepScalars {
  T beta1, beta2, lr, eps, decay;  // lr: -learning_rate_; decay: old_lr * lr_ratio * coeff
  T separate_factor;               // 1 - lr * coeff of the separate decay op
};

// jit/refer/refer.h AdamW / Adam: moments in T, the parameter's last line in double.
// (always inlined: a call per element would keep the loops from vectorising)
#define PADDLE_LLRD_ELEMENT inline __attribute__((always_inline))

// The reference loop's last line, param_tmp + lr * (m1 / (sqrt(m2) + eps)), in double.
template <typename T>
PADDLE_LLRD_ELEMENT T reference_last_line(T param_tmp, T mom1, T mom2_used, T lr, T eps) {
  double step = static_cast<double>(mom1) / (std::sqrt(static_cast<double>(mom2_used)) + static_cast<double>(eps));
  return static_cast<T>(static_cast<double>(param_tmp) + static_cast<double>(lr) * step);
}

template <typename T, bool kDecay, bool kAmsgrad>
PADDLE_LLRD_ELEMENT void reference_update(T g, T* p, T* m1, T* m2, T* m2max, const StepScalars<T>& s) {
  T param = *p;
  T param_tmp = kDecay ? param - s.decay * param : param;
  T mom1 = s.beta1 * *m1 + (1 - s.beta1) * g;
  T mom2 = s.beta2 * *m2 + (1 - s.beta2) * g * g;
  *m1 = mom1;
  *m2 = mom2;
  T mom2_used = mom2;
  if (kAmsgrad) {
    mom2_used = std::max(mom2, *m2max);
    *m2max = mom2_used;
  }
  *p = reference_last_line(param_tmp, mom1, mom2_used, s.lr, s.eps);
}

// jit/gen/adamw.cc, adam.cc (float32 on AVX-512F): each vfmadd/vfnmadd one std::fma.
template <bool kDecay, bool kAmsgrad>
PADDLE_LLRD_ELEMENT void generated_update(float g, float* p, float* m1, float* m2, float* m2max, const StepScalars<float>& s) {
  float param = *p;
  if (kDecay) param = std::fma(-s.decay, param, param);
  float mom1 = std::fma(s.beta1, *m1, (1.0f - s.beta1) * g);
  float mom2 = std::fma(s.beta2, *m2, (1.0f - s.beta2) * (g * g));
  *m1 = mom1;
  *m2 = mom2;
  if (kAmsgrad) {
    mom2 = mom2 > *m2max ? mom2 : *m2max;  // vmaxps: the second operand unless the first is greater
    *m2max = mom2;
  }
  float step = mom1 / (std::sqrt(mom2) + s.eps);
  *p = std::fma(step, s.lr, param);
}

// ------------------------------------------------------------- the clipping
// What a bank's clip does to a gradient before the update (its `need_clip`
// segments only), in the gradient's type G as Paddle's clip kernels compute it.
template <typename G>
struct Clip {
  int64_t mode = kNoClip;
  G scale{};           // kScale: the global-norm scale cast to G
  G low{}, high{};     // kValue
  float max_norm = 0;  // kNorm
};

// ClipGradByNorm's clip_by_norm kernel (Eigen, float): its scaling from the squared norm.
inline float norm_scaling(float squared_norm, float max_norm) {
  float norm = std::sqrt(squared_norm);
  float temp = norm <= max_norm ? 1.0f : 0.0f;
  float epsilon = (norm <= static_cast<float>(1e-30) ? 1.0f : 0.0f) * static_cast<float>(1e-6);
  return temp + (static_cast<float>(1) - temp) * max_norm / (norm + epsilon);
}

// ------------------------------------------------------------------ a bank
// The gradients are Paddle's own tensors, one per parameter (never views of a
// buffer of ours): the operator reads each where it is and, where Paddle's
// clip writes its result into the gradient (ClipGradByGlobalNorm, not 0-D),
// writes it there, as Paddle's multiply_ would. (They are declared inputs:
// Paddle's custom operators take no leaf's gradient as an in-place output.
// Paddle's call hands over a contiguous copy of a strided gradient instead of
// the gradient itself; the caller scales that one: multi_tensor._fused_call.)
template <typename P>  // the parameter's (and gradient's) type
struct Bank {
  P* param = nullptr;
  float* master = nullptr;  // the float32 master weight of a float16/bfloat16 parameter
  void* moment1 = nullptr;
  void* moment2 = nullptr;
  void* moment2_max = nullptr;
  const int64_t* param_starts = nullptr;  // where each parameter starts (count + 1 entries)
  const float* squared_norms = nullptr;   // kNorm: each parameter's, from Paddle's squared_l2_norm
  int64_t params = 0;
  int64_t first_grad = 0;  // its first parameter's gradient in the Grads list
  Clip<P> clip;
};

struct Segment {
  int64_t bank, start, stop, flags;
  int64_t scalars;  // index of its StepScalars
};

// A piece of work: part of one parameter's range (kPiece elements at most), within one segment.
struct Piece {
  int64_t segment, param, start, stop;
};

template <bool B>
using Flag = std::integral_constant<bool, B>;

// The update of [start, stop) of a bank, whose gradient is `grad` (its first
// element), T the type the kernel computes in (the parameter's, float32 for a
// master weight), P the parameter's. The clip and every flag are template
// arguments, so that the loop over the elements has no branch and vectorises.
template <typename T, typename P, bool kMaster, bool kDecay, bool kAmsgrad, bool kGenerated, int64_t kClip,
          bool kWritesGrad>
void update_range(const Bank<P>& bank, P* __restrict__ grad, const StepScalars<T>& scalars, int64_t start,
                  int64_t stop, const Clip<P>& clip_in) {
  // (local copies: a store through grad or param could otherwise alias them, and the
  // compiler would reload them at every element instead of vectorising the loop)
  const StepScalars<T> s = scalars;
  const Clip<P> clip = clip_in;
  T* __restrict__ m1 = static_cast<T*>(bank.moment1) + start;
  T* __restrict__ m2 = static_cast<T*>(bank.moment2) + start;
  T* __restrict__ m2max = kAmsgrad ? static_cast<T*>(bank.moment2_max) + start : nullptr;
  P* __restrict__ param = bank.param + start;
  float* __restrict__ master = kMaster ? bank.master + start : nullptr;
  const int64_t n = stop - start;
  for (int64_t j = 0; j < n; ++j) {
    P g = grad[j];
    if constexpr (kClip == kScale) {
      g = g * clip.scale;
      if constexpr (kWritesGrad) grad[j] = g;
    } else if constexpr (kClip == kValue) {
      g = g < clip.low ? clip.low : (g > clip.high ? clip.high : g);
    }
    T* target;
    if constexpr (kMaster) {
      target = reinterpret_cast<T*>(master + j);
    } else {
      target = reinterpret_cast<T*>(param + j);
    }
    T kernel_grad = static_cast<T>(g);
    if constexpr (kGenerated) {
      generated_update<kDecay, kAmsgrad>(kernel_grad, target, m1 + j, m2 + j, kAmsgrad ? m2max + j : nullptr, s);
    } else {
      reference_update<T, kDecay, kAmsgrad>(kernel_grad, target, m1 + j, m2 + j, kAmsgrad ? m2max + j : nullptr, s);
    }
    if constexpr (kMaster) param[j] = static_cast<P>(*target);
  }
}

// The separate decay op of a segment (a ratio the fused coefficient cannot
// express): target *= 1 - lr * coeff, before its adam update.
template <typename T, typename P, bool kMaster>
void separate_decay(const Bank<P>& bank, const StepScalars<T>& s, int64_t start, int64_t stop) {
  for (int64_t i = start; i < stop; ++i) {
    if constexpr (kMaster) {
      bank.master[i] = bank.master[i] * s.separate_factor;
    } else {
      bank.param[i] = static_cast<P>(static_cast<T>(bank.param[i]) * s.separate_factor);
    }
  }
}

template <typename T, typename P, bool kMaster, bool kDecay, bool kAmsgrad, bool kGenerated>
void update_clipped(const Bank<P>& bank, P* grad, const Segment& segment, const Piece& piece,
                    const StepScalars<T>& s) {
  const int64_t mode = (segment.flags & kClipped) ? bank.clip.mode : kNoClip;
  const bool writes = segment.flags & kWritesGrad;
#define PADDLE_LLRD_RANGE(C, W, CLIP) \
  update_range<T, P, kMaster, kDecay, kAmsgrad, kGenerated, C, W>(bank, grad, s, piece.start, piece.stop, CLIP)
  if (mode == kScale) {
    if (writes) {
      PADDLE_LLRD_RANGE(kScale, true, bank.clip);
    } else {
      PADDLE_LLRD_RANGE(kScale, false, bank.clip);
    }
  } else if (mode == kValue) {
    PADDLE_LLRD_RANGE(kValue, false, bank.clip);
  } else if (mode == kNorm) {  // ClipGradByNorm: the parameter's own scaling, not written back
    Clip<P> scaled = bank.clip;
    scaled.scale = static_cast<P>(norm_scaling(bank.squared_norms[piece.param], bank.clip.max_norm));
    PADDLE_LLRD_RANGE(kScale, false, scaled);
  } else {
    PADDLE_LLRD_RANGE(kNoClip, false, bank.clip);
  }
#undef PADDLE_LLRD_RANGE
}

template <typename T, typename P, bool kMaster>
void dispatch_range(const Bank<P>& bank, P* grad, const Segment& segment, const Piece& piece,
                    const StepScalars<T>& s, bool amsgrad, bool generated) {
  if (segment.flags & kSeparateDecay) separate_decay<T, P, kMaster>(bank, s, piece.start, piece.stop);
  const bool decay = segment.flags & kFusedDecay;
  auto run = [&](auto decay_flag, auto amsgrad_flag, auto generated_flag) {
    update_clipped<T, P, kMaster, decltype(decay_flag)::value, decltype(amsgrad_flag)::value,
                   decltype(generated_flag)::value>(bank, grad, segment, piece, s);
  };
  auto with_generated = [&](auto decay_flag, auto amsgrad_flag) {
    if constexpr (std::is_same<T, float>::value) {
      if (generated) return run(decay_flag, amsgrad_flag, Flag<true>{});
    }
    run(decay_flag, amsgrad_flag, Flag<false>{});
  };
  auto with_amsgrad = [&](auto decay_flag) {
    if (amsgrad) {
      with_generated(decay_flag, Flag<true>{});
    } else {
      with_generated(decay_flag, Flag<false>{});
    }
  };
  if (decay) {
    with_amsgrad(Flag<true>{});
  } else {
    with_amsgrad(Flag<false>{});
  }
}



template <typename T>
T read_scalar(const paddle::Tensor& tensor) {
  switch (tensor.dtype()) {
    case paddle::DataType::FLOAT64:
      return static_cast<T>(tensor.data<double>()[0]);
    case paddle::DataType::FLOAT32:
      return static_cast<T>(tensor.data<float>()[0]);
    default:
      PD_THROW("paddle_llrd fused AdamW: the learning rate and the clip scale must be float32 or float64.");
  }
}

// The lr the kernel of a segment is given: global lr * update scale, as the
// multiply of Paddle's lr tensor (its dtype) by the scale makes it.
double kernel_lr(const paddle::Tensor& global_lr, double update_scale) {
  if (global_lr.dtype() == paddle::DataType::FLOAT64) {
    double lr = global_lr.data<double>()[0];
    return update_scale == 1.0 ? lr : lr * update_scale + 0.0;
  }
  float lr = global_lr.data<float>()[0];
  return update_scale == 1.0 ? lr : static_cast<double>(lr * static_cast<float>(update_scale) + 0.0f);
}

// The scalars of a segment: the lines of AdamwDenseKernel / AdamDenseKernel
// before their element loop, in T; the separate decay factor as Paddle's
// `1.0 - lr * coeff` makes it (two scale ops on the lr tensor, in its dtype).
template <typename T>
StepScalars<T> step_scalars(double lr_k, double lr_decay, bool lr_double, const double* bank_scalars,
                            const double* segment_scalars, T beta1_pow, T beta2_pow, bool fused_decay) {
  StepScalars<T> s;
  s.beta1 = static_cast<T>(bank_scalars[0]);
  s.beta2 = static_cast<T>(bank_scalars[1]);
  T epsilon = static_cast<T>(bank_scalars[2]);
  T lr = static_cast<T>(lr_k);
  T learning_rate = lr * (std::sqrt(static_cast<T>(1) - beta2_pow) / (static_cast<T>(1) - beta1_pow));
  s.lr = -learning_rate;
  s.eps = epsilon * std::sqrt(static_cast<T>(1) - beta2_pow);
  // (the adamw op's coeff and lr_ratio attributes are float32, whatever T is)
  T coeff = static_cast<T>(static_cast<float>(segment_scalars[1]));
  T lr_ratio = static_cast<T>(1.0f);
  s.decay = fused_decay ? lr * lr_ratio * coeff : static_cast<T>(0);
  const double weight_decay = bank_scalars[5];
  if (lr_double) {
    double scaled = lr_decay * weight_decay + 0.0;
    s.separate_factor = static_cast<T>(scaled * -1.0 + 1.0);
  } else {
    float scaled = static_cast<float>(lr_decay) * static_cast<float>(weight_decay) + 0.0f;
    s.separate_factor = static_cast<T>(scaled * -1.0f + 1.0f);
  }
  return s;
}

template <typename G>
Clip<G> bank_clip(int64_t mode, const double* bank_scalars, const paddle::Tensor& clip_value) {
  Clip<G> clip;
  clip.mode = mode;
  // (Paddle's CPU clip kernels have none for float16/bfloat16 gradients: never fused)
  constexpr bool kFullPrecision = std::is_same<G, float>::value || std::is_same<G, double>::value;
  PD_CHECK(mode == kNoClip || kFullPrecision, "paddle_llrd fused AdamW: clipping of float16/bfloat16 gradients is not fused");
  if (mode == kScale) {
    // ClipGradByGlobalNorm: clip_var.astype(g.dtype), then g * it in g's type
    if (clip_value.dtype() == paddle::DataType::FLOAT64) {
      clip.scale = static_cast<G>(clip_value.data<double>()[0]);
    } else {
      clip.scale = static_cast<G>(clip_value.data<float>()[0]);
    }
  } else if (mode == kValue) {
    clip.low = static_cast<G>(bank_scalars[3]);
    clip.high = static_cast<G>(bank_scalars[4]);
  } else if (mode == kNorm) {
    clip.max_norm = static_cast<float>(bank_scalars[3]);
  }
  return clip;
}

template <typename P>
void advance_beta_pows(paddle::Tensor& pows, double beta) {
  P* values = pows.data<P>();
  P b = static_cast<P>(beta);
  for (int64_t i = 0; i < pows.numel(); ++i) values[i] = b * values[i];
}

// ------------------------------------------------------------- the operator
// One step over every bank. Params, Moment1, Moment2, Moment2Max (= Moment2
// without amsgrad), MasterWeights (= Params for a bank without one),
// Beta1Pows, Beta2Pows, ClipValues (the global-norm scale, or the squared
// norms for ClipGradByNorm, else any tensor) and ParamStarts (int64, where
// each parameter starts, and the end) have one entry per bank; Grads one per
// parameter, bank after bank; LearningRate is the global lr tensor.
template <typename P, typename T, bool kMaster>
void run_banks_of_type(const std::vector<int64_t>& banks_of_type, std::vector<paddle::Tensor>& params,
                       const std::vector<paddle::Tensor>& grads, std::vector<paddle::Tensor>& moment1,
                       std::vector<paddle::Tensor>& moment2, std::vector<paddle::Tensor>& moment2_max,
                       std::vector<paddle::Tensor>& masters, const std::vector<paddle::Tensor>& beta1_pows,
                       const std::vector<paddle::Tensor>& beta2_pows, const std::vector<paddle::Tensor>& clip_values,
                       const std::vector<paddle::Tensor>& param_starts, const paddle::Tensor& global_lr,
                       const std::vector<int64_t>& layout, const std::vector<int64_t>& scalars) {
  const int64_t n_banks = layout[0];
  const int64_t n_segments = layout[1];
  const bool amsgrad = layout[2] != 0;
  const int64_t arithmetic = layout[3];
  const bool generated = std::is_same<T, float>::value &&
                         (arithmetic == kGenerated || (arithmetic == kAuto && generated_kernels_in_use()));
  std::vector<Bank<P>> banks(n_banks);
  std::vector<char> wanted(n_banks, 0);
  for (int64_t b : banks_of_type) wanted[b] = 1;
  for (int64_t b = 0; b < n_banks; ++b) {
    if (!wanted[b]) continue;
    const int64_t* ints = layout.data() + kHeader + b * kBankInts;
    const double* bank_scalars = reinterpret_cast<const double*>(scalars.data()) + b * kBankScalars;
    Bank<P>& bank = banks[b];
    bank.param = params[b].data<P>();
    bank.master = kMaster ? masters[b].data<float>() : nullptr;
    bank.moment1 = moment1[b].data<T>();
    bank.moment2 = moment2[b].data<T>();
    bank.moment2_max = amsgrad ? moment2_max[b].data<T>() : nullptr;
    bank.params = ints[2];
    bank.first_grad = ints[3];
    bank.param_starts = param_starts[b].data<int64_t>();
    bank.clip = bank_clip<P>(ints[0], bank_scalars, clip_values[b]);
    if (ints[0] == kNorm) bank.squared_norms = clip_values[b].data<float>();
  }
  std::vector<Segment> segments;
  std::vector<StepScalars<T>> step;
  std::vector<Piece> pieces;
  const int64_t* segment_ints = layout.data() + kHeader + n_banks * kBankInts;
  const double* segment_scalars = reinterpret_cast<const double*>(scalars.data()) + n_banks * kBankScalars;
  for (int64_t k = 0; k < n_segments; ++k) {
    const int64_t* ints = segment_ints + k * kSegmentInts;
    const int64_t b = ints[0];
    if (!wanted[b]) continue;
    const double* own = segment_scalars + k * kSegmentScalars;
    const double* bank_scalars = reinterpret_cast<const double*>(scalars.data()) + b * kBankScalars;
    T beta1_pow = beta1_pows[b].data<T>()[0];
    T beta2_pow = beta2_pows[b].data<T>()[0];
    double lr_k = kernel_lr(global_lr, own[0]);
    double lr_decay = (ints[3] & kSeparateDecay) ? kernel_lr(global_lr, own[2]) : 0.0;
    const bool lr_double = global_lr.dtype() == paddle::DataType::FLOAT64;
    step.push_back(step_scalars<T>(lr_k, lr_decay, lr_double, bank_scalars, own, beta1_pow, beta2_pow,
                                   ints[3] & kFusedDecay));
    Segment segment{b, ints[1], ints[2], ints[3], static_cast<int64_t>(step.size()) - 1};
    segments.push_back(segment);
    const int64_t* starts = banks[b].param_starts;
    int64_t param = std::lower_bound(starts, starts + banks[b].params + 1, segment.start) - starts;
    PD_CHECK(param < banks[b].params && starts[param] == segment.start,
             "paddle_llrd fused AdamW: a segment must start where a parameter starts");
    for (; param < banks[b].params && starts[param] < segment.stop; ++param) {
      for (int64_t start = starts[param]; start < starts[param + 1]; start += kPiece) {
        pieces.push_back({static_cast<int64_t>(segments.size()) - 1, param, start,
                          std::min(starts[param + 1], start + kPiece)});
      }
    }
  }
  const int threads = threads_for(layout[4], static_cast<int64_t>(pieces.size()));
  Pool::instance().run(threads, static_cast<int64_t>(pieces.size()), [&](int64_t k) {
    const Piece& piece = pieces[k];
    const Segment& segment = segments[piece.segment];
    const Bank<P>& bank = banks[segment.bank];
    const paddle::Tensor& grad = grads[bank.first_grad + piece.param];
    P* grad_data = const_cast<P*>(grad.data<P>()) + (piece.start - bank.param_starts[piece.param]);
    dispatch_range<T, P, kMaster>(bank, grad_data, segment, piece, step[segment.scalars], amsgrad, generated);
  });
}

void advance_bank_pows(const std::vector<int64_t>& layout, const std::vector<int64_t>& scalars,
                       std::vector<paddle::Tensor>& beta1_pows, std::vector<paddle::Tensor>& beta2_pows) {
  const int64_t n_banks = layout[0];
  for (int64_t b = 0; b < n_banks; ++b) {
    const double* bank_scalars = reinterpret_cast<const double*>(scalars.data()) + b * kBankScalars;
    if (beta1_pows[b].dtype() == paddle::DataType::FLOAT64) {
      advance_beta_pows<double>(beta1_pows[b], bank_scalars[0]);
      advance_beta_pows<double>(beta2_pows[b], bank_scalars[1]);
    } else {
      advance_beta_pows<float>(beta1_pows[b], bank_scalars[0]);
      advance_beta_pows<float>(beta2_pows[b], bank_scalars[1]);
    }
  }
}

// Every bank's tensors checked before any bank is written: a state buffer or a gradient that
// is not what the layout says would be read out of bounds, or through no data at all.
void check_banks(const std::vector<paddle::Tensor>& params, const std::vector<paddle::Tensor>& grads,
                 const std::vector<paddle::Tensor>& moment1, const std::vector<paddle::Tensor>& moment2,
                 const std::vector<paddle::Tensor>& moment2_max, const std::vector<paddle::Tensor>& masters,
                 const std::vector<paddle::Tensor>& param_starts, const std::vector<int64_t>& layout) {
  const int64_t n_banks = layout[0];
  for (int64_t b = 0; b < n_banks; ++b) {
    const int64_t* ints = layout.data() + kHeader + b * kBankInts;
    const bool master = ints[1] != 0;
    PD_CHECK(params[b].initialized() && params[b].is_cpu(), "paddle_llrd fused AdamW: CPU tensors only");
    const int64_t n = params[b].numel();
    const paddle::DataType state_dtype =
        params[b].dtype() == paddle::DataType::FLOAT64 ? paddle::DataType::FLOAT64 : paddle::DataType::FLOAT32;
    for (const paddle::Tensor* state : {&moment1[b], &moment2[b], &moment2_max[b], &masters[b]}) {
      if (state == &masters[b] && !master) continue;
      PD_CHECK(state->initialized() && state->is_dense_tensor() && state->is_cpu() &&
                   state->dtype() == state_dtype && state->numel() == n,
               "paddle_llrd fused AdamW: a bank's moments or master weights do not match its parameters");
    }
    const paddle::Tensor& starts = param_starts[b];
    const int64_t n_params = ints[2], first_grad = ints[3];
    PD_CHECK(starts.initialized() && starts.is_cpu() && starts.dtype() == paddle::DataType::INT64 &&
                 starts.numel() == n_params + 1 && first_grad >= 0 &&
                 first_grad + n_params <= static_cast<int64_t>(grads.size()),
             "paddle_llrd fused AdamW: malformed parameter ranges");
    const int64_t* at = starts.data<int64_t>();
    PD_CHECK(at[0] >= 0 && at[n_params] <= n, "paddle_llrd fused AdamW: malformed parameter ranges");
    for (int64_t k = 0; k < n_params; ++k) {  // each gradient where its parameter's range says
      const paddle::Tensor& grad = grads[first_grad + k];
      PD_CHECK(grad.initialized() && grad.is_dense_tensor() && grad.is_cpu() && grad.dtype() == params[b].dtype() &&
                   grad.numel() == at[k + 1] - at[k],
               "paddle_llrd fused AdamW: a gradient does not match its parameter (dtype, size or place)");
    }
  }
}

void FusedAdamW(std::vector<paddle::Tensor>& params, const std::vector<paddle::Tensor>& grads,
                std::vector<paddle::Tensor>& moment1, std::vector<paddle::Tensor>& moment2,
                std::vector<paddle::Tensor>& moment2_max, std::vector<paddle::Tensor>& masters,
                std::vector<paddle::Tensor>& beta1_pows, std::vector<paddle::Tensor>& beta2_pows,
                const std::vector<paddle::Tensor>& clip_values, const std::vector<paddle::Tensor>& param_starts,
                const paddle::Tensor& global_lr, const std::vector<int64_t>& layout,
                const std::vector<int64_t>& scalars) {
  const int64_t n_banks = layout[0];
  PD_CHECK(static_cast<int64_t>(layout.size()) == kHeader + n_banks * kBankInts + layout[1] * kSegmentInts,
           "paddle_llrd fused AdamW: malformed layout attribute");
  PD_CHECK(static_cast<int64_t>(scalars.size()) == n_banks * kBankScalars + layout[1] * kSegmentScalars,
           "paddle_llrd fused AdamW: malformed scalars attribute");
  const std::initializer_list<const std::vector<paddle::Tensor>*> per_bank_inputs = {
      &params, &moment1, &moment2, &moment2_max, &masters, &beta1_pows, &beta2_pows, &clip_values, &param_starts};
  for (const std::vector<paddle::Tensor>* per_bank : per_bank_inputs) {
    PD_CHECK(static_cast<int64_t>(per_bank->size()) == n_banks, "paddle_llrd fused AdamW: one tensor per bank");
  }
  check_banks(params, grads, moment1, moment2, moment2_max, masters, param_starts, layout);
  std::vector<int64_t> f32, f64, bf16_master, f16_master;
  for (int64_t b = 0; b < n_banks; ++b) {
    const bool master = layout[kHeader + b * kBankInts + 1] != 0;
    switch (params[b].dtype()) {
      case paddle::DataType::FLOAT32: f32.push_back(b); break;
      case paddle::DataType::FLOAT64: f64.push_back(b); break;
      case paddle::DataType::BFLOAT16:
        PD_CHECK(master, "paddle_llrd fused AdamW: a bfloat16 bank needs its master weights");
        bf16_master.push_back(b);
        break;
      case paddle::DataType::FLOAT16:
        PD_CHECK(master, "paddle_llrd fused AdamW: a float16 bank needs its master weights");
        f16_master.push_back(b);
        break;
      default:
        PD_THROW("paddle_llrd fused AdamW: unsupported parameter dtype");
    }
  }
#define PADDLE_LLRD_RUN(P, T, M, which)                                                                       \
  if (!which.empty())                                                                                        \
    run_banks_of_type<P, T, M>(which, params, grads, moment1, moment2, moment2_max, masters, beta1_pows,      \
                               beta2_pows, clip_values, param_starts, global_lr, layout, scalars)
  PADDLE_LLRD_RUN(float, float, false, f32);
  PADDLE_LLRD_RUN(double, double, false, f64);
  PADDLE_LLRD_RUN(bfloat16, float, true, bf16_master);
  PADDLE_LLRD_RUN(float16, float, true, f16_master);
#undef PADDLE_LLRD_RUN
  advance_bank_pows(layout, scalars, beta1_pows, beta2_pows);
}

std::vector<paddle::Tensor> FusedAdamWForward(
    std::vector<paddle::Tensor>& params, const std::vector<paddle::Tensor>& grads, std::vector<paddle::Tensor>& moment1,
    std::vector<paddle::Tensor>& moment2, std::vector<paddle::Tensor>& moment2_max,
    std::vector<paddle::Tensor>& masters, std::vector<paddle::Tensor>& beta1_pows,
    std::vector<paddle::Tensor>& beta2_pows, const std::vector<paddle::Tensor>& clip_values,
    const std::vector<paddle::Tensor>& param_starts, const paddle::Tensor& global_lr,
    const std::vector<int64_t>& layout, const std::vector<int64_t>& scalars) {
  FusedAdamW(params, grads, moment1, moment2, moment2_max, masters, beta1_pows, beta2_pows, clip_values, param_starts,
             global_lr, layout, scalars);
  return {};
}

}  // namespace

PD_BUILD_OP(paddle_llrd_fused_adamw)
    .Inputs({paddle::Vec("Params"), paddle::Vec("Grads"), paddle::Vec("Moment1"), paddle::Vec("Moment2"),
             paddle::Vec("Moment2Max"), paddle::Vec("MasterWeights"), paddle::Vec("Beta1Pows"),
             paddle::Vec("Beta2Pows"), paddle::Vec("ClipValues"), paddle::Vec("ParamStarts"), "LearningRate"})
    .Outputs({paddle::Vec("ParamsOut"), paddle::Vec("Moment1Out"), paddle::Vec("Moment2Out"),
              paddle::Vec("Moment2MaxOut"), paddle::Vec("MasterWeightsOut"), paddle::Vec("Beta1PowsOut"),
              paddle::Vec("Beta2PowsOut")})
    .Attrs({"layout: std::vector<int64_t>", "scalars: std::vector<int64_t>"})
    .SetInplaceMap({{paddle::Vec("Params"), paddle::Vec("ParamsOut")},
                    {paddle::Vec("Moment1"), paddle::Vec("Moment1Out")},
                    {paddle::Vec("Moment2"), paddle::Vec("Moment2Out")},
                    {paddle::Vec("Moment2Max"), paddle::Vec("Moment2MaxOut")},
                    {paddle::Vec("MasterWeights"), paddle::Vec("MasterWeightsOut")},
                    {paddle::Vec("Beta1Pows"), paddle::Vec("Beta1PowsOut")},
                    {paddle::Vec("Beta2Pows"), paddle::Vec("Beta2PowsOut")}})
    .SetKernelFn(PD_KERNEL(FusedAdamWForward));

// paddle_llrd's fused CPU update of an ExponentialMovingAverage: every shadow
// in one call, one pass over memory on the threads asked for (thread_pool.h),
// with the bits of Paddle's own ops (the Python side, fused_check.py, compares
// them when the library loads).
#include <algorithm>
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

// shadow = ((shadow * (d / (1 - d)) + 0) + value) * (1 - d) + 0, each op
// rounded to the shadow's type as Paddle's scale_/add_/scale_ round it (a
// value of another type cast to it first); d = 0 copies the values.
// `spans`: per value, the shadow buffer it goes to and its offset there.
template <typename S, typename V>
void ema_range(S* shadow, const V* value, int64_t n, S keep, S blend, bool copy) {
  for (int64_t i = 0; i < n; ++i) {
    S v = static_cast<S>(value[i]);
    if (copy) {
      shadow[i] = v;
    } else {
      S kept = shadow[i] * keep + static_cast<S>(0);
      kept = kept + v;
      shadow[i] = kept * blend + static_cast<S>(0);
    }
  }
}

struct EmaPiece {
  int64_t value, offset, count;
};

template <typename S>
void ema_piece(std::vector<paddle::Tensor>& shadows, const std::vector<paddle::Tensor>& values, int64_t shadow_index,
               int64_t shadow_offset, const EmaPiece& piece, S keep, S blend, bool copy) {
  S* shadow = shadows[shadow_index].data<S>() + shadow_offset;
  const paddle::Tensor& value = values[piece.value];
  switch (value.dtype()) {
    case paddle::DataType::FLOAT32:
      ema_range<S, float>(shadow, value.data<float>() + piece.offset, piece.count, keep, blend, copy);
      break;
    case paddle::DataType::FLOAT64:
      ema_range<S, double>(shadow, value.data<double>() + piece.offset, piece.count, keep, blend, copy);
      break;
    case paddle::DataType::BFLOAT16:
      ema_range<S, bfloat16>(shadow, value.data<bfloat16>() + piece.offset, piece.count, keep, blend, copy);
      break;
    case paddle::DataType::FLOAT16:
      ema_range<S, float16>(shadow, value.data<float16>() + piece.offset, piece.count, keep, blend, copy);
      break;
    default:
      PD_THROW("paddle_llrd EMA: unsupported parameter dtype");
  }
}

std::vector<paddle::Tensor> EmaUpdateForward(std::vector<paddle::Tensor>& shadows,
                                             const std::vector<paddle::Tensor>& values,
                                             const std::vector<int64_t>& spans, const std::vector<int64_t>& settings) {
  // settings: decay's bits, threads
  PD_CHECK(spans.size() == 2 * values.size(), "paddle_llrd EMA: two span entries per value");
  const double decay = as_double(settings[0]);
  const bool copy = decay == 0.0;
  struct Item {
    int64_t shadow, shadow_offset;
    EmaPiece piece;
  };
  std::vector<Item> items;
  for (size_t v = 0; v < values.size(); ++v) {
    PD_CHECK(spans[2 * v] >= 0 && spans[2 * v] < static_cast<int64_t>(shadows.size()),
             "paddle_llrd EMA: a span names no shadow buffer");
    const paddle::Tensor& shadow = shadows[spans[2 * v]];
    PD_CHECK(values[v].is_cpu() && shadow.is_cpu(), "paddle_llrd EMA: CPU tensors only");
    const int64_t n = values[v].numel();
    PD_CHECK((shadow.dtype() == paddle::DataType::FLOAT32 || shadow.dtype() == paddle::DataType::FLOAT64) &&
                 spans[2 * v + 1] >= 0 && spans[2 * v + 1] + n <= shadow.numel(),
             "paddle_llrd EMA: a shadow buffer does not hold its values (dtype or size)");
    for (int64_t start = 0; start < n; start += kPiece) {
      EmaPiece piece{static_cast<int64_t>(v), start, std::min(kPiece, n - start)};
      items.push_back({spans[2 * v], spans[2 * v + 1] + start, piece});
    }
  }
  const int threads = threads_for(settings[1], static_cast<int64_t>(items.size()));
  Pool::instance().run(threads, static_cast<int64_t>(items.size()), [&](int64_t k) {
    const Item& item = items[k];
    if (shadows[item.shadow].dtype() == paddle::DataType::FLOAT64) {
      ema_piece<double>(shadows, values, item.shadow, item.shadow_offset, item.piece, decay / (1.0 - decay),
                        1.0 - decay, copy);
    } else {
      ema_piece<float>(shadows, values, item.shadow, item.shadow_offset, item.piece,
                       static_cast<float>(decay / (1.0 - decay)), static_cast<float>(1.0 - decay), copy);
    }
  });
  return {};
}

}  // namespace

PD_BUILD_OP(paddle_llrd_ema_update)
    .Inputs({paddle::Vec("Shadows"), paddle::Vec("Values")})
    .Outputs({paddle::Vec("ShadowsOut")})
    .Attrs({"spans: std::vector<int64_t>", "settings: std::vector<int64_t>"})
    .SetInplaceMap({{paddle::Vec("Shadows"), paddle::Vec("ShadowsOut")}})
    .SetKernelFn(PD_KERNEL(EmaUpdateForward));

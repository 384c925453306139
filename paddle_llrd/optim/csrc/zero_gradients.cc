// paddle_llrd's zeroing of large CPU gradients for clear_grad: every gradient
// in one call on the threads asked for (thread_pool.h), with streaming
// (non-temporal) stores where the CPU has them. A plain store first reads each
// line it writes (the read for ownership), so zeroing a gradient cold from the
// backward moves twice its bytes; a streaming store moves them once. The zeros
// are the bits Paddle's clear_gradient writes (set_constant(0) of a float).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "paddle/extension.h"
#include "thread_pool.h"

namespace {

using paddle_llrd::kPiece;
using paddle_llrd::Pool;
using paddle_llrd::threads_for;

void zero_bytes(char* begin, int64_t bytes) {
#if defined(__SSE2__)
  // the unaligned head and tail by memset, the 16-byte-aligned middle streamed
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(begin) + 15) & ~uintptr_t{15});
  const int64_t head = std::min<int64_t>(bytes, aligned - begin);
  std::memset(begin, 0, head);
  const int64_t body = (bytes - head) / 16 * 16;
  const __m128i zero = _mm_setzero_si128();
  for (int64_t at = 0; at < body; at += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(aligned + at), zero);
  std::memset(aligned + body, 0, bytes - head - body);
  _mm_sfence();  // (streamed stores are weakly ordered: visible before the caller goes on)
#else
  std::memset(begin, 0, bytes);
#endif
}

std::vector<paddle::Tensor> ZeroGradientsForward(const std::vector<paddle::Tensor>& grads,
                                                 const std::vector<int64_t>& settings) {
  // settings: threads
  struct Piece {
    char* begin;
    int64_t bytes;
  };
  std::vector<Piece> pieces;
  for (const paddle::Tensor& grad : grads) {
    PD_CHECK(grad.initialized() && grad.is_dense_tensor() && grad.is_cpu(),
             "paddle_llrd zero_fill: dense CPU gradients only");
    const paddle::DataType dtype = grad.dtype();
    PD_CHECK(dtype == paddle::DataType::FLOAT32 || dtype == paddle::DataType::FLOAT64 ||
                 dtype == paddle::DataType::BFLOAT16 || dtype == paddle::DataType::FLOAT16,
             "paddle_llrd zero_fill: floating-point gradients only (their zero is all bits clear)");
    const int64_t element = static_cast<int64_t>(phi::SizeOf(dtype));
    char* data = static_cast<char*>(const_cast<void*>(grad.data()));
    const int64_t n = grad.numel();
    for (int64_t start = 0; start < n; start += kPiece) {
      pieces.push_back({data + start * element, std::min(kPiece, n - start) * element});
    }
  }
  Pool::instance().run(threads_for(settings[0], static_cast<int64_t>(pieces.size())),
                       static_cast<int64_t>(pieces.size()),
                       [&](int64_t k) { zero_bytes(pieces[k].begin, pieces[k].bytes); });
  return {};
}

}  // namespace

PD_BUILD_OP(paddle_llrd_zero_fill)  // (a name with "_grad" in it would be taken for a gradient operator)
    .Inputs({paddle::Vec("Grads")})
    .Outputs({})
    .Attrs({"settings: std::vector<int64_t>"})
    .SetKernelFn(PD_KERNEL(ZeroGradientsForward));

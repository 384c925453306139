// The squared L2 norms of float32 CPU gradients and their sum, in one call on
// the threads asked for (thread_pool.h): what ClipGradByGlobalNorm computes
// with one squared_l2_norm kernel per gradient and `stack(...).sum()`, and
// ClipGradByNorm's clip_by_norm kernel from each gradient's squared norm.
//
// Bit for bit with Paddle: both kernels are Eigen's full sum reduction
// (phi/kernels/funcs/squared_l2_norm.h: `input.square().sum()`; the sum
// kernel of a reduce_all), whose order of additions this file reproduces:
//   - a range of more than kLeaf packets is cut in two at a packet boundary
//     near its middle, each half reduced alike, the two results added;
//   - a leaf sums packets of kPacket floats (AVX) into two packet
//     accumulators in turn (an odd last packet into the first), adds the
//     second into the first, sums the leftover elements one by one from 0,
//     and adds the first accumulator's lanes as Eigen's predux does: the
//     upper half onto the lower, then lanes 0 + 2 and 1 + 3, then those two.
// Built with -ffp-contract=off (no multiply-add is fused). The Python side
// (fused_check.py) compares the results with Paddle's kernels over sizes that
// take each branch, and uses this operator only where every bit agrees; it
// leaves a NaN sum to Paddle's kernels (of two NaN operands an addition keeps
// one, which one being the compiler's choice in Paddle's build).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "paddle/extension.h"
#include "thread_pool.h"

namespace {

using paddle_llrd::Pool;
using paddle_llrd::threads_for;

constexpr int64_t kPacket = 8;    // floats per AVX packet, as Paddle's x86 build vectorises Eigen
constexpr int64_t kLeaf = 1024;   // Eigen's LeafSize<float>: packets below which a range is one leaf

// One packet: kPacket float lanes, added lane by lane (a GCC/Clang vector type,
// so that the compiler keeps every accumulator below in a register).
typedef float Packet __attribute__((vector_size(kPacket * sizeof(float))));

inline Packet packet_of(const float* x, int64_t first, bool squared) {
  Packet p;
  std::memcpy(&p, x + first, sizeof(p));
  return squared ? p * p : p;
}

inline float value_of(const float* x, int64_t i, bool squared) { return squared ? x[i] * x[i] : x[i]; }

inline float lanes_sum(const Packet& p) {
  float half[kPacket / 2];
  for (int64_t l = 0; l < kPacket / 2; ++l) half[l] = p[l] + p[l + kPacket / 2];
  return (half[0] + half[2]) + (half[1] + half[3]);
}

// A leaf's two packet accumulators.
struct LeafSum {
  Packet even = {}, odd = {};
};

// The leaf's sum once its first `paired_done` elements are in `sum`.
float finish_leaf(LeafSum& sum, const float* x, int64_t count, int64_t paired_done, bool squared) {
  const int64_t paired = count / (2 * kPacket) * (2 * kPacket);
  const int64_t packed = count / kPacket * kPacket;
  for (int64_t j = paired_done; j < paired; j += 2 * kPacket) {
    sum.even = sum.even + packet_of(x, j, squared);
    sum.odd = sum.odd + packet_of(x, j + kPacket, squared);
  }
  for (int64_t j = paired; j < packed; j += kPacket) sum.even = sum.even + packet_of(x, j, squared);
  sum.even = sum.even + sum.odd;
  float rest = 0.0f;
  for (int64_t j = packed; j < count; ++j) rest = rest + value_of(x, j, squared);
  return rest + lanes_sum(sum.even);
}

float leaf_sum(const float* x, int64_t count, bool squared) {
  LeafSum sum;
  return finish_leaf(sum, x, count, 0, squared);
}

// The squared sums of up to kStreams leaves, their packet pairs read side by
// side while every leaf is that long: one core reads several streams of memory
// faster than one. Each leaf's additions are leaf_sum's, in its order.
constexpr int64_t kStreams = 6;

void squared_leaf_sums(const float* const* xs, const int64_t* counts, int64_t n, float* sums) {
  LeafSum acc[kStreams];
  int64_t common = 0;
  if (n == kStreams) {
    common = *std::min_element(counts, counts + n) / (2 * kPacket) * (2 * kPacket);
  }
  for (int64_t j = 0; j < common; j += 2 * kPacket) {
    for (int64_t q = 0; q < kStreams; ++q) {
      acc[q].even = acc[q].even + packet_of(xs[q], j, true);
      acc[q].odd = acc[q].odd + packet_of(xs[q], j + kPacket, true);
    }
  }
  for (int64_t q = 0; q < n; ++q) sums[q] = finish_leaf(acc[q], xs[q], counts[q], common, true);
}

// Eigen's split of [first, first + count): the left part's length.
inline int64_t left_count(int64_t first, int64_t count) {
  const int64_t middle = first + (count + 1) / 2;
  const int64_t split = kPacket * ((middle + kPacket - 1) / kPacket);
  return std::min(split - first, count);
}

struct Leaf {
  int64_t tensor, first, count;
};

// The leaves of a range, in order.
void collect_leaves(int64_t tensor, int64_t first, int64_t count, std::vector<Leaf>& leaves) {
  if (count > kPacket * kLeaf) {
    const int64_t left = left_count(first, count);
    collect_leaves(tensor, first, left, leaves);
    if (left < count) collect_leaves(tensor, first + left, count - left, leaves);
    return;
  }
  leaves.push_back({tensor, first, count});
}

// The range's sum from its leaves' sums (consumed in order from `next`), added as Eigen adds them.
float combine(int64_t first, int64_t count, const std::vector<float>& sums, size_t& next) {
  if (count > kPacket * kLeaf) {
    const int64_t left = left_count(first, count);
    float total = 0.0f;
    total = total + combine(first, left, sums, next);
    if (left < count) total = total + combine(first + left, count - left, sums, next);
    return total;
  }
  return sums[next++];
}

std::vector<paddle::Tensor> SquaredNormsForward(const std::vector<paddle::Tensor>& grads, paddle::Tensor& squares,
                                                paddle::Tensor& total, const std::vector<int64_t>& settings) {
  // settings: threads
  PD_CHECK(squares.is_cpu() && squares.dtype() == paddle::DataType::FLOAT32 &&
               squares.numel() == static_cast<int64_t>(grads.size()),
           "paddle_llrd squared norms: `squares` must be a float32 CPU tensor with one element per gradient");
  PD_CHECK(total.is_cpu() && total.dtype() == paddle::DataType::FLOAT32 && total.numel() == 1,
           "paddle_llrd squared norms: `total` must be a float32 CPU tensor of one element");
  for (const paddle::Tensor& grad : grads) {
    // (not served: `total` keeps what the caller put there, which no sum of squares is)
    if (!grad.is_cpu() || grad.dtype() != paddle::DataType::FLOAT32) return {};
  }
  std::vector<Leaf> leaves;
  for (size_t t = 0; t < grads.size(); ++t) collect_leaves(static_cast<int64_t>(t), 0, grads[t].numel(), leaves);
  std::vector<float> sums(leaves.size());
  const int64_t groups = (static_cast<int64_t>(leaves.size()) + kStreams - 1) / kStreams;
  Pool::instance().run(threads_for(settings[0], groups), groups, [&](int64_t g) {
    const int64_t first = g * kStreams;
    const int64_t n = std::min<int64_t>(kStreams, static_cast<int64_t>(leaves.size()) - first);
    const float* xs[kStreams];
    int64_t counts[kStreams];
    for (int64_t q = 0; q < n; ++q) {
      const Leaf& leaf = leaves[first + q];
      xs[q] = grads[leaf.tensor].data<float>() + leaf.first;
      counts[q] = leaf.count;
    }
    squared_leaf_sums(xs, counts, n, sums.data() + first);
  });
  float* out = squares.data<float>();
  size_t next = 0;
  for (size_t t = 0; t < grads.size(); ++t) {
    // (an empty gradient is one leaf of nothing: 0, as Eigen's reduction of it)
    out[t] = combine(0, grads[t].numel(), sums, next);
  }
  // The sum of the squares, reduced as the sum kernel reduces the stacked norms.
  std::vector<Leaf> outer;
  collect_leaves(0, 0, squares.numel(), outer);
  std::vector<float> outer_sums;
  for (const Leaf& leaf : outer) outer_sums.push_back(leaf_sum(out + leaf.first, leaf.count, false));
  size_t outer_next = 0;
  total.data<float>()[0] = combine(0, squares.numel(), outer_sums, outer_next);
  return {};
}

}  // namespace

PD_BUILD_OP(paddle_llrd_squared_norms)
    .Inputs({paddle::Vec("Grads"), "Squares", "Total"})
    .Outputs({"SquaresOut", "TotalOut"})
    .Attrs({"settings: std::vector<int64_t>"})
    .SetInplaceMap({{"Squares", "SquaresOut"}, {"Total", "TotalOut"}})
    .SetKernelFn(PD_KERNEL(SquaredNormsForward));

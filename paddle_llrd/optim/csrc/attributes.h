// How paddle_llrd's operators read their attributes: a custom operator's
// attributes hold no double, so the Python side passes each double's IEEE
// bits in an int64 (fused_operator.py's doubles_as_ints).
#pragma once

#include <cstdint>
#include <cstring>

namespace paddle_llrd {

inline double as_double(int64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace paddle_llrd

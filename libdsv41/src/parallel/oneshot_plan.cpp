// plan_oneshot (oneshot_plan.hpp).
#include "parallel/oneshot_plan.hpp"

#include <fmt/format.h>

namespace dsv41::parallel {

Result<OneShotPlan> plan_oneshot(size_t max_bytes) {
  if (max_bytes == 0 || max_bytes > kOneShotMaxBytes)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("one-shot all-reduce: max_bytes {} outside [1, {}]", max_bytes,
                              kOneShotMaxBytes));
  OneShotPlan p;
  p.max_bytes = max_bytes;
  size_t data = (max_bytes + kOneShotFlagBytes - 1) / kOneShotFlagBytes * kOneShotFlagBytes;
  size_t raw = kOneShotHeaderBytes + data + kOneShotFlagBytes;
  p.recv_stride = (raw + kOneShotAlign - 1) / kOneShotAlign * kOneShotAlign;
  p.total_bytes = 4 * p.recv_stride;
  return p;
}

}  // namespace dsv41::parallel

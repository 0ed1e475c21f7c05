// The ViT's attention core (spec model-architecture.md §7.3): per head, softmax(q·kᵀ / √head_dim)
// · v over all n positions of the image (full bidirectional), fp32. The CPU reference of
// kernels::vision_attention.
#pragma once

#include <cstdint>

#include "core/thread_pool.hpp"

namespace dsv41::vision {

// qkv [n, 3·heads·head_dim] (q | k | v, q and k already rotated); out [n, heads·head_dim]. Each
// score is the dot product summed in index order times 1/√head_dim; the softmax subtracts the
// row max, sums the exponentials in key order and divides each weight by the sum; the output sums
// weight · v in key order.
void full_attention(const float* qkv, int64_t n, int heads, int head_dim, float* out,
                    ThreadPool& pool);

}  // namespace dsv41::vision

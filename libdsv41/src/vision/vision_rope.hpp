// The ViT's 2D rotary embedding (spec model-architecture.md §7.3): half-split, channel i rotates
// with channel i + head_dim/2; of the head_dim/2 angles, the first half are row · θ_m and the
// second half col · θ_m, θ_m = theta^(-2m / (head_dim/2)), m = 0 .. head_dim/4 - 1. fp32, as the
// reference computes its tables and rotation.
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41::vision {

// angles [n_h·n_w, head_dim/2] for the row-major patch grid.
std::vector<float> vision_rope_angles(int n_h, int n_w, int head_dim, double theta);

// x [head_dim] rotated in place by angles [head_dim/2]:
// (x_i, x_{i+h/2}) -> (x_i cos - x_{i+h/2} sin, x_{i+h/2} cos + x_i sin).
void apply_vision_rope(float* x, const float* angles, int head_dim);

// q and k of every head of qkv [n, 3·heads·head_dim] (q | k | v) rotated in place by the angles
// [n, head_dim/2] of their position.
void rotate_qk(float* qkv, int64_t n, int heads, int head_dim, const float* angles);

}  // namespace dsv41::vision

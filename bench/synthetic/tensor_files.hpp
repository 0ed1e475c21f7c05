// The synthetic writer's engine, shared by the checkpoint shards and the EXL3 banks: safetensors
// files whose tensors are SyntheticTensor fills, generated in 32 MiB chunks on all hardware
// threads and pwrite()n at their final offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "synthetic/synthetic_checkpoint.hpp"

namespace dsv41::synth {

struct TensorFile {
  std::string path;             // parent directory must exist
  std::vector<size_t> tensors;  // indices into the tensor list, in data order
};

// Writes every file of `files` (each tensor of `ts` in at most one file): the header (same layout
// as loader/safetensors.cpp write_safetensors: metadata first, tensors in data order, padded with
// spaces to a multiple of 8), then the data. Chunk c of tensor i draws from the splitmix64 stream
// seeded by (seed, i, c), so the bytes depend neither on the thread count nor on the order.
// Throws detail::Failure (kIo naming the path, kInvalidArgument naming the tensor).
void write_tensor_files(const std::vector<SyntheticTensor>& ts,
                        const std::vector<TensorFile>& files, uint64_t seed);

// Creates `path`'s directory and writes `text` to it; throws kIo naming the path.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace dsv41::synth

// Timing helpers of the CUDA kernel benches: the median, and the per-call time of a CUDA graph of
// back-to-back launches (the benches rotate through >= 256 MB of weight copies so no call hits L2).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/event_timer.hpp"

namespace dsv41::bench {

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline void graph_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "graph timing: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// Median over `repeats` replays of ms per call of a graph of launch(0) .. launch(copies - 1),
// after one eager warm-up pass (module load, first touch) and one warm-up replay.
template <typename Launch>
float graph_median_ms(const Launch& launch, int copies, int repeats, cudaStream_t s) {
  for (int c = 0; c < copies; ++c) launch(c);
  graph_check(cudaStreamSynchronize(s), "warm-up");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  graph_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int c = 0; c < copies; ++c) launch(c);
  graph_check(cudaStreamEndCapture(s, &graph), "end capture");
  graph_check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  graph_check(cudaGraphLaunch(exec, s), "warm-up replay");
  cuda::EventTimer t;
  std::vector<float> ms;
  for (int r = 0; r < repeats; ++r) {
    t.start(s);
    graph_check(cudaGraphLaunch(exec, s), "replay");
    t.stop(s);
    ms.push_back(t.elapsed_ms() / copies);
  }
  graph_check(cudaGraphExecDestroy(exec), "destroy exec");
  graph_check(cudaGraphDestroy(graph), "destroy graph");
  return median(ms);
}

}  // namespace dsv41::bench

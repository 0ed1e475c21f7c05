// The process-wide dependent-launch switch (common/launch.cuh). One setting for the process, as
// the current CUDA device is: launchers keep their (pointers, sizes, workspace, stream) signature.
#include <atomic>

#include "dsv41k/launchers.hpp"

namespace dsv41::kernels {
namespace {
std::atomic<bool> g_programmatic_launch{true};
}  // namespace

void set_programmatic_launch(bool on) {
  g_programmatic_launch.store(on, std::memory_order_relaxed);
}

bool programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }

}  // namespace dsv41::kernels

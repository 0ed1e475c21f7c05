// THE table of tunables. Add a row here (and nowhere else) for every new knob; keep names sorted
// within a section. Types are checked when a value is read from the environment or a flag.
#include "core/tunables.hpp"

namespace dsv41 {

namespace {
constexpr TunableSpec kSpecs[] = {
    // --- core ---
    {"DSV41_LOG_LEVEL", TunableType::kString, "info", "log threshold: debug|info|warn|error"},
    {"DSV41_THREADS", TunableType::kInt, "0",
     "CPU worker threads of the reference backend; 0 = all hardware threads"},
};
}  // namespace

std::span<const TunableSpec> tunable_specs() { return kSpecs; }

}  // namespace dsv41

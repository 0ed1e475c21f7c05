// `dsv41 tunables`: print the tunables registry as Markdown (source of docs/env_vars.md).
#include <cstdio>

#include "cli_args.hpp"
#include "core/tunables.hpp"

namespace {
int run(const dsv41::cli::Args& args) {
  args.allow({});
  std::fputs(dsv41::Tunables::markdown().c_str(), stdout);
  return 0;
}
const dsv41::cli::Registration reg{
    {"tunables", "", "print every DSV41_* tunable (name, type, default, meaning) as Markdown", &run}};
}  // namespace

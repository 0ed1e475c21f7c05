// dsv41: inspect checkpoints, run the reference forward pass, tokenize/render/parse prompts.
// Every failure prints one line "dsv41 <command>: <message>" and exits non-zero
// (2 = usage error, 1 = anything else).
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli_args.hpp"
#include "core/check.hpp"

using dsv41::cli::commands;

static void print_help() {
  std::printf("usage: dsv41 <command> [--flag value ...]\n\ncommands:\n");
  for (const auto& c : commands()) std::printf("  %-12s %s\n      %s\n", c.name, c.summary, c.usage);
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : commands()) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.fn(dsv41::cli::Args(argc, argv, 2));
    } catch (const dsv41::cli::UsageError& e) {
      std::fprintf(stderr, "dsv41 %s: %s (usage: dsv41 %s %s)\n", c.name, e.what(), c.name,
                   c.usage);
      return 2;
    } catch (const dsv41::detail::Failure& e) {
      std::fprintf(stderr, "dsv41 %s: %s\n", c.name, e.message().c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dsv41 %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "dsv41: unknown command '%s' (see dsv41 help)\n", argv[1]);
  return 2;
}

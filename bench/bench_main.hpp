// The benches' main(): run the body, and turn an escaping exception (a bad checkpoint, no device,
// a failed launch) into one line on stderr naming the bench and exit code 1.
#pragma once

#include <cstdio>
#include <exception>

namespace dsv41::bench {

template <class Body>
int guarded_main(const char* name, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace dsv41::bench

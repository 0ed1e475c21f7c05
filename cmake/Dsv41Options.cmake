# Every build option of libdsv41, with its default and why (docs/building.md mirrors this table).
set(_standalone OFF)
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(_standalone ON)
endif()
option(DSV41_STANDALONE "Top-level build: tests, tools, examples, server on by default" ${_standalone})

include(CheckLanguage)
check_language(CUDA)
set(_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_cuda_default ON)
endif()
# OFF gives the CPU-reference-only build; ON needs nvcc 13 (kernels compile for sm_90 and sm_121).
option(DSV41_CUDA "Build the CUDA backend and kernels" ${_cuda_default})

option(DSV41_BUILD_TESTS "Build Catch2 tests (ctest labels = tiers)" ${DSV41_STANDALONE})
option(DSV41_BUILD_EXAMPLES "Build examples/" ${DSV41_STANDALONE})
option(DSV41_BUILD_SERVER "Build dsv41-server (Boost.Beast)" ${DSV41_STANDALONE})
option(DSV41_BUILD_FUZZERS "Build libFuzzer targets (needs clang)" OFF)
set(DSV41_SANITIZE "" CACHE STRING "Sanitizers for all targets: address;undefined or thread (empty = none)")
option(DSV41_FATAL_WARNINGS "Treat warnings as errors (ON in CI)" OFF)

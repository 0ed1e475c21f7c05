# Warning set shared by all libdsv41 targets: dsv41_apply_warnings(target).
function(dsv41_apply_warnings target)
  # -Wno-missing-field-initializers: C++20 designated initializers name only what they set.
  # -Wno-restrict: GCC 12 reports impossible memcpy overlaps inside std::string's operator+
  # at -O2 (GCC bug 105651, fixed in 13); it fires on plain `"a" + std::to_string(x)`.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
  if(DSV41_FATAL_WARNINGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

if(DSV41_SANITIZE)
  string(REPLACE ";" "," _san "${DSV41_SANITIZE}")
  add_compile_options(-fsanitize=${_san} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${_san})
endif()
# libFuzzer steers by the coverage of the code under test: every library gets the coverage
# instrumentation (the fuzz targets add -fsanitize=fuzzer for libFuzzer's main). Without it only
# the fuzz target's own file was instrumented and the runs were blind mutation (the image
# decoder fuzzer saw 40 edges in 13.8 M runs).
if(DSV41_BUILD_FUZZERS)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

# The CPU backend is the executable spec: its fp32 loops round every product and every sum (no
# FMA contraction), which the CUDA kernels reproduce with __fmul_rn / __fadd_rn and the kernel
# tests compare bit for bit. GCC contracts a*b+c by default wherever the target has FMA (aarch64,
# i.e. the GB10 host; x86 with -march=native), so contraction is off for all C++ code.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)

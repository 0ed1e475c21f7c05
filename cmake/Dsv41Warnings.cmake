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

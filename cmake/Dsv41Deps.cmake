# Third-party dependencies, all from Debian packages (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# utf8proc ships no CMake config on Debian 12; locate header and library directly.
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h REQUIRED)
find_library(UTF8PROC_LIBRARY utf8proc REQUIRED)
add_library(dsv41_utf8proc INTERFACE)
target_include_directories(dsv41_utf8proc INTERFACE ${UTF8PROC_INCLUDE_DIR})
target_link_libraries(dsv41_utf8proc INTERFACE ${UTF8PROC_LIBRARY})
# Image decoding (libdsv41/src/vision/image_decoder.hpp); optional: without them the server
# answers images with a message saying so.
find_package(PNG QUIET)
find_package(JPEG QUIET)
find_package(GIF QUIET)
pkg_check_modules(WEBP QUIET IMPORTED_TARGET libwebpdemux libwebp)
# The animation encoder, for the decoder's tests only.
pkg_check_modules(WEBPMUX QUIET IMPORTED_TARGET libwebpmux)
# Debian keeps jconfig.h in the multiarch directory, which the compiler only searches under /usr:
# add it for a relocated prefix (.gpu-deps/usr on the lent GPU machine).
if(JPEG_FOUND AND CMAKE_LIBRARY_ARCHITECTURE AND
   EXISTS "${JPEG_INCLUDE_DIR}/${CMAKE_LIBRARY_ARCHITECTURE}/jconfig.h")
  set_property(TARGET JPEG::JPEG APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES
               "${JPEG_INCLUDE_DIR}/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()
if(DSV41_BUILD_TESTS)
  # The tests use Catch2 2.x's single header (Debian 12's catch2 package); Catch2 3 (what newer
  # distributions package) has other headers and matchers. Name the problem and the way out.
  find_package(Catch2 QUIET)
  if(NOT Catch2_FOUND OR NOT Catch2_VERSION VERSION_LESS 3)
    if(Catch2_FOUND)
      set(found "Catch2 ${Catch2_VERSION} is installed")
    else()
      set(found "no Catch2 was found")
    endif()
    message(FATAL_ERROR "the tests need Catch2 2.x (Debian 12: apt install catch2); ${found}. "
                        "Configure with -DDSV41_BUILD_TESTS=OFF to build the library and server "
                        "without them (scripts/run.sh does).")
  endif()
  include(Catch)
endif()

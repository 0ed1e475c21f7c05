# CUDA architectures. Default list, one reason per entry:
#   90  - H200 (sm_90): the development/benchmark GPU lent through the device tool.
#   121 - GB10 / DGX Spark (sm_121): the deployment target (compiled here, run on the Sparks).
# DSV41_NATIVE=ON builds for the GPU of the build machine only.
option(DSV41_NATIVE "Build CUDA code for the local GPU only" OFF)
if(DSV41_NATIVE)
  set(CMAKE_CUDA_ARCHITECTURES native)
elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90 121)
endif()
# CMake < 3.26 knows no C++20 flag for nvcc (CMAKE_CUDA_STANDARD 20 fails at generate time).
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 20)
find_package(CUDAToolkit REQUIRED)
message(STATUS "dsv41: CUDA architectures: ${CMAKE_CUDA_ARCHITECTURES}")

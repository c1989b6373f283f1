# The share kernels (PageRank pull, BFS; gpu/kernels.h): with CUDA one
# translation unit, kernels.cu (~25 s for two architectures on 2 cores),
# for CMAKE_CUDA_ARCHITECTURES (80 90: A100, H100/H200; never "native");
# without it an Open that says the build has no CUDA. The per-vertex logic
# (kernel_bodies.h) is host-testable either way.
if(DMG_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  # The root's warning flags are gcc's: for CUDA sources they go to the
  # host compiler. cuda.cmake wraps this directory's options already; this
  # covers a tree without it.
  get_directory_property(dmg_gpu_kernels_options COMPILE_OPTIONS)
  if("-Wall" IN_LIST dmg_gpu_kernels_options)
    set(dmg_gpu_kernels_wrapped)
    foreach(opt IN LISTS dmg_gpu_kernels_options)
      list(APPEND dmg_gpu_kernels_wrapped
        "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>"
        "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${opt}>")
      if(opt STREQUAL "-Werror")
        list(APPEND dmg_gpu_kernels_wrapped
          "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>")
      endif()
    endforeach()
    set_directory_properties(PROPERTIES COMPILE_OPTIONS
      "${dmg_gpu_kernels_wrapped}")
  endif()
  add_library(dmg_gpu_kernels kernels.cu)
  # C++20 for std::span in kernels.h (nvcc 12+ with gcc 12). CMake 3.25
  # knows no CUDA20 flag for nvcc: it is told (this directory only).
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set_target_properties(dmg_gpu_kernels PROPERTIES CUDA_STANDARD 20
    CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_link_libraries(dmg_gpu_kernels PUBLIC absl::status absl::statusor
    absl::strings PRIVATE CUDA::cudart_static)
else()
  add_library(dmg_gpu_kernels kernels_none.cc)
  target_link_libraries(dmg_gpu_kernels PUBLIC absl::status absl::statusor
    absl::strings)
endif()

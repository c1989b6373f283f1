# dmg_gpu with CUDA (included by gpu/CMakeLists.txt when nvcc was found):
# the device list from the runtime and the NUMA probe. One CUDA translation
# unit (probe.cu, the kernels; ~25 s for two architectures on 2 cores): the
# host logic is host C++ that calls it through gpu/probe_kernels.h.
find_package(CUDAToolkit REQUIRED)

# The root's warning flags (add_compile_options) are gcc's: nvcc takes
# -Werror as its own option, which wants a kind ("Value '-c' is not defined
# for option 'Werror'"), so for CUDA sources they all go to the host
# compiler (-Xcompiler), and -Werror also turns on nvcc's own
# --Werror=all-warnings.
get_directory_property(dmg_gpu_options COMPILE_OPTIONS)
set(dmg_gpu_wrapped)
foreach(opt IN LISTS dmg_gpu_options)
  list(APPEND dmg_gpu_wrapped "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>"
    "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${opt}>")
  if(opt STREQUAL "-Werror")
    list(APPEND dmg_gpu_wrapped
      "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>")
  endif()
endforeach()
set_directory_properties(PROPERTIES COMPILE_OPTIONS "${dmg_gpu_wrapped}")

add_library(dmg_gpu device_cuda.cc probe_common.cc probe_cuda.cc probe.cu)
# CMAKE_CUDA_ARCHITECTURES (80 90: A100, H100/H200; never "native").
set_target_properties(dmg_gpu PROPERTIES CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_link_libraries(dmg_gpu PUBLIC absl::status absl::statusor
  absl::strings glog::glog PRIVATE CUDA::cudart_static)
# device_cuda.cc and probe_cuda.cc include cuda_runtime_api.h.
target_include_directories(dmg_gpu PRIVATE ${CUDAToolkit_INCLUDE_DIRS})

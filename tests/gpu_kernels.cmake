# The GPU share kernels (gpu/kernels.h, gpu/kernel_bodies.h): the bodies'
# logic on the host everywhere; the device tests report skipped (with the
# reason) where no GPU is usable; a build without CUDA checks Open refuses.
dmg_test(gpu_kernels_test gpu_kernels_test.cc)
target_link_libraries(gpu_kernels_test PRIVATE dmg_gpu_kernels dmg_gpu)

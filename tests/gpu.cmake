# The GPU device list, the NUMA probe and `dmg gpu-probe` (issue 40). On a
# host without a GPU the tests that need one report skipped (GTEST_SKIP
# with the reason), not passed; the rest check what such a host does.
dmg_test(gpu_device_test gpu_device_test.cc)
target_link_libraries(gpu_device_test PRIVATE dmg_cli dmg_gpu
  dmg_gpu_analysis)

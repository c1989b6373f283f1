# gpu/analysis: the topology analysis on synthetic latency matrices and the
# probe report's JSON. Not through dmg_test: this test neither runs the dmg
# binary nor uses dmg_store, and building dmg first would make it the
# slowest of the GPU tests to build on its own.
add_executable(gpu_analysis_test gpu_analysis_test.cc)
target_link_libraries(gpu_analysis_test PRIVATE dmg_gpu_analysis
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(gpu_analysis_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 600)

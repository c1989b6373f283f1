// Fuzzes the SNAP / .el edge-list reader (two ids a line, # comments): the
// input is a file named *.el, read and built into an image (graph_file_fuzz.h).
#include "fuzz/graph_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dmg::fuzz::FuzzGraphFile(data, size, "input.el");
}

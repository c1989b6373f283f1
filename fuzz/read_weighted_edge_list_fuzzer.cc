// Fuzzes the .wel reader (two ids and a weight a line): the input is a
// file named *.wel, read and built into an image (graph_file_fuzz.h).
#include "fuzz/graph_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dmg::fuzz::FuzzGraphFile(data, size, "input.wel");
}

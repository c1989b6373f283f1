// Fuzzes the PACE .gr reader (p tw N M, undirected U V lines): the input is
// a file named *.gr, read and built into an image (graph_file_fuzz.h).
#include "fuzz/graph_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dmg::fuzz::FuzzGraphFile(data, size, "input.gr");
}

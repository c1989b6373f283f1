// Fuzzes the DIMACS-9 .gr reader (p sp N M, a U V W): the input is a file
// named *.gr, read and built into an image (graph_file_fuzz.h). Seeds: p sp.
#include "fuzz/graph_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dmg::fuzz::FuzzGraphFile(data, size, "input.gr");
}

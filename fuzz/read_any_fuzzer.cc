// Fuzzes input_file.* and the format sniffing: the input is a file with no
// extension, so ReadInputFile decompresses it by magic bytes (gzip, xz;
// truncated or trailing-garbage streams, zstd/bzip2 refused by name) and
// ReadGraphFile picks the reader from the content (%%MatrixMarket banner,
// "p" line, else edge list); then built into an image (graph_file_fuzz.h).
// Seeds: gzip and xz compressed graph files, plain ones of each format.
#include "fuzz/graph_file_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dmg::fuzz::FuzzGraphFile(data, size, "input");
}

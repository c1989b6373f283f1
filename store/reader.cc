#include "store/reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "store/input_file.h"

namespace dmg::store {
namespace {

// ---------------------------------------------------------------------------
// Lines and tokens.

// Walks the buffer line by line. Lines end in '\n'; a trailing '\r' (CRLF) is
// dropped. Line numbers are 1-based.
class LineReader {
 public:
  explicit LineReader(absl::string_view data) : data_(data) {}

  bool Next(absl::string_view* line) {
    if (pos_ >= data_.size()) return false;
    const char* begin = data_.data() + pos_;
    const size_t left = data_.size() - pos_;
    const void* nl = std::memchr(begin, '\n', left);
    size_t len = nl != nullptr ? static_cast<const char*>(nl) - begin : left;
    pos_ += len + 1;
    ++line_no_;
    if (len > 0 && begin[len - 1] == '\r') --len;
    *line = absl::string_view(begin, len);
    return true;
  }

  // The number of the line last returned by Next(); after Next() returned
  // false, the number of the last line of the file (where "end of file"
  // errors are reported).
  uint64_t line_no() const { return line_no_; }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
  uint64_t line_no_ = 0;
};

inline bool IsSeparator(char c) {
  return c == ' ' || c == '\t' || c == ',' || c == '\r' || c == '\v' ||
         c == '\f';
}

// Splits `line` at runs of separators. Stores up to `max` tokens in `out`
// and returns the total number of tokens (which may exceed `max`).
inline int Split(absl::string_view line, absl::string_view* out, int max) {
  const char* p = line.data();
  const char* end = p + line.size();
  int n = 0;
  while (true) {
    while (p < end && IsSeparator(*p)) ++p;
    if (p == end) return n;
    const char* start = p;
    while (p < end && !IsSeparator(*p)) ++p;
    if (n < max) out[n] = absl::string_view(start, p - start);
    ++n;
  }
}

// The first character of `line` that is not a separator, or '\0'.
inline char FirstChar(absl::string_view line) {
  for (char c : line) {
    if (!IsSeparator(c)) return c;
  }
  return '\0';
}

// A token as it may appear in an error message: escaped and shortened.
std::string Quote(absl::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() > kMax) {
    return absl::StrCat("'", absl::CHexEscape(token.substr(0, kMax)), "...'");
  }
  return absl::StrCat("'", absl::CHexEscape(token), "'");
}

// A numeric token for a message: as is, unless it is very long.
std::string Num(absl::string_view tok) {
  return tok.size() > 40 ? Quote(tok) : std::string(tok);
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Parses a whole token as an unsigned decimal number.
inline bool ParseU64(absl::string_view tok, uint64_t* value) {
  const char* end = tok.data() + tok.size();
  auto [ptr, ec] = std::from_chars(tok.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

inline bool ParseI64(absl::string_view tok, int64_t* value) {
  const char* end = tok.data() + tok.size();
  auto [ptr, ec] = std::from_chars(tok.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

// ---------------------------------------------------------------------------
// Errors.

class Errors {
 public:
  explicit Errors(const std::string& path) : path_(path) {}

  absl::Status At(uint64_t line, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ":", line, ": ", what));
  }
  absl::Status NoEdges() const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": no edges found"));
  }

 private:
  const std::string& path_;
};

// Why `tok` is not a valid vertex id of a 0-based file.
std::string BadIdReason(absl::string_view tok) {
  if (tok.size() > 1 && tok[0] == '-' && AllDigits(tok.substr(1))) {
    return absl::StrCat("negative vertex id ", Num(tok));
  }
  if (AllDigits(tok)) {
    return absl::StrCat("vertex id ", Num(tok), " exceeds the maximum ",
                        kMaxVertexId);
  }
  return absl::StrCat("non-numeric token ", Quote(tok));
}

// Why `tok` is not a valid 1-based index in 1..`limit`. `what` names it
// ("vertex id", "row index").
std::string BadIndexReason(absl::string_view tok, absl::string_view what,
                           uint64_t limit) {
  if (tok.size() > 1 && tok[0] == '-' && AllDigits(tok.substr(1))) {
    return absl::StrCat("negative ", what, " ", Num(tok), " (ids are 1-based)");
  }
  if (AllDigits(tok)) {
    return absl::StrCat(what, " ", Num(tok), " is out of range 1..", limit,
                        " (ids are 1-based)");
  }
  return absl::StrCat("non-numeric token ", Quote(tok));
}

// Why `tok` is not a valid int32 weight.
std::string BadWeightReason(absl::string_view tok) {
  const bool negative = !tok.empty() && tok[0] == '-';
  if (AllDigits(negative ? tok.substr(1) : tok)) {
    return absl::StrCat("weight ", Num(tok), " does not fit in int32");
  }
  double d;
  const char* end = tok.data() + tok.size();
  auto [ptr, ec] = std::from_chars(tok.data(), end, d);
  if (ptr == end &&
      (ec == std::errc() || ec == std::errc::result_out_of_range)) {
    return absl::StrCat("weight ", Quote(tok),
                        " is not an integer (weights must be int32)");
  }
  return absl::StrCat("non-numeric token ", Quote(tok));
}

// Parses a vertex id of a 0-based file.
inline bool ParseId0(absl::string_view tok, VertexId* id) {
  uint64_t v;
  if (!ParseU64(tok, &v) || v > kMaxVertexId) return false;
  *id = static_cast<VertexId>(v);
  return true;
}

// Parses a 1-based index in 1..limit and returns it 0-based.
inline bool ParseId1(absl::string_view tok, uint64_t limit, VertexId* id) {
  uint64_t v;
  if (!ParseU64(tok, &v) || v == 0 || v > limit) return false;
  *id = static_cast<VertexId>(v - 1);
  return true;
}

inline bool ParseWeight(absl::string_view tok, Weight* w) {
  int64_t v;
  if (!ParseI64(tok, &v) || v < std::numeric_limits<Weight>::min() ||
      v > std::numeric_limits<Weight>::max()) {
    return false;
  }
  *w = static_cast<Weight>(v);
  return true;
}

// The vertex counts a read may reach: ReadOptions with the memory resolved.
struct Limits {
  uint64_t max_vertices;
  uint64_t memory_bytes;      // 0: unknown, not checked
  std::string memory_source;  // what bounds memory_bytes, for messages
  bool reject_negative_weights;

  // The smallest vertex count that is refused.
  uint64_t first_refused() const {
    uint64_t n = max_vertices + 1;
    if (memory_bytes != 0) {
      n = std::min(n, memory_bytes / kBytesPerVertexEstimate + 1);
    }
    return n;
  }
};

// Why `count` vertices are refused ("" if they are not). `what` says where
// the count comes from ("the 'p' line declares", ...), the count follows.
std::string TooManyVertices(uint64_t count, absl::string_view what,
                            const Limits& limits) {
  if (count > limits.max_vertices) {
    return absl::StrCat(what, " ", count,
                        " vertices, more than --max_vertices=",
                        limits.max_vertices, " (raise it to read this graph)");
  }
  if (limits.memory_bytes != 0 &&
      count > limits.memory_bytes / kBytesPerVertexEstimate) {
    return absl::StrCat(what, " ", count, " vertices, about ",
                        ByteAmount(count * kBytesPerVertexEstimate),
                        " of memory; only ", ByteAmount(limits.memory_bytes),
                        " is available (", limits.memory_source, ")");
  }
  return "";
}

std::string NegativeWeight(absl::string_view tok) {
  return absl::StrCat("negative weight ", Num(tok));
}

// Number of lines in `data`, for reserving arc arrays.
size_t CountLines(absl::string_view data) {
  size_t n = 0;
  const char* p = data.data();
  const char* end = p + data.size();
  while (p < end) {
    const void* nl = std::memchr(p, '\n', end - p);
    ++n;
    if (nl == nullptr) break;
    p = static_cast<const char*>(nl) + 1;
  }
  return n;
}

// ---------------------------------------------------------------------------
// Edge lists: SNAP .txt, .el, .wel, .tsv, .csv.

// Parses a SNAP "# Nodes: N Edges: M" comment.
bool ParseSnapHeader(absl::string_view line, uint64_t* nodes, uint64_t* edges) {
  const size_t hash = line.find('#');
  if (hash == absl::string_view::npos) return false;
  absl::string_view tok[5];
  if (Split(line.substr(hash + 1), tok, 5) != 4) return false;
  return absl::EqualsIgnoreCase(tok[0], "Nodes:") &&
         absl::EqualsIgnoreCase(tok[2], "Edges:") && ParseU64(tok[1], nodes) &&
         ParseU64(tok[3], edges);
}

absl::StatusOr<EdgeList> ReadEdgeList(const std::string& path,
                                      absl::string_view data,
                                      bool require_weights,
                                      const Limits& limits) {
  const Errors err(path);
  EdgeList el;
  LineReader lines(data);
  absl::string_view line;
  absl::string_view tok[4];
  int fields = 0;  // 2 or 3 once the first data line is seen
  bool have_header = false;
  uint64_t header_nodes = 0, header_edges = 0;
  uint64_t max_id = 0;
  const uint64_t refused = limits.first_refused();  // ids from refused - 1 up
  const size_t reserve = CountLines(data);

  while (lines.Next(&line)) {
    const int n = Split(line, tok, 4);
    if (n == 0) continue;
    const char c = tok[0][0];
    if (c == '#' || c == '%') {
      if (fields == 0 && !have_header &&
          ParseSnapHeader(line, &header_nodes, &header_edges)) {
        have_header = true;
      }
      continue;
    }
    if (fields == 0) {
      // The first data line decides whether the file is weighted.
      if (require_weights && n != 3) {
        return err.At(lines.line_no(),
                      absl::StrCat("expected 3 fields (u v w), found ", n));
      }
      if (n != 2 && n != 3) {
        std::string hint;
        if (tok[0] == "p" || tok[0] == "a" || tok[0] == "c") {
          hint = "; is this a DIMACS/PACE .gr file?";
        }
        return err.At(
            lines.line_no(),
            absl::StrCat("expected 2 or 3 fields (u v [w]), found ", n, hint));
      }
      fields = n;
      el.src.reserve(reserve);
      el.dst.reserve(reserve);
      if (fields == 3) el.weights.reserve(reserve);
      // SNAP trap: a copy of email-Enron carries a size line "N M" right
      // after its "# Nodes: N Edges: M" header. It is not an edge (with dense
      // ids, N would be out of range by the header's own count), so a first
      // data line that repeats the header exactly is skipped.
      uint64_t a, b;
      if (have_header && n == 2 && ParseU64(tok[0], &a) &&
          ParseU64(tok[1], &b) && a == header_nodes && b == header_edges) {
        LOG(WARNING) << path << ":" << lines.line_no() << ": skipping '"
                     << tok[0] << " " << tok[1]
                     << "': it repeats the '# Nodes: " << header_nodes
                     << " Edges: " << header_edges
                     << "' header (a size line, not an edge)";
        continue;
      }
    } else if (n != fields) {
      return err.At(lines.line_no(),
                    fields == 2
                        ? absl::StrCat("expected 2 fields (u v), found ", n)
                        : absl::StrCat("expected 3 fields (u v w), found ", n));
    }
    VertexId u, v;
    if (!ParseId0(tok[0], &u)) {
      std::string reason = BadIdReason(tok[0]);
      if (el.num_arcs() == 0 && (tok[0] == "p" || tok[0] == "a")) {
        absl::StrAppend(&reason, "; is this a DIMACS/PACE .gr file?");
      }
      return err.At(lines.line_no(), reason);
    }
    if (!ParseId0(tok[1], &v)) {
      return err.At(lines.line_no(), BadIdReason(tok[1]));
    }
    max_id = std::max<uint64_t>(max_id, std::max(u, v));
    if (max_id + 1 >= refused) {
      // Checked here, before the graph's per-vertex arrays are allocated.
      return err.At(lines.line_no(),
                    TooManyVertices(
                        max_id + 1,
                        absl::StrCat("vertex id ", max_id, " needs"), limits));
    }
    if (fields == 3) {
      Weight w;
      if (!ParseWeight(tok[2], &w)) {
        return err.At(lines.line_no(), BadWeightReason(tok[2]));
      }
      if (limits.reject_negative_weights && w < 0) {
        return err.At(lines.line_no(), NegativeWeight(tok[2]));
      }
      el.Add(u, v, w);
    } else {
      el.Add(u, v);
    }
  }
  if (el.num_arcs() == 0) return err.NoEdges();
  if (have_header && header_edges != el.num_arcs()) {
    LOG(WARNING) << path << ": the header says " << header_edges
                 << " edges but the file has " << el.num_arcs() << " arcs";
  }
  el.num_vertices = max_id + 1;
  return el;
}

// ---------------------------------------------------------------------------
// Matrix Market (.mtx), coordinate format.

constexpr absl::string_view kBannerForm =
    "expected '%%MatrixMarket matrix coordinate FIELD SYMMETRY'";

absl::StatusOr<EdgeList> ReadMatrixMarket(const std::string& path,
                                          absl::string_view data,
                                          const Limits& limits) {
  const Errors err(path);
  LineReader lines(data);
  absl::string_view line;
  absl::string_view tok[6];

  // Banner.
  lines.Next(&line);
  if (!absl::StartsWithIgnoreCase(line, "%%MatrixMarket")) {
    return err.At(1,
                  absl::StrCat("missing Matrix Market banner; ", kBannerForm));
  }
  const int banner_fields = Split(line, tok, 6);
  if (!absl::EqualsIgnoreCase(tok[0], "%%MatrixMarket") || banner_fields != 5) {
    return err.At(
        1, absl::StrCat("malformed Matrix Market banner; ", kBannerForm));
  }
  if (!absl::EqualsIgnoreCase(tok[1], "matrix")) {
    return err.At(1, absl::StrCat("unsupported Matrix Market object ",
                                  Quote(tok[1]), " (only 'matrix')"));
  }
  if (!absl::EqualsIgnoreCase(tok[2], "coordinate")) {
    return err.At(
        1, absl::StrCat("unsupported Matrix Market format ", Quote(tok[2]),
                        " (only 'coordinate' is supported)"));
  }
  enum class Field { kPattern, kInteger, kReal };
  Field field;
  if (absl::EqualsIgnoreCase(tok[3], "pattern")) {
    field = Field::kPattern;
  } else if (absl::EqualsIgnoreCase(tok[3], "integer")) {
    field = Field::kInteger;
  } else if (absl::EqualsIgnoreCase(tok[3], "real") ||
             absl::EqualsIgnoreCase(tok[3], "double")) {
    field = Field::kReal;
  } else {
    return err.At(
        1, absl::StrCat("unsupported Matrix Market field ", Quote(tok[3]),
                        " (supported: pattern, integer, real)"));
  }
  bool symmetric;
  if (absl::EqualsIgnoreCase(tok[4], "general")) {
    symmetric = false;
  } else if (absl::EqualsIgnoreCase(tok[4], "symmetric")) {
    symmetric = true;
  } else {
    return err.At(
        1, absl::StrCat("unsupported Matrix Market symmetry ", Quote(tok[4]),
                        " (supported: general, symmetric)"));
  }

  // Size line, after '%' comments.
  uint64_t rows = 0, cols = 0, nnz = 0;
  bool have_size = false;
  while (!have_size && lines.Next(&line)) {
    const int n = Split(line, tok, 6);
    if (n == 0 || tok[0][0] == '%') continue;
    if (n != 3) {
      return err.At(lines.line_no(),
                    absl::StrCat("expected the size line 'rows cols nnz', "
                                 "found ",
                                 n, " fields"));
    }
    for (int i = 0; i < 3; ++i) {
      uint64_t* dst = i == 0 ? &rows : i == 1 ? &cols : &nnz;
      if (!ParseU64(tok[i], dst)) {
        return err.At(
            lines.line_no(),
            AllDigits(tok[i])
                ? absl::StrCat("size ", Quote(tok[i]), " is too large")
                : absl::StrCat("non-numeric token ", Quote(tok[i]),
                               " in the size line"));
      }
    }
    constexpr uint64_t kMaxVertices = kMaxVertexId + 1;
    if (rows > kMaxVertices || cols > kMaxVertices) {
      return err.At(lines.line_no(),
                    absl::StrCat("matrix is ", rows, " x ", cols, "; at most ",
                                 kMaxVertices, " vertices are supported"));
    }
    if (std::string why = TooManyVertices(
            std::max(rows, cols),
            absl::StrCat("the size line (", rows, " x ", cols, ") declares"),
            limits);
        !why.empty()) {
      return err.At(lines.line_no(), why);
    }
    if (symmetric && rows != cols) {
      return err.At(lines.line_no(),
                    absl::StrCat("a symmetric matrix must be square, this "
                                 "one is ",
                                 rows, " x ", cols));
    }
    have_size = true;
  }
  if (!have_size) {
    return err.At(lines.line_no(), "missing the size line 'rows cols nnz'");
  }

  EdgeList el;
  el.undirected = symmetric;
  el.num_vertices = std::max(rows, cols);
  {
    // nnz comes from the file: do not trust it further than the file size.
    const uint64_t cap = std::min<uint64_t>(nnz, CountLines(data));
    const uint64_t arcs = symmetric ? 2 * cap : cap;
    el.src.reserve(arcs);
    el.dst.reserve(arcs);
    if (field != Field::kPattern) el.weights.reserve(arcs);
  }
  const int want = field == Field::kPattern ? 2 : 3;
  uint64_t entries = 0;
  bool warned_rounding = false;
  while (lines.Next(&line)) {
    const int n = Split(line, tok, 4);
    if (n == 0 || tok[0][0] == '%') continue;
    if (entries == nnz) {
      return err.At(lines.line_no(),
                    absl::StrCat("more entries than the ", nnz,
                                 " declared in the size line"));
    }
    if (n != want) {
      return err.At(
          lines.line_no(),
          want == 2 ? absl::StrCat("expected 2 fields (i j), found ", n)
                    : absl::StrCat("expected 3 fields (i j value), found ", n));
    }
    VertexId i, j;
    if (!ParseId1(tok[0], rows, &i)) {
      return err.At(lines.line_no(), BadIndexReason(tok[0], "row index", rows));
    }
    if (!ParseId1(tok[1], cols, &j)) {
      return err.At(lines.line_no(),
                    BadIndexReason(tok[1], "column index", cols));
    }
    ++entries;
    if (field == Field::kPattern) {
      el.Add(i, j);
      if (symmetric && i != j) el.Add(j, i);
      continue;
    }
    Weight w;
    if (field == Field::kInteger) {
      if (!ParseWeight(tok[2], &w)) {
        return err.At(lines.line_no(), BadWeightReason(tok[2]));
      }
      if (limits.reject_negative_weights && w < 0) {
        return err.At(lines.line_no(), NegativeWeight(tok[2]));
      }
    } else {
      double d;
      const char* end = tok[2].data() + tok[2].size();
      auto [ptr, ec] = std::from_chars(tok[2].data(), end, d);
      if (ptr != end || ec == std::errc::invalid_argument) {
        return err.At(lines.line_no(),
                      absl::StrCat("non-numeric token ", Quote(tok[2])));
      }
      if (ec != std::errc() || !std::isfinite(d) ||
          std::fabs(d) >= 2147483648.0) {
        return err.At(lines.line_no(), absl::StrCat("weight ", Quote(tok[2]),
                                                    " does not fit in int32"));
      }
      const double r = std::round(d);  // halves away from zero
      if (r < std::numeric_limits<Weight>::min() ||
          r > std::numeric_limits<Weight>::max()) {
        return err.At(lines.line_no(), absl::StrCat("weight ", Quote(tok[2]),
                                                    " does not fit in int32"));
      }
      w = static_cast<Weight>(r);
      if (limits.reject_negative_weights && w < 0) {
        return err.At(lines.line_no(), NegativeWeight(tok[2]));
      }
      if (r != d && !warned_rounding) {
        warned_rounding = true;
        LOG(WARNING) << path << ":" << lines.line_no()
                     << ": real weights rounded to integers (first: " << tok[2]
                     << " -> " << w << ")";
      }
    }
    el.Add(i, j, w);
    if (symmetric && i != j) el.Add(j, i, w);
  }
  if (entries < nnz) {
    return err.At(lines.line_no(),
                  absl::StrCat("expected ", nnz, " entries, found ", entries));
  }
  if (el.num_vertices == 0) return err.NoEdges();
  return el;
}

// ---------------------------------------------------------------------------
// .gr: DIMACS-9 shortest paths ("p sp N M", "a u v w") and PACE treewidth
// ("p tw N M", "u v"), both 1-based.

constexpr absl::string_view kSpHasBareEdge =
    "'p sp' (DIMACS shortest-path) file has a bare edge line; is this a PACE "
    "'p tw' file?";
constexpr absl::string_view kTwHasArc =
    "'p tw' (PACE treewidth) file has an 'a' arc line; is this a DIMACS 'p "
    "sp' file?";

inline bool StartsNumeric(absl::string_view tok) {
  return (tok[0] >= '0' && tok[0] <= '9') ||
         (tok[0] == '-' && tok.size() > 1 && tok[1] >= '0' && tok[1] <= '9');
}

absl::StatusOr<EdgeList> ReadGr(const std::string& path, absl::string_view data,
                                const Limits& limits) {
  const Errors err(path);
  LineReader lines(data);
  absl::string_view line;
  absl::string_view tok[5];
  enum class Kind { kNone, kSp, kTw };
  Kind kind = Kind::kNone;
  uint64_t n_decl = 0, m_decl = 0;
  EdgeList el;

  while (lines.Next(&line)) {
    const int n = Split(line, tok, 5);
    if (n == 0 || tok[0][0] == 'c') continue;  // blank or comment
    const uint64_t at = lines.line_no();
    if (tok[0] == "p") {
      if (kind != Kind::kNone) return err.At(at, "second 'p' line");
      if (n != 4) {
        return err.At(at, absl::StrCat("malformed 'p' line; expected 'p sp N "
                                       "M' (DIMACS) or 'p tw N M' (PACE), "
                                       "found ",
                                       n, " fields"));
      }
      if (tok[1] == "sp") {
        kind = Kind::kSp;
      } else if (tok[1] == "tw") {
        kind = Kind::kTw;
      } else {
        return err.At(at, absl::StrCat("unknown problem kind ", Quote(tok[1]),
                                       " in the 'p' line; expected 'sp' "
                                       "(DIMACS shortest paths) or 'tw' "
                                       "(PACE treewidth)"));
      }
      for (int i = 2; i < 4; ++i) {
        if (!ParseU64(tok[i], i == 2 ? &n_decl : &m_decl)) {
          return err.At(
              at, AllDigits(tok[i])
                      ? absl::StrCat("count ", Quote(tok[i]),
                                     " in the 'p' line is too large")
                      : absl::StrCat("non-numeric token ", Quote(tok[i])));
        }
      }
      constexpr uint64_t kMaxVertices = kMaxVertexId + 1;
      if (n_decl > kMaxVertices) {
        return err.At(at, absl::StrCat("the 'p' line declares ", n_decl,
                                       " vertices; at most ", kMaxVertices,
                                       " are supported"));
      }
      if (std::string why =
              TooManyVertices(n_decl, "the 'p' line declares", limits);
          !why.empty()) {
        return err.At(at, why);
      }
      const uint64_t cap = std::min<uint64_t>(m_decl, CountLines(data));
      el.src.reserve(cap);
      el.dst.reserve(cap);
      if (kind == Kind::kSp) el.weights.reserve(cap);
      continue;
    }
    if (kind == Kind::kNone) {
      return err.At(at,
                    "data before the 'p' line; expected 'c' comments, "
                    "then 'p sp N M' (DIMACS) or 'p tw N M' (PACE)");
    }
    VertexId u, v;
    if (kind == Kind::kSp) {
      if (tok[0] != "a") {
        if (StartsNumeric(tok[0])) return err.At(at, kSpHasBareEdge);
        return err.At(
            at, absl::StrCat("unexpected line starting with ", Quote(tok[0]),
                             " in a 'p sp' file; expected 'a u v "
                             "w'"));
      }
      if (n != 4) {
        return err.At(at,
                      absl::StrCat("expected 4 fields (a u v w), found ", n));
      }
      if (!ParseId1(tok[1], n_decl, &u)) {
        return err.At(at, BadIndexReason(tok[1], "vertex id", n_decl));
      }
      if (!ParseId1(tok[2], n_decl, &v)) {
        return err.At(at, BadIndexReason(tok[2], "vertex id", n_decl));
      }
      Weight w;
      if (!ParseWeight(tok[3], &w)) {
        return err.At(at, BadWeightReason(tok[3]));
      }
      if (limits.reject_negative_weights && w < 0) {
        return err.At(at, NegativeWeight(tok[3]));
      }
      el.Add(u, v, w);
    } else {
      if (tok[0] == "a") return err.At(at, kTwHasArc);
      if (!StartsNumeric(tok[0])) {
        return err.At(
            at, absl::StrCat("unexpected line starting with ", Quote(tok[0]),
                             " in a 'p tw' file; expected 'u v'"));
      }
      if (n != 2) {
        return err.At(at, absl::StrCat("expected 2 fields (u v), found ", n));
      }
      if (!ParseId1(tok[0], n_decl, &u)) {
        return err.At(at, BadIndexReason(tok[0], "vertex id", n_decl));
      }
      if (!ParseId1(tok[1], n_decl, &v)) {
        return err.At(at, BadIndexReason(tok[1], "vertex id", n_decl));
      }
      el.Add(u, v);
    }
  }
  if (kind == Kind::kNone) {
    return err.At(lines.line_no(),
                  "no 'p' line found; expected 'p sp N M' (DIMACS) or "
                  "'p tw N M' (PACE)");
  }
  if (el.num_arcs() != m_decl) {
    return err.At(lines.line_no(),
                  absl::StrCat("header declares ", m_decl,
                               kind == Kind::kSp ? " arcs" : " edges",
                               ", found ", el.num_arcs()));
  }
  el.num_vertices = n_decl;
  el.undirected = kind == Kind::kTw;
  if (el.num_vertices == 0) return err.NoEdges();
  return el;
}

// ---------------------------------------------------------------------------
// Format selection.

enum class Format { kUnknown, kEdgeList, kWeightedEdgeList, kMtx, kGr };

Format FormatFromName(const std::string& path) {
  std::string name = absl::AsciiStrToLower(path);
  const size_t slash = name.rfind('/');
  if (slash != std::string::npos) name.erase(0, slash + 1);
  for (absl::string_view suffix : {".gz", ".xz"}) {
    if (absl::EndsWith(name, suffix)) {
      name.resize(name.size() - suffix.size());
      break;
    }
  }
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return Format::kUnknown;
  const absl::string_view ext = absl::string_view(name).substr(dot + 1);
  if (ext == "el" || ext == "txt" || ext == "tsv" || ext == "csv" ||
      ext == "snap") {
    return Format::kEdgeList;
  }
  if (ext == "wel") return Format::kWeightedEdgeList;
  if (ext == "mtx") return Format::kMtx;
  if (ext == "gr") return Format::kGr;
  return Format::kUnknown;
}

bool HasMatrixMarketBanner(absl::string_view data) {
  return absl::StartsWithIgnoreCase(data, "%%MatrixMarket");
}

Format SniffFormat(absl::string_view data) {
  if (HasMatrixMarketBanner(data)) return Format::kMtx;
  LineReader lines(data);
  absl::string_view line;
  absl::string_view tok[2];
  while (lines.Next(&line)) {
    const char c = FirstChar(line);
    if (c == '\0' || c == '#' || c == '%') continue;
    const int n = Split(line, tok, 2);
    if (tok[0][0] == 'c') continue;  // DIMACS/PACE comment
    if (n >= 1 && tok[0] == "p") return Format::kGr;
    break;
  }
  return Format::kEdgeList;
}

}  // namespace

InputBound DefaultMaxInputBytes(const MemoryRoom& room) {
  InputBound bound;
  if (!room.known()) {
    bound.max_bytes = kUnknownRoomMaxInputBytes;
    bound.origin = "the default when the memory available is unknown";
  } else {
    bound.max_bytes = room.bytes / kInputShareOfRoom;
    bound.origin =
        absl::StrCat("the default: half of the ", ByteAmount(room.bytes),
                     " left by ", room.Source());
  }
  return bound;
}

absl::StatusOr<EdgeList> ReadGraphFile(const std::string& path,
                                       const ReadOptions& options) {
  // Read once, for both bounds that are not given.
  MemoryRoom room;
  if (options.memory_bytes == 0 || options.max_input_bytes == 0) {
    room = ReadMemoryRoom();
  }
  InputBound bound;
  if (options.max_input_bytes != 0) {
    bound.max_bytes = options.max_input_bytes;
  } else {
    bound = DefaultMaxInputBytes(room);
  }
  absl::StatusOr<InputText> contents = ReadInputFile(path, bound);
  if (!contents.ok()) return contents.status();
  absl::string_view data = contents->view();
  if (absl::StartsWith(data, "\xEF\xBB\xBF")) data.remove_prefix(3);  // BOM
  // Text formats have no NUL bytes: a binary file (a damaged store image,
  // say) is named as such, not parsed into nonsense arcs.
  {
    const size_t head = std::min<size_t>(data.size(), 64 * 1024);
    const void* nul = std::memchr(data.data(), '\0', head);
    if (nul != nullptr) {
      const size_t at = static_cast<const char*>(nul) - data.data();
      const uint64_t line =
          1 + std::count(data.begin(), data.begin() + at, '\n');
      return Errors(path).At(
          line, absl::StrCat("binary data (a NUL byte at offset ", at,
                             "): not a text graph file"));
    }
  }
  Limits limits{options.max_vertices, options.memory_bytes,
                "the bound the reader was given",
                options.reject_negative_weights};
  if (options.memory_bytes == 0 && room.known()) {
    // A full cgroup leaves 0 bytes: refuse rather than leave it unchecked.
    limits.memory_bytes = std::max<uint64_t>(room.bytes, 1);
    limits.memory_source = room.Source();
  }

  Format format = FormatFromName(path);
  if (format == Format::kUnknown) {
    format = SniffFormat(data);
  } else if ((format == Format::kEdgeList ||
              format == Format::kWeightedEdgeList) &&
             HasMatrixMarketBanner(data)) {
    // An edge-list reader would take the banner for a comment and the size
    // line for an arc: read what the banner says it is.
    LOG(WARNING) << path
                 << ": has a %%MatrixMarket banner; reading it as Matrix "
                    "Market despite its name";
    format = Format::kMtx;
  }
  switch (format) {
    case Format::kMtx:
      return ReadMatrixMarket(path, data, limits);
    case Format::kGr:
      return ReadGr(path, data, limits);
    case Format::kWeightedEdgeList:
      return ReadEdgeList(path, data, /*require_weights=*/true, limits);
    case Format::kEdgeList:
    case Format::kUnknown:
      break;
  }
  return ReadEdgeList(path, data, /*require_weights=*/false, limits);
}

}  // namespace dmg::store

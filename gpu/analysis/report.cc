// The probe report's JSON: a small writer (fixed key order, escaped
// strings, shortest round-trip numbers) and a small reader, as the project
// has no JSON library and the format is ours.
#include "gpu/analysis/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dmg::gpu {
namespace {

constexpr char kFormat[] = "dmg-gpu-probe";
constexpr int kVersion = 1;

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

// ---- Writing ----

// JSON has no NaN or infinity: null stands for "not measured".
std::string Num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, end);
}

// Length of the valid UTF-8 sequence at s[i], 0 if there is none (JSON
// text must be UTF-8; a stray byte becomes U+FFFD).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80       ? 1
                   : c >> 5 == 6  ? 2
                   : c >> 4 == 14 ? 3
                   : c >> 3 == 30 ? 4
                                  : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if (static_cast<unsigned char>(s[i + k]) >> 6 != 2) return 0;
  }
  return n;
}

std::string Str(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += c;
        }
    }
    ++i;
  }
  return out + "\"";
}

template <typename T>
std::string Array(const std::vector<T>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0) out += ", ";
    if constexpr (std::is_floating_point_v<T>) {
      out += Num(xs[i]);
    } else {
      out += absl::StrCat(xs[i]);
    }
  }
  return out + "]";
}

std::string Components(const std::vector<Gaussian>& gs) {
  std::string out = "[";
  for (size_t i = 0; i < gs.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", "{\"weight\": ", Num(gs[i].weight),
                    ", \"mean\": ", Num(gs[i].mean),
                    ", \"sd\": ", Num(gs[i].sd), "}");
  }
  return out + "]";
}

// Objects one key a line, two spaces an indent; values come rendered.
class Writer {
 public:
  Writer() { Open(""); }
  void Open(std::string_view key) {
    if (!first_.empty()) Key(key);
    out_ += "{";
    first_.push_back(true);
  }
  void Close() {
    first_.pop_back();
    absl::StrAppend(&out_, "\n", std::string(2 * first_.size(), ' '), "}");
  }
  void Field(std::string_view key, std::string_view value) {
    Key(key);
    out_.append(value);
  }
  std::string Finish() {
    Close();
    return std::move(out_) + "\n";
  }

 private:
  void Key(std::string_view key) {
    absl::StrAppend(&out_, first_.back() ? "" : ",", "\n",
                    std::string(2 * first_.size(), ' '), Str(key), ": ");
    first_.back() = false;
  }
  std::string out_;
  std::vector<bool> first_;  // per open object: no field yet
};

void WriteTopology(const ProbeReport& r, Writer& w) {
  const Topology& t = r.topology;
  w.Open("topology");
  w.Field("nodes", absl::StrCat(t.nodes));
  w.Field("near_cycles", Num(t.near_cycles));
  w.Field("far_cycles", Num(t.far_cycles));
  w.Field("threshold_cycles", Num(t.threshold));
  w.Field("agreement", Num(t.agreement));
  w.Open("mixture");
  w.Field("components", Components(t.mixture.components));
  w.Field("log_likelihood", Num(t.mixture.log_likelihood));
  w.Field("bic", Num(t.mixture.bic));
  w.Close();
  w.Field("sm_node", Array(t.sm_node));
  w.Field("line_home", Array(t.line_home));
  w.Field("interleave_bytes", absl::StrCat(r.interleave_bytes));
  w.Field("far_copied_to_near", r.far_copied_to_near ? "true" : "false");
  w.Field("far_second_hit_cycles", Num(r.far_second_hit_cycles));
  w.Close();
}

}  // namespace

std::string ProbeReportJson(const ProbeReport& r) {
  Writer w;
  w.Field("format", Str(kFormat));
  w.Field("version", absl::StrCat(kVersion));
  w.Open("gpu");
  w.Field("name", Str(r.gpu_name));
  w.Field("compute_major", absl::StrCat(r.compute_major));
  w.Field("compute_minor", absl::StrCat(r.compute_minor));
  w.Field("sm_clock_khz", absl::StrCat(r.sm_clock_khz));
  w.Field("memory_clock_khz", absl::StrCat(r.memory_clock_khz));
  w.Field("memory_bus_bits", absl::StrCat(r.memory_bus_bits));
  w.Field("sms", absl::StrCat(r.sms));
  w.Field("l2_bytes", absl::StrCat(r.l2_bytes));
  w.Close();
  w.Open("probe");
  w.Field("gpu_seconds", Num(r.gpu_seconds));
  w.Field("lines_sampled", absl::StrCat(r.lines_sampled));
  w.Field("line_bytes", absl::StrCat(r.line_bytes));
  w.Field("repeats", absl::StrCat(r.repeats));
  w.Close();
  w.Open("per_sm_median_cycles");
  w.Field("cold", Array(r.cold_cycles));
  w.Field("first_hit", Array(r.first_hit_cycles));
  w.Field("second_hit", Array(r.second_hit_cycles));
  w.Close();
  w.Field("dram_cycles", Num(r.dram_cycles));
  WriteTopology(r, w);
  return w.Finish();
}

absl::StatusOr<FarCopy> DetectFarCopy(const LatencyMatrix& first_hit,
                                      const LatencyMatrix& second_hit,
                                      const Topology& t) {
  const int sms = first_hit.sms, lines = first_hit.lines;
  const size_t cells = static_cast<size_t>(sms) * lines;
  if (sms <= 0 || lines <= 0 || second_hit.sms != sms ||
      second_hit.lines != lines || first_hit.cycles.size() != cells ||
      second_hit.cycles.size() != cells ||
      t.sm_node.size() != static_cast<size_t>(sms) ||
      t.line_home.size() != static_cast<size_t>(lines)) {
    return absl::InvalidArgumentError(
        absl::StrCat("far copy: first hit ", first_hit.sms, "x",
                     first_hit.lines, ", second hit ", second_hit.sms, "x",
                     second_hit.lines, " and the topology's ", t.sm_node.size(),
                     " SMs x ", t.line_home.size(), " lines do not match"));
  }
  if (t.nodes < 2) {
    return absl::InvalidArgumentError("far copy: one node, no line is far");
  }
  FarCopy fc;
  std::vector<double> far_seconds;
  int copied = 0;
  for (int s = 0; s < sms; ++s) {
    std::vector<double> near1, far1, far2;
    for (int l = 0; l < lines; ++l) {
      const bool near = t.line_home[l] == t.sm_node[s];
      (near ? near1 : far1).push_back(first_hit.at(s, l));
      if (!near) far2.push_back(second_hit.at(s, l));
    }
    if (near1.empty() || far1.empty()) continue;
    const double f2 = Median(far2);
    far_seconds.push_back(f2);
    copied += f2 < 0.5 * (Median(near1) + Median(far1));
  }
  if (far_seconds.empty()) return fc;
  fc.share = static_cast<double>(copied) / far_seconds.size();
  fc.copied = fc.share > 0.5;
  fc.second_hit_cycles = Median(far_seconds);
  return fc;
}

// ---- Reading ----

namespace {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  const Json* Find(std::string_view key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

// Recursive descent over RFC 8259 JSON, nesting bounded so a hostile file
// cannot exhaust the stack.
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  absl::StatusOr<Json> Document() {
    Json v;
    if (absl::Status st = Value(v, 0); !st.ok()) return st;
    Space();
    if (i_ != s_.size()) return Error("trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe report JSON: ", std::string(what), " at byte ", i_));
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' ||
                              s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Eat(char c) {
    Space();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool Word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }

  absl::Status Value(Json& v, int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    Space();
    if (i_ >= s_.size()) return Error("unexpected end");
    const char c = s_[i_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v.type = Json::Type::kString;
      return String(v.string);
    }
    if (Word("null")) return absl::OkStatus();  // kNull already
    if (Word("true")) {
      v.type = Json::Type::kBool;
      v.boolean = true;
      return absl::OkStatus();
    }
    if (Word("false")) {
      v.type = Json::Type::kBool;
      return absl::OkStatus();
    }
    v.type = Json::Type::kNumber;
    return Number(v.number);
  }

  absl::Status Object(Json& v, int depth) {
    v.type = Json::Type::kObject;
    ++i_;
    if (Eat('}')) return absl::OkStatus();
    do {
      Space();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"') return Error("expected a key");
      if (absl::Status st = String(key); !st.ok()) return st;
      if (!Eat(':')) return Error("expected ':'");
      v.object.emplace_back(std::move(key), Json());
      if (absl::Status st = Value(v.object.back().second, depth + 1);
          !st.ok()) {
        return st;
      }
    } while (Eat(','));
    return Eat('}') ? absl::OkStatus() : Error("expected ',' or '}'");
  }

  absl::Status Array(Json& v, int depth) {
    v.type = Json::Type::kArray;
    ++i_;
    if (Eat(']')) return absl::OkStatus();
    do {
      v.array.emplace_back();
      if (absl::Status st = Value(v.array.back(), depth + 1); !st.ok()) {
        return st;
      }
    } while (Eat(','));
    return Eat(']') ? absl::OkStatus() : Error("expected ',' or ']'");
  }

  absl::Status Number(double& out) {
    // JSON's grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return Error("expected a value");
    }
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) {
      return Error("expected digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return Error("expected an exponent");
    }
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + i_, out);
    if (ec != std::errc() || end != s_.data() + i_) {
      return Error("number out of range");
    }
    return absl::OkStatus();
  }

  absl::Status Hex4(uint32_t& out) {
    if (i_ + 4 > s_.size()) return Error("short \\u escape");
    out = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return Error("bad \\u escape");
      out = out * 16 + d;
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // A \u escape, with its low surrogate when it is a high one.
  absl::Status Unicode(std::string& out) {
    uint32_t cp = 0;
    if (absl::Status st = Hex4(cp); !st.ok()) return st;
    if (cp >= 0xd800 && cp < 0xdc00) {
      uint32_t lo = 0;
      if (!Word("\\u")) return Error("lone high surrogate");
      if (absl::Status st = Hex4(lo); !st.ok()) return st;
      if (lo < 0xdc00 || lo >= 0xe000) return Error("bad low surrogate");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xdc00 && cp < 0xe000) {
      return Error("lone low surrogate");
    }
    AppendUtf8(cp, out);
    return absl::OkStatus();
  }

  absl::Status String(std::string& out) {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in a string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      switch (const char e = s_[i_++]; e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (absl::Status st = Unicode(out); !st.ok()) return st;
          break;
        default:
          return Error("bad escape");
      }
    }
    return Error("unterminated string");
  }

  std::string_view s_;
  size_t i_ = 0;
};

std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key)
                      : absl::StrCat(std::string(path), ".", std::string(key));
}

// Reads fields out of one object, keeping the first error (with the key's
// path) so the caller checks once.
class Fields {
 public:
  Fields(const Json* obj, std::string path, absl::Status* status)
      : obj_(obj), path_(std::move(path)), status_(status) {
    if (obj_ != nullptr && obj_->type != Json::Type::kObject) {
      *status_ = absl::InvalidArgumentError(
          absl::StrCat("probe report JSON: ", path_, " is not an object"));
      obj_ = nullptr;
    }
  }
  Fields Sub(std::string_view key) {
    return Fields(Get(key), Join(path_, key), status_);
  }
  void Number(std::string_view key, double& out) {
    if (const Json* v = Get(key)) out = AsNumber(*v, key);
  }
  template <typename Int>
  void Integer(std::string_view key, Int& out) {
    if (const Json* v = Get(key)) out = AsInteger<Int>(*v, key);
  }
  void String(std::string_view key, std::string& out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (v->type != Json::Type::kString) return Fail(key, "a string");
    out = v->string;
  }
  void Bool(std::string_view key, bool& out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (v->type != Json::Type::kBool) return Fail(key, "true or false");
    out = v->boolean;
  }
  void Numbers(std::string_view key, std::vector<double>& out) {
    for (const Json* e : Elements(key)) out.push_back(AsNumber(*e, key));
  }
  void Integers(std::string_view key, std::vector<int>& out) {
    for (const Json* e : Elements(key)) out.push_back(AsInteger<int>(*e, key));
  }
  void Components(std::string_view key, std::vector<Gaussian>& out) {
    for (const Json* e : Elements(key)) {
      Fields g(e, Join(path_, key) + "[]", status_);
      Gaussian c;
      g.Number("weight", c.weight);
      g.Number("mean", c.mean);
      g.Number("sd", c.sd);
      out.push_back(c);
    }
  }

 private:
  void Fail(std::string_view key, std::string_view want) {
    if (status_->ok()) {
      *status_ = absl::InvalidArgumentError(
          absl::StrCat("probe report JSON: ", Join(path_, key), " is not ",
                       std::string(want)));
    }
  }
  const Json* Get(std::string_view key) {
    if (obj_ == nullptr) return nullptr;
    const Json* v = obj_->Find(key);
    if (v == nullptr) Fail(key, "there");
    return v;
  }
  std::vector<const Json*> Elements(std::string_view key) {
    std::vector<const Json*> out;
    const Json* v = Get(key);
    if (v == nullptr) return out;
    if (v->type != Json::Type::kArray) return Fail(key, "an array"), out;
    for (const Json& e : v->array) out.push_back(&e);
    return out;
  }
  double AsNumber(const Json& v, std::string_view key) {
    if (v.type == Json::Type::kNull) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (v.type != Json::Type::kNumber) Fail(key, "a number");
    return v.number;
  }
  template <typename Int>
  Int AsInteger(const Json& v, std::string_view key) {
    // Exact up to 2^53, which every count here stays far below. The bounds
    // are powers of two, so exact as doubles.
    using Limits = std::numeric_limits<Int>;
    if (v.type != Json::Type::kNumber || v.number != std::floor(v.number) ||
        v.number < static_cast<double>(Limits::min()) ||
        v.number >= std::ldexp(1.0, Limits::digits)) {
      Fail(key, "an integer in range");
      return 0;
    }
    return static_cast<Int>(v.number);
  }

  const Json* obj_;
  std::string path_;
  absl::Status* status_;
};

void ReadTopology(Fields f, ProbeReport& r) {
  Topology& t = r.topology;
  f.Integer("nodes", t.nodes);
  f.Number("near_cycles", t.near_cycles);
  f.Number("far_cycles", t.far_cycles);
  f.Number("threshold_cycles", t.threshold);
  f.Number("agreement", t.agreement);
  Fields m = f.Sub("mixture");
  m.Components("components", t.mixture.components);
  m.Number("log_likelihood", t.mixture.log_likelihood);
  m.Number("bic", t.mixture.bic);
  f.Integers("sm_node", t.sm_node);
  f.Integers("line_home", t.line_home);
  f.Integer("interleave_bytes", r.interleave_bytes);
  f.Bool("far_copied_to_near", r.far_copied_to_near);
  f.Number("far_second_hit_cycles", r.far_second_hit_cycles);
}

}  // namespace

absl::StatusOr<ProbeReport> ParseProbeReportJson(std::string_view json) {
  absl::StatusOr<Json> doc = Parser(json).Document();
  if (!doc.ok()) return doc.status();
  absl::Status status;
  Fields top(&*doc, "", &status);
  std::string format;
  int version = 0;
  top.String("format", format);
  top.Integer("version", version);
  if (!status.ok()) return status;
  if (format != kFormat || version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe report JSON: format \"", format, "\" version ",
                     version, ", not \"", kFormat, "\" version ", kVersion));
  }
  ProbeReport r;
  Fields gpu = top.Sub("gpu");
  gpu.String("name", r.gpu_name);
  gpu.Integer("compute_major", r.compute_major);
  gpu.Integer("compute_minor", r.compute_minor);
  gpu.Integer("sm_clock_khz", r.sm_clock_khz);
  gpu.Integer("memory_clock_khz", r.memory_clock_khz);
  gpu.Integer("memory_bus_bits", r.memory_bus_bits);
  gpu.Integer("sms", r.sms);
  gpu.Integer("l2_bytes", r.l2_bytes);
  Fields probe = top.Sub("probe");
  probe.Number("gpu_seconds", r.gpu_seconds);
  probe.Integer("lines_sampled", r.lines_sampled);
  probe.Integer("line_bytes", r.line_bytes);
  probe.Integer("repeats", r.repeats);
  Fields per_sm = top.Sub("per_sm_median_cycles");
  per_sm.Numbers("cold", r.cold_cycles);
  per_sm.Numbers("first_hit", r.first_hit_cycles);
  per_sm.Numbers("second_hit", r.second_hit_cycles);
  top.Number("dram_cycles", r.dram_cycles);
  ReadTopology(top.Sub("topology"), r);
  if (!status.ok()) return status;
  return r;
}

}  // namespace dmg::gpu

// RunProbe for a build with CUDA: builds the chains on the host, runs the
// kernels of probe.cu per SM and repeat, and turns the clock counts into
// median matrices. Every CUDA allocation is owned by a unique_ptr and every
// CUDA call's failure becomes an absl::Status with the runtime's text.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "gpu/cuda_util.h"
#include "gpu/device.h"
#include "gpu/probe.h"
#include "gpu/probe_kernels.h"

namespace dmg::gpu {
namespace {

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Allocate(size_t count, absl::string_view what) {
  void* p = nullptr;
  if (cudaError_t err = cudaMalloc(&p, count * sizeof(T)); err != cudaSuccess) {
    return CudaCheck(err, absl::StrCat("cudaMalloc of ", count * sizeof(T),
                                       " bytes (", what, ")"));
  }
  return DeviceBuffer<T>(static_cast<T*>(p));
}

absl::StatusOr<Event> CreateEvent() {
  cudaEvent_t e = nullptr;
  DMG_RETURN_IF_ERROR(CudaCheck(cudaEventCreate(&e), "cudaEventCreate"));
  return Event(e);
}

// The chains in the buffer's host image: word 0 of each sampled line
// links the sample's random order, word 1 of each of the first dense_lines
// lines links the dense run's. Each holds the device address of the next
// (`base` is the buffer's); both are cycles, so a pass ends where it began.
struct Chains {
  std::vector<uint64_t> image;         // the buffer's words
  std::vector<uint64_t> line_offsets;  // sampled column l's byte offset
  std::vector<int> sample_order;       // step i visits column order[i]
  std::vector<int> dense_order;
  uint64_t sample_start = 0;  // device address of the first load
  uint64_t dense_start = 0;
};

// Links `order` (columns of `lines`) into a cycle through word `word` of
// each line; returns the first word's device address.
uint64_t Link(std::span<const int> order, std::span<const uint64_t> lines,
              uint64_t words_per_line, uint64_t word, uint64_t base,
              std::vector<uint64_t>& image) {
  auto index = [&](int column) {
    return lines[column] * words_per_line + word;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const uint64_t next = index(order[(i + 1) % order.size()]);
    image[index(order[i])] = base + next * sizeof(uint64_t);
  }
  return base + index(order[0]) * sizeof(uint64_t);
}

// `count` distinct lines of `buffer_lines` at random, in address order.
std::vector<uint64_t> SampleLines(int count, uint64_t buffer_lines,
                                  std::mt19937_64& rng) {
  std::vector<uint64_t> sampled;
  std::uniform_int_distribution<uint64_t> pick(0, buffer_lines - 1);
  std::vector<bool> taken(buffer_lines, false);
  while (sampled.size() < static_cast<size_t>(count)) {
    const uint64_t line = pick(rng);
    if (!taken[line]) {
      taken[line] = true;
      sampled.push_back(line);
    }
  }
  std::sort(sampled.begin(), sampled.end());
  return sampled;
}

std::vector<int> Shuffled(int n, std::mt19937_64& rng) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

Chains BuildChains(const ProbeOptions& o, uint64_t base) {
  const uint64_t words_per_line = o.line_bytes / sizeof(uint64_t);
  const uint64_t buffer_lines = o.buffer_bytes / o.line_bytes;
  std::mt19937_64 rng(o.seed);
  Chains c;
  c.image.assign(buffer_lines * words_per_line, 0);
  // The walks visit lines in a random order, which no prefetcher follows;
  // the matrices' columns are in address order.
  const std::vector<uint64_t> sampled = SampleLines(o.lines, buffer_lines, rng);
  for (uint64_t line : sampled) c.line_offsets.push_back(line * o.line_bytes);
  c.sample_order = Shuffled(o.lines, rng);
  c.sample_start =
      Link(c.sample_order, sampled, words_per_line, 0, base, c.image);
  std::vector<uint64_t> dense(o.dense_lines);
  std::iota(dense.begin(), dense.end(), 0);
  c.dense_order = Shuffled(o.dense_lines, rng);
  c.dense_start = Link(c.dense_order, dense, words_per_line, 1, base, c.image);
  return c;
}

// The device state of one probe and the loop that measures a chain.
class Prober {
 public:
  Prober(const DeviceInfo& device, std::vector<int> sm_ids, int tries)
      : device_(device), sm_ids_(std::move(sm_ids)), tries_(tries) {}

  // Allocates the buffers and writes the chains (returned: the host needs
  // their orders and starts).
  absl::StatusOr<Chains> Setup(const ProbeOptions& options) {
    const uint64_t words = options.buffer_bytes / options.line_bytes *
                           options.line_bytes / sizeof(uint64_t);
    DMG_ASSIGN_OR_RETURN(chain_,
                         Allocate<uint64_t>(words, "the chained buffer"));
    Chains chains =
        BuildChains(options, reinterpret_cast<uint64_t>(chain_.get()));
    DMG_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpy(chain_.get(), chains.image.data(),
                             words * sizeof(uint64_t), cudaMemcpyHostToDevice),
                  "cudaMemcpy (the chains)"));
    // 4x the L2 evicts all of it whatever the replacement policy; 256 MiB
    // when the runtime did not say how large the L2 is.
    const uint64_t l2 =
        device_.l2_bytes > 0 ? device_.l2_bytes : uint64_t{64} << 20;
    flush_words_ = 4 * l2 / sizeof(uint64_t);
    DMG_ASSIGN_OR_RETURN(flush_,
                         Allocate<uint64_t>(flush_words_, "the L2 flush"));
    DMG_RETURN_IF_ERROR(
        CudaCheck(cudaMemset(flush_.get(), 0, flush_words_ * sizeof(uint64_t)),
                  "cudaMemset (the L2 flush)"));
    DMG_ASSIGN_OR_RETURN(claim_, Allocate<unsigned>(1, "the claim word"));
    return chains;
  }

  // `passes` walks of `steps` loads from `start`, per SM and repeat:
  // latencies laid out [pass][repeat][SM][step].
  absl::StatusOr<std::vector<uint32_t>> Measure(uint64_t start, int steps,
                                                int passes, int repeats) {
    const int sms = static_cast<int>(sm_ids_.size());
    const uint64_t pass_stride = uint64_t(repeats) * sms * steps;
    DMG_ASSIGN_OR_RETURN(DeviceBuffer<uint32_t> out,
                         Allocate<uint32_t>(passes * pass_stride, "latencies"));
    for (int r = 0; r < repeats; ++r) {
      for (int s = 0; s < sms; ++s) {
        kernels::ChaseArgs args;
        args.start = start;
        args.steps = steps;
        args.passes = passes;
        args.target_sm = static_cast<unsigned>(sm_ids_[s]);
        args.claim = claim_.get();
        args.out = out.get() + (uint64_t(r) * sms + s) * steps;
        args.pass_stride = pass_stride;
        DMG_RETURN_IF_ERROR(RunOnSm(args));
      }
    }
    std::vector<uint32_t> host(passes * pass_stride);
    DMG_RETURN_IF_ERROR(CudaCheck(
        cudaMemcpy(host.data(), out.get(), host.size() * sizeof(uint32_t),
                   cudaMemcpyDeviceToHost),
        "cudaMemcpy (latencies)"));
    return host;
  }

  int retries() const { return retries_; }

 private:
  // Flushes the L2, then launches the walk until a block lands on the SM.
  absl::Status RunOnSm(const kernels::ChaseArgs& args) {
    const int blocks = 2 * device_.sms;
    DMG_RETURN_IF_ERROR(
        CudaCheck(kernels::LaunchFlush(flush_.get(), flush_words_,
                                       4 * device_.sms, nullptr),
                  "the L2 flush kernel"));
    for (int t = 0; t < tries_; ++t) {
      DMG_RETURN_IF_ERROR(CudaCheck(
          cudaMemset(claim_.get(), 0, sizeof(unsigned)), "cudaMemset (claim)"));
      DMG_RETURN_IF_ERROR(CudaCheck(kernels::LaunchChase(args, blocks, nullptr),
                                    "the pointer-chase kernel"));
      unsigned claimed = 0;
      // Synchronous: it also surfaces a fault of the kernel here.
      DMG_RETURN_IF_ERROR(
          CudaCheck(cudaMemcpy(&claimed, claim_.get(), sizeof(claimed),
                               cudaMemcpyDeviceToHost),
                    "the pointer-chase kernel (cudaMemcpy of its claim)"));
      if (claimed != 0) return absl::OkStatus();
      ++retries_;
    }
    return absl::InternalError(
        absl::StrCat("no block of ", tries_, " launches of ", blocks,
                     " blocks ran on SM ", args.target_sm));
  }

  DeviceInfo device_;
  std::vector<int> sm_ids_;
  int tries_;
  DeviceBuffer<uint64_t> chain_;
  DeviceBuffer<uint64_t> flush_;
  uint64_t flush_words_ = 0;
  DeviceBuffer<unsigned> claim_;
  int retries_ = 0;
};

// The %smid values in use: blocks that stay resident a while, over a few
// launches, until as many ids as SMs were seen.
absl::StatusOr<std::vector<int>> FindSmIds(int sms, int tries) {
  constexpr int kWords = kernels::kMaxSmId / 32;
  DMG_ASSIGN_OR_RETURN(DeviceBuffer<unsigned> seen,
                       Allocate<unsigned>(kWords, "the SM ids seen"));
  DMG_RETURN_IF_ERROR(CudaCheck(
      cudaMemset(seen.get(), 0, kWords * sizeof(unsigned)), "cudaMemset"));
  std::vector<int> ids;
  for (int t = 0; t < tries && static_cast<int>(ids.size()) < sms; ++t) {
    DMG_RETURN_IF_ERROR(
        CudaCheck(kernels::LaunchFindSms(seen.get(), 4 * sms, nullptr),
                  "the SM id kernel"));
    unsigned words[kWords] = {};
    DMG_RETURN_IF_ERROR(CudaCheck(
        cudaMemcpy(words, seen.get(), sizeof(words), cudaMemcpyDeviceToHost),
        "the SM id kernel (cudaMemcpy of its ids)"));
    ids.clear();
    for (int id = 0; id < kernels::kMaxSmId; ++id) {
      if ((words[id / 32] >> (id % 32)) & 1u) ids.push_back(id);
    }
  }
  if (ids.empty()) return absl::InternalError("no block reported its SM id");
  if (static_cast<int>(ids.size()) < sms) {
    LOG(WARNING) << "the GPU has " << sms << " SMs, but blocks ran on "
                 << ids.size() << " only: the probe measures those";
  }
  return ids;
}

absl::StatusOr<DeviceInfo> FindDevice(int device) {
  std::string why;
  const std::vector<DeviceInfo> devices = ListDevices(&why);
  if (devices.empty()) {
    return absl::UnavailableError(absl::StrCat("no GPU: ", why));
  }
  for (const DeviceInfo& d : devices) {
    if (d.index == device) {
      if (d.sms <= 0) {
        return absl::InternalError(absl::StrCat(
            "CUDA device ", device, " (", d.name, ") reports no SM count"));
      }
      return d;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no CUDA device ", device, ": this host has ",
                   devices.size(), " (0..", devices.size() - 1, ")"));
}

double Median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  auto mid = xs.begin() + xs.size() / 2;
  std::nth_element(xs.begin(), mid, xs.end());
  return *mid;
}

// Pass `pass` of a Measure result as the [SM x column] medians.
LatencyMatrix PassMatrix(const std::vector<uint32_t>& samples, int pass,
                         int repeats, int sms, const std::vector<int>& order) {
  const size_t block = static_cast<size_t>(repeats) * sms * order.size();
  return MedianMatrix(
      std::span<const uint32_t>(samples).subspan(pass * block, block), repeats,
      sms, order);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

absl::StatusOr<ProbeMeasurement> RunProbe(int device,
                                          const ProbeOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  DMG_RETURN_IF_ERROR(CheckProbeOptions(options));
  ProbeMeasurement m;
  DMG_ASSIGN_OR_RETURN(m.device, FindDevice(device));
  m.options = options;
  DMG_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device), "cudaSetDevice"));
  DMG_ASSIGN_OR_RETURN(m.sm_ids,
                       FindSmIds(m.device.sms, options.placement_tries));
  const int sms = static_cast<int>(m.sm_ids.size());
  Prober prober(m.device, m.sm_ids, options.placement_tries);
  DMG_ASSIGN_OR_RETURN(const Chains chains, prober.Setup(options));
  m.line_offsets = chains.line_offsets;
  DMG_ASSIGN_OR_RETURN(Event begin, CreateEvent());
  DMG_ASSIGN_OR_RETURN(Event end, CreateEvent());
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventRecord(begin.get(), nullptr), "cudaEventRecord"));
  // Sampled lines: cold, first hit, second hit. Dense: cold, first hit.
  DMG_ASSIGN_OR_RETURN(
      std::vector<uint32_t> sampled,
      prober.Measure(chains.sample_start, options.lines, 3, options.repeats));
  DMG_ASSIGN_OR_RETURN(std::vector<uint32_t> dense,
                       prober.Measure(chains.dense_start, options.dense_lines,
                                      2, options.repeats));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventRecord(end.get(), nullptr), "cudaEventRecord"));
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventSynchronize(end.get()), "cudaEventSynchronize"));
  float ms = 0;
  DMG_RETURN_IF_ERROR(
      CudaCheck(cudaEventElapsedTime(&ms, begin.get(), end.get()),
                "cudaEventElapsedTime"));

  const int r = options.repeats;
  m.cold = PassMatrix(sampled, 0, r, sms, chains.sample_order);
  m.first_hit = PassMatrix(sampled, 1, r, sms, chains.sample_order);
  m.second_hit = PassMatrix(sampled, 2, r, sms, chains.sample_order);
  m.dense_cold = PassMatrix(dense, 0, r, sms, chains.dense_order);
  m.dense_first_hit = PassMatrix(dense, 1, r, sms, chains.dense_order);
  m.dram_cycles = Median(m.cold.cycles);
  m.gpu_seconds = ms / 1e3;
  m.placement_retries = prober.retries();
  m.wall_seconds = Seconds(wall_start);
  return m;
}

}  // namespace dmg::gpu

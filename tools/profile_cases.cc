// bqmm-profile: case labels and suites, sampled-row reference checks and dumps, shared
// by every operator's profiler.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>

#include "npy.h"
#include "profile.h"

namespace bqmm::profile {
namespace {

std::string label(const std::string& op, const CaseSpec& c, bool with_m) {
  std::string s = op + " " + dtype_flag_name(c.dtype);
  if (with_m) s += " M=" + std::to_string(c.m);
  s += " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
       " bs=" + std::to_string(c.block_size);
  if (c.bias) s += " bias";
  if (c.prepack) s += " prepacked";
  const std::string variant = c.variant();
  if (!variant.empty()) s += " " + variant;
  return s;
}

}  // namespace

std::string case_label(const std::string& op, const CaseSpec& c) { return label(op, c, true); }

std::string case_dir_name(const std::string& op, const CaseSpec& c) {
  std::string name;
  for (char ch : label(op, c, true)) {
    if (ch == ' ')
      name += '_';
    else if (ch != '=')
      name += ch;
  }
  return name;
}

std::string weight_key(const std::string& op, const CaseSpec& c) { return label(op, c, false); }

Status suite_shapes(const std::string& suite, std::vector<SuiteShape>* out) {
  struct NK {
    int64_t n, k;
  };
  const auto cross = [out](std::initializer_list<int64_t> ms, std::initializer_list<NK> nks) {
    out->clear();
    for (const NK& nk : nks)
      for (int64_t m : ms) out->push_back({m, nk.n, nk.k});
  };
  if (suite == "decode") {
    // Llama-3-8B's attention output / MLP up / MLP down, and Llama-3-70B's projections.
    cross({1, 2, 4, 8}, {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}, {28672, 8192}});
  } else if (suite == "prefill") {
    // Continuous-batching decode steps and prompt prefill on the decode suite's layer shapes.
    cross({16, 32, 64, 128, 256, 512, 1024, 4096},
          {{8192, 8192}, {14336, 4096}, {4096, 14336}, {28672, 8192}});
  } else {
    return Status(StatusCode::kInvalidArgument, "no shared shapes for suite \"" + suite + "\"");
  }
  return Status::Ok();
}

Status for_each_shape(const Settings& settings, const AddShape& add) {
  if (settings.suite.empty()) {
    add(settings.dtype.value_or(DType::kFloat16), *settings.m, *settings.n, *settings.k);
    return Status::Ok();
  }
  std::vector<SuiteShape> shapes;
  BQMM_RETURN_IF_ERROR(suite_shapes(settings.suite, &shapes));
  const std::vector<DType> dtypes =
      settings.dtype ? std::vector<DType>{*settings.dtype}
                     : std::vector<DType>{DType::kFloat16, DType::kBFloat16};
  for (DType d : dtypes)
    for (const SuiteShape& s : shapes) add(d, s.m, s.n, s.k);
  return Status::Ok();
}

std::vector<int64_t> sampled_rows(int64_t m) {
  constexpr int64_t kSampled = 8;
  std::vector<int64_t> rows;
  if (m <= kSampled) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
  } else {
    // Distinct because (m - 1) / (kSampled - 1) > 1.
    for (int64_t i = 0; i < kSampled; ++i) rows.push_back(i * (m - 1) / (kSampled - 1));
  }
  return rows;
}

void ReferenceRows::request(const std::vector<int64_t>& rows) {
  for (int64_t r : rows)
    if (rows_.count(r) == 0) rows_[r] = std::async(policy_, row_, r).share();
}

std::vector<double> ReferenceRows::get(const std::vector<int64_t>& rows) {
  request(rows);
  std::vector<double> out;
  for (int64_t r : rows) {
    const std::vector<double>& row = rows_.at(r).get();
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

harness::AccuracyReport compare_rows(const HostTensor& y, int64_t n,
                                     const std::vector<int64_t>& rows,
                                     const std::vector<double>& reference) {
  const size_t row_bytes = static_cast<size_t>(n) * dtype_size(y.dtype);
  HostTensor picked = HostTensor::zeros(y.dtype, Shape{static_cast<int64_t>(rows.size()), n});
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(picked.bytes.data() + i * row_bytes, y.bytes.data() + rows[i] * row_bytes,
                row_bytes);
  return harness::compare(picked, n, 0, reference);
}

HostTensor first_rows(const HostTensor& t, int64_t rows) {
  HostTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.shape[0] = rows;
  const size_t row_bytes = t.shape[0] > 0 ? t.bytes.size() / t.shape[0] : 0;
  out.bytes.assign(t.bytes.begin(), t.bytes.begin() + rows * row_bytes);
  return out;
}

Status dump_tensors(const std::string& dir, const std::vector<NamedTensor>& tensors) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kInvalidArgument, dir + ": cannot create: " + ec.message());
  for (const auto& [name, tensor] : tensors)
    BQMM_RETURN_IF_ERROR(
        npy::write(dir + "/" + name + "." + npy::file_tag(tensor->dtype) + ".npy", *tensor));
  return Status::Ok();
}

namespace {

// "762.9 GiB"
std::string short_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

// Adds `bytes` to *total; false when the sum overflows.
bool add_bytes(uint64_t bytes, uint64_t* total) {
  if (bytes > std::numeric_limits<uint64_t>::max() - *total) return false;
  *total += bytes;
  return true;
}

// Bytes of an element count of `dtype`; false when they overflow.
bool bytes_of(int64_t numel, DType dtype, uint64_t* out) {
  const uint64_t size = dtype_size(dtype);
  if (numel < 0 || static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / size)
    return false;
  *out = static_cast<uint64_t>(numel) * size;
  return true;
}

// A memory demand: its parts (name, bytes) and their overflow-checked total.
class Demand {
 public:
  void add(const std::string& name, int64_t numel, DType dtype) {
    uint64_t bytes = 0;
    overflow_ = overflow_ || !bytes_of(numel, dtype, &bytes) || !add_bytes(bytes, &total_);
    parts_ += (parts_.empty() ? "" : ", ") + name + " " + short_bytes(bytes);
  }
  void add_tensors(const std::vector<NamedView>& tensors) {
    for (const NamedView& t : tensors) {
      int64_t numel = 0;
      overflow_ = overflow_ || !t.view.shape.checked_numel(&numel);
      add(t.name, numel, t.view.dtype);
    }
  }
  std::string text() const {
    return (overflow_ ? std::string("more than 2^64 bytes") : byte_count(total_)) + ": " + parts_;
  }
  // Error when the total overflows or exceeds `limit` bytes of `memory`.
  Status check(const std::string& memory, uint64_t limit, const std::string& limit_name) const {
    if (overflow_)
      return Status(StatusCode::kInvalidArgument,
                    "the byte count of its " + memory + " (" + parts_ + ") overflows 64 bits");
    if (total_ <= limit) return Status::Ok();
    return Status(StatusCode::kInvalidArgument, "needs " + byte_count(total_) + " of " + memory +
                                                    " (" + parts_ + ") but " + limit_name +
                                                    " is " + byte_count(limit));
  }

 private:
  uint64_t total_ = 0;
  bool overflow_ = false;
  std::string parts_;
};

// Whether case `c` fits the machine: its tensors with what the profiler adds around the
// library call, counted before any allocation so that a case too large is an error
// naming the sizes, not an allocation failure half way.
Status check_memory(const OpProfiler& op, const CaseSpec& c, const CaseCheck& check,
                    const Machine& machine) {
  const std::vector<NamedView> tensors = op.call_tensors(c);
  Demand host;
  host.add_tensors(tensors);
  // The CPU emulation's K-major float copy of A (on the GPU, the dense baseline's bf16
  // copy of A is smaller).
  host.add("A as float", c.m * c.k, DType::kFloat32);
  BQMM_RETURN_IF_ERROR(host.check("host memory", machine.host_bytes, "this machine's memory"));
  if (!machine.gpu || !machine.device_free_bytes) return Status::Ok();

  // The rotated weight copies for cold-L2 timing add at most about 4x L2 on top.
  Demand device;
  device.add_tensors(tensors);
  device.add("workspace", static_cast<int64_t>(check.workspace_bytes), DType::kUInt8);
  device.add("cuBLAS baseline weight", c.n * c.k, DType::kBFloat16);
  device.add("cuBLAS baseline A", c.m * c.k, DType::kBFloat16);
  device.add("cuBLAS baseline Y", c.m * c.n, DType::kBFloat16);
  return device.check("device memory", *machine.device_free_bytes, "the GPU's free memory");
}

}  // namespace

std::string byte_count(uint64_t bytes) {
  if (bytes < 1024) return short_bytes(bytes);
  return short_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

std::string tensor_bytes_text(const std::vector<NamedView>& tensors) {
  Demand d;
  d.add_tensors(tensors);
  return d.text();
}

Status check_cases(const std::vector<OpCases>& runs, const Machine& machine) {
  for (const OpCases& run : runs) {
    for (const auto& c : run.cases) {
      const std::string label = case_label(run.op->name(), *c);
      CaseCheck check;
      Status s = run.op->check_case(*c, machine.device, &check);
      if (!s.ok()) return Status(s.code(), label + ": " + s.to_string());  // the library's error
      s = check_memory(*run.op, *c, check, machine);
      if (!s.ok()) return Status(s.code(), label + ": " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace bqmm::profile

// bqmm-profile's command line: parsing, the common settings and --help.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/env.h"
#include "profile.h"

namespace bqmm::profile {
namespace {

Status usage_error(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxBlockSize = int64_t{1} << 30;

struct DTypeName {
  const char* flag;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"fp16", DType::kFloat16}, {"bf16", DType::kBFloat16}, {"fp32", DType::kFloat32}};

const FlagSpec* find_spec(const std::vector<FlagSpec>& specs, const std::string& name) {
  for (const FlagSpec& s : specs)
    if (name == s.name) return &s;
  return nullptr;
}

// Every tensor's element count must fit in int64 (the library's 64-bit indexing).
Status check_products(int64_t m, int64_t n, int64_t k) {
  const struct {
    const char* flags;
    int64_t a, b;
  } products[] = {{"--m * --k", m, k}, {"--n * --k", n, k}, {"--m * --n", m, n}};
  for (const auto& p : products) {
    if (p.a != 0 && p.b > kInt64Max / p.a)
      return usage_error(std::string(p.flags) + ": " + std::to_string(p.a) + " * " +
                         std::to_string(p.b) + " elements overflow int64");
  }
  return Status::Ok();
}

}  // namespace

std::vector<FlagSpec> common_flags() {
  return {
      {"--op", "NAME",
       "operator: fp8 (FP8 e4m3 weights, MatMulBlockQuantizedFp8Weight) or nbits (8-bit "
       "and 4-bit integer weights, MatMulNBits); default: both for --suite smoke, else fp8"},
      {"--activation-dtype", "T",
       "fp16, bf16 (fp32 for nbits): the single "
       "case's dtype (default fp16), or restricts a suite to it"},
      {"--m", "M", "rows of A (product of its leading dims) of the single case"},
      {"--n", "N", "output features of the single case"},
      {"--k", "K", "reduction length of the single case"},
      {"--block-size", "B", "K elements per weight scale (default 128)"},
      {"--bias", nullptr, "add a bias input"},
      {"--prepack", nullptr,
       "pass the weight's prepacked scales (the layout of prepack_fp8_matmul / "
       "prepack_nbits_matmul, rotated with the weight's copies): the mixed-input GEMM reads "
       "them instead of writing them each run; other paths ignore them"},
      {"--between-kernel", nullptr,
       "put a small kernel of the profiler's own (launched plainly, 64 KiB written) before "
       "every timed run, as a model's norm before a GEMV: what a programmatic dependent "
       "launch gains or costs after another library's kernel; every time includes it"},
      {"--suite", "NAME",
       "smoke (small, every path), decode (M <= 8) or prefill (M >= 16), "
       "instead of --m/--n/--k"},
      {"--warmup", "W", "untimed runs before timing (default 10)"},
      {"--repeat", "R", "timed runs; median, p10 and p90 are reported (default 100)"},
      {"--seed", "S", "seed of the random inputs (default 1)"},
      {"--device", "D", "cuda (default; falls back to the CPU reference without a GPU) or cpu"},
      {"--json", "FILE", "write one JSON object per case to FILE (replacing it)"},
      {"--json-append", nullptr, "with --json: add the cases' lines to FILE instead of replacing it"},
      {"--dump-dir", "DIR", "write each case's inputs and output as .npy files under DIR"},
      {"--explain", nullptr, "print each case's plan and exit without running"},
      {"--sm", "SM",
       "with --explain or --device cpu: plan for compute capability SM (default: the "
       "GPU's, else 90 as the H200)"},
      {"--num-sms", "COUNT", "with --sm: the device's multiprocessor count (H200: 132)"},
      {"--help", nullptr, "print this help"},
  };
}

Status Flags::parse(int argc, char** argv, const std::vector<FlagSpec>& specs, Flags* out) {
  Flags flags;
  std::string previous;  // the flag before a stray argument, to say where it is
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      return usage_error("unexpected argument \"" + arg + "\"" +
                         (previous.empty() ? "" : " after " + previous) +
                         " (flags start with --; see --help)");
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const FlagSpec* spec = find_spec(specs, name);
    if (spec == nullptr) return usage_error(name + ": unknown flag (see --help)");
    if (flags.has(name)) return usage_error(name + ": given twice");
    std::string value;
    if (spec->value == nullptr) {
      if (eq != std::string::npos) return usage_error(name + ": takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
      value = argv[++i];
    } else {
      return usage_error(name + ": needs a value (" + spec->value + ")");
    }
    if (spec->value != nullptr && value.empty())
      return usage_error(name + ": needs a non-empty value (" + spec->value + ")");
    flags.values_[name] = value;
    previous = spec->value == nullptr ? name : name + " " + value;
  }
  *out = std::move(flags);
  return Status::Ok();
}

std::string Flags::get(const std::string& name, const std::string& fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Status Flags::get_int(const std::string& name, int64_t min, int64_t max, int64_t* value) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return Status::Ok();
  const std::string& text = it->second;
  // Digits with an optional minus sign only: strtoll alone would also take leading
  // spaces and a plus sign.
  const size_t first_digit = !text.empty() && text[0] == '-' ? 1 : 0;
  bool ok = text.size() > first_digit &&
            text.find_first_not_of("0123456789", first_digit) == std::string::npos;
  long long v = 0;
  if (ok) {
    errno = 0;
    v = std::strtoll(text.c_str(), nullptr, 10);
    ok = errno == 0 && v >= min && v <= max;
  }
  if (!ok) {
    const std::string range = max == kInt64Max
                                  ? ">= " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    return usage_error(name + ": expected an integer " + range + " but got \"" + text + "\"");
  }
  *value = v;
  return Status::Ok();
}

const char* dtype_flag_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.flag;
  return dtype_name(dtype);
}

Status read_settings(const Flags& flags, Settings* out) {
  Settings s;
  s.op = flags.get("--op");

  if (flags.has("--activation-dtype")) {
    const std::string name = flags.get("--activation-dtype");
    for (const DTypeName& d : kDTypeNames)
      if (name == d.flag) s.dtype = d.dtype;
    if (!s.dtype)
      return usage_error("--activation-dtype: expected fp16, bf16 or fp32 but got \"" + name +
                         "\"");
  }

  const std::pair<const char*, std::optional<int64_t>*> dims[] = {
      {"--m", &s.m}, {"--n", &s.n}, {"--k", &s.k}};
  for (const auto& [name, dim] : dims) {
    if (!flags.has(name)) continue;
    int64_t v = 0;
    BQMM_RETURN_IF_ERROR(flags.get_int(name, 0, kInt64Max, &v));
    *dim = v;
  }
  // Bounded so that the byte counts of the weight's blocks cannot overflow; the library
  // itself decides which sizes it takes (validate_*).
  BQMM_RETURN_IF_ERROR(flags.get_int("--block-size", 1, kMaxBlockSize, &s.block_size));
  s.bias = flags.has("--bias");
  s.prepack = flags.has("--prepack");
  s.between_kernel = flags.has("--between-kernel");

  s.suite = flags.get("--suite");
  const bool any_dim = s.m.has_value() || s.n.has_value() || s.k.has_value();
  if (!s.suite.empty()) {
    if (s.suite != "smoke" && s.suite != "decode" && s.suite != "prefill")
      return usage_error("--suite: expected smoke, decode or prefill but got \"" + s.suite + "\"");
    for (const auto& [name, dim] : dims)
      if (dim->has_value()) return usage_error(std::string(name) + ": not used with --suite");
    for (const char* flag : {"--bias", "--block-size"})
      if (s.suite == "smoke" && flags.has(flag))
        return usage_error(std::string(flag) + ": --suite smoke sets it per case itself");
  } else {
    if (!any_dim) return usage_error("give --m, --n and --k for one case, or --suite (see --help)");
    for (const auto& [name, dim] : dims)
      if (!dim->has_value())
        return usage_error(std::string(name) + ": missing (a single case needs --m, --n and --k)");
    BQMM_RETURN_IF_ERROR(check_products(*s.m, *s.n, *s.k));
  }

  int64_t warmup = s.warmup, repeat = s.repeat, seed = static_cast<int64_t>(s.seed);
  BQMM_RETURN_IF_ERROR(flags.get_int("--warmup", 0, 1000000, &warmup));
  BQMM_RETURN_IF_ERROR(flags.get_int("--repeat", 1, 1000000, &repeat));
  BQMM_RETURN_IF_ERROR(flags.get_int("--seed", 0, kInt64Max, &seed));
  s.warmup = static_cast<int>(warmup);
  s.repeat = static_cast<int>(repeat);
  s.seed = static_cast<uint64_t>(seed);

  const std::string device = flags.get("--device", "cuda");
  if (device != "cuda" && device != "cpu")
    return usage_error("--device: expected cuda or cpu but got \"" + device + "\"");
  s.cpu = device == "cpu";
  s.json_path = flags.get("--json");
  s.json_append = flags.has("--json-append");
  if (s.json_append && s.json_path.empty()) return usage_error("--json-append: needs --json FILE");
  s.dump_dir = flags.get("--dump-dir");
  s.explain = flags.has("--explain");

  if (flags.has("--sm") != flags.has("--num-sms"))
    return usage_error(flags.has("--sm") ? "--sm: needs --num-sms too" : "--num-sms: needs --sm too");
  if (flags.has("--sm")) {
    // A GPU run plans for the GPU it runs on.
    if (!s.explain && !s.cpu)
      return usage_error("--sm: describes a device for --explain or --device cpu only");
    int64_t sm = 0, num_sms = 0;
    BQMM_RETURN_IF_ERROR(flags.get_int("--sm", 10, 1000, &sm));
    BQMM_RETURN_IF_ERROR(flags.get_int("--num-sms", 1, 100000, &num_sms));
    s.device_override = DeviceInfo{static_cast<int>(sm), static_cast<int>(num_sms)};
  }
  s.print_plan = env::flag("BQMM_PRINT_PLAN");
  *out = std::move(s);
  return Status::Ok();
}

void print_usage(const std::vector<FlagSpec>& common, const std::vector<const OpProfiler*>& ops) {
  std::string names;
  for (const OpProfiler* op : ops) names += std::string(names.empty() ? "" : "|") + op->name();
  std::printf(
      "usage: bqmm-profile [--op %s] (--m M --n N --k K | --suite NAME) [flags]\n"
      "\n"
      "Checks each case against the float64 CPU reference (output poisoned with NaN, sampled\n"
      "rows) and times it with CUDA events on cold-L2 weights, next to dense cuBLAS BF16 of\n"
      "the same M, N, K. Without a CUDA device (or with --device cpu) it checks the CPU\n"
      "emulation of the dequant + GEMM path instead and times nothing on a GPU. Every case\n"
      "is first validated and planned by the library as the GPU run calls it, so a case the\n"
      "library rejects fails the same way in every mode and with --explain.\n",
      names.c_str());
  const auto print_flags = [](const std::string& title, const std::vector<FlagSpec>& flags) {
    std::printf("\n%s:\n", title.c_str());
    for (const FlagSpec& f : flags) {
      const std::string head = std::string(f.name) + (f.value ? std::string(" ") + f.value : "");
      std::printf("  %-24s %s\n", head.c_str(), f.help);
    }
  };
  print_flags("flags", common);
  for (const OpProfiler* op : ops)
    print_flags(std::string("--op ") + op->name() + " flags", op->flags());
  std::printf(
      "\n"
      "environment: BQMM_DEQUANT_SCRATCH_MIB and BQMM_GEMV_DEPENDENT_LAUNCH (the operators'\n"
      "options) apply;\n"
      "BQMM_PRINT_PLAN=1 prints each case's plan before it runs; BQMM_PLAN_OVERRIDE=key=value,...\n"
      "forces the planner's kernel choices for experiments (docs/DESIGN.md).\n"
      "exit status: 0 every case passed, 1 a case failed or could not run, 2 bad usage, or a\n"
      "case the library rejects or this machine cannot hold.\n");
}

}  // namespace bqmm::profile

// bqmm-profile: the case loop and its report (a row per case as it finishes, JSON lines,
// a summary table), and --explain.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <exception>

#include "profile.h"

namespace bqmm::profile {
namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

void JsonLine::add_raw(const std::string& key, const std::string& json_value) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + json_escape(key) + "\": " + json_value;
}
void JsonLine::add_string(const std::string& key, const std::string& value) {
  add_raw(key, "\"" + json_escape(value) + "\"");
}
void JsonLine::add_int(const std::string& key, std::optional<int64_t> value) {
  if (!value) return add_null(key);
  add_raw(key, std::to_string(*value));
}
void JsonLine::add_bool(const std::string& key, bool value) {
  add_raw(key, value ? "true" : "false");
}
void JsonLine::add_number(const std::string& key, std::optional<double> value) {
  if (!value || !std::isfinite(*value)) return add_null(key);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.8g", *value);
  add_raw(key, buf);
}
void JsonLine::add_null(const std::string& key) { add_raw(key, "null"); }

namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// `value` printed with `fmt`, or "-" when absent.
std::string optional_text(std::optional<double> value, const char* fmt) {
  return value ? format(fmt, *value) : "-";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The ratios of docs/PERF.md's "Method", from the median times.
struct Ratios {
  std::optional<double> weight_tbps;     // weight bytes / time
  std::optional<double> pct_of_copy_bw;  // weight bandwidth / measured copy bandwidth
  std::optional<double> tflops;          // 2 M N K / time
  std::optional<double> speedup_vs_cublas;
  std::optional<double> dequant_pct_of_copy_bw;
  // The same from the back-to-back times (TimingStats::back_to_back_us; graphs only).
  std::optional<double> b2b_pct_of_copy_bw;
  std::optional<double> b2b_speedup_vs_cublas;
  // The kernel's share of its floor (the pure read of its weight bytes): floor time /
  // kernel time, per run and back to back.
  std::optional<double> pct_of_floor;
  std::optional<double> b2b_pct_of_floor;
};

Ratios ratios(const CaseSpec& c, const CaseResult& r, const Gpu* gpu) {
  Ratios x;
  if (gpu == nullptr || !r.kernel) return x;
  const double seconds = r.kernel->median_us * 1e-6;
  const double copy = gpu->copy_bytes_per_second();
  x.weight_tbps = r.weight_bytes / seconds / 1e12;
  x.pct_of_copy_bw = 100 * r.weight_bytes / seconds / copy;
  x.tflops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k) /
             seconds / 1e12;
  if (r.cublas) x.speedup_vs_cublas = r.cublas->median_us / r.kernel->median_us;
  if (r.dequant)
    x.dequant_pct_of_copy_bw = 100 * r.dequant_bytes / (r.dequant->median_us * 1e-6) / copy;
  if (r.floor) x.pct_of_floor = 100 * r.floor->median_us / r.kernel->median_us;
  if (r.kernel->back_to_back_us > 0) {
    x.b2b_pct_of_copy_bw = 100 * r.weight_bytes / (r.kernel->back_to_back_us * 1e-6) / copy;
    if (r.cublas && r.cublas->back_to_back_us > 0)
      x.b2b_speedup_vs_cublas = r.cublas->back_to_back_us / r.kernel->back_to_back_us;
    if (r.floor && r.floor->back_to_back_us > 0)
      x.b2b_pct_of_floor = 100 * r.floor->back_to_back_us / r.kernel->back_to_back_us;
  }
  return x;
}

std::optional<double> back_to_back_of(const std::optional<harness::TimingStats>& t) {
  return t && t->back_to_back_us > 0 ? std::optional<double>(t->back_to_back_us) : std::nullopt;
}

std::optional<double> median_of(const std::optional<harness::TimingStats>& t) {
  return t ? std::optional<double>(t->median_us) : std::nullopt;
}

// The line printed as soon as a case finishes.
std::string progress_row(const std::string& op, size_t index, size_t total, const CaseSpec& c,
                         const CaseResult& r, const Ratios& x, double seconds) {
  std::string s =
      format("[%*zu/%zu] ", static_cast<int>(std::to_string(total).size()), index + 1, total) +
      case_label(op, c) + ": ";
  if (!r.error.empty()) return s + "ERROR " + r.error + format(" [%.1f s]", seconds);
  s += r.path + format(", rel_err %.2e %s", r.accuracy.rel_err, r.passed() ? "PASS" : "FAIL");
  if (r.kernel) {
    s += format(", %.1f us (p10 %.1f, p90 %.1f), %.2f TB/s = %.0f%% of copy, %.2f TFLOP/s",
                r.kernel->median_us, r.kernel->p10_us, r.kernel->p90_us, *x.weight_tbps,
                *x.pct_of_copy_bw, *x.tflops);
  }
  if (r.cublas)
    s += format(", cuBLAS bf16 %.1f us (x%.2f)", r.cublas->median_us, *x.speedup_vs_cublas);
  if (x.b2b_pct_of_copy_bw) {
    s += format("; back to back %.1f us = %.0f%% of copy", r.kernel->back_to_back_us,
                *x.b2b_pct_of_copy_bw);
    if (x.b2b_speedup_vs_cublas) s += format(" (x%.2f)", *x.b2b_speedup_vs_cublas);
    if (x.b2b_pct_of_floor)
      s += format(", floor %.1f us (%.0f%%)", r.floor->back_to_back_us, *x.b2b_pct_of_floor);
  }
  if (r.dequant)
    s += format(", dequant %.1f us (%.0f%% of copy)", r.dequant->median_us,
                *x.dequant_pct_of_copy_bw);
  if (r.cpu_us) s += format(", CPU %.0f us", *r.cpu_us);
  if (!r.accuracy.passed) s += " [" + r.accuracy.to_string() + "]";
  return s + format(" [%.1f s]", seconds);
}

struct RunInfo {
  const Gpu* gpu;
  const Settings* settings;
  std::string date;
};

std::string json_row(const std::string& op, const CaseSpec& c, const CaseResult& r, const Ratios& x,
                     const RunInfo& info) {
  JsonLine j;
  j.add_string("op", op);
  j.add_string("activation_dtype", dtype_flag_name(c.dtype));
  j.add_int("m", c.m);
  j.add_int("n", c.n);
  j.add_int("k", c.k);
  j.add_int("block_size", c.block_size);
  j.add_bool("bias", c.bias);
  j.add_bool("prepacked", c.prepack);
  j.add_bool("between_kernel", info.settings->between_kernel);
  c.write_json(&j);
  if (r.path.empty()) {
    j.add_null("path");
  } else {
    j.add_string("path", r.path);
  }
  if (r.plan.empty()) {
    j.add_null("plan");
  } else {
    j.add_string("plan", r.plan);
  }
  if (r.error.empty()) {
    j.add_number("rel_err", r.accuracy.rel_err);
    j.add_number("tolerance", r.accuracy.tolerance);
    j.add_int("nan_mismatches", r.accuracy.nan_mismatches);
  } else {  // the case did not get as far as the check
    j.add_null("rel_err");
    j.add_null("tolerance");
    j.add_null("nan_mismatches");
  }
  j.add_bool("passed", r.passed());
  j.add_number("median_us", median_of(r.kernel));
  j.add_number("p10_us", r.kernel ? std::optional<double>(r.kernel->p10_us) : std::nullopt);
  j.add_number("p90_us", r.kernel ? std::optional<double>(r.kernel->p90_us) : std::nullopt);
  j.add_number("weight_bytes", r.weight_bytes);
  j.add_number("weight_tbps", x.weight_tbps);
  j.add_number("pct_of_copy_bw", x.pct_of_copy_bw);
  j.add_number("tflops", x.tflops);
  j.add_number("cublas_bf16_us", median_of(r.cublas));
  j.add_number("speedup_vs_cublas", x.speedup_vs_cublas);
  j.add_number("b2b_us", back_to_back_of(r.kernel));
  j.add_number("b2b_pct_of_copy_bw", x.b2b_pct_of_copy_bw);
  j.add_number("cublas_bf16_b2b_us", back_to_back_of(r.cublas));
  j.add_number("b2b_speedup_vs_cublas", x.b2b_speedup_vs_cublas);
  j.add_number("floor_us", median_of(r.floor));
  j.add_number("floor_b2b_us", back_to_back_of(r.floor));
  j.add_number("pct_of_floor", x.pct_of_floor);
  j.add_number("b2b_pct_of_floor", x.b2b_pct_of_floor);
  j.add_number("dequant_us", median_of(r.dequant));
  j.add_number("dequant_pct_of_copy_bw", x.dequant_pct_of_copy_bw);
  j.add_number("cpu_us", r.cpu_us);
  if (const Gpu* gpu = info.gpu) {
    j.add_int("weight_copies", r.weight_copies);
    j.add_number("copy_bw_tbps", gpu->copy_bytes_per_second() / 1e12);
    j.add_int("warmup", info.settings->warmup);
    j.add_int("repeat", info.settings->repeat);
    j.add_string("device", gpu->name());
    j.add_int("sm", gpu->info().sm);
    j.add_int("num_sms", gpu->info().num_sms);
  } else {
    for (const char* key : {"weight_copies", "copy_bw_tbps", "warmup", "repeat"}) j.add_null(key);
    j.add_string("device", "cpu");
    j.add_null("sm");
    j.add_null("num_sms");
  }
  if (r.kernel) {
    j.add_bool("graphs", r.kernel->graph);
  } else {
    j.add_null("graphs");
  }
  j.add_int("seed", static_cast<int64_t>(info.settings->seed));
  j.add_string("date", info.date);
  if (r.error.empty()) {
    j.add_null("error");
  } else {
    j.add_string("error", r.error);
  }
  return j.str();
}

// A case of a run with its operator and result, in run order.
struct RunCase {
  OpProfiler* op;
  const CaseSpec* spec;
  CaseResult result;
};

void print_summary(const std::vector<RunCase>& cases, const Gpu* gpu) {
  std::printf("\nsummary (%s):\n", gpu ? "GPU medians; TB/s = weight bytes / time; % of copy "
                                         "bandwidth; speedup = cuBLAS bf16 / bqmm"
                                       : "CPU emulation only, no GPU timings");
  Table table;
  table.header = {"op",  "dtype",   "M",         "N",    "K",     "bs",      "variant",   "path",
                  "rel_err", "pass", gpu ? "median_us" : "cpu_us", "TB/s", "%copy", "TFLOP/s",
                  "cuBLAS_us", "speedup"};
  table.right_aligned = {false, false, true,  true,  true, true, false, false,
                         true,  false, true,  true,  true, true, true,  true};
  size_t passed = 0;
  for (const RunCase& rc : cases) {
    const CaseSpec& c = *rc.spec;
    const CaseResult& r = rc.result;
    const Ratios x = ratios(c, r, gpu);
    passed += r.passed() ? 1 : 0;
    // Comma separated, so that a row's cells never contain spaces.
    std::string variant;
    for (const std::string& part : {c.bias ? std::string("bias") : "", c.prepack ? std::string("prepacked") : "", c.variant()})
      if (!part.empty()) variant += (variant.empty() ? "" : " ") + part;
    std::replace(variant.begin(), variant.end(), ' ', ',');
    table.rows.push_back({
        rc.op->name(),
        dtype_flag_name(c.dtype),
        std::to_string(c.m),
        std::to_string(c.n),
        std::to_string(c.k),
        std::to_string(c.block_size),
        variant.empty() ? "-" : variant,
        r.path.empty() ? "-" : r.path,
        r.error.empty() ? format("%.2e", r.accuracy.rel_err) : "-",
        !r.error.empty() ? "ERROR" : r.passed() ? "PASS" : "FAIL",
        optional_text(gpu ? median_of(r.kernel) : r.cpu_us, "%.1f"),
        optional_text(x.weight_tbps, "%.2f"),
        optional_text(x.pct_of_copy_bw, "%.1f"),
        optional_text(x.tflops, "%.2f"),
        optional_text(median_of(r.cublas), "%.1f"),
        optional_text(x.speedup_vs_cublas, "%.2f"),
    });
  }
  std::printf("%s", format_table(table).c_str());
  std::printf("%zu of %zu cases passed\n", passed, cases.size());
}

// "--op fp8, 8 case(s)" or "--op fp8 and --op nbits, 17 case(s) (8 fp8, 9 nbits)"
std::string run_title(const std::vector<OpCases>& runs, size_t total) {
  std::string ops, counts;
  for (const OpCases& run : runs) {
    ops += std::string(ops.empty() ? "--op " : " and --op ") + run.op->name();
    counts += std::string(counts.empty() ? "" : ", ") + std::to_string(run.cases.size()) + " " +
              run.op->name();
  }
  return ops + ", " + std::to_string(total) + " case(s)" +
         (runs.size() > 1 ? " (" + counts + ")" : "");
}

// Prints how the GPU times the cases. Exit code 0, or 1 when it cannot be opened.
int open_gpu(const Settings& settings, std::unique_ptr<Gpu>* gpu) {
  const Status s = Gpu::open(settings.warmup, settings.repeat, settings.between_kernel, gpu);
  if (!s.ok()) {
    std::fprintf(stderr, "bqmm-profile: %s\n", s.to_string().c_str());
    return 1;
  }
  const Gpu& g = **gpu;
  std::printf(
      "device: %s, sm%d, %d SMs, L2 %.1f MiB; copy bandwidth %.2f TB/s (cudaMemcpyAsync "
      "device to device of %zu MiB, bytes read + written, median)\n",
      g.name().c_str(), g.info().sm, g.info().num_sms, g.l2_bytes() / 1048576.0,
      g.copy_bytes_per_second() / 1e12, g.copy_bandwidth_probe_bytes() >> 20);
  std::printf(
      "timing: CUDA events around each run, %d warm-up then median/p10/p90 of %d runs; "
      "weights rotated over copies totalling > 4x L2 (cold L2); CUDA graphs: the timed "
      "runs are one captured graph replayed behind the warm-up (JSON 'graphs'); 'back to "
      "back' (JSON b2b_*): %d chains of %d more runs in a second graph without events "
      "inside a chain, the median chain's total / runs; 'floor' (JSON floor_*): a pure read "
      "of the case's weight bytes, timed the same ways\n",
      settings.warmup, settings.repeat, harness::kBackToBackChains, settings.repeat);
  if (settings.between_kernel)
    std::printf(
        "--between-kernel: every timed run (the operator's, cuBLAS's, the floor's) follows a "
        "kernel of its own writing %zu KiB, launched plainly (JSON between_kernel)\n",
        kBetweenBytes >> 10);
  return 0;
}

}  // namespace

std::string format_table(const Table& table) {
  std::vector<size_t> widths(table.header.size());
  for (size_t col = 0; col < widths.size(); ++col) {
    widths[col] = table.header[col].size();
    for (const auto& row : table.rows) widths[col] = std::max(widths[col], row[col].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t col = 0; col < widths.size(); ++col) {
      const std::string pad(widths[col] - cells[col].size(), ' ');
      if (col > 0) s += "  ";
      s += table.right_aligned[col] ? pad + cells[col] : cells[col] + pad;
    }
    return s + "\n";
  };
  std::string out = line(table.header);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

int explain_cases(const std::vector<OpCases>& runs, const Machine& machine) {
  size_t total = 0;
  for (const OpCases& run : runs) total += run.cases.size();
  std::printf("plans for sm%d with %d SMs (%zu cases)%s\n", machine.device.sm,
              machine.device.num_sms, total,
              machine.gpu ? "" : (": " + machine.cpu_reason).c_str());
  size_t index = 0;
  for (const OpCases& run : runs) {
    for (const auto& c : run.cases) {
      CaseCheck check;
      const Status s = run.op->check_case(*c, machine.device, &check);
      if (!s.ok()) {  // check_cases has passed every case: not expected
        std::fprintf(stderr, "bqmm-profile: %s: %s\n", case_label(run.op->name(), *c).c_str(),
                     s.to_string().c_str());
        return 2;
      }
      std::printf("[%zu/%zu] %s\n  %s\n", ++index, total, case_label(run.op->name(), *c).c_str(),
                  check.plan.c_str());
      if (!check.w8a8_gemm_refusal.empty())
        std::printf("  w8a8_gemm: not taken: %s\n", check.w8a8_gemm_refusal.c_str());
      if (!check.w8a8_cublaslt_refusal.empty())
        std::printf("  w8a8_cublaslt: not taken: %s\n", check.w8a8_cublaslt_refusal.c_str());
      if (!check.mixed_gemm_refusal.empty())
        std::printf("  mixed_gemm: not taken: %s\n", check.mixed_gemm_refusal.c_str());
      if (!check.fused_gemm_refusal.empty())
        std::printf("  fused_gemm: not taken: %s\n", check.fused_gemm_refusal.c_str());
      if (!check.wgmma_refusal.empty())
        std::printf("  fused_gemm: mma.sync, not wgmma: %s\n", check.wgmma_refusal.c_str());
      if (!check.wgmma_tile_128_refusal.empty())
        std::printf("  fused_gemm: wgmma tile of 64 rows or fewer, not 128: %s\n", check.wgmma_tile_128_refusal.c_str());
    }
  }
  return 0;
}

int run_cases(const std::vector<OpCases>& runs, const Settings& settings, const Machine& machine) {
  std::vector<RunCase> cases;
  for (const OpCases& run : runs)
    for (const auto& c : run.cases) cases.push_back({run.op, c.get(), {}});

  std::FILE* json = nullptr;
  if (!settings.json_path.empty()) {
    json = std::fopen(settings.json_path.c_str(), settings.json_append ? "a" : "w");
    if (json == nullptr) {
      std::fprintf(stderr, "bqmm-profile: --json: cannot write %s\n", settings.json_path.c_str());
      return 2;
    }
  }

  std::printf("bqmm-profile: %s%s, seed %llu\n", run_title(runs, cases.size()).c_str(),
              settings.suite.empty() ? "" : (" of suite " + settings.suite).c_str(),
              static_cast<unsigned long long>(settings.seed));
  std::unique_ptr<Gpu> gpu;
  if (!machine.gpu) {
    std::printf("%s: running the CPU reference only; no kernel timings; planned for sm%d with "
                "%d SMs\n",
                machine.cpu_reason.c_str(), machine.device.sm, machine.device.num_sms);
  } else if (const int rc = open_gpu(settings, &gpu); rc != 0) {
    if (json != nullptr) std::fclose(json);
    return rc;
  }
  std::printf(
      "accuracy: float64 reference on all rows when M <= 8, else 8 rows including "
      "the first and the last\n");
  std::fflush(stdout);

  const RunInfo info{gpu.get(), &settings, utc_now()};
  uint64_t group_index = 0;
  for (size_t first = 0; first < cases.size(); ++group_index) {
    // Cases of one operator sharing a weight key share their inputs.
    OpProfiler& op = *cases[first].op;
    const std::string key = weight_key(op.name(), *cases[first].spec);
    size_t end = first, largest = first;
    for (; end < cases.size() && cases[end].op == &op &&
           weight_key(op.name(), *cases[end].spec) == key;
         ++end)
      if (cases[end].spec->m > cases[largest].spec->m) largest = end;
    const int64_t max_m = cases[largest].spec->m;

    std::printf("inputs for %s, M up to %lld: ", key.c_str(), static_cast<long long>(max_m));
    std::fflush(stdout);
    const auto load_start = std::chrono::steady_clock::now();
    Status loaded;
    try {
      loaded = op.load_group(*cases[largest].spec, max_m, settings.seed + group_index, gpu.get());
    } catch (const std::exception& e) {
      loaded = Status(StatusCode::kInternal, e.what());
    }
    std::printf("%s in %.1f s\n", loaded.ok() ? "made" : "FAILED", seconds_since(load_start));

    for (size_t i = first; i < end; ++i) {
      const CaseSpec& c = *cases[i].spec;
      CaseResult& r = cases[i].result;
      const auto start = std::chrono::steady_clock::now();
      Status s = loaded;
      if (s.ok()) {
        try {
          s = op.run_case(c, gpu.get(), settings, &r);
        } catch (const std::exception& e) {
          s = Status(StatusCode::kInternal, e.what());
        }
      }
      if (!s.ok()) r.error = s.to_string();
      const Ratios x = ratios(c, r, gpu.get());
      std::printf("%s\n",
                  progress_row(op.name(), i, cases.size(), c, r, x, seconds_since(start)).c_str());
      std::fflush(stdout);
      if (json != nullptr) {
        std::fprintf(json, "%s\n", json_row(op.name(), c, r, x, info).c_str());
        std::fflush(json);
      }
    }
    first = end;
  }
  if (json != nullptr) std::fclose(json);

  print_summary(cases, gpu.get());
  const bool all_passed = std::all_of(cases.begin(), cases.end(),
                                      [](const RunCase& rc) { return rc.result.passed(); });
  return all_passed ? 0 : 1;
}

}  // namespace bqmm::profile

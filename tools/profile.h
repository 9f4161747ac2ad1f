// bqmm-profile: what every operator's profiler shares. The command line, the case loop,
// the run of a case (device copies, the check on poisoned output, the timed runs over
// rotated weight copies, the dequantize kernel's time, the CPU emulation, the dumps), the
// reference check on sampled rows, the dense cuBLAS baseline, the table and the JSON
// lines live here; an operator (profile_fp8.cc, profile_nbits.cc) only says how to make
// its cases and inputs and how to plan and run the library on them, behind OpProfiler.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bqmm/device.h"
#include "bqmm/status.h"
#include "bqmm/tensor.h"
#include "harness/accuracy.h"
#include "harness/device_buffer.h"
#include "harness/host_tensor.h"
#include "harness/timing.h"

namespace bqmm::profile {

using harness::HostTensor;

// ------------------------------------------------------------------ command line
struct FlagSpec {
  const char* name;   // "--m"
  const char* value;  // the value's placeholder in --help ("M"), nullptr for a switch
  const char* help;
};

// The parsed command line: "--flag value", "--flag=value" and switches, each flag at
// most once, every flag one of the specs.
class Flags {
 public:
  static Status parse(int argc, char** argv, const std::vector<FlagSpec>& specs, Flags* out);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The value of `name`, or `fallback` when it was not given.
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // An integer in [min, max]; leaves *value alone when the flag was not given.
  Status get_int(const std::string& name, int64_t min, int64_t max, int64_t* value) const;

 private:
  std::map<std::string, std::string> values_;
};

// Flags every operator has.
std::vector<FlagSpec> common_flags();

// --activation-dtype spellings: fp16, bf16, fp32.
const char* dtype_flag_name(DType dtype);

// The common flags, read and checked.
struct Settings {
  std::string op;  // --op; empty when not given (see selected ops in profile_main.cc)
  std::optional<DType> dtype;  // --activation-dtype; absent: the operator's default
  std::optional<int64_t> m, n, k;
  int64_t block_size = 128;
  bool bias = false;
  bool prepack = false;  // --prepack: every case passes the weight's prepacked input
  bool between_kernel = false;  // --between-kernel: a kernel of its own before each timed call
  std::string suite;  // "smoke", "decode", "prefill"; empty for the single case
  int warmup = 10;
  int repeat = 100;
  uint64_t seed = 1;
  bool cpu = false;  // --device cpu
  std::string json_path;
  bool json_append = false;  // --json-append: add to json_path rather than replace it
  std::string dump_dir;
  bool explain = false;
  std::optional<DeviceInfo> device_override;  // --sm and --num-sms (--explain, --device cpu)
  bool print_plan = false;                    // BQMM_PRINT_PLAN=1: print each case's plan
};
Status read_settings(const Flags& flags, Settings* out);

// ------------------------------------------------------------------ JSON
// One JSON object on one line, fields in insertion order.
class JsonLine {
 public:
  void add_string(const std::string& key, const std::string& value);
  void add_int(const std::string& key, std::optional<int64_t> value);  // null if absent
  void add_bool(const std::string& key, bool value);
  void add_number(const std::string& key,
                  std::optional<double> value);  // null if absent or not finite
  void add_null(const std::string& key);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void add_raw(const std::string& key, const std::string& json_value);
  std::string body_;
};

// ------------------------------------------------------------------ cases
// One problem to profile. Operators derive from it to add their own settings.
struct CaseSpec {
  DType dtype = DType::kFloat16;
  int64_t m = 0, n = 0, k = 0;
  int64_t block_size = 128;
  bool bias = false;
  bool prepack = false;  // the call passes the weight's prepacked input (prepack_*_matmul)

  virtual ~CaseSpec() = default;
  // The operator's own settings, space separated ("w8a8"), for labels; "" for none.
  virtual std::string variant() const = 0;
  // The operator's own settings as JSON fields.
  virtual void write_json(JsonLine* line) const = 0;
};
using CaseList = std::vector<std::unique_ptr<CaseSpec>>;

// A case of an operator's CaseSpec type, with the settings every operator has.
template <typename Case>
std::unique_ptr<Case> new_case(DType dtype, int64_t m, int64_t n, int64_t k, int64_t block_size,
                               bool bias) {
  auto c = std::make_unique<Case>();
  c->dtype = dtype;
  c->m = m;
  c->n = n;
  c->k = k;
  c->block_size = block_size;
  c->bias = bias;
  return c;
}

// The fields every operator's problem type (Fp8MatMulProblem, NBitsMatMulProblem) has,
// from the case.
template <typename Problem>
Problem common_problem(const CaseSpec& c) {
  Problem p;
  p.dtype = c.dtype;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.block_size = c.block_size;
  p.has_bias = c.bias;
  p.has_prepacked = c.prepack;
  return p;
}

// "fp8 bf16 M=8 N=4096 K=4096 bs=128 bias w8a8"
std::string case_label(const std::string& op, const CaseSpec& c);
// A directory name for the case's dumps: "fp8_bf16_M8_N4096_K4096_bs128_bias_w8a8".
std::string case_dir_name(const std::string& op, const CaseSpec& c);
// Cases with the same key differ only in M and share their inputs (weights are made and
// uploaded once per key; A is made with the largest M and each case uses a prefix).
std::string weight_key(const std::string& op, const CaseSpec& c);

// Shapes of the decode and prefill suites, the same for every operator, ordered by
// (N, K) first so that cases sharing weights are adjacent. Error for other names.
struct SuiteShape {
  int64_t m, n, k;
};
Status suite_shapes(const std::string& suite, std::vector<SuiteShape>* out);

// Calls add(dtype, m, n, k) for each case that is not the operator's own: the single
// case of --m, --n and --k, or every shape of the decode or prefill suite in float16 and
// bfloat16 (or only the --activation-dtype). The smoke suite is each operator's own list.
using AddShape = std::function<void(DType dtype, int64_t m, int64_t n, int64_t k)>;
Status for_each_shape(const Settings& settings, const AddShape& add);

// `value` as its operator<< prints it (a plan: on one line).
template <typename T>
std::string to_text(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

// ------------------------------------------------------------------ GPU
// The device every case runs on: the library handle, a stream, the properties the
// timing needs and the copy bandwidth measured once per process.
class Gpu {
 public:
  // Device 0. between_kernel: time() puts launch_between_kernel before each run.
  static Status open(int warmup, int repeat, bool between_kernel, std::unique_ptr<Gpu>* out);
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const Handle& handle() const { return *handle_; }
  cudaStream_t stream() const { return stream_; }
  const std::string& name() const { return name_; }
  const DeviceInfo& info() const { return handle_->device_info(); }
  size_t l2_bytes() const { return l2_bytes_; }
  double copy_bytes_per_second() const { return copy_bandwidth_; }
  size_t copy_bandwidth_probe_bytes() const { return copy_probe_bytes_; }
  int warmup() const { return warmup_; }
  int repeat() const { return repeat_; }

  // Copies of a `bytes` working set to rotate through for cold-L2 timing.
  int copies_for(size_t bytes) const { return harness::cold_l2_copy_count(bytes, l2_bytes_); }
  // Times `run` on stream() with the process's warm-up and repeat counts (each run behind
  // launch_between_kernel where the process asked for it).
  Status time(const harness::TimedRun& run, harness::TimingStats* out) const;
  Status synchronize() const;

 private:
  Gpu() = default;
  std::unique_ptr<Handle> handle_;
  cudaStream_t stream_ = nullptr;
  std::string name_;
  size_t l2_bytes_ = 0;
  double copy_bandwidth_ = 0;
  size_t copy_probe_bytes_ = 0;
  int warmup_ = 0, repeat_ = 0;
  harness::DeviceBuffer between_;  // launch_between_kernel's output; empty without it
};

// A host tensor and the name of its dump file; null for an absent optional input.
using NamedTensor = std::pair<std::string, const HostTensor*>;

// Copies of a group's quantized weight for cold-L2 timing: one blob per copy, so that a
// run's B, scales and zero points come from the same copy, each part starting 256-byte
// aligned like a separate allocation would.
class WeightCopies {
 public:
  // Uploads `parts` (B, then its scales and zero points) into copy 0 and replicates it. An
  // absent part (null) keeps its aligned place with no bytes.
  static Status upload(const Gpu& gpu, const std::vector<NamedTensor>& parts, WeightCopies* out);
  // Part `part` of copy `copy` (modulo the count).
  const uint8_t* part(int64_t copy, size_t part) const {
    return static_cast<const uint8_t*>(copies_.copy(copy)) + offsets_[part];
  }
  int count() const { return copies_.count(); }
  // Copy `copy`'s whole blob (modulo the count) and its bytes: what the floor streams.
  const void* blob(int64_t copy) const { return copies_.copy(copy); }
  size_t blob_bytes() const { return copies_.bytes(); }

 private:
  harness::RotatingCopies copies_;
  std::vector<size_t> offsets_;  // of each part in a copy
};

// The dense cuBLAS BF16 GEMM of a case's M, N, K, timed the same way as the operator:
// the speed every quantized kernel must beat.
class DenseBaseline {
 public:
  // `a`: the group's activation ([max M, K]), converted to bf16 on the host.
  // `fill_weight` writes the bf16 [N, K] weight into device memory (operators
  // dequantize their own weight there, so the GEMM multiplies realistic values); it is
  // then replicated into enough copies for cold-L2 timing.
  using FillWeight = std::function<Status(void* weight_bf16, cudaStream_t stream)>;
  static Status create(const Gpu& gpu, const HostTensor& a, int64_t n,
                       const FillWeight& fill_weight, std::unique_ptr<DenseBaseline>* out);
  // Times the GEMM of A's first `m` rows; leaves *out empty when M, N or K is 0.
  Status time(const Gpu& gpu, int64_t m, std::optional<harness::TimingStats>* out) const;

 private:
  DenseBaseline() = default;
  int64_t n_ = 0, k_ = 0;
  harness::DeviceTensor a_;  // bf16 [max M, K]
  harness::RotatingCopies weight_;
  harness::DeviceBuffer y_;
  harness::DeviceBuffer cublas_workspace_;
};

// ------------------------------------------------------------------ accuracy
// Output rows checked against the float64 reference: all when M <= 8, else 8 spread
// evenly over [0, M) including the first and the last (the reference costs N * K per
// row, too much for every row of a prefill case).
std::vector<int64_t> sampled_rows(int64_t m);

// Reference output rows of one input group, each computed once and shared by the cases
// of the group (they use prefixes of the same A, so row r is the same for all of them).
class ReferenceRows {
 public:
  using RowFn = std::function<std::vector<double>(int64_t row)>;
  // std::launch::async computes requested rows on worker threads, overlapping the GPU
  // runs; std::launch::deferred computes them when asked for, on the asking thread, so
  // that they do not slow down a timed CPU emulation.
  ReferenceRows(RowFn row, std::launch policy) : row_(std::move(row)), policy_(policy) {}
  void request(const std::vector<int64_t>& rows);
  // The rows' reference outputs, concatenated ([rows.size(), N]).
  std::vector<double> get(const std::vector<int64_t>& rows);

 private:
  RowFn row_;
  std::launch policy_;
  std::map<int64_t, std::shared_future<std::vector<double>>> rows_;
};

// The docs/CONTRACT.md section 4 check of rows `rows` of y ([M, n]) against their concatenated
// reference outputs.
harness::AccuracyReport compare_rows(const HostTensor& y, int64_t n,
                                     const std::vector<int64_t>& rows,
                                     const std::vector<double>& reference);

// The first `rows` rows (along dimension 0) of `t`.
HostTensor first_rows(const HostTensor& t, int64_t rows);

// Writes each tensor to dir/<name>.<dtype tag>.npy, creating dir.
Status dump_tensors(const std::string& dir, const std::vector<NamedTensor>& tensors);

// The floor's kernel (tools/profile_floor.cu): reads `bytes` at `bytes_in` with the
// fastest load shape measured on the H200 and writes nothing (`sink`: 4 bytes of device
// memory it could write, practically never does).
Status launch_stream_read(const void* bytes_in, size_t bytes, int num_sms, uint32_t* sink,
                          cudaStream_t stream);

// --between-kernel's kernel (tools/profile_between.cu): writes `bytes` at `out` (kBetweenBytes
// in the profiler), launched plainly and never letting the next kernel launch early.
constexpr size_t kBetweenBytes = 64 << 10;
Status launch_between_kernel(void* out, size_t bytes, cudaStream_t stream);

// ------------------------------------------------------------------ operators
// What a case run measured.
struct CaseResult {
  std::string path;  // the plan's path name, or "cpu_emulated_dequant_gemm"
  std::string plan;  // GPU: the plan on one line (kernel choices: k_split, tma, algo, ...)
  harness::AccuracyReport accuracy;
  std::string error;                            // set when the case could not run to the end
  std::optional<harness::TimingStats> kernel;   // the operator, called as users call it
  std::optional<harness::TimingStats> cublas;   // dense cuBLAS BF16, same M, N, K
  std::optional<harness::TimingStats> dequant;  // dequant + GEMM paths: the dequantize kernel alone
  // The floor: a pure read of one weight copy's bytes (launch_stream_read), same timing.
  std::optional<harness::TimingStats> floor;
  std::optional<double> cpu_us;                 // CPU mode: the emulation's time
  double weight_bytes = 0;   // quantized weight + scales: what a decode kernel must read
  double dequant_bytes = 0;  // the dequantize kernel: weight and scales read, T written
  int weight_copies = 0;     // rotated copies of the weights (cold L2)
  bool passed() const { return error.empty() && accuracy.passed; }
};

// An input besides A and the weight (a_scale, g_idx, bias): the name of its dump file,
// its host tensor and, on the GPU, the device tensor the shared layer uploads it to.
struct OtherInput {
  std::string name;
  const HostTensor* host;
  harness::DeviceTensor* device;
};

// The inputs of the cases that differ only in M, as the operator makes them: what they
// are, their reference and CPU emulation. On the GPU the shared layer uploads them; the
// operator passes their device copies to the library.
class GroupInputs {
 public:
  virtual ~GroupInputs() = default;
  // A with the group's largest M ([max M, K]); each case uses its first M rows.
  virtual const HostTensor& a() const = 0;
  // The quantized weight, rotated over WeightCopies in this order: B, then its scales
  // (and zero points). An absent part is a null tensor.
  virtual std::vector<NamedTensor> weight() const = 0;
  // The other inputs, absent ones left out.
  virtual std::vector<OtherInput> others() = 0;
  // Row `row` of the float64 reference output; called on worker threads.
  virtual std::vector<double> reference_row(int64_t row) const = 0;
  // The library's dequantize + GEMM emulated on the CPU for A's first `m` rows, ready to
  // run, so that the time taken by the call is the emulation's alone.
  virtual std::function<HostTensor()> emulation(int64_t m) const = 0;

  // GPU only, after the uploads: the dense baseline, multiplying this weight dequantized
  // to bfloat16.
  virtual Status create_dense_baseline(const Gpu& gpu,
                                       std::unique_ptr<DenseBaseline>* out) const = 0;

  // GPU only, uploaded by the shared layer.
  harness::DeviceTensor device_a;
  WeightCopies weights;
};

// One case planned by its operator for the GPU, to be run on any weight copy (the plan
// made for copy 0 holds for every copy: they share the 256-byte alignment).
struct PlannedCase {
  std::string path;  // the plan's path name
  std::string text;  // the plan on one line
  size_t workspace_bytes = 0;
  // The dequantize + GEMM path, whose dequantize kernel is also timed alone.
  bool dequant_gemm = false;
  // Enqueues the operator on the GPU's stream as users call it, on weight copy `copy`.
  std::function<Status(int64_t copy, void* workspace, size_t workspace_bytes)> run;
  // Enqueues the plan's dequantize kernel on weight copy `copy`, writing T [N, K] to `out`.
  std::function<Status(int64_t copy, void* out)> dequantize;
};

// A tensor of a case's library call: the name of its dump file and its view.
struct NamedView {
  std::string name;
  TensorView view;
};

// Where the views of a call made before anything is allocated point: validation checks
// data pointers for null, alignment and overlap and never reads them, so placeholder
// addresses, each tensor's past the previous one's bytes and 256-byte aligned (cudaMalloc's
// alignment, which the real run's tensors also have), make validate_* see the case exactly
// as the real call. Never dereferenced.
class Placeholders {
 public:
  TensorView input(DType dtype, const Shape& shape) { return TensorView{next(dtype, shape), dtype, shape}; }
  MutableTensorView output(DType dtype, const Shape& shape) {
    return MutableTensorView{next(dtype, shape), dtype, shape};
  }

 private:
  void* next(DType dtype, const Shape& shape) {
    void* p = reinterpret_cast<void*>(next_);
    const uintptr_t bytes = static_cast<uintptr_t>(shape.numel()) * dtype_size(dtype);
    next_ += (bytes + 255) / 256 * 256 + 256;  // wraps only past 2^64 bytes in all
    return p;
  }
  uintptr_t next_ = 256;
};

// What the library says about a case before it runs.
struct CaseCheck {
  std::string plan;  // the plan on one line
  size_t workspace_bytes = 0;
  // Why the plan is not the fused GEMM (the planner's own reason, core/plan_explain.h), or
  // empty where it is (or where it is the W8A8 GEMM); --explain prints it under the plan.
  std::string fused_gemm_refusal;
  // On the fused GEMM: why not its wgmma mainloop (core/gemm_plan.h, wgmma_refusal), or
  // empty where it runs there.
  std::string wgmma_refusal;
  // On the wgmma mainloop above 64 rows: why on 64-row tiles rather than the 128-row one
  // (core/gemm_plan.h, wgmma_tile_128_refusal), or empty where it runs tile 128.
  std::string wgmma_tile_128_refusal;
  // Fp8WeightMatMul with A quantized: why not the W8A8 GEMM on FP8 tensor cores, or empty
  // where the plan is it.
  std::string w8a8_gemm_refusal;
  // Where the plan is the W8A8 GEMM: why not cuBLASLt's block-scaled FP8 GEMM.
  std::string w8a8_cublaslt_refusal;
  // Above the fused GEMM's rows, where the plan is not the mixed-input GEMM: why not.
  std::string mixed_gemm_refusal;
};

// An operator's profiler. The operator says which cases there are, makes a group's
// inputs and plans a case on them; load_group and run_case do the rest the same way for
// every operator.
class OpProfiler {
 public:
  OpProfiler();  // out of line, like the destructor: Group is defined in profile_op.cc
  virtual ~OpProfiler();
  virtual const char* name() const = 0;
  // Flags of this operator only, added to the common ones.
  virtual std::vector<FlagSpec> flags() const = 0;
  // Reads this operator's flags and BQMM_* environment options; builds the single case
  // or the suite that `settings` asks for.
  virtual Status make_cases(const Flags& flags, const Settings& settings, CaseList* out) = 0;
  // The tensors of case c's library call (A, the weight's parts, the other inputs, Y),
  // absent optional inputs left out, at Placeholders addresses.
  virtual std::vector<NamedView> call_tensors(const CaseSpec& c) const = 0;
  // Validates case `c` with the library's validate_* on call_tensors(c) and plans it for
  // `device` with the operator's options: the checks the real call makes, so that a case
  // the library rejects fails the same way in every mode, before anything runs.
  virtual Status check_case(const CaseSpec& c, const DeviceInfo& device, CaseCheck* out) = 0;

  // Makes the inputs of the cases sharing c's weight key, A with `max_m` rows (c is the
  // case of the largest M, so that an error can describe the inputs), and on the GPU
  // (`gpu` non-null) their device copies and the dense baseline.
  Status load_group(const CaseSpec& c, int64_t max_m, uint64_t seed, const Gpu* gpu);
  // Runs case `c` of the loaded group once on NaN-poisoned output and checks it; on the
  // GPU then times it (and the baselines), on the CPU times the emulation. Writes the
  // case's tensors under settings.dump_dir when it is not empty.
  Status run_case(const CaseSpec& c, const Gpu* gpu, const Settings& settings,
                  CaseResult* result);

 protected:
  // The host inputs of the cases sharing c's weight key, A with `max_m` rows.
  virtual std::unique_ptr<GroupInputs> make_inputs(const CaseSpec& c, int64_t max_m,
                                                   uint64_t seed) = 0;
  // Validates and plans case `c` on the device copies of `inputs`, writing `y` ([M, N]
  // of T), the way users call the library.
  virtual Status plan_case(const CaseSpec& c, const GroupInputs& inputs,
                           const MutableTensorView& y, const Gpu& gpu, PlannedCase* out) = 0;

 private:
  struct Group;
  // A host allocation failed while `what` for case c: the error says how large its
  // tensors are.
  Status host_memory_error(const CaseSpec& c, const std::string& what) const;
  Status run_loaded_case(const CaseSpec& c, const Gpu* gpu, const Settings& settings,
                         CaseResult* result);
  Status run_gpu(const CaseSpec& c, const Gpu& gpu, bool print_plan, HostTensor* y,
                 CaseResult* result);

  std::unique_ptr<Group> group_;
};

std::unique_ptr<OpProfiler> make_fp8_profiler();
std::unique_ptr<OpProfiler> make_nbits_profiler();

// ------------------------------------------------------------------ driver and report
// One operator's part of a run.
struct OpCases {
  OpProfiler* op;
  CaseList cases;
};

// Where the cases run, what they are planned for and the memory they may take.
struct Machine {
  bool gpu = false;         // run on CUDA device 0; else the CPU reference
  std::string cpu_reason;   // CPU mode: why ("--device cpu", "no CUDA device (...)")
  DeviceInfo device;        // what every case is validated and planned for
  uint64_t host_bytes = 0;  // physical memory
  std::optional<uint64_t> device_free_bytes;  // GPU: free device memory
};
// The H200's DeviceInfo: what CPU mode and --explain without a GPU plan for by default.
constexpr DeviceInfo kDefaultDevice{90, 132};
// Finds where `settings` runs (and, for --explain, which device it describes).
Status find_machine(const Settings& settings, Machine* out);

// Checks every case before anything runs: validated and planned through the library for
// machine.device, and its tensors' bytes (overflow-checked) within the host's memory
// and, on a GPU, the device's free memory. The error names the case.
Status check_cases(const std::vector<OpCases>& runs, const Machine& machine);

// --explain: prints each case's plan for machine.device, and under a plan that is not the
// fused GEMM the reason ("fused_gemm: not taken: typed (fractional) zero points"). Exit
// code 0, or 2 when a case has none (check_cases has already failed for it then).
int explain_cases(const std::vector<OpCases>& runs, const Machine& machine);
// Runs every case (on the GPU, or the CPU reference in CPU mode), printing a row per
// case, JSON lines and one summary table. Exit code: 0, 1 if any case failed, 2 when
// --json cannot be written.
int run_cases(const std::vector<OpCases>& runs, const Settings& settings, const Machine& machine);

// The summary table: a header and rows of cells, each column as wide as its widest cell,
// text columns left aligned and number columns right aligned.
struct Table {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;  // per column
  std::vector<std::vector<std::string>> rows;
};
std::string format_table(const Table& table);

// "762.9 GiB (819200000000 bytes)"
std::string byte_count(uint64_t bytes);
// "1.5 GiB (1610612736 bytes): a 762.9 MiB, b 16.0 MiB, ..." (overflow-checked)
std::string tensor_bytes_text(const std::vector<NamedView>& tensors);

// --help: the common flags, then each operator's own.
void print_usage(const std::vector<FlagSpec>& common, const std::vector<const OpProfiler*>& ops);

}  // namespace bqmm::profile

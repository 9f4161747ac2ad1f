// Helpers of the planner tests (tests/cpu/*_plan_test.cc), shared by both operators:
// the devices they plan for, plan() / path() of either operator's problem (its kernel
// choices forced by a PlanOverride, core/plan_override.h), overrides parsed from the
// grammar of BQMM_PLAN_OVERRIDE, a plan printed to a string, and a scope that clears
// environment variables a test sets and restores them afterwards. The tests take the
// whole namespace (using namespace testing inside bqmm).
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bqmm/device.h"
#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "bqmm/plan_parts.h"
#include "core/gemv_split.h"
#include "core/plan_override.h"

namespace bqmm::testing {

constexpr DeviceInfo kHopper{90, 132};
constexpr DeviceInfo kAmpere{80, 108};
constexpr DeviceInfo kTuring{75, 40};
constexpr int64_t kMiB = int64_t{1} << 20;

// Problems of each operator for the planner tests: float16 activations, no optional input.
inline Fp8MatMulProblem fp8_problem(int64_t m, int64_t n, int64_t k, int64_t block_size = 128,
                                    DType dtype = DType::kFloat16) {
  Fp8MatMulProblem p;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.block_size = block_size;
  return p;
}
inline NBitsMatMulProblem nbits_problem(int64_t m, int64_t n, int64_t k, int bits, int64_t block_size,
                                        DType dtype = DType::kFloat16) {
  NBitsMatMulProblem p;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.bits = bits;
  p.block_size = block_size;
  return p;
}

// Each operator's plan and options types, its planner with an override, and its name in
// the planner's messages, by its problem type.
template <typename Problem>
struct Operator;
template <>
struct Operator<Fp8MatMulProblem> {
  using Plan = Fp8MatMulPlan;
  using Options = Fp8MatMulOptions;
  static constexpr const char* kName = "Fp8WeightMatMul";
  static Status planner(const Fp8MatMulProblem& p, const DeviceInfo& d, const Options& options,
                        const PlanOverride& o, Plan* out) {
    return plan_fp8_matmul(p, d, options, o, out);
  }
};
template <>
struct Operator<NBitsMatMulProblem> {
  using Plan = NBitsMatMulPlan;
  using Options = NBitsMatMulOptions;
  static constexpr const char* kName = "NBitsMatMul";
  static Status planner(const NBitsMatMulProblem& p, const DeviceInfo& d, const Options& options,
                        const PlanOverride& o, Plan* out) {
    return plan_nbits_matmul(p, d, options, o, out);
  }
};

// The override that `text` (the BQMM_PLAN_OVERRIDE grammar, e.g. "k_split=4,lines=0")
// parses to; parsing must succeed.
inline PlanOverride parsed(const std::string& text) {
  PlanOverride o;
  const Status s = parse_plan_override(text, &o);
  EXPECT_TRUE(s.ok()) << "\"" << text << "\": " << s.to_string();
  return o;
}

// `o` with the mixed-input GEMM forced off (mixed=0): the fused GEMM's plans above 64 rows
// on SM90, for the tests of that path.
inline PlanOverride without_mixed(PlanOverride o = {}) {
  o.mixed = 0;
  return o;
}

// `o` with the fused and mixed-input GEMMs forced off (gemm=0, mixed=0): the plans M > 8
// had before them (row groups up to kGemvFusedMaxRows, then dequant + cuBLAS), for the
// tests of those paths.
inline PlanOverride without_gemm(PlanOverride o = {}) {
  o.gemm = 0;
  return without_mixed(o);
}

// The plan of `p` on `d` with options `options` and override `o`; planning must succeed.
template <typename Problem, typename Op = Operator<Problem>>
typename Op::Plan plan(const Problem& p, const DeviceInfo& d,
                       const typename Op::Options& options, const PlanOverride& o = {}) {
  typename Op::Plan out;
  const Status s = Op::planner(p, d, options, o, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

// The plan of `p` on `d` with default options and override `o`.
template <typename Problem, typename Op = Operator<Problem>>
typename Op::Plan plan(const Problem& p, const DeviceInfo& d = kHopper,
                       const PlanOverride& o = {}) {
  return plan(p, d, typename Op::Options{}, o);
}

// The path of that plan.
template <typename Problem, typename Op = Operator<Problem>>
auto path(const Problem& p, const DeviceInfo& d = kHopper, const PlanOverride& o = {}) {
  return plan(p, d, o).path;
}

// Planning `p` (Hopper, default options) with override `o` fails with InvalidArgument and
// a message containing `what`.
template <typename Problem, typename Op = Operator<Problem>>
void expect_rejected(const Problem& p, const PlanOverride& o, const std::string& what) {
  typename Op::Plan out;
  const Status s = Op::planner(p, kHopper, typename Op::Options{}, o, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << to_string(o);
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

// Each of `bad` set in field `field` of `o` (a key of the override): planning `p` fails,
// the message naming the key and the value ("plan override: tma: expected 0 or 1 but
// got 2").
template <typename Problem, typename Op = Operator<Problem>>
void expect_override_rejects(const Problem& p, PlanOverride o, int PlanOverride::*field,
                             const std::string& key, std::initializer_list<int> bad) {
  for (int value : bad) {
    SCOPED_TRACE(key + " = " + std::to_string(value));
    o.*field = value;
    expect_rejected(p, o, "plan override: " + key + ": expected ");
    expect_rejected(p, o, "but got " + std::to_string(value));
  }
}

// A -1 / 0 / 1 key of the override (`key`, field `field`) set to -2 or 2 in `o`: planning
// `p` fails, naming the key.
template <typename Problem, typename Op = Operator<Problem>>
void expect_switch_rejects_out_of_range(const Problem& p, const PlanOverride& o,
                                        int PlanOverride::*field, const std::string& key) {
  expect_override_rejects(p, o, field, key, {-2, 2});
}

// Each "key=value" of `bad` fails to parse with InvalidArgument naming the key and the
// value, and leaves the override it was given unchanged.
inline void expect_parse_rejects(const std::string& key, std::initializer_list<const char*> bad) {
  for (const char* value : bad) {
    const std::string text = key + "=" + value;
    PlanOverride o;
    o.gemv = 0;  // something set: a failed parse must not touch it
    const Status s = parse_plan_override(text, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(key + ": expected"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("\"") + value + "\""), std::string::npos)
        << s.message();
    EXPECT_EQ(to_string(o), "gemv=0") << text;
  }
}

// A -1 / 0 / 1 key of the override: "key=0" and "key=1" set its field, which defaults to
// -1; malformed values are InvalidArgument naming the key.
inline void expect_switch_parses(const std::string& key, int PlanOverride::*field) {
  EXPECT_EQ(PlanOverride{}.*field, -1) << key;
  for (int v : {0, 1}) {
    const PlanOverride o = parsed(key + "=" + std::to_string(v));
    EXPECT_EQ(o.*field, v) << key;
  }
  expect_parse_rejects(key, {"2", "-1", "on", ""});
}

// A plan as operator<< prints it (the BQMM_PRINT_PLAN / --explain line).
template <typename Plan>
std::string printed(const Plan& plan) {
  std::ostringstream os;
  os << plan;
  return os.str();
}

// A -1 / 0 / 1 key of the override and the GEMV decision it forces, with a problem where
// that decision is off by default and one where it is on.
template <typename Problem>
struct PlanSwitch {
  const char* key;
  int PlanOverride::*field;
  bool GemvConfig::*decision;
  Problem off_by_default, on_by_default;
};

// Each switch parses 0 / 1 (expect_switch_parses), defaults to -1, and flips its decision
// both ways on the given problems (Hopper), parsed and set in the struct; an empty
// override leaves the planner's choice.
template <typename Problem, size_t N>
void expect_switch_overrides(const PlanSwitch<Problem> (&switches)[N]) {
  for (const PlanSwitch<Problem>& s : switches) {
    SCOPED_TRACE(s.key);
    expect_switch_parses(s.key, s.field);
    const std::string key = s.key;
    EXPECT_FALSE(plan(s.off_by_default).gemv.*s.decision);
    EXPECT_TRUE(plan(s.off_by_default, kHopper, parsed(key + "=1")).gemv.*s.decision);
    EXPECT_TRUE(plan(s.on_by_default).gemv.*s.decision);
    EXPECT_FALSE(plan(s.on_by_default, kHopper, parsed(key + "=0")).gemv.*s.decision);
    EXPECT_TRUE(plan(s.on_by_default, kHopper, parsed("")).gemv.*s.decision);
    PlanOverride o;
    o.*s.field = 1;
    EXPECT_TRUE(plan(s.off_by_default, kHopper, o).gemv.*s.decision);
    o.*s.field = 0;
    EXPECT_FALSE(plan(s.on_by_default, kHopper, o).gemv.*s.decision);
  }
}

// The tiles key: "tiles=2" gives two tiles on a problem that has one by default,
// "tiles=1" one on a problem that has two; other values are rejected, by the parser and
// (set in the struct) by the planner.
template <typename Problem>
void expect_tiles_overridden(const Problem& one_by_default, const Problem& two_by_default) {
  EXPECT_EQ(PlanOverride{}.tiles, -1);
  EXPECT_EQ(plan(one_by_default).gemv.tiles, 1);
  EXPECT_EQ(plan(two_by_default).gemv.tiles, 2);
  EXPECT_EQ(plan(one_by_default, kHopper, parsed("tiles=2")).gemv.tiles, 2);
  EXPECT_EQ(plan(two_by_default, kHopper, parsed("tiles=1")).gemv.tiles, 1);
  expect_parse_rejects("tiles", {"0", "3", "-1", "two", ""});
  expect_override_rejects(one_by_default, PlanOverride{}, &PlanOverride::tiles, "tiles",
                          {-2, 0, 3});
}

// A two-tile plan's register bound and K split (gemv.registers, gemv.k_split), checking
// that it has two tiles; wide(k) / narrow(k): the pair at 168 / 128 registers.
template <typename Plan>
std::pair<int, int> registers_and_split(const Plan& p) {
  EXPECT_EQ(p.gemv.tiles, 2) << p;
  return {p.gemv.registers, p.gemv.k_split};
}
inline std::pair<int, int> wide(int k_split) { return {kGemvWideRegisters, k_split}; }
inline std::pair<int, int> narrow(int k_split) { return {kGemvTwoTileRegisters, k_split}; }

// The registers key: "registers=128" gives 128 on a problem that takes 168 by default,
// "registers=168" 168 on one that takes 128; other values are rejected, by the parser and
// (set in the struct) by the planner.
template <typename Problem>
void expect_registers_overridden(const Problem& wide_by_default, const Problem& narrow_by_default) {
  EXPECT_EQ(PlanOverride{}.registers, -1);
  EXPECT_EQ(plan(wide_by_default).gemv.registers, kGemvWideRegisters);
  EXPECT_EQ(plan(narrow_by_default).gemv.registers, kGemvTwoTileRegisters);
  EXPECT_EQ(plan(wide_by_default, kHopper, parsed("registers=128")).gemv.registers,
            kGemvTwoTileRegisters);
  EXPECT_EQ(plan(narrow_by_default, kHopper, parsed("registers=168")).gemv.registers,
            kGemvWideRegisters);
  expect_parse_rejects("registers",
                       {"0", "-1", "127", "160", "169", "256", "wide", "168x", ""});
  expect_override_rejects(wide_by_default, PlanOverride{}, &PlanOverride::registers,
                          "registers", {0, 64, 127, 160, 256, -2});
}

// The tensor-core GEMV's K split on a problem `p` that takes that GEMV: 1, 2, 4 and 8 are
// the plan's, set in the struct and parsed; 0 (the struct's default) leaves the planner's
// choice; other values are rejected, by the planner in the struct and by the parser
// ("k_split=0" included: the grammar has no "planner" value, leaving the key out is).
template <typename Problem>
void expect_k_split_forced(const Problem& p) {
  EXPECT_EQ(PlanOverride{}.k_split, 0);
  const int chosen = plan(p).gemv.k_split;
  EXPECT_GT(chosen, 0);
  PlanOverride o;
  for (int k_split : {1, 2, 4, 8}) {
    SCOPED_TRACE(k_split);
    o.k_split = k_split;
    EXPECT_EQ(plan(p, kHopper, o).gemv.k_split, k_split);
    EXPECT_EQ(plan(p, kHopper, parsed("k_split=" + std::to_string(k_split))).gemv.k_split,
              k_split);
  }
  o.k_split = 0;
  EXPECT_EQ(plan(p, kHopper, o).gemv.k_split, chosen);
  EXPECT_EQ(plan(p, kHopper, parsed("")).gemv.k_split, chosen);
  expect_override_rejects(p, PlanOverride{}, &PlanOverride::k_split, "k_split", {-1, 3, 32});
  expect_parse_rejects("k_split", {"0", "3", "6", "32", "-1", "x", ""});
}

// Each of `bad` as `var` makes `from_env` fail with InvalidArgument naming the variable
// and the value, leaving the options at their defaults. `var` is left unset.
template <typename Options>
void expect_env_rejects(Status (*from_env)(Options*), const char* var,
                        std::initializer_list<const char*> bad) {
  for (const char* value : bad) {
    setenv(var, value, 1);
    Options o;
    const Status s = from_env(&o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << var << "=" << value;
    EXPECT_NE(s.message().find(var), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("\"") + value + "\""), std::string::npos) << s.message();
    EXPECT_EQ(o.dequant_scratch_bytes, Options{}.dequant_scratch_bytes) << var << "=" << value;
    EXPECT_EQ(o.gemv_dependent_launch, Options{}.gemv_dependent_launch) << var << "=" << value;
  }
  unsetenv(var);
}

// Sets `var` for `from_env`: "64" is 64 MiB of scratch, an empty value leaves the
// options as they were; malformed values are InvalidArgument naming the variable and the
// value, and leave the options at their defaults. `var` is left unset.
template <typename Options>
void expect_scratch_mib_from_env(Status (*from_env)(Options*), const char* var) {
  unsetenv(var);
  Options kept;
  kept.dequant_scratch_bytes = 12345;
  ASSERT_TRUE(from_env(&kept).ok());
  EXPECT_EQ(kept.dequant_scratch_bytes, 12345);  // unset: the caller's value
  setenv(var, "", 1);
  ASSERT_TRUE(from_env(&kept).ok());
  EXPECT_EQ(kept.dequant_scratch_bytes, 12345);  // empty: as unset
  for (const auto& [value, bytes] : {std::pair<const char*, int64_t>{"64", 64 * kMiB},
                                     {"1", kMiB}, {"1024", 1024 * kMiB}}) {
    setenv(var, value, 1);
    Options o;
    const Status s = from_env(&o);
    ASSERT_TRUE(s.ok()) << var << "=" << value << ": " << s.to_string();
    EXPECT_EQ(o.dequant_scratch_bytes, bytes) << var << "=" << value;
  }
  expect_env_rejects(from_env, var, {"abc", "0", "-5", "12x", "1.5"});
}

// BQMM_GEMV_DEPENDENT_LAUNCH for `from_env`: "1" turns gemv_dependent_launch on, "0" off,
// unset or empty leaves the caller's value; anything else is InvalidArgument naming the
// variable and the value. The variable is left unset.
template <typename Options>
void expect_dependent_launch_from_env(Status (*from_env)(Options*)) {
  const char* var = "BQMM_GEMV_DEPENDENT_LAUNCH";
  unsetenv(var);
  for (const bool kept : {false, true}) {
    Options o;
    o.gemv_dependent_launch = kept;
    ASSERT_TRUE(from_env(&o).ok());
    EXPECT_EQ(o.gemv_dependent_launch, kept);  // unset: the caller's value
    setenv(var, "", 1);
    ASSERT_TRUE(from_env(&o).ok());
    EXPECT_EQ(o.gemv_dependent_launch, kept);  // empty: as unset
    unsetenv(var);
  }
  for (const auto& [value, on] : {std::pair<const char*, bool>{"1", true}, {"0", false}}) {
    setenv(var, value, 1);
    Options o;
    o.gemv_dependent_launch = !on;
    const Status s = from_env(&o);
    ASSERT_TRUE(s.ok()) << var << "=" << value << ": " << s.to_string();
    EXPECT_EQ(o.gemv_dependent_launch, on) << var << "=" << value;
  }
  expect_env_rejects(from_env, var, {"2", "-1", "yes", "on", "1x"});
}

// Unsets the named variables for its lifetime, then restores what they were.
class EnvGuard {
 public:
  explicit EnvGuard(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace bqmm::testing

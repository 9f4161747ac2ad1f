// Helpers of the planner tests (tests/cpu/*_plan_test.cc), shared by both operators:
// the devices they plan for, plan() / path() of either operator's problem, a plan printed
// to a string, and a scope that clears the environment overrides a test sets and
// restores them afterwards. The tests take the whole namespace (using namespace
// testing inside bqmm).
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

namespace bqmm::testing {

constexpr DeviceInfo kHopper{90, 132};
constexpr DeviceInfo kAmpere{80, 108};
constexpr DeviceInfo kTuring{75, 40};
constexpr int64_t kMiB = int64_t{1} << 20;

// Each operator's plan and options types and planner, by its problem type.
template <typename Problem>
struct Operator;
template <>
struct Operator<Fp8MatMulProblem> {
  using Plan = Fp8MatMulPlan;
  using Options = Fp8MatMulOptions;
  static constexpr auto planner = plan_fp8_matmul;
};
template <>
struct Operator<NBitsMatMulProblem> {
  using Plan = NBitsMatMulPlan;
  using Options = NBitsMatMulOptions;
  static constexpr auto planner = plan_nbits_matmul;
};

// The plan of `p` on `d` with options `o`; planning must succeed.
template <typename Problem, typename Op = Operator<Problem>>
typename Op::Plan plan(const Problem& p, const DeviceInfo& d = kHopper,
                       const typename Op::Options& o = typename Op::Options{}) {
  typename Op::Plan out;
  const Status s = Op::planner(p, d, o, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

// The path of that plan.
template <typename Problem, typename Op = Operator<Problem>>
auto path(const Problem& p, const DeviceInfo& d = kHopper,
          const typename Op::Options& o = typename Op::Options{}) {
  return plan(p, d, o).path;
}

// Planning `p` with options `o` fails with InvalidArgument and a message naming `what`.
template <typename Problem, typename Op = Operator<Problem>>
void expect_rejected(const Problem& p, const typename Op::Options& o, const std::string& what) {
  typename Op::Plan out;
  const Status s = Op::planner(p, kHopper, o, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

// A -1 / 0 / 1 option `field` of `o` set to -2 or 2: planning `p` fails, naming `name`.
template <typename Problem, typename Op = Operator<Problem>>
void expect_switch_rejects_out_of_range(const Problem& p, typename Op::Options o,
                                        int Op::Options::*field, const std::string& name) {
  for (int bad : {-2, 2}) {
    SCOPED_TRACE(bad);
    o.*field = bad;
    expect_rejected(p, o, name);
  }
}

// A plan as operator<< prints it (the BQMM_PRINT_PLAN / --explain line).
template <typename Plan>
std::string printed(const Plan& plan) {
  std::ostringstream os;
  os << plan;
  return os.str();
}

// Each of `bad` in `var` makes `from_env` fail with InvalidArgument naming the variable,
// and leaves `field` of fresh options at its default.
template <typename Options>
void expect_env_rejects(Status (*from_env)(Options*), const char* var, int Options::*field,
                        std::initializer_list<const char*> bad) {
  for (const char* value : bad) {
    setenv(var, value, 1);
    Options fresh;
    const Status s = from_env(&fresh);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << var << "=" << value;
    EXPECT_NE(s.message().find(var), std::string::npos) << s.message();
    EXPECT_EQ(fresh.*field, Options{}.*field) << var << "=" << value;
  }
}

// A -1 / 0 / 1 option that `from_env` reads from `var`: "0" and "1" set `field`;
// malformed values are InvalidArgument naming the variable and leave the default -1.
template <typename Options>
void expect_switch_from_env(Status (*from_env)(Options*), const char* var, int Options::*field) {
  for (int v : {0, 1}) {
    setenv(var, std::to_string(v).c_str(), 1);
    Options o;
    ASSERT_TRUE(from_env(&o).ok()) << var << "=" << v;
    EXPECT_EQ(o.*field, v) << var;
  }
  EXPECT_EQ(Options{}.*field, -1) << var;
  expect_env_rejects(from_env, var, field, {"2", "-1", "on"});
}

// The options `from_env` reads with `var` set to `value` (reading must succeed).
template <typename Options>
Options options_with_env(Status (*from_env)(Options*), const char* var, const char* value) {
  setenv(var, value, 1);
  Options o;
  const Status s = from_env(&o);
  EXPECT_TRUE(s.ok()) << var << "=" << value << ": " << s.to_string();
  return o;
}

// A -1 / 0 / 1 switch of an operator's options (read from `var`) and the plan decision it
// forces, with a problem where that decision is off by default and one where it is on.
template <typename Problem, typename Op = Operator<Problem>>
struct PlanSwitch {
  const char* var;
  int Op::Options::*option;
  bool Op::Plan::*decision;
  Problem off_by_default, on_by_default;
};

// Each switch reads 0 / 1 from its variable (expect_switch_from_env), defaults to -1, and
// flips its decision both ways on the given problems (Hopper); an empty variable is
// unset. Leaves the variables unset.
template <typename Problem, size_t N, typename Op = Operator<Problem>>
void expect_switch_overrides(Status (*from_env)(typename Op::Options*),
                             const PlanSwitch<Problem> (&switches)[N]) {
  const auto with_env = [&](const char* var, const char* value) {
    return options_with_env(from_env, var, value);
  };
  for (const PlanSwitch<Problem>& s : switches) {
    SCOPED_TRACE(s.var);
    EXPECT_EQ(typename Op::Options{}.*s.option, -1);
    expect_switch_from_env(from_env, s.var, s.option);
    EXPECT_FALSE(plan(s.off_by_default).*s.decision);
    EXPECT_TRUE(plan(s.off_by_default, kHopper, with_env(s.var, "1")).*s.decision);
    EXPECT_TRUE(plan(s.on_by_default).*s.decision);
    EXPECT_FALSE(plan(s.on_by_default, kHopper, with_env(s.var, "0")).*s.decision);
    EXPECT_TRUE(plan(s.on_by_default, kHopper, with_env(s.var, "")).*s.decision);
    unsetenv(s.var);
  }
}

// The tiles-per-warp option of an operator (read from `var`): "2" gives two tiles on a
// problem that has one by default, "1" one on a problem that has two; "" is unset; any
// other value is rejected (expect_env_rejects). Leaves the variable unset.
template <typename Problem, typename Op = Operator<Problem>>
void expect_tiles_from_env(Status (*from_env)(typename Op::Options*), const char* var,
                           const Problem& one_by_default, const Problem& two_by_default) {
  using Options = typename Op::Options;
  EXPECT_EQ(plan(one_by_default).gemv_tiles_per_warp, 1);
  EXPECT_EQ(plan(two_by_default).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(one_by_default, kHopper, options_with_env(from_env, var, "2")).gemv_tiles_per_warp, 2);
  EXPECT_EQ(plan(two_by_default, kHopper, options_with_env(from_env, var, "1")).gemv_tiles_per_warp, 1);
  EXPECT_EQ(options_with_env(from_env, var, "").gemv_tiles_per_warp, -1);
  expect_env_rejects(from_env, var, &Options::gemv_tiles_per_warp, {"0", "3", "-1", "two"});
  unsetenv(var);
}

// A two-tile plan's register bound and K split (gemv_registers, gemv_k_split), checking
// that it has two tiles; wide(k) / narrow(k): the pair at 168 / 128 registers.
template <typename Plan>
std::pair<int, int> registers_and_split(const Plan& p) {
  EXPECT_EQ(p.gemv_tiles_per_warp, 2) << p;
  return {p.gemv_registers, p.gemv_k_split};
}
inline std::pair<int, int> wide(int k_split) { return {kGemvWideRegisters, k_split}; }
inline std::pair<int, int> narrow(int k_split) { return {kGemvTwoTileRegisters, k_split}; }

// The two-tile register-bound option of an operator (read from `var`): "128" gives 128 on
// a problem that takes 168 by default, "168" 168 on one that takes 128; "" is unset; any
// other value is rejected (expect_env_rejects). Leaves the variable unset.
template <typename Problem, typename Op = Operator<Problem>>
void expect_registers_from_env(Status (*from_env)(typename Op::Options*), const char* var,
                               const Problem& wide_by_default, const Problem& narrow_by_default) {
  using Options = typename Op::Options;
  EXPECT_EQ(plan(wide_by_default).gemv_registers, kGemvWideRegisters);
  EXPECT_EQ(plan(narrow_by_default).gemv_registers, kGemvTwoTileRegisters);
  EXPECT_EQ(plan(wide_by_default, kHopper, options_with_env(from_env, var, "128")).gemv_registers,
            kGemvTwoTileRegisters);
  EXPECT_EQ(plan(narrow_by_default, kHopper, options_with_env(from_env, var, "168")).gemv_registers,
            kGemvWideRegisters);
  EXPECT_EQ(options_with_env(from_env, var, "").gemv_registers, -1);
  expect_env_rejects(from_env, var, &Options::gemv_registers,
                     {"0", "-1", "127", "160", "169", "256", "wide", "168x"});
  unsetenv(var);
}

// The tensor-core GEMV's K split of an operator (option gemv_k_split, read from `var`) on
// a problem `p` that takes that GEMV: 1, 2, 4 and 8 are the plan's, as options and from
// the environment; 0 (and an empty variable) leaves the planner's choice; other values
// are rejected, by the planner as options and by `from_env` as variables. Leaves the
// variable unset.
template <typename Problem, typename Op = Operator<Problem>>
void expect_k_split_forced(Status (*from_env)(typename Op::Options*), const char* var,
                           const Problem& p) {
  using Options = typename Op::Options;
  EXPECT_EQ(Options{}.gemv_k_split, 0);
  const int chosen = plan(p).gemv_k_split;
  Options o;
  for (int k_split : {1, 2, 4, 8}) {
    SCOPED_TRACE(k_split);
    o.gemv_k_split = k_split;
    EXPECT_EQ(plan(p, kHopper, o).gemv_k_split, k_split);
    const std::string value = std::to_string(k_split);
    EXPECT_EQ(plan(p, kHopper, options_with_env(from_env, var, value.c_str())).gemv_k_split,
              k_split);
  }
  EXPECT_EQ(plan(p, kHopper, options_with_env(from_env, var, "0")).gemv_k_split, chosen);
  EXPECT_EQ(options_with_env(from_env, var, "").gemv_k_split, 0);
  for (int bad : {-1, 3, 16}) {
    SCOPED_TRACE(bad);
    o.gemv_k_split = bad;
    expect_rejected(p, o, "gemv_k_split");
  }
  expect_env_rejects(from_env, var, &Options::gemv_k_split, {"3", "6", "16", "-1", "x"});
  unsetenv(var);
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

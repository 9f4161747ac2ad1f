// The internal plan override (src/core/plan_override.h): the grammar of
// BQMM_PLAN_OVERRIDE ("key=value[,key=value...]"), to_string, plan_override_from_env,
// check_plan_override, and the planners taking an override. The kernel choices each key
// forces are tested with the planners (tests/cpu/*_plan_test.cc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bqmm/fp8_matmul.h"
#include "bqmm/nbits_matmul.h"
#include "common/plan_testing.h"
#include "core/gemv_split.h"
#include "core/plan_override.h"

namespace bqmm {
namespace {

using namespace testing;  // NOLINT: the planner-test helpers (common/plan_testing.h)

// Every key of the grammar, its field, the values it takes, and values it does not.
struct KeyCase {
  const char* key;
  int PlanOverride::*field;
  std::vector<int> values;
  std::vector<const char*> out_of_range;
  const char* choices;  // as the messages list the values
};

const std::vector<KeyCase>& keys() {
  static const std::vector<KeyCase> k = {
      {"gemv", &PlanOverride::gemv, {0}, {"1", "-1", "2"}, "0"},
      {"fma", &PlanOverride::fma, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"algo", &PlanOverride::algo, {0, 1, 2}, {"3", "-1"}, "0, 1 or 2"},
      {"k_split", &PlanOverride::k_split, {1, 2, 4, 8, 12, 16}, {"0", "3", "32", "-1"},
       "1, 2, 4, 8, 12 or 16"},
      {"tma", &PlanOverride::tma, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"window", &PlanOverride::window, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"lines", &PlanOverride::lines, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"tiles", &PlanOverride::tiles, {1, 2}, {"0", "3", "-1"}, "1 or 2"},
      {"registers", &PlanOverride::registers, {128, 168}, {"0", "127", "160", "256", "-1"},
       "128 or 168"},
      {"gemm", &PlanOverride::gemm, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"wgmma", &PlanOverride::wgmma, {0, 1}, {"2", "-1"}, "0 or 1"},
      {"tile_m", &PlanOverride::tile_m, {16, 32, 64, 128, 256}, {"0", "8", "48", "512", "-1"},
       "16, 32, 64, 128 or 256"},
      {"gemm_k_split", &PlanOverride::gemm_k_split, {1, 2, 4, 8, 16}, {"0", "3", "32", "-1"},
       "1, 2, 4, 8 or 16"},
  };
  return k;
}

// parse_plan_override's status for `text`, with *out set to what it left.
Status parse(const std::string& text, PlanOverride* out, const char* source = "plan override") {
  return parse_plan_override(text, out, source);
}

// The message of a failed parse of `text` (InvalidArgument expected).
std::string parse_error(const std::string& text, const char* source = "plan override") {
  PlanOverride o;
  const Status s = parse(text, &o, source);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
  return s.message();
}

TEST(PlanOverride, DefaultIsEmpty) {
  const PlanOverride o;
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(to_string(o), "");
  EXPECT_EQ(o.gemv, -1);
  EXPECT_EQ(o.fma, -1);
  EXPECT_EQ(o.algo, -1);
  EXPECT_EQ(o.k_split, 0);
  EXPECT_EQ(o.tma, -1);
  EXPECT_EQ(o.window, -1);
  EXPECT_EQ(o.lines, -1);
  EXPECT_EQ(o.tiles, -1);
  EXPECT_EQ(o.registers, -1);
  EXPECT_EQ(o.gemm, -1);
  EXPECT_EQ(o.tile_m, 0);
  EXPECT_EQ(o.gemm_k_split, 0);
}

// Each key takes each of its values, and sets its field only.
TEST(PlanOverride, ParsesEveryKeyAndValue) {
  for (const KeyCase& k : keys())
    for (int v : k.values) {
      const std::string text = std::string(k.key) + "=" + std::to_string(v);
      SCOPED_TRACE(text);
      PlanOverride o;
      ASSERT_TRUE(parse(text, &o).ok());
      EXPECT_EQ(o.*k.field, v);
      EXPECT_FALSE(o.empty());
      o.*k.field = PlanOverride{}.*k.field;  // the others stay unset
      EXPECT_TRUE(o.empty()) << to_string(o);
    }
}

TEST(PlanOverride, ParsesSeveralKeys) {
  const PlanOverride o = parsed("k_split=4,lines=0,registers=168,algo=2,gemm_k_split=16,gemm=1");
  EXPECT_EQ(o.gemm, 1);
  EXPECT_EQ(o.gemm_k_split, 16);
  EXPECT_EQ(o.tile_m, 0);
  EXPECT_EQ(o.k_split, 4);
  EXPECT_EQ(o.lines, 0);
  EXPECT_EQ(o.registers, kGemvWideRegisters);
  EXPECT_EQ(o.algo, kNBitsGemvAlgoPerBlock);
  EXPECT_EQ(o.gemv, -1);
  EXPECT_EQ(o.fma, -1);
  EXPECT_EQ(o.tma, -1);
  EXPECT_EQ(o.window, -1);
  EXPECT_EQ(o.tiles, -1);
}

// Empty items are skipped: the empty string, a trailing or leading comma, doubled commas.
TEST(PlanOverride, EmptyItemsAreSkipped) {
  for (const char* text : {"", ",", ",,"}) {
    PlanOverride o;
    o.tma = 1;  // a successful parse replaces the whole override
    ASSERT_TRUE(parse(text, &o).ok()) << "\"" << text << "\"";
    EXPECT_TRUE(o.empty()) << "\"" << text << "\": " << to_string(o);
  }
  for (const char* text : {"k_split=4,", ",k_split=4", "k_split=4,,", ",,k_split=4,"}) {
    PlanOverride o;
    ASSERT_TRUE(parse(text, &o).ok()) << text;
    EXPECT_EQ(to_string(o), "k_split=4") << text;
  }
  EXPECT_EQ(to_string(parsed("tma=1,,lines=0")), "tma=1,lines=0");
}

// A successful parse replaces *out: keys it does not name go back to the planner's.
TEST(PlanOverride, ParseReplacesTheOverride) {
  PlanOverride o;
  o.gemv = 0;
  o.k_split = 2;
  ASSERT_TRUE(parse("tma=1", &o).ok());
  EXPECT_EQ(o.gemv, -1);
  EXPECT_EQ(o.k_split, 0);
  EXPECT_EQ(o.tma, 1);
}

// Values a key does not take: the message names the source, the key, its values and what
// it got, and *out is left as it was.
TEST(PlanOverride, RejectsOutOfRangeValues) {
  for (const KeyCase& k : keys())
    for (const char* bad : k.out_of_range) {
      const std::string text = std::string(k.key) + "=" + bad;
      SCOPED_TRACE(text);
      PlanOverride o;
      o.lines = 1;
      const Status s = parse(text, &o);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message(), std::string("plan override: ") + k.key + ": expected " + k.choices +
                                 " but got \"" + bad + "\"");
      EXPECT_EQ(to_string(o), "lines=1");
    }
}

// Malformed values: not a decimal integer, trailing characters, nothing, no '='.
TEST(PlanOverride, RejectsMalformedValues) {
  for (const KeyCase& k : keys()) {
    expect_parse_rejects(k.key, {"", "x", "1x", "0x1", "1.0", "1 ", "1=1", "+"});
    const std::string bare = k.key;
    EXPECT_EQ(parse_error(bare), "plan override: " + bare + ": expected " + bare + "=VALUE");
  }
  EXPECT_EQ(parse_error("k_split=four"),
            "plan override: k_split: expected 1, 2, 4, 8, 12 or 16 but got \"four\"");
  // The bad item is reported where it is, after good ones.
  const std::string later = parse_error("k_split=4,tma=on");
  EXPECT_NE(later.find("tma: expected 0 or 1 but got \"on\""), std::string::npos) << later;
}

// Unknown keys (names are lower case, whole, without spaces): the message names the key
// and lists the known ones.
TEST(PlanOverride, RejectsUnknownKeys) {
  for (const char* text : {"foo=1", "K_SPLIT=4", "ksplit=4", " k_split=4", "k_split =4",
                           "gemv_k_split=4", "=1", "overlap=1", "k_split=4,bar"}) {
    SCOPED_TRACE(text);
    const std::string m = parse_error(text);
    EXPECT_EQ(m.find("plan override: unknown key \""), 0u) << m;
    EXPECT_NE(m.find("(keys: gemv, fma, algo, k_split, tma, window, lines, tiles, registers, "
                     "gemm, wgmma, tile_m, gemm_k_split, w8a8, mixed, mixed_tile, mixed_sk, mixed_swizzle, "
                     "w8a8_cublaslt, lt_algo, w8a8_pdl, k_halves, cluster_sum, gemv_pdl)"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(parse_error("foo=1"),
            "plan override: unknown key \"foo\" (keys: gemv, fma, algo, k_split, tma, window, "
            "lines, tiles, registers, gemm, wgmma, tile_m, gemm_k_split, w8a8, mixed, mixed_tile, "
            "mixed_sk, mixed_swizzle, w8a8_cublaslt, lt_algo, w8a8_pdl, k_halves, cluster_sum, gemv_pdl)");
  EXPECT_NE(parse_error("k_split=4,bar").find("\"bar\""), std::string::npos);
}

// A key given twice is an error, whether the values agree or not, next to each other or
// not.
TEST(PlanOverride, RejectsDuplicatedKeys) {
  for (const KeyCase& k : keys()) {
    const std::string item = std::string(k.key) + "=" + std::to_string(k.values.front());
    const std::string other = std::string(k.key) + "=" + std::to_string(k.values.back());
    const std::string between = std::string(k.key) == "tiles" ? "tma=1" : "tiles=1";
    for (const std::string& text : {item + "," + item, item + "," + between + "," + other}) {
      SCOPED_TRACE(text);
      EXPECT_EQ(parse_error(text), std::string("plan override: ") + k.key + ": given twice");
    }
  }
  EXPECT_EQ(parse_error("tma=0,lines=1,tma=1"), "plan override: tma: given twice");
}

// Errors start with the source given (the variable read, for plan_override_from_env).
TEST(PlanOverride, ErrorsNameTheSource) {
  EXPECT_EQ(parse_error("tma=2", "BQMM_PLAN_OVERRIDE"),
            "BQMM_PLAN_OVERRIDE: tma: expected 0 or 1 but got \"2\"");
  EXPECT_EQ(parse_error("tma=1,tma=0", "--override"), "--override: tma: given twice");
  EXPECT_EQ(parse_error("nope=1", "X").find("X: unknown key \"nope\""), 0u);
  EXPECT_EQ(parse_error("tma=2").find("plan override: "), 0u);  // the default source
}

// to_string writes the set keys in the grammar's order; parsing it gives the override back.
TEST(PlanOverride, ToStringRoundTrips) {
  EXPECT_EQ(to_string(PlanOverride{}), "");
  PlanOverride all;
  all.gemv = 0;
  all.fma = 1;
  all.algo = 2;
  all.k_split = 8;
  all.tma = 1;
  all.window = 0;
  all.lines = 1;
  all.tiles = 2;
  all.registers = 168;
  all.gemm = 0;
  all.tile_m = 32;
  all.gemm_k_split = 2;
  const std::string text = to_string(all);
  EXPECT_EQ(text,
            "gemv=0,fma=1,algo=2,k_split=8,tma=1,window=0,lines=1,tiles=2,registers=168,gemm=0,"
            "tile_m=32,gemm_k_split=2");
  EXPECT_EQ(to_string(parsed(text)), text);
  // Any order in, the grammar's order out.
  EXPECT_EQ(to_string(parsed("registers=128,tma=0,k_split=1")), "k_split=1,tma=0,registers=128");
  // Every single key and value, and every pair of keys.
  for (const KeyCase& a : keys())
    for (int va : a.values) {
      PlanOverride o;
      o.*a.field = va;
      const std::string one = to_string(o);
      EXPECT_EQ(one, std::string(a.key) + "=" + std::to_string(va));
      const PlanOverride back = parsed(one);
      EXPECT_EQ(back.*a.field, va) << one;
      EXPECT_EQ(to_string(back), one);
      for (const KeyCase& b : keys()) {
        if (b.field == a.field) continue;
        PlanOverride two = o;
        two.*b.field = b.values.back();
        EXPECT_EQ(to_string(parsed(to_string(two))), to_string(two));
        EXPECT_EQ(parsed(to_string(two)).*b.field, b.values.back());
        EXPECT_EQ(parsed(to_string(two)).*a.field, va);
      }
    }
}

// ------------------------------------------------------------------ from the environment
class PlanOverrideEnvTest : public ::testing::Test {
 protected:
  EnvGuard env_{"BQMM_PLAN_OVERRIDE"};
};

TEST_F(PlanOverrideEnvTest, UnsetOrEmptyIsNoOverride) {
  PlanOverride o;
  o.k_split = 4;  // replaced
  ASSERT_TRUE(plan_override_from_env(&o).ok());
  EXPECT_TRUE(o.empty()) << to_string(o);
  setenv("BQMM_PLAN_OVERRIDE", "", 1);
  o.tma = 1;
  ASSERT_TRUE(plan_override_from_env(&o).ok());
  EXPECT_TRUE(o.empty()) << to_string(o);
}

TEST_F(PlanOverrideEnvTest, ReadsTheGrammar) {
  setenv("BQMM_PLAN_OVERRIDE", "k_split=4,lines=0,", 1);
  PlanOverride o;
  ASSERT_TRUE(plan_override_from_env(&o).ok());
  EXPECT_EQ(o.k_split, 4);
  EXPECT_EQ(o.lines, 0);
  EXPECT_EQ(to_string(o), "k_split=4,lines=0");
  setenv("BQMM_PLAN_OVERRIDE", "gemv=0", 1);
  ASSERT_TRUE(plan_override_from_env(&o).ok());
  EXPECT_EQ(to_string(o), "gemv=0");
}

// Malformed: InvalidArgument naming the variable and the key; *out unchanged.
TEST_F(PlanOverrideEnvTest, MalformedNamesTheVariable) {
  for (const char* bad : {"k_split=3", "tma=yes", "bogus=1", "tma=1,tma=1", "lines"}) {
    SCOPED_TRACE(bad);
    setenv("BQMM_PLAN_OVERRIDE", bad, 1);
    PlanOverride o;
    o.fma = 0;
    const Status s = plan_override_from_env(&o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().find("BQMM_PLAN_OVERRIDE: "), 0u) << s.message();
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
    EXPECT_EQ(to_string(o), "fma=0");
  }
}

// The public planners never read the variable: plans stay pure.
TEST_F(PlanOverrideEnvTest, PublicPlannersIgnoreTheVariable) {
  setenv("BQMM_PLAN_OVERRIDE", "gemv=0", 1);
  Fp8MatMulProblem f;
  f.m = 4;
  f.n = 4096;
  f.k = 4096;
  Fp8MatMulPlan fp;
  ASSERT_TRUE(plan_fp8_matmul(f, kHopper, {}, &fp).ok());
  EXPECT_EQ(fp.path, Fp8Path::kGemvMma);
  NBitsMatMulProblem n;
  n.m = 1;
  n.n = 4096;
  n.k = 4096;
  NBitsMatMulPlan np;
  ASSERT_TRUE(plan_nbits_matmul(n, kHopper, {}, &np).ok());
  EXPECT_EQ(np.path, NBitsPath::kGemv);
}

// The guard the environment tests use puts back what was set before them.
TEST(PlanOverrideEnvGuard, RestoresTheEnvironment) {
  setenv("BQMM_PLAN_OVERRIDE", "tma=1", 1);
  {
    EnvGuard guard{"BQMM_PLAN_OVERRIDE"};
    EXPECT_EQ(std::getenv("BQMM_PLAN_OVERRIDE"), nullptr);
    setenv("BQMM_PLAN_OVERRIDE", "tma=0", 1);
  }
  ASSERT_NE(std::getenv("BQMM_PLAN_OVERRIDE"), nullptr);
  EXPECT_STREQ(std::getenv("BQMM_PLAN_OVERRIDE"), "tma=1");
  unsetenv("BQMM_PLAN_OVERRIDE");
  {
    EnvGuard guard{"BQMM_PLAN_OVERRIDE"};
    setenv("BQMM_PLAN_OVERRIDE", "tma=0", 1);
  }
  EXPECT_EQ(std::getenv("BQMM_PLAN_OVERRIDE"), nullptr);
}

// ------------------------------------------------------------------ check_plan_override
TEST(CheckPlanOverride, AcceptsEveryValueOfEveryKey) {
  EXPECT_TRUE(check_plan_override(PlanOverride{}, "Op", {}).ok());
  EXPECT_TRUE(check_plan_override(PlanOverride{}, "Op", {"algo", "window"}).ok());
  for (const KeyCase& k : keys())
    for (int v : k.values) {
      PlanOverride o;
      o.*k.field = v;
      EXPECT_TRUE(check_plan_override(o, "Op", {}).ok()) << to_string(o);
      EXPECT_TRUE(check_plan_override(o, "Op", {"not_a_key"}).ok()) << to_string(o);
    }
}

// Keys that do not apply to the operator are rejected whatever their value, naming the
// key and the operator.
TEST(CheckPlanOverride, RejectsKeysThatDoNotApply) {
  for (const char* text : {"algo=0", "algo=1", "algo=2", "window=0", "window=1"}) {
    SCOPED_TRACE(text);
    const PlanOverride o = parsed(text);
    const Status s = check_plan_override(o, "Fp8WeightMatMul", {"algo", "window"});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    const std::string key = std::string(text).substr(0, std::string(text).find('='));
    EXPECT_EQ(s.message(), "plan override: " + key + " does not apply to Fp8WeightMatMul");
    EXPECT_TRUE(check_plan_override(o, "NBitsMatMul", {}).ok());
  }
  // Only the keys listed.
  EXPECT_TRUE(check_plan_override(parsed("k_split=2,tma=1,lines=0,tiles=2,registers=128,fma=0,gemv=0,"
                                         "gemm=1,tile_m=64,gemm_k_split=4"),
                                  "Fp8WeightMatMul", {"algo", "window"})
                  .ok());
  // A key that does not apply, set to a value no key takes: does not apply.
  PlanOverride bad_algo;
  bad_algo.algo = 7;
  EXPECT_EQ(check_plan_override(bad_algo, "Fp8WeightMatMul", {"algo"}).message(),
            "plan override: algo does not apply to Fp8WeightMatMul");
}

// Values set directly in the struct that the grammar would not take.
TEST(CheckPlanOverride, RejectsBadStructValues) {
  const struct {
    int PlanOverride::*field;
    int value;
    const char* message;
  } cases[] = {
      {&PlanOverride::gemv, 1, "plan override: gemv: expected 0 but got 1"},
      {&PlanOverride::gemv, -2, "plan override: gemv: expected 0 but got -2"},
      {&PlanOverride::fma, 2, "plan override: fma: expected 0 or 1 but got 2"},
      {&PlanOverride::algo, 3, "plan override: algo: expected 0, 1 or 2 but got 3"},
      {&PlanOverride::k_split, 3, "plan override: k_split: expected 1, 2, 4, 8, 12 or 16 but got 3"},
      {&PlanOverride::k_split, -1, "plan override: k_split: expected 1, 2, 4, 8, 12 or 16 but got -1"},
      {&PlanOverride::k_split, 32, "plan override: k_split: expected 1, 2, 4, 8, 12 or 16 but got 32"},
      {&PlanOverride::tma, 2, "plan override: tma: expected 0 or 1 but got 2"},
      {&PlanOverride::window, -2, "plan override: window: expected 0 or 1 but got -2"},
      {&PlanOverride::lines, 2, "plan override: lines: expected 0 or 1 but got 2"},
      {&PlanOverride::tiles, 0, "plan override: tiles: expected 1 or 2 but got 0"},
      {&PlanOverride::tiles, 3, "plan override: tiles: expected 1 or 2 but got 3"},
      {&PlanOverride::registers, 160,
       "plan override: registers: expected 128 or 168 but got 160"},
      {&PlanOverride::gemm, 2, "plan override: gemm: expected 0 or 1 but got 2"},
      {&PlanOverride::tile_m, 48, "plan override: tile_m: expected 16, 32, 64, 128 or 256 but got 48"},
      {&PlanOverride::gemm_k_split, 32,
       "plan override: gemm_k_split: expected 1, 2, 4, 8 or 16 but got 32"},
  };
  for (const auto& c : cases) {
    PlanOverride o;
    o.*c.field = c.value;
    const Status s = check_plan_override(o, "NBitsMatMul", {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
    // The planners check the same way.
    NBitsMatMulProblem n;
    n.m = 1;
    n.n = 4096;
    n.k = 4096;
    NBitsMatMulPlan np;
    EXPECT_EQ(plan_nbits_matmul(n, kHopper, {}, o, &np).message(), c.message);
    if (c.field != &PlanOverride::algo && c.field != &PlanOverride::window) {
      Fp8MatMulProblem f;
      f.m = 4;
      f.n = 4096;
      f.k = 4096;
      Fp8MatMulPlan fp;
      EXPECT_EQ(plan_fp8_matmul(f, kHopper, {}, o, &fp).message(), c.message);
    }
  }
}

// ------------------------------------------------------------------ the planners
// The public planners are the override planners with an empty override.
TEST(PlanOverridePlanners, EmptyOverrideIsThePublicPlan) {
  for (int64_t m : {1, 2, 8, 16})
    for (int64_t n : {4096, 28672}) {
      Fp8MatMulProblem f;
      f.m = m;
      f.n = n;
      f.k = 8192;
      Fp8MatMulPlan a, b;
      ASSERT_TRUE(plan_fp8_matmul(f, kHopper, {}, &a).ok());
      ASSERT_TRUE(plan_fp8_matmul(f, kHopper, {}, PlanOverride{}, &b).ok());
      EXPECT_EQ(printed(a), printed(b));
      NBitsMatMulProblem q;
      q.m = m;
      q.n = n;
      q.k = 8192;
      q.block_size = 128;
      NBitsMatMulPlan c, d;
      ASSERT_TRUE(plan_nbits_matmul(q, kHopper, {}, &c).ok());
      ASSERT_TRUE(plan_nbits_matmul(q, kHopper, {}, parsed(""), &d).ok());
      EXPECT_EQ(printed(c), printed(d));
    }
}

// A forced choice changes the plan, so the override is not ignored.
TEST(PlanOverridePlanners, OverrideChangesThePlan) {
  Fp8MatMulProblem f;
  f.m = 4;
  f.n = 4096;
  f.k = 4096;
  EXPECT_EQ(plan(f).gemv.k_split, 8);
  EXPECT_EQ(plan(f, kHopper, parsed("k_split=2")).gemv.k_split, 2);
  EXPECT_EQ(plan(f, kHopper, parsed("gemv=0")).path, Fp8Path::kDequantGemm);
  EXPECT_EQ(plan(f, kHopper, parsed("gemm=1")).path, Fp8Path::kFusedGemm);
  f.m = 17;
  EXPECT_EQ(plan(f).path, Fp8Path::kFusedGemm);
  EXPECT_EQ(plan(f, kHopper, parsed("gemm=0")).path, Fp8Path::kGemvMma);  // row groups
  EXPECT_EQ(plan(f, kHopper, parsed("tile_m=64")).gemm.tile_m, 64);
  NBitsMatMulProblem q;
  q.m = 1;
  q.n = 4096;
  q.k = 4096;
  EXPECT_EQ(plan(q).gemv.algo, kNBitsGemvAlgoUnrolled);
  EXPECT_EQ(plan(q, kHopper, parsed("algo=1")).gemv.algo, kNBitsGemvAlgoLoop);
  EXPECT_EQ(plan(q, kHopper, parsed("gemv=0")).path, NBitsPath::kDequantGemm);
  EXPECT_EQ(plan(q, kHopper, parsed("gemm=1")).path, NBitsPath::kFusedGemm);
  q.m = 17;
  EXPECT_EQ(plan(q).path, NBitsPath::kFusedGemm);
  EXPECT_EQ(plan(q, kHopper, parsed("gemm=0")).path, NBitsPath::kGemv);  // row groups
  EXPECT_EQ(plan(q, kHopper, parsed("gemm_k_split=2")).gemm.k_split, 2);
}

}  // namespace
}  // namespace bqmm

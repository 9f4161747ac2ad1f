// bqmm-profile's command line, run as users run it: the built binary in CPU mode (no GPU
// needed). tests/CMakeLists.txt passes its path as BQMM_PROFILE_BINARY when the CLI is
// built; without it every test skips itself.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/gemm_plan.h"
#include "core/mixed_plan.h"

namespace {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs bqmm-profile with `args` (shell words).
CliResult run_cli(const std::string& args) {
  CliResult r;
#ifdef BQMM_PROFILE_BINARY
  const std::string command = std::string("'") + BQMM_PROFILE_BINARY + "' " + args + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#else
  (void)args;
#endif
  return r;
}

#ifdef BQMM_PROFILE_BINARY
#define SKIP_WITHOUT_CLI() (void)0
#else
#define SKIP_WITHOUT_CLI() GTEST_SKIP() << "bqmm-profile is not built (BQMM_BUILD_TOOLS=OFF)"
#endif

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The summary table's lines: its header, then a row per case.
std::vector<std::string> summary_table(const std::string& output) {
  std::vector<std::string> table;
  bool in_table = false;
  for (const std::string& line : lines_of(output)) {
    if (line.rfind("summary (", 0) == 0) {
      in_table = true;
    } else if (in_table && line.find(" cases passed") != std::string::npos) {
      break;
    } else if (in_table) {
      table.push_back(line);
    }
  }
  return table;
}

// The table's rows as cells by header name.
std::vector<std::vector<std::string>> table_rows(const std::vector<std::string>& table) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < table.size(); ++i) rows.push_back(words_of(table[i]));
  return rows;
}

size_t column_of(const std::vector<std::string>& table, const std::string& name) {
  const std::vector<std::string> header = words_of(table.at(0));
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name << " in " << table.at(0);
  return 0;
}

// ------------------------------------------------------------------ validation and plans
// The library's validator requires a power-of-two block size >= 16 for nbits: every mode
// must reject 48 before running anything, with the same text and exit code.
TEST(ProfileCli, EveryModeRejectsWhatTheLibraryRejects) {
  SKIP_WITHOUT_CLI();
  const std::string the_case = "--op nbits --block-size 48 --m 4 --n 64 --k 96";
  const std::string expected =
      "bqmm-profile: nbits fp16 M=4 N=64 K=96 bs=48 int4: InvalidArgument: block_size: "
      "expected a power of two >= 16 but got 48\n";
  for (const std::string mode :
       {"--device cpu", "--device cpu --sm 80 --num-sms 108", "--explain --device cpu",
        "--explain --sm 90 --num-sms 132", ""}) {
    SCOPED_TRACE(mode);
    const CliResult r = run_cli(the_case + " " + mode);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.output, expected);
  }
}

TEST(ProfileCli, CpuModeChecksSuitesBeforeRunningAnyCase) {
  SKIP_WITHOUT_CLI();
  // The decode suite's shapes are all valid, but --block-size 48 is not: nothing runs.
  const CliResult r = run_cli("--op nbits --suite decode --block-size 48 --device cpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("block_size: expected a power of two >= 16 but got 48"),
            std::string::npos);
  EXPECT_EQ(r.output.find("inputs for"), std::string::npos) << r.output;
}

TEST(ProfileCli, CpuModePlansForTheDefaultOrGivenDevice) {
  SKIP_WITHOUT_CLI();
  const CliResult h200 = run_cli("--op nbits --m 1 --n 64 --k 64 --explain --device cpu");
  EXPECT_EQ(h200.exit_code, 0);
  EXPECT_NE(h200.output.find("plans for sm90 with 132 SMs"), std::string::npos) << h200.output;
  EXPECT_NE(h200.output.find("NBitsMatMulPlan{"), std::string::npos);

  const CliResult a100 =
      run_cli("--op fp8 --m 1 --n 64 --k 64 --explain --device cpu --sm 80 --num-sms 108");
  EXPECT_EQ(a100.exit_code, 0);
  EXPECT_NE(a100.output.find("plans for sm80 with 108 SMs"), std::string::npos) << a100.output;

  const CliResult run = run_cli("--op fp8 --m 2 --n 64 --k 128 --device cpu");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("planned for sm90 with 132 SMs"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("1 of 1 cases passed"), std::string::npos) << run.output;
}

// --explain prints the fused GEMM's plan above the decode rows (where the GEMV's row group
// does not fit: 4-bit rows of 288 bytes, not whole 128-byte lines; typed zero points,
// which the row groups do not take) and, under any other
// plan, the planner's reason for not taking it.
TEST(ProfileCli, ExplainSaysWhyNotTheFusedGemm) {
  SKIP_WITHOUT_CLI();
  const CliResult fused =
      run_cli("--op nbits --m 16 --n 256 --k 576 --block-size 64 --explain --device cpu");
  EXPECT_EQ(fused.exit_code, 0) << fused.output;
  EXPECT_NE(fused.output.find("path=fused_gemm"), std::string::npos) << fused.output;
  EXPECT_NE(fused.output.find("; tile_m=16; tile_n="), std::string::npos) << fused.output;
  EXPECT_EQ(fused.output.find("not taken"), std::string::npos) << fused.output;
  const CliResult typed =
      run_cli("--op nbits --zero-points typed --m 16 --n 256 --k 512 --explain --device cpu");
  EXPECT_EQ(typed.exit_code, 0) << typed.output;
  EXPECT_NE(typed.output.find("path=fused_gemm"), std::string::npos) << typed.output;

  const struct {
    const char* args;
    const char* line;
  } refused[] = {
      {"--op nbits --g-idx --m 16 --n 256 --k 512", "  fused_gemm: not taken: g_idx (act order)\n"},
      {"--op nbits --m 12 --n 256 --k 512",
       "  fused_gemm: not taken: M <= 16: the GEMV's row group of 16 is faster there\n"},
      {"--op fp8 --m 9 --n 256 --k 512",
       "  fused_gemm: not taken: M <= 16 below 128 Mi weights (float16 from 64 Mi: M <= 12): "
       "the GEMV's row group of 16 is faster there\n"},
      {"--op fp8 --m 4 --n 256 --k 512",
       "  fused_gemm: not taken: M <= 8 (the decode GEMV's rows)\n"},
      {"--op fp8 --m 16 --n 256 --k 520", "  fused_gemm: not taken: K % 16 != 0"},
      {"--op fp8 --m 16 --n 256 --k 512 --sm 75 --num-sms 40",
       "  fused_gemm: not taken: tensor cores need SM80+\n"},
  };
  for (const auto& r : refused) {
    SCOPED_TRACE(r.args);
    const CliResult c = run_cli(std::string(r.args) + " --explain --device cpu");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_EQ(c.output.find("path=fused_gemm"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find(r.line), std::string::npos) << c.output;
  }
}

// From 65 rows --explain says why the plan is not the mixed-input GEMM (SM90 builds with
// CUTLASS), and nothing where it is (M = 300 x N = 16384: 256 tiles of 256 x 128).
TEST(ProfileCli, ExplainSaysWhyNotTheMixedGemm) {
  SKIP_WITHOUT_CLI();
  const CliResult taken = run_cli("--op nbits --m 300 --n 16384 --k 512 --explain --device cpu");
  EXPECT_EQ(taken.exit_code, 0) << taken.output;
  if (bqmm::mixed_gemm_built()) {
    EXPECT_NE(taken.output.find("path=mixed_gemm; "), std::string::npos) << taken.output;
    EXPECT_EQ(taken.output.find("not taken"), std::string::npos) << taken.output;
  } else {
    EXPECT_NE(taken.output.find("  mixed_gemm: not taken: not built"), std::string::npos) << taken.output;
  }
  // From 65 to 128 rows, where the fused GEMM keeps the rows, which branch of the rule.
  const CliResult kept = run_cli("--op fp8 --m 80 --n 8192 --k 8192 --explain --device cpu");
  EXPECT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_NE(kept.output.find("path=fused_gemm; "), std::string::npos) << kept.output;
  EXPECT_NE(kept.output.find(bqmm::wgmma_built()
                                 ? "  mixed_gemm: not taken: M < 96 and the fused GEMM's tiles one wave of SMs: "
                                   "it is faster there\n"
                                 : "  mixed_gemm: not taken: M < 128 on the fused GEMM's mma.sync tiles: it is "
                                   "faster there\n"),
            std::string::npos)
      << kept.output;
  const struct {
    const char* args;
    const char* line;
  } refused[] = {
      {"--op nbits --g-idx --m 300 --n 256 --k 512", "  mixed_gemm: not taken: g_idx (act order)\n"},
      {"--op fp8 --m 300 --n 256 --k 512 --sm 80 --num-sms 108",
       "  mixed_gemm: not taken: not an SM90 device"},
  };
  for (const auto& r : refused) {
    SCOPED_TRACE(r.args);
    const CliResult c = run_cli(std::string(r.args) + " --explain --device cpu");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_EQ(c.output.find("path=mixed_gemm"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find(r.line), std::string::npos) << c.output;
  }
}

// With A quantized, --explain says why the plan is not the W8A8 GEMM on FP8 tensor cores,
// and nothing where it is (SM90, M > 8, block_size % 128 == 0; a build with SM90).
TEST(ProfileCli, ExplainSaysWhyNotW8A8Gemm) {
  SKIP_WITHOUT_CLI();
  const std::string not_built = "  w8a8_gemm: not taken: this build has no SM90 in CUDA_ARCHITECTURES\n";
  const CliResult taken = run_cli("--op fp8 --act-quant dynamic --m 100 --n 256 --k 512 --explain --device cpu");
  EXPECT_EQ(taken.exit_code, 0) << taken.output;
  if (bqmm::wgmma_built()) {
    EXPECT_NE(taken.output.find("path=w8a8_gemm; "), std::string::npos) << taken.output;
    EXPECT_EQ(taken.output.find("w8a8_gemm: not taken"), std::string::npos) << taken.output;
    // On the W8A8 GEMM it says why not cuBLASLt's GEMM (the first reason in any build with
    // SM90).
    EXPECT_NE(taken.output.find("  w8a8_cublaslt: not taken: M < 256: the W8A8 GEMMs' tiles are faster there\n"),
              std::string::npos)
        << taken.output;
  } else {
    EXPECT_EQ(taken.output.find("path=w8a8_gemm; "), std::string::npos) << taken.output;
    EXPECT_NE(taken.output.find(not_built), std::string::npos) << taken.output;
  }
  const struct {
    const char* args;
    const char* line;
  } refused[] = {
      {"--act-quant static --m 8", "  w8a8_gemm: not taken: M <= 8 (the decode GEMV's rows)\n"},
      {"--act-quant static --m 100 --block-size 64",
       bqmm::wgmma_built() ? "  w8a8_gemm: not taken: block_size % 128 != 0 (a 128-K slab would span two scales)\n"
                           : not_built.c_str()},
      {"--act-quant dynamic --m 100 --sm 80 --num-sms 108",
       "  w8a8_gemm: not taken: not an SM90 device (wgmma code is sm_90a only)\n"},
  };
  for (const auto& r : refused) {
    SCOPED_TRACE(r.args);
    const CliResult c = run_cli(std::string("--op fp8 --n 256 --k 512 ") + r.args + " --explain --device cpu");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find(r.line), std::string::npos) << c.output;
  }
  // Without activation quantization there is nothing to say about it.
  const CliResult none = run_cli("--op fp8 --m 100 --n 256 --k 512 --explain --device cpu");
  EXPECT_EQ(none.output.find("w8a8_gemm"), std::string::npos) << none.output;
}

// --b-scale-block-rows passes b_scale_block_rows: with 128, static W8A8 from 256 rows takes
// cuBLASLt's GEMM reading one weight scale per 128 x 128 block; below 1 it is a usage
// error.
TEST(ProfileCli, BScaleBlockRows) {
  SKIP_WITHOUT_CLI();
  const CliResult r = run_cli("--op fp8 --act-quant static --b-scale-block-rows 128 --m 1024 --n 8192 --k 8192 "
                              "--explain --device cpu");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" b_scale_block_rows=128 "), std::string::npos) << r.output;
  if (bqmm::wgmma_built()) {
    EXPECT_NE(r.output.find("path=w8a8_cublaslt; "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("; weight_scales=per_128_rows; "), std::string::npos) << r.output;
  } else {  // the W8A8 GEMMs need SM90 in the build
    EXPECT_NE(r.output.find("w8a8_gemm: not taken: this build has no SM90"), std::string::npos) << r.output;
  }
  const CliResult bad = run_cli("--op fp8 --b-scale-block-rows 0 --m 4 --n 64 --k 128 --device cpu");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--b-scale-block-rows"), std::string::npos) << bad.output;
  const CliResult smoke = run_cli("--op fp8 --suite smoke --b-scale-block-rows 128 --device cpu");
  EXPECT_EQ(smoke.exit_code, 2) << smoke.output;
  EXPECT_NE(smoke.output.find("--b-scale-block-rows: --suite smoke sets it per case itself"), std::string::npos)
      << smoke.output;
}

// --prepack passes the prepacked scales: the label and the problem say so, and on the
// mixed-input GEMM the plan reads them (no scales region); both operators.
TEST(ProfileCli, Prepack) {
  SKIP_WITHOUT_CLI();
  for (const char* op : {"--op fp8", "--op nbits --bits 4 --zero-points packed"}) {
    const CliResult r = run_cli(std::string(op) + " --prepack --m 512 --n 8192 --k 8192 --explain --sm 90 --num-sms 132");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("K=8192 bs=128 prepacked"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(" prepacked align=16"), std::string::npos) << r.output;
    if (bqmm::mixed_gemm_built()) {
      EXPECT_NE(r.output.find("; scales=prepacked; workspace=0B}"), std::string::npos) << r.output;
    }
  }
}

// On the fused GEMM, --explain says why a plan is not on the wgmma mainloop, and nothing
// where it is.
TEST(ProfileCli, ExplainSaysWhyNotWgmma) {
  SKIP_WITHOUT_CLI();
  const struct {
    const char* args;
    const char* line;
  } cases[] = {
      {"--op fp8 --m 64 --k 512 --block-size 64",
       "  fused_gemm: mma.sync, not wgmma: FP8 block_size % 128"},
      {"--op nbits --m 64 --k 512 --sm 80 --num-sms 108",
       "  fused_gemm: mma.sync, not wgmma: not an SM90 device"},
  };
  for (const auto& r : cases) {
    SCOPED_TRACE(r.args);
    const CliResult c = run_cli(std::string(r.args) + " --n 256 --explain --device cpu");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("mainloop=mma;"), std::string::npos) << c.output;
    // A build without SM90 gives that reason first, after the device's.
    const bool device_reason = std::string(r.line).find("not an SM90 device") != std::string::npos;
    EXPECT_NE(c.output.find(bqmm::wgmma_built() || device_reason
                                ? r.line
                                : "  fused_gemm: mma.sync, not wgmma: this build has no SM90"),
              std::string::npos)
        << c.output;
  }
  const CliResult w = run_cli("--op nbits --m 64 --n 256 --k 512 --explain --device cpu");
  EXPECT_EQ(w.exit_code, 0) << w.output;
  if (w.output.find("mainloop=wgmma;") == std::string::npos) {
    // A build without SM90 has no wgmma mainloop and says so.
    EXPECT_NE(w.output.find("not wgmma: this build has no SM90"), std::string::npos) << w.output;
  } else {
    EXPECT_EQ(w.output.find("not wgmma"), std::string::npos) << w.output;
  }
}

// Above 64 rows on the wgmma mainloop, why 64-row tiles rather than the 128-row one
// (wgmma_tile_128_refusal), and nothing where it takes tile 128.
TEST(ProfileCli, ExplainSaysWhyNotTheTallWgmmaTile) {
  SKIP_WITHOUT_CLI();
  if (!bqmm::wgmma_built()) GTEST_SKIP() << "this build has no SM90 (no wgmma mainloop)";
  const struct {
    const char* args;
    const char* line;  // nullptr: tile 128
  } cases[] = {
      {"--op fp8 --m 100 --n 8192 --activation-dtype fp16",
       "  fused_gemm: wgmma tile of 64 rows or fewer, not 128: FP8 float16 and the 64-row tiles one wave of SMs: "
       "they are faster there\n"},
      {"--op nbits --m 100 --n 8192 --block-size 32",
       "  fused_gemm: wgmma tile of 64 rows or fewer, not 128: N-bit blocks under 64 codes"},
      {"--op fp8 --m 100 --n 8192 --activation-dtype bf16", nullptr},
      {"--op fp8 --m 100 --n 28672 --activation-dtype fp16", nullptr},
      {"--op nbits --m 100 --n 8192 --block-size 64", nullptr},
  };
  for (const auto& r : cases) {
    SCOPED_TRACE(r.args);
    const CliResult c = run_cli(std::string(r.args) + " --k 8192 --explain --device cpu");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output.find("path=fused_gemm; "), std::string::npos) << c.output;
    EXPECT_NE(c.output.find(r.line != nullptr ? "; tile_m=64; " : "; tile_m=128; "), std::string::npos)
        << c.output;
    if (r.line != nullptr)
      EXPECT_NE(c.output.find(r.line), std::string::npos) << c.output;
    else
      EXPECT_EQ(c.output.find("wgmma tile 64"), std::string::npos) << c.output;
  }
}

// ------------------------------------------------------------------ flag errors
TEST(ProfileCli, EveryFlagErrorNamesTheFlag) {
  SKIP_WITHOUT_CLI();
  const std::string one = " --m 1 --n 64 --k 64";
  const struct {
    std::string args, flag;
  } cases[] = {
      {"--m x --n 1 --k 1", "--m"},                  // not a number
      {"--m 1 --n 1e3 --k 1", "--n"},                // not an integer
      {"--m 1 --n 1 --k ' 5'", "--k"},               // spaces
      {"--m -1 --n 1 --k 1", "--m"},                 // out of range
      {"--m 1 --n 1 --k 99999999999999999999", "--k"},  // beyond int64
      {"--m 1 --n 1", "--k"},                        // missing
      {"--m 3037000500 --n 3037000500 --k 1", "--m * --n"},  // element count overflows
      {"--m", "--m"},                                // missing value
      {"--m=" + one, "--m"},                         // empty value
      {"--m 1 --m 2 --n 1 --k 1", "--m"},            // twice
      {"--frobnicate" + one, "--frobnicate"},        // unknown
      {"--bias=yes" + one, "--bias"},                // a switch with a value
      {"--between-kernel=1" + one, "--between-kernel"},
      {"--op fp9" + one, "--op"},
      {"--activation-dtype fp64" + one, "--activation-dtype"},
      {"--activation-dtype fp32" + one, "--activation-dtype"},  // fp8 has no fp32
      {"--block-size 0" + one, "--block-size"},
      {"--block-size 99999999999" + one, "--block-size"},
      {"--suite nightly", "--suite"},
      {"--suite smoke --m 1", "--m"},
      {"--suite smoke --block-size 64", "--block-size"},
      {"--suite smoke --bias", "--bias"},
      {"--warmup -1" + one, "--warmup"},
      {"--repeat 0" + one, "--repeat"},
      {"--seed abc" + one, "--seed"},
      {"--device tpu" + one, "--device"},
      {"--sm 90" + one + " --device cpu", "--sm"},
      {"--num-sms 132" + one + " --device cpu", "--num-sms"},
      {"--sm 90 --num-sms 132" + one, "--sm"},  // a GPU run plans for its GPU
      {"--sm 5 --num-sms 132 --device cpu" + one, "--sm"},
      {"--sm 90 --num-sms zero --device cpu" + one, "--num-sms"},
      {"--json /nonexistent/dir/out.jsonl --device cpu" + one, "--json"},
      {"--json-append --device cpu" + one, "--json-append"},
      // the other operator's flags
      {"--op fp8 --bits 8" + one, "--bits"},
      {"--zero-points packed" + one, "--zero-points"},  // without --op: fp8
      {"--op nbits --w8a8" + one, "--w8a8"},
      {"--op nbits --act-quant dynamic" + one, "--act-quant"},
      // each operator's own
      {"--op nbits --bits 3" + one, "--bits"},
      {"--op nbits --bits four" + one, "--bits"},
      {"--op nbits --zero-points some" + one, "--zero-points"},
      {"--op nbits --nbits-algo 7" + one, "--nbits-algo"},
      {"--op nbits --suite smoke --bits 8", "--bits"},
      {"--suite smoke --g-idx", "--g-idx"},
      {"--op fp8 --suite smoke --w8a8", "--w8a8"},
      {"--op fp8 --suite smoke --act-quant static", "--act-quant"},
      {"--op fp8 --act-quant dyn" + one, "--act-quant"},
      {"--op fp8 --act-quant dynamic --w8a8" + one, "--w8a8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const CliResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.output.rfind("bqmm-profile: " + c.flag + ":", 0), 0u) << r.output;
    EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  }
  // A stray word says where it is.
  const CliResult stray = run_cli("--m 5 6 --n 1 --k 1");
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_NE(stray.output.find("\"6\" after --m 5"), std::string::npos) << stray.output;
}

// --between-kernel is recorded in each case's JSON (false without it); the timing it
// changes needs a GPU (docs/PERF.md uses it).
TEST(ProfileCli, BetweenKernelIsInTheJson) {
  SKIP_WITHOUT_CLI();
  const std::string path = ::testing::TempDir() + "bqmm_between_kernel.jsonl";
  for (const bool between : {false, true}) {
    SCOPED_TRACE(between);
    std::remove(path.c_str());
    const CliResult r = run_cli(std::string(between ? "--between-kernel " : "") +
                                "--op nbits --m 1 --n 64 --k 64 --device cpu --json " + path);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[8192] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    const std::string json(buf, n);
    EXPECT_NE(json.find(std::string("\"between_kernel\": ") + (between ? "true" : "false")),
              std::string::npos)
        << json;
  }
  std::remove(path.c_str());
}

// --json replaces its file, --json-append adds to it: three runs of one case (plain,
// plain, appending) leave two lines.
TEST(ProfileCli, JsonReplacesOrAppends) {
  SKIP_WITHOUT_CLI();
  const std::string path = ::testing::TempDir() + "bqmm_json_append.jsonl";
  const std::string one_case = "--op nbits --m 1 --n 64 --k 64 --device cpu --json " + path;
  const auto lines = [&] {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return -1;
    int n = 0;
    for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) n += c == '\n';
    std::fclose(f);
    return n;
  };
  std::remove(path.c_str());
  for (const std::string flags : {"", "", "--json-append "}) {
    const CliResult r = run_cli(flags + one_case);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // The second run replaced the first's line, the third added one.
  EXPECT_EQ(lines(), 2);
  std::remove(path.c_str());
}

// ------------------------------------------------------------------ memory
TEST(ProfileCli, AnImpossibleAllocationNamesTheSizes) {
  SKIP_WITHOUT_CLI();
  for (const std::string op : {"fp8", "nbits"}) {
    SCOPED_TRACE(op);
    const CliResult r =
        run_cli("--op " + op + " --m 99999999999 --n 4096 --k 4096 --device cpu");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("inputs for"), std::string::npos) << r.output;  // nothing allocated
    EXPECT_NE(r.output.find("of host memory"), std::string::npos) << r.output;
    // A: 99999999999 x 4096 float16.
    EXPECT_NE(r.output.find("a 745.1 TiB"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("this machine's memory is"), std::string::npos) << r.output;
    EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  }
}

// ------------------------------------------------------------------ the table
// Every column of the summary starts and ends at the same place on every line: the
// positions that are blank on all lines form exactly one gap between each pair of
// neighbouring columns.
void expect_columns_line_up(const std::vector<std::string>& table) {
  ASSERT_GE(table.size(), 2u);
  const size_t columns = words_of(table[0]).size();
  size_t width = 0;
  for (const std::string& line : table) width = std::max(width, line.size());
  std::vector<bool> blank(width, true);
  for (const std::string& line : table) {
    EXPECT_EQ(words_of(line).size(), columns) << line;
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] != ' ') blank[i] = false;
  }
  size_t gaps = 0;
  for (size_t i = 1; i < width; ++i)
    if (blank[i] && !blank[i - 1]) ++gaps;
  if (blank[width - 1]) --gaps;  // trailing blanks are no gap between columns
  EXPECT_EQ(gaps, columns - 1) << "columns do not line up:\n" << [&] {
    std::string s;
    for (const std::string& line : table) s += line + "\n";
    return s;
  }();
}

TEST(ProfileCli, SummaryColumnsLineUpForEveryOperator) {
  SKIP_WITHOUT_CLI();
  for (const std::string args :
       {"--op fp8 --suite smoke", "--op nbits --suite smoke", "--suite smoke",
        "--op nbits --g-idx --zero-points typed --bias --m 3 --n 64 --k 128 --block-size 32"}) {
    SCOPED_TRACE(args);
    const CliResult r = run_cli(args + " --device cpu");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    expect_columns_line_up(summary_table(r.output));
  }
}

// ------------------------------------------------------------------ the smoke suite
TEST(ProfileCli, SmokeSuiteRunsBothOperators) {
  SKIP_WITHOUT_CLI();
  const CliResult r = run_cli("--suite smoke --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> table = summary_table(r.output);
  const size_t op = column_of(table, "op"), variant = column_of(table, "variant");
  const size_t pass = column_of(table, "pass");
  int fp8 = 0, nbits = 0, int4 = 0, int8 = 0, with_zp = 0, without_zp = 0, bias = 0, no_bias = 0;
  for (const std::vector<std::string>& row : table_rows(table)) {
    EXPECT_EQ(row.at(pass), "PASS");
    const std::string& v = row.at(variant);
    if (row.at(op) == "fp8") ++fp8;
    if (row.at(op) != "nbits") continue;
    ++nbits;
    int4 += v.find("int4") != std::string::npos;
    int8 += v.find("int8") != std::string::npos;
    const bool zp = v.find("zp=") != std::string::npos;
    with_zp += zp;
    without_zp += !zp;
    const bool has_bias = v.find("bias") != std::string::npos;
    bias += has_bias;
    no_bias += !has_bias;
  }
  EXPECT_GT(fp8, 0);
  EXPECT_GT(nbits, 0);
  // FP8 with each activation mode: W8A16, static W8A8, dynamic.
  int w8a8 = 0, dynamic = 0;
  for (const std::vector<std::string>& row : table_rows(table)) {
    if (row.at(op) != "fp8") continue;
    w8a8 += row.at(variant).find("w8a8") != std::string::npos;
    dynamic += row.at(variant).find("dynamic") != std::string::npos;
  }
  EXPECT_GT(w8a8, 0);
  EXPECT_GT(dynamic, 0);
  for (int count : {int4, int8, with_zp, without_zp, bias, no_bias}) EXPECT_GT(count, 0);
  EXPECT_NE(r.output.find(std::to_string(fp8 + nbits) + " of " + std::to_string(fp8 + nbits) +
                          " cases passed"),
            std::string::npos);
  // 4-bit and 8-bit, each with and without zero points.
  for (const std::string want : {"int4,", "int8,"}) {
    bool zp = false, none = false;
    for (const std::vector<std::string>& row : table_rows(table)) {
      const std::string v = row.at(variant) + ",";
      if (row.at(op) != "nbits" || v.find(want) == std::string::npos) continue;
      (v.find("zp=") != std::string::npos ? zp : none) = true;
    }
    EXPECT_TRUE(zp && none) << want;
  }
}

TEST(ProfileCli, OpSmokeIsThatOperatorsPart) {
  SKIP_WITHOUT_CLI();
  for (const std::string name : {"fp8", "nbits"}) {
    const CliResult r = run_cli("--op " + name + " --suite smoke --device cpu");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<std::string> table = summary_table(r.output);
    const size_t op = column_of(table, "op");
    ASSERT_GT(table.size(), 1u);
    for (const std::vector<std::string>& row : table_rows(table)) EXPECT_EQ(row.at(op), name);
  }
}

// ------------------------------------------------------------------ --help
TEST(ProfileCli, HelpListsBothOperatorsAndTheirFlags) {
  SKIP_WITHOUT_CLI();
  const CliResult r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  std::string op_line;
  for (const std::string& line : lines_of(r.output))
    if (line.rfind("  --op NAME", 0) == 0) op_line = line;
  EXPECT_NE(op_line.find("fp8"), std::string::npos) << op_line;
  EXPECT_NE(op_line.find("nbits"), std::string::npos) << op_line;
  const size_t fp8 = r.output.find("--op fp8 flags:"), nbits = r.output.find("--op nbits flags:");
  ASSERT_NE(fp8, std::string::npos);
  ASSERT_NE(nbits, std::string::npos);
  const std::string fp8_section = r.output.substr(fp8, nbits > fp8 ? nbits - fp8 : std::string::npos);
  const std::string nbits_section = r.output.substr(nbits);
  EXPECT_NE(fp8_section.find("--w8a8"), std::string::npos);
  EXPECT_NE(fp8_section.find("--act-quant MODE"), std::string::npos);
  for (const char* flag : {"--bits", "--zero-points", "--g-idx", "--nbits-algo"})
    EXPECT_NE(nbits_section.find(flag), std::string::npos) << flag;
  // The environment it names: the operators' option variables and the two diagnostics,
  // nothing else (kernel choices are forced through BQMM_PLAN_OVERRIDE alone).
  std::set<std::string> named;
  for (size_t at = r.output.find("BQMM_"); at != std::string::npos; at = r.output.find("BQMM_", at + 1)) {
    size_t end = at;
    while (end < r.output.size() && (std::isupper(static_cast<unsigned char>(r.output[end])) ||
                                     std::isdigit(static_cast<unsigned char>(r.output[end])) || r.output[end] == '_'))
      ++end;
    named.insert(r.output.substr(at, end - at));
  }
  EXPECT_EQ(named, (std::set<std::string>{"BQMM_DEQUANT_SCRATCH_MIB", "BQMM_GEMV_DEPENDENT_LAUNCH", "BQMM_PRINT_PLAN",
                                          "BQMM_PLAN_OVERRIDE"}));
}

}  // namespace

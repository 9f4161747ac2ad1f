// bqmm-profile: checks and times bqmm's operators. See print_usage (--help) for the
// flags; profile.h for how an operator plugs in.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "profile.h"

namespace {

using bqmm::profile::OpProfiler;

// Every operator the CLI knows, by --op name. A new operator is one more line here and
// its profile_<op>.cc.
struct OpEntry {
  const char* name;
  std::unique_ptr<OpProfiler> (*make)();
};
constexpr OpEntry kOps[] = {
    {"fp8", bqmm::profile::make_fp8_profiler},
    {"nbits", bqmm::profile::make_nbits_profiler},
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "bqmm-profile: %s\n", message.c_str());
  return 2;
}

int run(int argc, char** argv) {
  using namespace bqmm::profile;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::vector<std::unique_ptr<OpProfiler>> ops;
      std::vector<const OpProfiler*> views;
      for (const OpEntry& e : kOps) views.push_back(ops.emplace_back(e.make()).get());
      print_usage(common_flags(), views);
      return 0;
    }
  }

  const std::string op_name = op_name_from_argv(argc, argv);
  std::unique_ptr<OpProfiler> op;
  std::string known;
  for (const OpEntry& e : kOps) {
    if (op_name == e.name) op = e.make();
    known += known.empty() ? e.name : std::string(", ") + e.name;
  }
  if (!op) return usage_error("unknown --op \"" + op_name + "\" (expected " + known + ")");

  std::vector<FlagSpec> specs = common_flags();
  const std::vector<FlagSpec> op_flags = op->flags();
  specs.insert(specs.end(), op_flags.begin(), op_flags.end());
  Flags flags;
  Settings settings;
  CaseList cases;
  bqmm::Status s = Flags::parse(argc, argv, specs, &flags);
  if (s.ok()) s = read_settings(flags, &settings);
  if (s.ok()) s = op->make_cases(flags, settings, &cases);
  if (!s.ok()) return usage_error(s.message());
  // The library's run functions print their plan at every call under BQMM_PRINT_PLAN=1,
  // which inside the timed loops would print a hundred lines per case and slow the runs
  // down; the CLI prints each case's plan once instead (settings.print_plan) and clears
  // the variable before the library first reads it.
  if (settings.print_plan) unsetenv("BQMM_PRINT_PLAN");

  return settings.explain ? explain_cases(*op, settings, cases) : run_cases(*op, settings, cases);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bqmm-profile: %s\n", e.what());
    return 1;
  }
}

// bqmm-profile: checks and times bqmm's operators. See print_usage (--help) for the
// flags; profile.h for how an operator plugs in.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "profile.h"

namespace {

using bqmm::Status;
using bqmm::StatusCode;
using bqmm::profile::Flags;
using bqmm::profile::FlagSpec;
using bqmm::profile::OpProfiler;

// Every operator the CLI knows, by --op name, in the order a run of several shows them. A
// new operator is one more line here and its profile_<op>.cc.
struct OpEntry {
  const char* name;
  std::unique_ptr<OpProfiler> (*make)();
};
constexpr OpEntry kOps[] = {
    {"fp8", bqmm::profile::make_fp8_profiler},
    {"nbits", bqmm::profile::make_nbits_profiler},
};
// The operator of a single case or a decode/prefill suite when --op is not given.
constexpr const char* kDefaultOp = "fp8";

std::vector<std::unique_ptr<OpProfiler>> make_all_ops() {
  std::vector<std::unique_ptr<OpProfiler>> ops;
  for (const OpEntry& e : kOps) ops.push_back(e.make());
  return ops;
}

Status usage_error(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

// The operators this run profiles: --op's, or without it every operator for the smoke
// suite (the project's main job checks them all) and kDefaultOp otherwise.
Status select_ops(const std::string& op_flag, const std::string& suite,
                  const std::vector<std::unique_ptr<OpProfiler>>& all,
                  std::vector<OpProfiler*>* out) {
  out->clear();
  const std::string wanted = !op_flag.empty() ? op_flag : suite == "smoke" ? "" : kDefaultOp;
  std::string known;
  for (const auto& op : all) {
    if (wanted.empty() || wanted == op->name()) out->push_back(op.get());
    known += std::string(known.empty() ? "" : " or ") + op->name();
  }
  if (out->empty()) return usage_error("--op: expected " + known + " but got \"" + op_flag + "\"");
  return Status::Ok();
}

// An operator's own flag given to a run of other operators is an error, not ignored.
Status check_op_flags(const Flags& flags, const std::vector<std::unique_ptr<OpProfiler>>& all,
                      const std::vector<OpProfiler*>& selected) {
  std::string selected_names;
  for (const OpProfiler* op : selected)
    selected_names += std::string(selected_names.empty() ? "--op " : " and --op ") + op->name();
  for (const auto& op : all) {
    if (std::find(selected.begin(), selected.end(), op.get()) != selected.end()) continue;
    for (const FlagSpec& f : op->flags())
      if (flags.has(f.name))
        return usage_error(std::string(f.name) + ": a flag of --op " + op->name() +
                           ", but this run profiles " + selected_names);
  }
  return Status::Ok();
}

// Parses the command line into the operators' parts of the run.
Status read_command_line(int argc, char** argv, const std::vector<std::unique_ptr<OpProfiler>>& all,
                         bqmm::profile::Settings* settings,
                         std::vector<bqmm::profile::OpCases>* runs) {
  using namespace bqmm::profile;
  // Every operator's flags are known to the parser, so that one given to another
  // operator's run is named as such rather than unknown.
  std::vector<FlagSpec> specs = common_flags();
  for (const auto& op : all) {
    const std::vector<FlagSpec> op_flags = op->flags();
    specs.insert(specs.end(), op_flags.begin(), op_flags.end());
  }
  Flags flags;
  BQMM_RETURN_IF_ERROR(Flags::parse(argc, argv, specs, &flags));
  BQMM_RETURN_IF_ERROR(read_settings(flags, settings));
  std::vector<OpProfiler*> selected;
  BQMM_RETURN_IF_ERROR(select_ops(settings->op, settings->suite, all, &selected));
  BQMM_RETURN_IF_ERROR(check_op_flags(flags, all, selected));

  runs->clear();
  size_t total = 0;
  for (OpProfiler* op : selected) {
    OpCases run{op, {}};
    BQMM_RETURN_IF_ERROR(op->make_cases(flags, *settings, &run.cases));
    total += run.cases.size();
    runs->push_back(std::move(run));
  }
  if (total == 0 && settings->dtype)  // only a suite filtered by dtype can be empty
    return usage_error(std::string("--activation-dtype: no case of --suite ") + settings->suite +
                       " uses " + dtype_flag_name(*settings->dtype));
  return Status::Ok();
}

int run(int argc, char** argv) {
  using namespace bqmm::profile;
  const std::vector<std::unique_ptr<OpProfiler>> all = make_all_ops();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::vector<const OpProfiler*> views;
      for (const auto& op : all) views.push_back(op.get());
      print_usage(common_flags(), views);
      return 0;
    }
  }

  Settings settings;
  std::vector<OpCases> runs;
  Machine machine;
  Status s = read_command_line(argc, argv, all, &settings, &runs);
  if (s.ok()) s = find_machine(settings, &machine);
  if (!s.ok()) {
    std::fprintf(stderr, "bqmm-profile: %s\n", s.message().c_str());
    return 2;
  }
  // The same checks in every mode, before anything runs: a case the library rejects, or
  // one too large for this machine, fails here with the same text and exit code whether
  // it would run on the GPU, on the CPU, or be explained.
  s = check_cases(runs, machine);
  if (!s.ok()) {
    std::fprintf(stderr, "bqmm-profile: %s\n", s.message().c_str());
    return 2;
  }
  // The library's run functions print their plan at every call under BQMM_PRINT_PLAN=1,
  // which inside the timed loops would print a hundred lines per case and slow the runs
  // down; the CLI prints each case's plan once instead (settings.print_plan) and clears
  // the variable before the library first reads it.
  if (settings.print_plan) unsetenv("BQMM_PRINT_PLAN");

  return settings.explain ? explain_cases(runs, machine) : run_cases(runs, settings, machine);
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

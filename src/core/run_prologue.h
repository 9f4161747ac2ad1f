// What every operator's run() does before it enqueues anything: check that the arguments
// are the plan's problem, and print the plan when BQMM_PRINT_PLAN is set. Host only.
#pragma once

#include <iostream>
#include <sstream>
#include <string>

#include "bqmm/status.h"
#include "core/arg_spans.h"
#include "core/check.h"
#include "core/env.h"

namespace bqmm {

// An alignment the arguments have (`got`) may be larger than the plan's (`planned`), never
// smaller: the vector kernels need what the plan assumed. `what` names the pointers.
inline Status check_alignment_at_least(const char* what, int planned, int got) {
  if (got < planned)
    return Status(StatusCode::kInvalidArgument,
                  "plan: made for " + std::to_string(planned) + "-byte aligned " + what +
                      " but the arguments are only " + std::to_string(got) +
                      "-byte aligned; plan again for them");
  return Status::Ok();
}

// `got` is the problem validate_*() made of the run's arguments; `same` says whether it
// matches `planned` in everything the plan depends on besides alignment
// (check_alignment_at_least).
template <typename Problem>
Status check_plan_matches(const Problem& planned, const Problem& got, bool same) {
  if (!same) {
    std::ostringstream os;
    os << "plan: made for {" << planned << "} but the arguments are {" << got << "}";
    return Status(StatusCode::kInvalidArgument, os.str());
  }
  return check_alignment_at_least("data pointers", planned.alignment, got.alignment);
}

// Where `asked`: each plan to stderr once per thread when it changes, not once per call
// (a timing loop would otherwise print, and pay for printing, every run).
template <typename Plan>
void print_plan_if(bool asked, const Plan& plan) {
  if (!asked) return;
  thread_local std::string last_printed;
  std::ostringstream os;
  os << plan;
  if (os.str() == last_printed) return;
  last_printed = os.str();
  std::cerr << "bqmm: " << last_printed << "\n";
}

// print_plan_if, asked by BQMM_PRINT_PLAN=1 (read once per process).
template <typename Plan>
void print_plan_if_asked(const Plan& plan) {
  static const bool asked = env::flag("BQMM_PRINT_PLAN");
  print_plan_if(asked, plan);
}

// The start of every run(): `matches` is the operator's check that the arguments are the
// plan's problem (check_plan_matches), then the workspace must hold the plan's bytes, which
// the run writes, apart from every tensor of the call; then BQMM_PRINT_PLAN.
template <typename Plan, typename Args>
Status begin_run(const Plan& plan, const Args& args, const Status& matches, const void* workspace,
                 size_t workspace_bytes) {
  BQMM_RETURN_IF_ERROR(matches);
  BQMM_RETURN_IF_ERROR(check::workspace(workspace, workspace_bytes, plan.workspace_bytes));
  const ArgSpans spans = arg_spans(args);
  const auto ws = reinterpret_cast<uintptr_t>(workspace);
  BQMM_RETURN_IF_ERROR(check::disjoint(check::Span{"workspace", ws, ws + plan.workspace_bytes},
                                       spans.data(), spans.size()));
  print_plan_if_asked(plan);
  return Status::Ok();
}

}  // namespace bqmm

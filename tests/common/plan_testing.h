// Helpers of the planner tests (tests/cpu/*_plan_test.cc), shared by both operators:
// the devices they plan for, a plan printed to a string, and a scope that clears the
// environment overrides a test sets and restores them afterwards.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bqmm/device.h"

namespace bqmm::testing {

constexpr DeviceInfo kHopper{90, 132};
constexpr DeviceInfo kAmpere{80, 108};
constexpr DeviceInfo kTuring{75, 40};

// A plan as operator<< prints it (the BQMM_PRINT_PLAN / --explain line).
template <typename Plan>
std::string printed(const Plan& plan) {
  std::ostringstream os;
  os << plan;
  return os.str();
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

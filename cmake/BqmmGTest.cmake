# Registers a GoogleTest binary's tests with CTest, one CTest test per GoogleTest test,
# labelled `label`. Shared by the project's suites and by the discovery check
# (tests/cmake/check_discovery.sh), so the check tests exactly what the suites use.
#
# GTEST_SKIP'd tests are reported by CTest as skipped: gtest_discover_tests sets
# SKIP_REGULAR_EXPRESSION to GoogleTest's "[  SKIPPED ]" marker itself (CMake >= 3.25).
# Setting it again through PROPERTIES breaks CMake 4.x, whose generated test files quote
# the value in a bracket argument that a trailing "]" ends early.
include(GoogleTest)

function(bqmm_discover_gtests target label)
  gtest_discover_tests(${target} PROPERTIES LABELS ${label} DISCOVERY_TIMEOUT 60)
endfunction()

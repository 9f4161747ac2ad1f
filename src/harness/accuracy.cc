#include "harness/accuracy.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace bqmm::harness {

double tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 2e-3;
    case DType::kBFloat16: return 1e-2;
    default: return 1e-5;
  }
}

std::string AccuracyReport::to_string() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: rel_err %.3e (tolerance %.1e), %lld NaN/inf mismatches",
                passed ? "PASS" : "FAIL", rel_err, tolerance,
                static_cast<long long>(nan_mismatches));
  std::string s = buf;
  if (first_mismatch >= 0) s += ", first at element " + std::to_string(first_mismatch);
  return s;
}

AccuracyReport compare(const HostTensor& y, int64_t n, int64_t row_begin,
                       const std::vector<double>& ref) {
  AccuracyReport r;
  r.tolerance = tolerance_for(y.dtype);
  const auto count = static_cast<int64_t>(ref.size());
  const int64_t first = row_begin * n;
  if (count == 0) {  // an empty output (M == 0 or N == 0) has nothing to get wrong
    r.passed = true;
    return r;
  }
  // A reference that does not tile whole rows inside y is a caller bug; fail loudly.
  if (n <= 0 || count % n != 0 || row_begin < 0 || first + count > y.numel()) {
    r.rel_err = std::numeric_limits<double>::infinity();
    return r;
  }
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double want = ref[i];
    const double got = y.get(first + i);
    if (std::isfinite(want) && std::isfinite(got)) {
      err2 += (got - want) * (got - want);
      ref2 += want * want;
      continue;
    }
    // NaN codes propagate (docs/CONTRACT.md section 1), so the reference's non-finite values must be
    // matched exactly too; a NaN or inf where the reference is finite is a wrong answer
    // or an element the kernel never wrote (outputs are poisoned with NaN).
    const bool same = (std::isnan(want) && std::isnan(got)) || want == got;
    if (!same) {
      if (r.first_mismatch < 0) r.first_mismatch = first + i;
      ++r.nan_mismatches;
    }
  }
  if (ref2 > 0) {
    r.rel_err = std::sqrt(err2 / ref2);
  } else {
    r.rel_err = err2 > 0 ? std::numeric_limits<double>::infinity() : 0;
  }
  r.passed = r.rel_err <= r.tolerance && r.nan_mismatches == 0;
  return r;
}

}  // namespace bqmm::harness

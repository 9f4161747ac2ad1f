// The accuracy contract of docs/CONTRACT.md section 4, shared by the tests and the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/host_tensor.h"

namespace bqmm::harness {

// Relative Frobenius tolerance per output dtype: 2e-3 float16, 1e-2 bfloat16, 1e-5 float32.
double tolerance_for(DType dtype);

struct AccuracyReport {
  double rel_err = 0;  // ||y - ref||_F / ||ref||_F over the finite pairs (0/0 -> 0)
  // Elements whose non-finite values differ: NaN (or inf) in y where the reference is
  // finite, or a finite y where the reference is NaN (NaN codes must propagate).
  int64_t nan_mismatches = 0;
  int64_t first_mismatch = -1;  // flattened index into y of the first such element
  double tolerance = 0;
  bool passed = false;       // rel_err <= tolerance and no NaN mismatch
  std::string to_string() const;
};

// Compares rows [row_begin, row_begin + ref.size() / n) of y ([rows, n] flattened) with
// the reference, against tolerance_for(y.dtype). Outputs are poisoned with NaN before
// runs, so an unwritten element shows up as a NaN mismatch. A reference that is not whole
// rows inside y fails with rel_err = inf.
AccuracyReport compare(const HostTensor& y, int64_t n, int64_t row_begin,
                       const std::vector<double>& ref);

}  // namespace bqmm::harness

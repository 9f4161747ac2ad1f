// bqmm: Status, the one error type of the public API.
//
// Every entry point returns a Status. A non-OK Status carries a code for programs and a
// message for people; messages name the offending input and give the expected and the
// received shape or type, e.g.
//   "b_scale: expected shape [4096, 32] (N, ceil(K/block_size)) but got [4096, 31]".
#pragma once

#include <string>

namespace bqmm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // shapes, dtypes, attributes, null or misaligned pointers
  kNotSupported,       // valid by the contract but not implemented (e.g. bits = 2)
  kWorkspaceTooSmall,  // caller's workspace is smaller than plan.workspace_bytes
  kCudaError,          // a CUDA runtime call or a kernel launch failed
  kCublasError,        // a cuBLAS call failed
  kInternal,           // a bug in bqmm
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: b_scale: expected ..." (or "OK").
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace bqmm

// Internal convenience: return early on a non-OK status.
#define BQMM_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::bqmm::Status bqmm_status_ = (expr);   \
    if (!bqmm_status_.ok()) return bqmm_status_; \
  } while (0)

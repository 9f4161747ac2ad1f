#include "core/env.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>


namespace bqmm::env {

Status read_int(const char* name, int64_t min, int64_t max, int64_t* value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return Status::Ok();
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(name) + ": expected an integer in [" + std::to_string(min) +
                      ", " + std::to_string(max) + "] but got \"" + text + "\"");
  }
  *value = v;
  return Status::Ok();
}

Status read_scratch_bytes(int64_t* scratch_bytes) {
  int64_t mib = -1;
  BQMM_RETURN_IF_ERROR(read_int("BQMM_DEQUANT_SCRATCH_MIB", 1, int64_t{1} << 30, &mib));
  if (mib > 0) *scratch_bytes = mib << 20;
  return Status::Ok();
}

Status read_gemv_dependent_launch(bool* on) {
  int64_t v = -1;
  BQMM_RETURN_IF_ERROR(read_int("BQMM_GEMV_DEPENDENT_LAUNCH", 0, 1, &v));
  if (v >= 0) *on = v == 1;
  return Status::Ok();
}

bool flag(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' && std::string(text) != "0";
}

}  // namespace bqmm::env

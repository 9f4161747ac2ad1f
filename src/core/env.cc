#include "core/env.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bqmm/device.h"

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

Status read_int_option(const char* name, int64_t min, int64_t max, int* option) {
  int64_t v = min - 1;  // read_int leaves it where the variable is unset
  BQMM_RETURN_IF_ERROR(read_int(name, min, max, &v));
  if (v >= min) *option = static_cast<int>(v);
  return Status::Ok();
}

Status read_int_choice(const char* name, std::initializer_list<int> choices, int* option) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return Status::Ok();
  int64_t v = 0;
  if (read_int(name, INT64_MIN, INT64_MAX, &v).ok()) {
    for (const int c : choices) {
      if (v == c) {
        *option = c;
        return Status::Ok();
      }
    }
  }
  std::string expected;
  for (const int* c = choices.begin(); c != choices.end(); ++c)
    expected += (c == choices.begin() ? "" : c + 1 == choices.end() ? " or " : ", ") +
                std::to_string(*c);
  return Status(StatusCode::kInvalidArgument,
                std::string(name) + ": expected " + expected + " but got \"" + text + "\"");
}

Status read_gemv_registers(const char* name, int* option) {
  return read_int_choice(name, {kGemvTwoTileRegisters, kGemvWideRegisters}, option);
}

Status read_k_split(const char* name, int* option) {
  return read_int_choice(name, {0, 1, 2, 4, 8}, option);
}

Status read_dequant_options(int64_t* scratch_bytes, bool* overlap) {
  int64_t mib = -1;
  BQMM_RETURN_IF_ERROR(read_int("BQMM_DEQUANT_SCRATCH_MIB", 1, int64_t{1} << 30, &mib));
  if (mib > 0) *scratch_bytes = mib << 20;
  int64_t on = -1;
  BQMM_RETURN_IF_ERROR(read_int("BQMM_DEQUANT_OVERLAP", 0, 1, &on));
  if (on >= 0) *overlap = on == 1;
  return Status::Ok();
}

bool flag(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' && std::string(text) != "0";
}

}  // namespace bqmm::env

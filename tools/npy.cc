#include "npy.h"

#include <cstdint>
#include <fstream>

namespace bqmm::npy {
namespace {

const char* descr(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "<f4";
    case DType::kFloat16: return "<f2";
    case DType::kBFloat16: return "<u2";
    case DType::kFloat8E4M3: return "|u1";
    case DType::kUInt8: return "|u1";
    case DType::kInt32: return "<i4";
  }
  return "|u1";
}

// Python tuple syntax: "()", "(5,)", "(2, 3)".
std::string shape_tuple(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + (s.rank() == 1 ? ",)" : ")");
}

}  // namespace

const char* file_tag(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3: return "e4m3";
    case DType::kUInt8: return "u8";
    case DType::kInt32: return "i32";
  }
  return "raw";
}

Status write(const std::string& path, const harness::HostTensor& t) {
  std::string header = std::string("{'descr': '") + descr(t.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape_tuple(t.shape) + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended
  // by a newline so that the data starts on a 64-byte boundary (what NumPy writes).
  constexpr size_t kPrefix = 10;
  const size_t padded = (kPrefix + header.size() + 1 + 63) / 64 * 64 - kPrefix;
  header.append(padded - header.size() - 1, ' ');
  header += '\n';

  std::ofstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kInvalidArgument, path + ": cannot open for writing");
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint8_t len[2] = {static_cast<uint8_t>(header.size() & 0xFF),
                          static_cast<uint8_t>(header.size() >> 8)};
  f.write(magic, sizeof(magic));
  f.write(reinterpret_cast<const char*>(len), sizeof(len));
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(t.bytes.data()),
          static_cast<std::streamsize>(t.bytes.size()));
  if (!f) return Status(StatusCode::kInvalidArgument, path + ": write failed");
  return Status::Ok();
}

}  // namespace bqmm::npy

#include "core/plan_override.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <sstream>

#include "core/gemm_plan.h"
#include "core/mixed_plan.h"
#include "core/gemv_split.h"

namespace bqmm {
namespace {

// One key of the grammar: its name, where it goes, and the values it takes.
struct Key {
  const char* name;
  int PlanOverride::*field;
  std::initializer_list<int> values;
};

const Key kKeys[] = {
    {"gemv", &PlanOverride::gemv, {0}},
    {"fma", &PlanOverride::fma, {0, 1}},
    {"algo", &PlanOverride::algo, {kNBitsGemvAlgoUnrolled, kNBitsGemvAlgoLoop, kNBitsGemvAlgoPerBlock}},
    {"k_split", &PlanOverride::k_split, {1, 2, 4, 8, kNBitsWindow80MaxKSplit, kNBitsWindowMaxKSplit}},
    {"tma", &PlanOverride::tma, {0, 1}},
    {"window", &PlanOverride::window, {0, 1}},
    {"lines", &PlanOverride::lines, {0, 1}},
    {"tiles", &PlanOverride::tiles, {1, 2}},
    {"registers", &PlanOverride::registers, {kGemvTwoTileRegisters, kGemvWideRegisters}},
    {"gemm", &PlanOverride::gemm, {0, 1}},
    {"wgmma", &PlanOverride::wgmma, {0, 1}},
    {"tile_m", &PlanOverride::tile_m, {16, 32, 64, 128, 256}},  // the kernels' instantiations
    {"gemm_k_split", &PlanOverride::gemm_k_split, {1, 2, 4, 8, 16}},
    {"w8a8", &PlanOverride::w8a8, {0, 1}},
    {"mixed", &PlanOverride::mixed, {0, 1}},
    {"mixed_tile", &PlanOverride::mixed_tile, {128, 256}},
    {"mixed_sk", &PlanOverride::mixed_sk, {0, 1}},
    {"mixed_swizzle", &PlanOverride::mixed_swizzle, {0, 2, 4, 8}},
    {"w8a8_cublaslt", &PlanOverride::w8a8_cublaslt, {0, 1}},
    {"lt_algo", &PlanOverride::lt_algo, {0, 1, 2, 3}},
    {"w8a8_pdl", &PlanOverride::w8a8_pdl, {0, 1}},
    {"k_halves", &PlanOverride::k_halves, {0, 1}},
    {"cluster_sum", &PlanOverride::cluster_sum, {0, 1}},
    {"gemv_pdl", &PlanOverride::gemv_pdl, {0, 1}},
};
static_assert(kGemmMaxKSplit == 16, "gemm_k_split's values go up to kGemmMaxKSplit");

std::string choices(const Key& key) {
  std::string s;
  for (const int* v = key.values.begin(); v != key.values.end(); ++v)
    s += (v == key.values.begin() ? "" : v + 1 == key.values.end() ? " or " : ", ") +
         std::to_string(*v);
  return s;
}

Status invalid(const char* source, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, std::string(source) + ": " + what);
}

// `item` is "key=value": sets the key's field of *out.
Status parse_item(const std::string& item, const char* source, PlanOverride* out,
                  const PlanOverride& unset) {
  const size_t eq = item.find('=');
  const std::string name = item.substr(0, eq);
  for (const Key& key : kKeys) {
    if (name != key.name) continue;
    if (eq == std::string::npos) return invalid(source, name + ": expected " + name + "=VALUE");
    const std::string text = item.substr(eq + 1);
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    bool allowed = !text.empty() && *end == '\0';
    allowed = allowed && std::find(key.values.begin(), key.values.end(), v) != key.values.end();
    if (!allowed)
      return invalid(source, name + ": expected " + choices(key) + " but got \"" + text + "\"");
    if (out->*key.field != unset.*key.field) return invalid(source, name + ": given twice");
    out->*key.field = static_cast<int>(v);
    return Status::Ok();
  }
  std::string known;
  for (const Key& key : kKeys) known += (known.empty() ? "" : ", ") + std::string(key.name);
  return invalid(source, "unknown key \"" + name + "\" (keys: " + known + ")");
}

}  // namespace

bool PlanOverride::empty() const { return to_string(*this).empty(); }

Status parse_plan_override(const std::string& text, PlanOverride* out, const char* source) {
  PlanOverride o;
  const PlanOverride unset;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    BQMM_RETURN_IF_ERROR(parse_item(item, source, &o, unset));
  }
  *out = o;
  return Status::Ok();
}

Status plan_override_from_env(PlanOverride* out) {
  const char* text = std::getenv("BQMM_PLAN_OVERRIDE");
  if (text == nullptr) {
    *out = PlanOverride{};
    return Status::Ok();
  }
  return parse_plan_override(text, out, "BQMM_PLAN_OVERRIDE");
}

Status check_plan_override(const PlanOverride& o, const char* op,
                           std::initializer_list<const char*> not_for_op) {
  const PlanOverride unset;
  for (const Key& key : kKeys) {
    const int v = o.*key.field;
    if (v == unset.*key.field) continue;
    for (const char* name : not_for_op)
      if (std::string(name) == key.name)
        return invalid("plan override", std::string(key.name) + " does not apply to " + op);
    if (std::find(key.values.begin(), key.values.end(), v) == key.values.end())
      return invalid("plan override", std::string(key.name) + ": expected " + choices(key) +
                                          " but got " + std::to_string(v));
  }
  return Status::Ok();
}

std::string to_string(const PlanOverride& o) {
  const PlanOverride unset;
  std::string s;
  for (const Key& key : kKeys) {
    if (o.*key.field == unset.*key.field) continue;
    s += (s.empty() ? "" : ",") + std::string(key.name) + "=" + std::to_string(o.*key.field);
  }
  return s;
}

}  // namespace bqmm

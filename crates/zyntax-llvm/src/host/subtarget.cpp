// LLVM's CPU and feature tables, which its C API does not expose. The CPU
// backend validates user-given CPU names and feature strings against them
// before creating a TargetMachine: LLVM itself only warns about unknown names
// and aborts on some feature combinations (see host/target.rs).

#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"

#include <cstring>
#include <memory>
#include <string>

using namespace llvm;

typedef void (*zyntax_name_cb)(void *ctx, const char *name, size_t len);

static std::unique_ptr<MCSubtargetInfo> subtarget(const char *triple, const char *cpu,
                                                  const char *features) {
  std::string err;
  const Target *t = TargetRegistry::lookupTarget(triple, err);
  if (!t)
    return nullptr;
  return std::unique_ptr<MCSubtargetInfo>(t->createMCSubtargetInfo(triple, cpu, features));
}

// Calls `cb` with every CPU name (features == 0) or feature name (features != 0)
// of the target; -1 if the target is unknown.
extern "C" int zyntax_subtarget_names(const char *triple, int features, zyntax_name_cb cb,
                                      void *ctx) {
  auto s = subtarget(triple, "", "");
  if (!s)
    return -1;
  if (features) {
    for (const auto &kv : s->getAllProcessorFeatures())
      cb(ctx, kv.Key, std::strlen(kv.Key));
  } else {
    for (const auto &kv : s->getAllProcessorDescriptions())
      cb(ctx, kv.Key, std::strlen(kv.Key));
  }
  return 0;
}

// 1 if the subtarget for (cpu, features), with LLVM's implications applied,
// has every feature of `check` ("+a,+b") enabled, 0 if not, -1 if the target is
// unknown. Only call with names validated against zyntax_subtarget_names
// (unknown ones make LLVM print warnings).
extern "C" int zyntax_subtarget_has(const char *triple, const char *cpu, const char *features,
                                    const char *check) {
  auto s = subtarget(triple, cpu, features);
  if (!s)
    return -1;
  return s->checkFeatures(check) ? 1 : 0;
}

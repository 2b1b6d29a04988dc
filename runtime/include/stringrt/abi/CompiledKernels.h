// The compiled-kernel ABI of target "cpu" (docs/package.md, docs/codegen.md):
// which kernels stringc generates for an op, each kernel's kind (the tail of
// its symbol "stringc_k<N>_<digest>_<kind>") and the range of its parallel
// loop, from the op's operand and result shapes. Defined once, here: the
// code generator (compiler/lib/CpuGen/KernelGen.cpp) names and sizes every
// kernel it builds by these rules, and the runtime refuses a manifest whose
// kernel entries differ from them (format/CompiledKernelRules.cpp), since a
// generated kernel cannot check its arguments.
//
// The stringrt/abi/ folder holds what the compiler and the runtime must agree
// on bit for bit and nothing else: plain constants and rules, no runtime types.
#pragma once

#include "stringrt/OpCodes.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stringrt::abi {

// Every kind of generated kernel: X(Enum, "symbol tail"). The range each
// kind's parallel loop runs over (begin and end are its last two arguments;
// -1 below means the batch size, dimension 0 of a batched shape):
//   elementwise (add ... gelu_grad)   the result's rows: [d0, rest] as d0, a
//                                     batch vector [B] as B, a static vector
//                                     or a scalar as 1
//   attention, rope_attention (+_grad) q's batch d0, q [d0, T, H * Dh]
//   layer_norm, *_dx                   x's rows: [d0, ..., D] as d0, [D] as 1
//   *_dparams                          the columns D
//   sum_to                             the result's elements
//   cross_entropy_grad                 the logits' rows d0
//   rope_apply                         x's rows d0 (x [d0, T, D]; [T, D]: 1)
//   rope_apply_grad_table              the positions T
//   token_embed                        the ids' rows d0 (ids [d0, T])
//   token_embed_grad                   blocks of kTokenEmbedGradBlock table rows
//   class_token, select_token          x's rows d0 (x [d0, N, D])
//   class_token_grad_dx                dy's rows d0 (dy [d0, N + 1, D])
//   class_token_grad_dcls              the columns D
//   select_token_grad                  dx's rows d0 (dx [d0, T, D])
#define STRINGRT_COMPILED_KERNEL_KINDS(X)                                                          \
  X(Add, "add")                                                                                    \
  X(Sub, "sub")                                                                                    \
  X(Mul, "mul")                                                                                    \
  X(Scale, "scale")                                                                                \
  X(Relu, "relu")                                                                                  \
  X(ReluGrad, "relu_grad")                                                                         \
  X(Gelu, "gelu")                                                                                  \
  X(GeluGrad, "gelu_grad")                                                                         \
  X(Attention, "attention")                                                                        \
  X(AttentionGrad, "attention_grad")                                                               \
  X(RopeAttention, "rope_attention")                                                               \
  X(RopeAttentionGrad, "rope_attention_grad")                                                      \
  X(LayerNorm, "layer_norm")                                                                       \
  X(LayerNormGradDx, "layer_norm_grad_dx")                                                         \
  X(LayerNormGradDparams, "layer_norm_grad_dparams")                                               \
  X(LayerNormGradAccDx, "layer_norm_grad_acc_dx")                                                  \
  X(LayerNormGradAccDparams, "layer_norm_grad_acc_dparams")                                        \
  X(SumTo, "sum_to")                                                                               \
  X(CrossEntropyGrad, "cross_entropy_grad")                                                        \
  X(RopeApply, "rope_apply")                                                                       \
  X(RopeApplyGradTable, "rope_apply_grad_table")                                                   \
  X(TokenEmbed, "token_embed")                                                                     \
  X(TokenEmbedGrad, "token_embed_grad")                                                            \
  X(ClassToken, "class_token")                                                                     \
  X(ClassTokenGradDx, "class_token_grad_dx")                                                       \
  X(ClassTokenGradDcls, "class_token_grad_dcls")                                                   \
  X(SelectToken, "select_token")                                                                   \
  X(SelectTokenGrad, "select_token_grad")

enum class KernelKind : uint8_t {
#define STRINGRT_KERNEL_KIND_ENUMERATOR(Enum, name) Enum,
  STRINGRT_COMPILED_KERNEL_KINDS(STRINGRT_KERNEL_KIND_ENUMERATOR)
#undef STRINGRT_KERNEL_KIND_ENUMERATOR
};

// The symbol tail of `kind` ("layer_norm_grad_dx").
const char *kernelKindName(KernelKind kind);
// The kind of a symbol tail; nullopt for a word that is none.
std::optional<KernelKind> findKernelKind(std::string_view name);

// token_embed_grad accumulates the table's rows in blocks of this many rows
// (one iteration of its parallel loop each).
inline constexpr int64_t kTokenEmbedGradBlock = 16;

// A buffer's shape as the value table writes it: -1 (kBatchDim) for the
// batch; empty for a scalar.
using Shape = std::vector<int64_t>;

// One kernel an op runs: its kind and the range of its parallel loop (-1:
// the batch size).
struct KernelRule {
  KernelKind kind;
  int64_t range = 1;
};

// Whether stringc generates kernels for ops of `code` (at shapes that
// compiledKernelRules accepts).
bool generatesKernels(OpCode code);

// The kernels an op of `code` with these operand and result shapes runs, in
// order: an empty list for an op stringc generates none for; nullopt when
// the shapes are not ones its kernels can have (a rank they cannot take).
// The generator may still leave an op on the runtime's kernels (shapes it
// does not handle); when it does generate them, they are these.
std::optional<std::vector<KernelRule>> compiledKernelRules(OpCode code,
                                                           const std::vector<Shape> &operands,
                                                           const std::vector<Shape> &results);

// A generated kernel's symbol: "stringc_k<index>_<digest>_<kind name>", the
// digest that of the op's buffer sizes (kernelSizeDigest, 16 hex digits).
std::string kernelSymbol(size_t index, const std::string &digest, KernelKind kind);

// The parts of a generated kernel's symbol; nullopt for another name. The
// kind is the symbol's tail as written (it may name no kind).
struct KernelSymbolParts {
  std::string digest;
  std::string kind;
};
std::optional<KernelSymbolParts> parseKernelSymbol(const std::string &symbol);

} // namespace stringrt::abi

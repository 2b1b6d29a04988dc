// Reference kernels patch_embed, token_embed, class_token, select_token:
// forward on hand-computed cases, backward against central finite
// differences (double), float vs double.
#include "stringrt/reference/LayerKernels.h"

#include "FiniteDifference.h"

#include <gtest/gtest.h>

namespace {

using namespace stringrt::ref;
using TD = Tensor<double>;
using Ids = Tensor<int32_t>;

//===--- patch_embed -------------------------------------------------------===//

TEST(PatchEmbedKernel, HandComputed) {
  // One channel, 2x4 image, 2x2 patches: patch 0 = [1, 2, 5, 6], patch 1 = [3, 4, 7, 8].
  TD image({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  TD w({4, 1}, {1, 10, 100, 1000}), b({1}, {0.5});
  TD y = TD::zeros({1, 2, 1});
  patchEmbed(image.cref(), w.cref(), b.cref(), 2, y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{6521.5, 8743.5}));
}

// With w = I and b = 0, y[b, n] is the flattened patch: compare with the
// reshape(B, C, H/p, p, W/p, p).permute(0, 2, 4, 1, 3, 5) of pe_torch.
TEST(PatchEmbedKernel, IdentityWeightGivesFlattenedPatches) {
  const int64_t B = 2, C = 2, H = 4, W = 6, p = 2, K = C * p * p, N = (H / p) * (W / p);
  TD image = fd::random({B, C, H, W}, 201);
  TD w = TD::zeros({K, K}), bias = TD::zeros({K});
  for (int64_t k = 0; k < K; ++k)
    w.values[k * K + k] = 1;
  TD y = TD::zeros({B, N, K});
  patchEmbed(image.cref(), w.cref(), bias.cref(), p, y.ref());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t pr = 0; pr < H / p; ++pr)
      for (int64_t pc = 0; pc < W / p; ++pc)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t py = 0; py < p; ++py)
            for (int64_t px = 0; px < p; ++px) {
              const int64_t n = pr * (W / p) + pc, k = (c * p + py) * p + px;
              EXPECT_EQ(y.values[(b * N + n) * K + k],
                        image.values[((b * C + c) * H + pr * p + py) * W + pc * p + px]);
            }
}

TEST(PatchEmbedKernel, RejectsPatchNotDividingImage) {
  TD image = TD::zeros({1, 1, 4, 6}), w = TD::zeros({16, 2}), b = TD::zeros({2});
  TD y = TD::zeros({1, 1, 2});
  EXPECT_THROW(patchEmbed(image.cref(), w.cref(), b.cref(), 4, y.ref()), stringrt::Error);
  EXPECT_THROW(patchEmbed(image.cref(), w.cref(), b.cref(), 0, y.ref()), stringrt::Error);
}

TEST(PatchEmbedKernel, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, C = 2, H = 4, W = 6, p = 2, D = 3, N = 6;
  TD image = fd::random({B, C, H, W}, 211), w = fd::random({C * p * p, D}, 212);
  TD b = fd::random({D}, 213), v = fd::random({B, N, D}, 214);
  auto forward = [&] {
    TD y = TD::zeros({B, N, D});
    patchEmbed(image.cref(), w.cref(), b.cref(), p, y.ref());
    return y;
  };
  TD dw = TD::zeros(w.shape), db = TD::zeros({D});
  patchEmbedGrad(image.cref(), v.cref(), p, dw.ref(), db.ref());
  EXPECT_TRUE(fd::checkVJP("patch_embed dw", forward, w, v, dw));
  EXPECT_TRUE(fd::checkVJP("patch_embed db", forward, b, v, db));
}

//===--- token_embed -------------------------------------------------------===//

TEST(TokenEmbedKernel, LooksUpRows) {
  Ids ids({2, 2}, {2, 0, 2, 1});
  TD table({3, 2}, {0, 1, 10, 11, 20, 21});
  TD y = TD::zeros({2, 2, 2});
  tokenEmbed(ids.cref(), table.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11}));
}

TEST(TokenEmbedKernel, RejectsIdsOutOfRange) {
  TD table = TD::zeros({3, 2}), y = TD::zeros({1, 2, 2}), dy = TD::zeros({1, 2, 2});
  TD dtable = TD::zeros({3, 2});
  for (int32_t bad : {-1, 3}) {
    Ids ids({1, 2}, {0, bad});
    EXPECT_THROW(tokenEmbed(ids.cref(), table.cref(), y.ref()), stringrt::Error);
    EXPECT_THROW(tokenEmbedGrad(ids.cref(), dy.cref(), dtable.ref()), stringrt::Error);
  }
}

// Repeated ids accumulate (scatter-add); the unused id gets 0.
TEST(TokenEmbedKernel, GradientMatchesFiniteDifferences) {
  Ids ids({2, 3}, {1, 3, 1, 0, 1, 3});
  TD table = fd::random({5, 4}, 221), v = fd::random({2, 3, 4}, 222);
  auto forward = [&] {
    TD y = TD::zeros({2, 3, 4});
    tokenEmbed(ids.cref(), table.cref(), y.ref());
    return y;
  };
  TD dtable = TD::zeros({5, 4});
  tokenEmbedGrad(ids.cref(), v.cref(), dtable.ref());
  EXPECT_TRUE(fd::checkVJP("token_embed dtable", forward, table, v, dtable));
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(dtable.values[2 * 4 + d], 0.0);
    EXPECT_EQ(dtable.values[4 * 4 + d], 0.0);
  }
}

//===--- class_token / select_token ----------------------------------------===//

TEST(ClassTokenKernel, PrependsTheToken) {
  TD x({2, 1, 2}, {1, 2, 3, 4}), cls({2}, {9, 8});
  TD y = TD::zeros({2, 2, 2});
  classToken(x.cref(), cls.cref(), y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{9, 8, 1, 2, 9, 8, 3, 4}));
}

TEST(ClassTokenKernel, GradientsMatchFiniteDifferences) {
  TD x = fd::random({2, 3, 4}, 231), cls = fd::random({4}, 232), v = fd::random({2, 4, 4}, 233);
  auto forward = [&] {
    TD y = TD::zeros({2, 4, 4});
    classToken(x.cref(), cls.cref(), y.ref());
    return y;
  };
  TD dx = TD::zeros(x.shape), dcls = TD::zeros({4});
  classTokenGrad(v.cref(), dx.ref(), dcls.ref());
  EXPECT_TRUE(fd::checkVJP("class_token dx", forward, x, v, dx));
  EXPECT_TRUE(fd::checkVJP("class_token dcls", forward, cls, v, dcls));
}

TEST(SelectTokenKernel, SelectsAndRejectsBadIndex) {
  TD x({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  TD y = TD::zeros({2, 2});
  selectToken(x.cref(), 1, y.ref());
  EXPECT_EQ(y.values, (std::vector<double>{3, 4, 7, 8}));
  EXPECT_THROW(selectToken(x.cref(), 2, y.ref()), stringrt::Error);
  EXPECT_THROW(selectToken(x.cref(), -1, y.ref()), stringrt::Error);
  TD dx = TD::zeros({2, 2, 2});
  EXPECT_THROW(selectTokenGrad(y.cref(), 2, dx.ref()), stringrt::Error);
}

TEST(SelectTokenKernel, GradientMatchesFiniteDifferences) {
  for (int64_t index : {0, 2}) {
    TD x = fd::random({2, 3, 4}, 241), v = fd::random({2, 4}, 242);
    auto forward = [&] {
      TD y = TD::zeros({2, 4});
      selectToken(x.cref(), index, y.ref());
      return y;
    };
    TD dx = TD::zeros(x.shape);
    selectTokenGrad(v.cref(), index, dx.ref());
    EXPECT_TRUE(fd::checkVJP("select_token dx, index " + std::to_string(index), forward, x, v,
                             dx));
  }
}

//===--- float vs double ---------------------------------------------------===//

TEST(EmbeddingKernelsFloat, ForwardAgreesWithDouble) {
  TD image = fd::random({2, 2, 4, 6}, 251, -2, 2), w = fd::random({8, 3}, 252);
  TD b = fd::random({3}, 253), table = fd::random({5, 3}, 254), x = fd::random({2, 6, 3}, 255);
  Ids ids({2, 3}, {4, 0, 2, 2, 1, 3});
  EXPECT_TRUE(fd::floatMatchesDouble("patch_embed", [&](auto zero) {
    using T = decltype(zero);
    auto iT = fd::cast<T>(image), wT = fd::cast<T>(w), bT = fd::cast<T>(b);
    auto y = Tensor<T>::zeros({2, 6, 3});
    patchEmbed(iT.cref(), wT.cref(), bT.cref(), 2, y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("token_embed", [&](auto zero) {
    using T = decltype(zero);
    auto tT = fd::cast<T>(table);
    auto y = Tensor<T>::zeros({2, 3, 3});
    tokenEmbed(ids.cref(), tT.cref(), y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("class_token", [&](auto zero) {
    using T = decltype(zero);
    auto xT = fd::cast<T>(x), cT = fd::cast<T>(b);
    auto y = Tensor<T>::zeros({2, 7, 3});
    classToken(xT.cref(), cT.cref(), y.ref());
    return y;
  }));
  EXPECT_TRUE(fd::floatMatchesDouble("select_token", [&](auto zero) {
    using T = decltype(zero);
    auto xT = fd::cast<T>(x);
    auto y = Tensor<T>::zeros({2, 3});
    selectToken(xT.cref(), 5, y.ref());
    return y;
  }));
}

} // namespace

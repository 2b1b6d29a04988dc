//===- SemaTrainingTest.cpp - optimizer, schedule, data, graph dump -------===//

#include "TestHelpers.h"

#include <filesystem>

using namespace stringc;
using namespace stringc::test;

namespace {

std::string model(const std::string &tail) {
  return "model m\ninput x: f32[B, 4]\nloss mean(x)\n" + tail;
}

TEST(Training, AdamwWithDefaults) {
  Compiled c = compileSource(model("optimizer adamw(lr = 3e-4, weight_decay = 0.05, clip = 1.0)\n"));
  ASSERT_COMPILES(c);
  const GraphOptimizer &opt = c.graph->optimizer;
  EXPECT_EQ(opt.kind, "adamw");
  EXPECT_DOUBLE_EQ(opt.lr, 3e-4);
  EXPECT_DOUBLE_EQ(opt.weightDecay, 0.05);
  EXPECT_DOUBLE_EQ(opt.clipNorm, 1.0);
  EXPECT_DOUBLE_EQ(opt.beta1, 0.9);
  EXPECT_DOUBLE_EQ(opt.beta2, 0.999);
  EXPECT_DOUBLE_EQ(opt.eps, 1e-8);
  EXPECT_EQ(opt.schedule, "constant");
  std::vector<std::string> names;
  for (const auto &[name, value] : opt.attributes())
    names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"kind", "lr", "beta1", "beta2", "eps", "weight_decay", "momentum",
                                             "clip_norm", "schedule", "warmup_steps", "min_lr"}));
}

TEST(Training, SgdAndSchedule) {
  Compiled c = compileSource(model("optimizer sgd(lr = 0.1, momentum = 0.9)\nschedule warmup_cosine(warmup = 100, min_lr = 1e-5)\n"));
  ASSERT_COMPILES(c);
  const GraphOptimizer &opt = c.graph->optimizer;
  EXPECT_EQ(opt.kind, "sgd");
  EXPECT_DOUBLE_EQ(opt.momentum, 0.9);
  EXPECT_EQ(opt.schedule, "warmup_cosine");
  EXPECT_EQ(opt.warmupSteps, 100);
  EXPECT_DOUBLE_EQ(opt.minLr, 1e-5);
  Compiled constant = compileSource(model("optimizer sgd(lr = 0.1)\nschedule constant\n"));
  ASSERT_COMPILES(constant);
  EXPECT_EQ(constant.graph->optimizer.schedule, "constant");
  EXPECT_EQ(constant.graph->optimizer.emaDecay, 0.0);
  Compiled ema = compileSource(model("optimizer sgd(lr = 0.1, ema = 0.99)\n"));
  ASSERT_COMPILES(ema);
  EXPECT_DOUBLE_EQ(ema.graph->optimizer.emaDecay, 0.99);
  EXPECT_EQ(ema.graph->optimizer.attributes().back().first, "ema_decay");
}

TEST(Training, OptimizerErrors) {
  EXPECT_EQ(compileSource(model("optimizer adam(lr = 1e-3)\n")).errors(),
            (std::vector<std::string>{"4:11: unknown optimizer 'adam' (expected adamw or sgd)"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 0)\n")).errors(),
            (std::vector<std::string>{"4:15: sgd: lr must be positive, found 0"}));
  EXPECT_EQ(compileSource(model("optimizer adamw(lr = 1, beta1 = 1)\n")).errors(),
            (std::vector<std::string>{"4:25: adamw: beta1 must be in [0, 1), found 1"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1, beta1 = 0.5)\n")).errors(),
            (std::vector<std::string>{"4:23: sgd: unknown argument 'beta1' (expected lr, weight_decay, clip, momentum or ema)"}));
  EXPECT_EQ(compileSource(model("optimizer adamw(lr = 1, ema = -0.5)\n")).errors(),
            (std::vector<std::string>{"4:25: adamw: ema must be in [0, 1) (0 keeps no EMA), found -0.5"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(0.1)\n")).errors(),
            (std::vector<std::string>{"4:15: sgd: too many positional arguments; 'lr' must be given by name (lr = ...)",
                                      "4:11: sgd: missing argument 'lr'"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1)\noptimizer sgd(lr = 2)\n")).errors(),
            (std::vector<std::string>{"5:1: a model has one 'optimizer'"}));
  EXPECT_EQ(compileSource(model("optimizer 3\n")).errors(),
            (std::vector<std::string>{"4:11: 'optimizer' expects a call such as adamw(lr = 1e-3)"}));
}

TEST(Training, ScheduleErrors) {
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1)\nschedule cosine()\n")).errors(),
            (std::vector<std::string>{"5:10: unknown schedule 'cosine' (expected constant or warmup_cosine)"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 0.01)\nschedule warmup_cosine(min_lr = 0.1)\n")).errors(),
            (std::vector<std::string>{"5:24: warmup_cosine: min_lr (0.1) must not exceed the optimizer's lr (0.01)"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1)\nschedule warmup_cosine(warmup = -1)\n")).errors(),
            (std::vector<std::string>{"5:24: warmup_cosine: warmup must be in [0, inf), found -1"}));
}

TEST(Training, Data) {
  Compiled idx = compileSource(model("optimizer sgd(lr = 1)\ndata idx(\"/usr/share/datasets/fashion-mnist\")\n"));
  ASSERT_COMPILES(idx);
  ASSERT_TRUE(idx.graph->dataset.has_value());
  EXPECT_EQ(idx.graph->dataset->kind, "idx");
  EXPECT_EQ(idx.graph->dataset->path, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(idx.graph->dataset->attributes().size(), 2u);

  Compiled text = compileSource(model("optimizer sgd(lr = 1)\ndata text(\"corpus.txt\", context = 64)\n"), "/srv/models");
  ASSERT_COMPILES(text);
  EXPECT_EQ(text.graph->dataset->path, "/srv/models/corpus.txt");
  EXPECT_EQ(text.graph->dataset->contextLength, 64);
  EXPECT_EQ(std::get<int64_t>(*findAttr(text.graph->dataset->attributes(), "context_length")), 64);

  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1)\ndata text(\"c.txt\")\n")).errors(),
            (std::vector<std::string>{"5:6: text: missing argument 'context'"}));
  EXPECT_EQ(compileSource(model("optimizer sgd(lr = 1)\ndata csv(\"c.txt\")\n")).errors(),
            (std::vector<std::string>{"5:6: unknown data source 'csv' (expected idx or text)"}));
  Compiled none = compileSource(model("optimizer sgd(lr = 1)\n"));
  ASSERT_COMPILES(none);
  EXPECT_FALSE(none.graph->dataset.has_value());
}

TEST(Training, GraphDump) {
  Compiled c = compileSource(R"(model tiny
const D = 4
input x: f32[B, 2, 4]
param g: [D] = normal(std = 0.5, seed = 3) frozen
output y = x * g + 1
loss mean(y)
optimizer sgd(lr = 0.5)
data idx("/data")
)");
  ASSERT_COMPILES(c);
  std::ostringstream os;
  printGraph(*c.graph, os);
  EXPECT_EQ(os.str(), "model tiny\n"
                      "source test.pe\n"
                      "const D = 4\n"
                      "input %0 x: f32[B, 2, 4]\n"
                      "param g: f32[4] = normal {mean = 0.0, std = 0.5, seed = 3} frozen\n"
                      "%1 = pe.get_param() {param = \"g\"} : f32[4]  loc(4:7)\n"
                      "%2 = pe.mul(%0, %1) : f32[B, 2, 4]  loc(5:12)\n"
                      "%3 = pe.scale(%2) {factor = 1.0, bias = 1.0} : f32[B, 2, 4]  loc(5:12)\n"
                      "%4 = pe.mean(%3) : f32[]  loc(6:6)\n"
                      "output y = %3\n"
                      "loss = %4\n"
                      "optimizer {kind = \"sgd\", lr = 0.5, beta1 = 0.9, beta2 = 0.999, eps = 1e-08, "
                      "weight_decay = 0.0, momentum = 0.0, clip_norm = 0.0, schedule = \"constant\", "
                      "warmup_steps = 0, min_lr = 0.0}\n"
                      "dataset {kind = \"idx\", path = \"/data\"}\n");
}

} // namespace

/* c_example: drives a compiled model package from C through the C ABI of
 * libstringrt (stringrt/stringrt.h): load, initialise, bind a small
 * synthetic batch, take three training steps, read the logits and write a
 * checkpoint.
 *
 *   stringc tests/lit/stringc/Inputs/tiny_mlp.pe --target=cpu -o tiny.pkg
 *   c_example tiny.pkg [CHECKPOINT]
 *
 * The model must be a classifier like tiny_mlp: inputs `image` f32
 * [B, 1, 4, 4] and `label` i32 [B], output `logits` [B, 3]. */
#include "stringrt/stringrt.h"

#include <stdint.h>
#include <stdio.h>

enum { kBatch = 6, kSide = 4, kClasses = 3, kSteps = 3 };

/* Prints the failed call's message and releases the model. */
static int fail(stringrt_model *model) {
  fprintf(stderr, "c_example: error: %s\n", stringrt_last_error());
  stringrt_model_free(model);
  return 1;
}

int main(int argc, char **argv) {
  float image[kBatch][1][kSide][kSide];
  int32_t label[kBatch];
  const int64_t image_shape[4] = {kBatch, 1, kSide, kSide};
  const int64_t label_shape[1] = {kBatch};
  float logits[kBatch * kClasses];
  int64_t count = 0;
  stringrt_model *model;
  int b, r, c, step;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: c_example MODEL.pkg [CHECKPOINT]\n");
    return 2;
  }

  /* A synthetic batch: an image of class k is bright in row k. */
  for (b = 0; b < kBatch; ++b) {
    label[b] = b % kClasses;
    for (r = 0; r < kSide; ++r)
      for (c = 0; c < kSide; ++c)
        image[b][0][r][c] = r == label[b] ? 0.9f : 0.05f * (float)((b + c) % 3);
  }

  model = stringrt_model_load(argv[1]);
  if (!model)
    return fail(NULL);
  printf("loaded %s: %lld parameters\n", argv[1],
         (long long)stringrt_model_parameter_count(model));
  if (stringrt_model_init_parameters(model) != 0 ||
      stringrt_model_set_input_f32(model, "image", &image[0][0][0][0], image_shape, 4) != 0 ||
      stringrt_model_set_input_i32(model, "label", label, label_shape, 1) != 0 ||
      stringrt_model_set_total_steps(model, kSteps) != 0)
    return fail(model);

  for (step = 1; step <= kSteps; ++step) {
    float loss = 0;
    if (stringrt_model_train_step(model, &loss) != 0)
      return fail(model);
    printf("step %d: loss %.6f\n", step, loss);
  }

  if (stringrt_model_forward(model, "logits", logits, kBatch * kClasses, &count) != 0)
    return fail(model);
  printf("logits of example 0:");
  for (c = 0; c < kClasses && c < count; ++c)
    printf(" %.4f", logits[c]);
  printf(" (%lld values)\n", (long long)count);

  /* Errors come back as return codes with a message, never as crashes. */
  if (stringrt_model_set_input_f32(model, "pixels", &image[0][0][0][0], image_shape, 4) != 0)
    printf("expected error: %s\n", stringrt_last_error());

  if (argc > 2) {
    if (stringrt_model_save_checkpoint(model, argv[2]) != 0)
      return fail(model);
    printf("checkpoint %s\n", argv[2]);
  }
  stringrt_model_free(model);
  return 0;
}

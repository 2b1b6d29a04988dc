/* Compiled as C: stringrt.h is a valid C header and its functions link from C.
 * CApiTest.cpp calls this. */
#include "stringrt/stringrt.h"

#include <stddef.h>

/* Loads the package, initialises it, binds a batch of two examples of the
 * test model (image f32 [B, 4], label i32 [B]), takes one training step and
 * writes its loss. Returns 0 on success, else the number of the step that
 * failed. */
int stringrt_test_c_train_step(const char *package_path, float *loss_out) {
  const float image[8] = {1, 0, 0, 0, 0, 1, 0, 0};
  const int32_t label[2] = {0, 1};
  const int64_t image_shape[2] = {2, 4};
  const int64_t label_shape[1] = {2};
  int failed = 0;
  stringrt_model *model = stringrt_model_load(package_path);
  if (model == NULL)
    return 1;
  if (stringrt_model_init_parameters(model) != 0)
    failed = 2;
  else if (stringrt_model_set_input_f32(model, "image", image, image_shape, 2) != 0)
    failed = 3;
  else if (stringrt_model_set_input_i32(model, "label", label, label_shape, 1) != 0)
    failed = 4;
  else if (stringrt_model_set_total_steps(model, 1) != 0)
    failed = 5;
  else if (stringrt_model_train_step(model, loss_out) != 0)
    failed = 6;
  stringrt_model_free(model);
  return failed;
}

/* The C ABI of libstringrt: load a compiled model package (stringc
 * --target=cpu, docs/package.md), initialise or load its parameters, bind
 * inputs, take training steps with the package's optimizer and schedule, run
 * the forward program and write checkpoints. A thin layer over the C++ API
 * (stringrt/Model.h, Optimizer.h, Checkpoint.h); examples/cpp/c_example.c
 * uses it.
 *
 * Conventions:
 * - A model is an opaque handle from stringrt_model_load, released with
 *   stringrt_model_free. A handle is not thread-safe: use one from one thread
 *   at a time (different handles may be used concurrently).
 * - Functions returning int return 0 on success and nonzero on failure; then
 *   stringrt_last_error() tells what went wrong. No function throws or
 *   aborts on bad input: NULL handles, pointers, names and shapes are
 *   reported as failures.
 * - Input data is copied when it is bound, so the caller's buffers need not
 *   outlive the call.
 */
#ifndef STRINGRT_STRINGRT_H
#define STRINGRT_STRINGRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded model package: its parameters, bound inputs and optimizer state. */
typedef struct stringrt_model stringrt_model;

/* The message of the most recent failed call made on this thread ("" when no
 * call on this thread has failed). Successful calls leave it unchanged. The
 * string stays valid until the next failing call on this thread. */
const char *stringrt_last_error(void);

/* Loads and validates the package at `package_path`. Returns NULL on failure
 * (a missing or malformed package). The parameters start zeroed: call
 * stringrt_model_init_parameters or stringrt_model_load_parameters before
 * running the model. */
stringrt_model *stringrt_model_load(const char *package_path);

/* Releases the model and everything it holds. NULL is ignored. */
void stringrt_model_free(stringrt_model *model);

/* The number of f32 parameter elements (frozen ones included), or -1 for a
 * NULL model. */
int64_t stringrt_model_parameter_count(const stringrt_model *model);

/* Sets every parameter from its initialiser in the package (normal, uniform,
 * zeros, ones, constant, load). */
int stringrt_model_init_parameters(stringrt_model *model);

/* Loads every parameter by name from a safetensors file: a checkpoint of this
 * model (stringrt_model_save_checkpoint, stringrun) or any file with an F32
 * tensor of the right shape per parameter. Nothing is changed on failure.
 * The optimizer's state and step count are left as they are. */
int stringrt_model_load_parameters(stringrt_model *model,
                                   const char *safetensors_path);

/* Binds the input `name` (as the package's manifest names it) to a copy of
 * `data`: the row-major elements of a tensor of `rank` dimensions `shape`
 * (shape may be NULL when rank is 0). The dtype and rank must be the
 * input's, and every dimension its declared size, but the batch dimension,
 * which may be any size >= 1 (all inputs of one run must agree on it). A
 * previous binding of the input is replaced. */
int stringrt_model_set_input_f32(stringrt_model *model, const char *name,
                                 const float *data, const int64_t *shape,
                                 int rank);
int stringrt_model_set_input_i32(stringrt_model *model, const char *name,
                                 const int32_t *data, const int64_t *shape,
                                 int rank);

/* The number of optimizer steps of the whole run (>= 1): the N of the
 * package's learning-rate schedule. Must be set before the first
 * stringrt_model_train_step. */
int stringrt_model_set_total_steps(stringrt_model *model, int64_t total_steps);

/* One training step on the bound inputs: runs the gradients program and takes
 * one step of the package's optimizer (step t = steps taken so far + 1, with
 * the learning rate of the schedule over the total steps). `loss_out` (may be
 * NULL) gets the loss before the step. Fails, changing nothing, when an input
 * is unbound, the parameters were never set, the total steps were not given,
 * or the loss is not finite. */
int stringrt_model_train_step(stringrt_model *model, float *loss_out);

/* Runs the forward program on the bound inputs and copies its output
 * `output_name` ("loss", "logits", ...) into `out`. `*count_out` (when
 * count_out is not NULL) gets the output's element count, also when it does
 * not fit: a call with capacity 0 (out may then be NULL) asks for the size.
 * Fails when the output has more than `capacity` elements. */
int stringrt_model_forward(stringrt_model *model, const char *output_name,
                           float *out, int64_t capacity, int64_t *count_out);

/* Writes a training checkpoint (a safetensors file, atomically): the
 * parameters, the optimizer state, the steps taken, the total steps and the
 * batch size of the last step. stringrt_model_load_parameters and `stringrun
 * eval --params` read it. */
int stringrt_model_save_checkpoint(stringrt_model *model, const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRINGRT_STRINGRT_H */

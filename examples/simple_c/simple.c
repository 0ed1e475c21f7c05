/* simple_c: the simple example through the C ABI (dsv41.h): greedy tokens of a prompt.
 *   dsv41_example_simple_c MODEL_DIR [PROMPT] [MAX_TOKENS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv41/dsv41.h"

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  dsv41_status status;
} waiter;

static void on_event(const dsv41_event* ev, void* user) {
  waiter* w = (waiter*)user;
  if (ev->kind == DSV41_EVENT_TOKEN) {
    printf("%d ", ev->token);
    fflush(stdout);
    return;
  }
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  w->status = ev->status;
  if (ev->status != DSV41_OK) fprintf(stderr, "generation: %s\n", ev->error_message);
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL_DIR [PROMPT] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  dsv41_model_params mp = dsv41_model_default_params();
  mp.model_dir = argv[1];
  dsv41_model* model = NULL;
  if (dsv41_model_load(&mp, &model) != DSV41_OK) {
    fprintf(stderr, "load: %s\n", dsv41_last_error_message());
    return 1;
  }
  const char* text = argc > 2 ? argv[2] : "<｜begin▁of▁sentence｜>Hello,";
  int32_t ids[4096];
  size_t n = 0;
  if (dsv41_tokenize(model, text, strlen(text), 1, ids, 4096, &n) != DSV41_OK) {
    fprintf(stderr, "tokenize: %s\n", dsv41_last_error_message());
    dsv41_model_free(model);
    return 1;
  }
  dsv41_engine* engine = NULL;
  dsv41_engine_params ep = dsv41_engine_default_params();
  if (dsv41_engine_create(model, &ep, &engine) != DSV41_OK) {
    fprintf(stderr, "engine: %s\n", dsv41_last_error_message());
    dsv41_model_free(model);
    return 1;
  }
  dsv41_sampler_params sp = dsv41_sampler_default_params();
  sp.temperature = 0.0f;
  dsv41_stop_params stop = dsv41_stop_default_params();
  stop.max_tokens = argc > 3 ? atoll(argv[3]) : 12;
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, DSV41_OK};
  uint64_t id = 0;
  dsv41_status st = dsv41_engine_submit(engine, ids, n, &sp, &stop, on_event, &w, &id);
  if (st == DSV41_OK) {
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    st = w.status;
    printf("\n");
  } else {
    fprintf(stderr, "submit: %s\n", dsv41_last_error_message());
  }
  dsv41_engine_free(engine);
  dsv41_model_free(model);
  return st == DSV41_OK ? 0 : 1;
}

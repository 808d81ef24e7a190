#include "ded_mem.h"

#include <stdlib.h>

static void *mem_libc_malloc(size_t size, void *user) {
  (void)user;
  return malloc(size);
}

static void mem_libc_free(void *ptr, void *user) {
  (void)user;
  free(ptr);
}

static void *mem_libc_calloc(size_t nmemb, size_t size, void *user) {
  (void)user;
  return calloc(nmemb, size);
}

static void *mem_libc_realloc(void *ptr, size_t size, void *user) {
  (void)user;
  return realloc(ptr, size);
}

static const ded_mem mem_libc = {NULL, mem_libc_malloc, mem_libc_free, mem_libc_calloc,
                                 mem_libc_realloc};

const ded_mem *ded_mem_default(void) { return &mem_libc; }

void *ded_mem_malloc(const ded_mem *mem, size_t size) {
  if (!mem) mem = &mem_libc;
  return mem->malloc(size ? size : 1, mem->user);
}

void *ded_mem_calloc(const ded_mem *mem, size_t nmemb, size_t size) {
  if (!mem) mem = &mem_libc;
  if (nmemb == 0 || size == 0) nmemb = size = 1;
  return mem->calloc(nmemb, size, mem->user);
}

void *ded_mem_realloc(const ded_mem *mem, void *ptr, size_t size) {
  if (!mem) mem = &mem_libc;
  return mem->realloc(ptr, size ? size : 1, mem->user);
}

void ded_mem_free(const ded_mem *mem, void *ptr) {
  if (!ptr) return;
  if (!mem) mem = &mem_libc;
  mem->free(ptr, mem->user);
}

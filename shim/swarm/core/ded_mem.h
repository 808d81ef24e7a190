/*
 * ded_mem.h: the allocator hooks every engine allocation goes through.
 *
 * Tests replace them with a failing allocator to prove that out-of-memory
 * is an error return, never a crash. A NULL ded_mem means libc.
 */
#ifndef DED_MEM_H
#define DED_MEM_H

#include <stddef.h>

typedef struct ded_mem {
  void *user;
  void *(*malloc)(size_t size, void *user);
  void (*free)(void *ptr, void *user);
  void *(*calloc)(size_t nmemb, size_t size, void *user);
  void *(*realloc)(void *ptr, size_t size, void *user);
} ded_mem;

/* The libc allocator. */
const ded_mem *ded_mem_default(void);

void *ded_mem_malloc(const ded_mem *mem, size_t size);
void *ded_mem_calloc(const ded_mem *mem, size_t nmemb, size_t size);
void *ded_mem_realloc(const ded_mem *mem, void *ptr, size_t size);
void ded_mem_free(const ded_mem *mem, void *ptr);

#endif /* DED_MEM_H */

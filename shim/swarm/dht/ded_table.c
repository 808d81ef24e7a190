#include "ded_table.h"

#include <stddef.h>
#include <string.h>

#include "../core/ded_err.h"

void ded_table_init(ded_table *t, const ded_mem *mem, size_t max) {
  memset(t, 0, sizeof *t);
  t->mem = mem;
  t->max = max ? max : DED_PEERS_MAX;
}

void ded_table_free(ded_table *t) {
  ded_mem_free(t->mem, t->v);
  t->v = NULL;
  t->n = t->cap = 0;
}

/* Index of the first entry whose id is >= |id|. */
static size_t table_lower_bound(const ded_table *t, const uint8_t id[DED_ID_BYTES]) {
  DED_STATIC_ASSERT(offsetof(ded_table_entry, id) == 0, "entries start with the id");
  return ded_id_lower_bound(t->v, t->n, sizeof *t->v, id);
}

const ded_table_entry *ded_table_find(const ded_table *t, const uint8_t id[DED_ID_BYTES]) {
  size_t i = table_lower_bound(t, id);
  if (i < t->n && memcmp(t->v[i].id, id, DED_ID_BYTES) == 0) return &t->v[i];
  return NULL;
}

size_t ded_table_count(const ded_table *t) { return t->n; }

const ded_table_entry *ded_table_at(const ded_table *t, size_t i) {
  DED_ASSERT(i < t->n);
  return &t->v[i];
}

int ded_table_upsert(ded_table *t, const ded_record *rec) {
  uint8_t id[DED_ID_BYTES];
  ded_peer_id(rec->pk, id);
  size_t i = table_lower_bound(t, id);
  if (i < t->n && memcmp(t->v[i].id, id, DED_ID_BYTES) == 0) {
    if (rec->seq <= t->v[i].rec.seq) return 0;
    t->v[i].rec = *rec;
    return 1;
  }
  if (t->n >= t->max) return DED_ERR_LIMIT;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    ded_table_entry *v = ded_mem_realloc(t->mem, t->v, cap * sizeof *v);
    if (!v) return DED_ERR_NOMEM;
    t->v = v;
    t->cap = cap;
  }
  memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
  memcpy(t->v[i].id, id, DED_ID_BYTES);
  t->v[i].rec = *rec;
  t->n++;
  return 1;
}

size_t ded_table_expire(ded_table *t, uint64_t now_ms, const uint8_t keep[DED_ID_BYTES]) {
  size_t out = 0, dropped = 0;
  for (size_t i = 0; i < t->n; i++) {
    const ded_table_entry *e = &t->v[i];
    bool mine = keep && memcmp(e->id, keep, DED_ID_BYTES) == 0;
    if (!mine && ded_record_expiry_ms(&e->rec) + DED_CLOCK_SKEW_MS_MAX < now_ms) {
      dropped++;
      continue;
    }
    if (out != i) t->v[out] = t->v[i];
    out++;
  }
  t->n = out;
  return dropped;
}

void ded_table_remove(ded_table *t, const uint8_t id[DED_ID_BYTES]) {
  const ded_table_entry *e = ded_table_find(t, id);
  if (!e) return;
  size_t i = (size_t)(e - t->v);
  memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
  t->n--;
}

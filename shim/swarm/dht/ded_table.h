/*
 * ded_table.h: the discovery table, a fully replicated set of records.
 *
 * Every peer holds every live record of its run, kept sorted by peer id.
 * A record replaces an older one of the same owner only with a larger
 * sequence number, so replays and reordering cannot roll an address back.
 * This is the seam where a Kademlia DHT goes once swarms outgrow a full
 * table: the engine only calls upsert/find/expire/remove and walks the
 * entries through count/at, never the fields.
 */
#ifndef DED_TABLE_H
#define DED_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/ded_mem.h"
#include "ded_record.h"

typedef struct ded_table_entry {
  uint8_t id[DED_ID_BYTES];
  ded_record rec;
} ded_table_entry;

typedef struct ded_table {
  const ded_mem *mem;
  ded_table_entry *v; /* sorted by id */
  size_t n;
  size_t cap;
  size_t max; /* DED_PEERS_MAX unless a test lowers it */
} ded_table;

void ded_table_init(ded_table *t, const ded_mem *mem, size_t max);
void ded_table_free(ded_table *t);

/*
 * Stores a verified record. Returns 1 if it is new or newer than what we
 * held (the caller forwards it), 0 if it is a duplicate or older, or
 * DED_ERR_LIMIT when the table is full, DED_ERR_NOMEM.
 */
int ded_table_upsert(ded_table *t, const ded_record *rec);

/* The entry of peer |id|, or NULL. Valid until the next upsert/expire. */
const ded_table_entry *ded_table_find(const ded_table *t, const uint8_t id[DED_ID_BYTES]);

/* How many records the table holds, and the |i|th of them in id order
 * (i < ded_table_count); valid until the next upsert/expire/remove. */
size_t ded_table_count(const ded_table *t);
const ded_table_entry *ded_table_at(const ded_table *t, size_t i);

/* Drops records that expired before |now_ms| (allowing clock skew), except
 * the one with id |keep| (our own). Returns the number dropped. */
size_t ded_table_expire(ded_table *t, uint64_t now_ms, const uint8_t keep[DED_ID_BYTES]);

/* Removes peer |id|'s record, if any. */
void ded_table_remove(ded_table *t, const uint8_t id[DED_ID_BYTES]);

#endif /* DED_TABLE_H */

/*
 * test_table.c: dht/ded_table, the replicated set of discovery records.
 *
 * Only a larger sequence number replaces a record, so a replayed or
 * reordered record can never roll a peer's address back; the table stays
 * sorted by id; it is bounded; expiry spares our own record.
 */
#include "unit_util.h"

#include "core/ded_limits.h"
#include "dht/ded_table.h"

#define NOW_MS 1700000000000ull
#define TTL_MS 300000u

/* Identities are expensive enough to derive that the tests share them. */
#define N_IDENTS 24
static ded_ident idents[N_IDENTS];

static int table_setup(void **state) {
  (void)state;
  for (int i = 0; i < N_IDENTS; i++) unit_ident(&idents[i], (uint8_t)(100 + i));
  return 0;
}

/* An (unsigned: the table stores what the caller verified) record. */
static ded_record table_rec(int who, uint64_t seq, uint64_t issued_ms) {
  ded_record rec;
  memset(&rec, 0, sizeof rec);
  memcpy(rec.pk, idents[who].pk, DED_PK_BYTES);
  rec.seq = seq;
  rec.issued_ms = issued_ms;
  rec.ttl_ms = TTL_MS;
  rec.naddr = 1;
  rec.addr[0].family = 4;
  rec.addr[0].port = (uint16_t)(1000 + seq);
  return rec;
}

static void table_assert_sorted(const ded_table *t) {
  for (size_t i = 1; i < t->n; i++)
    assert_true(memcmp(t->v[i - 1].id, t->v[i].id, DED_ID_BYTES) < 0);
  for (size_t i = 0; i < t->n; i++) {
    uint8_t id[DED_ID_BYTES];
    ded_peer_id(t->v[i].rec.pk, id);
    assert_memory_equal(id, t->v[i].id, DED_ID_BYTES);
  }
}

static void test_table_upsert_sequence(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 0);
  assert_int_equal(t.max, DED_PEERS_MAX);
  ded_record r5 = table_rec(0, 5, NOW_MS);
  assert_int_equal(ded_table_upsert(&t, &r5), 1); /* new */
  assert_int_equal(t.n, 1);
  assert_int_equal(ded_table_upsert(&t, &r5), 0); /* same seq: a duplicate */
  ded_record r5b = table_rec(0, 5, NOW_MS + 1);
  r5b.addr[0].port = 9999;
  assert_int_equal(ded_table_upsert(&t, &r5b), 0); /* same seq, other content: still refused */
  ded_record r4 = table_rec(0, 4, NOW_MS + 2);
  assert_int_equal(ded_table_upsert(&t, &r4), 0); /* older: a replay */
  const ded_table_entry *e = ded_table_find(&t, idents[0].id);
  assert_non_null(e);
  assert_int_equal(e->rec.seq, 5);
  assert_int_equal(e->rec.addr[0].port, 1005);
  ded_record r6 = table_rec(0, 6, NOW_MS + 3);
  assert_int_equal(ded_table_upsert(&t, &r6), 1); /* newer */
  assert_int_equal(t.n, 1);
  e = ded_table_find(&t, idents[0].id);
  assert_non_null(e);
  assert_int_equal(e->rec.seq, 6);
  assert_int_equal(e->rec.issued_ms, NOW_MS + 3);
  assert_int_equal(e->rec.addr[0].port, 1006);
  ded_table_free(&t);
  assert_null(t.v);
  assert_int_equal(t.n, 0);
}

static void test_table_sorted_lookup(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 0);
  /* Insert in an order unrelated to the ids; enough to grow twice. */
  for (int i = 0; i < N_IDENTS; i++) {
    int who = (i * 7) % N_IDENTS;
    ded_record r = table_rec(who, 1, NOW_MS);
    assert_int_equal(ded_table_upsert(&t, &r), 1);
    table_assert_sorted(&t);
  }
  assert_int_equal(t.n, N_IDENTS);
  for (int i = 0; i < N_IDENTS; i++) {
    const ded_table_entry *e = ded_table_find(&t, idents[i].id);
    assert_non_null(e);
    assert_memory_equal(e->id, idents[i].id, DED_ID_BYTES);
    assert_memory_equal(e->rec.pk, idents[i].pk, DED_PK_BYTES);
  }
  /* Ids that are not there: below, between and above every entry. */
  uint8_t probe[DED_ID_BYTES];
  memset(probe, 0x00, sizeof probe);
  assert_null(ded_table_find(&t, probe));
  memset(probe, 0xff, sizeof probe);
  assert_null(ded_table_find(&t, probe));
  memcpy(probe, t.v[3].id, DED_ID_BYTES);
  probe[DED_ID_BYTES - 1] ^= 1;
  assert_null(ded_table_find(&t, probe));
  ded_table_free(&t);
}

static void test_table_full(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 3);
  for (int i = 0; i < 3; i++) {
    ded_record r = table_rec(i, 1, NOW_MS);
    assert_int_equal(ded_table_upsert(&t, &r), 1);
  }
  ded_record stranger = table_rec(3, 1, NOW_MS);
  assert_int_equal(ded_table_upsert(&t, &stranger), DED_ERR_LIMIT);
  assert_int_equal(t.n, 3);
  assert_null(ded_table_find(&t, idents[3].id));
  /* A full table still takes newer records of peers it holds. */
  ded_record newer = table_rec(1, 2, NOW_MS);
  assert_int_equal(ded_table_upsert(&t, &newer), 1);
  assert_int_equal(ded_table_find(&t, idents[1].id)->rec.seq, 2);
  /* Room made by a removal is usable again. */
  ded_table_remove(&t, idents[0].id);
  assert_int_equal(ded_table_upsert(&t, &stranger), 1);
  assert_int_equal(t.n, 3);
  table_assert_sorted(&t);
  ded_table_free(&t);
}

static void test_table_expire(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 0);
  /* Entries issued 0..5 TTLs ago; ours (0) is the oldest of all. */
  for (int i = 0; i < 6; i++) {
    ded_record r = table_rec(i, 1, NOW_MS - (uint64_t)i * TTL_MS);
    assert_int_equal(ded_table_upsert(&t, &r), 1);
  }
  ded_record mine = table_rec(6, 1, NOW_MS - 100ull * TTL_MS);
  assert_int_equal(ded_table_upsert(&t, &mine), 1);
  /* The oldest other record (5 TTLs old) lives until skew has passed too. */
  assert_int_equal(ded_table_expire(&t, NOW_MS - 4 * TTL_MS + DED_CLOCK_SKEW_MS_MAX, idents[6].id),
                   0);
  assert_int_equal(t.n, 7);
  /* At NOW + skew + 1 ms, every record issued at least one TTL ago is out. */
  size_t dropped = ded_table_expire(&t, NOW_MS + DED_CLOCK_SKEW_MS_MAX + 1, idents[6].id);
  assert_int_equal(dropped, 5);
  assert_int_equal(t.n, 2);
  assert_non_null(ded_table_find(&t, idents[0].id)); /* issued now: alive */
  assert_non_null(ded_table_find(&t, idents[6].id)); /* ours: kept */
  for (int i = 1; i < 6; i++) assert_null(ded_table_find(&t, idents[i].id));
  table_assert_sorted(&t);
  /* Without a |keep|, ours goes too. */
  assert_int_equal(ded_table_expire(&t, NOW_MS + DED_CLOCK_SKEW_MS_MAX + 1, NULL), 1);
  assert_int_equal(t.n, 1);
  assert_non_null(ded_table_find(&t, idents[0].id));
  ded_table_free(&t);
}

/* Exactly at the bound it stays; one millisecond later it goes. */
static void test_table_expire_boundary(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 0);
  ded_record r = table_rec(0, 1, NOW_MS);
  assert_int_equal(ded_table_upsert(&t, &r), 1);
  uint64_t last_ok = NOW_MS + TTL_MS + DED_CLOCK_SKEW_MS_MAX;
  assert_int_equal(ded_table_expire(&t, last_ok, NULL), 0);
  assert_int_equal(t.n, 1);
  assert_int_equal(ded_table_expire(&t, last_ok + 1, NULL), 1);
  assert_int_equal(t.n, 0);
  ded_table_free(&t);
}

static void test_table_remove(void **state) {
  (void)state;
  ded_table t;
  ded_table_init(&t, NULL, 0);
  for (int i = 0; i < 8; i++) {
    ded_record r = table_rec(i, 1, NOW_MS);
    assert_int_equal(ded_table_upsert(&t, &r), 1);
  }
  /* First, last, middle, and one that is not there. */
  uint8_t first[DED_ID_BYTES], last[DED_ID_BYTES], mid[DED_ID_BYTES];
  memcpy(first, t.v[0].id, DED_ID_BYTES);
  memcpy(last, t.v[7].id, DED_ID_BYTES);
  memcpy(mid, t.v[4].id, DED_ID_BYTES);
  ded_table_remove(&t, first);
  ded_table_remove(&t, last);
  ded_table_remove(&t, mid);
  assert_int_equal(t.n, 5);
  ded_table_remove(&t, mid);
  ded_table_remove(&t, idents[20].id);
  assert_int_equal(t.n, 5);
  assert_null(ded_table_find(&t, first));
  assert_null(ded_table_find(&t, last));
  assert_null(ded_table_find(&t, mid));
  table_assert_sorted(&t);
  /* A removed peer comes back with any sequence number. */
  ded_record back = table_rec(0, 1, NOW_MS);
  ded_table_remove(&t, idents[0].id);
  size_t n = t.n;
  assert_int_equal(ded_table_upsert(&t, &back), 1);
  assert_int_equal(t.n, n + 1);
  ded_table_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_upsert_sequence),
      cmocka_unit_test(test_table_sorted_lookup),
      cmocka_unit_test(test_table_full),
      cmocka_unit_test(test_table_expire),
      cmocka_unit_test(test_table_expire_boundary),
      cmocka_unit_test(test_table_remove),
  };
  return cmocka_run_group_tests(tests, table_setup, NULL);
}

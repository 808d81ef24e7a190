/*
 * test_sendq.c: core/ded_sendq, one connection's output.
 *
 * The driver sees the frames in one write order (the frame in flight,
 * then CTRL < RESULT < DATA < BULK, first in first out within a class),
 * and pending and consume walk that same order; a frame begun is never
 * overtaken; letting go of an owner's memory drops its queued frames and
 * copies the rest of the one half written, so the stream stays whole;
 * moving to another connection restarts a half-written frame and drops a
 * copied tail; every reference lent is given back exactly once.
 *
 * Every test allocates through a counting allocator and checks that the
 * queue gave every block back.
 */
#include "unit_util.h"

#include "core/ded_assert.h"
#include "core/ded_sendq.h"

/* ------------------------------------------------------------- helpers */

/* Two owners whose memory frames borrow: a round's buffer or accumulator. */
static uint8_t own_a[256], own_b[256];

/* Lends and their ends, per owner (0: own_a, 1: own_b) and memory (user). */
typedef struct sq_ledger {
  int refs[2][2];
  int unrefs[2][2];
} sq_ledger;

static int sq_owner_index(const void *owner) {
  if (owner == own_a) return 0;
  assert_ptr_equal(owner, own_b);
  return 1;
}

static void sq_ref(void *ctx, void *owner, bool user) {
  sq_ledger *l = ctx;
  l->refs[sq_owner_index(owner)][user]++;
}

static void sq_unref(void *ctx, void *owner, bool user) {
  sq_ledger *l = ctx;
  int i = sq_owner_index(owner);
  l->unrefs[i][user]++;
  assert_true(l->unrefs[i][user] <= l->refs[i][user]); /* never more ends than lends */
}

/* References of |owner|'s memory (|user|) still lent out. */
static int sq_out(const sq_ledger *l, const void *owner, bool user) {
  int i = sq_owner_index(owner);
  return l->refs[i][user] - l->unrefs[i][user];
}

/* A test's world: a counting allocator, the ledger, the env over both. */
typedef struct sq_world {
  unit_failmem fm;
  sq_ledger led;
  ded_sendq_env env;
  ded_sendq q, to; /* a connection's queue, and another's */
} sq_world;

static void sq_world_init(sq_world *w) {
  unit_failmem_init(&w->fm, -1);
  memset(&w->led, 0, sizeof w->led);
  w->env = (ded_sendq_env){&w->fm.mem, sq_ref, sq_unref, &w->led};
  memset(&w->q, 0, sizeof w->q);
  memset(&w->to, 0, sizeof w->to);
  for (size_t i = 0; i < sizeof own_a; i++) {
    own_a[i] = (uint8_t)(0x40 + i);
    own_b[i] = (uint8_t)(0x90 + 3 * i);
  }
}

/* Every lend ended, every block back. */
static void sq_world_check_clean(const sq_world *w) {
  for (int o = 0; o < 2; o++)
    for (int u = 0; u < 2; u++) assert_int_equal(w->led.refs[o][u], w->led.unrefs[o][u]);
  assert_int_equal(w->fm.live, 0);
}

/* What a frame must look like on the wire, and whose memory it borrows. */
typedef struct sq_frame {
  uint8_t bytes[DED_DATA_HDR_BYTES + sizeof own_a];
  size_t len;
  const void *owner;
} sq_frame;

/* A frame built in full: |len| bytes derived from |tag|. */
static ded_sendq_item *sq_owned(sq_world *w, uint8_t tag, size_t len, sq_frame *f) {
  ded_sendq_item *it = ded_sendq_item_new(&w->env);
  assert_non_null(it);
  it->owned = ded_mem_malloc(w->env.mem, len);
  assert_non_null(it->owned);
  it->owned_len = len;
  for (size_t i = 0; i < len; i++) it->owned[i] = (uint8_t)(tag + 7 * i);
  assert_true(len <= sizeof f->bytes);
  memcpy(f->bytes, it->owned, len);
  f->len = len;
  f->owner = NULL;
  return it;
}

/* A data frame: an inline header derived from |tag|, and |len| bytes at
 * |off| of |owner|'s memory (its caller's buffer if |user|) as payload. */
static ded_sendq_item *sq_lent(sq_world *w, uint8_t tag, uint8_t *owner, bool user, size_t off,
                               size_t len, sq_frame *f) {
  ded_sendq_item *it = ded_sendq_item_new(&w->env);
  assert_non_null(it);
  for (size_t i = 0; i < DED_DATA_HDR_BYTES; i++) it->hdr[i] = (uint8_t)(tag ^ (5 * i));
  ded_sendq_item_lend(&w->env, it, owner, user, owner + off, len);
  memcpy(f->bytes, it->hdr, DED_DATA_HDR_BYTES);
  memcpy(f->bytes + DED_DATA_HDR_BYTES, owner + off, len);
  f->len = DED_DATA_HDR_BYTES + len;
  f->owner = owner;
  return it;
}

/* The stream the frames |order| (NULL ended) make, from byte |skip| of
 * the first; returns its length. */
static size_t sq_expect(uint8_t *out, const sq_frame *const *order, size_t skip) {
  size_t n = 0;
  for (int i = 0; order[i]; i++) {
    size_t from = i == 0 ? skip : 0;
    memcpy(out + n, order[i]->bytes + from, order[i]->len - from);
    n += order[i]->len - from;
  }
  return n;
}

/* What pending shows now, concatenated; returns its length. */
static size_t sq_view(const ded_sendq *q, uint8_t *out, size_t cap) {
  ded_iov iov[64];
  int k = ded_sendq_pending(q, iov, 64);
  size_t n = 0;
  for (int i = 0; i < k; i++) {
    assert_true(iov[i].len > 0);
    assert_true(n + iov[i].len <= cap);
    memcpy(out + n, iov[i].base, iov[i].len);
    n += iov[i].len;
  }
  return n;
}

/* Writes everything out as a driver would, at most |step| bytes of what
 * pending shows at a time; returns the bytes written. */
static size_t sq_drain(sq_world *w, ded_sendq *q, uint8_t *out, size_t cap, size_t step) {
  size_t n = 0;
  while (ded_sendq_has_output(q)) {
    ded_iov iov[8];
    int k = ded_sendq_pending(q, iov, 8);
    assert_true(k > 0);
    size_t took = 0;
    for (int i = 0; i < k && took < step; i++) {
      size_t c = DED_MIN(iov[i].len, step - took);
      assert_true(n + c <= cap);
      memcpy(out + n, iov[i].base, c);
      n += c;
      took += c;
    }
    ded_sendq_consume(&w->env, q, took, NULL, NULL);
  }
  return n;
}

/* Drains |q| in steps of |step| and checks it wrote exactly the frames
 * |order| (NULL ended), from byte |skip| of the first. */
static void sq_drain_expect(sq_world *w, ded_sendq *q, const sq_frame *const *order, size_t skip,
                            size_t step) {
  static uint8_t want[8192], got[8192];
  size_t want_len = sq_expect(want, order, skip);
  size_t n = sq_drain(w, q, got, sizeof got, step);
  assert_int_equal(n, want_len);
  assert_memory_equal(got, want, want_len);
  assert_false(ded_sendq_has_output(q));
}

/* Owners seen by consume's |each|, in order. */
typedef struct sq_seen {
  const void *owner[64];
  int n;
} sq_seen;

static void sq_each(void *ctx, void *owner) {
  sq_seen *s = ctx;
  assert_true(s->n < 64);
  s->owner[s->n++] = owner;
}

/* ---------------------------------------------------------------- tests */

/* An empty queue has nothing to show, and consuming from it is harmless. */
static void test_sendq_empty(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  assert_false(ded_sendq_has_output(&w.q));
  for (int c = 0; c < DED_Q_COUNT; c++) assert_false(ded_sendq_has_class(&w.q, c));
  ded_iov iov[4];
  assert_int_equal(ded_sendq_pending(&w.q, iov, 4), 0);
  ded_sendq_consume(&w.env, &w.q, 100, NULL, NULL);
  assert_false(ded_sendq_has_output(&w.q));
  ded_sendq_free(&w.env, &w.q);
  sq_world_check_clean(&w);
}

/* Queued in any order, frames are written CTRL, RESULT, DATA, BULK, each
 * class first in first out, whatever the driver's step. */
static void test_sendq_write_order(void **state) {
  (void)state;
  static const size_t steps[] = {1, 3, 29, 4096};
  for (size_t s = 0; s < DED_ARRAY_LEN(steps); s++) {
    sq_world w;
    sq_world_init(&w);
    sq_frame b1, d1, c1, r1, c2, d2, r2;
    ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 0x10, 50, &b1));
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 0x20, own_a, true, 0, 40, &d1));
    ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 0x30, 9, &c1));
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 0x40, own_b, false, 8, 17, &r1));
    ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 0x50, 12, &c2));
    ded_sendq_push(&w.q, DED_Q_DATA, sq_owned(&w, 0x60, 33, &d2));
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_owned(&w, 0x70, 5, &r2));
    for (int c = 0; c < DED_Q_COUNT; c++) assert_true(ded_sendq_has_class(&w.q, c));
    const sq_frame *order[] = {&c1, &c2, &r1, &r2, &d1, &d2, &b1, NULL};
    sq_drain_expect(&w, &w.q, order, 0, steps[s]);
    sq_world_check_clean(&w);
  }
}

/* pending and consume walk one order: consumed byte by byte, what pending
 * shows is always the rest of what it showed first, and |each| sees the
 * owner of exactly the frame that byte belongs to. */
static void test_sendq_pending_consume_agree(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame f[6];
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 3, 11, &f[0]));
  ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 2, 6, &f[1]));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 3, own_b, false, 0, 7, &f[2]));
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 4, 8, &f[3]));
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 5, own_b, true, 100, 1, &f[4]));
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_lent(&w, 6, own_a, false, 50, 2, &f[5]));
  const sq_frame *order[] = {&f[3], &f[5], &f[2], &f[0], &f[4], &f[1], NULL};
  uint8_t want[1024], view[1024];
  const void *owner_of[1024];
  size_t total = 0;
  for (int i = 0; order[i]; i++)
    for (size_t b = 0; b < order[i]->len; b++) owner_of[total++] = order[i]->owner;
  assert_int_equal(sq_expect(want, order, 0), total);
  for (size_t pos = 0; pos < total; pos++) {
    size_t n = sq_view(&w.q, view, sizeof view);
    assert_int_equal(n, total - pos);
    assert_memory_equal(view, want + pos, n);
    sq_seen seen = {{0}, 0};
    ded_sendq_consume(&w.env, &w.q, 1, sq_each, &seen);
    assert_int_equal(seen.n, 1);
    assert_ptr_equal(seen.owner[0], owner_of[pos]);
  }
  assert_false(ded_sendq_has_output(&w.q));
  assert_int_equal(sq_view(&w.q, view, sizeof view), 0);
  sq_world_check_clean(&w);
}

/* A step across frames: |each| sees every frame that got bytes, in write
 * order, once. */
static void test_sendq_consume_across_frames(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame f[4];
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 10, &f[0]));
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 2, 4, &f[1]));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 3, own_b, false, 0, 10, &f[2]));
  ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 4, 4, &f[3]));
  /* The CTRL frame, the RESULT frame, and 1 byte of the DATA frame. */
  sq_seen seen = {{0}, 0};
  ded_sendq_consume(&w.env, &w.q, f[1].len + f[2].len + 1, sq_each, &seen);
  assert_int_equal(seen.n, 3);
  assert_null(seen.owner[0]);
  assert_ptr_equal(seen.owner[1], own_b);
  assert_ptr_equal(seen.owner[2], own_a);
  assert_int_equal(sq_out(&w.led, own_b, false), 0); /* written: let go */
  assert_int_equal(sq_out(&w.led, own_a, true), 1);  /* half written: still lent */
  /* More than there is: the rest of DATA and BULK, and no more. */
  seen.n = 0;
  ded_sendq_consume(&w.env, &w.q, 1000, sq_each, &seen);
  assert_int_equal(seen.n, 2);
  assert_ptr_equal(seen.owner[0], own_a);
  assert_null(seen.owner[1]);
  assert_false(ded_sendq_has_output(&w.q));
  sq_world_check_clean(&w);
}

/* pending with room for |max| pieces shows the first |max| of the full
 * list: a data frame's header may go without its payload, never the
 * reverse. */
static void test_sendq_pending_max(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame f[3];
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 20, &f[0]));
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 2, own_b, true, 0, 20, &f[1]));
  ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 3, 9, &f[2]));
  ded_iov full[8], part[8];
  int nfull = ded_sendq_pending(&w.q, full, 8);
  assert_int_equal(nfull, 5); /* header, payload, header, payload, built */
  assert_int_equal(full[0].len, DED_DATA_HDR_BYTES);
  assert_ptr_equal(full[1].base, own_a);
  assert_int_equal(full[1].len, 20);
  assert_int_equal(full[4].len, 9);
  for (int max = 0; max <= 6; max++) {
    int n = ded_sendq_pending(&w.q, part, max);
    assert_int_equal(n, DED_MIN(max, nfull));
    for (int i = 0; i < n; i++) {
      assert_ptr_equal(part[i].base, full[i].base);
      assert_int_equal(part[i].len, full[i].len);
    }
  }
  /* Into the first payload: one piece for its rest. */
  ded_sendq_consume(&w.env, &w.q, DED_DATA_HDR_BYTES + 5, NULL, NULL);
  int n = ded_sendq_pending(&w.q, part, 1);
  assert_int_equal(n, 1);
  assert_ptr_equal(part[0].base, own_a + 5);
  assert_int_equal(part[0].len, 15);
  ded_sendq_free(&w.env, &w.q);
  sq_world_check_clean(&w);
}

/* A frame begun is finished first: control frames queued after its first
 * byte went out wait behind it, and it is no longer in its class. */
static void test_sendq_begun_not_overtaken(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame bulk, data, ctrl, res;
  ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 0x11, 64, &bulk));
  ded_sendq_consume(&w.env, &w.q, 1, NULL, NULL); /* one byte of filler: it is begun */
  assert_false(ded_sendq_has_class(&w.q, DED_Q_BULK));
  assert_true(ded_sendq_has_output(&w.q));
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 0x22, own_a, true, 0, 30, &data));
  ded_sendq_consume(&w.env, &w.q, 63, NULL, NULL); /* the filler's rest */
  ded_sendq_consume(&w.env, &w.q, DED_DATA_HDR_BYTES + 2, NULL, NULL); /* the data frame begins */
  assert_false(ded_sendq_has_class(&w.q, DED_Q_DATA));
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 0x33, 10, &ctrl));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 0x44, own_b, false, 4, 8, &res));
  assert_true(ded_sendq_has_class(&w.q, DED_Q_CTRL));
  const sq_frame *order[] = {&data, &ctrl, &res, NULL};
  sq_drain_expect(&w, &w.q, order, DED_DATA_HDR_BYTES + 2, 7);
  sq_world_check_clean(&w);
}

/* Detaching an owner drops its queued frames, in every class and of both
 * memories, and keeps the others' in order; with user_only, only those
 * into its caller's buffer. A class whose tail went still takes frames. */
static void test_sendq_detach_queued(void **state) {
  (void)state;
  for (int user_only = 0; user_only < 2; user_only++) {
    sq_world w;
    sq_world_init(&w);
    sq_frame a_user, a_acc, b1, a_res, b2, a_tail, late;
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 8, &a_user));
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 2, own_b, true, 0, 8, &b1));
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 3, own_a, false, 0, 8, &a_acc));
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 4, own_b, false, 8, 8, &b2));
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 5, own_a, false, 16, 8, &a_res));
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 6, own_a, true, 16, 8, &a_tail));
    assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, user_only), 0);
    assert_int_equal(sq_out(&w.led, own_a, true), 0);
    assert_int_equal(sq_out(&w.led, own_a, false), user_only ? 2 : 0);
    assert_int_equal(sq_out(&w.led, own_b, true), 1);
    assert_int_equal(sq_out(&w.led, own_b, false), 1);
    ded_sendq_push(&w.q, DED_Q_DATA, sq_owned(&w, 7, 5, &late)); /* after the dropped tail */
    const sq_frame *kept_acc[] = {&a_acc, &b2, &a_res, &b1, &late, NULL};
    const sq_frame *kept_none[] = {&b2, &b1, &late, NULL};
    sq_drain_expect(&w, &w.q, user_only ? kept_acc : kept_none, 0, 4096);
    sq_world_check_clean(&w);
  }
}

/* The frame half written when its owner lets go is copied: its rest still
 * comes out whole (from within the header, at the header's end, or from
 * within the payload) even after the owner reuses its memory, and the
 * owner's reference ends at once. */
static void test_sendq_detach_half_written(void **state) {
  (void)state;
  static const size_t begun[] = {1, DED_DATA_HDR_BYTES - 1, DED_DATA_HDR_BYTES,
                                 DED_DATA_HDR_BYTES + 1, DED_DATA_HDR_BYTES + 39};
  for (size_t b = 0; b < DED_ARRAY_LEN(begun); b++) {
    sq_world w;
    sq_world_init(&w);
    sq_frame cur, queued, other;
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 9, own_a, false, 10, 40, &cur));
    ded_sendq_consume(&w.env, &w.q, begun[b], NULL, NULL);
    ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 8, own_a, false, 60, 40, &queued));
    ded_sendq_push(&w.q, DED_Q_CTRL, sq_lent(&w, 7, own_b, false, 0, 3, &other));
    assert_int_equal(sq_out(&w.led, own_a, false), 2);
    assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, false), 0);
    assert_int_equal(sq_out(&w.led, own_a, false), 0);
    memset(own_a, 0xee, sizeof own_a); /* the owner's memory is its own again */
    const sq_frame *order[] = {&cur, &other, NULL};
    sq_drain_expect(&w, &w.q, order, begun[b], 5);
    sq_world_check_clean(&w);
  }
}

/* With user_only, a half-written frame into the accumulator is not the
 * caller's memory: it keeps its reference, and no copy is made. */
static void test_sendq_detach_user_only_spares_accumulator(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame cur;
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 9, own_a, false, 0, 16, &cur));
  ded_sendq_consume(&w.env, &w.q, DED_DATA_HDR_BYTES + 3, NULL, NULL);
  long allocs = w.fm.allocs;
  assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, true), 0);
  assert_int_equal(w.fm.allocs, allocs);
  assert_int_equal(sq_out(&w.led, own_a, false), 1);
  /* Another owner's detach does not touch it either. */
  assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_b, false), 0);
  assert_int_equal(sq_out(&w.led, own_a, false), 1);
  const sq_frame *order[] = {&cur, NULL};
  sq_drain_expect(&w, &w.q, order, DED_DATA_HDR_BYTES + 3, 4096);
  sq_world_check_clean(&w);
}

/* Moving to another connection: everything goes to the end of the other
 * queue's classes, the frame the other had begun stays first, and the one
 * half written here is sent again from its start (the peer never got it
 * whole). References travel with the frames: no lend ends. */
static void test_sendq_move(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame fcur, f1, f2, f3, t1, t2;
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 30, &fcur));
  ded_sendq_consume(&w.env, &w.q, 12, NULL, NULL);
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 2, 6, &f1));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 3, own_a, false, 30, 20, &f2));
  ded_sendq_push(&w.q, DED_Q_BULK, sq_owned(&w, 4, 10, &f3));
  ded_sendq_push(&w.to, DED_Q_CTRL, sq_owned(&w, 5, 8, &t1));
  ded_sendq_consume(&w.env, &w.to, 3, NULL, NULL);
  ded_sendq_push(&w.to, DED_Q_DATA, sq_lent(&w, 6, own_b, true, 0, 9, &t2));
  sq_ledger before = w.led;
  ded_sendq_move(&w.env, &w.q, &w.to);
  assert_memory_equal(&w.led, &before, sizeof before);
  assert_false(ded_sendq_has_output(&w.q));
  const sq_frame *order[] = {&t1, &f1, &f2, &t2, &fcur, &f3, NULL};
  sq_drain_expect(&w, &w.to, order, 3, 11);
  ded_sendq_free(&w.env, &w.q);
  sq_world_check_clean(&w);
}

/* The copied tail of a frame begun on one connection means nothing on
 * another: moving drops it (and the rest goes). */
static void test_sendq_move_drops_partial(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame cur, ctrl;
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 30, &cur));
  ded_sendq_consume(&w.env, &w.q, DED_DATA_HDR_BYTES + 4, NULL, NULL);
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 2, 6, &ctrl));
  assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, true), 0);
  ded_sendq_move(&w.env, &w.q, &w.to);
  assert_false(ded_sendq_has_output(&w.q));
  const sq_frame *order[] = {&ctrl, NULL};
  sq_drain_expect(&w, &w.to, order, 0, 4096);
  sq_world_check_clean(&w);
}

/* Every lend ends exactly once, whichever way its frame goes: written,
 * its class dropped (not the begun frame of that class), the whole queue
 * freed with a frame half written, or an item freed before it was queued. */
static void test_sendq_refcount_paths(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame f;
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 4, &f));
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 2, own_a, true, 4, 4, &f));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 3, own_a, false, 0, 4, &f));
  ded_sendq_push(&w.q, DED_Q_RESULT, sq_lent(&w, 4, own_b, false, 0, 4, &f));
  assert_int_equal(sq_out(&w.led, own_a, true), 2);
  /* Written in full: the RESULT frames go first. */
  ded_sendq_consume(&w.env, &w.q, 2 * (DED_DATA_HDR_BYTES + 4), NULL, NULL);
  assert_int_equal(sq_out(&w.led, own_a, false), 0);
  assert_int_equal(sq_out(&w.led, own_b, false), 0);
  /* One DATA frame begun; dropping the class spares it. */
  ded_sendq_consume(&w.env, &w.q, 1, NULL, NULL);
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 5, own_b, true, 0, 4, &f));
  ded_sendq_drop_class(&w.env, &w.q, DED_Q_DATA);
  assert_false(ded_sendq_has_class(&w.q, DED_Q_DATA));
  assert_int_equal(sq_out(&w.led, own_a, true), 1);
  assert_int_equal(sq_out(&w.led, own_b, true), 0);
  /* A class dropped empty takes frames again. */
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 6, own_b, true, 8, 4, &f));
  assert_int_equal(sq_out(&w.led, own_b, true), 1);
  /* Freeing the queue ends the begun one and the queued one. */
  ded_sendq_free(&w.env, &w.q);
  assert_false(ded_sendq_has_output(&w.q));
  /* An item lent and freed without ever being queued. */
  ded_sendq_item *it = sq_lent(&w, 7, own_a, false, 0, 4, &f);
  assert_int_equal(sq_out(&w.led, own_a, false), 1);
  ded_sendq_item_free(&w.env, it);
  assert_int_equal(w.led.refs[0][0] + w.led.refs[0][1] + w.led.refs[1][0] + w.led.refs[1][1], 7);
  sq_world_check_clean(&w);
}

/* Out of memory for the copy of a half-written frame: DED_ERR_NOMEM (the
 * connection must go), the reference ends all the same, exactly once,
 * and freeing the queue afterwards leaks nothing. */
static void test_sendq_detach_nomem(void **state) {
  (void)state;
  static const size_t begun[] = {2, DED_DATA_HDR_BYTES + 6};
  for (size_t b = 0; b < DED_ARRAY_LEN(begun); b++) {
    sq_world w;
    sq_world_init(&w);
    sq_frame f;
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 20, &f));
    ded_sendq_consume(&w.env, &w.q, begun[b], NULL, NULL);
    ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 2, own_a, true, 20, 20, &f));
    ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 3, 5, &f));
    w.fm.fail_at = w.fm.allocs; /* the copy is the next allocation */
    assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, false), DED_ERR_NOMEM);
    assert_true(w.fm.failed);
    assert_int_equal(w.led.refs[0][1], 2);
    assert_int_equal(w.led.unrefs[0][1], 2);
    ded_sendq_free(&w.env, &w.q);
    assert_int_equal(w.led.unrefs[0][1], 2);
    sq_world_check_clean(&w);
  }
}

/* After detach's copy failed (DED_ERR_NOMEM), the frame half written has
 * lost its payload: the connection goes, and a move of its output to the
 * peer's other connection (ded_peer_conn_lost -> ded_conn_move_output)
 * must not begin it there, or the other stream would get a DATA header
 * announcing a payload that never follows. */
static void test_sendq_nomem_then_move(void **state) {
  (void)state;
  sq_world w;
  sq_world_init(&w);
  sq_frame cur, ctrl;
  ded_sendq_push(&w.q, DED_Q_DATA, sq_lent(&w, 1, own_a, true, 0, 20, &cur));
  ded_sendq_consume(&w.env, &w.q, DED_DATA_HDR_BYTES + 6, NULL, NULL);
  ded_sendq_push(&w.q, DED_Q_CTRL, sq_owned(&w, 3, 5, &ctrl));
  w.fm.fail_at = w.fm.allocs;
  assert_int_equal(ded_sendq_detach(&w.env, &w.q, own_a, true), DED_ERR_NOMEM);
  ded_sendq_move(&w.env, &w.q, &w.to);
  /* Only whole frames may reach the new stream: the control frame. */
  const sq_frame *order[] = {&ctrl, NULL};
  sq_drain_expect(&w, &w.to, order, 0, 4096);
  sq_world_check_clean(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sendq_empty),
      cmocka_unit_test(test_sendq_write_order),
      cmocka_unit_test(test_sendq_pending_consume_agree),
      cmocka_unit_test(test_sendq_consume_across_frames),
      cmocka_unit_test(test_sendq_pending_max),
      cmocka_unit_test(test_sendq_begun_not_overtaken),
      cmocka_unit_test(test_sendq_detach_queued),
      cmocka_unit_test(test_sendq_detach_half_written),
      cmocka_unit_test(test_sendq_detach_user_only_spares_accumulator),
      cmocka_unit_test(test_sendq_move),
      cmocka_unit_test(test_sendq_move_drops_partial),
      cmocka_unit_test(test_sendq_refcount_paths),
      cmocka_unit_test(test_sendq_detach_nomem),
      cmocka_unit_test(test_sendq_nomem_then_move),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

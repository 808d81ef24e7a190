/*
 * test_quorum.c: match/ded_quorum, the quorum rules of a round.
 *
 * A quorum is more than half of the acceptors, or exactly half with the
 * primary, so that any two quorums share a member; only acceptors of the
 * attempt count, each once, and only votes of one view and one digest
 * (of the result's bytes) add up; the votes kept are bounded.
 */
#include "unit_util.h"

#include "core/ded_limits.h"
#include "match/ded_quorum.h"

#define ACC DED_MEMBER_F_ACCEPTOR
#define PRI (DED_MEMBER_F_ACCEPTOR | DED_MEMBER_F_PRIMARY)

#define ATTEMPT ((uint64_t)1 << 32 | 0xabcd)

/* Digest number |d| (0 the one quorum_vote says): 32 bytes of its own. */
static void quorum_digest(uint8_t out[DED_RESULT_DIGEST_BYTES], unsigned d) {
  for (unsigned i = 0; i < DED_RESULT_DIGEST_BYTES; i++) out[i] = (uint8_t)(d * 101u + i);
}

/* The vote of unit_id(|n|) for |attempt| in |view|, with digest |d|. */
static void quorum_vote_d(ded_votes *vs, const ded_mem *mem, unsigned n, uint64_t attempt,
                          uint32_t view, unsigned d) {
  uint8_t id[DED_ID_BYTES], digest[DED_RESULT_DIGEST_BYTES];
  unit_id(id, n);
  quorum_digest(digest, d);
  ded_votes_add(vs, mem, id, attempt, view, digest);
}

/* Votes unit_id(|n|) cast for |attempt| in |view|, all for the same bytes. */
static void quorum_vote(ded_votes *vs, const ded_mem *mem, unsigned n, uint64_t attempt,
                        uint32_t view) {
  quorum_vote_d(vs, mem, n, attempt, view, 0);
}

/* Whether |vs| holds a quorum for |p|; if so, that it is for digest
 * number |d|. */
static bool quorum_for(const ded_votes *vs, const ded_msg_commit *p, unsigned d) {
  const uint8_t *got = NULL;
  bool q = ded_votes_quorum(vs, p, &got);
  assert_int_equal(ded_votes_quorum(vs, p, NULL), q); /* the digest is optional */
  if (!q) return false;
  uint8_t want[DED_RESULT_DIGEST_BYTES];
  quorum_digest(want, d);
  assert_non_null(got);
  assert_memory_equal(got, want, DED_RESULT_DIGEST_BYTES);
  return true;
}

/* A plan of |k| members 1..k, all acceptors (of |k|), into |m|. */
static ded_msg_commit quorum_plan(ded_msg_member *m, unsigned k) {
  for (unsigned i = 0; i < k; i++) m[i] = unit_member(i + 1, ACC, 0);
  return unit_plan(ATTEMPT, m, k, k, 0, 1);
}

/* More than half; exactly half only with the primary; below half never. */
static void test_quorum_of_table(void **state) {
  (void)state;
  assert_false(ded_quorum_of(0, 0, false)); /* no acceptor: no quorum */
  assert_false(ded_quorum_of(0, 1, true));
  assert_true(ded_quorum_of(1, 1, false));
  assert_false(ded_quorum_of(1, 2, false));
  assert_true(ded_quorum_of(1, 2, true));
  assert_true(ded_quorum_of(2, 3, false));
  assert_false(ded_quorum_of(1, 3, true)); /* the primary does not help below half */
  assert_false(ded_quorum_of(2, 4, false));
  assert_true(ded_quorum_of(2, 4, true));
  assert_true(ded_quorum_of(3, 4, false));
  assert_false(ded_quorum_of(511, 1024, true));
  assert_false(ded_quorum_of(512, 1024, false));
  assert_true(ded_quorum_of(512, 1024, true));
  assert_true(ded_quorum_of(513, 1024, false));
  assert_true(ded_quorum_of(1024, 1024, false));
}

/* Any two quorums of the same acceptors share a member: together they
 * are more than all of them, or both hold the primary. */
static void test_quorum_of_intersect(void **state) {
  (void)state;
  for (unsigned total = 1; total <= 17; total++)
    for (unsigned a = 0; a <= total; a++)
      for (unsigned b = 0; b <= total; b++)
        for (int pa = 0; pa < 2; pa++)
          for (int pb = 0; pb < 2; pb++)
            if (ded_quorum_of(a, total, pa) && ded_quorum_of(b, total, pb))
              assert_true(a + b > total || (pa && pb));
}

/* Members are found at their index by binary search; anything else,
 * below, between or above them, gives k. */
static void test_quorum_plan_index(void **state) {
  (void)state;
  ded_msg_member m[5];
  for (unsigned i = 0; i < 5; i++) m[i] = unit_member(10 * i + 10, 0, 0);
  for (unsigned k = 0; k <= 5; k++) {
    ded_msg_commit p = unit_plan(ATTEMPT, m, k, 1, 0, 1);
    uint8_t id[DED_ID_BYTES];
    for (unsigned i = 0; i < k; i++) assert_int_equal(ded_plan_index(&p, m[i].id), i);
    for (unsigned n = 0; n <= 60; n += 5) {
      if (n % 10 == 0 && n >= 10 && n <= 10 * k) continue; /* a member */
      unit_id(id, n);
      assert_int_equal(ded_plan_index(&p, id), k);
    }
    memset(id, 0xff, sizeof id);
    assert_int_equal(ded_plan_index(&p, id), k);
  }
}

/* An attempt can complete only if its listed acceptors are a quorum of
 * all nacc; members that are not acceptors do not count. */
static void test_quorum_can_complete(void **state) {
  (void)state;
  ded_msg_member m[5] = {unit_member(1, ACC, 0), unit_member(2, ACC, 0), unit_member(3, 0, 0),
                         unit_member(4, 0, 0), unit_member(5, ACC, 0)};
  ded_msg_commit p = unit_plan(ATTEMPT, m, 5, 5, 0, 1);
  assert_true(ded_quorum_can_complete(&p)); /* 3 of 5 */
  p.nacc = 6;
  assert_false(ded_quorum_can_complete(&p)); /* 3 of 6, no primary */
  m[4].flags = PRI;
  assert_true(ded_quorum_can_complete(&p)); /* 3 of 6 with the primary */
  p.nacc = 7;
  assert_false(ded_quorum_can_complete(&p)); /* 3 of 7 */
  /* Five members, one acceptor listed of three. */
  m[0].flags = m[1].flags = 0;
  m[4].flags = ACC;
  p.nacc = 3;
  assert_false(ded_quorum_can_complete(&p));
}

/* A vote is kept once per (attempt, view, voter); another view or another
 * attempt is another vote. */
static void test_votes_duplicates(void **state) {
  (void)state;
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  for (int i = 0; i < 3; i++) quorum_vote(&vs, NULL, 1, ATTEMPT, 1);
  assert_int_equal(vs.n, 1);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 2);
  quorum_vote(&vs, NULL, 1, ATTEMPT + 1, 1);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 1);
  for (int i = 0; i < 3; i++) quorum_vote(&vs, NULL, 1, ATTEMPT, 2);
  assert_int_equal(vs.n, 4);
  ded_votes_free(&vs, NULL);
  assert_null(vs.v);
  assert_int_equal(vs.n, 0);
}

/* One acceptor voting again and again is one vote. */
static void test_votes_duplicate_not_quorum(void **state) {
  (void)state;
  ded_msg_member m[3];
  ded_msg_commit p = quorum_plan(m, 3);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  for (int i = 0; i < 5; i++) quorum_vote(&vs, NULL, 2, ATTEMPT, 1);
  assert_false(quorum_for(&vs, &p, 0));
  quorum_vote(&vs, NULL, 3, ATTEMPT, 1);
  assert_true(quorum_for(&vs, &p, 0)); /* 2 of 3 */
  ded_votes_free(&vs, NULL);
}

/* Votes of different views never add up, however many views; a quorum
 * within one view does. */
static void test_votes_views_apart(void **state) {
  (void)state;
  ded_msg_member m[5];
  ded_msg_commit p = quorum_plan(m, 5);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  /* Every acceptor voted, in five views: two at most in any one. */
  quorum_vote(&vs, NULL, 1, ATTEMPT, 1);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 2);
  quorum_vote(&vs, NULL, 3, ATTEMPT, 3);
  quorum_vote(&vs, NULL, 4, ATTEMPT, 2);
  quorum_vote(&vs, NULL, 5, ATTEMPT, 4);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 5);
  assert_false(quorum_for(&vs, &p, 0));
  quorum_vote(&vs, NULL, 5, ATTEMPT, 2); /* view 2: 2, 4 and 5 */
  assert_true(quorum_for(&vs, &p, 0));
  ded_votes_free(&vs, NULL);
}

/* Only the plan's acceptors count: members without the flag, strangers,
 * and votes for another attempt do not. */
static void test_votes_only_acceptors(void **state) {
  (void)state;
  ded_msg_member m[5] = {unit_member(1, ACC, 0), unit_member(2, 0, 0), unit_member(3, 0, 0),
                         unit_member(4, ACC, 0), unit_member(6, ACC, 0)};
  ded_msg_commit p = unit_plan(ATTEMPT, m, 5, 4, 0, 1);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 1); /* members, not acceptors */
  quorum_vote(&vs, NULL, 3, ATTEMPT, 1);
  quorum_vote(&vs, NULL, 5, ATTEMPT, 1); /* strangers */
  quorum_vote(&vs, NULL, 7, ATTEMPT, 1);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 1);
  quorum_vote(&vs, NULL, 4, ATTEMPT + 1, 1); /* another attempt */
  quorum_vote(&vs, NULL, 6, ATTEMPT + 1, 1);
  assert_false(quorum_for(&vs, &p, 0));
  quorum_vote(&vs, NULL, 4, ATTEMPT, 1);
  assert_false(quorum_for(&vs, &p, 0)); /* 2 of 4, no primary */
  quorum_vote(&vs, NULL, 6, ATTEMPT, 1);
  assert_true(quorum_for(&vs, &p, 0)); /* 3 of 4 */
  ded_votes_free(&vs, NULL);
}

/* Where the voter knows the whole acceptor set (the members of the
 * previous round's result, as many as the plan counts), the votes of
 * acceptors the attempt does not list count too: an attempt of 2 listed
 * acceptors of 3 (one died after it began) completes with the third's
 * vote, which it never could by the listed ones alone. The primary is the
 * smallest id of the set. A set of another size (one left out as evicted
 * when the attempt was made) is not taken: only the listed ones count. */
static void test_votes_among_acceptors(void **state) {
  (void)state;
  ded_msg_member m[2] = {unit_member(2, PRI, 0), unit_member(3, ACC, 0)};
  ded_msg_commit p = unit_plan(ATTEMPT, m, 2, 3, 0, 1); /* 3 acceptors, 2 listed */
  uint8_t acc[3][DED_ID_BYTES], acc4[4][DED_ID_BYTES];
  for (unsigned i = 0; i < 3; i++) unit_id(acc[i], i + 1); /* 1, 2, 3: 1 unlisted */
  for (unsigned i = 0; i < 4; i++) unit_id(acc4[i], i + 1);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, NULL, 3, ATTEMPT, 2); /* the listed one still alive */
  quorum_vote(&vs, NULL, 1, ATTEMPT, 2); /* the unlisted acceptor */
  quorum_vote(&vs, NULL, 9, ATTEMPT, 2); /* a stranger */
  assert_false(ded_votes_quorum(&vs, &p, NULL));
  assert_false(ded_votes_quorum_among(&vs, &p, NULL, 0, NULL));
  assert_false(ded_votes_quorum_among(&vs, &p, (const uint8_t(*)[DED_ID_BYTES])acc4, 4, NULL));
  const uint8_t *d = NULL;
  assert_true(ded_votes_quorum_among(&vs, &p, (const uint8_t(*)[DED_ID_BYTES])acc, 3, &d));
  assert_non_null(d);
  ded_votes_free(&vs, NULL);
  /* Exactly half of 2 needs the primary, the set's smallest id (1). */
  ded_msg_member m2[1] = {unit_member(2, ACC, 0)};
  ded_msg_commit p2 = unit_plan(ATTEMPT, m2, 1, 2, 0, 1);
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 1);
  assert_false(ded_votes_quorum_among(&vs, &p2, (const uint8_t(*)[DED_ID_BYTES])acc, 2, NULL));
  quorum_vote(&vs, NULL, 1, ATTEMPT, 1); /* the primary, unlisted */
  assert_true(ded_votes_quorum_among(&vs, &p2, (const uint8_t(*)[DED_ID_BYTES])acc, 2, NULL));
  assert_false(ded_votes_quorum(&vs, &p2, NULL));
  ded_votes_free(&vs, NULL);
}

/* Exactly half completes only with the primary among the voters of that
 * view. */
static void test_votes_primary_tie(void **state) {
  (void)state;
  ded_msg_member m[4] = {unit_member(1, ACC, 0), unit_member(2, PRI, 0), unit_member(3, ACC, 0),
                         unit_member(4, ACC, 0)};
  ded_msg_commit p = unit_plan(ATTEMPT, m, 4, 4, 0, 1);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 3);
  quorum_vote(&vs, NULL, 3, ATTEMPT, 3);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 4); /* the primary, in another view */
  quorum_vote(&vs, NULL, 4, ATTEMPT, 5);
  assert_false(quorum_for(&vs, &p, 0));
  quorum_vote(&vs, NULL, 4, ATTEMPT, 4); /* view 4: the primary and 4 */
  assert_true(quorum_for(&vs, &p, 0));
  ded_votes_free(&vs, NULL);
}

/* At most DED_ROUND_VOTES_MAX votes are kept: past that a vote is not
 * kept and cannot complete anything; a duplicate changes nothing. */
static void test_votes_bound(void **state) {
  (void)state;
  ded_msg_member m[3];
  ded_msg_commit p = quorum_plan(m, 3);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 1);
  for (unsigned i = 1; i < DED_ROUND_VOTES_MAX; i++)
    quorum_vote(&vs, NULL, 100 + i, ATTEMPT, 1); /* strangers */
  assert_int_equal(vs.n, DED_ROUND_VOTES_MAX);
  assert_true(vs.cap >= DED_ROUND_VOTES_MAX);
  quorum_vote(&vs, NULL, 2, ATTEMPT, 1);
  quorum_vote(&vs, NULL, 1, ATTEMPT, 1);
  assert_int_equal(vs.n, DED_ROUND_VOTES_MAX);
  assert_false(quorum_for(&vs, &p, 0));
  ded_votes_free(&vs, NULL);
}

/* Short of memory a vote is not kept, the others stay, and a later one is
 * kept again; nothing leaks. */
static void test_votes_nomem(void **state) {
  (void)state;
  ded_msg_member m[3];
  ded_msg_commit p = quorum_plan(m, 3);
  unit_failmem fm;
  unit_failmem_init(&fm, 0);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote(&vs, &fm.mem, 1, ATTEMPT, 1); /* the first allocation fails */
  assert_true(fm.failed);
  assert_int_equal(vs.n, 0);
  quorum_vote(&vs, &fm.mem, 1, ATTEMPT, 1);
  for (unsigned i = 0; i < 7; i++) quorum_vote(&vs, &fm.mem, 100 + i, ATTEMPT, 1);
  assert_int_equal(vs.n, 8); /* full: the next vote grows the list */
  fm.fail_at = fm.allocs;
  quorum_vote(&vs, &fm.mem, 2, ATTEMPT, 1);
  assert_int_equal(vs.n, 8);
  assert_false(quorum_for(&vs, &p, 0));
  quorum_vote(&vs, &fm.mem, 2, ATTEMPT, 1);
  assert_int_equal(vs.n, 9);
  assert_true(quorum_for(&vs, &p, 0));
  ded_votes_free(&vs, &fm.mem);
  assert_int_equal(fm.live, 0);
}

/* Votes of one view for different bytes never add up: five acceptors
 * split 2, 2, 1 between three digests is no quorum, however the split;
 * the third vote for one digest is. */
static void test_votes_digests_apart(void **state) {
  (void)state;
  ded_msg_member m[5];
  ded_msg_commit p = quorum_plan(m, 5);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 1);
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 1, 2);
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 1, 1);
  quorum_vote_d(&vs, NULL, 4, ATTEMPT, 1, 2);
  quorum_vote_d(&vs, NULL, 5, ATTEMPT, 1, 3);
  assert_false(quorum_for(&vs, &p, 1));
  /* The same voters again in view 1, for other bytes: still the first. */
  quorum_vote_d(&vs, NULL, 5, ATTEMPT, 1, 2);
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 2);
  assert_false(quorum_for(&vs, &p, 2));
  /* In view 2, for digest 2: 2, 4 and 5 (a quorum of 3 of 5). */
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 2, 2);
  quorum_vote_d(&vs, NULL, 4, ATTEMPT, 2, 2);
  assert_false(quorum_for(&vs, &p, 2));
  quorum_vote_d(&vs, NULL, 5, ATTEMPT, 2, 2);
  assert_true(quorum_for(&vs, &p, 2));
  ded_votes_free(&vs, NULL);
  /* Exactly half with the primary is a quorum only if the primary voted
   * the same bytes as the others. */
  ded_msg_member t[4] = {unit_member(1, ACC, 0), unit_member(2, PRI, 0), unit_member(3, ACC, 0),
                         unit_member(4, ACC, 0)};
  p = unit_plan(ATTEMPT, t, 4, 4, 0, 1);
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 7, 5); /* the primary */
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 7, 6);
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 7, 6);
  assert_false(quorum_for(&vs, &p, 6)); /* 2 of 4 without the primary; it said 5 */
  quorum_vote_d(&vs, NULL, 4, ATTEMPT, 7, 5);
  assert_true(quorum_for(&vs, &p, 5)); /* the primary and 4 */
  ded_votes_free(&vs, NULL);
}

/* The quorum's digest is the one its voters said, whichever bytes were
 * voted first or by more voters outside it. */
static void test_votes_quorum_digest(void **state) {
  (void)state;
  ded_msg_member m[3];
  ded_msg_commit p = quorum_plan(m, 3);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 8);     /* first, alone */
  quorum_vote_d(&vs, NULL, 9, ATTEMPT, 1, 8);     /* a stranger */
  quorum_vote_d(&vs, NULL, 2, ATTEMPT + 1, 1, 8); /* another attempt */
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 1, 4);
  assert_false(quorum_for(&vs, &p, 4));
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 1, 4);
  assert_true(quorum_for(&vs, &p, 4));
  ded_votes_free(&vs, NULL);
}

/* A voter's first digest in a view is the one kept: saying other bytes
 * again in that view changes nothing. */
static void test_votes_first_digest_kept(void **state) {
  (void)state;
  ded_msg_member m[3];
  ded_msg_commit p = quorum_plan(m, 3);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 1);
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 2);
  assert_int_equal(vs.n, 1);
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  quorum_digest(d, 1);
  assert_memory_equal(vs.v[0].digest, d, DED_RESULT_DIGEST_BYTES);
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 1, 2);
  assert_false(quorum_for(&vs, &p, 2)); /* 1 still counts for digest 1 only */
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 1, 1);
  assert_true(quorum_for(&vs, &p, 1));
  ded_votes_free(&vs, NULL);
}

/* ded_votes_member: the plan members that voted the attempt with those
 * bytes, in the order they voted, each once (whatever the view); not
 * strangers, not other bytes, not another attempt; then k. Members that
 * are not acceptors hold the bytes all the same. */
static void test_votes_member_order(void **state) {
  (void)state;
  ded_msg_member m[5] = {unit_member(1, ACC, 0), unit_member(2, ACC, 0), unit_member(3, ACC, 0),
                         unit_member(4, 0, 0), unit_member(6, ACC, 0)};
  ded_msg_commit p = unit_plan(ATTEMPT, m, 5, 4, 0, 1);
  ded_votes vs;
  memset(&vs, 0, sizeof vs);
  uint8_t a[DED_RESULT_DIGEST_BYTES], b[DED_RESULT_DIGEST_BYTES], c[DED_RESULT_DIGEST_BYTES];
  quorum_digest(a, 1);
  quorum_digest(b, 2);
  quorum_digest(c, 3);
  assert_int_equal(ded_votes_member(&vs, &p, a, 0), 5); /* nobody voted */
  quorum_vote_d(&vs, NULL, 9, ATTEMPT, 1, 1);     /* a stranger */
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 1, 1);     /* index 2 */
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 1, 2);     /* index 1, other bytes */
  quorum_vote_d(&vs, NULL, 6, ATTEMPT + 1, 1, 1); /* another attempt */
  quorum_vote_d(&vs, NULL, 1, ATTEMPT, 1, 1);     /* index 0 */
  quorum_vote_d(&vs, NULL, 3, ATTEMPT, 2, 1);     /* index 2 again, in view 2 */
  quorum_vote_d(&vs, NULL, 4, ATTEMPT, 2, 1);     /* index 3, not an acceptor */
  quorum_vote_d(&vs, NULL, 5, ATTEMPT, 2, 1);     /* a stranger */
  quorum_vote_d(&vs, NULL, 2, ATTEMPT, 3, 1);     /* index 1, these bytes in view 3 */
  assert_int_equal(ded_votes_member(&vs, &p, a, 0), 2);
  assert_int_equal(ded_votes_member(&vs, &p, a, 1), 0);
  assert_int_equal(ded_votes_member(&vs, &p, a, 2), 3);
  assert_int_equal(ded_votes_member(&vs, &p, a, 3), 1);
  assert_int_equal(ded_votes_member(&vs, &p, a, 4), 5);
  assert_int_equal(ded_votes_member(&vs, &p, a, 100), 5);
  assert_int_equal(ded_votes_member(&vs, &p, b, 0), 1);
  assert_int_equal(ded_votes_member(&vs, &p, b, 1), 5);
  assert_int_equal(ded_votes_member(&vs, &p, c, 0), 5);
  /* Another attempt's plan sees only its own votes. */
  ded_msg_commit q = unit_plan(ATTEMPT + 1, m, 5, 4, 0, 1);
  assert_int_equal(ded_votes_member(&vs, &q, a, 0), 4);
  assert_int_equal(ded_votes_member(&vs, &q, a, 1), 5);
  ded_votes_free(&vs, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quorum_of_table),
      cmocka_unit_test(test_quorum_of_intersect),
      cmocka_unit_test(test_quorum_plan_index),
      cmocka_unit_test(test_quorum_can_complete),
      cmocka_unit_test(test_votes_duplicates),
      cmocka_unit_test(test_votes_duplicate_not_quorum),
      cmocka_unit_test(test_votes_views_apart),
      cmocka_unit_test(test_votes_only_acceptors),
      cmocka_unit_test(test_votes_primary_tie),
      cmocka_unit_test(test_votes_among_acceptors),
      cmocka_unit_test(test_votes_digests_apart),
      cmocka_unit_test(test_votes_quorum_digest),
      cmocka_unit_test(test_votes_first_digest_kept),
      cmocka_unit_test(test_votes_member_order),
      cmocka_unit_test(test_votes_bound),
      cmocka_unit_test(test_votes_nomem),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

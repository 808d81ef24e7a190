/*
 * test_lineage.c: round/ded_lineage, the memberships of recent rounds.
 *
 * An entry answers only for its own round, and a round DED_LIN_RING later
 * takes its slot; setting a round's membership keeps whether it ended
 * here; HAVE bits are only for the entry's attempt and its members;
 * have_members, ever_members and members_round follow what is held; the
 * larger view learnt for a round wins; the newest result is vouched
 * from only over rounds that ended here without one, voting for nothing.
 */
#include "unit_util.h"

#include "round/ded_lineage.h"

#define ATT_A ((uint64_t)1 << 32 | 0x11)
#define ATT_B ((uint64_t)2 << 32 | 0x22)

/* Members 1..k (member 2 a client) of |attempt|, into |m|. */
static ded_msg_commit lin_plan(ded_msg_member *m, unsigned k, uint64_t attempt) {
  for (unsigned i = 0; i < k; i++)
    m[i] = unit_member(i + 1, i == 1 ? DED_MEMBER_F_CLIENT : DED_MEMBER_F_ACCEPTOR, 0);
  return unit_plan(attempt, m, k, k, 0, 1);
}

/* Sets round |no| to members 1..|k| of |attempt|. */
static void lin_set(ded_lineage *l, uint64_t no, unsigned k, uint64_t attempt) {
  ded_msg_member m[16];
  assert_true(k <= 16);
  ded_msg_commit p = lin_plan(m, k, attempt);
  assert_int_equal(ded_lineage_set(l, no, &p), 0);
}

/* unit_id(|who|) says at |now_ns| it holds |attempt| of |round|. */
static void lin_have(ded_lineage *l, uint64_t round, uint64_t attempt, unsigned who,
                     uint64_t now_ns) {
  uint8_t id[DED_ID_BYTES];
  unit_id(id, who);
  ded_lineage_take_have(l, round, attempt, id, now_ns);
}

/* The entry of |no| holds members 1..|k| of |attempt|, member 2 a client. */
static void lin_assert_entry(ded_lineage *l, uint64_t no, unsigned k, uint64_t attempt) {
  ded_lin_entry *e = ded_lineage_get(l, no);
  assert_non_null(e);
  assert_int_equal(e->round, no);
  assert_int_equal(e->attempt, attempt);
  assert_int_equal(e->n, k);
  for (unsigned i = 0; i < k; i++) {
    uint8_t id[DED_ID_BYTES];
    unit_id(id, i + 1);
    assert_memory_equal(e->ids[i], id, DED_ID_BYTES);
    assert_int_equal(ded_lin_client((const uint8_t *)e->ids, k, i), i == 1);
  }
}

/* A fresh lineage holds nothing: genesis, and no swarm seen. */
static void test_lineage_empty(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  assert_false(l.have_members);
  assert_false(l.ever_members);
  assert_null(ded_lineage_get(&l, 0));
  assert_null(ded_lineage_get(&l, 5));
  assert_null(ded_lineage_newest_below(&l, UINT64_MAX));
  assert_int_equal(ded_lineage_view_hint(&l, 0), 0);
  ded_lineage_lose(&l);
}

/* A set round answers with its members, in id order with their client
 * bits; no other round does, the ones of its slot included. */
static void test_lineage_set_get(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  lin_set(&l, 5, 9, ATT_A);
  lin_assert_entry(&l, 5, 9, ATT_A);
  ded_lin_entry *e = ded_lineage_get(&l, 5);
  assert_false(e->final);
  assert_null(e->have);
  assert_true(l.have_members);
  assert_true(l.ever_members);
  assert_int_equal(l.members_round, 5);
  assert_null(ded_lineage_get(&l, 4));
  assert_null(ded_lineage_get(&l, 6));
  assert_null(ded_lineage_get(&l, 5 + DED_LIN_RING));
  assert_null(ded_lineage_get(&l, 5 + 2 * DED_LIN_RING));
  ded_lineage_lose(&l);
}

/* A round DED_LIN_RING later takes the slot: of 200 rounds the newest 128
 * stay, and newest_below finds the newest held below a round. */
static void test_lineage_ring(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  lin_set(&l, 5, 2, ATT_A);
  lin_set(&l, 5 + DED_LIN_RING, 3, ATT_B);
  assert_null(ded_lineage_get(&l, 5));
  lin_assert_entry(&l, 5 + DED_LIN_RING, 3, ATT_B);
  for (uint64_t r = 0; r < 200; r++) lin_set(&l, r, 1, ATT_A + r);
  for (uint64_t r = 0; r < 200; r++) {
    ded_lin_entry *e = ded_lineage_get(&l, r);
    if (r < 200 - DED_LIN_RING) {
      assert_null(e);
    } else {
      assert_non_null(e);
      assert_int_equal(e->attempt, ATT_A + r);
    }
  }
  assert_int_equal(l.members_round, 199);
  assert_int_equal(ded_lineage_newest_below(&l, 150)->round, 149);
  assert_int_equal(ded_lineage_newest_below(&l, UINT64_MAX)->round, 199);
  assert_null(ded_lineage_newest_below(&l, 200 - DED_LIN_RING));
  assert_null(ded_lineage_newest_below(&l, 0));
  ded_lineage_lose(&l);
}

/* Setting a round again with its attempt changes nothing (the HAVEs
 * stay); with another attempt the members and HAVEs are the new
 * attempt's, and whether the round ended here stays; a new round in the
 * slot has not ended. */
static void test_lineage_set_again(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  lin_set(&l, 7, 3, ATT_A);
  lin_have(&l, 7, ATT_A, 3, 100);
  ded_lin_entry *e = ded_lineage_get(&l, 7);
  e->final = true; /* the round reported here, as ded_round marks it */
  e->final_attempt = ATT_A;
  void *ids = e->ids;
  lin_set(&l, 7, 3, ATT_A);
  assert_ptr_equal(e->ids, ids);
  assert_non_null(e->have);
  assert_true(e->have[0] & 4);
  lin_set(&l, 7, 4, ATT_B);
  lin_assert_entry(&l, 7, 4, ATT_B);
  assert_null(e->have);
  assert_true(e->final);
  assert_int_equal(e->final_attempt, ATT_A);
  lin_set(&l, 7 + DED_LIN_RING, 2, ATT_A);
  assert_false(ded_lineage_get(&l, 7 + DED_LIN_RING)->final);
  ded_lineage_lose(&l);
}

/* members_round is the newest round set, whatever the order. */
static void test_lineage_members_round(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  lin_set(&l, 10, 2, ATT_A);
  lin_set(&l, 7, 2, ATT_A);
  assert_int_equal(l.members_round, 10);
  lin_set(&l, 12, 2, ATT_A);
  assert_int_equal(l.members_round, 12);
  lin_set(&l, 11, 2, ATT_A);
  assert_int_equal(l.members_round, 12);
  ded_lineage_lose(&l);
}

/* Losing the lineage forgets every membership (genesis again, as far as
 * we know) but not that a swarm exists, nor the views learnt; the next
 * round set is the newest, however old. */
static void test_lineage_lose(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  ded_lineage l;
  ded_lineage_init(&l, &fm.mem);
  lin_set(&l, 10, 3, ATT_A);
  lin_set(&l, 11, 3, ATT_B);
  lin_have(&l, 11, ATT_B, 1, 5);
  ded_lineage_set_view_hint(&l, 12, 4);
  ded_lineage_lose(&l);
  assert_int_equal(fm.live, 0);
  assert_false(l.have_members);
  assert_true(l.ever_members);
  assert_null(ded_lineage_get(&l, 10));
  assert_null(ded_lineage_get(&l, 11));
  assert_null(ded_lineage_newest_below(&l, UINT64_MAX));
  assert_int_equal(ded_lineage_view_hint(&l, 12), 4);
  lin_set(&l, 3, 1, ATT_A);
  assert_true(l.have_members);
  assert_int_equal(l.members_round, 3);
  ded_lineage_lose(&l);
  assert_int_equal(fm.live, 0);
}

/* An installed lineage (a loaded snapshot's) is taken over and counts as
 * ended here with its attempt. */
static void test_lineage_install(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  ded_lineage l;
  ded_lineage_init(&l, &fm.mem);
  lin_set(&l, 40 + DED_LIN_RING, 2, ATT_B); /* the same slot, another round */
  ded_msg_member m[4];
  ded_msg_commit p = lin_plan(m, 4, ATT_A);
  uint8_t(*ids)[DED_ID_BYTES] = ded_lineage_of_plan(&fm.mem, &p);
  assert_non_null(ids);
  ded_lineage_install(&l, 40, ATT_A, ids, 4, 0);
  ded_lin_entry *e = ded_lineage_get(&l, 40);
  assert_non_null(e);
  assert_ptr_equal(e->ids, ids);
  assert_true(e->final);
  assert_int_equal(e->final_attempt, ATT_A);
  lin_assert_entry(&l, 40, 4, ATT_A);
  assert_null(ded_lineage_get(&l, 40 + DED_LIN_RING));
  assert_true(l.have_members);
  assert_true(l.ever_members);
  ded_lineage_lose(&l);
  assert_int_equal(fm.live, 0);
}

/* A plan as a lineage: its ids in order, then one client bit per member. */
static void test_lineage_of_plan(void **state) {
  (void)state;
  ded_msg_member m[10];
  for (unsigned i = 0; i < 10; i++)
    m[i] = unit_member(3 * i + 1, i % 3 == 0 ? DED_MEMBER_F_CLIENT : DED_MEMBER_F_AUX, 0);
  ded_msg_commit p = unit_plan(ATT_A, m, 10, 1, 0, 1);
  uint8_t(*ids)[DED_ID_BYTES] = ded_lineage_of_plan(NULL, &p);
  assert_non_null(ids);
  for (unsigned i = 0; i < 10; i++) {
    assert_memory_equal(ids[i], m[i].id, DED_ID_BYTES);
    assert_int_equal(ded_lin_client((const uint8_t *)ids, 10, i), i % 3 == 0);
  }
  const uint8_t *bits = (const uint8_t *)ids + 10 * DED_ID_BYTES;
  assert_int_equal(bits[0], 0x49); /* members 0, 3, 6 */
  assert_int_equal(bits[1], 0x02); /* member 9 */
  ded_mem_free(NULL, ids);
  /* Out of memory: nothing. */
  unit_failmem fm;
  unit_failmem_init(&fm, 0);
  assert_null(ded_lineage_of_plan(&fm.mem, &p));
  ded_lineage l;
  ded_lineage_init(&l, &fm.mem);
  fm.fail_at = fm.allocs;
  assert_int_equal(ded_lineage_set(&l, 1, &p), DED_ERR_NOMEM);
  assert_false(l.have_members);
  assert_null(ded_lineage_get(&l, 1));
  assert_int_equal(fm.live, 0);
}

/* HAVE bits: only for the entry's round and attempt, only for listed
 * members, each once (the time is the latest new one's); short of memory
 * the member is taken for still finishing. */
static void test_lineage_take_have(void **state) {
  (void)state;
  unit_failmem fm;
  unit_failmem_init(&fm, -1);
  ded_lineage l;
  ded_lineage_init(&l, &fm.mem);
  lin_set(&l, 5, 10, ATT_A);
  ded_lin_entry *e = ded_lineage_get(&l, 5);
  lin_have(&l, 5, ATT_B, 2, 10);                 /* another attempt */
  lin_have(&l, 6, ATT_A, 2, 10);                 /* a round not held */
  lin_have(&l, 5 + DED_LIN_RING, ATT_A, 2, 10);  /* the slot's other round */
  lin_have(&l, 5, ATT_A, 11, 10);                /* a stranger */
  assert_null(e->have);
  fm.fail_at = fm.allocs;
  lin_have(&l, 5, ATT_A, 2, 15); /* no memory for the bits */
  assert_null(e->have);
  assert_int_equal(e->have_ns, 0);
  lin_have(&l, 5, ATT_A, 2, 20);
  assert_non_null(e->have);
  assert_int_equal(e->have[0], 0x02);
  assert_int_equal(e->have[1], 0x00);
  assert_int_equal(e->have_ns, 20);
  lin_have(&l, 5, ATT_A, 2, 30); /* again: no news */
  assert_int_equal(e->have_ns, 20);
  lin_have(&l, 5, ATT_A, 10, 40);
  assert_int_equal(e->have[1], 0x02);
  assert_int_equal(e->have_ns, 40);
  lin_have(&l, 5, ATT_A, 11, 50);
  assert_int_equal(e->have[0], 0x02);
  assert_int_equal(e->have[1], 0x02);
  assert_int_equal(e->have_ns, 40);
  ded_lineage_lose(&l);
  assert_int_equal(fm.live, 0);
}

/* View hints: none is 0; per round, the larger view wins; a hint answers
 * only for its own round. */
static void test_lineage_view_hints(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  ded_lineage_set_view_hint(&l, 20, 3);
  assert_int_equal(ded_lineage_view_hint(&l, 20), 3);
  ded_lineage_set_view_hint(&l, 20, 2);
  assert_int_equal(ded_lineage_view_hint(&l, 20), 3);
  ded_lineage_set_view_hint(&l, 20, 5);
  assert_int_equal(ded_lineage_view_hint(&l, 20), 5);
  ded_lineage_set_view_hint(&l, 21, 1);
  assert_int_equal(ded_lineage_view_hint(&l, 21), 1);
  assert_int_equal(ded_lineage_view_hint(&l, 20), 5);
  assert_int_equal(ded_lineage_view_hint(&l, 19), 0);
  assert_int_equal(ded_lineage_view_hint(&l, 20 + DED_VIEW_HINTS), 0);
  /* A round DED_VIEW_HINTS later takes the slot, with any view. */
  ded_lineage_set_view_hint(&l, 20 + DED_VIEW_HINTS, 1);
  assert_int_equal(ded_lineage_view_hint(&l, 20 + DED_VIEW_HINTS), 1);
  assert_int_equal(ded_lineage_view_hint(&l, 20), 0);
  ded_lineage_lose(&l);
}

/* members_round is the newest round held: installing an older round
 * while a newer one is held does not move it back (ded_coord.c derives
 * the next round from it). */
static void test_lineage_install_older(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  lin_set(&l, 10, 2, ATT_B);
  ded_msg_member m[2];
  ded_msg_commit p = lin_plan(m, 2, ATT_A);
  ded_lineage_install(&l, 8, ATT_A, ded_lineage_of_plan(NULL, &p), 2, 0);
  assert_non_null(ded_lineage_get(&l, 10));
  assert_int_equal(l.members_round, 10);
  ded_lineage_lose(&l);
}

/* Round |no| ended here: with its attempt's result, or without one. */
static void lin_end(ded_lineage *l, uint64_t no, bool with_result) {
  ded_lin_entry *e = ded_lineage_get(l, no);
  assert_non_null(e);
  e->final = true;
  e->final_attempt = with_result ? e->attempt : 0;
}

/* ded_lineage_void_base without a judge of votes: every vote counts. */
static const ded_lin_entry *ded_lineage_void_base_(const ded_lineage *l, uint64_t round) {
  return ded_lineage_void_base(l, round, NULL, NULL);
}

/* A judge of votes that calls them moot when |ctx| says so, and notes
 * what it was asked. */
typedef struct moot_judge {
  bool moot;
  unsigned asked;
  uint64_t base_round, voted_round;
} moot_judge;

static bool judge_vote(void *ctx, const ded_lin_entry *base, const ded_lin_entry *voted) {
  moot_judge *m = ctx;
  m->asked++;
  m->base_round = base->round;
  m->voted_round = voted->round;
  return m->moot;
}

/* ded_lineage_void_base: the newest result, when every round after it
 * below the round asked ended here without one and voted for nothing,
 * and at least one round lies between; rounds with no entry had no
 * attempt here and count as such. */
static void test_lineage_void_base(void **state) {
  (void)state;
  ded_lineage l;
  ded_lineage_init(&l, NULL);
  assert_null(ded_lineage_void_base_(&l, 5)); /* no result at all */
  lin_set(&l, 3, 3, ATT_A);
  lin_end(&l, 3, true);
  assert_null(ded_lineage_void_base_(&l, 3)); /* not below */
  assert_null(ded_lineage_void_base_(&l, 4)); /* nothing between */
  /* Round 4 had no attempt here, round 5 one that ended without result. */
  lin_set(&l, 5, 2, ATT_B);
  assert_null(ded_lineage_void_base_(&l, 6)); /* 5 still running */
  lin_end(&l, 5, false);
  const ded_lin_entry *b = ded_lineage_void_base_(&l, 6);
  assert_non_null(b);
  assert_int_equal(b->round, 3);
  assert_int_equal(b->attempt, ATT_A);
  assert_ptr_equal(ded_lineage_void_base_(&l, 5), b); /* round 4 alone */
  assert_ptr_equal(ded_lineage_void_base_(&l, 100), b);
  /* A vote in round 5 (kept when its attempt changes): no longer. */
  ded_lineage_get(&l, 5)->voted = true;
  lin_set(&l, 5, 3, ATT_A);
  assert_true(ded_lineage_get(&l, 5)->voted);
  assert_true(ded_lineage_get(&l, 5)->final);
  assert_null(ded_lineage_void_base_(&l, 6));
  assert_ptr_equal(ded_lineage_void_base_(&l, 5), b); /* below the vote */
  /* Unless the vote is moot (no one who still counts could have
   * completed with it): the judge is asked about round 5's vote, on
   * round 3's result, and decides. */
  moot_judge judge = {false, 0, 0, 0};
  assert_null(ded_lineage_void_base(&l, 6, judge_vote, &judge));
  assert_int_equal(judge.asked, 1);
  assert_int_equal(judge.base_round, 3);
  assert_int_equal(judge.voted_round, 5);
  judge.moot = true;
  assert_ptr_equal(ded_lineage_void_base(&l, 6, judge_vote, &judge), b);
  judge.asked = 0;
  assert_ptr_equal(ded_lineage_void_base(&l, 5, judge_vote, &judge), b);
  assert_int_equal(judge.asked, 0); /* round 4 voted for nothing */
  /* A newer result: the base moves to it. */
  lin_set(&l, 7, 2, ATT_B);
  lin_end(&l, 7, true);
  b = ded_lineage_void_base_(&l, 9);
  assert_non_null(b);
  assert_int_equal(b->round, 7);
  assert_null(ded_lineage_void_base_(&l, 8));
  /* A result no longer in the ring is none to vouch from. */
  assert_null(ded_lineage_void_base_(&l, 7 + DED_LIN_RING));
  assert_non_null(ded_lineage_void_base_(&l, 7 + DED_LIN_RING - 1));
  /* A round past the one asked in the slot of one between: that one's
   * entry (and whether it voted) is lost. */
  lin_set(&l, 8 + DED_LIN_RING, 2, ATT_A);
  assert_null(ded_lineage_void_base_(&l, 9));
  assert_null(ded_lineage_void_base_(&l, 10));
  ded_lineage_lose(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lineage_void_base),
      cmocka_unit_test(test_lineage_empty),
      cmocka_unit_test(test_lineage_set_get),
      cmocka_unit_test(test_lineage_ring),
      cmocka_unit_test(test_lineage_set_again),
      cmocka_unit_test(test_lineage_members_round),
      cmocka_unit_test(test_lineage_lose),
      cmocka_unit_test(test_lineage_install),
      cmocka_unit_test(test_lineage_of_plan),
      cmocka_unit_test(test_lineage_take_have),
      cmocka_unit_test(test_lineage_view_hints),
      cmocka_unit_test(test_lineage_install_older),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

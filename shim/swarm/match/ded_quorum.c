#include "ded_quorum.h"

#include <string.h>

#include "../core/ded_limits.h"

bool ded_quorum_of(unsigned in, unsigned total, bool primary_in) {
  return 2 * in > total || (2 * in == total && primary_in);
}

unsigned ded_plan_index(const ded_msg_commit *plan, const uint8_t id[DED_ID_BYTES]) {
  unsigned lo = 0, hi = plan->k;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    int c = memcmp(plan->members[mid].id, id, DED_ID_BYTES);
    if (c == 0) return mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return plan->k;
}

bool ded_quorum_can_complete(const ded_msg_commit *plan) {
  if (plan->nacc == 0) return true;
  unsigned n = 0;
  bool primary_in = false;
  for (unsigned m = 0; m < plan->k; m++) {
    n += (plan->members[m].flags & DED_MEMBER_F_ACCEPTOR) != 0;
    primary_in |= (plan->members[m].flags & DED_MEMBER_F_PRIMARY) != 0;
  }
  return ded_quorum_of(n, plan->nacc, primary_in);
}

static void votes_put(ded_votes *vs, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                      uint64_t attempt, uint32_t view, const uint8_t digest[DED_RESULT_DIGEST_BYTES],
                      bool replace) {
  for (unsigned i = 0; i < vs->n; i++) {
    ded_vote *v = &vs->v[i];
    if (v->attempt == attempt && v->view == view && memcmp(v->id, id, DED_ID_BYTES) == 0) {
      if (replace) memcpy(v->digest, digest, DED_RESULT_DIGEST_BYTES);
      return;
    }
  }
  if (vs->n == vs->cap) {
    if (vs->cap >= DED_ROUND_VOTES_MAX) return;
    unsigned cap = vs->cap ? 2 * vs->cap : 8;
    ded_vote *v = ded_mem_realloc(mem, vs->v, (size_t)cap * sizeof *v);
    if (!v) return; /* only delays completion: the failover path still works */
    vs->v = v;
    vs->cap = cap;
  }
  ded_vote *v = &vs->v[vs->n++];
  v->attempt = attempt;
  v->view = view;
  memcpy(v->id, id, DED_ID_BYTES);
  memcpy(v->digest, digest, DED_RESULT_DIGEST_BYTES);
}

void ded_votes_add(ded_votes *vs, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   uint64_t attempt, uint32_t view, const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  votes_put(vs, mem, id, attempt, view, digest, false);
}

void ded_votes_set(ded_votes *vs, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   uint64_t attempt, uint32_t view, const uint8_t digest[DED_RESULT_DIGEST_BYTES]) {
  votes_put(vs, mem, id, attempt, view, digest, true);
}

static bool votes_alike(const ded_vote *a, const ded_vote *b) {
  return a->attempt == b->attempt && a->view == b->view &&
         memcmp(a->digest, b->digest, DED_RESULT_DIGEST_BYTES) == 0;
}

/* Whether voter |id| counts for |p|, and as its primary: one of |p|'s
 * listed acceptors, or, with |acc| (the whole acceptor set, |n| ids, its
 * primary at |primary|), one of those. */
static bool votes_counts(const ded_msg_commit *p, const uint8_t (*acc)[DED_ID_BYTES], unsigned n,
                         unsigned primary, const uint8_t id[DED_ID_BYTES], bool *is_primary) {
  if (acc) {
    unsigned k = 0;
    while (k < n && memcmp(acc[k], id, DED_ID_BYTES) != 0) k++;
    *is_primary = k == primary;
    return k < n;
  }
  unsigned m = ded_plan_index(p, id);
  if (m == p->k || !(p->members[m].flags & DED_MEMBER_F_ACCEPTOR)) return false;
  *is_primary = (p->members[m].flags & DED_MEMBER_F_PRIMARY) != 0;
  return true;
}

/* The index of the smallest of the |n| ids at |acc| (the primary); 0. */
static unsigned acc_primary(const uint8_t (*acc)[DED_ID_BYTES], unsigned n) {
  unsigned primary = 0;
  for (unsigned k = 1; acc && k < n; k++)
    if (memcmp(acc[k], acc[primary], DED_ID_BYTES) < 0) primary = k;
  return primary;
}

static bool votes_quorum(const ded_votes *vs, const ded_msg_commit *p,
                         const uint8_t (*acc)[DED_ID_BYTES], unsigned n, const uint8_t **digest) {
  unsigned primary = acc_primary(acc, n);
  for (unsigned i = 0; i < vs->n; i++) {
    const ded_vote *v = &vs->v[i];
    if (v->attempt != p->attempt) continue;
    bool seen = false; /* this view and digest were counted already */
    for (unsigned j = 0; j < i && !seen; j++) seen = votes_alike(&vs->v[j], v);
    if (seen) continue;
    unsigned in = 0;
    bool primary_in = false;
    for (unsigned j = i; j < vs->n; j++) {
      const ded_vote *o = &vs->v[j];
      bool is_primary = false;
      if (!votes_alike(o, v) || !votes_counts(p, acc, n, primary, o->id, &is_primary)) continue;
      in++;
      primary_in |= is_primary;
    }
    if (ded_quorum_of(in, p->nacc, primary_in)) {
      if (digest) *digest = v->digest;
      return true;
    }
  }
  return false;
}

bool ded_quorum_acceptors_match(const ded_msg_commit *p, const uint8_t (*acc)[DED_ID_BYTES],
                                unsigned n) {
  if (!acc || n != p->nacc) return false;
  for (unsigned m = 0; m < p->k; m++) {
    if (!(p->members[m].flags & DED_MEMBER_F_ACCEPTOR)) continue;
    unsigned i = 0;
    while (i < n && memcmp(acc[i], p->members[m].id, DED_ID_BYTES) != 0) i++;
    if (i == n) return false;
  }
  return true;
}

bool ded_quorum_can_complete_alive(const ded_msg_commit *p, const uint8_t (*acc)[DED_ID_BYTES],
                                   unsigned n, bool (*alive)(void *ctx, const uint8_t *id),
                                   void *ctx) {
  if (p->nacc == 0) return true;
  if (!ded_quorum_acceptors_match(p, acc, n)) {
    acc = NULL;
    n = 0;
  }
  unsigned primary = acc_primary(acc, n);
  unsigned in = 0;
  bool primary_in = false;
  unsigned total = acc ? n : p->k;
  for (unsigned i = 0; i < total; i++) {
    const uint8_t *id = acc ? acc[i] : p->members[i].id;
    bool is_primary = false;
    if (!votes_counts(p, acc, n, primary, id, &is_primary) || !alive(ctx, id)) continue;
    in++;
    primary_in |= is_primary;
  }
  return ded_quorum_of(in, p->nacc, primary_in);
}

bool ded_votes_quorum(const ded_votes *vs, const ded_msg_commit *p, const uint8_t **digest) {
  return votes_quorum(vs, p, NULL, 0, digest);
}

bool ded_votes_quorum_among(const ded_votes *vs, const ded_msg_commit *p,
                            const uint8_t (*acc)[DED_ID_BYTES], unsigned n, const uint8_t **digest) {
  bool whole = acc && n > 0 && n == p->nacc;
  return votes_quorum(vs, p, whole ? acc : NULL, whole ? n : 0, digest);
}

unsigned ded_votes_member(const ded_votes *vs, const ded_msg_commit *plan,
                          const uint8_t digest[DED_RESULT_DIGEST_BYTES], unsigned nth) {
  for (unsigned i = 0; i < vs->n; i++) {
    const ded_vote *v = &vs->v[i];
    if (v->attempt != plan->attempt || memcmp(v->digest, digest, DED_RESULT_DIGEST_BYTES) != 0)
      continue;
    unsigned m = ded_plan_index(plan, v->id);
    bool again = false; /* the same voter in another view */
    for (unsigned j = 0; j < i && !again; j++)
      again = vs->v[j].attempt == plan->attempt && memcmp(vs->v[j].id, v->id, DED_ID_BYTES) == 0 &&
              memcmp(vs->v[j].digest, digest, DED_RESULT_DIGEST_BYTES) == 0;
    if (m == plan->k || again) continue;
    if (nth-- == 0) return m;
  }
  return plan->k;
}

void ded_votes_free(ded_votes *vs, const ded_mem *mem) {
  ded_mem_free(mem, vs->v);
  vs->v = NULL;
  vs->n = vs->cap = 0;
}

#include "ded_match.h"

#include <stddef.h>
#include <string.h>

#include "../avg/ded_partition.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "ded_pick.h"

void ded_gather_init(ded_gather *g, uint64_t round, bool genesis) {
  memset(g, 0, sizeof *g);
  g->round = round;
  g->genesis = genesis;
}

void ded_gather_free(ded_gather *g, const ded_mem *mem) {
  ded_mem_free(mem, g->v);
  g->v = NULL;
  g->n = g->cap = 0;
}

static size_t gather_lower_bound(const ded_gather *g, const uint8_t id[DED_ID_BYTES]) {
  DED_STATIC_ASSERT(offsetof(ded_gather_join, id) == 0, "joins start with the id");
  return ded_id_lower_bound(g->v, g->n, sizeof *g->v, id);
}

const ded_gather_join *ded_gather_find(const ded_gather *g, const uint8_t id[DED_ID_BYTES]) {
  size_t i = gather_lower_bound(g, id);
  return i < g->n && memcmp(g->v[i].id, id, DED_ID_BYTES) == 0 ? &g->v[i] : NULL;
}

int ded_gather_add(ded_gather *g, const ded_mem *mem, const uint8_t id[DED_ID_BYTES],
                   const ded_msg_join *join) {
  size_t i = gather_lower_bound(g, id);
  if (i < g->n && memcmp(g->v[i].id, id, DED_ID_BYTES) == 0) return DED_ERR_PROTO;
  if (g->n >= DED_JOINS_MAX) return DED_ERR_LIMIT;
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 8;
    ded_gather_join *v = ded_mem_realloc(mem, g->v, cap * sizeof *v);
    if (!v) return DED_ERR_NOMEM;
    g->v = v;
    g->cap = cap;
  }
  memmove(&g->v[i + 1], &g->v[i], (g->n - i) * sizeof *g->v);
  memcpy(g->v[i].id, id, DED_ID_BYTES);
  g->v[i].join = *join;
  g->n++;
  return 0;
}

static bool gather_same_sig(const ded_msg_join *a, const ded_msg_join *b) {
  return a->dtype == b->dtype && a->pos == b->pos;
}

void ded_gather_signature(const ded_gather *g, uint8_t *dtype, uint64_t *pos, uint64_t *count,
                          uint64_t *step) {
  DED_ASSERT(g->n > 0);
  /* Joins are sorted by id, so the first joiner with a signature is its
   * smallest: scanning in order and keeping strict improvements breaks
   * ties towards the smallest id. O(n^2), n <= DED_JOINS_MAX, once per
   * round. */
  size_t best = 0, best_votes = 0;
  for (size_t i = 0; i < g->n; i++) {
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = gather_same_sig(&g->v[j].join, &g->v[i].join);
    if (seen) continue;
    size_t votes = 0;
    for (size_t j = i; j < g->n; j++) votes += gather_same_sig(&g->v[j].join, &g->v[i].join);
    if (votes > best_votes) {
      best = i;
      best_votes = votes;
    }
  }
  const ded_msg_join *b = &g->v[best].join;
  *dtype = b->dtype;
  *pos = b->pos;
  *step = ded_gather_step(g, b->dtype, b->pos);
  /* The shortest offer of a joiner that can be a member; but an attempt
   * of this round a reporter ran fixed the round's length for good (every
   * attempt of a round has one). */
  uint64_t shortest = UINT64_MAX, fixed = UINT64_MAX;
  for (size_t i = 0; i < g->n; i++) {
    const ded_msg_join *j = &g->v[i].join;
    if (!gather_same_sig(j, b) || (j->step && *step && j->step != *step)) continue;
    shortest = DED_MIN(shortest, j->count);
    if (j->flags & DED_JOIN_F_STATUS && j->plan.round == g->round && j->plan.dtype == b->dtype &&
        j->plan.pos == b->pos)
      fixed = DED_MIN(fixed, j->plan.count);
  }
  *count = fixed != UINT64_MAX ? fixed : shortest;
}

uint64_t ded_gather_step(const ded_gather *g, uint8_t dtype, uint64_t pos) {
  /* Joins are sorted by id: on a tie, the smallest id's length. */
  uint64_t best = 0;
  size_t best_votes = 0;
  for (size_t i = 0; i < g->n; i++) {
    const ded_msg_join *a = &g->v[i].join;
    if (a->dtype != dtype || a->pos != pos || a->step == 0) continue;
    size_t votes = 0;
    for (size_t j = 0; j < g->n; j++) {
      const ded_msg_join *b = &g->v[j].join;
      votes += b->dtype == dtype && b->pos == pos && b->step == a->step;
    }
    if (votes > best_votes) {
      best = a->step;
      best_votes = votes;
    }
  }
  return best;
}

bool ded_gather_fits(const ded_msg_join *j, const ded_msg_commit *sig) {
  return j->dtype == sig->dtype && j->pos == sig->pos && j->count >= sig->count &&
         (j->step == 0 || sig->step == 0 || j->step == sig->step);
}

int ded_gather_commit(const ded_gather *g, const ded_mem *mem, uint32_t chunk_bytes,
                      ded_msg_commit *out) {
  return ded_gather_commit_planned(g, mem, chunk_bytes, NULL, false, NULL, out);
}

static uint8_t gather_mode(const ded_msg_join *j, bool any_contrib) {
  if (j->flags & DED_JOIN_F_CLIENT) return DED_MODE_CLIENT;
  if (j->flags & DED_JOIN_F_AUX && any_contrib) return DED_MODE_AUX;
  return DED_MODE_NODE;
}

/* Fills |off| with the members' shards: the LP's over |lp| when given. */
static int gather_shares(uint64_t count, unsigned k, const ded_lp_peer *lp, bool equal,
                         const ded_mem *mem, ded_lp_result *res, uint64_t *off) {
  if (res) *res = (ded_lp_result){DED_LP_E_NONE, 0.0, false};
  if (!lp || k == 1) {
    ded_partition_equal(count, k, off);
    return 0;
  }
  double *frac = ded_mem_calloc(mem, k, sizeof *frac);
  if (!frac) return DED_ERR_NOMEM;
  ded_lp_result r = {0, 0.0, false};
  if (equal) {
    ded_lp_equal(lp, k, frac);
    r.t_per_byte = ded_lp_time(lp, k, frac);
  } else {
    ded_lp_plan(lp, k, frac, &r);
  }
  if (ded_partition_weighted(count, k, frac, off) != 0) ded_partition_equal(count, k, off);
  if (res) *res = r;
  ded_mem_free(mem, frac);
  return 0;
}

/* The round's codec (ded_pick.h), from the members' JOINs. */
static int gather_codec(const ded_gather *g, const ded_mem *mem, double t_per_byte,
                        ded_msg_commit *out) {
  ded_pick_member *pm = ded_mem_calloc(mem, out->k, sizeof *pm);
  if (!pm) {
    ded_msg_commit_free(out, mem);
    return DED_ERR_NOMEM;
  }
  unsigned n = 0, m = 0;
  for (size_t i = 0; i < g->n && m < out->k; i++) {
    const ded_msg_join *j = &g->v[i].join;
    if (!ded_gather_fits(j, out)) continue;
    /* members are the fitting joins in id order; an aux one has no say */
    if (!(out->members[m++].flags & DED_MEMBER_F_AUX))
      pm[n++] = (ded_pick_member){j->compress, j->compress_ppm, j->compute_us};
  }
  ded_codec c;
  ded_pick_codec(pm, n, out->dtype, out->step ? out->step : out->count, t_per_byte, &c);
  ded_codec_to_wire(&c, &out->codec, &out->codec_ppm);
  ded_mem_free(mem, pm);
  return 0;
}

int ded_gather_commit_planned(const ded_gather *g, const ded_mem *mem, uint32_t chunk_bytes,
                              const ded_lp_peer *perf, bool equal, ded_lp_result *res,
                              ded_msg_commit *out) {
  memset(out, 0, sizeof *out);
  ded_gather_signature(g, &out->dtype, &out->pos, &out->count, &out->step);
  out->round = g->round;
  size_t es = ded_dtype_size(out->dtype);
  DED_ASSERT(es != 0 && chunk_bytes <= DED_CHUNK_BYTES_MAX);
  /* DED_CHUNK_BYTES_MIN is a multiple of every element size. */
  out->chunk_elems = (uint32_t)(DED_MAX(chunk_bytes, (uint32_t)DED_CHUNK_BYTES_MIN) / es);
  size_t k = 0;
  for (size_t i = 0; i < g->n; i++)
    if (ded_gather_fits(&g->v[i].join, out)) k++;
  DED_ASSERT(k >= 1 && k <= DED_ROUND_MEMBERS_MAX);
  out->members = ded_mem_calloc(mem, k, sizeof *out->members);
  if (!out->members) return DED_ERR_NOMEM;
  uint64_t *off = ded_mem_calloc(mem, k, sizeof *off);
  ded_lp_peer *lp = perf ? ded_mem_calloc(mem, k, sizeof *lp) : NULL;
  int rv = !off || (perf && !lp) ? DED_ERR_NOMEM : 0;
  /* A round of aux members only has no vector to average: they contribute
   * theirs after all, as nodes would. */
  bool any_contrib = false;
  for (size_t i = 0; i < g->n; i++)
    if (ded_gather_fits(&g->v[i].join, out))
      any_contrib |= !(g->v[i].join.flags & DED_JOIN_F_AUX);
  /* What a member is comes from its own JOIN, not from its record. */
  for (size_t i = 0, m = 0; lp && i < g->n; i++)
    if (ded_gather_fits(&g->v[i].join, out)) {
      lp[m] = perf[i];
      lp[m++].mode = gather_mode(&g->v[i].join, any_contrib);
    }
  ded_lp_result lres = {DED_LP_E_NONE, 0.0, false};
  if (rv == 0) rv = gather_shares(out->count, (unsigned)k, lp, equal, mem, &lres, off);
  if (res) *res = lres;
  ded_mem_free(mem, lp);
  if (rv != 0) {
    ded_mem_free(mem, off);
    ded_msg_commit_free(out, mem);
    return rv;
  }
  size_t m = 0;
  for (size_t i = 0; i < g->n; i++) {
    const ded_gather_join *j = &g->v[i];
    if (!ded_gather_fits(&j->join, out)) continue;
    memcpy(out->members[m].id, j->id, DED_ID_BYTES);
    out->members[m].weight = j->join.weight;
    out->members[m].n_local = j->join.n_local;
    out->members[m].shard_off = off[m];
    out->members[m].flags = DED_MEMBER_F_ACCEPTOR | (m == 0 ? DED_MEMBER_F_PRIMARY : 0);
    switch (gather_mode(&j->join, any_contrib)) {
    case DED_MODE_CLIENT: out->members[m].flags |= DED_MEMBER_F_CLIENT; break;
    case DED_MODE_AUX:
      out->members[m].flags |= DED_MEMBER_F_AUX;
      out->members[m].weight = 0.0;
      break;
    default: break;
    }
    m++;
  }
  out->k = (uint16_t)k;
  out->nacc = (uint16_t)k;
  /* Nobody brought weight (every job set 0): average plainly by ranks
   * rather than divide by zero. Members use the commit's weights. */
  double total = 0.0;
  for (size_t i = 0; i < k; i++) total += out->members[i].weight;
  if (!(total > 0.0))
    for (size_t i = 0; i < k; i++)
      if (!(out->members[i].flags & DED_MEMBER_F_AUX)) out->members[i].weight = out->members[i].n_local;
  ded_mem_free(mem, off);
  /* Auto weighs the plan's estimate only once every member's links are
   * measured: an unknown rate is no reason to lose bits. */
  bool known = perf != NULL;
  for (size_t i = 0; known && i < g->n; i++)
    if (ded_gather_fits(&g->v[i].join, out))
      known = perf[i].up_Bps > 0.0 && perf[i].down_Bps > 0.0;
  return gather_codec(g, mem, known ? lres.t_per_byte : 0.0, out);
}

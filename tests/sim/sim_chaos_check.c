/*
 * sim_chaos_check.c: the checks of the fault-schedule tier (sim_chaos.h):
 * agreement, validity, termination, liveness (strict or not), and the
 * trainers' state and joining invariants, as the top of sim_chaos.c
 * states them. Each records the seed's first failure through fail() and
 * stops checking once a seed has failed; none changes what a seed runs.
 */
#include <inttypes.h>
#include <string.h>

#include "sim_chaos.h"

/* ---------------------------------------------------------------- state */

/* The first element where |a| and |b| differ, or count. */
static uint64_t first_diff(const scenario *sc, const void *a, const void *b) {
  size_t es = es_of(sc->dtype);
  for (uint64_t e = 0; e < sc->count; e++)
    if (memcmp((const uint8_t *)a + e * es, (const uint8_t *)b + e * es, es) != 0) return e;
  return sc->count;
}

static double elem(const scenario *sc, const void *p, uint64_t e) {
  return sc->dtype == DED_DTYPE_F32 ? ((const float *)p)[e] : ((const double *)p)[e];
}

/* Whether the state of round |R| that the ref holds, of an older branch
 * than job |j|'s, died with its holders: no live job in step of the ref's
 * branch held a state past the founding round of |j|'s when it was
 * founded, and the ref was taken before (a job of the ref's branch that
 * got to |R| after that founding is a split). A rollback: the run went on
 * from an older state. */
static bool ref_died(const scenario *sc, const job *j, int R) {
  int b = sc->ref_branch[R];
  return j->branch > b && j->branch < MAX_BRANCHES && ((sc->branch_over[j->branch] >> b) & 1u) &&
         sc->ref_ns[R] <= sc->branch_ns[j->branch];
}

/* The step start whose state job |j|'s P is: the rounds before it are in
 * P (the current step's are not, until it finishes). */
static int state_round(const job *j) {
  return j->in_step ? j->step_first : j->next;
}

void found_branch(scenario *sc, job *j, int round) {
  if (sc->nbranches + 1 >= MAX_BRANCHES) { /* none told apart: the plain check */
    j->branch = MAX_BRANCHES;
    return;
  }
  int nb = ++sc->nbranches;
  uint64_t over = 0;
  for (int b = 0; b < nb; b++) {
    int held = -1;
    for (int k = 0; k < sc->used && held < 0; k++) {
      const job *x = &sc->jobs[k];
      if (x != j && x->scheduled && !x->crashed && !x->gave_up && !x->loading && !x->diverged &&
          x->branch == b && state_round(x) > round)
        held = k;
    }
    if (held < 0)
      over |= 1ull << b;
    else
      say(sc, "BRANCH %d: n%d still holds branch %d at round %d", nb, sc->jobs[held].node, b,
          state_round(&sc->jobs[held]));
  }
  sc->branch_over[nb] = over;
  sc->branch_ns[nb] = sim_now(sc->s);
  j->branch = nb;
  say(sc, "BRANCH %d: n%d founds the run at round %d", nb, j->node, round);
}

/* The state invariant at step start |R|: every job in step holds the P the
 * first one there held, unless that one's state died with its holders
 * (ref_died): then |j|'s newer branch's P is the one asked from then on. */
void check_state(scenario *sc, job *j, int R) {
  if (j->diverged || sc->failures) return;
  if (!sc->ref[R]) {
    sc->ref[R] = dup_bytes(j->P, state_bytes(sc));
    sc->ref_node[R] = j->node;
    sc->ref_branch[R] = j->branch;
    sc->ref_ns[R] = sim_now(sc->s);
    return;
  }
  uint64_t e = first_diff(sc, sc->ref[R], j->P);
  if (e < sc->count && ref_died(sc, j, R)) {
    say(sc, "ROLLBACK at round %d: n%d (branch %d) differs from n%d (branch %d), whose state "
        "died with its holders", R, j->node, j->branch, sc->ref_node[R], sc->ref_branch[R]);
    sc->rolled_back = true;
    memcpy(sc->ref[R], j->P, state_bytes(sc));
    sc->ref_node[R] = j->node;
    sc->ref_branch[R] = j->branch;
    sc->ref_ns[R] = sim_now(sc->s);
    return;
  }
  if (e < sc->count)
    fail(sc, "state at round %d: node %d (in step) differs from node %d at elem %" PRIu64
         ": %.17g vs %.17g", R, j->node, sc->ref_node[R], e, elem(sc, j->P, e),
         elem(sc, sc->ref[R], e));
}

/* The joining invariant: the P loaded at |round| is one that a job offered
 * with that digest, bit for bit. The joiner is in step if that job was. */
void check_loaded(scenario *sc, job *j, int round, uint64_t digest) {
  const offer *o = NULL;
  for (int k = 0; k < sc->noffers && !o; k++)
    if (sc->offers[k].round == round && sc->offers[k].digest == digest) o = &sc->offers[k];
  if (!o) {
    fail(sc, "node %d loaded a state of round %d that no job offered", j->node, round);
    return;
  }
  uint64_t e = first_diff(sc, o->bytes, j->P);
  if (e < sc->count)
    fail(sc, "node %d loaded round %d: P differs from node %d's at elem %" PRIu64
         ": %.17g vs %.17g", j->node, round, o->job, e, elem(sc, j->P, e), elem(sc, o->bytes, e));
  j->diverged = o->diverged;
  j->branch = o->branch;
  totals.diverged_loads += o->diverged;
}

/* ---------------------------------------------------------------- rounds */

/* Node index of peer id |id|, or -1. */
static int node_of(scenario *sc, const uint8_t *id) {
  for (int i = 0; i < sc->used; i++)
    if (memcmp(sc->jobs[i].id, id, DED_ID_BYTES) == 0) return i;
  return -1;
}

/* The reference for job |j| in a round of contributors |order|: in commit
 * order, acc = a_0 x_0 + a_1 x_1 + ..., g = acc / W, out = n_j * g. */
static bool check_elem(scenario *sc, int r, const int *order, unsigned k, const job *j,
                       uint64_t e) {
  double W = 0;
  for (unsigned m = 0; m < k; m++) W += sc->jobs[order[m]].weight;
  if (sc->dtype == DED_DTYPE_F32) {
    float acc = 0;
    for (unsigned m = 0; m < k; m++) {
      const job *c = &sc->jobs[order[m]];
      float a = (float)(c->weight / (double)c->n_local);
      float x = ((const float *)c->in[r])[e];
      acc = m == 0 ? a * x : acc + a * x;
    }
    float want = (float)j->n_local * (acc / (float)W), got = ((const float *)j->buf[r])[e];
    if (memcmp(&got, &want, sizeof got) == 0) return true;
    fail(sc, "round %d node %d elem %" PRIu64 ": got %.9g want %.9g", r, j->node, e, got, want);
  } else {
    double acc = 0;
    for (unsigned m = 0; m < k; m++) {
      const job *c = &sc->jobs[order[m]];
      double a = c->weight / (double)c->n_local;
      double x = ((const double *)c->in[r])[e];
      acc = m == 0 ? a * x : acc + a * x;
    }
    double want = (double)j->n_local * (acc / W), got = ((const double *)j->buf[r])[e];
    if (memcmp(&got, &want, sizeof got) == 0) return true;
    fail(sc, "round %d node %d elem %" PRIu64 ": got %.17g want %.17g", r, j->node, e, got, want);
  }
  return false;
}

/* Whether jobs |a| and |b| hold the same mean g in round |r|: out / n_j,
 * exact (n_j is a power of two). */
static bool same_mean(const scenario *sc, int r, const job *a, const job *b) {
  for (uint64_t e = 0; e < sc->count; e++) {
    if (sc->dtype == DED_DTYPE_F32) {
      float x = ((const float *)a->buf[r])[e] / (float)a->n_local;
      float y = ((const float *)b->buf[r])[e] / (float)b->n_local;
      if (memcmp(&x, &y, sizeof x) != 0) return false;
    } else {
      double x = ((const double *)a->buf[r])[e] / (double)a->n_local;
      double y = ((const double *)b->buf[r])[e] / (double)b->n_local;
      if (memcmp(&x, &y, sizeof x) != 0) return false;
    }
  }
  return true;
}

/* Agreement and validity of round |r| on every node that ran it (on a
 * node whose state was diverged then, validity only: round_out). In a
 * round that a reducer equivocated in (sim_equivocate), validity is what
 * the digest can give: every node that completed it holds the same bytes.
 * Those need not be the mean (the reducer's altered shard is the round's
 * if the members it lied to make a quorum: a reducer can always poison
 * the shard it reduces), but no two completers differ. */
void check_round(scenario *sc, int r) {
  const round_out *group = NULL;
  const job *first = NULL;
  for (int i = 0; i < sc->used && !sc->failures; i++) {
    const job *j = &sc->jobs[i];
    const round_out *o = &j->out[r];
    if (!o->done || o->status != 0) continue; /* crashed before: nothing to check */
    if (o->res.alone) { /* alone or late: its own values, untouched */
      if (memcmp(j->in[r], j->buf[r], sc->count * es_of(sc->dtype)) != 0)
        fail(sc, "round %d node %d: alone but buffer changed", r, i);
      continue;
    }
    unsigned k = o->res.contributors;
    if (!o->diverged && !group) group = o;
    if (!o->diverged &&
        (k != group->res.contributors || memcmp(o->members, group->members, k * DED_ID_BYTES) != 0 ||
         o->res.total_weight != group->res.total_weight)) {
      fail(sc, "round %d: node %d disagrees on the contributors (%u vs %u)", r, i, k,
           group->res.contributors);
      return;
    }
    int order[MAX_JOBS];
    bool in_group = false;
    for (unsigned m = 0; m < k; m++) {
      order[m] = node_of(sc, o->members[m]);
      if (order[m] < 0 || !sc->jobs[order[m]].in[r]) {
        fail(sc, "round %d: unknown member, or one that never submitted the round", r);
        return;
      }
      in_group |= order[m] == i;
    }
    if (in_group == o->res.late) {
      fail(sc, "round %d: node %d %s", r, i,
           in_group ? "is a contributor but says it came late"
                    : "fetched a result without coming late");
      return;
    }
    if (sim_equivocated_round(sc->s, (uint64_t)r)) {
      if (!first)
        first = j;
      else if (!same_mean(sc, r, first, j))
        fail(sc, "round %d: nodes %d and %d completed it with different bytes (a reducer "
             "equivocated in it)", r, first->node, i);
      continue;
    }
    for (uint64_t e = 0; e < sc->count && !sc->failures; e++) check_elem(sc, r, order, k, j, e);
  }
}

/* When the strict liveness check starts: every fault healed, every joiner
 * loaded, and every job that reloaded after healing (one the run left far
 * behind, or out of step) back with the run's state. */
static uint64_t settled_ns(const scenario *sc) {
  uint64_t t = sc->heal_ns;
  for (int i = 0; i < sc->used; i++)
    if (sc->jobs[i].loaded_ns > t) t = sc->jobs[i].loaded_ns;
  return t;
}

/* Whether job |j| averaged round |r| with the swarm: it completed it as a
 * contributor (not alone, not late). */
static bool averaged(const job *j, int r) {
  const round_out *o = &j->out[r];
  return j->in[r] && o->done && o->status == 0 && !o->res.alone && !o->res.late;
}

/* The rounds the strict liveness check covers: submitted 2 s after the
 * swarm settled, before the last (which may lose members that finished
 * and left). */
static bool strict_round(const scenario *sc, const job *j, int r, uint64_t settled) {
  return j->in[r] && j->out[r].submit_ns > settled + 2 * SEC && r < sc->rounds - 1;
}

/* The round from which job |j| is back in the swarm's rounds after the
 * swarm settled: the first strict round it averaged; -1 if none. A job
 * cut off by the faults comes back some rounds behind and catches up by
 * fetching results late (or reloads the state, far behind): from its first
 * round with the others on, it must be in every round. */
static int back_round(const scenario *sc, const job *j, uint64_t settled) {
  for (int r = 0; r < sc->rounds; r++)
    if (strict_round(sc, j, r, settled) && averaged(j, r)) return r;
  return -1;
}

/* Strict liveness of round |r| of job |j|: after healing, every live node
 * that is back in the swarm's rounds (back_round) runs the round with the
 * others, unless some node had finished the round before the swarm
 * settled (a node cut off while the others went on is behind them for
 * the rest of a run this short). */
static void check_live(scenario *sc, const job *j, int r, const int *back, int stall) {
  const round_out *o = &j->out[r];
  uint64_t settled = settled_ns(sc);
  if (r >= stall || j->crashed || sc->weak_liveness || !strict_round(sc, j, r, settled) || back[j->node] < 0 ||
      r < back[j->node])
    return;
  int live = 0;
  bool ran_before = false;
  for (int k = 0; k < sc->used; k++) {
    const job *x = &sc->jobs[k];
    live += x->scheduled && !x->crashed && !x->gave_up && x->first_round >= 0 &&
            x->first_round <= r && ((back[k] >= 0 && back[k] <= r) || averaged(x, r));
    ran_before |= x->out[r].done && x->out[r].done_ns <= settled;
  }
  if (!ran_before && ((int)o->res.contributors != live || o->res.late))
    fail(sc, "liveness: node %d round %d after healing: %u contributors of %d live%s", j->node, r,
         o->res.contributors, live, o->res.late ? " (late)" : "");
}

/* Strict liveness, per job: one that ran strict rounds for a round
 * timeout (the bound the engine keeps for every call) came back in one of
 * them (back_round). A run this short may end before a job far behind is
 * back; one that is not back within the bound is stuck. */
static void check_back(scenario *sc, const job *j, const int *back, int stall) {
  if (stall < sc->rounds || j->crashed || j->gave_up || sc->weak_liveness || back[j->node] >= 0) return;
  uint64_t settled = settled_ns(sc);
  for (int r = 0; r < sc->rounds; r++)
    if (strict_round(sc, j, r, settled) &&
        j->out[r].submit_ns > settled + 2 * SEC + sc->round_timeout_ns) {
      fail(sc, "liveness: node %d not back in the swarm's rounds within the bound after healing "
           "(round %d, %.3f s after it)", j->node, r, (double)(j->out[r].submit_ns - settled) / 1e9);
      return;
    }
}

/*
 * The first round a reducer equivocated in that no node completed with a
 * result (a quorum of one digest never formed: the members it lied to and
 * the others split the acceptors' votes, and a crashed acceptor left too
 * few for either side), or sc->rounds. No sound decision exists then: the
 * dead acceptor may have voted either way before it died, and completed
 * with those bytes. Every later round is held up too (none can carry on
 * from a round whose voters voted), so the run goes on at the bound, each
 * job alone, until the defences against Byzantine peers rule out the
 * liar's bytes. Strict liveness is not asked from that round on; the weak
 * check and every safety check still are.
 */
static int liar_stall(const scenario *sc) {
  for (int r = 0; r < sc->rounds; r++) {
    if (!sim_equivocated_round(sc->s, (uint64_t)r)) continue;
    bool result = false;
    for (int k = 0; k < sc->used && !result; k++) {
      const round_out *o = &sc->jobs[k].out[r];
      result = sc->jobs[k].in[r] && o->done && o->status == 0 && !o->res.alone;
    }
    if (!result) return r;
  }
  return sc->rounds;
}

/* Termination and liveness of every job's rounds. */
void check_jobs(scenario *sc, uint64_t limit_ns) {
  int back[MAX_JOBS];
  for (int i = 0; i < sc->used; i++) back[i] = back_round(sc, &sc->jobs[i], settled_ns(sc));
  int stall = liar_stall(sc);
  if (stall < sc->rounds) {
    totals.liar_stalls++;
    say(sc, "STALL round %d: a reducer lied in it and it ended without a result anywhere", stall);
  }
  for (int i = 0; i < sc->used && !sc->failures; i++) {
    const job *j = &sc->jobs[i];
    if (!j->crashed && !j->gave_up && (j->loading || j->reloading || j->next < sc->rounds)) {
      fail(sc, "liveness: node %d %s by %.0f s", i,
           j->loading ? "never loaded the run's state" : j->reloading ? "still reloading" :
                                                         "stopped before the last round",
           (double)limit_ns / 1e9);
      break;
    }
    for (int r = 0; r < sc->rounds && !sc->failures; r++) {
      const round_out *o = &j->out[r];
      if (!j->in[r] || (j->crashed && !o->done)) continue; /* not its round */
      if (!o->done) {
        fail(sc, "liveness: node %d round %d not done by %.0f s", i, r, (double)limit_ns / 1e9);
      } else if (o->status != 0) {
        fail(sc, "node %d round %d failed: %s", i, r, ded_strerror(o->status));
      } else if (o->done_ns - o->submit_ns > sc->round_timeout_ns + j->frozen_ns + 100 * MS &&
                 (o->submit_ns >= sc->swarm_ns ||
                  o->done_ns - o->submit_ns > 2 * sc->round_timeout_ns + j->frozen_ns)) {
        /* A round submitted before this node had joined the first round
         * gets its bound from then (a rendezvous may come first): twice
         * the bound covers that here. */
        fail(sc, "termination: node %d round %d took %.3f s (bound %.0f s, frozen %.3f s)", i, r,
             (double)(o->done_ns - o->submit_ns) / 1e9, (double)sc->round_timeout_ns / 1e9,
             (double)j->frozen_ns / 1e9);
      } else {
        check_live(sc, j, r, back, stall);
      }
    }
    if (!sc->failures) check_back(sc, j, back, stall);
  }
}

/*
 * ded_compress.c: a round's side of compression (ded_round.h): the
 * contribution with the job's error feedback added (avg/ded_feedback.h),
 * the memory its encoded frames live in, and the residual a completed
 * round leaves. The codecs themselves are avg/ded_codec.h's; the attempt
 * (avg/ded_attempt.h) encodes and decodes.
 */
#include <string.h>

#include "../ded_node_int.h"
#include "ded_round_int.h"

typedef struct ded_wire_blob {
  struct ded_wire_blob *next;
  uint8_t bytes[];
} ded_wire_blob;

uint8_t *ded_round_wire(ded_node *node, ded_round *r, size_t len) {
  ded_wire_blob *b = ded_mem_malloc(node->mem, sizeof *b + len);
  if (!b) return NULL;
  b->next = r->wire;
  r->wire = b;
  return b->bytes;
}

void ded_round_wire_drop(ded_node *node, ded_round *r) {
  while (r->wire) {
    ded_wire_blob *next = r->wire->next;
    ded_mem_free(node->mem, r->wire);
    r->wire = next;
  }
}

void ded_round_wire_free(ded_node *node, ded_round *r) {
  ded_round_wire_drop(node, r);
  if (r->cin) ded_bufcache_put(&node->cache, r->cin, (size_t)r->a.count * sizeof *r->cin);
  r->cin = NULL;
}

int ded_round_compensate(ded_node *node, ded_round *r) {
  size_t n = (size_t)r->a.count;
  r->cin = ded_bufcache_get(&node->cache, n * sizeof *r->cin); /* the round's length is fixed */
  if (!r->cin) return DED_ERR_NOMEM;
  if (node->s.no_feedback) return 0;
  uint64_t len_before = node->fb.len;
  ded_feedback_note note = ded_feedback_prepare(&node->fb, node->mem, r->a.step);
  r->fb_resets = node->fb.resets;
  switch (note) {
  case DED_FEEDBACK_KEPT:
    if (!len_before && node->fb.len)
      node_log(node, DED_LOG_INFO,
               "round %llu: error feedback on, over a step of %llu elements",
               (unsigned long long)r->no, (unsigned long long)node->fb.len);
    break;
  case DED_FEEDBACK_NO_STEP:
    if (!node->fb_waiting_logged)
      node_log(node, DED_LOG_INFO,
               "round %llu: compressed without error feedback until the training step's length "
               "is known",
               (unsigned long long)r->no);
    node->fb_waiting_logged = true;
    break;
  case DED_FEEDBACK_NEW_LENGTH:
    node_log(node, DED_LOG_WARN,
             "round %llu: the training step is now %llu elements (was %llu): error feedback "
             "residual reset",
             (unsigned long long)r->no, (unsigned long long)r->a.step,
             (unsigned long long)len_before);
    break;
  case DED_FEEDBACK_NOMEM:
    node_log(node, DED_LOG_WARN,
             "round %llu: no memory for the error feedback of %llu elements: compressed without it",
             (unsigned long long)r->no, (unsigned long long)r->a.step);
    break;
  }
  return 0;
}

void ded_round_compensate_range(ded_node *node, ded_round *r, uint64_t first, uint64_t n) {
  const float *x = (const float *)r->a.buf + first;
  if (node->s.no_feedback)
    memcpy(r->cin + first, x, (size_t)n * sizeof *x);
  else
    ded_feedback_apply(&node->fb, r->a.step, r->pos + first, x, (size_t)n, r->cin + first);
}

void ded_round_feedback(ded_node *node, ded_round *r) {
  ded_attempt *a = &r->att;
  if (!r->cin || a->plan.count != r->a.count || node->s.no_feedback) return;
  /* The residual was cleared since this contribution was compensated (a
   * state loaded, another step length): what it holds is not what we
   * added, and stays as it is. */
  if (node->fb.resets != r->fb_resets) return;
  /* An attempt we sent data for in an earlier hold of it, taken over from
   * a DECIDE, or whose encoding did not finish here: what we sent is
   * computed again, from the whole contribution (compensated anew: the
   * same values, nothing was stored meanwhile). Out of memory: the
   * residual stays as it was, one step's feedback late. */
  if (!a->q || ded_attempt_encoding(a)) ded_round_compensate_range(node, r, 0, r->a.count);
  if (ded_attempt_decoded_contrib(a, node->mem, &node->cache, r->cin) != 0) return;
  if (a->q) ded_feedback_store(&node->fb, r->a.step, r->pos, r->cin, a->q, (size_t)r->a.count);
}

bool ded_rounds_encoding(const ded_node *node) {
  for (unsigned i = 0; i < node->rounds.n; i++)
    if (ded_round_encoding(node->rounds.v[i])) return true;
  return false;
}

void ded_rounds_encode(ded_node *node, uint64_t now_ns) {
  for (unsigned i = 0; i < node->rounds.n; i++) {
    ded_round *r = node->rounds.v[i];
    if (ded_round_encoding(r)) {
      ded_round_encode_step(node, r, DED_ENCODE_SLICE_ELEMS, now_ns);
      return; /* the oldest round's first: its frames go first */
    }
  }
}

void ded_rounds_feedback_reset(ded_node *node, const char *why) {
  uint64_t len = node->fb.len;
  if (ded_feedback_reset(&node->fb, node->mem))
    node_log(node, DED_LOG_INFO, "error feedback residual of %llu elements reset: %s",
             (unsigned long long)len, why);
}

void ded_rounds_note_compute(ded_node *node, const ded_round_args *args, bool idle,
                             uint64_t now_ns) {
  ded_rounds *rs = &node->rounds;
  uint64_t last = rs->last_report_ns;
  if (idle && last && now_ns > last) rs->compute_acc_ns += now_ns - last;
  rs->compute_elems += args->count;
  if (args->step && rs->compute_elems >= args->step) {
    rs->compute_step_us = DED_MIN(rs->compute_acc_ns / 1000u, UINT32_MAX);
    rs->compute_acc_ns = 0;
    rs->compute_elems = 0;
  }
}

void ded_round_join_prefs(ded_node *node, ded_msg_join *j) {
  j->compress = node->s.compress;
  j->compress_ppm = node->s.compress_ppm;
  j->compute_us = (uint32_t)node->rounds.compute_step_us;
}

/*
 * ded_dgroups.c: the driver's API of group peers (ded_driver.h): where
 * this driver is reached, publishing the addresses of the job's group
 * peers in its record, reading those other jobs published for a group,
 * and adding bootstrap addresses while it runs.
 *
 * Other threads parse and check what they are given, then queue it under
 * the driver's |mu| and wake the loop; the driver thread hands it to the
 * node at its next wake-up (drv_groups_on_wake). A hint question is
 * answered on the driver thread under |mu|, since ded_node_group_hints
 * only reads the node; its caller waits on the driver's condition, as
 * ded_driver_status does.
 */
#include "ded_driver_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ded_resolve.h"

/* How long a hint question waits for the driver thread's answer, and how
 * often a caller waiting for peers to publish asks again. */
#define HINTS_ANSWER_NS (1000ull * 1000 * 1000)
#define HINTS_POLL_NS (20ull * 1000 * 1000)

int ded_driver_address(const ded_driver *d, char *out, size_t len) {
  size_t n = strlen(d->addr_text);
  if (n == 0 || len <= n) return DED_ERR_INVALID_ARG;
  memcpy(out, d->addr_text, n + 1);
  return 0;
}

int ded_driver_groups_publish(ded_driver *d, const uint16_t *ids, const char *const *addrs, unsigned n) {
  if (n > DED_RECORD_GROUPS_MAX || (n > 0 && (!ids || !addrs))) return DED_ERR_INVALID_ARG;
  ded_group_addr g[DED_RECORD_GROUPS_MAX];
  for (unsigned i = 0; i < n; i++) {
    g[i].id = ids[i];
    if (!addrs[i] || ded_addr_parse(addrs[i], &g[i].addr) != 0 || ded_addr_is_any(&g[i].addr))
      return DED_ERR_INVALID_ARG;
  }
  /* Sorted by id (insertion: a few dozen at most); a repeated id is an error. */
  for (unsigned i = 1; i < n; i++)
    for (unsigned j = i; j > 0 && g[j - 1].id > g[j].id; j--) {
      ded_group_addr t = g[j];
      g[j] = g[j - 1];
      g[j - 1] = t;
    }
  /* What the node's record will take (ded_disc_groups_set checks the same). */
  ded_record probe;
  probe.ext_len = 0;
  if (ded_record_groups_add(&probe, g, n) != 0) return DED_ERR_INVALID_ARG;
  pthread_mutex_lock(&d->mu);
  if (d->stop_requested) {
    pthread_mutex_unlock(&d->mu);
    return DED_ERR_CLOSING;
  }
  if (n) memcpy(d->groups, g, n * sizeof *g);
  d->ngroups = n;
  d->groups_new = true; /* a list not handed over yet is replaced */
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  return 0;
}

int ded_driver_join_more(ded_driver *d, const char *addrs) {
  pending_join *j = calloc(1, sizeof *j);
  if (!j) return DED_ERR_NOMEM;
  char err[256];
  int rv = ded_resolve_list(addrs, j->addrs, DED_BOOTSTRAP_MAX, &j->n, false, err, sizeof err);
  if (rv) {
    drv_log(d, DED_LOG_WARN, "bootstrap addresses not added: %s", err);
    free(j);
    return rv;
  }
  if (j->n == 0) {
    free(j);
    return 0;
  }
  pthread_mutex_lock(&d->mu);
  if (d->stop_requested) {
    pthread_mutex_unlock(&d->mu);
    free(j);
    return DED_ERR_CLOSING;
  }
  if (d->joins_tail)
    d->joins_tail->next = j;
  else
    d->joins_head = j;
  d->joins_tail = j;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  return 0;
}

/* One answer of the driver thread to |q| (zeroed first): 0, or
 * DED_ERR_CLOSING, DED_ERR_TIMEOUT (no answer within HINTS_ANSWER_NS). */
static int hints_ask(ded_driver *d, pending_hints *q) {
  uint16_t id = q->id;
  memset(q, 0, sizeof *q);
  q->id = id;
  pthread_mutex_lock(&d->mu);
  if (d->stop_requested) {
    pthread_mutex_unlock(&d->mu);
    return DED_ERR_CLOSING;
  }
  q->next = d->hints_head;
  d->hints_head = q;
  pthread_mutex_unlock(&d->mu);
  drv_wake(d);
  uint64_t deadline = ded_driver_now_ns() + HINTS_ANSWER_NS;
  pthread_mutex_lock(&d->mu);
  while (!q->done && ded_driver_now_ns() < deadline) ded_cond_wait_ns(&d->cv, &d->mu, 10000000);
  if (!q->done) /* still queued: ours again once off the list */
    for (pending_hints **pp = &d->hints_head; *pp; pp = &(*pp)->next)
      if (*pp == q) {
        *pp = q->next;
        break;
      }
  bool done = q->done;
  pthread_mutex_unlock(&d->mu);
  return done ? 0 : DED_ERR_TIMEOUT;
}

int ded_driver_group_hints(ded_driver *d, uint16_t id, uint64_t wait_ns, char *out, size_t len) {
  if (!out || len == 0) return DED_ERR_INVALID_ARG;
  out[0] = '\0';
  uint64_t start = ded_driver_now_ns();
  uint64_t until = wait_ns > UINT64_MAX - start ? UINT64_MAX : start + wait_ns;
  pending_hints q;
  q.id = id;
  for (;;) {
    int rv = hints_ask(d, &q);
    if (rv) return rv;
    uint64_t now = ded_driver_now_ns();
    if (q.waiting == 0 || now >= until) break;
    pthread_mutex_lock(&d->mu); /* a pause, woken early by any broadcast */
    ded_cond_wait_ns(&d->cv, &d->mu, DED_MIN(HINTS_POLL_NS, until - now));
    pthread_mutex_unlock(&d->mu);
  }
  size_t pos = 0;
  for (size_t i = 0; i < q.n; i++) {
    char a[64];
    ded_addr_format(&q.out[i], a, sizeof a);
    int w = snprintf(out + pos, len - pos, "%s%s", i ? "," : "", a);
    if (w < 0 || (size_t)w >= len - pos) {
      out[pos] = '\0';
      return DED_ERR_INVALID_ARG; /* |out| too small */
    }
    pos += (size_t)w;
  }
  return (int)q.n;
}

void drv_groups_on_wake(ded_driver *d) {
  pthread_mutex_lock(&d->mu);
  bool publish = d->groups_new;
  ded_group_addr g[DED_RECORD_GROUPS_MAX];
  unsigned ng = d->ngroups;
  if (publish) memcpy(g, d->groups, ng * sizeof *g);
  d->groups_new = false;
  pending_join *joins = d->joins_head;
  d->joins_head = d->joins_tail = NULL;
  /* Read-only, calls back nothing: answered here, under |mu|. */
  uint64_t now = ded_driver_now_ns();
  for (pending_hints *q = d->hints_head; q; q = q->next) {
    q->n = ded_node_group_hints(d->node, q->id, now, q->out, DED_BOOTSTRAP_MAX, &q->waiting);
    q->done = true;
  }
  bool answered = d->hints_head != NULL;
  d->hints_head = NULL;
  if (answered) pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
  if (publish) {
    int rv = ded_node_groups_set(d->node, g, ng, ded_driver_now_ns());
    if (rv) drv_log(d, DED_LOG_WARN, "group peers not published: %s", ded_strerror(rv));
  }
  while (joins) {
    pending_join *j = joins;
    joins = j->next;
    ded_node_join_more(d->node, j->addrs, j->n, ded_driver_now_ns());
    free(j);
  }
}

void drv_groups_free(ded_driver *d) {
  while (d->joins_head) {
    pending_join *j = d->joins_head;
    d->joins_head = j->next;
    free(j);
  }
  d->joins_tail = NULL;
}

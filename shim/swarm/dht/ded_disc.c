#include "ded_disc.h"

#include <string.h>

#include "../core/ded_assert.h"
#include "../core/ded_err.h"
#include "../core/ded_limits.h"
#include "../core/ded_msg.h"
#include "../ded_node_int.h"
#include "ded_invite.h"

static uint32_t perf_kBps(double Bps) {
  return Bps > 0.0 && Bps / 1000.0 < UINT32_MAX ? (uint32_t)(Bps / 1000.0 + 0.5) : 0;
}

/* Our rates as of now: declared, else measured (flagged while early). */
static ded_perf node_perf_now(const ded_node *node) {
  ded_perf p;
  p.up_kBps = perf_kBps(node->s.up_Bps > 0.0 ? node->s.up_Bps : ded_meter_rate(&node->up));
  p.down_kBps = perf_kBps(node->s.down_Bps > 0.0 ? node->s.down_Bps : ded_meter_rate(&node->down));
  p.add_kBps = perf_kBps(node->s.add_Bps);
  p.flags = 0;
  if (p.up_kBps && !(node->s.up_Bps > 0.0) && ded_meter_early(&node->up)) p.flags |= DED_PERF_F_UP_EARLY;
  if (p.down_kBps && !(node->s.down_Bps > 0.0) && ded_meter_early(&node->down))
    p.flags |= DED_PERF_F_DOWN_EARLY;
  return p;
}

/* A rate worth telling the swarm about: first known, or off by a fifth. */
static bool perf_moved(uint32_t was, uint32_t now) {
  return (was == 0) != (now == 0) || (double)now > 1.2 * was || (double)now < was / 1.2;
}

/* Rates worth telling the swarm about again: one moved, or settled. */
static bool perf_changed(const ded_perf *was, const ded_perf *now) {
  return perf_moved(was->up_kBps, now->up_kBps) || perf_moved(was->down_kBps, now->down_kBps) ||
         was->flags != now->flags;
}

int ded_disc_build_record(ded_node *node, uint64_t now_ns) {
  ded_record *rec = &node->disc.rec;
  node->disc.perf = node_perf_now(node);
  node->disc.perf_ns = now_ns;
  ded_record_perf_set(rec, &node->disc.perf);
  if (node->s.has_invite) ded_record_invite_add(rec, node->s.invite_expires_ms, node->s.invite_sig);
  if (node->disc.progress_set) {
    ded_record_progress_add(rec, &node->disc.progress);
    node->disc.progress_said = true;
  }
  /* Checked when set (ded_disc_groups_set), and a full list fits beside
   * the rest (ded_record.c's static assertion). */
  if (node->disc.groups_set) {
    int grv = ded_record_groups_add(rec, node->disc.groups, node->disc.ngroups);
    DED_ASSERT(grv == 0);
    (void)grv;
  }
  node->disc.progress_new = false;
  rec->mode = node->s.mode;
  rec->flags = node->s.no_rounds ? DED_RECORD_F_NO_ROUNDS : 0;
  memcpy(rec->run_id, node->run_id, DED_RUN_ID_BYTES);
  uint64_t wall = node_wall_ms(node, now_ns);
  rec->seq = DED_MAX(rec->seq + 1, wall);
  rec->issued_ms = wall;
  rec->ttl_ms = node->s.record_ttl_ms;
  rec->naddr = (uint8_t)node->s.n_announce;
  for (unsigned i = 0; i < node->s.n_announce; i++) rec->addr[i] = node->s.announce[i];
  ded_record_sign(rec, &node->ident);
  int n = ded_record_encode(rec, node->disc.rec_bytes, sizeof node->disc.rec_bytes);
  if (n < 0) return n;
  node->disc.rec_len = (size_t)n;
  int rv = ded_table_upsert(&node->disc.table, rec);
  node->disc.rec_refresh_ns = now_ns + (uint64_t)node->s.record_ttl_ms * 1000000u / 3;
  return rv < 0 ? rv : 0;
}

/* Sends one record to every ready connection but |except|. */
void ded_disc_flood(ded_node *node, const uint8_t *rec, size_t len, ded_conn *except) {
  uint8_t frame[DED_FRAME_HDR_BYTES + 4 + DED_RECORD_BYTES_MAX];
  ded_wr w = ded_wr_init(frame, sizeof frame);
  ded_msg_records_wr rw;
  ded_msg_records_begin(&rw, &w);
  if (ded_msg_records_add(&rw, rec, len) != 0) return;
  ded_msg_records_end(&rw);
  /* Once per peer, on its first connection; never back to the sender. */
  for (uint32_t s = 0; s < node->conns.nslots; s++) {
    ded_conn *c = ded_conns_at(&node->conns, s);
    if (c && c->state == DED_CONN_READY && c->peer && c->peer->conn == c &&
        !(except && except->peer == c->peer))
      ded_conn_send_ctrl(node, c, frame, w.pos);
  }
}

/* Sends our whole table to a connection that just became ready. */
void ded_disc_send_table(ded_node *node, ded_conn *c) {
  size_t cap = DED_MIN((size_t)DED_FRAME_MAX,
                       DED_FRAME_HDR_BYTES + 2 + ded_table_count(&node->disc.table) * (2 + DED_RECORD_BYTES_MAX));
  uint8_t *frame = ded_mem_malloc(node->mem, cap);
  if (!frame) return;
  size_t i = 0;
  while (i < ded_table_count(&node->disc.table)) {
    ded_wr w = ded_wr_init(frame, cap);
    ded_msg_records_wr rw;
    ded_msg_records_begin(&rw, &w);
    for (; i < ded_table_count(&node->disc.table); i++) {
      const ded_table_entry *e = ded_table_at(&node->disc.table, i);
      if (c->peer && memcmp(e->id, c->peer->id, DED_ID_BYTES) == 0) continue;
      /* A peer that left: its record would tell a newcomer of a run that
       * may be over (a joiner waits for a run its records show). */
      const ded_peer *gone = ded_peer_find(node, e->id);
      if (gone && gone->left) continue;
      uint8_t buf[DED_RECORD_BYTES_MAX];
      int n = ded_record_encode(&e->rec, buf, sizeof buf);
      if (n < 0) continue;
      if (ded_msg_records_add(&rw, buf, (size_t)n) != 0) break;
    }
    ded_msg_records_end(&rw);
    if (rw.n > 0) ded_conn_send_ctrl(node, c, frame, w.pos);
  }
  ded_mem_free(node->mem, frame);
}

/* Verifies and stores a record that arrived on |from| (NULL: in a HELLO,
 * whose sender we are talking to already). */
/* Whether the run's access control lets |rec|'s owner in: 0, or
 * DED_ERR_NOT_ADMITTED. */
static int node_admits(const ded_node *node, const ded_record *rec, uint64_t now_ms) {
  const ded_node_settings *s = &node->s;
  if (!s->access) return 0;
  if (s->has_owner && memcmp(rec->pk, s->owner, DED_PK_BYTES) == 0) return 0;
  for (unsigned i = 0; i < s->nallow; i++)
    if (memcmp(rec->pk, s->allow[i], DED_PK_BYTES) == 0) return 0;
  uint64_t expires;
  uint8_t sig[DED_SIG_BYTES];
  if (s->has_owner && ded_record_invite(rec, &expires, sig) &&
      ded_invite_check(s->owner, node->run_id, rec->pk, expires, sig, now_ms) == 0)
    return 0;
  return DED_ERR_NOT_ADMITTED;
}

int ded_disc_take_record(ded_node *node, const uint8_t *bytes, size_t len, ded_conn *from,
                            uint64_t now_ns, ded_peer **out) {
  ded_record rec;
  int rv = ded_record_decode(bytes, len, &rec);
  if (rv) return rv;
  uint8_t id[DED_ID_BYTES];
  ded_peer_id(rec.pk, id);
  if (out) *out = NULL;
  if (id_is_me(node, id)) return 0; /* our own, echoed back */
  /* Flooding brings each record from every neighbour: only one that would
   * replace what we hold is worth a signature check. */
  const ded_table_entry *have = ded_table_find(&node->disc.table, id);
  if (have && have->rec.seq >= rec.seq && from) return 0;
  rv = ded_record_verify(&rec, node->run_id, node_wall_ms(node, now_ns));
  if (rv == 0) rv = node_admits(node, &rec, node_wall_ms(node, now_ns));
  if (rv) return rv;
  ded_peer *p = ded_peer_get_or_add(node, id, now_ns);
  if (!p) return DED_ERR_LIMIT;
  if (out) *out = p;
  if (p->left) return 0;
  rv = ded_table_upsert(&node->disc.table, &rec);
  if (rv < 0) return rv;
  if (rv == 1) {
    ded_disc_flood(node, bytes, len, from);
    if (from) ded_peer_maybe_connect(node, p, now_ns);
  }
  return 0;
}

void ded_disc_on_records(ded_node *node, ded_conn *c, const ded_frame *f, uint64_t now_ns) {
  ded_msg_records_rd it;
  int rv = ded_msg_records_begin_rd(&it, f->payload, f->len);
  const uint8_t *rec;
  size_t len;
  while (rv == 0 && (rv = ded_msg_records_next(&it, &rec, &len)) == 1) {
    rv = ded_disc_take_record(node, rec, len, c, now_ns, NULL);
    /* A stale record is not an attack (it may have crossed a refresh), a
     * full table is ours to bear, and a peer we do not admit may be
     * admitted where the neighbour's invitation clock or list differs:
     * none is the relaying neighbour's fault. */
    if (rv == DED_ERR_EXPIRED || rv == DED_ERR_LIMIT || rv == DED_ERR_NOT_ADMITTED) rv = 0;
  }
  if (rv < 0) ded_conn_protocol_error(node, c, rv, "RECORDS");
}

void ded_disc_progress(ded_node *node, uint64_t round, uint32_t ms, uint32_t contributors,
                       uint64_t attempt, uint8_t codec, uint32_t codec_ppm) {
  ded_disc *d = &node->disc;
  if (d->progress_set && round <= d->progress.round) return;
  d->progress = (ded_progress){round, ms, contributors, attempt, codec, codec_ppm};
  d->progress_set = d->progress_new = true;
}

void ded_disc_progress_loaded(ded_node *node, uint64_t round, uint32_t contributors,
                              uint64_t attempt) {
  ded_disc *d = &node->disc;
  d->progress = (ded_progress){round, 0, contributors, attempt, 0, 0};
  d->progress_set = d->progress_new = true;
  d->progress_said = false; /* told at once, not after the republish pause */
}

int ded_disc_groups_set(ded_node *node, const ded_group_addr *g, unsigned n, uint64_t now_ns) {
  if (node->leaving) return DED_ERR_CLOSING;
  ded_record probe; /* what ded_disc_build_record will add must fit */
  probe.ext_len = 0;
  int rv = ded_record_groups_add(&probe, g, n);
  if (rv) return rv;
  ded_disc *d = &node->disc;
  if (n) memcpy(d->groups, g, n * sizeof *g);
  d->ngroups = n;
  d->groups_set = true;
  rv = ded_disc_build_record(node, now_ns);
  if (rv) return rv;
  node_log(node, DED_LOG_INFO, "our record lists %u group peer%s", n, n == 1 ? "" : "s");
  ded_disc_flood(node, d->rec_bytes, d->rec_len, NULL);
  return 0;
}

size_t ded_disc_group_hints(const ded_node *node, uint16_t id, uint64_t now_ns, ded_addr *out,
                            size_t max, unsigned *waiting) {
  uint64_t now_ms = node_wall_ms(node, now_ns);
  size_t n = 0;
  *waiting = 0;
  for (size_t i = 0; i < ded_table_count(&node->disc.table); i++) {
    const ded_table_entry *e = ded_table_at(&node->disc.table, i);
    if (id_is_me(node, e->id) || ded_record_expiry_ms(&e->rec) + DED_CLOCK_SKEW_MS_MAX < now_ms)
      continue;
    const ded_peer *p = ded_peer_find(node, e->id);
    if (p && p->left) continue;
    ded_group_addr g[DED_RECORD_GROUPS_MAX];
    int ng = ded_record_groups(&e->rec, g);
    if (ng < 0) {
      if (!(e->rec.flags & DED_RECORD_F_NO_ROUNDS)) (*waiting)++;
      continue;
    }
    for (int k = 0; k < ng && n < max; k++) {
      if (g[k].id != id) continue;
      bool dup = false;
      for (size_t j = 0; j < n && !dup; j++) dup = ded_addr_equal(&out[j], &g[k].addr);
      if (!dup) out[n++] = g[k].addr;
    }
  }
  return n;
}

void ded_disc_tick(ded_node *node, uint64_t now_ns) {
  /* The record is refreshed before it expires, and sooner when our rates
   * moved (at most every NODE_PERF_REPUBLISH_NS: records are flooded). */
  ded_perf perf = node_perf_now(node);
  bool moved = now_ns >= node->disc.perf_ns + NODE_PERF_REPUBLISH_NS &&
               perf_changed(&node->disc.perf, &perf);
  bool progressed = node->disc.progress_new && (!node->disc.progress_said ||
                                                now_ns >= node->disc.perf_ns + NODE_PROGRESS_REPUBLISH_NS);
  if (!node->leaving && (moved || progressed || now_ns >= node->disc.rec_refresh_ns) &&
      ded_disc_build_record(node, now_ns) == 0) {
    if (moved)
      node_log(node, DED_LOG_INFO, "measured links: up %.1f Mbit/s%s, down %.1f Mbit/s%s",
               node->disc.perf.up_kBps * 8e-3,
               node->disc.perf.flags & DED_PERF_F_UP_EARLY ? " or more (early)" : "",
               node->disc.perf.down_kBps * 8e-3,
               node->disc.perf.flags & DED_PERF_F_DOWN_EARLY ? " or more (early)" : "");
    ded_disc_flood(node, node->disc.rec_bytes, node->disc.rec_len, NULL);
  }
  ded_table_expire(&node->disc.table, node_wall_ms(node, now_ns), node->ident.id);
}

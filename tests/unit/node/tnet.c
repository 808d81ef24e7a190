/*
 * tnet.c: the in-process network of the node's unit tests: real nodes,
 * their connections as links moved byte by byte (harness.h, "tnet").
 */
#include "harness.h"

#include <stdio.h>

/* ----------------------------------------- an in-process network (tnet) */

ded_addr tnet_addr(int i) {
  char text[32];
  snprintf(text, sizeof text, "10.1.0.%d:7000", i + 1);
  ded_addr a;
  assert_int_equal(ded_addr_parse(text, &a), 0);
  return a;
}

static int tnet_connect(void *user, uint32_t conn_id, const ded_addr *addr) {
  tnet_node *tn = user;
  tnet *net = tn->net;
  int target = -1;
  for (unsigned i = 0; i < net->nn; i++) {
    ded_addr a = tnet_addr((int)i);
    if (net->n[i].up && ded_addr_equal(&a, addr)) target = (int)i;
  }
  if (target < 0 || target == tn->idx) return -1;
  for (unsigned k = 0; k < TNET_LINKS; k++) {
    tlink *l = &net->l[k];
    if (l->used) continue;
    memset(l, 0, sizeof *l);
    l->used = true;
    l->node[0] = tn->idx;
    l->node[1] = target;
    l->conn[0] = conn_id;
    l->open[0] = true;
    ded_frame_dec_init(&l->dec[0], NULL);
    ded_frame_dec_init(&l->dec[1], NULL);
    return 0;
  }
  fail_msg("tnet: out of links");
  return -1;
}

static void tnet_close(void *user, uint32_t conn_id) {
  tnet_node *tn = user;
  for (unsigned k = 0; k < TNET_LINKS; k++) {
    tlink *l = &tn->net->l[k];
    for (int s = 0; s < 2; s++)
      if (l->used && l->open[s] && l->node[s] == tn->idx && l->conn[s] == conn_id) l->open[s] = false;
  }
}

static void tnet_want_write(void *user, uint32_t conn_id) {
  (void)user;
  (void)conn_id;
}

static void tnet_round_done(void *user, void *ctx, const ded_round_result *res) {
  tnet_node *tn = user;
  (void)ctx;
  tn->rounds_done++;
  tn->last = *res;
  tn->last.members = NULL;
}

static void tnet_event(void *user, const ded_event *ev) {
  tnet_node *tn = user;
  if (ev->type == DED_EVENT_BOOTSTRAP && ev->status == 0) tn->booted = true;
  if (ev->type == DED_EVENT_BOOTSTRAP && ev->status != 0) tn->boot_failed++;
}

/* TEST_NODE_VERBOSE=1 prints what the nodes log. */
static void tnet_log(void *user, int level, const char *line) {
  tnet_node *tn = user;
  if (getenv("TEST_NODE_VERBOSE"))
    fprintf(stderr, "  %6llu ms node %d [%d] %s\n",
            (unsigned long long)((tn->net->now - NOW_NS) / MS_NS), tn->idx, level, line);
}

static void tnet_want_snapshot(void *user) {
  tnet_node *tn = user;
  tn->want_snapshots++;
}

static void tnet_state_done(void *user, int status, ded_snapshot *snap) {
  tnet_node *tn = user;
  tn->state_calls++;
  tn->state_status = status;
  tn->state_has_snap = snap != NULL;
  tn->state_done_ns = tn->net->now;
  if (snap) {
    tn->snap = *snap;
    snap->bytes = NULL; /* ours now */
  }
}

static const ded_node_callbacks tnet_callbacks = {
    tnet_connect, tnet_close,    tnet_want_write,    tnet_round_done,
    tnet_event,   tnet_log,      tnet_want_snapshot, tnet_state_done};

tnet *tnet_new(void) {
  assert_int_equal(ded_crypto_init(), 0);
  tnet *net = calloc(1, sizeof *net);
  assert_non_null(net);
  unit_failmem_init(&net->fm, -1);
  net->now = NOW_NS;
  return net;
}

int tnet_add_as(tnet *net, uint32_t min_peers, bool no_rounds) {
  assert_true(net->nn < TNET_NODES);
  int i = (int)net->nn++;
  tnet_node *tn = &net->n[i];
  memset(tn, 0, sizeof *tn);
  tn->net = net;
  tn->idx = i;
  memset(tn->seed, 0x50 + i, sizeof tn->seed);
  ded_node_settings s;
  memset(&s, 0, sizeof s);
  s.run = RUN;
  s.mode = DED_MODE_NODE;
  s.min_peers = min_peers;
  s.no_rounds = no_rounds;
  s.identity_seed = tn->seed;
  s.announce[0] = tnet_addr(i);
  s.n_announce = 1;
  if (i > 0 && !net->alone) {
    s.bootstrap[0] = tnet_addr(0);
    s.n_bootstrap = 1;
  }
  s.bootstrap_timeout_ns = 10 * SEC_NS;
  s.rendezvous_timeout_ns = 10 * SEC_NS;
  s.round_timeout_ns = net->bound_ns ? net->bound_ns : 10 * SEC_NS;
  s.chunk_bytes = 64;
  s.mem = &net->fm.mem;
  s.log_level = getenv("TEST_NODE_VERBOSE") ? DED_LOG_DEBUG : DED_LOG_ERROR;
  assert_int_equal(ded_node_new(&s, &tnet_callbacks, tn, net->now, &tn->node), 0);
  tn->up = true;
  assert_int_equal(ded_node_start(tn->node, net->now), 0);
  return i;
}

int tnet_add(tnet *net, uint32_t min_peers) { return tnet_add_as(net, min_peers, false); }

static void tnet_link_release(tlink *l) {
  ded_frame_dec_free(&l->dec[0]);
  ded_frame_dec_free(&l->dec[1]);
  l->used = false;
}

/* Side |s| of |l| sends everything it has to the other side; true if
 * anything moved. */
static bool tnet_move(tnet *net, tlink *l, int s) {
  tnet_node *from = &net->n[l->node[s]], *to = &net->n[l->node[1 - s]];
  bool moved = false;
  while (l->open[s] && l->open[1 - s] && from->up && !from->hold && !from->frozen && !to->frozen &&
         !(net->cut && from->side != to->side)) {
    ded_iov iov[16];
    int n = ded_node_conn_pending(from->node, l->conn[s], iov, 16);
    if (n <= 0) break;
    size_t total = 0;
    for (int k = 0; k < n; k++) total += iov[k].len;
    uint8_t *bytes = malloc(total);
    assert_non_null(bytes);
    size_t o = 0;
    for (int k = 0; k < n; k++) {
      memcpy(bytes + o, iov[k].base, iov[k].len);
      o += iov[k].len;
    }
    ded_node_conn_consume(from->node, l->conn[s], total, net->now);
    const uint8_t *p = bytes;
    size_t left = total;
    ded_frame fr;
    int rv;
    while ((rv = ded_frame_dec_next(&l->dec[s], &p, &left, &fr)) == 1) net->sent[from->idx][fr.type]++;
    assert_true(rv >= 0);
    if (l->open[1 - s] && to->up) ded_node_conn_recv(to->node, l->conn[1 - s], bytes, total, net->now);
    free(bytes);
    moved = true;
  }
  return moved;
}

void tnet_pump(tnet *net) {
  bool progress = true;
  for (int guard = 0; progress; guard++) {
    assert_true(guard < 100000);
    progress = false;
    for (unsigned k = 0; k < TNET_LINKS; k++) {
      tlink *l = &net->l[k];
      if (!l->used) continue;
      tnet_node *caller = &net->n[l->node[0]], *target = &net->n[l->node[1]];
      if (!l->accepted) {
        if (net->cut && caller->side != target->side) continue; /* no answer while cut */
        if (caller->frozen || target->frozen) continue;
        l->accepted = true;
        progress = true;
        if (!l->open[0]) {
          tnet_link_release(l);
          continue;
        }
        ded_addr from = tnet_addr(l->node[0]);
        from.port = (uint16_t)(40000 + k);
        uint32_t id;
        if (!target->up || ded_node_conn_accepted(target->node, &from, &id, net->now) != 0) {
          l->open[0] = false;
          ded_node_conn_closed(caller->node, l->conn[0], DED_ERR_PEER_LOST, net->now);
          tnet_link_release(l);
          continue;
        }
        l->conn[1] = id;
        l->open[1] = true;
        ded_node_conn_connected(caller->node, l->conn[0], net->now);
      }
      for (int s = 0; s < 2; s++) progress |= tnet_move(net, l, s);
      /* A side that closed: the other learns it. */
      for (int s = 0; s < 2; s++)
        if (l->open[s] && !l->open[1 - s] && !net->n[l->node[s]].frozen) {
          l->open[s] = false;
          tnet_node *tn = &net->n[l->node[s]];
          if (tn->up) ded_node_conn_closed(tn->node, l->conn[s], DED_ERR_PEER_LOST, net->now);
          progress = true;
        }
      if (!l->open[0] && !l->open[1]) tnet_link_release(l);
    }
  }
}

void tnet_step(tnet *net) {
  net->now += TICK_NS;
  for (unsigned i = 0; i < net->nn; i++)
    if (net->n[i].up && !net->n[i].frozen && net->now >= ded_node_expiry(net->n[i].node))
      ded_node_handle_expiry(net->n[i].node, net->now);
  tnet_pump(net);
}

void tnet_kill(tnet *net, int i) {
  ded_node_free(net->n[i].node);
  net->n[i].node = NULL;
  net->n[i].up = false;
  for (unsigned k = 0; k < TNET_LINKS; k++)
    for (int s = 0; s < 2; s++)
      if (net->l[k].used && net->l[k].node[s] == i) net->l[k].open[s] = false;
  tnet_pump(net);
}

void tnet_freeze(tnet *net, int i, bool on) {
  net->n[i].frozen = on;
  tnet_pump(net);
}

int tnet_id_rank(const tnet *net, unsigned rank) {
  for (unsigned i = 0; i < net->nn; i++) {
    unsigned below = 0;
    for (unsigned k = 0; k < net->nn; k++)
      below += memcmp(ded_node_id(net->n[k].node), ded_node_id(net->n[i].node), DED_ID_BYTES) < 0;
    if (below == rank) return (int)i;
  }
  return -1;
}

bool tnet_meshed(const tnet *net) {
  unsigned up = 0;
  for (unsigned i = 0; i < net->nn; i++) up += net->n[i].up;
  for (unsigned i = 0; i < net->nn; i++) {
    const tnet_node *tn = &net->n[i];
    if (!tn->up) continue;
    if ((i > 0 && !tn->booted) || ded_node_peer_count(tn->node) != up - 1) return false;
  }
  return true;
}

void tnet_mesh(tnet *net) {
  TNET_UNTIL(net, 30 * SEC_NS, tnet_meshed(net));
  assert_true(tnet_meshed(net));
}

bool tnet_rounds_past(const tnet *net, unsigned mask, const int *before) {
  for (unsigned i = 0; i < net->nn; i++)
    if ((mask >> i & 1) && net->n[i].rounds_done <= before[i]) return false;
  return true;
}

void tnet_round(tnet *net, unsigned mask, int lead, uint64_t r) {
  int before[TNET_NODES] = {0};
  int first = -1, n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (unsigned i = 0; i < net->nn; i++) {
      if (!(mask >> i & 1) || (pass == 0) != ((int)i == lead)) continue;
      tnet_node *tn = &net->n[i];
      if (first < 0) first = (int)i;
      n++;
      before[i] = tn->rounds_done;
      for (int e = 0; e < COUNT; e++) tn->buf[e] = (float)(100 * i + e) + 0.25f * (float)r;
      ded_round_args a = {tn->buf, COUNT, DED_DTYPE_F32, 1.0, 1, NULL, 0};
      assert_int_equal(ded_node_round_submit(tn->node, &a, net->now), (int64_t)r);
      if (pass == 0) tnet_pump(net);
    }
  TNET_UNTIL(net, 30 * SEC_NS, tnet_rounds_past(net, mask, before));
  for (unsigned i = 0; i < net->nn; i++) {
    if (!(mask >> i & 1)) continue;
    tnet_node *tn = &net->n[i];
    assert_int_equal(tn->rounds_done, before[i] + 1);
    assert_int_equal(tn->last.status, 0);
    assert_int_equal(tn->last.round, r);
    assert_int_equal(tn->last.contributors, (uint32_t)n);
    assert_false(tn->last.alone);
    assert_false(tn->last.late);
    assert_memory_equal(tn->buf, net->n[first].buf, sizeof tn->buf);
  }
}

tnet *tnet_pair_past_round0(void) {
  tnet *net = tnet_new();
  tnet_add(net, 2);
  tnet_add(net, 2);
  tnet_mesh(net);
  tnet_round(net, 0x3, -1, 0);
  return net;
}

ded_snapshot tnet_snap_make(const ded_mem *mem, uint64_t round) {
  ded_snapshot s;
  memset(&s, 0, sizeof s);
  s.round = round;
  s.step_rounds = 1;
  s.len = SNAP_LEN;
  s.bytes = ded_mem_malloc(mem, SNAP_LEN);
  assert_non_null(s.bytes);
  for (uint64_t i = 0; i < SNAP_LEN; i++) s.bytes[i] = snap_byte(i);
  s.digest = ded_digest64(s.bytes, SNAP_LEN);
  return s;
}

void tnet_expect_snapshot(const tnet_node *j, uint64_t round) {
  assert_int_equal(j->state_calls, 1);
  assert_int_equal(j->state_status, 0);
  assert_true(j->state_has_snap);
  const ded_snapshot *s = &j->snap;
  assert_int_equal(s->round, round);
  assert_int_equal(s->step_rounds, 1);
  assert_int_equal(s->len, SNAP_LEN);
  assert_non_null(s->bytes);
  for (uint64_t i = 0; i < SNAP_LEN; i++)
    if (s->bytes[i] != snap_byte(i)) fail_msg("snapshot byte %llu differs", (unsigned long long)i);
  assert_int_equal(s->digest, ded_digest64(s->bytes, SNAP_LEN));
}

int tnet_run_then_fetch(tnet *net) {
  for (int i = 0; i < 3; i++) tnet_add(net, 3);
  tnet_mesh(net);
  for (uint64_t r = 0; r < 3; r++) tnet_round(net, 0x7, -1, r);
  int j = tnet_add(net, 3);
  tnet_mesh(net);
  assert_int_equal(ded_node_state_fetch(net->n[j].node, net->now), 0);
  return j;
}

void tnet_free(tnet *net) {
  for (unsigned i = 0; i < net->nn; i++) {
    tnet_node *tn = &net->n[i];
    if (tn->up) ded_node_free(tn->node);
    ded_mem_free(&net->fm.mem, tn->snap.bytes);
  }
  for (unsigned k = 0; k < TNET_LINKS; k++)
    if (net->l[k].used) tnet_link_release(&net->l[k]);
  assert_int_equal(net->fm.live, 0); /* nothing leaked */
  free(net);
}

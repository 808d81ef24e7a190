/*
 * test_compress.c: a node's compressed rounds against scripted peers
 * (harness.h): its contribution is encoded in slices between which the
 * node asks to be called at once (ded_node_expiry), nothing of it before
 * the first call, and the error-feedback residual a round leaves is what
 * the codec dropped of the job's own contribution, also when the round
 * completes with an attempt taken over from a DECIDE.
 */
#include "harness.h"

#include "avg/ded_codec.h"
#include "ded_node_int.h"

/* The node is the third of three members of lo1's attempt of round 0 in
 * view |view| with |codec| (a chunk each, ours two). */
static ded_msg_commit codec_commit(tnode *t, const ded_ident *lo1, const ded_ident *lo2,
                                  uint32_t view, const ded_codec *codec) {
  uint8_t ck;
  uint32_t ppm;
  ded_codec_to_wire(codec, &ck, &ppm);
  static ded_msg_member m[3];
  member_set(&m[0], lo1->id, 1.0, 1, 0);
  member_set(&m[1], lo2->id, 1.0, 1, CHUNK);
  member_set(&m[2], t->ident.id, 1.0, 1, 2 * CHUNK);
  ded_msg_commit c = commit_of(0, attempt_of(view, lo1->id), 0, m, 3);
  c.codec = ck;
  c.codec_ppm = ppm;
  return c;
}

/* Two peers below the node, lo1 called by it, lo2 calling it. */
static unsigned two_peers(tnode *t, ded_ident *lo1, ded_ident *lo2) {
  peers_below(t, lo1, lo2);
  send_hello(t, 0, lo1, RUN);
  unsigned c2 = tnode_accept(t);
  send_hello(t, c2, lo2, RUN);
  size_t len;
  free(tnode_output_on(t, 0, &len, NOW_NS));
  free(tnode_output_on(t, c2, &len, NOW_NS));
  return c2;
}

/* A COMMIT with a codec: nothing of our contribution is encoded or sent
 * while the COMMIT's handler runs (a coordinator's own COMMIT would wait
 * behind it); the node asks to be called at once, and the call encodes
 * and sends; once the encoding is done it asks no more. */
static void test_node_compress_encodes_in_slices(void **state) {
  (void)state;
  float buf[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)((i * 7) % 13) - 6.0f + 0.01f * (float)i;
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo1, lo2;
  unsigned c2 = two_peers(&t, &lo1, &lo2);
  ded_codec codec = {DED_CODEC_FP16, 0.0};
  ded_msg_commit c = codec_commit(&t, &lo1, &lo2, 0, &codec);
  send_commit(&t, 0, &c);
  size_t len;
  uint8_t *out = tnode_output_on(&t, c2, &len, NOW_NS);
  assert_int_equal(frame_count(out, len, DED_MSG_DATA), 0);
  free(out);
  assert_true(ded_node_expiry(t.node) <= NOW_NS);
  ded_node_handle_expiry(t.node, NOW_NS);
  assert_true(ded_node_expiry(t.node) > NOW_NS);
  out = tnode_output_on(&t, c2, &len, NOW_NS);
  assert_true(frame_count(out, len, DED_MSG_DATA) > 0);
  free(out);
  ded_node_free(t.node);
}

/* The residual after an attempt taken over from a DECIDE (the round's
 * result fetched, our contribution sent in an earlier hold of it): it is
 * x - Q(x) of our own contribution x, never of the result that replaced
 * it in our buffer (the report computed it after writing the result:
 * g - Q(g), 64 elements of 64 wrong). */
static void test_node_compress_residual_after_decide(void **state) {
  (void)state;
  tn_next_step = COUNT;
  float buf[COUNT], orig[COUNT], *bufs[1] = {buf};
  for (int i = 0; i < COUNT; i++) buf[i] = (float)((i * 7) % 13) - 6.0f + 0.01f * (float)i;
  memcpy(orig, buf, sizeof orig);
  tnode t;
  tnode_start(&t, bufs, 1, 1.0, 1);
  ded_ident lo1, lo2;
  unsigned c2 = two_peers(&t, &lo1, &lo2);
  ded_codec codec = {DED_CODEC_TOPK, 0.0625};
  ded_msg_commit c = codec_commit(&t, &lo1, &lo2, 0, &codec);
  const uint64_t A = c.attempt;
  send_commit(&t, 0, &c);
  ded_node_handle_expiry(t.node, NOW_NS);
  size_t len;
  free(tnode_output_on(&t, c2, &len, NOW_NS));
  free(tnode_output_on(&t, 0, &len, NOW_NS));
  /* lo1 lost: view 1 (lo2's) commits B of lo2 and the node */
  ded_node_conn_closed(t.node, t.conn[0], DED_ERR_PEER_LOST, NOW_NS);
  free(tnode_output_on(&t, c2, &len, NOW_NS));
  uint8_t ck;
  uint32_t ppm;
  ded_codec_to_wire(&codec, &ck, &ppm);
  ded_msg_member mb[2];
  member_set(&mb[0], lo2.id, 1.0, 1, 0);
  member_set(&mb[1], t.ident.id, 1.0, 1, 2 * CHUNK);
  ded_msg_commit cb = commit_of(0, attempt_of(1, lo2.id), 0, mb, 2);
  cb.codec = ck;
  cb.codec_ppm = ppm;
  send_commit(&t, c2, &cb);
  ded_node_handle_expiry(t.node, NOW_NS);
  free(tnode_output_on(&t, c2, &len, NOW_NS));
  /* view 2, lo2's: A stands (a DECIDE); its result is fetched */
  send_probe(&t, c2, 0, 2);
  free(tnode_output_on(&t, c2, &len, NOW_NS));
  float g[COUNT];
  for (int i = 0; i < COUNT; i++) g[i] = 50.0f + (float)i;
  uint8_t d[DED_RESULT_DIGEST_BYTES];
  result_digest(g, d);
  const uint16_t holders[3] = {1, 1, 1};
  send_decide(&t, c2, 2, 0, &c, holders);
  send_have(&t, c2, 0, A, 2, 0, d);
  free(tnode_output_on(&t, c2, &len, NOW_NS));
  send_chunks(&t, c2, DED_MSG_RESULT, 0, A, 0, g, COUNT);
  assert_int_equal(t.rounds_done, 1);
  assert_int_equal(t.last.status, 0);
  const ded_feedback *fb = &t.node->fb;
  assert_non_null(fb->e);
  assert_int_equal(fb->len, COUNT);
  for (int lo = 0; lo < COUNT; lo += CHUNK) {
    uint8_t enc[1024];
    size_t got;
    float q[CHUNK];
    assert_int_equal(ded_codec_encode(&codec, orig, COUNT, (size_t)lo, CHUNK, enc, sizeof enc, &got,
                                      ded_mem_default()),
                     0);
    assert_int_equal(ded_codec_decode(&codec, enc, got, COUNT, (size_t)lo, CHUNK, q), 0);
    for (int i = 0; i < CHUNK; i++) assert_true(fb->e[lo + i] == orig[lo + i] - q[i]);
  }
  ded_node_free(t.node);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_compress_encodes_in_slices),
      cmocka_unit_test(test_node_compress_residual_after_decide),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

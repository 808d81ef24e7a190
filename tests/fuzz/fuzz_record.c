/*
 * fuzz_record.c: discovery records, the one thing a peer passes on for
 * others (flooding), so the decoder and the verifier see bytes from
 * anyone.
 *
 * Input: the record bytes. A record that decodes must re-encode to the
 * same bytes (one spelling per record, so one signature per record), and
 * verifying it must give one of the documented answers. Verification runs
 * twice: against the run and clock of the fuzz world (where corpus
 * records pass), and against the record's own run and issue time, so that
 * mutated records get past the cheap checks to the signature.
 */
#include <string.h>

#include "fuzz.h"

#include "core/ded_err.h"
#include "crypto/ded_ident.h"
#include "dht/ded_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int crypto_ready;
  if (!crypto_ready) {
    FUZZ_CHECK(ded_crypto_init() == 0);
    crypto_ready = 1;
  }
  ded_record rec;
  int rv = ded_record_decode(data, size, &rec);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_PROTO);
  if (rv) return 0;
  FUZZ_CHECK(rec.naddr <= DED_RECORD_ADDRS_MAX && rec.ext_len <= DED_RECORD_EXT_MAX);
  FUZZ_CHECK(rec.ttl_ms > 0 && rec.ttl_ms <= DED_RECORD_TTL_MS_MAX);
  for (unsigned i = 0; i < rec.naddr; i++)
    FUZZ_CHECK((rec.addr[i].family == 4 || rec.addr[i].family == 6) && rec.addr[i].port != 0);
  /* A decoded extension is well-formed: its rates entry, if any, reads
   * back whole, and setting the same rates gives an entry that reads the
   * same. */
  ded_perf perf, again;
  if (ded_record_perf(&rec, &perf)) {
    ded_record copy = rec;
    ded_record_perf_set(&copy, &perf);
    FUZZ_CHECK(ded_record_perf(&copy, &again) == 1 && memcmp(&perf, &again, sizeof perf) == 0);
  }
  /* So does its last completed round. */
  ded_progress prog, prog_again;
  if (ded_record_progress(&rec, &prog)) {
    ded_record copy = rec;
    ded_record_perf_set(&copy, &perf);
    ded_record_progress_add(&copy, &prog);
    FUZZ_CHECK(ded_record_progress(&copy, &prog_again) == 1 &&
               memcmp(&prog, &prog_again, sizeof prog) == 0);
  }

  /* And its group peers: as many as the bound allows, ids increasing,
   * addresses valid, and listed again they read the same. */
  ded_group_addr groups[DED_RECORD_GROUPS_MAX], groups_again[DED_RECORD_GROUPS_MAX];
  int ng = ded_record_groups(&rec, groups);
  FUZZ_CHECK(ng >= -1 && ng <= DED_RECORD_GROUPS_MAX);
  for (int i = 0; i < ng; i++)
    FUZZ_CHECK((groups[i].addr.family == 4 || groups[i].addr.family == 6) &&
               groups[i].addr.port != 0 && (i == 0 || groups[i].id > groups[i - 1].id));
  if (ng >= 0) {
    ded_record copy = rec;
    ded_record_perf_set(&copy, &perf);
    FUZZ_CHECK(ded_record_groups_add(&copy, groups, (unsigned)ng) == 0);
    FUZZ_CHECK(ded_record_groups(&copy, groups_again) == ng);
    for (int i = 0; i < ng; i++)
      FUZZ_CHECK(groups[i].id == groups_again[i].id &&
                 ded_addr_equal(&groups[i].addr, &groups_again[i].addr));
  }

  uint8_t buf[DED_RECORD_BYTES_MAX];
  int n = ded_record_encode(&rec, buf, sizeof buf);
  FUZZ_CHECK(n >= 0 && (size_t)n == size && memcmp(buf, data, size) == 0);

  uint8_t run_id[DED_RUN_ID_BYTES];
  ded_hash32(FUZZ_RUN, FUZZ_RUN_LEN, run_id);
  rv = ded_record_verify(&rec, run_id, FUZZ_NOW_MS);
  FUZZ_CHECK(rv == 0 || rv == DED_ERR_SIGNATURE || rv == DED_ERR_WRONG_RUN ||
             rv == DED_ERR_EXPIRED);
  int own = ded_record_verify(&rec, rec.run_id, rec.issued_ms);
  FUZZ_CHECK(own == 0 || own == DED_ERR_SIGNATURE || own == DED_ERR_EXPIRED);
  /* Whatever passes in the fuzz world passes on its own terms too. */
  if (rv == 0) FUZZ_CHECK(own == 0);
  return 0;
}

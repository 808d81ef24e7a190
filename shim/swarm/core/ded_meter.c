#include "ded_meter.h"

static void meter_sample(ded_meter *m) {
  uint64_t dt = m->last_ns - m->start_ns;
  if (m->bytes < DED_METER_MIN_BYTES || dt < DED_METER_MIN_NS) return;
  m->sample[m->next] = (double)m->bytes * 1e9 / (double)dt;
  m->next = (m->next + 1) % DED_METER_SAMPLES;
  if (m->nsample < DED_METER_SAMPLES) m->nsample++;
}

void ded_meter_begin(ded_meter *m) {
  if (m->open) return;
  m->open = true;
  m->moved = m->primed = false;
  m->bytes = 0;
}

void ded_meter_add(ded_meter *m, uint64_t bytes, uint64_t now_ns) {
  if (!m->open) return;
  if (!m->moved) {
    m->moved = true;
    m->first_ns = m->last_ns = now_ns;
  }
  if (!m->primed) {
    if (now_ns > m->last_ns) m->last_ns = now_ns; /* a download's gaps count from here */
    if (now_ns - m->first_ns < DED_METER_SETTLE_NS) return;
    m->primed = true;
    m->start_ns = m->last_ns = now_ns;
    return;
  }
  m->bytes += bytes;
  if (now_ns > m->last_ns) m->last_ns = now_ns;
  if (m->last_ns - m->start_ns >= DED_METER_PERIOD_NS && m->bytes >= DED_METER_MIN_BYTES) {
    meter_sample(m);
    m->start_ns = m->last_ns;
    m->bytes = 0;
  }
}

void ded_meter_end(ded_meter *m) {
  if (!m->open) return;
  if (m->primed) meter_sample(m);
  m->open = false;
}

void ded_meter_arrive(ded_meter *m, uint64_t bytes, uint64_t now_ns) {
  if (m->open && now_ns > m->last_ns + DED_METER_GAP_NS) ded_meter_end(m);
  ded_meter_begin(m);
  ded_meter_add(m, bytes, now_ns);
}

bool ded_meter_early(const ded_meter *m) { return m->nsample < DED_METER_SETTLED; }

double ded_meter_rate(const ded_meter *m) {
  double best = 0.0;
  for (unsigned i = 0; i < m->nsample; i++)
    if (m->sample[i] > best) best = m->sample[i];
  return best;
}

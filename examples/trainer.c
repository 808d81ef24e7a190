/*
 * trainer.c: an ordinary data-parallel MPI trainer, the kind of program
 * dedmpi is preloaded into. Nothing here knows about dedmpi; it is plain
 * MPI, so the same binary runs alone, under mpirun, or with the shim.
 *
 * Model: a 2-layer MLP (dim -> hidden, tanh -> classes, softmax
 * cross-entropy) in float32, all parameters in one flat vector:
 *
 *   [ W1 (dim x hidden) | b1 (hidden) | W2 (hidden x classes) | b2 | pad ]
 *
 * Weights are stored input-major so that both the forward pass and the
 * weight gradient are axpy loops over contiguous rows, which the compiler
 * vectorises without reordering any one element's sum. The activation is
 * tanh, not ReLU, on purpose: ReLU's gradient jumps when a pre-activation
 * crosses zero, so two runs that differ only in the rounding of a sum (one
 * 4-rank job vs jobs of 2+1+1 ranks in a swarm, or C vs numpy) drift apart
 * by lr-sized steps after a few dozen steps; with a smooth activation they
 * stay within float tolerance.
 *
 * Each step, every rank computes the mean gradient over its own minibatch,
 * all-reduces it in --buckets equal pieces (one MPI_Allreduce, or with
 * --nonblocking one MPI_Iallreduce each and an MPI_Waitall), divides by
 * the world size and takes an SGD step. With --fuse S it all-reduces as
 * Horovod's tensor fusion does instead (grad_allreduce_fused: the
 * tensors in backward order, runs of them packed into one fusion buffer,
 * cut at random every step), so that jobs with different S cut the same
 * gradient stream differently. The flat vector is zero-padded to
 * a multiple of the bucket count so that every bucket has the same size:
 * a peer that pairs its bucket i with someone's bucket j is then caught by
 * the values, not hidden by a size check.
 *
 * Data: rank r trains on shard K+r (--shard-base K) of S (--shards). A
 * shard is an endless stream of samples, each a pure function of (seed,
 * shard, sample index), and step t uses samples (t-1)*batch .. t*batch-1.
 * So one 4-rank job and jobs of 2+1+1 ranks with shard bases 0, 2, 3 see
 * exactly the same samples, and every shard contributes the same number.
 * Inputs are multiples of 2^-23 in [-1, 1); labels are the argmax of a
 * teacher with weights in {-1, 0, 1}, computed in integers, so labels and
 * initial parameters are bit-identical in examples/trainer.py.
 *
 * Output (rank 0): a config line, the initial checksum, one line per
 * --log-every steps, an elapsed line (per-step wall and gradient-exchange
 * milliseconds; --quiet drops these four kinds), then always
 * `final loss <l> checksum <hex>`. With --log-comm each step line ends in
 * `comm_ms <ms> call_ms <ms>`: that step's gradient exchange and its
 * longest single call (an MPI_Allreduce, or the MPI_Waitall of the
 * nonblocking buckets), wall time; the churn soak (tests/mp/soak.py)
 * checks the round bound against call_ms.
 * The step loss is this job's mean minibatch loss before the update,
 * reduced with a one-value MPI_Allreduce (a metric: dedmpi leaves it
 * with the job).
 * The final loss is rank 0's loss of the final parameters on a held-out
 * set that depends only on the seed, so every job of a split run prints a
 * comparable number. The checksum is the CRC-32 (zlib's) of the parameter
 * bytes; the Python trainer gets the same function at C speed from zlib.
 *
 * Joining a run in progress: under dedmpi the start-up broadcast of the
 * parameters is answered with the run's current ones, and the step counter
 * is registered as state through dedmpi.h (looked up at run time, so that
 * the binary needs no dedmpi to build or run), so a job started late goes
 * on from the run's step. That lookup, and one of dedmpi_last_codec to say
 * how the last step's gradients travelled, are the trainer's only dedmpi
 * code.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EVAL_SAMPLES = 512 };

/* Streams of the counter-based generator: every random number is
 * mix(key(seed, stream) + (index + 1) * GOLDEN), so any sample can be
 * produced on its own, by any rank, in C or in numpy. */
#define GOLDEN UINT64_C(0x9e3779b97f4a7c15)
#define STREAM_W1 UINT64_C(1)
#define STREAM_W2 UINT64_C(2)
#define STREAM_TEACHER UINT64_C(3)
#define STREAM_EVAL UINT64_C(4)
#define STREAM_FUSE UINT64_C(5)
#define STREAM_SHARD(k) ((UINT64_C(1) << 32) | (uint64_t)(k))

typedef struct {
  int steps, buckets, dim, hidden, classes, batch, log_every;
  int shard_base, shards; /* shards <= 0: the world size */
  int step_ms;            /* extra compute time per step (tests) */
  int linger_ms;          /* wait before MPI_Finalize (tests: serve late peers) */
  uint64_t seed;
  uint64_t init_seed; /* --init-seed: seeds params_init only; default --seed */
  bool init_seed_set;
  uint64_t fuse; /* --fuse: the seed of the fusion's cuts; 0 = buckets */
  float lr;
  bool nonblocking, quiet;
  bool log_comm; /* --log-comm: each step line says its exchange's time */
  const char *out;
} trainer_opts;

/* Offsets of each tensor in the flat parameter (and gradient) vector. */
typedef struct {
  int dim, hidden, classes;
  size_t w1, b1, w2, b2;
  size_t n_params; /* real parameters: what --out writes and the checksum covers */
  size_t n_flat;   /* padded to a multiple of the bucket count */
  size_t bucket;   /* floats per bucket */
} layout;

/* Per-chunk work space; n_max samples at a time. */
typedef struct {
  int n_max;
  float *x;  /* n_max x dim */
  int *y;    /* n_max */
  float *h;  /* n_max x hidden, after the tanh */
  float *z;  /* n_max x classes: logits, then probabilities, then dloss/dlogits */
  float *dh; /* n_max x hidden */
} scratch;

/* ---------------------------------------------------------------- random */

static uint64_t mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, uint64_t stream)
{
  return mix64(mix64(seed + GOLDEN) ^ stream);
}

static uint64_t stream_at(uint64_t key, uint64_t index)
{
  return mix64(key + (index + 1) * GOLDEN);
}

/* The top 24 bits as an integer in [-2^23, 2^23): times 2^-23 this is a
 * float in [-1, 1) with no rounding anywhere. */
static int32_t stream_int24(uint64_t key, uint64_t index)
{
  return (int32_t)(stream_at(key, index) >> 40) - (INT32_C(1) << 23);
}

/* ---------------------------------------------------------------- data */

static void teacher_init(int8_t *t, int dim, int classes, uint64_t seed)
{
  uint64_t key = stream_key(seed, STREAM_TEACHER);
  for (size_t i = 0; i < (size_t)dim * (size_t)classes; i++)
    t[i] = (int8_t)((stream_at(key, i) >> 32) % 3) - 1;
}

/* Samples first .. first+n-1 of |stream| into s->x and s->y. The teacher's
 * logits are exact integer sums, so the label never depends on summation
 * order and numpy gets the same labels. */
static void data_fill(scratch *s, const int8_t *teacher, int dim, int classes,
                      uint64_t seed, uint64_t stream, uint64_t first, int n)
{
  uint64_t key = stream_key(seed, stream);
  int32_t *k = malloc((size_t)dim * sizeof *k);
  if (!k)
    MPI_Abort(MPI_COMM_WORLD, 1);
  for (int b = 0; b < n; b++) {
    uint64_t base = (first + (uint64_t)b) * (uint64_t)dim;
    for (int f = 0; f < dim; f++) {
      k[f] = stream_int24(key, base + (uint64_t)f);
      s->x[(size_t)b * (size_t)dim + (size_t)f] = (float)k[f] * 0x1p-23f;
    }
    int best = 0;
    int64_t best_logit = INT64_MIN;
    for (int c = 0; c < classes; c++) {
      int64_t logit = 0;
      for (int f = 0; f < dim; f++)
        logit += (int64_t)teacher[(size_t)f * (size_t)classes + (size_t)c] * k[f];
      if (logit > best_logit) { /* ties go to the lowest class, as np.argmax */
        best_logit = logit;
        best = c;
      }
    }
    s->y[b] = best;
  }
  free(k);
}

/* ---------------------------------------------------------------- model */

static layout layout_make(int dim, int hidden, int classes, int buckets)
{
  layout l = {.dim = dim, .hidden = hidden, .classes = classes};
  l.w1 = 0;
  l.b1 = l.w1 + (size_t)dim * (size_t)hidden;
  l.w2 = l.b1 + (size_t)hidden;
  l.b2 = l.w2 + (size_t)hidden * (size_t)classes;
  l.n_params = l.b2 + (size_t)classes;
  l.bucket = (l.n_params + (size_t)buckets - 1) / (size_t)buckets;
  l.n_flat = l.bucket * (size_t)buckets;
  return l;
}

/* Uniform in +-1/sqrt(fan_in) (PyTorch's Linear default), biases zero. The
 * bound is rounded once from double, and u * bound is one float rounding,
 * so numpy produces the same bits. */
static void params_init(const layout *l, float *p, uint64_t seed)
{
  uint64_t k1 = stream_key(seed, STREAM_W1), k2 = stream_key(seed, STREAM_W2);
  float bound1 = (float)(1.0 / sqrt((double)l->dim));
  float bound2 = (float)(1.0 / sqrt((double)l->hidden));
  memset(p, 0, l->n_flat * sizeof *p);
  for (size_t i = 0; i < l->b1 - l->w1; i++)
    p[l->w1 + i] = ((float)stream_int24(k1, i) * 0x1p-23f) * bound1;
  for (size_t i = 0; i < l->b2 - l->w2; i++)
    p[l->w2 + i] = ((float)stream_int24(k2, i) * 0x1p-23f) * bound2;
}

/* Forward pass over n samples in |s|; leaves the softmax probabilities in
 * s->z and returns the summed cross-entropy. */
static double model_forward(const layout *l, const float *p, scratch *s, int n)
{
  size_t dim = (size_t)l->dim, hid = (size_t)l->hidden, cls = (size_t)l->classes;
  double loss = 0.0;
  for (int b = 0; b < n; b++) {
    const float *x = s->x + (size_t)b * dim;
    float *h = s->h + (size_t)b * hid, *z = s->z + (size_t)b * cls;
    memcpy(h, p + l->b1, hid * sizeof *h);
    for (size_t i = 0; i < dim; i++) {
      const float *w = p + l->w1 + i * hid;
      for (size_t j = 0; j < hid; j++)
        h[j] += x[i] * w[j];
    }
    for (size_t j = 0; j < hid; j++)
      h[j] = tanhf(h[j]);
    memcpy(z, p + l->b2, cls * sizeof *z);
    for (size_t j = 0; j < hid; j++) {
      const float *w = p + l->w2 + j * cls;
      for (size_t c = 0; c < cls; c++)
        z[c] += h[j] * w[c];
    }
    /* Stable softmax: shift by the max logit before exponentiating. */
    float m = z[0], sum = 0.0f;
    for (size_t c = 1; c < cls; c++)
      m = z[c] > m ? z[c] : m;
    float zy = z[s->y[b]] - m;
    for (size_t c = 0; c < cls; c++) {
      z[c] = expf(z[c] - m);
      sum += z[c];
    }
    for (size_t c = 0; c < cls; c++)
      z[c] /= sum;
    loss += (double)logf(sum) - (double)zy;
  }
  return loss;
}

/* Gradient of the *mean* loss over the n samples of the last forward pass
 * into g (all n_flat entries, padding included, are written). Using the
 * mean keeps a shard's contribution independent of how shards are grouped
 * into jobs. */
static void model_backward(const layout *l, const float *p, scratch *s, int n, float *g)
{
  size_t dim = (size_t)l->dim, hid = (size_t)l->hidden, cls = (size_t)l->classes;
  memset(g, 0, l->n_flat * sizeof *g);
  for (int b = 0; b < n; b++) {
    const float *x = s->x + (size_t)b * dim, *h = s->h + (size_t)b * hid;
    float *z = s->z + (size_t)b * cls, *dh = s->dh + (size_t)b * hid;
    z[s->y[b]] -= 1.0f;
    for (size_t c = 0; c < cls; c++) {
      z[c] /= (float)n;
      g[l->b2 + c] += z[c];
    }
    for (size_t j = 0; j < hid; j++) {
      const float *w = p + l->w2 + j * cls;
      float *gw = g + l->w2 + j * cls, acc = 0.0f;
      for (size_t c = 0; c < cls; c++) {
        gw[c] += h[j] * z[c];
        acc += z[c] * w[c];
      }
      dh[j] = acc * (1.0f - h[j] * h[j]);
      g[l->b1 + j] += dh[j];
    }
    for (size_t i = 0; i < dim; i++) {
      float *gw = g + l->w1 + i * hid;
      for (size_t j = 0; j < hid; j++)
        gw[j] += x[i] * dh[j];
    }
  }
}

/* ---------------------------------------------------------------- output */

static uint32_t crc32_bytes(const void *data, size_t len)
{
  static uint32_t table[256];
  if (!table[1]) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++)
        c = (c & 1) ? UINT32_C(0xedb88320) ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  const unsigned char *b = data;
  uint32_t c = UINT32_C(0xffffffff);
  for (size_t i = 0; i < len; i++)
    c = table[(c ^ b[i]) & 0xff] ^ (c >> 8);
  return c ^ UINT32_C(0xffffffff);
}

static uint32_t params_checksum(const layout *l, const float *p)
{
  return crc32_bytes(p, l->n_params * sizeof *p);
}

/* Loss of |p| on the held-out set: the same samples in every job. */
static double eval_loss(const layout *l, const float *p, const int8_t *teacher,
                        uint64_t seed, scratch *s)
{
  double sum = 0.0;
  for (int first = 0; first < EVAL_SAMPLES; first += s->n_max) {
    int n = EVAL_SAMPLES - first < s->n_max ? EVAL_SAMPLES - first : s->n_max;
    data_fill(s, teacher, l->dim, l->classes, seed, STREAM_EVAL, (uint64_t)first, n);
    sum += model_forward(l, p, s, n);
  }
  return sum / EVAL_SAMPLES;
}

static int params_write(const layout *l, const float *p, const char *path)
{
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "trainer: %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t n = fwrite(p, sizeof *p, l->n_params, f);
  if (fclose(f) != 0 || n != l->n_params) {
    fprintf(stderr, "trainer: %s: write failed\n", path);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- flags */

static void usage(FILE *f)
{
  fputs("usage: trainer [--steps N] [--buckets B] [--dim D] [--hidden H]\n"
        "         [--classes C] [--batch N] [--lr X] [--seed S]\n"
        "         [--shard-base K] [--shards S] [--log-every K]\n"
        "         [--nonblocking] [--out FILE] [--quiet] [--step-ms MS]\n"
        "         [--linger-ms MS] [--fuse S] [--init-seed S] [--log-comm]\n"
        "Rank r trains on data shard K+r of S (default K=0, S=world size).\n"
        "Defaults: 100 steps, 4 buckets, dim 256, hidden 256, 10 classes,\n"
        "batch 32 per rank, lr 0.5, seed 1, a line every step.\n"
        "--fuse S (S > 0) all-reduces as tensor fusion does: the tensors in\n"
        "backward order, packed into one buffer, cut at random (seeded by S).\n"
        "--init-seed S seeds the initial parameters only (default: --seed), so\n"
        "jobs with other S start from other weights, as unseeded trainers do,\n"
        "while they train on the same data.\n"
        "--log-comm ends each step line in the step's exchange time (comm_ms)\n"
        "and its longest single call (call_ms).\n",
        f);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
  long v;
  if (!parse_long(s, lo, hi, &v))
    return false;
  *out = (int)v;
  return true;
}

/* Decimal, or hex with 0x (no octal: "010" is ten, as in trainer.py). */
static bool parse_u64(const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
  if (errno || end == s || *end || *s == '-')
    return false;
  *out = (uint64_t)v;
  return true;
}

static bool parse_float(const char *s, float *out)
{
  char *end;
  errno = 0;
  float v = strtof(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v <= 0.0f)
    return false;
  *out = v;
  return true;
}

/* One flag that takes a value. Returns false on a bad value. */
static bool opts_set(trainer_opts *o, const char *name, const char *v)
{
  if (!strcmp(name, "steps"))
    return parse_int(v, 0, 100000000, &o->steps);
  if (!strcmp(name, "buckets"))
    return parse_int(v, 1, 4096, &o->buckets);
  if (!strcmp(name, "dim"))
    return parse_int(v, 1, 65536, &o->dim);
  if (!strcmp(name, "hidden"))
    return parse_int(v, 1, 65536, &o->hidden);
  if (!strcmp(name, "classes"))
    return parse_int(v, 2, 4096, &o->classes);
  if (!strcmp(name, "batch"))
    return parse_int(v, 1, 65536, &o->batch);
  if (!strcmp(name, "log-every"))
    return parse_int(v, 1, 100000000, &o->log_every);
  if (!strcmp(name, "shard-base"))
    return parse_int(v, 0, 1 << 30, &o->shard_base);
  if (!strcmp(name, "shards"))
    return parse_int(v, 1, 1 << 30, &o->shards);
  if (!strcmp(name, "step-ms"))
    return parse_int(v, 0, 100000, &o->step_ms);
  if (!strcmp(name, "linger-ms"))
    return parse_int(v, 0, 600000, &o->linger_ms);
  if (!strcmp(name, "seed"))
    return parse_u64(v, &o->seed);
  if (!strcmp(name, "init-seed")) {
    o->init_seed_set = true;
    return parse_u64(v, &o->init_seed);
  }
  if (!strcmp(name, "fuse"))
    return parse_u64(v, &o->fuse) && o->fuse > 0;
  if (!strcmp(name, "lr"))
    return parse_float(v, &o->lr);
  if (!strcmp(name, "out")) {
    o->out = v;
    return *v != '\0';
  }
  return false;
}

/* Returns 0 to run, 1 for --help, -1 on a bad command line (reported by
 * rank 0 only, since every rank parses the same arguments). */
static int opts_parse(trainer_opts *o, int argc, char **argv, bool loud)
{
  *o = (trainer_opts){.steps = 100, .buckets = 4, .dim = 256, .hidden = 256,
                      .classes = 10, .batch = 32, .log_every = 1, .seed = 1,
                      .lr = 0.5f};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return 1;
    if (!strcmp(a, "--nonblocking")) {
      o->nonblocking = true;
      continue;
    }
    if (!strcmp(a, "--quiet")) {
      o->quiet = true;
      continue;
    }
    if (!strcmp(a, "--log-comm")) {
      o->log_comm = true;
      continue;
    }
    /* --name value or --name=value */
    char name[32];
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    bool ok = !strncmp(a, "--", 2) && len - 2 < sizeof name;
    if (ok) {
      memcpy(name, a + 2, len - 2);
      name[len - 2] = '\0';
      const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      ok = v && opts_set(o, name, v);
    }
    if (!ok) {
      if (loud) {
        fprintf(stderr, "trainer: bad or incomplete argument '%s'\n", a);
        usage(stderr);
      }
      return -1;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- training */

typedef struct {
  trainer_opts o;
  layout l;
  int rank, size, shards;
  float *p, *g;
  float *fusion; /* --fuse: the fusion buffer, n_params floats */
  long long step; /* the next step (1-based): state, like p */
  double call_max; /* the step's longest exchange call, seconds (--log-comm) */
  int8_t *teacher;
  scratch s;
  MPI_Request *reqs;
} trainer;

/* The gradient exchange, one collective per bucket, issued in bucket
 * order on every rank. MPI's default error handler aborts the job on
 * failure, which is what a trainer wants, so return codes are not checked. */
static void grad_allreduce(trainer *t)
{
  int count = (int)t->l.bucket;
  for (int b = 0; b < t->o.buckets; b++) {
    float *buf = t->g + (size_t)b * t->l.bucket;
    double t0 = MPI_Wtime();
    if (t->o.nonblocking)
      MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                     &t->reqs[b]);
    else
      MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t->call_max = fmax(t->call_max, MPI_Wtime() - t0);
  }
  if (t->o.nonblocking) {
    double t0 = MPI_Wtime();
    MPI_Waitall(t->o.buckets, t->reqs, MPI_STATUSES_IGNORE);
    t->call_max = fmax(t->call_max, MPI_Wtime() - t0);
  }
}

/*
 * --fuse: the exchange as Horovod's tensor fusion makes it. The tensors
 * become ready in backward order (b2, W2, b1, W1); whatever is ready in
 * one cycle goes into one fusion buffer and is all-reduced from there
 * with a blocking MPI_Allreduce, as Horovod's background thread does.
 * Here a draw of (S, step) says after which tensors a cycle ended, so the
 * cuts change every step, and a job with another S cuts elsewhere, while
 * every job's stream of elements (the tensors in that order) is the same.
 * Every rank of a job draws the same cuts. The padding is not reduced.
 */
static void grad_allreduce_fused(trainer *t, int step)
{
  const layout *l = &t->l;
  const size_t off[4] = {l->b2, l->w2, l->b1, l->w1};
  const size_t len[4] = {(size_t)l->classes, l->b2 - l->w2, l->w2 - l->b1, l->b1 - l->w1};
  uint64_t key = stream_key(t->o.fuse, STREAM_FUSE);
  size_t used = 0, first = 0;
  for (int i = 0; i < 4; i++) {
    memcpy(t->fusion + used, t->g + off[i], len[i] * sizeof(float));
    used += len[i];
    bool cut = i == 3 || (stream_at(key, (uint64_t)step * 4 + (uint64_t)i) & 1);
    if (!cut)
      continue;
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, t->fusion, (int)used, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t->call_max = fmax(t->call_max, MPI_Wtime() - t0);
    for (size_t k = first, at = 0; k <= (size_t)i; at += len[k], k++)
      memcpy(t->g + off[k], t->fusion + at, len[k] * sizeof(float));
    used = 0;
    first = (size_t)i + 1;
  }
}

/* One SGD step (1-based); returns this rank's mean minibatch loss before
 * the update and adds the time spent in the gradient exchange to *comm_s. */
static double train_step(trainer *t, int step, double *comm_s)
{
  const layout *l = &t->l;
  int n = t->o.batch;
  uint64_t shard = (uint64_t)t->o.shard_base + (uint64_t)t->rank;
  data_fill(&t->s, t->teacher, l->dim, l->classes, t->o.seed, STREAM_SHARD(shard),
            (uint64_t)(step - 1) * (uint64_t)n, n);
  double loss = model_forward(l, t->p, &t->s, n) / n;
  model_backward(l, t->p, &t->s, n, t->g);

  double t0 = MPI_Wtime();
  if (t->o.fuse)
    grad_allreduce_fused(t, step);
  else
    grad_allreduce(t);
  *comm_s += MPI_Wtime() - t0;

  /* The sum over the world, divided by the world size: the mean gradient. */
  float size = (float)t->size;
  for (size_t i = 0; i < l->n_flat; i++) {
    float gi = t->g[i] / size;
    t->p[i] -= t->o.lr * gi;
  }
  return loss;
}

static bool step_logged(const trainer_opts *o, int step)
{
  return !o->quiet && (step == 1 || step % o->log_every == 0 || step == o->steps);
}

static void train(trainer *t)
{
  double comm_s = 0.0, t0 = MPI_Wtime();
  int first = (int)t->step;
  for (; t->step <= t->o.steps; t->step++) {
    int step = (int)t->step;
    if (t->o.step_ms > 0) { /* a slower model: compute time per step */
      struct timespec ts = {t->o.step_ms / 1000, (long)(t->o.step_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    double comm0 = comm_s;
    t->call_max = 0.0;
    double loss = train_step(t, step, &comm_s);
    /* A job that fell behind reloads the run's state as a step's last
     * all-reduce returns, its step counter included: the parameters are
     * now those after the run's step t->step, not this loop's |step|. */
    step = (int)t->step;
    if (!step_logged(&t->o, step))
      continue;
    /* 8 bytes: a job-local mean, never big enough to leave the job. */
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (t->rank == 0) {
      printf("step %d loss %.6f checksum 0x%08" PRIx32, step, loss / t->size,
             params_checksum(&t->l, t->p));
      if (t->o.log_comm)
        printf(" comm_ms %.3f call_ms %.3f", 1e3 * (comm_s - comm0), 1e3 * t->call_max);
      putchar('\n');
      fflush(stdout);
    }
  }
  double elapsed = MPI_Wtime() - t0;
  int done = t->o.steps - first + 1;
  if (t->rank == 0 && !t->o.quiet && done > 0)
    printf("elapsed %.3f s step_ms %.3f comm_ms %.3f\n", elapsed,
           1e3 * elapsed / done, 1e3 * comm_s / done);
}

static void print_config(const trainer *t)
{
  const trainer_opts *o = &t->o;
  printf("config ranks %d shards %d..%d of %d params %zu buckets %d x %zu floats"
         " (%zu B) batch %d steps %d lr %g seed %" PRIu64 " mode %s\n",
         t->size, o->shard_base, o->shard_base + t->size - 1, t->shards,
         t->l.n_params, o->buckets, t->l.bucket, t->l.bucket * sizeof(float), o->batch,
         o->steps, (double)o->lr, o->seed,
         o->fuse ? "fused" : o->nonblocking ? "nonblocking" : "blocking");
}

static bool trainer_alloc(trainer *t)
{
  const layout *l = &t->l;
  size_t n = (size_t)t->o.batch;
  t->p = calloc(l->n_flat, sizeof *t->p);
  t->g = calloc(l->n_flat, sizeof *t->g);
  t->fusion = malloc(l->n_params * sizeof *t->fusion);
  t->teacher = malloc((size_t)l->dim * (size_t)l->classes);
  t->reqs = malloc((size_t)t->o.buckets * sizeof *t->reqs);
  t->s = (scratch){.n_max = t->o.batch};
  t->s.x = malloc(n * (size_t)l->dim * sizeof(float));
  t->s.y = malloc(n * sizeof(int));
  t->s.h = malloc(n * (size_t)l->hidden * sizeof(float));
  t->s.z = malloc(n * (size_t)l->classes * sizeof(float));
  t->s.dh = malloc(n * (size_t)l->hidden * sizeof(float));
  return t->p && t->g && t->fusion && t->teacher && t->reqs && t->s.x && t->s.y && t->s.h &&
         t->s.z && t->s.dh;
}

static void trainer_free(trainer *t)
{
  free(t->p);
  free(t->g);
  free(t->fusion);
  free(t->teacher);
  free(t->reqs);
  free(t->s.x);
  free(t->s.y);
  free(t->s.h);
  free(t->s.z);
  free(t->s.dh);
}

/* Returns the process exit code. Every rank takes the same early exits,
 * since they depend only on the arguments and the world size. */
static int trainer_run(const trainer_opts *o, int rank, int size)
{
  trainer t = {.o = *o, .rank = rank, .size = size};
  t.shards = o->shards > 0 ? o->shards : size;
  t.l = layout_make(o->dim, o->hidden, o->classes, o->buckets);
  if ((long long)o->shard_base + size > t.shards || t.l.bucket > (size_t)INT32_MAX / 2) {
    if (rank == 0)
      fprintf(stderr, "trainer: shards %d..%d do not fit in %d, or the model is too big\n",
              o->shard_base, o->shard_base + size - 1, t.shards);
    return 2;
  }
  if (!trainer_alloc(&t)) {
    fprintf(stderr, "trainer: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  teacher_init(t.teacher, o->dim, o->classes, o->seed);
  if (rank == 0)
    params_init(&t.l, t.p, o->init_seed_set ? o->init_seed : o->seed);
  /* One broadcast of the whole flat vector, as trainers sync their model. */
  MPI_Bcast(t.p, (int)t.l.n_flat, MPI_FLOAT, 0, MPI_COMM_WORLD);
  /* Under dedmpi, the step counter is state too (see the top of the file). */
  t.step = 1;
  int (*register_state)(void *, size_t);
  *(void **)&register_state = dlsym(RTLD_DEFAULT, "dedmpi_register_state");
  if (register_state && register_state(&t.step, sizeof t.step) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank == 0 && !o->quiet) {
    print_config(&t);
    printf("init checksum 0x%08" PRIx32 "\n", params_checksum(&t.l, t.p));
    if (t.step > 1)
      printf("resumed at step %lld\n", t.step);
    fflush(stdout);
  }

  train(&t);

  int rc = 0;
  /* Under dedmpi, how the last step's gradients travelled (DEDMPI_COMPRESS). */
  int (*last_codec)(char *, int);
  *(void **)&last_codec = dlsym(RTLD_DEFAULT, "dedmpi_last_codec");
  char codec[24];
  if (rank == 0 && !o->quiet && last_codec && last_codec(codec, (int)sizeof codec) == MPI_SUCCESS)
    printf("dedmpi: the last all-reduce travelled as %s\n", codec);
  if (rank == 0) {
    printf("final loss %.6f checksum 0x%08" PRIx32 "\n",
           eval_loss(&t.l, t.p, t.teacher, o->seed, &t.s), params_checksum(&t.l, t.p));
    fflush(stdout);
    if (o->out && params_write(&t.l, t.p, o->out) != 0)
      rc = 1;
  }
  trainer_free(&t);
  return rc;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  trainer_opts o;
  int parsed = opts_parse(&o, argc, argv, rank == 0);
  int rc = parsed < 0 ? 2 : 0;
  if (parsed == 1 && rank == 0)
    usage(stdout);
  if (parsed == 0)
    rc = trainer_run(&o, rank, size);
  if (parsed == 0 && o.linger_ms > 0) { /* with the shim: peers may still fetch from us */
    struct timespec ts = {o.linger_ms / 1000, (long)(o.linger_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }

  MPI_Finalize();
  return rc;
}

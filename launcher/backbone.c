/*
 * backbone.c: `dedrun --backbone` and `dedrun --status` (backbone.h).
 *
 * The backbone is a node that takes no part in rounds (its record says
 * so): trainers bootstrap through it and it sees every peer's record,
 * where each peer publishes its measured rates and, every few seconds
 * while rounds go on, its last completed round. Its main thread serves
 * that view over HTTP, from a snapshot the driver thread takes per
 * request:
 *
 *   /status.json   the machine-readable status
 *   /status.txt    the same as text (what `dedrun --status` prints)
 *   /              a page that shows the JSON and refreshes it
 *
 * Requests are read with a bounded parser (http.c), at most
 * HTTP_CONNS_MAX at a time, each given HTTP_IO_TIMEOUT_S.
 */
#define _GNU_SOURCE
#include "backbone.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "avg/ded_codec.h"
#include "core/ded_err.h"
#include "crypto/ded_ident.h"
#include "ded_config.h"
#include "ded_driver.h"
#include "ded_secrets.h"
#include "http.h"
#include "keeper.h"

#define HTTP_CONNS_MAX 32
#define HTTP_IO_TIMEOUT_S 5.0
#define SAMPLE_EVERY_S 5.0
#define SAMPLES 32 /* the rate of rounds is taken over the last minute of them */

extern char **environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- text buffers */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...) {
  for (int tries = 0; tries < 2 && !b->oom; tries++) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = true;
      return;
    }
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = (b->cap ? b->cap : 4096);
    while (cap <= b->len + (size_t)n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) b->oom = true;
    else b->p = p, b->cap = cap;
  }
}

/* |s| as a JSON string body (run names are the user's text). */
static void sb_json_str(sbuf *b, const char *s) {
  sb_printf(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
    else if (c < 0x20 || c == 0x7f) sb_printf(b, "\\u%04x", c);
    else sb_printf(b, "%c", c);
  }
  sb_printf(b, "\"");
}

/* |s| for HTML text. */
static void sb_html(sbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '<') sb_printf(b, "&lt;");
    else if (*s == '>') sb_printf(b, "&gt;");
    else if (*s == '&') sb_printf(b, "&amp;");
    else if (*s == '"') sb_printf(b, "&quot;");
    else sb_printf(b, "%c", *s);
  }
}

/* ---------------------------------------------------------------- the view */

typedef struct backbone {
  ded_driver *d;
  const char *run;
  char sid[9];
  double started;
  struct {
    double t;
    uint64_t round;
  } samples[SAMPLES];
  unsigned nsamples;
} backbone;

typedef struct view {
  ded_swarm_status st;
  unsigned trainers; /* connected peers that take part in rounds */
  uint64_t round;    /* the newest round any peer completed */
  bool any_round;
  double rounds_per_min; /* < 0: not known yet */
} view;

static uint64_t view_round(const ded_swarm_status *st, bool *any) {
  uint64_t r = 0;
  *any = false;
  for (size_t i = 0; i < st->npeers; i++) {
    const ded_progress *p = &st->peers[i].progress;
    if (p->round == 0 && p->contributors == 0) continue;
    if (!*any || p->round > r) r = p->round;
    *any = true;
  }
  return r;
}

/* Rounds per minute over the last minute of samples (at least 5 s). */
static double view_rate(const backbone *bb, uint64_t round, double t) {
  for (unsigned k = bb->nsamples > SAMPLES ? bb->nsamples - SAMPLES : 0; k < bb->nsamples; k++) {
    const __typeof__(bb->samples[0]) *s = &bb->samples[k % SAMPLES];
    if (t - s->t > 60.0 + SAMPLE_EVERY_S) continue;
    if (t - s->t < SAMPLE_EVERY_S || round < s->round) return -1.0;
    return (double)(round - s->round) * 60.0 / (t - s->t);
  }
  return -1.0;
}

static int view_take(backbone *bb, view *v) {
  memset(v, 0, sizeof *v);
  int rv = ded_driver_status(bb->d, &v->st);
  if (rv != 0) return rv;
  for (size_t i = 0; i < v->st.npeers; i++) {
    const ded_status_peer *p = &v->st.peers[i];
    if (!p->self && p->connected && !p->no_rounds) v->trainers++;
  }
  v->round = view_round(&v->st, &v->any_round);
  v->rounds_per_min = v->any_round ? view_rate(bb, v->round, now_s()) : -1.0;
  return 0;
}

static void sample(backbone *bb) {
  view v;
  if (view_take(bb, &v) != 0) return;
  if (v.any_round) {
    bb->samples[bb->nsamples % SAMPLES].t = now_s();
    bb->samples[bb->nsamples % SAMPLES].round = v.round;
    bb->nsamples++;
  }
  free(v.st.peers);
}

static void peer_sid(const uint8_t *id, char sid[9]) {
  char hex[2 * DED_ID_BYTES + 1];
  ded_hex_encode(id, DED_ID_BYTES, hex);
  snprintf(sid, 9, "%.8s", hex);
}

static const char *peer_role(const ded_status_peer *p) {
  return p->no_rounds ? "backbone" : ded_mode_str(p->mode);
}

static double mbit(uint32_t kBps) { return kBps * 8e-3; }

/* A round's codec as a peer's record tells it ("-" from an older peer's
 * record, which says none). */
static void codec_name(const ded_progress *p, char *out, size_t len) {
  if (p->codec == DED_CODEC_TOPK)
    snprintf(out, len, "topk:%g", (double)p->codec_ppm / DED_CODEC_PPM);
  else
    snprintf(out, len, "%s", ded_codec_name((ded_codec_kind)p->codec));
}

static void render_json(const backbone *bb, const view *v, sbuf *b) {
  sb_printf(b, "{\"run\":");
  sb_json_str(b, bb->run);
  sb_printf(b, ",\"backbone\":\"%s\",\"time_ms\":%" PRIu64 ",\"uptime_s\":%.0f,\"peer_count\":%u,",
            bb->sid, v->st.wall_ms, now_s() - bb->started, v->trainers);
  if (v->any_round) sb_printf(b, "\"round\":%" PRIu64 ",", v->round);
  else sb_printf(b, "\"round\":null,");
  if (v->rounds_per_min >= 0) sb_printf(b, "\"rounds_per_min\":%.1f,", v->rounds_per_min);
  else sb_printf(b, "\"rounds_per_min\":null,");
  sb_printf(b, "\"peers\":[");
  for (size_t i = 0; i < v->st.npeers; i++) {
    const ded_status_peer *p = &v->st.peers[i];
    char sid[9], hex[2 * DED_ID_BYTES + 1], addr[64] = "";
    peer_sid(p->id, sid);
    ded_hex_encode(p->id, DED_ID_BYTES, hex);
    if (p->addr.family) ded_addr_format(&p->addr, addr, sizeof addr);
    sb_printf(b, "%s{\"id\":\"%s\",\"full_id\":\"%s\",\"role\":\"%s\",\"self\":%s,\"connected\":%s,"
                 "\"address\":\"%s\",\"up_mbit\":%.1f,\"down_mbit\":%.1f,",
              i ? "," : "", sid, hex, peer_role(p), p->self ? "true" : "false",
              p->connected ? "true" : "false", addr, mbit(p->perf.up_kBps),
              mbit(p->perf.down_kBps));
    if (p->progress.round || p->progress.contributors) {
      char codec[24];
      codec_name(&p->progress, codec, sizeof codec);
      sb_printf(b, "\"round\":%" PRIu64 ",\"round_ms\":%" PRIu32 ",\"contributors\":%" PRIu32
                   ",\"codec\":\"%s\",",
                p->progress.round, p->progress.round_ms, p->progress.contributors, codec);
    } else {
      sb_printf(b, "\"round\":null,\"round_ms\":null,\"contributors\":null,\"codec\":null,");
    }
    sb_printf(b, "\"record_age_s\":%.0f}",
              v->st.wall_ms > p->issued_ms ? (double)(v->st.wall_ms - p->issued_ms) / 1e3 : 0.0);
  }
  sb_printf(b, "],\"events\":[");
  for (size_t i = 0; i < v->st.nevents; i++) {
    const ded_driver_event *e = &v->st.events[i];
    char sid[9];
    peer_sid(e->id, sid);
    sb_printf(b, "%s{\"time_ms\":%" PRIu64 ",\"peer\":\"%s\",\"event\":\"%s\",\"why\":", i ? "," : "",
              e->wall_ms, sid, e->up ? "joined" : "left");
    sb_json_str(b, e->up ? "" : e->status ? ded_strerror(e->status) : "said goodbye");
    sb_printf(b, "}");
  }
  sb_printf(b, "]}\n");
}

static void render_text(const backbone *bb, const view *v, sbuf *b) {
  sb_printf(b, "run '%s': %u peer%s training, backbone %s", bb->run, v->trainers,
            v->trainers == 1 ? "" : "s", bb->sid);
  if (v->any_round) sb_printf(b, "; round %" PRIu64, v->round);
  if (v->rounds_per_min >= 0) sb_printf(b, ", %.1f rounds/min", v->rounds_per_min);
  sb_printf(b, "\n\n  %-8s  %-8s  %-9s  %-26s %9s %9s %9s %10s %5s  %s\n", "peer", "role",
            "link", "address", "up Mbit/s", "dn Mbit/s", "round", "round time", "jobs", "codec");
  for (size_t i = 0; i < v->st.npeers; i++) {
    const ded_status_peer *p = &v->st.peers[i];
    char sid[9], addr[64] = "-", round[24] = "-", ms[24] = "-", jobs[16] = "-", codec[24] = "-";
    peer_sid(p->id, sid);
    if (p->addr.family) ded_addr_format(&p->addr, addr, sizeof addr);
    if (p->progress.round || p->progress.contributors) {
      snprintf(round, sizeof round, "%" PRIu64, p->progress.round);
      if (p->progress.round_ms < 1000)
        snprintf(ms, sizeof ms, "%" PRIu32 " ms", p->progress.round_ms);
      else
        snprintf(ms, sizeof ms, "%.2f s", p->progress.round_ms / 1e3);
      snprintf(jobs, sizeof jobs, "%" PRIu32, p->progress.contributors);
      codec_name(&p->progress, codec, sizeof codec);
    }
    sb_printf(b, "  %-8s  %-8s  %-9s  %-26s %9.1f %9.1f %9s %10s %5s  %s\n", sid, peer_role(p),
              p->self ? "(this)" : p->connected ? "connected" : "known", addr,
              mbit(p->perf.up_kBps), mbit(p->perf.down_kBps), round, ms, jobs, codec);
  }
  if (v->st.nevents) sb_printf(b, "\nrecent:\n");
  for (size_t i = 0; i < v->st.nevents; i++) {
    const ded_driver_event *e = &v->st.events[i];
    char sid[9], when[32];
    peer_sid(e->id, sid);
    time_t t = (time_t)(e->wall_ms / 1000u);
    strftime(when, sizeof when, "%H:%M:%S", gmtime(&t));
    if (e->up)
      sb_printf(b, "  %s UTC  %s joined\n", when, sid);
    else
      sb_printf(b, "  %s UTC  %s left (%s)\n", when, sid,
                e->status ? ded_strerror(e->status) : "said goodbye");
  }
}

/* The page: static, it fetches /status.json every 2 s and fills itself in. */
static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
static const char page_body[] =
    "</title>\n<style>\n"
    "body{font:15px/1.4 system-ui,sans-serif;margin:2em;color:#222}\n"
    "h1{font-size:1.3em} table{border-collapse:collapse;margin:1em 0}\n"
    "td,th{padding:.25em .8em;border-bottom:1px solid #ddd;text-align:right}\n"
    "td:nth-child(-n+4),th:nth-child(-n+4){text-align:left} .off{color:#999}\n"
    "#err{color:#b00}\n</style></head><body>\n"
    "<h1>dedmpi run <span id=\"run\"></span></h1>\n"
    "<p><b id=\"peer-count\">?</b> peers training &middot; round <b id=\"round\">-</b> &middot; "
    "<b id=\"rpm\">-</b> rounds/min &middot; backbone <span id=\"backbone\"></span> "
    "<span id=\"err\"></span></p>\n"
    "<table><thead><tr><th>peer</th><th>role</th><th>link</th><th>address</th><th>up Mbit/s</th>"
    "<th>down Mbit/s</th><th>round</th><th>round time</th><th>jobs</th><th>codec</th></tr></thead>\n"
    "<tbody id=\"peers\"></tbody></table>\n<h2>Recent joins and leaves</h2>\n"
    "<ul id=\"events\"></ul>\n<script>\n"
    "function cell(tr,t){const td=document.createElement('td');td.textContent=t;tr.appendChild(td);}\n"
    "function show(s){\n"
    " document.getElementById('run').textContent=\"'\"+s.run+\"'\";\n"
    " document.getElementById('backbone').textContent=s.backbone;\n"
    " document.getElementById('peer-count').textContent=String(s.peer_count);\n"
    " document.getElementById('round').textContent=s.round===null?'-':String(s.round);\n"
    " document.getElementById('rpm').textContent=s.rounds_per_min===null?'-':s.rounds_per_min.toFixed(1);\n"
    " const tb=document.getElementById('peers');tb.replaceChildren();\n"
    " for(const p of s.peers){const tr=document.createElement('tr');if(!p.connected)tr.className='off';\n"
    "  cell(tr,p.id);cell(tr,p.role);cell(tr,p.self?'(this)':p.connected?'connected':'known');\n"
    "  cell(tr,p.address||'-');cell(tr,p.up_mbit.toFixed(1));cell(tr,p.down_mbit.toFixed(1));\n"
    "  cell(tr,p.round===null?'-':String(p.round));\n"
    "  cell(tr,p.round_ms===null?'-':p.round_ms<1000?p.round_ms+' ms':(p.round_ms/1000).toFixed(2)+' s');\n"
    "  cell(tr,p.contributors===null?'-':String(p.contributors));\n"
    "  cell(tr,p.codec===null?'-':p.codec);tb.appendChild(tr);}\n"
    " const ev=document.getElementById('events');ev.replaceChildren();\n"
    " for(const e of s.events.slice().reverse()){const li=document.createElement('li');\n"
    "  li.textContent=new Date(e.time_ms).toISOString().slice(11,19)+' UTC  '+e.peer+' '+e.event+"
    "(e.why?' ('+e.why+')':'');ev.appendChild(li);}\n"
    " document.getElementById('err').textContent='';}\n"
    "async function tick(){try{const r=await fetch('status.json',{cache:'no-store'});"
    "show(await r.json());}catch(e){document.getElementById('err').textContent='(no answer: '+e+')';}}\n"
    "tick();setInterval(tick,2000);\n</script></body></html>\n";

static void render_html(const backbone *bb, sbuf *b) {
  sb_printf(b, "%sdedmpi run ", page_head);
  sb_html(b, bb->run);
  sb_printf(b, "%s", page_body);
}

/* ---------------------------------------------------------------- HTTP */

typedef struct hconn {
  int fd; /* -1: free */
  char in[HTTP_HEAD_MAX];
  size_t inlen;
  sbuf out;
  size_t outoff;
  bool writing;
  bool draining; /* answered: reading what the client still sends, so that
                  * closing does not reset the connection under the answer */
  double t0;
} hconn;

static void hconn_close(hconn *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->out.p);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

static const char *status_text(int code) {
  switch (code) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  default: return "Service Unavailable";
  }
}

static void respond(hconn *c, int code, const char *type, const sbuf *body, bool head) {
  sb_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
            code, status_text(code), type, body ? body->len : 0,
            code == 405 ? "Allow: GET, HEAD\r\n" : "");
  if (body && body->p && !head) sb_printf(&c->out, "%.*s", (int)body->len, body->p);
  c->writing = true;
}

static void serve(backbone *bb, hconn *c) {
  char path[HTTP_PATH_MAX];
  int head = 0;
  int rv = http_parse_request(c->in, c->inlen, path, &head);
  if (rv == HTTP_INCOMPLETE) return;
  if (rv < 0) {
    sbuf msg = {0};
    sb_printf(&msg, "%d %s\n", -rv, status_text(-rv));
    respond(c, -rv, "text/plain; charset=utf-8", &msg, false);
    free(msg.p);
    return;
  }
  sbuf body = {0};
  int code = 200;
  const char *type = "text/plain; charset=utf-8";
  if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
    render_html(bb, &body);
    type = "text/html; charset=utf-8";
  } else if (!strcmp(path, "/status.json") || !strcmp(path, "/status.txt")) {
    view v;
    if (view_take(bb, &v) != 0) {
      code = 503;
      sb_printf(&body, "the backbone's node did not answer\n");
    } else if (!strcmp(path, "/status.json")) {
      render_json(bb, &v, &body);
      type = "application/json";
    } else {
      render_text(bb, &v, &body);
    }
    free(v.st.peers);
  } else {
    code = 404;
    sb_printf(&body, "404 Not Found: try / , /status.json or /status.txt\n");
  }
  if (body.oom) {
    free(body.p);
    hconn_close(c);
    return;
  }
  respond(c, code, type, &body, head != 0);
  free(body.p);
}

/* Opens the status listener on host:port ("[v6]:port" too). */
static int http_listen(const char *hostport, char *bound, size_t blen, char *err, size_t errlen) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof host || !colon[1]) {
    snprintf(err, errlen, "--http %s: expected host:port", hostport);
    return -1;
  }
  snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
  if (host[0] == '[' && strlen(host) > 1 && host[strlen(host) - 1] == ']') {
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                  *ai = NULL;
  int g = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
  if (g != 0) {
    snprintf(err, errlen, "--http %s: %s", hostport, gai_strerror(g));
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    snprintf(err, errlen, "cannot serve the status on %s: %s", hostport, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char h[128] = "", port[16] = "";
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
  snprintf(bound, blen, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, port);
  return fd;
}

static void round_done_unused(void *user, void *ctx, const ded_round_result *res) {
  (void)user, (void)ctx, (void)res; /* a backbone submits no rounds */
}

static const char *env_get(const char *name) { return getenv(name); }

int dedrun_backbone(const char *http) {
  ded_config cfg;
  char errors[2048], warnings[1024], err[512] = "";
  int nerr = ded_config_load(&cfg, env_get, environ, errors, sizeof errors, warnings, sizeof warnings);
  for (char *sv = NULL, *l = strtok_r(warnings, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv))
    fprintf(stderr, "dedrun: warning: %s\n", l);
  for (char *sv = NULL, *l = strtok_r(errors, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv))
    fprintf(stderr, "dedrun: %s\n", l);
  if (nerr == 0 && ded_secrets_swarm_key_check(cfg.swarm_key, cfg.swarm_key_file, err,
                                               sizeof err) != 0) {
    fprintf(stderr, "dedrun: %s\n", err);
    nerr++;
  }
  if (nerr) {
    ded_wipe(cfg.swarm_key, sizeof cfg.swarm_key);
    return 2;
  }
  if (cfg.mode != DED_MODE_NODE) {
    fprintf(stderr, "dedrun: a backbone accepts connections and takes no part in rounds: "
                    "--mode %s does not apply\n", ded_mode_str(cfg.mode));
    return 2;
  }
  if (cfg.log_level < DED_LOG_INFO) cfg.log_level = DED_LOG_INFO; /* peers coming and going */
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, &old); /* before the driver's thread inherits the mask */
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  backbone bb = {.run = cfg.run, .started = now_s()};
  char prefix[48];
  snprintf(prefix, sizeof prefix, "dedrun[%d] backbone", (int)getpid());
  ded_driver_config dc;
  ded_config_driver(&cfg, &dc);
  dc.node.no_rounds = true;
  dc.done = round_done_unused;
  dc.log_prefix = prefix;
  int rv = ded_driver_start(&dc, &bb.d, err, sizeof err);
  ded_wipe(cfg.swarm_key, sizeof cfg.swarm_key);
  if (rv != 0) {
    fprintf(stderr, "dedrun: %s\n", err);
    return 1;
  }
  snprintf(bb.sid, sizeof bb.sid, "%s", ded_driver_peer_sid(bb.d));
  char def[300], bound[200];
  if (!http) { /* the listening host, next port */
    const char *colon = strrchr(cfg.listen, ':');
    int host_len = colon ? (int)(colon - cfg.listen) : 0;
    bool any = host_len == 0 || (host_len == 7 && !strncmp(cfg.listen, "0.0.0.0", 7)) ||
               (host_len == 4 && !strncmp(cfg.listen, "[::]", 4));
    snprintf(def, sizeof def, "%.*s:%u", any ? 9 : host_len, any ? "127.0.0.1" : cfg.listen,
             (unsigned)ded_driver_port(bb.d) + 1u);
    http = def;
  }
  int lfd = http_listen(http, bound, sizeof bound, err, sizeof err);
  if (lfd < 0 || sfd < 0) {
    fprintf(stderr, "dedrun: %s\n", lfd < 0 ? err : "signalfd failed");
    ded_driver_stop(bb.d, 0);
    return 1;
  }
  fprintf(stderr, "dedrun: backbone %s of run '%s' on port %u; status at http://%s/ "
                  "(dedrun --status %s)\n",
          bb.sid, bb.run, (unsigned)ded_driver_port(bb.d), bound, bound);
  keeper *kp = NULL;
  if (cfg.checkpoint_dir[0] && keeper_start(bb.d, &cfg, &kp, err, sizeof err) != 0) {
    fprintf(stderr, "dedrun: %s\n", err);
    close(lfd);
    close(sfd);
    ded_driver_stop(bb.d, 0);
    return 1;
  }

  hconn conns[HTTP_CONNS_MAX];
  for (int i = 0; i < HTTP_CONNS_MAX; i++) {
    memset(&conns[i], 0, sizeof conns[i]);
    conns[i].fd = -1;
  }
  double next_sample = now_s();
  bool stop = false;
  while (!stop) {
    struct pollfd pf[2 + HTTP_CONNS_MAX];
    int np = 0;
    pf[np++] = (struct pollfd){sfd, POLLIN, 0};
    pf[np++] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < HTTP_CONNS_MAX; i++)
      pf[np++] = (struct pollfd){conns[i].fd,
                                 conns[i].writing && !conns[i].draining ? POLLOUT : POLLIN, 0};
    double wake = next_sample;
    for (int i = 0; i < HTTP_CONNS_MAX; i++)
      if (conns[i].fd >= 0 && conns[i].t0 + HTTP_IO_TIMEOUT_S < wake) wake = conns[i].t0 + HTTP_IO_TIMEOUT_S;
    int timeout = (int)((wake - now_s()) * 1e3) + 1;
    int n = poll(pf, (nfds_t)np, timeout < 0 ? 0 : timeout);
    if (n < 0 && errno != EINTR) break;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
      if (si.ssi_signo != SIGPIPE) stop = true;
    if (pf[1].revents & POLLIN) {
      int fd;
      while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0 ||
             errno == EMFILE || errno == ENFILE) {
        if (fd < 0) { /* out of descriptors: the listener stays readable; pause a little */
          struct timespec ts = {0, 100000000};
          nanosleep(&ts, NULL);
          break;
        }
        int k = 0;
        while (k < HTTP_CONNS_MAX && conns[k].fd >= 0) k++;
        if (k == HTTP_CONNS_MAX) { /* busy: the oldest waits no longer than its timeout anyway */
          close(fd);
          continue;
        }
        conns[k].fd = fd;
        conns[k].t0 = now_s();
      }
    }
    double t = now_s();
    for (int i = 0; i < HTTP_CONNS_MAX; i++) {
      hconn *c = &conns[i];
      if (c->fd < 0) continue;
      short re = pf[2 + i].revents;
      if (c->draining) {
        char sink[4096];
        ssize_t r = (re & (POLLIN | POLLHUP | POLLERR)) ? recv(c->fd, sink, sizeof sink, 0) : -1;
        if (r == 0 || (r < 0 && errno != EAGAIN) || t > c->t0 + HTTP_IO_TIMEOUT_S) hconn_close(c);
        continue;
      }
      if (!c->writing && (re & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t r = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, 0);
        if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
          hconn_close(c);
          continue;
        }
        if (r > 0) c->inlen += (size_t)r;
        serve(&bb, c);
        if (c->fd < 0) continue;
      }
      if (c->writing && c->outoff < c->out.len) {
        ssize_t w = send(c->fd, c->out.p + c->outoff, c->out.len - c->outoff, MSG_NOSIGNAL);
        if (w > 0) c->outoff += (size_t)w;
        else if (!(w < 0 && errno == EAGAIN)) c->outoff = c->out.len = 0; /* gone */
      }
      if (t > c->t0 + HTTP_IO_TIMEOUT_S) {
        hconn_close(c);
      } else if (c->writing && c->outoff >= c->out.len) {
        shutdown(c->fd, SHUT_WR); /* the answer is out; what the client still sends is dropped */
        c->draining = true;
      }
    }
    if (now_s() >= next_sample) {
      sample(&bb);
      next_sample = now_s() + SAMPLE_EVERY_S;
    }
  }
  fprintf(stderr, "dedrun: backbone %s leaving\n", bb.sid);
  keeper_stop(kp);
  for (int i = 0; i < HTTP_CONNS_MAX; i++) hconn_close(&conns[i]);
  close(lfd);
  close(sfd);
  ded_driver_stop(bb.d, 2000000000ull);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return 0;
}

int dedrun_status(const char *hostport) {
  char *body = NULL, err[512] = "";
  int code = http_get(hostport, "/status.txt", 10000, &body, err, sizeof err);
  if (code < 0) {
    fprintf(stderr, "dedrun: --status: %s\n", err);
    return 1;
  }
  if (code != 200) {
    fprintf(stderr, "dedrun: --status: %s answered %d: %s", hostport, code, body ? body : "");
    free(body);
    return 1;
  }
  fputs(body, stdout);
  free(body);
  return 0;
}

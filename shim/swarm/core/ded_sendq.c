#include "ded_sendq.h"

#include <string.h>

#include "ded_assert.h"
#include "ded_err.h"

static size_t item_head_len(const ded_sendq_item *it) {
  return it->owned ? it->owned_len : DED_DATA_HDR_BYTES;
}

static const uint8_t *item_head(const ded_sendq_item *it) { return it->owned ? it->owned : it->hdr; }

static size_t item_total(const ded_sendq_item *it) { return item_head_len(it) + it->ref_len; }

bool ded_sendq_has_output(const ded_sendq *q) {
  if (q->cur) return true;
  for (int i = 0; i < DED_Q_COUNT; i++)
    if (q->q[i].head) return true;
  return false;
}

bool ded_sendq_has_class(const ded_sendq *q, int cls) { return q->q[cls].head != NULL; }

ded_sendq_item *ded_sendq_item_new(const ded_sendq_env *env) {
  return ded_mem_calloc(env->mem, 1, sizeof(ded_sendq_item));
}

void ded_sendq_item_lend(const ded_sendq_env *env, ded_sendq_item *it, void *owner, bool user,
                         const uint8_t *ref, size_t len) {
  it->ref = ref;
  it->ref_len = len;
  it->owner = owner;
  it->ref_user = user;
  env->ref(env->ctx, owner, user);
}

void ded_sendq_item_free(const ded_sendq_env *env, ded_sendq_item *it) {
  if (it->owner) env->unref(env->ctx, it->owner, it->ref_user);
  ded_mem_free(env->mem, it->owned);
  ded_mem_free(env->mem, it);
}

void ded_sendq_push(ded_sendq *q, int cls, ded_sendq_item *it) {
  DED_ASSERT(cls >= 0 && cls < DED_Q_COUNT);
  it->next = NULL;
  it->cls = (uint8_t)cls;
  if (q->q[cls].tail)
    q->q[cls].tail->next = it;
  else
    q->q[cls].head = it;
  q->q[cls].tail = it;
}

void ded_sendq_drop_class(const ded_sendq_env *env, ded_sendq *q, int cls) {
  while (q->q[cls].head) {
    ded_sendq_item *it = q->q[cls].head;
    q->q[cls].head = it->next;
    ded_sendq_item_free(env, it);
  }
  q->q[cls].tail = NULL;
}

void ded_sendq_free(const ded_sendq_env *env, ded_sendq *q) {
  if (q->cur) ded_sendq_item_free(env, q->cur);
  q->cur = NULL;
  for (int cls = 0; cls < DED_Q_COUNT; cls++) ded_sendq_drop_class(env, q, cls);
}

/* The first frame queued in class |cls| or a later one, or NULL. */
static ded_sendq_item *sendq_first_from(const ded_sendq *q, int cls) {
  while (cls < DED_Q_COUNT && !q->q[cls].head) cls++;
  return cls < DED_Q_COUNT ? q->q[cls].head : NULL;
}

/* The frame written after |it| (NULL: the first one), or NULL: the one
 * order both pending and consume walk. */
static ded_sendq_item *sendq_next(const ded_sendq *q, const ded_sendq_item *it) {
  if (!it) return q->cur ? q->cur : sendq_first_from(q, 0);
  if (it == q->cur) return sendq_first_from(q, 0);
  return it->next ? it->next : sendq_first_from(q, it->cls + 1);
}

int ded_sendq_pending(const ded_sendq *q, ded_iov *iov, int max) {
  int n = 0;
  for (const ded_sendq_item *it = sendq_next(q, NULL); it && n < max; it = sendq_next(q, it)) {
    size_t head = item_head_len(it);
    if (it->pos < head) iov[n++] = (ded_iov){item_head(it) + it->pos, head - it->pos};
    size_t from = it->pos > head ? it->pos - head : 0;
    if (it->ref_len > from) {
      if (n == max) break; /* the payload goes out next time */
      iov[n++] = (ded_iov){it->ref + from, it->ref_len - from};
    }
  }
  return n;
}

void ded_sendq_consume(const ded_sendq_env *env, ded_sendq *q, size_t n,
                       void (*each)(void *ctx, void *owner), void *ctx) {
  while (n > 0) {
    ded_sendq_item *it = sendq_next(q, NULL);
    if (!it) break;
    if (it != q->cur) { /* from the head of its class: it is being written now */
      q->q[it->cls].head = it->next;
      if (!q->q[it->cls].head) q->q[it->cls].tail = NULL;
      q->cur = it;
    }
    size_t take = DED_MIN(n, item_total(it) - it->pos);
    it->pos += take;
    n -= take;
    if (each) each(ctx, it->owner);
    if (it->pos == item_total(it)) {
      q->cur = NULL;
      ded_sendq_item_free(env, it);
    }
  }
}

int ded_sendq_detach(const ded_sendq_env *env, ded_sendq *q, const void *owner, bool user_only) {
  for (int cls = 0; cls < DED_Q_COUNT; cls++) {
    ded_sendq_item **pp = &q->q[cls].head, *prev = NULL;
    while (*pp) {
      ded_sendq_item *it = *pp;
      if (it->owner == owner && (!user_only || it->ref_user)) {
        *pp = it->next;
        if (q->q[cls].tail == it) q->q[cls].tail = prev;
        ded_sendq_item_free(env, it);
      } else {
        prev = it;
        pp = &it->next;
      }
    }
  }
  ded_sendq_item *it = q->cur;
  if (!it || it->owner != owner || (user_only && !it->ref_user)) return 0;
  size_t head = item_head_len(it), total = item_total(it);
  uint8_t *copy = ded_mem_malloc(env->mem, total - it->pos);
  if (!copy) { /* the stream cannot stay whole: the connection goes */
    env->unref(env->ctx, it->owner, it->ref_user);
    it->owner = NULL;
    it->ref = NULL;
    it->ref_len = 0;
    it->partial = true; /* what is left of it must go on no other connection */
    return DED_ERR_NOMEM;
  }
  size_t o = 0;
  if (it->pos < head) {
    memcpy(copy, item_head(it) + it->pos, head - it->pos);
    o = head - it->pos;
  }
  size_t ref_from = it->pos > head ? it->pos - head : 0;
  memcpy(copy + o, it->ref + ref_from, it->ref_len - ref_from);
  env->unref(env->ctx, it->owner, it->ref_user);
  ded_mem_free(env->mem, it->owned);
  it->owned = copy;
  it->owned_len = total - it->pos;
  it->ref = NULL;
  it->ref_len = 0;
  it->owner = NULL;
  it->pos = 0;
  it->partial = true;
  return 0;
}

void ded_sendq_move(const ded_sendq_env *env, ded_sendq *from, ded_sendq *to) {
  ded_sendq_item *cur = from->cur;
  from->cur = NULL;
  if (cur && cur->partial) {
    ded_sendq_item_free(env, cur); /* the tail of a frame the other stream never began */
  } else if (cur) {
    cur->pos = 0;
    ded_sendq_push(to, cur->cls, cur);
  }
  for (int cls = 0; cls < DED_Q_COUNT; cls++) {
    ded_sendq_item *it = from->q[cls].head;
    while (it) {
      ded_sendq_item *next = it->next;
      if (it->partial)
        ded_sendq_item_free(env, it);
      else
        ded_sendq_push(to, cls, it);
      it = next;
    }
    from->q[cls].head = from->q[cls].tail = NULL;
  }
}

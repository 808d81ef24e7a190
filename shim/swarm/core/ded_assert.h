/*
 * ded_assert.h: invariants that stay checked in release builds.
 *
 * DED_ASSERT is for the engine's own invariants only. Anything a peer
 * controls is validated and reported as DED_ERR_PROTO instead: a peer must
 * never be able to reach an assertion.
 */
#ifndef DED_ASSERT_H
#define DED_ASSERT_H

#if defined(__GNUC__)
#define DED_NORETURN __attribute__((noreturn))
#define DED_UNUSED_RESULT __attribute__((warn_unused_result))
#define DED_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define DED_LIKELY(x) __builtin_expect(!!(x), 1)
#define DED_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define DED_NORETURN
#define DED_UNUSED_RESULT
#define DED_PRINTF(a, b)
#define DED_LIKELY(x) (x)
#define DED_UNLIKELY(x) (x)
#endif

DED_NORETURN void ded_assert_fail(const char *expr, const char *file, int line);

#define DED_ASSERT(cond)                                                      \
  do {                                                                        \
    if (DED_UNLIKELY(!(cond)))                                                \
      ded_assert_fail(#cond, __FILE__, __LINE__);                             \
  } while (0)

#define DED_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)

#define DED_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define DED_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DED_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* DED_ASSERT_H */

/*
 * ded_reduce.h: the arithmetic of a round, in a fixed order.
 *
 * A reducer computes, element by element,
 *
 *     g = (a_0 x_0 + a_1 x_1 + ... + a_{k-1} x_{k-1}) / W
 *
 * adding members strictly in commit order, in the element type, with
 * a_m = w_m / n_m and W = sum of w_m. The same inputs therefore give the
 * same bits on any machine: the build disables floating-point contraction
 * (no FMA), and vectorisation only ever runs across elements, never
 * reassociating the sum of one element. A coefficient of exactly 1 (the
 * default weights) skips the multiplication, so the sum is exactly what
 * an MPI_SUM of the same inputs in the same order gives.
 *
 * Inputs may come straight from a network buffer at any alignment.
 */
#ifndef DED_REDUCE_H
#define DED_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* acc = a*x when |first|, acc += a*x otherwise, |n| elements of |dtype|. */
void ded_reduce_axpy(uint8_t dtype, void *acc, const void *x, size_t n, double a, bool first);

/* acc /= w. */
void ded_reduce_div(uint8_t dtype, void *acc, size_t n, double w);

/* out = s*in (a plain copy when s is 1). |out| and |in| may be equal. */
void ded_reduce_scale(uint8_t dtype, void *out, const void *in, size_t n, double s);

#endif /* DED_REDUCE_H */

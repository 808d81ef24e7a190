/*
 * ded_resolve.h: the driver's addresses. Turns the "host:port" lists of
 * DEDMPI_LISTEN, DEDMPI_JOIN and DEDMPI_ANNOUNCE into ded_addr (host names
 * resolved, IPv4 preferred), converts between ded_addr and the socket
 * API's sockaddr, and finds the addresses a listening job announces when
 * none were given.
 *
 * Owns no state: every function works on its arguments alone. Resolving
 * names blocks (getaddrinfo), so the driver does it while it starts,
 * before its thread runs.
 */
#ifndef DED_RESOLVE_H
#define DED_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "core/ded_types.h"

/* |a| as a sockaddr (AF_INET6 for family 6, else AF_INET) and its length. */
void ded_resolve_to_sockaddr(const ded_addr *a, struct sockaddr_storage *ss, socklen_t *len);

/* |sa| as a ded_addr; any family but AF_INET and AF_INET6 gives an unset
 * address (family 0). */
void ded_resolve_from_sockaddr(const struct sockaddr *sa, ded_addr *a);

/*
 * Resolves one "host:port" or "[v6]:port" (names allowed). An empty host,
 * or "*", means any address, allowed only with |allow_any| (a listen
 * address). 0, or DED_ERR_INVALID_ARG with a message in |err|.
 */
int ded_resolve_addr(const char *text, bool allow_any, ded_addr *out, char *err, size_t errlen);

/*
 * Resolves a comma-separated list of at most |max| addresses into |out|
 * (blank entries skipped; NULL is an empty list), their number in |*n|.
 * 0, or DED_ERR_INVALID_ARG with a message in |err|.
 */
int ded_resolve_list(const char *text, ded_addr *out, unsigned max, unsigned *n, bool allow_any,
                     char *err, size_t errlen);

/*
 * The addresses others may reach a job listening on |listen| at, when none
 * was announced: |listen| itself if it is specific, else every IPv4
 * address of an interface that is up, non-loopback first, loopback last
 * (peers on this same machine), at most DED_RECORD_ADDRS_MAX of them.
 */
void ded_resolve_announce(const ded_addr *listen, ded_addr *out, unsigned *n);

#endif /* DED_RESOLVE_H */

/*
 * backbone.h: `dedrun --backbone`, a peer without a trainer that stays up,
 * bootstraps newcomers and serves the run's status (JSON, text and an
 * HTML page) over HTTP; and `dedrun --status`, which prints that status.
 */
#ifndef DEDRUN_BACKBONE_H
#define DEDRUN_BACKBONE_H

/* Runs the backbone until SIGINT or SIGTERM, its settings in the DEDMPI_*
 * environment; the status is served on |http| (host:port; NULL = the
 * listening host, port + 1). Returns dedrun's exit code. */
int dedrun_backbone(const char *http);

/* Prints the status a backbone at |hostport| serves (its --http). */
int dedrun_status(const char *hostport);

#endif /* DEDRUN_BACKBONE_H */

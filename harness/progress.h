/* progress — a one-line progress bar on stderr when it is a terminal; on a
 * log (CI) a plain line every PROGRESS_LOG_S seconds instead. */
#ifndef QG_PROGRESS_H
#define QG_PROGRESS_H

#include <stdint.h>

#define PROGRESS_LOG_S 30.0

struct progress {
    const char *label;
    int enabled, tty;
    double t0, last;
};

/* Enabled when quiet is 0 (a bar on a terminal, else log lines). */
void progress_init(struct progress *p, const char *label, int quiet);
/* Redraws at most 10 times a second: done/total, rate of `unit`, ETA. */
void progress_update(struct progress *p, int64_t done, int64_t total, const char *unit);
/* Clears the line. */
void progress_done(struct progress *p);

#endif

/* progress — a one-line progress bar on stderr when it is a terminal. */
#ifndef QG_PROGRESS_H
#define QG_PROGRESS_H

#include <stdint.h>

struct progress {
    const char *label;
    int enabled;
    double t0, last;
};

/* Enabled only when stderr is a terminal and quiet is 0. */
void progress_init(struct progress *p, const char *label, int quiet);
/* Redraws at most 10 times a second: done/total, rate of `unit`, ETA. */
void progress_update(struct progress *p, int64_t done, int64_t total, const char *unit);
/* Clears the line. */
void progress_done(struct progress *p);

#endif

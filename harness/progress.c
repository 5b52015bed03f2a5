/* progress — terminal progress bar (stderr, TTY only). */
#include "core/util.h"
#include "harness/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void progress_init(struct progress *p, const char *label, int quiet)
{
    p->label = label;
    p->enabled = !quiet;
    p->tty = isatty(2);
    p->t0 = p->last = qg_now_s();
}

void progress_update(struct progress *p, int64_t done, int64_t total, const char *unit)
{
    if (!p->enabled) return;
    double t = qg_now_s();
    if (!p->tty) { /* a log: a line now and then, never a carriage return */
        if (t - p->last < PROGRESS_LOG_S || done >= total) return;
        p->last = t;
        double el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
        if (total > 0 && rate > 0)
            fprintf(stderr, "%s: %lld/%lld %s (%.0f%%), %.1f %s/s, ETA %.0f s\n", p->label,
                    (long long)done, (long long)total, unit, 100.0 * (double)done / (double)total,
                    rate, unit, (double)(total - done) / rate);
        else
            fprintf(stderr, "%s: %lld %s, %.1f %s/s\n", p->label, (long long)done, unit, rate,
                    unit);
        return;
    }
    if (t - p->last < 0.1 && done < total) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
    if (total <= 0) { /* unknown total: count and rate only */
        fprintf(stderr, "\r%s %lld %s  %.1f %s/s ", p->label, (long long)done, unit, rate, unit);
        fflush(stderr);
        return;
    }
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    int width = 30, fill = total > 0 ? (int)(width * done / total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r%s [%s] %lld/%lld  %.1f %s/s  ETA %.0fs ", p->label, bar, (long long)done,
            (long long)total, rate, unit, eta);
    fflush(stderr);
}

void progress_done(struct progress *p)
{
    if (!p->enabled || !p->tty) return;
    fprintf(stderr, "\r%*s\r", 100, "");
    fflush(stderr);
}

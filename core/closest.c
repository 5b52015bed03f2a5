/* closest — Levenshtein distance and the nearest known word. */
#include "core/closest.h"

#include <string.h>

int qg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof cur);
    }
    return prev[lb];
}

const char *qg_closest(const char *word, const char *const *cands, int n)
{
    const char *best = NULL;
    int bestd = 1 << 30;
    for (int i = 0; i < n; i++) {
        int d = qg_edit_distance(word, cands[i]);
        if (strncmp(word, cands[i], strlen(word)) == 0 && strlen(word) >= 2) d = 1; /* prefix */
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    size_t len = strlen(word);
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return bestd <= limit ? best : NULL;
}

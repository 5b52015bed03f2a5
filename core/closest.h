/* closest — "did you mean": the known word nearest to a misspelt one.
 * Used for unknown commands, options and suite keys. */
#ifndef QG_CLOSEST_H
#define QG_CLOSEST_H

/* Edit distance in bytes, a swap of two neighbouring bytes counting as
 * one edit (optimal string alignment: "gaet" is 1 from "gate"); 99 for
 * words over 64 bytes. */
int qg_edit_distance(const char *a, const char *b);

/* The candidate closest to word when close enough to be a likely typo (or
 * word is a prefix of it); NULL otherwise. Returns one of cands. */
const char *qg_closest(const char *word, const char *const *cands, int n);

#endif

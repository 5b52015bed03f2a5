/* rng — the one pseudo-random generator of qgate: SplitMix64.
 *
 * Small, seedable, and the same on every platform, so a seeded bootstrap,
 * a sampled generation or a synthetic model is reproducible bit for bit.
 * The state is a plain uint64_t the caller owns; any value is a valid seed.
 */
#ifndef QG_RNG_H
#define QG_RNG_H

#include <stdint.h>

/* Advances *state and returns the next 64 random bits. */
uint64_t rng_next(uint64_t *state);

/* A double uniform in [0, 1) from the top 53 bits of rng_next. */
double rng_unit(uint64_t *state);

#endif

/* SPDX-License-Identifier: MIT */
/* backoff: capped exponential backoff with jitter, for registration retries. */
#ifndef KDP_BACKOFF_H
#define KDP_BACKOFF_H

#include <stdint.h>

typedef struct kdp__backoff {
    uint64_t min_us;
    uint64_t max_us;
    uint64_t cur_us; /* the next base delay */
    uint32_t seed;   /* xorshift state for the jitter */
} kdp__backoff;

/* min_us > 0, max_us >= min_us. seed 0 picks one from the clock. */
void kdp__backoff_init(kdp__backoff *b, uint64_t min_us, uint64_t max_us, uint32_t seed);
/* The next delay: the base delay (min, 2*min, 4*min ... capped at max) with
 * up to +-20% jitter, never below min nor above max. Doubles the base. */
uint64_t kdp__backoff_next(kdp__backoff *b);
/* Back to min after a success. */
void kdp__backoff_reset(kdp__backoff *b);

#endif

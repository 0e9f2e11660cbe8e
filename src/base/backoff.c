/* SPDX-License-Identifier: MIT */
#include "base/backoff.h"

#include <assert.h>
#include <time.h>

#define JITTER_DIV 5 /* +-20% */

static uint32_t clock_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t v = (uint64_t)ts.tv_sec * 1000000007U + (uint64_t)ts.tv_nsec;
    uint32_t s = (uint32_t)(v ^ (v >> 32));
    return s ? s : 0x9E3779B9U;
}

void kdp__backoff_init(kdp__backoff *b, uint64_t min_us, uint64_t max_us, uint32_t seed)
{
    assert(min_us > 0 && max_us >= min_us);
    if (min_us == 0) {
        min_us = 1;
    }
    if (max_us < min_us) {
        max_us = min_us;
    }
    b->min_us = min_us;
    b->max_us = max_us;
    b->cur_us = min_us;
    b->seed = seed ? seed : clock_seed();
}

/* xorshift32: never returns 0 from a non-zero state. */
static uint32_t next_rand(kdp__backoff *b)
{
    uint32_t x = b->seed;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b->seed = x;
    return x;
}

uint64_t kdp__backoff_next(kdp__backoff *b)
{
    uint64_t base = b->cur_us;
    uint64_t span = base / JITTER_DIV; /* the delay is in [base - span, base + span] */
    uint64_t delay = base;
    if (span > 0) {
        uint64_t hi = next_rand(b);
        uint64_t r = (hi << 32) | next_rand(b);
        uint64_t x = r % (span * 2 + 1); /* no overflow: span <= UINT64_MAX / 5 */
        if (x < span) {
            delay = base - (span - x);
        } else {
            x -= span;
            delay = x > UINT64_MAX - base ? UINT64_MAX : base + x;
        }
    }
    if (delay < b->min_us) {
        delay = b->min_us;
    }
    if (delay > b->max_us) {
        delay = b->max_us;
    }
    b->cur_us = base > b->max_us / 2 ? b->max_us : base * 2;
    return delay;
}

void kdp__backoff_reset(kdp__backoff *b)
{
    b->cur_us = b->min_us;
}

/* SPDX-License-Identifier: MIT */
/*
 * failmalloc.h: a failing allocator for the unit tests' ENOMEM paths, shared
 * by test_devices.c, test_response.c and test_discover.c. Include it from exactly one file of
 * a test executable (it defines malloc and friends), after cmocka.
 */
#ifndef KDP_TEST_FAILMALLOC_H
#define KDP_TEST_FAILMALLOC_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* --- a failing allocator for the ENOMEM paths: glibc lets a program replace
 * malloc. Not under ASan or TSan, whose allocators must stay (the OOM tests
 * skip there, the others run). valgrind replaces ours
 * unless run with --soname-synonyms=somalloc=nouserintercepts (it then still
 * checks every block through __libc_malloc); otherwise the OOM test skips. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NO_OOM_INJECTION 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NO_OOM_INJECTION 1
#endif
#endif

static long oom_countdown = -1; /* allocations left before failing; -1 = never */
/* Called with every block about to be freed and its usable size (a test
 * that checks what is left in freed memory); NULL = none. Not under the
 * sanitizers (their allocators stay): such a test skips there. */
static void (*free_hook)(const void *p, size_t size);

#ifndef NO_OOM_INJECTION
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static bool oom_now(void)
{
    if (oom_countdown < 0) {
        return false;
    }
    if (oom_countdown == 0) {
        errno = ENOMEM; /* as malloc does: opendir() and the like pass it on */
        return true;
    }
    oom_countdown--;
    return false;
}

void *malloc(size_t n)
{
    return oom_now() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    return oom_now() ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    return oom_now() ? NULL : __libc_realloc(p, n);
}

size_t malloc_usable_size(void *p);

void free(void *p)
{
    if (free_hook && p) {
        free_hook(p, malloc_usable_size(p));
    }
    __libc_free(p);
}
#endif

/* True if failing allocations can be injected in this build and run. */
static bool oom_works(void)
{
    void *(*volatile alloc)(size_t) = malloc;
    oom_countdown = 0;
    void *p = alloc(16);
    oom_countdown = -1;
    free(p);
    return p == NULL;
}

/* Runs call with the k-th allocation failing, k = 0, 1, ... until it
 * succeeds; each failure must be -ENOMEM, after which on_fail checks that
 * nothing changed. */
#define OOM_LOOP(call, on_fail)                                                                    \
    for (long k_ = 0;; k_++) {                                                                     \
        oom_countdown = k_;                                                                        \
        int r_ = (call);                                                                           \
        oom_countdown = -1;                                                                        \
        if (r_ == 0) {                                                                             \
            assert_true(k_ > 0);                                                                   \
            break;                                                                                 \
        }                                                                                          \
        assert_int_equal(r_, -ENOMEM);                                                             \
        on_fail;                                                                                   \
    }

#endif

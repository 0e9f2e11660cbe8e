/* SPDX-License-Identifier: MIT */
/* The lifecycle's transitions: what the table allows, and the one setter
 * that refuses the rest and keeps the state. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "kdp.h"
#include "plugin/lcstate.h"

static int refusals; /* "internal error" lines */

static void sink(kdp_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == KDP_LOG_ERROR && strstr(msg, "internal error: no transition")) {
        refusals++;
    }
}

static void test_table(void **state)
{
    (void)state;
    assert_true(kdp__lcstate_allowed(KDP__LC_IDLE, KDP__LC_STARTING));
    assert_true(kdp__lcstate_allowed(KDP__LC_IDLE, KDP__LC_STOPPED));
    assert_false(kdp__lcstate_allowed(KDP__LC_IDLE, KDP__LC_REGISTERED));
    assert_false(kdp__lcstate_allowed(KDP__LC_STARTING, KDP__LC_REGISTERED)); /* register first */
    assert_true(kdp__lcstate_allowed(KDP__LC_REGISTERED, KDP__LC_STARTING));  /* a restart */
    assert_true(kdp__lcstate_allowed(KDP__LC_WAITING, KDP__LC_STOPPING));
    assert_false(kdp__lcstate_allowed(KDP__LC_WAITING, KDP__LC_STOPPED)); /* through STOPPING */
    assert_false(kdp__lcstate_allowed(KDP__LC_STOPPING, KDP__LC_STARTING));
    for (int to = KDP__LC_IDLE; to <= KDP__LC_STOPPED; to++) {
        assert_false(kdp__lcstate_allowed(KDP__LC_STOPPED, (kdp__lc_state)to)); /* the end */
        assert_false(kdp__lcstate_allowed((kdp__lc_state)to, KDP__LC_IDLE));    /* no way back */
    }
}

static void test_set(void **state)
{
    (void)state;
    _Atomic kdp__lc_state s = KDP__LC_IDLE;
    kdp__lcstate_set(&s, "r", KDP__LC_REGISTERED, "test");
    assert_int_equal(atomic_load(&s), KDP__LC_IDLE); /* refused, kept, said */
    assert_int_equal(refusals, 1);
    kdp__lcstate_set(&s, "r", KDP__LC_STARTING, "test");
    kdp__lcstate_set(&s, "r", KDP__LC_STARTING, "again"); /* a retry */
    assert_int_equal(atomic_load(&s), KDP__LC_STARTING);
    kdp__lcstate_set(&s, "r", KDP__LC_REGISTERING, "test");
    kdp__lcstate_set(&s, "r", KDP__LC_REGISTERED, "test");
    assert_true(kdp__lcstate_serving(atomic_load(&s)));
    kdp__lcstate_set(&s, "r", KDP__LC_STOPPED, "test");
    assert_int_equal(atomic_load(&s), KDP__LC_REGISTERED);
    assert_int_equal(refusals, 2);
    kdp__lcstate_set(&s, "r", KDP__LC_STOPPING, "test");
    assert_false(kdp__lcstate_serving(atomic_load(&s)));
    kdp__lcstate_set(&s, "r", KDP__LC_STOPPED, "test");
    assert_int_equal(atomic_load(&s), KDP__LC_STOPPED);
    assert_int_equal(refusals, 2);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, sink, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

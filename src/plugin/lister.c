/* SPDX-License-Identifier: MIT */
/* lister: the runs of the list op (see lister.h). */
#include "plugin/lister.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define LIST_RETRY_MIN_US (100ULL * 1000ULL)
#define LIST_RETRY_MAX_US (30ULL * 1000000ULL)

/* The timer: the retry of a failed list (with backoff), else the periodic
 * rescan if there is one. Only while serving. */
static void arm_rescan(kdp__lister *ls)
{
    if (!ls->fn) {
        return;
    }
    if (ls->serving && ls->error) {
        kdp__timer_start(ls->timer, ls->retry_us);
    } else if (ls->serving && ls->rescan_ms) {
        kdp__timer_start(ls->timer, (uint64_t)ls->rescan_ms * 1000U);
    } else {
        kdp__timer_stop(ls->timer);
    }
}

/* A list call failed (err: its -errno), or could not be made: call it again
 * with backoff, and say so. */
static void list_failed(kdp__lister *ls, int err)
{
    ls->error = err;
    ls->retry_us = kdp__backoff_next(&ls->backoff);
    ls->cbs.status(ls->cbs.ud);
    size_t told = ls->cbs.told(ls->cbs.ud);
    if (told > 0) {
        log_warn("%s: keeping the previous device list (%zu devices); calling the list "
                 "callback again in %llu ms",
                 ls->resource, told, (unsigned long long)(ls->retry_us / 1000));
    } else {
        log_warn("%s: no device list yet (the kubelet is told of no devices); calling the list "
                 "callback again in %llu ms",
                 ls->resource, (unsigned long long)(ls->retry_us / 1000));
    }
}

static void fn_list(kdp__pjob *j)
{
    kdp__lister *ls = j->owner;
    kdp_device_list *list = j->data;
    j->result = kdp__pjob_checked(j, ls->fn(ls->owner, list, ls->fn_ud));
}

static void cleanup_list(kdp__pjob *j)
{
    kdp_device_list *list = j->data;
    if (list) {
        kdp__devtab_clear(&list->tab);
        free(list);
    }
}

static void complete_list(kdp__pjob *j, bool timed_out)
{
    kdp__lister *ls = j->owner;
    bool for_start = ls->start_job == j;
    ls->start_job = NULL;
    ls->running = false;
    if (timed_out || j->result < 0) {
        if (!timed_out) { /* a timeout was logged by the deadline already */
            log_error("%s: list callback failed: %s%s%s", ls->resource, strerror(-j->result),
                      j->has_msg ? ": " : "", j->has_msg ? j->msg : "");
        }
        ls->cbs.listing(ls->cbs.ud, false);
        list_failed(ls, timed_out ? -ETIMEDOUT : j->result);
    } else {
        kdp_device_list *list = j->data;
        int r = ls->cbs.check(ls->cbs.ud, &list->tab);
        if (r < 0) {
            list_failed(ls, r);
            goto done;
        }
        bool was_failing = ls->error != 0;
        ls->error = 0;
        kdp__backoff_reset(&ls->backoff);
        ls->cbs.result(ls->cbs.ud, &list->tab);
        ls->cbs.status(ls->cbs.ud);
        if (was_failing) {
            log_info("%s: the list callback succeeded again", ls->resource);
        }
    }
done:
    if (for_start) {
        ls->cbs.start_listed(ls->cbs.ud);
        return;
    }
    arm_rescan(ls);
    if (atomic_load(&ls->wanted)) {
        ls->cbs.sync(ls->cbs.ud); /* asked again while this list ran */
    }
}

static int run_list(kdp__lister *ls, bool for_start)
{
    kdp__pjob *j = kdp__pjob_new(ls->jobs, "list", ls);
    kdp_device_list *list = calloc(1, sizeof(*list));
    if (!j || !list) {
        free(j);
        free(list);
        return -ENOMEM;
    }
    kdp__devtab_init(&list->tab);
    j->data = list;
    j->fn = fn_list;
    j->cleanup = cleanup_list;
    j->complete = complete_list;
    ls->running = true;
    ls->cbs.listing(ls->cbs.ud, true);
    if (for_start) {
        ls->start_job = j;
        atomic_store(&ls->wanted, false); /* this list is a fresh one */
    }
    int r = kdp__pjob_submit(j, 0);
    if (r < 0) {
        ls->running = false;
        ls->start_job = NULL;
        ls->cbs.listing(ls->cbs.ud, false);
    }
    return r;
}

int kdp__lister_start(kdp__lister *ls)
{
    int r = run_list(ls, true);
    if (r < 0) {
        log_error("%s: cannot run the list callback: %s", ls->resource, strerror(-r));
        list_failed(ls, r);
    }
    return r;
}

void kdp__lister_serving(kdp__lister *ls, bool on)
{
    ls->serving = on;
    arm_rescan(ls);
}

void kdp__lister_want(kdp__lister *ls)
{
    atomic_store(&ls->wanted, true);
}

void kdp__lister_poll(kdp__lister *ls)
{
    if (ls->fn && ls->serving && !ls->running && atomic_exchange(&ls->wanted, false)) {
        int r = run_list(ls, false);
        if (r < 0) {
            log_error("%s: cannot run the list callback: %s", ls->resource, strerror(-r));
            list_failed(ls, r);
            arm_rescan(ls);
        }
    }
}

static void on_rescan(kdp__timer *tm, void *ud)
{
    (void)tm;
    kdp__lister *ls = ud;
    atomic_store(&ls->wanted, true);
    ls->cbs.sync(ls->cbs.ud); /* the list's completion arms the timer again */
}

void kdp__lister_init(kdp__lister *ls, const char *resource, kdp__jobs *jobs, kdp_plugin *owner,
                      kdp_list_fn fn, void *fn_ud, unsigned rescan_ms, const kdp__lister_cbs *cbs)
{
    memset(ls, 0, sizeof(*ls));
    ls->resource = resource;
    ls->jobs = jobs;
    ls->owner = owner;
    ls->fn = fn;
    ls->fn_ud = fn_ud;
    ls->rescan_ms = rescan_ms;
    ls->cbs = *cbs;
    atomic_init(&ls->wanted, false);
    kdp__backoff_init(&ls->backoff, LIST_RETRY_MIN_US, LIST_RETRY_MAX_US, 0);
}

int kdp__lister_init_loop(kdp__lister *ls, kdp__loop *l)
{
    return kdp__timer_new(l, on_rescan, ls, &ls->timer);
}

void kdp__lister_release_loop(kdp__lister *ls)
{
    kdp__timer_free(ls->timer);
    ls->timer = NULL;
}

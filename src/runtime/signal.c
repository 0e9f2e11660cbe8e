/* SPDX-License-Identifier: MIT */
/* signal: signal handlers on the loop, through one lazily created signalfd;
 * the signals it blocks are unblocked again when no handler wants them. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/loop.h"
#include "runtime/loop_int.h"

#define MAX_SIGINFO 8

/* --- signals --- */

static bool signo_in_use(const kdp__loop *l, int signo)
{
    const kdp__link *it;
    kdp__list_for_each(it, &l->objs[KDP__OBJ_SIGNAL])
    {
        const struct kdp__obj *o = KDP__OBJ_OF(it);
        if (!o->dead && ((const kdp__signal *)o)->signo == signo) {
            return true;
        }
    }
    return false;
}

/* Unblocks signo if we blocked it. Pending instances are discarded first:
 * unblocking would otherwise run the default action, which for most signals
 * kills the process. */
static void unblock_signo(kdp__loop *l, int signo)
{
    if (!sigismember(&l->sig_blocked, signo)) {
        return;
    }
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    const struct timespec zero = {0, 0};
    int saved = errno;
    while (sigtimedwait(&one, NULL, &zero) == signo) {
    }
    errno = saved;
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    sigdelset(&l->sig_blocked, signo);
}

void kdp__loop_restore_sigmask(kdp__loop *l)
{
    for (int signo = 1; signo <= SIGRTMAX; signo++) {
        if (sigismember(&l->sig_blocked, signo) == 1) {
            unblock_signo(l, signo);
        }
    }
}

/* Points the signalfd at mask, creating it on first use. */
static int signalfd_set(kdp__loop *l, const sigset_t *mask)
{
    if (l->sfd >= 0) {
        return signalfd(l->sfd, mask, 0) < 0 ? -errno : 0;
    }
    int fd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = kdp__loop_add_src(l, fd, &l->sfd_src, KDP__SRC_SIGNALFD);
    if (r < 0) {
        close(fd);
        return r;
    }
    l->sfd = fd;
    return 0;
}

/* Adds signo to the signalfd mask, blocking it first. */
static int watch_signo(kdp__loop *l, int signo)
{
    sigset_t one;
    sigset_t old;
    sigset_t mask = l->sigmask;
    sigemptyset(&one);
    sigaddset(&one, signo);
    sigaddset(&mask, signo);
    int r = pthread_sigmask(SIG_BLOCK, &one, &old);
    if (r != 0) {
        return -r;
    }
    r = signalfd_set(l, &mask);
    if (r < 0) {
        if (!sigismember(&old, signo)) {
            pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        }
        return r;
    }
    if (!sigismember(&old, signo)) {
        sigaddset(&l->sig_blocked, signo);
    }
    l->sigmask = mask;
    return 0;
}

int kdp__signal_add(kdp__loop *l, int signo, kdp__signal_cb cb, void *ud, kdp__signal **ret)
{
    if (!l || !cb || !ret || signo <= 0 || signo > SIGRTMAX || signo == SIGKILL ||
        signo == SIGSTOP) {
        return -EINVAL;
    }
    kdp__signal *s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    if (!sigismember(&l->sigmask, signo)) {
        int r = watch_signo(l, signo);
        if (r < 0) {
            free(s);
            return r;
        }
    }
    s->signo = signo;
    s->cb = cb;
    s->ud = ud;
    kdp__loop_obj_link(l, &s->o, KDP__OBJ_SIGNAL);
    *ret = s;
    return 0;
}

void kdp__signal_free(kdp__signal *s)
{
    if (!s) {
        return;
    }
    kdp__loop *l = s->o.loop;
    int signo = s->signo;
    kdp__loop_obj_release(&s->o); /* s is dead or gone: it no longer counts */
    if (!signo_in_use(l, signo)) {
        sigdelset(&l->sigmask, signo);
        /* Cannot fail for an existing signalfd and a valid mask. */
        (void)signalfd(l->sfd, &l->sigmask, 0);
        unblock_signo(l, signo);
    }
}

static void call_handlers(kdp__loop *l, int signo, int *calls)
{
    kdp__link *last = l->objs[KDP__OBJ_SIGNAL].prev; /* not handlers added meanwhile */
    kdp__link *it;
    kdp__list_for_each(it, &l->objs[KDP__OBJ_SIGNAL])
    {
        struct kdp__obj *o = KDP__OBJ_OF(it);
        kdp__signal *s = (kdp__signal *)o;
        if (!o->dead && s->signo == signo) {
            s->cb(s, signo, s->ud);
            (*calls)++;
        }
        if (it == last) {
            break;
        }
    }
}

int kdp__loop_run_signals(kdp__loop *l)
{
    struct signalfd_siginfo si[MAX_SIGINFO];
    ssize_t n = read(l->sfd, si, sizeof(si));
    int calls = 0;
    for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(si[0]); i++) {
        call_handlers(l, (int)si[i].ssi_signo, &calls);
    }
    return calls;
}

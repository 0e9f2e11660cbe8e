/* SPDX-License-Identifier: MIT */
/*
 * lifecycle_up: what the parts say to the lifecycle (see lifecycle.h), the
 * callbacks it hands them: the registration strategy's state, attempts,
 * failures and restarts (kdp__reg_up), the services' news of the kubelet's
 * stream (kdp__svc_up), the directory's events (kdp__pdir_cbs), and the
 * handover's verdict that a newer instance took over. Each one turns into
 * a state change, a restart (deferred: kdp__lifecycle_restart) or a start
 * made sooner; the state machine itself is lifecycle.c's.
 */
#include <string.h>

#include "base/log.h"
#include "plugin/endpoint.h"
#include "plugin/lifecycle_int.h"
#include "runtime/watch.h"

/* Something says starting now is worth it (the directory is back, a new
 * kubelet): if a start is waiting, it goes. */
static void start_now_if_waiting(kdp__lifecycle *lc, const char *why)
{
    if (kdp__timer_armed(lc->start_timer) && lc->pending != KDP__LC_PENDING_STOP) {
        log_info("%s: %s: starting now", lc->cfg.resource, why);
        kdp__timer_start(lc->start_timer, 0);
    }
}

/* Our socket file is still there and still the one we listen on. */
static bool own_socket_intact(const kdp__lifecycle *lc)
{
    return kdp__endpoint_intact(lc->server, lc->cfg.socket_path);
}

/* ---- the handover ---- */

/* A newer instance registered: the plugin stops as kdp_plugin_stop() would,
 * from a zero-delay timer (never under the feet of the code that noticed). */
void kdp__lifecycle_superseded(kdp__lifecycle *lc, const char *who)
{
    log_info("%s: superseded by %s, which registered: stopping (this instance's socket %s "
             "removed, the other one's left alone)",
             lc->cfg.resource, who, lc->cfg.socket_name);
    kdp_plugin_status *st = kdp__status_lock(lc->cfg.status);
    st->superseded = true;
    kdp__status_unlock(lc->cfg.status);
    kdp__timer_start(lc->supersede_timer, 0);
}

/* A newer instance of this plugin has registered (handover.h): stop
 * quietly, as kdp_plugin_stop() would, never touching its socket. */
static void handover_check(kdp__lifecycle *lc, bool just_registered)
{
    kdp__handover *h = lc->cfg.handover;
    char who[512];
    if (!h || !h->on || kdp__lifecycle_state(lc) != KDP__LC_REGISTERED) {
        return;
    }
    int r = just_registered ? kdp__handover_registered(h, who, sizeof(who))
                            : kdp__handover_changed(h, who, sizeof(who));
    if (r == 1) {
        kdp__lifecycle_superseded(lc, who);
    }
}

/* ---- the registration strategy ---- */

static void reg_state(void *ud, kdp__reg_state st, const char *why)
{
    kdp__lifecycle *lc = ud;
    switch (st) {
    case KDP__REG_WAITING:
        kdp__lifecycle_set_state(lc, KDP__LC_WAITING, why);
        break;
    case KDP__REG_REGISTERING:
        kdp__lifecycle_set_state(lc, KDP__LC_REGISTERING, why);
        break;
    case KDP__REG_REGISTERED:
        if (lc->cfg.stats) {
            kdp__count(&lc->cfg.stats->registrations, 1);
        }
        kdp__status_lock(lc->cfg.status);
        lc->cfg.status->reg_error[0] = '\0';
        kdp__status_unlock(lc->cfg.status);
        kdp__restarts_registered(&lc->restarts, kdp__now_us());
        kdp__backoff_reset(&lc->backoff);
        kdp__lifecycle_set_state(lc, KDP__LC_REGISTERED, why);
        if (lc->peer_connected) { /* the plugin watcher: the stream came first */
            handover_check(lc, true);
        }
        break;
    }
}

static void reg_attempt(void *ud, bool sent)
{
    kdp__lifecycle *lc = ud;
    for (size_t i = 0; i < lc->cfg.n_svcs; i++) {
        lc->cfg.svcs[i]->ops->expect_peer(lc->cfg.svcs[i], sent);
    }
}

static void reg_failed(void *ud, const char *reason)
{
    kdp__lifecycle *lc = ud;
    if (lc->cfg.stats) {
        kdp__count(&lc->cfg.stats->registration_failures, 1);
    }
    kdp__status *s = lc->cfg.status;
    kdp__status_lock(s);
    size_t n = 0;
    for (; reason[n] && n < sizeof(s->reg_error) - 1; n++) {
        unsigned char c = (unsigned char)reason[n];
        s->reg_error[n] = (char)(c < ' ' || c == 0x7f ? ' ' : c);
    }
    s->reg_error[n] = '\0';
    kdp__status_unlock(s);
}

static void reg_restart(void *ud, const char *why)
{
    kdp__lifecycle_restart(ud, why);
}

static void reg_peer_appeared(void *ud)
{
    start_now_if_waiting(ud, KDP_KUBELET_SOCKET " appeared (a new kubelet)");
}

static bool reg_socket_intact(void *ud)
{
    return own_socket_intact(ud);
}

kdp__reg_up kdp__lifecycle_reg_up(kdp__lifecycle *lc)
{
    return (kdp__reg_up){
        .state = reg_state,
        .attempt = reg_attempt,
        .restart = reg_restart,
        .peer_appeared = reg_peer_appeared,
        .socket_intact = reg_socket_intact,
        .failed = reg_failed,
        .ud = lc,
    };
}

/* ---- the services ---- */

static void svc_peer_gone(void *ud, const char *why)
{
    kdp__lifecycle *lc = ud;
    kdp__lc_state s = kdp__lifecycle_state(lc);
    if (s != KDP__LC_REGISTERING && s != KDP__LC_REGISTERED) {
        return;
    }
    lc->peer_connected = false;
    kdp__reg *reg = lc->cfg.reg;
    if (reg->ops->peer_gone && reg->ops->peer_gone(reg, why)) {
        return;
    }
    kdp__lifecycle_restart(lc, why);
}

/* The kubelet's stream began. The handover waits for it rather than for
 * the registration alone: an older instance that stopped between the two
 * would make a kubelet tracking plugins by resource name cut this one
 * before its stream opened. */
static void svc_peer_connected(void *ud)
{
    kdp__lifecycle *lc = ud;
    lc->peer_connected = true;
    handover_check(lc, true);
}

kdp__svc_up kdp__lifecycle_svc_up(kdp__lifecycle *lc)
{
    return (kdp__svc_up){
        .peer_gone = svc_peer_gone, .peer_connected = svc_peer_connected, .ud = lc};
}

/* ---- the directory ---- */

static void dir_event(void *ud, int what, const char *name)
{
    kdp__lifecycle *lc = ud;
    kdp__lifecycle_cfg *c = &lc->cfg;
    c->reg->ops->dir_event(c->reg, what, name); /* in every state */
    if (what == KDP__WATCH_GONE) {
        if (kdp__lifecycle_serving(lc)) {
            kdp__lifecycle_restart(lc, "the device-plugin directory was removed");
        }
        return;
    }
    if (what == KDP__WATCH_CREATED && c->handover && kdp__handover_is_marker(c->handover, name)) {
        handover_check(lc, false);
        return;
    }
    if (!kdp__lifecycle_serving(lc) || what != KDP__WATCH_DELETED || !name) {
        return;
    }
    if (kdp__lockfile_held(c->lock) && kdp__lockfile_is(c->lock, name)) {
        /* Kubelets up to 1.24 delete every file in the directory when they
         * start, our lock file included: take a fresh one. */
        kdp__lockfile_relock(c->lock);
    } else if (strcmp(name, c->socket_name) == 0 && !own_socket_intact(lc)) {
        kdp__lifecycle_restart(lc, "our socket was deleted (the kubelet restarted)");
    }
}

static void dir_back(void *ud)
{
    start_now_if_waiting(ud, "the device-plugin directory is back");
}

kdp__pdir_cbs kdp__lifecycle_dir_cbs(kdp__lifecycle *lc)
{
    return (kdp__pdir_cbs){.event = dir_event, .back = dir_back, .ud = lc};
}

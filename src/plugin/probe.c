/* SPDX-License-Identifier: MIT */
#include "plugin/probe.h"

#include <errno.h>

#include "base/log.h"
#include "plugin/jobs.h"

/* Counts stop here (a device failing for years must not wrap to 0). */
#define COUNT_MAX 1000000U

/* ---- the hysteresis (pure) ---- */

int kdp__probe_cfg_from(const kdp_config *cfg, kdp__probe_cfg *ret)
{
    kdp__probe_cfg c = {
        .interval_ms =
            cfg->probe_interval_ms ? cfg->probe_interval_ms : KDP__PROBE_DEFAULT_INTERVAL_MS,
        .unhealthy_after =
            cfg->probe_unhealthy_after ? cfg->probe_unhealthy_after : KDP__PROBE_DEFAULT_UNHEALTHY,
        .healthy_after =
            cfg->probe_healthy_after ? cfg->probe_healthy_after : KDP__PROBE_DEFAULT_HEALTHY,
        .down = cfg->probe_down,
    };
    if (c.interval_ms < KDP__PROBE_MIN_INTERVAL_MS || c.interval_ms > KDP__PROBE_MAX_INTERVAL_MS) {
        log_error("invalid kdp_config.probe_interval_ms %u: 0 (the default, %u ms), or from %u ms "
                  "to %u ms (a day)",
                  cfg->probe_interval_ms, KDP__PROBE_DEFAULT_INTERVAL_MS,
                  KDP__PROBE_MIN_INTERVAL_MS, KDP__PROBE_MAX_INTERVAL_MS);
        return -EINVAL;
    }
    if (c.unhealthy_after > KDP__PROBE_MAX_AFTER) {
        log_error("invalid kdp_config.probe_unhealthy_after %u: 0 (the default, %u) to %u",
                  cfg->probe_unhealthy_after, KDP__PROBE_DEFAULT_UNHEALTHY, KDP__PROBE_MAX_AFTER);
        return -EINVAL;
    }
    if (c.healthy_after > KDP__PROBE_MAX_AFTER) {
        log_error("invalid kdp_config.probe_healthy_after %u: 0 (the default, %u) to %u",
                  cfg->probe_healthy_after, KDP__PROBE_DEFAULT_HEALTHY, KDP__PROBE_MAX_AFTER);
        return -EINVAL;
    }
    if (c.down != KDP_PROBE_DOWN_UNHEALTHY && c.down != KDP_PROBE_DOWN_KEEP) {
        log_error("invalid kdp_config.probe_down %d: KDP_PROBE_DOWN_UNHEALTHY or "
                  "KDP_PROBE_DOWN_KEEP",
                  (int)cfg->probe_down);
        return -EINVAL;
    }
    unsigned callback_ms =
        cfg->callback_timeout_ms ? cfg->callback_timeout_ms : KDP__DEFAULT_CB_TIMEOUT_MS;
    c.timeout_ms = cfg->probe_timeout_ms;
    if (c.timeout_ms == 0) {
        c.timeout_ms = callback_ms < KDP__PROBE_DEFAULT_TIMEOUT_MS ? callback_ms
                                                                   : KDP__PROBE_DEFAULT_TIMEOUT_MS;
    } else if (c.timeout_ms > callback_ms) {
        log_error("invalid kdp_config.probe_timeout_ms %u: 0 (the default: %u ms, or the callback "
                  "deadline if shorter), or at most the callback deadline (callback_timeout_ms, "
                  "%u ms)",
                  cfg->probe_timeout_ms, KDP__PROBE_DEFAULT_TIMEOUT_MS, callback_ms);
        return -EINVAL;
    }
    *ret = c;
    return 0;
}

kdp__probe_answer kdp__probe_classify(int result)
{
    if (result == KDP_PROBE_HEALTHY) {
        return KDP__PROBE_OK;
    }
    return result == KDP_PROBE_DOWN ? KDP__PROBE_DOWN : KDP__PROBE_FAIL;
}

static uint32_t bump(uint32_t v)
{
    return v < COUNT_MAX ? v + 1 : v;
}

kdp__probe_turn kdp__probe_step(kdp__devprobe *s, kdp__probe_answer a, const kdp__probe_cfg *c)
{
    switch (a) {
    case KDP__PROBE_OK:
        s->fails = 0;
        s->oks = bump(s->oks);
        if (s->bad && s->oks >= c->healthy_after) {
            s->bad = false;
            return KDP__PROBE_TURNED_HEALTHY;
        }
        return KDP__PROBE_SAME;
    case KDP__PROBE_FAIL:
        s->oks = 0;
        s->fails = bump(s->fails);
        if (!s->bad && s->fails >= c->unhealthy_after) {
            s->bad = true;
            return KDP__PROBE_TURNED_UNHEALTHY;
        }
        return KDP__PROBE_SAME;
    case KDP__PROBE_DOWN:
        if (c->down == KDP_PROBE_DOWN_KEEP) {
            return KDP__PROBE_SAME; /* counts neither way */
        }
        s->oks = 0; /* back only after healthy_after successes */
        if (!s->bad) {
            s->bad = true;
            return KDP__PROBE_TURNED_UNHEALTHY;
        }
        return KDP__PROBE_SAME;
    }
    return KDP__PROBE_SAME;
}

/* SPDX-License-Identifier: MIT */
/* lifecycle: the plugin's state machine (see lifecycle.c). Loop thread only. */
#ifndef KDP_LIFECYCLE_H
#define KDP_LIFECYCLE_H

#include "plugin/plugin_int.h"

/* lock -> refresh -> list -> serve -> register. */
void kdp__plugin_start(kdp_plugin *p);
/* destroy, then start again; coalesces with a restart already under way. */
void kdp__plugin_restart(kdp_plugin *p, const char *why);
/* stop serving, destroy, release the lock; the ctx is told when done. */
void kdp__plugin_begin_stop(kdp_plugin *p);
/* Synchronous stop for kdp_plugin_free(), in two halves around freeing the
 * worker: first the server (its calls' jobs are abandoned while the worker
 * still exists), then, with no callback running any more, destroy (on this
 * thread, only if its job never started), the watches and the lock. */
void kdp__plugin_teardown_serving(kdp_plugin *p);
void kdp__plugin_teardown_finish(kdp_plugin *p);
/* Applies a newer shared table (and a wanted rescan). */
void kdp__plugin_sync(kdp_plugin *p);
/* ListAndWatch streams coming and going (the kubelet's one ending restarts). */
void kdp__plugin_law_opened(kdp_plugin *p, law *l);
void kdp__plugin_law_ended(kdp_plugin *p, law *l);
/* Timer callbacks. */
void kdp__plugin_on_retry(kdp__timer *t, void *ud);
void kdp__plugin_on_rescan(kdp__timer *t, void *ud);
void kdp__plugin_on_restart(kdp__timer *t, void *ud);

#endif

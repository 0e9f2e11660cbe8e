/* SPDX-License-Identifier: MIT */
/*
 * plugin: what other modules may know of a kdp_plugin (its struct is
 * plugin_int.h, for plugin.c and white-box tests only): its loop and
 * context, and things attached to it that it frees with itself.
 */
#ifndef KDP_PLUGIN_H
#define KDP_PLUGIN_H

#include "base/list.h"
#include "kdp.h"
#include "runtime/loop.h"

/* Something that lives as long as a plugin at most (a hot-plug watch):
 * kdp_plugin_free() calls free for each one still attached. */
typedef struct kdp__attachment {
    kdp__link link;
    void (*free)(struct kdp__attachment *a);
} kdp__attachment;

void kdp__plugin_attach(kdp_plugin *p, kdp__attachment *a);
void kdp__plugin_detach(kdp__attachment *a);
kdp__loop *kdp__plugin_loop(const kdp_plugin *p);
kdp_ctx *kdp__plugin_ctx(const kdp_plugin *p);

#endif

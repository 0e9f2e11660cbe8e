/* SPDX-License-Identifier: MIT */
/*
 * handover: two instances of one plugin at once (a DaemonSet rolling update
 * with maxSurge), each on its own socket ("<stem>-<instance>.sock"). The
 * instance that registers writes a marker next to the sockets,
 * ".<stem>.newest" (instance, generation, socket); an older instance that
 * sees a newer one's marker, and that instance's socket alive, stops
 * quietly: its own socket removed, the other one's never touched.
 *
 * Newer: a higher generation (kdp_config.generation, $KDP_GENERATION: the
 * DaemonSet's pod-template-generation), then, for equal generations, the
 * later registration. An instance that registers while the marker names a
 * live instance of a higher generation stops at once (an old pod's
 * container restarted during the update never takes over); one that sees
 * the marker name a lower generation writes its own again.
 */
#ifndef KDP_HANDOVER_H
#define KDP_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest instance ID (kdp_config.instance, $KDP_INSTANCE). */
#define KDP__INSTANCE_MAX 64

typedef struct kdp__handover {
    bool on; /* an instance was given */
    const char *resource;
    char *instance;
    uint64_t generation;
    char *dir;
    char *socket_name; /* ours, "<stem>-<instance>.sock" */
    char *stem_of;     /* the configured socket name the stem comes from */
    char *marker_name; /* ".<stem>.newest" */
    char *marker_path;
} kdp__handover;

/* The socket name for stem (a socket name, ".sock" dropped) and instance
 * (NULL: no handover, the name as it is). Returns a malloc'ed name, or NULL
 * (out of memory). */
char *kdp__handover_socket_name(const char *socket_name, const char *instance);

/* Checks an instance ID: 1-64 of [A-Za-z0-9_.-], not starting with '.'.
 * Returns 0 or -EINVAL (*why says why). */
int kdp__handover_check_instance(const char *instance, const char **why);

/* instance NULL: off (every call below does nothing). */
int kdp__handover_init(kdp__handover *h, const char *resource, const char *dir,
                       const char *socket_name, const char *stem_of, const char *instance,
                       uint64_t generation);
void kdp__handover_done(kdp__handover *h);

/* name (a file in the directory) is the marker. */
bool kdp__handover_is_marker(const kdp__handover *h, const char *name);

/* Before registering: 1 if the marker names a live instance of a higher
 * generation (we stop without registering: *who names it), else 0. */
int kdp__handover_outranked(kdp__handover *h, char *who, size_t cap);

/* We registered: 1 if the marker names a live instance of a higher
 * generation (we yield: *who names it), else 0 after writing the marker
 * ours (or -errno if it could not be written: logged, no handover). */
int kdp__handover_registered(kdp__handover *h, char *who, size_t cap);

/* The marker changed while we are registered: 1 if it names another live
 * instance that is newer (we yield: *who names it), else 0 (a marker that
 * names an older generation is written ours again). */
int kdp__handover_changed(kdp__handover *h, char *who, size_t cap);

#endif

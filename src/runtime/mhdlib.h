/* SPDX-License-Identifier: MIT */
/*
 * mhdlib: libmicrohttpd, loaded when the first endpoint starts (dlopen), so
 * that a program linking kdp does not load it, and gnutls with the nine
 * libraries gnutls needs, unless it serves metrics: 10 shared libraries,
 * about 2.5 MB of RSS at idle and 1 ms from exec to Register saved.
 */
#ifndef KDP_RUNTIME_MHDLIB_H
#define KDP_RUNTIME_MHDLIB_H

#ifdef KDP_HAVE_MHD
#include <microhttpd.h>

/* The functions kdp uses, valid once kdp__mhd_ready() returned 0. */
struct kdp__mhd_fns {
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_run) *run;
    __typeof__(MHD_get_timeout) *get_timeout;
    __typeof__(MHD_get_daemon_info) *get_daemon_info;
    __typeof__(MHD_add_connection) *add_connection;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_destroy_response) *destroy_response;
    __typeof__(MHD_lookup_connection_value) *lookup_connection_value;
    __typeof__(MHD_get_connection_info) *get_connection_info;
};
extern struct kdp__mhd_fns kdp__mhd;

/* Loads the library once. 0, or -ENOTSUP after a log line naming what to
 * install. Any thread. */
int kdp__mhd_ready(void);
#endif

#endif

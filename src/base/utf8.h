/* SPDX-License-Identifier: MIT */
/*
 * utf8: UTF-8 as the peers check it (a protobuf string, a JSON document):
 * the length of one valid sequence, and a bounded copy that is valid
 * whatever the input. Invalid means a byte that does not start a sequence,
 * a stray continuation byte, a sequence cut short, overlong, a surrogate or
 * over U+10FFFF.
 */
#ifndef KDP_BASE_UTF8_H
#define KDP_BASE_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one
 * (s is NUL-terminated: a sequence never runs past the NUL). */
size_t kdp__utf8_len(const unsigned char *s);
/* Copies src into dst (cap > 0), NUL-terminated: valid sequences as they
 * are, each invalid byte as U+FFFD, cut at a whole sequence where cap is
 * short. Returns the bytes written (without the NUL). */
size_t kdp__utf8_copy(char *dst, size_t cap, const char *src);

#endif

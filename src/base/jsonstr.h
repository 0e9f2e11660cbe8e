/* SPDX-License-Identifier: MIT */
/*
 * jsonstr: a JSON string literal (RFC 8259), the one escaper of kdp: the CDI
 * specs kdp writes (discovery/cdi), kdpctl and kdp-generic. '"' and '\' are escaped, '\n', '\r' and
 * '\t' take their short forms, every other control character and DEL is written \u00XX (lower-case
 * hex), valid UTF-8 is copied as it is, and a byte that does not start a valid UTF-8 sequence (a
 * stray continuation byte, a sequence cut short, overlong, a surrogate, over U+10FFFF) becomes
 * \ufffd, one per byte: the output is valid JSON in UTF-8 whatever the input (RFC 8259,
 * section 8.1).
 */
#ifndef KDP_BASE_JSONSTR_H
#define KDP_BASE_JSONSTR_H

#include <stddef.h>
#include <stdio.h>

/* Where the literal goes: called with its pieces in order (len > 0). */
typedef void (*kdp__json_put_fn)(const char *s, size_t len, void *ud);

/* Writes s (NUL-terminated) as a JSON string literal, quotes included. */
void kdp__json_string(const char *s, kdp__json_put_fn put, void *ud);
/* The same, into f (its errors are f's: ferror). */
void kdp__json_string_file(FILE *f, const char *s);

#endif

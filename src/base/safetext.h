/* SPDX-License-Identifier: MIT */
/*
 * safetext: a peer's text made safe to print on one line of a log or a
 * terminal, the one function the logs and kdpctl use. Every character that
 * could forge a line, move the cursor, hide or reorder text is escaped:
 * C0 controls and DEL as \xNN; the C1 controls (U+0080-U+009F, NEL
 * included), the line and paragraph separators U+2028 and U+2029 and the
 * bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069) as \uXXXX; bytes that are not UTF-8 as \xNN. The rest,
 * printable ASCII and valid UTF-8, is kept.
 */
#ifndef KDP_BASE_SAFETEXT_H
#define KDP_BASE_SAFETEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether text needs no escaping (then it can be printed as it is). */
bool kdp__safetext_clean(const char *s);
/* Copies src into dst (cap > 0), escaped, NUL-terminated, cut before an
 * escape or a character that would not fit. Returns the bytes written
 * (without the NUL). */
size_t kdp__safetext(char *dst, size_t cap, const char *src);

#endif

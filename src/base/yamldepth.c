/* SPDX-License-Identifier: MIT */
#include "base/yamldepth.h"

#include <errno.h>
#include <stdbool.h>

/* At text[i], inside a quoted scalar: closes it (*quote = 0) at its quote
 * ('' inside single quotes: closed, then opened again). Returns how many
 * more bytes to skip: 1 after a backslash in double quotes. */
static size_t in_quote(const char *text, size_t len, size_t i, char *quote)
{
    char c = text[i];
    if (*quote == '"' && c == '\\' && i + 1 < len) {
        return text[i + 1] != '\n'; /* an escaped character, not a newline */
    }
    if (c == *quote) {
        *quote = 0;
    }
    return 0;
}

int kdp__yaml_flow_depth(const char *text, size_t len, unsigned max, size_t *ret_line)
{
    unsigned depth = 0;
    size_t line = 1;
    char quote = 0; /* the open quote, or 0 */
    bool comment = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n') {
            line++;
            comment = false;
            continue;
        }
        if (comment) {
            continue;
        }
        if (quote) {
            i += in_quote(text, len, i, &quote);
            continue;
        }
        bool after_space =
            i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n';
        if (c == '#' && after_space) {
            comment = true;
        } else if (c == '"' || c == '\'') {
            quote = c;
        } else if (c == '[' || c == '{') {
            if (++depth > max) {
                *ret_line = line;
                return -E2BIG;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

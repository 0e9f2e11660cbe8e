/* SPDX-License-Identifier: MIT */
/* jsonbudget: the cost of decoding a JSON text (see jsonbudget.h). */
#include "k8s/jsonbudget.h"

#define TOKEN_COST 64U

size_t kdp__json_cost(const char *buf, size_t len)
{
    size_t tokens = 1;
    int in_string = 0;
    int escaped = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (escaped) {
                escaped = 0;
            } else if (c == '\\') {
                escaped = 1;
            } else if (c == '"') {
                in_string = 0;
            }
            continue;
        }
        if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[' || c == ',' || c == ':') {
            tokens++;
        }
    }
    return len + tokens * TOKEN_COST;
}

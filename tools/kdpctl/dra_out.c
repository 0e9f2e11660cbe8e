/* SPDX-License-Identifier: MIT */
/* dra_out: the lines `kdpctl dra` prints: "HH:MM:SS.mmm WHO: text" for a
 * person, one JSON object a line (--json) for scripts. */
#include "dra.h"

void kd_json(kc_json *j, const char *event)
{
    kc_json_begin(j);
    kc_json_str(j, "event", event);
    kc_json_uint(j, "t_ns", kc_wall_ns());
}

void kd_say_as(const char *who, const char *text, const char *extra)
{
    char clock[32];
    kc_buf b = {0};
    kc_buf_printf(&b, "%s ", kc_clock(clock, sizeof(clock)));
    kc_buf_safe(&b, who);
    kc_buf_puts(&b, ": ");
    kc_buf_safe(&b, text);
    kc_buf_puts(&b, "\n");
    if (extra) {
        kc_buf_puts(&b, extra);
    }
    (void)kc_buf_write(&b, stdout);
    kc_buf_free(&b);
}

void kd_say(const char *text)
{
    kd_say_as("dra-kubelet", text, NULL);
}

/* SPDX-License-Identifier: MIT */
/* dra_out: the lines `kdpctl dra` prints: "HH:MM:SS.mmm WHO: text" for a
 * person, one JSON object a line (--json) for scripts. */
#include "dra.h"

void kd_json(kc_json *j, const char *event)
{
    kc_json_event(j, event);
}

void kd_say_as(const char *who, const char *text, const char *extra)
{
    kc_say_line(who, text, extra);
}

void kd_say(const char *text)
{
    kd_say_as("dra-kubelet", text, NULL);
}

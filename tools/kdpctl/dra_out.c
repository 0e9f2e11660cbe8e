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

void kd_say_plugin(kd_plugin *p, const char *event, const char *text, const char *error)
{
    if (p->k->o->json) {
        kc_json j;
        kd_json(&j, event);
        kc_json_str(&j, "socket", p->reg_socket);
        kc_json_str(&j, "driver", p->driver);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_str(&j, "version", p->version);
        kc_json_str(&j, "health_version", p->health_version ? p->health_version : "");
        if (error) {
            kc_json_str(&j, "error", error);
        }
        kc_json_emit(&j);
        return;
    }
    kd_say(text);
}

void kd_print_health(kd_plugin *p, const char *why)
{
    if (p->k->o->json) {
        kc_json j;
        kd_json(&j, "health");
        kc_json_str(&j, "driver", p->driver);
        kc_json_str(&j, "why", why);
        kc_json_str(&j, "version", p->health_version ? p->health_version : "");
        kc_json_arr(&j, "devices");
        for (size_t i = 0; i < p->health_ids.n; i++) {
            kc_json_obj(&j, NULL);
            kc_json_str(&j, "device", p->health_ids.v[i]);
            kc_json_str(&j, "health", p->health_states.v[i]);
            kc_json_str(&j, "message", p->health_msgs_text.v[i]);
            kc_json_end(&j);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf head = {0};
    kc_buf_printf(&head, "%s: health (%s%s%s): %zu devices", p->driver,
                  p->health_version ? p->health_version : "", p->health_version ? ", " : "", why,
                  p->health_ids.n);
    kc_table t;
    kc_table_init(&t, 3);
    const char *hdr[3] = {"DEVICE (POOL/NAME)", "HEALTH", "MESSAGE"};
    kc_table_row(&t, hdr);
    for (size_t i = 0; i < p->health_ids.n; i++) {
        const char *row[3] = {p->health_ids.v[i], p->health_states.v[i], p->health_msgs_text.v[i]};
        kc_table_row(&t, row);
    }
    kc_buf out = {0};
    if (p->health_ids.n) {
        kc_table_render(&t, &out, "    ");
    }
    kd_say_as("dra-kubelet", head.failed ? "health" : head.s, out.len ? out.s : NULL);
    kc_buf_free(&out);
    kc_buf_free(&head);
    kc_table_free(&t);
}

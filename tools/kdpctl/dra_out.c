/* SPDX-License-Identifier: MIT */
/* dra_out: the lines `kdpctl dra` prints: "HH:MM:SS.mmm WHO: text" for a
 * person, one JSON object a line (--json) for scripts. */
#include "dra.h"
#include "dra_health_stream.h"

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

void kd_print_state(kd *k)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "state");
        kc_json_arr(&j, "drivers");
        for (kd_plugin *p = k->plugins; p; p = p->next) {
            if (!p->registered) {
                continue;
            }
            kc_json_obj(&j, NULL);
            kc_json_str(&j, "driver", p->driver);
            kc_json_str(&j, "version", p->version);
            kc_json_str(&j, "endpoint", p->endpoint);
            kc_json_str(&j, "socket", p->reg_socket);
            kc_json_str(&j, "health_version", p->health_version ? p->health_version : "");
            kc_json_str(&j, "health_stream", kd_health_state(p));
            kc_json_uint(&j, "health_devices", p->health_ids.n);
            kc_json_end(&j);
        }
        kc_json_end(&j);
        kc_json_arr(&j, "prepared");
        for (size_t i = 0; i < k->prepared.n; i++) {
            kc_json_obj(&j, NULL);
            kc_json_str(&j, "claim", k->prepared.v[i]);
            kc_json_str(&j, "devices", k->prepared_devices.v[i]);
            kc_json_end(&j);
        }
        kc_json_emit(&j);
        return;
    }
    kc_table t;
    kc_table_init(&t, 5);
    const char *hdr[5] = {"DRIVER", "VERSION", "ENDPOINT", "HEALTH STREAM", "HEALTH LIST"};
    kc_table_row(&t, hdr);
    size_t n = 0;
    for (kd_plugin *p = k->plugins; p; p = p->next) {
        if (p->registered) {
            char h[32];
            snprintf(h, sizeof(h), "%zu devices", p->health_ids.n);
            char stream[80];
            snprintf(stream, sizeof(stream), "%s%s%s", kd_health_state(p),
                     p->health_version ? " " : "", p->health_version ? p->health_version : "");
            const char *row[5] = {p->driver, p->version, p->endpoint, stream, h};
            kc_table_row(&t, row);
            n++;
        }
    }
    kc_buf out = {0};
    kc_table_render(&t, &out, "    ");
    kc_table_free(&t);
    kc_table_init(&t, 2);
    const char *hdr2[2] = {"PREPARED CLAIM (DRIVER NS/NAME/UID)", "DEVICES"};
    kc_table_row(&t, hdr2);
    for (size_t i = 0; i < k->prepared.n; i++) {
        const char *row[2] = {k->prepared.v[i], k->prepared_devices.v[i]};
        kc_table_row(&t, row);
    }
    if (k->prepared.n) {
        kc_table_render(&t, &out, "    ");
    }
    kc_table_free(&t);
    char head[120];
    snprintf(head, sizeof(head), "state: %zu driver%s registered, %zu claim%s prepared", n,
             n == 1 ? "" : "s", k->prepared.n, k->prepared.n == 1 ? "" : "s");
    kd_say_as("dra-kubelet", head, out.len ? out.s : NULL);
    kc_buf_free(&out);
}

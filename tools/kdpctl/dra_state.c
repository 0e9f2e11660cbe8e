/* SPDX-License-Identifier: MIT */
/* dra_state: what `kdpctl dra kubelet`'s `state` command prints: the
 * drivers registered (version, endpoint, where the health stream stands)
 * and the claims prepared. */
#include <stdio.h>

#include "dra.h"
#include "dra_health_stream.h"

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

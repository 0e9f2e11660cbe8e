/* SPDX-License-Identifier: MIT */
/* info: GetInfo on a plugin-watcher registration socket (in
 * <kubelet-root>/plugins_registry/), and whether the kubelet would take it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdpctl.h"
#include "kubelet.h"
#include "print.h"
#include "rpc.h"

#define METHOD_GET_INFO "/pluginregistration.Registration/GetInfo"

/* SOCK: as given if it contains '/', else in the plugins_registry dir. */
static char *info_path(const kc_opts *o, const char *sock)
{
    if (strchr(sock, '/')) {
        return strdup(sock);
    }
    const char *dir = kc_registry_dir(o, false);
    if (!dir) {
        return NULL;
    }
    char *path;
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    return asprintf(&path, "%s%s%s", dir, slash ? "" : "/", sock) < 0 ? NULL : path;
}

static void print_info(const kc_opts *o, const char *path, const Pluginregistration__PluginInfo *m,
                       const char *refusal)
{
    if (o->json) {
        kc_json j;
        kc_json_begin(&j);
        kc_json_str(&j, "socket", path);
        kc_json_str(&j, "type", m->type);
        kc_json_str(&j, "name", m->name);
        kc_json_str(&j, "endpoint", m->endpoint);
        kc_json_arr(&j, "supported_versions");
        for (size_t i = 0; i < m->n_supported_versions; i++) {
            kc_json_str(&j, NULL, m->supported_versions[i]);
        }
        kc_json_end(&j);
        kc_json_bool(&j, "kubelet_accepts", refusal == NULL);
        kc_json_emit(&j);
        return;
    }
    kc_buf versions = {0};
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        kc_buf_printf(&versions, "%s%s", i ? ", " : "", m->supported_versions[i]);
    }
    kc_table t;
    kc_table_init(&t, 2);
    const char *rows[][2] = {
        {"type", m->type},
        {"name", m->name},
        {"endpoint", *m->endpoint ? m->endpoint : "\"\" (this socket serves DevicePlugin too)"},
        {"supported_versions", versions.len ? versions.s : "(none)"},
        {"kubelet", refusal ? "refuses it" : "accepts it"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        kc_table_row(&t, rows[i]);
    }
    kc_buf out = {0};
    kc_table_render(&t, &out, "");
    (void)kc_buf_write(&out, stdout);
    kc_buf_free(&out);
    kc_buf_free(&versions);
    kc_table_free(&t);
}

static const char *refusal_hint(const Pluginregistration__PluginInfo *m, const char *stage)
{
    if (strcmp(stage, "type") == 0) {
        return "only type \"DevicePlugin\" goes to the kubelet's device manager (CSIPlugin and "
               "DRAPlugin go to other handlers; a kubelet without one refuses like this)";
    }
    bool version = false;
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        version = version || strcmp(m->supported_versions[i], KL_API_VERSION) == 0;
    }
    return version ? "name must be an extended resource name: DOMAIN/NAME, not in kubernetes.io/"
                   : "supported_versions must contain \"v1beta1\", the device-plugin API version "
                     "the kubelet speaks";
}

int kc_cmd_info(const kc_opts *o)
{
    char *path = info_path(o, o->pos.v[0]);
    if (!path) {
        return kc_fail_errno(o, "socket path", errno == ENOMEM ? -ENOMEM : -EINVAL);
    }
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    kc_reply rep;
    int e = kc_call_plugin(o, path, METHOD_GET_INFO, &req.base, &rep);
    if (e != KC_EXIT_OK) {
        free(path);
        return e;
    }
    Pluginregistration__PluginInfo *m =
        pluginregistration__plugin_info__unpack(NULL, rep.len, rep.resp);
    kc_reply_free(&rep);
    if (!m) {
        free(path);
        return kc_fail_decode(o, "PluginInfo");
    }
    kc_buf reason = {0};
    kc_buf_puts(&reason, "the kubelet refuses it: ");
    const char *stage = NULL;
    bool refused = kl_info_check(m, path, &reason, &stage) < 0;
    print_info(o, path, m, refused ? "" : NULL);
    e = KC_EXIT_OK;
    if (refused) {
        kc_print_error(o->json, o->cmd, NULL, 0,
                       reason.failed ? "the kubelet refuses it" : reason.s, refusal_hint(m, stage));
        e = KC_EXIT_FAIL;
    } else if (*m->endpoint && m->endpoint[0] != '/') {
        kc_buf warn = {0};
        kc_buf_printf(&warn,
                      "the endpoint %s is relative: the kubelet dials it as is, from its own "
                      "working directory; give a full path, or \"\" for this socket",
                      m->endpoint);
        kc_print_warnings(o->cmd, &warn);
        kc_buf_free(&warn);
    }
    kc_buf_free(&reason);
    pluginregistration__plugin_info__free_unpacked(m, NULL);
    free(path);
    return e;
}

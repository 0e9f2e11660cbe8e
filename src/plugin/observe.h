/* SPDX-License-Identifier: MIT */
/*
 * observe: a context's metrics and health endpoint (the context's add-on):
 * kdp_ctx_serve_metrics, $KDP_METRICS_ADDRESS at the first run, the
 * author's metrics (kdp_metric_new), and the HTTP handler that answers
 * GET /metrics (kdp's built-ins, then the author's metrics) and GET /healthz
 * on the context's loop.
 */
#ifndef KDP_OBSERVE_H
#define KDP_OBSERVE_H

#include "plugin/ctx.h"
#include "runtime/http.h"

/* The add-on to set as ctx->addon (for $KDP_METRICS_ADDRESS). */
const kdp__ctx_addon *kdp__observe_addon(void);

/* One request, as the HTTP server hands it (for tests and the fuzzer):
 * fills status, content type and body. Loop thread. */
void kdp__observe_handle(kdp_ctx *ctx, const char *method, const char *path, kdp__http_resp *resp);

#endif

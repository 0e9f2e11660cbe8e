"""The driver of kdp-test-apiserver, the API-server emulator (tests/apiserver/).

    from kdptest.apiserver import ApiServer

    with ApiServer(tmpdir, nodes=["node-a"]) as api:   # $KDP_BIN_DIR/kdp-test-apiserver
        ... start the driver with api.kubeconfig_token (or api.incluster_env()) ...
        api.wait_event("request", verb="create", resource="resourceslices", code=201)
        r = api.ok("create-claim default c1 --driver gpu.example.com --pool node-a"
                   " --request gpu --device gpu0 --node node-a")
        uid = r["uid"]
        api.ok("conflict 3")
        slices = api.slices()

The API server down when the driver starts: start the emulator (the files
and the port exist from then on), api.ok("down"), start the driver, then
api.ok("up") (same port, same certificates and token).

An ApiServer is a kdptest.Proc: every wait is bounded; a failed wait raises
AssertionError with the recent events and the emulator's stderr. In a
ProcTest, self.start_proc(ApiServer(self.path("api"))) stops it at the end.

Emulator CLI:
    kdp-test-apiserver -dir DIR [-listen 127.0.0.1:0] [-node NAME[,NAME...]]...
                       [-versions v1,v1beta2,v1beta1] [-token-grace 10s]
                       [-window 1000] [-bookmark-interval 10s]
                       [-watch-timeout 30m] [-server-version v1.34.0]
                       [-log-discovery]
  -versions     resource.k8s.io versions served, preferred first. Objects are
                stored as v1 and converted: v1beta1's Device nests its fields
                under "basic" (and its DeviceRequest has no "exactly");
                v1beta2 has v1's shapes.
  -token-grace  how long a rotated-out token keeps working.
  -window       events kept for watches resuming from a resourceVersion;
                older -> ERROR event 410 Expired "too old resource version".

Files written into DIR (absolute paths in the "ready" event):
  ca.crt, token, client.crt, client.key (CN "kdp-dra-driver"),
  kubeconfig-token (server, certificate-authority, token),
  kubeconfig-cert (client-certificate/client-key paths),
  kubeconfig-data (the same as *-data base64 fields),
  serviceaccount/{token,ca.crt,namespace}: what a pod sees under
  /var/run/secrets/kubernetes.io/serviceaccount (namespace "kdp-system").
  token and serviceaccount/token are rewritten (atomically) by token-rotate.

Served (HTTPS, HTTP/2 and HTTP/1.1): /version, /api, /api/v1 (nodes: get,
list, watch), /apis, /apis/resource.k8s.io[/VERSION] (resourceslices and
deviceclasses cluster-scoped, resourceclaims namespaced with /status: get,
list, watch, create, update, patch (merge, strategic-merge as merge, JSON
patch), delete, deletecollection), /healthz. Lists honour labelSelector,
fieldSelector (resourceslices: metadata.name, spec.nodeName, spec.driver,
spec.pool.name; others: metadata.name[, metadata.namespace]; anything else
400 "field label not supported"), limit/continue, and answer a Table when
asked (kubectl's human output). Watches (?watch=true|1|True) take
resourceVersion ("" or "0": the current objects first as ADDED),
allowWatchBookmarks, timeoutSeconds, sendInitialEvents (the objects, then a
BOOKMARK annotated k8s.io/initial-events-end) and the selectors. Auth: the bearer token (401 otherwise), or a
client certificate signed by the CA (user = its CN); no credentials = user
system:anonymous, refused (403) except /version and /healthz.

Events (one JSON object per stdout line, each with "event" and "t_ns"):
  ready          url, addr, dir, pid, versions, nodes, user (the client
                 certificate's CN), token_user, namespace, ca, token,
                 kubeconfig_token, kubeconfig_cert, kubeconfig_data,
                 serviceaccount
  request        method, path, verb (get list watch create update patch
                 delete deletecollection), resource ("resourceslices",
                 "resourceclaims/status", "nodes", "discovery" ...), version,
                 namespace, name, code, user, auth ("token", "old-token",
                 "cert", "anonymous"). Successful discovery requests only
                 with -log-discovery. A watch's request event comes when its
                 stream starts (code 200).
  watch_open     id, resource, version, resource_version, namespace,
                 label_selector, field_selector, bookmarks, user
  watch_closed   id, resource, reason ("client gone", "timeout", "down",
                 "expired", "overflow")
  watch_expired  resource, resource_version, message (a 410 ERROR event was
                 the stream's only event)
  down, up       addr
Unknown fields of a ResourceSlice are dropped with a warning header
(Warning: 299 - "unknown field <path>"; fieldValidation=Warn, the default),
refused with fieldValidation=Strict (400) and dropped silently with Ignore, as
the API server does: a v1beta1 "basic" sent to v1 is lost.
  reply          cmd, id, ok, elapsed_us, code/message on failure, and the
                 command's fields
  exit           reason

Commands (stdin lines; an optional last word "#ID" is echoed as "id"):
  down | up                 stop listening and drop every connection (watches
                            included) / listen again on the same port
  fail N CODE [VERB RESOURCE]   the next N matching requests answer CODE with
                            the API server's Status for it (VERB, RESOURCE may
                            be *; RESOURCE "discovery" = discovery requests)
  conflict N                the next N update/patch/delete of resourceslices
                            answer 409 Conflict
  forbid VERB RESOURCE | allow VERB RESOURCE   403 with RBAC's message
                            (RESOURCE e.g. resourceslices, resourceclaims/status)
  token-rotate              a new token, written to DIR/token and
                            DIR/serviceaccount/token (and kubeconfig-token);
                            the old one works for -token-grace more
  token-revoke              no token is accepted any more (until token-rotate)
  delete NAME               someone else deletes the ResourceSlice NAME
  delete-after-create N [DELAY]   the next N ResourceSlices created are
                            deleted by someone else DELAY (a Go duration)
                            after their create, or before its answer goes
                            out (DELAY 0, the default); event
                            deleted_after_create {name, delay_ms}
  edit NAME [generation|drop-device|attribute]   someone else changes its
                            spec (default: pool.generation + 1)
  expire-watches [410]      end every watch (410: an ERROR 410 event first);
                            reply: watches
  compact                   forget the event window (reply: resourceVersion)
  create-claim NS NAME --driver D --pool P --request R [--admin-access]
               [--share-id ID] [--consumed NAME=QTY,...] --device DEV[,DEV...]
               [--config JSON | --config-b64 BASE64] [--node N] [--class C]
               [--reserved] [--binding-conditions A,B]
               [--binding-failure-conditions F,G] [--binds-to-node]
                            an allocated claim (status.allocation.devices
                            results and config[].opaque{driver, parameters});
                            --driver/--pool/--request hold until changed, so
                            one claim can hold several drivers' devices;
                            the binding lists go into every result (with
                            allocationTimestamp), --binds-to-node pins the
                            node selector to --node (else the last --pool),
                            as the scheduler does (KEP-5007);
                            reply: uid, resourceVersion, claim
  binding-state NS NAME     the scheduler's PreBind check of the claim:
                            reply: state ("ready", "pending", "failed"),
                            waiting (types not yet True), detail ("waiting
                            for A,B" / "TYPE Reason" / "timeout"); failed:
                            condition, reason, message
  delete-claim NS NAME
  add-node NAME | delete-node NAME   (delete-node also deletes the slices it
                            owns, as the garbage collector does: collected)
  slices                    reply: slices (v1 objects), resourceVersion
  claims                    reply: claims
  stats                     reply: requests {"VERB RESOURCE": n}, codes,
                            writes, conflicts (409 Conflict answered),
                            watches_open, watches_total
  quit
Reply codes: Usage, Internal, and the Status reason of a failed change
(NotFound, AlreadyExists, Invalid ...).
"""

import base64
import itertools
import json
import os
import ssl
import urllib.error
import urllib.request

from .proc import T, Proc, _matcher, binary


class ApiServer(Proc):
    """kdp-test-apiserver on `dir`: ApiServer(dir, nodes=(), versions=None,
    token_grace=None, args=()). start() (or `with`) waits for "ready"."""

    name = "apiserver"
    stop_last = True  # drivers stop first: their last requests are seen
    _ids = itertools.count(1)

    def __init__(self, dir, nodes=(), versions=None, token_grace=None, window=None,
                 bookmark_interval=None, args=(), env=None):
        argv = [binary("kdp-test-apiserver"), "-dir", dir]
        if nodes:
            argv += ["-node", ",".join(nodes)]
        if versions:
            argv += ["-versions", ",".join(versions) if not isinstance(versions, str) else versions]
        if token_grace is not None:
            argv += ["-token-grace", "%gs" % token_grace]
        if window is not None:
            argv += ["-window", str(window)]
        if bookmark_interval is not None:
            argv += ["-bookmark-interval", "%gs" % bookmark_interval]
        argv += list(args)
        super().__init__(argv, env=env)
        self.dir = os.path.abspath(dir)
        self.ready = None

    def start(self, timeout=T):
        super().start()
        try:
            self.ready = self.wait_event("ready", timeout)
        except AssertionError:
            self.stop()
            raise
        return self

    # -- where things are --------------------------------------------------

    @property
    def url(self):
        return self.ready["url"]

    @property
    def host(self):
        return self.ready["addr"].rsplit(":", 1)[0]

    @property
    def port(self):
        return int(self.ready["addr"].rsplit(":", 1)[1])

    def path(self, name):
        return os.path.join(self.dir, name)

    @property
    def ca(self):
        return self.path("ca.crt")

    @property
    def token_path(self):
        return self.path("token")

    @property
    def kubeconfig_token(self):
        return self.path("kubeconfig-token")

    @property
    def kubeconfig_cert(self):
        return self.path("kubeconfig-cert")

    @property
    def kubeconfig_data(self):
        return self.path("kubeconfig-data")

    @property
    def serviceaccount(self):
        return self.path("serviceaccount")

    def token(self):
        """The token accepted now (DIR/token)."""
        with open(self.token_path) as f:
            return f.read().strip()

    def incluster_env(self):
        """The variables a pod has for the in-cluster configuration (the
        serviceaccount files are under self.serviceaccount)."""
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port),
                "KUBERNETES_SERVICE_PORT_HTTPS": str(self.port)}

    # -- commands ----------------------------------------------------------

    def command_async(self, line):
        """Sends a command tagged with a fresh #ID; returns (id, mark)."""
        cid = "a%d" % next(self._ids)
        mark = self.mark()
        self.send("%s #%s" % (line, cid))
        return cid, mark

    def command(self, line, timeout=T):
        """Runs one command; returns its reply (check r["ok"]). Leaves the
        cursor of the waits where it was."""
        cid, mark = self.command_async(line)
        m = _matcher("reply", {"id": cid})
        return self._wait(lambda i: self._events[i] if m(self._events[i]) else None,
                          timeout, mark, "reply to %r" % line, advance=False)

    def ok(self, line, timeout=T):
        """command() that asserts ok:true; returns the reply."""
        r = self.command(line, timeout)
        if not r.get("ok"):
            raise AssertionError("apiserver: %r failed: %s" % (line, r))
        return r

    def slices(self):
        """The current ResourceSlices (v1 objects), sorted by name."""
        return self.ok("slices")["slices"]

    def claims(self):
        return self.ok("claims")["claims"]

    def stats(self):
        return self.ok("stats")

    def create_claim(self, ns, name, driver, pool, request, devices, config=None, node=None,
                     admin_access=False, share_id=None, consumed=None, binding_conditions=None,
                     binding_failure_conditions=None, binds_to_node=False):
        """An allocated claim; returns its UID. consumed: {capacity:
        quantity} each device (a share) consumed. binding_conditions,
        binding_failure_conditions: condition types copied into every
        result (KEP-5007); binds_to_node: the node selector pinned to node
        (else pool)."""
        line = "create-claim %s %s --driver %s --pool %s --request %s%s%s%s --device %s" % (
            ns, name, driver, pool, request, " --admin-access" if admin_access else "",
            " --share-id %s" % share_id if share_id else "",
            " --consumed %s" % ",".join("%s=%s" % kv for kv in consumed.items()) if consumed else "",
            ",".join(devices))
        if config is not None:  # base64: JSON strings may hold spaces
            line += " --config-b64 %s" % base64.b64encode(json.dumps(config).encode()).decode()
        if node:
            line += " --node %s" % node
        if binding_conditions:
            line += " --binding-conditions %s" % ",".join(binding_conditions)
        if binding_failure_conditions:
            line += " --binding-failure-conditions %s" % ",".join(binding_failure_conditions)
        if binds_to_node:
            line += " --binds-to-node"
        return self.ok(line)["uid"]

    def binding_state(self, ns, name):
        """The scheduler's PreBind check of a claim: the binding-state
        reply (state "ready" / "pending" / "failed", waiting, detail;
        failed: condition, reason, message)."""
        return self.ok("binding-state %s %s" % (ns, name))

    def sync(self):
        """Returns once every request a client has had its answer to is in
        the events: the emulator writes a request's line before its answer
        goes out, and a command's reply comes after every line before it."""
        self.ok("stats")

    def requests(self, since=0, **fields):
        """The "request" events since a mark, filtered by fields (call sync()
        first when a client just had its answer)."""
        return self.events_since(since, "request", **fields)

    # -- a minimal client (tests that need no other client) -----------------

    def ssl_context(self, cert=False):
        ctx = ssl.create_default_context(cafile=self.ca)
        if cert:
            ctx.load_cert_chain(self.path("client.crt"), self.path("client.key"))
        return ctx

    def http(self, method, path, body=None, token=None, cert=False, content_type="application/json",
             timeout=T, headers=False):
        """One request; returns (code, decoded JSON body or text), or (code,
        headers, body) with headers=True. token: None = the current one,
        "" = none."""
        if token is None and not cert:
            token = self.token()
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(cert), timeout=timeout) as resp:
                code, hdrs, raw = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            code, hdrs, raw = e.code, e.headers, e.read()
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = raw.decode(errors="replace")
        return (code, hdrs, decoded) if headers else (code, decoded)

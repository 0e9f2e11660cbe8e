"""The driver of kdp-test-kubelet, the kubelet emulator (tests/kubelet/main.go).

    from kdptest.kubelet import Kubelet

    with Kubelet(tmpdir) as kl:                  # $KDP_BIN_DIR/kdp-test-kubelet
        ... start the plugin under test on tmpdir ...
        reg = kl.wait_event("registered", resource="example.com/dev")
        r = kl.command("allocate example.com/dev dev0,dev1")
        assert r["ok"], r
        kl.command("restart")
        kl.wait_event("stream_end", timeout=5)

A Kubelet is a kdptest.Proc: every wait is bounded; a failed wait raises
AssertionError listing the recent events and the emulator's stderr. The
process always gets SIGTERM on exit of the context (then SIGKILL of its
process group if it does not exit in time). In a test, PluginTest.kubelet()
starts one that is stopped when the test ends.

Emulator CLI:
    kdp-test-kubelet -dir DIR [-legacy] [-dial unix|legacy]
                     [-rpc-timeout 60s] [-dial-timeout 10s]
                     [-watcher | -plugins-registry DIR2]
                     [-endpoint-tracking default|resource|socket]
                     [-kubelet-root ROOT | -pod-resources]
                     [-podres-get on|off|absent] [-podres-delay D]
                     [-dra=false] [-dra-versions LIST] [-dra-call-timeout 45s]
                     [-dra-health on|off] [-dra-health-retry 5s]
                     [-dra-wipe-delay 30s]
  -legacy       kubelet <= 1.24: answers Register first, then dials and uses
                the options of the RegisterRequest (never calls
                GetDevicePluginOptions by itself). Default: kubelet >= 1.25,
                dials and calls GetDevicePluginOptions BEFORE answering.
  -dial unix    target unix://PATH, :authority "localhost" (default);
  -dial legacy  target PATH + custom dialer, :authority = the socket path.
  -watcher      also play the plugin-watcher side on DIR/../plugins_registry
                (-plugins-registry DIR2: on DIR2): inotify + a walk at start
                (subdirectories too; names starting with '.' and non-sockets
                ignored), GetInfo (1 s), type "DevicePlugin", versions must
                hold "v1beta1", the name must be an extended resource name,
                empty endpoint = the registration socket itself, else the
                endpoint is dialed as is (a full path); then the kubelet.sock
                connect (GetDevicePluginOptions, ListAndWatch), then
                NotifyRegistrationStatus(true, ""). Refusals are notified with
                the kubelet's texts and retried with backoff (500 ms doubling).
                A restart never deletes plugins_registry sockets: it drops the
                connections and walks the directory again (fresh GetInfo).
  -endpoint-tracking  what the end of an instance's stream (or the removal of
                its watcher socket) does when a newer registration of the same
                resource exists:
                default   the emulator's historic rule: the resource is marked
                          unhealthy (allocatable 0) whichever client ended
                          (-legacy: only if it was the current one);
                resource  kubelets 1.25+ before kubernetes PR #135437 (#121994):
                          the NEWEST client of the resource is disconnected too
                          (stream_end reason "disconnected") and the resource
                          marked unhealthy;
                socket    PR #135437: endpoints per socket path: an older
                          instance's end leaves the resource alone.
                Under every rule the resource has ONE device set: the last
                ListAndWatch message from any live instance replaces it (the
                devicemanager keys devices by resource name): not a union.
  -kubelet-root ROOT  also serve the kubelet's PodResources API v1 on
                ROOT/pod-resources/kubelet.sock (-pod-resources: ROOT =
                DIR/..): List (the allocations made with "allocate ...
                pod=NS/NAME", grouped by pod and container, with the NUMA
                nodes the plugin streamed for those devices), Get (one pod;
                "pod NAME in namespace NS not found" otherwise, the kubelet's
                words) and GetAllocatableResources (every streamed device,
                unhealthy ones included, as the kubelet does: #104122).
  -podres-get   on (default); off: Get answers the kubelet's gate-off error
                (code Unknown, "PodResources API Get method disabled");
                absent: Unimplemented (kubelets before 1.27).
  -podres-delay D  every PodResources answer waits D first (a stalled
                kubelet; the caller's deadline cuts it short).
  DRA (with -watcher/-plugins-registry; tests/kubelet/dra.go has the facts):
                a plugins_registry socket whose GetInfo type is "DRAPlugin"
                is a DRA driver instance: name = driver name (not checked,
                as in the kubelet), empty endpoint = the registration socket,
                supported_versions walked in the PLUGIN's order, the first
                one in -dra-versions (default "v1.DRAPlugin,
                v1beta1.DRAPlugin") chosen; none -> NotifyRegistrationStatus
                (false, "RegisterPlugin error -- plugin validation failed with
                err: invalid supported gRPC versions of DRA driver plugin D at
                endpoint E: none of services supported by the plugin (...)
                are supported by the kubelet (...)"), retried with backoff.
                A second instance naming a registered endpoint: "RegisterPlugin
                error -- plugin registration failed with err: endpoint E
                already registered for DRA driver plugin D" (not retried).
                Several instances are kept; calls go to the newest connected
                one (else the newest). -dra=false: no DRA handler ("no
                handler registered for plugin type: DRAPlugin ...").
  -dra-call-timeout D  per NodePrepare/NodeUnprepareResources call (45 s).
  -dra-health on|off   NodeWatchResources on every instance, reopened
                -dra-health-retry (5 s) after it ends; UNIMPLEMENTED is
                reported once (dra_health_stream phase "unimplemented").
  -dra-wipe-delay D    no instance of a driver connected for D -> dra_wipe
                (the kubelet deletes the driver's ResourceSlices; 30 s).

Events (one JSON object per stdout line; all have "event" and "t_ns" =
time.Now().UnixNano(), comparable with time.time_ns()):
  ready          socket, dir, legacy, dial, pid, removed (stale sockets),
                 plugins_registry ("" without -watcher), endpoint_tracking,
                 pod_resources (its socket, "" without -kubelet-root)
  podres_call    method (a PodResources call arrived)
  podres_abandoned method, error (the caller gave up during -podres-delay)
  registered     resource, endpoint, version, options{pre_start_required,
                 get_preferred_allocation_available}, options_source
                 ("rpc"|"request"), request_options (null if absent),
                 register_ns (Register arrived), dial_us, legacy,
                 via ("kubelet.sock"|"watcher"), socket (the path dialed),
                 registration_socket (watcher only). A watcher registration's
                 endpoint is the full path (the registration socket when
                 GetInfo gave none).
  rejected       resource, endpoint, version, error, register_ns  (Register
                 answered with that error: bad version, bad name, dial or
                 GetDevicePluginOptions failure)
  connect_failed (-legacy only: Register was accepted, the dial failed later)
  replaced       resource, old_endpoint, endpoint (the old connection is kept,
                 as the kubelet does)
  devices        resource, endpoint, current, devices[{id, health, numa[]}],
                 healthy, unhealthy, n, bytes, seq (per resource, 1-based)
  stream_end     resource, endpoint, error, code, current, marked_unhealthy,
                 via, reason ("stream": the stream ended by itself; "restart",
                 "stop-server", "exit": the emulator dropped the connection;
                 "deregistered": its watcher socket went away;
                 "disconnected": -endpoint-tracking resource, another
                 instance's end tore it down, cause_endpoint says which)
  disconnected   resource, endpoint, via, reason, cause_endpoint (the
                 -endpoint-tracking resource teardown, before its stream_end)
  capacity       resource, capacity, allocatable, cause ("devices",
                 "stream_end", "deregistered", "restart", "stop-server",
                 "exit"), endpoint: on every change of what the node status
                 would report (capacity = healthy + unhealthy, allocatable =
                 healthy, 0 once marked unhealthy; 0/0 once forgotten)
  watcher_found  socket, source ("walk"|"inotify")
  watcher_gone   socket
  watcher_info   socket, type, name, endpoint, supported_versions (GetInfo)
  watcher_refused socket, stage ("type"|"validate"|"register"), type,
                 resource, reason (the exact NotifyRegistrationStatus error),
                 notify_error (if that call failed)
  watcher_failed socket, stage ("dial"|"get_info"), error (nothing notified)
  watcher_notified socket, resource, registered (true), notify_error
  deregistered   socket, resource, endpoint, via "watcher", marked_unhealthy,
                 disconnected (the socket path of the client closed, or null)
  dra_registered driver, endpoint, registration_socket, service (chosen),
                 supported_versions, seq (registration order), instances,
                 name_valid, name_error (API-server driver-name rules; info),
                 endpoint_absolute (a relative endpoint is dialed relative to
                 the emulator's working directory, as the kubelet's)
  dra_connection driver, endpoint, seq, connected (the gRPC connection)
  dra_deregistered driver, endpoint, socket, found, seq, instances (left)
  dra_dropped    driver, endpoint, seq, reason (restart, stop-server, exit)
  dra_wipe_scheduled / dra_wipe_canceled  driver, delay_ms
  dra_wipe       driver ("" = all, at start), reason ("startup"|"unusable")
  dra_health     driver, endpoint, seq, version, devices[{pool, device, health
                 ("Healthy"|"Unhealthy"|"Unknown"), message,
                 last_updated_time, health_check_timeout_seconds}], n,
                 message_seq (every NodeWatchResources message)
  dra_health_stream driver, endpoint, seq, version, phase ("unimplemented"|
                 "error"|"ended"; "none": with dra_health_versions, the plugin
                 advertises none of them), code, message, retry_ms (once per
                 distinct end)
  dra_health_cleared driver, endpoint (a stream ended: the driver's list goes)
  restart        phase "begin" | "done" (done: removed[] socket names)
  state          resources[...] (the "list" command)
  reply          cmd, id, ok, elapsed_us, and response{...} (protobuf JSON,
                 proto field names, unpopulated fields included) or
                 code/message; RPC commands also carry resource, endpoint
  exit           reason

Commands (stdin lines; an optional last word "#ID" is echoed as "id"):
  allocate RES ids[;ids...] [pod=NS/NAME [container=C1,C2...]]
                              one AllocateRequest, one container per group;
                              with pod= (needs -kubelet-root), a success
                              gives the pod those devices in PodResources
                              (containers named C1, C2 ..., default c0, c1 ...)
  release-pod NS/NAME         the pod's devices leave PodResources (reply:
                              released, the number of allocations dropped)
  prestart RES id,id
  preferred RES available=a,b [must=c] size=N
  options RES                 a fresh GetDevicePluginOptions
  dra-prepare DRIVER NS/NAME/UID [...]   ONE NodePrepareResources call with
                              all the claims; reply: driver, endpoint, service,
                              method (the gRPC path), claims[{namespace, name,
                              uid, result ("prepared"|"error"|"missing"),
                              error, devices[{request_names, pool, device,
                              cdi_device_ids, share_id}]}] in request order,
                              missing[uid], failed[uid], unexpected[uid]
                              (answers for claims not asked); a gRPC failure:
                              ok false, code, message; no instance: code
                              NotRegistered "DRA driver D is not registered"
  dra-unprepare DRIVER NS/NAME/UID [...] likewise (result "unprepared")
  dra-state                   drivers[{driver, instances[{endpoint,
                              registration_socket, service, supported_versions,
                              seq, connected, health_stream}], chosen, service,
                              usable, wipe_pending, health}], supported, health
  dra-health DRIVER           received, devices (the driver's last list),
                              endpoint, updated_ns
  restart | stop-server | start-server | list | quit
                              (with -watcher, stop-server/start-server stop
                              and start the watcher too: the kubelet down)
Reply codes besides gRPC's: NotRegistered, EndpointStopped, Usage, Internal.
"""

import itertools
import os

from .proc import T, Proc, _matcher, binary


class Kubelet(Proc):
    """kdp-test-kubelet on `dir`: Kubelet(dir, legacy=False, dial=None,
    rpc_timeout=None, args=()). start() (or `with`) waits for "ready"
    (self.ready); a plugin may register before "ready" is printed, so the
    cursor of the waits starts before it."""

    name = "kubelet"
    stop_last = True  # plugins stop first, so that their exit is seen by a live kubelet
    _ids = itertools.count(1)

    def __init__(self, dir, legacy=False, dial=None, rpc_timeout=None, args=(), env=None,
                 registry=None, tracking=None, kubelet_root=None, podres_get=None,
                 podres_delay=None, dra=None, dra_versions=None, dra_call_timeout=None,
                 dra_health=None, dra_health_retry=None, dra_wipe_delay=None,
                 dra_health_timeout=None, dra_health_versions=None):
        argv = [binary("kdp-test-kubelet"), "-dir", dir]
        if dra is not None:
            argv.append("-dra=%s" % ("true" if dra else "false"))
        if dra_versions is not None:
            argv += ["-dra-versions", ",".join(dra_versions)]
        if dra_call_timeout is not None:
            argv += ["-dra-call-timeout", "%gs" % dra_call_timeout]
        if dra_health is not None:
            argv += ["-dra-health", "on" if dra_health else "off"]
        if dra_health_retry is not None:
            argv += ["-dra-health-retry", "%gs" % dra_health_retry]
        if dra_wipe_delay is not None:
            argv += ["-dra-wipe-delay", "%gs" % dra_wipe_delay]
        if dra_health_timeout is not None:
            argv += ["-dra-health-timeout", "%gs" % dra_health_timeout]
        if dra_health_versions is not None:  # 1.37's negotiation
            argv += ["-dra-health-versions", ",".join(dra_health_versions)]
        if kubelet_root:
            argv += ["-kubelet-root", kubelet_root]
        if podres_get:
            argv += ["-podres-get", podres_get]
        if podres_delay is not None:
            argv += ["-podres-delay", "%gs" % podres_delay]
        if legacy:
            argv.append("-legacy")
        if registry:
            argv += ["-plugins-registry", registry]
        if tracking:
            argv += ["-endpoint-tracking", tracking]
        if dial:
            argv += ["-dial", dial]
        if rpc_timeout is not None:
            argv += ["-rpc-timeout", "%gs" % rpc_timeout]
        argv += list(args)
        super().__init__(argv, env=env)
        self.dir = dir
        self.socket = os.path.join(dir, "kubelet.sock")
        self.registry = registry
        self.pod_resources = (os.path.join(kubelet_root, "pod-resources", "kubelet.sock")
                              if kubelet_root else None)
        self.ready = None

    def start(self, timeout=T):
        super().start()
        try:
            self.ready = self.wait_event("ready", timeout)
        except AssertionError:
            self.stop()
            raise
        # A plugin already waiting registers the moment kubelet.sock exists,
        # possibly before "ready" is printed: later waits must still see it.
        with self._cond:
            self._cursor = 0
        return self

    def command_async(self, line):
        """Sends a command tagged with a fresh #ID; returns (id, mark)."""
        cid = "h%d" % next(self._ids)
        mark = self.mark()
        self.send("%s #%s" % (line, cid))
        return cid, mark

    def wait_reply(self, cid, mark=0, timeout=T):
        return self.wait_event("reply", timeout, since=mark, id=cid)

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
            raise AssertionError("kubelet: %r failed: %s" % (line, r))
        return r

    def capacities(self, resource, since=0):
        """[(t_ns, capacity, allocatable)] from the "capacity" events."""
        return [(e["t_ns"], e["capacity"], e["allocatable"])
                for e in self.events_since(since, "capacity", resource=resource)]

    def state(self, timeout=T):
        """{resource name: state dict} from the "list" command."""
        r = self.ok("list", timeout)
        return {x["resource"]: x for x in r["resources"]}

    # -- DRA ---------------------------------------------------------------

    @staticmethod
    def _claims(claims):
        """Claims as "NS/NAME/UID" words: each claim a string or a
        (namespace, name, uid) tuple."""
        words = []
        for c in claims:
            w = c if isinstance(c, str) else "/".join(c)
            if w.count("/") < 2 or any(ch.isspace() for ch in w):
                raise ValueError("bad claim %r (want NS/NAME/UID)" % (c,))
            words.append(w)
        return " ".join(words)

    def _dra_call(self, verb, driver, claims, timeout, extra=""):
        r = self.command("%s %s %s%s" % (verb, driver, self._claims(claims), extra), timeout)
        if r.get("ok"):
            r["by_uid"] = {c["uid"]: c for c in r["claims"]}
        return r

    def dra_prepare(self, driver, claims, timeout=60, pod=None, containers=()):
        """ONE NodePrepareResources call to the driver's instance with all
        the claims; returns the reply (check r["ok"]: the call itself;
        r["by_uid"][uid]["result"] is "prepared", "error" or "missing").
        pod "NS/NAME": the prepared claims are that pod's (containers, else
        "c0", reference them), in PodResources' DynamicResources."""
        extra = ""
        if pod:
            extra = " pod=" + pod + (" container=" + ",".join(containers) if containers else "")
        return self._dra_call("dra-prepare", driver, claims, timeout, extra)

    def dra_unprepare(self, driver, claims, timeout=60):
        """ONE NodeUnprepareResources call; like dra_prepare ("unprepared")."""
        return self._dra_call("dra-unprepare", driver, claims, timeout)

    def dra_state(self, timeout=T):
        """{driver: state dict} from "dra-state"."""
        r = self.ok("dra-state", timeout)
        return {d["driver"]: d for d in r["drivers"]}

    def dra_health(self, driver, timeout=T):
        """The driver's last device health list (the "dra-health" reply)."""
        return self.ok("dra-health %s" % driver, timeout)

    def wait_dra_registered(self, driver, timeout=T, **fields):
        """The dra_registered event of the driver (fields: endpoint=...)."""
        return self.wait_event("dra_registered", timeout, driver=driver, **fields)

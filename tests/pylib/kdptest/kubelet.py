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
                 podres_delay=None):
        argv = [binary("kdp-test-kubelet"), "-dir", dir]
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

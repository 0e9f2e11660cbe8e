// kdp-test-kubelet: a kubelet emulator for kdp's integration tests. It plays
// the kubelet's side of the device-plugin protocol (v1beta1) with grpc-go, the
// kubelet's own gRPC implementation, in the kubelet's order:
//
//	kdp-test-kubelet -dir DIR [-legacy] [-dial unix|legacy] [-rpc-timeout D]
//	                 [-dial-timeout D] [-max-recv-msg BYTES]
//	                 [-watcher | -plugins-registry DIR2]
//	                 [-endpoint-tracking default|resource|socket]
//	                 [-kubelet-root ROOT | -pod-resources]
//	                 [-podres-get on|off|absent] [-podres-delay D]
//	                 [-dra=false] [-dra-versions LIST] [-dra-call-timeout D]
//	                 [-dra-health on|off] [-dra-health-versions v1,v1alpha1] [-dra-health-retry D] [-dra-health-timeout D]
//	                 [-dra-wipe-delay D]
//
// With -kubelet-root ROOT (or -pod-resources: ROOT = DIR/..) it also serves
// the kubelet's PodResources API v1 on ROOT/pod-resources/kubelet.sock (see
// podres.go), from the devices the plugins stream and the allocations made
// by "allocate ... pod=NS/NAME".
//
// At start it removes every socket file in DIR (never other files, never
// kubelet_internal_checkpoint), serves the Registration service on
// DIR/kubelet.sock and prints {"event":"ready"}.
//
// Register: rejects a version other than v1beta1 and an invalid extended
// resource name (the kubelet's error texts, gRPC code Unknown like the
// kubelet's plain errors), then dials the plugin back at DIR/<endpoint>
// (blocking, insecure, 10 s) and, in the default (modern, kubelet >= 1.25)
// mode, calls GetDevicePluginOptions BEFORE it answers Register. With
// -legacy (kubelets <= 1.24) it answers Register first, then dials in the
// background and uses the options of the RegisterRequest. Then it opens
// ListAndWatch and keeps it open.
//
// With -watcher (DIR2 = DIR/../plugins_registry) or -plugins-registry DIR2 it
// also plays the kubelet's plugin-watcher side on DIR2 (see watcher.go); a
// restart then drops the connections and walks DIR2 again, never deleting
// anything in it. The watcher side also plays the kubelet's DRA side
// (dra.go, dracmd.go: "DRAPlugin" sockets, dra-* commands) unless -dra=false.
//
// -endpoint-tracking picks what the end of a plugin's stream (or the removal
// of its watcher socket) does when several registrations of one resource
// exist (see onStreamEnd): "default" (today's emulator: the resource is
// marked unhealthy whichever client ended; -legacy: only the current one),
// "resource" (kubelets >= 1.25 before kubernetes/kubernetes PR #135437: the
// NEWEST client of the resource is disconnected too, #121994) or "socket"
// (PR #135437: endpoints per socket path; an older instance's end leaves the
// resource alone). A "capacity" event reports every change of a resource's
// capacity/allocatable.
//
// Events go to stdout, one JSON object per line, each with "event" and
// "t_ns". Commands are read from stdin, one per line; each RPC runs in its
// own goroutine and its reply echoes an optional trailing "#ID" word. The
// events and commands are listed in tests/pylib/kdptest/kubelet.py, its driver.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "kdptest/kubeletpb"
)

// protoCodec replaces grpc-go's built-in "proto" codec. grpc-go 1.33's codec
// marshals through github.com/golang/protobuf/proto, and in GOPATH mode on
// Debian 12 that is golang/protobuf 1.3.5, which predates the APIv2 messages
// protoc-gen-go 1.28 generates (it panics on them). Newer grpc-go does exactly
// this: marshal with google.golang.org/protobuf/proto.
type protoCodec struct{}

func (protoCodec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (protoCodec) Name() string { return "proto" }

func init() { encoding.RegisterCodec(protoCodec{}) }

// The kubelet's constants and error texts
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/api.go).
const (
	apiVersion             = "v1beta1"
	kubeletSocket          = "kubelet.sock"
	checkpointFile         = "kubelet_internal_checkpoint"
	errUnsupportedVersion  = "requested API version %q is not supported by kubelet. Supported version is %q"
	errInvalidResourceName = "the ResourceName %q is invalid"
	errFailedToDial        = "failed to dial device plugin:"
)

var supportedVersions = []string{apiVersion}

// Flags.
var (
	fDir            string
	fLegacy         bool
	fDial           string
	fRPCTimeout     time.Duration
	fDialTimeout    time.Duration
	fMaxRecvMsg     int
	fWatcher        bool
	fRegistry       string
	fTracking       string
	fManagerVersion string
)

// ---------------------------------------------------------------------------
// events

// M is one JSON object.
type M = map[string]interface{}

var outMu sync.Mutex

// emit prints one event line. t_ns is taken under the output lock, so the
// t_ns of successive lines never goes backwards.
func emit(event string, m M) {
	if m == nil {
		m = M{}
	}
	m["event"] = event
	outMu.Lock()
	defer outMu.Unlock()
	m["t_ns"] = time.Now().UnixNano()
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(M{"event": "error", "t_ns": m["t_ns"], "error": "json: " + err.Error()})
	}
	os.Stdout.Write(append(b, '\n')) // os.Stdout is unbuffered: one write per line
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "kdp-test-kubelet: "+format+"\n", args...)
}

func optionsJSON(o *pb.DevicePluginOptions) interface{} {
	if o == nil {
		return nil
	}
	return M{
		"pre_start_required":                 o.PreStartRequired,
		"get_preferred_allocation_available": o.GetPreferredAllocationAvailable,
	}
}

func devicesJSON(devs []*pb.Device) ([]M, int, int) {
	out := make([]M, 0, len(devs))
	healthy, unhealthy := 0, 0
	for _, d := range devs {
		numa := []int64{}
		for _, n := range d.GetTopology().GetNodes() {
			numa = append(numa, n.GetID())
		}
		out = append(out, M{"id": d.ID, "health": d.Health, "numa": numa})
		if d.Health == "Healthy" {
			healthy++
		} else {
			unhealthy++
		}
	}
	return out, healthy, unhealthy
}

func errorFields(err error) M {
	if errors.Is(err, io.EOF) {
		return M{"error": "EOF", "code": "OK"}
	}
	st := status.Convert(err)
	return M{"error": err.Error(), "code": st.Code().String(), "message": st.Message()}
}

// ---------------------------------------------------------------------------
// commands

type command struct {
	name  string
	args  []string
	id    string
	start time.Time
}

func (cmd *command) reply(m M) {
	m["cmd"] = cmd.name
	if cmd.id != "" {
		m["id"] = cmd.id
	}
	m["elapsed_us"] = time.Since(cmd.start).Microseconds()
	emit("reply", m)
}

func (cmd *command) fail(code, format string, args ...interface{}) {
	cmd.reply(M{"ok": false, "code": code, "message": fmt.Sprintf(format, args...)})
}

// target returns the current client of the resource named by args[0].
func (k *kubelet) target(cmd *command) *client {
	if len(cmd.args) < 1 {
		cmd.fail("Usage", "%s: missing resource name", cmd.name)
		return nil
	}
	name := cmd.args[0]
	k.mu.Lock()
	defer k.mu.Unlock()
	rs := k.res[name]
	if rs == nil || rs.current == nil {
		cmd.fail("NotRegistered", "resource %q is not registered", name)
		return nil
	}
	if rs.current.closed {
		cmd.fail("EndpointStopped", "the endpoint %q of resource %q is stopped (its ListAndWatch stream ended)",
			rs.current.endpoint, name)
		return nil
	}
	return rs.current
}

func splitIDs(s string) []string {
	out := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

var pjson = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func (k *kubelet) rpcReply(cmd *command, c *client, resp proto.Message, err error) {
	m := M{"resource": c.resource, "endpoint": c.endpoint}
	if err != nil {
		st := status.Convert(err)
		m["ok"] = false
		m["code"] = st.Code().String()
		m["message"] = st.Message()
	} else {
		b, jerr := pjson.Marshal(resp)
		if jerr != nil {
			m["ok"] = false
			m["code"] = "Internal"
			m["message"] = "protojson: " + jerr.Error()
		} else {
			m["ok"] = true
			m["response"] = json.RawMessage(b)
		}
	}
	cmd.reply(m)
}

func (k *kubelet) doAllocate(cmd *command) {
	c := k.target(cmd)
	if c == nil {
		return
	}
	rest, ns, pod, ctrs, perr := parsePodArgs(cmd.args[1:])
	if perr != nil {
		cmd.fail("Usage", "allocate: %v", perr)
		return
	}
	req := &pb.AllocateRequest{}
	groups := ""
	if len(rest) > 0 {
		groups = rest[0]
	}
	var ids [][]string
	for _, g := range strings.Split(groups, ";") {
		ids = append(ids, splitIDs(g))
		req.ContainerRequests = append(req.ContainerRequests, &pb.ContainerAllocateRequest{DevicesIds: splitIDs(g)})
	}
	if pod != "" {
		if k.pr == nil {
			cmd.fail("Usage", "allocate: pod= needs -kubelet-root or -pod-resources")
			return
		}
		for i := len(ctrs); i < len(ids); i++ {
			ctrs = append(ctrs, fmt.Sprintf("c%d", i))
		}
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := c.api.Allocate(ctx, req)
	if err == nil && pod != "" {
		// Like the kubelet: the pod holds the devices once Allocate succeeded.
		k.pr.add(ns, pod, ctrs, c.resource, ids)
	}
	k.rpcReply(cmd, c, resp, err)
}

func (k *kubelet) doReleasePod(cmd *command) {
	if k.pr == nil {
		cmd.fail("Usage", "release-pod needs -kubelet-root or -pod-resources")
		return
	}
	_, ns, pod, _, err := parsePodArgs([]string{"pod=" + strings.Join(cmd.args, " ")})
	if err != nil || len(cmd.args) != 1 {
		cmd.fail("Usage", "release-pod NAMESPACE/NAME")
		return
	}
	cmd.reply(M{"ok": true, "released": k.pr.release(ns, pod)})
}

func (k *kubelet) doPrestart(cmd *command) {
	c := k.target(cmd)
	if c == nil {
		return
	}
	req := &pb.PreStartContainerRequest{}
	if len(cmd.args) > 1 {
		req.DevicesIds = splitIDs(cmd.args[1])
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := c.api.PreStartContainer(ctx, req)
	k.rpcReply(cmd, c, resp, err)
}

func (k *kubelet) doPreferred(cmd *command) {
	c := k.target(cmd)
	if c == nil {
		return
	}
	cr := &pb.ContainerPreferredAllocationRequest{}
	for _, a := range cmd.args[1:] {
		kv := strings.SplitN(a, "=", 2)
		if len(kv) != 2 {
			cmd.fail("Usage", "preferred: bad argument %q (want available=a,b must=c size=N)", a)
			return
		}
		switch kv[0] {
		case "available":
			cr.AvailableDeviceIDs = splitIDs(kv[1])
		case "must":
			cr.MustIncludeDeviceIDs = splitIDs(kv[1])
		case "size":
			n, err := strconv.ParseInt(kv[1], 10, 32)
			if err != nil {
				cmd.fail("Usage", "preferred: bad size %q", kv[1])
				return
			}
			cr.AllocationSize = int32(n)
		default:
			cmd.fail("Usage", "preferred: unknown argument %q", kv[0])
			return
		}
	}
	req := &pb.PreferredAllocationRequest{ContainerRequests: []*pb.ContainerPreferredAllocationRequest{cr}}
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := c.api.GetPreferredAllocation(ctx, req)
	k.rpcReply(cmd, c, resp, err)
}

func (k *kubelet) doOptions(cmd *command) {
	c := k.target(cmd)
	if c == nil {
		return
	}
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := c.api.GetDevicePluginOptions(ctx, &pb.Empty{})
	k.rpcReply(cmd, c, resp, err)
}

func (k *kubelet) state() []M {
	k.mu.Lock()
	defer k.mu.Unlock()
	names := make([]string, 0, len(k.res))
	for n := range k.res {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []M{}
	for _, n := range names {
		rs := k.res[n]
		devs, healthy, unhealthy := devicesJSON(rs.devices)
		allocatable := healthy
		if rs.markedUnhealthy {
			allocatable = 0
		}
		eps := []string{}
		for _, c := range rs.clients {
			eps = append(eps, c.endpoint)
		}
		m := M{
			"resource": n, "devices": devs, "healthy": healthy, "unhealthy": unhealthy,
			"capacity": healthy + unhealthy, "allocatable": allocatable,
			"marked_unhealthy": rs.markedUnhealthy, "seq": rs.seq, "clients": eps,
		}
		if c := rs.current; c != nil {
			m["endpoint"] = c.endpoint
			m["connected"] = !c.closed
			m["options"] = optionsJSON(c.options)
			m["options_source"] = c.optionsSource
			m["request_options"] = optionsJSON(c.requestOptions)
		}
		out = append(out, m)
	}
	return out
}

func (k *kubelet) doRestart(cmd *command) {
	k.adminMu.Lock()
	defer k.adminMu.Unlock()
	emit("restart", M{"phase": "begin"})
	k.stopServer()
	if k.w != nil {
		k.w.stop()
	}
	k.dropAll("restart")
	if k.dra != nil {
		k.dra.dropAll("restart")
	}
	removed := k.removeSockets()
	err := k.startServer()
	if err == nil && k.w != nil {
		if k.dra != nil {
			k.dra.start()
		}
		// plugins_registry/ is walked again, never emptied.
		err = k.w.start()
	}
	emit("restart", M{"phase": "done", "removed": removed})
	if err != nil {
		cmd.fail("Internal", "restart: %v", err)
		return
	}
	cmd.reply(M{"ok": true, "removed": removed})
}

func (k *kubelet) doStopServer(cmd *command) {
	k.adminMu.Lock()
	defer k.adminMu.Unlock()
	k.stopServer()
	if k.w != nil {
		k.w.stop()
	}
	k.dropAll("stop-server")
	if k.dra != nil {
		k.dra.dropAll("stop-server")
	}
	if err := os.Remove(k.sockPath()); err != nil && !os.IsNotExist(err) {
		cmd.fail("Internal", "remove %s: %v", k.sockPath(), err)
		return
	}
	cmd.reply(M{"ok": true})
}

func (k *kubelet) doStartServer(cmd *command) {
	k.adminMu.Lock()
	defer k.adminMu.Unlock()
	if err := k.startServer(); err != nil {
		cmd.fail("Internal", "start-server: %v", err)
		return
	}
	if k.w != nil {
		if k.dra != nil {
			k.dra.start()
		}
		if err := k.w.start(); err != nil {
			cmd.fail("Internal", "start-server: watcher: %v", err)
			return
		}
	}
	cmd.reply(M{"ok": true})
}

// shutdown closes everything and exits 0.
func (k *kubelet) shutdown(why string) {
	k.adminMu.Lock() // never released: we exit
	k.stopServer()
	if k.w != nil {
		k.w.stop()
	}
	k.dropAll("exit")
	if k.dra != nil {
		k.dra.dropAll("exit")
	}
	if k.pr != nil {
		k.pr.stop()
	}
	os.Remove(k.sockPath())
	emit("exit", M{"reason": why})
	os.Exit(0)
}

func parseCommand(line string) *command {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	cmd := &command{name: f[0], start: time.Now()}
	if n := len(f); n > 1 && strings.HasPrefix(f[n-1], "#") {
		cmd.id = f[n-1][1:]
		f = f[:n-1]
	}
	cmd.args = f[1:]
	return cmd
}

func (k *kubelet) dispatch(cmd *command) {
	switch cmd.name {
	case "allocate":
		go k.doAllocate(cmd)
	case "prestart":
		go k.doPrestart(cmd)
	case "preferred":
		go k.doPreferred(cmd)
	case "options":
		go k.doOptions(cmd)
	case "restart":
		go k.doRestart(cmd)
	case "stop-server":
		go k.doStopServer(cmd)
	case "start-server":
		go k.doStartServer(cmd)
	case "release-pod":
		k.doReleasePod(cmd)
	case "dra-prepare":
		go k.doDRAPrepare(cmd)
	case "dra-unprepare":
		go k.doDRAUnprepare(cmd)
	case "dra-state":
		k.doDRAState(cmd)
	case "dra-health":
		k.doDRAHealth(cmd)
	case "list":
		st := k.state()
		ev := M{"resources": st}
		if cmd.id != "" {
			ev["id"] = cmd.id
		}
		emit("state", ev)
		cmd.reply(M{"ok": true, "resources": st})
	default:
		cmd.fail("Usage", "unknown command %q", cmd.name)
	}
}

func main() {
	fs := flag.NewFlagSet("kdp-test-kubelet", flag.ContinueOnError)
	fs.StringVar(&fDir, "dir", "", "device-plugin directory (required)")
	fs.BoolVar(&fLegacy, "legacy", false, "behave like kubelets <= 1.24 (options from RegisterRequest, dial after answering)")
	fs.StringVar(&fDial, "dial", "unix", `"unix": target unix://PATH (:authority localhost); "legacy": target PATH + custom dialer (:authority PATH)`)
	fs.DurationVar(&fRPCTimeout, "rpc-timeout", 60*time.Second, "safety bound on unary calls to plugins (0 = none, like the kubelet)")
	fs.DurationVar(&fDialTimeout, "dial-timeout", 10*time.Second, "blocking dial timeout (the kubelet's is 10s)")
	fs.IntVar(&fMaxRecvMsg, "max-recv-msg", 4*1024*1024, "largest ListAndWatch message accepted (grpc-go's default, the kubelet's: 4 MiB); a larger one fails the stream")
	fs.BoolVar(&fWatcher, "watcher", false, "play the plugin-watcher side too, on DIR/../plugins_registry")
	fs.StringVar(&fRegistry, "plugins-registry", "", "play the plugin-watcher side too, on this directory (implies -watcher)")
	fs.StringVar(&fManagerVersion, "manager-version", apiVersion, "the version the watcher side's device manager asks of a plugin's GetInfo (another one: a kubelet this plugin is too old for)")
	fs.StringVar(&fTracking, "endpoint-tracking", "default", `"default" (this emulator's historic rule), "resource" (kubelets 1.25+ before PR #135437) or "socket" (PR #135437)`)
	fs.StringVar(&fKubeletRoot, "kubelet-root", "", "serve the PodResources API on ROOT/pod-resources/kubelet.sock")
	fs.BoolVar(&fPodResources, "pod-resources", false, "serve the PodResources API with ROOT = DIR/..")
	fs.StringVar(&fPodresGet, "podres-get", "on", `PodResources Get: "on", "off" (the kubelet's gate-off error) or "absent" (Unimplemented: kubelets before 1.27)`)
	fs.DurationVar(&fPodresDelay, "podres-delay", 0, "every PodResources answer waits this long first")
	fs.BoolVar(&fDRA, "dra", true, "with the watcher side: handle \"DRAPlugin\" sockets (DRA, Kubernetes 1.34+; false: a kubelet without DRA)")
	fs.StringVar(&fDRAVersions, "dra-versions", draServiceV1+","+draServiceV1beta1, "the DRA services this kubelet supports, comma-separated (\"v1beta1.DRAPlugin\": a 1.32/1.33 kubelet; empty: none)")
	fs.DurationVar(&fDRACallTimeout, "dra-call-timeout", 45*time.Second, "per-call timeout of NodePrepareResources/NodeUnprepareResources (the kubelet's 45s)")
	fs.StringVar(&fDRAHealth, "dra-health", "on", `"on": NodeWatchResources on every DRA instance (gate ResourceHealthStatus), "off": never`)
	fs.StringVar(&fDRAHealthVersions, "dra-health-versions", "", `the health service versions this kubelet has, preferred first ("v1,v1alpha1": 1.37, which picks among the plugin's advertised ones and does not retry after UNIMPLEMENTED); "" = 1.34-1.36 (v1alpha1 always, retried)`)
	fs.DurationVar(&fDRAHealthRetry, "dra-health-retry", 5*time.Second, "wait before the health stream is opened again (the kubelet's 5s)")
	fs.DurationVar(&fDRAHealthTTL, "dra-health-timeout", 0, "dra-health reports the devices of a list older than this as Unknown (the kubelet's health timeout, 30s; 0: not modelled)")
	fs.DurationVar(&fDRAWipeDelay, "dra-wipe-delay", 30*time.Second, "no instance of a driver connected this long -> dra_wipe (the kubelet deletes its ResourceSlices)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fDir == "" || fs.NArg() != 0 || (fDial != "unix" && fDial != "legacy") ||
		(fTracking != "default" && fTracking != "resource" && fTracking != "socket") ||
		(fPodresGet != "on" && fPodresGet != "off" && fPodresGet != "absent") ||
		(fDRAHealth != "on" && fDRAHealth != "off") || fDRAHealthRetry <= 0 || fDRAHealthTTL < 0 ||
		!healthVersionsValid(fDRAHealthVersions) {
		fmt.Fprintln(os.Stderr, "usage: kdp-test-kubelet -dir DIR [-legacy] [-dial unix|legacy] [-rpc-timeout D] [-dial-timeout D] [-max-recv-msg BYTES] [-watcher | -plugins-registry DIR2] [-endpoint-tracking default|resource|socket] [-kubelet-root ROOT | -pod-resources] [-podres-get on|off|absent] [-podres-delay D] [-dra=false] [-dra-versions LIST] [-dra-call-timeout D] [-dra-health on|off] [-dra-health-retry D] [-dra-health-timeout D] [-dra-wipe-delay D]")
		os.Exit(2)
	}
	dir, err := filepath.Abs(fDir)
	if err != nil {
		logf("dir: %v", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		logf("mkdir %s: %v", dir, err)
		os.Exit(1)
	}
	k := newKubelet(dir)
	registry := ""
	if fRegistry != "" || fWatcher {
		registry = filepath.Join(filepath.Dir(dir), "plugins_registry")
		if fRegistry != "" {
			if registry, err = filepath.Abs(fRegistry); err != nil {
				logf("plugins-registry: %v", err)
				os.Exit(1)
			}
		}
		k.w = newWatcher(k, registry)
		if fDRA {
			k.dra = newDRAManager()
		}
	}
	podresSock := ""
	if fKubeletRoot != "" || fPodResources {
		root := filepath.Dir(dir)
		if fKubeletRoot != "" {
			if root, err = filepath.Abs(fKubeletRoot); err != nil {
				logf("kubelet-root: %v", err)
				os.Exit(1)
			}
		}
		if k.pr, err = startPodres(k, root); err != nil {
			logf("pod-resources: %v", err)
			os.Exit(1)
		}
		podresSock = k.pr.socket
	}
	removed := k.removeSockets()
	if err := k.startServer(); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	if k.w != nil {
		if k.dra != nil {
			k.dra.start()
		}
		if err := k.w.start(); err != nil {
			logf("%v", err)
			os.Exit(1)
		}
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		k.shutdown(s.String())
	}()

	emit("ready", M{"socket": k.sockPath(), "dir": dir, "legacy": fLegacy, "dial": fDial,
		"pid": os.Getpid(), "removed": removed, "plugins_registry": registry,
		"endpoint_tracking": fTracking, "pod_resources": podresSock, "dra": k.dra != nil,
		"dra_versions": draSupported(), "dra_health": fDRAHealth})

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		cmd := parseCommand(sc.Text())
		if cmd == nil {
			continue
		}
		if cmd.name == "quit" {
			k.shutdown("quit")
		}
		k.dispatch(cmd)
	}
	k.shutdown("stdin closed")
}

// The kubelet side of kdp-test-kubelet: its device-plugin registry, the
// Registration service, the dial back to the plugin and the ListAndWatch
// loop, in the kubelet's order (see main.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "kdptest/kubeletpb"
)

// ---------------------------------------------------------------------------
// IsExtendedResourceName, as Kubernetes defines it
// (k8s.io/kubernetes/pkg/apis/core/v1/helper + apimachinery validation).

var (
	qualifiedNameRe = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dns1123SubRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func isQualifiedName(v string) bool {
	parts := strings.Split(v, "/")
	var name string
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		prefix := parts[0]
		name = parts[1]
		if prefix == "" || len(prefix) > 253 || !dns1123SubRe.MatchString(prefix) {
			return false
		}
	default:
		return false
	}
	return name != "" && len(name) <= 63 && qualifiedNameRe.MatchString(name)
}

func isExtendedResourceName(name string) bool {
	// IsNativeResource: no '/' or contains "kubernetes.io/".
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") {
		return false
	}
	if strings.HasPrefix(name, "requests.") {
		return false
	}
	return isQualifiedName("requests." + name)
}

// ---------------------------------------------------------------------------
// kubelet state

// client is one connection to a plugin endpoint (one successful registration).
type client struct {
	resource       string
	endpoint       string // as registered (kubelet.sock: file name relative to the dir; watcher: as GetInfo gave it, "" = the registration socket)
	socket         string // full path dialed
	via            string // "kubelet.sock" or "watcher"
	regSocket      string // watcher: the registration socket in plugins_registry/
	gen            int    // server generation it registered with
	conn           *grpc.ClientConn
	api            pb.DevicePluginClient
	options        *pb.DevicePluginOptions
	optionsSource  string
	requestOptions *pb.DevicePluginOptions
	registerNs     int64
	closed         bool          // stream ended or connection closed (k.mu)
	dropped        string        // why the emulator closed it: restart, stop-server, exit, deregistered, disconnected (k.mu)
	wasCurrent     bool          // it was the resource's current client when dropped (k.mu)
	cause          string        // dropped == "disconnected": the endpoint whose end caused it
	done           chan struct{} // closed when its ListAndWatch loop has returned
}

// resource is the kubelet's view of one resource name.
type resource struct {
	name    string
	current *client   // the endpoint the kubelet uses (latest registration)
	clients []*client // every connected client for this name
	devices []*pb.Device
	// markedUnhealthy: a ListAndWatch stream ended, so the kubelet moved
	// every device to unhealthy (allocatable 0) until the next update.
	markedUnhealthy bool
	seq             int
}

type kubelet struct {
	pb.UnimplementedRegistrationServer

	dir     string
	mu      sync.Mutex
	srv     *grpc.Server
	serving bool
	gen     int // bumped whenever every connection is dropped (restart/stop)
	res     map[string]*resource
	adminMu sync.Mutex  // serializes restart/stop-server/start-server/quit
	w       *watcher    // nil unless -plugins-registry/-watcher
	pr      *podres     // nil unless -kubelet-root/-pod-resources
	dra     *draManager // nil unless the watcher side runs with -dra (dra.go)
	// lastCap: the (capacity, allocatable) last reported per resource by a
	// "capacity" event (k.mu); kept across restarts.
	lastCap map[string][2]int
}

func newKubelet(dir string) *kubelet {
	return &kubelet{dir: dir, res: map[string]*resource{}, lastCap: map[string][2]int{}}
}

// capacityLocked returns what the kubelet would report in the node status
// for the resource: capacity = healthy + unhealthy devices, allocatable =
// healthy ones (0 once a stream end marked them all unhealthy); 0/0 once
// the resource is forgotten (a kubelet restart).
func capacityLocked(rs *resource) (int, int) {
	if rs == nil {
		return 0, 0
	}
	_, healthy, unhealthy := devicesJSON(rs.devices)
	if rs.markedUnhealthy {
		return healthy + unhealthy, 0
	}
	return healthy + unhealthy, healthy
}

// noteCapacityLocked emits a "capacity" event when the resource's
// (capacity, allocatable) differs from the last one reported. Called with
// k.mu held after every change, so the events are in the order of the
// changes and their t_ns is the time of the change.
func (k *kubelet) noteCapacityLocked(name, cause, endpoint string) {
	c, a := capacityLocked(k.res[name])
	last, seen := k.lastCap[name]
	if seen && last == [2]int{c, a} {
		return
	}
	if !seen && c == 0 && a == 0 {
		return
	}
	k.lastCap[name] = [2]int{c, a}
	emit("capacity", M{"resource": name, "capacity": c, "allocatable": a,
		"cause": cause, "endpoint": endpoint})
}

func (k *kubelet) sockPath() string { return filepath.Join(k.dir, kubeletSocket) }

// removeSockets deletes every socket file in the dir, like the kubelet at
// start (never the checkpoint, never regular files or directories).
func (k *kubelet) removeSockets() []string {
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		logf("read %s: %v", k.dir, err)
		return nil
	}
	removed := []string{}
	for _, e := range ents {
		if e.Name() == checkpointFile {
			continue
		}
		p := filepath.Join(k.dir, e.Name())
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(p); err != nil {
			logf("remove %s: %v", p, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed
}

// startServer listens on kubelet.sock (removing a stale file first) and serves.
func (k *kubelet) startServer() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.serving {
		return errors.New("already serving")
	}
	p := k.sockPath()
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %v", p, err)
	}
	lis, err := net.Listen("unix", p)
	if err != nil {
		return fmt.Errorf("listen %s: %v", p, err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false) // we delete it ourselves
	srv := grpc.NewServer()
	pb.RegisterRegistrationServer(srv, k)
	k.srv = srv
	k.serving = true
	go func() {
		if err := srv.Serve(lis); err != nil {
			logf("serve: %v", err)
		}
	}()
	return nil
}

// stopServer stops the Registration server (in-flight Register calls are
// cancelled); the socket file is left alone.
func (k *kubelet) stopServer() {
	k.mu.Lock()
	srv := k.srv
	k.srv = nil
	k.serving = false
	k.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// dropAll closes every plugin connection and forgets every resource, like a
// kubelet that exits. It waits (bounded) for the ListAndWatch loops to report
// stream_end, so those events come before whatever the caller emits next.
func (k *kubelet) dropAll(reason string) {
	k.mu.Lock()
	k.gen++
	var conns []*grpc.ClientConn
	var dones []chan struct{}
	for _, r := range k.res {
		for _, c := range r.clients {
			c.dropped = reason
			c.wasCurrent = r.current == c
			conns = append(conns, c.conn)
			dones = append(dones, c.done)
		}
	}
	names := make([]string, 0, len(k.res))
	for n := range k.res {
		names = append(names, n)
	}
	k.res = map[string]*resource{}
	for _, n := range names {
		k.noteCapacityLocked(n, reason, "")
	}
	k.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	deadline := time.After(5 * time.Second)
	for _, d := range dones {
		select {
		case <-d:
		case <-deadline:
			logf("dropAll: a ListAndWatch loop did not end within 5 s")
			return
		}
	}
}

// ---------------------------------------------------------------------------
// Registration service

func (k *kubelet) Register(ctx context.Context, r *pb.RegisterRequest) (*pb.Empty, error) {
	arrived := time.Now().UnixNano()
	k.mu.Lock()
	gen := k.gen
	k.mu.Unlock()
	reject := func(err error) (*pb.Empty, error) {
		emit("rejected", M{"resource": r.ResourceName, "endpoint": r.Endpoint,
			"version": r.Version, "error": err.Error(), "register_ns": arrived})
		return &pb.Empty{}, err
	}
	ok := false
	for _, v := range supportedVersions {
		if r.Version == v {
			ok = true
		}
	}
	if !ok {
		return reject(fmt.Errorf(errUnsupportedVersion, r.Version, supportedVersions))
	}
	if !isExtendedResourceName(r.ResourceName) {
		return reject(fmt.Errorf(errInvalidResourceName, r.ResourceName))
	}
	if fLegacy {
		// Kubelets <= 1.24: `go m.addEndpoint(r)`, then answer at once.
		go func() {
			if _, err := k.connect(gen, r, arrived, kubeletSockTarget(k, r)); err != nil {
				emit("connect_failed", M{"resource": r.ResourceName, "endpoint": r.Endpoint,
					"error": err.Error(), "register_ns": arrived})
			}
		}()
		return &pb.Empty{}, nil
	}
	if _, err := k.connect(gen, r, arrived, kubeletSockTarget(k, r)); err != nil {
		return reject(err)
	}
	return &pb.Empty{}, nil
}

func dialPlugin(socket string) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fDialTimeout)
	defer cancel()
	opts := []grpc.DialOption{grpc.WithInsecure(), grpc.WithBlock(), grpc.WithReturnConnectionError()}
	target := "unix://" + socket // :authority localhost
	if fDial == "legacy" {
		// Older kubelets: the bare path + a custom dialer; :authority = path.
		target = socket
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	}
	return grpc.DialContext(ctx, target, opts...)
}

func rpcCtx() (context.Context, context.CancelFunc) {
	if fRPCTimeout > 0 {
		return context.WithTimeout(context.Background(), fRPCTimeout)
	}
	return context.WithCancel(context.Background())
}

// target says where connect dials and how the registration arrived.
type target struct {
	socket    string // full path to dial
	via       string // "kubelet.sock" or "watcher"
	regSocket string // watcher: the registration socket
	// optionsFromRequest: kubelets <= 1.24 on the kubelet.sock path take the
	// options from RegisterRequest; the watcher path always asked the plugin.
	optionsFromRequest bool
}

func kubeletSockTarget(k *kubelet, r *pb.RegisterRequest) target {
	return target{socket: filepath.Join(k.dir, r.Endpoint), via: "kubelet.sock", optionsFromRequest: fLegacy}
}

// connect dials the plugin, gets its options (modern mode), installs it as
// the resource's endpoint and starts ListAndWatch.
func (k *kubelet) connect(gen int, r *pb.RegisterRequest, arrived int64, t target) (*client, error) {
	c := &client{
		resource:       r.ResourceName,
		endpoint:       r.Endpoint,
		socket:         t.socket,
		via:            t.via,
		regSocket:      t.regSocket,
		gen:            gen,
		requestOptions: r.Options,
		registerNs:     arrived,
		done:           make(chan struct{}),
	}
	t0 := time.Now()
	conn, err := dialPlugin(c.socket)
	if err != nil {
		return nil, fmt.Errorf(errFailedToDial+" %v", err)
	}
	dialUs := time.Since(t0).Microseconds()
	c.conn = conn
	c.api = pb.NewDevicePluginClient(conn)
	if t.optionsFromRequest {
		c.options = r.Options
		if c.options == nil {
			c.options = &pb.DevicePluginOptions{}
		}
		c.optionsSource = "request"
	} else {
		ctx, cancel := rpcCtx()
		opts, err := c.api.GetDevicePluginOptions(ctx, &pb.Empty{})
		cancel()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("failed to get device plugin options: %v", err)
		}
		c.options = opts
		c.optionsSource = "rpc"
	}

	k.mu.Lock()
	if k.gen != gen {
		k.mu.Unlock()
		conn.Close()
		return nil, errors.New("kubelet restarted or stopped during the registration")
	}
	rs := k.res[c.resource]
	if rs == nil {
		rs = &resource{name: c.resource}
		k.res[c.resource] = rs
	}
	old := rs.current
	rs.current = c
	rs.clients = append(rs.clients, c)
	replaced := old != nil && !old.closed
	k.mu.Unlock()

	if replaced {
		emit("replaced", M{"resource": c.resource, "old_endpoint": old.endpoint, "endpoint": c.endpoint})
	}
	ev := M{
		"resource":        c.resource,
		"endpoint":        c.endpoint,
		"version":         r.Version,
		"options":         optionsJSON(c.options),
		"options_source":  c.optionsSource,
		"request_options": optionsJSON(r.Options),
		"register_ns":     arrived,
		"dial_us":         dialUs,
		"legacy":          fLegacy,
		"via":             c.via,
		"socket":          c.socket,
	}
	if c.regSocket != "" {
		ev["registration_socket"] = c.regSocket
	}
	emit("registered", ev)
	go k.listAndWatch(c)
	return c, nil
}

func (k *kubelet) listAndWatch(c *client) {
	defer close(c.done)
	// Like the kubelet: no deadline, never cancelled by us (only by closing
	// the connection).
	stream, err := c.api.ListAndWatch(context.Background(), &pb.Empty{},
		grpc.MaxCallRecvMsgSize(fMaxRecvMsg))
	if err == nil {
		for {
			var resp *pb.ListAndWatchResponse
			resp, err = stream.Recv()
			if err != nil {
				break
			}
			k.onDevices(c, resp)
		}
	}
	k.onStreamEnd(c, err)
}

func (k *kubelet) onDevices(c *client, resp *pb.ListAndWatchResponse) {
	k.mu.Lock()
	rs := k.res[c.resource]
	seq := 0
	current := false
	if rs != nil && c.gen == k.gen {
		rs.devices = resp.Devices
		rs.markedUnhealthy = false
		rs.seq++
		seq = rs.seq
		current = rs.current == c
		k.noteCapacityLocked(c.resource, "devices", c.endpoint)
	}
	k.mu.Unlock()
	devs, healthy, unhealthy := devicesJSON(resp.Devices)
	emit("devices", M{
		"resource": c.resource, "endpoint": c.endpoint, "current": current,
		"devices": devs, "healthy": healthy, "unhealthy": unhealthy,
		"n": len(resp.Devices), "bytes": proto.Size(resp), "seq": seq,
	})
}

func removeClient(rs *resource, c *client) {
	for i, x := range rs.clients {
		if x == c {
			rs.clients = append(rs.clients[:i], rs.clients[i+1:]...)
			return
		}
	}
}

// disconnectLocked is the kubelet's disconnectClient: it forgets c and
// closes its connection (which ends its ListAndWatch stream; that stream_end
// carries the reason). The caller closes the returned connection after
// releasing k.mu. why: "deregistered", "disconnected".
func (k *kubelet) disconnectLocked(rs *resource, c *client, why, cause string) *client {
	if c == nil || c.closed || c.dropped != "" {
		return nil
	}
	c.dropped = why
	c.wasCurrent = rs.current == c
	c.cause = cause
	removeClient(rs, c)
	return c
}

// markOnDisconnectLocked decides whether the end of client c (its stream
// ended, or it was deregistered) makes the kubelet mark every device of its
// resource unhealthy (PluginDisconnected -> markResourceUnhealthy), under the
// chosen endpoint tracking.
func markOnDisconnectLocked(rs *resource, c *client) bool {
	switch fTracking {
	case "socket":
		// PR #135437: endpoints tracked per socket path; the end of an
		// instance that is no longer the resource's newest endpoint leaves
		// the resource alone.
		return rs.current == c
	default:
		// Modern kubelets: PluginDisconnected(resourceName) marks the whole
		// resource unhealthy whichever of its clients ended. Kubelets <= 1.24
		// only do so when the ended endpoint is still the current one.
		return rs.current == c || !fLegacy
	}
}

// deregisterPlugin is the devicemanager's DeRegisterPlugin(name, endpoint)
// (a watcher socket went away): it picks the client to disconnect, by
// resource name (the newest registration) under -endpoint-tracking resource,
// else by socket path, forgets it and marks the resource as the tracking
// says. The caller closes the returned client's connection.
func (k *kubelet) deregisterPlugin(name, socket string) (*client, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rs := k.res[name]
	if rs == nil {
		return nil, false
	}
	var c *client
	if fTracking == "resource" {
		c = rs.current
	} else {
		for _, x := range rs.clients {
			if x.socket == socket {
				c = x
				break
			}
		}
	}
	if c == nil || c.closed || c.dropped != "" {
		return nil, false
	}
	mark := fTracking == "resource" || markOnDisconnectLocked(rs, c)
	k.disconnectLocked(rs, c, "deregistered", "")
	if mark {
		rs.markedUnhealthy = true
		k.noteCapacityLocked(name, "deregistered", c.endpoint)
	}
	return c, mark
}

func (k *kubelet) onStreamEnd(c *client, err error) {
	k.mu.Lock()
	rs := k.res[c.resource]
	current, marked := false, false
	var victim *client
	if rs != nil && c.gen == k.gen && !c.closed && c.dropped == "" {
		current = rs.current == c
		removeClient(rs, c)
		switch {
		case fTracking == "resource":
			// Kubelets >= 1.25 before PR #135437 (kubernetes/kubernetes
			// #121994, #127803): when a client's stream ends, the server
			// looks its client up by resource NAME, which finds the newest
			// registration, and disconnects THAT one: its connection is
			// closed and the resource marked unhealthy. The new instance of
			// a plugin is torn down by the old one's exit.
			if nc := rs.current; nc != nil && !nc.closed && nc.dropped == "" {
				if nc != c {
					victim = k.disconnectLocked(rs, nc, "disconnected", c.endpoint)
				}
				rs.markedUnhealthy = true
				marked = true
			}
		case markOnDisconnectLocked(rs, c):
			rs.markedUnhealthy = true
			marked = true
		}
		if marked {
			k.noteCapacityLocked(c.resource, "stream_end", c.endpoint)
		}
	}
	if c.dropped != "" {
		current = c.wasCurrent
	}
	c.closed = true
	reason := c.dropped
	if reason == "" {
		reason = "stream"
	}
	cause := c.cause
	k.mu.Unlock()
	c.conn.Close()
	if victim != nil {
		emit("disconnected", M{"resource": victim.resource, "endpoint": victim.endpoint,
			"via": victim.via, "reason": "disconnected", "cause_endpoint": c.endpoint})
		victim.conn.Close()
	}
	ev := errorFields(err)
	ev["resource"] = c.resource
	ev["endpoint"] = c.endpoint
	ev["current"] = current
	ev["marked_unhealthy"] = marked
	ev["reason"] = reason
	ev["via"] = c.via
	if cause != "" {
		ev["cause_endpoint"] = cause
	}
	emit("stream_end", ev)
}

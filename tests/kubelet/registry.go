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
	endpoint       string // as registered (file name relative to the dir)
	socket         string // full path
	gen            int    // server generation it registered with
	conn           *grpc.ClientConn
	api            pb.DevicePluginClient
	options        *pb.DevicePluginOptions
	optionsSource  string
	requestOptions *pb.DevicePluginOptions
	registerNs     int64
	closed         bool          // stream ended or connection closed (k.mu)
	dropped        string        // why dropAll closed it: restart, stop-server, exit (k.mu)
	wasCurrent     bool          // it was the resource's current client when dropped (k.mu)
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
	adminMu sync.Mutex // serializes restart/stop-server/start-server/quit
}

func newKubelet(dir string) *kubelet {
	return &kubelet{dir: dir, res: map[string]*resource{}}
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
	k.res = map[string]*resource{}
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
			if err := k.connect(gen, r, arrived); err != nil {
				emit("connect_failed", M{"resource": r.ResourceName, "endpoint": r.Endpoint,
					"error": err.Error(), "register_ns": arrived})
			}
		}()
		return &pb.Empty{}, nil
	}
	if err := k.connect(gen, r, arrived); err != nil {
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

// connect dials the plugin, gets its options (modern mode), installs it as
// the resource's endpoint and starts ListAndWatch.
func (k *kubelet) connect(gen int, r *pb.RegisterRequest, arrived int64) error {
	c := &client{
		resource:       r.ResourceName,
		endpoint:       r.Endpoint,
		socket:         filepath.Join(k.dir, r.Endpoint),
		gen:            gen,
		requestOptions: r.Options,
		registerNs:     arrived,
		done:           make(chan struct{}),
	}
	t0 := time.Now()
	conn, err := dialPlugin(c.socket)
	if err != nil {
		return fmt.Errorf(errFailedToDial+" %v", err)
	}
	dialUs := time.Since(t0).Microseconds()
	c.conn = conn
	c.api = pb.NewDevicePluginClient(conn)
	if fLegacy {
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
			return fmt.Errorf("failed to get device plugin options: %v", err)
		}
		c.options = opts
		c.optionsSource = "rpc"
	}

	k.mu.Lock()
	if k.gen != gen {
		k.mu.Unlock()
		conn.Close()
		return errors.New("kubelet restarted or stopped during the registration")
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
	}
	emit("registered", ev)
	go k.listAndWatch(c)
	return nil
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
	}
	k.mu.Unlock()
	devs, healthy, unhealthy := devicesJSON(resp.Devices)
	emit("devices", M{
		"resource": c.resource, "endpoint": c.endpoint, "current": current,
		"devices": devs, "healthy": healthy, "unhealthy": unhealthy,
		"n": len(resp.Devices), "bytes": proto.Size(resp), "seq": seq,
	})
}

func (k *kubelet) onStreamEnd(c *client, err error) {
	k.mu.Lock()
	rs := k.res[c.resource]
	current, marked := false, false
	if rs != nil && c.gen == k.gen && !c.closed {
		current = rs.current == c
		for i, x := range rs.clients {
			if x == c {
				rs.clients = append(rs.clients[:i], rs.clients[i+1:]...)
				break
			}
		}
		// Modern kubelets: PluginDisconnected(resourceName) marks the whole
		// resource unhealthy whichever of its clients ended. Kubelets <= 1.24
		// only do so when the ended endpoint is still the current one.
		if current || !fLegacy {
			rs.markedUnhealthy = true
			marked = true
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
	k.mu.Unlock()
	c.conn.Close()
	ev := errorFields(err)
	ev["resource"] = c.resource
	ev["endpoint"] = c.endpoint
	ev["current"] = current
	ev["marked_unhealthy"] = marked
	ev["reason"] = reason
	emit("stream_end", ev)
}

// kdp-go-testplugin: a minimal device plugin in grpc-go, used to prove the
// kubelet emulator (kdp-test-kubelet) against a real grpc-go peer.
//
//	kdp-go-testplugin -dir DIR [-socket NAME] [-resource RES] [-devices a,b]
//	                  [-unhealthy x,y] [-numa N] [-env NAME] [-prestart]
//	                  [-preferred] [-version V] [-request-options=false]
//	                  [-count N -id-len L] [-endpoint NAME]
//	kdp-go-testplugin -registry DIR2 [-reg-socket NAME] [-dp-socket PATH]
//	                  [-info-type T] [-info-name N] [-info-versions a,b]
//	                  [-info-endpoint E] [device flags as above]
//
// Serves the DevicePlugin service on DIR/NAME, then registers with
// DIR/kubelet.sock. Every 100 ms it checks whether kubelet.sock was
// re-created (another inode) or its own socket was deleted; if so it serves
// again on a fresh socket (when deleted) and registers again. Allocate sets
// $ENV to the comma-joined IDs of each container request (unknown IDs:
// InvalidArgument). Stdin: "set ID Healthy|Unhealthy" pushes an update on
// every open ListAndWatch stream. Events: JSON lines on stdout.
//
// Watcher mode (-registry DIR2): serves pluginregistration.Registration on
// DIR2/NAME (-reg-socket, default tp-reg.sock) and never touches
// kubelet.sock. Without -dp-socket the same socket serves the DevicePlugin
// service too and GetInfo gives an empty endpoint; with -dp-socket PATH the
// DevicePlugin service is on PATH, which GetInfo gives as the endpoint.
// -info-* override what GetInfo answers (another type, a bad name, versions
// without v1beta1, any endpoint). Events: get_info, notify {registered,
// error} for every NotifyRegistrationStatus. Stdin: "unlink" removes the
// registration socket file (the server keeps its listener), "relisten"
// serves the registration socket again on a fresh file.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "kdptest/kubeletpb"
	regpb "kdptest/pluginregpb"
)

// protoCodec: see tests/kubelet/main.go (golang/protobuf 1.3.5 vs APIv2).
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

type M = map[string]interface{}

var outMu sync.Mutex

func emit(event string, m M) {
	if m == nil {
		m = M{}
	}
	m["event"] = event
	outMu.Lock()
	defer outMu.Unlock()
	m["t_ns"] = time.Now().UnixNano()
	b, _ := json.Marshal(m)
	os.Stdout.Write(append(b, '\n'))
}

var (
	fDir, fSocket, fResource, fDevices, fUnhealthy, fEnv, fVersion, fEndpoint string
	fNuma, fCount, fIDLen                                                     int
	fPrestart, fPreferred, fRequestOptions                                    bool

	fRegistry, fRegSocket, fDPSocket, fInfoType, fInfoName, fInfoVersions, fInfoEndpoint string
	infoEndpointSet                                                                      bool
)

func authority(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(":authority"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

type plugin struct {
	pb.UnimplementedDevicePluginServer

	mu      sync.Mutex
	order   []string
	health  map[string]string
	watch   map[chan struct{}]bool
	srv     *grpc.Server
	regSrv  *grpc.Server
	options *pb.DevicePluginOptions
}

func (p *plugin) snapshot() *pb.ListAndWatchResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pb.ListAndWatchResponse{}
	for _, id := range p.order {
		d := &pb.Device{ID: id, Health: p.health[id]}
		if fNuma >= 0 {
			d.Topology = &pb.TopologyInfo{Nodes: []*pb.NUMANode{{ID: int64(fNuma)}}}
		}
		resp.Devices = append(resp.Devices, d)
	}
	return resp
}

func (p *plugin) GetDevicePluginOptions(ctx context.Context, _ *pb.Empty) (*pb.DevicePluginOptions, error) {
	emit("get_options", M{"authority": authority(ctx)})
	return p.options, nil
}

func (p *plugin) ListAndWatch(_ *pb.Empty, ss pb.DevicePlugin_ListAndWatchServer) error {
	ctx := ss.Context()
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.watch[ch] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watch, ch)
		p.mu.Unlock()
		emit("list_and_watch", M{"phase": "closed"})
	}()
	emit("list_and_watch", M{"phase": "open", "authority": authority(ctx)})
	for {
		if err := ss.Send(p.snapshot()); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (p *plugin) checkIDs(ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if _, ok := p.health[id]; !ok {
			return status.Errorf(codes.InvalidArgument, "unknown device %q", id)
		}
	}
	return nil
}

func (p *plugin) Allocate(ctx context.Context, req *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	resp := &pb.AllocateResponse{}
	var all [][]string
	for _, cr := range req.ContainerRequests {
		if err := p.checkIDs(cr.DevicesIds); err != nil {
			emit("allocate", M{"error": err.Error()})
			return nil, err
		}
		all = append(all, cr.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerAllocateResponse{
			Envs:        map[string]string{fEnv: strings.Join(cr.DevicesIds, ",")},
			Mounts:      []*pb.Mount{{ContainerPath: "/dev/testplugin", HostPath: "/dev/null", ReadOnly: true}},
			Devices:     []*pb.DeviceSpec{{ContainerPath: "/dev/tp0", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"example.com/testplugin": "1"},
			CdiDevices:  []*pb.CDIDevice{{Name: "example.com/dev=" + strings.Join(cr.DevicesIds, "_")}},
		})
	}
	emit("allocate", M{"containers": all, "authority": authority(ctx)})
	return resp, nil
}

func (p *plugin) PreStartContainer(ctx context.Context, req *pb.PreStartContainerRequest) (*pb.PreStartContainerResponse, error) {
	emit("prestart", M{"ids": req.DevicesIds})
	if err := p.checkIDs(req.DevicesIds); err != nil {
		return nil, err
	}
	return &pb.PreStartContainerResponse{}, nil
}

func (p *plugin) GetPreferredAllocation(ctx context.Context, req *pb.PreferredAllocationRequest) (*pb.PreferredAllocationResponse, error) {
	resp := &pb.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		pick := append([]string{}, cr.MustIncludeDeviceIDs...)
		for _, id := range cr.AvailableDeviceIDs {
			if int32(len(pick)) >= cr.AllocationSize {
				break
			}
			dup := false
			for _, x := range pick {
				dup = dup || x == id
			}
			if !dup {
				pick = append(pick, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerPreferredAllocationResponse{DeviceIDs: pick})
	}
	emit("preferred", nil)
	return resp, nil
}

func (p *plugin) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.watch {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// regServer is the plugin-watcher Registration service (watcher mode).
type regServer struct {
	regpb.UnimplementedRegistrationServer
}

func (regServer) GetInfo(ctx context.Context, _ *regpb.InfoRequest) (*regpb.PluginInfo, error) {
	info := &regpb.PluginInfo{Type: fInfoType, Name: fInfoName, Endpoint: fInfoEndpoint}
	if fInfoVersions != "" {
		info.SupportedVersions = strings.Split(fInfoVersions, ",")
	}
	emit("get_info", M{"type": info.Type, "name": info.Name, "endpoint": info.Endpoint,
		"supported_versions": info.SupportedVersions})
	return info, nil
}

func (regServer) NotifyRegistrationStatus(ctx context.Context, st *regpb.RegistrationStatus) (*regpb.RegistrationStatusResponse, error) {
	emit("notify", M{"registered": st.PluginRegistered, "error": st.Error})
	return &regpb.RegistrationStatusResponse{}, nil
}

// listen serves a fresh gRPC server on a fresh socket file at path.
func listen(path string, register func(*grpc.Server)) (*grpc.Server, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(lis)
	emit("serving", M{"socket": path})
	return srv, nil
}

// serveRegistration (re)starts the watcher-mode registration server (which
// also serves DevicePlugin unless -dp-socket is given).
func (p *plugin) serveRegistration() error {
	p.mu.Lock()
	old := p.regSrv
	p.regSrv = nil
	p.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	srv, err := listen(filepath.Join(fRegistry, fRegSocket), func(srv *grpc.Server) {
		regpb.RegisterRegistrationServer(srv, regServer{})
		if fDPSocket == "" {
			pb.RegisterDevicePluginServer(srv, p)
		}
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.regSrv = srv
	p.mu.Unlock()
	return nil
}

// serve (re)starts the DevicePlugin server on a fresh socket file.
func (p *plugin) serve() error {
	p.mu.Lock()
	old := p.srv
	p.srv = nil
	p.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	srv, err := listen(dpSocketPath(), func(srv *grpc.Server) { pb.RegisterDevicePluginServer(srv, p) })
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	return nil
}

// dpSocketPath is where the DevicePlugin service has its own socket.
func dpSocketPath() string {
	if fRegistry != "" {
		return fDPSocket
	}
	return filepath.Join(fDir, fSocket)
}

// register returns (retry, error): retry is true for transport errors.
func (p *plugin) register() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+filepath.Join(fDir, "kubelet.sock"),
		grpc.WithInsecure(), grpc.WithBlock(), grpc.WithReturnConnectionError())
	if err != nil {
		return true, err
	}
	defer conn.Close()
	ep := fSocket
	if fEndpoint != "" {
		ep = fEndpoint
	}
	req := &pb.RegisterRequest{Version: fVersion, Endpoint: ep, ResourceName: fResource}
	if fRequestOptions {
		req.Options = p.options
	}
	t0 := time.Now()
	_, err = pb.NewRegistrationClient(conn).Register(ctx, req)
	if err != nil {
		c := status.Code(err)
		return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Canceled, err
	}
	emit("registered", M{"register_us": time.Since(t0).Microseconds()})
	return false, nil
}

// fileKey identifies one incarnation of a file ("" = absent): the inode
// alone can be reused at once by a re-created file.
func fileKey(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d.%d", s.Ino, s.Ctim.Sec, s.Ctim.Nsec)
	}
	return st.ModTime().String()
}

func (p *plugin) watchLoop() {
	own := filepath.Join(fDir, fSocket)
	kube := filepath.Join(fDir, "kubelet.sock")
	done := "" // the kubelet.sock we registered with (or were rejected by)
	for {
		if _, err := os.Stat(own); err != nil {
			emit("socket_gone", nil)
			if err := p.serve(); err != nil {
				emit("serve_failed", M{"error": err.Error()})
			}
			done = ""
		}
		if ino := fileKey(kube); ino != "" && ino != done {
			retry, err := p.register()
			if err == nil || !retry {
				done = ino
			}
			if err != nil {
				emit("register_failed", M{"error": err.Error(), "code": status.Code(err).String(), "retry": retry})
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func main() {
	fs := flag.NewFlagSet("kdp-go-testplugin", flag.ContinueOnError)
	fs.StringVar(&fDir, "dir", "", "device-plugin directory (required)")
	fs.StringVar(&fSocket, "socket", "testplugin.sock", "socket file name in DIR")
	fs.StringVar(&fResource, "resource", "example.com/dev", "resource name")
	fs.StringVar(&fDevices, "devices", "dev0,dev1", "healthy device IDs")
	fs.StringVar(&fUnhealthy, "unhealthy", "", "unhealthy device IDs")
	fs.IntVar(&fNuma, "numa", -1, "NUMA node of every device (-1: no topology)")
	fs.StringVar(&fEnv, "env", "TESTPLUGIN_DEVICES", "env var Allocate sets")
	fs.StringVar(&fVersion, "version", "v1beta1", "API version to register with")
	fs.BoolVar(&fPrestart, "prestart", false, "options: pre_start_required")
	fs.BoolVar(&fPreferred, "preferred", false, "options: get_preferred_allocation_available")
	fs.BoolVar(&fRequestOptions, "request-options", true, "send the options in RegisterRequest too")
	fs.IntVar(&fCount, "count", 0, "add N generated healthy devices")
	fs.IntVar(&fIDLen, "id-len", 8, "length of the generated device IDs")
	fs.StringVar(&fEndpoint, "endpoint", "", "endpoint to register (default: -socket; another name tests dial failures)")
	fs.StringVar(&fRegistry, "registry", "", "watcher mode: the kubelet's plugins_registry directory")
	fs.StringVar(&fRegSocket, "reg-socket", "tp-reg.sock", "watcher mode: registration socket name in the registry")
	fs.StringVar(&fDPSocket, "dp-socket", "", "watcher mode: serve DevicePlugin on this path (default: on the registration socket)")
	fs.StringVar(&fInfoType, "info-type", "DevicePlugin", "watcher mode: GetInfo type")
	fs.StringVar(&fInfoName, "info-name", "", "watcher mode: GetInfo name (default: -resource)")
	fs.StringVar(&fInfoVersions, "info-versions", "v1beta1", "watcher mode: GetInfo supported_versions (comma-separated)")
	fs.StringVar(&fInfoEndpoint, "info-endpoint", "", "watcher mode: GetInfo endpoint (default: -dp-socket, or empty)")
	if err := fs.Parse(os.Args[1:]); err != nil || (fDir == "" && fRegistry == "") || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kdp-go-testplugin -dir DIR [flags] | -registry DIR2 [flags]")
		os.Exit(2)
	}
	fs.Visit(func(f *flag.Flag) { infoEndpointSet = infoEndpointSet || f.Name == "info-endpoint" })
	if fInfoName == "" {
		fInfoName = fResource
	}
	if !infoEndpointSet {
		fInfoEndpoint = fDPSocket
	}
	p := &plugin{
		health:  map[string]string{},
		watch:   map[chan struct{}]bool{},
		options: &pb.DevicePluginOptions{PreStartRequired: fPrestart, GetPreferredAllocationAvailable: fPreferred},
	}
	add := func(list, health string) {
		for _, id := range strings.Split(list, ",") {
			if id = strings.TrimSpace(id); id != "" {
				p.order = append(p.order, id)
				p.health[id] = health
			}
		}
	}
	add(fDevices, "Healthy")
	add(fUnhealthy, "Unhealthy")
	for i := 0; i < fCount; i++ {
		id := fmt.Sprintf("g%d-", i)
		if len(id) < fIDLen {
			id += strings.Repeat("x", fIDLen-len(id))
		}
		p.order = append(p.order, id)
		p.health[id] = "Healthy"
	}
	if fRegistry == "" || fDPSocket != "" {
		if err := p.serve(); err != nil {
			fmt.Fprintf(os.Stderr, "kdp-go-testplugin: %v\n", err)
			os.Exit(1)
		}
	}
	if fRegistry != "" {
		if err := p.serveRegistration(); err != nil {
			fmt.Fprintf(os.Stderr, "kdp-go-testplugin: %v\n", err)
			os.Exit(1)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		p.mu.Lock()
		srv, regSrv := p.srv, p.regSrv
		p.mu.Unlock()
		if srv != nil {
			srv.Stop()
			os.Remove(dpSocketPath())
		}
		if regSrv != nil {
			regSrv.Stop()
			os.Remove(filepath.Join(fRegistry, fRegSocket))
		}
		os.Exit(0)
	}()
	if fRegistry == "" {
		go p.watchLoop()
	}

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "unlink" && fRegistry != "" {
			err := os.Remove(filepath.Join(fRegistry, fRegSocket))
			emit("unlinked", M{"ok": err == nil})
		}
		if len(f) == 1 && f[0] == "relisten" && fRegistry != "" {
			if err := p.serveRegistration(); err != nil {
				emit("serve_failed", M{"error": err.Error()})
			}
		}
		if len(f) == 3 && f[0] == "set" {
			p.mu.Lock()
			if _, ok := p.health[f[1]]; !ok {
				p.order = append(p.order, f[1])
			}
			p.health[f[1]] = f[2]
			p.mu.Unlock()
			p.notify()
			emit("set", M{"id": f[1], "health": f[2]})
		}
	}
	select {} // stdin closed: keep running until a signal
}

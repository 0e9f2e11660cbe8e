// kdp-go-testdra: a minimal DRA driver's kubelet side in grpc-go, used to
// prove the kubelet emulator's DRA side (kdp-test-kubelet, dra.go) against a
// real grpc-go peer, independent of kdp's C code.
//
//	kdp-go-testdra -registry DIR [-driver NAME] [-reg-socket NAME]
//	               [-socket PATH] [-versions LIST] [-serve v1,v1beta1]
//	               [-info-endpoint E] [-health=false] [-pool P]
//	               [-devices a,b] [-fail-claim UID] [-omit-claim UID]
//	               [-prepare-delay D] [-device-count N]
//	               [-publish-api URL -publish-ca F -publish-token F -node N]
//
// Serves pluginregistration.Registration on DIR/NAME (default
// DRIVER-reg.sock) and, on PATH (default DIR/../plugins/DRIVER/dra.sock),
// the DRAPlugin services of -serve (both by default) plus, unless
// -health=false, NodeWatchResources of v1alpha1.DRAResourceHealth and
// v1.DRAResourceHealth (advertised only if -versions lists them). GetInfo
// answers type "DRAPlugin", the driver name, -info-endpoint (default: the
// absolute PATH; "-" for empty) and -versions (default "v1.DRAPlugin,
// v1beta1.DRAPlugin"; comma-separated, "" for none).
//
// NodePrepareResources gives every claim (in request order) one device of
// -devices, round robin, request name "req-0", pool -pool, CDI ID
// "DRIVER/dev=DEVICE"; -fail-claim UID answers an error for that claim,
// -omit-claim UID leaves it out of the response; -prepare-delay D waits D
// first. NodeUnprepareResources answers "" per claim (same -fail-claim and
// -omit-claim). The health stream sends the full list at once and after
// every change.
//
// Stdin: "health DEV Healthy|Unhealthy|Unknown [message...]" changes a
// device's health (the full list goes to every open stream); "unlink"
// removes the registration socket file; "relisten" serves the registration
// socket again on a fresh file. Events (JSON lines on stdout): serving,
// get_info, notify {registered, error}, prepare / unprepare {service,
// claims[uid]}, health_open, health_sent {n, streams}, health_close.
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
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	drahealth "kdptest/drahealthpb"
	drav1beta1 "kdptest/drav1beta1pb"
	drav1 "kdptest/drav1pb"
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
	fRegistry, fDriver, fRegSocket, fSocket, fVersions, fServe, fInfoEndpoint string
	fPool, fDevices, fFailClaim, fOmitClaim                                   string
	fHealth                                                                   bool
	fPrepareDelay                                                             time.Duration
	fDeviceCount                                                              int
)

type driver struct {
	mu      sync.Mutex
	devices []string
	health  map[string]string
	message map[string]string
	streams map[chan struct{}]bool
	regSrv  *grpc.Server
}

// ---------------------------------------------------------------------------
// registration

type regServer struct {
	regpb.UnimplementedRegistrationServer
}

func (regServer) GetInfo(ctx context.Context, _ *regpb.InfoRequest) (*regpb.PluginInfo, error) {
	info := &regpb.PluginInfo{Type: "DRAPlugin", Name: fDriver, Endpoint: fInfoEndpoint}
	if fVersions != "" {
		info.SupportedVersions = strings.Split(fVersions, ",")
	}
	emit("get_info", M{"name": info.Name, "endpoint": info.Endpoint, "supported_versions": info.SupportedVersions})
	return info, nil
}

func (regServer) NotifyRegistrationStatus(ctx context.Context, st *regpb.RegistrationStatus) (*regpb.RegistrationStatusResponse, error) {
	emit("notify", M{"registered": st.PluginRegistered, "error": st.Error})
	return &regpb.RegistrationStatusResponse{}, nil
}

// ---------------------------------------------------------------------------
// prepare / unprepare (version-neutral; the services below convert)

type claimRef struct{ ns, name, uid string }

type devOut struct{ pool, device, cdi string }

func (d *driver) prepare(service string, claims []claimRef) map[string]*devOut {
	uids := make([]string, 0, len(claims))
	for _, c := range claims {
		uids = append(uids, c.uid)
	}
	emit("prepare", M{"service": service, "claims": uids})
	if fPrepareDelay > 0 {
		time.Sleep(fPrepareDelay)
	}
	out := map[string]*devOut{}
	for i, c := range claims {
		if c.uid == fOmitClaim {
			continue
		}
		if c.uid == fFailClaim {
			out[c.uid] = nil
			continue
		}
		dev := d.devices[i%len(d.devices)]
		out[c.uid] = &devOut{fPool, dev, fDriver + "/dev=" + dev}
	}
	return out
}

func failText(uid string) string { return "claim " + uid + ": injected failure (-fail-claim)" }

type v1Server struct {
	drav1.UnimplementedDRAPluginServer
	d *driver
}

func (s v1Server) NodePrepareResources(ctx context.Context, req *drav1.NodePrepareResourcesRequest) (*drav1.NodePrepareResourcesResponse, error) {
	claims := []claimRef{}
	for _, c := range req.Claims {
		claims = append(claims, claimRef{c.Namespace, c.Name, c.Uid})
	}
	resp := &drav1.NodePrepareResourcesResponse{Claims: map[string]*drav1.NodePrepareResourceResponse{}}
	for uid, d := range s.d.prepare("v1", claims) {
		if d == nil {
			resp.Claims[uid] = &drav1.NodePrepareResourceResponse{Error: failText(uid)}
			continue
		}
		resp.Claims[uid] = &drav1.NodePrepareResourceResponse{Devices: []*drav1.Device{{
			RequestNames: []string{"req-0"}, PoolName: d.pool, DeviceName: d.device, CdiDeviceIds: []string{d.cdi}}}}
	}
	return resp, nil
}

func unprepareResults(service string, uids []string) map[string]string {
	emit("unprepare", M{"service": service, "claims": uids})
	out := map[string]string{}
	for _, uid := range uids {
		switch uid {
		case fOmitClaim:
		case fFailClaim:
			out[uid] = failText(uid)
		default:
			out[uid] = ""
		}
	}
	return out
}

func (s v1Server) NodeUnprepareResources(ctx context.Context, req *drav1.NodeUnprepareResourcesRequest) (*drav1.NodeUnprepareResourcesResponse, error) {
	uids := []string{}
	for _, c := range req.Claims {
		uids = append(uids, c.Uid)
	}
	resp := &drav1.NodeUnprepareResourcesResponse{Claims: map[string]*drav1.NodeUnprepareResourceResponse{}}
	for uid, e := range unprepareResults("v1", uids) {
		resp.Claims[uid] = &drav1.NodeUnprepareResourceResponse{Error: e}
	}
	return resp, nil
}

type v1beta1Server struct {
	drav1beta1.UnimplementedDRAPluginServer
	d *driver
}

func (s v1beta1Server) NodePrepareResources(ctx context.Context, req *drav1beta1.NodePrepareResourcesRequest) (*drav1beta1.NodePrepareResourcesResponse, error) {
	claims := []claimRef{}
	for _, c := range req.Claims {
		claims = append(claims, claimRef{c.Namespace, c.Name, c.Uid})
	}
	resp := &drav1beta1.NodePrepareResourcesResponse{Claims: map[string]*drav1beta1.NodePrepareResourceResponse{}}
	for uid, d := range s.d.prepare("v1beta1", claims) {
		if d == nil {
			resp.Claims[uid] = &drav1beta1.NodePrepareResourceResponse{Error: failText(uid)}
			continue
		}
		resp.Claims[uid] = &drav1beta1.NodePrepareResourceResponse{Devices: []*drav1beta1.Device{{
			RequestNames: []string{"req-0"}, PoolName: d.pool, DeviceName: d.device, CdiDeviceIds: []string{d.cdi}}}}
	}
	return resp, nil
}

func (s v1beta1Server) NodeUnprepareResources(ctx context.Context, req *drav1beta1.NodeUnprepareResourcesRequest) (*drav1beta1.NodeUnprepareResourcesResponse, error) {
	uids := []string{}
	for _, c := range req.Claims {
		uids = append(uids, c.Uid)
	}
	resp := &drav1beta1.NodeUnprepareResourcesResponse{Claims: map[string]*drav1beta1.NodeUnprepareResourceResponse{}}
	for uid, e := range unprepareResults("v1beta1", uids) {
		resp.Claims[uid] = &drav1beta1.NodeUnprepareResourceResponse{Error: e}
	}
	return resp, nil
}

// ---------------------------------------------------------------------------
// health

type healthServer struct {
	drahealth.UnimplementedDRAResourceHealthServer
	d *driver
}

var healthValues = map[string]drahealth.HealthStatus{
	"Unknown": drahealth.HealthStatus_UNKNOWN, "Healthy": drahealth.HealthStatus_HEALTHY,
	"Unhealthy": drahealth.HealthStatus_UNHEALTHY,
}

func (d *driver) healthList() *drahealth.NodeWatchResourcesResponse {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := &drahealth.NodeWatchResourcesResponse{}
	now := time.Now().Unix()
	for _, dev := range d.devices {
		resp.Devices = append(resp.Devices, &drahealth.DeviceHealth{
			Device:          &drahealth.DeviceIdentifier{PoolName: fPool, DeviceName: dev},
			Health:          healthValues[d.health[dev]],
			LastUpdatedTime: now, HealthCheckTimeoutSeconds: 30, Message: d.message[dev]})
	}
	return resp
}

// v1.DRAResourceHealth (Kubernetes 1.37): v1alpha1's messages under
// another service name.
var healthV1Desc = grpc.ServiceDesc{
	ServiceName: "v1.DRAResourceHealth",
	HandlerType: (*drahealth.DRAResourceHealthServer)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "NodeWatchResources", ServerStreams: true,
		Handler: func(srv interface{}, stream grpc.ServerStream) error {
			req := new(drahealth.NodeWatchResourcesRequest)
			if err := stream.RecvMsg(req); err != nil {
				return err
			}
			return srv.(healthServer).NodeWatchResources(req, healthV1Stream{stream})
		}}},
	Metadata: "dra_health.proto",
}

type healthV1Stream struct{ grpc.ServerStream }

func (x healthV1Stream) Send(m *drahealth.NodeWatchResourcesResponse) error {
	return x.ServerStream.SendMsg(m)
}

func (s healthServer) NodeWatchResources(_ *drahealth.NodeWatchResourcesRequest, ss drahealth.DRAResourceHealth_NodeWatchResourcesServer) error {
	ch := make(chan struct{}, 1)
	s.d.mu.Lock()
	s.d.streams[ch] = true
	s.d.mu.Unlock()
	defer func() {
		s.d.mu.Lock()
		delete(s.d.streams, ch)
		s.d.mu.Unlock()
		emit("health_close", nil)
	}()
	emit("health_open", nil)
	for {
		if err := ss.Send(s.d.healthList()); err != nil {
			return err
		}
		select {
		case <-ss.Context().Done():
			return nil
		case <-ch:
		}
	}
}

func (d *driver) setHealth(dev, h, msg string) {
	d.mu.Lock()
	if _, ok := d.health[dev]; !ok {
		d.devices = append(d.devices, dev)
	}
	d.health[dev] = h
	d.message[dev] = msg
	n := 0
	for ch := range d.streams {
		n++
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	d.mu.Unlock()
	emit("health_sent", M{"device": dev, "health": h, "streams": n})
}

// ---------------------------------------------------------------------------

func listen(path string, register func(*grpc.Server)) (*grpc.Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
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

func (d *driver) serveRegistration() error {
	d.mu.Lock()
	old := d.regSrv
	d.regSrv = nil
	d.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	srv, err := listen(filepath.Join(fRegistry, fRegSocket), func(s *grpc.Server) {
		regpb.RegisterRegistrationServer(s, regServer{})
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.regSrv = srv
	d.mu.Unlock()
	return nil
}

func fatal(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "kdp-go-testdra: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	fs := flag.NewFlagSet("kdp-go-testdra", flag.ContinueOnError)
	fs.StringVar(&fRegistry, "registry", "", "the kubelet's plugins_registry directory (required)")
	fs.StringVar(&fDriver, "driver", "test.example.com", "driver name (GetInfo name)")
	fs.StringVar(&fRegSocket, "reg-socket", "", "registration socket name (default DRIVER-reg.sock)")
	fs.StringVar(&fSocket, "socket", "", "service socket path (default REGISTRY/../plugins/DRIVER/dra.sock)")
	fs.StringVar(&fVersions, "versions", "v1.DRAPlugin,v1beta1.DRAPlugin", "GetInfo supported_versions, comma-separated, in this order")
	fs.StringVar(&fServe, "serve", "v1,v1beta1", "DRAPlugin services actually served")
	fs.StringVar(&fInfoEndpoint, "info-endpoint", "", `GetInfo endpoint (default: the socket's absolute path; "-": empty)`)
	fs.BoolVar(&fHealth, "health", true, "serve the health stream (false: UNIMPLEMENTED)")
	fs.StringVar(&fPool, "pool", "node1", "pool name of every device")
	fs.StringVar(&fDevices, "devices", "dev0,dev1", "device names (all Healthy at start)")
	fs.StringVar(&fFailClaim, "fail-claim", "", "answer an error for the claim with this UID")
	fs.StringVar(&fOmitClaim, "omit-claim", "", "leave the claim with this UID out of the responses")
	fs.DurationVar(&fPrepareDelay, "prepare-delay", 0, "NodePrepareResources waits this long first")
	fs.StringVar(&fPublishAPI, "publish-api", "", "API server URL: publish the pool's ResourceSlices there (publish.go)")
	fs.StringVar(&fPublishCA, "publish-ca", "", "the API server's CA certificate (PEM)")
	fs.StringVar(&fPublishToken, "publish-token", "", "a file with the bearer token")
	fs.StringVar(&fNode, "node", "node1", "the slices' nodeName")
	fs.IntVar(&fDeviceCount, "device-count", 0, "N devices dev-0..dev-N-1 instead of -devices")
	if err := fs.Parse(os.Args[1:]); err != nil || fRegistry == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kdp-go-testdra -registry DIR [flags]")
		os.Exit(2)
	}
	if fRegSocket == "" {
		fRegSocket = fDriver + "-reg.sock"
	}
	if fSocket == "" {
		fSocket = filepath.Join(filepath.Dir(fRegistry), "plugins", fDriver, "dra.sock")
	}
	abs, err := filepath.Abs(fSocket)
	if err != nil {
		fatal("socket: %v", err)
	}
	fSocket = abs
	switch fInfoEndpoint {
	case "":
		fInfoEndpoint = fSocket
	case "-":
		fInfoEndpoint = ""
	}
	d := &driver{health: map[string]string{}, message: map[string]string{}, streams: map[chan struct{}]bool{}}
	if fDeviceCount > 0 {
		names := make([]string, fDeviceCount)
		for i := range names {
			names[i] = fmt.Sprintf("dev-%d", i)
		}
		fDevices = strings.Join(names, ",")
	}
	for _, dev := range strings.Split(fDevices, ",") {
		if dev = strings.TrimSpace(dev); dev != "" {
			d.devices = append(d.devices, dev)
			d.health[dev] = "Healthy"
		}
	}
	if len(d.devices) == 0 {
		fatal("-devices: at least one device")
	}
	srv, err := listen(fSocket, func(s *grpc.Server) {
		for _, v := range strings.Split(fServe, ",") {
			switch strings.TrimSpace(v) {
			case "v1":
				drav1.RegisterDRAPluginServer(s, v1Server{d: d})
			case "v1beta1":
				drav1beta1.RegisterDRAPluginServer(s, v1beta1Server{d: d})
			}
		}
		if fHealth {
			drahealth.RegisterDRAResourceHealthServer(s, healthServer{d: d})
			s.RegisterService(&healthV1Desc, healthServer{d: d})
		}
	})
	if err != nil {
		fatal("%v", err)
	}
	if err := d.serveRegistration(); err != nil {
		fatal("%v", err)
	}
	if fPublishAPI != "" {
		go func() {
			if err := publishSlices(d.devices); err != nil {
				emit("publish_failed", M{"error": err.Error()})
			}
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		d.mu.Lock()
		regSrv := d.regSrv
		d.mu.Unlock()
		if regSrv != nil {
			regSrv.Stop()
		}
		os.Remove(filepath.Join(fRegistry, fRegSocket))
		srv.Stop()
		os.Remove(fSocket)
		os.Exit(0)
	}()

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "health":
			if _, ok := healthValues[f[2]]; !ok {
				emit("error", M{"error": "health: want Healthy|Unhealthy|Unknown, got " + f[2]})
				continue
			}
			d.setHealth(f[1], f[2], strings.Join(f[3:], " "))
		case len(f) == 1 && f[0] == "unlink":
			err := os.Remove(filepath.Join(fRegistry, fRegSocket))
			emit("unlinked", M{"ok": err == nil})
		case len(f) == 1 && f[0] == "relisten":
			if err := d.serveRegistration(); err != nil {
				emit("serve_failed", M{"error": err.Error()})
			}
		}
	}
	select {} // stdin closed: keep running until a signal
}

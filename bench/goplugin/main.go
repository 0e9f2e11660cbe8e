// kdp-bench-goplugin: the reference device plugin for the benchmarks, written
// the way device plugins are usually written: Go, grpc-go, one goroutine per
// concern. It does what kdp-example-gopher does. Every regular file in
// -devices-dir is a device; files come and go at run time (inotify); a file
// whose first 4 KiB contain "unhealthy" is an Unhealthy device, Healthy again
// once it no longer does. Allocate checks the IDs (known and healthy, else
// InvalidArgument) and sets GOPHER=<comma-separated IDs> for each container.
// It serves on DIR/gopher.sock, then registers with DIR/kubelet.sock, and
// registers again after a kubelet restart, noticed from any of: kubelet.sock
// re-created, its own socket deleted, the kubelet's ListAndWatch ending.
// SIGTERM/SIGINT: stop serving, remove the socket, exit 0.
//
//	kdp-bench-goplugin [-devices-dir DIR] [-resource NAME] [-device-plugin-dir DIR] [-socket NAME]
//
// -device-plugin-dir defaults to $KDP_DEVICE_PLUGIN_DIR, then
// /var/lib/kubelet/device-plugins, like kdp. fsnotify is not packaged in
// Debian 12, so the inotify watcher is a few lines over golang.org/x/sys/unix
// (what fsnotify itself uses); its fd goes through Go's netpoller.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "kdptest/kubeletpb"
)

// protoCodec: Debian 12's github.com/golang/protobuf (1.3.5) cannot marshal
// the APIv2 messages protoc-gen-go 1.28 generates; newer grpc-go does exactly
// this (see tests/kubelet/main.go).
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

const (
	kubeletSocket = "kubelet.sock"
	healthy       = "Healthy"
	unhealthy     = "Unhealthy"
)

var (
	devicesDir = flag.String("devices-dir", "/etc/gophers", "directory whose regular files are the devices")
	resource   = flag.String("resource", "example.com/gopher", "extended resource name")
	pluginDir  = flag.String("device-plugin-dir", "", "device-plugin directory (default $KDP_DEVICE_PLUGIN_DIR or /var/lib/kubelet/device-plugins)")
	socketName = flag.String("socket", "gopher.sock", "socket file name in the device-plugin directory")
)

// ---------------------------------------------------------------------------
// inotify

type fsEvent struct {
	wd   int
	mask uint32
	name string
}

type watcher struct {
	f      *os.File
	events chan fsEvent
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), events: make(chan fsEvent, 256)}
	go w.read()
	return w, nil
}

func (w *watcher) add(path string, mask uint32) (int, error) {
	return unix.InotifyAddWatch(int(w.f.Fd()), path, mask)
}

func (w *watcher) read() {
	var buf [4096]byte
	for {
		n, err := w.f.Read(buf[:])
		if err != nil {
			log.Printf("inotify: %v", err)
			close(w.events)
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name = string(bytes.TrimRight(b, "\x00"))
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.events <- fsEvent{wd: int(ev.Wd), mask: ev.Mask, name: name}
		}
	}
}

// ---------------------------------------------------------------------------
// the device plugin service

type plugin struct {
	pb.UnimplementedDevicePluginServer

	dir, sockPath, kubePath string

	mu       sync.Mutex
	devices  []*pb.Device      // sorted by ID: what the kubelet was told
	health   map[string]string // ID -> health
	watchers map[chan []*pb.Device]struct{}
	gen      int // bumped at every (re)start of the server

	srv         *grpc.Server
	streamEnded chan int // the generation whose kubelet stream ended
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pb.Empty) (*pb.DevicePluginOptions, error) {
	return &pb.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pb.Empty, s pb.DevicePlugin_ListAndWatchServer) error {
	ch := make(chan []*pb.Device, 1)
	p.mu.Lock()
	gen := p.gen
	devs := p.devices
	p.watchers[ch] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
		select {
		case p.streamEnded <- gen:
		default:
		}
	}()
	for {
		if err := s.Send(&pb.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case devs = <-ch:
		case <-s.Context().Done():
			return s.Context().Err()
		}
	}
}

func (p *plugin) Allocate(_ context.Context, req *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	resp := &pb.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cr := range req.ContainerRequests {
		for _, id := range cr.DevicesIds {
			h, ok := p.health[id]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "%s: unknown device ID %q", *resource, id)
			}
			if h != healthy {
				return nil, status.Errorf(codes.InvalidArgument, "%s: device %q is Unhealthy", *resource, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerAllocateResponse{
			Envs: map[string]string{"GOPHER": strings.Join(cr.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pb.PreStartContainerRequest) (*pb.PreStartContainerResponse, error) {
	return &pb.PreStartContainerResponse{}, nil
}

// ---------------------------------------------------------------------------
// devices

func fileHealth(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return unhealthy
	}
	defer f.Close()
	buf := make([]byte, 4095)
	n, _ := f.Read(buf)
	if bytes.Contains(buf[:n], []byte("unhealthy")) {
		return unhealthy
	}
	return healthy
}

// rescan lists the devices dir and pushes the list to every open
// ListAndWatch stream if it changed.
func (p *plugin) rescan() {
	ents, err := os.ReadDir(*devicesDir) // sorted by name
	if err != nil {
		log.Printf("cannot read %s: %v", *devicesDir, err)
		return
	}
	devs := make([]*pb.Device, 0, len(ents))
	hm := make(map[string]string, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		h := fileHealth(filepath.Join(*devicesDir, e.Name()))
		devs = append(devs, &pb.Device{ID: e.Name(), Health: h})
		hm[e.Name()] = h
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sameDevices(p.devices, devs) {
		return
	}
	log.Printf("%s: %d devices", *resource, len(devs))
	p.devices = devs
	p.health = hm
	for ch := range p.watchers {
		select { // replace a list not yet sent
		case <-ch:
		default:
		}
		ch <- devs
	}
}

func sameDevices(a, b []*pb.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Health != b[i].Health {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// serving and registering

func (p *plugin) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.gen++
	p.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	os.Remove(p.sockPath)
}

func (p *plugin) serve() error {
	p.stop()
	lis, err := net.Listen("unix", p.sockPath)
	if err != nil {
		return err
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false) // removed by stop()
	srv := grpc.NewServer()
	pb.RegisterDevicePluginServer(srv, p)
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	go srv.Serve(lis)
	log.Printf("%s: serving on %s", *resource, p.sockPath)
	return nil
}

func (p *plugin) register() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+p.kubePath, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.FailOnNonTempDialError(true))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pb.NewRegistrationClient(conn).Register(ctx, &pb.RegisterRequest{
		Version:      "v1beta1",
		Endpoint:     *socketName,
		ResourceName: *resource,
		Options:      &pb.DevicePluginOptions{},
	})
	return err
}

func inode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

func main() {
	flag.Parse()
	log.SetFlags(log.Lmicroseconds)
	dir := *pluginDir
	if dir == "" {
		dir = os.Getenv("KDP_DEVICE_PLUGIN_DIR")
	}
	if dir == "" {
		dir = "/var/lib/kubelet/device-plugins"
	}
	p := &plugin{
		dir:         dir,
		sockPath:    filepath.Join(dir, *socketName),
		kubePath:    filepath.Join(dir, kubeletSocket),
		health:      map[string]string{},
		watchers:    map[chan []*pb.Device]struct{}{},
		streamEnded: make(chan int, 1),
	}

	w, err := newWatcher()
	if err != nil {
		log.Fatalf("inotify: %v", err)
	}
	dirWd, err := w.add(dir, unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM)
	if err != nil {
		log.Fatalf("watch %s: %v", dir, err)
	}
	if _, err := w.add(*devicesDir, unix.IN_CREATE|unix.IN_DELETE|unix.IN_CLOSE_WRITE|
		unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_ATTRIB); err != nil {
		log.Printf("watch %s: %v", *devicesDir, err)
	}
	p.rescan()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	// One goroutine owns the lifecycle: start = serve, then register (now if
	// kubelet.sock exists, else when it appears). Register runs in its own
	// goroutine: the kubelet dials back before it answers, so a restart must
	// be noticed while a Register is in flight. A failed Register is retried
	// with backoff, or at once if kubelet.sock was re-created meanwhile.
	type regResult struct {
		attempt int
		ino     uint64
		err     error
	}
	var (
		registeredIno uint64 // the kubelet.sock we registered with
		waiting       bool   // serving, waiting for kubelet.sock or a retry
		attempt       int    // the current Register attempt (older results are stale)
		inFlight      bool
		recreated     bool // kubelet.sock appeared while a Register was in flight
		regDone       = make(chan regResult, 16)
		retry         = time.NewTimer(time.Hour)
		backoff       = 10 * time.Millisecond
	)
	retry.Stop()
	tryRegister := func() {
		ino := inode(p.kubePath)
		attempt++
		inFlight, recreated = false, false
		if ino == 0 {
			waiting = true
			return
		}
		inFlight, waiting = true, false
		go func(a int) { regDone <- regResult{a, ino, p.register()} }(attempt)
	}
	start := func(why string) {
		if why != "" {
			log.Printf("%s: restarting: %s", *resource, why)
		}
		retry.Stop()
		registeredIno = 0
		attempt++ // whatever is in flight is for the old server
		inFlight = false
		if err := p.serve(); err != nil {
			log.Printf("%s: cannot serve: %v", *resource, err)
			waiting = true
			retry.Reset(time.Second)
			return
		}
		tryRegister()
	}
	start("")
	for {
		select {
		case s := <-sigs:
			log.Printf("%s: %v: stopping", *resource, s)
			p.stop()
			os.Exit(0)
		case ev, ok := <-w.events:
			if !ok {
				log.Fatalf("inotify closed")
			}
			if ev.wd != dirWd {
				p.rescan()
				continue
			}
			switch {
			case ev.name == kubeletSocket && ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
				if waiting {
					backoff = 10 * time.Millisecond
					tryRegister()
				} else if inFlight {
					recreated = true
				} else if ino := inode(p.kubePath); ino != 0 && ino != registeredIno {
					start("kubelet.sock was re-created")
				}
			case ev.name == *socketName && ev.mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
				if _, err := os.Lstat(p.sockPath); err != nil {
					start("our socket was deleted")
				}
			}
		case res := <-regDone:
			if res.attempt != attempt {
				continue // for a server or a kubelet.sock we no longer have
			}
			inFlight = false
			if res.err != nil {
				if recreated {
					log.Printf("%s: Register failed: %v; kubelet.sock was re-created: again", *resource, res.err)
					backoff = 10 * time.Millisecond
					tryRegister()
					continue
				}
				log.Printf("%s: Register failed: %v; retrying in %v", *resource, res.err, backoff)
				waiting = true
				retry.Reset(backoff)
				if backoff < 5*time.Second {
					backoff *= 2
				}
				continue
			}
			log.Printf("%s: registered with the kubelet", *resource)
			registeredIno, backoff = res.ino, 10*time.Millisecond
		case gen := <-p.streamEnded:
			p.mu.Lock()
			current := gen == p.gen
			p.mu.Unlock()
			if current && !waiting && !inFlight {
				start("the kubelet's ListAndWatch stream ended")
			}
		case <-retry.C:
			if p.srv == nil {
				start("retry")
			} else {
				tryRegister()
			}
		}
	}
}

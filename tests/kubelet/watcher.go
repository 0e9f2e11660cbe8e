// The kubelet's plugin-watcher side for kdp-test-kubelet (-plugins-registry
// DIR or -watcher): it finds device plugins through sockets in
// <kubelet-root>/plugins_registry/, as the kubelet's pluginmanager does
// (pkg/kubelet/pluginmanager: pluginwatcher, reconciler, operationexecutor),
// and hands DevicePlugin ones to the same connect as kubelet.sock Register,
// DRAPlugin ones to the DRA side (dra.go: registerDRA below).
//
// What the kubelet does, and what this models:
//   - Desired state: fsnotify on the directory (subdirectories too) plus a
//     walk at start; names starting with '.' and non-sockets are ignored. A
//     create event for a path already known counts as a new incarnation
//     (the kubelet stores time.Now() per socket; a changed timestamp makes
//     the reconciler unregister and register again).
//   - Reconciler: unregisters what is registered but no longer desired (or
//     desired in a newer incarnation), registers what is desired but not
//     registered. One operation at a time per socket path; a failed one is
//     retried with exponential backoff (500 ms doubling up to 2m2s,
//     goroutinemap's exponentialbackoff), reset by a successful operation
//     on that path. The kubelet reconciles every second; this loop reacts to
//     events at once and polls every 100 ms for retries.
//   - Register (operation_generator.go GenerateRegisterPluginFunc): dial the
//     socket (10 s, bare path + unix dialer), GetInfo (1 s); no handler for
//     the type -> NotifyRegistrationStatus(false, "RegisterPlugin error -- no
//     handler registered for plugin type: T at socket P") and fail (retried);
//     empty endpoint -> the socket path itself; ValidatePlugin (versions must
//     contain v1beta1, name must be an extended resource name) fails ->
//     NotifyRegistrationStatus(false, "RegisterPlugin error -- plugin
//     validation failed with err: ...") and fail (retried); then the plugin
//     is added to the actual state BEFORE the handler's RegisterPlugin, so a
//     connect failure is notified ("RegisterPlugin error -- plugin
//     registration failed with err: ...") but NOT retried; then
//     NotifyRegistrationStatus(true, "") (5 s). The registration connection
//     is closed afterwards.
//   - The endpoint: the devicemanager's RegisterPlugin(pluginName, endpoint,
//     ...) calls connectClient(name, endpoint) with the endpoint as the
//     socket path, dialed as is (pkg/kubelet/cm/devicemanager/plugin/v1beta1/
//     handler.go; on the kubelet.sock path it is filepath.Join(socketDir,
//     r.Endpoint) instead, server.go Register). So a watcher endpoint is a
//     full path; a relative one would be relative to the kubelet's working
//     directory. The emulator dials it as is, too.
//   - Socket removed -> unregister: the devicemanager's DeRegisterPlugin
//     disconnects the client (closes its connection, PluginDisconnected).
//     Which client depends on the endpoint tracking: by resource name (the
//     newest registration, -endpoint-tracking resource) or by socket path.
//   - Kubelet restart: plugins_registry/ is only MkdirAll'ed and walked again
//     (never emptied): every socket gets a fresh GetInfo.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"google.golang.org/grpc"

	pb "kdptest/kubeletpb"
	regpb "kdptest/pluginregpb"
)

const (
	devicePluginType = "DevicePlugin"
	getInfoTimeout   = time.Second
	notifyTimeout    = 5 * time.Second
	backoffInitial   = 500 * time.Millisecond
	backoffMax       = 2*time.Minute + 2*time.Second
	reconcilePoll    = 100 * time.Millisecond
)

// wdesired is one socket the kubelet wants registered.
type wdesired struct {
	seq uint64 // incarnation: bumped by every create event / walk
}

// wactual is one socket in the kubelet's actual state of world.
type wactual struct {
	seq      uint64
	typ      string // devicePluginType or draPluginType
	name     string
	endpoint string // after the "" -> socket path substitution
}

// wop is the operation state of one socket path (goroutinemap's entry).
type wop struct {
	running bool
	backoff time.Duration
	retryAt time.Time
}

type watcher struct {
	k   *kubelet
	dir string

	mu      sync.Mutex
	gen     int // bumped by stop(): results of older operations are dropped
	running bool
	ino     *os.File
	inoFd   int // ino's descriptor (ino.Fd() would make it blocking)
	wds     map[int32]string
	seq     uint64
	desired map[string]*wdesired
	actual  map[string]*wactual
	ops     map[string]*wop
	poke    chan struct{}
	quit    chan struct{}
}

func newWatcher(k *kubelet, dir string) *watcher {
	return &watcher{k: k, dir: dir, ops: map[string]*wop{}}
}

// start creates the directory if needed, watches it, walks it and starts the
// reconciler.
func (w *watcher) start() error {
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("mkdir %s: %v", w.dir, err)
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify_init1: %v", err)
	}
	// Non-blocking fd through os.NewFile: reads go through Go's poller, so
	// Close() wakes a pending Read.
	ino := os.NewFile(uintptr(fd), "inotify")
	w.mu.Lock()
	w.gen++
	gen := w.gen
	w.running = true
	w.ino = ino
	w.inoFd = fd
	w.wds = map[int32]string{}
	w.desired = map[string]*wdesired{}
	w.actual = map[string]*wactual{}
	w.poke = make(chan struct{}, 1)
	w.quit = make(chan struct{})
	poke, quit := w.poke, w.quit
	err = w.walkLocked(w.dir, "walk")
	w.mu.Unlock()
	if err != nil {
		ino.Close()
		return err
	}
	go w.readEvents(ino, gen)
	go w.reconcileLoop(gen, poke, quit)
	return nil
}

// stop closes the watch and forgets the desired and actual states (the
// caller drops the connections: dropAll).
func (w *watcher) stop() {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return
	}
	w.running = false
	w.gen++
	ino, quit := w.ino, w.quit
	w.ino = nil
	w.desired = map[string]*wdesired{}
	w.actual = map[string]*wactual{}
	w.mu.Unlock()
	close(quit)
	ino.Close()
}

func (w *watcher) addWatchLocked(dir string) error {
	wd, err := syscall.InotifyAddWatch(w.inoFd, dir, syscall.IN_CREATE|syscall.IN_DELETE|
		syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO|syscall.IN_DELETE_SELF)
	if err != nil {
		return fmt.Errorf("inotify_add_watch %s: %v", dir, err)
	}
	w.wds[int32(wd)] = dir
	return nil
}

// walkLocked watches dir and adds every socket under it (recursively).
func (w *watcher) walkLocked(dir, source string) error {
	if err := w.addWatchLocked(dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %v", dir, err)
	}
	for _, e := range ents {
		w.foundLocked(filepath.Join(dir, e.Name()), source)
	}
	return nil
}

// foundLocked handles a path that appeared (walk or create event).
func (w *watcher) foundLocked(p, source string) {
	if strings.HasPrefix(filepath.Base(p), ".") {
		return
	}
	st, err := os.Lstat(p)
	if err != nil {
		return
	}
	if st.IsDir() {
		if err := w.walkLocked(p, source); err != nil {
			logf("watcher: %v", err)
		}
		return
	}
	if st.Mode()&os.ModeSocket == 0 {
		return
	}
	w.seq++
	w.desired[p] = &wdesired{seq: w.seq}
	emit("watcher_found", M{"socket": p, "source": source})
	w.pokeLocked()
}

func (w *watcher) goneLocked(p string) {
	if _, ok := w.desired[p]; ok {
		delete(w.desired, p)
		emit("watcher_gone", M{"socket": p})
		w.pokeLocked()
	}
}

func (w *watcher) pokeLocked() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

func (w *watcher) readEvents(ino *os.File, gen int) {
	buf := make([]byte, 64*1024)
	for {
		n, err := ino.Read(buf)
		if err != nil {
			return // closed by stop()
		}
		w.mu.Lock()
		if w.gen != gen {
			w.mu.Unlock()
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			name := strings.TrimRight(string(nameBytes), "\x00")
			dir, ok := w.wds[ev.Wd]
			if !ok {
				continue
			}
			if ev.Mask&(syscall.IN_DELETE_SELF|syscall.IN_IGNORED) != 0 {
				delete(w.wds, ev.Wd)
				continue
			}
			p := filepath.Join(dir, name)
			switch {
			case ev.Mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0:
				w.foundLocked(p, "inotify")
			case ev.Mask&(syscall.IN_DELETE|syscall.IN_MOVED_FROM) != 0:
				w.goneLocked(p)
				// A removed subdirectory: forget what was desired under it.
				for q := range w.desired {
					if strings.HasPrefix(q, p+"/") {
						w.goneLocked(q)
					}
				}
			}
		}
		w.mu.Unlock()
	}
}

func (w *watcher) reconcileLoop(gen int, poke, quit chan struct{}) {
	t := time.NewTicker(reconcilePoll)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-poke:
		case <-t.C:
		}
		w.reconcile(gen)
	}
}

// reconcile starts the operations the states call for (the kubelet's
// reconciler.reconcile): unregisters first, then registers.
func (w *watcher) reconcile(gen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gen != gen {
		return
	}
	now := time.Now()
	paths := make([]string, 0, len(w.actual)+len(w.desired))
	for p := range w.actual {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		a := w.actual[p]
		if d, ok := w.desired[p]; ok && d.seq == a.seq {
			continue
		}
		if w.startOpLocked(p, now) {
			go w.unregister(gen, p, *a)
		}
	}
	paths = paths[:0]
	for p := range w.desired {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		d := w.desired[p]
		if a, ok := w.actual[p]; ok && a.seq == d.seq {
			continue
		}
		if _, ok := w.actual[p]; ok {
			continue // its unregister goes first
		}
		if w.startOpLocked(p, now) {
			go w.register(gen, p, d.seq)
		}
	}
}

// startOpLocked marks an operation on p as running unless one is running or
// p is backing off.
func (w *watcher) startOpLocked(p string, now time.Time) bool {
	op := w.ops[p]
	if op == nil {
		op = &wop{}
		w.ops[p] = op
	}
	if op.running || now.Before(op.retryAt) {
		return false
	}
	op.running = true
	return true
}

// finishOp records an operation's outcome: a failure backs off, a success
// resets the backoff.
func (w *watcher) finishOp(p string, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	op := w.ops[p]
	op.running = false
	if !failed {
		op.backoff = 0
		op.retryAt = time.Time{}
	} else {
		if op.backoff == 0 {
			op.backoff = backoffInitial
		} else if op.backoff *= 2; op.backoff > backoffMax {
			op.backoff = backoffMax
		}
		op.retryAt = time.Now().Add(op.backoff)
	}
	if w.running {
		w.pokeLocked()
	}
}

func dialRegistration(socket string) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fDialTimeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, socket, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithReturnConnectionError(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		return nil, fmt.Errorf("failed to dial socket %s, err: %v", socket, err)
	}
	return conn, nil
}

func notify(api regpb.RegistrationClient, ok bool, msg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	_, err := api.NotifyRegistrationStatus(ctx, &regpb.RegistrationStatus{PluginRegistered: ok, Error: msg})
	return err
}

func containsVersion(vs []string) bool {
	for _, v := range vs {
		if v == fManagerVersion {
			return true
		}
	}
	return false
}

// register is the kubelet's register operation for one socket.
func (w *watcher) register(gen int, p string, seq uint64) {
	failed := true
	defer func() { w.finishOp(p, failed) }()
	arrived := time.Now().UnixNano()
	fail := func(stage string, err error) {
		emit("watcher_failed", M{"socket": p, "stage": stage, "error": err.Error()})
	}
	conn, err := dialRegistration(p)
	if err != nil {
		fail("dial", err)
		return
	}
	defer conn.Close()
	api := regpb.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), getInfoTimeout)
	info, err := api.GetInfo(ctx, &regpb.InfoRequest{})
	cancel()
	if err != nil {
		fail("get_info", fmt.Errorf("failed to get plugin info using RPC GetInfo at socket %s, err: %v", p, err))
		return
	}
	versions := info.SupportedVersions
	if versions == nil {
		versions = []string{}
	}
	emit("watcher_info", M{"socket": p, "type": info.Type, "name": info.Name,
		"endpoint": info.Endpoint, "supported_versions": versions})
	refuse := func(stage, reason string) {
		ev := M{"socket": p, "stage": stage, "type": info.Type, "resource": info.Name, "reason": reason}
		if err := notify(api, false, reason); err != nil {
			ev["notify_error"] = err.Error()
		}
		emit("watcher_refused", ev)
	}
	if info.Type == draPluginType && w.k.dra != nil {
		failed = w.registerDRA(gen, p, seq, api, info, refuse)
		return
	}
	if info.Type != devicePluginType {
		refuse("type", fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, p))
		return
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = p
	}
	// ValidatePlugin (devicemanager plugin/v1beta1/handler.go).
	var verr string
	if !containsVersion(info.SupportedVersions) {
		verr = fmt.Sprintf("manager version, %s, is not among plugin supported versions %v", fManagerVersion, info.SupportedVersions)
	} else if !isExtendedResourceName(info.Name) {
		verr = "invalid name of device plugin socket: " + fmt.Sprintf(errInvalidResourceName, info.Name)
	}
	if verr != "" {
		refuse("validate", "RegisterPlugin error -- plugin validation failed with err: "+verr)
		return
	}
	// Into the actual state before RegisterPlugin: from here on, no retry.
	w.mu.Lock()
	if w.gen != gen {
		w.mu.Unlock()
		return
	}
	w.actual[p] = &wactual{seq: seq, typ: devicePluginType, name: info.Name, endpoint: endpoint}
	w.mu.Unlock()
	failed = false

	w.k.mu.Lock()
	kgen := w.k.gen
	w.k.mu.Unlock()
	req := &pb.RegisterRequest{Version: apiVersion, Endpoint: endpoint, ResourceName: info.Name}
	_, err = w.k.connect(kgen, req, arrived, target{socket: endpoint, via: "watcher", regSocket: p})
	if err != nil {
		refuse("register", "RegisterPlugin error -- plugin registration failed with err: "+err.Error())
		return
	}
	ev := M{"socket": p, "resource": info.Name, "registered": true}
	if err := notify(api, true, ""); err != nil {
		ev["notify_error"] = fmt.Sprintf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", p, err)
	}
	emit("watcher_notified", ev)
}

// unregister is the kubelet's unregister operation: out of the actual
// state, then the devicemanager's DeRegisterPlugin(name, endpoint).
func (w *watcher) unregister(gen int, p string, a wactual) {
	defer w.finishOp(p, false)
	w.mu.Lock()
	if w.gen != gen {
		w.mu.Unlock()
		return
	}
	delete(w.actual, p)
	w.mu.Unlock()
	if a.typ == draPluginType {
		w.k.dra.deregister(a.name, a.endpoint, p)
		return
	}
	c, marked := w.k.deregisterPlugin(a.name, a.endpoint)
	ev := M{"socket": p, "resource": a.name, "endpoint": a.endpoint, "via": "watcher",
		"marked_unhealthy": marked, "disconnected": nil}
	if c != nil {
		ev["disconnected"] = c.socket
	}
	emit("deregistered", ev)
	if c != nil {
		c.conn.Close() // its stream_end follows, reason "deregistered"
	}
}

// registerDRA is the rest of the register operation for a "DRAPlugin"
// socket (see dra.go): ValidatePlugin, the actual state, RegisterPlugin,
// NotifyRegistrationStatus. It returns whether the operation failed (to be
// retried with backoff).
func (w *watcher) registerDRA(gen int, p string, seq uint64, api regpb.RegistrationClient,
	info *regpb.PluginInfo, refuse func(stage, reason string)) bool {
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = p
	}
	dgen := w.k.dra.generation()
	if _, err := w.k.dra.validate(info.Name, endpoint, info.SupportedVersions); err != nil {
		refuse("validate", "RegisterPlugin error -- plugin validation failed with err: "+err.Error())
		return true
	}
	// Into the actual state before RegisterPlugin: from here on, no retry.
	w.mu.Lock()
	if w.gen != gen {
		w.mu.Unlock()
		return true
	}
	w.actual[p] = &wactual{seq: seq, typ: draPluginType, name: info.Name, endpoint: endpoint}
	w.mu.Unlock()
	if err := w.k.dra.register(dgen, info.Name, endpoint, p, info.SupportedVersions); err != nil {
		refuse("register", "RegisterPlugin error -- plugin registration failed with err: "+err.Error())
		return false
	}
	ev := M{"socket": p, "resource": info.Name, "driver": info.Name, "type": draPluginType, "registered": true}
	if err := notify(api, true, ""); err != nil {
		ev["notify_error"] = fmt.Sprintf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", p, err)
	}
	emit("watcher_notified", ev)
	return false
}

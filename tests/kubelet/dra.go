// The kubelet's DRA side for kdp-test-kubelet (with -watcher or
// -plugins-registry; -dra=false leaves it out): DRA drivers found through
// <kubelet-root>/plugins_registry/ with GetInfo type "DRAPlugin", as the
// kubelet's DRAPluginManager (pkg/kubelet/cm/dra/plugin, Kubernetes 1.34+)
// keeps them. The commands that call the drivers are in dracmd.go.
//
// What the kubelet does, and what this models:
//   - The plugin watcher (watcher.go) does the generic part: dial, GetInfo,
//     empty endpoint -> the registration socket itself, ValidatePlugin
//     (refusal notified as "RegisterPlugin error -- plugin validation failed
//     with err: ...", retried with backoff), the socket into the actual
//     state, RegisterPlugin (refusal notified as "RegisterPlugin error --
//     plugin registration failed with err: ...", NOT retried), then
//     NotifyRegistrationStatus(true, "").
//   - Version choice (validateSupportedServices): the PLUGIN's
//     supported_versions are walked in the plugin's order and the first one
//     the kubelet supports is chosen (kubelets 1.34+: "v1.DRAPlugin",
//     "v1beta1.DRAPlugin"; -dra-versions sets this emulator's list). An
//     empty list: "empty list of supported gRPC services (aka supported
//     versions)"; no common one: "none of services supported by the plugin
//     (%q) are supported by the kubelet (%q)"; both wrapped in "invalid
//     supported gRPC versions of DRA driver plugin D at endpoint E: ".
//   - The driver name is not checked by the kubelet (any string registers);
//     the emulator only reports in dra_registered whether it is a valid
//     driver name for the API server (DNS subdomain, <= 63 chars).
//   - Instances: the store keeps every registration of a driver in the order
//     they arrived (rolling updates: one registration socket and one
//     endpoint per pod). A second registration naming an endpoint already
//     registered for that driver is refused ("endpoint E already registered
//     for DRA driver plugin D": one instance cannot hijack the endpoint of
//     another). Calls go to the NEWEST instance whose connection is up,
//     else to the newest one (DRAPluginManager.get).
//   - The connection: created once at registration, not blocking (the
//     kubelet's grpc.NewClient("unix:"+endpoint) + Connect(); a relative
//     endpoint is relative to the kubelet's working directory), watched
//     through a stats handler (ConnBegin/ConnEnd): "connected".
//   - Deregistration (the registration socket removed): the instance with
//     that (driver, endpoint) is removed and its connection closed; its
//     health stream is cancelled. Note the keying: removing the socket of a
//     refused hijacker removes the instance it tried to hijack, as in the
//     kubelet.
//   - Wiping: whenever no instance of a driver is connected, the kubelet
//     schedules the deletion of the driver's ResourceSlices of the node
//     after 30 s (wipingDelay), cancelled when an instance connects again;
//     at start it deletes all the node's ResourceSlices. Without an API
//     server the emulator only emits dra_wipe_scheduled, dra_wipe_canceled
//     and dra_wipe (-dra-wipe-delay sets the delay).
//   - Health (gate ResourceHealthStatus, -dra-health on|off): for EVERY
//     instance, advertised or not, NodeWatchResources is opened on the same
//     connection and re-opened 5 s after it ends (wait.UntilWithContext,
//     -dra-health-retry). Every message replaces the driver's device health
//     list (the kubelet's health cache is per driver); the end of a stream
//     clears it. UNIMPLEMENTED (a driver that serves no health) is reported
//     once, not at every retry. -dra-health-timeout D models the kubelet's
//     health timeout (healthinfo.go: a device not heard of for 30 s reads
//     Unknown; from 1.35 health_check_timeout_seconds sets it per device):
//     dra-health then reports the devices of a list older than D as
//     Unknown ("stale": true). D applies to every device whatever field 4
//     says (a test needs a short one); 0, the default, models nothing.
//     With -dra-health-versions (1.37, e.g. "v1,v1alpha1": the kubelet's
//     versions, preferred first): the kubelet's first version the plugin
//     advertises ("<v>.DRAResourceHealth" in its supported versions) is
//     used, whatever the plugin's order; none advertised, no stream; no
//     retry after UNIMPLEMENTED. v1 and v1alpha1 have the same messages.
//   - Per-call timeout of NodePrepareResources/NodeUnprepareResources: 45 s
//     (defaultClientCallTimeout, -dra-call-timeout).
//   - Kubelet restart: every connection is closed and the store emptied;
//     the re-walk of plugins_registry registers the drivers again.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	drahealth "kdptest/drahealthpb"
)

const (
	draPluginType     = "DRAPlugin"
	draServiceV1      = "v1.DRAPlugin"
	draServiceV1beta1 = "v1beta1.DRAPlugin"
)

// Flags (main.go registers them).
var (
	fDRA               bool
	fDRAVersions       string
	fDRACallTimeout    time.Duration
	fDRAHealth         string
	fDRAHealthRetry    time.Duration
	fDRAHealthVersions string
	fDRAHealthTTL      time.Duration
	fDRAWipeDelay      time.Duration
)

// draSupported is the kubelet's servicesSupportedByKubelet (-dra-versions).
func draSupported() []string {
	out := []string{}
	for _, s := range strings.Split(fDRAVersions, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// draInstance is one registration of a driver (the kubelet's
// monitoredPlugin). Fields after conn are guarded by draManager.mu.
type draInstance struct {
	m         *draManager
	driver    string
	endpoint  string
	regSocket string
	service   string
	versions  []string
	seq       uint64
	conn      *grpc.ClientConn

	connected     bool
	removed       bool
	healthCancel  context.CancelFunc
	healthVersion string // the health service version used ("" none)
	healthState   string // "", "streaming", "unimplemented", "error", "ended"
	healthMsgs    int
	lastEnd       string // the last stream end reported (deduplication)
}

// draHealthList is the last device health list of a driver.
type draHealthList struct {
	devices  []M
	endpoint string
	at       int64
}

type draManager struct {
	mu     sync.Mutex
	gen    int
	seq    uint64
	store  map[string][]*draInstance
	health map[string]*draHealthList
	wipes  map[string]*time.Timer
}

func newDRAManager() *draManager {
	return &draManager{store: map[string][]*draInstance{}, health: map[string]*draHealthList{},
		wipes: map[string]*time.Timer{}}
}

var draNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// draNameError says why name is no valid driver name for the API server
// (ResourceSlice spec.driver), "" if it is one.
func draNameError(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > 63:
		return fmt.Sprintf("%d characters, at most 63", len(name))
	case !draNameRe.MatchString(name):
		return "not a DNS subdomain (lowercase alphanumerics, '-', '.')"
	}
	return ""
}

// validate is the kubelet's ValidatePlugin: it returns the chosen service.
func (m *draManager) validate(driver, endpoint string, versions []string) (string, error) {
	wrap := func(err error) error {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driver, endpoint, err)
	}
	if len(versions) == 0 {
		return "", wrap(errors.New("empty list of supported gRPC services (aka supported versions)"))
	}
	supported := draSupported()
	for _, v := range versions {
		for _, s := range supported {
			if v == s {
				return v, nil
			}
		}
	}
	return "", wrap(fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", versions, supported))
}

// start is the kubelet's start-up wipe of the node's ResourceSlices.
func (m *draManager) start() {
	emit("dra_wipe", M{"driver": "", "reason": "startup"})
}

// register is the kubelet's RegisterPlugin for a DRA driver.
func (m *draManager) register(gen int, driver, endpoint, regSocket string, versions []string) error {
	service, err := m.validate(driver, endpoint, versions)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return errors.New("the kubelet restarted during the registration")
	}
	for _, old := range m.store[driver] {
		if old.endpoint == endpoint {
			return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, driver)
		}
	}
	m.seq++
	in := &draInstance{m: m, driver: driver, endpoint: endpoint, regSocket: regSocket,
		service: service, versions: versions, seq: m.seq}
	path := endpoint
	if !filepath.IsAbs(path) {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	// Not blocking: gRPC connects in the background (and reconnects), the
	// stats handler reports the connection's state.
	conn, err := grpc.Dial("unix://"+path, grpc.WithInsecure(), grpc.WithStatsHandler(in))
	if err != nil {
		return fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", driver, endpoint, err)
	}
	in.conn = conn
	m.store[driver] = append(m.store[driver], in)
	nameErr := draNameError(driver)
	emit("dra_registered", M{"driver": driver, "endpoint": endpoint, "registration_socket": regSocket,
		"service": service, "supported_versions": versions, "seq": in.seq,
		"instances": len(m.store[driver]), "name_valid": nameErr == "", "name_error": nameErr,
		"endpoint_absolute": filepath.IsAbs(endpoint)})
	if fDRAHealth == "on" {
		ctx, cancel := context.WithCancel(context.Background())
		in.healthCancel = cancel
		in.healthVersion = in.chooseHealth()
		if in.healthVersion != "" {
			go in.healthLoop(ctx)
		} else {
			emit("dra_health_stream", M{"driver": in.driver, "endpoint": in.endpoint, "seq": in.seq,
				"phase": "none", "version": "", "code": "", "message": "the plugin advertises no health service this kubelet has"})
		}
	}
	m.syncLocked(driver)
	return nil
}

// deregister is the kubelet's DeRegisterPlugin(driver, endpoint).
func (m *draManager) deregister(driver, endpoint, regSocket string) {
	m.mu.Lock()
	var in *draInstance
	list := m.store[driver]
	for i, x := range list {
		if x.endpoint == endpoint {
			in = x
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	ev := M{"driver": driver, "endpoint": endpoint, "socket": regSocket, "found": in != nil}
	if in != nil {
		if len(list) == 0 {
			delete(m.store, driver)
		} else {
			m.store[driver] = list
		}
		in.removed = true
		if in.healthCancel != nil {
			in.healthCancel()
		}
		ev["seq"] = in.seq
		ev["instances"] = len(list)
		emit("dra_deregistered", ev)
		m.syncLocked(driver)
	} else {
		ev["instances"] = len(list)
		emit("dra_deregistered", ev)
	}
	m.mu.Unlock()
	if in != nil {
		in.conn.Close() // outside the lock: Close reports ConnEnd synchronously
	}
}

// dropAll closes every connection and forgets every driver (kubelet
// restart, stop-server, exit). Pending wipes die with the kubelet.
func (m *draManager) dropAll(reason string) {
	m.mu.Lock()
	m.gen++
	var conns []*grpc.ClientConn
	drivers := make([]string, 0, len(m.store))
	for d := range m.store {
		drivers = append(drivers, d)
	}
	sort.Strings(drivers)
	for _, d := range drivers {
		for _, in := range m.store[d] {
			in.removed = true
			if in.healthCancel != nil {
				in.healthCancel()
			}
			conns = append(conns, in.conn)
			emit("dra_dropped", M{"driver": d, "endpoint": in.endpoint, "seq": in.seq, "reason": reason})
		}
	}
	for d, t := range m.wipes {
		t.Stop()
		delete(m.wipes, d)
	}
	m.store = map[string][]*draInstance{}
	m.health = map[string]*draHealthList{}
	m.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (m *draManager) generation() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// usableLocked: at least one instance of the driver is connected.
func (m *draManager) usableLocked(driver string) bool {
	for _, in := range m.store[driver] {
		if in.connected {
			return true
		}
	}
	return false
}

// syncLocked is the kubelet's sync(driver): cancel a pending wipe when the
// driver is usable, schedule one (unless one is pending) when it is not.
func (m *draManager) syncLocked(driver string) {
	if m.usableLocked(driver) {
		if t := m.wipes[driver]; t != nil {
			t.Stop()
			delete(m.wipes, driver)
			emit("dra_wipe_canceled", M{"driver": driver})
		}
		return
	}
	if m.wipes[driver] != nil {
		return
	}
	gen := m.gen
	var t *time.Timer
	t = time.AfterFunc(fDRAWipeDelay, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.gen != gen || m.wipes[driver] != t {
			return
		}
		delete(m.wipes, driver)
		emit("dra_wipe", M{"driver": driver, "reason": "unusable", "delay_ms": fDRAWipeDelay.Milliseconds()})
	})
	m.wipes[driver] = t
	emit("dra_wipe_scheduled", M{"driver": driver, "delay_ms": fDRAWipeDelay.Milliseconds()})
}

// pick is the kubelet's get(driver): the newest connected instance, else
// the newest one; nil if the driver is not registered.
func (m *draManager) pick(driver string) *draInstance {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pickLocked(driver)
}

func (m *draManager) pickLocked(driver string) *draInstance {
	list := m.store[driver]
	if len(list) == 0 {
		return nil
	}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].connected {
			return list[i]
		}
	}
	return list[len(list)-1]
}

// stats.Handler: the connection's state, as the kubelet's monitoredPlugin.

func (in *draInstance) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (in *draInstance) HandleRPC(context.Context, stats.RPCStats)                       {}
func (in *draInstance) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (in *draInstance) HandleConn(_ context.Context, s stats.ConnStats) {
	connected := false
	switch s.(type) {
	case *stats.ConnBegin:
		connected = true
	case *stats.ConnEnd:
	default:
		return
	}
	m := in.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.removed || in.connected == connected {
		return
	}
	in.connected = connected
	emit("dra_connection", M{"driver": in.driver, "endpoint": in.endpoint, "seq": in.seq, "connected": connected})
	m.syncLocked(in.driver)
}

// ---------------------------------------------------------------------------
// health

var healthNames = map[drahealth.HealthStatus]string{
	drahealth.HealthStatus_UNKNOWN:   "Unknown",
	drahealth.HealthStatus_HEALTHY:   "Healthy",
	drahealth.HealthStatus_UNHEALTHY: "Unhealthy",
}

// healthVersionsValid checks -dra-health-versions: "" or a list of v1 and
// v1alpha1.
func healthVersionsValid(list string) bool {
	if list == "" {
		return true
	}
	for _, v := range strings.Split(list, ",") {
		if v != "v1" && v != "v1alpha1" {
			return false
		}
	}
	return true
}

// chooseHealth is the health service version the stream uses. Without
// -dra-health-versions, 1.34-1.36: v1alpha1, advertised or not. With it,
// 1.37: the kubelet's own preference among what the plugin advertises
// ("<version>.DRAResourceHealth" in its supported versions), whatever order
// the plugin lists them in; "" when it advertises none.
func (in *draInstance) chooseHealth() string {
	if fDRAHealthVersions == "" {
		return "v1alpha1"
	}
	for _, v := range strings.Split(fDRAHealthVersions, ",") {
		for _, adv := range in.versions {
			if adv == v+".DRAResourceHealth" {
				return v
			}
		}
	}
	return ""
}

func (in *draInstance) healthLoop(ctx context.Context) {
	for {
		if in.watchHealth(ctx) && fDRAHealthVersions != "" {
			return // 1.37: no retry after UNIMPLEMENTED
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fDRAHealthRetry):
		}
	}
}

// watchHealth runs one stream of the chosen version (v1 and v1alpha1 have
// the same messages: only the method differs). Returns true if the plugin
// answered UNIMPLEMENTED.
func (in *draInstance) watchHealth(ctx context.Context) bool {
	method := "/" + in.healthVersion + ".DRAResourceHealth/NodeWatchResources"
	stream, err := in.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		err = stream.SendMsg(&drahealth.NodeWatchResourcesRequest{})
	}
	if err == nil {
		err = stream.CloseSend()
	}
	for err == nil {
		resp := &drahealth.NodeWatchResourcesResponse{}
		if err = stream.RecvMsg(resp); err == nil {
			in.healthMessage(resp)
		}
	}
	in.healthEnded(ctx, err)
	return status.Code(err) == codes.Unimplemented
}

func (in *draInstance) healthMessage(resp *drahealth.NodeWatchResourcesResponse) {
	devs := make([]M, 0, len(resp.Devices))
	for _, d := range resp.Devices {
		name, ok := healthNames[d.Health]
		if !ok {
			name = fmt.Sprintf("Unknown(%d)", int32(d.Health))
		}
		devs = append(devs, M{"pool": d.GetDevice().GetPoolName(), "device": d.GetDevice().GetDeviceName(),
			"health": name, "message": d.Message, "last_updated_time": d.LastUpdatedTime,
			"health_check_timeout_seconds": d.HealthCheckTimeoutSeconds})
	}
	m := in.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.removed {
		return
	}
	in.healthState = "streaming"
	in.healthMsgs++
	now := time.Now().UnixNano()
	m.health[in.driver] = &draHealthList{devices: devs, endpoint: in.endpoint, at: now}
	emit("dra_health", M{"driver": in.driver, "endpoint": in.endpoint, "seq": in.seq,
		"version": in.healthVersion, "devices": devs, "n": len(devs), "message_seq": in.healthMsgs})
}

// healthEnded reports the end of a stream (or its failure to open), once per
// distinct outcome: a driver without the service (UNIMPLEMENTED) or an
// endpoint that is down is not reported again at every retry.
func (in *draInstance) healthEnded(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // deregistered or dropped
	}
	code, msg := "OK", "EOF"
	if !errors.Is(err, io.EOF) {
		st := status.Convert(err)
		code, msg = st.Code().String(), st.Message()
	}
	phase := "error"
	switch {
	case code == codes.Unimplemented.String():
		phase = "unimplemented"
	case code == "OK":
		phase = "ended"
	}
	m := in.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.removed {
		return
	}
	had := in.healthState == "streaming"
	in.healthState = phase
	if had {
		// The kubelet clears the driver's health cache when a stream exits.
		if _, ok := m.health[in.driver]; ok {
			delete(m.health, in.driver)
			emit("dra_health_cleared", M{"driver": in.driver, "endpoint": in.endpoint})
		}
	}
	key := code + "\x00" + msg
	if key == in.lastEnd && !had {
		return
	}
	in.lastEnd = key
	emit("dra_health_stream", M{"driver": in.driver, "endpoint": in.endpoint, "seq": in.seq,
		"version": in.healthVersion, "phase": phase, "code": code, "message": msg,
		"retry_ms": fDRAHealthRetry.Milliseconds()})
}

// ---------------------------------------------------------------------------
// state

func (m *draManager) state() []M {
	m.mu.Lock()
	defer m.mu.Unlock()
	drivers := make([]string, 0, len(m.store))
	for d := range m.store {
		drivers = append(drivers, d)
	}
	for d := range m.wipes {
		if _, ok := m.store[d]; !ok {
			drivers = append(drivers, d)
		}
	}
	sort.Strings(drivers)
	out := []M{}
	for _, d := range drivers {
		insts := []M{}
		for _, in := range m.store[d] {
			insts = append(insts, M{"endpoint": in.endpoint, "registration_socket": in.regSocket,
				"service": in.service, "supported_versions": in.versions, "seq": in.seq,
				"connected": in.connected, "health_stream": in.healthState})
		}
		dm := M{"driver": d, "instances": insts, "usable": m.usableLocked(d),
			"wipe_pending": m.wipes[d] != nil, "chosen": nil, "service": nil, "health": nil}
		if in := m.pickLocked(d); in != nil {
			dm["chosen"] = in.endpoint
			dm["service"] = in.service
		}
		if h := m.health[d]; h != nil {
			dm["health"] = h.devices
		}
		out = append(out, dm)
	}
	return out
}

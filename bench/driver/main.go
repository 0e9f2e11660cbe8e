// kdp-bench-driver: plays the kubelet for one device plugin, with grpc-go (the
// kubelet's gRPC), and measures it.
//
//	kdp-bench-driver -dir DIR [-devices DIR] [-max-msg BYTES] [-log FILE] -- PLUGIN [ARGS...]
//
// In PLUGIN and ARGS, {dir} and {devices} are replaced by the two
// directories; the plugin also gets them as $KDP_DEVICE_PLUGIN_DIR and
// $DEVICES_DIR. The driver serves DIR/kubelet.sock at once and answers
// Register in the kubelet's order: dial the plugin back (blocking, 10 s),
// GetDevicePluginOptions, answer, then open ListAndWatch on the same
// connection (receive limit -max-msg, default 4 MiB like the kubelet).
//
// Commands come on stdin, one per line; each gets one JSON line on stdout:
//
//	start               exec the plugin; wait for Register and the first list
//	stop                SIGTERM the plugin and wait for it to exit
//	status              RSS, threads, CPU ticks, context switches of the plugin
//	idle S              CPU ticks and wakeups (voluntary context switches,
//	                    every thread) of the plugin over S seconds
//	allocate N ID [F]   N sequential Allocates (one container, device ID);
//	                    latencies in us, appended to file F, one per line
//	update N [F]        N trials: create a device file, wait for the
//	                    ListAndWatch message that has it (then delete it and
//	                    wait for the message without it); latencies to F
//	restart N           N simulated kubelet restarts (Registration server
//	                    stopped, connections closed, sockets removed,
//	                    kubelet.sock back): time to the next Register
//	list-large          a device file created in a large devices dir, then
//	                    removed, 5 times: time from each to the ListAndWatch
//	                    message that shows it, and the message's size
//	health-large        one device's file rewritten Unhealthy, then Healthy,
//	                    5 times each: time to the message that shows it
//	execreg CMD ARGS    exec CMD (not the plugin: e.g. kdp-bench-floor
//	                    -register {dir}/kubelet.sock) and time exec -> the
//	                    arrival of its Register, whatever its outcome
//	quit                stop the plugin and exit
//
// Times are taken in this process (monotonic clock): "exec" is just before
// fork+exec, "Register" is the moment the Register handler runs, a list
// "arrives" when Recv returns it (decoded).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	pb "kdptest/kubeletpb"
)

// protoCodec: see tests/kubelet/main.go (Debian's golang/protobuf 1.3.5
// cannot marshal protoc-gen-go 1.28 messages).
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

const kubeletMaxMessage = 4 * 1024 * 1024

var (
	fDir     = flag.String("dir", "", "device-plugin directory (required)")
	fDevices = flag.String("devices", "", "devices directory handed to the plugin")
	fMaxMsg  = flag.Int("max-msg", kubeletMaxMessage, "ListAndWatch receive limit in bytes (the kubelet's: 4 MiB)")
	fLog     = flag.String("log", "", "file for the plugin's stdout and stderr (default: discarded)")
)

type M = map[string]interface{}

// ---------------------------------------------------------------------------
// /proc

type procStat struct {
	RSSkB   int64 `json:"rss_kb"`
	AnonkB  int64 `json:"rss_anon_kb"` // RSS = anon + file-backed (shared libraries' pages)
	FilekB  int64 `json:"rss_file_kb"`
	PsskB   int64 `json:"pss_kb"` // proportional share (shared pages divided by their users)
	USSkB   int64 `json:"uss_kb"` // private pages only (Private_Clean + Private_Dirty)
	HWMkB   int64 `json:"hwm_kb"`
	Threads int64 `json:"threads"`
	Ticks   int64 `json:"cpu_ticks"`  // utime + stime of the process, in clock ticks
	Vol     int64 `json:"vol_ctxt"`   // voluntary context switches, summed over live threads
	Invol   int64 `json:"invol_ctxt"` // involuntary ones
	RunNs   int64 `json:"run_ns"`     // time on CPU (schedstat), summed over live threads
}

func statusFields(path string, keys map[string]*int64) error {
	b, err := ioutil.ReadFile(path)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.IndexByte(line, ':')
		if i < 0 {
			continue
		}
		if p, ok := keys[line[:i]]; ok {
			f := strings.Fields(line[i+1:])
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				*p += v
			}
		}
	}
	return nil
}

func readProc(pid int) (procStat, error) {
	var s procStat
	base := fmt.Sprintf("/proc/%d", pid)
	if err := statusFields(base+"/status", map[string]*int64{
		"VmRSS": &s.RSSkB, "VmHWM": &s.HWMkB, "Threads": &s.Threads,
		"RssAnon": &s.AnonkB, "RssFile": &s.FilekB,
	}); err != nil {
		return s, err
	}
	_ = statusFields(base+"/smaps_rollup", map[string]*int64{
		"Pss": &s.PsskB, "Private_Clean": &s.USSkB, "Private_Dirty": &s.USSkB,
	})
	b, err := ioutil.ReadFile(base + "/stat")
	if err != nil {
		return s, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.Ticks = ut + st
	tasks, _ := filepath.Glob(base + "/task/*")
	for _, t := range tasks {
		_ = statusFields(t+"/status", map[string]*int64{
			"voluntary_ctxt_switches": &s.Vol, "nonvoluntary_ctxt_switches": &s.Invol,
		})
		if b, err := ioutil.ReadFile(t + "/schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				s.RunNs += v
			}
		}
	}
	return s, nil
}

// ---------------------------------------------------------------------------
// statistics

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Round(p / 100 * float64(len(sorted)-1)))
	return sorted[i]
}

func summary(v []float64) M {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	if len(s) == 0 {
		return M{"n": 0}
	}
	return M{"n": len(s), "p50": pct(s, 50), "p90": pct(s, 90), "p99": pct(s, 99),
		"min": s[0], "max": s[len(s)-1], "mean": sum / float64(len(s))}
}

func appendSamples(path string, v []float64) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, x := range v {
		fmt.Fprintf(w, "%.2f\n", x)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ---------------------------------------------------------------------------
// the kubelet side

type regEvent struct {
	t   time.Time
	err error
}

type listMsg struct {
	t     time.Time
	devs  []*pb.Device
	bytes int
	gen   int
	err   error // the stream ended
}

type driver struct {
	pb.UnimplementedRegistrationServer

	dir, devices string
	argv         []string

	mu     sync.Mutex
	srv    *grpc.Server
	conn   *grpc.ClientConn
	api    pb.DevicePluginClient
	gen    int
	regs   []regEvent
	arrive []time.Time // every Register at its arrival, whatever its outcome
	msgs   []listMsg
	notify chan struct{}

	cmd    *exec.Cmd
	pid    int
	exited chan struct{}
}

func (d *driver) kick() {
	select {
	case d.notify <- struct{}{}:
	default:
	}
}

// wait calls cond under d.mu whenever something was recorded, until it
// returns true or the timeout passes.
func (d *driver) wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		ok := cond()
		d.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-d.notify:
		case <-deadline.C:
			d.mu.Lock()
			ok = cond()
			d.mu.Unlock()
			return ok
		}
	}
}

// waitReg returns the first successful Register recorded at index >= since
// (a plugin retries a failed one, as it must with a real kubelet) and how
// many failed before it.
func (d *driver) waitReg(since int, timeout time.Duration) (regEvent, int, error) {
	var ev regEvent
	failed := 0
	var last error
	if !d.wait(timeout, func() bool {
		failed = 0
		for i := since; i < len(d.regs); i++ {
			if d.regs[i].err == nil {
				ev = d.regs[i]
				return true
			}
			failed++
			last = d.regs[i].err
		}
		return false
	}) {
		if last != nil {
			return ev, failed, fmt.Errorf("no successful Register within %v (last error: %v)", timeout, last)
		}
		return ev, failed, fmt.Errorf("no Register within %v", timeout)
	}
	return ev, failed, nil
}

// waitMsg returns the first list at index >= since for which pred holds.
func (d *driver) waitMsg(since int, timeout time.Duration, pred func(*listMsg) bool) (listMsg, error) {
	var m listMsg
	var streamErr error
	if !d.wait(timeout, func() bool {
		for i := since; i < len(d.msgs); i++ {
			if d.msgs[i].err != nil {
				streamErr = d.msgs[i].err
				continue
			}
			if pred(&d.msgs[i]) {
				m = d.msgs[i]
				return true
			}
		}
		return false
	}) {
		if streamErr != nil {
			return m, fmt.Errorf("no such list within %v; a stream ended: %v", timeout, streamErr)
		}
		return m, fmt.Errorf("no such list within %v", timeout)
	}
	return m, nil
}

func (d *driver) marks() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.regs), len(d.msgs)
}

func (d *driver) Register(ctx context.Context, r *pb.RegisterRequest) (*pb.Empty, error) {
	t := time.Now()
	d.mu.Lock()
	d.arrive = append(d.arrive, t)
	d.mu.Unlock()
	d.kick()
	var err error
	if r.Version != "v1beta1" {
		err = fmt.Errorf("requested API version %q is not supported by kubelet", r.Version)
	} else {
		err = d.connect(r)
	}
	d.mu.Lock()
	d.regs = append(d.regs, regEvent{t: t, err: err})
	d.mu.Unlock()
	d.kick()
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, nil
}

func (d *driver) connect(r *pb.RegisterRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+filepath.Join(d.dir, r.Endpoint),
		grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		return fmt.Errorf("failed to dial device plugin: %v", err)
	}
	api := pb.NewDevicePluginClient(conn)
	if _, err := api.GetDevicePluginOptions(ctx, &pb.Empty{}); err != nil {
		conn.Close()
		return fmt.Errorf("failed to get device plugin options: %v", err)
	}
	d.mu.Lock()
	old := d.conn
	d.conn, d.api = conn, api
	d.gen++
	gen := d.gen
	d.mu.Unlock()
	if old != nil {
		old.Close()
	}
	go d.listAndWatch(api, gen)
	return nil
}

func (d *driver) listAndWatch(api pb.DevicePluginClient, gen int) {
	stream, err := api.ListAndWatch(context.Background(), &pb.Empty{}, grpc.MaxCallRecvMsgSize(*fMaxMsg))
	for err == nil {
		var resp *pb.ListAndWatchResponse
		resp, err = stream.Recv()
		t := time.Now()
		if err != nil {
			break
		}
		m := listMsg{t: t, devs: resp.Devices, bytes: proto.Size(resp), gen: gen}
		d.mu.Lock()
		d.msgs = append(d.msgs, m)
		d.mu.Unlock()
		d.kick()
	}
	d.mu.Lock()
	d.msgs = append(d.msgs, listMsg{t: time.Now(), gen: gen, err: err})
	d.mu.Unlock()
	d.kick()
}

func (d *driver) startServer() (time.Time, error) {
	p := filepath.Join(d.dir, "kubelet.sock")
	os.Remove(p)
	lis, err := net.Listen("unix", p)
	t := time.Now()
	if err != nil {
		return t, err
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	pb.RegisterRegistrationServer(srv, d)
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	go srv.Serve(lis)
	return t, nil
}

// dropPlugin closes the connection to the plugin (its ListAndWatch ends).
func (d *driver) dropPlugin() {
	d.mu.Lock()
	conn := d.conn
	d.conn, d.api = nil, nil
	d.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

// kubeletRestart does what a restarting kubelet does to the directory and
// returns the moment kubelet.sock is back (listening).
func (d *driver) kubeletRestart() (time.Time, error) {
	d.mu.Lock()
	srv := d.srv
	d.srv = nil
	d.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	d.dropPlugin()
	ents, _ := ioutil.ReadDir(d.dir)
	for _, e := range ents {
		if e.Mode()&os.ModeSocket != 0 {
			os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
	return d.startServer()
}

// ---------------------------------------------------------------------------
// the plugin process

func (d *driver) startPlugin() (M, error) {
	if d.cmd != nil {
		return nil, errors.New("the plugin is already running")
	}
	argv := make([]string, len(d.argv))
	for i, a := range d.argv {
		a = strings.ReplaceAll(a, "{dir}", d.dir)
		argv[i] = strings.ReplaceAll(a, "{devices}", d.devices)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KDP_DEVICE_PLUGIN_DIR="+d.dir, "DEVICES_DIR="+d.devices)
	if *fLog != "" {
		f, err := os.OpenFile(*fLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	r0, m0 := d.marks()
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d.cmd, d.pid = cmd, cmd.Process.Pid
	d.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) {
		c.Wait()
		close(done)
	}(cmd, d.exited)
	ev, failed, err := d.waitReg(r0, 120*time.Second)
	if err != nil {
		return nil, err
	}
	m, err := d.waitMsg(m0, 120*time.Second, func(*listMsg) bool { return true })
	if err != nil {
		return nil, err
	}
	return M{"pid": d.pid, "exec_to_register_us": us(ev.t.Sub(t0)),
		"exec_unix_ns": t0.UnixNano(), "register_unix_ns": ev.t.UnixNano(),
		"exec_to_first_list_us": us(m.t.Sub(t0)), "devices": len(m.devs), "bytes": m.bytes,
		"failed_registers": failed}, nil
}

// execRegister runs a command that only sends a Register (the floor) and
// times exec -> Register's arrival, whatever its outcome.
func (d *driver) execRegister(argv []string) (M, error) {
	d.mu.Lock()
	a0 := len(d.arrive)
	d.mu.Unlock()
	cmd := exec.Command(argv[0], argv[1:]...)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var t time.Time
	ok := d.wait(30*time.Second, func() bool {
		if len(d.arrive) > a0 {
			t = d.arrive[a0]
			return true
		}
		return false
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	if !ok {
		return nil, errors.New("no Register within 30s")
	}
	return M{"exec_to_register_us": us(t.Sub(t0))}, nil
}

func (d *driver) stopPlugin() (M, error) {
	if d.cmd == nil {
		return M{}, nil
	}
	t0 := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	killed := false
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		killed = true
	}
	code := d.cmd.ProcessState.ExitCode()
	d.cmd = nil
	d.dropPlugin()
	return M{"exit_code": code, "killed": killed, "stop_ms": float64(time.Since(t0).Microseconds()) / 1000}, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// envHas: the response names the device in an env value (GOPHER=<ids> for
// the gopher plugins, KDP_DEVICES_<RESOURCE> for kdp's default answer).
func envHas(envs map[string]string, id string) bool {
	for _, v := range envs {
		if v == id {
			return true
		}
	}
	return false
}

func hasDevice(m *listMsg, id string) bool {
	for _, d := range m.devs {
		if d.ID == id {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// commands

func (d *driver) needPlugin() error {
	if d.cmd == nil {
		return errors.New("the plugin is not running (start first)")
	}
	return nil
}

func (d *driver) cmdAllocate(args []string) (M, error) {
	if len(args) < 2 {
		return nil, errors.New("usage: allocate N ID [FILE]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("bad count %q", args[0])
	}
	id := args[1]
	d.mu.Lock()
	api := d.api
	d.mu.Unlock()
	if api == nil {
		return nil, errors.New("not connected to the plugin")
	}
	req := &pb.AllocateRequest{ContainerRequests: []*pb.ContainerAllocateRequest{{DevicesIds: []string{id}}}}
	lat := make([]float64, 0, n)
	before, err := readProc(d.pid)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		t := time.Now()
		resp, err := api.Allocate(ctx, req)
		el := time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("Allocate %d: %v", i, err)
		}
		if len(resp.ContainerResponses) != 1 || !envHas(resp.ContainerResponses[0].Envs, id) {
			return nil, fmt.Errorf("Allocate %d: unexpected response %v", i, resp)
		}
		lat = append(lat, us(el))
	}
	after, err := readProc(d.pid)
	if err != nil {
		return nil, err
	}
	if len(args) > 2 {
		if err := appendSamples(args[2], lat); err != nil {
			return nil, err
		}
	}
	return M{"latency_us": summary(lat), "cpu_ticks": after.Ticks - before.Ticks,
		"run_ns": after.RunNs - before.RunNs, "proc": after}, nil
}

func (d *driver) cmdUpdate(args []string) (M, error) {
	if len(args) < 1 || d.devices == "" {
		return nil, errors.New("usage: update N [FILE] (needs -devices)")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("bad count %q", args[0])
	}
	lat := make([]float64, 0, n)
	del := make([]float64, 0, n)
	var lastT0, lastRecv time.Time
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("bench-u%d-%d", os.Getpid(), i)
		path := filepath.Join(d.devices, name)
		_, m0 := d.marks()
		t0 := time.Now()
		if err := ioutil.WriteFile(path, []byte("gopher\n"), 0o644); err != nil {
			return nil, err
		}
		m, err := d.waitMsg(m0, 10*time.Second, func(m *listMsg) bool { return hasDevice(m, name) })
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("trial %d (create): %v", i, err)
		}
		lat = append(lat, us(m.t.Sub(t0)))
		lastT0, lastRecv = t0, m.t
		_, m0 = d.marks()
		t0 = time.Now()
		os.Remove(path)
		m, err = d.waitMsg(m0, 10*time.Second, func(m *listMsg) bool { return !hasDevice(m, name) })
		if err != nil {
			return nil, fmt.Errorf("trial %d (delete): %v", i, err)
		}
		del = append(del, us(m.t.Sub(t0)))
	}
	if len(args) > 1 {
		if err := appendSamples(args[1], lat); err != nil {
			return nil, err
		}
	}
	return M{"latency_us": summary(lat), "delete_latency_us": summary(del),
		"last_t0_unix_ns": lastT0.UnixNano(), "last_recv_unix_ns": lastRecv.UnixNano()}, nil
}

func (d *driver) cmdRestart(args []string) (M, error) {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil || n <= 0 {
			return nil, fmt.Errorf("bad count %q", args[0])
		}
	}
	lat := make([]float64, 0, n)
	toList := make([]float64, 0, n)
	extra, failedAll := 0, 0
	for i := 0; i < n; i++ {
		r0, _ := d.marks()
		tBack, err := d.kubeletRestart()
		if err != nil {
			return nil, err
		}
		ev, failed, err := d.waitReg(r0, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("restart %d: %v", i, err)
		}
		failedAll += failed
		d.mu.Lock()
		gen := d.gen
		d.mu.Unlock()
		m, err := d.waitMsg(0, 30*time.Second, func(m *listMsg) bool { return m.gen >= gen })
		if err != nil {
			return nil, fmt.Errorf("restart %d: %v", i, err)
		}
		lat = append(lat, us(ev.t.Sub(tBack)))
		toList = append(toList, us(m.t.Sub(tBack)))
		// A plugin that restarts twice for one kubelet restart registers twice.
		time.Sleep(50 * time.Millisecond)
		d.mu.Lock()
		for j := r0; j < len(d.regs); j++ {
			if d.regs[j].err == nil && d.regs[j].t.After(ev.t) {
				extra++
			}
		}
		d.mu.Unlock()
	}
	return M{"latency_us": summary(lat), "to_first_list_us": summary(toList), "extra_registers": extra,
		"failed_registers": failedAll}, nil
}

// largeRounds: the changes list-large and health-large make, each timed.
const largeRounds = 5

func msOf(t0 time.Time, m listMsg) float64 { return float64(us(m.t.Sub(t0))) / 1000 }

func findDevice(m *listMsg, id string) *pb.Device {
	for _, d := range m.devs {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// cmdListLarge: a device file created in a large devices dir, then removed,
// largeRounds times: the time from each change to the ListAndWatch message
// that shows it.
func (d *driver) cmdListLarge() (M, error) {
	if d.devices == "" {
		return nil, errors.New("list-large needs -devices")
	}
	var created, removed []float64
	var last listMsg
	for i := 0; i < largeRounds; i++ {
		name := fmt.Sprintf("zz-list-%d-%d", os.Getpid(), i)
		path := filepath.Join(d.devices, name)
		_, m0 := d.marks()
		t0 := time.Now()
		if err := ioutil.WriteFile(path, []byte("gopher\n"), 0o644); err != nil {
			return nil, err
		}
		m, err := d.waitMsg(m0, 300*time.Second, func(m *listMsg) bool { return hasDevice(m, name) })
		if err != nil {
			os.Remove(path)
			return nil, err
		}
		created = append(created, msOf(t0, m))
		last = m
		_, m0 = d.marks()
		t0 = time.Now()
		if err := os.Remove(path); err != nil {
			return nil, err
		}
		m, err = d.waitMsg(m0, 300*time.Second, func(m *listMsg) bool { return !hasDevice(m, name) })
		if err != nil {
			return nil, err
		}
		removed = append(removed, msOf(t0, m))
	}
	ps, _ := readProc(d.pid)
	return M{"ms": created[0], "created_ms": created, "removed_ms": removed, "bytes": last.bytes,
		"devices": len(last.devs), "over_kubelet_limit": last.bytes > kubeletMaxMessage,
		"proc": ps}, nil
}

// cmdHealthLarge: one device of a large devices dir turns Unhealthy (its
// file rewritten to say so) and Healthy again, largeRounds times: the time
// from each write to the ListAndWatch message that shows it.
func (d *driver) cmdHealthLarge() (M, error) {
	if d.devices == "" {
		return nil, errors.New("health-large needs -devices")
	}
	m, err := d.waitMsg(0, 300*time.Second, func(m *listMsg) bool { return len(m.devs) > 0 })
	if err != nil {
		return nil, err
	}
	name := m.devs[len(m.devs)/2].ID
	path := filepath.Join(d.devices, name)
	var samples []float64
	for i := 0; i < 2*largeRounds; i++ {
		want, text := "Unhealthy", "this gopher is unhealthy\n"
		if i%2 == 1 {
			want, text = "Healthy", "gopher\n"
		}
		_, m0 := d.marks()
		t0 := time.Now()
		if err := ioutil.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, err
		}
		m, err := d.waitMsg(m0, 300*time.Second, func(m *listMsg) bool {
			dev := findDevice(m, name)
			return dev != nil && dev.Health == want
		})
		if err != nil {
			return nil, err
		}
		samples = append(samples, msOf(t0, m))
	}
	return M{"ms": samples, "device": name}, nil
}

func (d *driver) run(name string, args []string) (M, error) {
	switch name {
	case "start":
		return d.startPlugin()
	case "stop":
		return d.stopPlugin()
	case "execreg": // execreg PROGRAM ARGS...: see execRegister ({dir} replaced)
		if len(args) == 0 {
			return nil, errors.New("usage: execreg PROGRAM [ARGS...]")
		}
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "{dir}", d.dir)
		}
		return d.execRegister(args)
	}
	if err := d.needPlugin(); err != nil {
		return nil, err
	}
	switch name {
	case "status":
		ps, err := readProc(d.pid)
		return M{"proc": ps}, err
	case "idle":
		s := 30.0
		if len(args) > 0 {
			s, _ = strconv.ParseFloat(args[0], 64)
		}
		before, err := readProc(d.pid)
		if err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
		after, err := readProc(d.pid)
		if err != nil {
			return nil, err
		}
		return M{"seconds": s, "cpu_ticks": after.Ticks - before.Ticks, "wakeups": after.Vol - before.Vol,
			"invol": after.Invol - before.Invol, "run_ns": after.RunNs - before.RunNs, "proc": after}, nil
	case "allocate":
		return d.cmdAllocate(args)
	case "update":
		return d.cmdUpdate(args)
	case "restart":
		return d.cmdRestart(args)
	case "list-large":
		return d.cmdListLarge()
	case "health-large":
		return d.cmdHealthLarge()
	}
	return nil, fmt.Errorf("unknown command %q", name)
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kdp-bench-driver -dir DIR [-devices DIR] [-max-msg BYTES] [-log FILE] -- PLUGIN [ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *fDir == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	debug.SetGCPercent(400) // less of the driver's own GC in the figures
	dir, _ := filepath.Abs(*fDir)
	devices := *fDevices
	if devices != "" {
		devices, _ = filepath.Abs(devices)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	d := &driver{dir: dir, devices: devices, argv: flag.Args(), notify: make(chan struct{}, 1)}
	if _, err := d.startServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	out.Encode(M{"event": "ready", "pid": os.Getpid(), "dir": dir})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "quit" {
			break
		}
		t0 := time.Now()
		res, err := d.run(f[0], f[1:])
		if res == nil {
			res = M{}
		}
		res["cmd"] = f[0]
		res["ok"] = err == nil
		res["elapsed_ms"] = float64(time.Since(t0).Microseconds()) / 1000
		if err != nil {
			res["error"] = err.Error()
		}
		out.Encode(res)
	}
	d.stopPlugin()
	d.mu.Lock()
	srv := d.srv
	d.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	os.Remove(filepath.Join(dir, "kubelet.sock"))
}

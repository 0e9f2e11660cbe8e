// kdp-test-apiserver: an emulator of the small part of the Kubernetes API
// server a DRA driver talks to, for kdp's tests. Go standard library only.
//
//	kdp-test-apiserver -dir DIR [-listen 127.0.0.1:0] [-node NAME[,NAME...]]...
//	                   [-versions v1,v1beta2,v1beta1] [-token-grace 10s]
//	                   [-window 1000] [-bookmark-interval 10s]
//	                   [-watch-timeout 30m] [-server-version v1.34.0]
//	                   [-log-discovery] [-aggregated-discovery=false]
//	                   [-pool-field-selector]
//	                   [-max-objects 10000] [-max-watches 500]
//
// It serves HTTPS (HTTP/2 and HTTP/1.1) with a CA it generates at start:
// /version, /api, /api/v1 (nodes: get, list, watch), /apis,
// /apis/resource.k8s.io[/<version>] with resourceslices (cluster-scoped),
// resourceclaims (namespaced, + /status) and deviceclasses, in every
// version of -versions (the first one preferred). Objects are stored in
// their v1 form and converted at the edge (v1beta1 nests a device's fields
// under "basic"). Authentication: the bearer token of DIR/token or a client
// certificate signed by DIR/ca.crt; anything else is 401 and an anonymous
// request is 403. Errors are meta/v1 Status objects shaped as the API
// server's.
//
// At start it writes into DIR: ca.crt, token, client.crt, client.key,
// kubeconfig-token, kubeconfig-cert, kubeconfig-data and
// serviceaccount/{token,ca.crt,namespace}, creates the -node Nodes, then
// prints {"event":"ready", "url": ...}.
//
// Events go to stdout, one JSON object per line, each with "event" and
// "t_ns"; commands are read from stdin, one per line, each answered by one
// "reply" event that echoes an optional trailing "#ID" word. Both are
// listed in tests/pylib/kdptest/apiserver.py, its driver.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const defaultNamespace = "kdp-system"

var (
	fDir              string
	fListen           string
	fNodes            stringList
	fVersions         string
	fTokenGrace       time.Duration
	fWindow           int
	fBookmarkInterval time.Duration
	fWatchTimeout     time.Duration
	fServerVersion    string
	fLogDiscovery     bool
	fPoolSelector     bool
	fAggregated       bool
	fMaxObjects       int
	fMaxWatches       int
	fNamespace        = defaultNamespace
)

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*l = append(*l, x)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// events

var outMu sync.Mutex

// emit prints one event line (t_ns taken under the lock: never backwards).
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
	os.Stdout.Write(append(b, '\n'))
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "kdp-test-apiserver: "+format+"\n", args...)
}

// ---------------------------------------------------------------------------
// start

func (s *server) createNode(name string) error {
	node := M{"metadata": M{"name": name, "labels": M{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		"spec": M{},
		"status": M{
			"conditions": []interface{}{M{"type": "Ready", "status": "True", "reason": "KubeletReady",
				"message": "kubelet is posting ready status", "lastHeartbeatTime": nowStamp(),
				"lastTransitionTime": nowStamp()}},
			"nodeInfo": M{"kubeletVersion": fServerVersion, "operatingSystem": "linux", "architecture": "amd64"},
		}}
	_, aerr := s.store.create(resNodes, node)
	if aerr != nil {
		return aerr
	}
	return nil
}

func main() {
	fs := flag.NewFlagSet("kdp-test-apiserver", flag.ContinueOnError)
	fs.StringVar(&fDir, "dir", "", "directory for the CA, token, kubeconfigs and serviceaccount/ (required)")
	fs.StringVar(&fListen, "listen", "127.0.0.1:0", "address to listen on (port 0: any; kept across down/up)")
	fs.Var(&fNodes, "node", "Node objects created at start (repeatable, or a comma list)")
	fs.StringVar(&fVersions, "versions", "v1", "resource.k8s.io versions served, preferred first (v1, v1beta2, v1beta1)")
	fs.DurationVar(&fTokenGrace, "token-grace", 10*time.Second, "how long a rotated-out token keeps working")
	fs.IntVar(&fWindow, "window", 1000, "events kept for watches that resume from a resourceVersion")
	fs.DurationVar(&fBookmarkInterval, "bookmark-interval", 10*time.Second, "BOOKMARK period of watches that allow them (0: none)")
	fs.DurationVar(&fWatchTimeout, "watch-timeout", 30*time.Minute, "a watch without timeoutSeconds ends after this")
	fs.StringVar(&fServerVersion, "server-version", "v1.34.0", "gitVersion of /version")
	fs.BoolVar(&fLogDiscovery, "log-discovery", false, "emit request events for successful discovery requests too")
	fs.BoolVar(&fAggregated, "aggregated-discovery", true, "answer /api and /apis in the aggregated form (apidiscovery.k8s.io/v2) when asked, as 1.30+ API servers do")
	fs.BoolVar(&fPoolSelector, "pool-field-selector", false, "accept the field selector spec.pool.name on resourceslices (the API server does not)")
	fs.IntVar(&fMaxObjects, "max-objects", 10000, "objects per resource; a create past it answers 500")
	fs.IntVar(&fMaxWatches, "max-watches", 500, "open watches; one more answers 429")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	usage := "usage: kdp-test-apiserver -dir DIR [-listen ADDR] [-node NAME]... [-versions v1,v1beta2,v1beta1] [-token-grace D] [-window N] [-bookmark-interval D] [-watch-timeout D] [-server-version V] [-log-discovery] [-aggregated-discovery=false] [-pool-field-selector] [-max-objects N] [-max-watches N]"
	if fDir == "" || fs.NArg() != 0 || fWindow < 1 || fMaxObjects < 1 || fMaxWatches < 1 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var versions []string
	for _, v := range strings.Split(fVersions, ",") {
		v = strings.TrimSpace(v)
		if v != "v1" && v != "v1beta2" && v != "v1beta1" {
			fmt.Fprintf(os.Stderr, "kdp-test-apiserver: -versions: unknown version %q (want v1, v1beta2, v1beta1)\n", v)
			os.Exit(2)
		}
		versions = append(versions, v)
	}
	if fPoolSelector {
		enablePoolFieldSelector()
	}
	dir, err := filepath.Abs(fDir)
	if err != nil {
		logf("dir: %v", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("mkdir %s: %v", dir, err)
		os.Exit(1)
	}
	creds, err := newCredentials("kdp-dra-driver")
	if err != nil {
		logf("certificates: %v", err)
		os.Exit(1)
	}
	s := &server{dir: dir, creds: creds, store: newStore(fWindow), versions: versions, addr: fListen,
		token: newToken(), oldTokens: map[string]time.Time{}, forbid: map[string]bool{},
		stats: map[string]int{}, codes: map[int]int{}}
	for _, n := range fNodes {
		if err := s.createNode(n); err != nil {
			logf("node %q: %v", n, err)
			os.Exit(1)
		}
	}
	if err := s.listen(); err != nil {
		logf("listen %s: %v", fListen, err)
		os.Exit(1)
	}
	if err := s.writeFiles(s.token); err != nil {
		logf("writing %s: %v", dir, err)
		os.Exit(1)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		s.shutdown(sig.String())
	}()

	nodes := []string(fNodes)
	if nodes == nil {
		nodes = []string{}
	}
	emit("ready", M{"url": s.url, "addr": s.addr, "dir": dir, "pid": os.Getpid(), "versions": versions,
		"nodes": nodes, "user": creds.clientUser, "token_user": tokenUser, "namespace": fNamespace,
		"ca": filepath.Join(dir, "ca.crt"), "token": filepath.Join(dir, "token"),
		"kubeconfig_token": filepath.Join(dir, "kubeconfig-token"),
		"kubeconfig_cert":  filepath.Join(dir, "kubeconfig-cert"),
		"kubeconfig_data":  filepath.Join(dir, "kubeconfig-data"),
		"serviceaccount":   filepath.Join(dir, "serviceaccount")})

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		cmd := parseCommand(sc.Text())
		if cmd == nil {
			continue
		}
		if cmd.name == "quit" {
			cmd.reply(M{"ok": true})
			s.shutdown("quit")
		}
		s.dispatch(cmd)
	}
	s.shutdown("stdin closed")
}

func (s *server) shutdown(why string) {
	s.down()
	emit("exit", M{"reason": why})
	os.Exit(0)
}

// ---------------------------------------------------------------------------
// commands

type command struct {
	name  string
	args  []string
	id    string
	start time.Time
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

func (s *server) dispatch(cmd *command) {
	switch cmd.name {
	case "down":
		s.down()
		emit("down", M{"addr": s.addr})
		cmd.reply(M{"ok": true})
	case "up":
		if err := s.listen(); err != nil {
			cmd.fail("Internal", "listen %s: %v", s.addr, err)
			return
		}
		emit("up", M{"addr": s.addr})
		cmd.reply(M{"ok": true, "url": s.url})
	case "fail":
		s.cmdFail(cmd)
	case "conflict":
		n, err := strconv.Atoi(argOr(cmd.args, 0, ""))
		if err != nil || n < 0 || len(cmd.args) != 1 {
			cmd.fail("Usage", "conflict N")
			return
		}
		s.mu.Lock()
		s.conflicts = n
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "forbid", "allow":
		if len(cmd.args) != 2 {
			cmd.fail("Usage", "%s VERB RESOURCE (either may be *)", cmd.name)
			return
		}
		s.mu.Lock()
		if cmd.name == "forbid" {
			s.forbid[cmd.args[0]+" "+cmd.args[1]] = true
		} else {
			delete(s.forbid, cmd.args[0]+" "+cmd.args[1])
		}
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "token-rotate":
		s.cmdTokenRotate(cmd)
	case "token-revoke":
		s.mu.Lock()
		s.token = ""
		s.oldTokens = map[string]time.Time{}
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "delete":
		if len(cmd.args) != 1 {
			cmd.fail("Usage", "delete NAME (a ResourceSlice)")
			return
		}
		last, aerr := s.store.remove(resSlices, "", cmd.args[0], nil)
		if aerr != nil {
			cmd.fail(aerr.reason, "%s", aerr.message)
			return
		}
		cmd.reply(M{"ok": true, "resourceVersion": getString(getMap(last, "metadata"), "resourceVersion")})
	case "edit":
		s.cmdEdit(cmd)
	case "expire-watches":
		gone := len(cmd.args) == 1 && cmd.args[0] == "410"
		if len(cmd.args) > 1 || (len(cmd.args) == 1 && !gone) {
			cmd.fail("Usage", "expire-watches [410]")
			return
		}
		n := s.expireWatches("expired", gone)
		cmd.reply(M{"ok": true, "watches": n})
	case "compact":
		rv := s.store.compact()
		cmd.reply(M{"ok": true, "resourceVersion": strconv.FormatUint(rv, 10)})
	case "create-claim":
		s.cmdCreateClaim(cmd)
	case "delete-claim":
		if len(cmd.args) != 2 {
			cmd.fail("Usage", "delete-claim NAMESPACE NAME")
			return
		}
		if _, aerr := s.store.remove(resClaims, cmd.args[0], cmd.args[1], nil); aerr != nil {
			cmd.fail(aerr.reason, "%s", aerr.message)
			return
		}
		cmd.reply(M{"ok": true})
	case "add-node", "delete-node":
		s.cmdNode(cmd)
	case "slices":
		objs, rv := s.store.list(resSlices, "")
		items := []interface{}{}
		for _, o := range objs {
			items = append(items, fromStored(resSlices, "v1", o))
		}
		cmd.reply(M{"ok": true, "slices": items, "resourceVersion": strconv.FormatUint(rv, 10)})
	case "claims":
		objs, _ := s.store.list(resClaims, "")
		items := []interface{}{}
		for _, o := range objs {
			items = append(items, fromStored(resClaims, "v1", o))
		}
		cmd.reply(M{"ok": true, "claims": items})
	case "stats":
		m := s.statsJSON()
		m["ok"] = true
		cmd.reply(m)
	default:
		cmd.fail("Usage", "unknown command %q", cmd.name)
	}
}

func argOr(a []string, i int, def string) string {
	if i < len(a) {
		return a[i]
	}
	return def
}

// fail N CODE [VERB RESOURCE]
func (s *server) cmdFail(cmd *command) {
	if len(cmd.args) != 2 && len(cmd.args) != 4 {
		cmd.fail("Usage", "fail N CODE [VERB RESOURCE] (VERB, RESOURCE may be *; RESOURCE \"discovery\" = discovery requests)")
		return
	}
	n, err1 := strconv.Atoi(cmd.args[0])
	code, err2 := strconv.Atoi(cmd.args[1])
	if err1 != nil || err2 != nil || n < 0 || code < 400 || code > 599 {
		cmd.fail("Usage", "fail N CODE: N >= 0, CODE 400..599")
		return
	}
	f := &faultRule{n: n, code: code, verb: "*", resource: "*"}
	if len(cmd.args) == 4 {
		f.verb, f.resource = cmd.args[2], cmd.args[3]
	}
	s.mu.Lock()
	if n > 0 {
		s.faults = append(s.faults, f)
	}
	s.mu.Unlock()
	cmd.reply(M{"ok": true})
}

func (s *server) cmdTokenRotate(cmd *command) {
	tok := newToken()
	s.mu.Lock()
	if s.token != "" {
		s.oldTokens[s.token] = time.Now().Add(fTokenGrace)
	}
	s.token = tok
	s.mu.Unlock()
	if err := s.writeFiles(tok); err != nil {
		cmd.fail("Internal", "writing the token: %v", err)
		return
	}
	cmd.reply(M{"ok": true, "grace_s": fTokenGrace.Seconds()})
}

// edit NAME [generation|drop-device|attribute]: someone else changes the
// slice's spec (default: its pool generation goes up by one).
func (s *server) cmdEdit(cmd *command) {
	if len(cmd.args) < 1 || len(cmd.args) > 2 {
		cmd.fail("Usage", "edit NAME [generation|drop-device|attribute]")
		return
	}
	how := argOr(cmd.args, 1, "generation")
	out, aerr := s.store.update(resSlices, "", cmd.args[0], false, func(cur M) (M, *apiError) {
		spec := ensureMap(cur, "spec")
		switch how {
		case "generation":
			pool := ensureMap(spec, "pool")
			g, _ := asInt(pool["generation"])
			pool["generation"] = jsonInt(g + 1)
		case "drop-device":
			devs, _ := spec["devices"].([]interface{})
			if len(devs) == 0 {
				return nil, errBadRequest("the slice has no device to drop")
			}
			spec["devices"] = devs[:len(devs)-1]
		case "attribute":
			devs, _ := spec["devices"].([]interface{})
			if len(devs) == 0 {
				return nil, errBadRequest("the slice has no device")
			}
			d := asMap(devs[0])
			ensureMap(d, "attributes")["edited"] = M{"string": "by-someone-else"}
		default:
			return nil, errBadRequest("edit: unknown change %q", how)
		}
		return cur, nil
	})
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	cmd.reply(M{"ok": true, "resourceVersion": getString(getMap(out, "metadata"), "resourceVersion")})
}

// create-claim NS NAME --driver D --pool P --device DEV[,DEV...] --request R
//
//	[--config JSON | --config-b64 BASE64] [--node N] [--class C] [--reserved]
//
// --driver, --pool and --request hold until changed, so one claim can hold
// devices of several drivers and requests: each --device adds results with
// the current ones; --config adds an opaque config for the current driver
// and request.
func (s *server) cmdCreateClaim(cmd *command) {
	usage := "create-claim NS NAME --driver D --pool P --device DEV[,DEV...] --request R [--config JSON | --config-b64 BASE64] [--node N] [--class C] [--reserved]"
	if len(cmd.args) < 2 {
		cmd.fail("Usage", "%s", usage)
		return
	}
	ns, name := cmd.args[0], cmd.args[1]
	driver, pool, request, node, class := "", "", "", "", "kdp-test"
	reserved := false
	var results, configs []interface{}
	requests := []string{}
	counts := map[string]int{}
	a := cmd.args[2:]
	for i := 0; i < len(a); i++ {
		flag := a[i]
		if flag == "--reserved" {
			reserved = true
			continue
		}
		if i+1 >= len(a) {
			cmd.fail("Usage", "%s needs a value; %s", flag, usage)
			return
		}
		v := a[i+1]
		i++
		switch flag {
		case "--driver":
			driver = v
		case "--pool":
			pool = v
		case "--request":
			request = v
		case "--node":
			node = v
		case "--class":
			class = v
		case "--device":
			if driver == "" || pool == "" || request == "" {
				cmd.fail("Usage", "--device needs --driver, --pool and --request first; %s", usage)
				return
			}
			if _, ok := counts[request]; !ok {
				requests = append(requests, request)
			}
			for _, d := range strings.Split(v, ",") {
				if d == "" {
					continue
				}
				results = append(results, M{"request": request, "driver": driver, "pool": pool, "device": d})
				counts[request]++
			}
		case "--config", "--config-b64":
			if flag == "--config-b64" {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					cmd.fail("Usage", "--config-b64: %v", err)
					return
				}
				v = string(b)
			}
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			var params interface{}
			if err := dec.Decode(&params); err != nil {
				cmd.fail("Usage", "--config: not JSON: %v", err)
				return
			}
			if driver == "" {
				cmd.fail("Usage", "--config needs --driver first")
				return
			}
			c := M{"source": "FromClaim", "opaque": M{"driver": driver, "parameters": params}}
			if request != "" {
				c["requests"] = []interface{}{request}
			}
			configs = append(configs, c)
		default:
			cmd.fail("Usage", "unknown option %q; %s", flag, usage)
			return
		}
	}
	if len(results) == 0 {
		cmd.fail("Usage", "no --device; %s", usage)
		return
	}
	var reqs []interface{}
	for _, r := range requests {
		reqs = append(reqs, M{"name": r, "exactly": M{"deviceClassName": class, "allocationMode": "ExactCount",
			"count": jsonInt(int64(counts[r]))}})
	}
	alloc := M{"devices": M{"results": results}}
	if len(configs) > 0 {
		getMap(alloc, "devices")["config"] = configs
	}
	if node != "" {
		alloc["nodeSelector"] = M{"nodeSelectorTerms": []interface{}{M{"matchFields": []interface{}{
			M{"key": "metadata.name", "operator": "In", "values": []interface{}{node}}}}}}
	}
	status := M{"allocation": alloc}
	if reserved {
		status["reservedFor"] = []interface{}{M{"resource": "pods", "name": name + "-pod", "uid": newUID()}}
	}
	obj := M{"metadata": M{"name": name, "namespace": ns}, "spec": M{"devices": M{"requests": reqs}}}
	out, aerr := s.store.create(resClaims, obj)
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	out, aerr = s.store.update(resClaims, ns, name, true, func(cur M) (M, *apiError) {
		cur["status"] = status
		return cur, nil
	})
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	md := getMap(out, "metadata")
	cmd.reply(M{"ok": true, "uid": getString(md, "uid"), "resourceVersion": getString(md, "resourceVersion"),
		"claim": fromStored(resClaims, "v1", out)})
}

// add-node NAME / delete-node NAME (its ResourceSlices owned by it go too,
// as the garbage collector does).
func (s *server) cmdNode(cmd *command) {
	if len(cmd.args) != 1 {
		cmd.fail("Usage", "%s NAME", cmd.name)
		return
	}
	name := cmd.args[0]
	if cmd.name == "add-node" {
		if err := s.createNode(name); err != nil {
			cmd.fail("AlreadyExists", "%v", err)
			return
		}
		cmd.reply(M{"ok": true})
		return
	}
	node, aerr := s.store.remove(resNodes, "", name, nil)
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	uid := getString(getMap(node, "metadata"), "uid")
	collected := []string{}
	st := s.store
	st.mu.Lock()
	for _, o := range st.listLocked(resSlices, "") {
		refs, _ := getMap(o, "metadata")["ownerReferences"].([]interface{})
		for _, r := range refs {
			if getString(asMap(r), "uid") == uid {
				if _, aerr := st.removeLocked(resSlices, "", nameField(o), nil); aerr == nil {
					collected = append(collected, nameField(o))
				}
				break
			}
		}
	}
	st.mu.Unlock()
	cmd.reply(M{"ok": true, "collected": collected})
}

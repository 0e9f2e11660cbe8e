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
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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

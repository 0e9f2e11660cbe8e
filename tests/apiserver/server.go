package main

// The HTTPS side: listening (down/up), authentication (bearer tokens, client
// certificates), injected faults and RBAC refusals, routing to discovery and
// to the resources, and the per-request bookkeeping (stats, events).

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type faultRule struct {
	n        int
	code     int
	verb     string // "*" = any
	resource string // "*" = any
}

type server struct {
	dir      string
	creds    *credentials
	store    *store
	versions []string
	addr     string // host:port, kept across down/up
	url      string

	mu           sync.Mutex
	srv          *http.Server
	up           bool
	token        string               // accepted ("" after token-revoke)
	oldTokens    map[string]time.Time // rotated-out tokens and when they stop working
	faults       []*faultRule
	forbid       map[string]bool // "verb resource"
	conflicts    int             // the next N resourceslice writes answer 409
	delCreated   int             // the next N resourceslices created are deleted at once
	delDelay     time.Duration   // ... this long after their create (0: before its answer)
	stats        map[string]int  // "verb resource" -> requests
	codes        map[int]int
	writes       int
	conflicted   int
	watchesOpen  int
	watchesTotal int
}

// request is what one HTTP request is, once routed.
type request struct {
	method, path string
	proto        string // "HTTP/2.0" or "HTTP/1.1"
	accept       string
	verb         string // get list watch create update patch delete deletecollection
	rd           *resourceDef
	sub          string // "status" or ""
	version      string
	ns, name     string
	user, auth   string
	code         int
	warnings     []string // Warning headers (unknown fields)
	discovery    bool
	s            *server
}

func (rq *request) resourceName() string {
	if rq.rd == nil {
		if rq.discovery {
			return "discovery"
		}
		return ""
	}
	if rq.sub != "" {
		return rq.rd.name + "/" + rq.sub
	}
	return rq.rd.name
}

func (rq *request) fail(w http.ResponseWriter, e *apiError) {
	rq.code = e.code
	if e.code == 409 && e.reason == "Conflict" {
		rq.s.mu.Lock()
		rq.s.conflicted++
		rq.s.mu.Unlock()
	}
	writeStatus(w, e)
}

func (rq *request) writeJSON(w http.ResponseWriter, code int, v interface{}, contentType string) {
	b, err := json.Marshal(v)
	if err != nil {
		rq.fail(w, &apiError{code: 500, reason: "InternalError", message: "Internal error occurred: " + err.Error()})
		return
	}
	if contentType == "" {
		contentType = "application/json"
	}
	for _, warn := range rq.warnings {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", warn))
	}
	w.Header().Set("Content-Type", contentType)
	rq.code = code
	w.WriteHeader(code)
	w.Write(b)
}

// ---------------------------------------------------------------------------
// listening

func (s *server) tlsConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{s.creds.serverTLS},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    s.creds.pool,
		MinVersion:   tls.VersionTLS12,
	}
}

// listen starts serving on s.addr (":0" picks the port the first time).
func (s *server) listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	s.url = "https://" + s.addr
	srv := &http.Server{Handler: s, TLSConfig: s.tlsConfig(), ErrorLog: nil,
		ReadHeaderTimeout: 30 * time.Second}
	s.srv = srv
	s.up = true
	go func() {
		err := srv.ServeTLS(ln, "", "")
		if err != nil && err != http.ErrServerClosed {
			logf("serve: %v", err)
		}
	}()
	return nil
}

// down stops listening and drops every connection, watches included.
func (s *server) down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.up = false
	s.mu.Unlock()
	s.expireWatches("down", false)
	if srv != nil {
		srv.Close()
	}
}

// expireWatches ends every open watch (with a 410 ERROR event first when
// gone); returns how many.
func (s *server) expireWatches(reason string, gone bool) int {
	s.store.mu.Lock()
	ws := make([]*watcher, 0, len(s.store.watchers))
	for w := range s.store.watchers {
		ws = append(ws, w)
	}
	s.store.mu.Unlock()
	for _, w := range ws {
		w.stop(reason, gone)
	}
	return len(ws)
}

func (s *server) trackWatch(w *watcher, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.watchesOpen++
		s.watchesTotal++
	} else {
		s.watchesOpen--
	}
}

// ---------------------------------------------------------------------------
// authentication

const tokenUser = "system:serviceaccount:" + defaultNamespace + ":kdp-dra-driver"

// authenticate returns the user, how it was authenticated ("token",
// "cert", "anonymous") and whether the credentials were good.
func (s *server) authenticate(r *http.Request) (string, string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		f := strings.Fields(h)
		if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
			return "", "token", false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.token != "" && f[1] == s.token {
			return tokenUser, "token", true
		}
		if until, ok := s.oldTokens[f[1]]; ok && time.Now().Before(until) {
			return tokenUser, "old-token", true
		}
		return "", "token", false
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		return r.TLS.PeerCertificates[0].Subject.CommonName, "cert", true
	}
	return "system:anonymous", "anonymous", true
}

// ---------------------------------------------------------------------------
// the handler

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rq := &request{method: r.Method, path: r.URL.Path, proto: r.Proto, accept: r.Header.Get("Accept"), s: s}
	s.route(rq, r)
	watch := rq.verb == "watch"
	defer func() {
		s.count(rq)
		if !watch {
			s.requestEvent(rq)
		}
	}()

	user, auth, ok := s.authenticate(r)
	rq.user, rq.auth = user, auth
	if !ok {
		watch = false
		rq.fail(w, errUnauthorized())
		return
	}
	public := rq.path == "/version" || rq.path == "/healthz" || rq.path == "/livez" || rq.path == "/readyz"
	if auth == "anonymous" && !public {
		// The API server lets anonymous requests through authentication
		// and RBAC refuses them.
		watch = false
		if rq.rd != nil {
			rq.fail(w, errForbidden(rq.rd, rq.sub, rq.name, rq.ns, user, rq.verb))
		} else {
			rq.fail(w, &apiError{code: 403, reason: "Forbidden",
				message: fmt.Sprintf("forbidden: User \"system:anonymous\" cannot get path %q", rq.path)})
		}
		return
	}
	if e := s.injected(rq); e != nil {
		watch = false
		rq.fail(w, e)
		return
	}
	if rq.rd != nil && s.forbidden(rq) {
		watch = false
		rq.fail(w, errForbidden(rq.rd, rq.sub, rq.name, rq.ns, user, rq.verb))
		return
	}
	switch {
	case rq.discovery:
		s.serveDiscovery(w, r, rq)
	case rq.rd != nil:
		s.serveResource(w, r, rq)
	case rq.path == "/healthz" || rq.path == "/livez" || rq.path == "/readyz":
		rq.code = 200
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	default:
		watch = false
		rq.fail(w, &apiError{code: 404, reason: "NotFound", details: M{},
			message: "the server could not find the requested resource"})
	}
}

// route fills verb, resource, version, namespace and name from the URL.
func (s *server) route(rq *request, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	isWatch := boolParam(q.Get("watch"))
	switch {
	case len(parts) == 1 && (parts[0] == "version" || parts[0] == "api" || parts[0] == "apis"):
		rq.discovery = true
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		rq.discovery, rq.version = true, "v1"
	case len(parts) == 2 && parts[0] == "apis" && parts[1] == groupDRA:
		rq.discovery = true
	case len(parts) == 3 && parts[0] == "apis" && parts[1] == groupDRA && s.serves(parts[2]):
		rq.discovery, rq.version = true, parts[2]
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "v1":
		rq.version = "v1"
		s.routeResource(rq, "", parts[2:])
	case len(parts) >= 4 && parts[0] == "apis" && parts[1] == groupDRA && s.serves(parts[2]):
		rq.version = parts[2]
		s.routeResource(rq, groupDRA, parts[3:])
	}
	if rq.discovery {
		rq.verb = "get"
		return
	}
	if rq.rd == nil {
		return
	}
	collection := rq.name == ""
	switch rq.method {
	case "GET", "HEAD":
		switch {
		case isWatch:
			rq.verb = "watch"
		case collection:
			rq.verb = "list"
		default:
			rq.verb = "get"
		}
	case "POST":
		rq.verb = "create"
	case "PUT":
		rq.verb = "update"
	case "PATCH":
		rq.verb = "patch"
	case "DELETE":
		if collection {
			rq.verb = "deletecollection"
		} else {
			rq.verb = "delete"
		}
	default:
		rq.verb = strings.ToLower(rq.method)
	}
}

// routeResource reads [namespaces/NS/]RESOURCE[/NAME[/SUB]].
func (s *server) routeResource(rq *request, group string, p []string) {
	if len(p) >= 3 && p[0] == "namespaces" {
		rd := resourceByName(group, p[2])
		if rd == nil || !rd.namespaced {
			return
		}
		rq.ns = p[1]
		p = p[2:]
	}
	rd := resourceByName(group, p[0])
	if rd == nil || (rd.namespaced && rq.ns == "" && len(p) > 1) {
		return
	}
	switch len(p) {
	case 1:
	case 2:
		rq.name = p[1]
	case 3:
		if !rd.hasStatus || p[2] != "status" {
			return
		}
		rq.name, rq.sub = p[1], p[2]
	default:
		return
	}
	rq.rd = rd
}

// boolParam parses a query flag as the API server does (strconv.ParseBool:
// "true", "True", "1", "t" ...; python3-kubernetes sends "True").
func boolParam(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

func (s *server) serves(version string) bool {
	for _, v := range s.versions {
		if v == version {
			return true
		}
	}
	return false
}

// injected returns the answer of a matching "fail" rule or "conflict".
func (s *server) injected(rq *request) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := rq.resourceName()
	for i, f := range s.faults {
		if (f.verb == "*" || f.verb == rq.verb) && (f.resource == "*" || f.resource == res ||
			(rq.rd != nil && f.resource == rq.rd.name)) {
			f.n--
			if f.n <= 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return errInjected(f.code)
		}
	}
	if s.conflicts > 0 && rq.rd == resSlices && (rq.verb == "update" || rq.verb == "patch" || rq.verb == "delete") {
		s.conflicts--
		return errConflict(resSlices, rq.name, conflictText)
	}
	return nil
}

func (s *server) forbidden(rq *request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := rq.resourceName()
	for _, k := range []string{rq.verb + " " + res, "* " + res, rq.verb + " *", "* *"} {
		if s.forbid[k] {
			return true
		}
	}
	return false
}

func (s *server) count(rq *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := rq.verb + " " + rq.resourceName()
	if rq.verb == "" {
		k = rq.method + " " + rq.path
	}
	s.stats[k]++
	s.codes[rq.code]++
	if rq.code < 300 {
		switch rq.verb {
		case "create", "update", "patch", "delete", "deletecollection":
			s.writes++
		}
	}
}

func (s *server) requestEvent(rq *request) {
	if rq.discovery && !fLogDiscovery && rq.code < 300 {
		return
	}
	m := M{"method": rq.method, "path": rq.path, "verb": rq.verb, "resource": rq.resourceName(),
		"version": rq.version, "namespace": rq.ns, "name": rq.name, "code": rq.code, "user": rq.user,
		"auth": rq.auth, "proto": rq.proto}
	if rq.discovery {
		m["accept"] = rq.accept
	}
	emit("request", m)
}

func (s *server) statsJSON() M {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := M{}
	keys := make([]string, 0, len(s.stats))
	for k := range s.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		req[k] = s.stats[k]
	}
	codes := M{}
	for c, n := range s.codes {
		codes[fmt.Sprint(c)] = n
	}
	return M{"requests": req, "codes": codes, "writes": s.writes, "conflicts": s.conflicted,
		"watches_open": s.watchesOpen, "watches_total": s.watchesTotal}
}

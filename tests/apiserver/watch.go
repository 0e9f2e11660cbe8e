package main

// Watches: a chunked stream of JSON lines {"type": ..., "object": ...}.
// From resourceVersion "" or "0" the current objects come first as ADDED;
// from N the events after N in the window, or one ERROR event (410
// Expired, "too old resource version: N (OLDEST)") if the window no longer
// reaches back to N. A change that takes an object into (out of) the
// selection arrives as ADDED (DELETED), as the API server's cacher does.
// A watch that falls behind by more than its buffer is ended.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const watchBuffer = 4096

type watcher struct {
	id       int64
	rd       *resourceDef
	version  string
	filter   filter
	ch       chan event
	done     chan struct{} // closed by stop()
	reason   string        // why it was stopped
	mu       sync.Mutex
	stopped  bool
	overflow bool
	send410  bool
}

var watchIDs int64

// deliver queues ev (store locked); a full buffer ends the watch.
func (w *watcher) deliver(ev event) {
	select {
	case w.ch <- ev:
	default:
		w.stop("overflow", false)
	}
}

// stop ends the watch; with gone, a 410 ERROR event is sent first.
func (w *watcher) stop(reason string, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	w.reason = reason
	w.send410 = gone
	close(w.done)
}

type watchLine struct {
	Type   string      `json:"type"`
	Object interface{} `json:"object"`
}

// serveWatch runs one watch until it ends.
func (s *server) serveWatch(w http.ResponseWriter, r *http.Request, rq *request, f filter) {
	q := r.URL.Query()
	rvParam := q.Get("resourceVersion")
	bookmarks := boolParam(q.Get("allowWatchBookmarks"))
	timeout := fWatchTimeout
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			rq.fail(w, errBadRequest("invalid timeoutSeconds %q", t))
			return
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	var from uint64
	if rvParam != "" && rvParam != "0" {
		n, err := strconv.ParseUint(rvParam, 10, 64)
		if err != nil {
			rq.fail(w, errBadRequest("invalid resource version: %s", rvParam))
			return
		}
		from = n
	}

	wt := &watcher{id: atomic.AddInt64(&watchIDs, 1), rd: rq.rd, version: rq.version, filter: f,
		ch: make(chan event, watchBuffer), done: make(chan struct{})}
	var initial []event
	var tooOld *apiError
	s.mu.Lock()
	full := s.watchesOpen >= fMaxWatches
	s.mu.Unlock()
	if full {
		e := errInjected(429)
		e.message = fmt.Sprintf("Too many requests, please try again later. (kdp-test-apiserver: %d watches open, -max-watches)", fMaxWatches)
		rq.fail(w, e)
		s.requestEvent(rq)
		return
	}

	// sendInitialEvents=true (the WatchList protocol): the current objects
	// first whatever the resourceVersion, then a BOOKMARK annotated
	// "k8s.io/initial-events-end".
	initialEvents := boolParam(q.Get("sendInitialEvents"))
	st := s.store
	st.mu.Lock()
	if rvParam == "" || rvParam == "0" || initialEvents {
		for _, o := range st.listLocked(rq.rd, f.ns) {
			initial = append(initial, event{typ: "ADDED", obj: o, rd: rq.rd})
		}
	} else if from < st.compacted {
		oldest := st.compacted + 1
		tooOld = errGone("too old resource version: %d (%d)", from, oldest)
	} else {
		for _, ev := range st.window {
			if ev.rv > from && ev.rd == rq.rd {
				initial = append(initial, ev)
			}
		}
	}
	if tooOld == nil {
		st.watchers[wt] = struct{}{}
	}
	st.mu.Unlock()
	// closed unregisters the watch, then says so (stats agree with the event).
	closed := func(reason string) {
		wt.stop(reason, false)
		st.mu.Lock()
		delete(st.watchers, wt)
		st.mu.Unlock()
		s.trackWatch(wt, false)
		emit("watch_closed", M{"id": wt.id, "resource": rq.rd.name, "reason": reason})
	}
	if tooOld == nil {
		s.trackWatch(wt, true)
	}

	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	if fl != nil {
		fl.Flush() // the headers now, as the API server does: the client sees the watch is open
	}
	rq.code = 200
	s.requestEvent(rq)
	enc := json.NewEncoder(w)
	write := func(typ string, obj interface{}) bool {
		if err := enc.Encode(watchLine{Type: typ, Object: obj}); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if tooOld != nil {
		write("ERROR", tooOld.status())
		emit("watch_expired", M{"resource": rq.rd.name, "resource_version": rvParam, "message": tooOld.message})
		return
	}
	emit("watch_open", M{"id": wt.id, "resource": rq.rd.name, "version": rq.version, "resource_version": rvParam,
		"namespace": f.ns, "label_selector": q.Get("labelSelector"), "field_selector": q.Get("fieldSelector"),
		"bookmarks": bookmarks, "user": rq.user})

	send := func(ev event) bool {
		typ := ev.typ
		in := f.match(rq.rd, ev.obj)
		if typ == "MODIFIED" {
			was := f.match(rq.rd, ev.prev)
			switch {
			case was && !in:
				typ = "DELETED"
			case !was && in:
				typ = "ADDED"
			case !was && !in:
				return true
			}
		} else if !in {
			return true
		}
		return write(typ, fromStored(rq.rd, rq.version, ev.obj))
	}
	for _, ev := range initial {
		if !send(ev) {
			closed("client gone")
			return
		}
	}
	if initialEvents && bookmarks {
		if !write("BOOKMARK", M{"kind": rq.rd.kind, "apiVersion": apiVersionOf(rq), "metadata": M{
			"resourceVersion": strconv.FormatUint(st.currentRV(), 10),
			"annotations":     M{"k8s.io/initial-events-end": "true"}}}) {
			closed("client gone")
			return
		}
	}
	var tick <-chan time.Time
	if bookmarks && fBookmarkInterval > 0 {
		t := time.NewTicker(fBookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	reason := ""
	for reason == "" {
		select {
		case ev := <-wt.ch:
			if !send(ev) {
				reason = "client gone"
			}
		case <-tick:
			if !write("BOOKMARK", M{"kind": rq.rd.kind, "apiVersion": apiVersionOf(rq),
				"metadata": M{"resourceVersion": strconv.FormatUint(st.currentRV(), 10)}}) {
				reason = "client gone"
			}
		case <-deadline.C:
			reason = "timeout"
		case <-r.Context().Done():
			reason = "client gone"
			wt.mu.Lock()
			if wt.stopped { // down: the server closed the connection for us
				reason = wt.reason
			}
			wt.mu.Unlock()
		case <-wt.done:
			wt.mu.Lock()
			reason = wt.reason
			gone := wt.send410
			wt.mu.Unlock()
			if gone {
				write("ERROR", errGone("too old resource version: %d (%d)", from, st.currentRV()).status())
			}
		}
	}
	closed(reason)
}

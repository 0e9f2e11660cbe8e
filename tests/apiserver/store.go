package main

// The store: every object of every resource in its v1 form, one global
// resourceVersion counter (etcd's revision), a window of recent events for
// watches that resume from a resourceVersion, and the open watches.

import (
	"crypto/rand"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

type event struct {
	rv   uint64
	rd   *resourceDef
	typ  string // ADDED, MODIFIED, DELETED
	obj  M      // the object after the change (the last state for DELETED)
	prev M      // MODIFIED: the state before (selector transitions)
}

type store struct {
	mu        sync.Mutex
	rv        uint64
	objs      map[*resourceDef]map[string]M // key: ns/name
	window    []event
	windowMax int
	compacted uint64 // events with rv <= compacted are forgotten
	watchers  map[*watcher]struct{}
	dropped   int // watches ended because they fell behind
}

func newStore(windowMax int) *store {
	s := &store{objs: map[*resourceDef]map[string]M{}, windowMax: windowMax, watchers: map[*watcher]struct{}{}}
	for _, rd := range append([]*resourceDef{resNodes}, draResources...) {
		s.objs[rd] = map[string]M{}
	}
	return s
}

func key(ns, name string) string { return ns + "/" + name }

func newUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

const generateChars = "bcdfghjklmnpqrstvwxz2456789"

func randomSuffix() string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = generateChars[int(b[i])%len(generateChars)]
	}
	return string(b)
}

func nowStamp() string { return time.Now().UTC().Format(time.RFC3339) }

// record appends an event (store locked) and hands it to the watches.
func (s *store) record(ev event) {
	s.window = append(s.window, ev)
	if over := len(s.window) - s.windowMax; over > 0 {
		s.compacted = s.window[over-1].rv
		s.window = append([]event(nil), s.window[over:]...)
	}
	for w := range s.watchers {
		if w.rd == ev.rd {
			w.deliver(ev)
		}
	}
}

func (s *store) nextRV() uint64 {
	s.rv++
	return s.rv
}

// get returns a copy of the stored object.
func (s *store) get(rd *resourceDef, ns, name string) M {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objs[rd][key(ns, name)]; o != nil {
		return copyObj(o)
	}
	return nil
}

// list returns copies of the objects (namespace "" = all) sorted by
// namespace/name, and the current resourceVersion.
func (s *store) list(rd *resourceDef, ns string) ([]M, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(rd, ns), s.rv
}

func (s *store) listLocked(rd *resourceDef, ns string) []M {
	keys := make([]string, 0, len(s.objs[rd]))
	for k, o := range s.objs[rd] {
		if ns == "" || nsField(o) == ns {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]M, 0, len(keys))
	for _, k := range keys {
		out = append(out, copyObj(s.objs[rd][k]))
	}
	return out
}

// create stores obj (metadata filled here); generateName is resolved.
func (s *store) create(rd *resourceDef, obj M) (M, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md := ensureMap(obj, "metadata")
	ns := getString(md, "namespace")
	name := getString(md, "name")
	if name == "" && getString(md, "generateName") != "" {
		for i := 0; i < 100; i++ {
			name = getString(md, "generateName") + randomSuffix()
			if s.objs[rd][key(ns, name)] == nil {
				break
			}
		}
		md["name"] = name
	}
	if rd.validate != nil {
		if errs := rd.validate(obj, nil); len(errs) > 0 {
			return nil, errInvalid(rd, name, errs)
		}
	}
	if rd == resSlices {
		canonicalSlice(obj) // quantities as resource.Quantity writes them
	}
	if s.objs[rd][key(ns, name)] != nil {
		return nil, errAlreadyExists(rd, name)
	}
	if len(s.objs[rd]) >= fMaxObjects {
		return nil, &apiError{code: 500, reason: "InternalError",
			message: fmt.Sprintf("Internal error occurred: kdp-test-apiserver holds its maximum of %d %s (-max-objects)", fMaxObjects, rd.name)}
	}
	rv := s.nextRV()
	md["uid"] = newUID()
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	md["creationTimestamp"] = nowStamp()
	if rd.hasGeneration {
		md["generation"] = jsonInt(1)
	}
	delete(md, "deletionTimestamp")
	delete(md, "selfLink")
	stored := copyObj(obj)
	s.objs[rd][key(ns, name)] = stored
	s.record(event{rv: rv, rd: rd, typ: "ADDED", obj: copyObj(stored)})
	return copyObj(stored), nil
}

// update replaces the object (or its status with status=true). obj's
// metadata.resourceVersion, when set, must be the current one.
// mutate (may be nil) runs on the stored copy under the lock: patches.
func (s *store) update(rd *resourceDef, ns, name string, status bool,
	mutate func(cur M) (M, *apiError)) (M, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objs[rd][key(ns, name)]
	if cur == nil {
		return nil, errNotFound(rd, name)
	}
	obj, aerr := mutate(copyObj(cur))
	if aerr != nil {
		return nil, aerr
	}
	md := ensureMap(obj, "metadata")
	curMD := getMap(cur, "metadata")
	if rv := getString(md, "resourceVersion"); rv != "" && rv != getString(curMD, "resourceVersion") {
		return nil, errConflict(rd, name, conflictText)
	}
	if uid := getString(md, "uid"); uid != "" && uid != getString(curMD, "uid") {
		return nil, errConflict(rd, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s",
			uid, getString(curMD, "uid")))
	}
	// What the caller may not change.
	for _, k := range []string{"uid", "creationTimestamp", "generation", "namespace", "name"} {
		if v, ok := curMD[k]; ok {
			md[k] = v
		} else {
			delete(md, k)
		}
	}
	if rd.hasStatus {
		if status {
			// /status: only the status changes (metadata too is reset,
			// as ResetObjectMetaForStatus does)
			rv := md["resourceVersion"]
			md = copyObj(curMD)
			md["resourceVersion"] = rv
			obj["metadata"] = md
			for k, v := range cur {
				if k != "status" && k != "metadata" {
					obj[k] = deepCopy(v)
				}
			}
			for k := range obj {
				if _, ok := cur[k]; !ok && k != "status" && k != "metadata" {
					delete(obj, k)
				}
			}
		} else if st, ok := cur["status"]; ok {
			obj["status"] = deepCopy(st)
		} else {
			delete(obj, "status")
		}
	}
	if rd.validate != nil {
		if errs := rd.validate(obj, cur); len(errs) > 0 {
			return nil, errInvalid(rd, name, errs)
		}
	}
	if rd == resSlices {
		canonicalSlice(obj)
	}
	if rd.hasGeneration && !jsonEqual(obj["spec"], cur["spec"]) {
		g, _ := asInt(curMD["generation"])
		md["generation"] = jsonInt(g + 1)
	}
	// A no-op update writes nothing: same resourceVersion, no event.
	md["resourceVersion"] = curMD["resourceVersion"]
	if jsonEqual(obj, cur) {
		return copyObj(cur), nil
	}
	rv := s.nextRV()
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	stored := copyObj(obj)
	s.objs[rd][key(ns, name)] = stored
	s.record(event{rv: rv, rd: rd, typ: "MODIFIED", obj: copyObj(stored), prev: copyObj(cur)})
	return copyObj(stored), nil
}

// remove deletes the object; precondition (may be nil) checks it first.
func (s *store) remove(rd *resourceDef, ns, name string, precondition func(cur M) *apiError) (M, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(rd, ns, name, precondition)
}

func (s *store) removeLocked(rd *resourceDef, ns, name string, precondition func(cur M) *apiError) (M, *apiError) {
	cur := s.objs[rd][key(ns, name)]
	if cur == nil {
		return nil, errNotFound(rd, name)
	}
	if precondition != nil {
		if aerr := precondition(cur); aerr != nil {
			return nil, aerr
		}
	}
	delete(s.objs[rd], key(ns, name))
	rv := s.nextRV()
	last := copyObj(cur)
	getMap(last, "metadata")["resourceVersion"] = strconv.FormatUint(rv, 10)
	s.record(event{rv: rv, rd: rd, typ: "DELETED", obj: copyObj(last)})
	return last, nil
}

// compact forgets the event window: a watch from any resourceVersion
// before now gets 410 Gone.
func (s *store) compact() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rv
	s.window = nil
	return s.rv
}

func (s *store) currentRV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

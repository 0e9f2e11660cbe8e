package main

// The REST verbs on the resources: get, list (selectors, limit/continue,
// Table output), watch, create (generateName), update (PUT, optimistic
// concurrency), patch (merge, JSON and strategic-merge as merge), delete
// (preconditions) and deletecollection.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const maxBody = 3 * 1024 * 1024 // the API server's limit

func (s *server) serveResource(w http.ResponseWriter, r *http.Request, rq *request) {
	rd := rq.rd
	if rd == resNodes && rq.verb != "get" && rq.verb != "list" && rq.verb != "watch" {
		rq.fail(w, errMethodNotAllowed(rq.verb, "Node"))
		return
	}
	switch rq.verb {
	case "get":
		s.doGet(w, r, rq)
	case "list", "watch", "deletecollection":
		f, aerr := s.listFilter(r, rq)
		if aerr != nil {
			rq.fail(w, aerr)
			return
		}
		switch rq.verb {
		case "list":
			s.doList(w, r, rq, f)
		case "watch":
			s.serveWatch(w, r, rq, f)
		default:
			s.doDeleteCollection(w, r, rq, f)
		}
	case "create":
		if rq.name != "" {
			rq.fail(w, errMethodNotAllowed("create", rd.kind))
			return
		}
		s.doCreate(w, r, rq)
	case "update":
		s.doUpdate(w, r, rq)
	case "patch":
		s.doPatch(w, r, rq)
	case "delete":
		s.doDelete(w, r, rq)
	default:
		rq.fail(w, &apiError{code: 405, reason: "MethodNotAllowed",
			message: fmt.Sprintf("the server does not allow this method on the requested resource")})
	}
}

func wantsTable(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "as=Table")
}

const tableContentType = "application/json;as=Table;v=v1;g=meta.k8s.io"

func (s *server) table(rd *resourceDef, objs []M, rv string) M {
	var cols []M
	for _, c := range rd.columns {
		cols = append(cols, M{"name": c.name, "type": c.typ, "format": c.format, "description": c.desc,
			"priority": c.priority})
	}
	rows := []M{}
	for _, o := range objs {
		var cells []interface{}
		for _, c := range rd.columns {
			cells = append(cells, c.cell(o))
		}
		rows = append(rows, M{"cells": cells, "object": M{"kind": "PartialObjectMetadata",
			"apiVersion": "meta.k8s.io/v1", "metadata": getMap(o, "metadata")}})
	}
	return M{"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": M{"resourceVersion": rv},
		"columnDefinitions": cols, "rows": rows}
}

func (s *server) doGet(w http.ResponseWriter, r *http.Request, rq *request) {
	o := s.store.get(rq.rd, rq.ns, rq.name)
	if o == nil {
		rq.fail(w, errNotFound(rq.rd, rq.name))
		return
	}
	if wantsTable(r) {
		rq.writeJSON(w, 200, s.table(rq.rd, []M{o}, getString(getMap(o, "metadata"), "resourceVersion")), tableContentType)
		return
	}
	rq.writeJSON(w, 200, fromStored(rq.rd, rq.version, o), "")
}

func (s *server) listFilter(r *http.Request, rq *request) (filter, *apiError) {
	q := r.URL.Query()
	f := filter{ns: rq.ns}
	ls, err := parseLabelSelector(q.Get("labelSelector"))
	if err != nil {
		return f, errBadRequest("unable to parse requirement: %v", err)
	}
	f.labels = ls
	fs, aerr := parseFieldSelector(rq.rd, rq.version, q.Get("fieldSelector"))
	if aerr != nil {
		return f, aerr
	}
	f.fields = fs
	return f, nil
}

type continueToken struct {
	RV    uint64 `json:"rv"`
	Start string `json:"start"`
}

func (s *server) doList(w http.ResponseWriter, r *http.Request, rq *request, f filter) {
	q := r.URL.Query()
	objs, rv := s.store.list(rq.rd, rq.ns)
	start := ""
	if c := q.Get("continue"); c != "" {
		var tok continueToken
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			err = json.Unmarshal(b, &tok)
		}
		if err != nil {
			rq.fail(w, errBadRequest("continue key is not valid: %v", err))
			return
		}
		start = tok.Start
	}
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			rq.fail(w, errBadRequest("invalid limit %q", l))
			return
		}
		limit = n
	}
	var sel []M
	for _, o := range objs {
		if f.match(rq.rd, o) && key(nsField(o), nameField(o)) > start {
			sel = append(sel, o)
		}
	}
	meta := M{"resourceVersion": strconv.FormatUint(rv, 10)}
	if limit > 0 && len(sel) > limit {
		last := sel[limit-1]
		b, _ := json.Marshal(continueToken{RV: rv, Start: key(nsField(last), nameField(last))})
		meta["continue"] = base64.RawURLEncoding.EncodeToString(b)
		meta["remainingItemCount"] = len(sel) - limit
		sel = sel[:limit]
	}
	if wantsTable(r) {
		t := s.table(rq.rd, sel, meta["resourceVersion"].(string))
		t["metadata"] = meta
		rq.writeJSON(w, 200, t, tableContentType)
		return
	}
	items := make([]interface{}, 0, len(sel))
	for _, o := range sel {
		it := fromStored(rq.rd, rq.version, o)
		delete(it, "kind") // list items carry no TypeMeta, as from the API server
		delete(it, "apiVersion")
		items = append(items, it)
	}
	rq.writeJSON(w, 200, M{"kind": rq.rd.kind + "List", "apiVersion": apiVersionOf(rq), "metadata": meta,
		"items": items}, "")
}

func apiVersionOf(rq *request) string {
	if rq.rd.group == "" {
		return rq.version
	}
	return rq.rd.group + "/" + rq.version
}

// readBody decodes the JSON body (numbers kept exact).
func readBody(r *http.Request) (interface{}, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, errBadRequest("reading the body: %v", err)
	}
	if len(b) > maxBody {
		return nil, &apiError{code: 413, reason: "RequestEntityTooLarge",
			message: fmt.Sprintf("Request entity too large: limit is %d", maxBody)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return nil, errBadRequest("the object provided is unrecognized (must be of type %s): %v", "JSON", err)
	}
	return v, nil
}

func mediaType(r *http.Request) string {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// readObject reads a create/update body: a JSON object of this kind and
// version (apiVersion/kind may be omitted), namespace matching the URL.
func (s *server) readObject(r *http.Request, rq *request) (M, *apiError) {
	if mt := mediaType(r); mt != "" && mt != "application/json" && mt != "*/*" {
		return nil, errUnsupportedMediaType(mt, []string{"application/json", "application/yaml",
			"application/vnd.kubernetes.protobuf", "application/cbor"})
	}
	v, aerr := readBody(r)
	if aerr != nil {
		return nil, aerr
	}
	obj, ok := v.(map[string]interface{})
	if !ok {
		return nil, errBadRequest("the body of the request must be a JSON object of kind %s", rq.rd.kind)
	}
	if av := getString(obj, "apiVersion"); av != "" && av != apiVersionOf(rq) {
		return nil, errBadRequest("the API version in the data (%s) does not match the expected API version (%s)",
			av, apiVersionOf(rq))
	}
	if k := getString(obj, "kind"); k != "" && k != rq.rd.kind {
		return nil, errBadRequest("the kind in the data (%s) does not match the expected kind (%s)", k, rq.rd.kind)
	}
	if _, ok := obj["metadata"].(map[string]interface{}); obj["metadata"] != nil && !ok {
		return nil, errBadRequest("metadata must be an object")
	}
	md := ensureMap(obj, "metadata")
	if rq.rd.namespaced {
		if ns := getString(md, "namespace"); ns != "" && ns != rq.ns {
			return nil, errBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		md["namespace"] = rq.ns
	} else {
		delete(md, "namespace")
	}
	warnings, aerr := unknownFields(rq, obj, r.URL.Query().Get("fieldValidation"))
	if aerr != nil {
		return nil, aerr
	}
	rq.warnings = append(rq.warnings, warnings...)
	delete(obj, "apiVersion")
	delete(obj, "kind")
	toStored(rq.rd, rq.version, obj)
	return obj, nil
}

func isDryRun(r *http.Request) bool {
	return len(r.URL.Query()["dryRun"]) > 0
}

func (s *server) doCreate(w http.ResponseWriter, r *http.Request, rq *request) {
	obj, aerr := s.readObject(r, rq)
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	if rq.rd.hasStatus {
		delete(obj, "status") // a create sets no status (the status subresource does)
	}
	md := getMap(obj, "metadata")
	delete(md, "resourceVersion")
	if isDryRun(r) {
		rq.fail(w, errBadRequest("dryRun is not supported by kdp-test-apiserver"))
		return
	}
	defaults(rq.rd, obj)
	out, aerr := s.store.create(rq.rd, obj)
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	rq.name = nameField(out)
	s.deleteAfterCreate(rq.rd, out)
	rq.writeJSON(w, 201, fromStored(rq.rd, rq.version, out), "")
}

// deleteAfterCreate plays the delete-after-create command.
func (s *server) deleteAfterCreate(rd *resourceDef, obj M) {
	if rd != resSlices {
		return
	}
	s.mu.Lock()
	arm := s.delCreated > 0
	delay := s.delDelay
	if arm {
		s.delCreated--
	}
	s.mu.Unlock()
	if !arm {
		return
	}
	name := nameField(obj)
	del := func() {
		if _, aerr := s.store.remove(resSlices, "", name, nil); aerr == nil {
			emit("deleted_after_create", M{"name": name, "delay_ms": delay.Milliseconds()})
		}
	}
	if delay == 0 {
		del()
		return
	}
	time.AfterFunc(delay, del)
}

func (s *server) doUpdate(w http.ResponseWriter, r *http.Request, rq *request) {
	obj, aerr := s.readObject(r, rq)
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	if n := nameField(obj); n != "" && n != rq.name {
		rq.fail(w, errBadRequest("the name of the object (%s) does not match the name on the URL (%s)", n, rq.name))
		return
	}
	getMap(obj, "metadata")["name"] = rq.name
	defaults(rq.rd, obj)
	out, aerr := s.store.update(rq.rd, rq.ns, rq.name, rq.sub == "status", func(M) (M, *apiError) { return obj, nil })
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	rq.writeJSON(w, 200, fromStored(rq.rd, rq.version, out), "")
}

func (s *server) doPatch(w http.ResponseWriter, r *http.Request, rq *request) {
	mt := mediaType(r)
	switch mt {
	case "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json":
	default:
		rq.fail(w, errUnsupportedMediaType(mt, []string{"application/json-patch+json",
			"application/merge-patch+json", "application/strategic-merge-patch+json"}))
		return
	}
	patch, aerr := readBody(r)
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	out, aerr := s.store.update(rq.rd, rq.ns, rq.name, rq.sub == "status", func(cur M) (M, *apiError) {
		obj := fromStored(rq.rd, rq.version, cur)
		var res interface{}
		if mt == "application/json-patch+json" {
			ops, ok := patch.([]interface{})
			if !ok {
				return nil, errBadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
			}
			var err error
			if res, err = jsonPatch(obj, ops); err != nil {
				return nil, &apiError{code: 422, reason: "Invalid", message: err.Error()}
			}
		} else {
			pm, ok := patch.(map[string]interface{})
			if !ok {
				return nil, errBadRequest("the patch must be a JSON object")
			}
			res = mergePatch(obj, pm)
		}
		rm, ok := res.(map[string]interface{})
		if !ok {
			return nil, errBadRequest("the patched object is not an object")
		}
		warnings, aerr := unknownFields(rq, rm, r.URL.Query().Get("fieldValidation"))
		if aerr != nil {
			return nil, aerr
		}
		rq.warnings = append(rq.warnings, warnings...)
		delete(rm, "apiVersion")
		delete(rm, "kind")
		toStored(rq.rd, rq.version, rm)
		md := ensureMap(rm, "metadata")
		// a patch that does not name a resourceVersion applies to the current one
		if pmd := getMap(asMap(patch), "metadata"); pmd == nil || pmd["resourceVersion"] == nil {
			md["resourceVersion"] = getString(getMap(cur, "metadata"), "resourceVersion")
		}
		return rm, nil
	})
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	rq.writeJSON(w, 200, fromStored(rq.rd, rq.version, out), "")
}

func asMap(v interface{}) M {
	m, _ := v.(map[string]interface{})
	return m
}

// preconditions reads DeleteOptions.preconditions {uid, resourceVersion}.
func preconditions(rd *resourceDef, name string, body interface{}) func(cur M) *apiError {
	pc := getMap(asMap(body), "preconditions")
	if pc == nil {
		return nil
	}
	return func(cur M) *apiError {
		md := getMap(cur, "metadata")
		if uid := getString(pc, "uid"); uid != "" && uid != getString(md, "uid") {
			return errConflict(rd, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s",
				uid, getString(md, "uid")))
		}
		if rv := getString(pc, "resourceVersion"); rv != "" && rv != getString(md, "resourceVersion") {
			return errConflict(rd, name, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s",
				rv, getString(md, "resourceVersion")))
		}
		return nil
	}
}

func (s *server) doDelete(w http.ResponseWriter, r *http.Request, rq *request) {
	body, aerr := readBody(r)
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	last, aerr := s.store.remove(rq.rd, rq.ns, rq.name, preconditions(rq.rd, rq.name, body))
	if aerr != nil {
		rq.fail(w, aerr)
		return
	}
	rq.writeJSON(w, 200, M{"kind": "Status", "apiVersion": "v1", "metadata": M{}, "status": "Success",
		"details": M{"name": rq.name, "group": rq.rd.group, "kind": rq.rd.name,
			"uid": getString(getMap(last, "metadata"), "uid")}}, "")
}

func (s *server) doDeleteCollection(w http.ResponseWriter, r *http.Request, rq *request, f filter) {
	st := s.store
	st.mu.Lock()
	var deleted []interface{}
	for _, o := range st.listLocked(rq.rd, rq.ns) {
		if !f.match(rq.rd, o) {
			continue
		}
		last, aerr := st.removeLocked(rq.rd, nsField(o), nameField(o), nil)
		if aerr == nil {
			it := fromStored(rq.rd, rq.version, last)
			delete(it, "kind")
			delete(it, "apiVersion")
			deleted = append(deleted, it)
		}
	}
	rv := st.rv
	st.mu.Unlock()
	if deleted == nil {
		deleted = []interface{}{}
	}
	rq.writeJSON(w, 200, M{"kind": rq.rd.kind + "List", "apiVersion": apiVersionOf(rq),
		"metadata": M{"resourceVersion": strconv.FormatUint(rv, 10)}, "items": deleted}, "")
}

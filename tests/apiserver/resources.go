package main

// The resources served: nodes (core v1, read-only), and resource.k8s.io's
// resourceslices, resourceclaims (+ /status) and deviceclasses. Objects are
// stored in their v1 form and converted at the edge: v1beta1's Device nests
// its fields under "basic" and its DeviceRequest has no "exactly"; v1beta2
// has the v1 shapes.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// M is one JSON object.
type M = map[string]interface{}

type column struct {
	name, typ, format, desc string
	priority                int
	cell                    func(obj M) interface{}
}

type resourceDef struct {
	name, singular, kind, group string
	shortNames                  []string
	namespaced                  bool
	verbs                       []string
	hasStatus                   bool
	hasGeneration               bool
	fieldLabels                 map[string]func(M) string
	validate                    func(obj, old M) []fieldErr
	columns                     []column
	categories                  []string
}

const groupDRA = "resource.k8s.io"

var allVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func nameField(o M) string { return getString(getMap(o, "metadata"), "name") }
func nsField(o M) string   { return getString(getMap(o, "metadata"), "namespace") }

var nameColumn = column{name: "Name", typ: "string", format: "name",
	desc: "Name must be unique within a namespace. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
	cell: func(o M) interface{} { return nameField(o) }}

var ageColumn = column{name: "Age", typ: "string",
	desc: "CreationTimestamp is a timestamp representing the server time when this object was created.",
	cell: func(o M) interface{} { return age(getString(getMap(o, "metadata"), "creationTimestamp")) }}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

var (
	resNodes = &resourceDef{name: "nodes", singular: "node", kind: "Node", shortNames: []string{"no"},
		verbs: []string{"get", "list", "watch"},
		fieldLabels: map[string]func(M) string{
			"metadata.name": nameField,
			"spec.unschedulable": func(o M) string {
				if b, _ := getMap(o, "spec")["unschedulable"].(bool); b {
					return "true"
				}
				return "false"
			},
		},
		columns: []column{nameColumn,
			{name: "Status", typ: "string", desc: "The status of the node", cell: func(M) interface{} { return "Ready" }},
			{name: "Roles", typ: "string", desc: "The roles of the node", cell: func(M) interface{} { return "<none>" }},
			ageColumn,
			{name: "Version", typ: "string", desc: "Kubelet Version reported by the node.",
				cell: func(o M) interface{} { return getString(getMap(getMap(o, "status"), "nodeInfo"), "kubeletVersion") }},
		}}
	resSlices = &resourceDef{name: "resourceslices", singular: "resourceslice", kind: "ResourceSlice", group: groupDRA,
		verbs: allVerbs, hasGeneration: true, validate: validateSlice,
		fieldLabels: map[string]func(M) string{
			"metadata.name": nameField,
			"spec.nodeName": func(o M) string { return getString(getMap(o, "spec"), "nodeName") },
			"spec.driver":   func(o M) string { return getString(getMap(o, "spec"), "driver") },
		},
		columns: []column{nameColumn,
			{name: "Node", typ: "string", desc: "NodeName identifies the node which provides the resources in this pool.",
				cell: func(o M) interface{} { return orNone(getString(getMap(o, "spec"), "nodeName")) }},
			{name: "Driver", typ: "string", desc: "Driver identifies the DRA driver providing the capacity information.",
				cell: func(o M) interface{} { return getString(getMap(o, "spec"), "driver") }},
			{name: "Pool", typ: "string", desc: "Name is used to identify the pool.",
				cell: func(o M) interface{} { return getString(getMap(getMap(o, "spec"), "pool"), "name") }},
			ageColumn,
		}}
	resClaims = &resourceDef{name: "resourceclaims", singular: "resourceclaim", kind: "ResourceClaim", group: groupDRA,
		namespaced: true, verbs: allVerbs, hasStatus: true, hasGeneration: true, validate: validateClaim,
		fieldLabels: map[string]func(M) string{"metadata.name": nameField, "metadata.namespace": nsField},
		columns: []column{nameColumn,
			{name: "State", typ: "string", desc: "A summary of the current state (allocated, pending, reserved, etc.).",
				cell: claimState},
			ageColumn,
		}}
	resClasses = &resourceDef{name: "deviceclasses", singular: "deviceclass", kind: "DeviceClass", group: groupDRA,
		verbs: allVerbs, hasGeneration: true, validate: validateClass,
		fieldLabels: map[string]func(M) string{"metadata.name": nameField},
		columns:     []column{nameColumn, ageColumn}}

	draResources = []*resourceDef{resSlices, resClaims, resClasses}
)

// enablePoolFieldSelector adds spec.pool.name to the field selectors of
// resourceslices (-pool-field-selector): the API server has no such field
// label (only metadata.name, spec.nodeName, spec.driver), so it is off by
// default.
func enablePoolFieldSelector() {
	resSlices.fieldLabels["spec.pool.name"] = func(o M) string {
		return getString(getMap(getMap(o, "spec"), "pool"), "name")
	}
}

func resourceByName(group, name string) *resourceDef {
	if group == "" {
		if name == "nodes" {
			return resNodes
		}
		return nil
	}
	for _, rd := range draResources {
		if rd.name == name {
			return rd
		}
	}
	return nil
}

func claimState(o M) interface{} {
	var st []string
	md := getMap(o, "metadata")
	if md["deletionTimestamp"] != nil {
		st = append(st, "deleted")
	}
	status := getMap(o, "status")
	if status["allocation"] == nil {
		if len(st) == 0 {
			st = append(st, "pending")
		}
	} else {
		st = append(st, "allocated")
		if r, _ := status["reservedFor"].([]interface{}); len(r) > 0 {
			st = append(st, "reserved")
		}
	}
	return strings.Join(st, ",")
}

// age is kubectl's short human duration of the time since ts.
func age(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	d := time.Since(t)
	if d < -time.Second {
		return "<invalid>"
	}
	if d < 0 {
		d = 0
	}
	s := int(d.Seconds())
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case d < 10*time.Minute:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", s/60)
	case d < 8*time.Hour:
		h, m := s/3600, (s%3600)/60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", s/3600)
	default:
		return fmt.Sprintf("%dd", s/86400)
	}
}

// ---------------------------------------------------------------------------
// JSON helpers

func getMap(m M, key string) M {
	if m == nil {
		return nil
	}
	v, _ := m[key].(map[string]interface{})
	return v
}

func getString(m M, key string) string {
	if m == nil {
		return ""
	}
	v, _ := m[key].(string)
	return v
}

// ensureMap returns m[key], creating it.
func ensureMap(m M, key string) M {
	if v := getMap(m, key); v != nil {
		return v
	}
	v := M{}
	m[key] = v
	return v
}

func deepCopy(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func copyObj(o M) M { return deepCopy(o).(map[string]interface{}) }

func jsonEqual(a, b interface{}) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize makes numbers comparable (json.Number "1" and "1.0" differ as
// text; the objects we compare come from the same decoder, so text is fine)
// and treats an empty map or list like an absent one.
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			return nil
		}
		out := map[string]interface{}{}
		for k, e := range x {
			if n := normalize(e); n != nil {
				out[k] = n
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []interface{}:
		if len(x) == 0 {
			return nil
		}
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case json.Number:
		return x.String()
	default:
		return v
	}
}

// ---------------------------------------------------------------------------
// conversion (stored form: v1)

// basicFields are the v1 Device fields that v1beta1 keeps under "basic".
func toStored(rd *resourceDef, version string, obj M) {
	if version != "v1beta1" {
		return
	}
	switch rd {
	case resSlices:
		devs, _ := getMap(obj, "spec")["devices"].([]interface{})
		for _, d := range devs {
			dm, ok := d.(map[string]interface{})
			if !ok {
				continue
			}
			if b := getMap(dm, "basic"); b != nil {
				for k, v := range b {
					dm[k] = v
				}
			}
			delete(dm, "basic")
		}
	case resClaims:
		reqs, _ := getMap(getMap(obj, "spec"), "devices")["requests"].([]interface{})
		for _, r := range reqs {
			rm, ok := r.(map[string]interface{})
			if !ok || rm["firstAvailable"] != nil {
				continue
			}
			ex := M{}
			for _, k := range []string{"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations"} {
				if v, ok := rm[k]; ok {
					ex[k] = v
					delete(rm, k)
				}
			}
			rm["exactly"] = ex
		}
	}
}

// fromStored converts a copy of a stored object to version.
func fromStored(rd *resourceDef, version string, stored M) M {
	obj := copyObj(stored)
	if rd.group != "" {
		obj["apiVersion"] = rd.group + "/" + version
	} else {
		obj["apiVersion"] = version
	}
	obj["kind"] = rd.kind
	if version != "v1beta1" {
		return obj
	}
	switch rd {
	case resSlices:
		devs, _ := getMap(obj, "spec")["devices"].([]interface{})
		for _, d := range devs {
			dm, ok := d.(map[string]interface{})
			if !ok {
				continue
			}
			basic := M{}
			for k, v := range dm {
				if k != "name" {
					basic[k] = v
					delete(dm, k)
				}
			}
			dm["basic"] = basic
		}
	case resClaims:
		reqs, _ := getMap(getMap(obj, "spec"), "devices")["requests"].([]interface{})
		for _, r := range reqs {
			rm, ok := r.(map[string]interface{})
			if !ok {
				continue
			}
			if ex := getMap(rm, "exactly"); ex != nil {
				for k, v := range ex {
					rm[k] = v
				}
			}
			delete(rm, "exactly")
		}
	}
	return obj
}

// defaults fills what the API server's defaulting fills for our types.
func defaults(rd *resourceDef, obj M) {
	if rd == resSlices {
		// a taint without timeAdded gets the server's now (strategy.go)
		devs, _ := getMap(obj, "spec")["devices"].([]interface{})
		for _, d := range devs {
			dm, _ := d.(map[string]interface{})
			taints, _ := dm["taints"].([]interface{})
			for _, t := range taints {
				if tm, ok := t.(map[string]interface{}); ok && tm["timeAdded"] == nil {
					tm["timeAdded"] = time.Now().UTC().Format("2006-01-02T15:04:05Z")
				}
			}
		}
		return
	}
	if rd != resClaims {
		return
	}
	reqs, _ := getMap(getMap(obj, "spec"), "devices")["requests"].([]interface{})
	for _, r := range reqs {
		rm, _ := r.(map[string]interface{})
		ex := getMap(rm, "exactly")
		if ex == nil {
			continue
		}
		if getString(ex, "allocationMode") == "" {
			ex["allocationMode"] = "ExactCount"
		}
		if ex["count"] == nil && getString(ex, "allocationMode") == "ExactCount" {
			ex["count"] = json.Number("1")
		}
	}
}

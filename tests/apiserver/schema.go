package main

// Unknown fields of a ResourceSlice, as the API server treats them: dropped
// with a warning (the default, fieldValidation=Warn: a "Warning: 299 -
// "unknown field \"spec.x\""" header), refused with fieldValidation=Strict
// (400, "strict decoding error: unknown field ..."), dropped silently with
// Ignore. So a driver that writes a v1beta1 "basic" to v1, or misspells a
// field, loses it here as it would in a cluster.

import (
	"fmt"
	"sort"
	"strings"
)

type schema map[string]*schema // field -> its schema (nil: any value)

func fields(names ...string) *schema {
	s := schema{}
	for _, n := range names {
		s[n] = nil
	}
	return &s
}

func with(s *schema, name string, sub *schema) *schema {
	(*s)[name] = sub
	return s
}

var (
	metaSchema = fields("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
		"ownerReferences", "finalizers", "managedFields")
	attributeSchema  = fields("int", "bool", "string", "version")
	capacitySchema   = fields("value", "requestPolicy")
	deviceFields     = []string{"attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations"}
	sliceSchemaV1    = sliceSchema(false)
	sliceSchemaBeta1 = sliceSchema(true)
)

// mapOf marks a map whose values all follow sub ("*").
func mapOf(sub *schema) *schema { return &schema{"*": sub} }

// listOf marks a list whose items follow sub ("[]").
func listOf(sub *schema) *schema { return &schema{"[]": sub} }

func sliceSchema(basic bool) *schema {
	dev := fields(deviceFields...)
	with(dev, "attributes", mapOf(attributeSchema))
	with(dev, "capacity", mapOf(capacitySchema))
	device := dev
	if basic {
		device = with(fields("name"), "basic", dev)
	} else {
		(*dev)["name"] = nil
	}
	spec := fields("driver", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection", "sharedCounters")
	with(spec, "pool", fields("name", "generation", "resourceSliceCount"))
	with(spec, "devices", listOf(device))
	top := fields("apiVersion", "kind")
	with(top, "metadata", metaSchema)
	return with(top, "spec", spec)
}

// prune drops what sch does not know from v, returning the paths dropped.
func prune(v interface{}, sch *schema, path string, out *[]string) {
	if sch == nil {
		return
	}
	if sub, ok := (*sch)["[]"]; ok {
		if l, ok := v.([]interface{}); ok {
			for i, e := range l {
				prune(e, sub, fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
		return
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return
	}
	if sub, ok := (*sch)["*"]; ok {
		for _, k := range sortedKeys(m) {
			prune(m[k], sub, path+"["+k+"]", out)
		}
		return
	}
	for _, k := range sortedKeys(m) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		sub, known := (*sch)[k]
		if !known {
			*out = append(*out, p)
			delete(m, k)
			continue
		}
		prune(m[k], sub, p, out)
	}
}

// unknownFields applies the request's fieldValidation to obj (a slice in
// the request's version); it returns the warning header value to send, or
// the 400 of Strict.
func unknownFields(rq *request, obj M, mode string) ([]string, *apiError) {
	if rq.rd != resSlices {
		return nil, nil
	}
	sch := sliceSchemaV1
	if rq.version == "v1beta1" {
		sch = sliceSchemaBeta1
	}
	var dropped []string
	prune(obj, sch, "", &dropped)
	sort.Strings(dropped)
	if len(dropped) == 0 {
		return nil, nil
	}
	var quoted []string
	for _, d := range dropped {
		quoted = append(quoted, fmt.Sprintf("unknown field %q", d))
	}
	switch mode {
	case "Strict":
		return nil, errBadRequest("strict decoding error: %s", strings.Join(quoted, ", "))
	case "Ignore":
		return nil, nil
	}
	return quoted, nil
}

package main

// Label selectors (key=value, key==value, key!=value, key, !key,
// key in (a,b), key notin (a,b)) and field selectors (=, ==, != on the
// fields each resource supports; anything else is a 400 as the API server
// answers it).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

type requirement struct {
	key    string
	op     string // "=", "!=", "exists", "!exists", "in", "notin"
	values []string
}

type selector []requirement

// splitTop splits s at commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseLabelSelector(s string) (selector, error) {
	var sel selector
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, part := range splitTop(s) {
		p := strings.TrimSpace(part)
		if p == "" {
			return nil, fmt.Errorf("found '', expected: identifier")
		}
		var r requirement
		switch {
		case strings.HasPrefix(p, "!"):
			r = requirement{key: strings.TrimSpace(p[1:]), op: "!exists"}
		case strings.Contains(p, "!="):
			kv := strings.SplitN(p, "!=", 2)
			r = requirement{key: strings.TrimSpace(kv[0]), op: "!=", values: []string{strings.TrimSpace(kv[1])}}
		case strings.Contains(p, "=="):
			kv := strings.SplitN(p, "==", 2)
			r = requirement{key: strings.TrimSpace(kv[0]), op: "=", values: []string{strings.TrimSpace(kv[1])}}
		case strings.Contains(p, "="):
			kv := strings.SplitN(p, "=", 2)
			r = requirement{key: strings.TrimSpace(kv[0]), op: "=", values: []string{strings.TrimSpace(kv[1])}}
		case strings.Contains(p, "("):
			f := strings.Fields(p[:strings.Index(p, "(")])
			if len(f) != 2 || (f[1] != "in" && f[1] != "notin") || !strings.HasSuffix(p, ")") {
				return nil, fmt.Errorf("unable to parse requirement: %q", p)
			}
			inner := p[strings.Index(p, "(")+1 : len(p)-1]
			var vals []string
			for _, v := range strings.Split(inner, ",") {
				vals = append(vals, strings.TrimSpace(v))
			}
			r = requirement{key: f[0], op: f[1], values: vals}
		default:
			r = requirement{key: p, op: "exists"}
		}
		if r.key == "" {
			return nil, fmt.Errorf("unable to parse requirement: %q", p)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func (sel selector) matches(get func(string) (string, bool)) bool {
	for _, r := range sel {
		v, ok := get(r.key)
		switch r.op {
		case "=":
			if !ok || v != r.values[0] {
				return false
			}
		case "!=":
			if ok && v == r.values[0] {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!exists":
			if ok {
				return false
			}
		case "in", "notin":
			found := false
			for _, x := range r.values {
				if ok && v == x {
					found = true
				}
			}
			if found != (r.op == "in") {
				return false
			}
		}
	}
	return true
}

func labelsOf(o M) func(string) (string, bool) {
	l := getMap(getMap(o, "metadata"), "labels")
	return func(k string) (string, bool) {
		v, ok := l[k]
		s, _ := v.(string)
		return s, ok
	}
}

// parseFieldSelector accepts only =, == and != on the resource's fields.
func parseFieldSelector(rd *resourceDef, version, s string) (selector, *apiError) {
	var sel selector
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, p := range strings.Split(s, ",") {
		var r requirement
		switch {
		case strings.Contains(p, "!="):
			kv := strings.SplitN(p, "!=", 2)
			r = requirement{key: kv[0], op: "!=", values: []string{kv[1]}}
		case strings.Contains(p, "=="):
			kv := strings.SplitN(p, "==", 2)
			r = requirement{key: kv[0], op: "=", values: []string{kv[1]}}
		case strings.Contains(p, "="):
			kv := strings.SplitN(p, "=", 2)
			r = requirement{key: kv[0], op: "=", values: []string{kv[1]}}
		default:
			return nil, errBadRequest("invalid selector: '%s'; can't understand '%s'", s, p)
		}
		r.key = strings.TrimSpace(r.key)
		if _, ok := rd.fieldLabels[r.key]; !ok {
			if rd.namespaced && r.key == "metadata.namespace" {
				continue
			}
			gv := version
			if rd.group != "" {
				gv = rd.group + "/" + version
			}
			return nil, errBadRequest("field label not supported for %s, Kind=%s: %s", gv, rd.kind, r.key)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func fieldsOf(rd *resourceDef, o M) func(string) (string, bool) {
	return func(k string) (string, bool) {
		f := rd.fieldLabels[k]
		if f == nil {
			return "", false
		}
		return f(o), true
	}
}

// filter is what a list or watch selects.
type filter struct {
	ns     string
	labels selector
	fields selector
}

func (f *filter) match(rd *resourceDef, o M) bool {
	if o == nil {
		return false
	}
	if f.ns != "" && nsField(o) != f.ns {
		return false
	}
	return f.labels.matches(labelsOf(o)) && f.fields.matches(fieldsOf(rd, o))
}

func jsonInt(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

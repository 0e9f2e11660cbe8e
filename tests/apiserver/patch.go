package main

// Patches: JSON merge patch (RFC 7386; strategic-merge patches are applied
// as merge patches, enough for the objects a driver writes) and JSON patch
// (RFC 6902) with JSON pointers (RFC 6901).

import (
	"fmt"
	"strconv"
	"strings"
)

// mergePatch is RFC 7386.
func mergePatch(target interface{}, patch interface{}) interface{} {
	pm, ok := patch.(map[string]interface{})
	if !ok {
		return deepCopy(patch)
	}
	tm, ok := target.(map[string]interface{})
	if !ok {
		tm = M{}
	} else {
		tm = copyObj(tm)
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}

// jsonPatch is RFC 6902 (add, remove, replace, move, copy, test).
func jsonPatch(doc interface{}, ops []interface{}) (interface{}, error) {
	doc = deepCopy(doc)
	for i, o := range ops {
		op := asMap(o)
		if op == nil {
			return nil, fmt.Errorf("the patch operation %d is not an object", i)
		}
		kind := getString(op, "op")
		path := getString(op, "path")
		var err error
		switch kind {
		case "add", "replace":
			if kind == "replace" {
				if _, err = pointerGet(doc, path); err != nil {
					return nil, fmt.Errorf("replace operation does not apply: doc is missing key: %s", path)
				}
				doc, err = pointerRemove(doc, path)
				if err != nil {
					return nil, err
				}
			}
			doc, err = pointerAdd(doc, path, deepCopy(op["value"]))
		case "remove":
			doc, err = pointerRemove(doc, path)
		case "move", "copy":
			var v interface{}
			v, err = pointerGet(doc, getString(op, "from"))
			if err == nil && kind == "move" {
				doc, err = pointerRemove(doc, getString(op, "from"))
			}
			if err == nil {
				doc, err = pointerAdd(doc, path, deepCopy(v))
			}
		case "test":
			var v interface{}
			v, err = pointerGet(doc, path)
			if err == nil && !jsonEqual(v, op["value"]) {
				err = fmt.Errorf("testing value %s failed: test failed", path)
			}
		default:
			err = fmt.Errorf("Unexpected kind: %s", kind)
		}
		if err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func pointerTokens(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("JSON pointer %q must start with /", path)
	}
	toks := strings.Split(path[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// pointerParent walks to the container of the last token.
func pointerParent(doc interface{}, path string) (interface{}, string, []string, error) {
	toks, err := pointerTokens(path)
	if err != nil || len(toks) == 0 {
		return nil, "", nil, fmt.Errorf("invalid path %q", path)
	}
	cur := doc
	for _, t := range toks[:len(toks)-1] {
		switch c := cur.(type) {
		case map[string]interface{}:
			cur = c[t]
		case []interface{}:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, "", nil, fmt.Errorf("doc is missing path: %s", path)
			}
			cur = c[i]
		default:
			return nil, "", nil, fmt.Errorf("doc is missing path: %s", path)
		}
		if cur == nil {
			return nil, "", nil, fmt.Errorf("doc is missing path: %s", path)
		}
	}
	return cur, toks[len(toks)-1], toks, nil
}

func pointerGet(doc interface{}, path string) (interface{}, error) {
	if path == "" {
		return doc, nil
	}
	parent, last, _, err := pointerParent(doc, path)
	if err != nil {
		return nil, err
	}
	switch c := parent.(type) {
	case map[string]interface{}:
		v, ok := c[last]
		if !ok {
			return nil, fmt.Errorf("doc is missing key: %s", path)
		}
		return v, nil
	case []interface{}:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(c) {
			return nil, fmt.Errorf("doc is missing index: %s", path)
		}
		return c[i], nil
	}
	return nil, fmt.Errorf("doc is missing path: %s", path)
}

// setIn replaces the container at toks[:n] inside doc (lists are values).
func setIn(doc interface{}, toks []string, v interface{}) interface{} {
	if len(toks) == 0 {
		return v
	}
	switch c := doc.(type) {
	case map[string]interface{}:
		c[toks[0]] = setIn(c[toks[0]], toks[1:], v)
		return c
	case []interface{}:
		i, _ := strconv.Atoi(toks[0])
		c[i] = setIn(c[i], toks[1:], v)
		return c
	}
	return doc
}

func pointerAdd(doc interface{}, path string, v interface{}) (interface{}, error) {
	if path == "" {
		return v, nil
	}
	parent, last, toks, err := pointerParent(doc, path)
	if err != nil {
		return nil, err
	}
	switch c := parent.(type) {
	case map[string]interface{}:
		c[last] = v
		return doc, nil
	case []interface{}:
		var n []interface{}
		if last == "-" {
			n = append(append([]interface{}{}, c...), v)
		} else {
			i, err := strconv.Atoi(last)
			if err != nil || i < 0 || i > len(c) {
				return nil, fmt.Errorf("add operation does not apply: index out of bounds: %s", path)
			}
			n = append(append(append([]interface{}{}, c[:i]...), v), c[i:]...)
		}
		return setIn(doc, toks[:len(toks)-1], n), nil
	}
	return nil, fmt.Errorf("add operation does not apply: doc is missing path: %s", path)
}

func pointerRemove(doc interface{}, path string) (interface{}, error) {
	parent, last, toks, err := pointerParent(doc, path)
	if err != nil {
		return nil, err
	}
	switch c := parent.(type) {
	case map[string]interface{}:
		if _, ok := c[last]; !ok {
			return nil, fmt.Errorf("remove operation does not apply: doc is missing path: %s", path)
		}
		delete(c, last)
		return doc, nil
	case []interface{}:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(c) {
			return nil, fmt.Errorf("remove operation does not apply: doc is missing path: %s", path)
		}
		n := append(append([]interface{}{}, c[:i]...), c[i+1:]...)
		return setIn(doc, toks[:len(toks)-1], n), nil
	}
	return nil, fmt.Errorf("remove operation does not apply: doc is missing path: %s", path)
}

package main

// Binding conditions (KEP-5007): what the scheduler's PreBind waits for
// before it binds a pod whose claim holds such devices (the dynamicresources
// plugin, isClaimReadyForBinding and isClaimTimeout). For each allocation
// result that has bindingConditions, the first status.devices entry of the
// same driver, pool and device (its shareID is not compared) must hold a
// condition of each of those types with status True; one of its
// bindingFailureConditions True fails the binding; no entry is not ready
// yet. A claim not ready 600 s after its allocationTimestamp fails too.
// The `binding-state NS NAME` command answers it.

import (
	"strings"
	"time"
)

const bindingTimeout = 600 * time.Second

// bindingState is "ready", "pending" or "failed": with pending, the
// condition types still awaited (of every result); with failed, the failure
// condition and its reason and message ("timeout" when the time ran out).
func bindingState(obj M, now time.Time) M {
	status := getMap(obj, "status")
	alloc := getMap(status, "allocation")
	if alloc == nil {
		return M{"state": "pending", "waiting": []interface{}{}, "detail": "not allocated"}
	}
	results, _ := getMap(alloc, "devices")["results"].([]interface{})
	devices, _ := status["devices"].([]interface{})
	var waiting []interface{}
	for _, r := range results {
		rm := asMap(r)
		conds := condTypes(rm["bindingConditions"])
		if len(conds) == 0 {
			continue
		}
		entry := statusEntry(devices, rm)
		if entry == nil {
			for _, c := range conds {
				waiting = append(waiting, c)
			}
			continue
		}
		for _, f := range condTypes(rm["bindingFailureConditions"]) {
			if c := findCondition(entry, f); c != nil && getString(c, "status") == "True" {
				return M{"state": "failed", "condition": f, "reason": getString(c, "reason"),
					"message": getString(c, "message"), "detail": f + " " + getString(c, "reason")}
			}
		}
		for _, t := range conds {
			if c := findCondition(entry, t); c == nil || getString(c, "status") != "True" {
				waiting = append(waiting, t)
			}
		}
	}
	if len(waiting) == 0 {
		return M{"state": "ready", "waiting": []interface{}{}, "detail": ""}
	}
	if at, err := time.Parse(time.RFC3339, getString(alloc, "allocationTimestamp")); err == nil &&
		at.Add(bindingTimeout).Before(now) {
		return M{"state": "failed", "condition": "", "reason": "timeout",
			"message": "binding timeout", "detail": "timeout", "waiting": waiting}
	}
	names := make([]string, len(waiting))
	for i, w := range waiting {
		names[i] = w.(string)
	}
	return M{"state": "pending", "waiting": waiting, "detail": "waiting for " + strings.Join(names, ",")}
}

func condTypes(v interface{}) []string {
	l, _ := v.([]interface{})
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// statusEntry: the first status.devices entry of the result's driver, pool
// and device (shareID ignored, as the scheduler does).
func statusEntry(devices []interface{}, result M) M {
	for _, d := range devices {
		dm := asMap(d)
		if getString(dm, "driver") == getString(result, "driver") &&
			getString(dm, "pool") == getString(result, "pool") &&
			getString(dm, "device") == getString(result, "device") {
			return dm
		}
	}
	return nil
}

func findCondition(entry M, typ string) M {
	conds, _ := entry["conditions"].([]interface{})
	for _, c := range conds {
		if cm := asMap(c); getString(cm, "type") == typ {
			return cm
		}
	}
	return nil
}

// binding-state NS NAME
func (s *server) cmdBindingState(cmd *command) {
	if len(cmd.args) != 2 {
		cmd.fail("Usage", "binding-state NAMESPACE NAME")
		return
	}
	obj := s.store.get(resClaims, cmd.args[0], cmd.args[1])
	if obj == nil {
		cmd.fail("NotFound", "resourceclaims %q not found in %s", cmd.args[1], cmd.args[0])
		return
	}
	m := bindingState(obj, time.Now())
	m["ok"] = true
	cmd.reply(m)
}

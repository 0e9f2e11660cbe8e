package main

// The commands read from stdin, one per line, each answered by one "reply"
// event (an optional trailing "#ID" word is echoed as "id"), as the kubelet
// emulator does: they break things on purpose (down/up, fail, conflict,
// forbid, token-rotate, edit or delete a slice, expire watches) and set the
// scene (allocated claims, nodes). tests/pylib/kdptest/apiserver.py lists
// them.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

type command struct {
	name  string
	args  []string
	id    string
	start time.Time
}

func parseCommand(line string) *command {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	cmd := &command{name: f[0], start: time.Now()}
	if n := len(f); n > 1 && strings.HasPrefix(f[n-1], "#") {
		cmd.id = f[n-1][1:]
		f = f[:n-1]
	}
	cmd.args = f[1:]
	return cmd
}

func (cmd *command) reply(m M) {
	m["cmd"] = cmd.name
	if cmd.id != "" {
		m["id"] = cmd.id
	}
	m["elapsed_us"] = time.Since(cmd.start).Microseconds()
	emit("reply", m)
}

func (cmd *command) fail(code, format string, args ...interface{}) {
	cmd.reply(M{"ok": false, "code": code, "message": fmt.Sprintf(format, args...)})
}

func (s *server) dispatch(cmd *command) {
	switch cmd.name {
	case "down":
		s.down()
		emit("down", M{"addr": s.addr})
		cmd.reply(M{"ok": true})
	case "up":
		if err := s.listen(); err != nil {
			cmd.fail("Internal", "listen %s: %v", s.addr, err)
			return
		}
		emit("up", M{"addr": s.addr})
		cmd.reply(M{"ok": true, "url": s.url})
	case "fail":
		s.cmdFail(cmd)
	case "conflict":
		n, err := strconv.Atoi(argOr(cmd.args, 0, ""))
		if err != nil || n < 0 || len(cmd.args) != 1 {
			cmd.fail("Usage", "conflict N")
			return
		}
		s.mu.Lock()
		s.conflicts = n
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "delete-after-create":
		// The next N ResourceSlices created are deleted by "someone else"
		// right after: DELAY 0 before the create's answer goes out (the
		// DELETED event may reach a watch before the creator hears back),
		// else that long after it. A kubelet wiping the node's slices just
		// as a driver re-publishes them.
		n, err := strconv.Atoi(argOr(cmd.args, 0, ""))
		delay := time.Duration(0)
		if err == nil && len(cmd.args) == 2 {
			delay, err = time.ParseDuration(cmd.args[1])
		}
		if err != nil || n < 0 || len(cmd.args) < 1 || len(cmd.args) > 2 || delay < 0 {
			cmd.fail("Usage", "delete-after-create N [DELAY]")
			return
		}
		s.mu.Lock()
		s.delCreated = n
		s.delDelay = delay
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "forbid", "allow":
		if len(cmd.args) != 2 {
			cmd.fail("Usage", "%s VERB RESOURCE (either may be *)", cmd.name)
			return
		}
		s.mu.Lock()
		if cmd.name == "forbid" {
			s.forbid[cmd.args[0]+" "+cmd.args[1]] = true
		} else {
			delete(s.forbid, cmd.args[0]+" "+cmd.args[1])
		}
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "token-rotate":
		s.cmdTokenRotate(cmd)
	case "token-revoke":
		s.mu.Lock()
		s.token = ""
		s.oldTokens = map[string]time.Time{}
		s.mu.Unlock()
		cmd.reply(M{"ok": true})
	case "delete":
		if len(cmd.args) != 1 {
			cmd.fail("Usage", "delete NAME (a ResourceSlice)")
			return
		}
		last, aerr := s.store.remove(resSlices, "", cmd.args[0], nil)
		if aerr != nil {
			cmd.fail(aerr.reason, "%s", aerr.message)
			return
		}
		cmd.reply(M{"ok": true, "resourceVersion": getString(getMap(last, "metadata"), "resourceVersion")})
	case "edit":
		s.cmdEdit(cmd)
	case "expire-watches":
		gone := len(cmd.args) == 1 && cmd.args[0] == "410"
		if len(cmd.args) > 1 || (len(cmd.args) == 1 && !gone) {
			cmd.fail("Usage", "expire-watches [410]")
			return
		}
		n := s.expireWatches("expired", gone)
		cmd.reply(M{"ok": true, "watches": n})
	case "compact":
		rv := s.store.compact()
		cmd.reply(M{"ok": true, "resourceVersion": strconv.FormatUint(rv, 10)})
	case "create-claim":
		s.cmdCreateClaim(cmd)
	case "pad-claim":
		s.cmdPadClaim(cmd)
	case "binding-state":
		s.cmdBindingState(cmd)
	case "delete-claim":
		if len(cmd.args) != 2 {
			cmd.fail("Usage", "delete-claim NAMESPACE NAME")
			return
		}
		if _, aerr := s.store.remove(resClaims, cmd.args[0], cmd.args[1], nil); aerr != nil {
			cmd.fail(aerr.reason, "%s", aerr.message)
			return
		}
		cmd.reply(M{"ok": true})
	case "add-node", "delete-node":
		s.cmdNode(cmd)
	case "slices":
		objs, rv := s.store.list(resSlices, "")
		items := []interface{}{}
		for _, o := range objs {
			items = append(items, fromStored(resSlices, "v1", o))
		}
		cmd.reply(M{"ok": true, "slices": items, "resourceVersion": strconv.FormatUint(rv, 10)})
	case "claims":
		objs, _ := s.store.list(resClaims, "")
		items := []interface{}{}
		for _, o := range objs {
			items = append(items, fromStored(resClaims, "v1", o))
		}
		cmd.reply(M{"ok": true, "claims": items})
	case "stats":
		m := s.statsJSON()
		m["ok"] = true
		cmd.reply(m)
	default:
		cmd.fail("Usage", "unknown command %q", cmd.name)
	}
}

func argOr(a []string, i int, def string) string {
	if i < len(a) {
		return a[i]
	}
	return def
}

// fail N CODE [VERB RESOURCE]
func (s *server) cmdFail(cmd *command) {
	if len(cmd.args) != 2 && len(cmd.args) != 4 {
		cmd.fail("Usage", "fail N CODE [VERB RESOURCE] (VERB, RESOURCE may be *; RESOURCE \"discovery\" = discovery requests)")
		return
	}
	n, err1 := strconv.Atoi(cmd.args[0])
	code, err2 := strconv.Atoi(cmd.args[1])
	if err1 != nil || err2 != nil || n < 0 || code < 400 || code > 599 {
		cmd.fail("Usage", "fail N CODE: N >= 0, CODE 400..599")
		return
	}
	f := &faultRule{n: n, code: code, verb: "*", resource: "*"}
	if len(cmd.args) == 4 {
		f.verb, f.resource = cmd.args[2], cmd.args[3]
	}
	s.mu.Lock()
	if n > 0 {
		s.faults = append(s.faults, f)
	}
	s.mu.Unlock()
	cmd.reply(M{"ok": true})
}

func (s *server) cmdTokenRotate(cmd *command) {
	tok := newToken()
	s.mu.Lock()
	if s.token != "" {
		s.oldTokens[s.token] = time.Now().Add(fTokenGrace)
	}
	s.token = tok
	s.mu.Unlock()
	if err := s.writeFiles(tok); err != nil {
		cmd.fail("Internal", "writing the token: %v", err)
		return
	}
	cmd.reply(M{"ok": true, "grace_s": fTokenGrace.Seconds()})
}

// edit NAME [generation|drop-device|attribute]: someone else changes the
// slice's spec (default: its pool generation goes up by one).
func (s *server) cmdEdit(cmd *command) {
	if len(cmd.args) < 1 || len(cmd.args) > 2 {
		cmd.fail("Usage", "edit NAME [generation|drop-device|attribute]")
		return
	}
	how := argOr(cmd.args, 1, "generation")
	out, aerr := s.store.update(resSlices, "", cmd.args[0], false, func(cur M) (M, *apiError) {
		spec := ensureMap(cur, "spec")
		switch how {
		case "generation":
			pool := ensureMap(spec, "pool")
			g, _ := asInt(pool["generation"])
			pool["generation"] = jsonInt(g + 1)
		case "drop-device":
			devs, _ := spec["devices"].([]interface{})
			if len(devs) == 0 {
				return nil, errBadRequest("the slice has no device to drop")
			}
			spec["devices"] = devs[:len(devs)-1]
		case "attribute":
			devs, _ := spec["devices"].([]interface{})
			if len(devs) == 0 {
				return nil, errBadRequest("the slice has no device")
			}
			d := asMap(devs[0])
			ensureMap(d, "attributes")["edited"] = M{"string": "by-someone-else"}
		default:
			return nil, errBadRequest("edit: unknown change %q", how)
		}
		return cur, nil
	})
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	cmd.reply(M{"ok": true, "resourceVersion": getString(getMap(out, "metadata"), "resourceVersion")})
}

// create-claim NS NAME --driver D --pool P --device DEV[,DEV...] --request R
//
//	[--config JSON | --config-b64 BASE64] [--node N] [--class C] [--reserved]
//	[--binding-conditions A,B] [--binding-failure-conditions F,G] [--binds-to-node]
//
// The binding flags do what the scheduler does with a device's (KEP-5007):
// the lists copied into every result, allocationTimestamp set when there are
// binding conditions, and with --binds-to-node the node selector pinned to
// --node (else the last --pool).
// --driver, --pool and --request hold until changed, so one claim can hold
// devices of several drivers and requests: each --device adds results with
// the current ones; --config adds an opaque config for the current driver
// and request.
func (s *server) cmdCreateClaim(cmd *command) {
	usage := "create-claim NS NAME --driver D --pool P --request R [--admin-access] [--share-id ID] [--consumed NAME=QTY[,NAME=QTY...]] --device DEV[,DEV...] [--config JSON | --config-b64 BASE64] [--node N] [--class C] [--reserved] [--binding-conditions A,B] [--binding-failure-conditions F,G] [--binds-to-node]"
	if len(cmd.args) < 2 {
		cmd.fail("Usage", "%s", usage)
		return
	}
	ns, name := cmd.args[0], cmd.args[1]
	driver, pool, request, node, class := "", "", "", "", "kdp-test"
	reserved := false
	adminAccess := false
	bindsToNode := false
	var bindConds, bindFails []interface{}
	shareID := ""
	var consumed M
	capRequests := map[string]M{}
	var results, configs []interface{}
	requests := []string{}
	counts := map[string]int{}
	a := cmd.args[2:]
	for i := 0; i < len(a); i++ {
		flag := a[i]
		if flag == "--reserved" {
			reserved = true
			continue
		}
		if flag == "--admin-access" { // the devices given after it
			adminAccess = true
			continue
		}
		if flag == "--binds-to-node" {
			bindsToNode = true
			continue
		}
		if i+1 >= len(a) {
			cmd.fail("Usage", "%s needs a value; %s", flag, usage)
			return
		}
		v := a[i+1]
		i++
		switch flag {
		case "--driver":
			driver = v
		case "--pool":
			pool = v
		case "--request":
			request = v
		case "--node":
			node = v
		case "--class":
			class = v
		case "--binding-conditions", "--binding-failure-conditions":
			var l []interface{}
			for _, t := range strings.Split(v, ",") {
				if t != "" {
					l = append(l, t)
				}
			}
			if flag == "--binding-conditions" {
				bindConds = l
			} else {
				bindFails = l
			}
		case "--share-id": // the devices given after it (v1's shareID, a UID)
			shareID = v
		case "--consumed": // what the devices given after it consumed (shares)
			consumed = M{}
			for _, kv := range strings.Split(v, ",") {
				eq := strings.IndexByte(kv, '=')
				if eq <= 0 {
					cmd.fail("Usage", "--consumed wants NAME=QTY[,NAME=QTY...], not %q", v)
					return
				}
				consumed[kv[:eq]] = kv[eq+1:]
			}
		case "--device":
			if driver == "" || pool == "" || request == "" {
				cmd.fail("Usage", "--device needs --driver, --pool and --request first; %s", usage)
				return
			}
			if _, ok := counts[request]; !ok {
				requests = append(requests, request)
			}
			for _, d := range strings.Split(v, ",") {
				if d == "" {
					continue
				}
				res := M{"request": request, "driver": driver, "pool": pool, "device": d}
				if adminAccess {
					res["adminAccess"] = true
				}
				if shareID != "" {
					res["shareID"] = shareID
				}
				if consumed != nil {
					res["consumedCapacity"] = deepCopy(consumed)
					capRequests[request] = consumed
				}
				results = append(results, res)
				counts[request]++
			}
		case "--config", "--config-b64":
			if flag == "--config-b64" {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					cmd.fail("Usage", "--config-b64: %v", err)
					return
				}
				v = string(b)
			}
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			var params interface{}
			if err := dec.Decode(&params); err != nil {
				cmd.fail("Usage", "--config: not JSON: %v", err)
				return
			}
			if driver == "" {
				cmd.fail("Usage", "--config needs --driver first")
				return
			}
			c := M{"source": "FromClaim", "opaque": M{"driver": driver, "parameters": params}}
			if request != "" {
				c["requests"] = []interface{}{request}
			}
			configs = append(configs, c)
		default:
			cmd.fail("Usage", "unknown option %q; %s", flag, usage)
			return
		}
	}
	if len(results) == 0 {
		cmd.fail("Usage", "no --device; %s", usage)
		return
	}
	for _, r := range results {
		if len(bindConds) > 0 {
			asMap(r)["bindingConditions"] = deepCopy(bindConds)
		}
		if len(bindFails) > 0 {
			asMap(r)["bindingFailureConditions"] = deepCopy(bindFails)
		}
	}
	var reqs []interface{}
	for _, r := range requests {
		ex := M{"deviceClassName": class, "allocationMode": "ExactCount", "count": jsonInt(int64(counts[r]))}
		if c := capRequests[r]; c != nil {
			ex["capacity"] = M{"requests": deepCopy(c)}
		}
		reqs = append(reqs, M{"name": r, "exactly": ex})
	}
	alloc := M{"devices": M{"results": results}}
	if len(configs) > 0 {
		getMap(alloc, "devices")["config"] = configs
	}
	if len(bindConds) > 0 {
		alloc["allocationTimestamp"] = nowStamp()
	}
	if bindsToNode && node == "" {
		node = pool
	}
	if node != "" {
		alloc["nodeSelector"] = M{"nodeSelectorTerms": []interface{}{M{"matchFields": []interface{}{
			M{"key": "metadata.name", "operator": "In", "values": []interface{}{node}}}}}}
	}
	status := M{"allocation": alloc}
	if reserved {
		status["reservedFor"] = []interface{}{M{"resource": "pods", "name": name + "-pod", "uid": newUID()}}
	}
	obj := M{"metadata": M{"name": name, "namespace": ns}, "spec": M{"devices": M{"requests": reqs}}}
	out, aerr := s.store.create(resClaims, obj)
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	out, aerr = s.store.update(resClaims, ns, name, true, func(cur M) (M, *apiError) {
		cur["status"] = status
		return cur, nil
	})
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	md := getMap(out, "metadata")
	cmd.reply(M{"ok": true, "uid": getString(md, "uid"), "resourceVersion": getString(md, "resourceVersion"),
		"claim": fromStored(resClaims, "v1", out)})
}

// add-node NAME / delete-node NAME (its ResourceSlices owned by it go too,
// as the garbage collector does).
func (s *server) cmdNode(cmd *command) {
	if len(cmd.args) != 1 {
		cmd.fail("Usage", "%s NAME", cmd.name)
		return
	}
	name := cmd.args[0]
	if cmd.name == "add-node" {
		if err := s.createNode(name); err != nil {
			cmd.fail("AlreadyExists", "%v", err)
			return
		}
		cmd.reply(M{"ok": true})
		return
	}
	node, aerr := s.store.remove(resNodes, "", name, nil)
	if aerr != nil {
		cmd.fail(aerr.reason, "%s", aerr.message)
		return
	}
	uid := getString(getMap(node, "metadata"), "uid")
	collected := []string{}
	st := s.store
	st.mu.Lock()
	for _, o := range st.listLocked(resSlices, "") {
		refs, _ := getMap(o, "metadata")["ownerReferences"].([]interface{})
		for _, r := range refs {
			if getString(asMap(r), "uid") == uid {
				if _, aerr := st.removeLocked(resSlices, "", nameField(o), nil); aerr == nil {
					collected = append(collected, nameField(o))
				}
				break
			}
		}
	}
	st.mu.Unlock()
	cmd.reply(M{"ok": true, "collected": collected})
}

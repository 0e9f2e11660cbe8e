// The DRA commands of kdp-test-kubelet (see dra.go for the model):
//
//	dra-prepare DRIVER NS/NAME/UID [NS/NAME/UID ...] [pod=NS/NAME [container=C1,C2]]
//	dra-unprepare DRIVER NS/NAME/UID [NS/NAME/UID ...]
//	dra-state
//	dra-health DRIVER
//
// dra-prepare and dra-unprepare make ONE NodePrepareResources or
// NodeUnprepareResources call with all the claims, to the instance the
// kubelet would use, on the chosen service's gRPC path
// (/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/... or v1beta1), with the
// per-call timeout (-dra-call-timeout, the kubelet's 45 s). With pod=, the
// prepared claims are the pod's (its containers, default "c0", reference
// them): PodResources then lists them in DynamicResources.
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	drav1beta1 "kdptest/drav1beta1pb"
	drav1 "kdptest/drav1pb"
	prpb "kdptest/podrespb"
)

type draClaim struct{ ns, name, uid string }

func parseDRAClaims(args []string) ([]draClaim, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no claim (want NS/NAME/UID ...)")
	}
	out := make([]draClaim, 0, len(args))
	for _, a := range args {
		f := strings.SplitN(a, "/", 3)
		if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
			return nil, fmt.Errorf("bad claim %q (want NS/NAME/UID)", a)
		}
		out = append(out, draClaim{f[0], f[1], f[2]})
	}
	return out, nil
}

// draTarget parses "DRIVER claims..." and finds the instance to call.
func (k *kubelet) draTarget(cmd *command) (*draInstance, []draClaim) {
	if k.dra == nil {
		cmd.fail("Usage", "%s needs the DRA side (-watcher or -plugins-registry, without -dra=false)", cmd.name)
		return nil, nil
	}
	if len(cmd.args) < 2 {
		cmd.fail("Usage", "%s DRIVER NS/NAME/UID [NS/NAME/UID ...]", cmd.name)
		return nil, nil
	}
	claims, err := parseDRAClaims(cmd.args[1:])
	if err != nil {
		cmd.fail("Usage", "%s: %v", cmd.name, err)
		return nil, nil
	}
	driver := cmd.args[0]
	in := k.dra.pick(driver)
	if in == nil {
		// The kubelet's GetPlugin error.
		cmd.fail("NotRegistered", "DRA driver %s is not registered", driver)
		return nil, nil
	}
	return in, claims
}

func draCallCtx() (context.Context, context.CancelFunc) {
	if fDRACallTimeout > 0 {
		return context.WithTimeout(context.Background(), fDRACallTimeout)
	}
	return context.WithCancel(context.Background())
}

func draDevice(requestNames []string, pool, device string, cdi []string, shareID string) M {
	if requestNames == nil {
		requestNames = []string{}
	}
	if cdi == nil {
		cdi = []string{}
	}
	return M{"request_names": requestNames, "pool": pool, "device": device, "cdi_device_ids": cdi,
		"share_id": shareID}
}

// draResult is one claim's entry in a response, in a version-neutral form.
type draResult struct {
	devices []M
	err     string
}

// draReply builds the reply: every requested claim in request order with
// its result ("missing" when the response has no entry for it: the kubelet
// retries those), plus the entries for claims nobody asked for.
func (k *kubelet) draReply(cmd *command, in *draInstance, method string, claims []draClaim,
	results map[string]draResult, err error, okWord string) {
	m := M{"driver": in.driver, "endpoint": in.endpoint, "service": in.service, "seq": in.seq,
		"method": "/k8s.io.kubelet.pkg.apis.dra." + in.service + "/" + method}
	if err != nil {
		st := status.Convert(err)
		m["ok"] = false
		m["code"] = st.Code().String()
		m["message"] = st.Message()
		cmd.reply(m)
		return
	}
	list := []M{}
	missing, failed := []string{}, []string{}
	asked := map[string]bool{}
	for _, c := range claims {
		asked[c.uid] = true
		e := M{"namespace": c.ns, "name": c.name, "uid": c.uid, "error": ""}
		r, ok := results[c.uid]
		switch {
		case !ok:
			e["result"] = "missing"
			missing = append(missing, c.uid)
		case r.err != "":
			e["result"] = "error"
			e["error"] = r.err
			failed = append(failed, c.uid)
		default:
			e["result"] = okWord
		}
		if r.devices != nil {
			e["devices"] = r.devices
		} else if method == "NodePrepareResources" {
			e["devices"] = []M{}
		}
		list = append(list, e)
	}
	unexpected := []string{}
	for uid := range results {
		if !asked[uid] {
			unexpected = append(unexpected, uid)
		}
	}
	sort.Strings(unexpected)
	m["ok"] = true
	m["claims"] = list
	m["missing"] = missing
	m["failed"] = failed
	m["unexpected"] = unexpected
	cmd.reply(m)
}

func (k *kubelet) doDRAPrepare(cmd *command) {
	rest, ns, pod, ctrs, perr := parsePodArgs(cmd.args)
	if perr != nil || (pod != "" && k.pr == nil) {
		cmd.fail("Usage", "dra-prepare: pod=NS/NAME [container=C,...] (needs -kubelet-root or -pod-resources)")
		return
	}
	cmd.args = rest
	if len(ctrs) == 0 {
		ctrs = []string{"c0"}
	}
	in, claims := k.draTarget(cmd)
	if in == nil {
		return
	}

	ctx, cancel := draCallCtx()
	defer cancel()
	results := map[string]draResult{}
	var err error
	switch in.service {
	case draServiceV1:
		req := &drav1.NodePrepareResourcesRequest{}
		for _, c := range claims {
			req.Claims = append(req.Claims, &drav1.Claim{Namespace: c.ns, Name: c.name, Uid: c.uid})
		}
		var resp *drav1.NodePrepareResourcesResponse
		resp, err = drav1.NewDRAPluginClient(in.conn).NodePrepareResources(ctx, req)
		for uid, r := range resp.GetClaims() {
			devs := []M{}
			for _, d := range r.GetDevices() {
				devs = append(devs, draDevice(d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, d.ShareId))
			}
			results[uid] = draResult{devices: devs, err: r.GetError()}
		}
	case draServiceV1beta1:
		req := &drav1beta1.NodePrepareResourcesRequest{}
		for _, c := range claims {
			req.Claims = append(req.Claims, &drav1beta1.Claim{Namespace: c.ns, Name: c.name, Uid: c.uid})
		}
		var resp *drav1beta1.NodePrepareResourcesResponse
		resp, err = drav1beta1.NewDRAPluginClient(in.conn).NodePrepareResources(ctx, req)
		for uid, r := range resp.GetClaims() {
			devs := []M{}
			for _, d := range r.GetDevices() {
				devs = append(devs, draDevice(d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, ""))
			}
			results[uid] = draResult{devices: devs, err: r.GetError()}
		}
	default:
		cmd.fail("Internal", "internal error: unsupported chosen service: %q", in.service)
		return
	}
	if pod != "" && err == nil {
		k.draClaimsToPod(in.driver, claims, results, ns, pod, ctrs)
	}
	k.draReply(cmd, in, "NodePrepareResources", claims, results, err, "prepared")
}

// draClaimsToPod: the claims a prepare prepared, as the kubelet lists
// them for a pod's containers (DynamicResource: the claim, each device with
// its driver, pool, name, CDI IDs and share ID).
func (k *kubelet) draClaimsToPod(driver string, claims []draClaim, results map[string]draResult,
	ns, pod string, ctrs []string) {
	for _, c := range claims {
		r, ok := results[c.uid]
		if !ok || r.err != "" {
			continue
		}
		dr := &prpb.DynamicResource{ClaimName: c.name, ClaimNamespace: c.ns}
		for _, d := range r.devices {
			cr := &prpb.ClaimResource{DriverName: driver, PoolName: d["pool"].(string),
				DeviceName: d["device"].(string), ShareId: d["share_id"].(string)}
			for _, id := range d["cdi_device_ids"].([]string) {
				cr.CdiDevices = append(cr.CdiDevices, &prpb.CDIDevice{Name: id})
			}
			dr.ClaimResources = append(dr.ClaimResources, cr)
		}
		k.pr.addClaim(ns, pod, ctrs, dr)
	}
}

func (k *kubelet) doDRAUnprepare(cmd *command) {
	in, claims := k.draTarget(cmd)
	if in == nil {
		return
	}
	ctx, cancel := draCallCtx()
	defer cancel()
	results := map[string]draResult{}
	var err error
	switch in.service {
	case draServiceV1:
		req := &drav1.NodeUnprepareResourcesRequest{}
		for _, c := range claims {
			req.Claims = append(req.Claims, &drav1.Claim{Namespace: c.ns, Name: c.name, Uid: c.uid})
		}
		var resp *drav1.NodeUnprepareResourcesResponse
		resp, err = drav1.NewDRAPluginClient(in.conn).NodeUnprepareResources(ctx, req)
		for uid, r := range resp.GetClaims() {
			results[uid] = draResult{err: r.GetError()}
		}
	case draServiceV1beta1:
		req := &drav1beta1.NodeUnprepareResourcesRequest{}
		for _, c := range claims {
			req.Claims = append(req.Claims, &drav1beta1.Claim{Namespace: c.ns, Name: c.name, Uid: c.uid})
		}
		var resp *drav1beta1.NodeUnprepareResourcesResponse
		resp, err = drav1beta1.NewDRAPluginClient(in.conn).NodeUnprepareResources(ctx, req)
		for uid, r := range resp.GetClaims() {
			results[uid] = draResult{err: r.GetError()}
		}
	default:
		cmd.fail("Internal", "internal error: unsupported chosen service: %q", in.service)
		return
	}
	k.draReply(cmd, in, "NodeUnprepareResources", claims, results, err, "unprepared")
}

func (k *kubelet) doDRAState(cmd *command) {
	if k.dra == nil {
		cmd.fail("Usage", "dra-state needs the DRA side (-watcher or -plugins-registry, without -dra=false)")
		return
	}
	cmd.reply(M{"ok": true, "drivers": k.dra.state(), "supported": draSupported(),
		"health": fDRAHealth})
}

func (k *kubelet) doDRAHealth(cmd *command) {
	if k.dra == nil {
		cmd.fail("Usage", "dra-health needs the DRA side (-watcher or -plugins-registry, without -dra=false)")
		return
	}
	if len(cmd.args) != 1 {
		cmd.fail("Usage", "dra-health DRIVER")
		return
	}
	m := k.dra
	m.mu.Lock()
	h := m.health[cmd.args[0]]
	r := M{"ok": true, "driver": cmd.args[0], "received": h != nil, "devices": []M{},
		"endpoint": nil, "updated_ns": nil}
	if h != nil {
		r["devices"] = h.devices
		r["endpoint"] = h.endpoint
		r["updated_ns"] = h.at
		if fDRAHealthTTL > 0 && time.Now().UnixNano()-h.at > fDRAHealthTTL.Nanoseconds() {
			stale := make([]M, 0, len(h.devices))
			for _, d := range h.devices {
				c := M{}
				for k, v := range d {
					c[k] = v
				}
				c["health"] = "Unknown"
				stale = append(stale, c)
			}
			r["devices"] = stale
			r["stale"] = true
		}
	}
	m.mu.Unlock()
	cmd.reply(r)
}

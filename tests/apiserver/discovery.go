package main

// Discovery: /version, /api, /api/v1, /apis (APIGroupList),
// /apis/resource.k8s.io (APIGroup) and /apis/resource.k8s.io/<version>
// (APIResourceList). kubectl and client-go ask /api and /apis for the
// aggregated form first (Accept:
// application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
// ...;v=v2beta1;..., application/json): it is answered (an
// APIGroupDiscoveryList, apidiscovery.k8s.io/v2, with that Content-Type) as
// a 1.34 API server does, unless -aggregated-discovery=false, and then the
// clients fall back to the per-version documents because the answer's
// Content-Type is plain application/json.

import (
	"net/http"
	"runtime"
	"strings"
)

func groupJSON(versions []string) M {
	var vs []M
	for _, v := range versions {
		vs = append(vs, M{"groupVersion": groupDRA + "/" + v, "version": v})
	}
	return M{"name": groupDRA, "versions": vs, "preferredVersion": vs[0]}
}

func resourceJSON(rd *resourceDef) []M {
	r := M{"name": rd.name, "singularName": rd.singular, "namespaced": rd.namespaced, "kind": rd.kind,
		"verbs": rd.verbs}
	if len(rd.shortNames) > 0 {
		r["shortNames"] = rd.shortNames
	}
	out := []M{r}
	if rd.hasStatus {
		out = append(out, M{"name": rd.name + "/status", "singularName": "", "namespaced": rd.namespaced,
			"kind": rd.kind, "verbs": []string{"get", "patch", "update"}})
	}
	return out
}

const aggregatedV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		p := strings.ReplaceAll(strings.TrimSpace(part), " ", "")
		if strings.Contains(p, "g=apidiscovery.k8s.io") && strings.Contains(p, "v=v2;") &&
			strings.Contains(p, "as=APIGroupDiscoveryList") && strings.HasPrefix(p, "application/json") {
			return true
		}
	}
	return false
}

// aggregatedResource is one APIResourceDiscovery.
func aggregatedResource(rd *resourceDef, version string) M {
	scope := "Cluster"
	if rd.namespaced {
		scope = "Namespaced"
	}
	kind := M{"group": rd.group, "version": version, "kind": rd.kind}
	r := M{"resource": rd.name, "responseKind": kind, "scope": scope, "singularResource": rd.singular,
		"verbs": rd.verbs}
	if len(rd.shortNames) > 0 {
		r["shortNames"] = rd.shortNames
	}
	if rd.hasStatus {
		r["subresources"] = []M{{"subresource": "status", "responseKind": kind, "verbs": []string{"get", "patch", "update"}}}
	}
	return r
}

func (s *server) aggregated(core bool) M {
	var item M
	if core {
		item = M{"metadata": M{"creationTimestamp": nil}, "versions": []M{{"version": "v1",
			"resources": []M{aggregatedResource(resNodes, "v1")}, "freshness": "Current"}}}
	} else {
		var vs []M
		for _, v := range s.versions {
			var res []M
			for _, rd := range draResources {
				res = append(res, aggregatedResource(rd, v))
			}
			vs = append(vs, M{"version": v, "resources": res, "freshness": "Current"})
		}
		item = M{"metadata": M{"name": groupDRA, "creationTimestamp": nil}, "versions": vs}
	}
	return M{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": M{},
		"items": []M{item}}
}

func (s *server) serveDiscovery(w http.ResponseWriter, r *http.Request, rq *request) {
	p := strings.Trim(r.URL.Path, "/")
	if (p == "api" || p == "apis") && fAggregated && wantsAggregated(r) {
		w.Header().Set("Vary", "Accept")
		rq.writeJSON(w, 200, s.aggregated(p == "api"), aggregatedV2)
		return
	}
	switch {
	case p == "version":
		minor := strings.Split(strings.TrimPrefix(fServerVersion, "v"), ".")
		m := M{"major": "1", "minor": "34", "gitVersion": fServerVersion, "gitCommit": "kdp-test-apiserver",
			"gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z", "goVersion": runtime.Version(),
			"compiler": "gc", "platform": runtime.GOOS + "/" + runtime.GOARCH}
		if len(minor) >= 2 {
			m["major"], m["minor"] = minor[0], minor[1]
		}
		rq.writeJSON(w, 200, m, "")
	case p == "api":
		rq.writeJSON(w, 200, M{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []M{{"clientCIDR": "0.0.0.0/0", "serverAddress": s.addr}}}, "")
	case p == "api/v1":
		rq.writeJSON(w, 200, M{"kind": "APIResourceList", "groupVersion": "v1", "resources": resourceJSON(resNodes)}, "")
	case p == "apis":
		g := groupJSON(s.versions)
		g["serverAddressByClientCIDRs"] = nil
		delete(g, "serverAddressByClientCIDRs")
		rq.writeJSON(w, 200, M{"kind": "APIGroupList", "apiVersion": "v1", "groups": []M{g}}, "")
	case p == "apis/"+groupDRA:
		g := groupJSON(s.versions)
		g["kind"], g["apiVersion"] = "APIGroup", "v1"
		rq.writeJSON(w, 200, g, "")
	default:
		var res []M
		for _, rd := range draResources {
			res = append(res, resourceJSON(rd)...)
		}
		rq.writeJSON(w, 200, M{"kind": "APIResourceList", "apiVersion": "v1",
			"groupVersion": groupDRA + "/" + rq.version, "resources": res}, "")
	}
}

package main

// Discovery as the API server answers it without aggregation: /version,
// /api, /api/v1, /apis (APIGroupList), /apis/resource.k8s.io (APIGroup)
// and /apis/resource.k8s.io/<version> (APIResourceList). kubectl and
// client-go ask for the aggregated form first (Accept:
// application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
// ..., application/json) and fall back to these documents when the
// answer's Content-Type is plain application/json.

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

func (s *server) serveDiscovery(w http.ResponseWriter, r *http.Request, rq *request) {
	p := strings.Trim(r.URL.Path, "/")
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

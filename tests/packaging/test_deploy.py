#!/usr/bin/python3
"""Checks deploy/: the Kubernetes manifests and the systemd unit, without a
cluster and without systemd running.

    tests/packaging/test_deploy.py          (python3-yaml, python3-kubernetes)

Manifests (deploy/base, deploy/overlays/*):
- every YAML file under deploy/ parses; kustomizations name files that exist;
- each overlay is rendered (base + namespace + strategic-merge patches, the
  subset of kustomize these files use) and, when kubectl is installed, compared
  with `kubectl kustomize` (kustomize runs offline; `kubectl create
  --dry-run=client` does not: it needs an API server for its schema);
- schema: each object goes through the Kubernetes Python client's models
  (API 1.22): unknown or misspelled fields do not survive the round trip;
- the DaemonSet: apps/v1, selector = template labels, system-node-critical,
  tolerates every taint, uid 0 without privilege, capabilities or privilege
  escalation, read-only root, requests <= limits; the device-plugin hostPath
  is the one documented for that overlay and is mounted at kdp's default
  directory (read from include/kdp.h); every mount has its volume;
- the image is the one its Dockerfile builds (kdp-gopher:VERSION from
  deploy/Dockerfile; kdp-gopher-metrics:VERSION from deploy/Dockerfile.metrics
  for overlays/metrics; VERSION = the project's), runs that Dockerfile's default
  binary, an executable of the tree, and every --flag in args is one that
  binary parses;
- the metrics overlay: KDP_METRICS_ADDRESS (or --metrics-address) is :PORT,
  the port the image's ENV uses, a containerPort named metrics; liveness and
  readiness probes GET /healthz on it, liveness tolerating at least a minute
  of failures; prometheus.io/scrape and /port annotations; the overlays with
  the static image ask for no endpoint (it would fail their start).
- deploy/dra (the DRA driver, docs/dra.md): a ServiceAccount, the ClusterRole
  the driver needs (resourceslices list/watch/create/update/delete, resourceclaims get and
  status update, nodes get) bound to it, the DaemonSet (the hardening above,
  the image of deploy/Dockerfile.dra, maxSurge 1, NODE_NAME and POD_UID from
  the downward API, plugins_registry, plugins and /var/run/cdi mounted
  writable (of the plugins directory, only the driver's own folder), the
  token mounted), and a DeviceClass selecting the driver named
  in the args, with extendedResourceName (KEP-5004); deploy/generic-dra the
  same for kdp-generic (the driver and resource from its ConfigMap, only the
  driver's own plugins folder mounted);
systemd (deploy/systemd/*.service): `systemd-analyze verify` prints nothing
(its exit status ignores unknown keys), the options this repository promises
are there, and the writable path is the directory the plugin serves.
"""
import configparser
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(SRC, "deploy")
# The host directory each kustomization must mount (docs/deploy.md explains).
EXPECTED_HOST_DIR = {
    "base": "/var/lib/kubelet/device-plugins",
    "overlays/k3s": "/var/lib/kubelet/device-plugins",
    "overlays/microk8s": "/var/lib/kubelet/device-plugins",
    "overlays/watcher": "/var/lib/kubelet/device-plugins",
    "overlays/rolling-update": "/var/lib/kubelet/device-plugins",
    "overlays/pod-identity": "/var/lib/kubelet/device-plugins",
    "overlays/metrics": "/var/lib/kubelet/device-plugins",
}
# The image each kustomization runs, and the Dockerfile that builds it (the
# others: kdp-gopher from deploy/Dockerfile).
IMAGES = {"overlays/metrics": ("kdp-gopher-metrics", "Dockerfile.metrics")}
DEFAULT_IMAGE = ("kdp-gopher", "Dockerfile")

failures = []


def log(*a):
    print(*a, flush=True)


def check(cond, what):
    log(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def default_plugin_dir():
    """kdp's default directory, from kdp_config's comment in include/kdp.h."""
    text = open(os.path.join(SRC, "include", "kdp.h")).read()
    m = re.search(r"NULL = \$KDP_DEVICE_PLUGIN_DIR, else (/[\w/.-]+?)\.?\s", text)
    assert m, "include/kdp.h no longer states the default device-plugin directory"
    return m.group(1)


def dockerfile_binary(name="Dockerfile"):
    for line in open(os.path.join(DEPLOY, name)):
        m = re.match(r"ARG BINARY=(\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("deploy/%s has no ARG BINARY=default" % name)


def dockerfile_env(name, var):
    """The value the final stage's ENV gives var (None without one)."""
    value = None
    for line in open(os.path.join(DEPLOY, name)):
        if re.match(r"FROM\s", line):
            value = None  # a later stage: only the last one's ENV counts
        m = re.match(r"ENV\s+%s[=\s]\s*\"?([^\"\s]*)" % re.escape(var), line)
        if m:
            value = m.group(1)
    return value


def project_version():
    m = re.search(r"project\(kdp VERSION (\S+)", open(os.path.join(SRC, "CMakeLists.txt")).read())
    assert m, "CMakeLists.txt: no project(kdp VERSION ...)"
    return m.group(1).rstrip(")")


def binary_sources(name):
    """The C sources of executable `name` in the tree, from its add_executable."""
    for cm in glob.glob(os.path.join(SRC, "examples", "CMakeLists.txt")) + \
            glob.glob(os.path.join(SRC, "tools", "*", "CMakeLists.txt")):
        text = open(cm).read()
        d = os.path.dirname(cm)
        m = re.search(r"add_executable\(\s*%s\s+([^)]*)\)" % re.escape(name), text)
        if m:
            # ${VAR}: a set(VAR ...) of the same file
            words = re.sub(r"\$\{(\w+)\}", lambda v: " ".join(re.findall(
                r"set\(\s*%s\s+([^)]*)\)" % v.group(1), text)), m.group(1)).split()
            return [os.path.join(d, s) for s in words if s.endswith(".c")]
        # examples/: foreach(ex IN ITEMS a b c) add_executable(kdp-example-${ex} ${ex}.c)
        m = re.search(r"foreach\(ex IN ITEMS ([^)]*)\)", text)
        if m and name.startswith("kdp-example-") and name[12:] in m.group(1).split():
            return [os.path.join(d, name[12:] + ".c")]
    return []


def flags_of(sources):
    flags = set()
    for s in sources:
        flags |= set(re.findall(r'"(--[a-z][a-z0-9-]*)"', open(s).read()))
    return flags


# --- a small kustomize: what deploy/ uses ---------------------------------

def smp(base, patch):
    """Strategic merge patch, enough for Kubernetes objects: dicts merge, lists
    of dicts with a "name" merge by name (an item the base lacks goes first,
    as kustomize puts it), other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = smp(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and \
            all(isinstance(x, dict) and "name" in x for x in base + patch):
        out = [copy.deepcopy(x) for x in base]
        new = []
        for p in patch:
            for i, b in enumerate(out):
                if b["name"] == p["name"]:
                    out[i] = smp(b, p)
                    break
            else:
                new.append(copy.deepcopy(p))
        return new + out
    return copy.deepcopy(patch)


# Kinds kustomize's namespace leaves alone.
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "DeviceClass", "Namespace"}


def render(kdir):
    kpath = os.path.join(kdir, "kustomization.yaml")
    k = load_all(kpath)[0]
    rel = os.path.relpath(kdir, DEPLOY)
    check(k.get("apiVersion") == "kustomize.config.k8s.io/v1beta1" and
          k.get("kind") == "Kustomization", "%s: a Kustomization" % rel)
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(kdir, r))
        check(os.path.exists(p), "%s: resource %s exists" % (rel, r))
        objs += render(p) if os.path.isdir(p) else load_all(p)
    if "namespace" in k:
        for o in objs:
            if o["kind"] not in CLUSTER_SCOPED:
                o.setdefault("metadata", {})["namespace"] = k["namespace"]
    for patch in k.get("patches", []):
        p = os.path.join(kdir, patch["path"])
        check(os.path.exists(p), "%s: patch %s exists" % (rel, patch["path"]))
        for pd in load_all(p):
            hits = [i for i, o in enumerate(objs) if o["kind"] == pd["kind"] and
                    o["metadata"]["name"] == pd["metadata"]["name"]]
            check(len(hits) == 1, "%s: patch %s applies to one object" % (rel, patch["path"]))
            for i in hits:
                objs[i] = smp(objs[i], pd)
    return objs


# --- checks ------------------------------------------------------------------

def schema_round_trip(obj, where):
    try:
        from kubernetes.client import ApiClient
    except ImportError:
        check(False, "%s: schema check needs python3-kubernetes (scripts/install-deps.sh)" % where)
        return
    api = ApiClient()

    class Resp:
        data = json.dumps(obj)

    model = "V1" + obj["kind"] if obj["apiVersion"] in (
        "v1", "apps/v1", "rbac.authorization.k8s.io/v1") else None
    if model is None:
        log("skip: no model for %s %s" % (obj["apiVersion"], obj["kind"]))
        return
    back = api.sanitize_for_serialization(api.deserialize(Resp(), model))
    lost = []

    def walk(a, b, path):
        if isinstance(a, dict):
            for k, v in a.items():
                if not isinstance(b, dict) or k not in b:
                    lost.append(path + "." + k)
                else:
                    walk(v, b[k], path + "." + k)
        elif isinstance(a, list):
            for i, (x, y) in enumerate(zip(a, b if isinstance(b, list) else [])):
                walk(x, y, "%s[%d]" % (path, i))
    walk(obj, back, "")
    check(not lost, "%s: every field is known to the %s schema%s" %
          (where, model, (" (unknown: %s)" % ", ".join(lost)) if lost else ""))


def mem_mi(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    assert m, "unexpected memory quantity %r" % q
    return int(m.group(1)) * {"Ki": 1 / 1024.0, "Mi": 1, "Gi": 1024, None: 1 / 1048576.0}[
        m.group(2)]


def cpu_m(q):
    q = str(q)
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def check_daemonset(ds, where, host_dir, plugin_dir):
    check(ds["apiVersion"] == "apps/v1", "%s: apps/v1 DaemonSet" % where)
    spec, tmpl = ds["spec"], ds["spec"]["template"]
    labels = tmpl["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
          "%s: the selector matches the pod template's labels" % where)
    pod = tmpl["spec"]
    check(pod.get("priorityClassName") == "system-node-critical",
          "%s: priorityClassName system-node-critical" % where)
    check({"operator": "Exists"} in pod.get("tolerations", []),
          "%s: tolerates every taint (operator Exists, no key)" % where)
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        check(not pod.get(k), "%s: no %s" % (where, k))
    check(pod.get("automountServiceAccountToken") is False, "%s: no service-account token" % where)
    psc = pod.get("securityContext", {})
    check(psc.get("runAsUser") == 0, "%s: runs as uid 0 (owner of the kubelet's dir)" % where)
    volumes = {v["name"]: v for v in pod["volumes"]}
    check(len(pod["containers"]) == 1, "%s: one container" % where)
    c = pod["containers"][0]
    sc = c.get("securityContext", {})
    check(sc.get("privileged") is False, "%s: not privileged" % where)
    check(sc.get("allowPrivilegeEscalation") is False, "%s: no privilege escalation" % where)
    check(sc.get("readOnlyRootFilesystem") is True, "%s: read-only root file system" % where)
    caps = sc.get("capabilities", {})
    check(caps.get("drop") == ["ALL"] and not caps.get("add"),
          "%s: every capability dropped, none added" % where)
    res = c.get("resources", {})
    req, lim = res.get("requests", {}), res.get("limits", {})
    check("memory" in req and "cpu" in req and "memory" in lim,
          "%s: cpu and memory requests, a memory limit" % where)
    if "memory" in req and "memory" in lim:
        check(2 <= mem_mi(req["memory"]) <= mem_mi(lim["memory"]),
              "%s: memory request %s >= the ~2 MiB idle RSS and <= the limit %s"
              % (where, req["memory"], lim["memory"]))
        check(cpu_m(req["cpu"]) >= 1, "%s: cpu request %s" % (where, req["cpu"]))
    for m in c.get("volumeMounts", []):
        check(m["name"] in volumes, "%s: mount %s has its volume" % (where, m["name"]))
    mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"] == plugin_dir]
    check(len(mounts) == 1 and not mounts[0].get("readOnly"),
          "%s: a writable mount at kdp's default directory %s" % (where, plugin_dir))
    if mounts:
        v = volumes.get(mounts[0]["name"], {})
        check(v.get("hostPath", {}).get("path") == host_dir,
              "%s: ... from hostPath %s (got %s)" % (where, host_dir,
                                                      v.get("hostPath", {}).get("path")))
        check(v.get("hostPath", {}).get("type") == "Directory",
              "%s: hostPath type Directory (never created where no kubelet watches)" % where)
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if "KDP_DEVICE_PLUGIN_DIR" in env:
        check(env["KDP_DEVICE_PLUGIN_DIR"] == plugin_dir,
              "%s: KDP_DEVICE_PLUGIN_DIR is the mounted path" % where)
    # the image, its binary and its flags
    image, dockerfile = IMAGES.get(where, DEFAULT_IMAGE)
    check(c.get("image") == "%s:%s" % (image, project_version()),
          "%s: image %s:%s, built by deploy/%s (got %s)"
          % (where, image, project_version(), dockerfile, c.get("image")))
    binary = dockerfile_binary(dockerfile)
    sources = binary_sources(binary)
    check(bool(sources) and all(os.path.exists(s) for s in sources),
          "%s: the image's binary %s is an executable of the tree" % (where, binary))
    check("command" not in c, "%s: no command: the image's ENTRYPOINT runs" % where)
    wanted = {a.split("=")[0] for a in c.get("args", []) if a.startswith("--")}
    known = flags_of(sources)
    check(wanted <= known, "%s: args %s are flags %s parses (%s)"
          % (where, sorted(wanted), binary, ", ".join(sorted(known))))


def check_registration(ds, where):
    """The watcher overlay: KDP_REGISTRATION=watcher and plugins_registry
    mounted writable at the same path; the rolling-update overlay: surge,
    and each instance named by its pod UID, ordered by the template's
    generation (docs/registration.md)."""
    c = ds["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    reg = "/var/lib/kubelet/plugins_registry"
    if where.endswith("watcher"):
        check(env.get("KDP_REGISTRATION", {}).get("value") == "watcher",
              "%s: KDP_REGISTRATION=watcher" % where)
        m = [x for x in c.get("volumeMounts", []) if x["mountPath"] == reg]
        check(len(m) == 1 and not m[0].get("readOnly") and
              volumes.get(m[0]["name"], {}).get("hostPath") == {"path": reg, "type": "Directory"},
              "%s: %s mounted writable from the same hostPath (type Directory)" % (where, reg))
    if where.endswith("pod-identity"):
        pr = "/var/lib/kubelet/pod-resources"
        m = [x for x in c.get("volumeMounts", []) if x["mountPath"] == pr]
        check(len(m) == 1 and m[0].get("readOnly") is True and
              volumes.get(m[0]["name"], {}).get("hostPath") == {"path": pr, "type": "Directory"},
              "%s: %s mounted read-only from the same hostPath (type Directory)" % (where, pr))
    if where.endswith("rolling-update"):
        ru = ds["spec"]["updateStrategy"].get("rollingUpdate", {})
        check(ru.get("maxSurge") == 1 and ru.get("maxUnavailable") == 0,
              "%s: maxSurge 1, maxUnavailable 0" % where)
        ref = lambda n: env.get(n, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")  # noqa: E731
        check(ref("KDP_INSTANCE") == "metadata.uid", "%s: KDP_INSTANCE is the pod's UID" % where)
        check(ref("KDP_GENERATION") == "metadata.labels['pod-template-generation']",
              "%s: KDP_GENERATION is the pod-template-generation label" % where)


def check_network_policy(objs, where):
    """The metrics port open to one namespace's pods, only that port, and the
    policy selects the DaemonSet's pods."""
    ds = [o for o in objs if o["kind"] == "DaemonSet"][0]
    np = [o for o in objs if o["kind"] == "NetworkPolicy"][0]
    spec = np["spec"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    sel = spec.get("podSelector", {}).get("matchLabels", {})
    check(sel and all(labels.get(k) == v for k, v in sel.items()),
          "%s: the NetworkPolicy selects the DaemonSet's pods (%s)" % (where, sel))
    check(spec.get("policyTypes") == ["Ingress"] and len(spec.get("ingress", [])) == 1,
          "%s: one ingress rule" % where)
    rule = spec["ingress"][0] if spec.get("ingress") else {}
    check(rule.get("ports") == [{"port": "metrics", "protocol": "TCP"}],
          "%s: only the metrics port (%s)" % (where, rule.get("ports")))
    frm = rule.get("from", [])
    check(len(frm) == 1 and list(frm[0]) == ["namespaceSelector"] and
          frm[0]["namespaceSelector"].get("matchLabels"),
          "%s: from one namespace's pods, not from everywhere (%s)" % (where, frm))


def check_metrics(ds, where):
    """The metrics overlay serves the endpoint its probes and annotations use;
    the others (the static image, which cannot) ask for none."""
    tmpl = ds["spec"]["template"]
    c = tmpl["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    args = c.get("args", [])
    flag = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--metrics-address"] + \
        [a.split("=", 1)[1] for a in args if a.startswith("--metrics-address=")]
    address = flag[-1] if flag else env.get("KDP_METRICS_ADDRESS")
    if IMAGES.get(where, DEFAULT_IMAGE)[1] != "Dockerfile.metrics":
        check(address is None and "livenessProbe" not in c and "readinessProbe" not in c,
              "%s: the static image: no metrics address (it would fail the start), no probes"
              % where)
        return
    m = re.fullmatch(r":(\d+)", address or "")
    check(m is not None, "%s: the metrics address is :PORT, every interface of the pod (%r, %s)"
          % (where, address, "--metrics-address" if flag else "KDP_METRICS_ADDRESS"))
    port = int(m.group(1)) if m else None
    image_env = dockerfile_env("Dockerfile.metrics", "KDP_METRICS_ADDRESS")
    check(image_env is None or image_env == ":%s" % port,
          "%s: the image's ENV KDP_METRICS_ADDRESS (%s) agrees" % (where, image_env))
    ports = {p.get("name"): p for p in c.get("ports", [])}
    check(ports.get("metrics", {}).get("containerPort") == port and
          ports["metrics"].get("protocol", "TCP") == "TCP",
          "%s: containerPort %s named metrics" % (where, port))
    check(not ds["spec"]["template"]["spec"].get("hostNetwork") and
          not ports.get("metrics", {}).get("hostPort"),
          "%s: the port is the pod's (no hostNetwork, no hostPort)" % where)
    for kind in ("livenessProbe", "readinessProbe"):
        probe = c.get(kind, {})
        get = probe.get("httpGet", {})
        check(get.get("path") == "/healthz" and get.get("port") in ("metrics", port) and
              get.get("scheme", "HTTP") == "HTTP",
              "%s: %s GETs /healthz on the metrics port (%s)" % (where, kind, get))
        check(probe.get("timeoutSeconds", 1) < probe.get("periodSeconds", 10),
              "%s: %s times out within its period" % (where, kind))
    live, ready = c.get("livenessProbe", {}), c.get("readinessProbe", {})
    live_s = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
    check(live_s >= 60, "%s: liveness restarts only after %d s of failures (>= 60: the plugin "
          "re-registers by itself after a kubelet restart)" % (where, live_s))
    check(ready.get("periodSeconds", 10) <= 10,
          "%s: readiness follows registration within %s s" % (where, ready.get("periodSeconds")))
    ann = tmpl["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(port)
          and ann.get("prometheus.io/path", "/metrics") == "/metrics",
          "%s: prometheus.io annotations: scrape true, port %s, path /metrics" % (where, port))


def check_manifests():
    for path in sorted(glob.glob(os.path.join(DEPLOY, "**", "*.y*ml"), recursive=True)):
        rel = os.path.relpath(path, SRC)
        try:
            docs = load_all(path)
            check(True, "%s parses (%d document%s)" % (rel, len(docs), "s"[:len(docs) != 1]))
        except yaml.YAMLError as e:
            check(False, "%s parses: %s" % (rel, e))
    plugin_dir = default_plugin_dir()
    kubectl = shutil.which("kubectl")
    for kdir_rel, host_dir in sorted(EXPECTED_HOST_DIR.items()):
        kdir = os.path.join(DEPLOY, kdir_rel)
        objs = render(kdir)
        kinds = sorted(o["kind"] for o in objs)
        want = ["DaemonSet", "NetworkPolicy"] if kdir_rel == "overlays/metrics" else ["DaemonSet"]
        check(kinds == want, "%s renders %s (%s)" % (kdir_rel, " and ".join(want), kinds))
        if kdir_rel == "overlays/metrics" and kinds == want:
            check_network_policy(objs, kdir_rel)
        for o in objs:
            check(o["metadata"].get("namespace") == "kube-system",
                  "%s: namespace kube-system" % kdir_rel)
            schema_round_trip(o, kdir_rel)
            if o["kind"] == "DaemonSet":
                check_daemonset(o, kdir_rel, host_dir, plugin_dir)
                check_registration(o, kdir_rel)
                check_metrics(o, kdir_rel)
        if kubectl:
            p = subprocess.run([kubectl, "kustomize", kdir], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
            ok = p.returncode == 0
            check(ok, "kubectl kustomize %s%s" % (kdir_rel, "" if ok else ": " + p.stderr))
            if ok:
                check([d for d in yaml.safe_load_all(p.stdout) if d] == objs,
                      "kubectl kustomize %s renders what this test checked" % kdir_rel)
    check_dra(kubectl)
    check_dra(kubectl, "generic-dra")
    if not kubectl:
        log("skip: kubectl not installed, so no `kubectl kustomize` cross-check "
            "(the overlays were rendered by this test's own merge)")


# The DRA driver (deploy/dra): what the driver needs, and nothing more.
DRA_RULES = {
    ("resource.k8s.io", "resourceslices"): {"list", "watch", "create", "update", "delete"},
    ("resource.k8s.io", "resourceclaims"): {"get"},
    ("resource.k8s.io", "resourceclaims/status"): {"update"},
    ("resource.k8s.io", "resourceclaims/driver"): {"associated-node:update"},
    ("", "nodes"): {"get"},
}


def generic_dra_config(cm):
    """The driver and resource of the one DRA resource of kdp-generic's
    ConfigMap (the config itself is checked by tests/generic/test_dra.py)."""
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    res = [r for r in cfg["resources"] if "dra" in r]
    return (res[0]["dra"]["driver"], res[0]["name"]) if len(res) == 1 else (None, None)


def check_admission(by_kind, sa, where):
    """Slice writes by the driver's service account bound to its own node."""
    pol = by_kind["ValidatingAdmissionPolicy"][0]
    bnd = by_kind["ValidatingAdmissionPolicyBinding"][0]
    spec = pol["spec"]
    rules = spec.get("matchConstraints", {}).get("resourceRules", [])
    check(len(rules) == 1 and rules[0].get("apiGroups") == ["resource.k8s.io"] and
          rules[0].get("resources") == ["resourceslices"] and
          sorted(rules[0].get("operations", [])) == ["CREATE", "DELETE", "UPDATE"],
          where + ": the admission policy covers every write of a ResourceSlice")
    user = "system:serviceaccount:kube-system:" + sa["metadata"]["name"]
    conds = [c.get("expression", "") for c in spec.get("matchConditions", [])]
    check(len(conds) == 1 and '"%s"' % user in conds[0],
          where + ": ... by the driver's service account (%s)" % user)
    exprs = " ".join(v.get("expression", "") for v in spec.get("validations", []) +
                     spec.get("variables", []))
    check("authentication.kubernetes.io/node-name" in exprs and "nodeName" in exprs and
          "variables.callerNode == variables.sliceNode" in exprs,
          where + ": ... which must name the node the writing pod runs on")
    check(spec.get("failurePolicy") == "Fail", where + ": the policy fails closed")
    check(bnd["spec"].get("policyName") == pol["metadata"]["name"] and
          bnd["spec"].get("validationActions") == ["Deny"],
          where + ": the policy is bound, denying")


def check_dra(kubectl, kdir_rel="dra"):
    """deploy/dra (the gopher example) or deploy/generic-dra (kdp-generic,
    configured by its ConfigMap)."""
    generic = kdir_rel == "generic-dra"
    where = kdir_rel
    kdir = os.path.join(DEPLOY, kdir_rel)
    objs = render(kdir)
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    kinds = ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass", "ServiceAccount",
             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    kinds = sorted(kinds + ["ConfigMap"]) if generic else sorted(kinds)
    check(sorted(by_kind) == kinds and all(len(v) == 1 for v in by_kind.values()),
          where + " renders a ServiceAccount, a ClusterRole and its binding, a DaemonSet, a "
          "DeviceClass, an admission policy and its binding%s (%s)"
          % (" and a ConfigMap" if generic else "",
                                  sorted(o["kind"] for o in objs)))
    if failures:
        return
    sa, role, binding = by_kind["ServiceAccount"][0], by_kind["ClusterRole"][0], \
        by_kind["ClusterRoleBinding"][0]
    ds, dc = by_kind["DaemonSet"][0], by_kind["DeviceClass"][0]
    for o in (sa, ds) + tuple(by_kind.get("ConfigMap", [])):
        check(o["metadata"].get("namespace") == "kube-system",
              where + ": %s in namespace kube-system" % o["kind"])
    for o in objs:
        schema_round_trip(o, kdir_rel)
    # RBAC: exactly the rules above
    got = {}
    for r in role.get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                got.setdefault((g, res), set()).update(r.get("verbs", []))
    check(got == DRA_RULES, where + ": the ClusterRole grants what the driver needs and nothing more "
          "(%s)" % {"%s/%s" % k: sorted(v) for k, v in got.items()})
    check(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                 "name": role["metadata"]["name"]},
          where + ": the binding names the ClusterRole")
    check(binding.get("subjects") == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                       "namespace": "kube-system"}],
          where + ": ... for the ServiceAccount in kube-system")
    check_admission(by_kind, sa, where)
    # The DaemonSet
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check(pod.get("serviceAccountName") == sa["metadata"]["name"] and
          pod.get("automountServiceAccountToken") is True,
          where + ": runs as the ServiceAccount, its token mounted (the API server)")
    check(pod.get("priorityClassName") == "system-node-critical" and
          {"operator": "Exists"} in pod.get("tolerations", []),
          where + ": system-node-critical, tolerates every taint")
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        check(not pod.get(k), where + ": no %s" % k)
    sc = c.get("securityContext", {})
    check(sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False and
          sc.get("readOnlyRootFilesystem") is True and
          sc.get("capabilities", {}).get("drop") == ["ALL"] and
          not sc.get("capabilities", {}).get("add"),
          where + ": not privileged, no escalation, read-only root, every capability dropped")
    res = c.get("resources", {})
    check("memory" in res.get("requests", {}) and "cpu" in res.get("requests", {}) and
          "memory" in res.get("limits", {}) and
          mem_mi(res["requests"]["memory"]) <= mem_mi(res["limits"]["memory"]),
          where + ": cpu and memory requests, a memory limit above the request")
    ru = ds["spec"]["updateStrategy"].get("rollingUpdate", {})
    check(ru.get("maxSurge") == 1 and ru.get("maxUnavailable") == 0,
          where + ": maxSurge 1, maxUnavailable 0 (each instance its own sockets)")
    ref = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in c.get("env", [])}
    check(ref.get("NODE_NAME") == "spec.nodeName", where + ": NODE_NAME is the pod's spec.nodeName")
    check(ref.get("POD_UID") == "metadata.uid", where + ": POD_UID is the pod's UID")
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    for m in mounts.values():
        check(m["name"] in volumes, where + ": mount %s has its volume" % m["name"])
    image = "kdp-generic-dra" if generic else "kdp-gopher-dra"
    check(c.get("image") == "%s:%s" % (image, project_version()),
          where + ": image %s:%s, built by deploy/Dockerfile.dra (got %s)"
          % (image, project_version(), c.get("image")))
    binary = "kdp-generic-dra" if generic else dockerfile_binary("Dockerfile.dra")
    sources = binary_sources(binary)
    check(bool(sources) and all(os.path.exists(s) for s in sources),
          where + ": the image's binary %s is an executable of the tree" % binary)
    args = c.get("args", [])
    wanted = {a.split("=")[0] for a in args if a.startswith("--")}
    check(wanted <= flags_of(sources), where + ": args %s are flags %s parses"
          % (sorted(wanted), binary))
    if generic:
        driver, resource = generic_dra_config(by_kind["ConfigMap"][0])
        check(driver is not None, where + ": the ConfigMap has one resource with dra:")
        cm_mount = [m for m in c.get("volumeMounts", [])
                    if volumes.get(m["name"], {}).get("configMap", {}).get("name") ==
                    by_kind["ConfigMap"][0]["metadata"]["name"]]
        check(len(cm_mount) == 1 and "--config" in args and
              args[args.index("--config") + 1].startswith(cm_mount[0]["mountPath"] + "/"),
              where + ": --config is the ConfigMap's file")
    else:
        driver = args[args.index("--dra") + 1] if "--dra" in args[:-1] else None
        check(driver is not None, where + ": the args name the driver (--dra DRIVER)")
        gopher = open(os.path.join(SRC, "examples", "gopher.c")).read()
        m = re.search(r'\.resource_name = "([^"]+)"', gopher)
        resource = m.group(1) if m else None
    plugins = "/var/lib/kubelet/plugins/" + str(driver)  # the driver's own folder only
    for path, kind in (("/var/lib/kubelet/plugins_registry", "Directory"),
                       (plugins, "DirectoryOrCreate"),
                       ("/var/run/cdi", "DirectoryOrCreate")):
        m = mounts.get(path)
        hp = volumes.get(m["name"], {}).get("hostPath", {}) if m else {}
        check(m is not None and not m.get("readOnly") and hp == {"path": path, "type": kind},
              where + ": %s mounted writable from the same hostPath (type %s)" % (path, kind))
    # The DeviceClass selects that driver's devices and serves the resource
    check(dc["apiVersion"] == "resource.k8s.io/v1", where + ": DeviceClass resource.k8s.io/v1")
    exprs = [s.get("cel", {}).get("expression", "") for s in dc["spec"].get("selectors", [])]
    check(exprs == ['device.driver == "%s"' % driver],
          where + ": the DeviceClass selects the driver's devices (%s)" % exprs)
    check(resource is not None and dc["spec"].get("extendedResourceName") == resource,
          where + ": extendedResourceName is the device plugin's resource (%s)"
          % dc["spec"].get("extendedResourceName"))
    if kubectl:
        p = subprocess.run([kubectl, "kustomize", kdir], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        ok = p.returncode == 0
        check(ok, "kubectl kustomize %s%s" % (kdir_rel, "" if ok else ": " + p.stderr))
        if ok:
            key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
            check(sorted([d for d in yaml.safe_load_all(p.stdout) if d], key=key) ==
                  sorted(objs, key=key),
                  "kubectl kustomize %s renders what this test checked" % kdir_rel)


def check_systemd():
    units = sorted(glob.glob(os.path.join(DEPLOY, "systemd", "*.service")))
    check(bool(units), "deploy/systemd has a unit")
    plugin_dir = default_plugin_dir()
    for unit in units:
        rel = os.path.relpath(unit, SRC)
        cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
        cp.optionxform = str
        cp.read(unit)
        svc, u = cp["Service"], cp["Unit"]
        exec_start = svc.get("ExecStart", "").split()
        binary = os.path.basename(exec_start[0]) if exec_start else ""
        sources = binary_sources(binary)
        check(bool(sources), "%s: ExecStart runs %s, an executable of the tree" % (rel, binary))
        wanted = {a.split("=")[0] for a in exec_start[1:] if a.startswith("--")}
        check(wanted <= flags_of(sources), "%s: its flags %s exist" % (rel, sorted(wanted)))
        check(svc.get("Restart") == "always" and bool(svc.get("RestartSec")),
              "%s: Restart=always with a RestartSec" % rel)
        check("kubelet.service" in u.get("After", "").split(), "%s: After=kubelet.service" % rel)
        for k in ("Requires", "BindsTo", "PartOf"):
            check(k not in u, "%s: no %s= (kdp follows kubelet restarts itself)" % (rel, k))
        check(svc.get("ProtectSystem") == "strict", "%s: ProtectSystem=strict" % rel)
        check(svc.get("NoNewPrivileges") == "yes", "%s: NoNewPrivileges=yes" % rel)
        check(svc.get("CapabilityBoundingSet", None) == "", "%s: no capabilities" % rel)
        env = dict(e.split("=", 1) for e in svc.get("Environment", "").split())
        served = env.get("KDP_DEVICE_PLUGIN_DIR", plugin_dir)
        check(svc.get("ReadWritePaths", "").split() == [served],
              "%s: the one writable path is the directory it serves, %s" % (rel, served))
        analyze = shutil.which("systemd-analyze")
        if not analyze:
            log("skip: systemd-analyze not installed (the unit was only parsed)")
            continue
        # verify wants ExecStart to exist: a copy pointing at an executable that does
        with tempfile.TemporaryDirectory() as tmp:
            copy_path = os.path.join(tmp, os.path.basename(unit))
            text = open(unit).read().replace(exec_start[0], "/bin/true", 1)
            open(copy_path, "w").write(text)
            p = subprocess.run([analyze, "verify", copy_path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
            out = p.stdout.strip()
            check(p.returncode == 0 and not out,
                  "%s: systemd-analyze verify is silent%s" % (rel, (": " + out) if out else ""))
            p = subprocess.run([analyze, "security", "--offline=true", copy_path],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=120)
            m = re.search(r"Overall exposure level for \S+: ([\d.]+)", p.stdout)
            if m:
                check(float(m.group(1)) <= 2.0, "%s: systemd-analyze security exposure %s "
                      "(<= 2.0)" % (rel, m.group(1)))


def main():
    check_manifests()
    check_systemd()
    if failures:
        log("%d check(s) failed:" % len(failures))
        for f in failures:
            log("  " + f)
        return 1
    log("test_deploy: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

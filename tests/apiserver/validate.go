package main

// Validation of what the API server validates for the objects a DRA driver
// writes (k8s.io/kubernetes pkg/apis/resource/validation and
// apimachinery's name rules): the errors, their fields and their words.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

const (
	dns1123LabelFmt     = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123SubdomainFmt = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	cIdentifierFmt      = "[A-Za-z_][A-Za-z0-9_]*"

	maxDevicesPerSlice              = 128
	maxDevicesWithTaintsOrCounters  = 64
	maxAttributesAndCapacities      = 32
	maxTaintsPerDevice              = 16
	maxAttributeValueLength         = 64
	maxPoolNameLength               = 253
	maxDriverNameLength             = 63
	maxDeviceIDLength               = 32
	maxDeviceDomainLength           = 63
	attributeCapacityKeyTruncateLen = maxDeviceDomainLength + 1 + maxDeviceIDLength
)

var (
	dns1123LabelRe     = regexp.MustCompile("^" + dns1123LabelFmt + "$")
	dns1123SubdomainRe = regexp.MustCompile("^" + dns1123SubdomainFmt + "$")
	cIdentifierRe      = regexp.MustCompile("^" + cIdentifierFmt + "$")
	semverRe           = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
		`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)
)

const (
	labelMsg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', " +
		"and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', " +
		"regex used for validation is '" + dns1123LabelFmt + "')"
	subdomainMsg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
		"and must start and end with an alphanumeric character (e.g. 'example.com', " +
		"regex used for validation is '" + dns1123SubdomainFmt + "')"
	cIdentifierMsg = "a valid C identifier must start with alphabetic character or '_', followed by a string of " +
		"alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', " +
		"regex used for validation is '" + cIdentifierFmt + "')"
)

// ---------------------------------------------------------------------------
// name rules

func dnsLabel(v, field string) []fieldErr {
	var errs []fieldErr
	if len(v) > 63 {
		errs = append(errs, invalid(field, v, "must be no more than 63 characters"))
	}
	if !dns1123LabelRe.MatchString(v) {
		errs = append(errs, invalid(field, v, labelMsg))
	}
	return errs
}

func dnsSubdomain(v, field string) []fieldErr {
	var errs []fieldErr
	if len(v) > 253 {
		errs = append(errs, invalid(field, v, "must be no more than 253 characters"))
	}
	if !dns1123SubdomainRe.MatchString(v) {
		errs = append(errs, invalid(field, v, subdomainMsg))
	}
	return errs
}

// driverName is ValidateCSIDriverName: required, at most 63 bytes, a DNS
// subdomain.
func driverName(v, field string) []fieldErr {
	if v == "" {
		return []fieldErr{required(field, "")}
	}
	var errs []fieldErr
	if len(v) > maxDriverNameLength {
		errs = append(errs, tooLong(field, maxDriverNameLength))
	}
	return append(errs, dnsSubdomain(v, field)...)
}

func cIdentifier(v, field string) []fieldErr {
	var errs []fieldErr
	if len(v) > maxDeviceIDLength {
		errs = append(errs, tooLong(field, maxDeviceIDLength))
	}
	if !cIdentifierRe.MatchString(v) {
		errs = append(errs, invalid(field, v, cIdentifierMsg))
	}
	return errs
}

// qualifiedName: a C identifier, or DOMAIN/ID with a driver-name domain.
func qualifiedName(v, field string) []fieldErr {
	if v == "" {
		return []fieldErr{required(field, "name required")}
	}
	parts := strings.Split(v, "/")
	switch len(parts) {
	case 1:
		return cIdentifier(parts[0], field)
	case 2:
		var errs []fieldErr
		if parts[0] == "" {
			errs = append(errs, required(field, "the domain must not be empty"))
		} else {
			errs = append(errs, driverName(parts[0], field)...)
		}
		if parts[1] == "" {
			errs = append(errs, required(field, "the name must not be empty"))
		} else {
			errs = append(errs, cIdentifier(parts[1], field)...)
		}
		return errs
	default:
		return []fieldErr{invalid(field, v, "a qualified name has at most one '/'")}
	}
}

func truncateKey(s string, max int) string {
	if max < 16 {
		max = 16
	}
	if len(s) <= max {
		return s
	}
	rest := max - 3
	return s[:(rest+1)/2] + "..." + s[len(s)-rest/2:]
}

// objectMeta checks metadata.name (or generateName) with nameRule.
func objectMeta(obj M, namespaced bool, nameRule func(string, string) []fieldErr) []fieldErr {
	md := getMap(obj, "metadata")
	name := getString(md, "name")
	var errs []fieldErr
	if name == "" {
		errs = append(errs, required("metadata.name", "name or generateName is required"))
	} else {
		errs = append(errs, nameRule(name, "metadata.name")...)
	}
	if namespaced && getString(md, "namespace") == "" {
		errs = append(errs, required("metadata.namespace", ""))
	}
	errs = append(errs, labels(md["labels"])...)
	return append(errs, ownerReferences(md["ownerReferences"])...)
}

const (
	qualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
	labelValueFmt    = "(" + qualifiedNameFmt + ")?"
	qualifiedNameMsg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with " +
		"an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '" +
		qualifiedNameFmt + "')"
	labelValueMsg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', " +
		"and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', " +
		"regex used for validation is '" + labelValueFmt + "')"
)

var (
	qualifiedNameRe = regexp.MustCompile("^" + qualifiedNameFmt + "$")
	labelValueRe    = regexp.MustCompile("^" + labelValueFmt + "$")
)

// labels: keys are qualified names ([prefix/]name), values at most 63
// characters of the label alphabet (apimachinery's ValidateLabels).
func labels(v interface{}) []fieldErr {
	m, ok := v.(map[string]interface{})
	if v != nil && !ok {
		return []fieldErr{invalid("metadata.labels", v, "must be a map of strings")}
	}
	var errs []fieldErr
	for _, k := range sortedKeys(m) {
		name := k
		if i := strings.LastIndex(k, "/"); i >= 0 {
			prefix := k[:i]
			name = k[i+1:]
			if prefix == "" {
				errs = append(errs, invalid("metadata.labels", k, "prefix part must be non-empty"))
			} else if !dns1123SubdomainRe.MatchString(prefix) || len(prefix) > 253 {
				errs = append(errs, invalid("metadata.labels", k, "prefix part "+subdomainMsg))
			}
		}
		switch {
		case name == "":
			errs = append(errs, invalid("metadata.labels", k, "name part must be non-empty"))
		case len(name) > 63:
			errs = append(errs, invalid("metadata.labels", k, "name part must be no more than 63 characters"))
		case !qualifiedNameRe.MatchString(name):
			errs = append(errs, invalid("metadata.labels", k, "name part "+qualifiedNameMsg))
		}
		val, ok := m[k].(string)
		if !ok {
			errs = append(errs, invalid("metadata.labels", m[k], "label values must be strings"))
			continue
		}
		if len(val) > 63 {
			errs = append(errs, invalid("metadata.labels", val, "must be no more than 63 characters"))
		}
		if !labelValueRe.MatchString(val) {
			errs = append(errs, invalid("metadata.labels", val, labelValueMsg))
		}
	}
	return errs
}

// labelName is a taint's key: a label name ([prefix/]name, apimachinery's
// ValidateLabelName, non-empty).
func labelName(k, path string) []fieldErr {
	name := k
	var errs []fieldErr
	if i := strings.LastIndex(k, "/"); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || !dns1123SubdomainRe.MatchString(prefix) || len(prefix) > 253 {
			errs = append(errs, invalid(path, k, "prefix part "+subdomainMsg))
		}
	}
	switch {
	case name == "":
		errs = append(errs, invalid(path, k, "name part must be non-empty"))
	case len(name) > 63:
		errs = append(errs, invalid(path, k, "name part must be no more than 63 characters"))
	case !qualifiedNameRe.MatchString(name):
		errs = append(errs, invalid(path, k, "name part "+qualifiedNameMsg))
	}
	return errs
}

// validateTaints: at most 16 (DeviceTaintsMaxLength), each with a key (a
// label name), a value (a label value) and an effect of NoSchedule,
// NoExecute or None (validateDeviceTaint).
func validateTaints(v interface{}, path string) []fieldErr {
	if v == nil {
		return nil
	}
	list, ok := v.([]interface{})
	if !ok {
		return []fieldErr{invalid(path, v, "must be a list")}
	}
	var errs []fieldErr
	if len(list) > maxTaintsPerDevice {
		errs = append(errs, tooMany(path, len(list), maxTaintsPerDevice))
	}
	for i, t := range list {
		tp := fmt.Sprintf("%s[%d]", path, i)
		tm, ok := t.(map[string]interface{})
		if !ok {
			errs = append(errs, invalid(tp, t, "must be an object"))
			continue
		}
		if key := getString(tm, "key"); key == "" {
			errs = append(errs, required(tp+".key", ""))
		} else {
			errs = append(errs, labelName(key, tp+".key")...)
		}
		if val := getString(tm, "value"); val != "" && (len(val) > 63 || !labelValueRe.MatchString(val)) {
			errs = append(errs, invalid(tp+".value", val, labelValueMsg))
		}
		switch eff := getString(tm, "effect"); eff {
		case "":
			errs = append(errs, required(tp+".effect", ""))
		case "NoSchedule", "NoExecute", "None":
		default:
			errs = append(errs, fieldErr{typ: "FieldValueNotSupported", field: tp + ".effect", value: eff,
				detail: `supported values: "NoExecute", "NoSchedule", "None"`})
		}
	}
	return errs
}

// ownerReferences: apiVersion, kind, name and uid set; one controller at
// most (apimachinery's ValidateOwnerReferences: the fields have no index).
func ownerReferences(v interface{}) []fieldErr {
	refs, ok := v.([]interface{})
	if v != nil && !ok {
		return []fieldErr{invalid("metadata.ownerReferences", v, "must be a list")}
	}
	var errs []fieldErr
	var controllers []string
	const p = "metadata.ownerReferences"
	for _, r := range refs {
		rm, _ := r.(map[string]interface{})
		if getString(rm, "apiVersion") == "" {
			errs = append(errs, invalid(p+".apiVersion", getString(rm, "apiVersion"), "version must not be empty"))
		}
		if getString(rm, "kind") == "" {
			errs = append(errs, invalid(p+".kind", getString(rm, "kind"), "kind must not be empty"))
		}
		if getString(rm, "name") == "" {
			errs = append(errs, invalid(p+".name", getString(rm, "name"), "name must not be empty"))
		}
		if getString(rm, "uid") == "" {
			errs = append(errs, invalid(p+".uid", getString(rm, "uid"), "uid must not be empty"))
		}
		if b, _ := rm["controller"].(bool); b {
			controllers = append(controllers, fmt.Sprintf("%s, Kind=%s, Name=%s",
				getString(rm, "apiVersion"), getString(rm, "kind"), getString(rm, "name")))
		}
	}
	if len(controllers) > 1 {
		errs = append(errs, invalid(p, refs, fmt.Sprintf("Only one reference can have Controller set to true. Found \"true\" in references for %s", strings.Join(controllers, " and "))))
	}
	return errs
}

// ---------------------------------------------------------------------------
// ResourceSlice

func asBool(v interface{}) (bool, bool) {
	b, ok := v.(bool)
	return b, ok
}

func asInt(v interface{}) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func validateSlice(obj, old M) []fieldErr {
	errs := objectMeta(obj, false, dnsSubdomain)
	spec := getMap(obj, "spec")
	errs = append(errs, driverName(getString(spec, "driver"), "spec.driver")...)

	pool := getMap(spec, "pool")
	pname := getString(pool, "name")
	if pname == "" {
		errs = append(errs, required("spec.pool.name", ""))
	} else {
		if len(pname) > maxPoolNameLength {
			errs = append(errs, tooLong("spec.pool.name", maxPoolNameLength))
		}
		for _, part := range strings.Split(pname, "/") {
			errs = append(errs, dnsSubdomain(part, "spec.pool.name")...)
		}
	}
	if n, ok := asInt(pool["resourceSliceCount"]); !ok || n <= 0 {
		v := pool["resourceSliceCount"]
		if v == nil {
			v = json.Number("0")
		}
		errs = append(errs, invalid("spec.pool.resourceSliceCount", v, "must be greater than zero"))
	}
	if g, ok := asInt(pool["generation"]); pool["generation"] != nil && (!ok || g < 0) {
		errs = append(errs, invalid("spec.pool.generation", pool["generation"], "must be greater than or equal to zero"))
	}
	if old != nil {
		ospec := getMap(old, "spec")
		for _, f := range [][2]string{{"pool", "name"}, {"driver", ""}, {"nodeName", ""}} {
			var a, b interface{}
			path := "spec." + f[0]
			if f[1] != "" {
				a, b = getMap(spec, f[0])[f[1]], getMap(ospec, f[0])[f[1]]
				path += "." + f[1]
			} else {
				a, b = spec[f[0]], ospec[f[0]]
			}
			if !jsonEqual(a, b) {
				errs = append(errs, invalid(path, a, "field is immutable"))
			}
		}
	}

	var set []string
	if v, ok := spec["nodeName"]; ok && v != nil {
		if s, _ := v.(string); s != "" {
			set = append(set, "`nodeName`")
			errs = append(errs, dnsSubdomain(s, "spec.nodeName")...)
		} else {
			errs = append(errs, invalid("spec.nodeName", v, "must be either unset or set to a non-empty string"))
		}
	}
	if v, ok := spec["nodeSelector"]; ok && v != nil {
		set = append(set, "`nodeSelector`")
		terms, _ := getMap(spec, "nodeSelector")["nodeSelectorTerms"].([]interface{})
		if len(terms) != 1 {
			errs = append(errs, invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term"))
		}
	}
	for _, f := range []string{"allNodes", "perDeviceNodeSelection"} {
		if v, ok := spec[f]; ok && v != nil {
			if b, _ := asBool(v); b {
				set = append(set, "`"+f+"`")
			} else {
				errs = append(errs, invalid("spec."+f, v, "must be either unset or set to true"))
			}
		}
	}
	switch len(set) {
	case 0:
		errs = append(errs, required("spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case 1:
	default:
		errs = append(errs, invalid("spec", "{"+strings.Join(set, ", ")+"}",
			"exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}
	perDevice, _ := asBool(spec["perDeviceNodeSelection"])

	devices, _ := spec["devices"].([]interface{})
	if spec["sharedCounters"] != nil && spec["devices"] != nil {
		errs = append(errs, invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	if spec["sharedCounters"] != nil {
		errs = append(errs, validateSharedCounters(spec["sharedCounters"], "spec.sharedCounters")...)
	}
	max := maxDevicesPerSlice
	for _, d := range devices {
		dm, _ := d.(map[string]interface{})
		if t, _ := dm["taints"].([]interface{}); len(t) > 0 {
			max = maxDevicesWithTaintsOrCounters
		}
		if c, _ := dm["consumesCounters"].([]interface{}); len(c) > 0 {
			max = maxDevicesWithTaintsOrCounters
		}
	}
	if len(devices) > max {
		errs = append(errs, tooMany("spec.devices", len(devices), max))
	} else {
		for i, d := range devices {
			errs = append(errs, validateDevice(d, fmt.Sprintf("spec.devices[%d]", i), perDevice)...)
		}
	}
	seen := map[string]bool{}
	for i, d := range devices {
		dm, _ := d.(map[string]interface{})
		n := getString(dm, "name")
		if seen[n] {
			errs = append(errs, duplicate(fmt.Sprintf("spec.devices[%d]", i), n))
		}
		seen[n] = true
	}
	return errs
}

func sortedKeys(m map[string]interface{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func validateDevice(d interface{}, path string, perDevice bool) []fieldErr {
	dm, ok := d.(map[string]interface{})
	if !ok {
		return []fieldErr{invalid(path, d, "must be an object")}
	}
	var errs []fieldErr
	name := getString(dm, "name")
	if name == "" {
		errs = append(errs, required(path+".name", ""))
	} else {
		errs = append(errs, dnsLabel(name, path+".name")...)
	}
	errs = append(errs, validateTaints(dm["taints"], path+".taints")...)
	errs = append(errs, validateSharing(dm, path)...)
	attrs, _ := dm["attributes"].(map[string]interface{})
	caps, _ := dm["capacity"].(map[string]interface{})
	if n := len(attrs) + len(caps); n > maxAttributesAndCapacities {
		errs = append(errs, invalid(path, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", maxAttributesAndCapacities)))
	}
	for _, k := range sortedKeys(attrs) {
		kp := path + ".attributes[" + truncateKey(k, attributeCapacityKeyTruncateLen) + "]"
		errs = append(errs, qualifiedName(k, kp)...)
		errs = append(errs, validateAttribute(attrs[k], kp)...)
	}
	for _, k := range sortedKeys(caps) {
		kp := path + ".capacity[" + truncateKey(k, attributeCapacityKeyTruncateLen) + "]"
		errs = append(errs, qualifiedName(k, kp)...)
		cm, _ := caps[k].(map[string]interface{})
		if cm == nil || cm["value"] == nil {
			errs = append(errs, required(kp+".value", ""))
		} else if !validQuantity(cm["value"]) {
			errs = append(errs, badQuantity(kp+".value", cm["value"]))
		}
		if cm != nil && cm["requestPolicy"] != nil {
			if b, _ := asBool(dm["allowMultipleAllocations"]); !b {
				errs = append(errs, forbidden(kp+".requestPolicy", "allowMultipleAllocations must be true"))
			}
		}
	}
	if perDevice {
		var set []string
		if v, ok := dm["nodeName"]; ok && v != nil {
			if s, _ := v.(string); s != "" {
				set = append(set, "`nodeName`")
			} else {
				errs = append(errs, invalid(path+".nodeName", v, "must not be empty"))
			}
		}
		if v, ok := dm["nodeSelector"]; ok && v != nil {
			set = append(set, "`nodeSelector`")
		}
		if v, ok := dm["allNodes"]; ok && v != nil {
			if b, _ := asBool(v); b {
				set = append(set, "`allNodes`")
			} else {
				errs = append(errs, invalid(path+".allNodes", v, "must be either unset or set to true"))
			}
		}
		const msg = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
		switch len(set) {
		case 0:
			errs = append(errs, required(path, msg))
		case 1:
		default:
			errs = append(errs, invalid(path, "{"+strings.Join(set, ", ")+"}", msg))
		}
	} else if dm["nodeName"] != nil || dm["nodeSelector"] != nil || dm["allNodes"] != nil {
		errs = append(errs, invalid(path, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
	}
	return errs
}

// badQuantity: the API server's words for a value that is not a quantity.
func badQuantity(path string, v interface{}) fieldErr {
	return invalid(path, v, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
}

// uniqueName: a required name that check accepts, once among those seen.
func uniqueName(name, path string, seen map[string]bool, check func(string, string) []fieldErr) []fieldErr {
	var errs []fieldErr
	if name == "" {
		errs = append(errs, required(path, ""))
	} else {
		errs = append(errs, check(name, path)...)
	}
	if seen[name] {
		errs = append(errs, duplicate(path, name))
	}
	seen[name] = true
	return errs
}

func validQuantity(v interface{}) bool {
	switch x := v.(type) {
	case json.Number:
		return true
	case string:
		_, ok := parseQuantity(x)
		return ok
	}
	return false
}

// validateAttribute: exactly one of int, bool, string (<= 64), version
// (semver, <= 64).
func validateAttribute(v interface{}, path string) []fieldErr {
	am, ok := v.(map[string]interface{})
	if !ok {
		return []fieldErr{invalid(path, v, "exactly one value must be specified")}
	}
	var errs []fieldErr
	n := 0
	if x, ok := am["bool"]; ok && x != nil {
		n++
		if _, ok := x.(bool); !ok {
			errs = append(errs, invalid(path+".bool", x, "must be a boolean"))
		}
	}
	if x, ok := am["int"]; ok && x != nil {
		n++
		if _, ok := asInt(x); !ok {
			errs = append(errs, invalid(path+".int", x, "must be a 64-bit integer"))
		}
	}
	if x, ok := am["string"]; ok && x != nil {
		n++
		if s, ok := x.(string); !ok {
			errs = append(errs, invalid(path+".string", x, "must be a string"))
		} else if len(s) > maxAttributeValueLength {
			errs = append(errs, tooLong(path+".string", maxAttributeValueLength))
		}
	}
	if x, ok := am["version"]; ok && x != nil {
		n++
		s, _ := x.(string)
		if !semverRe.MatchString(s) {
			errs = append(errs, invalid(path+".version", x, "must be a string compatible with semver.org spec 2.0.0"))
		}
		if len(s) > maxAttributeValueLength {
			errs = append(errs, tooLong(path+".version", maxAttributeValueLength))
		}
	}
	switch n {
	case 0:
		errs = append(errs, invalid(path, "", "exactly one value must be specified"))
	case 1:
	default:
		errs = append(errs, invalid(path, v, "exactly one value must be specified"))
	}
	return errs
}

// ---------------------------------------------------------------------------
// ResourceClaim and DeviceClass: names, the claim's requests, immutability.

func validateClaim(obj, old M) []fieldErr {
	errs := objectMeta(obj, true, dnsSubdomain)
	if old != nil {
		if !jsonEqual(getMap(obj, "spec"), getMap(old, "spec")) {
			errs = append(errs, invalid("spec", getMap(obj, "spec"), "field is immutable"))
		}
		return append(errs, validateClaimStatus(obj)...)
	}
	reqs, _ := getMap(getMap(obj, "spec"), "devices")["requests"].([]interface{})
	seen := map[string]bool{}
	for i, r := range reqs {
		rm, _ := r.(map[string]interface{})
		p := fmt.Sprintf("spec.devices.requests[%d]", i)
		errs = append(errs, uniqueName(getString(rm, "name"), p+".name", seen, dnsLabel)...)
		ex, fa := rm["exactly"] != nil, rm["firstAvailable"] != nil
		switch {
		case !ex && !fa:
			errs = append(errs, required(p, "exactly one of `exactly` or `firstAvailable` is required"))
		case ex && fa:
			errs = append(errs, invalid(p, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case ex:
			if getString(getMap(rm, "exactly"), "deviceClassName") == "" {
				errs = append(errs, required(p+".exactly.deviceClassName", ""))
			}
		}
	}
	return errs
}

func validateClass(obj, old M) []fieldErr {
	errs := objectMeta(obj, false, dnsSubdomain)
	if ern, ok := getMap(obj, "spec")["extendedResourceName"]; ok && ern != nil {
		s, _ := ern.(string)
		if !extendedResourceRe.MatchString(s) || strings.HasPrefix(s, "kubernetes.io/") || !strings.Contains(s, "/") {
			errs = append(errs, invalid("spec.extendedResourceName", ern, "must be a valid extended resource name"))
		}
	}
	return errs
}

var extendedResourceRe = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)

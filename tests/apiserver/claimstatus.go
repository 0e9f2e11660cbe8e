package main

// A ResourceClaim's status.devices (KEP-4817, GA in 1.37), checked as
// pkg/apis/resource/validation's validateDeviceStatus and apimachinery's
// ValidateConditions check it: each entry names a device of the claim's
// allocation (driver, pool, device, shareID), once; at most 8 conditions,
// each with a qualified type (once), a status True/False/Unknown, a
// lastTransitionTime and a CamelCase reason; data a JSON object of at most
// 10 Ki; networkData with bounded names and CIDR addresses.

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
)

const (
	maxStatusConditions   = 8
	maxStatusDataBytes    = 10 * 1024
	maxInterfaceName      = 256
	maxHardwareAddress    = 128
	maxNetworkIPs         = 16
	maxConditionReason    = 1024
	maxConditionMessage   = 32768
	conditionReasonFormat = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
)

var (
	conditionReasonRe = regexp.MustCompile("^" + conditionReasonFormat + "$")
	uidRe             = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// allocatedKeys: "driver/pool/device" (and "/shareID") of each result.
func allocatedKeys(obj M) map[string]bool {
	keys := map[string]bool{}
	results, _ := getMap(getMap(getMap(obj, "status"), "allocation"), "devices")["results"].([]interface{})
	for _, r := range results {
		rm, _ := r.(map[string]interface{})
		keys[deviceKey(rm)] = true
	}
	return keys
}

func deviceKey(m map[string]interface{}) string {
	k := getString(m, "driver") + "/" + getString(m, "pool") + "/" + getString(m, "device")
	if s := getString(m, "shareID"); s != "" {
		k += "/" + s
	}
	return k
}

func validateClaimStatus(obj M) []fieldErr {
	devs, ok := getMap(obj, "status")["devices"]
	if !ok || devs == nil {
		return nil
	}
	list, ok := devs.([]interface{})
	if !ok {
		return []fieldErr{invalid("status.devices", devs, "must be a list")}
	}
	allocated := allocatedKeys(obj)
	seen := map[string]bool{}
	var errs []fieldErr
	for i, d := range list {
		p := fmt.Sprintf("status.devices[%d]", i)
		dm, _ := d.(map[string]interface{})
		errs = append(errs, driverName(getString(dm, "driver"), p+".driver")...)
		if getString(dm, "pool") == "" {
			errs = append(errs, required(p+".pool", ""))
		}
		if dev := getString(dm, "device"); dev == "" {
			errs = append(errs, required(p+".device", ""))
		} else {
			errs = append(errs, dnsLabel(dev, p+".device")...)
		}
		if s, has := dm["shareID"]; has && s != nil {
			if str, _ := s.(string); !uidRe.MatchString(str) {
				errs = append(errs, invalid(p+".shareID", s, "must be a lowercase UUID in 8-4-4-4-12 format"))
			}
		}
		key := deviceKey(dm)
		if !allocated[key] {
			errs = append(errs, invalid(p, key, "must be an allocated device in the claim"))
		}
		if seen[key] {
			errs = append(errs, duplicate(p, key))
		}
		seen[key] = true
		errs = append(errs, validateConditions(dm["conditions"], p+".conditions")...)
		if data, has := dm["data"]; has && data != nil {
			raw, _ := json.Marshal(data)
			if len(raw) > maxStatusDataBytes {
				errs = append(errs, tooLong(p+".data", maxStatusDataBytes))
			} else if _, isObj := data.(map[string]interface{}); !isObj {
				errs = append(errs, invalid(p+".data", "<value omitted>", "must be a valid JSON object"))
			}
		}
		errs = append(errs, validateNetworkData(getMap(dm, "networkData"), p+".networkData")...)
	}
	return errs
}

func validateConditions(v interface{}, path string) []fieldErr {
	if v == nil {
		return nil
	}
	list, ok := v.([]interface{})
	if !ok {
		return []fieldErr{invalid(path, v, "must be a list")}
	}
	var errs []fieldErr
	if len(list) > maxStatusConditions {
		errs = append(errs, tooMany(path, len(list), maxStatusConditions))
	}
	types := map[string]bool{}
	for i, c := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		cm, _ := c.(map[string]interface{})
		// a condition type: ValidateLabelName (metav1 validation.ValidateCondition)
		errs = append(errs, uniqueName(getString(cm, "type"), p+".type", types, labelName)...)
		switch st := getString(cm, "status"); st {
		case "True", "False", "Unknown":
		case "":
			errs = append(errs, required(p+".status", ""))
		default:
			errs = append(errs, fieldErr{typ: "FieldValueNotSupported", field: p + ".status", value: st,
				detail: `supported values: "False", "True", "Unknown"`})
		}
		if lt := getString(cm, "lastTransitionTime"); lt == "" {
			errs = append(errs, required(p+".lastTransitionTime", "must be set"))
		} else if _, err := time.Parse(time.RFC3339, lt); err != nil {
			errs = append(errs, invalid(p+".lastTransitionTime", lt, "must be an RFC 3339 time"))
		}
		reason := getString(cm, "reason")
		switch {
		case reason == "":
			errs = append(errs, required(p+".reason", "must be set"))
		case len(reason) > maxConditionReason:
			errs = append(errs, tooLong(p+".reason", maxConditionReason))
		case !conditionReasonRe.MatchString(reason):
			errs = append(errs, invalid(p+".reason", reason, "a condition reason must start with alphabetic "+
				"character, optionally followed by a string of alphanumeric characters or '_,:', and must end "+
				"with an alphanumeric character or '_' (regex used for validation is '"+conditionReasonFormat+"')"))
		}
		if len(getString(cm, "message")) > maxConditionMessage {
			errs = append(errs, tooLong(p+".message", maxConditionMessage))
		}
	}
	return errs
}

func validateNetworkData(nd M, path string) []fieldErr {
	if nd == nil {
		return nil
	}
	var errs []fieldErr
	if len(getString(nd, "interfaceName")) > maxInterfaceName {
		errs = append(errs, tooLong(path+".interfaceName", maxInterfaceName))
	}
	if len(getString(nd, "hardwareAddress")) > maxHardwareAddress {
		errs = append(errs, tooLong(path+".hardwareAddress", maxHardwareAddress))
	}
	ips, _ := nd["ips"].([]interface{})
	if len(ips) > maxNetworkIPs {
		return append(errs, tooMany(path+".ips", len(ips), maxNetworkIPs))
	}
	seen := map[string]bool{}
	for i, v := range ips {
		p := fmt.Sprintf("%s.ips[%d]", path, i)
		s, _ := v.(string)
		ip, _, err := net.ParseCIDR(s)
		if err != nil {
			errs = append(errs, invalid(p, s, "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"))
			continue
		}
		if addr := s[:strings.Index(s, "/")]; addr != ip.String() {
			errs = append(errs, invalid(p, s, fmt.Sprintf("must be in canonical form (%q)", ip.String()+s[len(addr):])))
		}
		if seen[s] {
			errs = append(errs, duplicate(p, s))
		}
		seen[s] = true
	}
	return errs
}

package main

// What sharing adds to a ResourceSlice, validated as the API server does
// (pkg/apis/resource/validation, Kubernetes 1.35-1.37): counter sets
// (spec.sharedCounters), what a device consumes of them
// (devices[].consumesCounters, compatibilityGroups) and the request policy
// of a capacity; and quantities stored in the API server's canonical form
// ("1.5Gi" is written back as "1536Mi", "0.5" as "500m"), as
// resource.Quantity marshals them.

import (
	"fmt"
	"math/big"
	"regexp"
)

const (
	maxCounterSets           = 8  // ResourceSliceMaxCounterSets
	maxCountersPerSet        = 32 // ResourceSliceMaxCountersPerCounterSet
	maxConsumptionsPerDevice = 2  // ResourceSliceMaxDeviceCounterConsumptionsPerDevice
	maxCompatibilityGroups   = 2
	maxValidValues           = 10 // CapacityRequestPolicyDiscreteMaxOptions
)

// ---------------------------------------------------------------------------
// quantities

var (
	quantityPartsRe = regexp.MustCompile(`^([+-]?)([0-9]*\.?[0-9]*)(.*)$`)
	exponentRe      = regexp.MustCompile(`^[+-]?[0-9]+$`)
)

type quantity struct {
	v      *big.Rat
	format string // "BinarySI", "DecimalSI", "DecimalExponent"
}

func parseQuantity(s string) (quantity, bool) {
	m := quantityPartsRe.FindStringSubmatch(s)
	if m == nil || m[2] == "" || m[2] == "." {
		return quantity{}, false
	}
	num, ok := new(big.Rat).SetString(m[2])
	if !ok {
		return quantity{}, false
	}
	if m[1] == "-" {
		num.Neg(num)
	}
	suffix := m[3]
	bin := map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
	dec := map[string]int{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
	if sh, ok := bin[suffix]; ok {
		return quantity{num.Mul(num, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), sh))), "BinarySI"}, true
	}
	if e, ok := dec[suffix]; ok {
		return quantity{num.Mul(num, pow10(e)), "DecimalSI"}, true
	}
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		var e int
		if _, err := fmt.Sscanf(suffix[1:], "%d", &e); err == nil && e > -1000 && e < 1000 &&
			exponentRe.MatchString(suffix[1:]) {
			return quantity{num.Mul(num, pow10(e)), "DecimalExponent"}, true
		}
	}
	return quantity{}, false
}

func pow10(e int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil)
	if e < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

func abs(e int) int {
	if e < 0 {
		return -e
	}
	return e
}

// canonical writes q as resource.Quantity's String(): rounded up to the
// nano; a binary quantity that is a whole number of at least 1024 as the
// largest power of 1024 that divides it, anything else in the decimal form
// (the smallest exponent, a multiple of 3, that leaves a whole mantissa).
func (q quantity) canonical() string {
	nano := new(big.Rat).Mul(q.v, pow10(9))
	n := new(big.Int).Quo(nano.Num(), nano.Denom())
	if new(big.Rat).SetInt(n).Cmp(nano) < 0 {
		n.Add(n, big.NewInt(1)) // rounded up
	}
	sign := ""
	if n.Sign() < 0 {
		sign = "-"
		n.Neg(n)
	}
	one := pow10(9).Num()
	if q.format == "BinarySI" && new(big.Int).Mod(n, one).Sign() == 0 {
		whole := new(big.Int).Quo(n, one)
		if whole.Cmp(big.NewInt(1024)) >= 0 {
			suffixes := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
			i := 0
			k := big.NewInt(1024)
			for i < 6 && new(big.Int).Mod(whole, k).Sign() == 0 {
				whole.Quo(whole, k)
				i++
			}
			return sign + whole.String() + suffixes[i]
		}
	}
	// decimal: mantissa * 10^(3k - 9), k as large as keeps it whole
	exp := -9
	for exp < 18 && n.Sign() != 0 && new(big.Int).Mod(n, big.NewInt(1000)).Sign() == 0 {
		n.Quo(n, big.NewInt(1000))
		exp += 3
	}
	if n.Sign() == 0 {
		return "0"
	}
	if q.format == "DecimalExponent" {
		if exp == 0 {
			return sign + n.String()
		}
		return fmt.Sprintf("%s%se%d", sign, n.String(), exp)
	}
	suffix := map[int]string{-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
	return sign + n.String() + suffix[exp]
}

// canonicalize rewrites the quantity string at m[key] in canonical form.
// canonicalQ: v in its canonical form if it is a quantity, else v.
func canonicalQ(v interface{}) interface{} {
	if s, ok := v.(string); ok {
		if q, ok := parseQuantity(s); ok {
			return q.canonical()
		}
	}
	return v
}

func canonicalize(m map[string]interface{}, key string) {
	if v, ok := m[key]; ok {
		m[key] = canonicalQ(v)
	}
}

// canonicalSlice: every quantity of a slice as the API server stores it.
func canonicalSlice(obj M) {
	spec := getMap(obj, "spec")
	devs, _ := spec["devices"].([]interface{})
	for _, d := range devs {
		dm, _ := d.(map[string]interface{})
		if b, ok := dm["basic"].(map[string]interface{}); ok {
			dm = b
		}
		caps, _ := dm["capacity"].(map[string]interface{})
		for _, c := range caps {
			cm, _ := c.(map[string]interface{})
			if cm == nil {
				continue
			}
			canonicalize(cm, "value")
			p, _ := cm["requestPolicy"].(map[string]interface{})
			if p != nil {
				canonicalize(p, "default")
				vals, _ := p["validValues"].([]interface{})
				for i, v := range vals {
					vals[i] = canonicalQ(v)
				}
				if r, ok := p["validRange"].(map[string]interface{}); ok {
					canonicalize(r, "min")
					canonicalize(r, "max")
					canonicalize(r, "step")
				}
			}
		}
		cs, _ := dm["consumesCounters"].([]interface{})
		for _, c := range cs {
			canonicalCounters(getMap(asMap(c), "counters"))
		}
	}
	sets, _ := spec["sharedCounters"].([]interface{})
	for _, s := range sets {
		canonicalCounters(getMap(asMap(s), "counters"))
	}
}

func canonicalCounters(counters M) {
	for _, c := range counters {
		if cm, ok := c.(map[string]interface{}); ok {
			canonicalize(cm, "value")
		}
	}
}

// ---------------------------------------------------------------------------
// validation

// validateCounters: {name: {value}}, 1..32, names DNS labels.
func validateCounters(v interface{}, path string) []fieldErr {
	m, ok := v.(map[string]interface{})
	if !ok || len(m) == 0 {
		return []fieldErr{required(path, "")}
	}
	if len(m) > maxCountersPerSet {
		return []fieldErr{tooMany(path, len(m), maxCountersPerSet)}
	}
	var errs []fieldErr
	for _, k := range sortedKeys(m) {
		kp := path + "[" + k + "]"
		errs = append(errs, dnsLabel(k, path)...)
		cm, _ := m[k].(map[string]interface{})
		if cm == nil || cm["value"] == nil {
			errs = append(errs, required(kp+".value", ""))
		} else if q, ok := parseQuantity(fmt.Sprint(cm["value"])); !ok {
			errs = append(errs, badQuantity(kp+".value", cm["value"]))
		} else if q.v.Sign() < 0 {
			errs = append(errs, invalid(kp+".value", cm["value"], "must be greater than or equal to 0"))
		}
	}
	return errs
}

func validateSharedCounters(v interface{}, path string) []fieldErr {
	sets, ok := v.([]interface{})
	if !ok {
		return []fieldErr{invalid(path, v, "must be a list")}
	}
	if len(sets) > maxCounterSets {
		return []fieldErr{tooMany(path, len(sets), maxCounterSets)}
	}
	var errs []fieldErr
	seen := map[string]bool{}
	for i, s := range sets {
		p := fmt.Sprintf("%s[%d]", path, i)
		sm := asMap(s)
		errs = append(errs, uniqueName(getString(sm, "name"), p+".name", seen, dnsLabel)...)
		errs = append(errs, validateCounters(sm["counters"], p+".counters")...)
	}
	return errs
}

func validateConsumesCounters(v interface{}, path string) []fieldErr {
	cs, ok := v.([]interface{})
	if v == nil {
		return nil
	}
	if !ok {
		return []fieldErr{invalid(path, v, "must be a list")}
	}
	if len(cs) > maxConsumptionsPerDevice {
		return []fieldErr{tooMany(path, len(cs), maxConsumptionsPerDevice)}
	}
	var errs []fieldErr
	seen := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("%s[%d]", path, i)
		cm := asMap(c)
		errs = append(errs, uniqueName(getString(cm, "counterSet"), p+".counterSet", seen, dnsLabel)...)
		errs = append(errs, validateCounters(cm["counters"], p+".counters")...)
		groups, _ := cm["compatibilityGroups"].([]interface{})
		if len(groups) > maxCompatibilityGroups {
			errs = append(errs, tooMany(p+".compatibilityGroups", len(groups), maxCompatibilityGroups))
			continue
		}
		gseen := map[string]bool{}
		for j, g := range groups {
			gs, _ := g.(string)
			gp := fmt.Sprintf("%s.compatibilityGroups[%d]", p, j)
			errs = append(errs, dnsLabel(gs, gp)...)
			if gseen[gs] {
				errs = append(errs, duplicate(gp, gs))
			}
			gseen[gs] = true
		}
	}
	return errs
}

// policyAmount: a quantity >= 0 that is a whole number of milli-units.
func policyAmount(v interface{}, path string) (*big.Rat, []fieldErr) {
	q, ok := parseQuantity(fmt.Sprint(v))
	if !ok {
		return nil, []fieldErr{badQuantity(path, v)}
	}
	if q.v.Sign() < 0 {
		return nil, []fieldErr{invalid(path, v, "must be greater than or equal to 0")}
	}
	if !new(big.Rat).Mul(q.v, pow10(3)).IsInt() {
		return nil, []fieldErr{invalid(path, v, "value cannot be represented as a milli value")}
	}
	return q.v, nil
}

func wholeSteps(v, from, step *big.Rat) bool {
	d := new(big.Rat).Sub(v, from)
	return new(big.Rat).Quo(d, step).IsInt()
}

func validateRequestPolicy(capValue interface{}, v interface{}, path string) []fieldErr {
	pm, ok := v.(map[string]interface{})
	if !ok {
		return []fieldErr{invalid(path, v, "must be an object")}
	}
	capq, ok := parseQuantity(fmt.Sprint(capValue))
	if !ok {
		return nil // the value's own error is reported
	}
	capV := capq.v
	vals, hasVals := pm["validValues"].([]interface{})
	rng, hasRange := pm["validRange"].(map[string]interface{})
	if hasVals && hasRange {
		return []fieldErr{forbidden(path, "exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time")}
	}
	def := pm["default"]
	switch {
	case hasVals && len(vals) > 0:
		if len(vals) > maxValidValues {
			return []fieldErr{tooMany(path+".validValues", len(vals), maxValidValues)}
		}
		if def == nil {
			return []fieldErr{required(path+".default", "required when validValues is defined")}
		}
		d, errs := policyAmount(def, path+".default")
		if errs != nil {
			return errs
		}
		var prev *big.Rat
		found := false
		for i, x := range vals {
			xp := fmt.Sprintf("%s.validValues[%d]", path, i)
			q, errs := policyAmount(x, xp)
			if errs != nil {
				return errs
			}
			if prev != nil && q.Cmp(prev) < 0 {
				return []fieldErr{invalid(xp, x, "values must be sorted in ascending order")}
			}
			if prev != nil && q.Cmp(prev) == 0 {
				return []fieldErr{duplicate(xp, x)}
			}
			if q.Cmp(capV) > 0 {
				return []fieldErr{invalid(xp, x, fmt.Sprintf("option is larger than capacity value: %v", capValue))}
			}
			found = found || q.Cmp(d) == 0
			prev = q
		}
		if !found {
			return []fieldErr{invalid(path+".validValues", def, "default value is not valid according to the requestPolicy")}
		}
	case hasRange:
		if def == nil {
			return []fieldErr{required(path+".default", "required when validRange is defined")}
		}
		if rng["min"] == nil {
			return []fieldErr{required(path+".validRange.min", "required when validRange is defined")}
		}
		d, errs := policyAmount(def, path+".default")
		if errs != nil {
			return errs
		}
		min, errs := policyAmount(rng["min"], path+".validRange.min")
		if errs != nil {
			return errs
		}
		if min.Cmp(capV) > 0 {
			return []fieldErr{invalid(path+".validRange.min", rng["min"], fmt.Sprintf("must be less than or equal to capacity value: %v", capValue))}
		}
		if d.Cmp(min) < 0 {
			return []fieldErr{invalid(path+".validRange.default", def, fmt.Sprintf("must be greater than or equal to min: %v", rng["min"]))}
		}
		max := capV
		if rng["max"] != nil {
			if max, errs = policyAmount(rng["max"], path+".validRange.max"); errs != nil {
				return errs
			}
			if min.Cmp(max) > 0 {
				return []fieldErr{invalid(path+".validRange.max", rng["max"], "min is larger than max")}
			}
			if max.Cmp(capV) > 0 {
				return []fieldErr{invalid(path+".validRange.max", rng["max"], fmt.Sprintf("must be less than or equal to capacity value: %v", capValue))}
			}
			if d.Cmp(max) > 0 {
				return []fieldErr{invalid(path+".validRange.default", def, fmt.Sprintf("must be less than or equal to max: %v", rng["max"]))}
			}
		}
		if rng["step"] != nil {
			step, errs := policyAmount(rng["step"], path+".validRange.step")
			if errs != nil {
				return errs
			}
			if step.Sign() <= 0 {
				return []fieldErr{invalid(path+".validRange.step", rng["step"], "must be positive")}
			}
			if new(big.Rat).Add(min, step).Cmp(capV) > 0 {
				return []fieldErr{invalid(path+".validRange.step", rng["step"], fmt.Sprintf("min + step must be less than or equal to capacity value: %v", capValue))}
			}
			msg := fmt.Sprintf("value is not a multiple of a given step (%v) from (%v)", rng["step"], rng["min"])
			if !wholeSteps(d, min, step) {
				return []fieldErr{invalid(path+".default", def, msg)}
			}
			if rng["max"] != nil && !wholeSteps(max, min, step) {
				return []fieldErr{invalid(path+".validRange.max", rng["max"], msg)}
			}
		}
	}
	return nil
}

// validateSharing: a device's consumptions and request policies.
func validateSharing(dm map[string]interface{}, path string) []fieldErr {
	errs := validateConsumesCounters(dm["consumesCounters"], path+".consumesCounters")
	caps, _ := dm["capacity"].(map[string]interface{})
	multi, _ := asBool(dm["allowMultipleAllocations"])
	for _, k := range sortedKeys(caps) {
		cm, _ := caps[k].(map[string]interface{})
		if cm == nil || cm["requestPolicy"] == nil || !multi {
			continue // without allowMultipleAllocations: Forbidden (validateDevice)
		}
		kp := path + ".capacity[" + truncateKey(k, attributeCapacityKeyTruncateLen) + "].requestPolicy"
		errs = append(errs, validateRequestPolicy(cm["value"], cm["requestPolicy"], kp)...)
	}
	return errs
}

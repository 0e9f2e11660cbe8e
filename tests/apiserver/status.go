package main

// Errors as the API server shapes them: a meta/v1 Status with status
// "Failure", a message, a reason, details {name, group, kind[, causes]} and
// the HTTP code; and field errors (k8s.io/apimachinery's field.Error) whose
// text is "<field>: <Type>: <value>: <detail>".

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// apiError is one error answer.
type apiError struct {
	code    int
	reason  string
	message string
	details M // nil: no details
	header  map[string]string
}

func (e *apiError) Error() string { return e.message }

func (e *apiError) status() M {
	m := M{"kind": "Status", "apiVersion": "v1", "metadata": M{}, "status": "Failure",
		"message": e.message, "reason": e.reason, "code": e.code}
	if e.details != nil {
		m["details"] = e.details
	}
	return m
}

// qualified is "resourceslices.resource.k8s.io" (or "nodes" for the core
// group), the resource as errors name it.
func qualified(rd *resourceDef) string {
	if rd.group == "" {
		return rd.name
	}
	return rd.name + "." + rd.group
}

func details(rd *resourceDef, name string) M {
	d := M{"group": rd.group, "kind": rd.name}
	if name != "" {
		d["name"] = name
	}
	return d
}

func errNotFound(rd *resourceDef, name string) *apiError {
	return &apiError{code: 404, reason: "NotFound", details: details(rd, name),
		message: fmt.Sprintf("%s %q not found", qualified(rd), name)}
}

func errAlreadyExists(rd *resourceDef, name string) *apiError {
	return &apiError{code: 409, reason: "AlreadyExists", details: details(rd, name),
		message: fmt.Sprintf("%s %q already exists", qualified(rd), name)}
}

const conflictText = "the object has been modified; please apply your changes to the latest version and try again"

func errConflict(rd *resourceDef, name, why string) *apiError {
	return &apiError{code: 409, reason: "Conflict", details: details(rd, name),
		message: fmt.Sprintf("Operation cannot be fulfilled on %s %q: %s", qualified(rd), name, why)}
}

func errBadRequest(format string, args ...interface{}) *apiError {
	return &apiError{code: 400, reason: "BadRequest", message: fmt.Sprintf(format, args...)}
}

func errUnauthorized() *apiError {
	return &apiError{code: 401, reason: "Unauthorized", message: "Unauthorized"}
}

// errForbidden has RBAC's words: `resourceslices.resource.k8s.io "x" is
// forbidden: User "u" cannot delete resource "resourceslices" in API group
// "resource.k8s.io" at the cluster scope` (or `in the namespace "ns"`).
func errForbidden(rd *resourceDef, sub, name, ns, user, verb string) *apiError {
	what := qualified(rd)
	if name != "" {
		what += fmt.Sprintf(" %q", name)
	}
	res := rd.name
	if sub != "" {
		res += "/" + sub
	}
	scope := "at the cluster scope"
	if ns != "" {
		scope = fmt.Sprintf("in the namespace %q", ns)
	}
	return &apiError{code: 403, reason: "Forbidden", details: details(rd, name),
		message: fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q %s",
			what, user, verb, res, rd.group, scope)}
}

func errGone(format string, args ...interface{}) *apiError {
	return &apiError{code: 410, reason: "Expired", message: fmt.Sprintf(format, args...)}
}

func errMethodNotAllowed(verb, what string) *apiError {
	return &apiError{code: 405, reason: "MethodNotAllowed",
		message: fmt.Sprintf("%s is not supported on resources of kind %q", verb, what)}
}

func errUnsupportedMediaType(ct string, accepted []string) *apiError {
	return &apiError{code: 415, reason: "UnsupportedMediaType",
		message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s",
			strings.Join(accepted, ", "))}
}

// errInjected is the answer of a "fail N CODE" rule: the reason and words
// the API server uses for that code.
func errInjected(code int) *apiError {
	e := &apiError{code: code}
	switch code {
	case 400:
		e.reason, e.message = "BadRequest", "injected bad request"
	case 401:
		e.reason, e.message = "Unauthorized", "Unauthorized"
	case 403:
		e.reason, e.message = "Forbidden", "forbidden: injected by the test"
	case 404:
		e.reason, e.message = "NotFound", "the server could not find the requested resource"
	case 409:
		e.reason, e.message = "Conflict", "Operation cannot be fulfilled: "+conflictText
	case 410:
		e.reason, e.message = "Expired", "too old resource version"
	case 429:
		e.reason, e.message = "TooManyRequests", "Too many requests, please try again later."
		e.details = M{"retryAfterSeconds": 1}
		e.header = map[string]string{"Retry-After": "1"}
	case 500:
		e.reason, e.message = "InternalError", "Internal error occurred: injected failure"
		e.details = M{"causes": []M{{"message": "injected failure"}}}
	case 503:
		e.reason, e.message = "ServiceUnavailable", "The server is currently unable to handle the request"
	case 504:
		e.reason, e.message = "Timeout", "The server was unable to return a response in the time allotted, but may still be processing the request"
	default:
		e.reason, e.message = "", fmt.Sprintf("injected failure (%d)", code)
	}
	return e
}

// writeStatus answers err as a Status object.
func writeStatus(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	b, _ := json.Marshal(e.status())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.code)
	w.Write(b)
}

// ---------------------------------------------------------------------------
// field errors

type fieldErr struct {
	typ    string // FieldValueRequired, FieldValueInvalid, ...
	field  string
	value  interface{} // shown for Invalid / Duplicate / TooMany
	detail string
}

// valueText renders a bad value the way field.Error does: strings quoted,
// numbers and booleans plain, anything else as JSON.
func valueText(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case int, int64, bool:
		return fmt.Sprint(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// body is the error without its field: "Required value", `Invalid value:
// "x": detail`, "Too long: may not be more than 63 bytes", ...
func (f fieldErr) body() string {
	var s string
	switch f.typ {
	case "FieldValueRequired":
		s = "Required value"
	case "FieldValueInvalid":
		s = "Invalid value: " + valueText(f.value)
	case "FieldValueDuplicate":
		s = "Duplicate value: " + valueText(f.value)
	case "FieldValueTooLong":
		s = "Too long"
	case "FieldValueTooMany":
		s = "Too many: " + valueText(f.value)
	case "FieldValueForbidden":
		s = "Forbidden"
	case "FieldValueNotSupported":
		s = "Unsupported value: " + valueText(f.value)
	default:
		s = "Internal error"
	}
	if f.detail != "" {
		s += ": " + f.detail
	}
	return s
}

func required(field, detail string) fieldErr {
	return fieldErr{typ: "FieldValueRequired", field: field, detail: detail}
}

func invalid(field string, value interface{}, detail string) fieldErr {
	return fieldErr{typ: "FieldValueInvalid", field: field, value: value, detail: detail}
}

func tooLong(field string, max int) fieldErr {
	return fieldErr{typ: "FieldValueTooLong", field: field, detail: fmt.Sprintf("may not be more than %d bytes", max)}
}

func tooMany(field string, n, max int) fieldErr {
	return fieldErr{typ: "FieldValueTooMany", field: field, value: n, detail: fmt.Sprintf("must have at most %d items", max)}
}

func duplicate(field string, value interface{}) fieldErr {
	return fieldErr{typ: "FieldValueDuplicate", field: field, value: value}
}

func forbidden(field, detail string) fieldErr {
	return fieldErr{typ: "FieldValueForbidden", field: field, detail: detail}
}

// errInvalid is the 422 answer: `ResourceSlice.resource.k8s.io "x" is
// invalid: [spec.driver: Required value, ...]` with one cause per error.
func errInvalid(rd *resourceDef, name string, errs []fieldErr) *apiError {
	texts := make([]string, 0, len(errs))
	causes := make([]M, 0, len(errs))
	for _, f := range errs {
		texts = append(texts, f.field+": "+f.body())
		causes = append(causes, M{"reason": f.typ, "message": f.body(), "field": f.field})
	}
	all := texts[0]
	if len(texts) > 1 {
		all = "[" + strings.Join(texts, ", ") + "]"
	}
	kind := rd.kind
	if rd.group != "" {
		kind += "." + rd.group
	}
	return &apiError{code: 422, reason: "Invalid",
		details: M{"name": name, "group": rd.group, "kind": rd.kind, "causes": causes},
		message: fmt.Sprintf("%s %q is invalid: %s", kind, name, all)}
}

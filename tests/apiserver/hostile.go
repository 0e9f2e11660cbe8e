package main

// pad-claim NS NAME BYTES large|dense: the claim grows as a hostile or
// broken API server would answer it, past what its own validation takes:
// "large" adds an annotation of BYTES characters, "dense" a status field
// of about BYTES bytes of tiny values ([0,0,...]: the most JSON values
// per byte). For the driver's bounds on what it reads.

import (
	"strconv"
	"strings"
)

func (s *server) cmdPadClaim(cmd *command) {
	if len(cmd.args) != 4 || (cmd.args[3] != "large" && cmd.args[3] != "dense") {
		cmd.fail("Usage", "pad-claim NS NAME BYTES large|dense")
		return
	}
	n, err := strconv.Atoi(cmd.args[2])
	if err != nil || n <= 0 || n > 64<<20 {
		cmd.fail("Usage", "pad-claim: BYTES from 1 to 64 MiB")
		return
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	o := s.store.objs[resClaims][key(cmd.args[0], cmd.args[1])]
	if o == nil {
		cmd.fail("NotFound", "no claim %s/%s", cmd.args[0], cmd.args[1])
		return
	}
	if cmd.args[3] == "large" {
		ensureMap(getMap(o, "metadata"), "annotations")["kdp.test/pad"] = strings.Repeat("x", n)
	} else {
		zeros := make([]interface{}, n/2)
		for i := range zeros {
			zeros[i] = jsonInt(0)
		}
		ensureMap(o, "status")["pad"] = zeros
	}
	cmd.reply(M{"ok": true})
}

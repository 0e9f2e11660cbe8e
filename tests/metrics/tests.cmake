# The metrics and health endpoint end to end (tests/metrics/test_metrics.py):
# the page read by Prometheus's own text parser (kdp-promparse, Go, built
# offline against Debian's golang-github-prometheus-common-dev) and scraped
# by Debian's prometheus server. Included by tests/CMakeLists.txt, in its
# scope.
if(KDP_INTEROP)
  set(KDP_PROMPARSE_DIR ${CMAKE_BINARY_DIR}/metrics-go)
  add_custom_command(
    OUTPUT ${KDP_PROMPARSE_DIR}/kdp-promparse
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/metrics/build.sh ${KDP_PROMPARSE_DIR}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/metrics/promparse.go
            ${CMAKE_CURRENT_SOURCE_DIR}/metrics/build.sh
    COMMENT "go build: kdp-promparse (Prometheus's text parser; GOPATH mode, offline)")
  add_custom_target(promparse ALL DEPENDS ${KDP_PROMPARSE_DIR}/kdp-promparse)
  add_test(NAME metrics_e2e
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/metrics/test_metrics.py)
  set_tests_properties(metrics_e2e PROPERTIES TIMEOUT 600 LABELS integration
    ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin;KDP_PROMPARSE=${KDP_PROMPARSE_DIR}/kdp-promparse")
endif()
